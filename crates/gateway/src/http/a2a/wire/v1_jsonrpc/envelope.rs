//! The JSON-RPC 2.0 binding (§9): the client's request envelope, the answers framed with the
//! client's id, the gateway's own request towards a JSON-RPC agent, and the agent's response.
//!
//! Strict on purpose (issue 26): one document read by [`crate::protocol::json::parse`] (a
//! duplicate key is a parse error, -32700); a batch is one -32600 with `id: null`; a request
//! without `id` is -32600 (notifications are not served: every A2A method has an answer); `id` is
//! a string of at most [`MAX_ID_BYTES`] bytes or an integer, and is echoed back as the same JSON
//! value (the same string, the same integer: @a2a-js/sdk compares ids with `===` and uses
//! integers from 1, a2a-sdk uses UUID strings); `params` absent is `{}`, anything but an object is
//! -32602. The params' proto field names (`message_id`) are read as their JSON names
//! ([`crate::protocol::a2a::spelling`]). Towards agents the gateway uses its own ids and checks the agent
//! echoes them.

use serde_json::{json, Map, Value};

use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method, Reply};
use crate::protocol::json;
use crate::protocol::node::{Json, Members, Node};
use crate::protocol::Violation;

/// The longest JSON-RPC id the gateway echoes: a string's UTF-8 bytes, or an integer's digits.
pub const MAX_ID_BYTES: usize = 128;

/// A JSON-RPC request id as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcId {
    /// A string id.
    Str(String),
    /// An integer id, kept as serde_json read it (i64 or u64), so it is written back the same.
    Int(serde_json::Number),
}

impl serde::Serialize for RpcId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RpcId::Str(v) => s.serialize_str(v),
            RpcId::Int(n) => n.serialize(s),
        }
    }
}

impl RpcId {
    /// The id as a JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            RpcId::Str(s) => Value::from(s.as_str()),
            RpcId::Int(n) => Value::Number(n.clone()),
        }
    }

    fn from_value(v: &Value) -> Result<RpcId, &'static str> {
        match v {
            Value::String(s) if s.len() <= MAX_ID_BYTES => Ok(RpcId::Str(s.clone())),
            Value::String(_) => Err("id is longer than 128 bytes"),
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(RpcId::Int(n.clone())),
            Value::Number(_) => Err("id must be a string or an integer, not a fraction"),
            Value::Null => Err("id must be a string or an integer, not null"),
            _ => Err("id must be a string or an integer"),
        }
    }
}

/// A client's request: its id and the call.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id to echo.
    pub id: RpcId,
    /// What it asks.
    pub call: Call,
}

/// A request the gateway refuses: the error, and the id to answer with (`None` is `id: null`,
/// when the id could not be read).
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// The client's id, when it was valid.
    pub id: Option<RpcId>,
    /// Why (boxed: a refusal is the rare path).
    pub error: Box<A2aError>,
}

fn refused(id: Option<RpcId>, kind: ErrorKind, message: impl Into<String>) -> Refused {
    Refused {
        id,
        error: Box::new(A2aError::new(kind, message)),
    }
}

/// Reads a client's request body (A2A 1.0's method names: a 0.3 name is
/// VersionNotSupportedError, anything else MethodNotFound).
pub fn parse_request(body: &[u8]) -> Result<Request, Refused> {
    let Envelope {
        id,
        method,
        mut params,
    } = read_envelope(body, v1_method)?;
    // Proto names (`message_id`) read as JSON names, once, before anything looks at a field.
    if let Err(e) = crate::protocol::a2a::spelling::to_json_names(method, &mut params) {
        return Err(Refused {
            id: Some(id),
            error: Box::new(e),
        });
    }
    Ok(Request {
        id,
        call: Call::new(method, params),
    })
}

/// The operation a 1.0 method name is.
fn v1_method(name: &str) -> Result<Method, A2aError> {
    if let Some(m) = Method::parse(name) {
        return Ok(m);
    }
    let shown: String = name.chars().take(64).collect();
    if crate::protocol::a2a::v0_3::method_of(name).is_some() {
        return Err(A2aError::new(
            ErrorKind::VersionNotSupported,
            format!("{shown:?} is an A2A 0.3 method, and this request is A2A 1.0: send it without A2A-Version 1.0"),
        ));
    }
    Err(A2aError::new(
        ErrorKind::MethodNotFound,
        format!("Method not found: {shown:?}"),
    ))
}

