//! State shared by the handle, the server and the background tasks. Every lock here is a
//! `std::sync::Mutex` held for a few map operations and never across an await.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use hyper::header::HeaderValue;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::notify::{self, Delivery, Stats, Target};
use super::state::{Cancel, Store};
use super::{AgentOptions, NewArtifact, Progress, Recorded, Reply, Route};

/// Locks even if a panicking holder poisoned the mutex: the data stays usable for tests.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The card as served, pre-serialized so a card GET copies nothing.
pub(crate) struct CardSnapshot {
    pub(crate) body: Bytes,
    pub(crate) etag: HeaderValue,
    pub(crate) max_age: Option<u64>,
    pub(crate) cache_control: Option<HeaderValue>,
    pub(crate) agent_id: String,
    pub(crate) notify: Option<Arc<Target>>,
}

impl CardSnapshot {
    fn new(card: &Value, etag: HeaderValue, max_age: Option<u64>) -> Self {
        CardSnapshot {
            body: Bytes::from(serde_json::to_vec(card).unwrap_or_default()),
            etag,
            max_age,
            cache_control: max_age
                .and_then(|n| HeaderValue::from_str(&format!("max-age={n}")).ok()),
            agent_id: card
                .get("agent_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            notify: Target::from_card(card).map(Arc::new),
        }
    }

    fn with_max_age(&self, max_age: Option<u64>) -> Self {
        CardSnapshot {
            body: self.body.clone(),
            etag: self.etag.clone(),
            max_age,
            cache_control: max_age
                .and_then(|n| HeaderValue::from_str(&format!("max-age={n}")).ok()),
            agent_id: self.agent_id.clone(),
            notify: self.notify.clone(),
        }
    }
}

/// A fresh strong ETag: every `set_card` is a new representation, even of equal JSON.
fn new_etag() -> HeaderValue {
    HeaderValue::from_str(&format!("\"{}\"", uuid::Uuid::new_v4().simple()))
        .unwrap_or_else(|_| HeaderValue::from_static("\"0\""))
}

/// Once-replies queued per route, at most this many (later ones are ignored).
const MAX_ONCE: usize = 1024;

#[derive(Default)]
struct RouteScript {
    once: VecDeque<Reply>,
    always: Option<Reply>,
}

/// Scripted replies. `active` lets the unscripted hot path skip the lock entirely.
#[derive(Default)]
pub(crate) struct Scripts {
    active: AtomicBool,
    map: Mutex<HashMap<Route, RouteScript>>,
}

impl Scripts {
    pub(crate) fn set(&self, route: Route, reply: Reply) {
        lock(&self.map).entry(route).or_default().always = Some(reply);
        self.active.store(true, Ordering::Release);
    }

    pub(crate) fn push_once(&self, route: Route, reply: Reply) {
        let mut map = lock(&self.map);
        let script = map.entry(route).or_default();
        if script.once.len() < MAX_ONCE {
            script.once.push_back(reply);
        }
        self.active.store(true, Ordering::Release);
    }

    pub(crate) fn clear(&self) {
        let mut map = lock(&self.map);
        map.clear();
        self.active.store(false, Ordering::Release);
    }

    /// The reply for the next request to `route`: a once-reply, else the persistent one.
    pub(crate) fn next(&self, route: Route) -> Reply {
        if !self.active.load(Ordering::Acquire) {
            return Reply::Default;
        }
        let mut map = lock(&self.map);
        map.get_mut(&route)
            .and_then(|s| s.once.pop_front().or_else(|| s.always.clone()))
            .unwrap_or(Reply::Default)
    }
}

/// Everything the agent's tasks and handle share.
pub(crate) struct Shared {
    pub(crate) addr: SocketAddr,
    pub(crate) base_url: String,
    pub(crate) card_path: String,
    pub(crate) progress: Option<Progress>,
    pub(crate) ping_every: Duration,
    card: Mutex<Arc<CardSnapshot>>,
    pub(crate) card_not_modified: AtomicUsize,
    pub(crate) store: Mutex<Store>,
    /// The official A2A tasks (an A2A agent's).
    pub(crate) a2a: Mutex<super::official::Tasks>,
    pub(crate) protocol: super::Protocol,
    pub(crate) scripts: Scripts,
    ring: Mutex<VecDeque<Recorded>>,
    record_capacity: usize,
    pub(crate) counts: [AtomicUsize; Route::COUNT],
    stop: watch::Sender<bool>,
    notify_tx: mpsc::Sender<Delivery>,
    pub(crate) notify_stats: Arc<Stats>,
}

impl Shared {
    /// Builds the shared state; the receiver is for the notification worker.
    pub(crate) fn new(opts: AgentOptions, addr: SocketAddr) -> (Self, mpsc::Receiver<Delivery>) {
        let ip = match addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let (notify_tx, notify_rx) = mpsc::channel(notify::QUEUE);
        let base_url = format!("http://{}", SocketAddr::new(ip, addr.port()));
        // An A2A card names the agent's own URLs: built here, once the port is known, unless
        // the caller gave a whole card (one with interfaces).
        let name = opts.card["name"].as_str().unwrap_or("Sample A2A Agent");
        let card = match (&opts.protocol, opts.card.get("supportedInterfaces")) {
            (super::Protocol::A2a, None) => super::official::a2a_card(name, &base_url),
            (super::Protocol::A2aV0_3, None) if opts.card.get("url").is_none() => {
                super::official::a2a_card_v0_3(name, &base_url)
            }
            _ => opts.card.clone(),
        };
        let card = CardSnapshot::new(&card, new_etag(), opts.card_max_age);
        let shared = Shared {
            addr,
            base_url,
            a2a: Mutex::new(super::official::Tasks::new(opts.max_tasks)),
            protocol: opts.protocol,
            card_path: opts.card_path,
            progress: opts.progress,
            ping_every: opts.ping_every,
            card: Mutex::new(Arc::new(card)),
            card_not_modified: AtomicUsize::new(0),
            store: Mutex::new(Store::new(opts.max_tasks)),
            scripts: Scripts::default(),
            ring: Mutex::new(VecDeque::new()),
            record_capacity: opts.record_capacity,
            counts: Default::default(),
            stop: watch::Sender::new(false),
            notify_tx,
            notify_stats: Arc::default(),
        };
        (shared, notify_rx)
    }

