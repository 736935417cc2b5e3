//! The reconciler's side of the Redis ledger: the quiet tasks of an agent over every partition,
//! and the lease on one of them ([`lease.lua`](../lease.lua)).

use std::sync::Arc;
use std::time::Duration;

use super::{millis, now_ms, RedisLedger};
use crate::ledger::LedgerError;

impl RedisLedger {
    pub(super) async fn quiet_inner(
        &self,
        agent: &str,
        before_ms: i64,
        limit: usize,
    ) -> Result<Vec<Arc<str>>, LedgerError> {
        let per = self.store.keys.parts().map(|part| {
            let mut cmd = redis::cmd("ZRANGEBYSCORE");
            cmd.arg(format!("{part}quiet:{agent}"))
                .arg("-inf")
                .arg(format!("({before_ms}"))
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(limit);
            async move {
                let cmd = &cmd;
                self.read(
                    |mut c| async move { cmd.query_async::<Vec<(String, f64)>>(&mut c).await },
                )
                .await
            }
        });
        let mut found: Vec<(f64, String)> = futures_util::future::try_join_all(per)
            .await?
            .into_iter()
            .flatten()
            .map(|(id, at)| (at, id))
            .collect();
        found.sort_by(|a, b| a.0.total_cmp(&b.0));
        found.truncate(limit);
        Ok(found.into_iter().map(|(_, id)| id.into()).collect())
    }

    pub(super) async fn lease_inner(
        &self,
        agent: &str,
        task_id: &str,
        before_ms: i64,
        after: Duration,
        floor: Duration,
    ) -> Result<bool, LedgerError> {
        let keys = &self.store.keys;
        let part = keys.prefixes(keys.of(task_id));
        let task_key = format!("{}task:{task_id}", part.prefix);
        let fence = self.fence(&task_key);
        let mut inv = self.lease.key(task_key);
        inv.key(format!("{}quiet:{agent}", part.prefix))
            .arg(task_id)
            .arg(before_ms)
            .arg(now_ms())
            .arg(millis(after))
            .arg(millis(floor))
            .arg(millis(crate::ledger::MAX_RECONCILE_BACKOFF));
        let inv = &inv;
        let taken: i64 = self
            .write(fence.as_deref(), |mut c| async move {
                Ok((inv.invoke_async(&mut c).await?, c))
            })
            .await?;
        Ok(taken == 1)
    }
}
