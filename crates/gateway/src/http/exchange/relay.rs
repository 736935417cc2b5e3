//! Step 6, **relay**: the agent's answer passed on to the client, with the body the gateway
//! chose (the agent's own, or the recorded task when the ledger refused what the agent said).

use bytes::Bytes;
use hyper::header;
use hyper::http::response::Parts;
use hyper::Response;

use crate::http::body::Body;
use crate::http::cors;
use crate::upstream::strip_hop_by_hop;

/// Marks an agent's error answer (4xx or 5xx) relayed to the client: the pipeline's last stage
/// withholds its text (which may name the agent's address, its stack, its hosts) from a client
/// without the `metrics` or `admin` right, as the catalog withholds card errors.
#[derive(Debug, Clone)]
pub struct AgentError {
    /// The agent's `error.code`, when it is a plain code (`A-Z 0-9 _`, at most 64).
    pub code: Option<String>,
}

impl AgentError {
    /// Mark `parts` if their status is an error; `body` is read for the agent's code.
    pub fn mark(parts: &mut Parts, body: Option<&Bytes>) {
        if parts.status.as_u16() < 400 {
            return;
        }
        let code = body
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
            .and_then(|v| v.pointer("/error/code")?.as_str().map(str::to_owned))
            .filter(|c| {
                !c.is_empty()
                    && c.len() <= 64
                    && c.bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            });
        parts.extensions.insert(AgentError { code });
    }

    /// The answer a client without `metrics`/`admin` gets instead: the agent's status and
    /// `Retry-After`, its plain code (else `AGENT_ERROR`), and no text of the agent's.
    pub fn withheld(&self, res: Response<Body>, agent: &str) -> Response<Body> {
        let status = res.status();
        let retry = res.headers().get(header::RETRY_AFTER).cloned();
        let mut out = Response::new(Body::full(self.withheld_body(status, agent)));
        *out.status_mut() = status;
        out.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        if let Some(r) = retry {
            out.headers_mut().insert(header::RETRY_AFTER, r);
        }
        out
    }
}

impl AgentError {
    /// The body of [`AgentError::withheld`]: the gateway's error shape, the agent's plain code,
    /// none of its text. Also what a create's `Idempotency-Key` keeps for replay, which reaches
    /// the pipeline without this mark.
    pub fn withheld_body(&self, status: hyper::StatusCode, agent: &str) -> Bytes {
        let body = serde_json::json!({"error": {
            "code": self.code.as_deref().unwrap_or("AGENT_ERROR"),
            "message": format!("agent {agent:?} answered {status}; its own text is shown only to clients with the metrics or admin right"),
        }});
        Bytes::from(body.to_string())
    }
}

/// The answer to pass on: the agent's status and headers (hop-by-hop removed), with `body`.
pub fn relay(mut parts: Parts, body: Bytes) -> Response<Body> {
    AgentError::mark(&mut parts, Some(&body));
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
