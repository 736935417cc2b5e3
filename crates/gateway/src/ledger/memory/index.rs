//! A task's places kept in line with its record: the shard's quiet index (the reconciler's),
//! its listing index, and its owner's count of live tasks; and what a removed task leaves.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{entry_size, listing, MemoryLedger, Shard};

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
        let place = listing::Place::of(&e.record, e.context.clone());
        let listed = (e.listed.as_ref() != Some(&place)).then(|| e.listed.replace(place.clone()));
        let (agent, seq) = (e.record.agent.clone(), e.seq);
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
            self.count_owner(&o, owned);
        }
    }

    pub(super) fn count_owner(&self, owner: &Arc<str>, up: bool) {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        if up {
            *owners.get_or_insert_with(owner.clone(), || 0) += 1;
        } else if let Some(n) = owners.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                owners.remove(owner);
            }
        }
    }

    pub(super) fn live_of(&self, owner: &str) -> u64 {
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.get(owner).copied().unwrap_or(0)
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
                self.count_owner(o, false);
            }
        }
    }
}
