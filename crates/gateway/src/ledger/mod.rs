//! The task ledger: the one place where a task's state changes.
//!
//! Every source of news about a task (the agent's answer to create / get / cancel, and later push
//! notifications and other replicas) goes through [`TaskLedger::apply`], which judges the update
//! with [`crate::protocol::task::judge`] and records it only if accepted. Implementations differ in
//! where the record lives (this process, or Redis for many replicas), never in the rule.

pub mod changes;
pub mod files;
mod grow;
pub mod idempotency;
mod keymap;
pub mod listing;
mod memory;
pub mod push;
mod redis;

pub use self::redis::RedisLedger;
pub use files::{FileRef, FileScope};
pub use idempotency::{Answer, Claim, Fingerprint};
pub use memory::{Evictions, MemoryLedger};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::protocol::task::{judge, Head, Refusal, Status, TaskRef, Verdict};

pub(crate) use keymap::{KeyMap, StrMap};

/// What the ledger holds for one task.
#[derive(Debug, Clone)]
pub struct Record {
    /// The route name of the agent the task belongs to.
    pub agent: Arc<str>,
    /// The recorded status and `updated_at`: what the next update is judged against.
    pub head: Head,
    /// The last accepted Task document, exactly as the agent sent it.
    pub task: Bytes,
    /// The client that created the task through the gateway; `None` for a task first seen
    /// some other way (a push, a passthrough read) or created while no clients were configured.
    pub owner: Option<Arc<str>>,
    /// When the ledger first recorded the task (ms since the epoch, the recording replica's
    /// clock).
    pub created_ms: i64,
    /// The agent's replica that holds the task (`host:port`), for an agent whose later calls
    /// are pinned (`registry::replicas`): recorded with the first news that names it, never
    /// replaced.
    pub replica: Option<Arc<str>>,
}

/// Where an artifact was listed: its agent and its task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRef {
    /// The route name of the agent that listed it.
    pub agent: Arc<str>,
    /// The task it was listed under (empty when recorded by a version that did not keep it).
    pub task_id: Arc<str>,
}

/// The result of [`TaskLedger::apply`].
#[derive(Debug, Clone)]
pub struct Applied {
    /// How the update was judged.
    pub verdict: Verdict,
    /// The record after the update: the new one if accepted, the standing one otherwise.
    pub record: Record,
    /// A2A push deliveries of this change left out because the webhook queue had no room
    /// for them (`webhooks.max_queued`): clients' configs never make a change unrecordable.
    pub push_dropped: usize,
}

/// What [`TaskLedger::put_push_config`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushPut {
    /// Stored; `created` unless it replaced a config of the same id.
    Stored {
        /// A new id for the task.
        created: bool,
    },
    /// The task holds `max` configs already.
    Full,
    /// The task is not in the ledger (never recorded, expired or evicted).
    NoTask,
}

/// A task's push configs (stored form, as [`TaskLedger::push_configs`]) and its owner.
#[derive(Debug, Default, Clone)]
pub struct PushAudience {
    /// The configs.
    pub configs: Vec<Bytes>,
    /// The client whose task it is (`None`: no owner, as without clients).
    pub owner: Option<Arc<str>>,
}

