//! The change feed: every status change the ledger accepts, as it happens, for whoever listens
//! in this process (per-task streams close on a terminal change; `/events` clients see them
//! all). The in-process ledger publishes here directly. The Redis ledger's apply script
//! PUBLISHes each change in the same step that records it, and every replica relays that
//! channel here, so a change ingested on one replica reaches listeners on all of them.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, watch};

use crate::protocol::task::Status;

/// One accepted status change.
#[derive(Debug, Clone)]
pub struct Change {
    /// The route name of the agent the task belongs to.
    pub agent: Arc<str>,
    /// The task that changed.
    pub task_id: Arc<str>,
    /// Its status after the change.
    pub status: Status,
    /// The client that created it (`/events` shows a client its own tasks only).
    pub owner: Option<Arc<str>>,
    /// The Task document as recorded.
    pub task: Bytes,
}

/// Listeners that fall this far behind lose changes (`Lagged`) rather than hold memory.
const CAPACITY: usize = 4096;

/// Called, synchronously, with every terminal change (the stream hub closes the task's stream).
pub type TerminalHook = Box<dyn Fn(&Change) + Send + Sync>;

/// Accepted changes, broadcast within this process (see the module doc).
pub struct ChangeFeed {
    tx: broadcast::Sender<Arc<Change>>,
    /// Not a listener on the channel: a listener task would be woken (across threads) for
    /// every change the ledger accepts, which costs the create path several microseconds.
    on_terminal: std::sync::OnceLock<TerminalHook>,
    /// With Redis: whether this replica is subscribed to the change channel right now (changes
    /// published while it is not are missed, so it is not ready without it).
    relayed: std::sync::atomic::AtomicBool,
}

impl Default for ChangeFeed {
    fn default() -> Self {
        ChangeFeed::new()
    }
}

impl ChangeFeed {
    /// A feed with no listener and no terminal hook, not yet relayed.
    pub fn new() -> ChangeFeed {
        ChangeFeed {
            tx: broadcast::channel(CAPACITY).0,
            on_terminal: std::sync::OnceLock::new(),
            relayed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// With Redis: whether this replica is subscribed to the change channel now.
    pub fn is_relayed(&self) -> bool {
        self.relayed.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set_relayed(&self, on: bool) {
        self.relayed.store(on, std::sync::atomic::Ordering::Release);
    }

    /// Set the hook for terminal changes (once).
    pub fn on_terminal(&self, hook: TerminalHook) {
        let _ = self.on_terminal.set(hook);
    }

    /// Whether a change in `status` has anyone to hear it: the ledger builds a [`Change`]
    /// only then.
    pub fn wanted(&self, status: Status) -> bool {
        (status.is_terminal() && self.on_terminal.get().is_some()) || self.tx.receiver_count() > 0
    }

    /// Run the terminal hook on a terminal change, then hand the change to every listener.
    pub fn publish(&self, change: Change) {
        if change.status.is_terminal() {
            if let Some(hook) = self.on_terminal.get() {
                hook(&change);
            }
        }
        if self.tx.receiver_count() > 0 {
            // A listener that left meanwhile is not an error.
            let _ = self.tx.send(Arc::new(change));
        }
    }

    /// Hear every change published from now on (a listener that falls behind loses changes).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.tx.subscribe()
    }
}

/// The Redis channel of a prefix's changes. Versioned with its message format (see [`decode`]):
/// replicas of different formats, side by side during a rolling upgrade, then do not hear each
/// other's changes (their `/events` clients miss the other side's until the upgrade is done)
/// rather than misread them. Version 2 added the owner.
pub fn channel(prefix: &str) -> String {
    format!("{prefix}changes:2")
}

/// A published change: `agent \n task_id \n STATUS \n owner \n task` (owner empty for none;
/// client names and JWT subjects hold no line break).
pub fn decode(msg: &[u8]) -> Option<Change> {
    let mut parts = msg.splitn(5, |&b| b == b'\n');
    let agent = std::str::from_utf8(parts.next()?).ok()?;
    let task_id = std::str::from_utf8(parts.next()?).ok()?;
    let status = Status::parse(std::str::from_utf8(parts.next()?).ok()?)?;
    let owner = std::str::from_utf8(parts.next()?).ok()?;
    let task = Bytes::copy_from_slice(parts.next()?);
    Some(Change {
        agent: agent.into(),
        task_id: task_id.into(),
        status,
        owner: (!owner.is_empty()).then(|| owner.into()),
        task,
    })
}

/// Relay the Redis channel into `feed` until `stop`, reconnecting (with backoff) whenever the
/// connection drops, e.g. when Redis restarts. Changes published while disconnected are missed:
/// pub/sub is not a queue (webhooks, which must not miss any, use the durable queue).
pub async fn relay_redis(
    url: String,
    prefix: String,
    feed: Arc<ChangeFeed>,
    mut stop: watch::Receiver<bool>,
) {
    let chan = channel(&prefix);
    let mut backoff = Duration::from_millis(100);
    loop {
        if *stop.borrow() {
            return;
        }
        let session = async {
            let client = redis::Client::open(url.as_str())?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&chan).await?;
            feed.set_relayed(true);
            tracing::debug!(channel = %chan, "relaying ledger changes from Redis");
            let mut messages = pubsub.on_message();
            use futures_util::StreamExt;
            while let Some(msg) = messages.next().await {
                if let Some(c) = decode(msg.get_payload_bytes()) {
                    feed.publish(c);
                }
            }
            Ok::<(), redis::RedisError>(())
        };
        let outcome = tokio::select! {
            r = session => Some(r),
            _ = stop.changed() => None,
        };
        if feed.is_relayed() {
            // It was up: the next attempt need not wait long.
            backoff = Duration::from_millis(100);
        }
        feed.set_relayed(false);
        match outcome {
            None => return,
            Some(r) => match r {
                Ok(()) => tracing::warn!("Redis change channel closed; reconnecting"),
                Err(e) => tracing::warn!(error = %e, "Redis change channel failed; reconnecting"),
            },
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
