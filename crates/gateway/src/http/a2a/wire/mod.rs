//! The wire forms of A2A. A wire form is one version of the protocol over one binding: A2A 1.0
//! over JSON-RPC ([`v1_jsonrpc`]), over HTTP+JSON ([`v1_http_json`]) and over gRPC
//! ([`v1_grpc`]), A2A 0.3 over JSON-RPC ([`v0_3_jsonrpc`]) and over HTTP+JSON
//! ([`v0_3_http_json`]). Each is one module of the same
//! shape, implementing [`Form`] both ways:
//!
//! - **a client's side**: a request read into the one neutral operation (`protocol::a2a::Call`,
//!   and the [`Echo`] its answers carry back), and the neutral answer, error and stream event
//!   written back in the form;
//! - **an agent's side**: an operation written as a request in the agent's form ([`Written`]),
//!   and the agent's answers and stream events read back into the neutral form through what was
//!   sent ([`Sent`]).
//!
//! Everything else on the A2A path (ownership, the ledger, idempotency, streams, push, limits,
//! metrics) works on the neutral operation and answer: translating between any client's form
//! and any agent's is a pair of these modules, never a branch. The one place a form is chosen
//! is here: [`of_route`] for a client (from the route it called), [`of_interface`] for an agent
//! (from the interface its card offers). No code outside `wire/` names a form:
//! docs/architecture.md gives the grep that holds it.
//!
//! The neutral answer is a response whose body is the operation's response message (or a
//! google.rpc.Status under the error's HTTP status), its typed error kept beside it
//! (`frame::Neutral`): what an idempotent SendMessage keeps for its replays, whatever form the
//! retry comes in. A form writes it out ([`Form::answer`]).

pub mod v0_3_http_json;
pub mod v0_3_jsonrpc;
pub mod v1_grpc;
pub mod v1_http_json;
pub mod v1_jsonrpc;

use std::fmt;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::http::response::Parts;
use hyper::{HeaderMap, Method as Verb, Response, Uri};

use crate::http::body::Body;
use crate::http::error::{ApiError, Code};
use crate::protocol::a2a::card::{Binding, ProtocolVersion};
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method, Reply};
use crate::protocol::node::{Json, Node};
use crate::stream::framing::Framing;
use serde_json::Value;

use self::v1_jsonrpc::envelope::RpcId;

/// One version of A2A over one binding (see the module doc). Implemented by a unit struct per
/// form, used as `&'static dyn Form`.
pub trait Form: Sync + Send + fmt::Debug {
    /// Its `binding` label on `a2a_gateway_a2a_requests_total`.
    fn label(&self) -> &'static str;

    /// Its `version` label on `a2a_gateway_a2a_requests_total` (`1.0`, `0.3`).
    fn version_label(&self) -> &'static str;

    /// The interface a served card lists for clients of this form (see [`At`]).
    fn interface(&self, at: &At<'_>) -> Value;

    /// Whether a client's request with this HTTP method carries a body to read (a form whose
    /// every call is one method answers any other with its 405 here; a form of many routes,
    /// from [`Form::read`], `Read::NotAllowed`).
    fn takes_body(&self, verb: &Verb) -> Result<bool, ApiError>;

    /// Whether a client's body of this `Content-Type` is one the form reads (else 415).
    fn reads_type(&self, content_type: &str) -> bool {
        crate::protocol::a2a::is_json_media_type(content_type)
    }

    /// The media types [`Form::reads_type`] takes, for the 415's message.
    fn media_types(&self) -> &'static str {
        "application/a2a+json or application/json"
    }

    /// Whether a request of this form must name its media type even without a body (gRPC's
    /// every request does; a JSON form's bodiless POST may leave it out).
    fn needs_type(&self) -> bool {
        false
    }

    /// Whether a request to this form's route speaks the form at all, so that the gateway's
    /// refusals are written in it (`Route::errors`): a request that is not gRPC at gRPC's path
    /// gets the gateway's plain HTTP errors, not a gRPC status under HTTP 200.
    fn speaks(&self, _headers: &HeaderMap) -> bool {
        true
    }

