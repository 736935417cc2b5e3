//! a2a-gateway: one endpoint in front of a fleet of A2A 1.0 agents.
//!
//! Layout: `protocol` is the A2A core with no I/O (types, state machine, schemas, conformance);
//! everything that touches a socket or a store sits at the edge (`registry` fetches cards,
//! `upstream` talks to agents, `ledger` records tasks behind a trait, `webhook` queues and
//! delivers status changes to subscribers, `http` serves clients).
//! [`Gateway::start`] wires them together; tests start it in-process on port 0.

#![warn(missing_docs)]

pub mod auth;
pub mod caller;
pub mod config;
pub mod http;
pub mod ledger;
mod lifecycle;
pub mod limits;
pub mod metrics;
pub mod protocol;
pub mod reconcile;
pub mod registry;
mod reload;
pub mod samples;
mod state;
pub mod store;
pub mod stream;
pub mod telemetry;
pub mod tls;
pub mod upstream;
pub mod webhook;

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
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

pub use lifecycle::Signals;
pub use reload::{ReloadError, Reloaded};
pub use state::State;

/// Every config check, with the knowledge of the modules that own them: the webhook module's
/// (address ranges, subscriber URLs, retry schedules, signing keys), the auth module's (the
/// JWKS file) and the TLS module's (PEM files, a key and its certificate). What `serve` and
/// `check-config` load the config with; the one implementation of [`config::Rules`] but
/// [`config::NoRules`].
pub struct ConfigRules;

