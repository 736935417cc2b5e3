//! The task routes, proxied to agents under the gateway's rules:
//!
//! create: content type → size → JSON → `input` against the card's input_schema → forward →
//! conformance of the reply → ledger. get / cancel: the ledger first (terminal tasks are answered
//! or refused without the agent), then the agent, then the ledger's verdict on what it said.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::http::response::Parts;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;

use super::body::Body;
use super::catalog::json_response;
use super::error::{ApiError, ApiResult, Code};
use super::Ctx;
use crate::config::Conformance;
use crate::ledger::{from_label, Record};
use crate::protocol::card::violations;
use crate::protocol::conform::{artifact_ids, check_artifact_list, check_task, TaskExpect};
use crate::protocol::task::{Refusal, Status, TaskRef, Verdict};
use crate::protocol::Violation;
use crate::registry::Agent;
use crate::upstream::{read_limited, strip_hop_by_hop, upstream_headers, UpstreamError};
use crate::State;

/// How long a client may take to send its request body.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Largest JSON answer read from an agent (Tasks and artifact lists; files are streamed).
const MAX_AGENT_JSON: usize = 8 << 20;

pub(super) fn ledger_down(e: crate::ledger::LedgerError) -> ApiError {
    ApiError::new(Code::Unavailable, e.to_string())
}

pub(super) fn unknown_agent(name: &str) -> ApiError {
    ApiError::new(Code::UnknownAgent, format!("no agent named {name:?}"))
}

/// The agent of a task route, checked against the ledger: under `/agents/{name}/` the task must
/// not belong to another agent; without a prefix the ledger decides.
async fn task_agent(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
) -> Result<(Arc<Agent>, Option<Record>), ApiError> {
    let record = state.ledger.get(task_id).await.map_err(ledger_down)?;
    let agent = match prefix {
        Some(name) => {
            let agent = state
                .registry
                .resolve(name)
                .ok_or_else(|| unknown_agent(name))?;
            if record.as_ref().is_some_and(|r| *r.agent != agent.cfg.name) {
                return Err(ApiError::new(
                    Code::TaskNotFound,
                    format!("agent {name:?} has no task {task_id}"),
                ));
            }
            agent
        }
        None => {
            let r = record.as_ref().ok_or_else(|| {
                ApiError::new(
                    Code::TaskNotFound,
                    format!("task {task_id} is not known to the gateway"),
                )
            })?;
            state
                .registry
                .by_name(&r.agent)
                .cloned()
                .ok_or_else(|| unknown_agent(&r.agent))?
        }
    };
    ctx.agent = Some(agent.clone());
    Ok((agent, record))
}

/// What of the client's request goes to the agent besides the body: its headers (filtered) and
/// its query string.
struct ClientSide<'a> {
    headers: &'a hyper::HeaderMap,
    query: Option<&'a str>,
}

impl<'a> ClientSide<'a> {
    fn of<B>(req: &'a Request<B>) -> Self {
        ClientSide {
            headers: req.headers(),
            query: req.uri().query(),
        }
    }
}

fn build_request(
    agent: &Agent,
    ctx: &Ctx,
    method: Method,
    path: &str,
    client: ClientSide<'_>,
    body: Bytes,
    reads_body: bool,
) -> Result<Request<Full<Bytes>>, ApiError> {
    let ClientSide {
        headers: client,
        query,
    } = client;
    // Without a good card the gateway cannot check what the agent says: it does not proxy.
    if let Err(why) = agent.card() {
        return Err(ApiError::new(
            Code::AgentUnavailable,
            format!("agent {:?} has no valid card: {why}", agent.cfg.name),
        ));
    }
    // The prefix stands for the agent's base URL: the query string goes along unchanged.
    let url = match query {
        Some(q) => format!("{}{path}?{q}", agent.cfg.url),
        None => format!("{}{path}", agent.cfg.url),
    };
    let mut req = Request::builder()
        .method(method)
        .uri(url)
        .body(Full::new(body))
        .map_err(|e| {
            ApiError::new(
                Code::AgentUnreachable,
                format!("cannot build the agent request: {e}"),
            )
        })?;
    *req.headers_mut() = upstream_headers(client, ctx.peer.ip(), &ctx.request_id, reads_body);
    Ok(req)
}

