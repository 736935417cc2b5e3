//! The neutral answer of the official A2A routes, and the gateway's errors as A2A errors.
//!
//! Every operation answers one *neutral* response: 200 and the response message, or a
//! google.rpc.Status under its §5.4 status, the typed error kept beside it ([`Neutral`]). It
//! is also what an idempotent SendMessage keeps for its replays, whatever form the retry comes
//! in. The client's wire form writes it out (`wire::Form::answer`).
//!
//! The gateway's own errors ([`ApiError`], typed where they arise) become A2A errors here, in
//! one place ([`from_api`]): a TASK_NOT_FOUND is the protocol's TaskNotFoundError, an agent's
//! answer over the bound is InvalidAgentResponseError, and the rest keep their code as the
//! ErrorInfo `reason` in the domain `a2a-gateway`. Refusals before admission ([`refusal`]) keep
//! their HTTP status in every form.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{Map, Value};

use crate::http::body::Body;
use crate::http::error::{ApiError, Code};
use crate::protocol::a2a::{A2aError, ErrorKind, Method, Reply, A2A_JSON};
use crate::protocol::json;

/// An A2A error with the HTTP headers that go with it (`Retry-After`, `WWW-Authenticate`).
#[derive(Debug)]
pub struct Failure {
    /// The error (boxed: the rare path keeps `Result`s small).
    pub error: Box<A2aError>,
    /// Headers set on the answer, on either binding.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl From<A2aError> for Failure {
    fn from(error: A2aError) -> Failure {
        Failure {
            error: Box::new(error),
            headers: Vec::new(),
        }
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        from_api(e)
    }
}

impl From<crate::ledger::LedgerError> for Failure {
    fn from(e: crate::ledger::LedgerError) -> Failure {
        from_api(e.into())
    }
}

/// The gateway's error as an A2A error (see the module doc). ApiError `details` that are
/// scalars go into the ErrorInfo `metadata` as strings (its proto type is map<string, string>):
/// `task_may_exist` of an AGENT_TIMEOUT, say.
pub fn from_api(e: ApiError) -> Failure {
    let ApiError {
        code,
        message,
        details,
        headers,
    } = e;
    let mut error = gateway_error(code.as_str(), code.status().as_u16(), &message);
    if let Some(Value::Object(d)) = details {
        error.metadata = metadata_of(&d);
    }
    Failure {
        error: Box::new(error),
        headers,
    }
}

/// The A2A kind of the gateway's error `code` (its Clawpedia spelling) under `status`: the
/// protocol's own where one means the same, else the gateway's in its domain.
fn kind_of(code: &str, status: u16) -> ErrorKind {
    match code {
        "TASK_NOT_FOUND" => ErrorKind::TaskNotFound,
        "INVALID_JSON" => ErrorKind::ParseError,
        "AGENT_PROTOCOL_VIOLATION" => ErrorKind::InvalidAgentResponse,
        _ => ErrorKind::Gateway {
            reason: code.to_owned(),
            status,
        },
    }
}

/// The error of `code` with `message`; a gateway-domain one's message starts with its code,
/// since a client that does not read ErrorInfo (a2a-sdk's JSON-RPC transport keeps only the
/// code and message of an error it has no class for) still shows its user which it was.
fn gateway_error(code: &str, status: u16, message: &str) -> A2aError {
    match kind_of(code, status) {
        k @ ErrorKind::Gateway { .. } if !message.starts_with(code) => {
            A2aError::new(k, format!("{code}: {message}"))
        }
        k => A2aError::new(k, message),
    }
}

fn metadata_of(details: &Map<String, Value>) -> Map<String, Value> {
    details
        .iter()
        .filter_map(|(k, v)| {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Bool(_) | Value::Number(_) => v.to_string(),
                _ => return None,
            };
            Some((k.clone(), Value::String(s)))
        })
        .collect()
}

/// The neutral answer of `method` (the HTTP+JSON binding's, see the module doc).
pub fn neutral(method: Method, reply: Result<Value, Failure>) -> Response<Body> {
    match reply {
        Ok(v) => {
            let v = if method.answers_empty() {
                Value::Object(Map::new())
            } else {
                v
            };
            let mut res = json_response(StatusCode::OK, A2A_JSON, &v);
            res.extensions_mut().insert(Neutral(Ok(())));
            res
        }
        Err(f) => {
            let status = StatusCode::from_u16(f.error.kind.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut res = json_response(status, "application/json", &f.error.to_status());
            for (name, value) in f.headers {
                res.headers_mut().insert(name, value);
            }
            res.extensions_mut().insert(Neutral(Err(*f.error)));
            res
        }
    }
}

/// The neutral answer whose response message is already written: `json` is its JSON (a
/// SendMessageResponse built around the recorded Task's own bytes, say), so it is not written
/// twice.
pub fn neutral_written(json: Bytes) -> Response<Body> {
    let mut res = Response::new(Body::full(json));
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(A2A_JSON));
    res.extensions_mut().insert(Neutral(Ok(())));
    res
}

