//! Answers on the official A2A routes, in the client's binding.
//!
//! Every operation answers one *neutral* response first: the HTTP+JSON binding's own answer
//! (200 and the response message, or a google.rpc.Status under its §5.4 status), which is also
//! what an idempotent SendMessage keeps for its replays, whatever binding the retry comes in.
//! [`reframe`] then turns it into the client's binding: unchanged for REST, one JSON-RPC
//! response carrying the client's id (HTTP 200) for JSON-RPC.
//!
//! The gateway's own errors ([`ApiError`], typed where they arise) become A2A errors here, in
//! one place ([`from_api`]): a TASK_NOT_FOUND is the protocol's TaskNotFoundError, an agent's
//! answer over the bound is InvalidAgentResponseError, and the rest keep their code as the
//! ErrorInfo `reason` in the domain `a2a-gateway`. Refusals before admission ([`refusal`]) keep
//! their HTTP status on both bindings, with `id: null` on JSON-RPC.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{Map, Value};

use crate::http::body::Body;
use crate::http::error::{ApiError, Code};
use crate::protocol::a2a::jsonrpc::{self, RpcId};
use crate::protocol::a2a::{A2aError, ErrorKind, Method, Reply, A2A_JSON};
use crate::protocol::json;

/// How the client speaks.
#[derive(Debug, Clone)]
pub enum Front {
    /// HTTP+JSON under `/agents/{name}/`.
    Rest,
    /// JSON-RPC, with the id to echo.
    JsonRpc(RpcId),
}

impl Front {
    /// The metric label of the binding.
    pub fn label(&self) -> &'static str {
        match self {
            Front::Rest => "HTTP+JSON",
            Front::JsonRpc(_) => "JSONRPC",
        }
    }
}

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
/// [`reframe`] keeps its HTTP status on JSON-RPC too, as every refusal at admission keeps it
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
struct KeepStatus;

/// What a neutral answer was written from, kept beside its body: its error, so that reframing
/// it for a JSON-RPC client does not read the body back (a success's body is the JSON-RPC
/// result as it is). A replayed answer (from the ledger's key store) has none: its body is read.
#[derive(Clone, Debug)]
pub struct Neutral(pub Result<(), A2aError>);

/// The neutral answer `res` in the client's binding. A success's JSON-RPC response is written
/// around the neutral body's bytes (the response message is not written again).
pub fn reframe(res: Response<Body>, front: &Front, method: Method) -> Response<Body> {
    let Front::JsonRpc(id) = front else {
        let (mut parts, body) = res.into_parts();
        parts.extensions.remove::<Neutral>();
        return Response::from_parts(parts, body);
    };
    let (mut parts, body) = res.into_parts();
    let kept = parts.extensions.remove::<Neutral>();
    let status = match parts.extensions.remove::<KeepStatus>() {
        Some(KeepStatus) => parts.status,
        None => StatusCode::OK,
    };
    let bytes = match &body {
        Body::Full(Some(b)) => b.clone(),
        _ => Bytes::new(),
    };
    let success = parts.status.is_success();
    let mut out = if success && !method.answers_empty() && !bytes.is_empty() {
        let mut w = Vec::with_capacity(bytes.len() + 48);
        w.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        // An id is a string or an integer: writing it cannot fail.
        let _ = serde_json::to_writer(&mut w, id);
        w.extend_from_slice(br#","result":"#);
        w.extend_from_slice(&bytes);
        w.push(b'}');
        let mut out = Response::new(Body::full(w));
        out.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        out
    } else {
        let reply = match kept {
            Some(Neutral(Err(e))) => Err(e),
            _ => read_neutral(parts.status.as_u16(), &bytes),
        };
        let envelope = match reply {
            Ok(v) => {
                let result = if method.answers_empty() {
                    Value::Null
                } else {
                    v
                };
                serde_json::json!({"jsonrpc": "2.0", "id": id.to_value(), "result": result})
            }
            Err(e) => jsonrpc::error_response(Some(id), &e),
        };
        json_response(status, "application/json", &envelope)
    };
    copy_headers(&parts.headers, out.headers_mut());
    out
}

/// The headers of a neutral answer that every framing keeps: `Retry-After`,
/// `WWW-Authenticate` and an idempotent replay's mark.
fn copy_headers(from: &hyper::HeaderMap, to: &mut hyper::HeaderMap) {
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
/// and headers kept, the body a google.rpc.Status, or a JSON-RPC error with `id: null`.
pub fn refusal(e: ApiError, jsonrpc: bool) -> Response<Body> {
    let status = e.code.status();
    let unauthorized = e.code == Code::Unauthorized;
    let Failure { error, headers } = from_api(e);
    let body = if jsonrpc {
        jsonrpc::error_response(None, &error)
    } else {
        error.to_status()
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let rpc = reframe(
            rest,
            &Front::JsonRpc(RpcId::Int(7.into())),
            Method::SendMessage,
        );
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
        let rpc = reframe(
            rest,
            &Front::JsonRpc(RpcId::Int(3.into())),
            Method::SendMessage,
        );
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
        let rpc = reframe(
            res,
            &Front::JsonRpc(RpcId::Int(9.into())),
            Method::SubscribeToTask,
        );
        let (status, v) = body(rpc);
        assert_eq!(status, 429);
        assert_eq!(v["id"], 9);
        assert_eq!(v["error"]["data"][0]["reason"], "TOO_MANY_STREAMS");
        assert_eq!(v["error"]["data"][0]["metadata"]["max_streams"], "1");
        let rest = slot_refused(
            Method::SubscribeToTask,
            ApiError::new(Code::TooManyStreams, "full"),
        );
        let rest = reframe(rest, &Front::Rest, Method::SubscribeToTask);
        assert_eq!(rest.status(), 429);
        // Another refusal after the call is read stays in-band on JSON-RPC.
        let forbidden = slot_refused(
            Method::SubscribeToTask,
            ApiError::new(Code::Forbidden, "no"),
        );
        let forbidden = reframe(
            forbidden,
            &Front::JsonRpc(RpcId::Int(9.into())),
            Method::SubscribeToTask,
        );
        assert_eq!(forbidden.status(), 200);
    }

    #[test]
    fn refusals_keep_their_status_and_answer_id_null() {
        let (status, v) = body(refusal(
            ApiError::new(Code::Unauthorized, "who are you"),
            true,
        ));
        assert_eq!(status, 401);
        assert_eq!(v["id"], Value::Null);
        assert_eq!(v["error"]["data"][0]["reason"], "UNAUTHORIZED");
        let res = refusal(ApiError::new(Code::Unauthorized, "who"), false);
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
        for front in [Front::Rest, Front::JsonRpc(RpcId::Int(3.into()))] {
            let mut res = neutral(Method::GetTask, Err(agents.clone().into()));
            assert!(withhold(&mut res, "echo"));
            let (status, v) = body(reframe(res, &front, Method::GetTask));
            let text = v.to_string();
            assert!(
                !text.contains("18103") && text.contains("TASK_NOT_FOUND"),
                "{text}"
            );
            match front {
                Front::Rest => assert_eq!((status, &v["error"]["code"]), (404, &json!(404))),
                Front::JsonRpc(_) => {
                    assert_eq!((status, &v["error"]["code"]), (200, &json!(-32001)))
                }
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
}
