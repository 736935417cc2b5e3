//! The Prometheus families, registered once per gateway (not in the global registry, so several
//! gateways can live in one test process). Labels never carry task or request ids: cardinality is
//! bounded by routes × configured agents × status codes. Beside the `a2a_gateway_` families, the
//! process collector exports the standard unprefixed `process_*` series.

use std::sync::OnceLock;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::protocol::task::Status;

/// Every family the gateway exports, each under `a2a_gateway_`; shared by all workers.
pub struct Metrics {
    registry: Registry,
    /// `requests_total`: requests answered, by route, agent, client and status code.
    pub requests: IntCounterVec,
    /// `a2a_requests_total`: official A2A calls answered, by agent, method (the 1.0 proto's
    /// name, whatever version the client speaks), the client's binding, its version (`1.0`,
    /// `0.3`), outcome (`ok` or the ErrorInfo reason) and client (as on `requests_total`).
    pub a2a_requests: IntCounterVec,
    /// `request_duration_seconds`: time to answer a request (to response headers), by route,
    /// agent and client.
    pub request_seconds: HistogramVec,
    /// `auth_failures_total`: requests refused at the edge, by reason (missing, invalid,
    /// expired, unavailable, forbidden, not_owner).
    pub auth_failures: IntCounterVec,
    /// `jwks_fetches_total{issuer,outcome}`: fetches of an `[[auth.oidc]]` issuer's keys, by
    /// its name and outcome (`ok`; `error`: unreachable, too slow, an error status; `invalid`:
    /// no usable discovery document or key set).
    pub jwks_fetches: IntCounterVec,
    /// `jwks_keys{issuer}`: the usable keys held for an `[[auth.oidc]]` issuer.
    pub jwks_keys: IntGaugeVec,
    /// `streams_refused_total`: streams refused because the client holds `max_streams`.
    pub streams_refused: IntCounterVec,
    /// `config_reloads_total`: reloads (SIGHUP), by result (`applied`, `refused`).
    pub config_reloads: IntCounterVec,
    /// `rate_limited_total`: requests refused with 429 RATE_LIMITED, by client.
    pub rate_limited: IntCounterVec,
    /// `agent_in_flight`: requests to each agent in flight on this replica.
    pub agent_in_flight: IntGaugeVec,
    /// `agent_busy_total`: requests refused with 503 AGENT_BUSY (the agent's `max_in_flight`).
    pub agent_busy: IntCounterVec,
    /// `agent_ejections_total`: ejections of each agent (a failed probe's included).
    pub agent_ejections: IntCounterVec,
    /// `agent_ejected`: 1 while the agent is ejected (or being probed), 0 otherwise.
    pub agent_ejected: IntGaugeVec,
    /// `upstream_duration_seconds`: time for an agent to answer the gateway (to response headers).
    pub upstream_seconds: HistogramVec,
    /// `validation_failures_total`: task inputs refused by the card's input_schema.
    pub validation_failures: IntCounterVec,
    /// `protocol_violations_total`: agent responses that broke A2A 1.0, by kind and conformance
    /// mode.
    pub protocol_violations: IntCounterVec,
    /// `card_fetches_total`: agent card fetches, by result.
    pub card_fetches: IntCounterVec,
    /// `card_refusals_total`: fetched cards refused, by reason (`invalid`: not a valid A2A 1.0
    /// card, or its schemas do not compile; `budget`: over the card size or schema budget).
    pub card_refusals: IntCounterVec,
    /// `card_age_seconds`: seconds since the serving card was fetched or revalidated.
    pub card_age_seconds: IntGaugeVec,
    /// `task_transitions_total`: state changes the ledger accepted (`from=none` for a first
    /// sighting).
    pub transitions: IntCounterVec,
    /// `transitions_refused_total`: task updates the state machine refused, by reason.
    pub refused: IntCounterVec,
    /// `tasks`: tasks in the ledger, by state.
    pub tasks: IntGaugeVec,
    /// `idempotency_keys_total`: creates sent with an `Idempotency-Key`, by what the key gave
    /// (claimed, replayed, in_progress, reused).
    pub idempotency_keys: IntCounterVec,
    /// `late_answers_total`: creates that timed out, by what became of the agent's answer
    /// (recorded: it came late and went through; none: it never came; dropped: not awaited).
    pub late_answers: IntCounterVec,
    /// `pending_records_total`: creates the agent accepted while the ledger could not record
    /// them (answered 202 with `x-a2a-ledger: pending`), by what became of them (recorded:
    /// recorded in the background once the ledger answered; lost: not within
    /// `late_answer_secs`; dropped: too many awaited).
    pub pending_records: IntCounterVec,
    /// `telemetry_spans_total`: finished spans, by what became of them (exported; failed: the
    /// collector refused or missed the export; dropped: the export queue was full).
    pub telemetry_spans: IntCounterVec,
    /// `ledger_evictions_total`: tasks a full in-process ledger evicted before their retention
    /// ended, by reason (final: a final task, the oldest first; stale: a live task unchanged
    /// for the retention).
    pub ledger_evictions: IntCounterVec,
    /// `reconciles_total`: the reconciler's checks of quiet tasks, by agent and outcome
    /// (changed, unchanged, final, error).
    pub reconciles: IntCounterVec,
    /// `notifications_ingested_total`: push notifications accepted from agents.
    pub notifications_ingested: IntCounterVec,
    /// `artifacts_truncated_total`: official A2A artifacts the ledger cut (or dropped) to its
    /// `[a2a] max_artifact_bytes_per_task`, each time a Task it was given had one over, by
    /// agent.
    pub artifacts_truncated: IntCounterVec,
    /// `notifications_refused_total`: push notifications refused, by reason.
    pub notifications_refused: IntCounterVec,
    /// `webhook_deliveries_total`: webhook delivery outcomes, by subscriber.
    pub webhook_deliveries: IntCounterVec,
    /// `webhook_attempts_total`: webhook HTTP attempts, by subscriber and result class.
    pub webhook_attempts: IntCounterVec,
    /// `webhook_delivery_seconds`: from a change being queued to its delivery, retries included.
    pub webhook_latency: HistogramVec,
    /// `webhook_reclaimed_total`: deliveries taken over from a worker presumed dead.
    pub webhook_reclaimed: IntCounter,
    /// `webhook_queue_depth`: messages waiting, in flight or scheduled for retry.
    pub webhook_queued: IntGauge,
    /// `webhook_retry_scheduled`: subscriber/task lanes waiting for a retry.
    pub webhook_retrying: IntGauge,
    /// `webhook_dead_letters`: dead letters held.
    pub webhook_dead: IntGauge,
    /// `webhook_subscribers_disabled`: subscribers disabled by a 410 Gone until re-enabled.
    pub webhook_disabled: IntGauge,
    /// `stream_subscribers`: clients subscribed to task event streams.
    pub stream_subscribers: IntGauge,
    /// `stream_upstreams`: task streams open towards agents (one per task per replica).
    pub stream_upstreams: IntGauge,
    /// `stream_events_in_total`: events received from agents' task streams (pings excluded).
    pub stream_events_in: IntCounter,
    /// `stream_events_out_total`: events written to subscribers, every copy counted.
    pub stream_events_out: IntCounter,
    /// `stream_replays_total`: subscriptions that resumed with a Last-Event-ID.
    pub stream_replays: IntCounter,
    /// `stream_slow_consumer_disconnects_total`: subscribers cut for falling too far behind.
    pub stream_slow_consumers: IntCounter,
    /// `stream_upstream_reconnects_total`: agent streams reconnected after dropping while the task
    /// was live.
    pub stream_upstream_reconnects: IntCounter,
    /// `stream_upstream_errors_total`: task streams given up because the agent's stream kept
    /// breaking the event-stream rules (each ended with `event: upstream_error`), by agent.
    pub stream_upstream_errors: IntCounterVec,
    /// `stream_fanout_seconds`: from an agent's event reaching the gateway to its write to a
    /// subscriber.
    pub stream_fanout_seconds: Histogram,
    /// `stream_buffered_bytes`: bytes this replica's task streams hold for replay.
    pub stream_buffered_bytes: IntGauge,
    /// `tls_handshakes_total`: inbound TLS connections by how their start ended (ok, failed,
    /// timeout, closed); refused client certificates are `failed`.
    pub tls_handshakes: IntCounterVec,
    /// `tls_handshake_failures_total`: inbound TLS handshakes that failed, by reason (see
    /// `tls::Refused::reason`).
    pub tls_handshake_failures: IntCounterVec,
    /// `connections_open{transport}`: client connections open on this replica, by how they
    /// are served (see [`Transport`]); resolved once, a connection costs one atomic add.
    connections: [IntGauge; 3],
    /// `transitions`' series by (from, to), each resolved on first use (see
    /// [`Metrics::transition`]).
    transition_series: [[OnceLock<IntCounter>; Status::ALL.len()]; Status::ALL.len() + 1],
    /// The Redis families, once registered (see [`Metrics::redis`]).
    redis: OnceLock<RedisMetrics>,
}

