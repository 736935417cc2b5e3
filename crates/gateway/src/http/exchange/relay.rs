//! Step 6, **relay**: the agent's answer passed on to the client, with the body the gateway
//! chose (the agent's own, or the recorded task when the ledger refused what the agent said).

use bytes::Bytes;
use hyper::header;
use hyper::http::response::Parts;
use hyper::Response;

use crate::http::body::Body;
use crate::http::cors;
use crate::upstream::strip_hop_by_hop;

/// The answer to pass on: the agent's status and headers (hop-by-hop removed), with `body`.
pub fn relay(mut parts: Parts, body: Bytes) -> Response<Body> {
    strip_hop_by_hop(&mut parts.headers);
    cors::strip_agents(&mut parts.headers);
    parts.headers.remove(header::CONTENT_LENGTH);
    // The gateway speaks its own HTTP version to its client, whatever the agent spoke.
    parts.version = hyper::Version::HTTP_11;
    Response::from_parts(parts, Body::full(body))
}

/// Relay the agent's head with a body of the gateway's choosing (the recorded task): headers
/// that describe the agent's body would now describe something else.
pub fn relay_substituted(mut parts: Parts, agent_body: &Bytes, body: Bytes) -> Response<Body> {
    if body != *agent_body {
        for h in [
            header::ETAG,
            header::LAST_MODIFIED,
            header::CONTENT_ENCODING,
            header::CONTENT_LOCATION,
        ] {
            parts.headers.remove(h);
        }
        parts.headers.remove("digest");
        parts.headers.remove("content-digest");
    }
    relay(parts, body)
}
