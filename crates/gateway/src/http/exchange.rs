//! The agent exchange, which every handler that talks to an agent goes through: resolve the
//! task's agent, build the request, exchange it (within the agent's limits, timed, bounded),
//! check the answer's conformance, record what it says about the task through the ledger's
//! rule, and relay it.
//!
//! The handlers (`handlers/`) decide what to ask and what to answer; this module is how asking
//! and recording are done, so every route does them the same way.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header;
use hyper::http::response::Parts;
use hyper::{Method, Request, Response};
use serde_json::Value;

use super::admission;
use super::body::Body;
use super::context::Ctx;
use super::cors;
use super::error::{ApiError, ApiResult, Code};
use crate::config::Conformance;
use crate::ledger::{apply_counted, Applied, Origin, Record};
use crate::limits::{AgentPolicy, Pass};
use crate::protocol::json::{self, JsonError};
use crate::protocol::task::{Refusal, TaskRef, Verdict};
use crate::protocol::Violation;
use crate::registry::Agent;
use crate::telemetry::{self, semconv, Span};
use crate::upstream::{strip_hop_by_hop, upstream_headers, MAX_AGENT_JSON};
use crate::State;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;

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
            ctx.agent = Some(agent.clone());
            admission::agent(state, ctx, &agent)?;
            agent
        }
    };
    ctx.agent = Some(agent.clone());
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

/// What of the client's request goes to the agent besides the body: its headers (filtered) and
/// its query string.
pub struct ClientSide<'a> {
    /// The client's headers (filtered on the way: hop-by-hop and gateway credentials go).
    pub headers: &'a hyper::HeaderMap,
    /// The query string, passed on unchanged.
    pub query: Option<&'a str>,
}

impl<'a> ClientSide<'a> {
    /// The client side of `req`.
    pub fn of<B>(req: &'a Request<B>) -> Self {
        ClientSide {
            headers: req.headers(),
            query: req.uri().query(),
        }
    }
}

