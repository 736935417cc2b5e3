//! The task routes: create, get, cancel.
//!
//! create: content type → `Idempotency-Key` → size → JSON → `input` against the card's
//! input_schema → the key claimed → forward (`detach`, which outlives a timeout) → conformance of
//! the reply → ledger → the key's answer stored. get / cancel: the ledger first (terminal tasks are answered
//! or refused without the agent), then the agent, then the ledger's verdict on what it said.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::http::response::Parts;
use hyper::{Method, StatusCode};
use serde_json::Value;

use crate::http::context::Ctx;
use crate::http::detach;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::{
    ask, build_request, conformance, json_violation, named_agent, parse_agent_json, record, relay,
    relay_substituted, task_agent, ClientSide,
};
use crate::http::idempotency::{self, Claimed};
use crate::http::request::{is_json, read_body, Request};
use crate::http::response;
use crate::ledger;
use crate::protocol::card::{violations, Card};
use crate::protocol::conform::{check_task, TaskExpect};
use crate::protocol::json::{self, JsonError};
use crate::protocol::task::{Refusal, Status, Verdict};
use crate::protocol::time::now_ms;
use crate::protocol::Violation;
use crate::registry::Agent;
use crate::telemetry;
use crate::State;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;

/// POST /tasks and POST /agents/{name}/tasks.
pub async fn create(
    state: &Arc<State>,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    req: Request,
) -> ApiResult {
    let mut agent = prefix
        .map(|name| named_agent(state, ctx, name))
        .transpose()?;
    if !is_json(req.headers()) {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "POST /tasks takes Content-Type: application/json",
        ));
    }
    let idempotency_key = idempotency::key_of(req.headers())?;
    let (parts, raw) = read_body(req, state.config.max_body_bytes).await?;
    // One document: what is validated below is what the agent reads (duplicate keys refused).
    let doc = json::parse(&raw)?;
    let Value::Object(obj) = &doc else {
        return Err(ApiError::new(
            Code::InvalidRequest,
            "request body must be a JSON object with an `input` object",
        ));
    };
    if agent.is_none() {
        let name = obj.get("agent").and_then(Value::as_str).ok_or_else(|| {
            ApiError::new(
                Code::InvalidRequest,
                "POST /tasks needs `agent` (a route name or agent_id) and `input`",
            )
        })?;
        agent = Some(named_agent(state, ctx, name)?);
    }
    let Some(agent) = agent else {
        return Err(ApiError::new(Code::UnknownAgent, "no agent"));
    };
    let input = match obj.get("input") {
        Some(v @ Value::Object(_)) => v,
        _ => {
            return Err(ApiError::new(
                Code::InvalidRequest,
                "request body must have an `input` object",
            ))
        }
    };
    let card = agent.card()?;
    let span = ctx.trace.as_ref().map(|t| {
        t.child(
            "validate input",
            SpanKind::Internal,
            vec![KeyValue::new(telemetry::AGENT, agent.cfg.name.clone())],
        )
    });
    let valid = card.input.is_valid(input);
    if let Some(span) = span {
        if !valid {
            span.fail("input does not match the agent's input_schema");
        }
    }
    if !valid {
        state
            .metrics
            .validation_failures
            .with_label_values(&[agent.cfg.name.as_str()])
            .inc();
        let found = violations(&card.input, input, "/input");
        return Err(ApiError::new(
            Code::InputSchemaViolation,
            format!(
                "input does not match the input_schema of agent {:?} ({} violation(s))",
                agent.cfg.name,
                found.len()
            ),
        )
        .with_details(found));
    }
    if !state.ledger.available() {
        // Known down (a call just failed on a broken connection, or the store has not
        // connected yet): refused before the agent is called, so the agent never holds a task
        // the gateway does not know. The state of a create already past this point is settled
        // by `created` (x-a2a-ledger: pending).
        return Err(ApiError::new(
            Code::Unavailable,
            "the task ledger (Redis) is unreachable: the create was not sent to the agent; retry shortly",
        )
        .with_header(header::RETRY_AFTER, HeaderValue::from_static("1")));
    }
    // Only a keyed create is compared with an earlier one.
    let fingerprint = idempotency_key
        .is_some()
        .then(|| ledger::idempotency::fingerprint(&raw));
    // The agent gets exactly what the client sent, except that the agent-less form's routing
    // field is the gateway's business.
    let forward = if prefix.is_some() {
        raw
    } else {
        let body = serde_json::to_vec(&serde_json::json!({ "input": input }))
            .map_err(|e| ApiError::new(Code::InvalidRequest, e.to_string()))?;
        Bytes::from(body)
    };
    let mut up = build_request(
        &agent,
        ctx,
        Method::POST,
        "/tasks",
        ClientSide {
            headers: &parts.headers,
            query: parts.uri.query(),
        },
        forward,
        true,
    )?;
    up.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let (Some(client), Some(key)) = (ctx.caller.owner(), idempotency_key.as_deref()) {
        // An agent that honours Idempotency-Key itself must not see two clients' equal keys
        // as one: it gets a key of this client's own, the same on every retry.
        up.headers_mut().insert(
            idempotency::IDEMPOTENCY_KEY,
            idempotency::agent_key(client, key),
        );
    }
    // A key is claimed last, after every check of the request: a refused request holds none.
    let held = match idempotency_key.zip(fingerprint) {
        None => None,
        Some((key, fingerprint)) => {
            let timeout = agent.cfg.timeout;
            let scope = idempotency::scope(&agent.cfg.name, &ctx.caller);
            match idempotency::claim(state, &agent.cfg.name, scope, key, fingerprint, timeout)
                .await?
            {
                Claimed::Held(held) => Some(held),
                Claimed::Answered(res) => return Ok(res),
            }
        }
    };
    detach::create(state, ctx, agent, card, up, held).await
}

