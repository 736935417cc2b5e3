//! The delivery queue in Redis: lanes are lists, tokens are entries of a stream read through
//! the consumer group `workers`, retries wait in a sorted set, dead letters in a list. Every
//! step that moves a token is one Lua script, so a crash between two commands cannot lose or
//! duplicate a lane.
//!
//! Each partition of the keyspace (`store::keyspace`) has its own stream, retry set, dead
//! letters, disabled set and queued counter, under `{part}wh:`: a task's lanes are in its
//! partition, with the token stream that carries them, so the ledger's apply script and every
//! script here touch one slot. Every replica's workers read every partition's stream, in turn
//! from a starting point that moves on with every read, so none starves; an idle queue is
//! polled, every few milliseconds at first and at most every [`IDLE_POLL`] (a blocking read
//! reaches one slot, and would hold a connection that every other command shares).
//!
//! A worker that dies holding tokens leaves them pending in the group; [`RedisQueue::reclaim`]
//! (XAUTOCLAIM) hands them to a live worker once they have been idle longer than the visibility
//! timeout. If Redis restarts empty the group is gone (NOGROUP): it is created again on the spot,
//! reading from the start of the stream so tokens added meanwhile are not skipped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::streams::{StreamAutoClaimReply, StreamId, StreamInfoConsumersReply, StreamReadReply};
use redis::{RedisError, Script};

use super::{
    decode_entry, DeadLetter, DeliveryQueue, Finish, Finished, Job, QueueError, QueueFuture,
    QueueStats,
};
use crate::store::{Conn, Store};

mod dead;
use dead::dead_letter;

const GROUP: &str = "workers";

/// The longest an idle queue waits between two reads of every partition.
const IDLE_POLL: Duration = Duration::from_millis(100);

/// The Redis delivery queue (see the module doc).
pub struct RedisQueue {
    store: Arc<Store>,
    /// Each partition's share of `webhooks.max_dead_letters`.
    max_dead: usize,
    finish: Script,
    promote: Script,
    redrive: Script,
    enable: Script,
    /// Where each partition's next XAUTOCLAIM scan starts: it walks the pending list in pages,
    /// so entries far along it are reached even when live workers hold the oldest ones.
    cursors: std::sync::Mutex<Vec<String>>,
    /// The partition the next read starts at.
    next: AtomicUsize,
}

/// A consumer (a gateway process that has since gone) with nothing pending is forgotten after
/// this long idle, so the group does not collect one consumer per restart forever.
const FORGET_CONSUMER_MS: usize = 3_600_000;

/// The key prefix of a partition's webhook keys, under the partition's prefix.
pub fn webhook_prefix(part: &str) -> String {
    format!("{part}wh:")
}

impl RedisQueue {
    /// The queue on `store` (connected or not yet); each partition's consumer group is made
    /// when first missed.
    pub fn new(store: Arc<Store>, max_dead: usize) -> RedisQueue {
        let parts = store.keys.len();
        RedisQueue {
            max_dead: max_dead.div_ceil(parts).max(1),
            store,
            finish: Script::new(include_str!("finish.lua")),
            promote: Script::new(include_str!("promote.lua")),
            redrive: Script::new(include_str!("redrive.lua")),
            enable: Script::new(include_str!("enable.lua")),
            cursors: std::sync::Mutex::new(vec!["0-0".into(); parts]),
            next: AtomicUsize::new(0),
        }
    }

    /// Connect to one node at `url` with `prefix` and wait until connected (for tests and
    /// tools; the gateway starts its store itself).
    pub async fn connect(url: &str, prefix: &str, max_dead: usize) -> Result<Self, QueueError> {
        let config = crate::config::RedisConfig {
            url: url.to_owned(),
            prefix: prefix.to_owned(),
            ..crate::config::RedisConfig::default()
        };
        let store = Store::new(&config)?;
        store.connect_now().await?;
        Ok(RedisQueue::new(store, max_dead))
    }

    /// A failed call, classified by the store (counted, logged with Redis's words): its kind.
    fn unavailable(&self, e: RedisError) -> QueueError {
        QueueError::Store(self.store.failed(&e))
    }

    fn conn(&self) -> Result<Conn, QueueError> {
        self.store.conn().map_err(|e| self.unavailable(e))
    }

    /// Partition `p`'s webhook key `k`.
    fn key(&self, p: usize, k: &str) -> String {
        format!("{}wh:{k}", self.store.keys.part(p))
    }

    /// Partition `p`'s webhook prefix (what the scripts take as KEYS[1]).
    fn wh(&self, p: usize) -> String {
        webhook_prefix(self.store.keys.part(p))
    }

