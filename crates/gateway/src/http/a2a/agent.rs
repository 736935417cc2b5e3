//! The gateway's requests to an official A2A agent, in the agent's binding, and its answers read
//! back as one [`Reply`] whatever the binding.
//!
//! The request goes to the agent's configured origin (`[[agents]] url`) and the path of the
//! card's chosen interface: a card names public host names, and must never steer the gateway to
//! another host. It carries `A2A-Version: 1.0` (both SDK servers read the header only, and
//! @a2a-js/sdk's takes exactly the strings its card lists), the client's `A2A-Extensions`, the
//! request id and forwarding headers, the agent's own `upstream_auth_header`, and nothing else of
//! the client's: the body is rebuilt from the checked call. JSON-RPC requests carry the gateway's
//! own ids, never the client's.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::http::response::Parts;
use hyper::Request;

use std::sync::Arc;

use serde_json::Value;

use super::files::{self, Shape};
use super::frame::Failure;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, Code};
use crate::http::exchange::conformance;
use crate::protocol::a2a::answer::check_answer;
use crate::protocol::a2a::card::Binding;
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::jsonrpc::{self, RpcId};
use crate::protocol::a2a::{rest, Call, Reply};
use crate::protocol::a2a::{A2aError, Method};
use crate::protocol::node::{Json, Node};
use crate::registry::Agent;
use crate::state::State;
use crate::upstream::upstream_headers;

/// The gateway's JSON-RPC ids towards agents: `gw-{n}`, unique within the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A request built for the agent, and the id its JSON-RPC answer must carry.
pub struct Outgoing {
    /// The request, ready to send.
    pub request: Request<Full<Bytes>>,
    /// For a JSON-RPC agent: the id sent.
    pub rpc_id: Option<RpcId>,
}

/// The request for `call` towards `agent` over `held`'s interface; `written`: the call's params
/// as serde_json wrote them already, if they were (see [`jsonrpc::agent_request`]).
pub fn request(
    agent: &Agent,
    held: &HeldCard,
    ctx: &Ctx,
    client: &HeaderMap,
    call: &Call,
    written: Option<&[u8]>,
) -> Result<Outgoing, ApiError> {
    build(
        agent,
        held,
        Some(ctx),
        client,
        (call, written),
        "application/json",
    )
}

/// The request of a streaming `call` (it asks for `text/event-stream`); without `ctx`, the
/// gateway's own (a shared stream reconnecting): no client's forwarding headers.
pub fn stream_request(
    agent: &Agent,
    held: &HeldCard,
    ctx: Option<&Ctx>,
    client: &HeaderMap,
    call: &Call,
) -> Result<Outgoing, ApiError> {
    build(agent, held, ctx, client, (call, None), "text/event-stream")
}

/// A call of the gateway's own (a push config it gives the agent, a poll): no client's headers.
pub fn own_request(agent: &Agent, held: &HeldCard, call: &Call) -> Result<Outgoing, ApiError> {
    build(
        agent,
        held,
        None,
        &HeaderMap::new(),
        (call, None),
        "application/json",
    )
}

