//! A2A 1.0 over gRPC (§10): `POST /lf.a2a.v1.A2AService/{Method}` with `content-type:
//! application/grpc` on the gateway's listener (HTTP/2: h2c, or ALPN `h2`) for clients, the
//! request's `tenant` naming the agent as at the fleet's `/a2a`; an agent's card interface
//! with `protocolBinding` GRPC for agents. The messages are a2a.proto's, read and written by
//! their descriptors (`a2a_grpc`): a request read into its ProtoJSON is the neutral call's
//! params as a JSON client would have sent them, and the neutral answer's JSON written back is
//! the response message.
//!
//! - **Answers**: HTTP 200, `content-type: application/grpc`, the message, then trailers with
//!   `grpc-status: 0`. An error is a trailers-only answer: `grpc-status` (the error's code as
//!   the HTTP+JSON binding's google.rpc.Status names it, `ErrorKind::grpc_status`; a method the
//!   service does not have, UNIMPLEMENTED), `grpc-message`, and `grpc-status-details-bin` (a
//!   google.rpc.Status with the same ErrorInfo, BadRequest, and a RetryInfo where the other
//!   bindings send `Retry-After`).
//! - **Streams**: each event a StreamResponse message; the gateway's endings of a stream
//!   (ACCESS_REVOKED, DRAINING, SLOW_CONSUMER, UPSTREAM_ERROR) its final status, a plain end
//!   `grpc-status: 0`. No pings: HTTP/2 has its own.
//! - **Service parameters** are metadata (§10.2): `a2a-version` (absent: 1.0, the service's
//!   package is 1.0's), `a2a-extensions`, `authorization`; `grpc-timeout` bounds the call.
//! - **0.3's service** (`/a2a.v1.A2AService/...`) and methods the service does not have are
//!   UNIMPLEMENTED.
//! - **Under an agent**, `/agents/{name}/lf.a2a.v1.A2AService/{Method}` is the same service for
//!   that agent (the route names it, as on the JSON bindings' routes): for a proxy that prefixes
//!   gRPC paths (nginx's `rewrite` before `grpc_pass`), and for clients that send no tenant.
//! - **Towards agents**: the agent's own gRPC address (`[[agents]] grpc_url`, else `url`'s
//!   scheme and host with the port of the card's interface: never a host the card names), its
//!   interface's tenant in every request, the answer's status read from its trailers.

mod decode;

use std::borrow::Cow;

use a2a_grpc::{frame, json, status};
use bytes::Bytes;
use hyper::body::Frame;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::http::response::Parts;
use hyper::{HeaderMap, Method as Verb, Response, StatusCode};
use serde_json::Value;

use super::{Echo, Form, Read, Sent, Written};
use crate::config::AgentConfig;
use crate::http::a2a::frame::{from_api, read_neutral, Neutral};
use crate::http::body::Body;
use crate::http::error::{ApiError, Code};
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::stream::frame_json;
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method, Reply};
use crate::stream::framing::{Decoder, Frames, Framing};
use crate::upstream::MAX_AGENT_JSON;

/// A2A 1.0 over gRPC.
#[derive(Debug, Clone, Copy)]
pub struct V1Grpc;

/// The largest request message a client may send (the body limit, `max_body_bytes`, applies
/// first: this is the frame's own bound).
const MAX_REQUEST: usize = 16 << 20;

/// Whether `path` is a method of A2A's gRPC service, 1.0's or 0.3's (which is refused).
pub fn is_service_path(path: &str) -> bool {
    path.strip_prefix('/').is_some_and(is_service_tail)
}

/// [`is_service_path`] of a path without its leading `/` (the tail under `/agents/{name}/`).
pub fn is_service_tail(tail: &str) -> bool {
    tail.starts_with(&a2a_grpc::SERVICE_PATH[1..])
        || tail.starts_with(&a2a_grpc::V0_3_SERVICE_PATH[1..])
}

