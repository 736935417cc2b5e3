//! a2a-gateway: one endpoint in front of a fleet of A2A 1.0 agents.
//!
//! Layout: `protocol` is the A2A core with no I/O (types, state machine, schemas, conformance);
//! everything that touches a socket or a store sits at the edge (`registry` fetches cards,
//! `upstream` talks to agents, `ledger` records tasks behind a trait, `webhook` queues and
//! delivers status changes to subscribers, `http` serves clients).
//! [`Gateway::start`] wires them together; tests start it in-process on port 0.

#![warn(missing_docs)]

pub mod auth;
pub mod config;
pub mod http;
pub mod ledger;
pub mod limits;
pub mod metrics;
pub mod protocol;
pub mod registry;
pub mod stream;
pub mod tls;
pub mod upstream;
pub mod webhook;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use tokio::net::TcpListener;
use tokio::sync::watch;

use config::Config;
use ledger::{MemoryLedger, RedisLedger, TaskLedger};
use metrics::Metrics;
use registry::Registry;
use upstream::Upstream;
use webhook::queue::{DeliveryQueue, MemoryQueue, Outbox, RedisQueue};

/// Everything a request handler needs. One per worker thread: the shared parts are `Arc`s, the
/// upstream client (and so its connection pool) is the worker's own. Cheap to clone, for work
/// that outlives its request (a create's late answer, `http::detach`).
#[derive(Clone)]
pub struct State {
    /// The gateway's configuration, read and checked before start.
    pub config: Arc<Config>,
    /// The configured agents and the card each one currently serves.
    pub registry: Arc<Registry>,
    /// Where tasks are recorded: in this process, or in Redis when configured.
    pub ledger: Arc<dyn TaskLedger>,
    /// This worker's own client towards agents (and its own connection pool).
    pub upstream: Upstream,
    /// The Prometheus families, shared by every worker.
    pub metrics: Arc<Metrics>,
    /// Webhook deliveries (in Redis when configured), for the admin API and metrics.
    pub queue: Arc<dyn DeliveryQueue>,
    /// Live task streams and the change feed, shared by every worker.
    pub hub: Arc<stream::Hub>,
    /// Creates still awaited past their agent's timeout, across all workers (bounded).
    pub late_answers: Arc<tokio::sync::Semaphore>,
    /// The clients and how they authenticate (off when none are configured).
    pub auth: Arc<auth::Auth>,
    /// Set when a drain begins: `/readyz` answers 503 while requests are still served, so a load
    /// balancer stops sending before the listener closes.
    pub draining: Arc<AtomicBool>,
    /// The token buckets of rate-limited clients, shared by every worker. Apart from `auth`
    /// so that they outlive a reload of the clients (keyed by client name).
    pub buckets: Arc<limits::Buckets>,
    /// The server certificate, when `[tls]` is configured: the accept loop handshakes with the
    /// one current at each accept (swapped by [`Gateway::reload_tls`]).
    pub tls: Option<Arc<tls::Tls>>,
}

/// Every config check, with the knowledge of the modules that own them: the webhook module's
/// (address ranges, subscriber URLs, retry schedules, signing keys) and the auth module's (the
/// JWKS file). What `serve` and `check-config` load the config with.
pub struct ConfigRules;

impl config::Rules for ConfigRules {
    fn allow_entry(&self, entry: &str) -> Result<(), String> {
        webhook::ConfigRules.allow_entry(entry)
    }
    fn retry_schedule(&self, secs: &[u64]) -> Result<(), String> {
        webhook::ConfigRules.retry_schedule(secs)
    }
    fn subscriber_url(&self, allow: &[String], url: &str) -> Result<(), String> {
        webhook::ConfigRules.subscriber_url(allow, url)
    }
    fn signing_secret(&self, secret: &str) -> Result<(), String> {
        webhook::ConfigRules.signing_secret(secret)
    }
    fn jwks_file(&self, path: &std::path::Path) -> Result<(), String> {
        auth::jwt::check_jwks(path)
    }
    fn pem_file(&self, kind: config::PemKind, path: &std::path::Path) -> Result<(), String> {
        tls::check_pem(kind, path)
    }
    fn key_pair(
        &self,
        cert_file: &std::path::Path,
        key_file: &std::path::Path,
    ) -> Result<(), String> {
        tls::check_key_pair(cert_file, key_file)
    }
}

