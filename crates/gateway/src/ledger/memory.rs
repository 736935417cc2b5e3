//! The in-process ledger: the embedded default, durable only while the process lives.
//!
//! Sharded maps behind short `std::sync::Mutex` sections (never held across an await, and never
//! two at once). Bounded, fairly: `max_tasks` and `max_ledger_bytes` are bounds on the whole
//! ledger, and a new task is made room for by evicting final tasks first, the oldest first
//! (the first to have become final), then live tasks unchanged for the retention (stale). A
//! live task changed within the retention is never evicted to admit another: a create that
//! would need it is refused before its agent is called ([`TaskLedger::admit`],
//! `LedgerError::Full`). Final tasks also expire after the retention.
//!
//! Each shard also indexes its live tasks (not INPUT_REQUIRED) by agent and by the time they
//! went quiet, for the reconciler ([`TaskLedger::quiet`], [`TaskLedger::lease`]), and the
//! ledger counts each client's live tasks (`[[clients]] max_live_tasks`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::changes::ChangeFeed;
use super::idempotency::MemoryKeys;
use super::{
    decide, news, next_look, notifies, Answer, Applied, ArtifactRef, Claim, Fingerprint,
    LedgerError, LedgerFuture, PushPut, Record, StrMap, TaskLedger,
};
#[cfg(test)]
use crate::protocol::task::Head;
use crate::protocol::task::{Refusal, Status, TaskRef, Verdict};
use crate::webhook::queue::{MemoryQueue, Outbox};

mod announce;
mod bounds;
mod contexts;
mod files;
mod homes;
mod index;
mod listing;
mod outbox;
mod push;
mod quiet;
mod sends;

pub use bounds::Evictions;

const SHARDS: usize = 16;
/// Most evictions one new task may cause before it is admitted or refused (each frees a task,
/// so this bounds the work of one create, not the bound itself).
const MAX_EVICTIONS_PER_TASK: usize = 1024;
/// Sends held at once ([`TaskLedger::put_send`]): each is a blocking message with an agent
/// (bounded by the agents' `max_in_flight`) or its late answer awaited (`MAX_LATE_ANSWERS`),
/// so this is a backstop, not the working bound.
const MAX_SENDS: usize = 65_536;

struct Entry {
    record: Record,
    /// Insertion sequence, so queue items left behind by a removed entry are recognised.
    seq: u64,
    expires: Option<Instant>,
    /// Changes queued for the task's subscribers or push configs (numbers the webhook ids).
    changes: u64,
    /// The content digest of the recorded document (`TaskRef::content`).
    content: u64,
    /// When an update was last accepted (wall clock, ms): staleness is measured from here.
    changed_ms: i64,
    /// Its place in the shard's quiet index, if it is there (live and not INPUT_REQUIRED): the
    /// time it went quiet, moved on by each reconciler check.
    quiet: Option<i64>,
    /// Reconciler checks since its last accepted change (the backoff's exponent).
    checks: u32,
    /// Counted among its owner's live tasks.
    owned_live: bool,
    /// The context whose claim counts it as a live task of its owner (`contexts.rs`), if any.
    live_in: Option<Arc<str>>,
    /// The bytes counted among its owner's live bytes (its size while live and owned).
    owned_bytes: usize,
    /// Its official A2A contextId, for ListTasks' filter.
    context: Option<Arc<str>>,
    /// Where the listing index holds it (see `listing.rs`).
    listed: Option<listing::Place>,
    /// Its A2A push configs and the agent's push token, if any (`push.rs`).
    push: Option<Box<push::TaskPush>>,
}

