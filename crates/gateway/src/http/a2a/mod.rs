//! The official A2A routes (a2aproject; the proto is normative), for agents configured with
//! `protocol = "a2a"`. For an agent named `echo`:
//!
//! - `GET /agents/echo/.well-known/agent-card.json` (and `/agents/echo/agent-card.json`): the
//!   served card ([`served_card`]);
//! - `GET /agents/echo/files/{fileId}`: a file the agent named on its own origin ([`files`]);
//! - every other path under `/agents/echo/`, and the fleet's `POST /a2a` ([`tenant`] naming the
//!   agent): calls, each in a wire form ([`wire`]: JSON-RPC at `jsonrpc` and `/a2a`, HTTP+JSON
//!   elsewhere).
//!
//! Every call takes one path, [`call`]: the body (bounded, a JSON media type) → the form reads
//! it into one neutral `protocol::a2a::Call` → the method among the client's `methods`
//! ([`may_call`]: 403 FORBIDDEN otherwise, the agent not called) → `A2A-Version` → the call
//! checked against the proto → the agent (the route's, or the fleet's tenant) → the operation
//! ([`ops::run`]: the ledger, the agent in its own form) → the neutral answer as the caller may
//! read it, written in the client's form → counted. A client may use any form whatever the
//! agent's.

pub mod agent_stream;
pub mod feed;
pub mod files;
pub mod follow;
pub mod frame;
pub mod inline;
pub mod ledger;
pub mod list;
pub mod message;
pub mod ops;
pub mod poll;
pub mod push_configs;
pub mod send;
pub mod served_card;
pub mod stream;
pub mod tenant;
pub mod to_agent;
pub mod wire;

use std::sync::Arc;

use hyper::header::CONTENT_TYPE;
use hyper::Response;

use self::frame::neutral;
use self::tenant::Tenant;
use self::wire::{Form, Front, Read};
use crate::http::admission;
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::named_agent;
use crate::http::request::{read_body, Request};
use crate::protocol::a2a::check::check_request;
use crate::protocol::a2a::{A2aError, ErrorKind, Method};
use crate::registry::Agent;
use crate::state::State;

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
    if crate::http::route::is_a2a_card(tail) {
        if verb != hyper::Method::GET && verb != hyper::Method::HEAD {
            return Err(wire::not_allowed(&["GET"]));
        }
        return served_card::served(state, ctx, &agent, &req);
    }
    if let Some(id) = tail.strip_prefix("files/") {
        if verb != hyper::Method::GET && verb != hyper::Method::HEAD {
            return Err(wire::not_allowed(&["GET"]));
        }
        return files::serve(state, ctx, &agent, id, &req).await;
    }
    let asked = wire::asked_version(req.headers(), req.uri().query());
    let form = wire::of_route(Some(tail), asked.as_deref());
    drop(asked);
    match form.deadline(req.headers()) {
        None => call(state, ctx, Some(agent), form, tail, req).await,
        // Boxed: only a call with a deadline pays for its timer, not every request's future.
        Some(d) => {
            let answer =
                tokio::time::timeout(d, Box::pin(call(state, ctx, Some(agent), form, tail, req)))
                    .await;
            within(state, ctx, form, d, answer)
        }
    }
}

/// `POST /a2a`: JSON-RPC over every A2A agent the caller may use, `params.tenant` naming the
/// agent ([`tenant`]).
pub async fn fleet(state: &Arc<State>, ctx: &mut Ctx, req: Request) -> ApiResult {
    call(state, ctx, None, wire::of_route(None, None), "", req).await
}

/// `POST /lf.a2a.v1.A2AService/{Method}`: A2A's gRPC service over every A2A agent the caller
/// may use, the message's `tenant` naming the agent as at `/a2a` ([`tenant`]). The call's
/// deadline (`grpc-timeout`) bounds it until its answer (a stream's events are not bounded by
/// it): past it, AGENT_TIMEOUT, gRPC's DEADLINE_EXCEEDED.
pub async fn service(state: &Arc<State>, ctx: &mut Ctx, req: Request) -> ApiResult {
    let form = wire::of_service_path();
    let path = req.uri().path().to_owned();
    match form.deadline(req.headers()) {
        None => call(state, ctx, None, form, &path, req).await,
        Some(d) => {
            let answer =
                tokio::time::timeout(d, Box::pin(call(state, ctx, None, form, &path, req))).await;
            within(state, ctx, form, d, answer)
        }
    }
}

/// The answer of a call run within the deadline `d` its client set (gRPC's `grpc-timeout`):
/// past it, AGENT_TIMEOUT (the call was dropped as if its client had gone), counted as the call
/// would have been once its agent and method were known.
fn within(
    state: &State,
    ctx: &Ctx,
    form: &'static dyn Form,
    d: std::time::Duration,
    answer: Result<ApiResult, tokio::time::error::Elapsed>,
) -> ApiResult {
    answer.unwrap_or_else(|_| {
        if let Some(agent) = &ctx.agent {
            count(
                state,
                ctx,
                &agent.cfg.name,
                ctx.a2a_method,
                form,
                "AGENT_TIMEOUT",
            );
        }
        Err(ApiError::new(
            Code::AgentTimeout,
            format!("the call's deadline ({} ms) passed", d.as_millis()),
        ))
    })
}

