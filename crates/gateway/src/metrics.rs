//! The Prometheus families, registered once per gateway (not in the global registry, so several
//! gateways can live in one test process). Labels never carry task or request ids: cardinality is
//! bounded by routes × configured agents × status codes.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub requests: IntCounterVec,
    pub request_seconds: HistogramVec,
    pub upstream_seconds: HistogramVec,
    pub validation_failures: IntCounterVec,
    pub protocol_violations: IntCounterVec,
    pub card_fetches: IntCounterVec,
    pub card_age_seconds: IntGaugeVec,
    pub transitions: IntCounterVec,
    pub refused: IntCounterVec,
    pub tasks: IntGaugeVec,
    pub ledger_evictions: IntCounter,
    pub notifications_ingested: IntCounterVec,
    pub notifications_refused: IntCounterVec,
    pub webhook_deliveries: IntCounterVec,
    pub webhook_attempts: IntCounterVec,
    pub webhook_latency: HistogramVec,
    pub webhook_reclaimed: IntCounter,
    pub webhook_queued: IntGauge,
    pub webhook_retrying: IntGauge,
    pub webhook_dead: IntGauge,
    pub webhook_disabled: IntGauge,
    pub stream_subscribers: IntGauge,
    pub stream_upstreams: IntGauge,
    pub stream_events_in: IntCounter,
    pub stream_events_out: IntCounter,
    pub stream_replays: IntCounter,
    pub stream_slow_consumers: IntCounter,
    pub stream_upstream_reconnects: IntCounter,
    pub stream_fanout_seconds: Histogram,
    pub stream_buffered_bytes: IntGauge,
}

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
                "Requests answered, by route, agent and status code.",
                &["route", "agent", "status"],
            )?,
            request_seconds: histogram(
                "request_duration_seconds",
                "Time to answer a request (to response headers).",
                &["route", "agent"],
            )?,
            upstream_seconds: histogram(
                "upstream_duration_seconds",
                "Time for an agent to answer the gateway (to response headers).",
                &["agent"],
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
            card_fetches: counter(
                "card_fetches_total",
                "Agent card fetches, by result.",
                &["agent", "result"],
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
            notifications_ingested: counter(
                "notifications_ingested_total",
                "Push notifications accepted from agents (a state change or refresh recorded).",
                &["agent"],
            )?,
            notifications_refused: counter(
                "notifications_refused_total",
                "Push notifications refused, by reason (unauthorized, invalid, terminal, backwards, stale, foreign_agent).",
                &["agent", "reason"],
            )?,
            webhook_deliveries: counter(
                "webhook_deliveries_total",
                "Webhook delivery outcomes by subscriber: delivered, retry, dead, disabled (a 410), parked (subscriber disabled), unconfigured (subscriber unknown to this replica; retried later), duplicate (delivered again after a takeover).",
                &["subscriber", "outcome"],
            )?,
            webhook_attempts: counter(
                "webhook_attempts_total",
                "Webhook HTTP attempts by subscriber and result (2xx, 3xx, 4xx, 5xx, timeout, error).",
                &["subscriber", "result"],
            )?,
            webhook_latency: {
                let h = HistogramVec::new(
                    HistogramOpts::new(
                        n("webhook_delivery_seconds"),
                        "Time from a status change being queued to its delivery (retries included).",
                    )
                    .buckets(DELIVERY_BUCKETS.to_vec()),
                    &["subscriber"],
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
            ledger_evictions: IntCounter::new(
                n("ledger_evictions_total"),
                "Tasks evicted from a full in-process ledger before their retention ended.",
            )?,
        };
        registry.register(Box::new(m.ledger_evictions.clone()))?;
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
