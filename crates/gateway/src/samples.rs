//! The fleet page's pictures, kept by the gateway itself: every [`EVERY`] (10 s), for each
//! configured agent, its requests and errors (5xx answers) per second and the p99 of its
//! answers' latency over those 10 s, and for the fleet the task transitions per second by the
//! state they reached; [`KEEP`] (60) samples each, ten minutes, so the pictures are full when
//! the page opens. Read from the gateway's own Prometheus families (`requests_total`,
//! `request_duration_seconds`, `task_transitions_total`): the differences between two reads.
//! Bounded: 60 samples per configured agent (an agent a reload removed is dropped at the next
//! sample) and 60 for the fleet; served in `/api/fleet`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use prometheus::core::Collector;
use serde::Serialize;
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::protocol::task::Status;
use crate::registry::Registry;

/// How often a sample is taken.
pub const EVERY: Duration = Duration::from_secs(10);
/// Samples kept per agent and for the fleet: ten minutes.
pub const KEEP: usize = 60;

/// One agent's ten seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AgentSample {
    /// When the sample was taken (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub at: i64,
    /// Requests answered per second.
    pub requests_per_sec: f64,
    /// 5xx answers per second.
    pub errors_per_sec: f64,
    /// The 99th percentile of the answers' latency, in ms (`null` without requests).
    pub p99_ms: Option<f64>,
}

/// The fleet's ten seconds: transitions per second by the state reached.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetSample {
    /// When the sample was taken (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub at: i64,
    /// Transitions per second into each state (every state named, zeros included).
    pub transitions_per_sec: std::collections::BTreeMap<&'static str, f64>,
}

fn rfc3339<S: serde::Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
    let t = chrono::DateTime::from_timestamp_millis(*ms).unwrap_or_default();
    s.serialize_str(&crate::protocol::time::format(t))
}

/// One agent's cumulative counts: requests, 5xx answers, latency buckets (cumulative counts by
/// upper bound, `+Inf` last).
type Counts = (u64, u64, Vec<(f64, u64)>);

/// What one read of the families says: cumulative counts.
#[derive(Debug, Default, Clone)]
struct Read {
    /// When, on the monotonic clock: the rates' interval (a wall clock stepped back by NTP
    /// must not make one sample a spike that scales every line for ten minutes).
    mono: Option<Instant>,
    /// agent -> its counts.
    agents: HashMap<String, Counts>,
    transitions: [u64; Status::COUNT],
}

/// The samples (see the module doc).
#[derive(Default)]
pub struct Samples {
    agents: Mutex<HashMap<Arc<str>, VecDeque<AgentSample>>>,
    fleet: Mutex<VecDeque<FleetSample>>,
    last: Mutex<Option<Read>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The `q` quantile of the observations between two reads of a histogram's cumulative
/// buckets, interpolated linearly within its bucket as Prometheus's `histogram_quantile` does;
/// in the histogram's unit.
fn quantile(q: f64, now: &[(f64, u64)], before: Option<&[(f64, u64)]>) -> Option<f64> {
    let delta: Vec<(f64, u64)> = now
        .iter()
        .enumerate()
        .map(|(i, (le, c))| {
            let was = before.and_then(|b| b.get(i)).map_or(0, |x| x.1);
            (*le, c.saturating_sub(was))
        })
        .collect();
    let total = delta.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut lower = (0.0, 0u64);
    for &(le, count) in &delta {
        if count as f64 >= rank {
            if le.is_infinite() {
                // Past the last finite bound: that bound is all that can be said.
                return Some(lower.0);
            }
            let within = (count - lower.1) as f64;
            let frac = if within > 0.0 {
                (rank - lower.1 as f64) / within
            } else {
                0.0
            };
            return Some(lower.0 + (le - lower.0) * frac);
        }
        lower = (le, count);
    }
    Some(lower.0)
}

impl Samples {
    /// Read the families now.
    fn read(metrics: &Metrics, mono: Instant) -> Read {
        let mut r = Read {
            mono: Some(mono),
            ..Read::default()
        };
        let label = |m: &prometheus::proto::Metric, name: &str| -> String {
            m.get_label()
                .iter()
                .find(|l| l.name() == name)
                .map(|l| l.value().to_owned())
                .unwrap_or_default()
        };
        for family in metrics.requests.collect() {
            for m in family.get_metric() {
                let agent = label(m, "agent");
                if agent.is_empty() {
                    continue;
                }
                let n = m.get_counter().get_value() as u64;
                let e = r.agents.entry(agent).or_default();
                e.0 += n;
                if label(m, "status").starts_with('5') {
                    e.1 += n;
                }
            }
        }
        for family in metrics.request_seconds.collect() {
            for m in family.get_metric() {
                let agent = label(m, "agent");
                if agent.is_empty() {
                    continue;
                }
                let h = m.get_histogram();
                let e = r.agents.entry(agent).or_default();
                let buckets = h.get_bucket();
                if e.2.len() < buckets.len() + 1 {
                    e.2 = buckets
                        .iter()
                        .map(|b| (b.upper_bound(), 0))
                        .chain(std::iter::once((f64::INFINITY, 0)))
                        .collect();
                }
                for (i, b) in buckets.iter().enumerate() {
                    e.2[i].1 += b.cumulative_count();
                }
                let last = e.2.len() - 1;
                e.2[last].1 += h.get_sample_count();
            }
        }
        for family in metrics.transitions.collect() {
            for m in family.get_metric() {
                if let Some(s) = Status::parse(&label(m, "to")) {
                    r.transitions[s.index()] += m.get_counter().get_value() as u64;
                }
            }
        }
        r
    }

