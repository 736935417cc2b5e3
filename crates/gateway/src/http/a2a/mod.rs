//! The official A2A 1.0 routes (a2aproject; the proto is normative), for agents configured with
//! `protocol = "a2a"`. For an agent named `echo`:
//!
//! - `GET /agents/echo/.well-known/agent-card.json` (and `/agents/echo/agent-card.json`): the
//!   served card ([`card`]);
//! - `POST /agents/echo/jsonrpc`: the JSON-RPC binding;
//! - `GET /agents/echo/files/{fileId}`: a file the agent named on its own origin ([`files`]);
//! - the HTTP+JSON binding's routes under `/agents/echo/` (`message:send`, `tasks/{id}`...);
//! - `POST /a2a`: the fleet's JSON-RPC endpoint ([`fleet`]), `params.tenant` naming the agent.
//!
//! Each request goes: the agent and the caller's right to it → the content type and the body
//! (bounded) → the binding's envelope read into one `protocol::a2a::Call` (proto field names
//! read as JSON names, `protocol::a2a::spelling`) → `A2A-Version` → the call checked against
//! the proto → [`ops::run`] (the ledger, the agent) → its neutral answer reframed in the
//! client's binding ([`frame`]) → counted. A client may use either binding whatever the
//! agent's: [`agent`] speaks the agent's.

pub mod agent;
pub mod agent_stream;
pub mod card;
pub mod feed;
pub mod files;
pub mod follow;
pub mod frame;
pub mod inline;
pub mod ledger;
pub mod list;
pub mod ops;
pub mod poll;
pub mod push;
pub mod send;
pub mod stream;

use std::sync::Arc;

use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use self::frame::{json_response, reframe, Front};
use crate::config::Protocol;
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::named_agent;
use crate::http::request::{read_body, Request};
use crate::protocol::a2a::check::check_request;
use crate::protocol::a2a::jsonrpc;
use crate::protocol::a2a::{rest, version, A2aError, Call, ErrorKind, Method, VERSION_HEADER};
use crate::registry::Agent;
use crate::state::State;

/// A route's own error before a call is read (the caller's right, the body's size or type,
/// an unknown path), framed for the route: kept under its HTTP status (see `frame::refusal`).
pub fn refusal(e: ApiError, jsonrpc: bool) -> Response<Body> {
    frame::refusal(e, jsonrpc)
}

/// Anything under `/agents/{name}/` of an A2A agent.
pub async fn serve(
    state: &Arc<State>,
    ctx: &mut Ctx,
    name: &str,
    tail: &str,
    req: Request,
) -> ApiResult {
    let agent = named_agent(state, ctx, name)?;
    let verb = req.method().clone();
    if card::is_card(tail) {
        if verb != hyper::Method::GET && verb != hyper::Method::HEAD {
            return Err(not_allowed(&["GET"]));
        }
        return card::served(state, ctx, &agent, &req);
    }
    if let Some(id) = tail.strip_prefix("files/") {
        if verb != hyper::Method::GET && verb != hyper::Method::HEAD {
            return Err(not_allowed(&["GET"]));
        }
        return files::serve(state, ctx, &agent, id, &req).await;
    }
    if tail == "jsonrpc" {
        if verb != hyper::Method::POST {
            return Err(not_allowed(&["POST"]));
        }
        return json_rpc(state, ctx, &agent, req).await;
    }
    rest_call(state, ctx, &agent, tail, req).await
}

fn not_allowed(allow: &[&'static str]) -> ApiError {
    let list = allow.join(", ");
    ApiError::new(Code::MethodNotAllowed, format!("this route takes {list}")).with_header(
        ALLOW,
        HeaderValue::from_str(&list).unwrap_or(HeaderValue::from_static("GET")),
    )
}

/// The body of a POST, bounded, in a JSON media type (`application/a2a+json` or
/// `application/json`; 415 otherwise). A bodiless POST may omit the type.
async fn body_of(
    state: &State,
    req: Request,
) -> Result<(hyper::http::request::Parts, bytes::Bytes), ApiError> {
    let typed = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(rest::is_json_media_type);
    let (parts, body) = read_body(req, state.config.max_body_bytes).await?;
    if typed == Some(false) || (typed.is_none() && !body.is_empty()) {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "A2A requests take Content-Type: application/a2a+json or application/json",
        ));
    }
    Ok((parts, body))
}

