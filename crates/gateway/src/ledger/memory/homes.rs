//! The in-process ledger's record of where each official A2A context lives: the replica of its
//! agent that last answered in it (`TaskLedger::set_context_replica`), for an agent whose calls
//! are pinned. A conversation may be held in a replica's memory with no task at all (an agent
//! that answers with Messages, such as ADK's in-memory sessions).
//!
//! Bounded like the tasks (`max_tasks`): past it the entry that expires first goes; each expires
//! on its own at the time it was given.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ledger::KeyMap;

struct Home {
    replica: Arc<str>,
    expires: Instant,
    seq: u64,
}

#[derive(Default)]
struct Inner {
    /// By `agent \n context`.
    homes: KeyMap<Box<str>, Home>,
    /// By expiry, for the bound and the sweep.
    expiry: BTreeMap<(Instant, u64), Box<str>>,
    next_seq: u64,
}

/// See the module doc.
pub(super) struct Homes {
    inner: Mutex<Inner>,
    max: usize,
}

fn key(agent: &str, context: &str) -> String {
    format!("{agent}\n{context}")
}

impl Homes {
    pub(super) fn new(max: usize) -> Homes {
        Homes {
            inner: Mutex::new(Inner::default()),
            max: max.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Context `context` of `agent` lives on `replica`, for `ttl` from now.
    pub(super) fn set(&self, agent: &str, context: &str, replica: &str, ttl: Duration) {
        let now = Instant::now();
        let mut g = self.lock();
        let inner = &mut *g;
        expire(inner, now);
        let k = key(agent, context);
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let expires = now + ttl;
        if let Some(old) = inner.homes.remove(k.as_str()) {
            inner.expiry.remove(&(old.expires, old.seq));
        }
        while inner.homes.len() >= self.max {
            let Some((_, first)) = inner.expiry.pop_first() else {
                break;
            };
            inner.homes.remove(&*first);
        }
        let k: Box<str> = k.into();
        inner.expiry.insert((expires, seq), k.clone());
        inner.homes.insert(
            k,
            Home {
                replica: replica.into(),
                expires,
                seq,
            },
        );
    }

    /// Where context `context` of `agent` lives, if it is known and has not expired.
    pub(super) fn get(&self, agent: &str, context: &str) -> Option<Arc<str>> {
        let g = self.lock();
        let h = g.homes.get(key(agent, context).as_str())?;
        (h.expires > Instant::now()).then(|| h.replica.clone())
    }
}

/// Drop the entries that have expired.
fn expire(inner: &mut Inner, now: Instant) {
    while let Some(entry) = inner.expiry.first_entry() {
        if entry.key().0 > now {
            break;
        }
        let k = entry.remove();
        inner.homes.remove(&*k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_lives_where_it_was_last_answered_and_the_store_is_bounded() {
        let h = Homes::new(2);
        let ttl = Duration::from_secs(60);
        h.set("a", "c1", "10.0.0.1:80", ttl);
        assert_eq!(h.get("a", "c1").as_deref(), Some("10.0.0.1:80"));
        assert_eq!(h.get("b", "c1"), None, "another agent's context");
        h.set("a", "c1", "10.0.0.2:80", ttl);
        assert_eq!(h.get("a", "c1").as_deref(), Some("10.0.0.2:80"));
        h.set("a", "c2", "10.0.0.1:80", ttl);
        h.set("a", "c3", "10.0.0.1:80", ttl);
        assert_eq!(
            h.get("a", "c1"),
            None,
            "the bound let the first to expire go"
        );
        assert!(h.get("a", "c3").is_some());
        h.set("a", "c4", "10.0.0.1:80", Duration::ZERO);
        assert_eq!(h.get("a", "c4"), None, "expired");
    }
}
