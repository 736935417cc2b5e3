//! The delivery queue, behind one narrow trait with two backends: Redis (shared by replicas,
//! survives a gateway crash) and in-process (the embedded default: durable only while the
//! process lives).
//!
//! Order is promised per *lane*, one (subscriber, task) pair: a lane holds its messages in
//! order, and at most one *token* per lane is ever out (in the ready queue, held by a worker,
//! waiting in the retry set, or parked while its subscriber is disabled). So no two workers hold
//! the same lane, and a lane's messages go out one at a time. The ledger appends to lanes in the
//! same atomic step that accepts a status change ([`Outbox`]), so nothing acknowledged is
//! unqueued.

mod memory;
mod redis;

pub use self::redis::{webhook_prefix, RedisQueue};

/// The newest format version of queued messages (lane entries) this version writes and reads.
/// A reader that finds a newer one leaves it for a replica that knows it (see
/// `worker::deliver`), so replicas of two versions can share a queue during a rolling upgrade
/// without mangling a delivery. 0: no version (written before versions); 1: a version; 2: the
/// trace context follows the version. An entry without a trace context is still written as 1,
/// so a replica of the previous release delivers it during the upgrade.
pub const FORMAT: u32 = 2;
pub use memory::MemoryQueue;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;

use crate::config::{AgentConfig, SubscriberConfig};
use crate::protocol::task::Head;

/// Why the delivery queue could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The store failed, refused the write, or answered wrongly: of what kind, never with the
    /// store's own words (those are logged where the failure is classified).
    #[error("delivery queue unavailable: {0}")]
    Store(crate::store::Failure),
    /// No store could be made or connected (`RedisQueue::connect`, for tools and tests).
    #[error("delivery queue unavailable: {0}")]
    Connect(#[from] crate::store::StoreError),
}

/// What every [`DeliveryQueue`] method returns: boxed, so the trait can be used as `dyn`.
pub type QueueFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, QueueError>> + Send + 'a>>;

/// One notification to one subscriber, as queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The `webhook-id`: one per status change, the same on every retry and for every subscriber,
    /// so receivers can drop the duplicates at-least-once delivery allows.
    pub msg_id: String,
    /// When the change was queued (unix ms), for the delivery latency metric.
    pub enqueued_ms: i64,
    /// The spec's push-notification body, sent byte for byte.
    pub payload: Bytes,
    /// The entry's format version (1 or 2 when written by this version).
    pub version: u32,
    /// The W3C trace context of the change (`traceparent[ tracestate]`), when it was traced:
    /// the delivery span's parent, and what the subscriber's `traceparent` continues.
    pub trace: Option<Box<str>>,
}

/// A lane's token as a worker holds it.
#[derive(Debug, Clone)]
pub struct Job {
    /// Backend handle of the token (a stream entry id in Redis).
    pub token: String,
    /// The lane's subscriber.
    pub subscriber: Arc<str>,
    /// The lane's task.
    pub task_id: Arc<str>,
    /// Attempts already made for the lane's first message.
    pub attempts: u32,
    /// The lane's first message; `None` if the lane is empty (the token is then just retired)
    /// or its first entry could not be read (`unreadable`).
    pub message: Option<Message>,
    /// The lane's first entry exists but does not parse: the worker dead-letters it.
    pub unreadable: bool,
    /// The worker the token is held for (only that worker may finish it).
    pub consumer: Arc<str>,
}

/// How a worker ends its hold on a job.
#[derive(Debug, Clone)]
pub enum Finish {
    /// The first message went out: drop it and let the lane's next one go.
    Delivered,
    /// Try the first message again at `due_ms` (unix ms), `attempts` made so far.
    Retry {
        /// When to try again (unix ms).
        due_ms: i64,
        /// Attempts made so far.
        attempts: u32,
    },
    /// Attempts exhausted: move the first message to the dead letters.
    Dead {
        /// Attempts made.
        attempts: u32,
        /// What the last attempt got.
        error: String,
    },
    /// The subscriber is disabled: park the lane until it is enabled (`reason` is recorded if
    /// this is what disabled it, i.e. a 410).
    Park {
        /// Why the subscriber was disabled, when this job's answer (a 410) disabled it.
        reason: Option<String>,
    },
}

/// Whether the finish took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// The finish was recorded.
    Done,
    /// The job had been taken over by another worker (its holder was presumed dead) or was
    /// already finished: nothing changed. After a successful send this means the message was
    /// (or will be) delivered twice.
    Stale,
}

