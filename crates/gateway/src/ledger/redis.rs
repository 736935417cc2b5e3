//! The ledger in Redis, for several replicas acting as one gateway.
//!
//! A task is a hash (`agent`, `status`, `updated_ms`, `task`); an update is one Lua script
//! ([`apply.lua`](apply.lua)) that judges and stores it atomically, so replicas racing on one
//! task can never move a terminal task or move a task backwards. A task's keys live in its
//! partition (`store::keyspace`): the task hash, the partition's per-state indexes, its webhook
//! lanes and stream, all under one hash tag, since a script may only touch keys of one cluster
//! slot. Terminal tasks expire after the retention; live tasks after a longer bound, refreshed
//! by every accepted update, so an abandoned task cannot stay forever. Per-state sorted sets
//! (score = expiry), one per partition, give exact counts without scanning. Idempotency keys of
//! creates (and A2A messages) are hashes under `{prefix}idem:`, claimed,
//! completed and released by one script ([`idempotency.lua`](idempotency.lua)), so
//! replicas racing on one key never both take it (`keys.rs`).
//!
//! Every write is idempotent (the scripts judge against what is stored), so a write that failed
//! on a broken connection is sent once more on a fresh one ([`Store::idempotent`]); with
//! `[redis] wait_replicas` it also waits for that many replicas before it counts as done.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use redis::{Script, Value as RValue};

use super::{
    Answer, Applied, ArtifactRef, Claim, Fingerprint, LedgerError, LedgerFuture, PushPut, Record,
    TaskLedger,
};
use crate::protocol::task::{Head, Status, TaskRef, Verdict};
use crate::store::{Conn, Store, StoreResult};
use crate::webhook::queue::{entry_version, message_id_prefix, Outbox};
use applied::applied;

mod applied;
mod contexts;
mod files;
mod keys;
mod listing;
mod push;
mod quiet;
mod sends;

/// How long a task that never reaches a terminal state is kept after its last update.
const LIVE_TTL: Duration = Duration::from_secs(30 * 86_400);

/// The Redis ledger (see the module doc).
pub struct RedisLedger {
    store: Arc<Store>,
    retention: Duration,
    apply: Script,
    /// The reconciler's lease on a quiet task ([`lease.lua`](lease.lua)).
    lease: Script,
    /// Claims, completes and releases idempotency keys ([`idempotency.lua`](idempotency.lua)).
    keys: Script,
    /// A page of one partition's listing index ([`list.lua`](list.lua)).
    list: Script,
    /// A task's A2A push configs ([`push.lua`](push.lua)).
    push: Script,
    /// Blocking messages' sends ([`send.lua`](send.lua)).
    send: Script,
    /// Official A2A context claims ([`context.lua`](context.lua)).
    context: Script,
    /// The key of the file ids every replica shares, once read (`files.rs`).
    file_ids: files::IdsKey,
    outbox: Option<Arc<Outbox>>,
    /// The command the apply script publishes changes with: `SPUBLISH` (sharded pub/sub, to
    /// the partition's shard only) on a cluster, `PUBLISH` on one node.
    publish: &'static str,
}

/// A reply of one of the ledger's scripts that the gateway cannot read (a bug, or a script of
/// another version): logged with the script's name, answered as the store's failure.
pub(super) fn bad_reply(script: &str) -> LedgerError {
    tracing::error!(script, "unexpected reply from a ledger script in Redis");
    LedgerError::Store(crate::store::Failure::Other)
}

/// A script that sweeps the listing index: [`sweep.lua`](sweep.lua) before it (a Redis script
/// cannot include another).
fn with_sweep(script: &str) -> String {
    format!("{}\n{script}", include_str!("sweep.lua"))
}

