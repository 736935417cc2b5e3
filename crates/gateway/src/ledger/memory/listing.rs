//! The in-process listing index (see `ledger::listing`): per shard, one ordered set per (owner
//! or every task, agent, status), and one per (agent, A2A context) for the `contextId` filter
//! (a context is one client's conversation: its set is as large as that client made it), kept
//! in line with each record by `MemoryLedger::sync` and emptied by `remove`, so an evicted or
//! expired task is neither listed nor counted.

use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::time::Instant;

use super::super::listing::{merge, Listed, Page, Position, Query, Scope, Start};
use super::super::{KeyMap, Record};
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
type Entry = (Reverse<i64>, Arc<str>);
type Entries = BTreeSet<Entry>;

/// A shard's listing index. Empty sets are dropped, so it holds at most three sets per task.
/// Its maps are [`KeyMap`]s, which grow a few entries per change (they change under the shard's
/// lock): `contexts` holds about one entry per A2A task (a message without a `contextId` starts
/// a context), `sets` one per (agent, owner, status). The sets themselves are B-trees, which
/// never move their entries to grow.
#[derive(Default)]
pub(super) struct Index {
    sets: KeyMap<Set, Entries>,
    /// By (agent, contextId), every owner's.
    contexts: KeyMap<(Arc<str>, Arc<str>), Context>,
}

/// The tasks of one context. Most contexts hold one task (a message without a `contextId`
/// starts a new one), so that one is kept inline: a set's first node is about 300 bytes and an
/// allocation on every new task.
enum Context {
    One(Entry),
    Many(Entries),
}

impl Context {
    fn insert(&mut self, e: Entry) {
        match self {
            Context::One(one) if *one == e => {}
            Context::One(one) => {
                let first = one.clone();
                *self = Context::Many(BTreeSet::from([first, e]));
            }
            Context::Many(set) => {
                set.insert(e);
            }
        }
    }

    /// Remove `e`; whether the context is empty now.
    fn remove(&mut self, e: &Entry) -> bool {
        match self {
            Context::One(one) => one == e,
            Context::Many(set) => {
                set.remove(e);
                set.is_empty()
            }
        }
    }

    fn view(&self) -> View<'_> {
        match self {
            Context::One(one) => View::One(one),
            Context::Many(set) => View::Set(set),
        }
    }
}