    /// The deadline a client's request sets on its call, if its form has one (gRPC's
    /// `grpc-timeout`).
    fn deadline(&self, _headers: &HeaderMap) -> Option<std::time::Duration> {
        None
    }

    /// A stream's answer to a client around its body (its events framed by [`Form::framing`];
    /// a `Body::Full` is a stream of that one event): SSE's `text/event-stream`.
    fn stream_response(&self, body: Body) -> Response<Body> {
        crate::http::response::event_stream(body)
    }

    /// A client's request read into the neutral call (`tail`: the path under the agent's
    /// `/agents/{name}/`; `query` and `body` as they came).
    fn read(&self, verb: &Verb, tail: &str, query: Option<&str>, body: &[u8]) -> Read;

    /// Whether the version a client's request names (`A2A-Version`, by header or else query
    /// parameter) is this form's: VersionNotSupportedError if not.
    fn version(&self, headers: &HeaderMap, query: Option<&str>) -> Result<(), A2aError>;

    /// The neutral answer to a call of `method` as this form answers it.
    fn answer(&self, echo: &Echo, method: Method, neutral: Response<Body>) -> Response<Body>;

    /// A refusal before a call was read (admission, the body's size or type, a route's own
    /// 404/405): its HTTP status and headers kept, its body the form's error.
    fn refusal(&self, e: ApiError) -> Response<Body>;

    /// How a subscriber that called in this form reads a stream's events.
    fn framing(&self, echo: &Echo) -> Framing;

    /// Where the agent of `cfg` is called in this form: the base URL of the replica chosen
    /// (`base`: one of its configured `url`s; a card names public hosts, and must never steer
    /// the gateway), or for gRPC its gRPC address.
    fn origin<'a>(
        &self,
        base: &'a str,
        _cfg: &'a crate::config::AgentConfig,
        _held: &HeldCard,
    ) -> std::borrow::Cow<'a, str> {
        std::borrow::Cow::Borrowed(base)
    }

    /// The request for `call` to an agent at `origin` over the interface of `held`, which is of
    /// this form; `written`: the call's params as serde_json wrote them already, if they were.
    fn request(
        &self,
        origin: &str,
        held: &HeldCard,
        call: &Call,
        written: Option<&[u8]>,
    ) -> Result<Written, ApiError>;

    /// The headers this form's requests to an agent carry beyond the gateway's own (the
    /// version it speaks: both SDK servers read `A2A-Version` as a header only, and
    /// @a2a-js/sdk's takes exactly the strings its card lists).
    fn agent_headers(&self, headers: &mut HeaderMap);

    /// The agent's answer to a request of this form read back: the response message, or the
    /// agent's error (one in the gateway's own domain kept as the agent's, [`the_agents`]).
    fn read_answer(&self, sent: &Sent, call: &Call, parts: &Parts, body: &[u8]) -> Reply;

    /// [`Form::read_answer`], a success read in place where the form can (its strings borrowed
    /// from `body`: SendMessage's answer, checked, recorded and relayed without a tree).
    fn read_in_place<'a>(
        &self,
        sent: &Sent,
        call: &Call,
        parts: &Parts,
        body: &'a [u8],
    ) -> Result<AgentAnswer<'a>, A2aError> {
        self.read_answer(sent, call, parts, body)
            .map(AgentAnswer::Tree)
    }

    /// One event of the agent's stream (its data; `error`: sent as `event: error`) read back.
    fn read_event(&self, sent: &Sent, method: Method, data: &[u8], error: bool) -> Reply;

    /// Whether the agent's SubscribeToTask stream starts with the Task (1.0, §3.1.6); 0.3's
    /// `tasks/resubscribe` streams only the events after it.
    fn task_first(&self) -> bool {
        true
    }

    /// A push the agent POSTed to the gateway (its body, parsed) read into a StreamResponse:
    /// 1.0's agents push one (or a Task) as it is in every binding.
    fn read_push(&self, event: Value) -> Result<Value, A2aError> {
        Ok(event)
    }

    /// Whether an agent's answer (its head) to a stream request is the stream, not an error
    /// answered instead: SSE's `text/event-stream`.
    fn is_stream(&self, headers: &HeaderMap) -> bool {
        crate::stream::is_event_stream(headers)
    }

    /// How the agent's stream is cut into events (events at most `max` bytes): SSE's parser.
    fn stream_decoder(&self, max: usize) -> Box<dyn crate::stream::framing::Decoder> {
        Box::new(crate::protocol::sse::Parser::new(max))
    }
}

