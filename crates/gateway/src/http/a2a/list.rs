//! ListTasks, served from the ledger and never forwarded: an agent does not know the gateway's
//! callers (it would list every client's tasks to each) and sees only its own replica's tasks.
//! The ledger knows both. The caller's own tasks (every task with `all_tasks`), on one agent
//! (its binding routes, `/a2a` with a tenant) or on every A2A agent it may use (`/a2a` without
//! one), filtered by `contextId`, `status` and `statusTimestampAfter`, newest status first, in
//! keyset pages (`ledger::listing`) whose token is bound to the caller and the filters.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::frame::Failure;
use super::ledger as a2a_ledger;
use crate::http::context::Ctx;
use crate::http::error::ApiError;
use crate::http::handlers::listing::{caller_id, scope};
use crate::ledger::listing::{Query, Token, DEFAULT_PAGE};
use crate::protocol::a2a::{A2aError, Call, TaskState};
use crate::protocol::task::Status;
use crate::protocol::Violation;
use crate::state::State;

fn text<'a>(call: &'a Call, field: &str) -> &'a str {
    call.params
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// ListTasks (a call already checked against ListTasksRequest) over `agents`; `route` names the
/// listing a page token belongs to (the agent, or `""` for the whole fleet).
pub async fn list(
    state: &State,
    ctx: &Ctx,
    agents: Vec<Arc<str>>,
    route: &str,
    call: &Call,
) -> Result<Value, Failure> {
    let context = text(call, "contextId");
    let status = text(call, "status");
    let since = text(call, "statusTimestampAfter");
    let statuses = match TaskState::parse(status) {
        Some(s) => vec![s.status()],
        // Absent, or TASK_STATE_UNSPECIFIED: every state.
        None => Status::ALL.to_vec(),
    };
    let since_ms = match since {
        "" => None,
        s => Some(
            crate::protocol::time::parse_lenient(s)
                .ok_or_else(|| bad("/statusTimestampAfter", "an RFC 3339 timestamp"))?,
        ),
    };
    let limit = call
        .params
        .get("pageSize")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_PAGE, |n| n as usize);
    let bound = Token::of(&[
        "ListTasks",
        caller_id(&ctx.caller),
        route,
        context,
        statuses
            .first()
            .filter(|_| statuses.len() == 1)
            .map_or("", |s| s.as_str()),
        &since_ms.map_or_else(String::new, |ms| ms.to_string()),
    ]);
    let after = match text(call, "pageToken") {
        "" => None,
        t => Some(bound.decode(t).ok_or_else(|| {
            bad(
                "/pageToken",
                "a token of this listing: this one is another caller's, or was given with other filters",
            )
        })?),
    };
    let query = Query {
        scope: scope(&ctx.caller),
        agents,
        statuses,
        since_ms,
        context: (!context.is_empty()).then(|| Arc::from(context)),
        after,
        limit,
    };
    let page = state.ledger.list(&query).await?;
    let history = call.params.get("historyLength").and_then(Value::as_u64);
    let artifacts = call
        .params
        .get("includeArtifacts")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut tasks = Vec::with_capacity(page.tasks.len());
    // A key without `/` is a Clawpedia task of an agent that spoke Clawpedia before a reload:
    // not an A2A Task.
    for t in page
        .tasks
        .iter()
        .filter(|t| crate::protocol::a2a::split_ledger_key(&t.key).is_some())
    {
        let mut task = a2a_ledger::with_history(
            crate::protocol::json::parse(&t.record.task).map_err(ApiError::from)?,
            history,
        );
        if !artifacts {
            // §3.1.4: omitted entirely, not an empty list.
            if let Some(o) = task.as_object_mut() {
                o.remove("artifacts");
            }
        }
        tasks.push(task);
    }
    let mut out = Map::new();
    out.insert("tasks".into(), Value::Array(tasks));
    out.insert(
        "nextPageToken".into(),
        Value::from(
            page.next
                .as_ref()
                .map_or_else(String::new, |p| bound.encode(p)),
        ),
    );
    out.insert("pageSize".into(), json!(limit));
    out.insert("totalSize".into(), json!(page.total));
    Ok(Value::Object(out))
}

fn bad(at: &str, what: &str) -> Failure {
    A2aError::invalid_params(vec![Violation::new(
        at,
        "list",
        format!("{} is {what}", &at[1..]),
    )])
    .into()
}
