//! A2A 0.3 over HTTP+JSON (0.3 spec §3.2.3, the HTTP annotations of its a2a.proto): the routes
//! under `/agents/{name}/v1/` for clients whose `A2A-Version` is absent, empty or 0.3; an
//! agent's interface of `protocolBinding` HTTP+JSON at 0.3 for agents (its routes under
//! `{interface url}/v1/`).
//!
//! Routes: `POST v1/message:send`, `POST v1/message:stream`, `GET v1/tasks/{id}`,
//! `POST v1/tasks/{id}:cancel`, `GET|POST v1/tasks/{id}:subscribe` (a2a-sdk 0.3 sends GET,
//! @a2a-js/sdk 0.3 POST), `POST|GET v1/tasks/{id}/pushNotificationConfigs`,
//! `GET|DELETE v1/tasks/{id}/pushNotificationConfigs/{configId}`, `GET v1/card`, and
//! `GET v1/tasks`, which 0.3 lists as `[Task]` and leaves paging unsaid: the gateway answers
//! its ListTasks there (caller-scoped, paged by `pageSize`/`pageToken`) as
//! `{tasks, nextPageToken, pageSize, totalSize}`, each task in 0.3's spelling. The path, ids
//! and query are read as 1.0's routes read them ([`super::v1_http_json::envelope`]); bodies and
//! answers are the JSON of 0.3's proto (what both 0.3 SDKs write: `content`,
//! `TASK_STATE_CANCELLED`, a push config under `name`), translated by
//! `protocol::a2a::v0_3::model` (style `Proto`). Errors are `{code, message, data}` with the
//! JSON-RPC code the 0.3 SDKs read, under the HTTP status 1.0's routes use.

use bytes::Bytes;
use hyper::http::response::Parts;
use hyper::{Method as Verb, Response};
use serde_json::{json, Map, Value};

use super::v1_http_json::envelope::{self as v1, RouteError};
use super::{Echo, Form, Read, Sent, Written};
use crate::http::a2a::frame::{self, json_response, Neutral};
use crate::http::body::Body;
use crate::http::error::{ApiError, Code};
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::stream::frame_json;
use crate::protocol::a2a::v0_3::calls;
use crate::protocol::a2a::v0_3::model::{self, Style};
use crate::protocol::a2a::v0_3::{self, error_object, read_error};
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method, Reply};
use crate::protocol::Violation;
use crate::stream::framing::{Frames, Framing};

/// A2A 0.3 over HTTP+JSON.
#[derive(Debug, Clone, Copy)]
pub struct V03HttpJson;

/// The prefix of 0.3's routes under an interface's URL.
const PREFIX: &str = "v1/";

/// The body of a POST, `{}` when empty.
fn body_object(body: &[u8]) -> Result<Map<String, Value>, A2aError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match crate::protocol::json::parse(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(A2aError::invalid_params(vec![Violation::new(
            "",
            "rest/body",
            "the body is a JSON object (the request message)",
        )])),
        Err(e) => Err(A2aError::new(
            ErrorKind::ParseError,
            format!("Invalid JSON payload: {e}"),
        )),
    }
}

/// A 0.3 push config body (`CreateTaskPushNotificationConfigRequest`: `{parent, configId,
/// config: {name, pushNotificationConfig}}`, or the config itself) as 1.0's config of `task`;
/// named by `configId`, else its own id, else the task's (as 0.3's SDK servers name it).
fn push_body(task: &str, mut body: Map<String, Value>) -> Result<Map<String, Value>, A2aError> {
    let config_id = body
        .remove("configId")
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()));
    let config = match body.remove("config") {
        Some(c) => c,
        None => Value::Object(body),
    };
    let Value::Object(mut c) =
        calls::task_push_in(Style::Proto, config).map_err(|v| A2aError::invalid_params(vec![v]))?
    else {
        return Ok(Map::new());
    };
    if c.get("taskId").is_some_and(|t| t.as_str() != Some(task)) {
        return Err(A2aError::invalid_params(vec![Violation::new(
            "/config/name",
            "rest/path",
            "the config names another task than the path",
        )]));
    }
    c.insert("taskId".to_owned(), Value::from(task));
    if let Some(id) = config_id {
        c.insert("id".to_owned(), id);
    }
    if !c.contains_key("id") {
        c.insert("id".to_owned(), Value::from(task));
    }
    Ok(c)
}

