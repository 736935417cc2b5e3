//! A task's places kept in line with its record: the shard's quiet index (the reconciler's),
//! its listing index, and its owner's count of live tasks; and what a removed task leaves.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{entry_size, listing, MemoryLedger, Shard};

/// A client's live tasks in the in-process ledger: how many, and their documents' bytes.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Owned {
    pub tasks: u64,
    pub bytes: u64,
}

impl MemoryLedger {
    /// Bring the entry's place in the quiet index and its owner's live count in line with its
    /// record; `quiet` is its new quiet-since mark (`None`: keep the one it has).
    pub(super) fn sync(&self, s: &mut Shard, key: &Arc<str>, quiet: Option<i64>) {
        let Some(e) = s.tasks.get_mut(key) else {
            return;
        };
        let status = e.record.head.status;
        let live = !status.is_terminal();
        let indexed = live && !status.is_interrupted();
        let next = if indexed {
            quiet.or(e.quiet).or(Some(e.changed_ms))
        } else {
            None
        };
        let was = std::mem::replace(&mut e.quiet, next);
        let owned = live && e.record.owner.is_some();
        let owner_moved = (e.owned_live != owned).then(|| e.record.owner.clone());
        e.owned_live = owned;
        // Its owner's live bytes (`[[clients]] max_ledger_bytes`): its document's, while live.
        let size = if owned {
            entry_size(key, &e.record.task)
        } else {
            0
        };
        let grown = size as i64 - std::mem::replace(&mut e.owned_bytes, size) as i64;
        let owner_grown = (grown != 0 && owner_moved.is_none())
            .then(|| e.record.owner.clone())
            .flatten();
        // Its context's claim lives while it does (`contexts.rs`): counted with its owner's
        // live tasks, under the context it was counted in.
        let context_moved = match owner_moved {
            Some(_) if owned => {
                e.live_in = e.context.clone();
                e.live_in.clone()
            }
            Some(_) => e.live_in.take(),
            None => None,
        };
        let place = listing::Place::of(&e.record, e.context.clone());
        let listed = (e.listed.as_ref() != Some(&place)).then(|| e.listed.replace(place.clone()));
        let (agent, seq) = (e.record.agent.clone(), e.seq);
        let agent_name = agent.clone();
        if let Some(old) = listed {
            s.listing.relist(key, old.as_ref(), Some(&place));
        }
        if was != next {
            if let Some(at) = was {
                s.quiet.remove(&(agent.clone(), at, seq));
            }
            if let Some(at) = next {
                s.quiet.insert((agent, at, seq), key.clone());
            }
        }
        if let Some(Some(o)) = owner_moved {
            self.count_owner(&o, if owned { 1 } else { -1 }, grown);
            if let Some(context) = context_moved {
                self.contexts.task_live(&agent_name, &context, &o, owned);
            }
        } else if let Some(o) = owner_grown {
            self.count_owner(&o, 0, grown);
        }
    }

    /// Move `owner`'s live tasks by `tasks` and their bytes by `bytes`.
    pub(super) fn count_owner(&self, owner: &Arc<str>, tasks: i64, bytes: i64) {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        let o = owners.get_or_insert_with(owner.clone(), Owned::default);
        o.tasks = o.tasks.saturating_add_signed(tasks);
        o.bytes = o.bytes.saturating_add_signed(bytes);
        if o.tasks == 0 {
            owners.remove(owner);
        }
    }

    /// `owner`'s live tasks, and their bytes.
    pub(super) fn live_of(&self, owner: &str) -> Owned {
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.get(owner).copied().unwrap_or_default()
    }

    /// Remove a task and everything that counts it.
    pub(super) fn remove(&self, s: &mut Shard, key: &str) {
        let Some(e) = s.tasks.remove(key) else {
            return;
        };
        s.counts[e.record.head.status.index()] -= 1;
        self.held.fetch_sub(1, Ordering::Relaxed);
        let push = e.push.as_ref().map_or(0, |p| p.bytes());
        self.bytes
            .fetch_sub(entry_size(key, &e.record.task) + push, Ordering::Relaxed);
        if let Some(at) = e.quiet {
            s.quiet.remove(&(e.record.agent.clone(), at, e.seq));
        }
        if let Some(place) = &e.listed {
            let key: Arc<str> = key.into();
            s.listing.relist(&key, Some(place), None);
        }
        if e.owned_live {
            if let Some(o) = &e.record.owner {
                self.count_owner(o, -1, -(e.owned_bytes as i64));
                if let Some(context) = &e.live_in {
                    self.contexts.task_live(&e.record.agent, context, o, false);
                }
            }
        }
    }
}