/// The answer to a create, from the agent's: its refusal relayed, its Task checked and recorded.
/// Called by [`detach::create`], in time or late.
pub(crate) async fn created(
    state: &Arc<State>,
    agent: &Arc<Agent>,
    ctx: &Ctx,
    card: &Card,
    res: Parts,
    body: Bytes,
) -> ApiResult {
    if !res.status.is_success() {
        // The agent's own refusal (400, 409, 5xx...) is its answer to give.
        return Ok(relay(res, body));
    }
    if res.status != StatusCode::ACCEPTED {
        conformance(
            state,
            agent,
            ctx,
            "create_status",
            vec![Violation::new(
                "",
                "status",
                format!("create answered {} instead of 202 Accepted", res.status),
            )],
        )?;
    }
    let Some(task) = parse_agent_json(agent, ctx, state, "task", &body)? else {
        return Ok(relay(res, body));
    };
    let expect = TaskExpect {
        status: Some(Status::Submitted),
        ..TaskExpect::under(Some(card), None, now_ms())
    };
    conformance(state, agent, ctx, "task", check_task(&task, expect))?;
    match record(state, agent, ctx, None, &task, &body).await {
        Ok((_, out)) => Ok(relay_substituted(res, &body, out)),
        // The agent has created the task: a 503 now would make the client retry and create it
        // twice. Pass the 202 on, marked, and record the task in the background as soon as
        // the ledger answers (its webhooks follow from that record).
        Err(e) if e.code == Code::Unavailable => {
            let pending = record_later(state, agent, ctx, task, body.clone());
            tracing::warn!(agent = %agent.cfg.name, request_id = ?ctx.request_id, error = %e.message, pending,
                "task created but not recorded yet: the ledger is unavailable");
            let mut out = relay(res, body);
            out.headers_mut().insert(
                "x-a2a-ledger",
                HeaderValue::from_static(if pending { "pending" } else { "unrecorded" }),
            );
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

/// Record a created task whose ledger write failed, in a task of its own, retrying with
/// backoff until the ledger answers, for up to `late_answer_secs` (the late-answer path's
/// bound, and its permits: at most `MAX_LATE_ANSWERS` at once). `false` if it cannot be awaited
/// (late answers off, or too many awaited): the task is then recorded only if a later push or
/// read brings it.
fn record_later(
    state: &Arc<State>,
    agent: &Arc<Agent>,
    ctx: &Ctx,
    task: Value,
    body: Bytes,
) -> bool {
    let name = agent.cfg.name.as_str();
    let count = |outcome: &str| {
        state
            .metrics
            .pending_records
            .with_label_values(&[name, outcome])
            .inc();
    };
    let within = state.config.late_answer;
    let permit = if within.is_zero() {
        None
    } else {
        state.late_answers.clone().try_acquire_owned().ok()
    };
    let Some(permit) = permit else {
        count("dropped");
        return false;
    };
    let (state, agent, ctx) = (state.clone(), agent.clone(), ctx.detached());
    tokio::spawn(async move {
        let deadline = std::time::Instant::now() + within;
        let mut wait = std::time::Duration::from_millis(100);
        let name = agent.cfg.name.as_str();
        let outcome = loop {
            tokio::time::sleep(wait).await;
            match record(&state, &agent, &ctx, None, &task, &body).await {
                Ok(_) => break "recorded",
                Err(e) if e.code == Code::Unavailable && std::time::Instant::now() < deadline => {
                    wait = (wait * 2).min(std::time::Duration::from_secs(2));
                }
                Err(e) => {
                    tracing::error!(agent = %name, request_id = ?ctx.request_id, error = %e.message,
                        "a created task could not be recorded within late_answer_secs: the gateway does not know it until a push or read brings it");
                    break "lost";
                }
            }
        };
        if outcome == "recorded" {
            tracing::info!(agent = %name, request_id = ?ctx.request_id, "a created task was recorded once the ledger answered");
        }
        state
            .metrics
            .pending_records
            .with_label_values(&[name, outcome])
            .inc();
        drop(permit);
    });
    true
}

/// GET /tasks/{id}: terminal tasks are answered from the ledger (final, and readable while the
/// agent is down); others are asked of the agent and judged.
pub async fn get(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    req: Request,
) -> ApiResult {
    let (agent, recorded) = task_agent(state, ctx, prefix, task_id).await?;
    if let Some(r) = recorded.filter(|r| r.head.status.is_terminal()) {
        let mut res = response::json(StatusCode::OK, r.task);
        res.headers_mut()
            .insert("x-a2a-source", HeaderValue::from_static("ledger"));
        return Ok(res);
    }
    let (res, body) = ask(
        state,
        &agent,
        ctx,
        Method::GET,
        &format!("/tasks/{task_id}"),
        ClientSide::of(&req),
    )
    .await?;
    if res.status != StatusCode::OK {
        return Ok(relay(res, body));
    }
    let Some(task) = parse_agent_json(&agent, ctx, state, "task", &body)? else {
        return Ok(relay(res, body));
    };
    let card = agent.card().ok();
    let expect = TaskExpect::under(card.as_deref(), Some(task_id), now_ms());
    conformance(state, &agent, ctx, "task", check_task(&task, expect))?;
    let (_, out) = record(state, &agent, ctx, Some(task_id), &task, &body).await?;
    Ok(relay_substituted(res, &body, out))
}

/// POST /tasks/{id}/cancel: a terminal task is refused with 409 without contacting the agent.
pub async fn cancel(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    req: Request,
) -> ApiResult {
    let (agent, recorded) = task_agent(state, ctx, prefix, task_id).await?;
    if let Some(r) = recorded.filter(|r| r.head.status.is_terminal()) {
        return Err(terminal(task_id, r.head.status, &r.task));
    }
    let (res, body) = ask(
        state,
        &agent,
        ctx,
        Method::POST,
        &format!("/tasks/{task_id}/cancel"),
        ClientSide::of(&req),
    )
    .await?;
    if res.status == StatusCode::CONFLICT {
        // The agent refuses: most likely the task ended before the gateway heard of it. Learn
        // its state, so the client gets the same 409 TASK_TERMINAL as for a recorded end.
        if let Some(err) = learn_terminal(state, &agent, ctx, task_id).await {
            return Err(err);
        }
        return Ok(relay(res, body));
    }
    // The spec leaves the body of a 202 open; when it is a Task, it is news about the task. A
    // JSON body the gateway cannot judge (a duplicate key, a number beyond f64) is a violation,
    // and never recorded.
    let task = if res.status.is_success() && is_json(&res.headers) {
        match json::parse(&body) {
            Ok(v) => Some(v),
            Err(JsonError::Syntax(_)) => None,
            Err(e) => {
                conformance(state, &agent, ctx, "task", vec![json_violation(&e)])?;
                None
            }
        }
    } else {
        None
    };
    let Some(task) = task.filter(|t| t.get("task_id").is_some()) else {
        return Ok(relay(res, body));
    };
    let card = agent.card().ok();
    let expect = TaskExpect::under(card.as_deref(), Some(task_id), now_ms());
    conformance(state, &agent, ctx, "task", check_task(&task, expect))?;
    match record(state, &agent, ctx, Some(task_id), &task, &body).await? {
        // The task ended before the cancel took effect (the agent may say CANCELLED, the ledger
        // already holds COMPLETED): the cancel did nothing, say so as for any terminal task.
        (Some(Verdict::Refused(Refusal::Terminal)), recorded) => {
            let status = serde_json::from_slice::<Value>(&recorded)
                .ok()
                .and_then(|t| t["status"].as_str().and_then(Status::parse))
                .unwrap_or(Status::Cancelled);
            Err(terminal(task_id, status, &recorded))
        }
        (_, out) => Ok(relay_substituted(res, &body, out)),
    }
}

/// Ask the agent for the task and record the answer; `Some(409 TASK_TERMINAL)` if the task has
/// ended. Any failure on the way means "not learned": the caller keeps the agent's own answer.
async fn learn_terminal(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    task_id: &str,
) -> Option<ApiError> {
    let no_client = hyper::HeaderMap::new();
    let client = ClientSide {
        headers: &no_client,
        query: None,
    };
    let path = format!("/tasks/{task_id}");
    let (res, body) = ask(state, agent, ctx, Method::GET, &path, client)
        .await
        .ok()?;
    if res.status != StatusCode::OK {
        return None;
    }
    let task = json::parse(&body).ok()?;
    let card = agent.card().ok()?;
    let expect = TaskExpect::under(Some(&card), Some(task_id), now_ms());
    if !check_task(&task, expect).is_empty() {
        return None;
    }
    let (_, recorded) = record(state, agent, ctx, Some(task_id), &task, &body)
        .await
        .ok()?;
    let status = serde_json::from_slice::<Value>(&recorded).ok()?["status"]
        .as_str()
        .and_then(Status::parse)?;
    status
        .is_terminal()
        .then(|| terminal(task_id, status, &recorded))
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