/// An exhausted delivery.
#[derive(Debug, Clone, Serialize)]
pub struct DeadLetter {
    /// The `webhook-id` of the message.
    pub msg_id: String,
    /// The subscriber it was for.
    pub subscriber: String,
    /// The task it was about.
    pub task_id: String,
    /// Attempts made before giving up.
    pub attempts: u32,
    /// What the last attempt got (`HTTP 503`, a timeout...).
    pub last_error: String,
    /// When it was dead-lettered (RFC 3339).
    pub failed_at: String,
    /// The notification body, as JSON.
    pub payload: serde_json::Value,
}

/// Queue sizes, for `/metrics` and the admin API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Messages in lanes (waiting, in flight or scheduled for retry).
    pub queued: u64,
    /// Lanes waiting in the retry set.
    pub retrying: u64,
    /// Dead letters held.
    pub dead: u64,
}

/// The queue as workers and the admin API see it. The enqueue side is not here: it belongs to the
/// ledger's atomic apply (see [`Outbox`]).
pub trait DeliveryQueue: Send + Sync + 'static {
    /// Up to `max` ready jobs for `consumer`, waiting up to `wait` for the first.
    fn take<'a>(
        &'a self,
        consumer: &'a str,
        max: usize,
        wait: Duration,
    ) -> QueueFuture<'a, Vec<Job>>;
    /// Jobs held longer than `min_idle` by a worker presumed dead, now held by `consumer`.
    fn reclaim<'a>(
        &'a self,
        consumer: &'a str,
        min_idle: Duration,
        max: usize,
    ) -> QueueFuture<'a, Vec<Job>>;
    /// End the hold on `job` the way the worker decided (see [`Finish`]).
    fn finish<'a>(&'a self, job: &'a Job, how: Finish) -> QueueFuture<'a, Finished>;
    /// Move up to `max` lanes whose retry is due back to the ready queue; how many moved.
    fn promote_due(&self, now_ms: i64, max: usize) -> QueueFuture<'_, usize>;
    /// Queue sizes.
    fn stats(&self) -> QueueFuture<'_, QueueStats>;
    /// The newest `limit` dead letters, newest first.
    fn dead_letters(&self, limit: usize) -> QueueFuture<'_, Vec<DeadLetter>>;
    /// Put up to `limit` dead letters (of one subscriber, or all) back at the end of their lanes.
    fn redrive<'a>(&'a self, subscriber: Option<&'a str>, limit: usize) -> QueueFuture<'a, usize>;
    /// Disabled subscribers and why.
    fn disabled(&self) -> QueueFuture<'_, Vec<(String, String)>>;
    /// Re-enable a subscriber: its parked lanes go back to the ready queue; how many.
    fn enable<'a>(&'a self, subscriber: &'a str) -> QueueFuture<'a, usize>;
}

/// What the delivery queue holds at most: the config's, read by
/// [`crate::config::WebhookConfig::queue_bounds`].
pub use crate::config::QueueBounds as Bounds;

impl Default for Bounds {
    fn default() -> Bounds {
        crate::config::WebhookConfig::default().queue_bounds()
    }
}

impl Bounds {
    /// Each partition's share, the partitions sharing every bound evenly (Redis).
    pub fn share(self, partitions: usize) -> Bounds {
        let p = partitions.max(1);
        Bounds {
            queued: self.queued.div_ceil(p),
            bytes: self.bytes.div_ceil(p),
            per_client: self.per_client.div_ceil(p),
            per_client_bytes: self.per_client_bytes.div_ceil(p),
        }
    }

    /// As the Redis scripts read them: "queued bytes per_client per_client_bytes".
    pub fn arg(self) -> String {
        format!(
            "{} {} {} {}",
            self.queued, self.bytes, self.per_client, self.per_client_bytes
        )
    }
}

/// Which subscribers follow which agent: what the ledger needs to queue a change's deliveries.
/// The routes are swapped whole by a config reload ([`Outbox::replace`]).
#[derive(Debug, Default)]
pub struct Outbox {
    routes: arc_swap::ArcSwap<HashMap<String, Arc<[Arc<str>]>>>,
    /// What the queue holds at most (`webhooks.max_queued`...); past it a change for the
    /// subscribers is not recorded, and push deliveries are left out.
    pub bounds: Bounds,
    /// Changes for a disabled subscriber go straight to the dead letters, which keep this many.
    pub max_dead: usize,
}

impl Outbox {
    /// The subscribers of each agent, from each subscriber's agent and protocol filters.
    pub fn new(
        agents: &[AgentConfig],
        subscribers: &[SubscriberConfig],
        bounds: Bounds,
        max_dead: usize,
    ) -> Outbox {
        Outbox {
            routes: arc_swap::ArcSwap::from_pointee(routes(agents, subscribers)),
            bounds,
            max_dead,
        }
    }

