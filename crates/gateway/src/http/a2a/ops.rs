//! The A2A operations, one function each, whichever binding the call came in: what the ledger
//! answers without the agent (a final task's GetTask, CancelTask on a final task), what is
//! refused before the agent is called (another client's task or context, an inline push
//! config), and the exchange with the agent, whose answer is judged and recorded before it is
//! relayed. Each answers the neutral response (`frame`); SendMessage is in `send`.

use std::sync::Arc;

use hyper::header::HeaderMap;
use hyper::Response;
use serde_json::Value;

use super::frame::{neutral, Failure};
use super::ledger as a2a_ledger;
use super::to_agent::{self, conform, held_card};
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::error::ApiError;
use crate::http::exchange;
use crate::ledger::Record;
use crate::protocol::a2a::answer::task_of;
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method};
use crate::registry::Agent;
use crate::state::State;

/// Run `call` on `agent` for the caller; `headers` are the client's (its `A2A-Extensions`).
pub async fn run(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    headers: &HeaderMap,
    call: Call,
) -> Response<Body> {
    let method = call.method;
    // SendMessage, the call that makes tasks, runs in this future; the others are boxed
    // (one allocation each), so that its future, and every future above it, is not the size
    // of the largest of them (GetTask's and CancelTask's are a third larger).
    let answer = match method {
        Method::SendMessage => return super::send::send(state, ctx, agent, headers, call).await,
        Method::GetTask => Box::pin(get(state, ctx, agent, headers, &call)).await,
        Method::CancelTask => Box::pin(cancel(state, ctx, agent, headers, &call)).await,
        Method::ListTasks => {
            let name: Arc<str> = Arc::from(agent.cfg.name.as_str());
            Box::pin(super::list::list(
                state,
                ctx,
                vec![name.clone()],
                &name,
                &call,
            ))
            .await
        }
        Method::SendStreamingMessage | Method::SubscribeToTask => Err(unsupported(
            "a streaming method is answered as a stream (http::a2a::stream), not here",
        )),
        Method::CreateTaskPushNotificationConfig
        | Method::GetTaskPushNotificationConfig
        | Method::ListTaskPushNotificationConfigs
        | Method::DeleteTaskPushNotificationConfig => {
            Box::pin(super::push_configs::op(state, ctx, agent, &call)).await
        }
        Method::GetExtendedAgentCard => {
            Box::pin(extended_card(state, ctx, agent, headers, &call)).await
        }
    };
    neutral(method, answer)
}

fn unsupported(message: &str) -> Failure {
    A2aError::new(ErrorKind::UnsupportedOperation, message).into()
}

/// One exchange of `call` with the agent, its answer read back (not yet judged).
async fn ask(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    held: &HeldCard,
    headers: &HeaderMap,
    call: &Call,
) -> Result<Value, Failure> {
    let out = to_agent::request(agent, held, ctx, headers, call, None)?;
    let (parts, body) = exchange::call::exchange(state, agent, ctx, out.request).await?;
    let owner = ctx.caller.owner().map(|o| &**o);
    Ok(to_agent::read_local(state, agent, owner, call, &out.sent, (&parts, &body)).await?)
}

fn history_length(call: &Call) -> Option<u64> {
    call.params.get("historyLength").and_then(Value::as_u64)
}

/// The task a GetTask or CancelTask names (`id`), as the caller may see it, and its record when
/// it is final (what both answer without the agent).
async fn named_task<'c>(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    call: &'c Call,
) -> Result<(&'c str, Option<Record>), Failure> {
    let id = call.task_id().unwrap_or_default();
    let pass = agent.cfg.passthrough_unknown_tasks;
    let record = a2a_ledger::visible(state, ctx, &agent.cfg.name, pass, id).await?;
    Ok((id, record.filter(|r| r.head.status.is_terminal())))
}

/// GetTask: a final task from the ledger; any other from the agent, judged and recorded.
async fn get(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    headers: &HeaderMap,
    call: &Call,
) -> Result<Value, Failure> {
    let (id, final_record) = named_task(state, ctx, agent, call).await?;
    let task = match final_record {
        Some(r) => crate::protocol::json::parse(&r.task).map_err(ApiError::from)?,
        None => ask_task(state, ctx, agent, headers, call, id).await?,
    };
    Ok(a2a_ledger::with_history(task, history_length(call)))
}

/// CancelTask: TaskNotCancelableError for a final task, without the agent; else the agent's
/// answer, judged and recorded.
async fn cancel(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    headers: &HeaderMap,
    call: &Call,
) -> Result<Value, Failure> {
    let (id, final_record) = named_task(state, ctx, agent, call).await?;
    if let Some(r) = final_record {
        return Err(A2aError::new(
            ErrorKind::TaskNotCancelable,
            format!(
                "task {id:?} is {} in the gateway's ledger: a final task cannot be canceled",
                a2a_ledger::state_of(r.head.status).as_str()
            ),
        )
        .into());
    }
    ask_task(state, ctx, agent, headers, call, id).await
}

/// Ask the agent `call` about task `id`: its answer judged, recorded, and the document to
/// relay.
async fn ask_task(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    headers: &HeaderMap,
    call: &Call,
    id: &str,
) -> Result<Value, Failure> {
    let held = held_card(agent)?;
    let answer = ask(state, ctx, agent, &held, headers, call).await?;
    conform(state, ctx, agent, call.method, &answer, Some(id))?;
    relay_task(state, ctx, agent, &answer, id).await
}

/// A Task the agent answered about `id`, recorded; the document to relay (the ledger's when
/// it refused the update). An unreadable one (report mode) is relayed as it came.
async fn relay_task(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    answer: &Value,
    id: &str,
) -> Result<Value, Failure> {
    // Whatever the conformance mode: an answer naming another task is never relayed (it may
    // be another client's).
    if answer
        .get("id")
        .and_then(Value::as_str)
        .is_some_and(|got| got != id)
    {
        return Err(a2a_ledger::invalid_answer(
            "/id",
            "task",
            "the answer is about another task than the one asked about",
        ));
    }
    match task_of(answer) {
        Some(head) => {
            let recorded =
                a2a_ledger::record(state, ctx, &agent.cfg.name, &head, answer, None, 0).await?;
            Ok(recorded.task(answer))
        }
        None => Ok(answer.clone()),
    }
}

/// GetExtendedAgentCard: forwarded with the agent's credential when its card offers one, and
/// served rewritten like the public card.
async fn extended_card(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    headers: &HeaderMap,
    call: &Call,
) -> Result<Value, Failure> {
    let held = held_card(agent)?;
    if !held.extended {
        return Err(A2aError::of(ErrorKind::ExtendedAgentCardNotConfigured).into());
    }
    let answer = ask(state, ctx, agent, &held, headers, call).await?;
    conform(state, ctx, agent, call.method, &answer, None)?;
    // Rewritten like the public card: the gateway's interfaces and auth, none of the agent's
    // URLs or signatures.
    Ok(super::served_card::rewrite(state, agent, headers, &hyper::Uri::default(), &answer).0)
}