impl Form for V1Grpc {
    fn label(&self) -> &'static str {
        "GRPC"
    }

    fn version_label(&self) -> &'static str {
        crate::protocol::a2a::version::SERVED
    }

    /// The gateway's listener (an absolute URL, as a2a.proto asks), the agent's name as tenant.
    fn interface(&self, at: &super::At<'_>) -> Value {
        serde_json::json!({"url": at.origin, "protocolBinding": "GRPC", "tenant": at.name,
            "protocolVersion": "1.0"})
    }

    fn takes_body(&self, verb: &Verb) -> Result<bool, ApiError> {
        super::post_only(verb)
    }

    fn reads_type(&self, content_type: &str) -> bool {
        is_grpc(content_type)
    }

    fn media_types(&self) -> &'static str {
        "application/grpc"
    }

    fn needs_type(&self) -> bool {
        true
    }

    /// A request is gRPC by its content type: anything else at the service's path gets the
    /// gateway's plain HTTP errors (401, 415...), as a gRPC server answers what is not gRPC.
    fn speaks(&self, headers: &HeaderMap) -> bool {
        headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(is_grpc)
    }

    /// `tail`: the request's path, `/lf.a2a.v1.A2AService/{Method}` (or, under an agent,
    /// without the leading `/`); the body one message.
    fn read(&self, _: &Verb, tail: &str, _: Option<&str>, body: &[u8]) -> Read {
        let refused = |e: A2aError| Read::Refused(e, Echo(None));
        let tail = tail.strip_prefix('/').unwrap_or(tail);
        let Some(name) = tail.strip_prefix(&a2a_grpc::SERVICE_PATH[1..]) else {
            return refused(A2aError::new(
                ErrorKind::MethodNotFound,
                "A2A 0.3's gRPC service (a2a.v1.A2AService) is not served here: call lf.a2a.v1.A2AService (A2A 1.0)",
            ));
        };
        let (Some(rpc), Some(method)) = (a2a_grpc::rpc(name), Method::parse(name)) else {
            return refused(A2aError::new(
                ErrorKind::MethodNotFound,
                format!(
                    "lf.a2a.v1.A2AService has no method {:?}",
                    name.chars().take(64).collect::<String>()
                ),
            ));
        };
        let message = match frame::read_one(body, MAX_REQUEST) {
            Ok(m) => m,
            Err(e) => return refused(A2aError::new(ErrorKind::InvalidRequest, e.to_string())),
        };
        match json::to_json(&rpc.input, message) {
            Ok(Value::Object(params)) => Read::Call(Call::new(method, params), Echo(None)),
            Ok(_) => refused(A2aError::new(ErrorKind::InvalidRequest, "not a message")),
            Err(e) => refused(A2aError::new(ErrorKind::ParseError, e)),
        }
    }

    /// `a2a-version` metadata: absent is 1.0 here (the service's package is 1.0's).
    fn version(&self, headers: &HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
        match headers.get(crate::protocol::a2a::VERSION_HEADER) {
            None => Ok(()),
            Some(_) => super::v1_version(headers, query),
        }
    }

    fn deadline(&self, headers: &HeaderMap) -> Option<std::time::Duration> {
        headers
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(status::read_timeout)
    }

    fn answer(&self, _: &Echo, method: Method, res: Response<Body>) -> Response<Body> {
        let (mut parts, body) = res.into_parts();
        let kept = parts.extensions.remove::<Neutral>();
        let bytes = match &body {
            Body::Full(Some(b)) => b.clone(),
            _ => Bytes::new(),
        };
        let retry = retry_after(&parts.headers);
        let written = match kept {
            Some(Neutral(Err(e))) => Err(e),
            // The gateway's own bytes, read straight into the message (no JSON tree).
            _ if parts.status.is_success() => {
                let json: &[u8] = if bytes.is_empty() { b"{}" } else { &bytes };
                message(method, json)
            }
            _ => read_neutral(parts.status.as_u16(), &bytes).and_then(|v| {
                // A success read back from a replayed answer: written as it is.
                message(method, v.to_string().as_bytes())
            }),
        };
        let mut out = match written {
            Ok(m) => grpc_response(Body::trailed(frame::encode(&m), ok_trailers())),
            Err(e) => error_response(&e, retry),
        };
        for (name, value) in &parts.headers {
            if name.as_str().starts_with("idempotent-") {
                out.headers_mut().insert(name.clone(), value.clone());
            }
        }
        out
    }

    /// A gRPC status, but for a request no gRPC client sends (another HTTP method than POST, a
    /// content type that is not gRPC's): its plain HTTP 405 (with `Allow`) or 415, as gRPC's
    /// HTTP/2 mapping asks of a server.
    fn refusal(&self, e: ApiError) -> Response<Body> {
        if matches!(e.code, Code::MethodNotAllowed | Code::UnsupportedMediaType) {
            return e.into_response();
        }
        let retry = e
            .headers
            .iter()
            .find(|(n, _)| n == hyper::header::RETRY_AFTER)
            .and_then(|(_, v)| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(std::time::Duration::from_secs);
        let headers = e.headers.clone();
        let failure = from_api(e);
        let mut res = error_response(&failure.error, retry);
        for (name, value) in headers {
            if name == hyper::header::WWW_AUTHENTICATE {
                res.headers_mut().insert(name, value);
            }
        }
        res
    }

    fn framing(&self, _: &Echo) -> Framing {
        Framing::Form(&V1Grpc, None)
    }

    fn stream_response(&self, body: Body) -> Response<Body> {
        match body {
            // A stream of one event (a Message): it, then the status.
            Body::Full(Some(b)) => grpc_response(Body::trailed(b, ok_trailers())),
            other => grpc_response(other),
        }
    }

    /// `grpc_url` (an agent of one replica), or the replica's host at the card's gRPC port.
    fn origin<'a>(&self, base: &'a str, cfg: &'a AgentConfig, held: &HeldCard) -> Cow<'a, str> {
        match &cfg.grpc_url {
            Some(u) => Cow::Borrowed(u),
            None => Cow::Owned(agent_origin(base, &held.interface.url)),
        }
    }

    /// The method's path at the agent's gRPC origin, the message with the agent's own tenant.
    fn request(
        &self,
        origin: &str,
        held: &HeldCard,
        call: &Call,
        _written: Option<&[u8]>,
    ) -> Result<Written, ApiError> {
        let name = call.method.as_str();
        let rpc = a2a_grpc::rpc(name)
            .ok_or_else(|| ApiError::new(Code::InvalidRequest, format!("no gRPC method {name}")))?;
        let mut params = call.params.clone();
        match &held.interface.tenant {
            Some(t) => params.insert("tenant".to_owned(), Value::from(t.as_str())),
            None => params.remove("tenant"),
        };
        let m = json::to_bytes(&rpc.input, &Value::Object(params))
            .map_err(|e| ApiError::new(Code::InvalidRequest, e))?;
        let url = format!("{origin}{}{name}", a2a_grpc::SERVICE_PATH);
        let url = hyper::Uri::try_from(url).map_err(super::unbuildable)?;
        Ok(Written {
            verb: Verb::POST,
            url,
            body: frame::encode(&m),
            sent: Sent {
                form: &V1Grpc,
                id: None,
            },
        })
    }

    fn agent_headers(&self, headers: &mut HeaderMap) {
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static(a2a_grpc::CONTENT_TYPE),
        );
        headers.insert(hyper::header::TE, HeaderValue::from_static("trailers"));
        headers.remove(hyper::header::ACCEPT);
        headers.insert(
            HeaderName::from_static("grpc-accept-encoding"),
            HeaderValue::from_static("identity"),
        );
        super::v1_agent_headers(headers);
    }

    /// The status from the answer's trailers (the transport folds them into `parts`), or from
    /// its head (a trailers-only answer); the message of a success read into its ProtoJSON.
    fn read_answer(&self, _: &Sent, call: &Call, parts: &Parts, body: &[u8]) -> Reply {
        let Some(code) = grpc_status(&parts.headers) else {
            return Err(super::transport(parts.status.as_u16()));
        };
        if code != status::OK {
            return Err(super::the_agents(agent_error(&parts.headers, code)));
        }
        let rpc = a2a_grpc::rpc(call.method.as_str()).ok_or_else(|| bad("no such method"))?;
        let message = frame::read_one(body, MAX_AGENT_JSON).map_err(|e| bad(&e.to_string()))?;
        json::to_json(&rpc.output, message).map_err(|e| bad(&e))
    }

    /// `data`: a StreamResponse's ProtoJSON, or (`error`) the final status as the HTTP+JSON
    /// binding writes an error (see [`decode::StreamDecoder`]).
    fn read_event(&self, _: &Sent, _: Method, data: &[u8], error: bool) -> Reply {
        let v = crate::protocol::json::parse(data).map_err(|e| bad(&e.to_string()))?;
        if error {
            let status = v
                .pointer("/error/code")
                .and_then(Value::as_u64)
                .unwrap_or(500) as u16;
            let e = A2aError::from_status(status, &v).unwrap_or_else(|| bad("no status"));
            return Err(super::the_agents(e.the_agents_own()));
        }
        Ok(v)
    }

    fn is_stream(&self, headers: &HeaderMap) -> bool {
        headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(is_grpc)
            && grpc_status(headers).is_none()
    }

    fn stream_decoder(&self, max: usize) -> Box<dyn Decoder> {
        Box::new(decode::StreamDecoder::new(max))
    }
}

