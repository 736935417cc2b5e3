//! A2A 0.3 over JSON-RPC 2.0 (0.3 spec §3.2.1, §7): `POST /agents/{name}/jsonrpc` when the
//! request's `A2A-Version` is absent, empty or 0.3 (§3.6 of 1.0: an absent version is 0.3),
//! for clients; an agent's interface of `protocolBinding` JSONRPC at 0.3 for agents.
//!
//! The envelope is 1.0's ([`super::v1_jsonrpc::envelope`]: the same strictness, ids echoed
//! the same), its method names 0.3's (`message/send`...: a 1.0 name here is
//! VersionNotSupportedError), its params and results a2a.json's shapes, translated to and from
//! the neutral operation by `protocol::a2a::v0_3::model` (style `Json`). Errors are 0.3's
//! `{code, message, data}` (`v0_3::error_object`). A stream's events are each a response to
//! the subscriber's id whose result is the bare event with its `kind`, the last status update
//! `final: true`.

use bytes::Bytes;
use hyper::http::response::Parts;
use hyper::{Method as Verb, Response, StatusCode};
use serde_json::{json, Value};

use super::v1_jsonrpc::envelope::{self, Envelope, RpcId};
use super::{Echo, Form, Read, Sent, Written};
use crate::http::a2a::frame::{self, json_response, KeepStatus, Neutral};
use crate::http::body::Body;
use crate::http::error::{ApiError, Code};
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::stream::frame_json;
use crate::protocol::a2a::v0_3::calls;
use crate::protocol::a2a::v0_3::model::{self, Style};
use crate::protocol::a2a::v0_3::{self, error_object};
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method, Reply};
use crate::stream::framing::{Frames, Framing};

/// A2A 0.3 over JSON-RPC.
#[derive(Debug, Clone, Copy)]
pub struct V03JsonRpc;

/// The operation a 0.3 method name is; a 1.0 name is VersionNotSupportedError.
fn method(name: &str) -> Result<Method, A2aError> {
    if let Some(m) = v0_3::method_of(name) {
        return Ok(m);
    }
    let shown: String = name.chars().take(64).collect();
    if Method::parse(name).is_some() {
        return Err(A2aError::new(
            ErrorKind::VersionNotSupported,
            format!("{shown:?} is an A2A 1.0 method: send it with A2A-Version: 1.0"),
        ));
    }
    Err(A2aError::new(
        ErrorKind::MethodNotFound,
        format!("Method not found: {shown:?}"),
    ))
}

/// A JSON-RPC response to `id` carrying 0.3's error.
fn error_response(id: Option<&RpcId>, e: &A2aError) -> Value {
    json!({"jsonrpc": "2.0", "id": id.map_or(Value::Null, RpcId::to_value), "error": error_object(e)})
}

