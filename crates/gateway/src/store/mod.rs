//! The shared store: the connection to Redis, one node or a cluster, that the ledger, the
//! delivery queue and the change feed use when replicas share state.
//!
//! A gateway whose Redis is not up yet still starts: a task of its own connects, with backoff,
//! and until it has, every call fails with "not connected" and `/readyz` says `redis`. Once
//! connected, a call that fails on a broken connection marks the store *down* (creates are then
//! refused before their agent is called, see `http::handlers::tasks`) and a ping every
//! [`PING_DOWN`] marks it up again as soon as Redis answers.
//!
//! A Redis that answers but refuses writes (`OOM` at `maxmemory` with `noeviction`, `READONLY`
//! on a node demoted to replica) is not down, and a ping says nothing of it: such a failure
//! marks the store *refusing* ([`Store::refusing`]), which `/readyz` and the creates read like
//! down, and a probe write into every partition every [`PING_DOWN`] ([`Store::probe`]) clears
//! it once every one succeeds. Every failed call is classified once, in [`Store::failed`]: its
//! kind ([`Failure`]) is what the ledger and the queue return and what
//! `a2a_gateway_store_errors_total{kind}` counts; the server's text goes to the log only.
//!
//! Where each key lives is [`keyspace`]'s business.

mod conn;
mod error;
pub mod keyspace;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use prometheus::Histogram;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{RedisError, TlsCertificates};
use tokio::sync::watch;

pub use conn::{is_broken, Conn};
use conn::{root_bundle, Link, TIMEOUT};
pub use error::{Failure, StoreError};
pub use keyspace::Keyspace;

use crate::config::RedisConfig;
use crate::metrics::RedisMetrics;

pub use crate::config::MAX_PARTITIONS;

/// How often a store marked down pings Redis.
const PING_DOWN: Duration = Duration::from_millis(250);

/// How long a probe write lives: past a few probe rounds, so the keys never pile up.
const PROBE_TTL_MS: u64 = 10_000;

/// At most one warning per kind of failure this often (each failure is logged at debug): a
/// Redis at `maxmemory` fails every write of every request.
const FAILURE_LOG_EVERY_MS: i64 = 10_000;

/// How long a worker waits after a failed attempt at its own connection before the next.
const RETRY_OWN: Duration = Duration::from_secs(1);

/// A worker thread's own connection to one store (see [`Store::conn`]).
#[derive(Clone)]
enum Own {
    Ready(Conn),
    /// Being made, by a task on this thread; calls use the shared connection meanwhile.
    Connecting,
    /// The last attempt failed then; the shared connection serves until [`RETRY_OWN`] later.
    Failed(Instant),
}