/// Why the ledger could not apply or read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The store failed, refused the write, or answered wrongly: of what kind, never with the
    /// store's own words (those are logged where the failure is classified).
    #[error("task ledger unavailable: {0}")]
    Store(crate::store::Failure),
    /// No store could be made or connected (`RedisLedger::connect`, for tools and tests).
    #[error("task ledger unavailable: {0}")]
    Connect(#[from] crate::store::StoreError),
    /// The change would queue more webhook deliveries than `webhooks.max_queued` allows; it is
    /// not recorded (the agent may send it again later).
    #[error("webhook delivery queue is full (webhooks.max_queued); status change not recorded")]
    QueueFull,
    /// A new task would pass `max_tasks` or `max_ledger_bytes`, and only live tasks changed
    /// within `task_retention_secs` are left to evict: nothing of a live task is given up to
    /// admit another (asked before the agent is called, by [`TaskLedger::admit`]).
    #[error("the task ledger is full of live tasks changed within task_retention_secs (max_tasks / max_ledger_bytes)")]
    Full,
    /// The client holds `limit` tasks that are not final (`[[clients]] max_live_tasks`).
    #[error("the client has {limit} tasks that are not final yet (max_live_tasks)")]
    TooManyTasks {
        /// Its `max_live_tasks`.
        limit: u64,
    },
    /// The client's live tasks hold `limit` bytes of the in-process ledger already
    /// (`[[clients]] max_ledger_bytes`): its new task is refused; another client's is not.
    #[error("the client's tasks that are not final hold its share of the task ledger already ({limit} bytes, max_ledger_bytes)")]
    ClientFull {
        /// Its `max_ledger_bytes`.
        limit: usize,
    },
    /// The client holds `limit` official A2A contexts (`[[clients]] max_contexts`): a message
    /// that would start another is refused before the agent is called.
    #[error("the client holds {limit} conversations (contexts) already (max_contexts); each frees itself task_retention_secs after its last task ends")]
    TooManyContexts {
        /// Its `max_contexts`.
        limit: u64,
    },
    /// The in-process store of A2A context claims holds as many as it may (one per task the
    /// ledger may hold), none of which it gives up for a new one.
    #[error("the ledger's store of conversations (contexts) is full (as many as max_tasks); each frees itself task_retention_secs after its last task ends")]
    ContextsFull,
}

/// A client's bounds a new task is admitted within ([`TaskLedger::admit`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Its `max_live_tasks`.
    pub max_live: Option<u64>,
    /// Its `max_ledger_bytes`: the bytes its live tasks may hold in the in-process ledger.
    pub max_bytes: Option<usize>,
}

/// How a context is claimed ([`TaskLedger::claim_context`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextHold {
    /// For a message on its way to the agent: held this long, then freed unless kept (by an
    /// answer that names it, or a task recorded in it) or dropped sooner
    /// ([`TaskLedger::drop_context`]).
    Hold(Duration),
    /// Kept at least this long from now: an answer named it.
    Keep(Duration),
}

/// Whose a context is, as [`TaskLedger::claim_context`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextClaim {
    /// Nobody's: it is the owner's now (counted against its `max_contexts`).
    Claimed,
    /// The owner's already (held or kept longer, as asked).
    Owned,
    /// Another client's: never given to another while it lives.
    Other,
}

/// How the reconciler checks a quiet task again when the agent's answer changed nothing: the
/// delay doubles from the agent's `reconcile_after` up to [`MAX_RECONCILE_BACKOFF`].
pub const MAX_RECONCILE_BACKOFF: Duration = Duration::from_secs(300);

/// When a task checked for the `checks`-th time (1 for the first) is next offered to the
/// reconciler: `after` doubled per earlier check, at most [`MAX_RECONCILE_BACKOFF`], and never
/// sooner than `floor` (the agent's timeout: one check at a time per task), from `now_ms`.
/// Returned as the task's "quiet since" mark, which [`TaskLedger::quiet`] compares with
/// `now - after`.
pub fn next_look(now_ms: i64, checks: u32, after: Duration, floor: Duration) -> i64 {
    let doubled = after
        .saturating_mul(1u32 << checks.saturating_sub(1).min(20))
        .min(MAX_RECONCILE_BACKOFF)
        .max(floor);
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4);
    now_ms.saturating_add(ms(doubled)).saturating_sub(ms(after))
}

/// Whether an accepted verdict is a status change subscribers hear about: a first sighting or a
/// transition (a refresh keeps the status; a duplicate or a refusal changes nothing).
/// `[[subscribers]]` hear of these only.
pub fn notifies(verdict: Verdict) -> bool {
    matches!(verdict, Verdict::New | Verdict::Transition { .. })
}

