//! Which of an agent's replicas a request goes to (`registry::replicas`): pinned to the one
//! that holds the task (or context) the request names, else picked for new work; and the
//! 503 REPLICA_UNAVAILABLE of a task whose replica is gone.
//!
//! A handler that reads a task's record pins the request ([`pin`]); the request's builder asks
//! [`target`], which picks a replica for new work when nothing is pinned and keeps it in the
//! request's context, where the ledger reads it when it records the answer
//! ([`recorded`]). The gateway's own calls (polls, resubscriptions, push configs) name the
//! replica they read from the ledger ([`target`]'s `at`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::header::{HeaderValue, RETRY_AFTER};

use crate::http::context::Ctx;
use crate::http::error::{ApiError, Code};
use crate::ledger::Record;
use crate::registry::replicas::{Pinned, Replica};
use crate::registry::Agent;

/// Where a request goes, once known.
#[derive(Clone)]
pub enum Target {
    /// To this replica; `pinned` when a task or context named it (not picked for new work).
    At {
        /// The replica.
        replica: Arc<Replica>,
        /// Whether a task or context chose it.
        pinned: bool,
    },
    /// The task's replica is gone: the request is refused.
    Gone {
        /// Its address, said to operators only.
        address: Arc<str>,
        /// How long it has been gone.
        since: Duration,
        /// Its grace.
        grace: Duration,
    },
}

/// A request's [`Target`], set at most once per call.
#[derive(Default)]
pub struct Slot(Mutex<Option<Target>>);

impl Clone for Slot {
    fn clone(&self) -> Slot {
        Slot(Mutex::new(self.get()))
    }
}

impl Slot {
    fn get(&self) -> Option<Target> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, t: Target) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
    }

    /// Set `t` unless a target is set already: the first task a call names pins it (a
    /// message's `taskId`, before its `referenceTaskIds`).
    fn set_first(&self, t: Target) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(t);
        }
    }

    /// The replica a request went to, if one was chosen.
    pub fn replica(&self) -> Option<Arc<Replica>> {
        match self.get()? {
            Target::At { replica, .. } => Some(replica),
            Target::Gone { .. } => None,
        }
    }

    /// Whether the replica was chosen by a task or context the request named.
    pub fn pinned(&self) -> bool {
        matches!(self.get(), Some(Target::At { pinned: true, .. }))
    }
}

/// Pin the request to the replica that holds `record`'s task, for an agent whose calls are
/// pinned: nothing for a task recorded without one (made before the agent had replicas, or by
/// an agent that shares its state). A gone replica pins the request to its refusal
/// ([`target`] answers it); a final task is answered from the ledger before any call.
///
/// A task recorded without a replica (made while the agent had one `url`, before it was given
/// `urls`) goes to the first of `urls`, the old `url`, while that one is a member.
pub fn pin(ctx: &Ctx, agent: &Agent, record: &Record) {
    if !agent.cfg.pins() {
        return;
    }
    match record.replica.as_deref() {
        Some(address) => pin_at(ctx, agent, address),
        None => {
            let first = crate::registry::replicas::address_of(&agent.cfg.url);
            if let Some(Pinned::At(replica)) = first.map(|a| agent.replicas.pinned(&a)) {
                ctx.replica.set_first(Target::At {
                    replica,
                    pinned: true,
                });
            }
        }
    }
}

/// Undo a pin to a replica that is gone: a message that names no `taskId` (only a context, or
/// tasks it refers to) is new work when the replica of the task it follows has left.
pub fn unpin_gone(ctx: &Ctx) {
    let mut slot = ctx.replica.0.lock().unwrap_or_else(|p| p.into_inner());
    if matches!(*slot, Some(Target::Gone { .. })) {
        *slot = None;
    }
}

/// Pin the request to the replica at `address` (see [`pin`]); a request pinned already keeps
/// its first pin.
pub fn pin_at(ctx: &Ctx, agent: &Agent, address: &str) {
    let target = match agent.replicas.pinned(address) {
        Pinned::At(replica) => Target::At {
            replica,
            pinned: true,
        },
        Pinned::Gone(since) => Target::Gone {
            address: address.into(),
            since,
            grace: agent.cfg.replica_grace,
        },
        Pinned::Unknown => Target::Gone {
            address: address.into(),
            since: Duration::ZERO,
            grace: agent.cfg.replica_grace,
        },
    };
    ctx.replica.set_first(target);
}