impl Frames for V1Grpc {
    /// The stored StreamResponse as one message (an event that is not one, never stored by
    /// the gateway, is skipped: an empty data frame).
    fn event(&self, _: Option<&str>, stored: &Bytes) -> Bytes {
        frame_json(stored)
            .and_then(|j| json::slice_to_bytes(&a2a_grpc::stream_response(), j).ok())
            .map_or_else(Bytes::new, |m| frame::encode(&m))
    }

    /// Not written as data: a gRPC stream's error is its status ([`Frames::last`]).
    fn error(&self, _: Option<&str>, _: &A2aError) -> Bytes {
        Bytes::new()
    }

    fn last(&self, _: Option<&str>, e: Option<&A2aError>) -> Option<Frame<Bytes>> {
        Some(Frame::trailers(match e {
            Some(e) => status_headers(e, None),
            None => ok_trailers(),
        }))
    }

    fn pings(&self) -> bool {
        false
    }
}

/// Whether a content type is gRPC's (`application/grpc`, `application/grpc+proto`).
fn is_grpc(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/grpc")
        || media.eq_ignore_ascii_case("application/grpc+proto")
}

/// The response message of `method` written from its ProtoJSON's bytes.
fn message(method: Method, json: &[u8]) -> Result<Vec<u8>, A2aError> {
    let rpc = a2a_grpc::rpc(method.as_str())
        .ok_or_else(|| A2aError::new(ErrorKind::MethodNotFound, method.as_str()))?;
    json::slice_to_bytes(&rpc.output, json).map_err(|e| A2aError::new(ErrorKind::InternalError, e))
}

