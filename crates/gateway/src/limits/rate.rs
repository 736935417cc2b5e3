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

/// The token buckets of this replica, by client name. Held by `State` rather than by the
/// clients, so that the buckets outlive a reload of the clients; the rate is the current
/// client's, passed on each request.
pub struct Buckets {
    epoch: Instant,
    map: RwLock<Map>,
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets::new()
    }
}

impl std::fmt::Debug for Buckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self
            .map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .buckets
            .len();
        f.debug_struct("Buckets").field("clients", &n).finish()
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
        taken.map_err(|wait| RateLimited {
            client: client.clone(),
            rate,
            quota: Quota {
                limit: rate.burst,
                window_secs: rate.window_secs(),
                remaining: 0,
                reset_secs: ceil_secs(wait),
            },
        })
    }

    /// Buckets held (tests, and the bound).
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
}