fn upstream_error(agent: &Agent, e: UpstreamError) -> ApiError {
    let name = &agent.cfg.name;
    match e {
        UpstreamError::Timeout => ApiError::new(
            Code::AgentTimeout,
            format!(
                "agent {name:?} did not answer within {} ms",
                agent.cfg.timeout.as_millis()
            ),
        ),
        UpstreamError::Unreachable(why) => ApiError::new(
            Code::AgentUnreachable,
            format!("agent {name:?} unreachable: {why}"),
        ),
        UpstreamError::TooLarge(n) => ApiError::new(
            Code::AgentProtocolViolation,
            format!("agent {name:?} answered with more than {n} bytes"),
        ),
    }
}

/// One buffered exchange with an agent, timed.
async fn exchange(
    state: &State,
    agent: &Agent,
    req: Request<Full<Bytes>>,
) -> Result<(Parts, Bytes), ApiError> {
    let started = std::time::Instant::now();
    let out = state
        .upstream
        .exchange(req, agent.cfg.timeout, MAX_AGENT_JSON)
        .await;
    state
        .metrics
        .upstream_seconds
        .with_label_values(&[agent.cfg.name.as_str()])
        .observe(started.elapsed().as_secs_f64());
    out.map_err(|e| upstream_error(agent, e))
}

/// A non-conformant agent answer: counted and logged; refused in `enforce` mode.
fn conformance(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    kind: &'static str,
    found: Vec<Violation>,
) -> Result<(), ApiError> {
    if found.is_empty() {
        return Ok(());
    }
    let mode = match agent.cfg.conformance {
        Conformance::Enforce => "enforce",
        Conformance::Report => "report",
    };
    state
        .metrics
        .protocol_violations
        .with_label_values(&[agent.cfg.name.as_str(), kind, mode])
        .inc();
    tracing::warn!(agent = %agent.cfg.name, request_id = ?ctx.request_id, kind, mode, first = %found[0].message, count = found.len(), "agent response violates A2A 1.0");
    match agent.cfg.conformance {
        Conformance::Report => Ok(()),
        Conformance::Enforce => Err(ApiError::new(
            Code::AgentProtocolViolation,
            format!(
                "agent {:?} answered outside the A2A 1.0 protocol ({kind})",
                agent.cfg.name
            ),
        )
        .with_details(found)),
    }
}

fn parse_agent_json(
    agent: &Agent,
    ctx: &Ctx,
    state: &State,
    kind: &'static str,
    body: &[u8],
) -> Result<Option<Value>, ApiError> {
    match serde_json::from_slice(body) {
        Ok(v) => Ok(Some(v)),
        Err(e) => conformance(
            state,
            agent,
            ctx,
            kind,
            vec![Violation::new(
                "",
                "type",
                format!("response is not JSON: {e}"),
            )],
        )
        .map(|()| None),
    }
}

/// The answer to pass on: the agent's status and headers (hop-by-hop removed), with `body`.
fn relay(mut parts: Parts, body: Bytes) -> Response<Body> {
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(header::CONTENT_LENGTH);
    // The gateway speaks its own HTTP version to its client, whatever the agent spoke.
    parts.version = hyper::Version::HTTP_11;
    Response::from_parts(parts, Body::full(body))
}

/// Relay the agent's head with a body of the gateway's choosing (the recorded task): headers
/// that describe the agent's body would now describe something else.
fn relay_substituted(mut parts: Parts, agent_body: &Bytes, body: Bytes) -> Response<Body> {
    if body != *agent_body {
        for h in [
            header::ETAG,
            header::LAST_MODIFIED,
            header::CONTENT_ENCODING,
            header::CONTENT_LOCATION,
        ] {
            parts.headers.remove(h);
        }
        parts.headers.remove("digest");
        parts.headers.remove("content-digest");
    }
    relay(parts, body)
}

