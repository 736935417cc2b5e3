//! Step 1, **resolve**: the agent a route names or the ledger records the task under, checked
//! against the caller (the agent's right, the task's owner) before anything is sent.

use std::sync::Arc;

use crate::http::admission;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, Code};
use crate::ledger::Record;
use crate::registry::Agent;
use crate::state::State;

/// 404 UNKNOWN_AGENT.
pub fn unknown_agent(name: &str) -> ApiError {
    ApiError::new(Code::UnknownAgent, format!("no agent named {name:?}"))
}

/// The agent of a task route, checked against the ledger and the caller: under
/// `/agents/{name}/` the caller must be allowed the agent (403), the task must not belong to
/// another agent, and must be recorded unless the agent is configured with
/// `passthrough_unknown_tasks` (its tasks are also created elsewhere); without a prefix the
/// ledger decides. An id the gateway has not seen never reaches an agent that does not pass
/// them through: the client may mean a task of another agent, or one the gateway cannot guard.
/// Another client's task is 404, as an unknown one is (`admission::task`).
pub async fn task_agent(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
) -> Result<(Arc<Agent>, Option<Record>), ApiError> {
    // Decided before the ledger is asked: the answer says nothing about the task.
    let named = prefix
        .map(|name| named_agent(state, ctx, name))
        .transpose()?;
    let record = state.ledger.get(task_id).await?;
    let agent = match named {
        Some(agent) => {
            // One answer for a task of another agent, an unknown one and (admission::task)
            // another client's: ids reveal nothing.
            let unknown = || {
                ApiError::new(
                    Code::TaskNotFound,
                    format!(
                        "task {task_id} is not known to the gateway under agent {:?}",
                        agent.cfg.name
                    ),
                )
            };
            match &record {
                Some(r) if *r.agent != agent.cfg.name => return Err(unknown()),
                None if !agent.cfg.passthrough_unknown_tasks => return Err(unknown()),
                _ => {}
            }
            admission::task(state, ctx, task_id, record.as_ref()).map_err(|_| unknown())?;
            agent
        }
        None => {
            let r = record.as_ref().ok_or_else(|| {
                ApiError::new(
                    Code::TaskNotFound,
                    format!("task {task_id} is not known to the gateway"),
                )
            })?;
            // Ownership first: another client's task is not found, whatever its agent.
            admission::task(state, ctx, task_id, Some(r))?;
            let agent = state
                .registry
                .by_name(&r.agent)
                .cloned()
                .ok_or_else(|| unknown_agent(&r.agent))?;
            // A reload made the agent speak another protocol: it is a new agent. Its old
            // tasks stay readable from the ledger while final; a live one is not its now.
            if agent.cfg.protocol != crate::config::Protocol::Clawpedia
                && !r.head.status.is_terminal()
            {
                return Err(ApiError::new(
                    Code::TaskNotFound,
                    format!("task {task_id} is not known to the gateway"),
                ));
            }
            ctx.agent = Some(agent.clone());
            admission::agent(state, ctx, &agent)?;
            agent
        }
    };
    ctx.agent = Some(agent.clone());
    // Its calls go to the replica that holds it.
    if let Some(r) = &record {
        super::replica::pin(ctx, &agent, r);
    }
    Ok((agent, record))
}

/// The agent a route names (`/agents/{name}/...`, or a create's `agent`), which the caller must
/// be allowed to use (403 otherwise). Set as the request's agent first, so that its refusals
/// are counted under it.
pub fn named_agent(state: &State, ctx: &mut Ctx, name: &str) -> Result<Arc<Agent>, ApiError> {
    let agent = state
        .registry
        .resolve(name)
        .ok_or_else(|| unknown_agent(name))?;
    ctx.agent = Some(agent.clone());
    admission::agent(state, ctx, &agent)?;
    Ok(agent)
}
