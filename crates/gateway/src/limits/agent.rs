//! One agent's limits on this replica: requests in flight, and the circuit that ejects a failing
//! agent.
//!
//! **In flight.** Every request exchange with the agent (create, with the late-answer wait of
//! `http::detach`; get; cancel; the artifact list; artifact content until its body ends or is
//! dropped) holds a [`Pass`]; past `max_in_flight` passes, [`AgentLimits::admit`] refuses at
//! once ([`Refusal::Busy`]) and the agent is not called. Not counted: the shared upstream of a
//! task's event stream (`stream::source`: one per task whatever the number of subscribers,
//! long-lived by design, bounded by `streams.max_topics`) and card fetches (one agent's refresh
//! loop at a time): counting them would let streams starve the task routes, and neither grows
//! with client requests.
//!
//! **Circuit.** A pass is told how its exchange went ([`Pass::report`]): a connection failure
//! (refused, reset, closed without an answer), no answer within `timeout_ms`, or a 5xx answer is
//! a failure; any other answer is a success, and resets the count. After `eject_after`
//! consecutive failures the agent is *ejected*: for `eject_secs` every admission is refused
//! ([`Refusal::Ejected`]) without calling it. Then the next request is the one *probe*
//! (half-open; others meanwhile are refused, [`Refusal::Probing`]): its success closes the
//! circuit, its failure ejects the agent for `eject_secs` again. While ejected or probing, only
//! the probe's outcome counts: answers to requests admitted before the ejection change nothing.
//! A probe dropped before its outcome (its client left) hands the probe to the next request.
//!
//! The hot path (an agent under its limit, circuit closed) is an atomic load of the mode, one
//! `fetch_add` and one `fetch_sub` of the count, the gauge's increment and decrement, the
//! `Arc` of the pass, and on success one load: no lock, no allocation, no label lookup (the
//! metric handles are resolved once per agent). The circuit's lock is taken on failures,
//! on the first success after one, and while the agent is ejected; never across an await.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use hyper::StatusCode;
use prometheus::{IntCounter, IntGauge};

use crate::config::AgentConfig;
use crate::metrics::Metrics;
use crate::upstream::UpstreamError;

const OK: u8 = 0;
const EJECTED: u8 = 1;
const PROBING: u8 = 2;

/// What the config says of an agent's limits, read from its current config on each admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentPolicy {
    /// Passes held at once on this replica.
    pub max_in_flight: usize,
    /// Consecutive failures that eject the agent; 0 never ejects.
    pub eject_after: u32,
    /// How long an ejection lasts before the probe.
    pub eject: Duration,
}

impl AgentPolicy {
    /// The policy of `cfg`.
    pub fn of(cfg: &AgentConfig) -> AgentPolicy {
        AgentPolicy {
            max_in_flight: cfg.max_in_flight,
            eject_after: u32::try_from(cfg.eject_after).unwrap_or(u32::MAX),
            eject: cfg.eject,
        }
    }
}

/// The metric handles of one agent, resolved once.
struct Handles {
    agent: Arc<str>,
    in_flight: IntGauge,
    /// `upstream_duration_seconds` of this agent, resolved once rather than looked up by label
    /// on every exchange.
    upstream_seconds: prometheus::Histogram,
    busy: IntCounter,
    ejections: IntCounter,
    ejected: IntGauge,
}

/// The circuit's state besides its mode.
struct Circuit {
    /// Consecutive failures: counted while closed, kept as they were at the ejection after.
    failures: u32,
    /// The last failure, said as the agent's ejection reason.
    reason: String,
    /// When the ejection ends (the probe may go).
    until: Instant,
    /// The same moment on the wall clock, for `/agents`.
    until_wall: DateTime<Utc>,
}

/// How an agent stands, as `GET /agents` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Called as usual.
    Ok,
    /// Not called until `until`; then the next request probes it.
    Ejected {
        /// When the ejection ends.
        until: DateTime<Utc>,
        /// Consecutive failures so far.
        failures: u32,
        /// The last failure.
        reason: String,
    },
    /// One probe is in flight; its outcome decides.
    Probing {
        /// Consecutive failures so far.
        failures: u32,
        /// The last failure.
        reason: String,
    },
}

