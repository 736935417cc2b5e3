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
pub mod metrics;
pub mod protocol;
pub mod registry;
pub mod stream;
pub mod tls;
pub mod upstream;
pub mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;

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
    tls: Option<Arc<tls::Tls>>,
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
                        .with_outbox(outbox),
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
                .with_outbox(outbox, queue.clone())
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
        let card_upstream =
            Upstream::new(config.connect_timeout, &config.agents).map_err(StartError::Setup)?;
        registry.spawn_refreshers(card_upstream, metrics.clone(), stop_rx.clone());
        let slots = Arc::new(tokio::sync::Semaphore::new(config.max_connections));
        let late_answers = Arc::new(tokio::sync::Semaphore::new(http::MAX_LATE_ANSWERS));
        let mut workers = Vec::with_capacity(listeners.len() + 1);
        if !config.subscribers.is_empty() {
            let sender = webhook::send::Sender::new(&config.subscribers, &config.webhooks)
                .map_err(StartError::Setup)?;
            let worker = webhook::worker::Worker::new(
                queue.clone(),
                sender,
                &config.webhooks,
                metrics.clone(),
            )
            .map_err(StartError::Setup)?;
            workers.push(
                worker
                    .spawn(stop_rx.clone())
                    .map_err(|e| StartError::Setup(format!("webhook thread: {e}")))?,
            );
        }
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
                tls: tls.clone(),
            };
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
                                http::serve(l, Arc::new(state), slots, stop_rx).await;
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
            tls,
        })
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

    /// Stop accepting, let in-flight requests finish and late answers to creates come (both
    /// bounded), stop card refreshes.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        // Open event streams would hold the drain up until its deadline: end them now.
        self.hub.close_all();
        let workers = self.workers;
        let _ = tokio::task::spawn_blocking(move || {
            for w in workers {
                let _ = w.join();
            }
        })
        .await;
    }

    /// Serve until the process is asked to stop (Ctrl-C or SIGTERM).
    pub async fn run_until_signal(self) {
        shutdown_signal().await;
        tracing::info!("shutting down");
        self.shutdown().await;
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
