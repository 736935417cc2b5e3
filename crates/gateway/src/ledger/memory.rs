//! The in-process ledger: the embedded default, durable only while the process lives.
//!
//! Sharded maps behind short `std::sync::Mutex` sections (never held across an await). Bounded
//! two ways: terminal tasks expire after the retention, and a full shard evicts its oldest task.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::changes::{Change, ChangeFeed, Refused};
use super::idempotency::MemoryKeys;
use super::{
    decide, notifies, Answer, Applied, ArtifactRef, Claim, Fingerprint, LedgerError, LedgerFuture,
    Record, TaskLedger,
};
use crate::protocol::task::{Head, Refusal, Verdict};
use crate::webhook::queue::{self, MemoryQueue, Message, Outbox};

const SHARDS: usize = 16;

struct Entry {
    record: Record,
    /// Insertion sequence, so queue items left behind by a removed entry are recognised.
    seq: u64,
    expires: Option<Instant>,
    /// Status changes accepted (numbers the webhook ids).
    changes: u64,
}

#[derive(Default)]
struct Shard {
    tasks: HashMap<Arc<str>, Entry>,
    /// Tasks in insertion order, for eviction when the shard is full.
    order: VecDeque<(u64, Arc<str>)>,
    /// Terminal tasks in the order they expire (the retention is one constant).
    expiry: VecDeque<(Instant, u64, Arc<str>)>,
    artifacts: HashMap<Arc<str>, (ArtifactRef, Instant)>,
    artifact_order: VecDeque<Arc<str>>,
    counts: [u64; 6],
    /// Approximate bytes held by the tasks (documents, keys and per-entry overhead).
    bytes: usize,
    next_seq: u64,
}

/// What one task costs the shard, approximately: its document, its key (twice: map and queue)
/// and the fixed overhead of the map entry, the queue items and the record.
fn entry_size(task_id: &str, task: &Bytes) -> usize {
    task.len() + 2 * task_id.len() + 192
}

/// The in-process ledger (see the module doc).
pub struct MemoryLedger {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    per_shard: usize,
    bytes_per_shard: usize,
    retention: Duration,
    evictions: prometheus::IntCounter,
    outbox: Option<(Arc<Outbox>, Arc<MemoryQueue>)>,
    changes: Option<Arc<ChangeFeed>>,
    /// Idempotency keys, bounded like the tasks (`max_tasks`; a quarter of the byte budget).
    keys: MemoryKeys,
}

impl MemoryLedger {
    /// `max_tasks` bounds the tasks held (and, separately, the artifact index); `evictions`
    /// counts tasks pushed out by that bound before their retention ended.
    pub fn new(max_tasks: usize, retention: Duration, evictions: prometheus::IntCounter) -> Self {
        MemoryLedger {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: RandomState::new(),
            per_shard: max_tasks.div_ceil(SHARDS).max(1),
            bytes_per_shard: usize::MAX,
            retention,
            evictions,
            outbox: None,
            changes: None,
            keys: MemoryKeys::new(max_tasks),
        }
    }

    /// Publish each accepted status change to `feed` (live streams), under the lock that records
    /// it, so listeners see a task's changes in order.
    pub fn with_changes(mut self, feed: Arc<ChangeFeed>) -> Self {
        self.changes = Some(feed);
        self
    }

    fn announce(&self, task_id: &str, record: &Record, verdict: Verdict) {
        let head = record.head;
        if let Some(feed) = self
            .changes
            .as_ref()
            .filter(|f| notifies(verdict) && f.wanted(head.status))
        {
            feed.publish(Change {
                agent: record.agent.clone(),
                task_id: task_id.into(),
                status: head.status,
                owner: record.owner.clone(),
                task: record.task.clone(),
            });
        }
    }

    /// Tell the feed's listeners of a refused update, under the lock that judged it (as the
    /// Redis ledger's script publishes it in its atomic step).
    fn announce_refusal(
        &self,
        agent: &str,
        task_id: &str,
        recorded: &Record,
        offered: Head,
        reason: Refusal,
    ) {
        if let Some(feed) = self.changes.as_ref().filter(|f| f.wants_refusals()) {
            feed.publish_refused(Refused {
                agent: agent.into(),
                recorded_agent: recorded.agent.clone(),
                task_id: task_id.into(),
                recorded: recorded.head.status,
                offered: offered.status,
                reason,
                at: crate::protocol::time::now().into(),
            });
        }
    }

