//! The fleet's tenant: which agent a call at `POST /a2a` is for. `params.tenant` names the
//! agent (an unknown one and one the caller may not use are InvalidParams, worded alike, so
//! tenants reveal nothing of the fleet), and the agent gets its own interface's tenant, never
//! the client's. SendMessage and GetExtendedAgentCard need it; the methods that name a task may
//! leave it out: the gateway finds the caller's task with that id (none is TaskNotFoundError,
//! more than one is InvalidParams "tenant required"). ListTasks without a tenant lists the
//! caller's tasks on every A2A agent it may use. Once the agent is known, the call runs the
//! same path as on the agent's own routes (`super::call`).

use std::sync::Arc;

use serde_json::Value;

use super::frame::{self, Failure};
use super::ledger;
use crate::config::Protocol;
use crate::http::context::Ctx;
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method};
use crate::protocol::Violation;
use crate::registry::Agent;
use crate::state::State;

/// Where a fleet call goes.
pub enum Tenant {
    /// To this agent, the tenant taken out of the call.
    Agent(Arc<Agent>),
    /// ListTasks without a tenant: over these agents, every A2A agent the caller may use.
    Every(Vec<Arc<str>>),
    /// Answered here, before any agent: refused, or a former agent's final task read from the
    /// ledger.
    Answered(Result<Value, Failure>),
}

/// The agent of a fleet `call` for the caller (see the module doc).
pub async fn resolve(state: &State, ctx: &Ctx, call: &mut Call) -> Tenant {
    let method = call.method;
    let id = call.task_id().unwrap_or_default().to_owned();
    let tenant = call
        .params
        .remove("tenant")
        .and_then(|t| t.as_str().filter(|t| !t.is_empty()).map(str::to_owned));
    let speaks = |a: &Agent| a.cfg.protocol == Protocol::A2a && ctx.caller.may_use(a);
    let answered = |e: A2aError| Tenant::Answered(Err(e.into()));
    match tenant {
        Some(name) => match state.registry.by_name(&name) {
            Some(a) if speaks(a) => Tenant::Agent(a.clone()),
            // A reload made the agent speak another protocol: its final A2A tasks stay
            // readable here, from the ledger.
            Some(a)
                if ctx.caller.may_use(a)
                    && matches!(method, Method::GetTask | Method::CancelTask) =>
            {
                let history = call.params.get("historyLength").and_then(Value::as_u64);
                let task = former_task(state, ctx, &name, method, &id)
                    .await
                    .map(|t| ledger::with_history(t, history));
                Tenant::Answered(task.map_err(Failure::from))
            }
            _ => answered(no_such_tenant(&name)),
        },
        None if method == Method::ListTasks => Tenant::Every(
            state
                .registry
                .agents()
                .iter()
                .filter(|a| speaks(a))
                .map(|a| Arc::from(a.cfg.name.as_str()))
                .collect(),
        ),
        // The methods that name no task need the agent named.
        None if method.task_field().is_none() => {
            answered(A2aError::invalid_params(vec![Violation::new(
                "/tenant",
                "required",
                format!(
                    "{} at /a2a needs params.tenant: the agent's name",
                    method.as_str()
                ),
            )]))
        }
        None => holder(state, ctx, &id).await,
    }
}

/// The one A2A agent the caller may use that holds the caller's task `id`.
async fn holder(state: &State, ctx: &Ctx, id: &str) -> Tenant {
    let candidates: Vec<Arc<Agent>> = state
        .registry
        .agents()
        .iter()
        .filter(|a| a.cfg.protocol == Protocol::A2a && ctx.caller.may_use(a))
        .cloned()
        .collect();
    let names: Vec<Arc<str>> = candidates
        .iter()
        .map(|a| Arc::from(a.cfg.name.as_str()))
        .collect();
    let records = match ledger::records_under(state, &names, id).await {
        Ok(r) => r,
        Err(f) => return Tenant::Answered(Err(f)),
    };
    let mut holders: Vec<Arc<Agent>> = candidates
        .into_iter()
        .zip(records)
        .filter(|(_, r)| {
            r.as_ref()
                .is_some_and(|r| ctx.caller.sees(r.owner.as_deref()))
        })
        .map(|(a, _)| a)
        .collect();
    match holders.len() {
        0 => Tenant::Answered(Err(not_found(id).into())),
        1 => Tenant::Agent(holders.remove(0)),
        _ => Tenant::Answered(Err(A2aError::invalid_params(vec![Violation::new(
            "/tenant",
            "required",
            "tenant required: tasks of this id are held under more than one agent; name the agent in params.tenant",
        )])
        .into())),
    }
}

/// Unknown, not the caller's to use, or (but for a former agent's final task) not an A2A
/// agent: one answer, naming `tenant`, so tenants reveal nothing of the fleet.
fn no_such_tenant(name: &str) -> A2aError {
    A2aError::invalid_params(vec![Violation::new(
        "/tenant",
        "tenant",
        format!(
            "tenant {:?} names no A2A agent this client may use",
            name.chars().take(64).collect::<String>()
        ),
    )])
}

/// GetTask or CancelTask of task `id` recorded under `agent` while it spoke A2A (it speaks
/// another protocol since a reload): a final task is answered from the ledger (GetTask) or not
/// cancelable; anything else is not found.
async fn former_task(
    state: &State,
    ctx: &Ctx,
    agent: &str,
    method: Method,
    id: &str,
) -> Result<serde_json::Value, A2aError> {
    let record = state
        .ledger
        .get(&ledger::key(agent, id))
        .await
        .map_err(|e| *frame::from_api(e.into()).error)?;
    match record {
        Some(r) if r.head.status.is_terminal() && ctx.caller.sees(r.owner.as_deref()) => {
            if method == Method::CancelTask {
                return Err(A2aError::of(ErrorKind::TaskNotCancelable));
            }
            crate::protocol::json::parse(&r.task).map_err(|_| not_found(id))
        }
        _ => Err(not_found(id)),
    }
}

fn not_found(id: &str) -> A2aError {
    *ledger::not_found(id).error
}
