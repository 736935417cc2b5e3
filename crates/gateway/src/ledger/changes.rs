//! The ledger's output, the change feed: every status change the ledger accepts, as it happens, for whoever listens
//! in this process (per-task streams close on a terminal change; `/events` clients see them
//! all). The in-process ledger publishes here directly. The Redis ledger's apply script
//! publishes each change on its partition's channel in the same step that records it, and
//! every replica relays every partition's channel here, so a change ingested on one replica
//! reaches listeners on all of them. On a cluster the channels are sharded (SPUBLISH /
//! SSUBSCRIBE): a change travels to the replicas subscribed on its partition's master only,
//! not over the cluster bus to every node, as plain pub/sub would.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, watch};

use crate::protocol::task::{Refusal, Status};
use crate::store::Store;

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

/// One update the ledger refused: what was recorded stays, and this says what was offered and
/// why not (`event: task.transition.refused` on `/events`, for clients that see every task).
#[derive(Debug, Clone)]
pub struct Refused {
    /// The route name of the agent that offered the update.
    pub agent: Arc<str>,
    /// The agent the task is recorded under: `agent`, except for a `foreign_agent` refusal
    /// (whose event only a client that may use both agents gets).
    pub recorded_agent: Arc<str>,
    /// The task it was about.
    pub task_id: Arc<str>,
    /// The recorded status, which stands.
    pub recorded: Status,
    /// The status the update offered.
    pub offered: Status,
    /// Why the state machine refused it.
    pub reason: Refusal,
    /// When, as RFC 3339.
    pub at: Arc<str>,
}

/// What the feed carries: news the ledger took, and news it refused.
#[derive(Debug, Clone)]
pub enum News {
    /// An accepted status change.
    Changed(Change),
    /// A refused update.
    Refused(Refused),
}

/// Listeners that fall this far behind lose changes (`Lagged`) rather than hold memory.
const CAPACITY: usize = 4096;

/// Called, synchronously, with every terminal change (the stream hub closes the task's stream).
pub type TerminalHook = Box<dyn Fn(&Change) + Send + Sync>;

/// Accepted changes, broadcast within this process (see the module doc).
pub struct ChangeFeed {
    tx: broadcast::Sender<Arc<News>>,
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
            let _ = self.tx.send(Arc::new(News::Changed(change)));
        }
    }

    /// Whether a refusal has anyone to hear it (no terminal hook: nothing closes on one).
    pub fn wants_refusals(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Hand a refused update to every listener.
    pub fn publish_refused(&self, refused: Refused) {
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(Arc::new(News::Refused(refused)));
        }
    }

    /// Hand news decoded from the Redis channel on (see [`decode`]).
    fn publish_news(&self, news: News) {
        match news {
            News::Changed(c) => self.publish(c),
            News::Refused(r) => self.publish_refused(r),
        }
    }

    /// Hear everything published from now on (a listener that falls behind loses news).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<News>> {
        self.tx.subscribe()
    }
}

/// The third line of a published refusal, where a change has its status: a replica that does
/// not know refusals reads no status there and drops the message, so the channel needs no new
/// version for them.
pub const REFUSED_MARK: &str = "~refused";

/// A published change: `agent \n task_id \n STATUS \n owner \n task` (owner empty for none;
/// client names and JWT subjects hold no line break). A published refusal:
/// `agent \n task_id \n ~refused \n reason \n RECORDED OFFERED at recorded_agent`.
pub fn decode(msg: &[u8]) -> Option<News> {
    let mut parts = msg.splitn(5, |&b| b == b'\n');
    let agent = std::str::from_utf8(parts.next()?).ok()?;
    let task_id = std::str::from_utf8(parts.next()?).ok()?;
    let third = std::str::from_utf8(parts.next()?).ok()?;
    let fourth = std::str::from_utf8(parts.next()?).ok()?;
    let rest = parts.next()?;
    if third == REFUSED_MARK {
        let mut f = std::str::from_utf8(rest).ok()?.splitn(4, ' ');
        let (recorded, offered, at, recorded_agent) = (f.next()?, f.next()?, f.next()?, f.next()?);
        return Some(News::Refused(Refused {
            agent: agent.into(),
            recorded_agent: recorded_agent.into(),
            task_id: task_id.into(),
            recorded: Status::parse(recorded)?,
            offered: Status::parse(offered)?,
            reason: Refusal::parse(fourth)?,
            at: at.into(),
        }));
    }
    Some(News::Changed(Change {
        agent: agent.into(),
        task_id: task_id.into(),
        status: Status::parse(third)?,
        owner: (!fourth.is_empty()).then(|| fourth.into()),
        task: Bytes::copy_from_slice(rest),
    }))
}