    pub(crate) fn card(&self) -> Arc<CardSnapshot> {
        lock(&self.card).clone()
    }

    pub(crate) fn set_card(&self, card: Value) {
        let mut slot = lock(&self.card);
        *slot = Arc::new(CardSnapshot::new(&card, new_etag(), slot.max_age));
    }

    pub(crate) fn set_card_max_age(&self, secs: Option<u64>) {
        let mut slot = lock(&self.card);
        *slot = Arc::new(slot.with_max_age(secs));
    }

    /// Tells every task of this agent to stop (idempotent).
    pub(crate) fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// A receiver that sees `true` once the agent stops.
    pub(crate) fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Resolves when the agent stops.
    pub(crate) async fn stopped(&self) {
        let mut rx = self.stop.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Queues an official A2A task's push to each of its configs (never blocks): the
    /// StreamResponse `{"task": ...}` in 1.0, the bare Task of a2a.json in 0.3.
    pub(crate) fn push_a2a(&self, task: &Value) {
        let id = task["id"].as_str().unwrap_or("");
        let configs = lock(&self.a2a).push.get(id).cloned().unwrap_or_default();
        if configs.is_empty() {
            return;
        }
        let body = if self.protocol == super::Protocol::A2aV0_3 {
            super::v0_3::task_out(super::v0_3::Spelling::Json, task)
        } else {
            serde_json::json!({ "task": task })
        };
        let body = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
        for c in configs {
            let target = Target::a2a(c["url"].as_str().unwrap_or(""), c["token"].as_str());
            let delivery = Delivery {
                target: Arc::new(target),
                body: body.clone(),
            };
            if self.notify_tx.try_send(delivery).is_err() {
                self.notify_stats.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Queues a push notification if the current card asks for them (never blocks).
    fn notify(&self, task: &Value) {
        if let Some(target) = self.card().notify.clone() {
            let delivery = Delivery {
                target,
                body: notify::payload(task),
            };
            if self.notify_tx.try_send(delivery).is_err() {
                self.notify_stats.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Forced status change (scripting); see `SampleAgent::set_status`.
    pub(crate) fn set_status(&self, task_id: &str, status: &str, extra: Value) -> Option<Value> {
        self.transition(task_id, None, status, extra)
    }

    /// Status change, only from `from` when given; notifies inside the store lock so
    /// notifications leave in the order the changes happened.
    pub(crate) fn transition(
        &self,
        task_id: &str,
        from: Option<&str>,
        status: &str,
        extra: Value,
    ) -> Option<Value> {
        let mut store = lock(&self.store);
        let task = store.set_status(task_id, from, status, extra)?;
        self.notify(&task);
        Some(task)
    }

    /// The spec's cancel; a cancelled task's open streams end.
    pub(crate) fn cancel(&self, task_id: &str) -> Cancel {
        let mut store = lock(&self.store);
        let outcome = store.cancel(task_id);
        if let Cancel::Cancelled(task) = &outcome {
            self.notify(task);
            store.close_streams(task_id);
        }
        outcome
    }

    pub(crate) fn add_artifact(
        &self,
        task_id: &str,
        artifact: NewArtifact,
        description: Option<&str>,
    ) -> String {
        let artifact_id = uuid::Uuid::new_v4().to_string();
        lock(&self.store).add_artifact(
            task_id,
            &artifact_id,
            artifact,
            &self.base_url,
            description,
        );
        artifact_id
    }

    pub(crate) fn push_raw(&self, task_id: &str, raw: Bytes) {
        lock(&self.store).send(task_id, &raw);
    }

    /// Keeps the request in the ring (if recording is on).
    pub(crate) fn record(&self, rec: impl FnOnce() -> Recorded) {
        if self.record_capacity == 0 {
            return;
        }
        let rec = rec();
        let mut ring = lock(&self.ring);
        if ring.len() >= self.record_capacity {
            ring.pop_front();
        }
        ring.push_back(rec);
    }

    pub(crate) fn recorded(&self) -> Vec<Recorded> {
        lock(&self.ring).iter().cloned().collect()
    }
}