/// Where a served card's interfaces point, for one agent.
pub struct At<'a> {
    /// The agent's routes, `{public base}/agents/{name}`.
    pub root: &'a str,
    /// The gateway's listener as an absolute origin, `scheme://host:port` (gRPC's address).
    pub origin: &'a str,
    /// The agent's name (gRPC's tenant).
    pub name: &'a str,
}

/// What a client's form echoes in every answer to one request: a JSON-RPC request's id, or
/// nothing. Opaque outside the forms.
#[derive(Debug, Clone, Default)]
pub struct Echo(Option<RpcId>);

/// How the client of one request speaks: its form, and what the answers echo.
#[derive(Debug, Clone)]
pub struct Front {
    /// The client's form.
    pub form: &'static dyn Form,
    /// What its answers echo.
    pub echo: Echo,
}

impl Front {
    /// The metric label of the client's form.
    pub fn label(&self) -> &'static str {
        self.form.label()
    }

    /// The metric label of the client's version.
    pub fn version_label(&self) -> &'static str {
        self.form.version_label()
    }

    /// The neutral answer to a call of `method`, written for this client.
    pub fn answer(&self, method: Method, neutral: Response<Body>) -> Response<Body> {
        self.form.answer(&self.echo, method, neutral)
    }

    /// How this client reads a stream's events.
    pub fn framing(&self) -> Framing {
        self.form.framing(&self.echo)
    }

    /// A stream's answer to this client around its body.
    pub fn stream_response(&self, body: Body) -> Response<Body> {
        self.form.stream_response(body)
    }
}

/// A client's request as its form read it.
pub enum Read {
    /// The neutral call, and what its answers echo.
    Call(Call, Echo),
    /// A request of the form that is no call (not JSON, a bad envelope, a route's bad
    /// parameters): the error, answered in the form with what it echoes.
    Refused(A2aError, Echo),
    /// A path of the form that takes another method: its 405, with `Allow`.
    NotAllowed(ApiError),
    /// No route of the form has this path: a plain 404.
    NotFound,
}

/// A request written for an agent in its form.
pub struct Written {
    /// The HTTP method.
    pub verb: Verb,
    /// Where it goes: the agent's configured origin and the interface's path.
    pub url: Uri,
    /// The body (empty for none).
    pub body: Bytes,
    /// What its answer is read back by.
    pub sent: Sent,
}

/// What one request to an agent was sent as: the agent's form, and what its answer must carry
/// (the gateway's own JSON-RPC id). Its answers and events are read back through it.
#[derive(Debug, Clone)]
pub struct Sent {
    form: &'static dyn Form,
    id: Option<RpcId>,
}

impl Sent {
    /// The agent's answer read back (see [`Form::read_answer`]).
    pub fn read(&self, call: &Call, parts: &Parts, body: &[u8]) -> Reply {
        self.form.read_answer(self, call, parts, body)
    }

