//! A task's A2A push configs in the Redis ledger: a hash beside the task hash, in its partition
//! (`{part}push:{task}`), written by [`push.lua`](../push.lua) only beside a recorded task and
//! expiring with it; `apply.lua` reads it to queue each change for every config.

use bytes::Bytes;

use super::RedisLedger;
use crate::ledger::{LedgerError, PushAudience, PushPut};

/// The clients' configs of a push hash, by id (`~` fields are the store's own: the agent's
/// token).
fn clients_configs(mut all: Vec<(String, Vec<u8>)>) -> Vec<Bytes> {
    all.retain(|(id, _)| !id.starts_with('~'));
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.into_iter().map(|(_, c)| Bytes::from(c)).collect()
}

impl RedisLedger {
    fn push_keys(&self, task_id: &str) -> (String, String) {
        let keys = &self.store.keys;
        let part = keys.prefixes(keys.of(task_id));
        (
            format!("{}task:{task_id}", part.prefix),
            format!("{}push:{task_id}", part.prefix),
        )
    }

    async fn push_script<T: redis::FromRedisValue + Send>(
        &self,
        task_id: &str,
        args: &[&[u8]],
    ) -> Result<T, LedgerError> {
        let (task_key, push_key) = self.push_keys(task_id);
        self.run_script(&self.push, &[&task_key, &push_key], args)
            .await
    }

    pub(super) async fn push_configs_inner(
        &self,
        task_id: &str,
    ) -> Result<Vec<Bytes>, LedgerError> {
        let (_, push_key) = self.push_keys(task_id);
        let push_key = &push_key;
        let all: Vec<(String, Vec<u8>)> = self
            .read(|mut c| async move {
                redis::cmd("HGETALL")
                    .arg(push_key)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(clients_configs(all))
    }

    /// The configs and the task's owner in one round trip (both keys are in the task's slot).
    pub(super) async fn push_audience_inner(
        &self,
        task_id: &str,
    ) -> Result<PushAudience, LedgerError> {
        let (task_key, push_key) = self.push_keys(task_id);
        let mut pipe = redis::pipe();
        pipe.cmd("HGETALL").arg(&push_key);
        pipe.cmd("HGET").arg(&task_key).arg("owner");
        let pipe = &pipe;
        let (all, owner): (Vec<(String, Vec<u8>)>, Option<String>) = self
            .read(|mut c| async move { pipe.query_async(&mut c).await })
            .await?;
        Ok(PushAudience {
            configs: clients_configs(all),
            owner: owner.filter(|o| !o.is_empty()).map(Into::into),
        })
    }

    pub(super) async fn put_push_inner(
        &self,
        task_id: &str,
        id: &str,
        config: &[u8],
        max: usize,
    ) -> Result<PushPut, LedgerError> {
        let max = max.to_string();
        let done: String = self
            .push_script(task_id, &[b"put", id.as_bytes(), config, max.as_bytes()])
            .await?;
        Ok(match done.as_str() {
            "created" => PushPut::Stored { created: true },
            "replaced" => PushPut::Stored { created: false },
            "full" => PushPut::Full,
            _ => PushPut::NoTask,
        })
    }

    pub(super) async fn push_current_inner(
        &self,
        task_id: &str,
        id: &str,
    ) -> Result<bool, LedgerError> {
        let keys = &self.store.keys;
        let max = self.outbox.as_ref().map_or_else(
            || "0 0 0 0".to_owned(),
            |o| o.bounds.share(keys.len()).arg(),
        );
        let wh = keys.prefixes(keys.of(task_id)).wh.to_string();
        let head = format!(
            "{} 1\nmsg_{}_0\n",
            crate::protocol::time::now_ms(),
            uuid::Uuid::new_v4().simple()
        );
        let n: i64 = self
            .push_script(
                task_id,
                &[
                    b"now",
                    id.as_bytes(),
                    head.as_bytes(),
                    max.as_bytes(),
                    wh.as_bytes(),
                    task_id.as_bytes(),
                ],
            )
            .await?;
        Ok(n == 1)
    }

    pub(super) async fn delete_push_inner(
        &self,
        task_id: &str,
        id: &str,
    ) -> Result<bool, LedgerError> {
        let n: i64 = self.push_script(task_id, &[b"del", id.as_bytes()]).await?;
        Ok(n == 1)
    }

    pub(super) async fn push_token_inner(
        &self,
        task_id: &str,
        fresh: Option<&str>,
    ) -> Result<Option<String>, LedgerError> {
        let Some(fresh) = fresh else {
            // A read (the agent's pushes check it): no script, no replication fence.
            let (_, push_key) = self.push_keys(task_id);
            let push_key = &push_key;
            return self
                .read(|mut c| async move {
                    redis::cmd("HGET")
                        .arg(push_key)
                        .arg("~token")
                        .query_async::<Option<String>>(&mut c)
                        .await
                })
                .await;
        };
        let t: String = self
            .push_script(task_id, &[b"token", fresh.as_bytes()])
            .await?;
        Ok(Some(t).filter(|t| !t.is_empty()))
    }
}