/// How an open client connection is served: the `transport` label of `connections_open`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Plaintext, served by hyper (HTTP/1.1 or h2c); also a plaintext connection not yet
    /// past its first bytes.
    Http,
    /// Plaintext task-stream subscribers on the lean path (`http/lean.rs`).
    Lean,
    /// TLS, from accept (the handshake included) to close.
    Tls,
}

impl Transport {
    const ALL: [Transport; 3] = [Transport::Http, Transport::Lean, Transport::Tls];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Lean => "lean",
            Transport::Tls => "tls",
        }
    }
}

/// One open connection in `connections_open`: counted from its creation to its drop, under
/// the transport it is served by now.
pub struct OpenConnection {
    gauge: IntGauge,
}

impl OpenConnection {
    /// Count it under `transport` from now on (a plaintext connection that turns out to be a
    /// lean-path stream).
    pub fn serve_as(&mut self, metrics: &Metrics, transport: Transport) {
        let next = metrics.connections[transport as usize].clone();
        next.inc();
        self.gauge.dec();
        self.gauge = next;
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// The Redis families, registered only by a gateway that has a `[redis]` table (a gateway on
/// the in-process store has no Redis to be up or down). Cheap to clone: handles to the same
/// series.
#[derive(Clone)]
pub struct RedisMetrics {
    /// `redis_up`: 1 while the store is connected and not marked down (calls are expected to
    /// succeed), 0 otherwise: not connected yet, marked down after a failed call, too few
    /// replicas for `wait_replicas`, or refused for good.
    pub up: IntGauge,
    /// `redis_command_duration_seconds`: one command or one pipeline, sent to its answer.
    pub command_seconds: Histogram,
    /// `redis_reconnects_total`: times the store was marked up again after being marked down
    /// (Redis answered again after a failure).
    pub reconnects: IntCounter,
    /// `store_errors_total{kind}`: failed store calls by kind (`store::Failure`).
    pub store_errors: IntCounterVec,
    /// Its series, each resolved once (and so exported at 0 from the start: an alert's rate
    /// has a series before the first failure), in the order of [`STORE_ERROR_KINDS`].
    pub errors: [IntCounter; 4],
}

/// The `kind` labels of `store_errors_total`, in the order of `store::Failure::ALL` (kept
/// here as text: the store reports into these families, and metrics imports nothing above it).
pub const STORE_ERROR_KINDS: [&str; 4] = ["oom", "readonly", "timeout", "other"];

/// From queueing to a subscriber's 2xx: milliseconds when all is well, hours through retries.
const DELIVERY_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
    7200.0, 36000.0, 86400.0,
];

const LATENCY_BUCKETS: &[f64] = &[
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
];

fn n(name: &str) -> String {
    format!("a2a_gateway_{name}")
}

impl Metrics {
    /// `task_transitions_total{from,to}` (`from` `None`: a first sighting), resolved once per
    /// pair: every create and every status change counts one, and a label lookup is a hash,
    /// a lock and two reference counts that every worker would contend for.
    pub fn transition(&self, from: Option<Status>, to: Status) -> &IntCounter {
        let row = from.map_or(0, |f| f.index() + 1);
        self.transition_series[row][to.index()].get_or_init(|| {
            let from = from.map_or("none", Status::as_str);
            self.transitions.with_label_values(&[from, to.as_str()])
        })
    }

