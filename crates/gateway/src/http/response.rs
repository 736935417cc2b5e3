//! Answers the gateway builds itself: JSON documents and the heads of event streams.

use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use serde::Serialize;

use super::body::Body;
use super::error::{ApiError, Code};

/// A JSON answer with `status`.
pub fn json(status: StatusCode, body: impl Into<bytes::Bytes>) -> Response<Body> {
    let mut res = Response::new(Body::full(body));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// Name `token` in the answer's `Vary` (once, and in one header: a list, RFC 9110 §12.5.5),
/// keeping what it already names (an agent's own `Vary` included).
pub fn vary(h: &mut header::HeaderMap, token: &'static str) {
    let mut named: Vec<&str> = h
        .get_all(header::VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if named.iter().any(|t| t.eq_ignore_ascii_case(token)) {
        return;
    }
    named.push(token);
    match HeaderValue::from_str(&named.join(", ")) {
        Ok(v) => {
            h.insert(header::VARY, v);
        }
        // Not visible ASCII (an agent's): its own headers stay, ours is added beside them.
        Err(_) => {
            h.append(header::VARY, HeaderValue::from_static(token));
        }
    }
}

/// `v` serialized, or 503 if it cannot be (it always can for the gateway's own types).
pub fn to_json(v: &impl Serialize) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(v)
        .map_err(|e| ApiError::new(Code::Unavailable, format!("serialization: {e}")))
}

/// The headers of every event stream the gateway serves: no caching, no proxy buffering, and
/// no compression (a compressor would hold events back).
pub fn event_stream(body: Body) -> Response<Body> {
    let mut res = Response::new(body);
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}

/// 204: the stream is over before it started (an EventSource stops reconnecting on a 204).
pub fn no_more_events() -> Response<Body> {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::NO_CONTENT;
    res
}
