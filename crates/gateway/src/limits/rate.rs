//! A token bucket per rate-limited client, per replica.
//!
//! Each bucket is one `AtomicU64` updated by compare-and-swap (GCRA, the generic cell rate
//! algorithm: the bucket is stored as the "theoretical arrival time" of the next request, which
//! is a token bucket of `burst` tokens refilled at `rate_per_sec`, without a timer and without
//! a refill step). Taking a token is one read lock on the map and one CAS; nothing is held
//! across an await.
//!
//! Only clients with a rate have a bucket. A full bucket is the same as no bucket, so when the
//! map grows, the full ones are dropped ([`Buckets::take`]); the map holds at most the
//! rate-limited clients seen lately (the configured ones with a rate, so a bounded set).
//!
//! Token subjects (a verified JWT without a `[[clients]]` entry) are an open set: the identity
//! provider issues them, not the operator. Their buckets are a table of their own
//! ([`Buckets::take_subject`]), of at most `[auth] max_token_subjects`, the least recently used
//! evicted (an evicted subject comes back to a full bucket). Apart, so that no number of
//! subjects ever evicts a configured client's bucket. A hit there costs what a configured
//! client's does (one read lock, one CAS) and one relaxed store of the time of use.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use prometheus::IntCounter;

use crate::metrics::Metrics;

const NANOS: u64 = 1_000_000_000;

/// Buckets the map holds before it first drops the full ones.
const MIN_PRUNE: usize = 64;

/// A client's rate: `per_sec` tokens a second into a bucket of `burst` (a full bucket at first).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    per_sec: f64,
    burst: u32,
}

impl Rate {
    /// `per_sec` (> 0, checked by the config) with a bucket of `burst`; without one, the bucket
    /// holds one second of tokens, rounded up, and at least one ([`Rate::default_burst`]).
    pub fn new(per_sec: f64, burst: Option<u64>) -> Rate {
        let burst = burst.map_or_else(
            || Rate::default_burst(per_sec),
            |b| u32::try_from(b).unwrap_or(u32::MAX),
        );
        Rate {
            per_sec,
            burst: burst.max(1),
        }
    }

    /// The bucket when only `rate_per_sec` is given: one second's worth, rounded up, at least 1.
    pub fn default_burst(per_sec: f64) -> u32 {
        let b = per_sec.ceil();
        if b >= f64::from(u32::MAX) {
            u32::MAX
        } else if b >= 1.0 {
            b as u32
        } else {
            1
        }
    }

    /// Tokens a second.
    pub fn per_sec(&self) -> f64 {
        self.per_sec
    }

    /// The bucket's size.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Nanoseconds per token (at least 1).
    fn interval(&self) -> u64 {
        let ns = (NANOS as f64 / self.per_sec).round();
        if ns >= u64::MAX as f64 {
            u64::MAX
        } else if ns >= 1.0 {
            ns as u64
        } else {
            1
        }
    }

    /// The policy's window: seconds an empty bucket takes to fill, rounded up, at least 1. With
    /// `q = burst`, `q / w` never promises more than `per_sec`.
    pub fn window_secs(&self) -> u64 {
        let w = (f64::from(self.burst) / self.per_sec).ceil();
        if w >= u64::MAX as f64 {
            u64::MAX
        } else if w >= 1.0 {
            w as u64
        } else {
            1
        }
    }
}

/// Where a client's bucket stands after a request, for the `RateLimit` and `RateLimit-Policy`
/// headers (`"client";q=limit;w=window_secs` and `"client";r=remaining;t=reset_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// The bucket's size (`q`).
    pub limit: u32,
    /// Seconds an empty bucket takes to fill, rounded up (`w`).
    pub window_secs: u64,
    /// Whole tokens left (`r`).
    pub remaining: u32,
    /// Seconds until the next whole token, rounded up (`t`): within it the client can use no
    /// more than `remaining`. On a refusal, the `Retry-After`.
    pub reset_secs: u64,
}