/// Whether an accepted verdict is news for the task's push configs: every status change, and a
/// refresh whose content (`TaskRef::content`: for A2A the status message and the artifacts)
/// differs from the record's `had` (0: a record that kept none). A refresh that changes
/// nothing a receiver reads is not sent.
pub fn news(verdict: Verdict, had: u64, content: u64) -> bool {
    notifies(verdict) || (verdict == Verdict::Refresh && content != 0 && content != had)
}

/// What every [`TaskLedger`] method returns: boxed, so the trait can be used as `dyn`.
pub type LedgerFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LedgerError>> + Send + 'a>>;

/// Where tasks are recorded. Narrow on purpose: every backend implements exactly these, and is
/// tested against the same behaviour.
pub trait TaskLedger: Send + Sync + 'static {
    /// Whether the ledger is expected to answer now: `false` while its store is known to be
    /// down, so a create can be refused before its agent is called (the in-process ledger is
    /// always there).
    fn available(&self) -> bool {
        true
    }

    /// Why the store refuses writes, while it does (Redis at `maxmemory`, or read-only): the
    /// ledger is then not [`available`](TaskLedger::available) although its store answers.
    fn refusing(&self) -> Option<crate::store::Failure> {
        None
    }

    /// Judge `head` against the record of `task_id` and store `task` if accepted.
    ///
    /// `owner` is the client whose create this is the answer to (`None` for every other kind
    /// of news). It is recorded if the task has no owner yet, whatever the verdict (except a
    /// task of another agent): a push may record the task before the create's answer does,
    /// and the task is still the creator's. An owner is never replaced.
    fn apply<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
        head: Head,
        task: Bytes,
        owner: Option<&'a str>,
    ) -> LedgerFuture<'a, Applied> {
        let task_ref = TaskRef {
            task_id: task_id.to_owned(),
            head,
            context: listing::context_of(task_id, &task),
            content: 0,
        };
        Box::pin(async move {
            self.apply_traced(agent, &task_ref, task, owner, Origin::default())
                .await
        })
    }
    /// [`TaskLedger::apply`], with where the news came from (`from`): the W3C trace context
    /// (`traceparent[ tracestate]`), stored with the change's queued deliveries (their spans
    /// join the trace, and the subscribers get it as their `traceparent`), and the replica that
    /// answered, recorded like the owner (if the task has none yet, whatever the verdict but
    /// another agent's task). `task` is what the document was read as (its id, head and
    /// context), `raw` the document.
    fn apply_traced<'a>(
        &'a self,
        agent: &'a str,
        task: &'a TaskRef,
        raw: Bytes,
        owner: Option<&'a str>,
        from: Origin<'a>,
    ) -> LedgerFuture<'a, Applied>;
    /// The record of a task, if the gateway has seen it (and it has not expired).
    fn get<'a>(&'a self, task_id: &'a str) -> LedgerFuture<'a, Option<Record>>;
    /// Remember which agent serves these artifacts of `task_id`, so `/artifacts/{id}/content`
    /// can be routed, and its task's owner asked. The first listing of an artifact keeps it.
    fn note_artifacts<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
        artifact_ids: Vec<String>,
    ) -> LedgerFuture<'a, ()>;
    /// The agent that listed this artifact, and the task it was listed under.
    fn artifact<'a>(&'a self, artifact_id: &'a str) -> LedgerFuture<'a, Option<ArtifactRef>>;
    /// Bind each of `urls` (file URLs an agent named on its own origin) under `scope`: the
    /// opaque id of each, in order ([`files::file_id`] under the store's key: the same on every
    /// replica, the same each time). Kept bounded like the artifact index (`max_tasks` in
    /// process) and expiring with the task: a final task's after the retention, a live one's
    /// with it (30 days on Redis, refreshed by every binding; in process, evicted oldest
    /// first); a message's outside any task after the retention.
    fn bind_files<'a>(
        &'a self,
        scope: FileScope<'a>,
        urls: &'a [String],
    ) -> LedgerFuture<'a, Vec<String>>;
    /// What file `id` is bound to, if it is still held.
    fn file<'a>(&'a self, id: &'a str) -> LedgerFuture<'a, Option<FileRef>>;
    /// Whether a new task may be created now, asked before its agent is called: `owner` (the
    /// creating client, if any) holds fewer than its `bounds.max_live` tasks that are not final
    /// ([`LedgerError::TooManyTasks`]), its live tasks and one of about `bytes` fit in its
    /// `bounds.max_bytes` of the in-process ledger ([`LedgerError::ClientFull`]), and the task
    /// fits in the ledger's bounds, evicting final or stale tasks if need be
    /// ([`LedgerError::Full`]).
    fn admit<'a>(
        &'a self,
        owner: Option<&'a str>,
        bounds: Bounds,
        bytes: usize,
    ) -> LedgerFuture<'a, ()> {
        let _ = (owner, bounds, bytes);
        Box::pin(std::future::ready(Ok(())))
    }
    /// The reconciler's candidates: tasks of `agent` neither final nor INPUT_REQUIRED, quiet
    /// (unchanged, and not checked) since before `before_ms`, oldest first, at most `limit`.
    fn quiet<'a>(
        &'a self,
        agent: &'a str,
        before_ms: i64,
        limit: usize,
    ) -> LedgerFuture<'a, Vec<Arc<str>>> {
        let _ = (agent, before_ms, limit);
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
    /// Take the check of one candidate, atomically across replicas: true if `task_id` is still
    /// quiet since before `before_ms`; it is then marked checked (see [`next_look`]: `after`,
    /// `floor`) so that no replica is offered it again before its backoff ends. An accepted
    /// change of the task makes it fresh again and resets its backoff.
    fn lease<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
        before_ms: i64,
        after: Duration,
        floor: Duration,
    ) -> LedgerFuture<'a, bool> {
        let _ = (agent, task_id, before_ms, after, floor);
        Box::pin(std::future::ready(Ok(false)))
    }
    /// A page of the tasks `query` matches, in the listing order (see [`listing`]): tasks
    /// evicted or expired are neither listed nor counted.
    fn list<'a>(&'a self, query: &'a listing::Query) -> LedgerFuture<'a, listing::Page>;
    /// Tasks held, by state (indexed like [`crate::protocol::task::Status::ALL`]).
    fn counts(&self) -> LedgerFuture<'_, [u64; Status::COUNT]>;
    /// Claim idempotency key `key` in `scope` for the request with this `fingerprint`, atomically:
    /// a free key becomes the caller's (in flight under `token` for `lease`); otherwise what the
    /// key holds. See [`idempotency`].
    fn claim_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        fingerprint: Fingerprint,
        token: &'a str,
        lease: Duration,
    ) -> LedgerFuture<'a, Claim>;
    /// Store the answer of the request holding `key` under `token`, to be replayed for `ttl`.
    /// Also stored when the lease has ended and nobody else claimed the key; false (nothing
    /// stored) when another request holds it now.
    fn complete_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        token: &'a str,
        fingerprint: Fingerprint,
        answer: Answer,
        ttl: Duration,
    ) -> LedgerFuture<'a, bool>;
    /// Free `key` if it is still held under `token`: the request ended with no answer worth
    /// replaying (no task was created, or the agent failed), so a retry may try again.
    fn release_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        token: &'a str,
    ) -> LedgerFuture<'a, ()>;

    /// The push configs of an official A2A task (its ledger key), each in its stored form
    /// (`protocol::a2a::push::PushConfig`), in the store's order (oldest first in process, by
    /// id on Redis); none for an unknown task.
    fn push_configs<'a>(&'a self, task_id: &'a str) -> LedgerFuture<'a, Vec<Bytes>>;
    /// [`TaskLedger::push_configs`] and the task's owner, in one read: what the delivery
    /// worker asks at every push attempt, to find the config and the client whose share of
    /// the deliveries in flight it takes (`webhook::share`).
    fn push_configs_and_owner<'a>(&'a self, task_id: &'a str) -> LedgerFuture<'a, PushAudience>;
    /// Store push config `id` of a recorded task (replacing one of the same id), at most `max`
    /// per task; it lives and expires with the task, and from the next accepted change on,
    /// each change is queued for it in the same atomic step that records the change.
    fn put_push_config<'a>(
        &'a self,
        task_id: &'a str,
        id: &'a str,
        config: Bytes,
        max: usize,
    ) -> LedgerFuture<'a, PushPut>;
    /// Queue the task as it is now for its push config `id`, as one delivery (an inline
    /// config on the message that created the task hears of that change too); false when the
    /// task or the config is gone, or the queue has no room.
    fn push_current<'a>(&'a self, task_id: &'a str, id: &'a str) -> LedgerFuture<'a, bool>;
    /// Remove push config `id` of a task; whether it was there.
    fn delete_push_config<'a>(&'a self, task_id: &'a str, id: &'a str) -> LedgerFuture<'a, bool>;
    /// The token the agent must send with its own push notifications of a task: the one
    /// standing, or else `fresh` (when given), stored now with the task; `None` when the task
    /// is unknown, or has none and none was given.
    fn push_token<'a>(
        &'a self,
        task_id: &'a str,
        fresh: Option<&'a str>,
    ) -> LedgerFuture<'a, Option<String>>;

    /// Claim official A2A context `context` of `agent` for client `owner`, as `how` says. A
    /// context is one client's for as long as it lives: while a task recorded in it is live,
    /// and `task_retention` after the last one ends (`TaskLedger::apply` keeps that count), or
    /// as long as it was held or kept. A new claim past `max` contexts of the owner is
    /// [`LedgerError::TooManyContexts`], and one the store has no room for
    /// [`LedgerError::ContextsFull`] (`max` `None`: neither, the agent has answered in it).
    fn claim_context<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
        owner: &'a str,
        how: ContextHold,
        max: Option<u64>,
    ) -> LedgerFuture<'a, ContextClaim>;
    /// Free a claim [`ContextHold::Hold`] took whose message came to nothing (not when it was
    /// kept since).
    fn drop_context<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
        owner: &'a str,
    ) -> LedgerFuture<'a, ()>;
    /// Whether `owner` may take one more context (a message that names none is about to be
    /// sent: the agent will make one): it holds fewer than `max`
    /// ([`LedgerError::TooManyContexts`]) and the store has room ([`LedgerError::ContextsFull`]).
    fn context_room<'a>(&'a self, owner: &'a str, max: u64) -> LedgerFuture<'a, ()>;

    /// Keep send `id` for `ttl`: a blocking message's inline push config, held while the
    /// message is with an agent that pushes, until the agent's first push names the task the
    /// message made (`id` is the random id in the URL of the gateway's config the agent was
    /// given inline; `entry` what the gateway needs then: the token, the owner, the client's
    /// config). False when the store holds as many sends as it may (the caller does without).
    fn put_send<'a>(&'a self, id: &'a str, entry: Bytes, ttl: Duration) -> LedgerFuture<'a, bool>;
    /// Bind send `id` to task `task_id`, if it is bound to none yet (the first binding wins,
    /// across replicas): its entry and the task it is bound to now (`task_id`, or the one an
    /// earlier push bound it to); `None` for a send unknown, ended or expired.
    fn bind_send<'a>(
        &'a self,
        id: &'a str,
        task_id: &'a str,
    ) -> LedgerFuture<'a, Option<(Bytes, String)>>;
    /// Keep `replica` (`host:port`) as where official A2A context `context` of `agent` lives,
    /// for `ttl`: the replica that last answered in it, for an agent whose calls are pinned. A
    /// conversation may live in a replica's memory with no task (an agent that answers with
    /// Messages), so a later message naming only the context goes there.
    fn set_context_replica<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
        replica: &'a str,
        ttl: Duration,
    ) -> LedgerFuture<'a, ()>;
    /// Where context `context` of `agent` lives, if it is known (see
    /// [`TaskLedger::set_context_replica`]).
    fn context_replica<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
    ) -> LedgerFuture<'a, Option<Arc<str>>>;
    /// End send `id`: its message was answered. An unbound send is forgotten (a later push
    /// with its URL binds nothing); a bound one lived its purpose and is forgotten too.
    fn end_send<'a>(&'a self, id: &'a str) -> LedgerFuture<'a, ()>;
}

