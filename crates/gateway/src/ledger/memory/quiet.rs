//! The reconciler's view of the in-process ledger: the quiet tasks of an agent (not final, not
//! interrupted, unchanged since a time), and the lease that offers each one once per backoff.

use super::*;

impl MemoryLedger {
    pub(super) fn quiet_now(&self, agent: &str, before_ms: i64, limit: usize) -> Vec<Arc<str>> {
        let agent: Arc<str> = agent.into();
        let mut found: Vec<(i64, Arc<str>)> = Vec::new();
        for shard in self.shards.iter() {
            let s = lock(shard);
            let from = (agent.clone(), i64::MIN, 0);
            let to = (agent.clone(), before_ms, 0);
            found.extend(
                s.quiet
                    .range(from..to)
                    .take(limit)
                    .map(|((_, at, _), k)| (*at, k.clone())),
            );
        }
        found.sort_by_key(|(at, _)| *at);
        found.truncate(limit);
        found.into_iter().map(|(_, k)| k).collect()
    }

    pub(super) fn lease_now(
        &self,
        task_id: &str,
        before_ms: i64,
        after: Duration,
        floor: Duration,
    ) -> bool {
        let mut s = self.shard(task_id);
        let Some(key) = s.tasks.get_key_value(task_id).map(|(k, _)| k.clone()) else {
            return false;
        };
        let Some(e) = s.tasks.get_mut(&key) else {
            return false;
        };
        if e.quiet.is_none_or(|at| at >= before_ms) {
            return false;
        }
        e.checks = e.checks.saturating_add(1);
        let look = next_look(crate::protocol::time::now_ms(), e.checks, after, floor);
        self.sync(&mut s, &key, Some(look));
        true
    }
}