/// One set of entries to read, in the listing order.
#[derive(Clone, Copy)]
enum View<'a> {
    One(&'a Entry),
    Set(&'a Entries),
}

impl<'a> View<'a> {
    fn len(self) -> usize {
        match self {
            View::One(_) => 1,
            View::Set(set) => set.len(),
        }
    }

    fn iter(self) -> impl Iterator<Item = &'a Entry> + 'a {
        let (one, set) = self.parts();
        one.into_iter().chain(set.into_iter().flatten())
    }

    /// The entries after the cursor's position.
    fn after(self, start: &Start<'_>) -> impl Iterator<Item = &'a Entry> + 'a {
        let from = match *start {
            Start::First => Bound::Unbounded,
            Start::Older(ms) => Bound::Included((Reverse(ms.saturating_sub(1)), Arc::from(""))),
            Start::AtOrOlder(ms) => Bound::Included((Reverse(ms), Arc::from(""))),
            Start::After(ms, key) => Bound::Excluded((Reverse(ms), Arc::from(key))),
        };
        let range = (from, Bound::Unbounded);
        let (one, set) = self.parts();
        let one = one.filter(|e| range.contains(*e));
        one.into_iter()
            .chain(set.map(|s| s.range(range)).into_iter().flatten())
    }

    fn parts(self) -> (Option<&'a Entry>, Option<&'a Entries>) {
        match self {
            View::One(e) => (Some(e), None),
            View::Set(s) => (None, Some(s)),
        }
    }
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
                    if entries.remove(&entry) {
                        self.contexts.remove(&set);
                    }
                }
            }
        }
        if let Some(p) = now {
            for set in sets(p) {
                self.sets
                    .get_or_insert_with(set, Entries::default)
                    .insert((Reverse(p.updated_ms), key.clone()));
            }
            if let Some(c) = &p.context {
                let entry = (Reverse(p.updated_ms), key.clone());
                // A new context holds its first task inline (`insert` of the same entry again
                // leaves it so).
                self.contexts
                    .get_or_insert_with((p.agent.clone(), c.clone()), || {
                        Context::One(entry.clone())
                    })
                    .insert(entry);
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
                let chosen: Vec<View<'_>> = match &q.context {
                    Some(c) => s
                        .listing
                        .contexts
                        .get(&(agent.clone(), c.clone()))
                        .map(Context::view)
                        .into_iter()
                        .collect(),
                    None => q
                        .statuses
                        .iter()
                        .filter_map(|st| s.listing.sets.get(&(agent.clone(), owner.clone(), *st)))
                        .map(View::Set)
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
                    let picked = entries
                        .after(&start)
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::super::super::listing::{Query, Scope};
    use super::super::super::Evictions;
    use super::*;
    use crate::protocol::task::Head;

    fn doc(id: &str, ctx: &str) -> Bytes {
        Bytes::from(format!(r#"{{"id":"{id}","contextId":"{ctx}"}}"#))
    }

    fn apply(l: &MemoryLedger, id: &str, ctx: &str, status: Status, ms: i64) {
        let head = Head {
            status,
            updated_ms: ms,
        };
        l.apply_doc(
            "echo",
            &format!("echo/{id}"),
            head,
            doc(id, ctx),
            None,
            None,
        )
        .expect("recorded");
    }

    fn listed(l: &MemoryLedger, ctx: &str, limit: usize) -> (Vec<String>, u64) {
        let mut q = Query {
            scope: Scope::All,
            agents: vec![Arc::from("echo")],
            statuses: Status::ALL.to_vec(),
            since_ms: None,
            context: Some(Arc::from(ctx)),
            after: None,
            limit,
        };
        let mut keys = Vec::new();
        loop {
            let page = l.list_now(&q);
            keys.extend(page.tasks.iter().map(|t| t.key.to_string()));
            match page.next {
                Some(at) => q.after = Some(at),
                None => return (keys, page.total),
            }
        }
    }

    #[test]
    fn a_context_of_one_task_then_of_many_lists_each_once_in_order() {
        let l = MemoryLedger::new(100, Duration::from_secs(60), Evictions::unregistered());
        apply(&l, "a", "c1", Status::Submitted, 10);
        apply(&l, "z", "c2", Status::Submitted, 11);
        assert_eq!(listed(&l, "c1", 2), (vec!["echo/a".to_owned()], 1));
        // The one task moves (its entry is taken out and put back): still listed once.
        apply(&l, "a", "c1", Status::Working, 12);
        assert_eq!(listed(&l, "c1", 2), (vec!["echo/a".to_owned()], 1));
        apply(&l, "b", "c1", Status::Completed, 14);
        apply(&l, "c", "c1", Status::InputRequired, 13);
        let want: Vec<String> = ["echo/b", "echo/c", "echo/a"].map(String::from).to_vec();
        for limit in [1, 2, 50] {
            assert_eq!(
                listed(&l, "c1", limit),
                (want.clone(), 3),
                "page size {limit}"
            );
        }
        // A task that moves on within a context of many is listed once, at its new place.
        apply(&l, "a", "c1", Status::Completed, 15);
        let want: Vec<String> = ["echo/a", "echo/b", "echo/c"].map(String::from).to_vec();
        assert_eq!(listed(&l, "c1", 2), (want, 3));
        assert_eq!(listed(&l, "c2", 2), (vec!["echo/z".to_owned()], 1));
        assert_eq!(listed(&l, "c3", 2), (vec![], 0));
    }
}