#[derive(Default)]
struct Shard {
    /// Entries are boxed: an entry is about 250 bytes, and a map's growth moves its entries
    /// under the shard's lock (a std map all of them in one insert: creates' p99 18.4-19.3 ms
    /// in the 10 s run that crossed ~57k tasks per shard unboxed, against 5.3-6.6 ms boxed:
    /// docs/performance.md). Boxed, a growth moves 32-byte slots (the key, its hash, the box),
    /// and the table's empty slots cost 32 bytes each, not 250. [`StrMap`] keeps the hash in the
    /// slot, so moving one reads no key, and moves at most 16 buckets' entries per insert or
    /// removal while it grows (`ledger/grow.rs`).
    tasks: StrMap<Box<Entry>>,
    /// Live tasks in the order of their last accepted change, for stale eviction (an item is
    /// current while the entry's `seq` and `changed_ms` match and it is still live).
    changed: VecDeque<(i64, u64, Arc<str>)>,
    /// Terminal tasks in the order they expire (the retention is one constant): the order they
    /// became final, which is the order they are evicted in.
    expiry: VecDeque<(Instant, u64, Arc<str>)>,
    /// Live tasks that are not INPUT_REQUIRED, by (agent, quiet since ms, seq).
    quiet: BTreeMap<(Arc<str>, i64, u64), Arc<str>>,
    /// The listing index: per (owner or every task, agent, status), by status timestamp.
    listing: listing::Index,
    /// Which task lists an artifact (`per_shard` at most): one entry per artifact listed, so a
    /// [`StrMap`] like the tasks (it grows under the same lock).
    artifacts: StrMap<(ArtifactRef, Instant)>,
    artifact_order: VecDeque<Arc<str>>,
    counts: [u64; Status::COUNT],
    next_seq: u64,
}

/// What one task costs the ledger, approximately: its document, its key (twice: map and queue)
/// and the fixed overhead of the map entry, the queue items and the record.
fn entry_size(task_id: &str, task: &Bytes) -> usize {
    size_of_task(task_id.len(), task.len())
}

fn size_of_task(id_len: usize, doc_len: usize) -> usize {
    doc_len + 2 * id_len + 256
}

/// The in-process ledger (see the module doc).
pub struct MemoryLedger {
    shards: Box<[Mutex<Shard>]>,
    hasher: ahash::RandomState,
    /// The artifact index's bound per shard.
    per_shard: usize,
    max_tasks: usize,
    max_bytes: usize,
    /// Tasks held, over every shard.
    held: AtomicUsize,
    /// Approximate bytes held by the tasks, over every shard.
    bytes: AtomicUsize,
    retention: Duration,
    evictions: Evictions,
    /// Each client's live tasks and their bytes (entries are removed at zero, so it holds
    /// live owners only). As many entries as owners, which with JWT subjects can be one per
    /// task, behind one lock every shard takes: a [`StrMap`], which never moves a whole table
    /// at once.
    owners: Mutex<StrMap<index::Owned>>,
    outbox: Option<(Arc<Outbox>, Arc<MemoryQueue>)>,
    changes: Option<Arc<ChangeFeed>>,
    /// Idempotency keys, bounded like the tasks (`max_tasks`; a quarter of the byte budget).
    keys: MemoryKeys,
    /// Official A2A context claims: as many as tasks at most, each client's bounded, and
    /// never one given up for another (`contexts.rs`).
    contexts: contexts::Contexts,
    /// Blocking messages' inline push configs awaiting the agent's first push
    /// ([`TaskLedger::put_send`]).
    sends: sends::Sends,
    /// File bindings ([`TaskLedger::bind_files`]), bounded like the artifact index.
    files: files::Files,
    /// Where contexts live ([`TaskLedger::set_context_replica`]), bounded like the tasks.
    homes: homes::Homes,
}

