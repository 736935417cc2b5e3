//! One task's shared stream: a bounded ring of the events it carried (numbered by the gateway),
//! and the subscribers reading it, each no more than a cursor into the ring.
//!
//! The ring is both the replay buffer and the fan-out queue: a subscriber that joins late, or
//! resumes after `Last-Event-ID`, starts at an older cursor and reads on into the live events
//! with no gap and no duplicate, by construction. A subscriber whose cursor falls out of the
//! ring, or more than `lag_bytes` behind its head, is a slow consumer: it is cut (it can resume
//! with its last id) so it never holds the others or the upstream back.
//!
//! A topic speaks one [`Dialect`]. A Clawpedia topic's events are written whole, with their
//! `id:` and `event:` lines, and read as they are. An A2A topic stores each StreamResponse once,
//! as a REST subscriber reads it (`data: {json}`), keeps the task as it is now (its snapshot,
//! the first event of every subscriber that joins: §3.1.6), and each subscriber writes its own
//! framing on the way out ([`Framing`]: a JSON-RPC response carrying its own request id, or
//! the bare StreamResponse). Its pings are SSE comments, and the gateway's own endings an
//! `event: error` in the subscriber's binding ([`Ending`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::{watch, Notify};

use super::framing::ending;
pub use subscription::{SlowConsumer, Subscription};

mod subscription;
pub use super::framing::{
    Ending, Framing, ACCESS_REVOKED, DRAINING, SLOW_CONSUMER, UPSTREAM_ERROR,
};
use crate::metrics::Metrics;
use crate::protocol::a2a::stream as a2a;
use crate::protocol::sse;

/// A task's stream key: (agent route name, task id).
pub type Key = (Arc<str>, Arc<str>);

/// How a topic's events are written (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Clawpedia A2A 1.0: named, numbered events, read as stored.
    Clawpedia,
    /// The official A2A 1.0: StreamResponses, framed per subscriber.
    A2a,
}

struct Stored {
    seq: u64,
    /// The event as written to subscribers (`id: EPOCH-SEQ`, event, data).
    bytes: Bytes,
    /// Bytes published up to and including this event.
    end: u64,
    at: Instant,
}

/// Where the upstream side of a topic is.
#[derive(Debug, Clone)]
pub enum Phase {
    /// The first connection to the agent is being made.
    Connecting,
    /// The agent's stream is (or was) open: subscribers get events.
    Open,
    /// The task turned out to be over before its stream opened: nothing will come (204).
    Ended,
    /// The first connection failed: why, for the waiting requests.
    Failed(super::StreamError),
    /// The topic is closed.
    Closed,
}

/// The bounds of one topic's ring (from `[streams]`) and the hub-wide byte budget.
pub struct Limits {
    /// Events kept for replay, at most.
    pub replay_events: usize,
    /// Bytes of events kept for replay, at most (the last event always stays).
    pub replay_bytes: usize,
    /// A subscriber further behind the head than this is cut.
    pub lag_bytes: u64,
    /// Bytes buffered by every topic of the hub together, and their bound: past it, a topic
    /// that publishes sheds its own oldest events (down to the one just published).
    pub hub_bytes: Arc<AtomicU64>,
    /// The bound on `hub_bytes` (`streams.max_buffer_bytes`).
    pub hub_budget: u64,
}

struct Inner {
    ring: VecDeque<Stored>,
    ring_bytes: usize,
    next_seq: u64,
    total: u64,
    /// Subscribers waiting for the next event; each registers at most once per round.
    wakers: Vec<Waker>,
    round: u64,
    ping: Bytes,
    ping_gen: u64,
    last_event: Instant,
    last_left: Option<Instant>,
    closed: bool,
    /// A2A: the task as it is now (its JSON), the first event of a subscriber that joins.
    snapshot: Option<Bytes>,
    /// A2A: why the gateway ended the stream, when it did.
    ending: Option<Ending>,
    /// A2A: the feed (upstream) that may publish; a newer one supersedes it.
    feed: u64,
}