/// Whose a task is and which replica holds it: what the gateway's own calls of it (polls,
/// reconciler reads, resubscriptions, push configs) are made with.
#[derive(Debug, Default, Clone)]
pub struct Holder {
    /// The task's owner: what an agent told who is calling (`identity`) is told.
    pub owner: Option<Arc<str>>,
    /// The replica that holds it (`host:port`), for an agent whose calls are pinned.
    pub replica: Option<Arc<str>>,
}

/// The [`Holder`] of task `key`, read only when `needed` (the agent is told who calls, or its
/// calls are pinned: `AgentConfig::needs_holder`). `Err` when the ledger cannot say: the call
/// is not made, rather than made in no one's name or to any replica.
pub async fn holder_of(ledger: &dyn TaskLedger, key: &str, needed: bool) -> Result<Holder, ()> {
    if !needed {
        return Ok(Holder::default());
    }
    match ledger.get(key).await {
        Ok(record) => Ok(record
            .map(|r| Holder {
                owner: r.owner,
                replica: r.replica,
            })
            .unwrap_or_default()),
        Err(_) => Err(()),
    }
}

/// What the ledger holds of a task to judge an update by: its agent, its head and its content
/// digest (`TaskRef::content`).
pub type Standing<'a> = (&'a str, Head, u64);