/// A running gateway.
pub struct Gateway {
    addr: SocketAddr,
    hub: Arc<stream::Hub>,
    metrics: Arc<Metrics>,
    stop: watch::Sender<bool>,
    workers: Vec<std::thread::JoinHandle<()>>,
    /// Each worker's state, swapped whole by a reload: a request works with the generation it
    /// started with, the next one with the new.
    states: Vec<Arc<ArcSwap<State>>>,
    /// The registry the card refreshes work in (the same as the states').
    registry: Arc<ArcSwap<Registry>>,
    /// Which subscribers follow which agent, for the ledger (swapped by a reload).
    outbox: Arc<Outbox>,
    /// The webhook worker's sender, once a worker runs.
    webhooks: Mutex<Option<Arc<ArcSwap<webhook::send::Sender>>>>,
    /// What new card refreshes fetch with.
    card_upstream: Arc<ArcSwap<Upstream>>,
    stop_rx: watch::Receiver<bool>,
    draining: Arc<AtomicBool>,
    /// The reloads, one at a time.
    reloading: tokio::sync::Mutex<()>,
    tls: Option<Arc<tls::Tls>>,
}

/// What a reload does with the webhook worker.
enum Webhooks {
    /// Give the running worker (if any) this sender.
    Swap(webhook::send::Sender),
    /// Start this worker: the first subscribers.
    Start(webhook::worker::Worker),
}

/// What a reload did.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// Keys that changed but need a restart (`listen`, `workers`, `[redis]`...): the running
    /// gateway keeps their old values.
    pub need_restart: Vec<&'static str>,
    /// Agents added, changed and removed, by route name.
    pub agents_added: Vec<String>,
    /// Agents whose entry changed (they start over: new card, streams ended with a retry hint).
    pub agents_changed: Vec<String>,
    /// Agents no longer configured (their streams ended with a final event).
    pub agents_removed: Vec<String>,
}

/// Why [`Gateway::start`] failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The listening socket could not be bound, or its address read.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The configured `listen` address.
        addr: SocketAddr,
        /// What the operating system answered.
        source: std::io::Error,
    },
    /// Anything else that failed to start: metrics, Redis, an HTTP client or a thread.
    #[error("{0}")]
    Setup(String),
}

