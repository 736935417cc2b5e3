//! The Clawpedia task reads: get and cancel. The ledger first (final tasks are answered or
//! refused without the agent), then the agent, then the ledger's verdict on what it said.

use hyper::header::HeaderValue;
use hyper::{Method, StatusCode};
use serde_json::Value;

use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::judge::json_violation;
use crate::http::exchange::{conformance, Asked, ClientSide, Exchange};
use crate::http::request::{is_json, Request};
use crate::http::response;
use crate::protocol::json::{self, JsonError};
use crate::protocol::task::{Refusal, Status, Verdict};
use crate::protocol::time::now_ms;
use crate::state::State;

/// GET /tasks/{id}: final tasks are answered from the ledger (final, and readable while the
/// agent is down); others are asked of the agent and judged.
pub async fn get(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    req: Request,
) -> ApiResult {
    let ex = Exchange::resolve(state, ctx, prefix, task_id).await?;
    if let Some(r) = ex.final_record() {
        let mut res = response::json(StatusCode::OK, r.task.clone());
        res.headers_mut()
            .insert("x-a2a-source", HeaderValue::from_static("ledger"));
        return Ok(res);
    }
    let path = format!("/tasks/{task_id}");
    match ex
        .ask_task(Method::GET, &path, ClientSide::of(&req))
        .await?
    {
        Asked::Other(answer) => Ok(answer.relay()),
        Asked::Task { answer, body, .. } => Ok(answer.relay_with(body)),
    }
}

/// POST /tasks/{id}/cancel: a final task is refused with 409 without contacting the agent.
pub async fn cancel(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    req: Request,
) -> ApiResult {
    let ex = Exchange::resolve(state, ctx, prefix, task_id).await?;
    if let Some(r) = ex.final_record() {
        return Err(terminal(task_id, r.head.status, &r.task));
    }
    let path = format!("/tasks/{task_id}/cancel");
    let answer = ex.call(Method::POST, &path, ClientSide::of(&req)).await?;
    if answer.status() == StatusCode::CONFLICT {
        // The agent refuses: most likely the task ended before the gateway heard of it. Learn
        // its state, so the client gets the same 409 TASK_TERMINAL as for a recorded end.
        if let Some(err) = learn_terminal(&ex, task_id).await {
            return Err(err);
        }
        return Ok(answer.relay());
    }
    // The spec leaves the body of a 202 open; when it is a Task, it is news about the task. A
    // JSON body the gateway cannot judge (a duplicate key, a number beyond f64) is a violation,
    // and never recorded.
    let doc = if answer.status().is_success() && is_json(&answer.parts.headers) {
        match json::parse(&answer.body) {
            Ok(v) => Some(v),
            Err(JsonError::Syntax(_)) => None,
            Err(e) => {
                conformance(state, &ex.agent, ex.ctx(), "task", vec![json_violation(&e)])?;
                None
            }
        }
    } else {
        None
    };
    let Some(doc) = doc.filter(|t| t.get("task_id").is_some()) else {
        return Ok(answer.relay());
    };
    match ex.record_task(answer, &doc).await? {
        Asked::Other(answer) => Ok(answer.relay()),
        // The task ended before the cancel took effect (the agent may say CANCELLED, the ledger
        // already holds COMPLETED): the cancel did nothing, say so as for any final task.
        Asked::Task {
            verdict: Some(Verdict::Refused(Refusal::Terminal)),
            body,
            ..
        } => {
            let status = status_of(&body).unwrap_or(Status::Cancelled);
            Err(terminal(task_id, status, &body))
        }
        Asked::Task { answer, body, .. } => Ok(answer.relay_with(body)),
    }
}

/// Ask the agent for the task and record the answer; `Some(409 TASK_TERMINAL)` if the task has
/// ended. Any failure on the way means "not learned": the caller keeps the agent's own answer,
/// and a document that breaks the protocol is not recorded, whatever the conformance mode.
async fn learn_terminal(ex: &Exchange<'_>, task_id: &str) -> Option<ApiError> {
    let no_client = hyper::HeaderMap::new();
    let client = ClientSide {
        headers: &no_client,
        query: None,
    };
    let path = format!("/tasks/{task_id}");
    let answer = ex.call(Method::GET, &path, client).await.ok()?;
    if answer.status() != StatusCode::OK {
        return None;
    }
    let task = json::parse(&answer.body).ok()?;
    let (task, found) = ex
        .agent
        .card()
        .ok()?
        .read_task(&task, Some(task_id), now_ms());
    if !found.is_empty() {
        return None;
    }
    let (_, recorded) = ex.record(task, &answer.body).await.ok()?;
    let status = status_of(&recorded)?;
    status
        .is_terminal()
        .then(|| terminal(task_id, status, &recorded))
}

/// The status of a recorded Task document.
fn status_of(task: &[u8]) -> Option<Status> {
    serde_json::from_slice::<Value>(task).ok()?["status"]
        .as_str()
        .and_then(Status::parse)
}

/// 409 TASK_TERMINAL, with the recorded task in the details.
fn terminal(task_id: &str, status: Status, recorded: &[u8]) -> ApiError {
    let task: Value = serde_json::from_slice(recorded).unwrap_or(Value::Null);
    ApiError::new(
        Code::TaskTerminal,
        format!(
            "task {task_id} is {} and cannot be cancelled",
            status.as_str()
        ),
    )
    .with_details(serde_json::json!({ "status": status.as_str(), "task": task }))
}