    /// Take a sample of every agent in `agents` (others are forgotten) and of the fleet, at
    /// `now_ms` on the wall clock (its `at`) and `mono` on the monotonic one (its interval).
    pub fn take(&self, metrics: &Metrics, agents: &[Arc<str>], now_ms: i64, mono: Instant) {
        let now = Samples::read(metrics, mono);
        let Some(before) = lock(&self.last).replace(now.clone()) else {
            // The first read is the baseline.
            return;
        };
        let secs = match (now.mono, before.mono) {
            (Some(n), Some(b)) => n.saturating_duration_since(b).as_secs_f64(),
            _ => 0.0,
        }
        .max(0.001);
        let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
        let mut all = lock(&self.agents);
        all.retain(|name, _| agents.contains(name));
        let empty = (0, 0, Vec::new());
        for name in agents {
            let n = now.agents.get(&**name).unwrap_or(&empty);
            let b = before.agents.get(&**name).unwrap_or(&empty);
            let sample = AgentSample {
                at: now_ms,
                requests_per_sec: rate(n.0, b.0),
                errors_per_sec: rate(n.1, b.1),
                p99_ms: quantile(
                    0.99,
                    &n.2,
                    Some(b.2.as_slice()).filter(|b| b.len() == n.2.len()),
                )
                .map(|s| (s * 1000.0 * 10.0).round() / 10.0),
            };
            let ring = all.entry(name.clone()).or_default();
            if ring.len() >= KEEP {
                ring.pop_front();
            }
            ring.push_back(sample);
        }
        drop(all);
        let fleet = FleetSample {
            at: now_ms,
            transitions_per_sec: Status::ALL
                .iter()
                .map(|s| {
                    let i = s.index();
                    (s.as_str(), rate(now.transitions[i], before.transitions[i]))
                })
                .collect(),
        };
        let mut ring = lock(&self.fleet);
        if ring.len() >= KEEP {
            ring.pop_front();
        }
        ring.push_back(fleet);
    }

    /// An agent's samples, oldest first.
    pub fn agent(&self, name: &str) -> Vec<AgentSample> {
        lock(&self.agents)
            .get(name)
            .map(|r| r.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The fleet's samples, oldest first.
    pub fn fleet(&self) -> Vec<FleetSample> {
        lock(&self.fleet).iter().cloned().collect()
    }
}

/// Take a sample every [`EVERY`] of the agents `registry` holds (as reloads swap it), until
/// `stop`.
pub async fn run(
    samples: Arc<Samples>,
    metrics: Arc<Metrics>,
    registry: Arc<ArcSwap<Registry>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let names: Vec<Arc<str>> = registry
            .load()
            .agents()
            .iter()
            .map(|a| Arc::from(a.cfg.name.as_str()))
            .collect();
        samples.take(
            &metrics,
            &names,
            crate::protocol::time::now_ms(),
            Instant::now(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_the_bucket_of_the_difference() {
        let before = [(0.01, 10), (0.1, 10), (1.0, 10), (f64::INFINITY, 10)];
        // 100 more, all between 0.01 and 0.1: the p99 is 99 % of the way through that bucket.
        let now = [(0.01, 10), (0.1, 110), (1.0, 110), (f64::INFINITY, 110)];
        let p = quantile(0.99, &now, Some(&before)).expect("some");
        assert!((p - (0.01 + 0.09 * 0.99)).abs() < 1e-9, "{p}");
        assert_eq!(quantile(0.99, &before, Some(&before)), None, "no requests");
        // Past the last finite bound: that bound.
        let slow = [(0.01, 0), (0.1, 0), (1.0, 0), (f64::INFINITY, 5)];
        assert_eq!(quantile(0.99, &slow, None), Some(1.0));
    }

    #[test]
    fn samples_are_rates_of_real_traffic_bounded_and_forget_removed_agents() {
        let m = Metrics::new().expect("metrics");
        let s = Samples::default();
        let t0 = Instant::now();
        let at = |ms: i64| t0 + Duration::from_millis(ms as u64);
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        s.take(&m, &[a.clone(), b.clone()], 0, at(0));
        assert!(s.agent("a").is_empty(), "the first read is the baseline");
        for _ in 0..20 {
            m.requests
                .with_label_values(&["create", "a", "c", "202"])
                .inc();
            m.request_seconds
                .with_label_values(&["create", "a", "c"])
                .observe(0.004);
        }
        for _ in 0..10 {
            m.requests
                .with_label_values(&["create", "a", "c", "503"])
                .inc();
        }
        m.transition(None, Status::Submitted).inc_by(5);
        s.take(&m, &[a.clone(), b.clone()], 10_000, at(10_000));
        let got = s.agent("a");
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].requests_per_sec, got[0].errors_per_sec), (3.0, 1.0));
        let p99 = got[0].p99_ms.expect("latency");
        assert!(p99 > 2.5 && p99 <= 5.0, "{p99}");
        assert_eq!(s.agent("b")[0].p99_ms, None);
        assert_eq!(s.fleet()[0].transitions_per_sec["SUBMITTED"], 0.5);
        assert_eq!(s.fleet()[0].transitions_per_sec["COMPLETED"], 0.0);
        let json = serde_json::to_value(got[0]).expect("json");
        assert_eq!(json["at"], "1970-01-01T00:00:10.000Z");
        for i in 2..(KEEP as i64 + 10) {
            s.take(&m, std::slice::from_ref(&a), i * 10_000, at(i * 10_000));
        }
        assert_eq!(s.agent("a").len(), KEEP, "bounded");
        assert_eq!(s.fleet().len(), KEEP);
        assert!(s.agent("b").is_empty(), "a removed agent is forgotten");
        let at: Vec<i64> = s.agent("a").iter().map(|x| x.at).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "oldest first");
    }
}
