//! Steps 2 and 3, **admit** and **call**: the request to the agent (its URL under the agent's
//! configured origin, the client's headers filtered, the agent's own credential), the agent's
//! limits checked right before it is called, and the call itself, timed, bounded and traced.

use bytes::Bytes;
use http_body_util::Full;
use hyper::http::response::Parts;
use hyper::{Method, Request, Response};
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;

use crate::http::admission;
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::cors;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::limits::{AgentPolicy, Pass};
use crate::registry::Agent;
use crate::state::State;
use crate::telemetry::{self, semconv, Span};
use crate::upstream::{strip_hop_by_hop, upstream_headers, MAX_AGENT_JSON};

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
    let replica = super::replica::target(agent, Some(ctx), None)?;
    // The prefix stands for the replica's base URL: the query string goes along, less the
    // gateway's own credential.
    let query = query.map(admission::without_access_token);
    let url = match query.as_deref() {
        Some("") | None => format!("{}{path}", replica.base),
        Some(q) => format!("{}{path}?{q}", replica.base),
    };
    let mut req = new_request(method, url, body)?;
    let headers = req.headers_mut();
    *headers = upstream_headers(client, &ctx.peer_ip, ctx.https, &ctx.request_id, reads_body);
    if let Some(host) = &replica.host {
        headers.insert(hyper::header::HOST, host.clone());
    }
    agent.authorize(headers, ctx.on_behalf())?;
    Ok(req)
}

/// A request to an agent at `url` (every agent request is built here): a URL that does not
/// parse is AGENT_UNREACHABLE, since nothing can be sent.
pub fn new_request<U>(method: Method, url: U, body: Bytes) -> Result<Request<Full<Bytes>>, ApiError>
where
    hyper::Uri: TryFrom<U>,
    <hyper::Uri as TryFrom<U>>::Error: Into<hyper::http::Error>,
{
    Request::builder()
        .method(method)
        .uri(url)
        .body(Full::new(body))
        .map_err(|e| {
            ApiError::new(
                Code::AgentUnreachable,
                format!("cannot build the agent request: {e}"),
            )
        })
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
///
/// The limits are those of the replica the request goes to (the request's, else `uri`'s). A
/// pinned call refused because its replica is ejected is 503 REPLICA_UNAVAILABLE: no other
/// replica holds its task.
pub fn admit_agent(
    state: &State,
    agent: &Agent,
    ctx: Option<&Ctx>,
    uri: &hyper::Uri,
) -> Result<Pass, ApiError> {
    // The replica the request was built for (a gRPC call's URI names the card's gRPC port, not
    // the replica's address); the gateway's own calls, by the URI.
    let chosen = ctx.and_then(|c| c.replica.replica());
    let replica = chosen.or_else(|| agent.replicas.at(uri)).ok_or_else(|| {
        ApiError::new(
            Code::AgentUnavailable,
            format!("agent {:?} has no replica", agent.cfg.name),
        )
    })?;
    admit_replica(state, agent, ctx, &replica)
}

/// [`admit_agent`], for the replica already chosen.
pub fn admit_replica(
    state: &State,
    agent: &Agent,
    ctx: Option<&Ctx>,
    replica: &crate::registry::replicas::Replica,
) -> Result<Pass, ApiError> {
    replica
        .limits
        .admit(AgentPolicy::of(&agent.cfg), &state.metrics, &agent.cfg.name)
        .map_err(|e| match e.refusal {
            crate::limits::Refusal::Ejected { .. } | crate::limits::Refusal::Probing { .. }
                if agent.cfg.pins() && ctx.is_some_and(|c| c.replica.pinned()) =>
            {
                super::replica::ejected(agent, e.refusal.retry_after_secs())
            }
            _ => ApiError::from(e),
        })
}

/// One buffered exchange with an agent, timed, within the agent's limits.
pub async fn exchange(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    mut req: Request<Full<Bytes>>,
) -> Result<(Parts, Bytes), ApiError> {
    let mut pass = admit_agent(state, agent, Some(ctx), req.uri())?;
    let span = exchange_span(ctx, agent, &mut req);
    let out = state
        .upstream
        .exchange(req, agent.cfg.timeout, MAX_AGENT_JSON)
        .await;
    exchange_answered(span.as_ref(), &out, |(parts, _)| parts.status.as_u16());
    pass.report(out.as_ref().map(|(parts, _)| parts.status));
    out.map_err(|e| e.at(&agent.cfg.name).into())
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
    let mut pass = admit_agent(state, agent, Some(ctx), up.uri())?;
    let span = exchange_span(ctx, agent, &mut up);
    let res = state.upstream.send(up, agent.cfg.timeout).await;
    // The span covers the exchange up to the answer's head; the body streams after it.
    exchange_answered(span.as_ref(), &res, |r| r.status().as_u16());
    drop(span);
    pass.report(res.as_ref().map(|r| r.status()));
    let (mut parts, body) = res.map_err(|e| e.at(&agent.cfg.name))?.into_parts();
    super::AgentError::mark(&mut parts, None);
    strip_hop_by_hop(&mut parts.headers);
    cors::strip_agents(&mut parts.headers);
    parts.version = hyper::Version::HTTP_11;
    Ok(Response::from_parts(
        parts,
        Body::relayed(body, idle, Some(pass)),
    ))
}
