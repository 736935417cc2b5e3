//! A2A 1.0 over HTTP+JSON (§11): the routes under `/agents/{name}/` for clients; an agent's
//! card interface with `protocolBinding` HTTP+JSON for agents. The envelope itself (routes,
//! query parameters, bodies, the agent's answers), with no I/O, is [`envelope`].
//!
//! The neutral answer is this form's own answer: it is written out as it is. Errors are a
//! google.rpc.Status under the error's HTTP status (§11.6); a stream's events are each the bare
//! StreamResponse, as the gateway stores them.

pub mod envelope;

use bytes::Bytes;
use hyper::http::response::Parts;
use hyper::{Method as Verb, Response};

use self::envelope::RouteError;
use super::{Echo, Form, Read, Sent, Written};
use crate::http::a2a::frame::{self, Neutral};
use crate::http::body::Body;
use crate::http::error::{ApiError, Code};
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::{A2aError, Call, Method, Reply};
use crate::stream::framing::{Frames, Framing};

/// A2A 1.0 over HTTP+JSON.
#[derive(Debug, Clone, Copy)]
pub struct V1HttpJson;

impl Form for V1HttpJson {
    fn label(&self) -> &'static str {
        "HTTP+JSON"
    }

    fn version_label(&self) -> &'static str {
        crate::protocol::a2a::version::SERVED
    }

    fn interface(&self, at: &super::At<'_>) -> serde_json::Value {
        let root = at.root;
        serde_json::json!({"url": root, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"})
    }

    fn takes_body(&self, verb: &Verb) -> Result<bool, ApiError> {
        Ok(verb == Verb::POST)
    }

    fn read(&self, verb: &Verb, tail: &str, query: Option<&str>, body: &[u8]) -> Read {
        match envelope::parse_request(verb.as_str(), tail, query, body) {
            Ok(call) => Read::Call(call, Echo(None)),
            Err(RouteError::NotFound) => Read::NotFound,
            Err(RouteError::MethodNotAllowed(allow)) => Read::NotAllowed(super::not_allowed(allow)),
            Err(RouteError::Invalid(e)) => Read::Refused(e, Echo(None)),
        }
    }

    fn version(&self, headers: &hyper::HeaderMap, query: Option<&str>) -> Result<(), A2aError> {
        super::v1_version(headers, query)
    }

    fn agent_headers(&self, headers: &mut hyper::HeaderMap) {
        super::v1_agent_headers(headers)
    }

    fn answer(&self, _: &Echo, _: Method, res: Response<Body>) -> Response<Body> {
        let (mut parts, body) = res.into_parts();
        parts.extensions.remove::<Neutral>();
        Response::from_parts(parts, body)
    }

    fn refusal(&self, e: ApiError) -> Response<Body> {
        frame::refusal(e, A2aError::to_status)
    }

    fn framing(&self, _: &Echo) -> Framing {
        Framing::Form(&V1HttpJson, None)
    }

    /// Under the interface's path at the agent's origin, the route of the call (§8.3.2: under
    /// `/{tenant}/` when the interface declares one).
    fn request(
        &self,
        origin: &str,
        held: &HeldCard,
        call: &Call,
        _written: Option<&[u8]>,
    ) -> Result<Written, ApiError> {
        let tenant = held.interface.tenant.as_deref();
        let r = envelope::agent_request(call, tenant)
            .map_err(|e| ApiError::new(Code::InvalidRequest, e.message))?;
        let mut url = format!("{origin}{}{}", held.interface_path(), r.path);
        if !r.query.is_empty() {
            url.push('?');
            url.push_str(&r.query);
        }
        let body = match &r.body {
            Some(b) => Bytes::from(
                serde_json::to_vec(b)
                    .map_err(|e| ApiError::new(Code::InvalidRequest, e.to_string()))?,
            ),
            None => Bytes::new(),
        };
        let verb = Verb::from_bytes(r.http_method.as_bytes()).unwrap_or(Verb::POST);
        let url = hyper::Uri::try_from(url).map_err(super::unbuildable)?;
        Ok(Written {
            verb,
            url,
            body,
            sent: Sent {
                form: &V1HttpJson,
                id: None,
            },
        })
    }

    fn read_answer(&self, _: &Sent, call: &Call, parts: &Parts, body: &[u8]) -> Reply {
        envelope::parse_agent_answer(call.method, parts.status.as_u16(), body)
            .map_err(super::the_agents)
    }

    /// Each event's data is the StreamResponse; `event: error` carries a google.rpc.Status.
    fn read_event(&self, _: &Sent, method: Method, data: &[u8], error: bool) -> Reply {
        let status = if error { 500 } else { 200 };
        envelope::parse_agent_answer(method, status, data).map_err(super::the_agents)
    }
}

impl Frames for V1HttpJson {
    /// The bare StreamResponse: the event as stored.
    fn event(&self, _: Option<&str>, stored: &Bytes) -> Bytes {
        stored.clone()
    }

    /// `event: error`, its data the google.rpc.Status.
    fn error(&self, _: Option<&str>, e: &A2aError) -> Bytes {
        crate::protocol::a2a::stream::error_event(e.to_status().to_string().as_bytes())
    }
}