/// The ledger's rule: the protocol's [`judge`], plus two of the gateway's own: a task recorded
/// under one agent cannot be rewritten by another (an agent answering with someone else's
/// task_id must not be able to move that task); and a live task's update in the same state at
/// the same time whose content differs (an artifact added, which moves no status time) is a
/// refresh, not a duplicate. A final task's content is final too.
pub fn decide(recorded: Option<Standing<'_>>, agent: &str, update: Head, content: u64) -> Verdict {
    match recorded {
        Some((owner, ..)) if owner != agent => Verdict::Refused(Refusal::ForeignAgent),
        Some((_, head, had)) => match judge(Some(head), update) {
            Verdict::Duplicate if !head.status.is_terminal() && content != 0 && content != had => {
                Verdict::Refresh
            }
            v => v,
        },
        None => judge(None, update),
    }
}

/// A task's document on its way into the ledger, as a buffer of its own: the in-process
/// ledger keeps the bytes it is given for as long as it holds the task, and a slice of a larger
/// buffer (an agent's body, a connection's read buffer) would pin all of it. Made by the one
/// who knows which it holds: [`Doc::copied`] for a slice, [`Doc::written`] for a document
/// written for the ledger.
pub struct Doc(Bytes);

impl Doc {
    /// A slice of a larger buffer, copied into one of its own.
    pub fn copied(slice: &[u8]) -> Doc {
        Doc(Bytes::copy_from_slice(slice))
    }

