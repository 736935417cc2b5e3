//! The delivery queue in Redis: lanes are lists, tokens are entries of one stream read through
//! the consumer group `workers`, retries wait in a sorted set, dead letters in a list. Every
//! step that moves a token is one Lua script, so a crash between two commands cannot lose or
//! duplicate a lane. Keys are `{prefix}wh:...`, in the ledger's hash-tag slot (the ledger's apply
//! script appends to lanes).
//!
//! A worker that dies holding tokens leaves them pending in the group; [`RedisQueue::reclaim`]
//! (XAUTOCLAIM) hands them to a live worker once they have been idle longer than the visibility
//! timeout. If Redis restarts empty the group is gone (NOGROUP): it is created again on the spot,
//! reading from the start of the stream so tokens added meanwhile are not skipped.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::streams::{StreamAutoClaimReply, StreamId, StreamInfoConsumersReply, StreamReadReply};
use redis::{RedisError, Script};

use super::{
    decode_entry, payload_value, DeadLetter, DeliveryQueue, Finish, Finished, Job, QueueError,
    QueueFuture, QueueStats,
};

const GROUP: &str = "workers";

/// The Redis delivery queue (see the module doc).
pub struct RedisQueue {
    conn: ConnectionManager,
    /// For XREADGROUP BLOCK only: a blocking read on the shared connection would stall every
    /// other command queued behind it.
    blocking: ConnectionManager,
    wh: String,
    max_dead: usize,
    finish: Script,
    promote: Script,
    redrive: Script,
    enable: Script,
    /// Where the next XAUTOCLAIM scan starts: it walks the pending list in pages, so entries
    /// far along it are reached even when live workers hold the oldest ones.
    cursor: std::sync::Mutex<String>,
}

/// A consumer (a gateway process that has since gone) with nothing pending is forgotten after
/// this long idle, so the group does not collect one consumer per restart forever.
const FORGET_CONSUMER_MS: usize = 3_600_000;

fn unavailable(e: RedisError) -> QueueError {
    QueueError::Unavailable(format!("redis: {e}"))
}

/// The key prefix of the webhook keys, under the ledger's prefix.
pub fn webhook_prefix(prefix: &str) -> String {
    format!("{prefix}wh:")
}

async fn manager(url: &str, response_timeout: Duration) -> Result<ConnectionManager, QueueError> {
    let client = redis::Client::open(url).map_err(unavailable)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(response_timeout))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500));
    ConnectionManager::new_with_config(client, config)
        .await
        .map_err(unavailable)
}

impl RedisQueue {
    /// Connect, create the consumer group if missing, and warn if Redis may evict keys.
    pub async fn connect(url: &str, prefix: &str, max_dead: usize) -> Result<Self, QueueError> {
        let q = RedisQueue {
            conn: manager(url, Duration::from_secs(2)).await?,
            // Longest block is a few seconds (see take); the margin covers a slow reply.
            blocking: manager(url, Duration::from_secs(10)).await?,
            wh: webhook_prefix(prefix),
            max_dead,
            finish: Script::new(include_str!("finish.lua")),
            promote: Script::new(include_str!("promote.lua")),
            redrive: Script::new(include_str!("redrive.lua")),
            enable: Script::new(include_str!("enable.lua")),
            cursor: std::sync::Mutex::new("0-0".into()),
        };
        q.ensure_group().await?;
        q.check_eviction_policy().await;
        Ok(q)
    }

    fn key(&self, k: &str) -> String {
        format!("{}{k}", self.wh)
    }