/// A gRPC answer's head around `body`.
fn grpc_response(body: Body) -> Response<Body> {
    let mut res = Response::new(body);
    *res.status_mut() = StatusCode::OK;
    let h = res.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(a2a_grpc::CONTENT_TYPE),
    );
    h.insert(
        HeaderName::from_static("grpc-accept-encoding"),
        HeaderValue::from_static("identity"),
    );
    res
}

/// A trailers-only answer carrying `e`'s status.
fn error_response(e: &A2aError, retry: Option<std::time::Duration>) -> Response<Body> {
    let mut res = grpc_response(Body::empty());
    let status = status_headers(e, retry);
    res.headers_mut().extend(status);
    res
}

fn ok_trailers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("grpc-status", HeaderValue::from_static("0"));
    h
}

/// `grpc-status`, `grpc-message` and `grpc-status-details-bin` of `e`: its google.rpc.Status
/// as the HTTP+JSON binding writes it, but UNIMPLEMENTED for a method the service lacks
/// (gRPC's own convention), and a RetryInfo when `retry` is known.
fn status_headers(e: &A2aError, retry: Option<std::time::Duration>) -> HeaderMap {
    let mut body = e.to_status();
    if e.kind == ErrorKind::MethodNotFound {
        body["error"]["status"] = Value::from("UNIMPLEMENTED");
    }
    let w = status::write(&body, retry);
    let mut h = HeaderMap::new();
    h.insert("grpc-status", HeaderValue::from(w.code));
    if let Ok(v) = HeaderValue::from_str(&w.message) {
        h.insert("grpc-message", v);
    }
    if let Ok(v) = HeaderValue::from_str(&w.details_bin) {
        h.insert("grpc-status-details-bin", v);
    }
    h
}

/// `Retry-After` in seconds, as a neutral answer carries it.
fn retry_after(h: &HeaderMap) -> Option<std::time::Duration> {
    h.get(hyper::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(std::time::Duration::from_secs)
}

/// `grpc-status`, if the headers carry one.
fn grpc_status(h: &HeaderMap) -> Option<u32> {
    h.get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// An agent's non-OK status read as the A2A error its details say (a reason of the protocol's
/// domain is that error; anything else the agent's own).
fn agent_error(h: &HeaderMap, code: u32) -> A2aError {
    let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
    let (body, _) = status::read(
        code,
        text("grpc-message").unwrap_or(""),
        text("grpc-status-details-bin"),
    );
    A2aError::from_status(status::http_of(code), &body)
        .unwrap_or_else(|| bad("an unreadable status"))
        .the_agents_own()
}

fn bad(why: &str) -> A2aError {
    A2aError::invalid_agent_response(vec![crate::protocol::Violation::new(
        "",
        "grpc/answer",
        why,
    )])
}

/// A gRPC agent's origin without `grpc_url`: the configured `url`'s scheme and host (never
/// the card's host) with the port of the card's gRPC interface URL (`host:port` or an
/// absolute URL); the URL's own port when the card names none.
fn agent_origin(url: &str, card_url: &str) -> String {
    let configured = url::Url::parse(url).ok();
    let port = card_port(card_url).or_else(|| {
        configured
            .as_ref()
            .and_then(url::Url::port_or_known_default)
    });
    match configured {
        Some(u) => {
            let host = match u.host() {
                Some(url::Host::Ipv6(a)) => format!("[{a}]"),
                Some(h) => h.to_string(),
                None => String::new(),
            };
            match port {
                Some(p) => format!("{}://{host}:{p}", u.scheme()),
                None => format!("{}://{host}", u.scheme()),
            }
        }
        None => url.to_owned(),
    }
}

/// The port a card's gRPC interface URL names: `host:port`, or an absolute URL's.
fn card_port(card_url: &str) -> Option<u16> {
    if let Ok(u) = url::Url::parse(card_url) {
        if u.host().is_some() {
            return u.port_or_known_default();
        }
    }
    // `host:port` (a2a-sdk's gRPC examples) parses as a URL of scheme `host`.
    card_url
        .rsplit_once(':')
        .and_then(|(_, p)| p.trim_end_matches('/').parse().ok())
}

#[cfg(test)]
mod tests;
