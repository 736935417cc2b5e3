//! CORS for the origins in `[cors] allow_origins`: a page served from one of them may call the
//! API with `Authorization` and open an EventSource with `?access_token=`. Exact origins only;
//! no credentials mode (the gateway sets no cookies: the key travels in a header or the query).
//! Without `[cors]`, no CORS header is ever sent and browsers keep other origins out.

use hyper::header::{
    HeaderMap, HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE,
    ACCESS_CONTROL_REQUEST_METHOD, ORIGIN,
};
use hyper::{Method, Response, StatusCode};

use super::body::Body;
use super::error::{ApiError, ApiResult, Code};
use super::request::Request;
use super::route::Route;
use crate::state::State;

/// What a browser may send on a real request.
const ALLOW_HEADERS: &str =
    "authorization, content-type, last-event-id, idempotency-key, x-request-id";
/// What script on the page may read of an answer besides the CORS-safelisted headers.
const EXPOSE_HEADERS: &str = "x-request-id, retry-after, www-authenticate, idempotent-replayed, x-a2a-ledger, x-a2a-source, x-a2a-card-state, ratelimit, ratelimit-policy";

/// The request's `Origin`, if it is one of the allowed origins.
pub fn origin(state: &State, headers: &HeaderMap) -> Option<HeaderValue> {
    let cors = state.config.cors.as_ref()?;
    let origin = headers.get(ORIGIN)?;
    cors.allow_origins
        .iter()
        .any(|o| o.as_bytes() == origin.as_bytes())
        .then(|| origin.clone())
}

/// The answer to a CORS preflight (`OPTIONS` with `Access-Control-Request-Method`), when
/// `[cors]` is configured: 204 with what the origin may send for an allowed origin, 403 for
/// another. `None` for every other request.
pub fn preflight(state: &State, route: &Route<'_>, req: &Request) -> Option<ApiResult> {
    let cors = state.config.cors.as_ref()?;
    if req.method() != Method::OPTIONS || !req.headers().contains_key(ACCESS_CONTROL_REQUEST_METHOD)
    {
        return None;
    }
    if *route == Route::NotFound {
        return Some(Err(ApiError::new(Code::NotFound, "no such route")));
    }
    // The answer's `Access-Control-Allow-Origin` is set with every answer's, in stage 5.
    if origin(state, req.headers()).is_none() {
        return Some(Err(ApiError::new(
            Code::Forbidden,
            "this origin is not in [cors] allow_origins",
        )));
    }
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::NO_CONTENT;
    let h = res.headers_mut();
    h.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST"),
    );
    h.insert(
        ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOW_HEADERS),
    );
    h.insert(
        ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from(cors.max_age.as_secs()),
    );
    Some(Ok(res))
}

/// Remove an agent's own `Access-Control-*` headers from its answer before it is relayed: who
/// may read the gateway's answers is the gateway's decision, not an agent's.
pub fn strip_agents(h: &mut HeaderMap) {
    let theirs: Vec<_> = h
        .keys()
        .filter(|k| k.as_str().starts_with("access-control-"))
        .cloned()
        .collect();
    for k in theirs {
        h.remove(k);
    }
}

/// Stage 5 for every answer, with `[cors]`: `Vary: Origin` (the answer depends on it), and for
/// an allowed origin the headers that let its page read this answer.
pub fn answer(state: &State, h: &mut HeaderMap, origin: Option<HeaderValue>) {
    if state.config.cors.is_none() {
        return;
    }
    crate::http::response::vary(h, "origin");
    if let Some(origin) = origin {
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSE_HEADERS),
        );
    }
}