impl config::Rules for ConfigRules {
    fn check(&self, what: config::Check<'_>) -> Result<(), config::Refused> {
        use config::Check;
        match what {
            Check::AllowEntry(entry) => drop(entry.parse::<webhook::guard::Cidr>()?),
            Check::RetrySchedule(secs) => drop(webhook::retry::Schedule::from_secs(secs)?),
            Check::SubscriberUrl { allow, url } => webhook::check_subscriber_url(allow, url)?,
            Check::SigningSecret(secret) => drop(webhook::sign::SigningKey::parse(secret)?),
            Check::JwksFile(path) => auth::jwt::check_jwks(path)?,
            Check::AssertionKey(path) => caller::check_key(path)?,
            Check::PemFile(kind, path) => tls::check_pem(kind, path)?,
            Check::KeyPair {
                cert_file,
                key_file,
            } => tls::check_key_pair(cert_file, key_file)?,
        }
        Ok(())
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
    /// The tracer (flushed at shutdown), when telemetry is on.
    telemetry: Option<Arc<telemetry::Telemetry>>,
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
    /// The `[auth.jwt]` key set cannot be used.
    #[error("[auth.jwt] {0}")]
    Jwks(#[from] auth::jwt::JwksError),
    /// The `[tls]` files cannot be used.
    #[error("[tls] {0}")]
    Tls(#[from] tls::TlsError),
    /// An `[auth.assertion]` key cannot be used.
    #[error(transparent)]
    Assertion(#[from] caller::KeyError),
    /// The metric families could not be registered.
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// The OTLP exporter could not be built.
    #[error("[telemetry] otlp_endpoint: {0}")]
    Telemetry(#[from] opentelemetry_otlp::ExporterBuildError),
    /// Redis could not be set up, or its data is refused.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// A client towards agents could not be built.
    #[error(transparent)]
    Client(#[from] upstream::ClientError),
    /// The webhook sender could not be built.
    #[error(transparent)]
    Webhooks(#[from] webhook::send::SenderError),
    /// The retry schedule cannot be used.
    #[error("webhooks: {0}")]
    Schedule(#[from] webhook::retry::ScheduleError),
    /// A thread of the gateway's did not start.
    #[error("{what} thread: {source}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// What the operating system said.
        source: std::io::Error,
    },
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
        let auth = Arc::new(auth::Auth::from_config(&config)?);
        // A JWT's streams end within a second of its `exp` (the counts outlive reloads).
        tokio::spawn(auth::StreamCounts::expire_forever(auth.stream_counts()));
        let tls = match &config.tls {
            Some(t) => Some(Arc::new(tls::Tls::load(t)?)),
            None => None,
        };
        let metrics = Arc::new(Metrics::new()?);
        // The `[[auth.oidc]]` issuers' keys are fetched in the background: the gateway serves
        // with its identity providers down (their tokens get 503 until their keys arrive).
        auth.start_oidc(&metrics);
        let telemetry =
            telemetry::Telemetry::start(&config.telemetry, metrics.telemetry_spans.clone())?;
        let outbox = Arc::new(Outbox::new(
            &config.agents,
            &config.subscribers,
            config.webhooks.queue_bounds(),
            config.webhooks.max_dead_letters,
        ));
        let feed = Arc::new(ledger::changes::ChangeFeed::new());
        let (stop, stop_rx) = watch::channel(false);
        let store = match &config.redis {
            Some(r) => {
                let store = store::Store::new(r)?;
                store.instrument(metrics.redis()?);
                // One attempt now, then in the background: a replica that starts before its
                // Redis serves (not ready) and connects when Redis comes.
                store.start(stop_rx.clone()).await?;
                Some(store)
            }
            None => None,
        };
        let (ledger, queue): (Arc<dyn TaskLedger>, Arc<dyn DeliveryQueue>) = match &store {
            Some(store) => {
                let queue = RedisQueue::new(store.clone(), config.webhooks.max_dead_letters);
                if store.is_up() {
                    queue.check_eviction_policy().await;
                }
                (
                    Arc::new(
                        RedisLedger::new(store.clone(), config.task_retention)
                            .with_outbox(outbox.clone()),
                    ),
                    Arc::new(queue),
                )
            }
            None => {
                let queue = Arc::new(MemoryQueue::new(
                    config.webhooks.queue_bounds(),
                    config.webhooks.max_dead_letters,
                ));
                let ledger = MemoryLedger::new(
                    config.max_tasks,
                    config.task_retention,
                    ledger::Evictions::of(&metrics.ledger_evictions),
                )
                .with_byte_budget(config.max_ledger_bytes)
                .with_outbox(outbox.clone(), queue.clone())
                .with_changes(feed.clone());
                (Arc::new(ledger), queue)
            }
        };
        let registry = Arc::new(Registry::new(&config.agents));
        registry.set_signer(caller::of_config(&config)?);
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
        let hub = Arc::new(stream::Hub::new(
            config.streams.clone(),
            metrics.clone(),
            ledger.clone(),
            feed.clone(),
            stop_rx.clone(),
        ));
        feed.on_terminal(hub.terminal_hook());
        if let Some(store) = &store {
            tokio::spawn(ledger::changes::relay_redis(
                store.clone(),
                feed.clone(),
                stop_rx.clone(),
            ));
        }
        let card_upstream = Arc::new(ArcSwap::from_pointee(Upstream::new(
            config.connect_timeout,
            &config.agents,
        )?));
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
        if delivers(&config) {
            let (thread, sender) = start_webhooks(
                &config,
                ledger.clone(),
                queue.clone(),
                metrics.clone(),
                telemetry.clone(),
                stop_rx.clone(),
            )?;
            workers.push(thread);
            webhooks = Some(sender);
        }
        let grace = config.shutdown_grace;
        let mut states = Vec::with_capacity(listeners.len());
        let fleet_totals = Arc::new(state::FleetTotals::default());
        let poller = Arc::new(reconcile::Poller::default());
        let samples = Arc::new(samples::Samples::default());
        tokio::spawn(samples::run(
            samples.clone(),
            metrics.clone(),
            current.clone(),
            stop_rx.clone(),
        ));
        for (i, listener) in listeners.into_iter().enumerate() {
            let state = State {
                config: config.clone(),
                registry: registry.clone(),
                ledger: ledger.clone(),
                upstream: Upstream::new(config.connect_timeout, &config.agents)?,
                metrics: metrics.clone(),
                queue: queue.clone(),
                hub: hub.clone(),
                late_answers: late_answers.clone(),
                auth: auth.clone(),
                draining: draining.clone(),
                buckets: buckets.clone(),
                tls: tls.clone(),
                telemetry: telemetry.clone(),
                fleet_totals: fleet_totals.clone(),
                poller: poller.clone(),
                samples: samples.clone(),
                local_addr: addr,
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
                .map_err(|source| StartError::Thread {
                    what: "worker",
                    source,
                })?;
            workers.push(worker);
        }
        tokio::spawn(http::a2a::poll::run(
            states[0].clone(),
            card_upstream.clone(),
            stop_rx.clone(),
        ));
        tokio::spawn(http::replicas::run(states[0].clone(), stop_rx.clone()));
        let a2a_ask = http::a2a::poll::Reconcile {
            state: states[0].clone(),
            client: card_upstream.clone(),
        };
        reconcile::spawn(
            current.clone(),
            card_upstream.clone(),
            ledger.clone(),
            metrics.clone(),
            Some(Arc::new(a2a_ask)),
            stop_rx.clone(),
        );
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
            telemetry,
        })
    }

    /// The config the gateway runs with now.
    pub fn config(&self) -> Arc<Config> {
        self.states
            .first()
            .map(|s| s.load().config.clone())
            .unwrap_or_default()
    }

    /// The address actually bound (port 0 resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether the gateway serves HTTPS (`[tls]` was configured at start).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The gateway's metrics (the ones `/metrics` serves).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}

/// Whether a gateway of `config` delivers webhooks: it has subscribers, or official A2A agents
/// (whose clients' push configs are delivered through the same queue).
pub(crate) fn delivers(config: &Config) -> bool {
    !config.subscribers.is_empty()
        || config
            .agents
            .iter()
            .any(|a| a.protocol == config::Protocol::A2a)
}

/// Start the webhook worker on its own thread: the thread, and where a reload swaps its sender.
fn start_webhooks(
    config: &Config,
    ledger: Arc<dyn TaskLedger>,
    queue: Arc<dyn DeliveryQueue>,
    metrics: Arc<Metrics>,
    telemetry: Option<Arc<telemetry::Telemetry>>,
    stop: watch::Receiver<bool>,
) -> Result<
    (
        std::thread::JoinHandle<()>,
        Arc<ArcSwap<webhook::send::Sender>>,
    ),
    StartError,
> {
    let sender = webhook::send::Sender::new(&config.subscribers, &config.webhooks)?;
    let worker = webhook::worker::Worker::new(queue, sender, &config.webhooks, metrics)?
        .with_telemetry(telemetry)
        .with_push(Some(Arc::new(ledger::push::Directory(ledger))));
    let handle = worker.sender_handle();
    let thread = worker.spawn(stop).map_err(|source| StartError::Thread {
        what: "webhook",
        source,
    })?;
    Ok((thread, handle))
}