    /// Queue each accepted status change for the subscribers of its agent, under the same lock
    /// that records it.
    pub fn with_outbox(mut self, outbox: Arc<Outbox>, queue: Arc<MemoryQueue>) -> Self {
        self.outbox = Some((outbox, queue));
        self
    }

    /// Bound the bytes held as well as the count: task documents echo client input and can be
    /// large, so a count alone does not bound memory.
    pub fn with_byte_budget(mut self, max_bytes: usize) -> Self {
        self.bytes_per_shard = (max_bytes / SHARDS).max(1);
        // Stored answers are mostly copies of task documents: a quarter of the budget on top.
        self.keys = self.keys.with_byte_budget(max_bytes / 4);
        self
    }

    fn shard(&self, key: &str) -> MutexGuard<'_, Shard> {
        let i = (self.hasher.hash_one(key) as usize) % SHARDS;
        // A poisoned shard only means a panic elsewhere mid-update of plain data; keep serving.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn apply_now(
        &self,
        agent: &str,
        task_id: &str,
        head: Head,
        task: Bytes,
        owner: Option<&str>,
        trace: Option<&str>,
    ) -> Result<Applied, LedgerError> {
        let now = Instant::now();
        let mut s = self.shard(task_id);
        s.expire(now);
        let recorded = s
            .tasks
            .get(task_id)
            .map(|e| (e.record.agent.as_ref(), e.record.head));
        let verdict = decide(recorded, agent, head);
        if !verdict.is_accepted() {
            let record = match s.tasks.get_mut(task_id) {
                Some(e) => {
                    // The creator's claim stands even when the news itself is not taken (a
                    // push recorded the task first): see `TaskLedger::apply`.
                    if verdict != Verdict::Refused(Refusal::ForeignAgent) {
                        claim(&mut e.record, owner);
                    }
                    e.record.clone()
                }
                // Refused with nothing recorded cannot happen (decide(None, ..) is New); answer
                // with the update itself rather than panic.
                None => Record {
                    agent: agent.into(),
                    head,
                    task,
                    owner: None,
                },
            };
            if let Verdict::Refused(reason) = verdict {
                self.announce_refusal(agent, task_id, &record, head, reason);
            }
            return Ok(Applied { verdict, record });
        }
        let changes = s.tasks.get(task_id).map_or(0, |e| e.changes) + u64::from(notifies(verdict));
        if let Some((outbox, q)) = self.outbox.as_ref().filter(|_| notifies(verdict)) {
            let subs = outbox.subscribers(agent);
            if !subs.is_empty() {
                let trace = queue::storable(trace);
                let message = Message {
                    msg_id: format!("{}_{changes}", queue::message_id_prefix(task_id, head)),
                    enqueued_ms: crate::protocol::time::now_ms(),
                    payload: queue::payload(&crate::protocol::time::now(), &task).into(),
                    version: if trace.is_some() { 2 } else { 1 },
                    trace: trace.map(Box::from),
                };
                if !q.offer(&subs, task_id, message) {
                    return Err(LedgerError::QueueFull);
                }
            }
        }
        let expires = head.status.is_terminal().then(|| now + self.retention);
        // The agent's answer is usually a slice of the connection's read buffer: holding that
        // slice would pin the whole buffer (several KiB) for as long as the task is retained.
        let task = Bytes::copy_from_slice(&task);
        if let Some(key) = s.tasks.get_key_value(task_id).map(|(k, _)| k.clone()) {
            let Some(e) = s.tasks.get_mut(&key) else {
                unreachable!("the key was just read under the same lock")
            };
            let old = e.record.head.status;
            let grown = task.len() as isize - e.record.task.len() as isize;
            e.record.head = head;
            e.record.task = task;
            claim(&mut e.record, owner);
            e.expires = expires;
            e.changes = changes;
            let (seq, record) = (e.seq, e.record.clone());
            s.counts[old.index()] -= 1;
            s.counts[head.status.index()] += 1;
            s.bytes = s.bytes.saturating_add_signed(grown);
            if let Some(at) = expires {
                s.expiry.push_back((at, seq, key));
            }
            self.announce(task_id, &record, verdict);
            return Ok(Applied { verdict, record });
        }
        // A new task: make room first, by count and by bytes.
        let size = entry_size(task_id, &task);
        while s.tasks.len() >= self.per_shard || s.bytes + size > self.bytes_per_shard {
            if !s.evict_oldest() {
                break;
            }
            self.evictions.inc();
        }
        let key: Arc<str> = task_id.into();
        let seq = s.next_seq;
        s.next_seq += 1;
        let record = Record {
            agent: agent.into(),
            head,
            task,
            owner: owner.map(Into::into),
        };
        s.counts[head.status.index()] += 1;
        s.bytes += size;
        s.order.push_back((seq, key.clone()));
        if let Some(at) = expires {
            s.expiry.push_back((at, seq, key.clone()));
        }
        s.tasks.insert(
            key,
            Entry {
                record: record.clone(),
                seq,
                expires,
                changes,
            },
        );
        s.compact(self.per_shard);
        self.announce(task_id, &record, verdict);
        Ok(Applied { verdict, record })
    }

    fn get_now(&self, task_id: &str) -> Option<Record> {
        let now = Instant::now();
        let s = self.shard(task_id);
        let e = s.tasks.get(task_id)?;
        match e.expires {
            Some(at) if at <= now => None,
            _ => Some(e.record.clone()),
        }
    }
}