    /// The subscribers of an agent's changes (empty for none).
    pub fn subscribers(&self, agent: &str) -> Arc<[Arc<str>]> {
        self.routes
            .load()
            .get(agent)
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }

    /// New routes, from a reloaded config: changes recorded from now on go to these subscribers.
    pub fn replace(&self, agents: &[AgentConfig], subscribers: &[SubscriberConfig]) {
        self.routes.store(Arc::new(routes(agents, subscribers)));
    }
}

fn routes(
    agents: &[AgentConfig],
    subscribers: &[SubscriberConfig],
) -> HashMap<String, Arc<[Arc<str>]>> {
    agents
        .iter()
        .map(|a| {
            let subs: Arc<[Arc<str>]> = subscribers
                .iter()
                .filter(|s| s.follows(&a.name, a.protocol))
                .map(|s| Arc::from(s.name.as_str()))
                .collect();
            (a.name.clone(), subs)
        })
        .collect()
}

/// The `webhook-id` of a status change, less its `_{n}` suffix (the task's change number, which
/// the ledger appends: a task can come back to a state at the same `updated_at`, so status and
/// time alone do not name one change). Derived from what identifies the change, so the same
/// change always has the same id; a random id if the task id has characters a Standard
/// Webhooks id may not carry.
pub fn message_id_prefix(task_id: &str, head: Head) -> String {
    let plain = task_id.len() <= 128
        && task_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plain {
        format!("msg_{task_id}_{}_{}", head.status.as_str(), head.updated_ms)
    } else {
        format!("msg_{}", uuid::Uuid::new_v4().simple())
    }
}

/// The spec's push-notification body for a recorded Task document of ledger key `task_id` of
/// `agent`. An official A2A task's (its key is `{agent}/{id}`) also says `"protocol": "a2a"`
/// and its `agent`, since its id is only unique within the agent; a Clawpedia task's is
/// exactly the Clawpedia protocol's notification. The Redis apply script writes the same.
pub fn payload(timestamp: &str, agent: &str, task_id: &str, task: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(task.len() + 120);
    out.extend_from_slice(b"{\"event_type\":\"task.status.updated\",");
    if task_id.contains('/') {
        // Route names are [A-Za-z0-9._-]: nothing to escape.
        out.extend_from_slice(b"\"protocol\":\"a2a\",\"agent\":\"");
        out.extend_from_slice(agent.as_bytes());
        out.extend_from_slice(b"\",");
    }
    out.extend_from_slice(b"\"timestamp\":\"");
    out.extend_from_slice(timestamp.as_bytes());
    out.extend_from_slice(b"\",\"data\":");
    out.extend_from_slice(task);
    out.push(b'}');
    out
}

/// The version field of a lane entry's first line: `1`, or `2 traceparent[ tracestate]`
/// (the Redis apply script writes what it is given after the time).
pub fn entry_version(trace: Option<&str>) -> std::borrow::Cow<'static, str> {
    match storable(trace) {
        Some(t) => format!("2 {t}").into(),
        None => "1".into(),
    }
}

/// The trace context a lane entry may carry: none for an empty one or one that would break the
/// entry's first line. One rule for both queues (the in-process one keeps it in [`Message`]).
pub fn storable(trace: Option<&str>) -> Option<&str> {
    trace.filter(|t| !t.is_empty() && !t.contains('\n'))
}