fn build(
    agent: &Agent,
    held: &HeldCard,
    ctx: Option<&Ctx>,
    client: &HeaderMap,
    (call, written): (&Call, Option<&[u8]>),
    accept: &'static str,
) -> Result<Outgoing, ApiError> {
    let tenant = held.interface.tenant.as_deref();
    let (method, url, body, rpc_id) = match held.interface.binding {
        Binding::JsonRpc => {
            let id = RpcId::Str(format!("gw-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)));
            let body = jsonrpc::agent_request(&id, call, tenant, written);
            let url = held.endpoint(&agent.cfg.url).map_err(|e| {
                ApiError::new(
                    Code::AgentUnreachable,
                    format!("cannot build the agent request: {e}"),
                )
            })?;
            (hyper::Method::POST, url, Bytes::from(body), Some(id))
        }
        Binding::HttpJson => {
            let base = format!("{}{}", agent.cfg.url, held.interface_path());
            let r = rest::agent_request(call, tenant)
                .map_err(|e| ApiError::new(Code::InvalidRequest, e.message))?;
            let mut url = format!("{base}{}", r.path);
            if !r.query.is_empty() {
                url.push('?');
                url.push_str(&r.query);
            }
            let body = match &r.body {
                Some(b) => Bytes::from(
                    serde_json::to_vec(b)
                        .map_err(|e| ApiError::new(Code::InvalidRequest, e.to_string()))?,
                ),
                None => Bytes::new(),
            };
            let method =
                hyper::Method::from_bytes(r.http_method.as_bytes()).unwrap_or(hyper::Method::POST);
            let url = hyper::Uri::try_from(url).map_err(|e| {
                ApiError::new(
                    Code::AgentUnreachable,
                    format!("cannot build the agent request: {e}"),
                )
            })?;
            (method, url, body, None)
        }
    };
    let has_body = !body.is_empty();
    let mut request = crate::http::exchange::call::new_request(method, url, body)?;
    // Of the client's headers only the extensions it asks for go on.
    let mut kept = HeaderMap::new();
    let extensions = HeaderName::from_static("a2a-extensions");
    for v in client.get_all(&extensions) {
        kept.append(extensions.clone(), v.clone());
    }
    let mut headers = match ctx {
        Some(ctx) => upstream_headers(&kept, &ctx.peer_ip, ctx.https, &ctx.request_id, true),
        None => {
            kept.insert(
                header::USER_AGENT,
                HeaderValue::from_static(concat!("a2a-gateway/", env!("CARGO_PKG_VERSION"))),
            );
            kept
        }
    };
    headers.insert(
        HeaderName::from_static("a2a-version"),
        HeaderValue::from_static(crate::protocol::a2a::version::SERVED),
    );
    headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
    if has_body {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    *request.headers_mut() = headers;
    agent.authorize(request.headers_mut());
    Ok(Outgoing { request, rpc_id })
}

/// The agent's answer to `call` read back: JSON-RPC by the id sent, REST by status and body.
/// An error an agent sends in the gateway's own domain is the agent's, not the gateway's: it
/// is kept as an error of no known kind, in the domain `agent`, so that no agent can answer in
/// the gateway's name (a fake RATE_LIMITED, UNAUTHORIZED...).
pub fn read(call: &Call, rpc_id: Option<&RpcId>, parts: &Parts, body: &[u8]) -> Reply {
    match rpc_id {
        Some(_) if !parts.status.is_success() => {
            // A JSON-RPC server answers its errors with 200; another status is the
            // transport's (a proxy's 502, a 401 of the agent's own auth), which the gateway
            // reports as its own unless the body holds the agent's JSON-RPC error.
            match crate::protocol::json::parse(body)
                .ok()
                .and_then(|v| v.get("error").cloned())
                .filter(serde_json::Value::is_object)
            {
                Some(e) => Err(the_agents(
                    crate::protocol::a2a::A2aError::from_jsonrpc(&e).the_agents_own(),
                )),
                None => Err(transport(parts.status.as_u16())),
            }
        }
        Some(id) => jsonrpc::parse_agent_response(body, id, call.method).map_err(the_agents),
        None => {
            rest::parse_agent_answer(call.method, parts.status.as_u16(), body).map_err(the_agents)
        }
    }
}

/// What [`read_answer`] gives: an answer read in place (a JSON-RPC agent's) or as serde_json's
/// tree (a REST agent's, an error's).
pub enum AgentAnswer<'a> {
    /// Read in place: its strings borrowed from the agent's body.
    InPlace(Node<'a>),
    /// serde_json's tree.
    Tree(Value),
}

impl AgentAnswer<'_> {
    /// The answer, to read.
    pub fn json(&self) -> &dyn Json {
        match self {
            AgentAnswer::InPlace(n) => n,
            AgentAnswer::Tree(v) => v,
        }
    }

    /// serde_json's tree of the answer.
    pub fn into_value(self) -> Value {
        match self {
            AgentAnswer::InPlace(n) => n.into_value(),
            AgentAnswer::Tree(v) => v,
        }
    }
}

/// [`read`], with a JSON-RPC agent's successful answer read in place (SendMessage's, which the
/// gateway checks, records and relays without a tree of its own), and its file URLs rewritten
/// (`files::localize`; `owner`: the client a Message outside any task is answered to).
#[allow(clippy::too_many_arguments)]
pub async fn read_answer<'a>(
    state: &State,
    agent: &Agent,
    owner: Option<&str>,
    call: &Call,
    rpc_id: Option<&RpcId>,
    parts: &Parts,
    body: &'a [u8],
) -> Result<AgentAnswer<'a>, A2aError> {
    let shape = Shape::of(call.method);
    let mut answer = match rpc_id {
        Some(id) if parts.status.is_success() => {
            jsonrpc::read_agent_response(body, id, call.method)
                .map(AgentAnswer::InPlace)
                .map_err(the_agents)?
        }
        _ => read(call, rpc_id, parts, body).map(AgentAnswer::Tree)?,
    };
    if let Some(shape) = shape {
        match &mut answer {
            AgentAnswer::InPlace(n) => files::localize(state, agent, owner, shape, n).await,
            AgentAnswer::Tree(v) => files::localize(state, agent, owner, shape, v).await,
        }
    }
    Ok(answer)
}