/// Record `owner` as the task's creator if it has none yet.
fn claim(record: &mut Record, owner: Option<&str>) {
    if record.owner.is_none() {
        record.owner = owner.map(Into::into);
    }
}

impl Shard {
    fn remove(&mut self, key: &str) {
        if let Some(e) = self.tasks.remove(key) {
            self.counts[e.record.head.status.index()] -= 1;
            self.bytes = self.bytes.saturating_sub(entry_size(key, &e.record.task));
        }
    }

    /// Drop terminal tasks past their retention (cheap: the queue is in expiry order).
    fn expire(&mut self, now: Instant) {
        while let Some((at, seq, _)) = self.expiry.front() {
            if *at > now {
                break;
            }
            let (seq, key) = (*seq, self.expiry.pop_front().map(|x| x.2));
            if let Some(key) = key {
                if self.tasks.get(&key).is_some_and(|e| e.seq == seq) {
                    self.remove(&key);
                }
            }
        }
        // Artifact entries are never refreshed, so insertion order is expiry order.
        while let Some(k) = self.artifact_order.front() {
            if self.artifacts.get(k).is_some_and(|(_, at)| *at > now) {
                break;
            }
            if let Some(k) = self.artifact_order.pop_front() {
                self.artifacts.remove(&k);
            }
        }
    }

    /// Remove the oldest live task; false if there is none.
    fn evict_oldest(&mut self) -> bool {
        while let Some((seq, key)) = self.order.pop_front() {
            if self.tasks.get(&key).is_some_and(|e| e.seq == seq) {
                self.remove(&key);
                return true;
            }
        }
        false
    }

    /// Queue items of removed tasks linger until popped; keep the queues within a constant
    /// factor of the live set so churn cannot grow them without bound.
    fn compact(&mut self, cap: usize) {
        let limit = 2 * cap + 16;
        if self.order.len() > limit {
            let tasks = &self.tasks;
            self.order
                .retain(|(seq, k)| tasks.get(k).is_some_and(|e| e.seq == *seq));
        }
        if self.expiry.len() > limit {
            let tasks = &self.tasks;
            self.expiry
                .retain(|(_, seq, k)| tasks.get(k).is_some_and(|e| e.seq == *seq));
        }
    }
}

