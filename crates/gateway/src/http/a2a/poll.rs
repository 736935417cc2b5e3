//! Polling for A2A tasks with push configs whose agent does not push to the gateway: GetTask
//! at the agent's `poll_interval_ms`, in its own binding, each answer judged and applied to
//! the ledger like any other news, so every change reaches the task's configs. A task leaves
//! the poll when it is final, when it has no config left, or when its agent is gone.
//!
//! The watch list (`reconcile::Poller`) is this replica's, in memory, and bounded: a task is
//! watched by the replica that took its config. After a restart, or past the bound, the
//! reconciler (`reconcile.rs`, `reconcile_after_ms`) is what still learns the task's changes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::ledger as a2a_ledger;
use super::to_agent::{self, held_card};
use crate::ledger::Applied;
use crate::protocol::a2a::answer::{check_answer, of_task};
use crate::protocol::a2a::{Call, Method};
use crate::registry::Agent;
use crate::state::State;
use crate::upstream::Upstream;

/// Polls in flight at once on this replica.
const IN_FLIGHT: usize = 16;
/// How often the list is looked at.
const TICK: Duration = Duration::from_millis(200);

/// Run the poll of every worker's shared `reconcile::Poller` until `stop`: `state` is a worker's (its
/// registry, ledger and config as reloads swap them), `client` the gateway's own agent client.
pub async fn run(
    state: Arc<ArcSwap<State>>,
    client: Arc<ArcSwap<Upstream>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Each poll a task of its own, at most IN_FLIGHT at once: a slow agent holds its own
    // polls, never the others'.
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let s = state.load_full();
        let free = slots.available_permits();
        if s.poller.is_empty() || free == 0 {
            continue;
        }
        let now = Instant::now();
        let up = client.load_full();
        for key in s.poller.due(now, free) {
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                break;
            };
            // In flight: not due again until it is done.
            s.poller.next(&key, Some(now + Duration::from_secs(3600)));
            let (s, up) = (s.clone(), up.clone());
            tokio::spawn(async move {
                let again = once(&s, &up, &key.0, &key.1).await;
                s.poller.next(&key, again.map(|d| Instant::now() + d));
                drop(permit);
            });
        }
    }
}

/// One poll of task `id` of `agent`: when to poll it again, or `None` to stop.
async fn once(state: &State, up: &Upstream, name: &str, id: &str) -> Option<Duration> {
    let agent = state.registry.resolve(name)?;
    let key = a2a_ledger::key(name, id);
    let interval = agent.cfg.poll_interval;
    // A ledger that cannot answer now (a failover) is asked again, the task kept.
    match state.ledger.get(&key).await {
        Err(_) => return Some(interval),
        Ok(None) => return None,
        Ok(Some(r)) if r.head.status.is_terminal() => return None,
        Ok(Some(_)) => {}
    }
    match state.ledger.push_configs(&key).await {
        Ok(c) if c.is_empty() => return None,
        Ok(_) => {}
        Err(_) => return Some(interval),
    }
    if !agent.replicas.any_ok() {
        return Some(interval);
    }
    match get_and_apply(state, up, &agent, id).await {
        Some(a) if a.record.head.status.is_terminal() => None,
        _ => Some(interval),
    }
}

/// GetTask of task `id` in the agent's binding, the gateway's own call; an answer within the
/// protocol and about this task is applied to the ledger like any news. `None`: no usable
/// answer (no card, no answer in time, an error, outside the protocol, another task).
pub async fn get_and_apply(
    state: &State,
    up: &Upstream,
    agent: &Agent,
    id: &str,
) -> Option<Applied> {
    let task = get(state, up, agent, id).await?;
    let head = of_task(&task).filter(|h| h.id == id)?;
    a2a_ledger::apply_news(state, &agent.cfg.name, &head, &task, 0, None, None)
        .await
        .ok()
}

/// GetTask of task `id` in the agent's binding, the gateway's own call: the Task, when the
/// answer is one within the protocol and about this task.
pub async fn get(state: &State, up: &Upstream, agent: &Agent, id: &str) -> Option<Value> {
    let held = held_card(agent).ok()?;
    let mut params = Map::new();
    params.insert("id".into(), Value::from(id));
    let call = Call::new(Method::GetTask, params);
    let holder = to_agent::owner_of(state, agent, id).await.ok()?;
    // Not called while its replica is ejected: a poll or a reconciler read passes no
    // admission, and would wait out the timeout of a replica known to fail.
    if !replica_up(agent, holder.replica.as_deref()) {
        return None;
    }
    let out = to_agent::own_request(agent, &held, &holder, &call).ok()?;
    let (parts, body) = up
        .exchange(
            out.request,
            agent.cfg.timeout,
            crate::upstream::MAX_AGENT_JSON,
        )
        .await
        .ok()?;
    let task = to_agent::read_local(state, agent, None, &call, &out.sent, (&parts, &body))
        .await
        .ok()?;
    if !check_answer(Method::GetTask, &task, Some(id)).is_empty() {
        return None;
    }
    Some(task)
}

/// The reconciler's GetTask for official A2A agents (`reconcile::A2aAsk`): the backstop of
/// every A2A task, polled or not, on every replica.
pub struct Reconcile {
    /// A worker's state (registry, ledger, config as reloads swap them).
    pub state: Arc<ArcSwap<State>>,
    /// The gateway's own agent client.
    pub client: Arc<ArcSwap<Upstream>>,
}

impl crate::reconcile::A2aAsk for Reconcile {
    fn ask<'a>(
        &'a self,
        agent: &'a Agent,
        task_id: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Applied>> + Send + 'a>> {
        Box::pin(async move {
            let (_, id) = crate::protocol::a2a::split_ledger_key(task_id)?;
            let state = self.state.load_full();
            let up = self.client.load_full();
            get_and_apply(&state, &up, agent, id).await
        })
    }
}

/// Whether the replica at `address` (a pinned task's) may be called by the gateway's own
/// reads: not ejected or being probed. True for a task of no pinned replica.
pub fn replica_up(agent: &Agent, address: Option<&str>) -> bool {
    match address.filter(|_| agent.cfg.pins()) {
        Some(a) => agent
            .replicas
            .find(a)
            .is_some_and(|r| matches!(r.limits.health(), crate::limits::Health::Ok)),
        None => true,
    }
}