fn lock(m: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A poisoned shard only means a panic elsewhere mid-update of plain data; keep serving.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

impl MemoryLedger {
    /// `max_tasks` bounds the tasks held (and, separately, the artifact index); `evictions`
    /// counts tasks pushed out by that bound before their retention ended.
    pub fn new(max_tasks: usize, retention: Duration, evictions: Evictions) -> Self {
        MemoryLedger {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: ahash::RandomState::new(),
            per_shard: max_tasks.div_ceil(SHARDS).max(1),
            max_tasks: max_tasks.max(1),
            max_bytes: usize::MAX,
            held: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            retention,
            evictions,
            owners: Mutex::new(StrMap::default()),
            outbox: None,
            changes: None,
            keys: MemoryKeys::new(max_tasks),
            contexts: contexts::Contexts::new(max_tasks, retention),
            sends: sends::Sends::new(MAX_SENDS),
            files: files::Files::new(max_tasks, usize::MAX),
            homes: homes::Homes::new(max_tasks),
        }
    }

    /// Publish each accepted status change to `feed` (live streams), under the lock that records
    /// it, so listeners see a task's changes in order.
    pub fn with_changes(mut self, feed: Arc<ChangeFeed>) -> Self {
        self.changes = Some(feed);
        self
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
        self.max_bytes = max_bytes.max(1);
        // Stored answers are mostly copies of task documents: a quarter of the budget on top.
        self.keys = self.keys.with_byte_budget(max_bytes / 4);
        self.files.max_bytes = (max_bytes / 16).max(1);
        self
    }

    fn shard_of(&self, key: &str) -> usize {
        (self.hasher.hash_one(key) as usize) % SHARDS
    }

    fn shard(&self, key: &str) -> MutexGuard<'_, Shard> {
        lock(&self.shards[self.shard_of(key)])
    }

    /// [`MemoryLedger::apply_now`] of a document read for its context here, as
    /// [`TaskLedger::apply`] does.
    #[cfg(test)]
    fn apply_doc(
        &self,
        agent: &str,
        task_id: &str,
        head: Head,
        task: Bytes,
        owner: Option<&str>,
        trace: Option<&str>,
    ) -> Result<Applied, LedgerError> {
        let task_ref = TaskRef {
            task_id: task_id.to_owned(),
            head,
            context: super::listing::context_of(task_id, &task),
            content: 0,
        };
        let from = super::Origin {
            trace,
            ..Default::default()
        };
        self.apply_now(agent, &task_ref, task, owner, from)
    }

    fn apply_now(
        &self,
        agent: &str,
        task_ref: &TaskRef,
        task: Bytes,
        owner: Option<&str>,
        from: super::Origin<'_>,
    ) -> Result<Applied, LedgerError> {
        let (trace, replica) = (from.trace, from.replica);
        let (task_id, head) = (task_ref.task_id.as_str(), task_ref.head);
        let now = Instant::now();
        let now_ms = crate::protocol::time::now_ms();
        // Room for a task not seen yet is made before its shard is locked (eviction takes
        // other shards' locks, one at a time). If none can be made (only fresh live tasks are
        // left), the task is recorded anyway: the agent holds it, and a task the gateway does
        // not know is worse than a bound passed by the creates in flight when it filled (a
        // create is refused before its agent call once the ledger is full). A live task whose
        // document grows (artifacts streamed into it) makes room for what it adds the same way.
        let known = {
            let mut s = self.shard(task_id);
            self.expire(&mut s, now);
            s.tasks
                .get(task_id)
                .map(|e| (e.record.task.len(), e.record.head.status.is_terminal()))
        };
        match known {
            None => {
                self.make_room(entry_size(task_id, &task), now, now_ms);
            }
            Some((had, false)) if task.len() > had => {
                self.make_room_to_grow(task.len() - had, now, now_ms);
            }
            Some(_) => {}
        }
        let mut s = self.shard(task_id);
        let recorded = s
            .tasks
            .get(task_id)
            .map(|e| (e.record.agent.as_ref(), e.record.head, e.content));
        let had = recorded.map_or(0, |r| r.2);
        let verdict = decide(recorded, agent, head, task_ref.content);
        if !verdict.is_accepted() {
            let record = match s.tasks.get_key_value(task_id).map(|(k, _)| k.clone()) {
                Some(key) => {
                    // The creator's claim stands even when the news itself is not taken (a
                    // push recorded the task first): see `TaskLedger::apply`.
                    if verdict != Verdict::Refused(Refusal::ForeignAgent) {
                        if let Some(e) = s.tasks.get_mut(&key) {
                            claim(&mut e.record, owner, replica);
                        }
                        self.sync(&mut s, &key, None);
                    }
                    s.tasks
                        .get(&key)
                        .map(|e| e.record.clone())
                        .unwrap_or_else(|| {
                            unreachable!("the key was just read under the same lock")
                        })
                }
                // Refused with nothing recorded cannot happen (decide(None, ..) is New); answer
                // with the update itself rather than panic.
                None => Record {
                    agent: agent.into(),
                    head,
                    task,
                    owner: None,
                    created_ms: now_ms,
                    replica: None,
                },
            };
            if let Verdict::Refused(reason) = verdict {
                self.announce_refusal(agent, task_id, &record, head, reason);
            }
            return Ok(Applied {
                verdict,
                record,
                push_dropped: 0,
            });
        }
        // Subscribers hear of status changes; push configs of every change they would read.
        let (to_subscribers, to_configs) =
            (notifies(verdict), news(verdict, had, task_ref.content));
        let changes = s.tasks.get(task_id).map_or(0, |e| e.changes) + u64::from(to_configs);
        // Queued in this same step, under the shard's lock: a change is never recorded
        // without its deliveries.
        let push_dropped = if to_configs {
            let change = outbox::Change {
                agent,
                task_id,
                head,
                number: changes,
                task: &task,
                trace,
                to_subscribers,
            };
            self.queue_change(&s, &change)?
        } else {
            0
        };
        let expires = head.status.is_terminal().then(|| now + self.retention);
        // Kept as given: a caller gives the document's own buffer, never a slice of a larger
        // one (see `ledger::apply_counted`).
        if let Some(key) = s.tasks.get_key_value(task_id).map(|(k, _)| k.clone()) {
            let Some(e) = s.tasks.get_mut(&key) else {
                unreachable!("the key was just read under the same lock")
            };
            let old = e.record.head.status;
            let grown = task.len() as isize - e.record.task.len() as isize;
            e.record.head = head;
            e.context = task_ref.context.clone();
            e.record.task = task;
            claim(&mut e.record, owner, replica);
            e.expires = expires;
            e.changes = changes;
            e.content = task_ref.content;
            e.changed_ms = now_ms;
            e.checks = 0;
            let (seq, record) = (e.seq, e.record.clone());
            s.counts[old.index()] -= 1;
            s.counts[head.status.index()] += 1;
            if grown >= 0 {
                self.bytes
                    .fetch_add(grown.unsigned_abs(), Ordering::Relaxed);
            } else {
                self.bytes
                    .fetch_sub(grown.unsigned_abs(), Ordering::Relaxed);
            }
            match expires {
                Some(at) => s.expiry.push_back((at, seq, key.clone())),
                None => s.changed.push_back((now_ms, seq, key.clone())),
            }
            self.sync(&mut s, &key, Some(now_ms));
            s.compact(self.max_tasks);
            self.announce(task_id, &record, verdict);
            return Ok(Applied {
                verdict,
                record,
                push_dropped,
            });
        }
        let size = entry_size(task_id, &task);
        let key: Arc<str> = task_id.into();
        let seq = s.next_seq;
        s.next_seq += 1;
        let context = task_ref.context.clone();
        let record = Record {
            agent: agent.into(),
            head,
            task,
            owner: owner.map(Into::into),
            created_ms: now_ms,
            replica: replica.map(Into::into),
        };
        s.counts[head.status.index()] += 1;
        self.held.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(size, Ordering::Relaxed);
        match expires {
            Some(at) => s.expiry.push_back((at, seq, key.clone())),
            None => s.changed.push_back((now_ms, seq, key.clone())),
        }
        s.tasks.insert(
            key.clone(),
            Box::new(Entry {
                record: record.clone(),
                seq,
                expires,
                changes,
                content: task_ref.content,
                changed_ms: now_ms,
                quiet: None,
                checks: 0,
                owned_live: false,
                live_in: None,
                owned_bytes: 0,
                context,
                listed: None,
                push: None,
            }),
        );
        self.sync(&mut s, &key, Some(now_ms));
        s.compact(self.max_tasks);
        self.announce(task_id, &record, verdict);
        Ok(Applied {
            verdict,
            record,
            push_dropped,
        })
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

/// Record `owner` as the task's creator, and `replica` as where it lives, if it has none yet.
fn claim(record: &mut Record, owner: Option<&str>, replica: Option<&str>) {
    if record.replica.is_none() {
        record.replica = replica.map(Into::into);
    }
    if record.owner.is_none() {
        record.owner = owner.map(Into::into);
    }
}

impl TaskLedger for MemoryLedger {
    fn apply_traced<'a>(
        &'a self,
        agent: &'a str,
        task: &'a TaskRef,
        raw: Bytes,
        owner: Option<&'a str>,
        from: super::Origin<'a>,
    ) -> LedgerFuture<'a, Applied> {
        Box::pin(std::future::ready(
            self.apply_now(agent, task, raw, owner, from),
        ))
    }

    fn get<'a>(&'a self, task_id: &'a str) -> LedgerFuture<'a, Option<Record>> {
        Box::pin(std::future::ready(Ok(self.get_now(task_id))))
    }

    fn push_configs<'a>(&'a self, task_id: &'a str) -> LedgerFuture<'a, Vec<Bytes>> {
        Box::pin(std::future::ready(Ok(self.push_configs_now(task_id))))
    }

    fn push_configs_and_owner<'a>(
        &'a self,
        task_id: &'a str,
    ) -> LedgerFuture<'a, super::PushAudience> {
        Box::pin(std::future::ready(Ok(self.push_audience_now(task_id))))
    }

    fn put_push_config<'a>(
        &'a self,
        task_id: &'a str,
        id: &'a str,
        config: Bytes,
        max: usize,
    ) -> LedgerFuture<'a, PushPut> {
        Box::pin(std::future::ready(Ok(
            self.put_push_now(task_id, id, config, max)
        )))
    }

    fn push_current<'a>(&'a self, task_id: &'a str, id: &'a str) -> LedgerFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(self.push_current_now(task_id, id))))
    }

    fn claim_context<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
        owner: &'a str,
        how: super::ContextHold,
        max: Option<u64>,
    ) -> LedgerFuture<'a, super::ContextClaim> {
        Box::pin(std::future::ready(
            self.contexts.claim(agent, context, owner, how, max),
        ))
    }

    fn drop_context<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
        owner: &'a str,
    ) -> LedgerFuture<'a, ()> {
        self.contexts.drop_hold(agent, context, owner);
        Box::pin(std::future::ready(Ok(())))
    }

    fn context_room<'a>(&'a self, owner: &'a str, max: u64) -> LedgerFuture<'a, ()> {
        Box::pin(std::future::ready(self.contexts.room(owner, max)))
    }

    fn put_send<'a>(&'a self, id: &'a str, entry: Bytes, ttl: Duration) -> LedgerFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(self.sends.put(id, entry, ttl))))
    }

    fn bind_send<'a>(
        &'a self,
        id: &'a str,
        task_id: &'a str,
    ) -> LedgerFuture<'a, Option<(Bytes, String)>> {
        Box::pin(std::future::ready(Ok(self.sends.bind(id, task_id))))
    }

    fn end_send<'a>(&'a self, id: &'a str) -> LedgerFuture<'a, ()> {
        self.sends.end(id);
        Box::pin(std::future::ready(Ok(())))
    }

    fn set_context_replica<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
        replica: &'a str,
        ttl: Duration,
    ) -> LedgerFuture<'a, ()> {
        self.homes.set(agent, context, replica, ttl);
        Box::pin(std::future::ready(Ok(())))
    }

    fn context_replica<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
    ) -> LedgerFuture<'a, Option<Arc<str>>> {
        Box::pin(std::future::ready(Ok(self.homes.get(agent, context))))
    }

    fn delete_push_config<'a>(&'a self, task_id: &'a str, id: &'a str) -> LedgerFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(self.delete_push_now(task_id, id))))
    }

    fn push_token<'a>(
        &'a self,
        task_id: &'a str,
        fresh: Option<&'a str>,
    ) -> LedgerFuture<'a, Option<String>> {
        Box::pin(std::future::ready(Ok(self.push_token_now(task_id, fresh))))
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

    fn bind_files<'a>(
        &'a self,
        scope: super::FileScope<'a>,
        urls: &'a [String],
    ) -> LedgerFuture<'a, Vec<String>> {
        let ids = self.files.bind(&scope, urls, self.retention);
        Box::pin(std::future::ready(Ok(ids)))
    }

    fn file<'a>(&'a self, id: &'a str) -> LedgerFuture<'a, Option<super::FileRef>> {
        Box::pin(std::future::ready(Ok(self.files.get(id))))
    }

    fn admit<'a>(
        &'a self,
        owner: Option<&'a str>,
        bounds: super::Bounds,
        bytes: usize,
    ) -> LedgerFuture<'a, ()> {
        let live = owner.map(|o| self.live_of(o)).unwrap_or_default();
        let size = size_of_task(36, bytes);
        let verdict = match bounds {
            super::Bounds {
                max_live: Some(limit),
                ..
            } if owner.is_some() && live.tasks >= limit => Err(LedgerError::TooManyTasks { limit }),
            super::Bounds {
                max_bytes: Some(limit),
                ..
            } if owner.is_some() && live.bytes as usize + size > limit => {
                Err(LedgerError::ClientFull { limit })
            }
            // The task's document echoes its input: room for about that much.
            _ if !self.make_room(size, Instant::now(), crate::protocol::time::now_ms()) => {
                Err(LedgerError::Full)
            }
            _ => Ok(()),
        };
        Box::pin(std::future::ready(verdict))
    }

    fn quiet<'a>(
        &'a self,
        agent: &'a str,
        before_ms: i64,
        limit: usize,
    ) -> LedgerFuture<'a, Vec<Arc<str>>> {
        Box::pin(std::future::ready(Ok(
            self.quiet_now(agent, before_ms, limit)
        )))
    }

    fn lease<'a>(
        &'a self,
        _agent: &'a str,
        task_id: &'a str,
        before_ms: i64,
        after: Duration,
        floor: Duration,
    ) -> LedgerFuture<'a, bool> {
        Box::pin(std::future::ready(Ok(
            self.lease_now(task_id, before_ms, after, floor)
        )))
    }

    fn list<'a>(
        &'a self,
        query: &'a super::listing::Query,
    ) -> LedgerFuture<'a, super::listing::Page> {
        Box::pin(std::future::ready(Ok(self.list_now(query))))
    }

    fn counts(&self) -> LedgerFuture<'_, [u64; Status::COUNT]> {
        let now = Instant::now();
        let mut total = [0u64; Status::COUNT];
        for shard in self.shards.iter() {
            let mut s = lock(shard);
            self.expire(&mut s, now);
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

    #[test]
    fn a_task_map_slot_stays_small_whatever_an_entry_holds() {
        // What a growth of a shard's map moves per task, under the shard's lock (see
        // `Shard::tasks`): the key, its hash and a pointer, not the entry.
        assert!(std::mem::size_of::<Entry>() > 128, "an entry is large");
        let slot = Shard::default().tasks.slot_bytes();
        assert!(slot <= 32, "a slot of the task map is {slot} bytes");
    }

    fn ledger(max: usize, retention: Duration) -> MemoryLedger {
        MemoryLedger::new(max, retention, Evictions::unregistered())
    }

    fn h(status: Status, ms: i64) -> Head {
        Head {
            status,
            updated_ms: ms,
        }
    }

    fn apply(l: &MemoryLedger, agent: &str, id: &str, head: Head) -> Applied {
        l.apply_doc(
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
        let mut c = [0u64; Status::COUNT];
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
        // A slice of a read buffer reaches the ledger copied (the only way a caller can give
        // one: `apply_counted` takes a Doc), and the ledger keeps what it is given, no copy
        // of its own.
        let l = ledger(100, Duration::from_secs(60));
        let read_buffer = Bytes::from(vec![b'x'; 8192]);
        let answer = read_buffer.slice(100..400);
        let doc = crate::ledger::Doc::copied(&answer);
        assert_eq!(doc.bytes(), &answer);
        assert_ne!(doc.bytes().as_ptr(), answer.as_ptr(), "copied, not sliced");
        let given = doc.bytes().clone();
        let applied = l
            .apply_doc("a", "t", h(Status::Working, 1), given.clone(), None, None)
            .expect("applied");
        assert_eq!(applied.record.task, answer);
        assert_eq!(
            applied.record.task.as_ptr(),
            given.as_ptr(),
            "kept as given"
        );
    }

    #[test]
    fn the_byte_budget_bounds_large_documents() {
        let l = ledger(1_000_000, Duration::from_secs(60)).with_byte_budget(SHARDS * 64 * 1024);
        let big = Bytes::from(vec![b'x'; 16 * 1024]);
        for i in 0..2000 {
            let _ = l.apply_doc(
                "a",
                &format!("t{i}"),
                h(Status::Completed, 1),
                big.clone(),
                None,
                None,
            );
        }
        let held = l.bytes.load(Ordering::Relaxed);
        assert!(held <= SHARDS * 64 * 1024, "held {held}");
        assert!(l.get_now("t1999").is_some(), "the newest survives");
        assert!(l.evictions.final_.get() > 1000);
        // Updates that grow a document are accounted too.
        let small = ledger(100, Duration::from_secs(60));
        let _ = small.apply_doc(
            "a",
            "t",
            h(Status::Working, 1),
            Bytes::from_static(b"ab"),
            None,
            None,
        );
        let _ = small.apply_doc("a", "t", h(Status::Working, 2), big.clone(), None, None);
        assert_eq!(small.bytes.load(Ordering::Relaxed), entry_size("t", &big));
    }

    #[test]
    fn a_full_ledger_evicts_the_oldest_final_tasks_and_never_a_fresh_live_one() {
        let l = ledger(100, Duration::from_secs(60));
        // 10 live tasks first, then 240 that finish, in order.
        for i in 0..10 {
            apply(&l, "a", &format!("live{i}"), h(Status::Working, 1));
        }
        for i in 0..240 {
            apply(&l, "a", &format!("t{i}"), h(Status::Completed, 1));
        }
        let held: u64 = l.counts_now().iter().sum();
        assert_eq!(held, 100, "one global bound, not one per shard");
        for i in 0..10 {
            assert!(l.get_now(&format!("live{i}")).is_some(), "live{i} kept");
        }
        // The oldest final ones went: exactly t0..t149.
        for i in 0..240 {
            assert_eq!(l.get_now(&format!("t{i}")).is_some(), i >= 150, "t{i}");
        }
        assert_eq!(l.evictions.final_.get(), 150);
        assert_eq!(l.evictions.stale.get(), 0);
        for s in l.shards.iter() {
            let s = s.lock().expect("lock");
            assert!(s.expiry.len() <= 2 * 100 + 16, "queues stay bounded");
        }
    }

    #[test]
    fn a_ledger_full_of_fresh_live_tasks_refuses_and_evicts_stale_ones() {
        let l = ledger(4, Duration::from_millis(200));
        for i in 0..4 {
            apply(&l, "a", &format!("live{i}"), h(Status::Working, 1));
            // Staleness is measured in ms: one apart, so the stalest is one task.
            std::thread::sleep(Duration::from_millis(3));
        }
        assert!(matches!(
            futures_block_err(l.admit(None, super::super::Bounds::default(), 10)),
            Some(LedgerError::Full)
        ));
        std::thread::sleep(Duration::from_millis(250));
        // live1 changes: the others are stale now, the stalest goes first.
        apply(&l, "a", "live1", h(Status::Working, 2));
        futures_block(l.admit(None, super::super::Bounds::default(), 10));
        apply(&l, "a", "new", h(Status::Working, 1));
        assert!(l.get_now("live0").is_none(), "the stalest was evicted");
        assert!(l.get_now("live1").is_some(), "the fresh one was kept");
        assert_eq!(l.evictions.stale.get(), 1);
    }

    #[test]
    fn each_clients_live_tasks_are_counted() {
        let l = ledger(100, Duration::from_secs(60));
        let own = |id: &str, st: Status, ms: i64| {
            l.apply_doc(
                "a",
                id,
                h(st, ms),
                Bytes::from_static(b"{}"),
                Some("c"),
                None,
            )
            .expect("applied")
        };
        own("t1", Status::Submitted, 1);
        own("t2", Status::Working, 1);
        assert!(matches!(
            futures_block_err(l.admit(Some("c"), live(2), 10)),
            Some(LedgerError::TooManyTasks { limit: 2 })
        ));
        futures_block(l.admit(Some("other"), live(2), 10));
        own("t1", Status::Completed, 2);
        futures_block(l.admit(Some("c"), live(2), 10));
        assert_eq!(l.live_of("c").tasks, 1);
    }

    #[test]
    fn each_clients_live_bytes_are_bounded_and_its_alone() {
        let l = ledger(100, Duration::from_secs(60));
        let doc = Bytes::from(vec![b' '; 1000]);
        let own = |id: &str, st: Status, ms: i64, doc: &Bytes| {
            l.apply_doc("a", id, h(st, ms), doc.clone(), Some("c"), None)
                .expect("applied")
        };
        let bytes = |max: usize| super::super::Bounds {
            max_live: None,
            max_bytes: Some(max),
        };
        own("t1", Status::Working, 1, &doc);
        own("t2", Status::Working, 1, &doc);
        let held = l.live_of("c").bytes;
        assert_eq!(held as usize, 2 * entry_size("t1", &doc), "{held}");
        // A third task of about 1000 bytes would pass a bound of 2,500: refused, for it alone.
        assert!(matches!(
            futures_block_err(l.admit(Some("c"), bytes(2500), 1000)),
            Some(LedgerError::ClientFull { limit: 2500 })
        ));
        futures_block(l.admit(Some("other"), bytes(2500), 1000));
        // A document that grows while live counts as it grows; a final one not at all.
        own("t2", Status::Working, 2, &Bytes::from(vec![b' '; 3000]));
        assert_eq!(
            l.live_of("c").bytes as usize,
            entry_size("t1", &doc) + entry_size("t2", &Bytes::from(vec![b' '; 3000]))
        );
        own("t2", Status::Completed, 3, &doc);
        own("t1", Status::Completed, 3, &doc);
        assert_eq!(l.live_of("c").bytes, 0);
        futures_block(l.admit(Some("c"), bytes(2500), 1000));
    }

    #[test]
    fn quiet_tasks_are_offered_once_per_backoff() {
        let l = ledger(100, Duration::from_secs(60));
        apply(&l, "a", "t1", h(Status::Working, 1));
        apply(&l, "a", "t2", h(Status::InputRequired, 1));
        apply(&l, "b", "t3", h(Status::Submitted, 1));
        apply(&l, "a", "t4", h(Status::Completed, 1));
        let later = crate::protocol::time::now_ms() + 1000;
        let quiet = futures_block(l.quiet("a", later, 10));
        assert_eq!(
            quiet,
            vec![Arc::<str>::from("t1")],
            "live, not interrupted, a's"
        );
        let after = Duration::from_millis(500);
        let floor = Duration::from_secs(10);
        assert!(futures_block(l.lease("a", "t1", later, after, floor)));
        assert!(
            !futures_block(l.lease("a", "t1", later, after, floor)),
            "taken"
        );
        assert!(futures_block(l.quiet("a", later, 10)).is_empty());
        // An accepted change makes it fresh, with its backoff reset.
        apply(&l, "a", "t1", h(Status::Working, 2));
        assert_eq!(futures_block(l.quiet("a", later, 10)).len(), 1);
        apply(&l, "a", "t1", h(Status::Completed, 3));
        assert!(futures_block(l.quiet("a", later + 10_000_000, 10)).is_empty());
    }

    /// Bounds of `n` live tasks.
    fn live(n: u64) -> super::super::Bounds {
        super::super::Bounds {
            max_live: Some(n),
            max_bytes: None,
        }
    }

    fn futures_block_err<T>(f: LedgerFuture<'_, T>) -> Option<LedgerError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .ok()
            .and_then(|rt| rt.block_on(f).err())
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
        fn counts_now(&self) -> [u64; Status::COUNT] {
            futures_block(self.counts())
        }
    }
}