/// A request past its client's bucket: 429 RATE_LIMITED.
#[derive(Debug, Clone, thiserror::Error)]
#[error("client {client:?} is over its rate of {} requests/s (burst {}) on this replica; retry after {} s", .rate.per_sec, .rate.burst, .quota.reset_secs)]
pub struct RateLimited {
    /// The client's name.
    pub client: Arc<str>,
    /// Its rate.
    pub rate: Rate,
    /// The bucket: empty, and when its next token comes (the `Retry-After`).
    pub quota: Quota,
}

/// One client's bucket.
struct Bucket {
    /// The theoretical arrival time of the next request (ns since [`Buckets`]' epoch): the
    /// bucket is full when it is not after now, and holds `(now + burst·T − tat) / T` tokens
    /// otherwise (T: nanoseconds per token).
    tat: AtomicU64,
    /// `rate_limited_total{client}`, resolved once.
    refused: IntCounter,
}

impl Bucket {
    /// Take a token at `now`: the quota left, or the nanoseconds until a token comes.
    fn take(&self, rate: Rate, now: u64) -> Result<Quota, u64> {
        let t = rate.interval();
        let tau = t.saturating_mul(u64::from(rate.burst));
        let mut tat = self.tat.load(Ordering::Relaxed);
        loop {
            let next = tat.max(now).saturating_add(t);
            // Tokens owed after this request, in nanoseconds: at most a full bucket.
            let debt = next - now;
            if debt > tau {
                return Err(debt - tau);
            }
            match self
                .tat
                .compare_exchange_weak(tat, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    let left = (tau - debt) / t;
                    // The next whole token: when the debt has fallen to tau − (left + 1)·t.
                    let until_next = (debt + (left + 1) * t).saturating_sub(tau);
                    return Ok(Quota {
                        limit: rate.burst,
                        window_secs: rate.window_secs(),
                        remaining: u32::try_from(left).unwrap_or(u32::MAX),
                        reset_secs: ceil_secs(until_next),
                    });
                }
                Err(current) => tat = current,
            }
        }
    }

    /// [`Bucket::take`], a refusal counted.
    fn take_counted(&self, rate: Rate, now: u64) -> Result<Quota, u64> {
        let taken = self.take(rate, now);
        if taken.is_err() {
            self.refused.inc();
        }
        taken
    }

    fn is_full(&self, now: u64) -> bool {
        self.tat.load(Ordering::Relaxed) <= now
    }
}

/// The refusal of `client` at `rate`, its next token `wait` ns away.
fn refused(client: &Arc<str>, rate: Rate, wait: u64) -> RateLimited {
    RateLimited {
        client: client.clone(),
        rate,
        quota: Quota {
            limit: rate.burst,
            window_secs: rate.window_secs(),
            remaining: 0,
            reset_secs: ceil_secs(wait),
        },
    }
}

/// Nanoseconds as whole seconds, rounded up, at least 1 (a `Retry-After` of 0 would invite an
/// immediate retry).
fn ceil_secs(ns: u64) -> u64 {
    ns.div_ceil(NANOS).max(1)
}

struct Map {
    buckets: HashMap<Arc<str>, Bucket>,
    /// The size at which the full buckets are dropped next.
    prune_at: usize,
}

/// A token subject's bucket, and when it was last used (ns since [`Buckets`]' epoch).
struct Held {
    bucket: Bucket,
    used: AtomicU64,
}

/// The token subjects' buckets, by the client's name (`jwt:{sub}`), at most
/// `max_token_subjects` of them.
#[derive(Default)]
struct Subjects {
    buckets: HashMap<Arc<str>, Held>,
}

impl Subjects {
    /// Room for one more subject within `max`: when the table is full, the full buckets go
    /// first (a new bucket is full: dropping one loses nothing), then, if the table is still
    /// past its mark, the least recently used. A sixteenth of `max` (at least one) is freed at
    /// once, so the pass, linear in the table, comes once per that many new subjects.
    fn make_room(&mut self, max: usize, now: u64) {
        if self.buckets.len() < max {
            return;
        }
        let keep = max.saturating_sub((max / 16).max(1));
        self.buckets.retain(|_, h| !h.bucket.is_full(now));
        let Some(evict) = self.buckets.len().checked_sub(keep).filter(|n| *n > 0) else {
            return;
        };
        // The `evict`-th oldest time of use: older ones go, and as many of its ties as needed.
        let mut used: Vec<u64> = self
            .buckets
            .values()
            .map(|h| h.used.load(Ordering::Relaxed))
            .collect();
        let (older, &mut cut, _) = used.select_nth_unstable(evict - 1);
        let mut ties = evict - older.len();
        self.buckets.retain(|_, h| {
            let u = h.used.load(Ordering::Relaxed);
            if u < cut {
                return false;
            }
            if u == cut && ties > 0 {
                ties -= 1;
                return false;
            }
            true
        });
    }
}