fn version_of(headers: &hyper::HeaderMap) -> Option<&str> {
    headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok())
}

/// `POST /agents/{name}/jsonrpc`.
async fn json_rpc(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    req: Request,
) -> Result<Response<Body>, ApiError> {
    let query = req.uri().query().map(str::to_owned);
    let (parts, body) = body_of(state, req).await?;
    let parsed = match jsonrpc::parse_request(&body) {
        Ok(r) => r,
        Err(refused) => {
            count(
                state,
                &agent.cfg.name,
                None,
                "JSONRPC",
                refused.error.kind.reason(),
            );
            return Ok(json_response(
                StatusCode::OK,
                "application/json",
                &jsonrpc::error_response(refused.id.as_ref(), &refused.error),
            ));
        }
    };
    let front = Front::JsonRpc(parsed.id);
    Ok(answer(
        state,
        ctx,
        agent,
        &parts,
        query.as_deref(),
        parsed.call,
        &front,
    )
    .await)
}

/// The HTTP+JSON binding's routes.
async fn rest_call(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    tail: &str,
    req: Request,
) -> Result<Response<Body>, ApiError> {
    let verb = req.method().as_str().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let (parts, body) = if verb == "POST" {
        body_of(state, req).await?
    } else {
        let (parts, _) = req.into_parts();
        (parts, bytes::Bytes::new())
    };
    let call = match rest::parse_request(&verb, tail, query.as_deref(), &body) {
        Ok(call) => call,
        Err(rest::RouteError::NotFound) => {
            return Err(ApiError::new(
                Code::NotFound,
                format!("no A2A route {tail:?} under agent {:?}", agent.cfg.name),
            ))
        }
        Err(rest::RouteError::MethodNotAllowed(allow)) => return Err(not_allowed(allow)),
        Err(rest::RouteError::Invalid(e)) => {
            count(state, &agent.cfg.name, None, "HTTP+JSON", e.kind.reason());
            return Ok(frame::neutral(Method::SendMessage, Err(e.into())));
        }
    };
    Ok(answer(
        state,
        ctx,
        agent,
        &parts,
        query.as_deref(),
        call,
        &Front::Rest,
    )
    .await)
}

/// A call read from either binding: its version, its check, the operation, counted.
async fn answer(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    parts: &hyper::http::request::Parts,
    query: Option<&str>,
    call: Call,
    front: &Front,
) -> Response<Body> {
    let (headers, http1) = (&parts.headers, parts.version < hyper::Version::HTTP_2);
    let method = call.method;
    let query_version = rest::query_param(query, VERSION_HEADER);
    let refused = version::check(version_of(headers), query_version.as_deref())
        .err()
        .or_else(|| {
            let found = check_request(&call);
            (!found.is_empty()).then(|| A2aError::invalid_params(found))
        });
    let neutral = match refused {
        Some(e) => frame::neutral(method, Err(e.into())),
        // Boxed: a stream's future is the largest here, and every unary call's future (a
        // SendMessage's above all) would otherwise carry its size, moved at each level.
        None if method.is_streaming() => {
            match Box::pin(stream::run(state, ctx, agent, headers, call, front, http1)).await {
                stream::Streamed::Events(res) => {
                    count(state, &agent.cfg.name, Some(method), front.label(), "ok");
                    return res;
                }
                stream::Streamed::Neutral(n) => n,
            }
        }
        None => ops::run(state, ctx, agent, headers, call).await,
    };
    let outcome = outcome_of(&neutral);
    count(
        state,
        &agent.cfg.name,
        Some(method),
        front.label(),
        &outcome,
    );
    reframe(for_caller(ctx, neutral, agent), front, method)
}

/// The neutral answer as the caller may read it: an agent's own error withheld
/// (`frame::withhold`) from a caller that may not read agents' texts.
fn for_caller(ctx: &Ctx, mut neutral: Response<Body>, agent: &Agent) -> Response<Body> {
    if !ctx.caller.reads_agents_texts() {
        frame::withhold(&mut neutral, &agent.cfg.name);
    }
    neutral
}