impl Form for V03JsonRpc {
    fn label(&self) -> &'static str {
        "JSONRPC"
    }

    fn version_label(&self) -> &'static str {
        v0_3::VERSION
    }

    fn interface(&self, at: &super::At<'_>) -> Value {
        let root = at.root;
        json!({"url": format!("{root}/jsonrpc"), "protocolBinding": "JSONRPC", "protocolVersion": v0_3::VERSION})
    }

    fn takes_body(&self, verb: &Verb) -> Result<bool, ApiError> {
        super::post_only(verb)
    }

    fn read(&self, _: &Verb, _: &str, _: Option<&str>, body: &[u8]) -> Read {
        let Envelope { id, method, params } = match envelope::read_envelope(body, method) {
            Ok(e) => e,
            Err(refused) => return Read::Refused(*refused.error, Echo(refused.id)),
        };
        let mut params = match calls::params_in(method, params) {
            Ok(p) => p,
            Err(v) => return Read::Refused(A2aError::invalid_params(vec![v]), Echo(Some(id))),
        };
        if let Err(e) = crate::protocol::a2a::spelling::to_json_names(method, &mut params) {
            return Read::Refused(e, Echo(Some(id)));
        }
        Read::Call(Call::new(method, params), Echo(Some(id)))
    }

    fn version(&self, headers: &hyper::HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
        super::v0_3_version(headers, query)
    }

    fn agent_headers(&self, headers: &mut hyper::HeaderMap) {
        super::v0_3_agent_headers(headers)
    }

    /// The neutral answer read back and written in 0.3's shapes, around the client's id.
    fn answer(&self, echo: &Echo, method: Method, res: Response<Body>) -> Response<Body> {
        let id = echo.0.as_ref();
        let (mut parts, body) = res.into_parts();
        let kept = parts.extensions.remove::<Neutral>();
        let status = match parts.extensions.remove::<KeepStatus>() {
            Some(KeepStatus) => parts.status,
            None => StatusCode::OK,
        };
        let reply = match kept {
            Some(Neutral(Err(e))) => Err(e),
            _ => super::neutral_reply(parts.status, &body),
        };
        let mut out = match reply {
            Ok(v) => {
                // Written around the translated result, with no envelope tree of its own.
                let result = calls::answer_out(Style::Json, method, v);
                let mut w = Vec::with_capacity(512);
                w.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
                // An id and a Value: writing them cannot fail.
                let _ = serde_json::to_writer(&mut w, &id);
                w.extend_from_slice(br#","result":"#);
                let _ = serde_json::to_writer(&mut w, &result);
                w.push(b'}');
                let mut out = Response::new(Body::full(w));
                *out.status_mut() = status;
                out.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("application/json"),
                );
                out
            }
            Err(e) => json_response(status, "application/json", &error_response(id, &e)),
        };
        frame::copy_headers(&parts.headers, out.headers_mut());
        out
    }

    fn refusal(&self, e: ApiError) -> Response<Body> {
        frame::refusal(e, |error| error_response(None, error))
    }

    fn framing(&self, echo: &Echo) -> Framing {
        let id = echo.0.as_ref().map(|id| {
            serde_json::to_string(id)
                .unwrap_or_default()
                .into_boxed_str()
        });
        Framing::Form(&V03JsonRpc, id)
    }

    fn request(
        &self,
        origin: &str,
        held: &HeldCard,
        call: &Call,
        _written: Option<&[u8]>,
    ) -> Result<Written, ApiError> {
        let name = v0_3::name_of(call.method).ok_or_else(|| {
            ApiError::new(
                Code::InvalidRequest,
                format!("{} has no A2A 0.3 JSON-RPC method", call.method.as_str()),
            )
        })?;
        let id = super::v1_jsonrpc::gateway_id();
        let body = json!({"jsonrpc": "2.0", "id": &id, "method": name,
            "params": calls::params_out(call.method, &call.params)});
        let url = held.endpoint(origin).map_err(super::unbuildable)?;
        Ok(Written {
            verb: Verb::POST,
            url,
            body: Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
            sent: Sent {
                form: &V03JsonRpc,
                id: Some(id),
            },
        })
    }

    /// As 1.0's JSON-RPC reads an answer (another status than 2xx is the transport's unless it
    /// carries a JSON-RPC error), its result then read from 0.3's shapes.
    fn read_answer(&self, sent: &Sent, call: &Call, parts: &Parts, body: &[u8]) -> Reply {
        if !parts.status.is_success() {
            return match crate::protocol::json::parse(body)
                .ok()
                .and_then(|v| v.get("error").cloned())
                .filter(Value::is_object)
            {
                Some(e) => Err(super::the_agents(v0_3::read_error(
                    &e,
                    parts.status.as_u16(),
                ))),
                None => Err(super::transport(parts.status.as_u16())),
            };
        }
        self.read_event(sent, call.method, body, false)
    }

    /// Every event is a whole response to the id sent (1.0's envelope reader: an agent's error
    /// by its code, as 0.3's codes are 1.0's), its result then read from 0.3's shapes.
    fn read_event(&self, sent: &Sent, method: Method, data: &[u8], _error: bool) -> Reply {
        let id = super::v1_jsonrpc::sent_id(sent)?;
        let result = envelope::parse_agent_response(data, id, method).map_err(super::the_agents)?;
        calls::answer_in(Style::Json, method, result)
            .map_err(|v| A2aError::invalid_agent_response(vec![v]))
    }

    fn task_first(&self) -> bool {
        false
    }

    fn read_push(&self, event: Value) -> Result<Value, A2aError> {
        super::v0_3_push(event)
    }
}

impl Frames for V03JsonRpc {
    /// The StreamResponse as 0.3's bare event, the `result` of a response to the subscriber's
    /// id.
    fn event(&self, id: Option<&str>, stored: &Bytes) -> Bytes {
        let Some(event) = frame_json(stored).and_then(|j| serde_json::from_slice::<Value>(j).ok())
        else {
            // Not an event (a comment, say): as stored.
            return stored.clone();
        };
        let result = model::event_out(Style::Json, event);
        let id = id.unwrap_or("null");
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(br#"data: {"jsonrpc":"2.0","id":"#);
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(br#","result":"#);
        // Writing a Value cannot fail.
        let _ = serde_json::to_writer(&mut out, &result);
        out.extend_from_slice(b"}\n\n");
        Bytes::from(out)
    }

    /// `event: error`, its data a response to the subscriber's id carrying 0.3's error.
    fn error(&self, id: Option<&str>, e: &A2aError) -> Bytes {
        let id = id.unwrap_or("null");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{}}}"#,
            error_object(e)
        );
        crate::protocol::a2a::stream::error_event(body.as_bytes())
    }
}