/// A request envelope as read: its id, the operation its method names, and its params as
/// they came.
#[derive(Debug)]
pub struct Envelope {
    /// The id to echo.
    pub id: RpcId,
    /// The operation.
    pub method: Method,
    /// The params, as sent.
    pub params: Map<String, Value>,
}

/// Reads a client's request envelope, its method name read by `method` (one version's
/// names): see the module doc for what is refused.
pub fn read_envelope(
    body: &[u8],
    method: fn(&str) -> Result<Method, A2aError>,
) -> Result<Envelope, Refused> {
    let doc = json::parse(body).map_err(|e| {
        refused(
            None,
            ErrorKind::ParseError,
            format!("Invalid JSON payload: {e}"),
        )
    })?;
    let mut obj = match doc {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(refused(
                None,
                ErrorKind::InvalidRequest,
                "batch requests are not served: send one request per call",
            ))
        }
        _ => {
            return Err(refused(
                None,
                ErrorKind::InvalidRequest,
                "a JSON-RPC request is an object",
            ))
        }
    };
    let id = match obj.get("id") {
        None => {
            return Err(refused(
                None,
                ErrorKind::InvalidRequest,
                "a request without id is a notification, and notifications are not served",
            ))
        }
        Some(v) => {
            RpcId::from_value(v).map_err(|why| refused(None, ErrorKind::InvalidRequest, why))?
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(refused(
            Some(id),
            ErrorKind::InvalidRequest,
            "'jsonrpc' must be exactly \"2.0\"",
        ));
    }
    let name = match obj.get("method") {
        Some(Value::String(m)) => m,
        _ => {
            return Err(refused(
                Some(id),
                ErrorKind::InvalidRequest,
                "'method' must be a string",
            ))
        }
    };
    let method = match method(name) {
        Ok(m) => m,
        Err(e) => {
            return Err(Refused {
                id: Some(id),
                error: Box::new(e),
            })
        }
    };
    // Moved out of the document, not copied: the params are the bulk of a request.
    let params = match obj.remove("params") {
        None => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => {
            return Err(Refused {
                id: Some(id),
                error: Box::new(A2aError::invalid_params(vec![Violation::new(
                    "",
                    "jsonrpc/params",
                    "params must be an object (the request message)",
                )])),
            })
        }
    };
    Ok(Envelope { id, method, params })
}

/// A success response to the client: `{"jsonrpc":"2.0","id":…,"result":…}`. For a method that
/// answers Empty the result is `null`, as both SDKs' servers send it.
pub fn result_response(id: &RpcId, method: Method, result: &Value) -> Value {
    let result = if method.answers_empty() {
        Value::Null
    } else {
        result.clone()
    };
    json!({"jsonrpc": "2.0", "id": id.to_value(), "result": result})
}

/// An error response: `{"jsonrpc":"2.0","id":…|null,"error":{code,message,data}}`.
pub fn error_response(id: Option<&RpcId>, error: &A2aError) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.map_or(Value::Null, RpcId::to_value),
        "error": error.to_jsonrpc(),
    })
}

/// The response for `reply`. Used for each SSE event of a stream too (each event's data is one
/// JSON-RPC response carrying the subscriber's id; an error event is sent as `event: error`).
pub fn reply_response(id: &RpcId, method: Method, reply: &Reply) -> Value {
    match reply {
        Ok(v) => result_response(id, method, v),
        Err(e) => error_response(Some(id), e),
    }
}

