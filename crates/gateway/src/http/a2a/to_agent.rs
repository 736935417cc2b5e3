//! The gateway's requests to an official A2A agent, in the agent's wire form
//! (`wire::of_interface`), and its answers read back as one [`Reply`] whatever the form.
//!
//! The request goes to the agent's configured origin (`[[agents]] url`, or for gRPC its gRPC
//! address: `wire::Form::origin`) and the path of the card's chosen interface: a card names
//! public host names, and must never steer the gateway to another host. It carries its form's own headers (`wire::Form::agent_headers`: `A2A-Version:
//! 1.0` for the 1.0 forms), the client's `A2A-Extensions`, the
//! request id and forwarding headers, the agent's own `upstream_auth_header`, and nothing else of
//! the client's: the body is rebuilt from the checked call by the agent's form.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::http::response::Parts;
use hyper::Request;

use std::sync::Arc;

use super::files::{self, Shape};
use super::frame::Failure;
pub use super::wire::AgentAnswer;
use super::wire::{self, Sent, Written};
use crate::caller::OnBehalf;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, Code};
use crate::http::exchange::conformance;
use crate::protocol::a2a::answer::check_answer;
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::{A2aError, Method};
use crate::protocol::a2a::{Call, Reply};
use crate::protocol::node::Json;
use crate::registry::Agent;
use crate::state::State;
use crate::upstream::upstream_headers;

/// A request built for the agent, and what its answer is read back by.
pub struct Outgoing {
    /// The request, ready to send.
    pub request: Request<Full<Bytes>>,
    /// What it was sent as: its answer and events are read back through it.
    pub sent: Sent,
}

/// The request for `call` towards `agent` over `held`'s interface; `written`: the call's params
/// as serde_json wrote them already, if they were (see `wire::Form::request`).
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
        (Some(ctx), None),
        ctx.on_behalf(),
        client,
        (call, written),
        "application/json",
    )
}

/// The request of a streaming `call` (it asks for `text/event-stream`), on behalf of `on`;
/// without `ctx`, the gateway's own (a shared stream reconnecting): no client's forwarding
/// headers, and `at` names the task's replica.
pub fn stream_request(
    agent: &Agent,
    held: &HeldCard,
    (ctx, at): (Option<&Ctx>, Option<&str>),
    on: OnBehalf<'_>,
    client: &HeaderMap,
    call: &Call,
) -> Result<Outgoing, ApiError> {
    build(
        agent,
        held,
        (ctx, at),
        on,
        client,
        (call, None),
        "text/event-stream",
    )
}

/// A call of the gateway's own (a push config it gives the agent, a poll) for a task `holder`
/// says whose and where it is: no client's headers.
pub fn own_request(
    agent: &Agent,
    held: &HeldCard,
    holder: &Holder,
    call: &Call,
) -> Result<Outgoing, ApiError> {
    build(
        agent,
        held,
        (None, holder.replica.as_deref()),
        OnBehalf::Owner(holder.owner.as_deref()),
        &HeaderMap::new(),
        (call, None),
        "application/json",
    )
}

pub use crate::ledger::Holder;

/// The owner and replica of A2A task `id` of `agent`, for the gateway's own calls to it
/// (`ledger::holder_of`).
pub async fn owner_of(state: &State, agent: &Agent, id: &str) -> Result<Holder, ()> {
    let key = crate::protocol::a2a::ledger_key(&agent.cfg.name, id);
    crate::ledger::holder_of(state.ledger.as_ref(), &key, agent.cfg.needs_holder()).await
}

#[allow(clippy::too_many_arguments)]
fn build(
    agent: &Agent,
    held: &HeldCard,
    (ctx, at): (Option<&Ctx>, Option<&str>),
    on: OnBehalf<'_>,
    client: &HeaderMap,
    (call, written): (&Call, Option<&[u8]>),
    accept: &'static str,
) -> Result<Outgoing, ApiError> {
    let form = wire::of_interface(held.interface.binding, held.interface.version);
    let replica = crate::http::exchange::replica::target(agent, ctx, at)?;
    let origin = form.origin(&replica.base, &agent.cfg, held);
    let Written {
        verb: method,
        url,
        body,
        sent,
    } = form.request(&origin, held, call, written)?;
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
    headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
    if has_body {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    // After the JSON defaults: a form that is not JSON (gRPC) sets its own.
    form.agent_headers(&mut headers);
    if let Some(host) = &replica.host {
        headers.insert(header::HOST, host.clone());
    }
    *request.headers_mut() = headers;
    agent.authorize(request.headers_mut(), on)?;
    Ok(Outgoing { request, sent })
}

/// The agent's answer to `call` read back in the form it was sent in (`sent`). An error an
/// agent sends in the gateway's own domain is the agent's, not the gateway's
/// (`wire::the_agents`).
pub fn read(call: &Call, sent: &Sent, parts: &Parts, body: &[u8]) -> Reply {
    sent.read(call, parts, body)
}

/// [`read`], a successful answer read in place where its form can (SendMessage's, which the
/// gateway checks, records and relays without a tree of its own), and its file URLs rewritten
/// (`files::localize`; `owner`: the client a Message outside any task is answered to).
#[allow(clippy::too_many_arguments)]
pub async fn read_answer<'a>(
    state: &State,
    agent: &Agent,
    owner: Option<&str>,
    call: &Call,
    sent: &Sent,
    parts: &Parts,
    body: &'a [u8],
) -> Result<AgentAnswer<'a>, A2aError> {
    let shape = Shape::of(call.method);
    let mut answer = sent.read_in_place(call, parts, body)?;
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
    sent: &Sent,
    (parts, body): (&Parts, &[u8]),
) -> Reply {
    let mut answer = read(call, sent, parts, body)?;
    if let Some(shape) = Shape::of(call.method) {
        files::localize(state, agent, owner, shape, &mut answer).await;
    }
    Ok(answer)
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