impl Form for V03HttpJson {
    fn label(&self) -> &'static str {
        "HTTP+JSON"
    }

    fn version_label(&self) -> &'static str {
        v0_3::VERSION
    }

    fn interface(&self, at: &super::At<'_>) -> Value {
        let root = at.root;
        json!({"url": root, "protocolBinding": "HTTP+JSON", "protocolVersion": v0_3::VERSION})
    }

    fn takes_body(&self, verb: &Verb) -> Result<bool, ApiError> {
        Ok(verb == Verb::POST)
    }

    fn read(&self, verb: &Verb, tail: &str, query: Option<&str>, body: &[u8]) -> Read {
        let Some(rest) = tail.strip_prefix(PREFIX) else {
            return Read::NotFound;
        };
        // 0.3's extended card is `card`; 1.0's name for it is no 0.3 route.
        let rest = match rest {
            "card" => "extendedAgentCard",
            "extendedAgentCard" => return Read::NotFound,
            r => r,
        };
        let call = match v1::parse_request(verb.as_str(), rest, query, b"") {
            Ok(call) => call,
            Err(RouteError::NotFound) => return Read::NotFound,
            Err(RouteError::MethodNotAllowed(allow)) => {
                return Read::NotAllowed(super::not_allowed(allow))
            }
            Err(RouteError::Invalid(e)) => return Read::Refused(e, Echo(None)),
        };
        let Call { method, mut params } = call;
        let read = match method {
            Method::SendMessage | Method::SendStreamingMessage => body_object(body).and_then(|b| {
                calls::send_in(Style::Proto, b).map_err(|v| A2aError::invalid_params(vec![v]))
            }),
            Method::CreateTaskPushNotificationConfig => {
                let task = params
                    .get("taskId")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                body_object(body).and_then(|b| push_body(&task, b))
            }
            _ => Ok(Map::new()),
        };
        match read {
            Ok(from_body) => params.extend(from_body),
            Err(e) => return Read::Refused(e, Echo(None)),
        }
        Read::Call(Call::new(method, params), Echo(None))
    }

    fn version(&self, headers: &hyper::HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
        super::v0_3_version(headers, query)
    }

    fn agent_headers(&self, headers: &mut hyper::HeaderMap) {
        super::v0_3_agent_headers(headers)
    }

    /// The neutral answer read back, written in 0.3's proto JSON under its HTTP status.
    fn answer(&self, _: &Echo, method: Method, res: Response<Body>) -> Response<Body> {
        let (mut parts, body) = res.into_parts();
        let kept = parts.extensions.remove::<Neutral>();
        let reply = match kept {
            Some(Neutral(Err(e))) => Err(e),
            _ => super::neutral_reply(parts.status, &body),
        };
        let doc = match reply {
            Ok(v) => calls::answer_out(Style::Proto, method, v),
            Err(e) => error_object(&e),
        };
        let mut out = json_response(parts.status, "application/json", &doc);
        frame::copy_headers(&parts.headers, out.headers_mut());
        out
    }

    fn refusal(&self, e: ApiError) -> Response<Body> {
        frame::refusal(e, error_object)
    }

    fn framing(&self, _: &Echo) -> Framing {
        Framing::Form(&V03HttpJson, None)
    }

    /// Under `{interface path}/v1/` at the agent's origin; 0.3 has no tenant.
    fn request(
        &self,
        origin: &str,
        held: &HeldCard,
        call: &Call,
        _written: Option<&[u8]>,
    ) -> Result<Written, ApiError> {
        let r = v1::agent_request(call, None)
            .map_err(|e| ApiError::new(Code::InvalidRequest, e.message))?;
        let p = &call.params;
        let text = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
        let (verb, path, body) = match call.method {
            Method::SendMessage | Method::SendStreamingMessage => {
                (Verb::POST, r.path, Some(calls::send_out(Style::Proto, p)))
            }
            Method::CancelTask => (
                Verb::POST,
                r.path,
                Some(json!({"name": format!("tasks/{}", text("id"))})),
            ),
            // a2a-sdk 0.3's server subscribes by GET only; @a2a-js/sdk 0.3's takes both.
            Method::SubscribeToTask => (Verb::GET, r.path, None),
            Method::CreateTaskPushNotificationConfig => (
                Verb::POST,
                r.path,
                Some(json!({
                    "parent": format!("tasks/{}", text("taskId")),
                    "configId": text("id"),
                    "config": calls::task_push_out(Style::Proto, &Value::Object(p.clone())),
                })),
            ),
            Method::GetExtendedAgentCard => (Verb::GET, "/card".to_owned(), None),
            _ => (
                Verb::from_bytes(r.http_method.as_bytes()).unwrap_or(Verb::GET),
                r.path,
                None,
            ),
        };
        let mut url = format!("{origin}{}/v1{path}", held.interface_path());
        if !r.query.is_empty() {
            url.push('?');
            url.push_str(&r.query);
        }
        let url = hyper::Uri::try_from(url).map_err(super::unbuildable)?;
        let body = body.map_or_else(Bytes::new, |b| {
            Bytes::from(serde_json::to_vec(&b).unwrap_or_default())
        });
        Ok(Written {
            verb,
            url,
            body,
            sent: Sent {
                form: &V03HttpJson,
                id: None,
            },
        })
    }

    fn read_answer(&self, _: &Sent, call: &Call, parts: &Parts, body: &[u8]) -> Reply {
        let status = parts.status.as_u16();
        if parts.status.is_success() {
            if body.iter().all(u8::is_ascii_whitespace) {
                return match call.method {
                    Method::DeleteTaskPushNotificationConfig => Ok(json!({})),
                    _ => Err(A2aError::invalid_agent_response(vec![Violation::new(
                        "",
                        "rest/body",
                        "the agent answered with no body",
                    )])),
                };
            }
            return self.read_event(&NO_SENT, call.method, body, false);
        }
        Err(super::the_agents(agent_error(status, body)))
    }

    fn read_event(&self, _: &Sent, method: Method, data: &[u8], error: bool) -> Reply {
        let doc = crate::protocol::json::parse(data).map_err(|e| {
            A2aError::invalid_agent_response(vec![Violation::new(
                e.pointer(),
                "rest/body",
                format!("the agent's answer is not one JSON document: {e}"),
            )])
        })?;
        if error {
            return Err(super::the_agents(agent_error(500, data)));
        }
        calls::answer_in(Style::Proto, method, doc)
            .map_err(|v| A2aError::invalid_agent_response(vec![v]))
    }

    fn task_first(&self) -> bool {
        false
    }

    fn read_push(&self, event: Value) -> Result<Value, A2aError> {
        super::v0_3_push(event)
    }
}