/// What the topic knows of one subscriber, to cut it when it falls behind even though its
/// connection (its socket full) never asks for more.
struct Cursor {
    next: AtomicU64,
    cut: AtomicBool,
    kill: Option<Arc<Notify>>,
    /// How this subscriber reads the events (here, not inline in the subscription: a lean
    /// subscriber's connection future holds the subscription, and is bounded by a test).
    framing: Framing,
}

/// One task's shared stream (see the module doc).
pub struct Topic {
    /// The (agent, task) it streams.
    pub key: Key,
    /// How its events are written.
    pub dialect: Dialect,
    cursors: Mutex<Vec<Weak<Cursor>>>,
    /// Distinguishes this topic's event ids from an earlier one's for the same task (or another
    /// replica's): a `Last-Event-ID` of another epoch replays the whole buffer.
    epoch: String,
    inner: Mutex<Inner>,
    subscribers: AtomicUsize,
    limits: Limits,
    phase: watch::Sender<Phase>,
    /// Wakes the upstream loop when the topic is closed from outside (terminal, shutdown).
    pub closed: Notify,
    metrics: Arc<Metrics>,
}

impl Topic {
    /// An empty Clawpedia topic in phase `Connecting`, with a fresh epoch for its event ids.
    pub fn new(key: Key, limits: Limits, metrics: Arc<Metrics>) -> Topic {
        Topic::speaking(Dialect::Clawpedia, key, limits, metrics)
    }

