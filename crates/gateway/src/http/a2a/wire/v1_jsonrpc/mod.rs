//! A2A 1.0 over JSON-RPC 2.0 (§9): `POST /agents/{name}/jsonrpc` and the fleet's `POST /a2a`
//! for clients; an agent's card interface with `protocolBinding` JSONRPC for agents. The
//! envelope itself, with no I/O, is [`envelope`].
//!
//! Every answer is HTTP 200 carrying the client's id, its result the neutral answer's body as
//! it is (not written again), or its error; a refusal before the call was read keeps its HTTP
//! status and answers `id: null`; a stream slot refused once the call is read keeps its 429
//! and carries the client's id (`frame::slot_refused`).
//! Towards agents the gateway sends its own ids (`gw-{n}`), never a client's, and reads an
//! answer only if it carries the id sent. A stream's events are each one response to the
//! subscriber's id.

pub mod envelope;

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::http::response::Parts;
use hyper::{Method as Verb, Response, StatusCode};
use serde_json::Value;

use self::envelope::RpcId;
use super::{AgentAnswer, Echo, Form, Read, Sent, Written};
use crate::http::a2a::frame::{self, json_response, KeepStatus, Neutral};
use crate::http::body::Body;
use crate::http::error::ApiError;
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::stream::frame_json;
use crate::protocol::a2a::{A2aError, Call, Method, Reply};
use crate::stream::framing::{Frames, Framing};

/// A2A 1.0 over JSON-RPC.
#[derive(Debug, Clone, Copy)]
pub struct V1JsonRpc;

/// The gateway's JSON-RPC ids towards agents: `gw-{n}`, unique within the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Form for V1JsonRpc {
    fn label(&self) -> &'static str {
        "JSONRPC"
    }

    fn version_label(&self) -> &'static str {
        crate::protocol::a2a::version::SERVED
    }

    fn interface(&self, at: &super::At<'_>) -> Value {
        let root = at.root;
        serde_json::json!({"url": format!("{root}/jsonrpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
    }

    fn takes_body(&self, verb: &Verb) -> Result<bool, ApiError> {
        super::post_only(verb)
    }

    fn read(&self, _: &Verb, _: &str, _: Option<&str>, body: &[u8]) -> Read {
        match envelope::parse_request(body) {
            Ok(r) => Read::Call(r.call, Echo(Some(r.id))),
            Err(refused) => Read::Refused(*refused.error, Echo(refused.id)),
        }
    }

    fn version(&self, headers: &hyper::HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
        super::v1_version(headers, query)
    }

    fn agent_headers(&self, headers: &mut hyper::HeaderMap) {
        super::v1_agent_headers(headers)
    }

    /// A success's response is written around the neutral body's bytes (the response message
    /// is not written again); an error's from the error kept beside it.
    fn answer(&self, echo: &Echo, method: Method, res: Response<Body>) -> Response<Body> {
        let id = echo.0.as_ref();
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
            // An id is a string or an integer (or null): writing it cannot fail.
            let _ = serde_json::to_writer(&mut w, &id);
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
                _ => frame::read_neutral(parts.status.as_u16(), &bytes),
            };
            let envelope = match reply {
                Ok(v) => {
                    let result = if method.answers_empty() {
                        Value::Null
                    } else {
                        v
                    };
                    serde_json::json!({"jsonrpc": "2.0", "id": id.map_or(Value::Null, RpcId::to_value), "result": result})
                }
                Err(e) => envelope::error_response(id, &e),
            };
            json_response(status, "application/json", &envelope)
        };
        frame::copy_headers(&parts.headers, out.headers_mut());
        out
    }

    fn refusal(&self, e: ApiError) -> Response<Body> {
        frame::refusal(e, |error| envelope::error_response(None, error))
    }

    fn framing(&self, echo: &Echo) -> Framing {
        let id = echo.0.as_ref().map(|id| {
            serde_json::to_string(id)
                .unwrap_or_default()
                .into_boxed_str()
        });
        Framing::Form(&V1JsonRpc, id)
    }

    fn request(
        &self,
        origin: &str,
        held: &HeldCard,
        call: &Call,
        written: Option<&[u8]>,
    ) -> Result<Written, ApiError> {
        let id = gateway_id();
        let tenant = held.interface.tenant.as_deref();
        let body = envelope::agent_request(&id, call, tenant, written);
        let url = held.endpoint(origin).map_err(super::unbuildable)?;
        Ok(Written {
            verb: Verb::POST,
            url,
            body: Bytes::from(body),
            sent: Sent {
                form: &V1JsonRpc,
                id: Some(id),
            },
        })
    }

    /// A JSON-RPC server answers its errors with 200; another status is the transport's (a
    /// proxy's 502, a 401 of the agent's own auth), which the gateway reports as its own unless
    /// the body holds the agent's JSON-RPC error.
    fn read_answer(&self, sent: &Sent, call: &Call, parts: &Parts, body: &[u8]) -> Reply {
        if !parts.status.is_success() {
            return match crate::protocol::json::parse(body)
                .ok()
                .and_then(|v| v.get("error").cloned())
                .filter(Value::is_object)
            {
                Some(e) => Err(super::the_agents(
                    A2aError::from_jsonrpc(&e).the_agents_own(),
                )),
                None => Err(super::transport(parts.status.as_u16())),
            };
        }
        envelope::parse_agent_response(body, sent_id(sent)?, call.method).map_err(super::the_agents)
    }

    fn read_in_place<'a>(
        &self,
        sent: &Sent,
        call: &Call,
        parts: &Parts,
        body: &'a [u8],
    ) -> Result<AgentAnswer<'a>, A2aError> {
        if !parts.status.is_success() {
            return self
                .read_answer(sent, call, parts, body)
                .map(AgentAnswer::Tree);
        }
        envelope::read_agent_response(body, sent_id(sent)?, call.method)
            .map(AgentAnswer::InPlace)
            .map_err(super::the_agents)
    }

    /// Every event is a whole response to the id sent; an error event carries an error.
    fn read_event(&self, sent: &Sent, method: Method, data: &[u8], _error: bool) -> Reply {
        envelope::parse_agent_response(data, sent_id(sent)?, method).map_err(super::the_agents)
    }
}