impl Health {
    /// `ok`, `ejected` or `probing`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::Ejected { .. } => "ejected",
            Health::Probing { .. } => "probing",
        }
    }
}

/// Why an agent was not called.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    /// `max_in_flight` passes are held: 503 AGENT_BUSY.
    #[error(
        "has {max_in_flight} requests in flight on this replica (max_in_flight); retry after 1 s"
    )]
    Busy {
        /// The agent's `max_in_flight`.
        max_in_flight: usize,
    },
    /// Ejected, and the cool-off has not passed: 503 AGENT_UNAVAILABLE.
    #[error("is ejected after {failures} consecutive failures (the last: {reason}); retry after {} s", ceil_secs(*.retry_after))]
    Ejected {
        /// Consecutive failures.
        failures: u32,
        /// The last failure.
        reason: String,
        /// Until the probe may go.
        retry_after: Duration,
    },
    /// Ejected, and the probe that decides is in flight: 503 AGENT_UNAVAILABLE.
    #[error("is ejected after {failures} consecutive failures (the last: {reason}) and being probed; retry after 1 s")]
    Probing {
        /// Consecutive failures.
        failures: u32,
        /// The last failure.
        reason: String,
    },
}

impl Refusal {
    /// The `Retry-After`, in whole seconds (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Refusal::Ejected { retry_after, .. } => ceil_secs(*retry_after),
            Refusal::Busy { .. } | Refusal::Probing { .. } => 1,
        }
    }
}

fn ceil_secs(d: Duration) -> u64 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    secs.max(1)
}

/// An agent not called, and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("agent {agent:?} {refusal}")]
pub struct AgentRefused {
    /// The agent's route name.
    pub agent: Arc<str>,
    /// Why.
    pub refusal: Refusal,
}

/// One agent's requests in flight and circuit, on this replica. Held by its `registry::Agent`
/// behind an `Arc`, so that an agent kept across a config reload keeps them; the limits
/// themselves ([`AgentPolicy`]) come from the current config on each admission.
pub struct AgentLimits {
    in_flight: AtomicUsize,
    /// Exchanges reported, and those that failed (as [`failure`] judges): the fleet page's
    /// request and error rates are their differences over time.
    exchanges: AtomicU64,
    failures: AtomicU64,
    /// `OK`, `EJECTED` or `PROBING`: what the hot path reads, without the lock.
    mode: AtomicU8,
    /// Whether failures have been counted since the last success, so that a success skips the
    /// lock when there is nothing to reset.
    failing: AtomicBool,
    /// Bumped each time the circuit closes again after an ejection: outcomes of requests let
    /// in before it (a late timeout of a request admitted before the ejection) are not news
    /// about the agent as it is now, and must not eject it again.
    generation: AtomicU64,
    circuit: Mutex<Circuit>,
    handles: OnceLock<Handles>,
    /// The replica these limits are of (`host:port`), their metrics' `replica` label.
    replica: Arc<str>,
    /// Told when the agent answers its probe and comes back from an ejection (its card is
    /// fetched again then: it may have restarted as another agent).
    pub back: tokio::sync::Notify,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits::of_replica("".into())
    }
}

impl AgentLimits {
    /// The limits of the agent's replica at `replica` (`host:port`).
    pub fn of_replica(replica: Arc<str>) -> Self {
        AgentLimits {
            replica,
            in_flight: AtomicUsize::new(0),
            exchanges: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            mode: AtomicU8::new(OK),
            failing: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            circuit: Mutex::new(Circuit {
                failures: 0,
                reason: String::new(),
                until: Instant::now(),
                until_wall: Utc::now(),
            }),
            handles: OnceLock::new(),
            back: tokio::sync::Notify::new(),
        }
    }

    /// The replica these limits are of (`host:port`).
    pub fn replica(&self) -> &Arc<str> {
        &self.replica
    }

    /// Remove this replica's series of `agent` (it left the agent's replicas).
    pub fn unbind(&self, m: &Metrics, agent: &str) {
        let labels = [agent, &*self.replica];
        let _ = m.agent_in_flight.remove_label_values(&labels);
        let _ = m.agent_ejections.remove_label_values(&labels);
        let _ = m.agent_ejected.remove_label_values(&labels);
        let _ = m.upstream_seconds.remove_label_values(&labels);
    }
}