/// Record what an agent said about a task, through the ledger's rule. Returns the body to pass on:
/// the agent's own if the ledger accepted it (or it repeats what is recorded), the recorded task
/// if it was refused; AGENT_PROTOCOL_VIOLATION if the task is recorded under another agent.
///
/// `asked` is the task the request was about (get, cancel): a document about another task is
/// refused in every conformance mode.
async fn record(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    asked: Option<&str>,
    doc: &Value,
    raw: &Bytes,
) -> Result<(Option<Verdict>, Bytes), ApiError> {
    let horizon = crate::protocol::time::now_ms() + crate::protocol::time::MAX_SKEW_MS;
    let task = TaskRef::from_json(doc).filter(|t| t.head.updated_ms <= horizon);
    let Some(task) = task else {
        // Cannot be judged (report mode let it through): it proves nothing, and it must not
        // contradict a record either, so where the task is recorded the record answers.
        if let Some(id) = asked {
            if let Some(r) = state.ledger.get(id).await.map_err(ledger_down)? {
                return Ok((None, r.task));
            }
        }
        return Ok((None, raw.clone()));
    };
    if let Some(want) = asked.filter(|id| *id != task.task_id) {
        // Whatever the conformance mode: an answer about another task is never passed on as
        // the answer about this one, nor recorded.
        state
            .metrics
            .protocol_violations
            .with_label_values(&[agent.cfg.name.as_str(), "task_identity", "enforce"])
            .inc();
        return Err(ApiError::new(
            Code::AgentProtocolViolation,
            format!(
                "asked about task {want}, agent {:?} answered about task {}",
                agent.cfg.name, task.task_id
            ),
        )
        .with_details(vec![Violation::new(
            "/task_id",
            "const",
            format!("expected {want}"),
        )]));
    }
    let name = agent.cfg.name.as_str();
    let applied = apply(state, agent, ctx, &task, raw).await?;
    match applied.verdict {
        Verdict::Refused(Refusal::ForeignAgent) => {
            // The standing record is another agent's task: it is no answer to this request, and
            // passing the agent's document on would let it speak for a task it does not own.
            Err(ApiError::new(
                Code::AgentProtocolViolation,
                format!("agent {name:?} answered about a task that belongs to another agent"),
            )
            .with_details(vec![Violation::new(
                "/task_id",
                Refusal::ForeignAgent.as_str(),
                format!("task {} is recorded under another agent", task.task_id),
            )]))
        }
        // A duplicate repeats the record's state and time; the record's document is the one
        // every later read returns, so it is the one to pass on now as well.
        Verdict::Refused(_) | Verdict::Duplicate => {
            Ok((Some(applied.verdict), applied.record.task))
        }
        v => Ok((Some(v), raw.clone())),
    }
}

/// The one way news about a task enters the ledger from the HTTP edge (agent answers and push
/// notifications alike): apply it, and count and log what the state machine decided.
pub(super) async fn apply(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    task: &TaskRef,
    raw: &Bytes,
) -> Result<crate::ledger::Applied, ApiError> {
    let name = agent.cfg.name.as_str();
    let applied = state
        .ledger
        .apply(name, &task.task_id, task.head, raw.clone())
        .await
        .map_err(ledger_down)?;
    let m = &state.metrics;
    match applied.verdict {
        Verdict::Refused(reason) => {
            m.refused.with_label_values(&[name, reason.as_str()]).inc();
            tracing::warn!(agent = name, task_id = %task.task_id, request_id = ?ctx.request_id, reason = reason.as_str(),
                owner = %applied.record.agent, recorded = applied.record.head.status.as_str(), offered = task.head.status.as_str(),
                "refused a task update that would break the state machine");
        }
        v => {
            if let Some(from) = from_label(v) {
                m.transitions
                    .with_label_values(&[from, task.head.status.as_str()])
                    .inc();
            }
        }
    }
    Ok(applied)
}

pub(super) fn is_json(h: &hyper::HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            let mime = ct.split(';').next().unwrap_or("").trim();
            mime.eq_ignore_ascii_case("application/json")
                || (mime.len() > 5 && mime[mime.len() - 5..].eq_ignore_ascii_case("+json"))
        })
}

