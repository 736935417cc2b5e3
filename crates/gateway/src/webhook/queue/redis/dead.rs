//! The dead letters in Redis: how a letter is stored and read back, and a redrive of one
//! partition's letters (`DeliveryQueue::redrive` runs it over every partition).

use super::RedisQueue;
use crate::webhook::queue::{decode_entry, payload_value, DeadLetter, QueueError};

/// Dead-letter items are `meta-json \n lane-entry`.
pub(super) fn dead_letter(item: &[u8]) -> Option<DeadLetter> {
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

impl RedisQueue {
    /// [`DeliveryQueue::redrive`] in partition `p`.
    pub(super) async fn redrive_part(
        &self,
        p: usize,
        subscriber: Option<&str>,
        limit: usize,
    ) -> Result<usize, QueueError> {
        let mut conn = self.conn()?;
        let (dead, wh) = (self.key(p, "dead"), self.wh(p));
        // Oldest first (the tail), so a lane's letters keep their order; a page at a time,
        // so a long list is never read whole into memory.
        const PAGE: i64 = 500;
        let (mut moved, mut end) = (0usize, -1i64);
        while moved < limit {
            let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                .arg(&dead)
                .arg(end - PAGE + 1)
                .arg(end)
                .query_async(&mut conn)
                .await
                .map_err(|e| self.unavailable(e))?;
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
                    .key(&wh)
                    .arg(item.as_slice())
                    .arg(&d.subscriber)
                    .arg(&d.task_id)
                    .invoke_async(&mut conn)
                    .await
                    .map_err(|e| self.unavailable(e))?;
                moved += n.max(0) as usize;
            }
            if (items.len() as i64) < PAGE {
                break;
            }
            // The moved letters left the list; the kept ones of this page are still there.
            end -= kept;
        }
        Ok(moved)
    }
}