    /// A document written into a buffer of its own (a slice of it may be given when the rest
    /// is a few bytes around it: the answer written with it).
    pub fn written(own: Bytes) -> Doc {
        Doc(own)
    }

    /// The bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.0
    }
}

/// The request that brought news about a task (nothing for news an upstream stream brought).
#[derive(Debug, Default, Clone, Copy)]
pub struct Origin<'a> {
    /// For the log line of a refusal.
    pub request_id: Option<&'a str>,
    /// Queued with the change's deliveries (see [`TaskLedger::apply_traced`]).
    pub trace: Option<&'a str>,
    /// The agent's replica that sent the news (`host:port`), when the agent's calls are
    /// pinned: recorded as the task's replica if it has none.
    pub replica: Option<&'a str>,
}

/// Apply news about a task (an agent's answer, a push, what a stream learned) and count and log
/// what the state machine decided: every caller of the ledger goes through here, so the
/// transition and refusal metrics agree with the ledger whatever brought the news.
/// `from` names the request the news came with, if any.
///
/// `raw` is the document as a buffer of its own ([`Doc`]).
pub async fn apply_counted(
    ledger: &dyn TaskLedger,
    metrics: &crate::metrics::Metrics,
    agent: &str,
    task: &crate::protocol::task::TaskRef,
    raw: Doc,
    owner: Option<&str>,
    from: Origin<'_>,
) -> Result<Applied, LedgerError> {
    let request_id = from.request_id;
    let applied = ledger.apply_traced(agent, task, raw.0, owner, from).await?;
    if applied.push_dropped > 0 {
        metrics
            .webhook_deliveries
            .with_label_values(&[crate::protocol::a2a::push::SUBSCRIBER, agent, "queue_full"])
            .inc_by(applied.push_dropped as u64);
        tracing::warn!(agent, task_id = %task.task_id, dropped = applied.push_dropped,
            "the webhook queue is full (webhooks.max_queued): this change's A2A push deliveries were left out");
    }
    match applied.verdict {
        Verdict::Refused(reason) => {
            metrics
                .refused
                .with_label_values(&[agent, reason.as_str()])
                .inc();
            tracing::warn!(agent, task_id = %task.task_id, request_id, reason = reason.as_str(),
                owner = %applied.record.agent, recorded = applied.record.head.status.as_str(), offered = task.head.status.as_str(),
                "refused a task update that would break the state machine");
        }
        Verdict::New => metrics.transition(None, task.head.status).inc(),
        Verdict::Transition { from } => metrics.transition(Some(from), task.head.status).inc(),
        _ => {}
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::task::Status;

    #[test]
    fn another_agent_cannot_move_a_task() {
        let h = Head {
            status: Status::Working,
            updated_ms: 1,
        };
        let later = Head {
            status: Status::Completed,
            updated_ms: 2,
        };
        assert_eq!(
            decide(Some(("a", h, 0)), "b", later, 0),
            Verdict::Refused(Refusal::ForeignAgent)
        );
        assert_eq!(
            decide(Some(("a", h, 0)), "a", later, 0),
            Verdict::Transition {
                from: Status::Working
            }
        );
    }

    #[test]
    fn content_makes_a_same_time_update_a_refresh_of_a_live_task_only() {
        let working = Head {
            status: Status::Working,
            updated_ms: 1,
        };
        let done = Head {
            status: Status::Completed,
            updated_ms: 1,
        };
        // The same head, other content: an artifact came. News for push configs.
        let v = decide(Some(("a", working, 7)), "a", working, 8);
        assert_eq!(v, Verdict::Refresh);
        assert!(news(v, 7, 8));
        assert!(!notifies(v), "subscribers hear of transitions only");
        // The same head and content: a duplicate, nothing sent.
        assert_eq!(
            decide(Some(("a", working, 7)), "a", working, 7),
            Verdict::Duplicate
        );
        // A protocol that keeps no content (0) keeps the old rule.
        assert_eq!(
            decide(Some(("a", working, 7)), "a", working, 0),
            Verdict::Duplicate
        );
        // A final task's content is final: the same head is a duplicate whatever it says.
        assert_eq!(
            decide(Some(("a", done, 7)), "a", done, 8),
            Verdict::Duplicate
        );
        // A newer time in the same state: a refresh, news only when the content moved.
        let later = Head {
            status: Status::Working,
            updated_ms: 2,
        };
        let v = decide(Some(("a", working, 7)), "a", later, 7);
        assert_eq!(v, Verdict::Refresh);
        assert!(!news(v, 7, 7), "a refresh that changes nothing is not sent");
        assert!(news(v, 7, 9));
        assert!(news(v, 0, 9), "a record that kept no content");
        // Transitions are news whatever the content.
        let v = decide(Some(("a", working, 7)), "a", done, 7);
        assert!(news(v, 7, 7) && notifies(v));
    }
}