    /// The partitions, starting at the next in turn.
    fn in_turn(&self) -> impl Iterator<Item = usize> {
        let n = self.store.keys.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        (0..n).map(move |i| (start + i) % n)
    }

    async fn ensure_group(&self, p: usize) -> Result<(), QueueError> {
        let mut conn = self.conn()?;
        let made: Result<(), RedisError> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(self.key(p, "stream"))
            .arg(GROUP)
            // From the start: after Redis restarted empty, tokens XADDed before the group was
            // recreated must still be read.
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut conn)
            .await;
        match made {
            Err(e) if e.code() != Some("BUSYGROUP") => Err(self.unavailable(e)),
            _ => Ok(()),
        }
    }

    /// Jobs from partition `p`'s stream entries: the lanes' first messages in one round trip.
    async fn jobs(
        &self,
        p: usize,
        consumer: &str,
        entries: Vec<StreamId>,
    ) -> Result<Vec<Job>, QueueError> {
        let mut tokens = Vec::with_capacity(entries.len());
        let mut pipe = redis::pipe();
        for e in entries {
            let field = |k: &str| -> Option<String> {
                e.map
                    .get(k)
                    .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
            };
            let (Some(sub), Some(task)) = (field("s"), field("t")) else {
                // Not one of ours: retire it so it does not come back forever.
                self.retire(p, &e.id).await?;
                continue;
            };
            let attempts = field("a").and_then(|a| a.parse().ok()).unwrap_or(0);
            pipe.cmd("LINDEX")
                .arg(self.key(p, &format!("lane:{sub}:{task}")))
                .arg(0);
            tokens.push((e.id, sub, task, attempts));
        }
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn()?;
        let heads: Vec<Option<Vec<u8>>> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| self.unavailable(e))?;
        let consumer: Arc<str> = Arc::from(consumer);
        Ok(tokens
            .into_iter()
            .zip(heads)
            .map(|((token, sub, task, attempts), head)| {
                let message = head.as_deref().and_then(decode_entry);
                Job {
                    token,
                    subscriber: Arc::from(sub),
                    task_id: Arc::from(task),
                    attempts,
                    unreadable: head.is_some() && message.is_none(),
                    message,
                    consumer: consumer.clone(),
                }
            })
            .collect())
    }

    /// Queued deliveries live in keys without a TTL: a Redis that evicts keys under memory
    /// pressure can drop a lane or the stream and lose deliveries. Say so at start (managed
    /// Redis may refuse CONFIG, and a cluster answers per node; then nothing is said).
    pub async fn check_eviction_policy(&self) {
        let Ok(mut conn) = self.conn() else { return };
        let policy: Result<(String, String), RedisError> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query_async(&mut conn)
            .await;
        if let Ok((_, p)) = policy {
            if p != "noeviction" {
                tracing::warn!(policy = %p, "Redis maxmemory-policy is not noeviction: under memory pressure Redis may evict queued webhook deliveries; set maxmemory-policy noeviction");
            }
        }
    }

    /// Drop partition `p`'s consumers long idle with nothing pending (best effort).
    async fn forget_idle_consumers(&self, p: usize, me: &str) {
        let Ok(mut conn) = self.conn() else { return };
        let stream = self.key(p, "stream");
        let Ok(info) = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(&stream)
            .arg(GROUP)
            .query_async::<StreamInfoConsumersReply>(&mut conn)
            .await
        else {
            return;
        };
        for c in info.consumers {
            if c.name != me && c.pending == 0 && c.idle > FORGET_CONSUMER_MS {
                let _ = redis::cmd("XGROUP")
                    .arg("DELCONSUMER")
                    .arg(&stream)
                    .arg(GROUP)
                    .arg(&c.name)
                    .query_async::<i64>(&mut conn)
                    .await;
            }
        }
    }

    async fn retire(&self, p: usize, id: &str) -> Result<(), QueueError> {
        let mut conn = self.conn()?;
        let stream = self.key(p, "stream");
        redis::pipe()
            .cmd("XACK")
            .arg(&stream)
            .arg(GROUP)
            .arg(id)
            .ignore()
            .cmd("XDEL")
            .arg(&stream)
            .arg(id)
            .ignore()
            .query_async::<()>(&mut conn)
            .await
            .map_err(|e| self.unavailable(e))
    }

    /// Up to `max` new tokens of partition `p` for `consumer`, without waiting.
    async fn read(&self, p: usize, consumer: &str, max: usize) -> Result<Vec<Job>, QueueError> {
        let mut conn = self.conn()?;
        let read: Result<Option<StreamReadReply>, RedisError> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(consumer)
            .arg("COUNT")
            .arg(max)
            .arg("STREAMS")
            .arg(self.key(p, "stream"))
            .arg(">")
            .query_async(&mut conn)
            .await;
        match read {
            Ok(Some(reply)) => {
                let entries = reply.keys.into_iter().flat_map(|k| k.ids).collect();
                self.jobs(p, consumer, entries).await
            }
            Ok(None) => Ok(Vec::new()),
            Err(e) if e.code() == Some("NOGROUP") => {
                self.ensure_group(p).await?;
                Ok(Vec::new())
            }
            Err(e) => Err(self.unavailable(e)),
        }
    }

    /// The parts of a per-partition operation, run at once; their results in partition order.
    async fn each<T, F, Fut>(&self, f: F) -> Result<Vec<T>, QueueError>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = Result<T, QueueError>>,
    {
        futures_util::future::try_join_all((0..self.store.keys.len()).map(f)).await
    }
}

