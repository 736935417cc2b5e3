//! Each client's share of the deliveries in flight (`[webhooks] max_in_flight_per_client`).
//!
//! The worker's `concurrency` slots are one pool for every delivery. Without shares, a client
//! whose push receivers accept and never answer holds every slot for `timeout_ms` at a time, and
//! another client's delivery to a healthy receiver waits behind hundreds of them (11.8 s for
//! one delivery behind 300 such, issue 43). With shares, an attempt also takes one of its
//! share's permits: a client's A2A push configs (the task's owner, read with the config), and
//! each configured subscriber, are each a share of their own. A job whose share is full gives
//! its slot back at once and waits in the retry set, spending no attempt ([`Full::retry_in`]),
//! so a client whose receivers hang waits on its own share and the rest of the pool serves the
//! others.
//!
//! Why a job is put back rather than held: the queue hands out jobs in the order changes were
//! made, not by client, so the worker only learns a job's client once it holds it; holding a
//! hanging client's jobs in memory would fill the pool with waiters, the failure this prevents.
//! How long it is put back for follows its share: the time since the share last started an
//! attempt, between [`MIN_WAIT`] and [`MAX_WAIT`]. A healthy client's burst (its attempts
//! start every few milliseconds) comes back after 50 ms; a client whose receivers all hang
//! starts nothing until its attempts time out, and its jobs come back once a second, so it
//! costs the queue a take and a finish a second per job it has waiting, not a busy loop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The shortest a job of a full share waits before it is taken again.
pub const MIN_WAIT: Duration = Duration::from_millis(50);
/// The longest.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// Whose share a delivery takes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Share {
    /// A client's A2A push configs: its tasks', by the task's owner.
    Client(Arc<str>),
    /// The push configs of tasks without an owner (no clients configured): one share, as one
    /// caller.
    Anonymous,
    /// A configured `[[subscribers]]` entry.
    Subscriber(Arc<str>),
}

/// A share's attempts in flight.
#[derive(Debug)]
struct Held {
    count: usize,
    /// When it last started one.
    last_start: Instant,
}

/// The shares of one worker (see the module doc).
#[derive(Debug)]
pub struct Shares {
    max: usize,
    /// Only shares with an attempt in flight: an entry goes at zero, so the map is bounded by
    /// the worker's `concurrency`.
    held: Mutex<HashMap<Share, Held>>,
}

/// One attempt's place in its share, given back when dropped.
#[derive(Debug)]
pub struct Permit {
    shares: Arc<Shares>,
    share: Share,
}

/// A share with no room: how long the job waits before it is taken again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// The wait (see the module doc).
    pub retry_in: Duration,
}

impl Shares {
    /// Shares of at most `max` attempts in flight each (at least 1).
    pub fn new(max: usize) -> Arc<Shares> {
        Arc::new(Shares {
            max: max.max(1),
            held: Mutex::new(HashMap::new()),
        })
    }

    /// A place in `share` for one attempt, or how long to wait when it has none.
    pub fn take(self: &Arc<Self>, share: Share, now: Instant) -> Result<Permit, Full> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let h = held.entry(share.clone()).or_insert(Held {
            count: 0,
            last_start: now,
        });
        if h.count >= self.max {
            let since = now.saturating_duration_since(h.last_start);
            return Err(Full {
                retry_in: since.clamp(MIN_WAIT, MAX_WAIT),
            });
        }
        h.count += 1;
        h.last_start = now;
        Ok(Permit {
            shares: self.clone(),
            share,
        })
    }

    /// Attempts of `share` in flight now.
    pub fn in_flight(&self, share: &Share) -> usize {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(share).map_or(0, |h| h.count)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = held.get_mut(&self.share) {
            h.count = h.count.saturating_sub(1);
            if h.count == 0 {
                held.remove(&self.share);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_share_holds_back_its_own_jobs_only() {
        let shares = Shares::new(2);
        let t0 = Instant::now();
        let alice = Share::Client("alice".into());
        let a1 = shares.take(alice.clone(), t0).expect("room");
        let _a2 = shares.take(alice.clone(), t0).expect("room");
        assert!(
            shares.take(alice.clone(), t0).is_err(),
            "alice is at her share"
        );
        // Others are not: another client, the ownerless tasks, a subscriber of that name.
        let _b = shares
            .take(Share::Client("bob".into()), t0)
            .expect("bob's own");
        let _n = shares.take(Share::Anonymous, t0).expect("ownerless");
        let _s = shares
            .take(Share::Subscriber("alice".into()), t0)
            .expect("a subscriber");
        // An attempt of alice's ends: room again.
        drop(a1);
        assert_eq!(shares.in_flight(&alice), 1);
        let _a3 = shares.take(alice.clone(), t0).expect("room again");
    }

    #[test]
    fn a_share_is_forgotten_at_zero() {
        let shares = Shares::new(1);
        let p = shares
            .take(Share::Subscriber("s".into()), Instant::now())
            .expect("room");
        drop(p);
        assert!(shares.held.lock().expect("lock").is_empty());
    }

    #[test]
    fn a_busy_share_is_asked_again_soon_and_a_stuck_one_once_a_second() {
        let shares = Shares::new(1);
        let t0 = Instant::now();
        let c = Share::Client("c".into());
        let _p = shares.take(c.clone(), t0).expect("room");
        // Started a moment ago: the share turns over fast, come back soon.
        let soon = shares.take(c.clone(), t0 + Duration::from_millis(5));
        assert_eq!(soon.map(drop), Err(Full { retry_in: MIN_WAIT }));
        let later = shares.take(c.clone(), t0 + Duration::from_millis(300));
        assert_eq!(
            later.map(drop),
            Err(Full {
                retry_in: Duration::from_millis(300)
            })
        );
        // Nothing started for a long time: its receivers hang; once a second.
        let stuck = shares.take(c, t0 + Duration::from_secs(12));
        assert_eq!(stuck.map(drop), Err(Full { retry_in: MAX_WAIT }));
    }
}
