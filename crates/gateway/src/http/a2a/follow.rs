//! Following a task with push configs on its shared stream, for an agent that streams but does
//! not take push configs: the gateway is one more subscriber of the task's one upstream
//! (`crate::stream`'s A2A topic, opened with `SubscribeToTask` when nobody streams the task on
//! this replica yet), so every event the feed applies to the ledger reaches the task's configs
//! through the same atomic apply as any other change. Clients streaming the task share that
//! upstream with it: the agent sees one stream.
//!
//! While the task is interrupted (INPUT_REQUIRED, AUTH_REQUIRED: its stream closes there) the
//! follower looks at the ledger every `poll_interval_ms` and subscribes again once the task is
//! live; when a subscription is refused or the agent's stream fails, it asks the agent with
//! GetTask (`poll::get_and_apply`) and tries again after `poll_interval_ms`. It ends when the
//! task is final, has no config left, or its agent is gone. Bounded: at most [`MAX_FOLLOWED`]
//! tasks per replica (past it, the task is polled).

use std::future::poll_fn;
use std::sync::Arc;

use hyper::header::HeaderMap;

use super::agent_stream;
use super::ledger as a2a_ledger;
use super::poll::get_and_apply;
use super::to_agent::{self, held_card};
use crate::caller::OnBehalf;
use crate::protocol::task::Status;
use crate::registry::Agent;
use crate::state::State;
use crate::stream::topic::Framing;

/// Tasks one replica follows on their streams at most, and never more than half its
/// `streams.max_topics`: clients' own streams keep the other half.
pub const MAX_FOLLOWED: usize = 10_000;

/// A task's place among the followed (`State::poller`), given up when its follower ends.
struct Slot(String, Arc<crate::reconcile::Poller>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.1.end_follow(&self.0);
    }
}

/// Follow task `id` of `agent` on its stream, in a task of its own (once: a task followed
/// already is left to its follower); false when this replica follows as many as it may (the
/// caller polls it instead).
pub fn start(state: &Arc<State>, agent: &Arc<Agent>, id: &str) -> bool {
    let key = a2a_ledger::key(&agent.cfg.name, id);
    let max = MAX_FOLLOWED.min(state.hub.config().max_topics / 2);
    match state.poller.take_follow(&key, max) {
        None => return false,
        Some(false) => return true,
        Some(true) => {}
    }
    let slot = Slot(key, state.poller.clone());
    let (state, name, id) = (state.clone(), agent.cfg.name.clone(), id.to_owned());
    tokio::spawn(async move {
        run(&state, &name, &id).await;
        drop(slot);
    });
    true
}

/// Whether the task still wants following: live, with configs, its agent configured and not
/// retired by a reload (its task then goes to the poll, which reads the current registry).
/// `Err`: the ledger cannot say now; ask again later.
async fn wanted(state: &State, name: &str, id: &str) -> Result<Option<(Arc<Agent>, Status)>, ()> {
    let Some(agent) = state.registry.resolve(name) else {
        return Ok(None);
    };
    let key = a2a_ledger::key(name, id);
    let record = match state.ledger.get(&key).await {
        Ok(Some(r)) => r,
        Ok(None) => return Ok(None),
        Err(_) => return Err(()),
    };
    if record.head.status.is_terminal() {
        return Ok(None);
    }
    match state.ledger.push_configs(&key).await {
        Ok(c) if c.is_empty() => return Ok(None),
        Ok(_) => {}
        Err(_) => return Err(()),
    }
    if agent.is_retired() {
        state.poller.watch(name, id);
        return Ok(None);
    }
    Ok(Some((agent, record.head.status)))
}

async fn run(state: &Arc<State>, name: &str, id: &str) {
    let mut stop = state.hub.stopping();
    loop {
        let (agent, status) = match wanted(state, name, id).await {
            Ok(Some(w)) => w,
            Ok(None) => return,
            Err(()) => {
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => continue,
                    _ = stop.changed() => return,
                }
            }
        };
        let interval = agent.cfg.poll_interval;
        let interrupted = matches!(status, Status::InputRequired | Status::AuthRequired);
        if !interrupted && !follow_once(state, &agent, id).await {
            // No stream to be had: the agent is asked instead.
            get_and_apply(state, &state.upstream, &agent, id).await;
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// One subscription to the task's shared stream, read to its end; false when none could be
/// opened.
async fn follow_once(state: &Arc<State>, agent: &Arc<Agent>, id: &str) -> bool {
    let Ok(held) = held_card(agent) else {
        return false;
    };
    if !held.streams() {
        return false;
    }
    let key = a2a_ledger::key(&agent.cfg.name, id);
    let Ok(Some(record)) = state.ledger.get(&key).await else {
        return false;
    };
    let call = agent_stream::subscribe_call(id);
    let on = OnBehalf::Owner(record.owner.as_deref());
    let at = (None, record.replica.as_deref());
    let Ok(out) = to_agent::stream_request(agent, &held, at, on, &HeaderMap::new(), &call) else {
        return false;
    };
    let joined =
        super::feed::join(state, agent, held, id, &record, out, Framing::Stored, None).await;
    let Ok(Some(mut sub)) = joined else {
        return false;
    };
    // The events themselves are the feed's business (it applies them to the ledger); the
    // follower only keeps the stream open until it ends.
    while let Some(Ok(_)) = poll_fn(|cx| sub.poll_next(cx)).await {}
    // Ended where a stream ends (a final or an interrupted state)? Otherwise it broke (the
    // agent's error, UPSTREAM_ERROR, a topic given up): the agent is asked instead.
    matches!(
        state.ledger.get(&key).await,
        Ok(Some(r)) if r.head.status.is_terminal()
            || matches!(r.head.status, Status::InputRequired | Status::AuthRequired)
    )
}
