//! The ledger in Redis, for several replicas acting as one gateway.
//!
//! A task is a hash (`agent`, `status`, `updated_ms`, `task`); an update is one Lua script
//! ([`apply.lua`](apply.lua)) that judges and stores it atomically, so replicas racing on one
//! task can never move a terminal task or move a task backwards. Every key starts with the
//! configured prefix, whose `{hash tag}` keeps all keys in one Redis Cluster slot (a script may
//! only touch keys of one slot). Terminal tasks expire after the retention; live tasks after a
//! longer bound, refreshed by every accepted update, so an abandoned task cannot stay forever.
//! Per-state sorted sets (score = expiry) give exact counts without scanning. Idempotency keys of
//! creates are hashes under `{p}idem:`, claimed, completed and released by one script
//! ([`idempotency.lua`](idempotency.lua)), so replicas racing on one key never both call the agent.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script, Value as RValue};

use super::{
    Answer, Applied, ArtifactRef, Claim, Fingerprint, LedgerError, LedgerFuture, Record, TaskLedger,
};
use crate::protocol::task::{Head, Refusal, Status, Verdict};
use crate::webhook::queue::{message_id_prefix, webhook_prefix, Outbox};

/// How long a task that never reaches a terminal state is kept after its last update.
const LIVE_TTL: Duration = Duration::from_secs(30 * 86_400);

/// The Redis ledger (see the module doc).
pub struct RedisLedger {
    /// The connection made at start (and used from multi-threaded runtimes).
    conn: ConnectionManager,
    /// Tells this ledger's per-thread connections from another's (tests run several
    /// gateways in one process).
    id: u64,
    client: redis::Client,
    config: ConnectionManagerConfig,
    prefix: String,
    retention: Duration,
    apply: Script,
    /// Claims, completes and releases idempotency keys ([`idempotency.lua`](idempotency.lua)).
    keys: Script,
    outbox: Option<Arc<Outbox>>,
    webhook_prefix: String,
    /// The pub/sub channel accepted changes are published on (see `stream::changes`).
    changes: String,
}

/// A worker thread's own connection to one ledger's Redis (see [`RedisLedger::conn`]).
#[derive(Clone)]
enum Own {
    Ready(ConnectionManager),
    /// Being made, by a task on this thread; calls use the shared connection meanwhile.
    Connecting,
    /// The last attempt failed then (Redis away); the shared connection serves until
    /// [`RETRY_OWN`] later.
    Failed(std::time::Instant),
}

/// How long a worker waits after a failed attempt at its own connection before the next.
const RETRY_OWN: Duration = Duration::from_secs(1);

