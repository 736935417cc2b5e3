//! The in-process listing index (see `ledger::listing`): per shard, one ordered set per (owner
//! or every task, agent, status), and one per (agent, A2A context) for the `contextId` filter
//! (a context is one client's conversation: its set is as large as that client made it), kept
//! in line with each record by `MemoryLedger::sync` and emptied by `remove`, so an evicted or
//! expired task is neither listed nor counted.

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
    context: Option<Arc<str>>,
}

impl Place {
    pub(super) fn of(record: &Record, context: Option<Arc<str>>) -> Place {
        Place {
            agent: record.agent.clone(),
            owner: record.owner.clone(),
            status: record.head.status,
            updated_ms: record.head.updated_ms,
            context,
        }
    }
}

/// One index: (agent, owner or `None` for every task, status).
type Set = (Arc<str>, Option<Arc<str>>, Status);
type Entries = BTreeSet<(Reverse<i64>, Arc<str>)>;

/// A shard's listing index. Empty sets are dropped, so it holds at most three sets per task.
#[derive(Default)]
pub(super) struct Index {
    sets: HashMap<Set, Entries>,
    /// By (agent, contextId), every owner's.
    contexts: HashMap<(Arc<str>, Arc<str>), Entries>,
}

impl Index {
    /// Move `key` from `was` to `now` (either may be none).
    pub(super) fn relist(&mut self, key: &Arc<str>, was: Option<&Place>, now: Option<&Place>) {
        if let Some(p) = was {
            let entry = (Reverse(p.updated_ms), key.clone());
            for set in sets(p) {
                if let Some(entries) = self.sets.get_mut(&set) {
                    entries.remove(&entry);
                    if entries.is_empty() {
                        self.sets.remove(&set);
                    }
                }
            }
            if let Some(c) = &p.context {
                let set = (p.agent.clone(), c.clone());
                if let Some(entries) = self.contexts.get_mut(&set) {
                    entries.remove(&entry);
                    if entries.is_empty() {
                        self.contexts.remove(&set);
                    }
                }
            }
        }
        if let Some(p) = now {
            for set in sets(p) {
                self.sets
                    .entry(set)
                    .or_default()
                    .insert((Reverse(p.updated_ms), key.clone()));
            }
            if let Some(c) = &p.context {
                self.contexts
                    .entry((p.agent.clone(), c.clone()))
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
                let start = Start::of(agent, q.after.as_ref());
                // The sets to read, and the test a task of them passes: with a context, its one
                // set (every owner's, every state), each task asked; without, the scope's set of
                // each state asked, every task of which passes.
                let chosen: Vec<&Entries> = match &q.context {
                    Some(c) => s
                        .listing
                        .contexts
                        .get(&(agent.clone(), c.clone()))
                        .into_iter()
                        .collect(),
                    None => q
                        .statuses
                        .iter()
                        .filter_map(|st| s.listing.sets.get(&(agent.clone(), owner.clone(), *st)))
                        .collect(),
                };
                let passes = |key: &Arc<str>| match &q.context {
                    None => true,
                    Some(_) => s.tasks.get(key).is_some_and(|e| {
                        q.statuses.contains(&e.record.head.status)
                            && (owner.is_none() || e.record.owner == owner)
                    }),
                };
                for entries in chosen {
                    total += if q.since_ms.is_none() && q.context.is_none() {
                        entries.len() as u64
                    } else {
                        entries
                            .iter()
                            .take_while(|(Reverse(ms), _)| q.within(*ms))
                            .filter(|(_, k)| passes(k))
                            .count() as u64
                    };
                    let picked = after(entries, &start)
                        .take_while(|(Reverse(ms), _)| q.within(*ms))
                        .filter(|(_, k)| passes(k))
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