/// `ok`, or the ErrorInfo reason of a neutral answer.
fn outcome_of(res: &Response<Body>) -> String {
    if res.status().is_success() {
        return "ok".to_owned();
    }
    if let Some(frame::Neutral(Err(e))) = res.extensions().get::<frame::Neutral>() {
        return label_of(e);
    }
    let body = match res.body() {
        Body::Full(Some(b)) => b.clone(),
        _ => bytes::Bytes::new(),
    };
    match frame::read_neutral(res.status().as_u16(), &body) {
        Err(e) => label_of(&e),
        Ok(_) => "ok".to_owned(),
    }
}

/// An error's outcome label: its reason, but `agent_error` for an agent's error of no kind the
/// protocol or the gateway defines (its reason is the agent's to choose, so it is no label).
fn label_of(e: &A2aError) -> String {
    match e.kind {
        ErrorKind::Other(_) => "agent_error".to_owned(),
        _ => e.kind.reason().to_owned(),
    }
}

/// `a2a_gateway_a2a_requests_total{agent,method,binding,outcome}`. Only the agent's route
/// name, the proto's method names, the two bindings and ErrorInfo reasons: bounded.
fn count(state: &State, agent: &str, method: Option<Method>, binding: &str, outcome: &str) {
    let method = method.map_or("unknown", Method::as_str);
    let outcome = if outcome.is_empty() { "error" } else { outcome };
    state
        .metrics
        .a2a_requests
        .with_label_values(&[agent, method, binding, outcome])
        .inc();
}