/// A duration in whole milliseconds, at least 1 (PEXPIRE refuses 0).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &[u8]) -> Option<Fingerprint> {
    let mut out = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (o, pair) in out.iter_mut().zip(text.chunks(2)) {
        let s = std::str::from_utf8(pair).ok()?;
        *o = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

/// Into `pipe`: drop the members of zset `key` whose score (an expiry) is past `now`, then
/// count the rest (one reply).
fn live_members(pipe: &mut redis::Pipeline, key: &str, now: i64) {
    pipe.cmd("ZREMRANGEBYSCORE")
        .arg(key)
        .arg("-inf")
        .arg(now)
        .ignore();
    pipe.cmd("ZCARD").arg(key);
}

/// A task's content digest as the apply script keeps it: 16 hex digits, or '' for none (0).
fn content_arg(content: u64) -> String {
    if content == 0 {
        String::new()
    } else {
        format!("{content:016x}")
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl RedisLedger {
    /// The ledger on `store` (connected or not yet: calls fail with `Unavailable` until it is).
    pub fn new(store: Arc<Store>, retention: Duration) -> RedisLedger {
        RedisLedger {
            publish: if store.is_cluster() {
                "SPUBLISH"
            } else {
                "PUBLISH"
            },
            store,
            retention,
            apply: Script::new(&with_sweep(include_str!("apply.lua"))),
            lease: Script::new(include_str!("lease.lua")),
            keys: Script::new(include_str!("idempotency.lua")),
            list: Script::new(&with_sweep(include_str!("list.lua"))),
            push: Script::new(include_str!("push.lua")),
            send: Script::new(include_str!("send.lua")),
            context: Script::new(include_str!("context.lua")),
            file_ids: files::IdsKey::new(),
            outbox: None,
        }
    }

    /// Connect to one node at `url` with `prefix` and wait until connected (for tests and
    /// tools; the gateway starts its store itself).
    pub async fn connect(
        url: &str,
        prefix: &str,
        retention: Duration,
    ) -> Result<RedisLedger, LedgerError> {
        let config = crate::config::RedisConfig {
            url: url.to_owned(),
            prefix: prefix.to_owned(),
            ..crate::config::RedisConfig::default()
        };
        let store = Store::new(&config)?;
        store.connect_now().await?;
        Ok(RedisLedger::new(store, retention))
    }

    /// Queue each accepted status change for the subscribers of its agent, in the script that
    /// records it.
    pub fn with_outbox(mut self, outbox: Arc<Outbox>) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// The store this ledger is on.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    fn task_key(&self, id: &str) -> String {
        let keys = &self.store.keys;
        format!("{}task:{id}", keys.part(keys.of(id)))
    }

    fn artifact_key(&self, id: &str) -> String {
        format!("{}artifact:{id}", self.store.keys.global())
    }

    fn idem_key(&self, scope: &str, key: &str) -> String {
        format!("{}idem:{scope}:{key}", self.store.keys.global())
    }

    /// A write: sent once more on a fresh connection if the first failed on a broken one
    /// (every script here is idempotent), then held until `wait_replicas` replicas have it
    /// (`fence`: a key in the written key's slot, see `Store::replicated`).
    async fn write<T, F, Fut>(&self, fence: Option<&str>, call: F) -> Result<T, LedgerError>
    where
        F: Fn(Conn) -> Fut,
        Fut: std::future::Future<Output = StoreResult<(T, Conn)>>,
    {
        let store = &self.store;
        store
            .idempotent(|c| {
                let call = &call;
                async move {
                    let (v, mut c) = call(c).await?;
                    store.replicated(&mut c, fence).await?;
                    Ok(v)
                }
            })
            .await
            .map_err(|e| LedgerError::Store(store.failed(&e)))
    }

    /// The replication fence of a write to `key` (only with `wait_replicas`: no allocation
    /// otherwise).
    /// One call of `script` on `keys` with `args`, as a fenced write (the first key names the
    /// partition a fence may hold): what every small script of the ledger runs through.
    async fn run_script<T: redis::FromRedisValue + Send>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&[u8]],
    ) -> Result<T, LedgerError> {
        let fence = keys.first().and_then(|k| self.fence(k));
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(*k);
        }
        for a in args {
            inv.arg(*a);
        }
        let inv = &inv;
        self.write(fence.as_deref(), |mut c| async move {
            Ok((inv.invoke_async(&mut c).await?, c))
        })
        .await
    }

    fn fence(&self, key: &str) -> Option<String> {
        if self.store.waits() {
            crate::store::keyspace::fence(key)
        } else {
            None
        }
    }

    /// A read, sent once more on a fresh connection if the first failed on a broken one.
    async fn read<T, F, Fut>(&self, call: F) -> Result<T, LedgerError>
    where
        F: Fn(Conn) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>>,
    {
        self.store
            .idempotent(call)
            .await
            .map_err(|e| LedgerError::Store(self.store.failed(&e)))
    }

    async fn apply_inner(
        &self,
        agent: &str,
        task_ref: &TaskRef,
        task: Bytes,
        owner: Option<&str>,
        from: super::Origin<'_>,
    ) -> Result<Applied, LedgerError> {
        let (trace, replica) = (from.trace, from.replica);
        let (task_id, head) = (task_ref.task_id.as_str(), task_ref.head);
        let keys = &self.store.keys;
        let part = keys.prefixes(keys.of(task_id));
        let task_key = format!("{}task:{task_id}", part.prefix);
        let fence = self.fence(&task_key);
        let context = task_ref.context.as_deref();
        let push_key = format!("{}push:{task_id}", part.prefix);
        let mut inv = self.apply.key(task_key);
        inv.key(&*part.state)
            .key(&*part.wh)
            .key(&*part.prefix)
            .key(push_key)
            .arg(agent)
            .arg(head.status.as_str())
            .arg(head.updated_ms)
            .arg(task.as_ref())
            .arg(now_ms())
            .arg(self.retention.as_millis() as u64)
            .arg(LIVE_TTL.as_millis() as u64)
            .arg(task_id);
        let subs = self.outbox.as_ref().map(|o| (o, o.subscribers(agent)));
        // An official A2A task (key "{agent}/{id}") may have push configs: the script reads
        // them, and needs the message id and the bounds for them too.
        let a2a = task_id.contains('/');
        match &subs {
            Some((o, subs)) if !subs.is_empty() || a2a => {
                inv.arg(message_id_prefix(task_id, head))
                    .arg(crate::protocol::time::now())
                    // Per partition: the partitions share the bound evenly.
                    .arg(o.bounds.share(keys.len()).arg())
                    .arg(o.max_dead.div_ceil(keys.len()))
                    .arg(&*part.changes)
                    .arg(owner.unwrap_or(""))
                    .arg(self.publish)
                    .arg(&*entry_version(trace))
                    .arg(context.unwrap_or(""))
                    .arg(content_arg(task_ref.content))
                    .arg(replica.unwrap_or(""));
                for s in subs.iter() {
                    inv.arg(s.as_ref());
                }
            }
            _ => {
                inv.arg("")
                    .arg(crate::protocol::time::now())
                    .arg("0 0 0 0")
                    .arg(0)
                    .arg(&*part.changes)
                    .arg(owner.unwrap_or(""))
                    .arg(self.publish)
                    .arg("1")
                    .arg(context.unwrap_or(""))
                    .arg(content_arg(task_ref.content))
                    .arg(replica.unwrap_or(""));
            }
        }
        let inv = &inv;
        let reply: Vec<RValue> = self
            .write(fence.as_deref(), |mut c| async move {
                Ok((inv.invoke_async(&mut c).await?, c))
            })
            .await?;
        let applied = applied(&reply, task)?;
        // Its context's claim lives while its live tasks do (`context.lua`): told when one is
        // made live, and when one ends (another partition's keys: a call of its own).
        if let (Some(context), Some(owner)) = (context, applied.record.owner.as_deref()) {
            let live = !head.status.is_terminal();
            let told = match applied.verdict {
                Verdict::New => live.then_some(true),
                Verdict::Transition { from } => (!from.is_terminal() && !live).then_some(false),
                _ => None,
            };
            if let Some(up) = told {
                if let Err(e) = self.context_task_live(agent, context, owner, up).await {
                    tracing::warn!(agent, context, error = %e, "a context's claim was not told of its task; it lapses on its own bound");
                }
            }
        }
        Ok(applied)
    }
}

