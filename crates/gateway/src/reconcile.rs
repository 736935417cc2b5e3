//! The reconciler: tasks whose agent does not push still reach their final state.
//!
//! An agent that pushes no notifications (and whose tasks nobody reads or streams) leaves the
//! ledger with what it said at create: SUBMITTED, forever. The reconciler asks the agent about
//! each task that is neither final nor INPUT_REQUIRED (which waits for its client) and has been
//! quiet for the agent's `reconcile_after_ms` (0: never), with the card's own read of a task
//! (`Card::task_path`, `Card::read_task`: it knows no protocol), and applies the answer through
//! the ledger's one `apply`, like any other news: an accepted change reaches webhooks,
//! `/events` and the fleet page as every change does.
//!
//! Bounded everywhere: candidates come from the ledger's index of quiet tasks by agent
//! (`TaskLedger::quiet`, at most as many as there are free slots), at most [`PER_AGENT`]
//! checks in flight per agent and [`OVERALL`] on this replica, and each check is taken with
//! `TaskLedger::lease` first, which moves the task on by its backoff (doubling from
//! `reconcile_after_ms` up to five minutes, never less than the agent's timeout): on Redis the
//! lease is one script in the task's partition, so one replica checks a task at a time. An
//! ejected agent is not asked. Counted in `a2a_gateway_reconciles_total{agent,outcome}`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::ledger::TaskLedger;
use crate::metrics::Metrics;
use crate::protocol::task::{Refusal, Verdict};
use crate::registry::{Agent, Registry};
use crate::upstream::Upstream;

/// Checks in flight at once against one agent, on this replica.
pub const PER_AGENT: usize = 4;
/// Checks in flight at once on this replica, over every agent.
pub const OVERALL: usize = 64;
/// The next turn's delay while candidates wait for a free slot.
const BEHIND_TICK: Duration = Duration::from_millis(20);

/// Tasks one replica polls at most.
pub const MAX_WATCHED: usize = 10_000;

/// A watched task: its agent and its A2A id.
pub type Watched = (Arc<str>, Arc<str>);

/// The official A2A tasks with push configs this replica polls (their agent does not push to
/// the gateway; `http::a2a::poll` asks them): (agent, A2A task id) → when next. The
/// reconciler, on every replica, is what still learns a task's changes past the bound or after
/// a restart. It also holds the tasks this replica follows on their streams instead
/// (`http::a2a::follow`): one follower a task.
#[derive(Default)]
pub struct Poller {
    watched: Mutex<HashMap<Watched, Instant>>,
    followed: Mutex<HashSet<Arc<str>>>,
}

impl Poller {
    /// Poll `id` of `agent` from now on (at once, then every `poll_interval_ms`); false when
    /// the list is full.
    pub fn watch(&self, agent: &str, id: &str) -> bool {
        let mut w = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        if w.len() >= MAX_WATCHED && !w.contains_key(&(Arc::from(agent), Arc::from(id))) {
            tracing::warn!(
                agent,
                task_id = id,
                "the push poll list is full; the reconciler will catch this task's changes"
            );
            return false;
        }
        w.entry((Arc::from(agent), Arc::from(id)))
            .or_insert_with(Instant::now);
        true
    }

    /// Take task `key` (its ledger key) for following on its stream: `Some(true)` taken now,
    /// `Some(false)` followed already, `None` when `max` are followed.
    pub fn take_follow(&self, key: &str, max: usize) -> Option<bool> {
        let mut set = lock(&self.followed);
        if set.contains(key) {
            return Some(false);
        }
        if set.len() >= max {
            return None;
        }
        set.insert(Arc::from(key));
        Some(true)
    }

    /// Task `key`'s follower has ended.
    pub fn end_follow(&self, key: &str) {
        lock(&self.followed).remove(key);
    }

