//! The in-process listing index (see `ledger::listing`): per shard, one ordered set per (owner
//! or every task, agent, status), kept in line with each record by `MemoryLedger::sync` and
//! emptied by `remove`, so an evicted or expired task is neither listed nor counted.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use super::super::listing::{merge, Listed, Page, Position, Query, Scope, Start};
use super::super::Record;
use super::{lock, MemoryLedger, Shard};
use crate::protocol::task::Status;

/// Where a task is listed: what its indexes are chosen by, and its place in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Place {
    agent: Arc<str>,
    owner: Option<Arc<str>>,
    status: Status,
    updated_ms: i64,
}

impl Place {
    pub(super) fn of(record: &Record) -> Place {
        Place {
            agent: record.agent.clone(),
            owner: record.owner.clone(),
            status: record.head.status,
            updated_ms: record.head.updated_ms,
        }
    }
}

/// One index: (agent, owner or `None` for every task, status).
type Set = (Arc<str>, Option<Arc<str>>, Status);
type Entries = BTreeSet<(Reverse<i64>, Arc<str>)>;

/// A shard's listing index. Empty sets are dropped, so it holds at most two sets per task.
#[derive(Default)]
pub(super) struct Index(HashMap<Set, Entries>);

impl Index {
    /// Move `key` from `was` to `now` (either may be none).
    pub(super) fn relist(&mut self, key: &Arc<str>, was: Option<&Place>, now: Option<&Place>) {
        if let Some(p) = was {
            for set in sets(p) {
                if let Some(entries) = self.0.get_mut(&set) {
                    entries.remove(&(Reverse(p.updated_ms), key.clone()));
                    if entries.is_empty() {
                        self.0.remove(&set);
                    }
                }
            }
        }
        if let Some(p) = now {
            for set in sets(p) {
                self.0
                    .entry(set)
                    .or_default()
                    .insert((Reverse(p.updated_ms), key.clone()));
            }
        }
    }
}

/// The sets a task of this place is in: every task's, and its owner's.
fn sets(p: &Place) -> impl Iterator<Item = Set> + '_ {
    let all = (p.agent.clone(), None, p.status);
    let own = p
        .owner
        .clone()
        .map(|o| (p.agent.clone(), Some(o), p.status));
    std::iter::once(all).chain(own)
}

/// The entries of one set after the cursor's position, in the listing order.
fn after<'a>(
    entries: &'a Entries,
    start: &Start<'_>,
) -> impl Iterator<Item = &'a (Reverse<i64>, Arc<str>)> + 'a {
    let from = match *start {
        Start::First => Bound::Unbounded,
        Start::Older(ms) => Bound::Included((Reverse(ms.saturating_sub(1)), Arc::from(""))),
        Start::AtOrOlder(ms) => Bound::Included((Reverse(ms), Arc::from(""))),
        Start::After(ms, key) => Bound::Excluded((Reverse(ms), Arc::from(key))),
    };
    entries.range((from, Bound::Unbounded))
}

impl MemoryLedger {
    pub(super) fn list_now(&self, q: &Query) -> Page {
        let now = Instant::now();
        let owner = match &q.scope {
            Scope::All => None,
            Scope::Owner(o) => Some(o.clone()),
        };
        let mut total = 0u64;
        let mut parts = Vec::new();
        for shard in self.shards.iter() {
            let mut s = lock(shard);
            self.expire(&mut s, now);
            let s: &Shard = &s;
            let mut found: Vec<(Position, ())> = Vec::new();
            for agent in &q.agents {
                for &status in &q.statuses {
                    let Some(entries) = s.listing.0.get(&(agent.clone(), owner.clone(), status))
                    else {
                        continue;
                    };
                    let matches = |key: &Arc<str>| match &q.context {
                        None => true,
                        Some(c) => s
                            .tasks
                            .get(key)
                            .is_some_and(|e| e.context.as_deref() == Some(&**c)),
                    };
                    total += if q.since_ms.is_none() && q.context.is_none() {
                        entries.len() as u64
                    } else {
                        entries
                            .iter()
                            .take_while(|(Reverse(ms), _)| q.within(*ms))
                            .filter(|(_, k)| matches(k))
                            .count() as u64
                    };
                    let start = Start::of(agent, q.after.as_ref());
                    let picked = after(entries, &start)
                        .take_while(|(Reverse(ms), _)| q.within(*ms))
                        .filter(|(_, k)| matches(k))
                        .map(|(Reverse(ms), k)| {
                            let at = Position {
                                updated_ms: *ms,
                                agent: agent.clone(),
                                key: k.clone(),
                            };
                            (at, ())
                        })
                        .take(q.limit + 1);
                    found.extend(picked);
                }
            }
            parts.push(merge(vec![found], q.limit + 1).0);
        }
        let (page, more) = merge(parts, q.limit);
        Page {
            next: more.then(|| page.last().map(|(p, _)| p.clone())).flatten(),
            // Read after the shards' locks are let go, one at a time: a task removed since is
            // left out (the page is one shorter), one changed since is listed as it is now.
            tasks: page
                .into_iter()
                .filter_map(|(p, ())| {
                    let record = self.get_now(&p.key)?;
                    Some(Listed { key: p.key, record })
                })
                .collect(),
            total,
        }
    }
}
