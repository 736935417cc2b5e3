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