/// The neutral answer `res` for a caller that may not read agents' texts (without `metrics` or
/// `admin`, where clients are configured): an agent's own error becomes
/// [`A2aError::withheld`], its kind kept, its text gone (docs/security.md). Anything else is
/// left as it is. Whether it was withheld.
pub fn withhold(res: &mut Response<Body>, agent: &str) -> bool {
    let Some(w) = withheld_of(res, agent) else {
        return false;
    };
    *res.body_mut() = Body::full(serde_json::to_vec(&w.to_status()).unwrap_or_default());
    res.extensions_mut().insert(Neutral(Err(w)));
    true
}

/// The agent's own error a neutral answer holds, withheld (`None` for any other answer).
pub fn withheld_of(res: &Response<Body>, agent: &str) -> Option<A2aError> {
    match res.extensions().get::<Neutral>() {
        Some(Neutral(Err(e))) if e.agents => Some(e.withheld(agent)),
        _ => None,
    }
}

/// A refusal of a stream's slot (`max_streams`, 429 TOO_MANY_STREAMS), known only once a
/// JSON-RPC call is read (its method says it streams): the neutral answer, marked so that
/// the JSON-RPC form keeps its HTTP status too, as every refusal at admission keeps it
/// (a REST stream's slot is taken at admission, and refused there with 429), with the client's
/// id since the call was read. Any other refusal is in-band as before.
pub fn slot_refused(method: Method, e: ApiError) -> Response<Body> {
    let keep = e.code == Code::TooManyStreams;
    let mut res = neutral(method, Err(from_api(e)));
    if keep {
        res.extensions_mut().insert(KeepStatus);
    }
    res
}

/// Beside a neutral answer: its HTTP status is kept on every binding (see [`slot_refused`]).
#[derive(Clone, Copy, Debug)]
pub struct KeepStatus;

/// What a neutral answer was written from, kept beside its body: its error, so that reframing
/// it for a JSON-RPC client does not read the body back (a success's body is the JSON-RPC
/// result as it is). A replayed answer (from the ledger's key store) has none: its body is read.
#[derive(Clone, Debug)]
pub struct Neutral(pub Result<(), A2aError>);

/// The headers of a neutral answer that every framing keeps: `Retry-After`,
/// `WWW-Authenticate` and an idempotent replay's mark.
pub fn copy_headers(from: &hyper::HeaderMap, to: &mut hyper::HeaderMap) {
    for name in [hyper::header::RETRY_AFTER, hyper::header::WWW_AUTHENTICATE] {
        if let Some(v) = from.get(&name) {
            to.insert(name, v.clone());
        }
    }
    for (name, value) in from {
        if name.as_str().starts_with("idempotent-") {
            to.insert(name.clone(), value.clone());
        }
    }
}

/// A neutral answer read back as a reply (one replayed from the key store, whose reply is not
/// beside it).
pub fn read_neutral(status: u16, body: &[u8]) -> Reply {
    let doc = json::parse(body).unwrap_or(Value::Null);
    if (200..300).contains(&status) {
        return Ok(doc);
    }
    Err(A2aError::from_status(status, &doc).unwrap_or_else(|| {
        A2aError::gateway("INTERNAL", status, "an answer the gateway could not read")
    }))
}

/// A refusal before admission, or a route's own 404/405 (see the module doc): its HTTP status
/// and headers kept, the body the error as the route's form writes it (`write`).
pub fn refusal(e: ApiError, write: impl FnOnce(&A2aError) -> Value) -> Response<Body> {
    let status = e.code.status();
    let unauthorized = e.code == Code::Unauthorized;
    let Failure { error, headers } = from_api(e);
    let body = write(&error);
    let mut res = json_response(status, "application/json", &body);
    for (name, value) in headers {
        res.headers_mut().insert(name, value);
    }
    if unauthorized {
        res.headers_mut()
            .entry(hyper::header::WWW_AUTHENTICATE)
            .or_insert(HeaderValue::from_static("Bearer"));
    }
    res
}

/// A JSON answer.
pub fn json_response(status: StatusCode, content_type: &'static str, v: &Value) -> Response<Body> {
    let body = serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec());
    let mut res = Response::new(Body::full(body));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    res
}

/// PushNotificationNotSupportedError: push configs are not served yet (the served card says
/// `pushNotifications: false`).
pub fn push_not_supported() -> Failure {
    A2aError::new(
        ErrorKind::PushNotificationNotSupported,
        "push notifications are not served by this gateway yet (capabilities.pushNotifications is false)",
    )
    .into()
}
