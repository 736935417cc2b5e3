//! The in-process ledger's official A2A context claims (`TaskLedger::claim_context`): whose
//! each context is, how long it stays so, and how many each client holds.
//!
//! A claim lives while a task recorded in its context (with its owner) is live, and
//! `2 × task_retention` after the last such task ends (the task itself is kept `task_retention`
//! after it ends; the claim `task_retention` after that), or as long as it was held for a
//! message on its way or kept for an answer. It is never given to another client while it
//! lives, and never evicted: a client past its `max_contexts` is refused its own new
//! conversations, never another client's. The store as a whole holds at most as many claims as
//! the ledger holds tasks (`max_tasks`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::ledger::{ContextClaim, ContextHold, KeyMap, LedgerError};

const SHARDS: usize = 16;

/// One claim.
struct Claim {
    owner: Arc<str>,
    /// Messages on their way that hold it and have not kept it yet.
    holds: u32,
    /// An answer named it, or a task was recorded in it: no message's failure frees it now.
    kept: bool,
    /// Live tasks recorded in it: while there is one, it does not expire.
    live: u32,
    /// When it expires, if no task of it is live; its place in the shard's expiry index.
    expires: Instant,
    seq: u64,
}

#[derive(Default)]
struct Shard {
    /// By `agent \n context`.
    claims: KeyMap<Box<str>, Claim>,
    /// The claims that may expire (no live task), by expiry.
    expiry: BTreeMap<(Instant, u64), Box<str>>,
    next_seq: u64,
}

impl Shard {
    /// Index `key`'s claim at its expiry (out of the index while a task of it is live).
    fn index(&mut self, key: &str) {
        let seq = self.next_seq;
        let Some(c) = self.claims.get_mut(key) else {
            return;
        };
        self.expiry.remove(&(c.expires, c.seq));
        if c.live == 0 {
            c.seq = seq;
            self.next_seq += 1;
            self.expiry.insert((c.expires, seq), key.into());
        }
    }
}

/// The claims (see the module doc).
pub(super) struct Contexts {
    shards: Box<[Mutex<Shard>]>,
    hasher: ahash::RandomState,
    /// Each client's claims, over every shard (taken after a shard's lock, never before).
    owners: Mutex<KeyMap<Arc<str>, u64>>,
    /// Claims held, over every shard.
    total: AtomicUsize,
    /// Claims in all at most (`max_tasks`): exact, whatever the shards' share of it.
    max: usize,
    retention: Duration,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn key_of(agent: &str, context: &str) -> Box<str> {
    let mut k = String::with_capacity(agent.len() + context.len() + 1);
    k.push_str(agent);
    k.push('\n');
    k.push_str(context);
    k.into_boxed_str()
}

impl Contexts {
    /// At most `max` claims in all (split over the shards); a claim's tasks' retention is
    /// `retention`.
    pub(super) fn new(max: usize, retention: Duration) -> Contexts {
        Contexts {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: ahash::RandomState::new(),
            owners: Mutex::new(KeyMap::default()),
            total: AtomicUsize::new(0),
            max: max.max(1),
            retention,
        }
    }

    fn shard(&self, key: &str) -> MutexGuard<'_, Shard> {
        lock(&self.shards[(self.hasher.hash_one(key) as usize) % SHARDS])
    }