/// `POST /a2a`: JSON-RPC over every A2A agent the caller may use. `params.tenant` names the
/// agent (an unknown one and one the caller may not use are InvalidParams, worded alike), and
/// the agent gets its own interface's tenant, never the client's. SendMessage and
/// GetExtendedAgentCard need it; the methods that name a task may leave it out: the gateway
/// finds the caller's task with that id (none is TaskNotFoundError, more than one is
/// InvalidParams "tenant required"). ListTasks without a tenant lists the caller's tasks on
/// every A2A agent it may use.
pub async fn fleet(state: &Arc<State>, ctx: &mut Ctx, req: Request) -> ApiResult {
    if req.method() != hyper::Method::POST {
        return Err(not_allowed(&["POST"]));
    }
    let query = req.uri().query().map(str::to_owned);
    let (parts, body) = body_of(state, req).await?;
    let parsed = match jsonrpc::parse_request(&body) {
        Ok(r) => r,
        Err(refused) => {
            return Ok(json_response(
                StatusCode::OK,
                "application/json",
                &jsonrpc::error_response(refused.id.as_ref(), &refused.error),
            ))
        }
    };
    let front = Front::JsonRpc(parsed.id.clone());
    let method = parsed.call.method;
    let error = |e: A2aError| {
        json_response(
            StatusCode::OK,
            "application/json",
            &jsonrpc::error_response(Some(&parsed.id), &e),
        )
    };
    let version = rest::query_param(query.as_deref(), VERSION_HEADER);
    if let Err(e) = version::check(version_of(&parts.headers), version.as_deref()) {
        return Ok(error(e));
    }
    let found = check_request(&parsed.call);
    if !found.is_empty() {
        return Ok(error(A2aError::invalid_params(found)));
    }
    let id = parsed.call.task_id().unwrap_or_default().to_owned();
    let tenant = parsed
        .call
        .params
        .get("tenant")
        .and_then(serde_json::Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    // Unknown, not the caller's to use, or (but for a former agent's final task) not an A2A
    // agent: one answer, naming `tenant`, so tenants reveal nothing of the fleet.
    let no_such_tenant = |name: &str| {
        A2aError::invalid_params(vec![crate::protocol::Violation::new(
            "/tenant",
            "tenant",
            format!(
                "tenant {:?} names no A2A agent this client may use",
                name.chars().take(64).collect::<String>()
            ),
        )])
    };
    let agent = match tenant {
        Some(name) => {
            match state.registry.by_name(&name) {
                Some(a) if a.cfg.protocol == Protocol::A2a && ctx.caller.may_use(a) => a.clone(),
                // A reload made the agent speak another protocol: its final A2A tasks stay
                // readable here, from the ledger.
                Some(a)
                    if ctx.caller.may_use(a)
                        && matches!(method, Method::GetTask | Method::CancelTask) =>
                {
                    let history = parsed
                        .call
                        .params
                        .get("historyLength")
                        .and_then(serde_json::Value::as_u64);
                    let answer = former_task(state, ctx, &name, method, &id)
                        .await
                        .map(|t| ledger::with_history(t, history));
                    return Ok(match answer {
                        Ok(task) => json_response(
                            StatusCode::OK,
                            "application/json",
                            &jsonrpc::result_response(&parsed.id, method, &task),
                        ),
                        Err(e) => error(e),
                    });
                }
                _ => return Ok(error(no_such_tenant(&name))),
            }
        }
        // Without a tenant: the caller's tasks on every A2A agent it may use.
        None if method == Method::ListTasks => {
            let agents = state
                .registry
                .agents()
                .iter()
                .filter(|a| a.cfg.protocol == Protocol::A2a && ctx.caller.may_use(a))
                .map(|a| Arc::from(a.cfg.name.as_str()))
                .collect();
            let neutral = frame::neutral(
                method,
                list::list(state, ctx, agents, "", &parsed.call).await,
            );
            count(state, "", Some(method), "JSONRPC", &outcome_of(&neutral));
            return Ok(reframe(neutral, &front, method));
        }
        // The methods that name no task need the agent named.
        None if method.task_field().is_none() => {
            return Ok(error(A2aError::invalid_params(vec![
                crate::protocol::Violation::new(
                    "/tenant",
                    "required",
                    format!(
                        "{} at /a2a needs params.tenant: the agent's name",
                        method.as_str()
                    ),
                ),
            ])))
        }
        None => {
            let mut holders = Vec::new();
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
            let records = match ledger::records_under(state, &names, &id).await {
                Ok(r) => r,
                // After admission: a protocol error carrying the client's id.
                Err(f) => {
                    let mut res = error(*f.error);
                    for (name, value) in f.headers {
                        res.headers_mut().insert(name, value);
                    }
                    return Ok(res);
                }
            };
            for (a, record) in candidates.into_iter().zip(records) {
                if record.is_some_and(|r| ctx.caller.sees(r.owner.as_deref())) {
                    holders.push(a);
                }
            }
            match holders.len() {
                0 => return Ok(error(ledger_not_found(&id))),
                1 => holders.remove(0),
                _ => {
                    return Ok(error(A2aError::invalid_params(vec![
                        crate::protocol::Violation::new(
                            "/tenant",
                            "required",
                            "tenant required: tasks of this id are held under more than one agent; name the agent in params.tenant",
                        ),
                    ])))
                }
            }
        }
    };
    ctx.agent = Some(agent.clone());
    let mut call = parsed.call;
    call.params.remove("tenant");
    let neutral = if method.is_streaming() {
        let http1 = parts.version < hyper::Version::HTTP_2;
        // Boxed, as in `answer`: a unary call's future does not carry a stream's size.
        match Box::pin(stream::run(
            state,
            ctx,
            &agent,
            &parts.headers,
            call,
            &front,
            http1,
        ))
        .await
        {
            stream::Streamed::Events(res) => {
                count(state, &agent.cfg.name, Some(method), "JSONRPC", "ok");
                return Ok(res);
            }
            stream::Streamed::Neutral(n) => n,
        }
    } else {
        ops::run(state, ctx, &agent, &parts.headers, call).await
    };
    let outcome = outcome_of(&neutral);
    count(state, &agent.cfg.name, Some(method), "JSONRPC", &outcome);
    Ok(reframe(for_caller(ctx, neutral, &agent), &front, method))
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
            crate::protocol::json::parse(&r.task).map_err(|_| ledger_not_found(id))
        }
        _ => Err(ledger_not_found(id)),
    }
}

fn ledger_not_found(id: &str) -> A2aError {
    *ledger::not_found(id).error
}