    /// How many tasks are watched.
    pub fn len(&self) -> usize {
        self.watched.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tasks due now (at most `max`); the caller moves each on with [`Poller::next`].
    pub fn due(&self, now: Instant, max: usize) -> Vec<Watched> {
        let w = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        w.iter()
            .filter(|(_, at)| **at <= now)
            .take(max)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Poll `key` next at `at`, or (`None`) no more.
    pub fn next(&self, key: &Watched, at: Option<Instant>) {
        let mut w = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        match at {
            Some(at) => {
                if let Some(e) = w.get_mut(key) {
                    *e = at;
                }
            }
            None => {
                w.remove(key);
            }
        }
    }
}

/// How a check went (the `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The agent's answer moved the task (a new state or a newer update), not to a final one.
    Changed,
    /// The agent said what the ledger holds (or older).
    Unchanged,
    /// The task reached a final state.
    Final,
    /// No usable answer: the agent failed, answered outside its protocol, or about another task.
    Error,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Changed => "changed",
            Outcome::Unchanged => "unchanged",
            Outcome::Final => "final",
            Outcome::Error => "error",
        }
    }
}

/// How the reconciler asks an official A2A agent about a task (its ledger key): GetTask in
/// the agent's own binding, judged and applied to the ledger. Answered by `http::a2a::poll`
/// and wired by `lib.rs`, since a domain module speaks no binding.
pub trait A2aAsk: Send + Sync + 'static {
    /// Ask, and apply what the agent says; `None` without a usable answer.
    fn ask<'a>(
        &'a self,
        agent: &'a Agent,
        task_id: &'a str,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Option<crate::ledger::Applied>> + Send + 'a>,
    >;
}

/// What the loop needs, shared by the checks it spawns.
struct Reconciler {
    /// The official A2A agents' GetTask (none: their tasks are not reconciled).
    a2a: Option<Arc<dyn A2aAsk>>,
    registry: Arc<ArcSwap<Registry>>,
    upstream: Arc<ArcSwap<Upstream>>,
    ledger: Arc<dyn TaskLedger>,
    metrics: Arc<Metrics>,
    overall: Arc<Semaphore>,
    /// One per agent name, at most one per configured agent (names a reload removed are
    /// dropped at the next turn).
    per_agent: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Tasks being checked by this replica (at most [`OVERALL`]).
    checking: Mutex<HashSet<Arc<str>>>,
}