impl TaskLedger for MemoryLedger {
    fn apply_traced<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
        head: Head,
        task: Bytes,
        owner: Option<&'a str>,
        trace: Option<&'a str>,
    ) -> LedgerFuture<'a, Applied> {
        Box::pin(std::future::ready(
            self.apply_now(agent, task_id, head, task, owner, trace),
        ))
    }

    fn get<'a>(&'a self, task_id: &'a str) -> LedgerFuture<'a, Option<Record>> {
        Box::pin(std::future::ready(Ok(self.get_now(task_id))))
    }

    fn note_artifacts<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
        artifact_ids: Vec<String>,
    ) -> LedgerFuture<'a, ()> {
        let expires = Instant::now() + self.retention;
        let listed = ArtifactRef {
            agent: agent.into(),
            task_id: task_id.into(),
        };
        for id in artifact_ids {
            let mut s = self.shard(&id);
            if s.artifacts.contains_key(id.as_str()) {
                continue;
            }
            while s.artifacts.len() >= self.per_shard {
                match s.artifact_order.pop_front() {
                    Some(old) => {
                        s.artifacts.remove(&old);
                    }
                    None => break,
                }
            }
            let key: Arc<str> = id.into();
            s.artifact_order.push_back(key.clone());
            s.artifacts.insert(key, (listed.clone(), expires));
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn artifact<'a>(&'a self, artifact_id: &'a str) -> LedgerFuture<'a, Option<ArtifactRef>> {
        let now = Instant::now();
        let s = self.shard(artifact_id);
        let found = s
            .artifacts
            .get(artifact_id)
            .filter(|(_, at)| *at > now)
            .map(|(a, _)| a.clone());
        Box::pin(std::future::ready(Ok(found)))
    }

    fn counts(&self) -> LedgerFuture<'_, [u64; 6]> {
        let now = Instant::now();
        let mut total = [0u64; 6];
        for shard in self.shards.iter() {
            let mut s = shard.lock().unwrap_or_else(|p| p.into_inner());
            s.expire(now);
            for (t, c) in total.iter_mut().zip(s.counts) {
                *t += c;
            }
        }
        Box::pin(std::future::ready(Ok(total)))
    }

    fn claim_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        fingerprint: Fingerprint,
        token: &'a str,
        lease: Duration,
    ) -> LedgerFuture<'a, Claim> {
        let claim = self.keys.claim(scope, key, fingerprint, token, lease);
        Box::pin(std::future::ready(Ok(claim)))
    }

    fn complete_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        token: &'a str,
        fingerprint: Fingerprint,
        answer: Answer,
        ttl: Duration,
    ) -> LedgerFuture<'a, bool> {
        let stored = self
            .keys
            .complete(scope, key, token, fingerprint, answer, ttl);
        Box::pin(std::future::ready(Ok(stored)))
    }

    fn release_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        token: &'a str,
    ) -> LedgerFuture<'a, ()> {
        self.keys.release(scope, key, token);
        Box::pin(std::future::ready(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::task::{Refusal, Status, Verdict};

    fn ledger(max: usize, retention: Duration) -> MemoryLedger {
        MemoryLedger::new(
            max,
            retention,
            prometheus::IntCounter::new("e", "e").expect("counter"),
        )
    }

    fn h(status: Status, ms: i64) -> Head {
        Head {
            status,
            updated_ms: ms,
        }
    }

    fn apply(l: &MemoryLedger, agent: &str, id: &str, head: Head) -> Applied {
        l.apply_now(
            agent,
            id,
            head,
            Bytes::from(format!("{id}:{}:{}", head.status.as_str(), head.updated_ms)),
            None,
            None,
        )
        .expect("no outbox, no refusal")
    }

    #[test]
    fn records_accepts_and_refuses() {
        let l = ledger(100, Duration::from_secs(60));
        assert_eq!(
            apply(&l, "a", "t", h(Status::Submitted, 1)).verdict,
            Verdict::New
        );
        assert_eq!(
            apply(&l, "a", "t", h(Status::Working, 2)).verdict,
            Verdict::Transition {
                from: Status::Submitted
            }
        );
        assert_eq!(
            apply(&l, "a", "t", h(Status::Completed, 3)).verdict,
            Verdict::Transition {
                from: Status::Working
            }
        );
        let refused = apply(&l, "a", "t", h(Status::Working, 4));
        assert_eq!(refused.verdict, Verdict::Refused(Refusal::Terminal));
        assert_eq!(
            &refused.record.task[..],
            b"t:COMPLETED:3",
            "the standing record is returned"
        );
        assert_eq!(
            l.get_now("t").map(|r| r.head),
            Some(h(Status::Completed, 3))
        );
        assert_eq!(
            apply(&l, "b", "t", h(Status::Completed, 3)).verdict,
            Verdict::Refused(Refusal::ForeignAgent)
        );
    }

    #[test]
    fn counts_follow_transitions() {
        let l = ledger(100, Duration::from_secs(60));
        apply(&l, "a", "t1", h(Status::Submitted, 1));
        apply(&l, "a", "t2", h(Status::Submitted, 1));
        apply(&l, "a", "t2", h(Status::Failed, 2));
        let mut c = [0u64; 6];
        c[Status::Submitted.index()] = 1;
        c[Status::Failed.index()] = 1;
        assert_eq!(l.counts_now(), c);
    }

    #[test]
    fn terminal_tasks_expire_after_retention_and_others_do_not() {
        let l = ledger(100, Duration::from_millis(30));
        apply(&l, "a", "done", h(Status::Completed, 1));
        apply(&l, "a", "live", h(Status::Working, 1));
        assert!(l.get_now("done").is_some());
        std::thread::sleep(Duration::from_millis(50));
        assert!(l.get_now("done").is_none());
        assert!(l.get_now("live").is_some());
        assert_eq!(l.counts_now().iter().sum::<u64>(), 1);
    }

    #[test]
    fn a_recorded_task_does_not_pin_the_buffer_it_was_read_into() {
        let l = ledger(100, Duration::from_secs(60));
        let read_buffer = Bytes::from(vec![b'x'; 8192]);
        let answer = read_buffer.slice(100..400);
        let applied = l
            .apply_now("a", "t", h(Status::Working, 1), answer.clone(), None, None)
            .expect("applied");
        assert_eq!(applied.record.task, answer);
        assert_ne!(
            applied.record.task.as_ptr(),
            answer.as_ptr(),
            "copied, not sliced"
        );
    }

    #[test]
    fn the_byte_budget_bounds_large_documents() {
        let l = ledger(1_000_000, Duration::from_secs(60)).with_byte_budget(SHARDS * 64 * 1024);
        let big = Bytes::from(vec![b'x'; 16 * 1024]);
        for i in 0..2000 {
            let _ = l.apply_now(
                "a",
                &format!("t{i}"),
                h(Status::Working, 1),
                big.clone(),
                None,
                None,
            );
        }
        let held: usize = l.shards.iter().map(|s| s.lock().expect("lock").bytes).sum();
        assert!(held <= SHARDS * 64 * 1024, "held {held}");
        assert!(l.get_now("t1999").is_some(), "the newest survives");
        assert!(l.evictions.get() > 1000);
        // Updates that grow a document are accounted too.
        let small = ledger(100, Duration::from_secs(60));
        let _ = small.apply_now(
            "a",
            "t",
            h(Status::Working, 1),
            Bytes::from_static(b"ab"),
            None,
            None,
        );
        let _ = small.apply_now("a", "t", h(Status::Working, 2), big.clone(), None, None);
        let bytes: usize = small
            .shards
            .iter()
            .map(|s| s.lock().expect("lock").bytes)
            .sum();
        assert_eq!(bytes, entry_size("t", &big));
    }

    #[test]
    fn a_full_ledger_evicts_the_oldest() {
        let l = ledger(SHARDS, Duration::from_secs(60)); // one task per shard
        for i in 0..1000 {
            apply(&l, "a", &format!("t{i}"), h(Status::Working, 1));
        }
        let held: u64 = l.counts_now().iter().sum();
        assert!(held <= SHARDS as u64, "held {held}");
        assert!(l.get_now("t999").is_some(), "the newest survives");
        assert!(l.evictions.get() >= 1000 - SHARDS as u64);
        for s in l.shards.iter() {
            let s = s.lock().expect("lock");
            assert!(s.order.len() <= 2 * l.per_shard + 16, "queues stay bounded");
        }
    }

    #[test]
    fn artifacts_are_indexed_and_bounded() {
        let l = ledger(SHARDS, Duration::from_secs(60));
        let ids: Vec<String> = (0..100).map(|i| format!("art{i}")).collect();
        futures_block(l.note_artifacts("a", "t1", ids));
        let found = (0..100)
            .filter(|i| futures_block(l.artifact(&format!("art{i}"))).is_some())
            .count();
        assert!((1..=SHARDS).contains(&found), "{found}");
        assert_eq!(
            futures_block(l.artifact("art99")),
            Some(ArtifactRef {
                agent: "a".into(),
                task_id: "t1".into()
            })
        );
    }

    fn futures_block<T>(f: LedgerFuture<'_, T>) -> T {
        match tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| rt.block_on(f))
        {
            Ok(Ok(v)) => v,
            _ => panic!("ledger future failed"),
        }
    }

    impl MemoryLedger {
        fn counts_now(&self) -> [u64; 6] {
            futures_block(self.counts())
        }
    }
}