    /// An empty topic of `dialect` in phase `Connecting`.
    pub fn speaking(dialect: Dialect, key: Key, limits: Limits, metrics: Arc<Metrics>) -> Topic {
        let (phase, _) = watch::channel(Phase::Connecting);
        Topic {
            key,
            dialect,
            cursors: Mutex::new(Vec::new()),
            epoch: format!("{:08x}", uuid::Uuid::new_v4().as_u64_pair().0 as u32),
            inner: Mutex::new(Inner {
                ring: VecDeque::new(),
                ring_bytes: 0,
                next_seq: 1,
                total: 0,
                wakers: Vec::new(),
                round: 0,
                ping: Bytes::new(),
                ping_gen: 0,
                last_event: Instant::now(),
                last_left: None,
                closed: false,
                snapshot: None,
                ending: None,
                feed: 0,
            }),
            subscribers: AtomicUsize::new(0),
            limits,
            phase,
            closed: Notify::new(),
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Watch the upstream phase (requests wait here for the first connection's outcome).
    pub fn phase(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// Set the upstream phase (the upstream loop does, as the connection goes).
    pub fn set_phase(&self, p: Phase) {
        self.phase.send_replace(p);
    }

    /// Subscribers reading the topic now.
    pub fn subscribers(&self) -> usize {
        self.subscribers.load(Ordering::Acquire)
    }

    /// Since when the topic has had no subscriber (`None` while it has some).
    pub fn idle_since(&self) -> Option<Instant> {
        let inner = self.lock();
        if self.subscribers() > 0 {
            None
        } else {
            inner.last_left
        }
    }

    /// Whether the topic is closed: no more events will be published.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// When the topic last sent something (an event or a ping): quiet topics get pings.
    pub fn quiet_since(&self) -> Instant {
        self.lock().last_event
    }

    /// Publish one event to every subscriber: numbered, written once, kept for replay.
    pub fn publish(&self, event: Option<&str>, data: &str) {
        let mut inner = self.lock();
        let woken = self.publish_locked(&mut inner, event, data);
        drop(inner);
        self.wake(woken);
    }

    /// Publish a last event and close, in one step: of two sources that learn the task ended
    /// (the change feed, the upstream's end), only the first one's event goes out.
    /// On an A2A topic, `status` (the task ended, as the ledger heard) publishes the final Task
    /// as a StreamResponse; any other event ends the streams with UPSTREAM_ERROR.
    pub fn finish(&self, event: &str, data: &str) {
        let mut inner = self.lock();
        if inner.closed {
            return;
        }
        if self.dialect == Dialect::A2a {
            let woken = if event == "status" {
                inner.snapshot = Some(Bytes::copy_from_slice(data.as_bytes()));
                self.store_locked(&mut inner, a2a::task_frame(data.as_bytes()))
            } else {
                let why = serde_json::from_str::<serde_json::Value>(data)
                    .ok()
                    .and_then(|v| v.get("reason")?.as_str().map(Arc::<str>::from))
                    .unwrap_or_else(|| Arc::from(event));
                inner.ending = Some(Ending::Upstream(why));
                Vec::new()
            };
            drop(inner);
            self.wake(woken);
            self.close();
            return;
        }
        let woken = self.publish_locked(&mut inner, Some(event), data);
        drop(inner);
        self.wake(woken);
        self.close();
    }

    /// No more events, and a `retry:` hint of `ms` for the subscribers' next connection (a
    /// drain, or an agent changed by a reload): an EventSource reconnects after `ms`, to another
    /// replica or to the agent's new config, with its Last-Event-ID.
    pub fn end_with_retry(&self, ms: u64) {
        if self.dialect == Dialect::A2a {
            return self.end(Ending::Draining);
        }
        let mut inner = self.lock();
        if inner.closed {
            return;
        }
        let woken = self.store_locked(&mut inner, format!("retry: {ms}\n\n").into_bytes());
        drop(inner);
        self.wake(woken);
        self.close();
    }

    /// A2A: make a new feed the one that publishes (a message continuing the task opened a new
    /// upstream); the feed it supersedes stops at its next event. Its number.
    pub fn take_feed(&self) -> u64 {
        let mut inner = self.lock();
        inner.feed += 1;
        inner.feed
    }

    /// A2A: whether `feed` is the newest feed, open or closed.
    pub fn fed_by(&self, feed: u64) -> bool {
        self.lock().feed == feed
    }

    /// A2A: publish one StreamResponse (`json`) from `feed`, with the task as it is after it
    /// (`snapshot`, when the event changed it), in one step: a subscriber that joins gets either
    /// the task before the event and then the event, or the task after it. Whether it went out
    /// (not if the topic is closed or `feed` superseded).
    pub fn publish_a2a(&self, feed: u64, json: &[u8], snapshot: Option<Bytes>) -> bool {
        let mut inner = self.lock();
        if inner.closed || inner.feed != feed {
            return false;
        }
        if let Some(s) = snapshot {
            inner.snapshot = Some(s);
        }
        let woken = self.store_locked(&mut inner, a2a::event_frame(json));
        drop(inner);
        self.wake(woken);
        true
    }

    /// A2A: the task as it is now, without an event (a subscription upstream's first Task, which
    /// every subscriber gets as its own first event). Wakes the subscribers waiting for it.
    pub fn set_snapshot(&self, feed: u64, snapshot: Bytes) -> bool {
        let mut inner = self.lock();
        if inner.closed || inner.feed != feed {
            return false;
        }
        inner.snapshot = Some(snapshot);
        let woken = take_wakers(&mut inner);
        drop(inner);
        self.wake(woken);
        true
    }

    /// A2A: the task as the topic knows it now.
    pub fn snapshot(&self) -> Option<Bytes> {
        self.lock().snapshot.clone()
    }

    /// A2A: end every subscriber's stream with `ending` (after what is buffered), and close.
    pub fn end(&self, ending: Ending) {
        let mut inner = self.lock();
        if inner.closed {
            return;
        }
        inner.ending = Some(ending);
        drop(inner);
        self.close();
    }

    /// Record one event; the wakers to wake once the lock is released.
    fn publish_locked(&self, inner: &mut Inner, event: Option<&str>, data: &str) -> Vec<Waker> {
        if inner.closed {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(data.len() + 48);
        let id = format!("{}-{}", self.epoch, inner.next_seq);
        sse::write_event(&mut out, Some(&id), event, data);
        self.store_locked(inner, out)
    }

    /// Keep one complete frame in the ring and hand it to subscribers.
    fn store_locked(&self, inner: &mut Inner, out: Vec<u8>) -> Vec<Waker> {
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.total += out.len() as u64;
        let stored = Stored {
            seq,
            end: inner.total,
            bytes: Bytes::from(out),
            at: Instant::now(),
        };
        inner.ring_bytes += stored.bytes.len();
        let hub = &self.limits.hub_bytes;
        hub.fetch_add(stored.bytes.len() as u64, Ordering::AcqRel);
        inner.ring.push_back(stored);
        while inner.ring.len() > self.limits.replay_events
            || (inner.ring.len() > 1
                && (inner.ring_bytes > self.limits.replay_bytes
                    || hub.load(Ordering::Acquire) > self.limits.hub_budget))
        {
            if let Some(old) = inner.ring.pop_front() {
                inner.ring_bytes -= old.bytes.len();
                hub.fetch_sub(old.bytes.len() as u64, Ordering::AcqRel);
            }
        }
        inner.last_event = Instant::now();
        self.metrics.stream_events_in.inc();
        take_wakers(inner)
    }

    /// A gateway ping (`event: ping` with the time), sent to subscribers only: not numbered,
    /// not kept for replay.
    pub fn ping(&self) {
        let ping = match self.dialect {
            Dialect::A2a => Bytes::from_static(a2a::PING),
            Dialect::Clawpedia => {
                let mut out = Vec::with_capacity(64);
                sse::write_ping(&mut out, &crate::protocol::time::now());
                Bytes::from(out)
            }
        };
        let mut inner = self.lock();
        inner.ping = ping;
        inner.ping_gen += 1;
        inner.last_event = Instant::now();
        let woken = take_wakers(&mut inner);
        drop(inner);
        self.wake(woken);
    }

    /// No more events: subscribers read what is buffered, then their streams end.
    pub fn close(&self) {
        let mut inner = self.lock();
        if inner.closed {
            return;
        }
        inner.closed = true;
        let woken = take_wakers(&mut inner);
        drop(inner);
        self.wake(woken);
        // A failed or ended first connection keeps its phase: requests waiting on it must see
        // why.
        self.phase.send_if_modified(|p| {
            if matches!(p, Phase::Failed(_) | Phase::Ended) {
                false
            } else {
                *p = Phase::Closed;
                true
            }
        });
        self.closed.notify_waiters();
        self.closed.notify_one();
    }

    /// Cut every subscriber that fell out of the ring or more than `lag_bytes` behind: mark it,
    /// and end its connection. O(subscribers); the upstream loop runs it on its clock tick.
    pub fn sweep(&self) {
        let (oldest, next_seq, total, ends) = {
            let inner = self.lock();
            let oldest = inner.ring.front().map_or(inner.next_seq, |s| s.seq);
            // How far behind a cursor is: the bytes published after the event it reads next
            // (that event's own size does not count, or one large event would cut everyone).
            let ends: Vec<u64> = inner.ring.iter().map(|s| s.end).collect();
            (oldest, inner.next_seq, inner.total, ends)
        };
        let mut cursors = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
        cursors.retain(|w| {
            let Some(c) = w.upgrade() else { return false };
            let next = c.next.load(Ordering::Acquire);
            let behind = if next < oldest {
                u64::MAX
            } else if next >= next_seq {
                0
            } else {
                ends.get((next - oldest) as usize)
                    .map_or(0, |end| total - end)
            };
            if behind > self.limits.lag_bytes && !c.cut.swap(true, Ordering::AcqRel) {
                self.metrics.stream_slow_consumers.inc();
                if let Some(k) = &c.kill {
                    k.notify_one();
                }
            }
            true
        });
    }

    /// A subscriber starting after `last_event_id` (a gateway id of this topic), or at the
    /// oldest buffered event. Whether it is a replay (it asked to resume) is counted. `kill`
    /// ends the subscriber's connection if it falls behind.
    pub fn subscribe(
        self: &Arc<Self>,
        last_event_id: Option<&str>,
        kill: Option<Arc<Notify>>,
    ) -> Subscription {
        let inner = self.lock();
        let oldest = inner.ring.front().map_or(inner.next_seq, |s| s.seq);
        let resume = last_event_id
            .and_then(|id| id.split_once('-'))
            .filter(|(epoch, _)| *epoch == self.epoch)
            .and_then(|(_, seq)| seq.parse::<u64>().ok())
            .filter(|seq| *seq < inner.next_seq);
        if last_event_id.is_some() {
            self.metrics.stream_replays.inc();
        }
        // No subscriber starts further back than it may fall behind: history beyond
        // `lag_bytes` would make it a slow consumer before its first event.
        let window = inner
            .ring
            .iter()
            .find(|s| inner.total - s.end <= self.limits.lag_bytes)
            .map_or(inner.next_seq, |s| s.seq);
        let next = resume.map_or(oldest, |s| s + 1).max(window);
        self.subscription(inner, next, Framing::Stored, false, kill)
    }

    /// A2A: a subscriber that joins: the task as it is now first (once the topic has it), then
    /// the events after it.
    pub fn join(self: &Arc<Self>, framing: Framing, kill: Option<Arc<Notify>>) -> Subscription {
        let inner = self.lock();
        let next = inner.next_seq;
        self.subscription(inner, next, framing, true, kill)
    }

    /// A2A: a subscriber that reads from event `seq` on (the creator of the stream, from the
    /// agent's first event).
    pub fn subscribe_from(
        self: &Arc<Self>,
        seq: u64,
        framing: Framing,
        kill: Option<Arc<Notify>>,
    ) -> Subscription {
        let inner = self.lock();
        let oldest = inner.ring.front().map_or(inner.next_seq, |s| s.seq);
        let next = seq.max(oldest);
        self.subscription(inner, next, framing, false, kill)
    }

    /// A2A: the number the next event published will have.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    fn subscription(
        self: &Arc<Self>,
        inner: MutexGuard<'_, Inner>,
        next: u64,
        framing: Framing,
        snapshot_first: bool,
        kill: Option<Arc<Notify>>,
    ) -> Subscription {
        let ping_gen = inner.ping_gen;
        // Counted under the lock that `idle_since` reads, so a linger check never sees a
        // subscriber half-added.
        self.subscribers.fetch_add(1, Ordering::AcqRel);
        drop(inner);
        self.metrics.stream_subscribers.inc();
        let cursor = Arc::new(Cursor {
            next: AtomicU64::new(next),
            cut: AtomicBool::new(false),
            kill,
            framing,
        });
        self.cursors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(&cursor));
        Subscription {
            topic: self.clone(),
            cursor,
            next,
            ping_gen,
            round: u64::MAX,
            done: false,
            snapshot_first,
            permit: None,
            agent_texts: false,
        }
    }
}

/// Start a new round: every waiting subscriber's waker, to wake after the lock is released
/// (with ten thousand subscribers, waking them all under the lock would hold off each of them
/// as it wakes and comes for the lock).
fn take_wakers(inner: &mut Inner) -> Vec<Waker> {
    inner.round += 1;
    std::mem::take(&mut inner.wakers)
}

impl Topic {
    fn wake(&self, mut woken: Vec<Waker>) {
        for w in woken.drain(..) {
            w.wake();
        }
        // Hand the (now empty) allocation back for the next round, if nobody started one.
        if woken.capacity() > 64 {
            let mut inner = self.lock();
            if inner.wakers.is_empty() {
                inner.wakers = woken;
            }
        }
    }
}

impl Drop for Topic {
    fn drop(&mut self) {
        let held = self.lock().ring_bytes as u64;
        self.limits.hub_bytes.fetch_sub(held, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Poll};

    fn topic() -> Arc<Topic> {
        let limits = Limits {
            replay_events: 16,
            replay_bytes: 1 << 20,
            lag_bytes: 1 << 20,
            hub_bytes: Arc::new(AtomicU64::new(0)),
            hub_budget: 1 << 30,
        };
        let metrics = Arc::new(Metrics::new().expect("metrics"));
        Arc::new(Topic::speaking(
            Dialect::A2a,
            (Arc::from("a"), Arc::from("a/t")),
            limits,
            metrics,
        ))
    }

    /// Everything the subscriber has ready now, as text.
    fn ready(sub: &mut Subscription) -> Vec<String> {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut out = Vec::new();
        while let Poll::Ready(Some(frame)) = sub.poll_next(&mut cx) {
            let bytes = frame.expect("not cut");
            out.push(String::from_utf8_lossy(&bytes).into_owned());
        }
        out
    }

    /// A subscriber's wire form, for these tests: each event tagged with what the form echoes,
    /// an ending with its reason and message. (The real forms' framing is `http::a2a::wire`'s.)
    #[derive(Debug)]
    struct Tagged;

    impl crate::stream::framing::Frames for Tagged {
        fn event(&self, id: Option<&str>, stored: &Bytes) -> Bytes {
            match crate::protocol::a2a::stream::frame_json(stored) {
                Some(json) => Bytes::from(format!(
                    "data: [{}]{}\n\n",
                    id.unwrap_or("-"),
                    String::from_utf8_lossy(json)
                )),
                None => stored.clone(),
            }
        }

        fn error(&self, id: Option<&str>, e: &crate::protocol::a2a::A2aError) -> Bytes {
            Bytes::from(format!(
                "event: error\ndata: [{}] {} {}\n\n",
                id.unwrap_or("-"),
                e.kind.reason(),
                e.message
            ))
        }
    }

    #[test]
    fn a_joiner_reads_the_task_as_it_is_then_what_follows_in_its_own_framing() {
        let t = topic();
        let feed = t.take_feed();
        let mut early = t.join(Framing::Stored, None);
        assert!(ready(&mut early).is_empty(), "no task yet: it waits");
        t.set_snapshot(feed, Bytes::from_static(br#"{"id":"t","v":1}"#));
        t.publish_a2a(
            feed,
            br#"{"statusUpdate":{"v":2}}"#,
            Some(Bytes::from_static(br#"{"id":"t","v":2}"#)),
        );
        // The task is read as it is at the subscriber's first read, with every event before it
        // in it, and no event twice.
        let mut late = t.join(Framing::Form(&Tagged, Some("7".into())), None);
        assert_eq!(
            ready(&mut early),
            ["data: {\"task\":{\"id\":\"t\",\"v\":2}}\n\n"]
        );
        t.publish_a2a(
            feed,
            br#"{"statusUpdate":{"v":3}}"#,
            Some(Bytes::from_static(br#"{"id":"t","v":3}"#)),
        );
        assert_eq!(
            ready(&mut early),
            ["data: {\"statusUpdate\":{\"v\":3}}\n\n"]
        );
        assert_eq!(
            ready(&mut late),
            ["data: [7]{\"task\":{\"id\":\"t\",\"v\":3}}\n\n"]
        );
        // A superseded feed publishes nothing.
        let newer = t.take_feed();
        assert!(!t.publish_a2a(feed, br#"{"x":1}"#, None));
        assert!(t.publish_a2a(newer, br#"{"x":2}"#, None));
        assert_eq!(ready(&mut late).len(), 1);
        // The gateway's ending, in each subscriber's form, then the end.
        t.end(Ending::Draining);
        let rest = ready(&mut early);
        assert_eq!(rest.len(), 2, "{rest:?}");
        assert!(
            rest[1].starts_with("event: error\ndata: {\"error\":"),
            "{rest:?}"
        );
        assert!(rest[1].contains("\"reason\":\"DRAINING\""), "{rest:?}");
        let rpc = ready(&mut late);
        assert!(
            rpc[0].starts_with("event: error\ndata: [7] DRAINING "),
            "{rpc:?}"
        );
        assert!(
            rpc[0].contains("DRAINING: "),
            "the reason leads the message: {rpc:?}"
        );
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(late.poll_next(&mut cx), Poll::Ready(None)));
    }

    #[test]
    fn an_a2a_ping_is_a_comment() {
        let t = topic();
        let feed = t.take_feed();
        t.set_snapshot(feed, Bytes::from_static(b"{}"));
        let mut sub = t.join(Framing::Stored, None);
        ready(&mut sub);
        t.ping();
        assert_eq!(ready(&mut sub), [": ping\n\n"]);
    }
}