/// The token buckets of this replica, by client name. Held by `State` rather than by the
/// clients, so that the buckets outlive a reload of the clients; the rate is the current
/// client's, passed on each request.
pub struct Buckets {
    epoch: Instant,
    map: RwLock<Map>,
    /// Token subjects', apart from `map`: they never evict a configured client's bucket.
    subjects: RwLock<Subjects>,
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets::new()
    }
}

impl std::fmt::Debug for Buckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buckets")
            .field("clients", &self.len())
            .field("token_subjects", &self.subjects())
            .finish()
    }
}

impl Buckets {
    /// No bucket yet: each client's is made full on its first request.
    pub fn new() -> Buckets {
        Buckets {
            epoch: Instant::now(),
            map: RwLock::new(Map {
                buckets: HashMap::new(),
                prune_at: MIN_PRUNE,
            }),
            subjects: RwLock::default(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Take a token from `client`'s bucket at `rate`: the quota left, or [`RateLimited`]
    /// (counted in `a2a_gateway_rate_limited_total{client}`).
    pub fn take(
        &self,
        client: &Arc<str>,
        rate: Rate,
        metrics: &Metrics,
    ) -> Result<Quota, RateLimited> {
        let now = self.now();
        let found = {
            let map = self.map.read().unwrap_or_else(|p| p.into_inner());
            map.buckets
                .get(&**client)
                .map(|b| b.take_counted(rate, now))
        };
        let taken = match found {
            Some(taken) => taken,
            None => {
                let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
                if map.buckets.len() >= map.prune_at {
                    // A full bucket is what a new one would be: dropping it loses nothing.
                    map.buckets.retain(|_, b| !b.is_full(now));
                    map.prune_at = (map.buckets.len() * 2).max(MIN_PRUNE);
                }
                map.buckets
                    .entry(client.clone())
                    .or_insert_with(|| Bucket {
                        tat: AtomicU64::new(0),
                        refused: metrics.rate_limited.with_label_values(&[client]),
                    })
                    .take_counted(rate, now)
            }
        };
        taken.map_err(|wait| refused(client, rate, wait))
    }

    /// Take a token from the bucket of the token subject `client` (a verified token's own
    /// identity, without a `[[clients]]` entry) at `rate`, in the table of at most `max`
    /// subjects: the quota left, or [`RateLimited`] (counted under `label`, the subjects'
    /// one bounded label, never their names). A subject not in the table starts with a full
    /// bucket, the least recently used subjects evicted to make room for it.
    pub fn take_subject(
        &self,
        client: &Arc<str>,
        label: &str,
        rate: Rate,
        max: usize,
        metrics: &Metrics,
    ) -> Result<Quota, RateLimited> {
        self.take_subject_at(client, label, rate, max, metrics, self.now())
    }

    fn take_subject_at(
        &self,
        client: &Arc<str>,
        label: &str,
        rate: Rate,
        max: usize,
        metrics: &Metrics,
        now: u64,
    ) -> Result<Quota, RateLimited> {
        let take = |h: &Held| {
            h.used.store(now, Ordering::Relaxed);
            h.bucket.take_counted(rate, now)
        };
        let found = {
            let table = self.subjects.read().unwrap_or_else(|p| p.into_inner());
            table.buckets.get(&**client).map(take)
        };
        let taken = match found {
            Some(taken) => taken,
            None => {
                let mut table = self.subjects.write().unwrap_or_else(|p| p.into_inner());
                if !table.buckets.contains_key(&**client) {
                    table.make_room(max.max(1), now);
                }
                let held = table.buckets.entry(client.clone()).or_insert_with(|| Held {
                    bucket: Bucket {
                        tat: AtomicU64::new(0),
                        refused: metrics.rate_limited.with_label_values(&[label]),
                    },
                    used: AtomicU64::new(now),
                });
                take(held)
            }
        };
        taken.map_err(|wait| refused(client, rate, wait))
    }

    /// Token subjects' buckets held (tests, and the bound).
    pub fn subjects(&self) -> usize {
        self.subjects
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .buckets
            .len()
    }

    /// Configured clients' buckets held (tests, and the bound).
    pub fn len(&self) -> usize {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .buckets
            .len()
    }

    /// Whether no bucket is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket() -> Bucket {
        Bucket {
            tat: AtomicU64::new(0),
            refused: IntCounter::new("t", "t").expect("counter"),
        }
    }

    const S: u64 = NANOS;

    #[test]
    fn a_full_bucket_gives_its_burst_then_one_token_per_interval() {
        let b = bucket();
        let rate = Rate::new(2.0, Some(3));
        let now = 10 * S;
        let left: Vec<u32> = (0..3)
            .map(|_| b.take(rate, now).expect("within the burst").remaining)
            .collect();
        assert_eq!(left, [2, 1, 0]);
        // Empty: the next token comes in half a second, said as 1 s.
        assert_eq!(b.take(rate, now), Err(S / 2));
        assert_eq!(ceil_secs(S / 2), 1);
        // Half a second later, one token, and no more.
        let q = b.take(rate, now + S / 2).expect("refilled");
        assert_eq!(q.remaining, 0);
        assert!(b.take(rate, now + S / 2).is_err());
        // Long idle: full again, never more than the burst.
        assert_eq!(b.take(rate, now + 100 * S).expect("full").remaining, 2);
    }

    #[test]
    fn slow_rates_wait_whole_seconds_and_report_the_policy() {
        let b = bucket();
        // One request every 4 s, bucket of 1.
        let rate = Rate::new(0.25, None);
        assert_eq!(rate.burst(), 1);
        assert_eq!(rate.window_secs(), 4);
        let q = b.take(rate, 0).expect("first");
        assert_eq!(
            (q.limit, q.window_secs, q.remaining, q.reset_secs),
            (1, 4, 0, 4)
        );
        let wait = b.take(rate, S).expect_err("empty");
        assert_eq!(ceil_secs(wait), 3);
        assert!(b.take(rate, 4 * S).is_ok());
    }

    #[test]
    fn the_next_token_is_reported_in_whole_seconds() {
        let b = bucket();
        // 50/s, bucket of 100: after one request, 99 left, the next token within 1 s.
        let rate = Rate::new(50.0, Some(100));
        let q = b.take(rate, 5 * S).expect("full");
        assert_eq!(
            (q.limit, q.window_secs, q.remaining, q.reset_secs),
            (100, 2, 99, 1)
        );
    }

    #[test]
    fn default_bursts_are_a_second_of_tokens_rounded_up() {
        assert_eq!(Rate::new(50.0, None).burst(), 50);
        assert_eq!(Rate::new(2.5, None).burst(), 3);
        assert_eq!(Rate::new(0.1, None).burst(), 1);
        assert_eq!(Rate::new(5.0, Some(0)).burst(), 1);
    }

    #[test]
    fn full_buckets_are_dropped_when_the_map_grows() {
        let m = Metrics::new().expect("metrics");
        let buckets = Buckets::new();
        let rate = Rate::new(1_000_000.0, Some(1));
        for i in 0..MIN_PRUNE * 3 {
            let name: Arc<str> = format!("c{i}").into();
            buckets.take(&name, rate, &m).expect("first request");
            // A microsecond refills it: full, so droppable.
            std::thread::sleep(std::time::Duration::from_micros(2));
        }
        assert!(buckets.len() < MIN_PRUNE * 3, "{}", buckets.len());
    }

    fn holds(buckets: &Buckets, name: &str) -> bool {
        buckets
            .subjects
            .read()
            .expect("table")
            .buckets
            .contains_key(name)
    }

    /// One request every 1000 s, a bucket of 2: never full again within a test.
    fn slow() -> Rate {
        Rate::new(0.001, Some(2))
    }

    #[test]
    fn a_full_table_of_token_subjects_evicts_the_least_recently_used() {
        let m = Metrics::new().expect("metrics");
        let buckets = Buckets::new();
        let take = |name: &str, at: u64| {
            buckets.take_subject_at(&Arc::from(name), "jwt", slow(), 3, &m, at * S)
        };
        for (i, name) in ["jwt:a", "jwt:b", "jwt:c"].into_iter().enumerate() {
            take(name, i as u64 + 1).expect("a new subject's bucket is full");
        }
        // a is used again: b is now the least recently used.
        assert_eq!(take("jwt:a", 4).expect("its second token").remaining, 0);
        take("jwt:d", 5).expect("room is made");
        assert_eq!(buckets.subjects(), 3);
        assert!(!holds(&buckets, "jwt:b"), "the least recently used goes");
        assert!(["jwt:a", "jwt:c", "jwt:d"]
            .iter()
            .all(|n| holds(&buckets, n)));
        // a kept its (empty) bucket; b, evicted, comes back to a full one.
        assert!(take("jwt:a", 6).is_err(), "a's bucket was kept");
        assert_eq!(take("jwt:b", 7).expect("full again").remaining, 1);
        // b took c's place: c was then the least recently used (a was refused at 6: a use).
        assert!(!holds(&buckets, "jwt:c"));
        assert_eq!(buckets.subjects(), 3);
    }

    #[test]
    fn full_buckets_leave_the_table_before_the_least_recently_used() {
        let m = Metrics::new().expect("metrics");
        let buckets = Buckets::new();
        let fast = Rate::new(1_000.0, Some(1));
        let take = |name: &str, rate: Rate, at: u64| {
            buckets.take_subject_at(&Arc::from(name), "jwt", rate, 3, &m, at * S)
        };
        take("jwt:old", slow(), 1).expect("first");
        take("jwt:older", slow(), 2).expect("first");
        // The most recent, but refilled within a millisecond: full at 10 s.
        take("jwt:refilled", fast, 3).expect("first");
        take("jwt:new", slow(), 10).expect("room is made");
        assert!(
            !holds(&buckets, "jwt:refilled"),
            "a full bucket loses nothing"
        );
        assert!(["jwt:old", "jwt:older", "jwt:new"]
            .iter()
            .all(|n| holds(&buckets, n)));
    }

    #[test]
    fn token_subjects_never_evict_a_configured_clients_bucket() {
        let m = Metrics::new().expect("metrics");
        let buckets = Buckets::new();
        let ops: Arc<str> = "ops".into();
        let one = Rate::new(0.001, Some(1));
        buckets.take(&ops, one, &m).expect("ops' one token");
        for i in 0..100 {
            let name: Arc<str> = format!("jwt:s{i}").into();
            buckets
                .take_subject(&name, "jwt", slow(), 4, &m)
                .expect("a new subject");
        }
        assert!(buckets.subjects() <= 4, "{}", buckets.subjects());
        assert_eq!(buckets.len(), 1);
        assert!(
            buckets.take(&ops, one, &m).is_err(),
            "ops' bucket is still empty"
        );
    }

    #[test]
    fn token_subjects_are_refused_under_their_one_label() {
        let m = Metrics::new().expect("metrics");
        let buckets = Buckets::new();
        let sub: Arc<str> = "jwt:mallory".into();
        let one = Rate::new(0.001, Some(1));
        buckets
            .take_subject(&sub, "jwt", one, 10, &m)
            .expect("first");
        let refused = buckets
            .take_subject(&sub, "jwt", one, 10, &m)
            .expect_err("empty");
        assert_eq!(&*refused.client, "jwt:mallory");
        assert_eq!(refused.quota.remaining, 0);
        assert!(refused.quota.reset_secs >= 999, "{:?}", refused.quota);
        assert_eq!(m.rate_limited.with_label_values(&["jwt"]).get(), 1);
        assert!(
            m.rate_limited
                .remove_label_values(&["jwt:mallory"])
                .is_err(),
            "no label per subject"
        );
    }
}