/// The gateway's request to a JSON-RPC agent: its own `id`, the method, and the params with the
/// agent interface's tenant (see [`Call::with_tenant`]). `written`: the call's params as
/// serde_json wrote them already (a SendMessage's, written once for its fingerprint), put in
/// as they are when no tenant is to be set or taken out: the same bytes, not written again.
pub fn agent_request(
    id: &RpcId,
    call: &Call,
    tenant: Option<&str>,
    written: Option<&[u8]>,
) -> Vec<u8> {
    let as_written = tenant.is_none_or(str::is_empty) && !call.params.contains_key("tenant");
    if let Some(params) = written.filter(|_| as_written) {
        let mut w = Vec::with_capacity(params.len() + 64);
        w.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        // An id is a string or an integer, a method name a string: writing cannot fail.
        let _ = serde_json::to_writer(&mut w, id);
        w.extend_from_slice(br#","method":"#);
        let _ = serde_json::to_writer(&mut w, call.method.as_str());
        w.extend_from_slice(br#","params":"#);
        w.extend_from_slice(params);
        w.push(b'}');
        return w;
    }
    #[derive(serde::Serialize)]
    struct Outgoing<'a> {
        jsonrpc: &'static str,
        id: &'a RpcId,
        method: &'static str,
        params: crate::protocol::a2a::WithTenant<'a>,
    }
    let out = Outgoing {
        jsonrpc: "2.0",
        id,
        method: call.method.as_str(),
        params: call.params_with_tenant(tenant),
    };
    // Serializing strings and a map of Values cannot fail. A message is a few hundred bytes:
    // written without growing its buffer five times.
    let mut w = Vec::with_capacity(512);
    let _ = serde_json::to_writer(&mut w, &out);
    w
}

/// Reads an agent's JSON-RPC response (or one SSE event of its stream) to the request with id
/// `sent`: the result (Empty's `null` as `{}`), or the agent's error read back, or
/// InvalidAgentResponse naming what is wrong (not JSON, duplicate keys, not a 2.0 response,
/// another id, both or neither of result and error). The caller bounds the body
/// (`MAX_AGENT_JSON`); the result's content is judged by [`crate::protocol::a2a::answer`].
pub fn parse_agent_response(body: &[u8], sent: &RpcId, method: Method) -> Reply {
    match json::parse(body) {
        Ok(doc) => envelope(doc, sent, method),
        Err(e) => Err(not_one_document(&e)),
    }
}

/// [`parse_agent_response`], its result read in place: a [`Node`] that borrows `body`'s
/// strings (SendMessage's answer, which the gateway checks, records and relays).
pub fn read_agent_response<'a>(
    body: &'a [u8],
    sent: &RpcId,
    method: Method,
) -> Result<Node<'a>, A2aError> {
    match json::read_in_place(body) {
        Ok(doc) => envelope(doc, sent, method),
        Err(e) => Err(not_one_document(&e)),
    }
}

fn bad(at: &str, msg: String) -> A2aError {
    A2aError::invalid_agent_response(vec![Violation::new(at, "jsonrpc", msg)])
}

fn not_one_document(e: &json::JsonError) -> A2aError {
    bad(
        &e.pointer(),
        format!("the agent's answer is not one JSON document: {e}"),
    )
}

/// A JSON-RPC response document, whichever tree holds it: what [`envelope`] takes out of it.
trait Response: Json + Sized {
    /// Takes member `key` out of the object (the result is the bulk of an answer: moved, not
    /// copied).
    fn take(&mut self, key: &str) -> Option<Self>;
    /// `{}`.
    fn empty() -> Self;
    /// serde_json's tree of it (an agent's error is read back from one).
    fn into_value(self) -> Value;
}

impl Response for Value {
    fn take(&mut self, key: &str) -> Option<Self> {
        self.as_object_mut()?.remove(key)
    }
    fn empty() -> Self {
        json!({})
    }
    fn into_value(self) -> Value {
        self
    }
}

impl Response for Node<'_> {
    fn take(&mut self, key: &str) -> Option<Self> {
        match self {
            Node::Object(m) => m.take(key),
            _ => None,
        }
    }
    fn empty() -> Self {
        Node::Object(Members::default())
    }
    fn into_value(self) -> Value {
        Node::into_value(self)
    }
}