impl Gateway {
    /// Bind, start fetching every agent's card (without waiting for any), and serve.
    ///
    /// Thread per core: each worker thread runs its own single-threaded runtime, accepts from a
    /// clone of the one listening socket (one shared accept queue; see `http::bind` for why not
    /// SO_REUSEPORT) and has its own upstream pool, so a request and its upstream exchange are
    /// served on one thread with no cross-thread wake-ups.
    /// Card refreshes run on the caller's runtime.
    pub async fn start(config: Config) -> Result<Gateway, StartError> {
        let config = Arc::new(config);
        let auth = Arc::new(auth::Auth::from_config(&config).map_err(StartError::Setup)?);
        let tls = match &config.tls {
            Some(t) => Some(Arc::new(
                tls::Tls::load(t).map_err(|e| StartError::Setup(format!("[tls] {e}")))?,
            )),
            None => None,
        };
        let metrics =
            Arc::new(Metrics::new().map_err(|e| StartError::Setup(format!("metrics: {e}")))?);
        let names: Vec<String> = config.agents.iter().map(|a| a.name.clone()).collect();
        let outbox = Arc::new(Outbox::new(
            &names,
            &config.subscribers,
            config.webhooks.max_queued,
            config.webhooks.max_dead_letters,
        ));
        let setup = |e: &dyn std::fmt::Display| StartError::Setup(e.to_string());
        let feed = Arc::new(stream::changes::ChangeFeed::new());
        let (ledger, queue): (Arc<dyn TaskLedger>, Arc<dyn DeliveryQueue>) = match &config.redis {
            Some(r) => (
                Arc::new(
                    RedisLedger::connect(&r.url, &r.prefix, config.task_retention)
                        .await
                        .map_err(|e| setup(&e))?
                        .with_outbox(outbox.clone()),
                ),
                Arc::new(
                    RedisQueue::connect(&r.url, &r.prefix, config.webhooks.max_dead_letters)
                        .await
                        .map_err(|e| setup(&e))?,
                ),
            ),
            None => {
                let queue = Arc::new(MemoryQueue::new(
                    config.webhooks.max_queued,
                    config.webhooks.max_dead_letters,
                ));
                let ledger = MemoryLedger::new(
                    config.max_tasks,
                    config.task_retention,
                    metrics.ledger_evictions.clone(),
                )
                .with_byte_budget(config.max_ledger_bytes)
                .with_outbox(outbox.clone(), queue.clone())
                .with_changes(feed.clone());
                (Arc::new(ledger), queue)
            }
        };
        let registry = Arc::new(Registry::new(&config.agents));
        let listeners = http::bind(config.listen, config.worker_count()).map_err(|source| {
            StartError::Listen {
                addr: config.listen,
                source,
            }
        })?;
        let addr = listeners[0]
            .local_addr()
            .map_err(|source| StartError::Listen {
                addr: config.listen,
                source,
            })?;
        let (stop, stop_rx) = watch::channel(false);
        let hub = Arc::new(stream::Hub::new(
            config.streams.clone(),
            metrics.clone(),
            ledger.clone(),
            feed.clone(),
            stop_rx.clone(),
        ));
        feed.on_terminal(hub.terminal_hook());
        if let Some(r) = &config.redis {
            tokio::spawn(stream::changes::relay_redis(
                r.url.clone(),
                r.prefix.clone(),
                feed.clone(),
                stop_rx.clone(),
            ));
        }
        let card_upstream = Arc::new(ArcSwap::from_pointee(
            Upstream::new(config.connect_timeout, &config.agents).map_err(StartError::Setup)?,
        ));
        let current = Arc::new(ArcSwap::new(registry.clone()));
        Registry::spawn_refreshers(
            &current,
            registry.agents(),
            &card_upstream,
            metrics.clone(),
            stop_rx.clone(),
        );
        let draining = Arc::new(AtomicBool::new(false));
        let slots = Arc::new(tokio::sync::Semaphore::new(config.max_connections));
        let late_answers = Arc::new(tokio::sync::Semaphore::new(http::MAX_LATE_ANSWERS));
        let buckets = Arc::new(limits::Buckets::new());
        let mut workers = Vec::with_capacity(listeners.len() + 1);
        let mut webhooks = None;
        if !config.subscribers.is_empty() {
            let (thread, sender) =
                start_webhooks(&config, queue.clone(), metrics.clone(), stop_rx.clone())
                    .map_err(StartError::Setup)?;
            workers.push(thread);
            webhooks = Some(sender);
        }
        let grace = config.shutdown_grace;
        let mut states = Vec::with_capacity(listeners.len());
        for (i, listener) in listeners.into_iter().enumerate() {
            let state = State {
                config: config.clone(),
                registry: registry.clone(),
                ledger: ledger.clone(),
                upstream: Upstream::new(config.connect_timeout, &config.agents)
                    .map_err(StartError::Setup)?,
                metrics: metrics.clone(),
                queue: queue.clone(),
                hub: hub.clone(),
                late_answers: late_answers.clone(),
                auth: auth.clone(),
                draining: draining.clone(),
                buckets: buckets.clone(),
                tls: tls.clone(),
            };
            let state = Arc::new(ArcSwap::from_pointee(state));
            states.push(state.clone());
            let (stop_rx, slots, late) = (stop_rx.clone(), slots.clone(), late_answers.clone());
            let worker = std::thread::Builder::new()
                .name(format!("a2a-gw-{i}"))
                .spawn(move || {
                    let rt = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt,
                        Err(e) => {
                            return tracing::error!(error = %e, "worker runtime failed to start")
                        }
                    };
                    rt.block_on(async move {
                        match TcpListener::from_std(listener) {
                            Ok(l) => {
                                http::serve(l, state, slots, stop_rx, grace).await;
                                http::drain_late_answers(&late, http::LATE_DRAIN).await;
                            }
                            Err(e) => tracing::error!(error = %e, "worker listener failed"),
                        }
                    });
                })
                .map_err(|e| StartError::Setup(format!("worker thread: {e}")))?;
            workers.push(worker);
        }
        Ok(Gateway {
            addr,
            hub,
            metrics,
            stop,
            workers,
            states,
            registry: current,
            outbox,
            webhooks: Mutex::new(webhooks),
            card_upstream,
            stop_rx,
            draining,
            reloading: tokio::sync::Mutex::new(()),
            tls,
        })
    }

    /// The config the gateway runs with now.
    pub fn config(&self) -> Arc<Config> {
        self.states
            .first()
            .map(|s| s.load().config.clone())
            .unwrap_or_default()
    }

    /// Apply a new config (already read and checked: `Config::load_with`), atomically: the next
    /// request of every worker sees all of it, none sees part. Agents added, changed and removed
    /// (an unchanged agent keeps its card, streams and counters; a removed one's streams end with
    /// a final event, a changed one's with a retry hint); clients, keys and JWKS; subscribers and
    /// their keys; limits; CORS. `listen`, `workers` and `[redis]` keep their running values
    /// (named in [`Reloaded::need_restart`]). Requests in flight and open streams go on.
    /// An error (the JWKS file or a subscriber cannot be used) changes nothing.
    pub async fn reload(&self, new: Config) -> Result<Reloaded, String> {
        let _one = self.reloading.lock().await;
        let result = self.reload_inner(new);
        let label = if result.is_ok() { "applied" } else { "refused" };
        self.metrics
            .config_reloads
            .with_label_values(&[label])
            .inc();
        result
    }

    fn reload_inner(&self, mut new: Config) -> Result<Reloaded, String> {
        let old = self.config();
        let mut out = Reloaded::default();
        // What only a restart applies keeps its running value, so the rest stays consistent.
        if new.listen != old.listen {
            out.need_restart.push("listen");
            new.listen = old.listen;
        }
        if new.workers != old.workers {
            out.need_restart.push("workers");
            new.workers = old.workers;
        }
        let redis = |c: &Config| c.redis.as_ref().map(|r| (r.url.clone(), r.prefix.clone()));
        if redis(&new) != redis(&old) {
            out.need_restart.push("redis");
            new.redis = old.redis.clone();
        }
        // Serving TLS or not needs a restart; the files are read again on every reload (that
        // is how a rotated certificate is picked up).
        if new.tls.is_some() != old.tls.is_some() {
            out.need_restart.push("tls");
            new.tls = old.tls.clone();
        }
        if new.shutdown_grace != old.shutdown_grace {
            // The workers' accept loops took it at start.
            out.need_restart.push("shutdown_grace_ms");
            new.shutdown_grace = old.shutdown_grace;
        }
        if new.webhooks.timeout != old.webhooks.timeout {
            // The delivery worker checks its visibility budget with the timeout it started
            // with: a longer one applied only to the sender could outlive it.
            out.need_restart.push("webhooks.timeout_ms");
            new.webhooks.timeout = old.webhooks.timeout;
        }
        for (key, same) in [
            (
                "max_connections",
                new.max_connections == old.max_connections,
            ),
            ("max_tasks", new.max_tasks == old.max_tasks),
            (
                "max_ledger_bytes",
                new.max_ledger_bytes == old.max_ledger_bytes,
            ),
            (
                "task_retention_secs",
                new.task_retention == old.task_retention,
            ),
            (
                "streams",
                format!("{:?}", new.streams) == format!("{:?}", old.streams),
            ),
            (
                "webhooks (other than allow)",
                new.webhooks.retry_waits_secs() == old.webhooks.retry_waits_secs()
                    && new.webhooks.concurrency == old.webhooks.concurrency
                    && new.webhooks.visibility_timeout == old.webhooks.visibility_timeout
                    && new.webhooks.max_queued == old.webhooks.max_queued
                    && new.webhooks.max_dead_letters == old.webhooks.max_dead_letters,
            ),
        ] {
            if !same {
                out.need_restart.push(key);
            }
        }

        // 1. Everything that can fail, before anything changes.
        let auth = Arc::new(self.states_auth()?.reloaded(&new)?);
        let webhooks = self.prepare_webhooks(&new)?;
        // An agent's ca_file and the connect timeout are built into the clients towards
        // agents: with any ca_file (its file may have been rotated in place) or a new timeout,
        // every worker and the card refreshes get new clients (cold pools).
        let cas = |c: &Config| -> Vec<(String, String)> {
            c.agents
                .iter()
                .filter_map(|a| a.ca_file.clone().map(|f| (a.url.clone(), f)))
                .collect()
        };
        let rebuild = !(cas(&new).is_empty() && cas(&old).is_empty())
            || new.connect_timeout != old.connect_timeout;
        let mut upstreams = if rebuild {
            let fresh = (0..=self.states.len())
                .map(|_| Upstream::new(new.connect_timeout, &new.agents))
                .collect::<Result<Vec<_>, _>>()?;
            Some(fresh.into_iter())
        } else {
            None
        };
        if let Some(tls) = &new.tls {
            // The last step that can fail: it swaps the certificate when it succeeds.
            self.reload_tls(tls)?;
        }

        // 2. The swap: nothing below fails.
        let new = Arc::new(new);
        let (registry, fresh, ended) = self.registry.load().reload(&new.agents);
        let registry = Arc::new(registry);
        for a in &ended {
            let name = a.cfg.name.clone();
            if new.agents.iter().any(|c| c.name == name) {
                out.agents_changed.push(name);
            } else {
                out.agents_removed.push(name);
            }
        }
        out.agents_added = fresh
            .iter()
            .map(|a| a.cfg.name.clone())
            .filter(|n| !old.agents.iter().any(|c| c.name == *n))
            .collect();
        // The streams of agents that are gone (or are now another agent) end first: a request
        // still on the old state cannot open a new one (the agents are retired), and none on
        // the new state has opened one yet.
        for name in &out.agents_removed {
            let data = serde_json::json!({ "reason": "agent removed from the gateway's config" });
            self.hub
                .close_agent(name, Some((stream::UPSTREAM_ERROR, &data.to_string())));
        }
        for name in &out.agents_changed {
            self.hub.close_agent(name, None);
        }
        if let Some(up) = upstreams.as_mut().and_then(Iterator::next) {
            self.card_upstream.store(Arc::new(up));
        }
        self.registry.store(registry.clone());
        Registry::spawn_refreshers(
            &self.registry,
            &fresh,
            &self.card_upstream,
            self.metrics.clone(),
            self.stop_rx.clone(),
        );
        // The sender before the routes: a delivery for a new subscriber finds it configured.
        let start = self.swap_webhooks(webhooks);
        for s in &self.states {
            let cur = s.load();
            let upstream = upstreams
                .as_mut()
                .and_then(Iterator::next)
                .unwrap_or_else(|| cur.upstream.clone());
            s.store(Arc::new(State {
                config: new.clone(),
                registry: registry.clone(),
                auth: auth.clone(),
                upstream,
                ..State::clone(&cur)
            }));
        }
        let names: Vec<String> = new.agents.iter().map(|a| a.name.clone()).collect();
        self.outbox.replace(&names, &new.subscribers);
        if let Some(worker) = start {
            // The first subscribers: the worker's thread starts now. Should the OS refuse a
            // thread, the deliveries stay queued for the next start (the reload stands).
            let handle = worker.sender_handle();
            match worker.spawn(self.stop_rx.clone()) {
                Ok(_) => *self.webhooks.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle),
                Err(e) => {
                    tracing::error!(error = %e, "webhook worker thread did not start; deliveries stay queued")
                }
            }
        }
        Ok(out)
    }

    fn states_auth(&self) -> Result<Arc<auth::Auth>, String> {
        self.states
            .first()
            .map(|s| s.load().auth.clone())
            .ok_or_else(|| "no worker".to_owned())
    }

    /// What the new config's subscribers need, built before anything is swapped: a sender for
    /// the running worker, or a worker to start (the first subscribers).
    fn prepare_webhooks(&self, cfg: &Config) -> Result<Webhooks, String> {
        let sender = webhook::send::Sender::new(&cfg.subscribers, &cfg.webhooks)?;
        let running = self
            .webhooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        if running || cfg.subscribers.is_empty() {
            return Ok(Webhooks::Swap(sender));
        }
        let queue = self
            .states
            .first()
            .map(|s| s.load().queue.clone())
            .ok_or("no worker")?;
        let worker =
            webhook::worker::Worker::new(queue, sender, &cfg.webhooks, self.metrics.clone())?;
        Ok(Webhooks::Start(worker))
    }

    /// Put the new sender in place (a running worker, if any, takes it for its next delivery);
    /// the worker to start, if this is the first config with subscribers.
    fn swap_webhooks(&self, plan: Webhooks) -> Option<webhook::worker::Worker> {
        match plan {
            Webhooks::Swap(sender) => {
                if let Some(h) = self
                    .webhooks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                {
                    h.store(Arc::new(sender));
                }
                None
            }
            Webhooks::Start(worker) => Some(worker),
        }
    }

    /// The address actually bound (port 0 resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether the gateway serves HTTPS (`[tls]` was configured at start).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Swap the server certificate (and client CA) for what `cfg` names: every handshake from
    /// now on uses the new files, connections already open keep theirs, none is dropped.
    /// Files that cannot be used change nothing and the error says why (the old certificate
    /// keeps serving). A gateway started without `[tls]` refuses: switching plaintext to TLS
    /// needs a restart.
    pub fn reload_tls(&self, cfg: &config::TlsConfig) -> Result<(), String> {
        match &self.tls {
            Some(tls) => tls.reload(cfg),
            None => Err(
                "[tls]: the gateway was started without TLS; serving TLS needs a restart".into(),
            ),
        }
    }

    /// The gateway's metrics (the ones `/metrics` serves).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Drain and stop: `/readyz` answers 503 for `drain_delay_ms` while requests are still
    /// served (so a load balancer stops sending first); then the listeners close, every stream
    /// ends with a `retry:` hint (EventSources reconnect elsewhere), in-flight requests get
    /// `shutdown_grace_ms` to finish, and late answers to creates are awaited (bounded). Card
    /// refreshes and the webhook worker stop; queued deliveries stay queued.
    pub async fn shutdown(self) {
        self.draining.store(true, Ordering::Release);
        let delay = self.config().drain_delay;
        if !delay.is_zero() {
            tracing::info!(
                delay_ms = delay.as_millis() as u64,
                "draining: /readyz answers 503"
            );
            tokio::time::sleep(delay).await;
        }
        let _ = self.stop.send(true);
        // Open event streams would hold the drain up until its deadline: end them now, each
        // with a hint to reconnect.
        self.hub.drain();
        let workers = self.workers;
        let _ = tokio::task::spawn_blocking(move || {
            for w in workers {
                let _ = w.join();
            }
        })
        .await;
    }

    /// Serve until the process is asked to stop (Ctrl-C or SIGTERM), then drain.
    pub async fn run_until_signal(self) {
        self.run_with_signals(None).await
    }

    /// Serve until Ctrl-C or SIGTERM (then drain); on SIGHUP, read `config_path` again and
    /// reload it ([`Gateway::reload`]). A file with problems is refused, each problem logged
    /// with its key, and the running config goes on.
    pub async fn run_with_signals(self, config_path: Option<std::path::PathBuf>) {
        let mut signals = Signals::new();
        loop {
            match signals.next().await {
                Signal::Stop => break,
                Signal::Reload => match &config_path {
                    Some(path) => self.reload_file(path).await,
                    None => tracing::warn!(
                        "SIGHUP: no config file to reload (started without --config)"
                    ),
                },
            }
        }
        tracing::info!("shutting down");
        self.shutdown().await;
    }

    /// Read, check and apply the config at `path`, logging the outcome.
    pub async fn reload_file(&self, path: &std::path::Path) {
        let cfg = match Config::load_with(path, &ConfigRules) {
            Ok(cfg) => cfg,
            Err(problems) => {
                self.metrics
                    .config_reloads
                    .with_label_values(&["refused"])
                    .inc();
                for p in &problems {
                    tracing::error!(problem = %p, "reload refused: {} is not a valid config", path.display());
                }
                return;
            }
        };
        match self.reload(cfg).await {
            Ok(r) => {
                tracing::info!(added = ?r.agents_added, changed = ?r.agents_changed,
                    removed = ?r.agents_removed, "config reloaded from {}", path.display());
                if !r.need_restart.is_empty() {
                    tracing::warn!(keys = ?r.need_restart,
                        "reload applied, but these changed keys need a restart; their running values stay");
                }
            }
            Err(e) => tracing::error!(error = %e, "reload refused; the running config goes on"),
        }
    }
}

enum Signal {
    Stop,
    Reload,
}

/// The signals the gateway acts on, registered once (a signal that arrives while a reload runs
/// is not lost).
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            let term = async {
                match self.term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let hup = async {
                match self.hup.as_mut() {
                    Some(h) => {
                        h.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => Signal::Stop,
                _ = term => Signal::Stop,
                _ = hup => Signal::Reload,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Stop
        }
    }
}

/// Start the webhook worker on its own thread: the thread, and where a reload swaps its sender.
fn start_webhooks(
    config: &Config,
    queue: Arc<dyn DeliveryQueue>,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
) -> Result<
    (
        std::thread::JoinHandle<()>,
        Arc<ArcSwap<webhook::send::Sender>>,
    ),
    String,
> {
    let sender = webhook::send::Sender::new(&config.subscribers, &config.webhooks)?;
    let worker = webhook::worker::Worker::new(queue, sender, &config.webhooks, metrics)?;
    let handle = worker.sender_handle();
    let thread = worker
        .spawn(stop)
        .map_err(|e| format!("webhook thread: {e}"))?;
    Ok((thread, handle))
}
