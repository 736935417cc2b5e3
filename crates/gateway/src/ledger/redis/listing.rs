//! The Redis ledger's listing (see `ledger::listing`): one script per partition
//! ([`list.lua`](../list.lua)), all partitions at once, each answering its count and its first
//! `limit` + 1 tasks after the cursor, merged over its sets in the listing order (the agents'
//! ranks given from here, so the order is bytewise as the in-process ledger's); the partitions
//! are merged here, and the page's records read at once.

use std::sync::Arc;

use redis::Value as RValue;

use super::{now_ms, RedisLedger};
use crate::ledger::listing::{merge, Listed, Page, Position, Query, Scope, Start};
use crate::ledger::{LedgerError, TaskLedger};

fn bad() -> LedgerError {
    super::bad_reply("list")
}

/// The sets a page reads, in the script's order: (agent, its rank in the listing order, the
/// set's state, or with a contextId the states listed, comma-separated).
type Sets<'a> = [(&'a Arc<str>, usize, String)];

impl RedisLedger {
    /// One partition's answer: its count, and its tasks in the listing order.
    fn read_part(
        &self,
        reply: Vec<RValue>,
        sets: &Sets<'_>,
    ) -> Result<(u64, Vec<(Position, ())>), LedgerError> {
        let mut reply = reply.into_iter();
        let total: i64 = reply
            .next()
            .and_then(|v| redis::from_redis_value_ref(&v).ok())
            .ok_or_else(bad)?;
        let rows: Vec<RValue> = reply.collect();
        let mut part = Vec::with_capacity(rows.len() / 3);
        for row in rows.chunks_exact(3) {
            let set: usize = redis::from_redis_value_ref(&row[0]).map_err(|_| bad())?;
            let score: String = redis::from_redis_value_ref(&row[1]).map_err(|_| bad())?;
            let key: String = redis::from_redis_value_ref(&row[2]).map_err(|_| bad())?;
            let (agent, _, _) = set
                .checked_sub(1)
                .and_then(|i| sets.get(i))
                .ok_or_else(bad)?;
            let score: f64 = score.parse().map_err(|_| bad())?;
            part.push((
                Position {
                    updated_ms: -(score as i64),
                    agent: (*agent).clone(),
                    key: key.into(),
                },
                (),
            ));
        }
        Ok((total.max(0) as u64, part))
    }

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
        // The sets asked: per agent, one per state of the scope's; with a contextId, the
        // agent's context set (every owner's, every state: the script asks each task).
        let mut agents: Vec<&Arc<str>> = q.agents.iter().collect();
        agents.sort();
        let sets: Vec<(&Arc<str>, usize, String)> = if q.context.is_some() {
            let states: Vec<&str> = q.statuses.iter().map(|s| s.as_str()).collect();
            let states = states.join(",");
            agents
                .iter()
                .enumerate()
                .map(|(rank, a)| (*a, rank, states.clone()))
                .collect()
        } else {
            agents
                .iter()
                .enumerate()
                .flat_map(|(rank, a)| {
                    q.statuses
                        .iter()
                        .map(move |s| (*a, rank, s.as_str().to_owned()))
                })
                .collect()
        };
        let sets: &Sets<'_> = &sets;
        let now = now_ms();
        // Distributed top-k: each partition is asked for a few more than its share of the page
        // first; a partition that had more, and whose last one falls within the page, is asked
        // again for a whole page. The page is then exact, and a page costs each partition's
        // script about its share rather than a page per set.
        let parts_n = self.store.keys.len().max(1);
        let full = q.limit + 1;
        let share = (2 * full.div_ceil(parts_n) + 2).min(full);
        let ask = |part: &str, n: usize| {
            let mut inv = self.list.key(part);
            inv.arg(now)
                .arg(n)
                .arg(&scope)
                .arg(&upper)
                .arg(q.context.as_deref().unwrap_or(""))
                .arg(&cursor_score)
                .arg(cursor_key);
            for (agent, rank, status) in sets {
                let mode = match Start::of(agent, q.after.as_ref()) {
                    Start::First => "F",
                    Start::Older(_) => "O",
                    Start::AtOrOlder(_) => "A",
                    Start::After(..) => "K",
                };
                inv.arg(&***agent).arg(status.as_str()).arg(mode).arg(*rank);
            }
            async move {
                let inv = &inv;
                let reply = self
                    .store
                    .idempotent(
                        |mut c| async move { inv.invoke_async::<Vec<RValue>>(&mut c).await },
                    )
                    .await
                    .map_err(|e| LedgerError::Store(self.store.failed(&e)))?;
                self.read_part(reply, sets)
            }
        };
        let names: Vec<&str> = self.store.keys.parts().collect();
        let first = futures_util::future::try_join_all(names.iter().map(|p| ask(p, share))).await?;
        let total: u64 = first.iter().map(|(t, _)| t).sum();
        let mut parts: Vec<Vec<(Position, ())>> = first.into_iter().map(|(_, p)| p).collect();
        if share < full {
            let mut all: Vec<&Position> = parts.iter().flatten().map(|(p, ())| p).collect();
            all.sort();
            let cut = all.get(full - 1).map(|p| (*p).clone());
            // Truncated (it may have more) and its last is before the page's end (or the page
            // is not full yet): its unseen tasks may belong on the page.
            let again: Vec<usize> = parts
                .iter()
                .enumerate()
                .filter(|(_, p)| p.len() == share)
                .filter(|(_, p)| match (&cut, p.last()) {
                    (Some(cut), Some((last, ()))) => last < cut,
                    _ => true,
                })
                .map(|(i, _)| i)
                .collect();
            let more =
                futures_util::future::try_join_all(again.iter().map(|i| ask(names[*i], full)))
                    .await?;
            for (i, (_, p)) in again.into_iter().zip(more) {
                parts[i] = p;
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