    /// Create and register every family (and `build_info`) in a registry of this gateway's own.
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
                let c = IntCounterVec::new(Opts::new(n(name), help), labels)?;
                registry.register(Box::new(c.clone()))?;
                Ok(c)
            };
        let gauge =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntGaugeVec, prometheus::Error> {
                let g = IntGaugeVec::new(Opts::new(n(name), help), labels)?;
                registry.register(Box::new(g.clone()))?;
                Ok(g)
            };
        let histogram =
            |name: &str, help: &str, labels: &[&str]| -> Result<HistogramVec, prometheus::Error> {
                let h = HistogramVec::new(
                    HistogramOpts::new(n(name), help).buckets(LATENCY_BUCKETS.to_vec()),
                    labels,
                )?;
                registry.register(Box::new(h.clone()))?;
                Ok(h)
            };
        let m = Metrics {
            registry: registry.clone(),
            requests: counter(
                "requests_total",
                "Requests answered, by route, agent, client and status code.",
                &["route", "agent", "client", "status"],
            )?,
            a2a_requests: counter(
                "a2a_requests_total",
                "Official A2A calls answered, by agent, method, the client's binding and version, outcome (ok or the error's reason) and client (a configured client's name, jwt for unbound tokens, anonymous).",
                &["agent", "method", "binding", "version", "outcome", "client"],
            )?,
            request_seconds: histogram(
                "request_duration_seconds",
                "Time to answer a request (to response headers).",
                &["route", "agent", "client"],
            )?,
            auth_failures: counter(
                "auth_failures_total",
                "Requests refused at the edge, by reason: missing, invalid or expired credentials, a token that cannot be checked while its identity provider is out of reach (unavailable), a right or agent the client lacks (forbidden), a task it does not own (not_owner).",
                &["reason"],
            )?,
            jwks_fetches: counter(
                "jwks_fetches_total",
                "Fetches of an [[auth.oidc]] issuer's signing keys (discovery, then its jwks_uri), by issuer (its name) and outcome: ok, error (unreachable, too slow, an error status), invalid (no usable document or key).",
                &["issuer", "outcome"],
            )?,
            jwks_keys: gauge(
                "jwks_keys",
                "Usable signing keys held for an [[auth.oidc]] issuer (by its name).",
                &["issuer"],
            )?,
            streams_refused: counter(
                "streams_refused_total",
                "Streams refused because the client already holds its max_streams.",
                &["client"],
            )?,
            config_reloads: counter(
                "config_reloads_total",
                "Config reloads (SIGHUP), by result: applied, or refused (the old config keeps running).",
                &["result"],
            )?,
            rate_limited: counter(
                "rate_limited_total",
                "Requests refused because the client was past its rate_per_sec (429 RATE_LIMITED), on this replica.",
                &["client"],
            )?,
            agent_in_flight: gauge(
                "agent_in_flight",
                "Requests to the agent's replica (host:port) in flight on this gateway (counted against its max_in_flight).",
                &["agent", "replica"],
            )?,
            agent_busy: counter(
                "agent_busy_total",
                "Requests refused because the agent had max_in_flight requests in flight (503 AGENT_BUSY).",
                &["agent"],
            )?,
            agent_ejections: counter(
                "agent_ejections_total",
                "Times the agent's replica (host:port) was ejected after eject_after consecutive failures or a failed probe.",
                &["agent", "replica"],
            )?,
            agent_ejected: gauge(
                "agent_ejected",
                "1 while the agent's replica (host:port) is ejected (not called until a probe succeeds), 0 otherwise.",
                &["agent", "replica"],
            )?,
            upstream_seconds: histogram(
                "upstream_duration_seconds",
                "Time for an agent's replica (host:port) to answer the gateway (to response headers).",
                &["agent", "replica"],
            )?,
            validation_failures: counter(
                "validation_failures_total",
                "Task inputs refused by the card's input_schema.",
                &["agent"],
            )?,
            protocol_violations: counter(
                "protocol_violations_total",
                "Agent responses that broke the A2A 1.0 protocol, by what they were.",
                &["agent", "kind", "mode"],
            )?,
            ledger_evictions: counter(
                "ledger_evictions_total",
                "Tasks evicted from a full in-process ledger before their retention ended, by reason: final (the oldest final task) or stale (a live task unchanged for task_retention_secs).",
                &["reason"],
            )?,
            reconciles: counter(
                "reconciles_total",
                "Checks of quiet tasks by the reconciler (a GET of the task from its agent), by agent and outcome: changed, unchanged, final, error.",
                &["agent", "outcome"],
            )?,
            card_fetches: counter(
                "card_fetches_total",
                "Agent card fetches, by result.",
                &["agent", "result"],
            )?,
            card_refusals: counter(
                "card_refusals_total",
                "Fetched agent cards refused, by reason (invalid, budget); the last good card keeps serving.",
                &["agent", "reason"],
            )?,
            card_age_seconds: gauge(
                "card_age_seconds",
                "Seconds since the serving card was fetched or revalidated.",
                &["agent"],
            )?,
            transitions: counter(
                "task_transitions_total",
                "Task state changes accepted by the ledger (from=none for a first sighting).",
                &["from", "to"],
            )?,
            refused: counter(
                "transitions_refused_total",
                "Task updates refused by the state machine.",
                &["agent", "reason"],
            )?,
            tasks: gauge("tasks", "Tasks in the ledger, by state.", &["state"])?,
            idempotency_keys: counter(
                "idempotency_keys_total",
                "Creates sent with an Idempotency-Key, by outcome (claimed, replayed, in_progress, reused).",
                &["agent", "outcome"],
            )?,
            late_answers: counter(
                "late_answers_total",
                "Creates that timed out, by what became of the agent's answer (recorded, none, dropped).",
                &["agent", "outcome"],
            )?,
            pending_records: counter(
                "pending_records_total",
                "Creates accepted by their agent while the ledger was unavailable (202 with x-a2a-ledger: pending), by outcome (recorded, lost, dropped).",
                &["agent", "outcome"],
            )?,
            telemetry_spans: counter(
                "telemetry_spans_total",
                "Finished OpenTelemetry spans, by outcome (exported, failed: the collector refused or missed them, dropped: the export queue was full).",
                &["outcome"],
            )?,
            notifications_ingested: counter(
                "notifications_ingested_total",
                "Push notifications accepted from agents (a state change or refresh recorded).",
                &["agent"],
            )?,
            artifacts_truncated: counter(
                "artifacts_truncated_total",
                "Official A2A artifacts the ledger cut or dropped to [a2a] max_artifact_bytes_per_task (each marked a2a-gateway/truncated in the record), counted each time a Task it is given has one over, by agent.",
                &["agent"],
            )?,
            notifications_refused: counter(
                "notifications_refused_total",
                "Push notifications refused, by reason (unauthorized, invalid, terminal, backwards, stale, foreign_agent).",
                &["agent", "reason"],
            )?,
            webhook_deliveries: counter(
                "webhook_deliveries_total",
                "Webhook delivery outcomes by subscriber (a2a_push for every A2A push config) and agent (of an official A2A task; empty otherwise): delivered, retry, dead, disabled (a 410: the subscriber disabled, or the push config removed), parked (subscriber disabled), unconfigured (subscriber unknown to this replica; retried later), config_gone (the push config was deleted or expired with its task), newer_format (queued by a newer version; left for it), duplicate (delivered again after a takeover).",
                &["subscriber", "agent", "outcome"],
            )?,
            webhook_attempts: counter(
                "webhook_attempts_total",
                "Webhook HTTP attempts by subscriber (a2a_push for A2A push configs), agent (of an official A2A task) and result (2xx, 3xx, 4xx, 5xx, timeout, error).",
                &["subscriber", "agent", "result"],
            )?,
            webhook_latency: {
                let h = HistogramVec::new(
                    HistogramOpts::new(
                        n("webhook_delivery_seconds"),
                        "Time from a status change being queued to its delivery (retries included).",
                    )
                    .buckets(DELIVERY_BUCKETS.to_vec()),
                    &["subscriber", "agent"],
                )?;
                registry.register(Box::new(h.clone()))?;
                h
            },
            webhook_reclaimed: IntCounter::new(
                n("webhook_reclaimed_total"),
                "Deliveries taken over from a worker presumed dead (held past the visibility timeout).",
            )?,
            webhook_queued: IntGauge::new(
                n("webhook_queue_depth"),
                "Webhook messages queued (waiting, in flight or scheduled for retry).",
            )?,
            webhook_retrying: IntGauge::new(
                n("webhook_retry_scheduled"),
                "Subscriber/task lanes waiting for a retry.",
            )?,
            webhook_dead: IntGauge::new(n("webhook_dead_letters"), "Dead letters held.")?,
            webhook_disabled: IntGauge::new(
                n("webhook_subscribers_disabled"),
                "Subscribers disabled by a 410 Gone until re-enabled.",
            )?,
            stream_subscribers: IntGauge::new(
                n("stream_subscribers"),
                "Clients subscribed to task event streams.",
            )?,
            stream_upstreams: IntGauge::new(
                n("stream_upstreams"),
                "Task streams open towards agents (one per task per replica).",
            )?,
            stream_events_in: IntCounter::new(
                n("stream_events_in_total"),
                "Events received from agents' task streams (pings excluded) and published.",
            )?,
            stream_events_out: IntCounter::new(
                n("stream_events_out_total"),
                "Events written to stream subscribers (every copy counted).",
            )?,
            stream_replays: IntCounter::new(
                n("stream_replays_total"),
                "Subscriptions that resumed with a Last-Event-ID.",
            )?,
            stream_slow_consumers: IntCounter::new(
                n("stream_slow_consumer_disconnects_total"),
                "Subscribers cut for falling too far behind their stream.",
            )?,
            stream_upstream_reconnects: IntCounter::new(
                n("stream_upstream_reconnects_total"),
                "Agent task streams reconnected after they dropped while the task was live.",
            )?,
            stream_upstream_errors: counter(
                "stream_upstream_errors_total",
                "Task streams given up because the agent's stream kept breaking the event-stream rules (subscribers got event: upstream_error).",
                &["agent"],
            )?,
            stream_fanout_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    n("stream_fanout_seconds"),
                    "Time from an agent's event reaching the gateway to its write to a subscriber.",
                )
                .buckets(LATENCY_BUCKETS.to_vec()),
            )?,
            stream_buffered_bytes: IntGauge::new(
                n("stream_buffered_bytes"),
                "Bytes the task streams of this replica hold for replay (bounded by streams.max_buffer_bytes).",
            )?,
            tls_handshakes: counter(
                "tls_handshakes_total",
                "Inbound TLS connections by how their start ended: ok, failed (no common parameters, a client certificate missing or not verified), timeout (no handshake and request in time), closed (no request).",
                &["result"],
            )?,
            tls_handshake_failures: counter(
                "tls_handshake_failures_total",
                "Inbound TLS handshakes that failed, by reason: not_tls (plaintext or garbage on the TLS port), no_client_certificate (required and not sent), bad_client_certificate (sent and not verified), incompatible (no common version, cipher suite or ALPN protocol), alert (the client aborted, e.g. it does not trust the server certificate), timeout (no handshake and request within 10 s), other.",
                &["reason"],
            )?,
            connections: {
                let g = gauge(
                    "connections_open",
                    "Client connections open on this replica, by transport: http (plaintext, served by hyper, or not yet past its first bytes), lean (plaintext task streams on the lean path), tls (from accept, handshake included).",
                    &["transport"],
                )?;
                Transport::ALL.map(|t| g.with_label_values(&[t.as_str()]))
            },
            redis: OnceLock::new(),
            transition_series: Default::default(),
        };
        registry.register(Box::new(m.webhook_reclaimed.clone()))?;
        registry.register(Box::new(m.webhook_queued.clone()))?;
        registry.register(Box::new(m.webhook_retrying.clone()))?;
        registry.register(Box::new(m.webhook_dead.clone()))?;
        registry.register(Box::new(m.webhook_disabled.clone()))?;
        registry.register(Box::new(m.stream_subscribers.clone()))?;
        registry.register(Box::new(m.stream_upstreams.clone()))?;
        registry.register(Box::new(m.stream_events_in.clone()))?;
        registry.register(Box::new(m.stream_events_out.clone()))?;
        registry.register(Box::new(m.stream_replays.clone()))?;
        registry.register(Box::new(m.stream_slow_consumers.clone()))?;
        registry.register(Box::new(m.stream_upstream_reconnects.clone()))?;
        registry.register(Box::new(m.stream_fanout_seconds.clone()))?;
        registry.register(Box::new(m.stream_buffered_bytes.clone()))?;
        let build = IntGaugeVec::new(
            Opts::new(n("build_info"), "Build information; always 1."),
            &["version"],
        )?;
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        registry.register(Box::new(build))?;
        // The process: CPU, memory, open file descriptors, threads, under the standard
        // unprefixed names every Prometheus exporter uses (`process_cpu_seconds_total`,
        // `process_resident_memory_bytes`, `process_open_fds`, `process_threads`...). Read from
        // /proc at each scrape; Linux only.
        #[cfg(target_os = "linux")]
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        Ok(m)
    }

    /// Count a new client connection as open under `transport` until the handle drops.
    pub fn open_connection(&self, transport: Transport) -> OpenConnection {
        let gauge = self.connections[transport as usize].clone();
        gauge.inc();
        OpenConnection { gauge }
    }

    /// Register the Redis families (once; a second call returns the same series).
    pub fn redis(&self) -> Result<RedisMetrics, prometheus::Error> {
        if let Some(m) = self.redis.get() {
            return Ok(m.clone());
        }
        let store_errors = IntCounterVec::new(
            Opts::new(
                n("store_errors_total"),
                "Failed calls to the gateway's Redis, by kind: oom (at maxmemory, writes refused), readonly (a replica, writes refused), timeout, other.",
            ),
            &["kind"],
        )?;
        let m = RedisMetrics {
            up: IntGauge::new(
                n("redis_up"),
                "1 while the gateway's Redis is connected and not marked down (calls are expected to succeed); 0 while it is not connected yet, marked down after a failed call, short of wait_replicas, or refused.",
            )?,
            command_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    n("redis_command_duration_seconds"),
                    "Time from sending one Redis command (or one pipeline) to its answer.",
                )
                .buckets(LATENCY_BUCKETS.to_vec()),
            )?,
            reconnects: IntCounter::new(
                n("redis_reconnects_total"),
                "Times the gateway's Redis was marked up again after being marked down (it answered again after a failure).",
            )?,
            errors: STORE_ERROR_KINDS.map(|k| store_errors.with_label_values(&[k])),
            store_errors,
        };
        let m = self.redis.get_or_init(|| m).clone();
        // Only the first registration succeeds; a racing second one finds them registered.
        for c in [
            Box::new(m.up.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.command_seconds.clone()),
            Box::new(m.reconnects.clone()),
            Box::new(m.store_errors.clone()),
        ] {
            match self.registry.register(c) {
                Ok(()) | Err(prometheus::Error::AlreadyReg) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(m)
    }

    /// The text exposition of every family.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 * 1024);
        // Encoding into a Vec cannot fail on I/O; a malformed family would be a bug of ours.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(error = %e, "metrics encoding failed");
        }
        out
    }
}