/// The request to send to `agent`: refused with AGENT_UNAVAILABLE while the agent has no
/// valid card, since without one the gateway cannot check what the agent says.
pub fn build_request(
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
    agent.card()?;
    // The prefix stands for the agent's base URL: the query string goes along, less the
    // gateway's own credential.
    let query = query.map(admission::without_access_token);
    let url = match query.as_deref() {
        Some("") | None => format!("{}{path}", agent.cfg.url),
        Some(q) => format!("{}{path}?{q}", agent.cfg.url),
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
    let headers = req.headers_mut();
    *headers = upstream_headers(client, &ctx.peer_ip, ctx.https, &ctx.request_id, reads_body);
    agent.authorize(headers);
    Ok(req)
}

/// Ask `agent` for `path` with no body, on behalf of the client's `client` side: build the
/// request and exchange it.
pub async fn ask(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    method: Method,
    path: &str,
    client: ClientSide<'_>,
) -> Result<(Parts, Bytes), ApiError> {
    let up = build_request(agent, ctx, method, path, client, Bytes::new(), true)?;
    exchange(state, agent, ctx, up).await
}

/// The agent's own limits, checked right before it is called (`limits::agent`): a pass to
/// hold for as long as the exchange lasts, to be told its outcome; or, at once and without a
/// call, 503 AGENT_UNAVAILABLE while the agent is ejected, 503 AGENT_BUSY past its
/// `max_in_flight`. Here rather than in admission: only requests that would reach the agent
/// count, after every check of their own (a refused 422 holds no pass, nor is it a probe).
pub fn admit_agent(state: &State, agent: &Agent) -> Result<Pass, ApiError> {
    agent
        .limits
        .admit(AgentPolicy::of(&agent.cfg), &state.metrics, &agent.cfg.name)
        .map_err(ApiError::from)
}

/// One buffered exchange with an agent, timed, within the agent's limits.
pub async fn exchange(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    mut req: Request<Full<Bytes>>,
) -> Result<(Parts, Bytes), ApiError> {
    let mut pass = admit_agent(state, agent)?;
    let span = exchange_span(ctx, agent, &mut req);
    let out = state
        .upstream
        .exchange(req, agent.cfg.timeout, MAX_AGENT_JSON)
        .await;
    exchange_answered(span.as_ref(), &out, |(parts, _)| parts.status.as_u16());
    pass.report(out.as_ref().map(|(parts, _)| parts.status));
    out.map_err(|e| e.at(&agent.cfg.name).into())
}

/// A non-conformant agent answer: counted and logged; refused in `enforce` mode.
pub fn conformance(
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

/// The agent's answer as one JSON document (`protocol::json::parse`). An answer that is not JSON,
/// or names a key twice, is a conformance failure: 502 in enforce mode; `None` in report mode,
/// where the answer is relayed as it is and not recorded (the gateway records no document it
/// cannot read one way).
pub fn parse_agent_json(
    agent: &Agent,
    ctx: &Ctx,
    state: &State,
    kind: &'static str,
    body: &[u8],
) -> Result<Option<Value>, ApiError> {
    match json::parse(body) {
        Ok(v) => Ok(Some(v)),
        Err(e) => conformance(state, agent, ctx, kind, vec![json_violation(&e)]).map(|()| None),
    }
}

/// What is wrong with an agent's answer that is not one JSON document, as a violation.
pub fn json_violation(e: &JsonError) -> Violation {
    match e {
        JsonError::Syntax(_) => Violation::new("", "type", format!("response is not JSON: {e}")),
        JsonError::NumberOutOfRange { .. } => {
            Violation::new("", "number", format!("response has a {e}"))
        }
        JsonError::DuplicateKey { .. } => {
            Violation::new(e.pointer(), "duplicate_key", format!("response has a {e}"))
        }
    }
}

/// The answer to pass on: the agent's status and headers (hop-by-hop removed), with `body`.
pub fn relay(mut parts: Parts, body: Bytes) -> Response<Body> {
    strip_hop_by_hop(&mut parts.headers);
    cors::strip_agents(&mut parts.headers);
    parts.headers.remove(header::CONTENT_LENGTH);
    // The gateway speaks its own HTTP version to its client, whatever the agent spoke.
    parts.version = hyper::Version::HTTP_11;
    Response::from_parts(parts, Body::full(body))
}

/// Relay the agent's head with a body of the gateway's choosing (the recorded task): headers
/// that describe the agent's body would now describe something else.
pub fn relay_substituted(mut parts: Parts, agent_body: &Bytes, body: Bytes) -> Response<Body> {
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
pub async fn record(
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
            if let Some(r) = state.ledger.get(id).await? {
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
    // The answer to a create (nothing asked about) names the task the caller now owns.
    let owner = if asked.is_none() {
        ctx.caller.owner().map(|o| &**o)
    } else {
        None
    };
    let applied = apply(state, agent, ctx, &task, raw, owner).await?;
    if let (Some(me), Some(holder)) = (owner, applied.record.owner.as_deref()) {
        if me != holder {
            // A create answered with a task another client created (an agent replaying an
            // answer, say): never handed to this client, whatever the verdict.
            state
                .metrics
                .protocol_violations
                .with_label_values(&[name, "task_owner", "enforce"])
                .inc();
            return Err(ApiError::new(
                Code::AgentProtocolViolation,
                format!("agent {name:?} answered a create with a task another client created"),
            )
            .with_details(vec![Violation::new(
                "/task_id",
                "task_owner",
                format!("task {} belongs to another client", task.task_id),
            )]));
        }
    }
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
/// notifications alike): apply it, and count and log what the state machine decided. `owner`:
/// the client whose create this answers.
pub async fn apply(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    task: &TaskRef,
    raw: &Bytes,
    owner: Option<&str>,
) -> Result<Applied, ApiError> {
    let request_id = ctx.request_id.to_str().ok();
    let span = ctx.trace.as_ref().map(|t| {
        // A create learns its task id here: the request's span gets it too.
        t.set(KeyValue::new(telemetry::TASK_ID, task.task_id.clone()));
        t.child(
            "ledger apply",
            SpanKind::Internal,
            vec![
                KeyValue::new(telemetry::TASK_ID, task.task_id.clone()),
                KeyValue::new(telemetry::AGENT, agent.cfg.name.clone()),
            ],
        )
    });
    // The deliveries of this change are the apply's children.
    let stored = span.as_ref().map(|s| s.stored());
    let applied = apply_counted(
        state.ledger.as_ref(),
        &state.metrics,
        &agent.cfg.name,
        task,
        raw.clone(),
        owner,
        Origin {
            request_id,
            trace: stored.as_deref(),
        },
    )
    .await;
    if let Some(span) = &span {
        match &applied {
            Ok(a) => span.set(KeyValue::new(telemetry::VERDICT, a.verdict.label())),
            Err(e) => span.fail(e.to_string()),
        }
    }
    Ok(applied?)
}

/// The client span of one exchange with `agent`, when the request is traced; its context goes
/// to the agent as `traceparent` (and `tracestate`) in place of any the client sent, so the
/// agent's work is this exchange's child.
pub fn exchange_span(ctx: &Ctx, agent: &Agent, req: &mut Request<Full<Bytes>>) -> Option<Span> {
    let trace = ctx.trace.as_ref()?;
    let uri = req.uri();
    let mut attributes = vec![
        KeyValue::new(
            semconv::HTTP_REQUEST_METHOD,
            req.method().as_str().to_owned(),
        ),
        KeyValue::new(semconv::URL_PATH, uri.path().to_owned()),
        KeyValue::new(telemetry::AGENT, agent.cfg.name.clone()),
    ];
    if let Some(host) = uri.host() {
        attributes.push(KeyValue::new(semconv::SERVER_ADDRESS, host.to_owned()));
    }
    if let Some(port) = uri.port_u16() {
        attributes.push(KeyValue::new(semconv::SERVER_PORT, i64::from(port)));
    }
    let span = trace.child("agent exchange", SpanKind::Client, attributes);
    span.inject(req.headers_mut());
    Some(span)
}

/// What an exchange got, on its span.
pub fn exchange_answered<T>(
    span: Option<&Span>,
    out: &Result<T, crate::upstream::UpstreamError>,
    status: impl Fn(&T) -> u16,
) {
    if let Some(span) = span {
        match out {
            Ok(r) => telemetry::answered(span, status(r), false),
            Err(e) => span.fail(e.to_string()),
        }
    }
}

/// A streamed pass-through: the agent's status, headers and body, never buffered whole. The
/// response head is under the agent's timeout; the body is cut after `idle` without a frame.
/// The exchange counts against the agent's `max_in_flight` until the body ends or is dropped.
pub async fn pass_through(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    mut up: Request<Full<Bytes>>,
    idle: std::time::Duration,
) -> ApiResult {
    let mut pass = admit_agent(state, agent)?;
    let span = exchange_span(ctx, agent, &mut up);
    let res = state.upstream.send(up, agent.cfg.timeout).await;
    // The span covers the exchange up to the answer's head; the body streams after it.
    exchange_answered(span.as_ref(), &res, |r| r.status().as_u16());
    drop(span);
    pass.report(res.as_ref().map(|r| r.status()));
    let (mut parts, body) = res.map_err(|e| e.at(&agent.cfg.name))?.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    cors::strip_agents(&mut parts.headers);
    parts.version = hyper::Version::HTTP_11;
    Ok(Response::from_parts(
        parts,
        Body::relayed(body, idle, Some(pass)),
    ))
}