/// The result of the response `doc` to the request with id `sent`, or the agent's error read
/// back, or InvalidAgentResponse naming what is wrong.
fn envelope<D: Response>(mut doc: D, sent: &RpcId, method: Method) -> Result<D, A2aError> {
    if !doc.is_object() {
        return Err(bad("", "a JSON-RPC response is an object".to_owned()));
    }
    if doc.get("jsonrpc").and_then(|v| v.as_str()) != Some("2.0") {
        return Err(bad("/jsonrpc", "'jsonrpc' must be \"2.0\"".to_owned()));
    }
    let answers_ours = |doc: &D| {
        doc.get("id").is_some_and(|v| match sent {
            // The gateway's own ids are strings: compared where they lie.
            RpcId::Str(s) => v.as_str() == Some(s.as_str()),
            RpcId::Int(n) => v.as_number() == Some(n),
        })
    };
    match (doc.take("result"), doc.take("error")) {
        (Some(_), Some(_)) => Err(bad(
            "",
            "a response holds result or error, not both".to_owned(),
        )),
        (None, Some(err)) if err.is_object() => {
            // An error may carry id null when the agent could not read ours.
            if !doc.get("id").is_none_or(|v| v.is_null()) && !answers_ours(&doc) {
                return Err(bad(
                    "/id",
                    "the error answers another request's id".to_owned(),
                ));
            }
            Err(A2aError::from_jsonrpc(&err.into_value()).the_agents_own())
        }
        (None, Some(_)) => Err(bad("/error", "error must be an object".to_owned())),
        (Some(result), None) => {
            if !answers_ours(&doc) {
                return Err(bad(
                    "/id",
                    "the response answers another request's id".to_owned(),
                ));
            }
            if result.is_null() && method.answers_empty() {
                Ok(D::empty())
            } else if result.is_object() {
                Ok(result)
            } else {
                Err(bad(
                    "/result",
                    format!("the result of {} is an object", method.as_str()),
                ))
            }
        }
        (None, None) => Err(bad("", "a response holds result or error".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_with(body: &str) -> (Option<RpcId>, ErrorKind) {
        let r = parse_request(body.as_bytes()).expect_err(body);
        (r.id, r.error.kind)
    }

    #[test]
    fn a_request_becomes_a_call() {
        let r = parse_request(
            br#"{"jsonrpc":"2.0","id":"req-1","method":"GetTask","params":{"id":"t"}}"#,
        )
        .expect("valid");
        assert_eq!(r.id, RpcId::Str("req-1".into()));
        assert_eq!(r.call.method, Method::GetTask);
        assert_eq!(r.call.task_id(), Some("t"));
        let r = parse_request(br#"{"jsonrpc":"2.0","id":7,"method":"GetExtendedAgentCard"}"#)
            .expect("params may be absent");
        assert!(r.call.params.is_empty());
        assert_eq!(r.id.to_value(), json!(7));
    }

    #[test]
    fn params_are_read_with_either_spelling_of_a_field() {
        let r = parse_request(
            br#"{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{
                "message_id":"m","task_id":"t","context_id":"c","reference_task_ids":["r"],
                "role":"ROLE_USER","parts":[{"text":"a"}],"metadata":{"my_key":1}}}}"#,
        )
        .expect("proto names are names");
        assert_eq!(
            Value::Object(r.call.params),
            json!({"message": {"messageId": "m", "taskId": "t", "contextId": "c",
                "referenceTaskIds": ["r"], "role": "ROLE_USER", "parts": [{"text": "a"}],
                "metadata": {"my_key": 1}}})
        );
        let r = parse_request(
            br#"{"jsonrpc":"2.0","id":4,"method":"GetTaskPushNotificationConfig","params":{"task_id":"t","id":"c"}}"#,
        )
        .expect("valid");
        assert_eq!(r.call.task_id(), Some("t"));
        // One field in both spellings: -32602 naming it, answered with the client's id.
        let r = parse_request(
            br#"{"jsonrpc":"2.0","id":"x","method":"SendMessage","params":{"message":{
                "message_id":"m","messageId":"m","role":"ROLE_USER","parts":[{"text":"a"}]}}}"#,
        )
        .expect_err("both spellings");
        assert_eq!(r.error.to_jsonrpc()["code"], -32602);
        assert_eq!(r.error.details[0].instance_path, "/message/messageId");
        assert_eq!(
            (r.id, r.error.kind),
            (Some(RpcId::Str("x".into())), ErrorKind::InvalidParams)
        );
    }

    #[test]
    fn hostile_envelopes_are_refused_with_the_right_code_and_id() {
        use ErrorKind::*;
        assert_eq!(refused_with("{"), (None, ParseError));
        assert_eq!(
            refused_with(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask"}"#),
            (None, ParseError)
        );
        assert_eq!(
            refused_with(r#"[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}]"#),
            (None, InvalidRequest)
        );
        assert_eq!(refused_with("[]"), (None, InvalidRequest));
        assert_eq!(refused_with("42"), (None, InvalidRequest));
        assert_eq!(
            refused_with(r#"{"jsonrpc":"2.0","method":"GetTask","params":{}}"#),
            (None, InvalidRequest)
        );
        for id in ["null", "1.5", "true", "{}", "[1]"] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"GetTask","params":{{}}}}"#);
            assert_eq!(refused_with(&body), (None, InvalidRequest), "{id}");
        }
        let long = "x".repeat(129);
        let body = format!(r#"{{"jsonrpc":"2.0","id":"{long}","method":"GetTask"}}"#);
        assert_eq!(refused_with(&body), (None, InvalidRequest));
        let ok = "x".repeat(128);
        let body = format!(r#"{{"jsonrpc":"2.0","id":"{ok}","method":"GetTask"}}"#);
        assert!(parse_request(body.as_bytes()).is_ok());
        let one = Some(RpcId::Int(1.into()));
        assert_eq!(
            refused_with(r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#),
            (one.clone(), InvalidRequest)
        );
        assert_eq!(
            refused_with(r#"{"id":1,"method":"GetTask"}"#),
            (one.clone(), InvalidRequest)
        );
        // A 0.3 method in a 1.0 request is the version's refusal (-32009), not -32601.
        assert_eq!(
            refused_with(r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}"#),
            (one.clone(), VersionNotSupported)
        );
        assert_eq!(
            refused_with(r#"{"jsonrpc":"2.0","id":1,"method":"message/sned","params":{}}"#),
            (one.clone(), MethodNotFound)
        );
        assert_eq!(
            refused_with(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            (one.clone(), InvalidRequest)
        );
        for params in ["[]", "null", "\"x\"", "3"] {
            let body =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{params}}}"#);
            assert_eq!(
                refused_with(&body),
                (one.clone(), InvalidParams),
                "{params}"
            );
        }
    }

    #[test]
    fn ids_are_echoed_as_the_same_value() {
        for id in [
            r#""abc""#,
            "0",
            "-5",
            "18446744073709551615",
            r#""ü\u00e9""#,
        ] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"GetTask","params":{{}}}}"#);
            let r = parse_request(body.as_bytes()).expect(id);
            let sent: Value = serde_json::from_str(id).expect("json");
            let out = result_response(&r.id, Method::GetTask, &json!({"id": "t"}));
            assert_eq!(out["id"], sent, "{id}");
            assert_eq!(out["jsonrpc"], "2.0");
        }
        let e = A2aError::of(ErrorKind::TaskNotFound);
        assert_eq!(error_response(None, &e)["id"], Value::Null);
        assert_eq!(error_response(None, &e)["error"]["code"], -32001);
    }

    #[test]
    fn empty_answers_are_null_in_json_rpc_and_braces_in_a_reply() {
        let id = RpcId::Int(3.into());
        let out = result_response(&id, Method::DeleteTaskPushNotificationConfig, &json!({}));
        assert_eq!(out["result"], Value::Null);
        let back = parse_agent_response(
            br#"{"jsonrpc":"2.0","id":3,"result":null}"#,
            &id,
            Method::DeleteTaskPushNotificationConfig,
        );
        assert_eq!(back, Ok(json!({})));
        assert!(parse_agent_response(
            br#"{"jsonrpc":"2.0","id":3,"result":null}"#,
            &id,
            Method::GetTask
        )
        .is_err());
    }

    #[test]
    fn the_gateways_request_uses_its_id_and_the_agents_tenant() {
        let Value::Object(params) = json!({"id": "t", "tenant": "from-client"}) else {
            unreachable!()
        };
        let call = Call::new(Method::CancelTask, params);
        let read = |b: Vec<u8>| serde_json::from_slice::<Value>(&b).expect("json");
        let req = read(agent_request(
            &RpcId::Str("gw-1".into()),
            &call,
            Some("tenant-a"),
            None,
        ));
        assert_eq!(
            req,
            json!({"jsonrpc": "2.0", "id": "gw-1", "method": "CancelTask",
                   "params": {"id": "t", "tenant": "tenant-a"}})
        );
        let req = read(agent_request(&RpcId::Str("gw-1".into()), &call, None, None));
        assert_eq!(req["params"], json!({"id": "t"}));
        let n = RpcId::from_value(&json!(7)).expect("id");
        assert_eq!(read(agent_request(&n, &call, None, None))["id"], json!(7));
        // Params written already are not taken as they are while a tenant is to go.
        let written = serde_json::to_vec(&call.params).expect("written");
        let req = read(agent_request(&n, &call, None, Some(&written)));
        assert_eq!(req["params"], json!({"id": "t"}));
    }

    #[test]
    fn params_written_once_make_the_same_request() {
        let Value::Object(params) = json!({"message": {"messageId": "m\"1", "role": "ROLE_USER",
            "parts": [{"text": "héllo"}], "metadata": {"n": 1.5}}, "configuration": {}})
        else {
            unreachable!()
        };
        let call = Call::new(Method::SendMessage, params);
        let written = serde_json::to_vec(&call.params).expect("written");
        for id in [
            RpcId::Str("gw-1".into()),
            RpcId::from_value(&json!(7)).expect("id"),
        ] {
            for tenant in [None, Some("")] {
                assert_eq!(
                    String::from_utf8(agent_request(&id, &call, tenant, Some(&written))),
                    String::from_utf8(agent_request(&id, &call, tenant, None)),
                );
            }
            // With the agent's tenant to set, the params are written again (the tenant in them).
            let with = agent_request(&id, &call, Some("t-a"), Some(&written));
            let read: Value = serde_json::from_slice(&with).expect("json");
            assert_eq!(read["params"]["tenant"], "t-a");
        }
    }

    #[test]
    fn agent_responses_are_checked() {
        let id = RpcId::Str("gw-9".into());
        let ok = parse_agent_response(
            br#"{"jsonrpc":"2.0","id":"gw-9","result":{"id":"t"}}"#,
            &id,
            Method::GetTask,
        );
        assert_eq!(ok, Ok(json!({"id": "t"})));
        let err = parse_agent_response(
            br#"{"jsonrpc":"2.0","id":"gw-9","error":{"code":-32001,"message":"nope"}}"#,
            &id,
            Method::GetTask,
        )
        .expect_err("agent error");
        assert_eq!(err.kind, ErrorKind::TaskNotFound);
        assert_eq!(err.message, "nope");
        let err = parse_agent_response(
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}"#,
            &id,
            Method::GetTask,
        )
        .expect_err("agent error with null id");
        assert_eq!(err.kind, ErrorKind::InvalidRequest);
        // Read in place, the same answers and the same refusals (the corpus below).
        let both = |body: &str, method: Method| {
            let tree = parse_agent_response(body.as_bytes(), &id, method);
            let in_place = read_agent_response(body.as_bytes(), &id, method).map(Node::into_value);
            assert_eq!(in_place, tree, "{body}");
            tree
        };
        assert_eq!(
            both(
                r#"{"id":"gw-9","result":{"task":{"id":"t","b":[1,"x\"y"]}},"jsonrpc":"2.0"}"#,
                Method::SendMessage
            ),
            Ok(json!({"task": {"id": "t", "b": [1, "x\"y"]}}))
        );
        assert_eq!(
            both(
                r#"{"jsonrpc":"2.0","id":"gw-9","result":null}"#,
                Method::DeleteTaskPushNotificationConfig
            ),
            Ok(json!({}))
        );
        for body in [
            r#"{"jsonrpc":"2.0","id":"gw-9","error":{"code":-32001,"message":"nope"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}"#,
            r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"bad"}}"#,
        ] {
            assert!(both(body, Method::SendMessage).is_err());
        }
        for bad in [
            r#"{"jsonrpc":"2.0","id":"other","result":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"gw-9"}"#,
            r#"{"jsonrpc":"2.0","id":"gw-9","result":{},"error":{"code":1}}"#,
            r#"{"jsonrpc":"2.0","id":"gw-9","result":[]}"#,
            r#"{"jsonrpc":"2.0","id":"gw-9","error":"boom"}"#,
            r#"{"jsonrpc":"2.0","id":"other","error":{"code":-32001}}"#,
            r#"{"id":"gw-9","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"gw-9","result":{"id":"a","id":"b"}}"#,
            r#"<html>"#,
            "",
        ] {
            let e = both(bad, Method::GetTask).expect_err(bad);
            assert_eq!(e.kind, ErrorKind::InvalidAgentResponse, "{bad}");
            assert!(!e.details.is_empty());
        }
    }
}