/// Start the reconciler on the current runtime; it ends with `shutdown`.
pub fn spawn(
    registry: Arc<ArcSwap<Registry>>,
    upstream: Arc<ArcSwap<Upstream>>,
    ledger: Arc<dyn TaskLedger>,
    metrics: Arc<Metrics>,
    a2a: Option<Arc<dyn A2aAsk>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let r = Arc::new(Reconciler {
        a2a,
        registry,
        upstream,
        ledger,
        metrics,
        overall: Arc::new(Semaphore::new(OVERALL)),
        per_agent: Mutex::new(HashMap::new()),
        checking: Mutex::new(HashSet::new()),
    });
    tokio::spawn(async move {
        let mut behind = false;
        loop {
            // Sooner while candidates are left over for want of a free slot: the slots free up
            // as checks end, and a quiet fleet would otherwise wait a whole tick per batch.
            let tick = if behind { BEHIND_TICK } else { r.tick() };
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            behind = r.turn().await;
        }
    });
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Drops the task from the replica's checking set when its check ends, however it ends.
struct Checking {
    task_id: Arc<str>,
    reconciler: Arc<Reconciler>,
    _permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
}

impl Drop for Checking {
    fn drop(&mut self) {
        lock(&self.reconciler.checking).remove(&self.task_id);
    }
}

impl Reconciler {
    /// How often the ledger is asked for candidates: a quarter of the shortest
    /// `reconcile_after_ms`, between 100 ms and 1 s (and 1 s when every agent has it off).
    fn tick(&self) -> Duration {
        let reg = self.registry.load();
        reg.agents()
            .iter()
            .map(|a| a.cfg.reconcile_after)
            .filter(|d| !d.is_zero())
            .min()
            .map_or(Duration::from_secs(1), |d| {
                (d / 4).clamp(Duration::from_millis(100), Duration::from_secs(1))
            })
    }

    fn slots_of(&self, reg: &Registry, name: &str) -> Arc<Semaphore> {
        let mut per = lock(&self.per_agent);
        if per.len() > reg.agents().len() {
            per.retain(|n, _| reg.by_name(n).is_some());
        }
        per.entry(name.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(PER_AGENT)))
            .clone()
    }

    /// One pass over the agents: lease and start the checks there is room for. True if some
    /// agent had more candidates than free slots.
    async fn turn(self: &Arc<Self>) -> bool {
        // Not while the store is known down: the checks would fail, and a read that succeeds
        // would mark a store up that `wait_replicas` still holds down.
        if !self.ledger.available() {
            return false;
        }
        let mut behind = false;
        let reg = self.registry.load_full();
        for agent in reg.agents() {
            let after = agent.cfg.reconcile_after;
            // A Clawpedia agent is asked by its card's routes (`Card::task_path`); an official
            // A2A agent by GetTask in its binding, when the gateway was given the means.
            if agent.cfg.protocol == crate::config::Protocol::A2a && self.a2a.is_none() {
                continue;
            }
            if after.is_zero() || !agent.replicas.any_ok() {
                continue;
            }
            let slots = self.slots_of(&reg, &agent.cfg.name);
            let free = slots
                .available_permits()
                .min(self.overall.available_permits());
            if free == 0 {
                behind = true;
                continue;
            }
            let now = crate::protocol::time::now_ms();
            let before = now.saturating_sub(i64::try_from(after.as_millis()).unwrap_or(i64::MAX));
            let name = agent.cfg.name.as_str();
            // Tasks this replica is checking may come back (their lease is in the ledger, but
            // another replica's clock may differ): ask for a few more than there is room for.
            let Ok(candidates) = self.ledger.quiet(name, before, free + PER_AGENT).await else {
                continue;
            };
            for task_id in candidates {
                if lock(&self.checking).contains(&task_id) {
                    continue;
                }
                let (Ok(mine), Ok(any)) = (
                    slots.clone().try_acquire_owned(),
                    self.overall.clone().try_acquire_owned(),
                ) else {
                    behind = true;
                    break;
                };
                let leased = self
                    .ledger
                    .lease(name, &task_id, before, after, agent.cfg.timeout)
                    .await;
                if !matches!(leased, Ok(true)) {
                    continue;
                }
                lock(&self.checking).insert(task_id.clone());
                let guard = Checking {
                    task_id,
                    reconciler: self.clone(),
                    _permits: (mine, any),
                };
                let agent = agent.clone();
                tokio::spawn(async move {
                    let r = guard.reconciler.clone();
                    let outcome = r.check(&agent, &guard.task_id).await;
                    r.metrics
                        .reconciles
                        .with_label_values(&[agent.cfg.name.as_str(), outcome.as_str()])
                        .inc();
                    drop(guard);
                });
            }
        }
        behind
    }

    /// Ask the agent for the task, and apply what it says.
    async fn check(&self, agent: &Agent, task_id: &str) -> Outcome {
        let client = self.upstream.load_full();
        let applied = match (&self.a2a, agent.cfg.protocol) {
            (Some(a2a), crate::config::Protocol::A2a) => a2a.ask(agent, task_id).await,
            _ => {
                crate::stream::source::ask_and_apply(
                    &self.ledger,
                    &self.metrics,
                    agent,
                    &client,
                    task_id,
                )
                .await
            }
        };
        match applied.map(|a| (a.verdict, a.record.head.status)) {
            Some((Verdict::New | Verdict::Transition { .. }, st)) if st.is_terminal() => {
                Outcome::Final
            }
            Some((Verdict::New | Verdict::Transition { .. } | Verdict::Refresh, _)) => {
                Outcome::Changed
            }
            Some((Verdict::Duplicate | Verdict::Refused(Refusal::Stale), _)) => Outcome::Unchanged,
            Some((Verdict::Refused(_), _)) | None => Outcome::Error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watch_list_is_bounded_and_moves_tasks_on() {
        let p = Poller::default();
        assert!(p.watch("a", "t1"));
        assert!(p.watch("a", "t1"), "watching twice is one entry");
        assert_eq!(p.len(), 1);
        let now = Instant::now();
        let due = p.due(now + Duration::from_millis(1), 10);
        assert_eq!(due.len(), 1);
        p.next(&due[0], Some(now + Duration::from_secs(60)));
        assert!(p.due(now + Duration::from_secs(1), 10).is_empty());
        p.next(&due[0], None);
        assert!(p.is_empty());
        for i in 0..MAX_WATCHED {
            assert!(p.watch("a", &i.to_string()));
        }
        assert!(!p.watch("a", "one too many"));
        assert_eq!(p.len(), MAX_WATCHED);
    }
}