/// What `read_answer` hands `read_event` (an HTTP+JSON request carries no id).
const NO_SENT: Sent = Sent {
    form: &V03HttpJson,
    id: None,
};

/// A 0.3 agent's error body under HTTP `status`: `{code, message, data}` (@a2a-js/sdk 0.3);
/// `{"message"}` alone (a2a-sdk 0.3) by the status its server maps each error to; a body of
/// neither, the gateway's AGENT_UNREACHABLE.
fn agent_error(status: u16, body: &[u8]) -> A2aError {
    let doc = crate::protocol::json::parse(body).unwrap_or(Value::Null);
    if doc.get("code").and_then(Value::as_i64).is_some() {
        return read_error(&doc, status);
    }
    let by_status = match status {
        404 => Some(ErrorKind::TaskNotFound),
        409 => Some(ErrorKind::TaskNotCancelable),
        415 => Some(ErrorKind::ContentTypeNotSupported),
        422 => Some(ErrorKind::InvalidParams),
        501 => Some(ErrorKind::UnsupportedOperation),
        _ => None,
    };
    match (doc.get("message").and_then(Value::as_str), by_status) {
        (Some(m), Some(kind)) => A2aError::new(kind, m).the_agents_own(),
        _ => super::transport(status),
    }
}

impl Frames for V03HttpJson {
    /// The StreamResponse in 0.3's proto JSON.
    fn event(&self, _: Option<&str>, stored: &Bytes) -> Bytes {
        let Some(event) = frame_json(stored).and_then(|j| serde_json::from_slice::<Value>(j).ok())
        else {
            return stored.clone();
        };
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"data: ");
        // Writing a Value cannot fail.
        let _ = serde_json::to_writer(&mut out, &model::event_out(Style::Proto, event));
        out.extend_from_slice(b"\n\n");
        Bytes::from(out)
    }

    /// `event: error`, its data 0.3's error.
    fn error(&self, _: Option<&str>, e: &A2aError) -> Bytes {
        crate::protocol::a2a::stream::error_event(error_object(e).to_string().as_bytes())
    }
}