/// A lane entry as stored: `enqueued_ms version[ trace] \n msg_id \n payload` (the Redis apply
/// script writes the same form). A version 0 entry has no version; a reader of version 0 reads
/// a later entry whole (it sees an unparsable time, which it takes as 0).
pub fn encode_entry(
    enqueued_ms: i64,
    trace: Option<&str>,
    msg_id: &str,
    payload: &[u8],
) -> Vec<u8> {
    let version = entry_version(trace);
    let mut out = Vec::with_capacity(payload.len() + msg_id.len() + version.len() + 24);
    out.extend_from_slice(format!("{enqueued_ms} {version}\n").as_bytes());
    out.extend_from_slice(msg_id.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(payload);
    out
}

/// A lane entry, or `None` if it lacks its two line breaks (the same test the scripts apply, so
/// what the worker cannot read the scripts can drop).
pub fn decode_entry(entry: &[u8]) -> Option<Message> {
    let mut parts = entry.splitn(3, |&b| b == b'\n');
    let first = std::str::from_utf8(parts.next()?).unwrap_or("");
    let (time, rest) = first.split_once(' ').unwrap_or((first, "0"));
    let enqueued_ms = time.parse().unwrap_or(0);
    let (version, trace) = rest.split_once(' ').unwrap_or((rest, ""));
    // An unreadable version is a newer writer's business, not an old one's.
    let version = version.parse().unwrap_or(u32::MAX);
    let trace = (version == 2 && !trace.is_empty()).then(|| Box::from(trace));
    let msg_id = String::from_utf8_lossy(parts.next()?).into_owned();
    let payload = Bytes::copy_from_slice(parts.next()?);
    Some(Message {
        msg_id,
        enqueued_ms,
        payload,
        version,
        trace,
    })
}

/// The JSON value of a payload for the admin API (a payload is always JSON we built).
fn payload_value(payload: &[u8]) -> serde_json::Value {
    serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::task::Status;

    #[test]
    fn entries_round_trip_and_payloads_are_the_spec_shape() {
        let p = payload("2026-01-01T00:00:00.000Z", "a", "t", br#"{"task_id":"t"}"#);
        let v: serde_json::Value = serde_json::from_slice(&p).expect("json");
        assert_eq!(v["event_type"], "task.status.updated");
        assert_eq!(v["timestamp"], "2026-01-01T00:00:00.000Z");
        assert_eq!(v["data"]["task_id"], "t");
        assert!(
            v.get("protocol").is_none(),
            "a Clawpedia payload is unchanged"
        );
        let a2a = payload(
            "2026-01-01T00:00:00.000Z",
            "echo",
            "echo/t:1",
            br#"{"id":"t:1"}"#,
        );
        let a2a: serde_json::Value = serde_json::from_slice(&a2a).expect("json");
        assert_eq!(
            (a2a["protocol"].as_str(), a2a["agent"].as_str()),
            (Some("a2a"), Some("echo"))
        );
        assert_eq!(a2a["data"]["id"], "t:1");
        let e = encode_entry(42, None, "msg_a", &p);
        let m = decode_entry(&e).expect("decodes");
        assert_eq!((m.enqueued_ms, m.msg_id.as_str()), (42, "msg_a"));
        // Untraced: still version 1, which the previous release reads.
        assert_eq!((m.payload.as_ref(), m.version), (p.as_slice(), 1));
        assert_eq!(m.trace, None);
        // Traced: version 2, the context after it, a tracestate with spaces kept whole.
        let ctx = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 a=1, b=2";
        let e = encode_entry(43, Some(ctx), "msg_t", &p);
        let m = decode_entry(&e).expect("decodes");
        assert_eq!(
            (m.enqueued_ms, m.version, m.trace.as_deref()),
            (43, 2, Some(ctx))
        );
        assert_eq!(
            (m.msg_id.as_str(), m.payload.as_ref()),
            ("msg_t", p.as_slice())
        );
        // A context that would break the line is not stored.
        assert_eq!(entry_version(Some("x\ny")), "1");
        assert_eq!(storable(Some("")), None);
        assert_eq!(entry_version(Some("")), "1");
        assert!(decode_entry(b"x\nmsg").is_none());
        // Written before versions: version 0, read whole.
        let old = decode_entry(b"42\nmsg_b\n{}").expect("decodes");
        assert_eq!(
            (old.enqueued_ms, old.version, old.msg_id.as_str()),
            (42, 0, "msg_b")
        );
        // Written by a newer version: its version says so, whatever follows.
        let newer = decode_entry(b"42 7\nmsg_c\n{}").expect("decodes");
        assert_eq!(newer.version, 7);
    }

    #[test]
    fn message_ids_are_stable_and_header_safe() {
        let head = Head {
            status: Status::Working,
            updated_ms: 7,
        };
        let id = message_id_prefix("123e4567-e89b-12d3-a456-426614174000", head);
        assert_eq!(id, "msg_123e4567-e89b-12d3-a456-426614174000_WORKING_7");
        assert_eq!(
            id,
            message_id_prefix("123e4567-e89b-12d3-a456-426614174000", head)
        );
        let odd = message_id_prefix("a.b", head);
        assert!(odd.starts_with("msg_") && !odd.contains('.'));
        assert!(crate::webhook::sign::headers(&[], &odd, 1, b"").is_ok());
    }

    #[test]
    fn subscribers_follow_their_agents() {
        let mut a = SubscriberConfig::new("a", "http://x");
        a.agents = Some(vec!["one".into()]);
        let b = SubscriberConfig::new("b", "http://y");
        let agents = [
            AgentConfig::new("one", "http://a"),
            AgentConfig::new("two", "http://b"),
        ];
        let o = Outbox::new(&agents, &[a, b], Bounds::default(), 10);
        let names =
            |agent| -> Vec<String> { o.subscribers(agent).iter().map(|s| s.to_string()).collect() };
        assert_eq!(names("one"), ["a", "b"]);
        assert_eq!(names("two"), ["b"]);
        assert!(names("three").is_empty());
    }
}