impl RedisLedger {
    /// The number of `owner`'s tasks that are not final, over every partition (so over every
    /// replica): each partition's `{part}live:{owner}`, expired members dropped first.
    async fn live_of(&self, owner: &str) -> Result<u64, LedgerError> {
        self.counted(owner, "live").await
    }

    /// The members of `owner`'s zsets `{part}{kind}:{owner}` (scores are expiries) over every
    /// partition, expired ones dropped first: its live tasks (`live`), its contexts (`ctxo`).
    async fn counted(&self, owner: &str, kind: &str) -> Result<u64, LedgerError> {
        let now = now_ms();
        let per = self.store.keys.parts().map(|part| {
            let mut pipe = redis::pipe();
            live_members(&mut pipe, &format!("{part}{kind}:{owner}"), now);
            async move {
                let pipe = &pipe;
                self.read(|mut c| async move { pipe.query_async::<Vec<u64>>(&mut c).await })
                    .await
            }
        });
        let counts = futures_util::future::try_join_all(per).await?;
        Ok(counts.iter().flatten().sum())
    }
}

impl TaskLedger for RedisLedger {
    fn admit<'a>(
        &'a self,
        owner: Option<&'a str>,
        bounds: super::Bounds,
        _bytes: usize,
    ) -> LedgerFuture<'a, ()> {
        // Room, and a client's bytes, are Redis's own business (its maxmemory); the client's cap
        // of live tasks is the ledger's.
        Box::pin(async move {
            if let (Some(owner), Some(limit)) = (owner, bounds.max_live) {
                if self.live_of(owner).await? >= limit {
                    return Err(LedgerError::TooManyTasks { limit });
                }
            }
            Ok(())
        })
    }

    fn quiet<'a>(
        &'a self,
        agent: &'a str,
        before_ms: i64,
        limit: usize,
    ) -> LedgerFuture<'a, Vec<Arc<str>>> {
        Box::pin(self.quiet_inner(agent, before_ms, limit))
    }

    fn lease<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
        before_ms: i64,
        after: Duration,
        floor: Duration,
    ) -> LedgerFuture<'a, bool> {
        Box::pin(self.lease_inner(agent, task_id, before_ms, after, floor))
    }

    fn apply_traced<'a>(
        &'a self,
        agent: &'a str,
        task: &'a TaskRef,
        raw: Bytes,
        owner: Option<&'a str>,
        from: super::Origin<'a>,
    ) -> LedgerFuture<'a, Applied> {
        Box::pin(self.apply_inner(agent, task, raw, owner, from))
    }

    fn push_configs<'a>(&'a self, task_id: &'a str) -> LedgerFuture<'a, Vec<Bytes>> {
        Box::pin(self.push_configs_inner(task_id))
    }

    fn push_configs_and_owner<'a>(
        &'a self,
        task_id: &'a str,
    ) -> LedgerFuture<'a, super::PushAudience> {
        Box::pin(self.push_audience_inner(task_id))
    }

    fn put_push_config<'a>(
        &'a self,
        task_id: &'a str,
        id: &'a str,
        config: Bytes,
        max: usize,
    ) -> LedgerFuture<'a, PushPut> {
        Box::pin(async move { self.put_push_inner(task_id, id, &config, max).await })
    }

    fn push_current<'a>(&'a self, task_id: &'a str, id: &'a str) -> LedgerFuture<'a, bool> {
        Box::pin(self.push_current_inner(task_id, id))
    }

    fn claim_context<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
        owner: &'a str,
        how: super::ContextHold,
        max: Option<u64>,
    ) -> LedgerFuture<'a, super::ContextClaim> {
        Box::pin(self.claim_context_inner(agent, context, owner, how, max))
    }

    fn drop_context<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
        owner: &'a str,
    ) -> LedgerFuture<'a, ()> {
        Box::pin(self.drop_context_inner(agent, context, owner))
    }

    fn context_room<'a>(&'a self, owner: &'a str, max: u64) -> LedgerFuture<'a, ()> {
        Box::pin(async move {
            if self.contexts_of_inner(owner).await? >= max {
                return Err(LedgerError::TooManyContexts { limit: max });
            }
            Ok(())
        })
    }

    fn put_send<'a>(&'a self, id: &'a str, entry: Bytes, ttl: Duration) -> LedgerFuture<'a, bool> {
        Box::pin(async move { self.put_send_inner(id, &entry, ttl).await })
    }

    fn bind_send<'a>(
        &'a self,
        id: &'a str,
        task_id: &'a str,
    ) -> LedgerFuture<'a, Option<(Bytes, String)>> {
        Box::pin(self.bind_send_inner(id, task_id))
    }

    fn end_send<'a>(&'a self, id: &'a str) -> LedgerFuture<'a, ()> {
        Box::pin(self.end_send_inner(id))
    }

    fn set_context_replica<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
        replica: &'a str,
        ttl: Duration,
    ) -> LedgerFuture<'a, ()> {
        Box::pin(self.set_home(agent, context, replica, ttl))
    }

    fn context_replica<'a>(
        &'a self,
        agent: &'a str,
        context: &'a str,
    ) -> LedgerFuture<'a, Option<Arc<str>>> {
        Box::pin(self.home(agent, context))
    }

    fn delete_push_config<'a>(&'a self, task_id: &'a str, id: &'a str) -> LedgerFuture<'a, bool> {
        Box::pin(self.delete_push_inner(task_id, id))
    }

    fn push_token<'a>(
        &'a self,
        task_id: &'a str,
        fresh: Option<&'a str>,
    ) -> LedgerFuture<'a, Option<String>> {
        Box::pin(self.push_token_inner(task_id, fresh))
    }

    fn get<'a>(&'a self, task_id: &'a str) -> LedgerFuture<'a, Option<Record>> {
        Box::pin(async move {
            type Fields = (
                Option<String>,
                Option<String>,
                Option<i64>,
                Option<Vec<u8>>,
                Option<String>,
                Option<i64>,
                Option<String>,
            );
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(self.task_key(task_id)).arg(&[
                "agent",
                "status",
                "updated_ms",
                "task",
                "owner",
                "created_ms",
                "rp",
            ]);
            let cmd = &cmd;
            let (agent, status, updated, task, owner, created, replica): Fields = self
                .read(|mut c| async move { cmd.query_async(&mut c).await })
                .await?;
            Ok(
                match (
                    agent,
                    status.as_deref().and_then(Status::parse),
                    updated,
                    task,
                ) {
                    (Some(agent), Some(status), Some(updated_ms), Some(task)) => Some(Record {
                        agent: agent.into(),
                        head: Head { status, updated_ms },
                        task: Bytes::from(task),
                        owner: owner.filter(|o| !o.is_empty()).map(Into::into),
                        created_ms: created.unwrap_or(updated_ms),
                        replica: replica.filter(|r| !r.is_empty()).map(Into::into),
                    }),
                    _ => None,
                },
            )
        })
    }

    fn note_artifacts<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
        artifact_ids: Vec<String>,
    ) -> LedgerFuture<'a, ()> {
        Box::pin(async move {
            let listed = format!("{agent}\n{task_id}");
            let ttl = self.retention.as_millis() as u64;
            // One command per artifact: artifact keys are in no partition (they are looked up
            // by artifact id alone), so on a cluster they are in different slots.
            for id in &artifact_ids {
                // NX: the first agent to list an artifact keeps it (as in the in-process ledger).
                let key = self.artifact_key(id);
                let fence = self.fence(&key);
                let mut cmd = redis::cmd("SET");
                cmd.arg(key).arg(&listed).arg("PX").arg(ttl).arg("NX");
                let cmd = &cmd;
                self.write(fence.as_deref(), |mut c| async move {
                    let _: Option<String> = cmd.query_async(&mut c).await?;
                    Ok(((), c))
                })
                .await?;
            }
            Ok(())
        })
    }

    fn artifact<'a>(&'a self, artifact_id: &'a str) -> LedgerFuture<'a, Option<ArtifactRef>> {
        Box::pin(async move {
            let mut cmd = redis::cmd("GET");
            cmd.arg(self.artifact_key(artifact_id));
            let cmd = &cmd;
            let listed: Option<String> = self
                .read(|mut c| async move { cmd.query_async(&mut c).await })
                .await?;
            // "agent \n task_id"; an entry of an earlier version holds the agent alone.
            Ok(listed.map(|l| {
                let (agent, task) = l.split_once('\n').unwrap_or((&l, ""));
                ArtifactRef {
                    agent: agent.into(),
                    task_id: task.into(),
                }
            }))
        })
    }

    fn bind_files<'a>(
        &'a self,
        scope: super::FileScope<'a>,
        urls: &'a [String],
    ) -> LedgerFuture<'a, Vec<String>> {
        Box::pin(self.bind_files_inner(scope, urls))
    }

    fn file<'a>(&'a self, id: &'a str) -> LedgerFuture<'a, Option<super::FileRef>> {
        Box::pin(self.file_inner(id))
    }

    fn claim_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        fingerprint: Fingerprint,
        token: &'a str,
        lease: Duration,
    ) -> LedgerFuture<'a, Claim> {
        Box::pin(self.claim_inner(scope, key, fingerprint, token, lease))
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
        Box::pin(self.complete_inner(scope, key, token, fingerprint, answer, ttl))
    }

    fn release_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        token: &'a str,
    ) -> LedgerFuture<'a, ()> {
        Box::pin(self.release_inner(scope, key, token))
    }

    fn list<'a>(
        &'a self,
        query: &'a super::listing::Query,
    ) -> LedgerFuture<'a, super::listing::Page> {
        Box::pin(self.list_inner(query))
    }

    fn counts(&self) -> LedgerFuture<'_, [u64; Status::COUNT]> {
        Box::pin(async move {
            let now = now_ms();
            // One pipeline per partition (a pipeline reaches one slot), all at once.
            let per = self.store.keys.parts().map(|part| {
                let mut pipe = redis::pipe();
                for st in Status::ALL {
                    // Index entries of expired tasks are dropped here, so the counts stay exact.
                    live_members(&mut pipe, &format!("{part}state:{}", st.as_str()), now);
                }
                async move {
                    let pipe = &pipe;
                    self.read(|mut c| async move { pipe.query_async::<Vec<u64>>(&mut c).await })
                        .await
                }
            });
            let mut out = [0u64; Status::COUNT];
            for counts in futures_util::future::try_join_all(per).await? {
                for (o, c) in out.iter_mut().zip(counts) {
                    *o += c;
                }
            }
            Ok(out)
        })
    }

    fn available(&self) -> bool {
        self.store.writable()
    }

    fn refusing(&self) -> Option<crate::store::Failure> {
        self.store.refusing()
    }
}