/// One A2A call in `form`, for `agent` (the route's), or for the agent the fleet's tenant
/// names (`None`): see the module doc. Counted on `a2a_gateway_a2a_requests_total` once its
/// agent is known.
async fn call(
    state: &Arc<State>,
    ctx: &mut Ctx,
    agent: Option<Arc<Agent>>,
    form: &'static dyn Form,
    tail: &str,
    req: Request,
) -> ApiResult {
    let verb = req.method().clone();
    let query = req.uri().query().map(str::to_owned);
    let (parts, body) = if form.takes_body(&verb)? {
        body_of(state, req, form).await?
    } else {
        (req.into_parts().0, bytes::Bytes::new())
    };
    ctx.speaks = Some(form.version_label());
    let (mut call, front) = match form.read(&verb, tail, query.as_deref(), &body) {
        Read::Call(call, echo) => (call, Front { form, echo }),
        Read::NotAllowed(e) => return Err(e),
        Read::NotFound => {
            let under = agent.as_ref().map_or("", |a| a.cfg.name.as_str());
            return Err(ApiError::new(
                Code::NotFound,
                format!("no A2A route {tail:?} under agent {under:?}"),
            ));
        }
        Read::Refused(e, echo) => {
            if let Some(a) = &agent {
                count(state, ctx, &a.cfg.name, None, form, e.kind.reason());
            }
            let front = Front { form, echo };
            return Ok(front.answer(
                Method::SendMessage,
                neutral(Method::SendMessage, Err(e.into())),
            ));
        }
    };
    let method = call.method;
    ctx.a2a_method = Some(method);
    if let Err(e) = may_call(state, ctx, method) {
        let answer = neutral(method, Err(e.into()));
        let name = agent.as_ref().map_or("", |a| a.cfg.name.as_str());
        count(state, ctx, name, Some(method), form, &outcome_of(&answer));
        return Ok(front.answer(method, answer));
    }
    let (headers, http1) = (&parts.headers, parts.version < hyper::Version::HTTP_2);
    let refused = form.version(headers, query.as_deref()).err().or_else(|| {
        let found = check_request(&call);
        (!found.is_empty()).then(|| A2aError::invalid_params(found))
    });
    if let Some(e) = refused {
        let answer = neutral(method, Err(e.into()));
        if let Some(a) = &agent {
            count(
                state,
                ctx,
                &a.cfg.name,
                Some(method),
                form,
                &outcome_of(&answer),
            );
        }
        return Ok(front.answer(method, answer));
    }
    let agent = match agent {
        Some(agent) => agent,
        None => match tenant::resolve(state, ctx, &mut call).await {
            Tenant::Agent(agent) => {
                ctx.agent = Some(agent.clone());
                agent
            }
            Tenant::Every(agents) => {
                let answer = neutral(method, list::list(state, ctx, agents, "", &call).await);
                count(state, ctx, "", Some(method), form, &outcome_of(&answer));
                return Ok(front.answer(method, answer));
            }
            Tenant::Answered(reply) => return Ok(front.answer(method, neutral(method, reply))),
        },
    };
    let answer = if method.is_streaming() {
        // Boxed: a stream's future is the largest here, and every unary call's future (a
        // SendMessage's above all) would otherwise carry its size, moved at each level.
        match Box::pin(stream::run(
            state, ctx, &agent, headers, call, &front, http1,
        ))
        .await
        {
            stream::Streamed::Events(res) => {
                count(state, ctx, &agent.cfg.name, Some(method), form, "ok");
                return Ok(res);
            }
            stream::Streamed::Neutral(n) => n,
        }
    } else {
        ops::run(state, ctx, &agent, headers, call).await
    };
    count(
        state,
        ctx,
        &agent.cfg.name,
        Some(method),
        form,
        &outcome_of(&answer),
    );
    Ok(front.answer(method, for_caller(ctx, answer, &agent)))
}

/// 403 FORBIDDEN unless the caller may call `method` (its client's `methods`, beside the
/// `tasks` right admission checked), the method named in the ErrorInfo's metadata. Decided on
/// the method alone: before the version, the proto's checks and the fleet's tenant, so a call
/// the client may not make learns nothing of them, and no agent is called.
fn may_call(state: &State, ctx: &Ctx, method: Method) -> Result<(), ApiError> {
    if ctx.caller.may_call(method) {
        return Ok(());
    }
    let e = admission::forbidden(
        state,
        format!(
            "this client may not call {} (its `methods`)",
            method.as_str()
        ),
    );
    Err(e.with_details(serde_json::json!({ "method": method.as_str() })))
}

/// The body of a POST, bounded, in a media type the form reads (`application/a2a+json` or
/// `application/json`, gRPC's `application/grpc`; 415 otherwise). A bodiless POST may omit
/// the type.
async fn body_of(
    state: &State,
    req: Request,
    form: &'static dyn Form,
) -> Result<(hyper::http::request::Parts, bytes::Bytes), ApiError> {
    let typed = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|t| form.reads_type(t));
    let (parts, body) = read_body(req, state.config.max_body_bytes).await?;
    if typed == Some(false) || (typed.is_none() && (!body.is_empty() || form.needs_type())) {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            format!("these requests take Content-Type: {}", form.media_types()),
        ));
    }
    Ok((parts, body))
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

/// `a2a_gateway_a2a_requests_total{agent,method,binding,version,outcome,client}`. Only the
/// agent's route name, the 1.0 method names (a 0.3 call counts as the 1.0 operation it is), the
/// bindings, the two versions, ErrorInfo reasons and the caller's `client` label (a configured
/// client's name, `jwt`, `anonymous`, as on `a2a_gateway_requests_total`): bounded.
fn count(
    state: &State,
    ctx: &Ctx,
    agent: &str,
    method: Option<Method>,
    form: &'static dyn Form,
    outcome: &str,
) {
    let method = method.map_or("unknown", Method::as_str);
    let outcome = if outcome.is_empty() { "error" } else { outcome };
    state
        .metrics
        .a2a_requests
        .with_label_values(&[
            agent,
            method,
            form.label(),
            form.version_label(),
            outcome,
            ctx.caller.label(),
        ])
        .inc();
}