/// Relay every partition's channel into `feed` until `stop`, reconnecting (with backoff)
/// whenever the connection drops, e.g. when Redis restarts. Changes published while
/// disconnected are missed: pub/sub is not a queue (webhooks, which must not miss any, use the
/// durable queue).
pub async fn relay_redis(
    store: Arc<Store>,
    feed: Arc<ChangeFeed>,
    mut stop: watch::Receiver<bool>,
) {
    let chans: Vec<String> = store.keys.change_channels().map(str::to_owned).collect();
    let mut backoff = Duration::from_millis(100);
    loop {
        if *stop.borrow() {
            return;
        }
        let session = async {
            match store.single_client() {
                Some(client) => relay_single(client, &chans, &feed).await,
                None => relay_cluster(&store, &chans, &feed).await,
            }
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
                Ok(()) => tracing::warn!("Redis change channels closed; reconnecting"),
                Err(e) => tracing::warn!(error = %e, "Redis change channels failed; reconnecting"),
            },
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// One node: plain pub/sub on one connection, every partition's channel.
async fn relay_single(
    client: redis::Client,
    chans: &[String],
    feed: &ChangeFeed,
) -> redis::RedisResult<()> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(chans).await?;
    feed.set_relayed(true);
    tracing::debug!(channels = chans.len(), "relaying ledger changes from Redis");
    let mut messages = pubsub.on_message();
    use futures_util::StreamExt;
    while let Some(msg) = messages.next().await {
        if let Some(n) = decode(msg.get_payload_bytes()) {
            feed.publish_news(n);
        }
    }
    Ok(())
}

/// A cluster: sharded pub/sub, one SSUBSCRIBE per partition (each channel is in its
/// partition's slot, on that slot's master). Messages are handed to the feed as they arrive,
/// in the client's push callback. When a slot moves, its master ends the subscription
/// (`sunsubscribe`); the channel is subscribed again, on the slot's new master.
async fn relay_cluster(
    store: &Store,
    chans: &[String],
    feed: &Arc<ChangeFeed>,
) -> redis::RedisResult<()> {
    use redis::PushKind;
    let lost = Arc::new((
        std::sync::Mutex::new(Vec::<String>::new()),
        tokio::sync::Notify::new(),
    ));
    let (to_feed, to_lost) = (feed.clone(), lost.clone());
    let wanted: std::collections::HashSet<String> = chans.iter().cloned().collect();
    let on_push = move |push: redis::PushInfo| -> Result<(), std::convert::Infallible> {
        let text = |v: &redis::Value| redis::from_redis_value_ref::<Vec<u8>>(v).ok();
        match push.kind {
            PushKind::SMessage => {
                if let Some(n) = push.data.get(1).and_then(text).as_deref().and_then(decode) {
                    to_feed.publish_news(n);
                }
            }
            PushKind::SUnsubscribe => {
                let chan = push
                    .data
                    .first()
                    .and_then(text)
                    .and_then(|c| String::from_utf8(c).ok());
                if let Some(chan) = chan.filter(|c| wanted.contains(c)) {
                    // At most one entry per channel: the list stays within the partitions.
                    let mut lost = to_lost.0.lock().unwrap_or_else(|p| p.into_inner());
                    if !lost.contains(&chan) {
                        lost.push(chan);
                    }
                    drop(lost);
                    to_lost.1.notify_one();
                }
            }
            PushKind::Disconnection => {
                to_feed.set_relayed(false);
                to_lost.1.notify_one();
            }
            _ => {}
        }
        Ok(())
    };
    let client = store.push_cluster_client(on_push)?;
    let mut conn = client.get_async_connection().await?;
    for c in chans {
        conn.ssubscribe(c).await?;
    }
    feed.set_relayed(true);
    tracing::debug!(
        channels = chans.len(),
        "relaying ledger changes from Redis Cluster"
    );
    loop {
        lost.1.notified().await;
        // Give the cluster a moment to settle on the slot's new owner.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let again: Vec<String> =
            std::mem::take(&mut *lost.0.lock().unwrap_or_else(|p| p.into_inner()));
        if !feed.is_relayed() {
            // The client lost a connection: it subscribes again by itself once reconnected,
            // but changes published meanwhile were missed; start over to say so.
            return Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "a cluster connection of the change relay dropped",
            )));
        }
        for c in again {
            tracing::info!(channel = %c, "change channel moved with its slot; subscribing again");
            conn.ssubscribe(&c).await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_and_refusals_decode_from_the_channel() {
        let Some(News::Changed(c)) = decode(b"a\nt-1\nWORKING\nalice\n{\"x\":1}") else {
            panic!("a change")
        };
        assert_eq!(
            (
                &*c.agent,
                &*c.task_id,
                c.status,
                c.owner.as_deref(),
                &c.task[..]
            ),
            (
                "a",
                "t-1",
                Status::Working,
                Some("alice"),
                &b"{\"x\":1}"[..]
            )
        );
        let msg = b"b\nt-1\n~refused\nforeign_agent\nCOMPLETED WORKING 2026-11-30T00:00:00.000Z a";
        let Some(News::Refused(r)) = decode(msg) else {
            panic!("a refusal")
        };
        assert_eq!(
            (
                &*r.agent,
                &*r.recorded_agent,
                &*r.task_id,
                r.recorded,
                r.offered,
                r.reason,
                &*r.at
            ),
            (
                "b",
                "a",
                "t-1",
                Status::Completed,
                Status::Working,
                Refusal::ForeignAgent,
                "2026-11-30T00:00:00.000Z"
            )
        );
        // Malformed: dropped, never half-read.
        for bad in [
            &b"b\nt-1\n~refused\nrude\nCOMPLETED WORKING 2026 a"[..],
            b"b\nt-1\n~refused\nstale\nCOMPLETED",
            b"a\nt\nDONE\n\n{}",
        ] {
            assert!(decode(bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_replica_of_the_previous_format_drops_a_refusal() {
        // The previous release's decode: the third line must be a status.
        let old = |msg: &[u8]| {
            let mut parts = msg.splitn(5, |&b| b == b'\n');
            let _ = (parts.next()?, parts.next()?);
            Status::parse(std::str::from_utf8(parts.next()?).ok()?)
        };
        assert!(
            old(b"b\nt-1\n~refused\nterminal\nCOMPLETED WORKING 2026-11-30T00:00:00.000Z b")
                .is_none()
        );
        assert!(old(b"a\nt\nWORKING\n\n{}").is_some());
    }
}