/// Pin a message that names a context but no task to the replica the context lives on (the
/// ledger's record of the replica that last answered in it, else that of a task of the
/// context), while that replica is a member: an agent may keep a conversation in memory (ADK's
/// sessions), with or without tasks. A context whose replica is gone, or that the ledger cannot
/// place, pins nothing: the message is new work.
pub async fn pin_context(state: &crate::state::State, ctx: &Ctx, agent: &Agent, context: &str) {
    if !agent.cfg.pins() {
        return;
    }
    if let Ok(Some(home)) = state.ledger.context_replica(&agent.cfg.name, context).await {
        if let Pinned::At(replica) = agent.replicas.pinned(&home) {
            ctx.replica.set_first(Target::At {
                replica,
                pinned: true,
            });
        }
        return;
    }
    let query = crate::ledger::listing::Query {
        scope: crate::ledger::listing::Scope::All,
        agents: vec![agent.cfg.name.as_str().into()],
        statuses: crate::protocol::task::Status::ALL.to_vec(),
        since_ms: None,
        context: Some(context.into()),
        after: None,
        limit: 1,
    };
    if let Ok(page) = state.ledger.list(&query).await {
        if let Some(first) = page.tasks.first() {
            pin(ctx, agent, &first.record);
            unpin_gone(ctx);
        }
    }
}

/// Keep the replica that answered in `context` as where it lives, for `keep` (every answer
/// naming it keeps it again), for an agent whose calls are pinned. A ledger that cannot keep it
/// now costs the context's next message its pin, not its answer.
pub async fn keep_context(
    state: &crate::state::State,
    ctx: &Ctx,
    agent: &str,
    context: &str,
    keep: Duration,
) {
    let Some(a) = state.registry.by_name(agent) else {
        return;
    };
    let Some(replica) = recorded(a.cfg.pins(), Some(ctx)) else {
        return;
    };
    if let Err(e) = state
        .ledger
        .set_context_replica(agent, context, &replica.address, keep)
        .await
    {
        tracing::warn!(agent, error = %e, "where a context lives was not recorded; its next message is new work");
    }
}

/// The replica a request to `agent` goes to: the one the request is pinned to (`ctx`), or the
/// one at `at` (the gateway's own calls, which name the task's replica), or one picked for new
/// work (kept in `ctx`, so that the ledger records it with the task the answer makes).
pub fn target(
    agent: &Agent,
    ctx: Option<&Ctx>,
    at: Option<&str>,
) -> Result<Arc<Replica>, ApiError> {
    if let Some(t) = ctx.and_then(|c| c.replica.get()) {
        return match t {
            Target::At { replica, .. } => Ok(replica),
            Target::Gone {
                address,
                since,
                grace,
            } => Err(gone(agent, &address, since, grace)),
        };
    }
    if let (Some(address), true) = (at, agent.cfg.pins()) {
        return match agent.replicas.pinned(address) {
            Pinned::At(r) => Ok(r),
            Pinned::Gone(since) => Err(gone(agent, address, since, agent.cfg.replica_grace)),
            Pinned::Unknown => Err(gone(
                agent,
                address,
                Duration::ZERO,
                agent.cfg.replica_grace,
            )),
        };
    }
    let replica = agent.replicas.pick(&agent.cfg).ok_or_else(|| {
        ApiError::new(
            Code::AgentUnavailable,
            format!(
                "agent {:?} has no replica yet (its name has not resolved)",
                agent.cfg.name
            ),
        )
        .with_header(RETRY_AFTER, HeaderValue::from(1u64))
    })?;
    if let Some(ctx) = ctx {
        ctx.replica.set(Target::At {
            replica: replica.clone(),
            pinned: false,
        });
    }
    Ok(replica)
}

/// The replica to record with the task an answer makes or names: the one the request went to,
/// for an agent whose calls are pinned.
pub fn recorded(agent_pins: bool, ctx: Option<&Ctx>) -> Option<Arc<Replica>> {
    if !agent_pins {
        return None;
    }
    ctx.and_then(|c| c.replica.replica())
}

/// 503 REPLICA_UNAVAILABLE for a task whose replica has been gone `since`, with `Retry-After`
/// while it may come back (until `grace` has passed). The replica's address is not said: no
/// agent address reaches a client.
fn gone(agent: &Agent, address: &str, since: Duration, grace: Duration) -> ApiError {
    tracing::debug!(agent = %agent.cfg.name, replica = address, "a call of a task whose replica is gone");
    let left = grace.saturating_sub(since).as_secs().max(1);
    ApiError::new(
        Code::ReplicaUnavailable,
        format!(
            "the replica of agent {:?} that holds this task is gone; the task is failed if it does not come back within replica_grace_ms",
            agent.cfg.name
        ),
    )
    .with_header(RETRY_AFTER, HeaderValue::from(left.min(60)))
    .with_details(serde_json::json!({ "retry_after_secs": left.min(60) }))
}

/// 503 REPLICA_UNAVAILABLE for a pinned call whose replica is ejected: it may come back.
pub fn ejected(agent: &Agent, retry_after: u64) -> ApiError {
    ApiError::new(
        Code::ReplicaUnavailable,
        format!(
            "the replica of agent {:?} that holds this task is ejected after consecutive failures; retry after {retry_after} s",
            agent.cfg.name
        ),
    )
    .with_header(RETRY_AFTER, HeaderValue::from(retry_after))
    .with_details(serde_json::json!({ "retry_after_secs": retry_after }))
}