/// Read a request body under the configured limit, refusing early on Content-Length.
pub(super) async fn read_body(
    state: &State,
    req: Request<Incoming>,
) -> Result<(hyper::http::request::Parts, Bytes), ApiError> {
    let limit = state.config.max_body_bytes;
    let (parts, body) = req.into_parts();
    let too_large = || {
        ApiError::new(
            Code::PayloadTooLarge,
            format!("request body exceeds {limit} bytes"),
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    // A client trickling its body must not hold the request (and its buffer) open forever.
    let read = tokio::time::timeout(BODY_TIMEOUT, read_limited(body, limit)).await;
    let Ok(read) = read else {
        return Err(ApiError::new(
            Code::RequestTimeout,
            format!(
                "request body not received within {} s",
                BODY_TIMEOUT.as_secs()
            ),
        ));
    };
    match read {
        Ok(b) => Ok((parts, b)),
        Err(UpstreamError::TooLarge(_)) => Err(too_large()),
        Err(e) => Err(ApiError::new(
            Code::InvalidRequest,
            format!("request body could not be read: {e:?}"),
        )),
    }
}

/// POST /tasks and POST /agents/{name}/tasks.
pub async fn create(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    req: Request<Incoming>,
) -> ApiResult {
    let mut agent = match prefix {
        Some(name) => Some(
            state
                .registry
                .resolve(name)
                .ok_or_else(|| unknown_agent(name))?,
        ),
        None => None,
    };
    ctx.agent = agent.clone();
    if !is_json(req.headers()) {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "POST /tasks takes Content-Type: application/json",
        ));
    }
    let (parts, raw) = read_body(state, req).await?;
    let doc: Value = serde_json::from_slice(&raw).map_err(|e| {
        ApiError::new(
            Code::InvalidJson,
            format!("request body is not valid JSON: {e}"),
        )
    })?;
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
        let a = state
            .registry
            .resolve(name)
            .ok_or_else(|| unknown_agent(name))?;
        ctx.agent = Some(a.clone());
        agent = Some(a);
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
    let card = agent.card().map_err(|why| {
        ApiError::new(
            Code::AgentUnavailable,
            format!("agent {:?} has no valid card: {why}", agent.cfg.name),
        )
    })?;
    if !card.input.is_valid(input) {
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
    let (res, body) = exchange(state, &agent, up).await?;
    if !res.status.is_success() {
        // The agent's own refusal (400, 409, 5xx...) is its answer to give.
        return Ok(relay(res, body));
    }
    if res.status != StatusCode::ACCEPTED {
        conformance(
            state,
            &agent,
            ctx,
            "create_status",
            vec![Violation::new(
                "",
                "status",
                format!("create answered {} instead of 202 Accepted", res.status),
            )],
        )?;
    }
    let Some(task) = parse_agent_json(&agent, ctx, state, "task", &body)? else {
        return Ok(relay(res, body));
    };
    let expect = TaskExpect {
        agent_id: Some(&card.agent_id),
        task_id: None,
        status: Some(Status::Submitted),
        output: card.output.as_ref(),
        now_ms: Some(crate::protocol::time::now_ms()),
    };
    conformance(state, &agent, ctx, "task", check_task(&task, expect))?;
    match record(state, &agent, ctx, None, &task, &body).await {
        Ok((_, out)) => Ok(relay_substituted(res, &body, out)),
        // The agent has created the task: a 503 now would make the client retry and create it
        // twice. Pass the 202 on, marked, and let a later GET or push record it.
        Err(e) if e.code == Code::Unavailable => {
            tracing::error!(agent = %agent.cfg.name, request_id = ?ctx.request_id, error = %e.message,
                "task created but not recorded: the ledger is unavailable");
            let mut out = relay(res, body);
            out.headers_mut()
                .insert("x-a2a-ledger", HeaderValue::from_static("unrecorded"));
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

/// GET /tasks/{id}: terminal tasks are answered from the ledger (final, and readable while the
/// agent is down); others are asked of the agent and judged.
pub async fn get(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    req: Request<Incoming>,
) -> ApiResult {
    let (agent, recorded) = task_agent(state, ctx, prefix, task_id).await?;
    if let Some(r) = recorded.filter(|r| r.head.status.is_terminal()) {
        let mut res = json_response(StatusCode::OK, r.task);
        res.headers_mut()
            .insert("x-a2a-source", HeaderValue::from_static("ledger"));
        return Ok(res);
    }
    let up = build_request(
        &agent,
        ctx,
        Method::GET,
        &format!("/tasks/{task_id}"),
        ClientSide::of(&req),
        Bytes::new(),
        true,
    )?;
    let (res, body) = exchange(state, &agent, up).await?;
    if res.status != StatusCode::OK {
        return Ok(relay(res, body));
    }
    let Some(task) = parse_agent_json(&agent, ctx, state, "task", &body)? else {
        return Ok(relay(res, body));
    };
    let card = agent.card().ok();
    let expect = TaskExpect {
        agent_id: card.as_ref().map(|c| c.agent_id.as_str()),
        task_id: Some(task_id),
        status: None,
        output: card.as_ref().and_then(|c| c.output.as_ref()),
        now_ms: Some(crate::protocol::time::now_ms()),
    };
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
    req: Request<Incoming>,
) -> ApiResult {
    let (agent, recorded) = task_agent(state, ctx, prefix, task_id).await?;
    if let Some(r) = recorded.filter(|r| r.head.status.is_terminal()) {
        return Err(terminal(task_id, r.head.status, &r.task));
    }
    let up = build_request(
        &agent,
        ctx,
        Method::POST,
        &format!("/tasks/{task_id}/cancel"),
        ClientSide::of(&req),
        Bytes::new(),
        true,
    )?;
    let (res, body) = exchange(state, &agent, up).await?;
    if res.status == StatusCode::CONFLICT {
        // The agent refuses: most likely the task ended before the gateway heard of it. Learn
        // its state, so the client gets the same 409 TASK_TERMINAL as for a recorded end.
        if let Some(err) = learn_terminal(state, &agent, ctx, task_id).await {
            return Err(err);
        }
        return Ok(relay(res, body));
    }
    // The spec leaves the body of a 202 open; when it is a Task, it is news about the task.
    let task = (res.status.is_success() && is_json(&res.headers))
        .then(|| serde_json::from_slice::<Value>(&body).ok())
        .flatten();
    let Some(task) = task.filter(|t| t.get("task_id").is_some()) else {
        return Ok(relay(res, body));
    };
    let card = agent.card().ok();
    let expect = TaskExpect {
        agent_id: card.as_ref().map(|c| c.agent_id.as_str()),
        task_id: Some(task_id),
        status: None,
        output: card.as_ref().and_then(|c| c.output.as_ref()),
        now_ms: Some(crate::protocol::time::now_ms()),
    };
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
    let up = build_request(
        agent,
        ctx,
        Method::GET,
        &format!("/tasks/{task_id}"),
        client,
        Bytes::new(),
        true,
    )
    .ok()?;
    let (res, body) = exchange(state, agent, up).await.ok()?;
    if res.status != StatusCode::OK {
        return None;
    }
    let task: Value = serde_json::from_slice(&body).ok()?;
    let card = agent.card().ok()?;
    let expect = TaskExpect {
        agent_id: Some(&card.agent_id),
        task_id: Some(task_id),
        status: None,
        output: card.output.as_ref(),
        now_ms: Some(crate::protocol::time::now_ms()),
    };
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

/// GET /tasks/{id}/artifacts: checked, and each artifact id remembered for the agent-less
/// `/artifacts/{id}/content`.
pub async fn artifacts(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    req: Request<Incoming>,
) -> ApiResult {
    let (agent, _) = task_agent(state, ctx, prefix, task_id).await?;
    let up = build_request(
        &agent,
        ctx,
        Method::GET,
        &format!("/tasks/{task_id}/artifacts"),
        ClientSide::of(&req),
        Bytes::new(),
        true,
    )?;
    let (res, body) = exchange(state, &agent, up).await?;
    if res.status != StatusCode::OK {
        return Ok(relay(res, body));
    }
    let Some(list) = parse_agent_json(&agent, ctx, state, "artifacts", &body)? else {
        return Ok(relay(res, body));
    };
    conformance(
        state,
        &agent,
        ctx,
        "artifacts",
        check_artifact_list(&list, task_id),
    )?;
    let ids: Vec<String> = artifact_ids(&list)
        .filter(|id| super::valid_id(id))
        .map(str::to_owned)
        .collect();
    if !ids.is_empty() {
        state
            .ledger
            .note_artifacts(&agent.cfg.name, ids)
            .await
            .map_err(ledger_down)?;
    }
    Ok(relay(res, body))
}

/// A streamed pass-through: the agent's status, headers and body, never buffered whole. The
/// response head is under the agent's timeout; the body is cut after `idle` without a frame.
async fn pass_through(
    state: &State,
    agent: &Agent,
    up: Request<Full<Bytes>>,
    idle: std::time::Duration,
) -> ApiResult {
    let started = std::time::Instant::now();
    let res = state.upstream.send(up, agent.cfg.timeout).await;
    state
        .metrics
        .upstream_seconds
        .with_label_values(&[agent.cfg.name.as_str()])
        .observe(started.elapsed().as_secs_f64());
    let (mut parts, body) = res.map_err(|e| upstream_error(agent, e))?.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    parts.version = hyper::Version::HTTP_11;
    Ok(Response::from_parts(parts, Body::relayed(body, idle)))
}

/// GET /artifacts/{id}/content: 302s and file bodies pass through with their Content-Type.
pub async fn content(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    artifact_id: &str,
    req: Request<Incoming>,
) -> ApiResult {
    let agent = match prefix {
        Some(name) => state
            .registry
            .resolve(name)
            .ok_or_else(|| unknown_agent(name))?,
        None => {
            let name = state.ledger.artifact_agent(artifact_id).await.map_err(ledger_down)?.ok_or_else(|| {
                ApiError::new(Code::ArtifactNotFound, format!("artifact {artifact_id} is not known to the gateway; list its task's artifacts first, or use /agents/{{name}}/artifacts/{artifact_id}/content"))
            })?;
            state
                .registry
                .by_name(&name)
                .cloned()
                .ok_or_else(|| unknown_agent(&name))?
        }
    };
    ctx.agent = Some(agent.clone());
    let up = build_request(
        &agent,
        ctx,
        Method::GET,
        &format!("/artifacts/{artifact_id}/content"),
        ClientSide::of(&req),
        Bytes::new(),
        false,
    )?;
    // A file body: the agent's own timeout is the longest it may go quiet mid-body.
    pass_through(state, &agent, up, agent.cfg.timeout).await
}

/// GET /tasks/{id}/stream: a subscription to the task's shared stream (see `crate::stream`).
/// A task the ledger knows to be over answers 204, so an EventSource stops reconnecting.
pub async fn stream(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    req: Request<Incoming>,
) -> ApiResult {
    stream_of(
        state,
        ctx,
        prefix,
        task_id,
        req.headers(),
        req.uri(),
        req.version(),
    )
    .await
}

/// [`stream`] from the request's head alone (the lean HTTP/1 path of `sse_conn` has no hyper
/// request).
pub(crate) async fn stream_of(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    headers: &hyper::HeaderMap,
    uri: &hyper::Uri,
    version: hyper::Version,
) -> ApiResult {
    let (agent, record) = task_agent(state, ctx, prefix, task_id).await?;
    if record.is_some_and(|r| r.head.status.is_terminal()) {
        return Ok(no_more_events());
    }
    if let Err(why) = agent.card() {
        return Err(ApiError::new(
            Code::AgentUnavailable,
            format!("agent {:?} has no valid card: {why}", agent.cfg.name),
        ));
    }
    let last_id = last_event_id(headers, uri);
    // Ending the connection cuts only this subscriber over HTTP/1; over HTTP/2 it would cut
    // every stream multiplexed with it, so there a slow subscriber is cut when next polled.
    let kill = (version < hyper::Version::HTTP_2).then(|| ctx.kill.clone());
    match state
        .hub
        .subscribe(&agent, &state.upstream, task_id, last_id.as_deref(), kill)
        .await?
    {
        None => Ok(no_more_events()),
        Some(sub) => Ok(event_stream(Body::Events(Box::new(sub)))),
    }
}

/// `Last-Event-ID`, or the `last_event_id` query parameter (a browser's EventSource cannot set
/// the header on its first request).
fn last_event_id(headers: &hyper::HeaderMap, uri: &hyper::Uri) -> Option<String> {
    if let Some(v) = headers.get("last-event-id").and_then(|v| v.to_str().ok()) {
        return Some(v.to_owned());
    }
    uri.query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("last_event_id="))
            .filter(|v| v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
            .map(str::to_owned)
    })
}

fn no_more_events() -> Response<Body> {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::NO_CONTENT;
    res
}

/// The headers of every event stream the gateway serves: no caching, no proxy buffering, and
/// no compression (a compressor would hold events back).
pub(super) fn event_stream(body: Body) -> Response<Body> {
    let mut res = Response::new(body);
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}