    fn count(&self, owner: &Arc<str>, up: bool) {
        if up {
            self.total.fetch_add(1, Ordering::Relaxed);
        } else {
            self.total.fetch_sub(1, Ordering::Relaxed);
        }
        let mut owners = lock(&self.owners);
        if up {
            *owners.get_or_insert_with(owner.clone(), || 0) += 1;
        } else if let Some(n) = owners.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                owners.remove(owner);
            }
        }
    }

    /// Remove `s`'s claims expired by `now`.
    fn expire(&self, s: &mut Shard, now: Instant) {
        while let Some(entry) = s.expiry.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            if let Some(c) = s.claims.remove(&key) {
                self.count(&c.owner, false);
            }
        }
    }

    pub(super) fn owned_by(&self, owner: &str) -> u64 {
        lock(&self.owners).get(owner).copied().unwrap_or(0)
    }

    /// Whether `owner` may take one more context: fewer than `max` of its own, and room in
    /// the store (whose bound a claim made after the agent answered may pass by the messages
    /// in flight, rather than refuse a context the agent has made).
    pub(super) fn room(&self, owner: &str, max: u64) -> Result<(), LedgerError> {
        let over = || self.owned_by(owner) >= max || self.total.load(Ordering::Relaxed) >= self.max;
        if over() {
            // Claims are dropped as they expire when their shard is next touched: counted
            // again once every shard has dropped its expired ones (each claim once: the work
            // is its own, and done only at the bound).
            let now = Instant::now();
            for m in self.shards.iter() {
                self.expire(&mut lock(m), now);
            }
            if self.owned_by(owner) >= max {
                return Err(LedgerError::TooManyContexts { limit: max });
            }
            if over() {
                return Err(LedgerError::ContextsFull);
            }
        }
        Ok(())
    }

    pub(super) fn claim(
        &self,
        agent: &str,
        context: &str,
        owner: &str,
        how: ContextHold,
        max: Option<u64>,
    ) -> Result<ContextClaim, LedgerError> {
        let key = key_of(agent, context);
        if let Some(found) = self.claimed(&key, owner, how) {
            return Ok(found);
        }
        // A new claim: within the owner's bound and the store's (checked with no shard held:
        // `room` looks at every shard), unless the agent has answered in it.
        if let Some(limit) = max {
            self.room(owner, limit)?;
        }
        let now = Instant::now();
        let mut s = self.shard(&key);
        self.expire(&mut s, now);
        if s.claims.contains_key(&key) {
            // Claimed meanwhile (by this owner or another): judged as found.
            drop(s);
            return Ok(self
                .claimed(&key, owner, how)
                .unwrap_or(ContextClaim::Other));
        }
        if max.is_some() && self.total.load(Ordering::Relaxed) >= self.max {
            return Err(LedgerError::ContextsFull);
        }
        let owner: Arc<str> = owner.into();
        let (holds, kept, d) = match how {
            ContextHold::Hold(d) => (1, false, d),
            ContextHold::Keep(d) => (0, true, d),
        };
        s.claims.insert(
            key.clone(),
            Claim {
                owner: owner.clone(),
                holds,
                kept,
                live: 0,
                expires: now + d,
                seq: 0,
            },
        );
        s.index(&key);
        self.count(&owner, true);
        Ok(ContextClaim::Claimed)
    }

    /// A claim of `key` that stands: whose it is (another client's, or `owner`'s, then held or
    /// kept longer as `how` says); `None` when there is none.
    fn claimed(&self, key: &str, owner: &str, how: ContextHold) -> Option<ContextClaim> {
        let now = Instant::now();
        let mut s = self.shard(key);
        self.expire(&mut s, now);
        let c = s.claims.get_mut(key)?;
        if &*c.owner != owner {
            return Some(ContextClaim::Other);
        }
        match how {
            ContextHold::Hold(d) => {
                if !c.kept {
                    c.holds += 1;
                }
                c.expires = c.expires.max(now + d);
            }
            ContextHold::Keep(d) => {
                c.kept = true;
                c.expires = c.expires.max(now + d);
            }
        }
        s.index(key);
        Some(ContextClaim::Owned)
    }

    pub(super) fn drop_hold(&self, agent: &str, context: &str, owner: &str) {
        let key = key_of(agent, context);
        let mut s = self.shard(&key);
        let Some(c) = s.claims.get_mut(&key) else {
            return;
        };
        if &*c.owner != owner || c.kept {
            return;
        }
        c.holds = c.holds.saturating_sub(1);
        if c.holds == 0 && c.live == 0 {
            if let Some(c) = s.claims.remove(&key) {
                s.expiry.remove(&(c.expires, c.seq));
                self.count(&c.owner, false);
            }
        }
    }

    /// A live task of `owner` recorded in the context (`up`), or one that ended or left the
    /// ledger: while one is live the claim does not expire; after the last, it lives
    /// `2 × retention` more. A task recorded in a context its owner holds no claim on (it
    /// lapsed while the task was on its way) claims it again, past any bound: the task exists.
    pub(super) fn task_live(&self, agent: &str, context: &str, owner: &Arc<str>, up: bool) {
        let now = Instant::now();
        let key = key_of(agent, context);
        let mut s = self.shard(&key);
        let after = now + self.retention * 2;
        match s.claims.get_mut(&key) {
            Some(c) if c.owner != *owner => return,
            Some(c) => {
                c.kept = true;
                if up {
                    c.live += 1;
                } else {
                    c.live = c.live.saturating_sub(1);
                    c.expires = c.expires.max(after);
                }
            }
            None => {
                s.claims.insert(
                    key.clone(),
                    Claim {
                        owner: owner.clone(),
                        holds: 0,
                        kept: true,
                        live: u32::from(up),
                        expires: after,
                        seq: 0,
                    },
                );
                self.count(owner, true);
            }
        }
        s.index(&key);
    }

    /// Claims held, over every shard (expired ones dropped first).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        let now = Instant::now();
        self.shards
            .iter()
            .map(|m| {
                let mut s = lock(m);
                self.expire(&mut s, now);
                s.claims.len()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(3600);

    fn contexts() -> Contexts {
        Contexts::new(64, Duration::from_secs(60))
    }

    #[test]
    fn a_context_is_one_clients_and_counts_against_its_bound() {
        let c = contexts();
        let keep = ContextHold::Keep(LONG);
        assert_eq!(
            c.claim("a", "c1", "alice", keep, Some(2)).ok(),
            Some(ContextClaim::Claimed)
        );
        assert_eq!(
            c.claim("a", "c1", "alice", keep, Some(2)).ok(),
            Some(ContextClaim::Owned)
        );
        assert_eq!(
            c.claim("a", "c1", "bob", keep, Some(2)).ok(),
            Some(ContextClaim::Other)
        );
        // The same id under another agent is another context.
        assert_eq!(
            c.claim("b", "c1", "bob", keep, Some(2)).ok(),
            Some(ContextClaim::Claimed)
        );
        assert_eq!(
            c.claim("a", "c2", "alice", keep, Some(2)).ok(),
            Some(ContextClaim::Claimed)
        );
        assert!(matches!(
            c.claim("a", "c3", "alice", keep, Some(2)),
            Err(LedgerError::TooManyContexts { limit: 2 })
        ));
        // Alice's bound is hers: Bob is not refused for it.
        assert_eq!(
            c.claim("a", "c3", "bob", keep, Some(2)).ok(),
            Some(ContextClaim::Claimed)
        );
        // An answer in a context past the bound is kept all the same (the agent made it).
        assert_eq!(
            c.claim("a", "c4", "alice", keep, None).ok(),
            Some(ContextClaim::Claimed)
        );
        assert_eq!(c.owned_by("alice"), 3);
        assert_eq!(c.owned_by("bob"), 2);
    }

    #[test]
    fn a_hold_is_freed_unless_kept_and_expires_when_its_message_is_lost() {
        let c = contexts();
        let hold = ContextHold::Hold(LONG);
        assert_eq!(
            c.claim("a", "c", "alice", hold, None).ok(),
            Some(ContextClaim::Claimed)
        );
        // A second message of hers holds it too: freed only when both let it go.
        assert_eq!(
            c.claim("a", "c", "alice", hold, None).ok(),
            Some(ContextClaim::Owned)
        );
        c.drop_hold("a", "c", "alice");
        assert_eq!(
            c.claim("a", "c", "bob", hold, None).ok(),
            Some(ContextClaim::Other)
        );
        c.drop_hold("a", "c", "bob");
        c.drop_hold("a", "c", "alice");
        assert_eq!(c.owned_by("alice"), 0);
        assert_eq!(
            c.claim("a", "c", "bob", hold, None).ok(),
            Some(ContextClaim::Claimed)
        );
        // Kept, a drop frees nothing.
        c.claim("a", "c", "bob", ContextHold::Keep(LONG), None).ok();
        c.drop_hold("a", "c", "bob");
        assert_eq!(
            c.claim("a", "c", "alice", hold, None).ok(),
            Some(ContextClaim::Other)
        );
        // A hold that lapses frees the context.
        let short = ContextHold::Hold(Duration::from_millis(0));
        assert_eq!(
            c.claim("a", "x", "alice", short, None).ok(),
            Some(ContextClaim::Claimed)
        );
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(
            c.claim("a", "x", "bob", short, None).ok(),
            Some(ContextClaim::Claimed)
        );
        assert_eq!(c.owned_by("alice"), 0);
    }

    #[test]
    fn a_context_lives_while_a_task_in_it_is_live() {
        let c = Contexts::new(64, Duration::from_millis(0));
        let alice: Arc<str> = "alice".into();
        let brief = ContextHold::Keep(Duration::from_millis(0));
        c.claim("a", "c", "alice", brief, None).ok();
        c.task_live("a", "c", &alice, true);
        std::thread::sleep(Duration::from_millis(2));
        // Its keep lapsed, but a task of it is live: still hers.
        assert_eq!(
            c.claim("a", "c", "bob", brief, None).ok(),
            Some(ContextClaim::Other)
        );
        // The task ends: the claim lives 2 × retention more (0 here), then goes.
        c.task_live("a", "c", &alice, false);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(
            c.claim("a", "c", "bob", brief, None).ok(),
            Some(ContextClaim::Claimed)
        );
        assert_eq!(c.owned_by("alice"), 0);
    }

    #[test]
    fn the_store_is_bounded_and_gives_no_claim_up() {
        let c = Contexts::new(16, Duration::from_secs(60));
        let keep = ContextHold::Keep(LONG);
        let mut full = 0;
        for i in 0..200 {
            match c.claim("a", &format!("c{i}"), &format!("o{i}"), keep, Some(10)) {
                Ok(ContextClaim::Claimed) => {}
                Err(LedgerError::ContextsFull) => full += 1,
                other => panic!("{other:?}"),
            }
        }
        // Exactly the bound, wherever the claims' shards are.
        assert_eq!(full, 200 - 16);
        assert_eq!(c.len(), 16);
        // Nothing claimed was given up.
        assert_eq!(
            c.claim("a", "c0", "intruder", keep, None).ok(),
            Some(ContextClaim::Other)
        );
        assert!(matches!(c.room("new", 10), Err(LedgerError::ContextsFull)));
        // An answer in a new context after the agent made it is kept all the same.
        assert_eq!(
            c.claim("a", "made", "new", keep, None).ok(),
            Some(ContextClaim::Claimed)
        );
    }
}
