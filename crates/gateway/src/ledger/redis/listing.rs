//! The Redis ledger's listing (see `ledger::listing`): one script per partition
//! ([`list.lua`](../list.lua)), all partitions at once, each answering its count and the first
//! `limit` + 1 tasks of each set after the cursor; the sets are merged here, bytewise as the
//! in-process ledger orders them, and the page's records read at once.

use std::sync::Arc;

use redis::Value as RValue;

use super::{now_ms, unavailable, RedisLedger};
use crate::ledger::listing::{merge, Listed, Page, Position, Query, Scope, Start};
use crate::ledger::{LedgerError, TaskLedger};

fn bad() -> LedgerError {
    LedgerError::Unavailable("redis: unexpected reply from the listing script".into())
}

impl RedisLedger {
    pub(super) async fn list_inner(&self, q: &Query) -> Result<Page, LedgerError> {
        let scope = match &q.scope {
            Scope::All => "*".to_owned(),
            Scope::Owner(o) => format!("o:{o}"),
        };
        let upper = q
            .since_ms
            .map_or_else(|| "+inf".to_owned(), |s| s.saturating_neg().to_string());
        let (cursor_score, cursor_key) = match &q.after {
            Some(p) => (p.updated_ms.saturating_neg().to_string(), &*p.key),
            None => (String::new(), ""),
        };
        // The sets asked, in order: (agent, status) for each agent and status.
        let sets: Vec<(&Arc<str>, crate::protocol::task::Status)> = q
            .agents
            .iter()
            .flat_map(|a| q.statuses.iter().map(move |s| (a, *s)))
            .collect();
        let now = now_ms();
        let per = self.store.keys.parts().map(|part| {
            let mut inv = self.list.key(part);
            inv.arg(now)
                .arg(q.limit)
                .arg(&scope)
                .arg(&upper)
                .arg(q.context.as_deref().unwrap_or(""))
                .arg(&cursor_score)
                .arg(cursor_key);
            for (agent, status) in &sets {
                let mode = match Start::of(agent, q.after.as_ref()) {
                    Start::First => "F",
                    Start::Older(_) => "O",
                    Start::AtOrOlder(_) => "A",
                    Start::After(..) => "K",
                };
                inv.arg(&***agent).arg(status.as_str()).arg(mode);
            }
            async move {
                let inv = &inv;
                self.store
                    .idempotent(
                        |mut c| async move { inv.invoke_async::<Vec<RValue>>(&mut c).await },
                    )
                    .await
                    .map_err(unavailable)
            }
        });
        let mut total = 0u64;
        let mut parts = Vec::new();
        for reply in futures_util::future::try_join_all(per).await? {
            let mut reply = reply.into_iter();
            let n: i64 = reply
                .next()
                .and_then(|v| redis::from_redis_value_ref(&v).ok())
                .ok_or_else(bad)?;
            total += n.max(0) as u64;
            for ((agent, _), found) in sets.iter().zip(reply) {
                let rows: Vec<String> = redis::from_redis_value_ref(&found).map_err(|_| bad())?;
                let mut set = Vec::with_capacity(rows.len() / 2);
                for pair in rows.chunks_exact(2) {
                    let score: f64 = pair[0].parse().map_err(|_| bad())?;
                    let at = Position {
                        updated_ms: -(score as i64),
                        agent: (*agent).clone(),
                        key: pair[1].as_str().into(),
                    };
                    set.push((at, ()));
                }
                parts.push(set);
            }
        }
        let (page, more) = merge(parts, q.limit);
        let records =
            futures_util::future::try_join_all(page.iter().map(|(p, ())| self.get(&p.key))).await?;
        Ok(Page {
            next: more.then(|| page.last().map(|(p, _)| p.clone())).flatten(),
            // A task expired since the script ran is left out (the page is one shorter).
            tasks: page
                .into_iter()
                .zip(records)
                .filter_map(|((p, ()), r)| {
                    Some(Listed {
                        key: p.key,
                        record: r?,
                    })
                })
                .collect(),
            total,
        })
    }
}