    async fn ensure_group(&self) -> Result<(), QueueError> {
        let mut conn = self.conn.clone();
        let made: Result<(), RedisError> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(self.key("stream"))
            .arg(GROUP)
            // From the start: after Redis restarted empty, tokens XADDed before the group was
            // recreated must still be read.
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut conn)
            .await;
        match made {
            Err(e) if e.code() != Some("BUSYGROUP") => Err(unavailable(e)),
            _ => Ok(()),
        }
    }

    /// Jobs from stream entries: the lanes' first messages in one round trip.
    async fn jobs(&self, consumer: &str, entries: Vec<StreamId>) -> Result<Vec<Job>, QueueError> {
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
                self.retire(&e.id).await?;
                continue;
            };
            let attempts = field("a").and_then(|a| a.parse().ok()).unwrap_or(0);
            pipe.cmd("LINDEX")
                .arg(self.key(&format!("lane:{sub}:{task}")))
                .arg(0);
            tokens.push((e.id, sub, task, attempts));
        }
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn.clone();
        let heads: Vec<Option<Vec<u8>>> = pipe.query_async(&mut conn).await.map_err(unavailable)?;
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
    /// Redis may refuse CONFIG; then nothing is said).
    async fn check_eviction_policy(&self) {
        let mut conn = self.conn.clone();
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

    /// Drop consumers long idle with nothing pending (best effort).
    async fn forget_idle_consumers(&self, me: &str) {
        let mut conn = self.conn.clone();
        let stream = self.key("stream");
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

    async fn retire(&self, id: &str) -> Result<(), QueueError> {
        let mut conn = self.conn.clone();
        let stream = self.key("stream");
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
            .map_err(unavailable)
    }
}

/// Dead-letter items are `meta-json \n lane-entry`.
fn dead_letter(item: &[u8]) -> Option<DeadLetter> {
    let nl = item.iter().position(|&b| b == b'\n')?;
    let meta: serde_json::Value = serde_json::from_slice(&item[..nl]).ok()?;
    let msg = decode_entry(&item[nl + 1..])?;
    let s = |k: &str| meta[k].as_str().unwrap_or_default().to_owned();
    Some(DeadLetter {
        msg_id: msg.msg_id,
        subscriber: s("subscriber"),
        task_id: s("task_id"),
        attempts: meta["attempts"].as_u64().unwrap_or(0) as u32,
        last_error: s("last_error"),
        failed_at: s("failed_at"),
        payload: payload_value(&msg.payload),
    })
}

impl DeliveryQueue for RedisQueue {
    fn take<'a>(
        &'a self,
        consumer: &'a str,
        max: usize,
        wait: Duration,
    ) -> QueueFuture<'a, Vec<Job>> {
        Box::pin(async move {
            let mut conn = self.blocking.clone();
            let read: Result<Option<StreamReadReply>, RedisError> = redis::cmd("XREADGROUP")
                .arg("GROUP")
                .arg(GROUP)
                .arg(consumer)
                .arg("COUNT")
                .arg(max)
                .arg("BLOCK")
                .arg(wait.as_millis().clamp(1, 5_000) as u64)
                .arg("STREAMS")
                .arg(self.key("stream"))
                .arg(">")
                .query_async(&mut conn)
                .await;
            match read {
                Ok(Some(reply)) => {
                    let entries = reply.keys.into_iter().flat_map(|k| k.ids).collect();
                    self.jobs(consumer, entries).await
                }
                Ok(None) => Ok(Vec::new()),
                Err(e) if e.code() == Some("NOGROUP") => {
                    tracing::warn!(
                        "webhook consumer group missing (Redis restarted empty?); recreating it"
                    );
                    self.ensure_group().await?;
                    Ok(Vec::new())
                }
                Err(e) => Err(unavailable(e)),
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
            let mut conn = self.conn.clone();
            self.forget_idle_consumers(consumer).await;
            let start = self
                .cursor
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let reply: Result<StreamAutoClaimReply, RedisError> = redis::cmd("XAUTOCLAIM")
                .arg(self.key("stream"))
                .arg(GROUP)
                .arg(consumer)
                .arg(min_idle.as_millis() as u64)
                .arg(start)
                .arg("COUNT")
                .arg(max)
                .query_async(&mut conn)
                .await;
            match reply {
                Ok(r) => {
                    *self.cursor.lock().unwrap_or_else(|p| p.into_inner()) = r.next_stream_id;
                    self.jobs(consumer, r.claimed).await
                }
                Err(e) if e.code() == Some("NOGROUP") => {
                    self.ensure_group().await?;
                    Ok(Vec::new())
                }
                Err(e) => Err(unavailable(e)),
            }
        })
    }

    fn finish<'a>(&'a self, job: &'a Job, how: Finish) -> QueueFuture<'a, Finished> {
        Box::pin(async move {
            let mut inv = self.finish.key(&self.wh);
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
                    inv.arg(meta.to_string()).arg(self.max_dead.max(1));
                }
                Finish::Park { reason } => {
                    inv.arg(reason.unwrap_or_default());
                }
            }
            let mut conn = self.conn.clone();
            let out: String = inv.invoke_async(&mut conn).await.map_err(unavailable)?;
            Ok(if out == "done" {
                Finished::Done
            } else {
                Finished::Stale
            })
        })
    }

    fn promote_due(&self, now_ms: i64, max: usize) -> QueueFuture<'_, usize> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            self.promote
                .key(&self.wh)
                .arg(now_ms)
                .arg(max)
                .invoke_async(&mut conn)
                .await
                .map_err(unavailable)
        })
    }

    fn stats(&self) -> QueueFuture<'_, QueueStats> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let (queued, retrying, dead): (Option<i64>, u64, u64) = redis::pipe()
                .cmd("GET")
                .arg(self.key("queued"))
                .cmd("ZCARD")
                .arg(self.key("retry"))
                .cmd("LLEN")
                .arg(self.key("dead"))
                .query_async(&mut conn)
                .await
                .map_err(unavailable)?;
            Ok(QueueStats {
                queued: queued.unwrap_or(0).max(0) as u64,
                retrying,
                dead,
            })
        })
    }

    fn dead_letters(&self, limit: usize) -> QueueFuture<'_, Vec<DeadLetter>> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let mut conn = self.conn.clone();
            let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                .arg(self.key("dead"))
                .arg(0)
                .arg(limit - 1)
                .query_async(&mut conn)
                .await
                .map_err(unavailable)?;
            Ok(items.iter().filter_map(|i| dead_letter(i)).collect())
        })
    }

    fn redrive<'a>(&'a self, subscriber: Option<&'a str>, limit: usize) -> QueueFuture<'a, usize> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            // Oldest first (the tail), so a lane's letters keep their order; a page at a time,
            // so a long list is never read whole into memory.
            const PAGE: i64 = 500;
            let (mut moved, mut end) = (0usize, -1i64);
            while moved < limit {
                let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                    .arg(self.key("dead"))
                    .arg(end - PAGE + 1)
                    .arg(end)
                    .query_async(&mut conn)
                    .await
                    .map_err(unavailable)?;
                if items.is_empty() {
                    break;
                }
                let mut kept = 0i64;
                for item in items.iter().rev() {
                    let d = dead_letter(item);
                    let wanted = moved < limit
                        && d.as_ref()
                            .is_some_and(|d| subscriber.is_none_or(|s| s == d.subscriber));
                    let Some(d) = d.filter(|_| wanted) else {
                        kept += 1;
                        continue;
                    };
                    let n: i64 = self
                        .redrive
                        .key(&self.wh)
                        .arg(item.as_slice())
                        .arg(&d.subscriber)
                        .arg(&d.task_id)
                        .invoke_async(&mut conn)
                        .await
                        .map_err(unavailable)?;
                    moved += n.max(0) as usize;
                }
                if (items.len() as i64) < PAGE {
                    break;
                }
                // The moved letters left the list; the kept ones of this page are still there.
                end -= kept;
            }
            Ok(moved)
        })
    }

    fn disabled(&self) -> QueueFuture<'_, Vec<(String, String)>> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let mut all: Vec<(String, String)> = redis::cmd("HGETALL")
                .arg(self.key("disabled"))
                .query_async(&mut conn)
                .await
                .map_err(unavailable)?;
            all.sort();
            Ok(all)
        })
    }

    fn enable<'a>(&'a self, subscriber: &'a str) -> QueueFuture<'a, usize> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let n: i64 = self
                .enable
                .key(&self.wh)
                .arg(subscriber)
                .invoke_async(&mut conn)
                .await
                .map_err(unavailable)?;
            Ok(n.max(0) as usize)
        })
    }
}