impl DeliveryQueue for RedisQueue {
    fn take<'a>(
        &'a self,
        consumer: &'a str,
        max: usize,
        wait: Duration,
    ) -> QueueFuture<'a, Vec<Job>> {
        Box::pin(async move {
            let deadline = Instant::now() + wait;
            let mut idle = Duration::from_millis(2);
            loop {
                let mut out = Vec::new();
                for p in self.in_turn() {
                    if out.len() >= max {
                        break;
                    }
                    match self.read(p, consumer, max - out.len()).await {
                        Ok(jobs) => out.extend(jobs),
                        // Jobs already read are held for this consumer: hand them over (a
                        // partition that failed is read again on the next take).
                        Err(e) if out.is_empty() => return Err(e),
                        Err(e) => {
                            tracing::debug!(error = %e, partition = p, "reading a partition's tokens failed");
                            break;
                        }
                    }
                }
                let now = Instant::now();
                if !out.is_empty() || now >= deadline {
                    return Ok(out);
                }
                tokio::time::sleep(idle.min(deadline - now)).await;
                idle = (idle * 2).min(IDLE_POLL);
            }
        })
    }

    fn reclaim<'a>(
        &'a self,
        consumer: &'a str,
        min_idle: Duration,
        max: usize,
    ) -> QueueFuture<'a, Vec<Job>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for p in self.in_turn() {
                if out.len() >= max {
                    break;
                }
                self.forget_idle_consumers(p, consumer).await;
                let start = self.cursors.lock().unwrap_or_else(|e| e.into_inner())[p].clone();
                let mut conn = self.conn()?;
                let reply: Result<StreamAutoClaimReply, RedisError> = redis::cmd("XAUTOCLAIM")
                    .arg(self.key(p, "stream"))
                    .arg(GROUP)
                    .arg(consumer)
                    .arg(min_idle.as_millis() as u64)
                    .arg(start)
                    .arg("COUNT")
                    .arg(max - out.len())
                    .query_async(&mut conn)
                    .await;
                match reply {
                    Ok(r) => {
                        self.cursors.lock().unwrap_or_else(|e| e.into_inner())[p] =
                            r.next_stream_id;
                        out.extend(self.jobs(p, consumer, r.claimed).await?);
                    }
                    Err(e) if e.code() == Some("NOGROUP") => self.ensure_group(p).await?,
                    Err(e) => return Err(self.unavailable(e)),
                }
            }
            Ok(out)
        })
    }

    fn finish<'a>(&'a self, job: &'a Job, how: Finish) -> QueueFuture<'a, Finished> {
        Box::pin(async move {
            let p = self.store.keys.of(&job.task_id);
            let mut inv = self.finish.key(self.wh(p));
            let msg_id = job.message.as_ref().map_or("", |m| m.msg_id.as_str());
            let mode = match &how {
                Finish::Delivered => "delivered",
                Finish::Retry { .. } => "retry",
                Finish::Dead { .. } => "dead",
                Finish::Park { .. } => "park",
            };
            inv.arg(mode)
                .arg(&job.token)
                .arg(job.subscriber.as_ref())
                .arg(job.task_id.as_ref())
                .arg(msg_id)
                .arg(job.consumer.as_ref());
            let mut disabled = None;
            match how {
                Finish::Delivered => {}
                Finish::Retry { due_ms, attempts } => {
                    inv.arg(due_ms).arg(attempts);
                }
                Finish::Dead { attempts, error } => {
                    let meta = serde_json::json!({
                        "subscriber": job.subscriber.as_ref(),
                        "task_id": job.task_id.as_ref(),
                        "attempts": attempts,
                        "last_error": error,
                        "failed_at": crate::protocol::time::now(),
                    });
                    inv.arg(meta.to_string()).arg(self.max_dead);
                }
                Finish::Park { reason } => {
                    inv.arg(reason.as_deref().unwrap_or_default());
                    disabled = reason;
                }
            }
            let mut conn = self.conn()?;
            let out: String = inv
                .invoke_async(&mut conn)
                .await
                .map_err(|e| self.unavailable(e))?;
            if let Some(reason) = disabled {
                // The script disabled the subscriber in this partition, atomically with the
                // parking. The other partitions' apply scripts learn it here, outside that step:
                // until they do, a change for it is queued to its lane rather than straight to
                // the dead letters, and parked when a worker gets to it. Nothing is lost.
                for q in (0..self.store.keys.len()).filter(|&q| q != p) {
                    let _: Result<i64, RedisError> = redis::cmd("HSET")
                        .arg(self.key(q, "disabled"))
                        .arg(job.subscriber.as_ref())
                        .arg(&reason)
                        .query_async(&mut conn)
                        .await;
                }
            }
            Ok(if out == "done" {
                Finished::Done
            } else {
                Finished::Stale
            })
        })
    }

    fn promote_due(&self, now_ms: i64, max: usize) -> QueueFuture<'_, usize> {
        Box::pin(async move {
            let mut moved = 0usize;
            for p in self.in_turn() {
                if moved >= max {
                    break;
                }
                let mut conn = self.conn()?;
                let n: usize = self
                    .promote
                    .key(self.wh(p))
                    .arg(now_ms)
                    .arg(max - moved)
                    .invoke_async(&mut conn)
                    .await
                    .map_err(|e| self.unavailable(e))?;
                moved += n;
            }
            Ok(moved)
        })
    }

    fn stats(&self) -> QueueFuture<'_, QueueStats> {
        Box::pin(async move {
            let parts = self
                .each(|p| async move {
                    let mut conn = self.conn()?;
                    let got: (Option<i64>, u64, u64) = redis::pipe()
                        .cmd("GET")
                        .arg(self.key(p, "queued"))
                        .cmd("ZCARD")
                        .arg(self.key(p, "retry"))
                        .cmd("LLEN")
                        .arg(self.key(p, "dead"))
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| self.unavailable(e))?;
                    Ok(got)
                })
                .await?;
            let mut out = QueueStats::default();
            for (queued, retrying, dead) in parts {
                out.queued += queued.unwrap_or(0).max(0) as u64;
                out.retrying += retrying;
                out.dead += dead;
            }
            Ok(out)
        })
    }

    fn dead_letters(&self, limit: usize) -> QueueFuture<'_, Vec<DeadLetter>> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new());
            }
            // The newest `limit` of each partition, merged newest first.
            let parts = self
                .each(|p| async move {
                    let mut conn = self.conn()?;
                    let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                        .arg(self.key(p, "dead"))
                        .arg(0)
                        .arg(limit - 1)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| self.unavailable(e))?;
                    Ok(items)
                })
                .await?;
            let mut all: Vec<DeadLetter> = parts
                .iter()
                .flatten()
                .filter_map(|i| dead_letter(i))
                .collect();
            // RFC 3339 times of one format sort as text; stable, so one partition's letters
            // keep their order.
            all.sort_by(|a, b| b.failed_at.cmp(&a.failed_at));
            all.truncate(limit);
            Ok(all)
        })
    }

    fn redrive<'a>(&'a self, subscriber: Option<&'a str>, limit: usize) -> QueueFuture<'a, usize> {
        Box::pin(async move {
            let mut moved = 0usize;
            for p in 0..self.store.keys.len() {
                if moved >= limit {
                    break;
                }
                moved += self.redrive_part(p, subscriber, limit - moved).await?;
            }
            Ok(moved)
        })
    }

    fn disabled(&self) -> QueueFuture<'_, Vec<(String, String)>> {
        Box::pin(async move {
            let parts = self
                .each(|p| async move {
                    let mut conn = self.conn()?;
                    let all: Vec<(String, String)> = redis::cmd("HGETALL")
                        .arg(self.key(p, "disabled"))
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| self.unavailable(e))?;
                    Ok(all)
                })
                .await?;
            let merged: BTreeMap<String, String> = parts.into_iter().flatten().collect();
            Ok(merged.into_iter().collect())
        })
    }

    fn enable<'a>(&'a self, subscriber: &'a str) -> QueueFuture<'a, usize> {
        Box::pin(async move {
            let counts = self
                .each(|p| async move {
                    let mut conn = self.conn()?;
                    let n: i64 = self
                        .enable
                        .key(self.wh(p))
                        .arg(subscriber)
                        .invoke_async(&mut conn)
                        .await
                        .map_err(|e| self.unavailable(e))?;
                    Ok(n.max(0) as usize)
                })
                .await?;
            Ok(counts.into_iter().sum())
        })
    }
}