thread_local! {
    /// Each worker thread's own connection, by store (tests run several gateways in one
    /// process).
    static LOCAL: std::cell::RefCell<std::collections::HashMap<u64, Own>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Why a store call failed before reaching Redis, or what Redis said.
pub type StoreResult<T> = Result<T, RedisError>;

/// The shared store (see the module doc).
pub struct Store {
    id: u64,
    link: Link,
    /// What a replica says about its Redis in logs and `/readyz`: the nodes, passwords
    /// redacted.
    pub name: String,
    config: RedisConfig,
    certs: Option<TlsCertificates>,
    shared: ArcSwapOption<Conn>,
    up: AtomicBool,
    /// Whether the store was ever up: the first time it is, nothing had failed (no "answers
    /// again", no reconnect counted).
    ever_up: AtomicBool,
    /// `redis_up`, the command timer and `redis_reconnects_total`, once instrumented.
    metrics: OnceLock<RedisMetrics>,
    /// Set when the store was found unusable for good (data of the previous layout): every
    /// call fails with it.
    refused: OnceLock<String>,
    /// Redis answers but refuses writes: 0 no, else 1 + the index of the [`Failure`] that
    /// said so (see the module doc).
    refusing: AtomicU8,
    /// When each kind of failure was last warned about (unix ms), by [`Failure::ALL`] index.
    warned: [AtomicI64; 4],
    /// The partitions of the keys.
    pub keys: Keyspace,
}

fn err(kind: redis::ErrorKind, what: String) -> RedisError {
    RedisError::from((kind, "redis", what))
}

impl Store {
    /// The store a `[redis]` table describes; nothing is connected yet (see [`Store::start`]).
    pub fn new(config: &RedisConfig) -> Result<Arc<Store>, StoreError> {
        let nodes = config.nodes();
        let name = nodes
            .iter()
            .map(|u| crate::config::redact_url(u))
            .collect::<Vec<_>>()
            .join(",");
        let certs = match &config.ca_file {
            Some(f) => Some(TlsCertificates {
                client_tls: None,
                root_cert: Some(root_bundle(f)?),
            }),
            None => None,
        };
        let bad = |source: RedisError| StoreError::Client {
            name: name.clone(),
            source,
        };
        let link = if config.cluster {
            let mut b = ClusterClientBuilder::new(nodes.clone())
                .connection_timeout(TIMEOUT)
                .response_timeout(TIMEOUT)
                .retries(3);
            if let Some(c) = &certs {
                b = b.certs(c.clone());
            }
            Link::Cluster(b.build().map_err(bad)?)
        } else {
            let url = nodes.first().ok_or(StoreError::NoUrl)?;
            Link::Single(match &certs {
                Some(c) => redis::Client::build_with_tls(url.as_str(), c.clone()).map_err(bad)?,
                None => redis::Client::open(url.as_str()).map_err(bad)?,
            })
        };
        Ok(Arc::new(Store {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            link,
            name,
            keys: Keyspace::new(&config.prefix, config.partitions),
            config: config.clone(),
            certs,
            shared: ArcSwapOption::empty(),
            up: AtomicBool::new(false),
            ever_up: AtomicBool::new(false),
            metrics: OnceLock::new(),
            refused: OnceLock::new(),
            refusing: AtomicU8::new(0),
            warned: Default::default(),
        }))
    }

    /// Export this store's state and latency in `metrics` (`redis_up`, the command durations,
    /// `redis_reconnects_total`). Call before [`Store::start`]: connections made before are
    /// not timed. A second call changes nothing.
    pub fn instrument(&self, metrics: RedisMetrics) {
        metrics.up.set(i64::from(self.is_up()));
        let _ = self.metrics.set(metrics);
    }

    fn timer(&self) -> Option<Histogram> {
        self.metrics.get().map(|m| m.command_seconds.clone())
    }

    /// Whether writes wait for replicas (`wait_replicas` above 0).
    pub fn waits(&self) -> bool {
        self.config.wait_replicas > 0
    }

    /// Whether this store is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(_))
    }

    /// Connected, not marked down, not refused: calls are expected to succeed.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire) && self.refused.get().is_none()
    }

    /// Up, and not refusing writes: a write is expected to succeed. What creates and
    /// `/readyz` ask.
    pub fn writable(&self) -> bool {
        self.is_up() && self.refusing().is_none()
    }

    /// Why Redis refuses writes, while it does (an `OOM` or `READONLY` answer since the last
    /// probe round that wrote everywhere).
    pub fn refusing(&self) -> Option<Failure> {
        match self.refusing.load(Ordering::Acquire) {
            0 => None,
            n => Failure::ALL.get(usize::from(n) - 1).copied(),
        }
    }

    /// Classify a failed call: counted in `store_errors_total{kind}`, logged with the
    /// server's text (a warning at most every [`FAILURE_LOG_EVERY_MS`] per kind), and, for a
    /// refused write, the store marked refusing until a probe round writes everywhere. The
    /// kind is all a caller keeps: nothing of Redis's own words reaches an answer.
    pub fn failed(&self, e: &RedisError) -> Failure {
        let kind = Failure::of(e);
        let at = Failure::ALL.iter().position(|k| *k == kind).unwrap_or(3);
        if let Some(m) = self.metrics.get() {
            m.errors[at].inc();
        }
        if kind.refuses_writes() {
            let was = self.refusing.swap(at as u8 + 1, Ordering::AcqRel);
            if was == 0 {
                tracing::warn!(redis = %self.name, kind = kind.as_str(), error = %e,
                    "Redis refuses writes: not ready, creates refused (503 STORE_UNAVAILABLE) until a probe write succeeds");
                self.warned[at].store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);
                return kind;
            }
        }
        let now = chrono::Utc::now().timestamp_millis();
        let last = self.warned[at].load(Ordering::Relaxed);
        if now - last >= FAILURE_LOG_EVERY_MS
            && self.warned[at]
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(redis = %self.name, kind = kind.as_str(), error = %e, "a Redis call failed");
        } else {
            tracing::debug!(redis = %self.name, kind = kind.as_str(), error = %e, "a Redis call failed");
        }
        kind
    }

    /// One probe round while the store refuses writes: a small key with a short expiry
    /// written into every partition (so into every master of a cluster), in turn, stopping
    /// at the first refusal (classified like any failure, so a refusing store counts about one
    /// a round). Every write succeeding ends the refusal.
    async fn probe(&self, conn: &Conn) {
        let now = chrono::Utc::now().timestamp_millis();
        for part in self.keys.parts() {
            let mut c = conn.clone();
            let wrote = redis::cmd("SET")
                .arg(format!("{part}probe"))
                .arg(now)
                .arg("PX")
                .arg(PROBE_TTL_MS)
                .query_async::<()>(&mut c)
                .await;
            if let Err(e) = wrote {
                self.failed(&e);
                return;
            }
        }
        if let Some(kind) = self.refusing() {
            self.refusing.store(0, Ordering::Release);
            tracing::info!(redis = %self.name, was = kind.as_str(), "Redis takes writes again: ready");
        }
    }

    /// Why the store is refused for good, if it is.
    pub fn refused(&self) -> Option<&str> {
        self.refused.get().map(String::as_str)
    }

    fn set_up(&self, up: bool) {
        // Read first: the flag is shared by every worker, and a store on every call would
        // bounce its cache line between cores.
        if self.up.load(Ordering::Relaxed) != up {
            self.up.store(up, Ordering::Release);
            if let Some(m) = self.metrics.get() {
                m.up.set(i64::from(up));
            }
            if up {
                // Only after a failure: the first time up is the first connect, which
                // `connect_once` reports itself.
                if self.ever_up.swap(true, Ordering::AcqRel) {
                    if let Some(m) = self.metrics.get() {
                        m.reconnects.inc();
                    }
                    tracing::info!(redis = %self.name, "Redis answers again");
                }
            } else {
                tracing::warn!(redis = %self.name, "Redis is unreachable: creates are refused (503) until it answers");
            }
        }
    }

    /// Connect once: the shared connection, the server's version checked, the data's layout
    /// checked. `Err(true)`: refused for good (the reason is in [`Store::refused`]).
    async fn connect_once(&self) -> Result<(), bool> {
        let conn = match tokio::time::timeout(TIMEOUT * 2, self.link.connect(self.timer())).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                tracing::warn!(redis = %self.name, error = %e, "cannot connect to Redis yet; retrying");
                return Err(false);
            }
            Err(_) => {
                tracing::warn!(redis = %self.name, "cannot connect to Redis yet (timed out); retrying");
                return Err(false);
            }
        };
        match self.check(conn.clone()).await {
            Ok(()) => {}
            Err(Refusal::Later(e)) => {
                tracing::warn!(redis = %self.name, error = %e, "Redis is not ready yet; retrying");
                return Err(false);
            }
            Err(Refusal::Never(why)) => {
                tracing::error!(redis = %self.name, "{why}");
                let _ = self.refused.set(why);
                return Err(true);
            }
        }
        // With `wait_replicas`, up only once that many replicas acknowledge (the pinger
        // checks again every PING_DOWN until they do).
        let mut c = conn.clone();
        let replicated = self.replicated(&mut c, None).await;
        self.shared.store(Some(Arc::new(conn)));
        if let Err(e) = &replicated {
            tracing::warn!(redis = %self.name, error = %e, "connected, but too few replicas for wait_replicas yet");
        }
        self.set_up(replicated.is_ok());
        tracing::info!(redis = %self.name, cluster = self.is_cluster(), partitions = self.keys.len(), "connected to Redis");
        Ok(())
    }

    /// What must hold before the store is used: a Redis new enough for the scripts, and no
    /// data left in the previous layout (see [`migration`]).
    async fn check(&self, mut conn: Conn) -> Result<(), Refusal> {
        if let Link::Single(_) = self.link {
            let info: String = match redis::cmd("INFO")
                .arg("server")
                .query_async(&mut conn)
                .await
            {
                Ok(info) => info,
                Err(e) if is_broken(&e) => return Err(Refusal::Later(e.to_string())),
                // An ACL user without INFO (a managed Redis may deny it): not checked.
                Err(_) => String::new(),
            };
            let major = info
                .lines()
                .find_map(|l| l.strip_prefix("redis_version:"))
                .and_then(|v| v.split('.').next())
                .and_then(|m| m.trim().parse::<u32>().ok());
            if major.is_some_and(|m| m < 7) {
                return Err(Refusal::Never(format!(
                    "Redis {} is too old: the gateway needs Redis 7 or later (sharded pub/sub, the scripts' commands)",
                    info.lines()
                        .find_map(|l| l.strip_prefix("redis_version:"))
                        .unwrap_or("?")
                        .trim()
                )));
            }
        }
        migration::check(self, conn).await
    }

    /// Connect: one attempt now (bounded by the connect timeout), so a gateway whose Redis is
    /// up starts with it, or fails at once if its data is refused; then, if that attempt
    /// failed, keep trying in the background with backoff until `stop`. Also runs the pinger
    /// that marks a store that was marked down up again.
    pub async fn start(self: &Arc<Self>, stop: watch::Receiver<bool>) -> Result<(), StoreError> {
        let first = self.connect_once().await;
        if first == Err(true) {
            return Err(StoreError::Refused(
                self.refused().unwrap_or("refused").to_owned(),
            ));
        }
        let me = self.clone();
        tokio::spawn(me.keep(first.is_ok(), stop));
        Ok(())
    }

    /// Connect now, once, for tools and tests that need the store before they go on (no
    /// background reconnection is started: the connection reconnects by itself).
    pub async fn connect_now(self: &Arc<Self>) -> Result<(), StoreError> {
        self.connect_once().await.map_err(|_| match self.refused() {
            Some(why) => StoreError::Refused(why.to_owned()),
            None => StoreError::Unreachable(self.name.clone()),
        })
    }

    async fn keep(self: Arc<Self>, mut connected: bool, mut stop: watch::Receiver<bool>) {
        let mut backoff = Duration::from_millis(100);
        loop {
            let wait = if !connected {
                match self.connect_once().await {
                    Ok(()) => {
                        connected = true;
                        PING_DOWN
                    }
                    Err(true) => return,
                    Err(false) => {
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        backoff
                    }
                }
            } else {
                if self.up.load(Ordering::Acquire) && self.refusing().is_some() {
                    if let Some(c) = self.shared.load_full() {
                        let _ = tokio::time::timeout(TIMEOUT * 2, self.probe(&c)).await;
                    }
                } else if !self.up.load(Ordering::Acquire) {
                    if let Some(c) = self.shared.load_full() {
                        let mut c = (*c).clone();
                        // Up again when Redis answers, and, with `wait_replicas`, when that
                        // many replicas are there to acknowledge writes (a write that cannot
                        // be replicated is not acknowledged: creates wait before their agent).
                        let check = async {
                            redis::cmd("PING").query_async::<String>(&mut c).await?;
                            self.replicated(&mut c, None).await
                        };
                        if let Ok(Ok(())) = tokio::time::timeout(TIMEOUT * 2, check).await {
                            self.set_up(true);
                        }
                    }
                }
                PING_DOWN
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// The connection to use on this thread. A worker (one single-threaded runtime per core)
    /// gets one of its own, made in the background after its first call, so that its
    /// commands are written and its answers read on its own thread: the shared connection has
    /// its I/O task on the runtime it was made on, and every command sent to it from a worker
    /// crossed threads twice, a wake-up each way (in a profile of Redis creates the main
    /// runtime's share fell from 10.6 % to 3.9 % of the samples with this; issue 12,
    /// benches/load/README.md). Other runtimes share the connection made at start, and so
    /// does a worker while its own is being made or Redis is away.
    pub fn conn(&self) -> StoreResult<Conn> {
        if let Some(why) = self.refused.get() {
            return Err(err(redis::ErrorKind::Client, why.clone()));
        }
        // This thread's own connection first: the common case touches nothing shared (the
        // shared connection's `Arc` is a reference count every worker would contend for).
        let own = LOCAL.with(|m| match m.borrow().get(&self.id) {
            Some(Own::Ready(c)) => Some(Ok(c.clone())),
            Some(Own::Connecting) => Some(Err(())),
            Some(Own::Failed(at)) if at.elapsed() < RETRY_OWN => Some(Err(())),
            _ => None,
        });
        let shared = || -> StoreResult<Conn> {
            match &*self.shared.load() {
                Some(c) => Ok((**c).clone()),
                None => Err(err(
                    redis::ErrorKind::Io,
                    format!("not connected to {} yet", self.name),
                )),
            }
        };
        match own {
            Some(Ok(c)) => return Ok(c),
            Some(Err(())) => return shared(),
            None => {}
        }
        let fallback = shared()?;
        let own = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        if own {
            // Made by a task of its own on this thread (a single-threaded runtime runs its
            // tasks on the thread that drives it), so no request waits for it, and one attempt
            // at a time: this call, and the calls until it is made, use the shared one.
            LOCAL.with(|m| m.borrow_mut().insert(self.id, Own::Connecting));
            let (id, link, timer) = (self.id, self.link.clone(), self.timer());
            tokio::spawn(async move {
                let made = link.connect(timer).await;
                let own = match made {
                    Ok(c) => Own::Ready(c),
                    Err(e) => {
                        tracing::debug!(error = %e, "a worker's own Redis connection failed; the shared one serves");
                        Own::Failed(Instant::now())
                    }
                };
                LOCAL.with(|m| m.borrow_mut().insert(id, own));
            });
        }
        Ok(fallback)
    }

    /// Run an idempotent call; if it fails on a broken connection, run it once more on a fresh
    /// one (a script that judges and stores, run twice, stores once: the second run sees the
    /// first's record). A call that still fails that way marks the store down.
    pub async fn idempotent<T, F, Fut>(&self, call: F) -> StoreResult<T>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = StoreResult<T>>,
    {
        let first = call(self.conn()?).await;
        let e = match first {
            Ok(v) => {
                self.set_up(true);
                return Ok(v);
            }
            Err(e) if is_broken(&e) => e,
            Err(e) => return Err(e),
        };
        tracing::debug!(error = %e, "a Redis call failed on a broken connection; trying once more");
        // A worker's own connection may be the broken one: the shared one reconnects as
        // well, and this thread makes a fresh own one later.
        LOCAL.with(|m| m.borrow_mut().insert(self.id, Own::Failed(Instant::now())));
        match call(self.conn()?).await {
            Ok(v) => {
                self.set_up(true);
                Ok(v)
            }
            Err(e) => {
                if is_broken(&e) {
                    self.set_up(false);
                }
                Err(e)
            }
        }
    }

    /// After a write on `conn`: wait for `[redis] wait_replicas` replicas to have it (nothing
    /// when 0). Fewer within `wait_timeout_ms` fails the write: it may not survive a failover.
    ///
    /// `fence`, a key in the written key's slot: written just before the WAIT, on the same
    /// connection. WAIT counts the writes of the connection it is sent on; a write resent on a
    /// fresh connection after its reply was lost finds itself recorded and writes nothing,
    /// and the fence makes this connection's offset pass the first attempt's, whichever
    /// connection that was. On a cluster the pair goes to the fence's master only, so a write
    /// waits for its own shard's replicas. Without a fence (the pinger), WAIT goes where
    /// redis-rs sends it: on a cluster, every master.
    pub async fn replicated(&self, conn: &mut Conn, fence: Option<&str>) -> StoreResult<()> {
        let want = self.config.wait_replicas;
        if want == 0 {
            return Ok(());
        }
        let ms = self.config.wait_timeout.as_millis() as u64;
        let got: i64 = match fence {
            Some(f) => {
                let (got,): (i64,) = redis::pipe()
                    .cmd("SET")
                    .arg(f)
                    .arg(1)
                    .arg("PX")
                    .arg(10_000)
                    .ignore()
                    .cmd("WAIT")
                    .arg(want)
                    .arg(ms)
                    .query_async(conn)
                    .await?;
                got
            }
            None => {
                redis::cmd("WAIT")
                    .arg(want)
                    .arg(ms)
                    .query_async(conn)
                    .await?
            }
        };
        if got < i64::from(want) {
            return Err(err(
                redis::ErrorKind::Io,
                format!("only {got} of the {want} replicas (wait_replicas) acknowledged the write"),
            ));
        }
        Ok(())
    }

    /// A client for a pub/sub connection to a single node.
    pub fn single_client(&self) -> Option<redis::Client> {
        match &self.link {
            Link::Single(c) => Some(c.clone()),
            Link::Cluster(_) => None,
        }
    }

    /// A cluster client that speaks RESP3 and hands pushes (sharded pub/sub messages) to
    /// `on_push`.
    pub fn push_cluster_client(
        &self,
        on_push: impl redis::aio::AsyncPushSender,
    ) -> StoreResult<ClusterClient> {
        let mut b = ClusterClientBuilder::new(self.config.nodes())
            .connection_timeout(TIMEOUT)
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(on_push);
        if let Some(c) = &self.certs {
            b = b.certs(c.clone());
        }
        b.build()
    }
}

/// Why a check refused a store.
enum Refusal {
    /// Not now: try again.
    Later(String),
    /// Never, with what to do.
    Never(String),
}

mod migration;