/// [`read`], the answer's file URLs rewritten (`files::localize`): how every answer the
/// gateway relays or records is read (GetTask, CancelTask, a poll).
pub async fn read_local(
    state: &State,
    agent: &Agent,
    owner: Option<&str>,
    call: &Call,
    rpc_id: Option<&RpcId>,
    (parts, body): (&Parts, &[u8]),
) -> Reply {
    let mut answer = read(call, rpc_id, parts, body)?;
    if let Some(shape) = Shape::of(call.method) {
        files::localize(state, agent, owner, shape, &mut answer).await;
    }
    Ok(answer)
}

/// An error read from an agent's body: one in the gateway's own domain becomes an error of no
/// known kind in the domain `agent`.
pub(super) fn the_agents(mut e: crate::protocol::a2a::A2aError) -> crate::protocol::a2a::A2aError {
    if let crate::protocol::a2a::ErrorKind::Gateway { reason, status } = &e.kind {
        e.kind = crate::protocol::a2a::ErrorKind::Other(Box::new(
            crate::protocol::a2a::error::OtherError {
                code: crate::protocol::a2a::error::GATEWAY_CODE,
                status: *status,
                reason: reason.clone(),
                domain: "agent".to_owned(),
            },
        ));
    }
    e
}

/// An agent's HTTP failure that carries no A2A error: the gateway's AGENT_UNREACHABLE.
fn transport(status: u16) -> crate::protocol::a2a::A2aError {
    crate::protocol::a2a::A2aError::gateway(
        Code::AgentUnreachable.as_str(),
        502,
        format!("the agent answered HTTP {status} without an A2A error"),
    )
    .with_metadata("httpStatus", &status.to_string())
}

/// The A2A card of `agent`, or AGENT_UNAVAILABLE while it has none.
pub fn held_card(agent: &Agent) -> Result<Arc<HeldCard>, Failure> {
    let card = agent.card().map_err(ApiError::from)?;
    if !agent.fits_binding(&card) {
        // Compiled for the binding before a reload: served until the new one is fetched,
        // which is asked for now (at most once per registry::REFETCH_EVERY).
        agent.ask_refetch();
    }
    card.a2a().ok_or_else(|| {
        ApiError::new(
            Code::AgentUnavailable,
            "the agent's card is not an official A2A card",
        )
        .into()
    })
}

/// The agent's answer within A2A 1.0 (about `task` when the call names one), or counted;
/// InvalidAgentResponseError in `enforce` mode.
pub(super) fn conform(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    method: Method,
    answer: &dyn Json,
    task: Option<&str>,
) -> Result<(), Failure> {
    let found = check_answer(method, answer, task);
    let kept = found.clone();
    conformance(state, agent, ctx, method.as_str(), found)
        .map_err(|_| A2aError::invalid_agent_response(kept).into())
}