    /// The agent's answer read back, in place where the form can (see [`Form::read_in_place`]).
    pub fn read_in_place<'a>(
        &self,
        call: &Call,
        parts: &Parts,
        body: &'a [u8],
    ) -> Result<AgentAnswer<'a>, A2aError> {
        self.form.read_in_place(self, call, parts, body)
    }

    /// One event of the agent's stream read back (see [`Form::read_event`]).
    pub fn read_event(&self, method: Method, data: &[u8], error: bool) -> Reply {
        self.form.read_event(self, method, data, error)
    }

    /// Whether the agent's SubscribeToTask starts with the Task (see [`Form::task_first`]).
    pub fn task_first(&self) -> bool {
        self.form.task_first()
    }

    /// Whether the agent's answer to a stream request is its stream (see [`Form::is_stream`]).
    pub fn is_stream(&self, headers: &HeaderMap) -> bool {
        self.form.is_stream(headers)
    }

    /// How the agent's stream is cut into events (see [`Form::stream_decoder`]).
    pub fn stream_decoder(&self, max: usize) -> Box<dyn crate::stream::framing::Decoder> {
        self.form.stream_decoder(max)
    }
}

/// What [`Sent::read_in_place`] gives: an answer read in place or as serde_json's tree.
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

/// The forms the gateway serves clients in, in the order a served card lists them (its
/// preference: an SDK that reads the card takes the first it speaks; a 0.3 client reads the
/// 0.3 fields, written from the first 0.3 interface: JSON-RPC, as 0.3's default transport).
const SERVED: [&dyn Form; 5] = [
    &v1_http_json::V1HttpJson,
    &v1_jsonrpc::V1JsonRpc,
    &v1_grpc::V1Grpc,
    &v0_3_jsonrpc::V03JsonRpc,
    &v0_3_http_json::V03HttpJson,
];

/// The served card's `supportedInterfaces` for one agent (see [`At`]).
pub fn served_interfaces(at: &At<'_>) -> Vec<Value> {
    SERVED.iter().map(|f| f.interface(at)).collect()
}

/// Whether `path` is a method of A2A's gRPC service (1.0's, or 0.3's, which is refused): a
/// route of its own, whatever agent its tenant names.
pub fn is_service_path(path: &str) -> bool {
    v1_grpc::is_service_path(path)
}

/// The form a client speaks at a gRPC service path ([`is_service_path`]).
pub fn of_service_path() -> &'static dyn Form {
    &v1_grpc::V1Grpc
}

/// The version a client's request names: `A2A-Version` by header, else query parameter
/// (§3.6); `None` when it names none.
pub fn asked_version<'a>(
    headers: &'a HeaderMap,
    query: Option<&str>,
) -> Option<std::borrow::Cow<'a, str>> {
    use crate::protocol::a2a::VERSION_HEADER;
    // The header borrowed (every SDK sends it so): no copy per request.
    match headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok()) {
        Some(h) => Some(std::borrow::Cow::Borrowed(h)),
        None => crate::protocol::percent::query_param(query, VERSION_HEADER)
            .map(std::borrow::Cow::Owned),
    }
}

/// The form a client speaks on a route, by the route and the version it asks (`asked`,
/// [`asked_version`]). The fleet's `/a2a` (`tail` `None`) is 1.0 JSON-RPC (0.3 has no tenant
/// to name the agent). Under an agent, `jsonrpc` (or `jsonrpc/`) is JSON-RPC and `v1/...`
/// 0.3's HTTP+JSON, each at 0.3 when the version is absent, empty or 0.3 (§3.6) and at 1.0
/// otherwise (whose version check then refuses what is not 1.0); `lf.a2a.v1.A2AService/...`
/// is gRPC (the agent's own, for a proxy that prefixes the path); every other path is 1.0's
/// HTTP+JSON. A 1.0 client's tenant named `v1` is therefore reached only with A2A-Version 1.0.
pub fn of_route(tail: Option<&str>, asked: Option<&str>) -> &'static dyn Form {
    let old = asked.is_none_or(|v| v.trim().is_empty() || crate::protocol::a2a::v0_3::is_v0_3(v));
    match tail {
        None => &v1_jsonrpc::V1JsonRpc,
        Some(t) if v1_grpc::is_service_tail(t) => &v1_grpc::V1Grpc,
        Some("jsonrpc" | "jsonrpc/") if old => &v0_3_jsonrpc::V03JsonRpc,
        Some("jsonrpc" | "jsonrpc/") => &v1_jsonrpc::V1JsonRpc,
        Some(t) if old && t.starts_with("v1/") => &v0_3_http_json::V03HttpJson,
        Some(_) => &v1_http_json::V1HttpJson,
    }
}