thread_local! {
    /// Each worker thread's own connection, by ledger (tests run several gateways in one
    /// process).
    static LOCAL: std::cell::RefCell<std::collections::HashMap<u64, Own>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn unavailable(e: redis::RedisError) -> LedgerError {
    LedgerError::Unavailable(format!("redis: {e}"))
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

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl RedisLedger {
    /// Connect (once, failing fast if Redis is not there at start); the connection then
    /// reconnects by itself, and calls made while Redis is away fail with `Unavailable`.
    pub async fn connect(
        url: &str,
        prefix: &str,
        retention: Duration,
    ) -> Result<RedisLedger, LedgerError> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_with_config(client.clone(), config.clone())
            .await
            .map_err(unavailable)?;
        Ok(RedisLedger {
            conn,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            client,
            config,
            prefix: prefix.to_owned(),
            retention,
            apply: Script::new(include_str!("apply.lua")),
            keys: Script::new(include_str!("idempotency.lua")),
            outbox: None,
            webhook_prefix: webhook_prefix(prefix),
            changes: crate::stream::changes::channel(prefix),
        })
    }

    /// Queue each accepted status change for the subscribers of its agent, in the script that
    /// records it.
    pub fn with_outbox(mut self, outbox: Arc<Outbox>) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// The connection to use on this thread. A worker (one single-threaded runtime per core)
    /// gets one of its own, made in the background after its first call, so that its
    /// commands are written and its answers read on its own thread: the connection made at
    /// start has its I/O task on the runtime it was made on, and every command sent to it
    /// from a worker crossed threads twice, a wake-up each way (in a profile of Redis creates
    /// the main runtime's share fell from 10.6 % to 3.9 % of the samples with this; issue 12,
    /// benches/load/README.md). Other runtimes share the connection made at start, and so
    /// does a worker while its own is being made or Redis is away.
    async fn conn(&self) -> Result<ConnectionManager, LedgerError> {
        match LOCAL.with(|m| m.borrow().get(&self.id).cloned()) {
            Some(Own::Ready(c)) => return Ok(c),
            Some(Own::Connecting) => return Ok(self.conn.clone()),
            Some(Own::Failed(at)) if at.elapsed() < RETRY_OWN => return Ok(self.conn.clone()),
            _ => {}
        }
        let own = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        if own {
            // Made by a task of its own on this thread (a single-threaded runtime runs its
            // tasks on the thread that drives it), so no request waits for it, and one attempt
            // at a time: this call, and the calls until it is made, use the shared one.
            LOCAL.with(|m| m.borrow_mut().insert(self.id, Own::Connecting));
            let (id, client, config) = (self.id, self.client.clone(), self.config.clone());
            tokio::spawn(async move {
                let own = match ConnectionManager::new_with_config(client, config).await {
                    Ok(c) => Own::Ready(c),
                    Err(e) => {
                        tracing::debug!(error = %e, "a worker's own Redis connection failed; the shared one serves");
                        Own::Failed(std::time::Instant::now())
                    }
                };
                LOCAL.with(|m| m.borrow_mut().insert(id, own));
            });
        }
        Ok(self.conn.clone())
    }

    fn task_key(&self, id: &str) -> String {
        format!("{}task:{id}", self.prefix)
    }

    fn state_prefix(&self) -> String {
        format!("{}state:", self.prefix)
    }

    fn artifact_key(&self, id: &str) -> String {
        format!("{}artifact:{id}", self.prefix)
    }

    fn idem_key(&self, scope: &str, key: &str) -> String {
        format!("{}idem:{scope}:{key}", self.prefix)
    }

    async fn claim_inner(
        &self,
        scope: &str,
        key: &str,
        fingerprint: Fingerprint,
        token: &str,
        lease: Duration,
    ) -> Result<Claim, LedgerError> {
        let mut conn = self.conn().await?;
        let reply: Vec<RValue> = self
            .keys
            .key(self.idem_key(scope, key))
            .arg("claim")
            .arg(hex(&fingerprint))
            .arg(token)
            .arg(millis(lease))
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        let bad = || LedgerError::Unavailable("redis: unexpected reply from the key script".into());
        let bytes = |i: usize| -> Option<Vec<u8>> {
            reply
                .get(i)
                .and_then(|v| redis::from_redis_value_ref::<Vec<u8>>(v).ok())
        };
        let state = bytes(0).ok_or_else(bad)?;
        if state == b"claimed" {
            return Ok(Claim::Claimed);
        }
        let fingerprint = bytes(1).and_then(|h| unhex(&h)).ok_or_else(bad)?;
        match &state[..] {
            b"inflight" => Ok(Claim::InFlight { fingerprint }),
            b"done" => {
                let status = bytes(2)
                    .and_then(|s| String::from_utf8(s).ok())
                    .and_then(|s| s.parse::<u16>().ok())
                    .ok_or_else(bad)?;
                let content_type = bytes(3)
                    .and_then(|s| String::from_utf8(s).ok())
                    .ok_or_else(bad)?;
                let body = Bytes::from(bytes(4).ok_or_else(bad)?);
                Ok(Claim::Done {
                    fingerprint,
                    answer: Answer {
                        status,
                        content_type,
                        body,
                    },
                })
            }
            _ => Err(bad()),
        }
    }

    async fn apply_inner(
        &self,
        agent: &str,
        task_id: &str,
        head: Head,
        task: Bytes,
        owner: Option<&str>,
    ) -> Result<Applied, LedgerError> {
        let mut conn = self.conn().await?;
        let mut inv = self.apply.key(self.task_key(task_id));
        inv.key(self.state_prefix())
            .key(&self.webhook_prefix)
            .arg(agent)
            .arg(head.status.as_str())
            .arg(head.updated_ms)
            .arg(task.as_ref())
            .arg(now_ms())
            .arg(self.retention.as_millis() as u64)
            .arg(LIVE_TTL.as_millis() as u64)
            .arg(task_id);
        let subs = self.outbox.as_ref().map(|o| (o, o.subscribers(agent)));
        match &subs {
            Some((o, subs)) if !subs.is_empty() => {
                inv.arg(message_id_prefix(task_id, head))
                    .arg(crate::protocol::time::now())
                    .arg(o.max_queued)
                    .arg(o.max_dead)
                    .arg(&self.changes)
                    .arg(owner.unwrap_or(""));
                for s in subs.iter() {
                    inv.arg(s.as_ref());
                }
            }
            _ => {
                inv.arg("")
                    .arg("")
                    .arg(0)
                    .arg(0)
                    .arg(&self.changes)
                    .arg(owner.unwrap_or(""));
            }
        }
        let reply: Vec<RValue> = inv.invoke_async(&mut conn).await.map_err(unavailable)?;
        let bad =
            || LedgerError::Unavailable("redis: unexpected reply from the apply script".into());
        let text = |v: &RValue| -> Option<String> { redis::from_redis_value_ref::<String>(v).ok() };
        let verdict_s = reply.first().and_then(text).ok_or_else(bad)?;
        let rec_agent = reply.get(1).and_then(text).ok_or_else(bad)?;
        let rec_status = reply
            .get(2)
            .and_then(text)
            .and_then(|s| Status::parse(&s))
            .ok_or_else(bad)?;
        let rec_updated = reply
            .get(3)
            .and_then(text)
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(bad)?;
        let rec_task = reply
            .get(4)
            .and_then(|v| redis::from_redis_value_ref::<Vec<u8>>(v).ok())
            .ok_or_else(bad)?;
        let verdict = match verdict_s.as_str() {
            "new" => Verdict::New,
            // The state the task left, which only the script saw.
            "transition" => Verdict::Transition {
                from: reply
                    .get(5)
                    .and_then(text)
                    .and_then(|s| Status::parse(&s))
                    .ok_or_else(bad)?,
            },
            "refresh" => Verdict::Refresh,
            "duplicate" => Verdict::Duplicate,
            "terminal" => Verdict::Refused(Refusal::Terminal),
            "backwards" => Verdict::Refused(Refusal::Backwards),
            "stale" => Verdict::Refused(Refusal::Stale),
            "foreign_agent" => Verdict::Refused(Refusal::ForeignAgent),
            "queue_full" => return Err(LedgerError::QueueFull),
            _ => return Err(bad()),
        };
        let rec_owner = reply
            .get(6)
            .and_then(text)
            .filter(|o| !o.is_empty())
            .map(Arc::<str>::from);
        // On acceptance the script leaves the document out: it is the one just sent.
        let rec_task = if verdict.is_accepted() {
            task
        } else {
            Bytes::from(rec_task)
        };
        Ok(Applied {
            verdict,
            record: Record {
                agent: rec_agent.into(),
                head: Head {
                    status: rec_status,
                    updated_ms: rec_updated,
                },
                task: rec_task,
                owner: rec_owner,
            },
        })
    }
}

impl TaskLedger for RedisLedger {
    fn apply<'a>(
        &'a self,
        agent: &'a str,
        task_id: &'a str,
        head: Head,
        task: Bytes,
        owner: Option<&'a str>,
    ) -> LedgerFuture<'a, Applied> {
        Box::pin(self.apply_inner(agent, task_id, head, task, owner))
    }

    fn get<'a>(&'a self, task_id: &'a str) -> LedgerFuture<'a, Option<Record>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            type Fields = (
                Option<String>,
                Option<String>,
                Option<i64>,
                Option<Vec<u8>>,
                Option<String>,
            );
            let (agent, status, updated, task, owner): Fields = redis::cmd("HMGET")
                .arg(self.task_key(task_id))
                .arg(&["agent", "status", "updated_ms", "task", "owner"])
                .query_async(&mut conn)
                .await
                .map_err(unavailable)?;
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
            let mut conn = self.conn().await?;
            let mut pipe = redis::pipe();
            let ttl = self.retention.as_millis() as u64;
            for id in &artifact_ids {
                // NX: the first agent to list an artifact keeps it (as in the in-process ledger).
                pipe.cmd("SET")
                    .arg(self.artifact_key(id))
                    .arg(&listed)
                    .arg("PX")
                    .arg(ttl)
                    .arg("NX")
                    .ignore();
            }
            pipe.query_async::<()>(&mut conn).await.map_err(unavailable)
        })
    }

    fn artifact<'a>(&'a self, artifact_id: &'a str) -> LedgerFuture<'a, Option<ArtifactRef>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let listed: Option<String> = conn
                .get(self.artifact_key(artifact_id))
                .await
                .map_err(unavailable)?;
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
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let stored: i64 = self
                .keys
                .key(self.idem_key(scope, key))
                .arg("complete")
                .arg(hex(&fingerprint))
                .arg(token)
                .arg(millis(ttl))
                .arg(answer.status)
                .arg(&answer.content_type)
                .arg(answer.body.as_ref())
                .invoke_async(&mut conn)
                .await
                .map_err(unavailable)?;
            Ok(stored == 1)
        })
    }

    fn release_key<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        token: &'a str,
    ) -> LedgerFuture<'a, ()> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let _: i64 = self
                .keys
                .key(self.idem_key(scope, key))
                .arg("release")
                .arg("")
                .arg(token)
                .invoke_async(&mut conn)
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn counts(&self) -> LedgerFuture<'_, [u64; 6]> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            let mut pipe = redis::pipe();
            let now = now_ms();
            for st in Status::ALL {
                let key = format!("{}{}", self.state_prefix(), st.as_str());
                // Index entries of expired tasks are dropped here, so the counts stay exact.
                pipe.cmd("ZREMRANGEBYSCORE")
                    .arg(&key)
                    .arg("-inf")
                    .arg(now)
                    .ignore();
                pipe.cmd("ZCARD").arg(&key);
            }
            let counts: Vec<u64> = pipe.query_async(&mut conn).await.map_err(unavailable)?;
            let mut out = [0u64; 6];
            for (o, c) in out.iter_mut().zip(counts) {
                *o = c;
            }
            Ok(out)
        })
    }
}