/// A new id of the gateway's own for a request to a JSON-RPC agent (any version's).
pub(super) fn gateway_id() -> RpcId {
    RpcId::Str(format!("gw-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)))
}

/// The id a JSON-RPC request was sent with (a `Sent` of a JSON-RPC form always has one).
pub(super) fn sent_id(sent: &Sent) -> Result<&RpcId, A2aError> {
    sent.id.as_ref().ok_or_else(|| {
        A2aError::gateway(
            "INTERNAL",
            500,
            "a JSON-RPC answer read without the id sent",
        )
    })
}

impl Frames for V1JsonRpc {
    /// The StreamResponse as the `result` of a response to the subscriber's id.
    fn event(&self, id: Option<&str>, stored: &Bytes) -> Bytes {
        match frame_json(stored) {
            Some(json) => {
                let id = id.unwrap_or("null");
                let mut out = Vec::with_capacity(json.len() + id.len() + 48);
                out.extend_from_slice(br#"data: {"jsonrpc":"2.0","id":"#);
                out.extend_from_slice(id.as_bytes());
                out.extend_from_slice(br#","result":"#);
                out.extend_from_slice(json);
                out.extend_from_slice(b"}\n\n");
                Bytes::from(out)
            }
            // Not an event (a comment, say): as stored.
            None => stored.clone(),
        }
    }

    /// `event: error`, its data a response to the subscriber's id carrying the error.
    fn error(&self, id: Option<&str>, e: &A2aError) -> Bytes {
        let id = id.unwrap_or("null");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{}}}"#,
            e.to_jsonrpc()
        );
        crate::protocol::a2a::stream::error_event(body.as_bytes())
    }
}

/// `/a2a` or `/agents/{name}/jsonrpc`: where a JSON-RPC call is posted.
pub fn is_endpoint(path: &str) -> bool {
    if path == "/a2a" {
        return true;
    }
    let mut segs = path.split('/');
    matches!(
        (segs.next(), segs.next(), segs.next(), segs.next(), segs.next()),
        (Some(""), Some("agents"), Some(n), Some("jsonrpc"), None | Some("")) if !n.is_empty()
    )
}

/// Whether a JSON-RPC body calls `SubscribeToTask` (or 0.3's `tasks/resubscribe`).
pub fn subscribes(body: &[u8]) -> bool {
    const SUBSCRIBE: [&str; 2] = ["SubscribeToTask", "tasks/resubscribe"];
    #[derive(serde::Deserialize)]
    struct Called<'a> {
        #[serde(borrow)]
        method: Option<&'a str>,
    }
    serde_json::from_slice::<Called<'_>>(body)
        .is_ok_and(|c| c.method.is_some_and(|m| SUBSCRIBE.contains(&m)))
}