/// The form the gateway speaks to an agent over the interface its card offers.
pub fn of_interface(binding: Binding, version: ProtocolVersion) -> &'static dyn Form {
    match (binding, version) {
        (Binding::JsonRpc, ProtocolVersion::V1_0) => &v1_jsonrpc::V1JsonRpc,
        (Binding::HttpJson, ProtocolVersion::V1_0) => &v1_http_json::V1HttpJson,
        (Binding::JsonRpc, ProtocolVersion::V0_3) => &v0_3_jsonrpc::V03JsonRpc,
        (Binding::HttpJson, ProtocolVersion::V0_3) => &v0_3_http_json::V03HttpJson,
        // 0.3's gRPC (package a2a.v1) is never chosen (`card::choose_interface`).
        (Binding::Grpc, _) => &v1_grpc::V1Grpc,
    }
}

/// Whether a POST to `path` may subscribe to a task's stream in some form, its body deciding
/// (the lean transport reads such a POST's body before it chooses, `http::lean`).
pub fn may_post_subscribe(path: &str) -> bool {
    v1_jsonrpc::is_endpoint(path)
}

/// Whether the body of a POST that [`may_post_subscribe`] subscribes (anything else, or no
/// JSON, is hyper's).
pub fn posts_subscribe(body: &[u8]) -> bool {
    v1_jsonrpc::subscribes(body)
}

/// A2A 1.0's version check (§3.6), for the 1.0 forms: `A2A-Version` by header, else query
/// parameter, 1.0 with or without a patch part.
fn v1_version(headers: &HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
    use crate::protocol::a2a::{version, VERSION_HEADER};
    let header = headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok());
    let query = crate::protocol::percent::query_param(query, VERSION_HEADER);
    version::check(header, query.as_deref())
}

/// A neutral answer's reply, for a form that writes it anew (the 0.3 forms): a success is the
/// gateway's own bytes, read by serde_json's reader (the strict one judges what comes from
/// outside); an error is read back as `frame::read_neutral` reads it.
fn neutral_reply(status: hyper::StatusCode, body: &Body) -> crate::protocol::a2a::Reply {
    let bytes: &[u8] = match body {
        Body::Full(Some(b)) => b,
        _ => &[],
    };
    if status.is_success() {
        if let Ok(v) = serde_json::from_slice(bytes) {
            return Ok(v);
        }
    }
    crate::http::a2a::frame::read_neutral(status.as_u16(), bytes)
}