impl std::fmt::Debug for AgentLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLimits")
            .field("in_flight", &self.in_flight())
            .field("health", &self.health().as_str())
            .finish()
    }
}

impl AgentLimits {
    /// Resolve the agent's metric handles (so its series exist from the start); later calls
    /// keep the first.
    pub fn bind(&self, m: &Metrics, agent: &str) {
        self.handles(m, agent);
    }

    fn handles(&self, m: &Metrics, agent: &str) -> &Handles {
        self.handles.get_or_init(|| Handles {
            agent: agent.into(),
            in_flight: m.agent_in_flight.with_label_values(&[agent, &self.replica]),
            upstream_seconds: m
                .upstream_seconds
                .with_label_values(&[agent, &self.replica]),
            busy: m.agent_busy.with_label_values(&[agent]),
            ejections: m.agent_ejections.with_label_values(&[agent, &self.replica]),
            ejected: m.agent_ejected.with_label_values(&[agent, &self.replica]),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Circuit> {
        self.circuit.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Requests holding a pass now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// (exchanges, failed exchanges) reported on this replica since the agent was configured.
    pub fn totals(&self) -> (u64, u64) {
        (
            self.exchanges.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
        )
    }

    /// A pass for one exchange with the agent named `agent`, or why it may not be called now.
    pub fn admit(
        self: &Arc<Self>,
        policy: AgentPolicy,
        m: &Metrics,
        agent: &str,
    ) -> Result<Pass, AgentRefused> {
        let h = self.handles(m, agent);
        let refused = |refusal| AgentRefused {
            agent: h.agent.clone(),
            refusal,
        };
        let probe = if self.mode.load(Ordering::Acquire) == OK {
            false
        } else {
            self.half_open().map_err(refused)?
        };
        if self.in_flight.fetch_add(1, Ordering::Relaxed) >= policy.max_in_flight {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            if probe {
                self.unprobe();
            }
            h.busy.inc();
            return Err(refused(Refusal::Busy {
                max_in_flight: policy.max_in_flight,
            }));
        }
        h.in_flight.inc();
        Ok(Pass {
            started: Instant::now(),
            limits: self.clone(),
            policy,
            probe,
            reported: false,
            generation: self.generation.load(Ordering::Acquire),
        })
    }

    /// An ejected agent: refused until its cool-off ends, then this caller is the probe
    /// (`Ok(true)`). `Ok(false)` if the circuit closed meanwhile.
    fn half_open(&self) -> Result<bool, Refusal> {
        let c = self.lock();
        match self.mode.load(Ordering::Acquire) {
            OK => Ok(false),
            PROBING => Err(Refusal::Probing {
                failures: c.failures,
                reason: c.reason.clone(),
            }),
            _ => {
                let now = Instant::now();
                if now >= c.until {
                    self.mode.store(PROBING, Ordering::Release);
                    Ok(true)
                } else {
                    Err(Refusal::Ejected {
                        failures: c.failures,
                        reason: c.reason.clone(),
                        retry_after: c.until - now,
                    })
                }
            }
        }
    }

    /// A probe that ended without an outcome: the next request probes instead.
    fn unprobe(&self) {
        let mut c = self.lock();
        if self.mode.load(Ordering::Acquire) == PROBING {
            c.until = Instant::now();
            c.until_wall = Utc::now();
            self.mode.store(EJECTED, Ordering::Release);
        }
    }

    fn succeeded(&self, probe: bool, generation: u64) {
        if !probe && !self.failing.load(Ordering::Relaxed) {
            return;
        }
        let mut c = self.lock();
        match self.mode.load(Ordering::Acquire) {
            PROBING if probe => {
                if let Some(h) = self.handles.get() {
                    h.ejected.set(0);
                    tracing::info!(agent = %h.agent, failures = c.failures, "agent answered its probe; back in service");
                }
                c.failures = 0;
                self.failing.store(false, Ordering::Relaxed);
                self.generation.fetch_add(1, Ordering::AcqRel);
                self.mode.store(OK, Ordering::Release);
                self.back.notify_waiters();
            }
            OK if generation != self.generation.load(Ordering::Acquire) => {}
            OK => {
                c.failures = 0;
                self.failing.store(false, Ordering::Relaxed);
            }
            // Ejected or probed by another request: only the probe decides.
            _ => {}
        }
    }

    fn failed(&self, probe: bool, generation: u64, policy: AgentPolicy, reason: String) {
        let mut c = self.lock();
        match self.mode.load(Ordering::Acquire) {
            PROBING if probe => {
                c.failures = c.failures.saturating_add(1);
                self.eject(&mut c, policy.eject, reason);
            }
            // Let in before the agent's last return to service: old news.
            OK if generation != self.generation.load(Ordering::Acquire) => {}
            OK => {
                c.failures = c.failures.saturating_add(1);
                self.failing.store(true, Ordering::Relaxed);
                if policy.eject_after != 0 && c.failures >= policy.eject_after {
                    self.eject(&mut c, policy.eject, reason);
                } else {
                    c.reason = reason;
                }
            }
            _ => {}
        }
    }

    fn eject(&self, c: &mut Circuit, cool_off: Duration, reason: String) {
        c.until = Instant::now() + cool_off;
        c.until_wall = Utc::now() + chrono::Duration::from_std(cool_off).unwrap_or_default();
        c.reason = reason;
        self.mode.store(EJECTED, Ordering::Release);
        if let Some(h) = self.handles.get() {
            h.ejections.inc();
            h.ejected.set(1);
            tracing::warn!(agent = %h.agent, failures = c.failures, last = %c.reason,
                cool_off_secs = cool_off.as_secs(), "agent ejected: not called until a probe succeeds");
        }
    }

    /// How the agent stands now.
    pub fn health(&self) -> Health {
        if self.mode.load(Ordering::Acquire) == OK {
            return Health::Ok;
        }
        let c = self.lock();
        match self.mode.load(Ordering::Acquire) {
            OK => Health::Ok,
            PROBING => Health::Probing {
                failures: c.failures,
                reason: c.reason.clone(),
            },
            _ => Health::Ejected {
                until: c.until_wall,
                failures: c.failures,
                reason: c.reason.clone(),
            },
        }
    }
}

/// One exchange's hold on its agent: counted in flight until dropped; told the exchange's
/// outcome once ([`Pass::report`]), which also times the exchange.
pub struct Pass {
    /// When the agent was admitted, which is when the exchange starts.
    started: Instant,
    limits: Arc<AgentLimits>,
    policy: AgentPolicy,
    probe: bool,
    reported: bool,
    /// The circuit's generation when this request was let in.
    generation: u64,
}

impl std::fmt::Debug for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pass")
            .field("probe", &self.probe)
            .field("reported", &self.reported)
            .finish()
    }
}

impl Pass {
    /// How the exchange went: the agent's answer status, or why there was none; observed in
    /// `upstream_duration_seconds` as the time since the pass was issued. Only the first
    /// report counts (a create's late answer does not report again).
    pub fn report(&mut self, outcome: Result<StatusCode, &UpstreamError>) {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        if let Some(h) = self.limits.handles.get() {
            h.upstream_seconds
                .observe(self.started.elapsed().as_secs_f64());
        }
        self.limits.exchanges.fetch_add(1, Ordering::Relaxed);
        match failure(outcome) {
            None => self.limits.succeeded(self.probe, self.generation),
            Some(reason) => {
                self.limits.failures.fetch_add(1, Ordering::Relaxed);
                self.limits
                    .failed(self.probe, self.generation, self.policy, reason)
            }
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.limits.in_flight.fetch_sub(1, Ordering::Relaxed);
        if let Some(h) = self.limits.handles.get() {
            h.in_flight.dec();
        }
        if self.probe && !self.reported {
            self.limits.unprobe();
        }
    }
}

/// What makes an outcome a failure, said as the ejection reason; `None` for a success. An
/// answer too large to read is a success here: the agent is up (the answer is refused
/// elsewhere).
fn failure(outcome: Result<StatusCode, &UpstreamError>) -> Option<String> {
    match outcome {
        Ok(s) if s.is_server_error() => Some(format!("answered {s}")),
        Ok(_) | Err(UpstreamError::TooLarge(_)) => None,
        Err(e @ (UpstreamError::Unreachable(_) | UpstreamError::Timeout(_))) => Some(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max: usize, after: u32, cool_off_ms: u64) -> AgentPolicy {
        AgentPolicy {
            max_in_flight: max,
            eject_after: after,
            eject: Duration::from_millis(cool_off_ms),
        }
    }

    fn fail(l: &Arc<AgentLimits>, p: AgentPolicy, m: &Metrics) {
        let mut pass = l.admit(p, m, "a").expect("admitted");
        pass.report(Ok(StatusCode::INTERNAL_SERVER_ERROR));
    }

    #[test]
    fn outcomes_of_requests_let_in_before_the_return_to_service_do_not_eject_again() {
        let m = Metrics::new().expect("metrics");
        let l = Arc::new(AgentLimits::default());
        let p = policy(10, 2, 1);
        // Let in while the agent was fine; they time out only after it is back.
        let mut old_a = l.admit(p, &m, "a").expect("a");
        let mut old_b = l.admit(p, &m, "a").expect("b");
        fail(&l, p, &m);
        fail(&l, p, &m);
        assert!(matches!(l.health(), Health::Ejected { .. }));
        std::thread::sleep(Duration::from_millis(5));
        let mut probe = l.admit(p, &m, "a").expect("the probe");
        probe.report(Ok(StatusCode::OK));
        drop(probe);
        assert!(matches!(l.health(), Health::Ok));
        old_a.report(Ok(StatusCode::BAD_GATEWAY));
        old_b.report(Ok(StatusCode::BAD_GATEWAY));
        assert!(
            matches!(l.health(), Health::Ok),
            "two stale failures (eject_after = 2) leave the agent in service"
        );
        // Fresh failures still count.
        fail(&l, p, &m);
        fail(&l, p, &m);
        assert!(matches!(l.health(), Health::Ejected { .. }));
    }

    #[test]
    fn passes_are_counted_until_dropped() {
        let m = Metrics::new().expect("metrics");
        let l = Arc::new(AgentLimits::default());
        let p = policy(2, 5, 1000);
        let one = l.admit(p, &m, "a").expect("1");
        let two = l.admit(p, &m, "a").expect("2");
        let busy = l.admit(p, &m, "a").expect_err("3 is past max_in_flight");
        assert!(matches!(busy.refusal, Refusal::Busy { max_in_flight: 2 }));
        assert_eq!(busy.refusal.retry_after_secs(), 1);
        assert_eq!(l.in_flight(), 2);
        drop(one);
        let _three = l.admit(p, &m, "a").expect("a pass came free");
        drop(two);
        assert_eq!(l.in_flight(), 1);
        assert_eq!(m.agent_in_flight.with_label_values(&["a", ""]).get(), 1);
        assert_eq!(m.agent_busy.with_label_values(&["a"]).get(), 1);
    }

    #[test]
    fn exchanges_and_failures_are_totalled_once_per_report() {
        let m = Metrics::new().expect("metrics");
        let l = Arc::new(AgentLimits::default());
        let p = policy(10, 100, 1000);
        let mut ok = l.admit(p, &m, "a").expect("1");
        ok.report(Ok(StatusCode::ACCEPTED));
        ok.report(Ok(StatusCode::BAD_GATEWAY));
        let mut bad = l.admit(p, &m, "a").expect("2");
        bad.report(Ok(StatusCode::BAD_GATEWAY));
        // Admitted, never reported (the client left): not an exchange.
        drop(l.admit(p, &m, "a").expect("3"));
        assert_eq!(
            l.totals(),
            (2, 1),
            "a second report of one exchange is ignored"
        );
    }

    #[test]
    fn consecutive_failures_eject_and_a_success_resets_the_count() {
        let m = Metrics::new().expect("metrics");
        let l = Arc::new(AgentLimits::default());
        let p = policy(10, 3, 60_000);
        fail(&l, p, &m);
        fail(&l, p, &m);
        l.admit(p, &m, "a")
            .expect("up")
            .report(Ok(StatusCode::NOT_FOUND));
        fail(&l, p, &m);
        fail(&l, p, &m);
        assert_eq!(
            l.health(),
            Health::Ok,
            "a 404 is an answer: the count started over"
        );
        let mut last = l.admit(p, &m, "a").expect("still up");
        last.report(Err(&UpstreamError::Unreachable(
            "connection refused".into(),
        )));
        let e = l.admit(p, &m, "a").expect_err("ejected");
        let Refusal::Ejected {
            failures, reason, ..
        } = &e.refusal
        else {
            panic!("{e:?}")
        };
        assert_eq!(
            (*failures, reason.as_str()),
            (3, "unreachable: connection refused")
        );
        assert!(e.refusal.retry_after_secs() >= 59, "{e}");
        assert!(e
            .to_string()
            .starts_with("agent \"a\" is ejected after 3 consecutive failures"));
        assert_eq!(m.agent_ejected.with_label_values(&["a", ""]).get(), 1);
        assert_eq!(m.agent_ejections.with_label_values(&["a", ""]).get(), 1);
    }

    #[test]
    fn one_probe_decides_after_the_cool_off() {
        let m = Metrics::new().expect("metrics");
        let l = Arc::new(AgentLimits::default());
        let p = policy(10, 1, 0);
        fail(&l, p, &m);
        assert!(matches!(l.health(), Health::Ejected { .. }));
        // The cool-off (0 here) has passed: the next request is the probe, the others wait.
        let mut probe = l.admit(p, &m, "a").expect("probe");
        assert!(matches!(l.health(), Health::Probing { .. }));
        let e = l.admit(p, &m, "a").expect_err("one probe at a time");
        assert!(matches!(e.refusal, Refusal::Probing { .. }));
        probe.report(Err(&UpstreamError::Timeout(Duration::from_millis(5))));
        assert!(matches!(l.health(), Health::Ejected { failures: 2, .. }));
        assert_eq!(m.agent_ejections.with_label_values(&["a", ""]).get(), 2);
        // A probe whose client left hands the probe on.
        drop(l.admit(p, &m, "a").expect("probe"));
        let mut probe = l.admit(p, &m, "a").expect("the next request probes");
        probe.report(Ok(StatusCode::ACCEPTED));
        assert_eq!(l.health(), Health::Ok);
        assert_eq!(m.agent_ejected.with_label_values(&["a", ""]).get(), 0);
        drop(probe);
        // Closed again: counting starts from zero.
        fail(&l, p, &m);
        assert!(matches!(l.health(), Health::Ejected { failures: 1, .. }));
    }

    #[test]
    fn answers_of_requests_from_before_an_ejection_do_not_decide() {
        let m = Metrics::new().expect("metrics");
        let l = Arc::new(AgentLimits::default());
        let p = policy(10, 1, 60_000);
        let mut old = l.admit(p, &m, "a").expect("before");
        fail(&l, p, &m);
        old.report(Ok(StatusCode::OK));
        assert!(matches!(l.health(), Health::Ejected { .. }));
    }

    #[test]
    fn eject_after_zero_never_ejects() {
        let m = Metrics::new().expect("metrics");
        let l = Arc::new(AgentLimits::default());
        let p = policy(10, 0, 60_000);
        for _ in 0..20 {
            fail(&l, p, &m);
        }
        assert_eq!(l.health(), Health::Ok);
    }

    #[test]
    fn a_busy_probe_is_handed_on() {
        let m = Metrics::new().expect("metrics");
        let l = Arc::new(AgentLimits::default());
        let open = policy(1, 1, 0);
        let held = l.admit(open, &m, "a").expect("held");
        fail(&l, policy(2, 1, 0), &m);
        let e = l.admit(open, &m, "a").expect_err("busy");
        assert!(matches!(e.refusal, Refusal::Busy { .. }));
        drop(held);
        assert!(matches!(l.health(), Health::Ejected { .. }));
        l.admit(open, &m, "a")
            .expect("the probe")
            .report(Ok(StatusCode::OK));
        assert_eq!(l.health(), Health::Ok);
    }
}