/// A2A 0.3's version check, for the 0.3 forms: absent, empty (§3.6: read as 0.3) or 0.3.
fn v0_3_version(headers: &HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
    match asked_version(headers, query) {
        Some(v) if !v.trim().is_empty() && !crate::protocol::a2a::v0_3::is_v0_3(&v) => {
            Err(A2aError::new(
                ErrorKind::VersionNotSupported,
                format!(
                    "A2A-Version {:?} is not supported here; this route serves 0.3 (and 1.0 with A2A-Version: 1.0)",
                    v.chars().take(32).collect::<String>()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// A 0.3 agent's push read into a StreamResponse, for the 0.3 forms: 0.3's SDK senders post
/// the bare Task of a2a.json, whatever the binding; a push already a StreamResponse (a 0.3
/// agent of a later SDK) is taken as it is.
fn v0_3_push(event: Value) -> Result<Value, A2aError> {
    use crate::protocol::a2a::v0_3::model::{event_in, Style};
    match event.get("kind") {
        Some(_) => {
            event_in(Style::Json, event).map_err(|v| A2aError::invalid_agent_response(vec![v]))
        }
        None => Ok(event),
    }
}

/// A2A 0.3's version header towards an agent, for the 0.3 forms (as a2a-sdk 1.3's client
/// sends it to a 0.3 agent; 0.3's SDK servers do not read it).
fn v0_3_agent_headers(headers: &mut HeaderMap) {
    headers.insert(
        HeaderName::from_static("a2a-version"),
        HeaderValue::from_static(crate::protocol::a2a::v0_3::VERSION),
    );
}

/// A2A 1.0's version header towards an agent, for the 1.0 forms.
fn v1_agent_headers(headers: &mut HeaderMap) {
    headers.insert(
        HeaderName::from_static("a2a-version"),
        HeaderValue::from_static(crate::protocol::a2a::version::SERVED),
    );
}

/// An error read from an agent's body: one in the gateway's own domain becomes an error of no
/// known kind in the domain `agent`, so that no agent can answer in the gateway's name (a fake
/// RATE_LIMITED, UNAUTHORIZED...).
pub fn the_agents(mut e: A2aError) -> A2aError {
    if let ErrorKind::Gateway { reason, status } = &e.kind {
        e.kind = ErrorKind::Other(Box::new(crate::protocol::a2a::error::OtherError {
            code: crate::protocol::a2a::error::GATEWAY_CODE,
            status: *status,
            reason: reason.clone(),
            domain: "agent".to_owned(),
        }));
    }
    e
}

/// An agent's HTTP failure that carries no A2A error: the gateway's AGENT_UNREACHABLE.
fn transport(status: u16) -> A2aError {
    A2aError::gateway(
        Code::AgentUnreachable.as_str(),
        502,
        format!("the agent answered HTTP {status} without an A2A error"),
    )
    .with_metadata("httpStatus", &status.to_string())
}

/// A URL the agent's request could not be built on.
fn unbuildable(e: impl fmt::Display) -> ApiError {
    ApiError::new(
        Code::AgentUnreachable,
        format!("cannot build the agent request: {e}"),
    )
}

/// `takes_body` of a form whose every call is one POST (JSON-RPC): its 405 for anything else.
fn post_only(verb: &Verb) -> Result<bool, ApiError> {
    if verb == Verb::POST {
        Ok(true)
    } else {
        Err(not_allowed(&["POST"]))
    }
}

/// The 405 of a route that takes only `allow`.
pub fn not_allowed(allow: &[&'static str]) -> ApiError {
    let list = allow.join(", ");
    ApiError::new(Code::MethodNotAllowed, format!("this route takes {list}")).with_header(
        hyper::header::ALLOW,
        hyper::header::HeaderValue::from_str(&list)
            .unwrap_or(hyper::header::HeaderValue::from_static("GET")),
    )
}

#[cfg(test)]
mod tests {
    use super::v1_http_json::V1HttpJson;
    use super::v1_jsonrpc::V1JsonRpc;
    use super::*;
    use crate::http::a2a::frame::*;
    use hyper::header::HeaderValue;
    use serde_json::json;

    fn rpc_front(id: i64) -> Front {
        Front {
            form: &V1JsonRpc,
            echo: Echo(Some(RpcId::Int(id.into()))),
        }
    }

    fn rest_front() -> Front {
        Front {
            form: &V1HttpJson,
            echo: Echo(None),
        }
    }

    /// The neutral answer `res` as `front`'s form writes it.
    fn reframe(res: Response<Body>, front: &Front, method: Method) -> Response<Body> {
        front.answer(method, res)
    }

    fn body(res: Response<Body>) -> (u16, Value) {
        let status = res.status().as_u16();
        let Body::Full(Some(b)) = res.into_body() else {
            panic!("a full body")
        };
        (status, serde_json::from_slice(&b).expect("json"))
    }

    #[test]
    fn a_gateway_error_keeps_its_code_status_and_retry_after_in_both_bindings() {
        let e = ApiError::new(Code::AgentBusy, "busy")
            .with_header(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
        let rest = neutral(Method::SendMessage, Err(from_api(e)));
        assert_eq!(rest.headers()["retry-after"], "1");
        let rpc = reframe(rest, &rpc_front(7), Method::SendMessage);
        assert_eq!(rpc.headers()["retry-after"], "1");
        let (status, v) = body(rpc);
        assert_eq!(status, 200);
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], -32000);
        assert_eq!(v["error"]["data"][0]["reason"], "AGENT_BUSY");
        assert_eq!(v["error"]["data"][0]["domain"], "a2a-gateway");
    }

    #[test]
    fn a_store_failure_is_a_gateway_error_over_both_bindings_without_the_stores_words() {
        let e = ApiError::from(crate::ledger::LedgerError::Store(
            crate::store::Failure::Oom,
        ));
        let rest = neutral(Method::SendMessage, Err(from_api(e)));
        assert_eq!(rest.status(), 503);
        assert_eq!(rest.headers()["retry-after"], "5");
        let rpc = reframe(rest, &rpc_front(3), Method::SendMessage);
        assert_eq!(rpc.headers()["retry-after"], "5");
        let (status, v) = body(rpc);
        assert_eq!(status, 200);
        assert_eq!(v["error"]["code"], -32000);
        assert_eq!(v["error"]["data"][0]["reason"], "STORE_UNAVAILABLE");
        let message = v["error"]["message"].as_str().expect("a message");
        assert!(message.starts_with("STORE_UNAVAILABLE: "), "{message}");
        assert!(
            !message.contains("OOM") && !message.contains("maxmemory"),
            "{message}"
        );
    }

    #[test]
    fn a_neutral_answer_read_back_is_the_reply_it_was_written_from() {
        // The create driver's AGENT_TIMEOUT, as a2a's Finish::refused writes it, and replayed.
        let timeout =
            ApiError::new(Code::AgentTimeout, "late").with_details(json!({"task_may_exist": true}));
        let res = neutral(Method::SendMessage, Err(from_api(timeout)));
        assert_eq!(res.status(), 504);
        let (status, v) = body(res);
        let e = read_neutral(status, v.to_string().as_bytes()).expect_err("an error");
        assert_eq!(e.kind.reason(), "AGENT_TIMEOUT");
        assert_eq!(e.kind.http_status(), 504);
        assert_eq!(e.metadata["task_may_exist"], "true");
        let not_found = A2aError::of(ErrorKind::TaskNotFound).to_status();
        let e = read_neutral(404, not_found.to_string().as_bytes()).expect_err("an error");
        assert_eq!(e.kind, ErrorKind::TaskNotFound);
        let ok = read_neutral(200, br#"{"task":{"id":"t"}}"#).expect("a result");
        assert_eq!(ok, json!({"task": {"id": "t"}}));
    }

    #[test]
    fn a_refused_stream_slot_keeps_429_over_json_rpc_with_the_clients_id() {
        let e = ApiError::new(Code::TooManyStreams, "full").with_details(json!({"max_streams": 1}));
        let res = slot_refused(Method::SubscribeToTask, e);
        let rpc = reframe(res, &rpc_front(9), Method::SubscribeToTask);
        let (status, v) = body(rpc);
        assert_eq!(status, 429);
        assert_eq!(v["id"], 9);
        assert_eq!(v["error"]["data"][0]["reason"], "TOO_MANY_STREAMS");
        assert_eq!(v["error"]["data"][0]["metadata"]["max_streams"], "1");
        let rest = slot_refused(
            Method::SubscribeToTask,
            ApiError::new(Code::TooManyStreams, "full"),
        );
        let rest = reframe(rest, &rest_front(), Method::SubscribeToTask);
        assert_eq!(rest.status(), 429);
        // Another refusal after the call is read stays in-band on JSON-RPC.
        let forbidden = slot_refused(
            Method::SubscribeToTask,
            ApiError::new(Code::Forbidden, "no"),
        );
        let forbidden = reframe(forbidden, &rpc_front(9), Method::SubscribeToTask);
        assert_eq!(forbidden.status(), 200);
    }

    #[test]
    fn refusals_keep_their_status_and_answer_id_null() {
        let (status, v) = body(V1JsonRpc.refusal(ApiError::new(Code::Unauthorized, "who are you")));
        assert_eq!(status, 401);
        assert_eq!(v["id"], Value::Null);
        assert_eq!(v["error"]["data"][0]["reason"], "UNAUTHORIZED");
        let res = V1HttpJson.refusal(ApiError::new(Code::Unauthorized, "who"));
        assert_eq!(res.headers()["www-authenticate"], "Bearer");
        let (status, v) = body(res);
        assert_eq!(status, 401);
        assert_eq!(v["error"]["status"], "UNAUTHENTICATED");
        assert_eq!(v["error"]["details"][0]["domain"], "a2a-gateway");
    }

    /// A neutral answer holding an agent's own error is withheld whole, in either binding; the
    /// gateway's own errors and successes are left alone.
    #[test]
    fn an_agents_error_is_withheld_in_both_bindings_and_nothing_else_is() {
        let leak = "http://127.0.0.1:18103/db?password=hunter2";
        let agents = A2aError::new(ErrorKind::TaskNotFound, format!("at {leak}")).the_agents_own();
        for front in [rest_front(), rpc_front(3)] {
            let mut res = neutral(Method::GetTask, Err(agents.clone().into()));
            assert!(withhold(&mut res, "echo"));
            let (status, v) = body(reframe(res, &front, Method::GetTask));
            let text = v.to_string();
            assert!(
                !text.contains("18103") && text.contains("TASK_NOT_FOUND"),
                "{text}"
            );
            match front.label() {
                "HTTP+JSON" => assert_eq!((status, &v["error"]["code"]), (404, &json!(404))),
                _ => assert_eq!((status, &v["error"]["code"]), (200, &json!(-32001))),
            }
        }
        let mut own = neutral(
            Method::GetTask,
            Err(A2aError::new(ErrorKind::TaskNotFound, "the gateway's").into()),
        );
        assert!(!withhold(&mut own, "echo"));
        let mut ok = neutral(Method::GetTask, Ok(json!({"id": "t"})));
        assert!(!withhold(&mut ok, "echo"));
        assert_eq!(body(ok).1, json!({"id": "t"}));
    }

    /// Each form frames a stored event and the gateway's ending of a stream its own way.
    #[test]
    fn streams_are_framed_in_each_form() {
        use crate::protocol::a2a::stream::event_frame;
        use crate::stream::framing::Frames;
        let stored = Bytes::from(event_frame(br#"{"statusUpdate":{"taskId":"t"}}"#));
        let rpc = V1JsonRpc.event(Some("7"), &stored);
        let data = std::str::from_utf8(&rpc).expect("utf8");
        let doc: serde_json::Value = serde_json::from_str(
            data.strip_prefix("data: ")
                .and_then(|d| d.strip_suffix("\n\n"))
                .expect("framed"),
        )
        .expect("json");
        assert_eq!(
            doc,
            json!({"jsonrpc": "2.0", "id": 7, "result": {"statusUpdate": {"taskId": "t"}}})
        );
        let ping = Bytes::from_static(crate::protocol::a2a::stream::PING);
        assert_eq!(V1JsonRpc.event(Some("7"), &ping), ping);
        assert_eq!(V1HttpJson.event(None, &stored), stored);
        let e = A2aError::gateway("DRAINING", 503, "the gateway is draining");
        let rpc = String::from_utf8(V1JsonRpc.error(Some("\"x\""), &e).to_vec()).expect("utf8");
        let data = rpc
            .strip_prefix("event: error\ndata: ")
            .expect("an error event");
        let doc: serde_json::Value = serde_json::from_str(data.trim_end()).expect("json");
        assert_eq!(doc["id"], "x");
        assert_eq!(doc["error"]["data"][0]["reason"], "DRAINING");
        let rest = String::from_utf8(V1HttpJson.error(None, &e).to_vec()).expect("utf8");
        let data = rest
            .strip_prefix("event: error\ndata: ")
            .expect("an error event");
        let doc: serde_json::Value = serde_json::from_str(data.trim_end()).expect("json");
        assert_eq!(doc["error"]["status"], "UNAVAILABLE");
        assert_eq!(doc["error"]["details"][0]["reason"], "DRAINING");
    }
}
