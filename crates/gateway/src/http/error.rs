//! Errors the gateway itself produces, always as `{"error":{"code","message","details"?}}` with a
//! stable code (documented in the README) and the status that goes with it.
//!
//! Domain modules (protocol, ledger, registry, stream, upstream, webhook) return their own typed
//! errors and never import this module; the `From` impls at the end of this file are the one
//! place where each of them becomes an answer, so each failure has one code and one message.

use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};
use serde::Serialize;
use serde_json::Value;

use super::body::Body;
use crate::ledger::LedgerError;
use crate::limits::{AgentRefused, RateLimited, Refusal};
use crate::protocol::json::JsonError;
use crate::protocol::Violation;
use crate::registry::NoCard;
use crate::store::Failure;
use crate::stream::StreamError;
use crate::upstream::{AgentError, UpstreamError};
use crate::webhook::queue::QueueError;

/// The stable error codes; each one decides its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 400: the body is not one JSON document: not JSON, or an object names a key twice.
    InvalidJson,
    /// 400: JSON (or a query), but not what the route takes: no `input` object, a bad parameter.
    InvalidRequest,
    /// 422: `input` fails the card's `input_schema`.
    InputSchemaViolation,
    /// 404: no agent by that name or agent_id.
    UnknownAgent,
    /// 404: the gateway has not seen the task (or it belongs to another agent).
    TaskNotFound,
    /// 404: agent-less content of an artifact not yet listed through the gateway.
    ArtifactNotFound,
    /// 409: cancel of a terminal task, or a push that would change one.
    TaskTerminal,
    /// 503: the agent has no valid card, or is ejected after consecutive failures (answered
    /// without a call, with `Retry-After`).
    AgentUnavailable,
    /// 502: the agent refused, reset or closed the connection without an answer.
    AgentUnreachable,
    /// 504: the agent did not answer in time.
    AgentTimeout,
    /// 502: the agent's answer breaks A2A 1.0, or is larger than the gateway accepts.
    AgentProtocolViolation,
    /// 413: the body is over `max_body_bytes`.
    PayloadTooLarge,
    /// 415: a body that is not `application/json`.
    UnsupportedMediaType,
    /// 404: no such route (or the admin API is off, or no such subscriber).
    NotFound,
    /// 405: the route exists, but not with this method; answered with `Allow`.
    MethodNotAllowed,
    /// 503: the gateway cannot serve it now: the webhook queue is full, or streams are shutting
    /// down or out of room.
    Unavailable,
    /// 503: the gateway's store (Redis) failed, did not answer in time, or refuses writes
    /// (out of memory, read-only); answered with `Retry-After` and none of the store's words.
    StoreUnavailable,
    /// 401: no credentials, or credentials that name no client (a wrong key, a bad or expired
    /// JWT, a push without the agent's `ingest_token`, an admin call without `admin_token`);
    /// answered with `WWW-Authenticate: Bearer`.
    Unauthorized,
    /// 403: an authenticated client without the right, or the agent, a route needs.
    Forbidden,
    /// 429: the client already holds its `max_streams` open streams.
    TooManyStreams,
    /// 408: a client too slow with its request. Nothing in the gateway answers with it yet.
    RequestTimeout,
    /// 409: a push that would move a task backwards, or is older than the record.
    TransitionRefused,
    /// 422: a push that is not a well-formed `task.status.updated` notification.
    InvalidNotification,
    /// 422: an `Idempotency-Key` already used for a create with another body.
    IdempotencyKeyReused,
    /// 409: an `Idempotency-Key` whose first create is still in flight; answered with
    /// `Retry-After`.
    IdempotencyInProgress,
    /// 429: the client is past its `rate_per_sec` on this replica; answered with `Retry-After`
    /// (and, like every answer to a rate-limited client, `RateLimit` and `RateLimit-Policy`).
    RateLimited,
    /// 503: the agent has `max_in_flight` requests in flight on this replica; answered at once,
    /// without a call, with `Retry-After`.
    AgentBusy,
    /// 503: the in-process ledger holds `max_tasks` (or `max_ledger_bytes`) of live tasks
    /// changed within `task_retention_secs`, none of which it gives up for a new one; answered
    /// before the agent is called, with `Retry-After`.
    LedgerFull,
    /// 429: the client holds its `max_live_tasks` tasks that are not final yet; answered before
    /// the agent is called, with `Retry-After`.
    TooManyTasks,
    /// 429: the client holds its `max_contexts` official A2A conversations (contexts); a
    /// message that would start another is answered before the agent is called, with
    /// `Retry-After`.
    TooManyContexts,
    /// 503: a JWT of an `[[auth.oidc]]` issuer whose keys could not be fetched yet (its
    /// identity provider out of reach since start): it cannot be checked, which is not a
    /// refusal of the token; answered with `Retry-After`.
    AuthUnavailable,
    /// 503: the task lives on a replica of its agent that is gone or ejected (its in-memory
    /// store holds it; no other replica knows it); answered with `Retry-After` while it may
    /// come back. Past `replica_grace_ms` the task is failed in the ledger.
    ReplicaUnavailable,
}

impl Code {
    /// Every code, in the order of the enum (the OpenAPI document's `ErrorCode` lists each).
    pub const ALL: [Code; 32] = [
        Code::InvalidJson,
        Code::InvalidRequest,
        Code::InputSchemaViolation,
        Code::UnknownAgent,
        Code::TaskNotFound,
        Code::ArtifactNotFound,
        Code::TaskTerminal,
        Code::AgentUnavailable,
        Code::AgentUnreachable,
        Code::AgentTimeout,
        Code::AgentProtocolViolation,
        Code::PayloadTooLarge,
        Code::UnsupportedMediaType,
        Code::NotFound,
        Code::MethodNotAllowed,
        Code::Unavailable,
        Code::StoreUnavailable,
        Code::Unauthorized,
        Code::Forbidden,
        Code::TooManyStreams,
        Code::RequestTimeout,
        Code::TransitionRefused,
        Code::InvalidNotification,
        Code::IdempotencyKeyReused,
        Code::IdempotencyInProgress,
        Code::RateLimited,
        Code::AgentBusy,
        Code::LedgerFull,
        Code::TooManyTasks,
        Code::TooManyContexts,
        Code::AuthUnavailable,
        Code::ReplicaUnavailable,
    ];

    /// The code as the error body spells it (`INVALID_JSON`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidJson => "INVALID_JSON",
            Code::InvalidRequest => "INVALID_REQUEST",
            Code::InputSchemaViolation => "INPUT_SCHEMA_VIOLATION",
            Code::UnknownAgent => "UNKNOWN_AGENT",
            Code::TaskNotFound => "TASK_NOT_FOUND",
            Code::ArtifactNotFound => "ARTIFACT_NOT_FOUND",
            Code::TaskTerminal => "TASK_TERMINAL",
            Code::AgentUnavailable => "AGENT_UNAVAILABLE",
            Code::AgentUnreachable => "AGENT_UNREACHABLE",
            Code::AgentTimeout => "AGENT_TIMEOUT",
            Code::AgentProtocolViolation => "AGENT_PROTOCOL_VIOLATION",
            Code::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            Code::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            Code::NotFound => "NOT_FOUND",
            Code::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Code::Unavailable => "UNAVAILABLE",
            Code::StoreUnavailable => "STORE_UNAVAILABLE",
            Code::Unauthorized => "UNAUTHORIZED",
            Code::Forbidden => "FORBIDDEN",
            Code::TooManyStreams => "TOO_MANY_STREAMS",
            Code::RequestTimeout => "REQUEST_TIMEOUT",
            Code::TransitionRefused => "TRANSITION_REFUSED",
            Code::InvalidNotification => "INVALID_NOTIFICATION",
            Code::IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED",
            Code::IdempotencyInProgress => "IDEMPOTENCY_IN_PROGRESS",
            Code::RateLimited => "RATE_LIMITED",
            Code::AgentBusy => "AGENT_BUSY",
            Code::LedgerFull => "LEDGER_FULL",
            Code::TooManyTasks => "TOO_MANY_TASKS",
            Code::TooManyContexts => "TOO_MANY_CONTEXTS",
            Code::AuthUnavailable => "AUTH_UNAVAILABLE",
            Code::ReplicaUnavailable => "REPLICA_UNAVAILABLE",
        }
    }

    /// Whether the code says the ledger did not take a record it was given (its store failed,
    /// or the webhook queue is full) and may take it later: a task an agent made then is
    /// answered `pending` and recorded in the background, not refused.
    pub fn unrecorded(self) -> bool {
        matches!(self, Code::StoreUnavailable | Code::Unavailable)
    }

    /// The HTTP status that goes with the code.
    pub fn status(self) -> StatusCode {
        match self {
            Code::InvalidJson | Code::InvalidRequest => StatusCode::BAD_REQUEST,
            Code::InputSchemaViolation => StatusCode::UNPROCESSABLE_ENTITY,
            Code::UnknownAgent | Code::TaskNotFound | Code::ArtifactNotFound | Code::NotFound => {
                StatusCode::NOT_FOUND
            }
            Code::TaskTerminal | Code::TransitionRefused | Code::IdempotencyInProgress => {
                StatusCode::CONFLICT
            }
            Code::Unauthorized => StatusCode::UNAUTHORIZED,
            Code::Forbidden => StatusCode::FORBIDDEN,
            Code::TooManyStreams
            | Code::RateLimited
            | Code::TooManyTasks
            | Code::TooManyContexts => StatusCode::TOO_MANY_REQUESTS,
            Code::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Code::InvalidNotification | Code::IdempotencyKeyReused => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Code::AgentUnavailable
            | Code::Unavailable
            | Code::StoreUnavailable
            | Code::AgentBusy
            | Code::LedgerFull
            | Code::AuthUnavailable
            | Code::ReplicaUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::AgentUnreachable | Code::AgentProtocolViolation => StatusCode::BAD_GATEWAY,
            Code::AgentTimeout => StatusCode::GATEWAY_TIMEOUT,
            Code::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        }
    }
}

/// The body of an error whose own body cannot be serialized (never expected; documented as the
/// code `INTERNAL`).
pub const FALLBACK_BODY: &[u8] = br#"{"error":{"code":"INTERNAL","message":"error body"}}"#;

/// An error answer of the gateway's own.
#[derive(Debug)]
pub struct ApiError {
    /// The stable code, which also decides the status.
    pub code: Code,
    /// What happened, for a person.
    pub message: String,
    /// Structured detail (violations, the recorded task...), when there is any.
    pub details: Option<Value>,
    /// Headers the answer needs besides the body (`Allow`, `Retry-After`...).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    /// An error with this code and message, no details and no extra headers.
    pub fn new(code: Code, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            details: None,
            headers: Vec::new(),
        }
    }

    /// The same error, answered with `name: value` as well.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> ApiError {
        self.headers.push((name, value));
        self
    }

    /// The same error with `details` (left out if they do not serialize).
    pub fn with_details(mut self, details: impl Serialize) -> ApiError {
        self.details = serde_json::to_value(details).ok();
        self
    }

    /// The answer: the code's status, the JSON error body, the extra headers, and
    /// `WWW-Authenticate: Bearer` on a 401.
    pub fn into_response(self) -> Response<Body> {
        #[derive(Serialize)]
        struct Inner<'a> {
            code: &'a str,
            message: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            details: Option<&'a Value>,
        }
        #[derive(Serialize)]
        struct Outer<'a> {
            error: Inner<'a>,
        }
        let body = serde_json::to_vec(&Outer {
            error: Inner {
                code: self.code.as_str(),
                message: &self.message,
                details: self.details.as_ref(),
            },
        })
        .unwrap_or_else(|_| FALLBACK_BODY.to_vec());
        let mut res = Response::new(Body::full(body));
        *res.status_mut() = self.code.status();
        res.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in self.headers {
            res.headers_mut().insert(name, value);
        }
        if self.code == Code::Unauthorized {
            res.headers_mut()
                .entry(hyper::header::WWW_AUTHENTICATE)
                .or_insert(HeaderValue::from_static("Bearer"));
        }
        res
    }
}

/// What a handler returns.
pub type ApiResult = Result<Response<Body>, ApiError>;

impl From<LedgerError> for ApiError {
    /// A full ledger (or its store of contexts) is 503 LEDGER_FULL (`Retry-After: 5`: live
    /// tasks finish and make room), a client at its `max_live_tasks` 429 TOO_MANY_TASKS
    /// (`Retry-After: 1`), at its `max_contexts` 429 TOO_MANY_CONTEXTS (`Retry-After: 60`: a
    /// context frees itself only a retention after its last task), a full webhook queue 503
    /// UNAVAILABLE; a store failure 503 STORE_UNAVAILABLE ([`store_unavailable`]).
    fn from(e: LedgerError) -> ApiError {
        let (code, retry) = match e {
            LedgerError::Full | LedgerError::ContextsFull | LedgerError::ClientFull { .. } => {
                (Code::LedgerFull, "5")
            }
            LedgerError::TooManyTasks { .. } => (Code::TooManyTasks, "1"),
            LedgerError::TooManyContexts { .. } => (Code::TooManyContexts, "60"),
            LedgerError::QueueFull => return ApiError::new(Code::Unavailable, e.to_string()),
            LedgerError::Store(f) => return store_unavailable(Some(f)),
            LedgerError::Connect(_) => return store_unavailable(None),
        };
        ApiError::new(code, e.to_string()).with_header(RETRY_AFTER, HeaderValue::from_static(retry))
    }
}

impl From<QueueError> for ApiError {
    /// The delivery queue's store failed (the admin routes): 503 STORE_UNAVAILABLE.
    fn from(e: QueueError) -> ApiError {
        match e {
            QueueError::Store(f) => store_unavailable(Some(f)),
            QueueError::Connect(_) => store_unavailable(None),
        }
    }
}

/// 503 STORE_UNAVAILABLE: the store failed with `failure` (or, before anything is asked of
/// it, is known to refuse writes for that reason), or (`None`) is known down. The message is the gateway's, never the
/// store's (whose text, naming scripts, lines and limits, is in the log). `Retry-After: 5` when
/// Redis refuses writes (an operator frees memory or fails over: not a second's matter), else
/// 1.
pub fn store_unavailable(failure: Option<Failure>) -> ApiError {
    let (message, retry) = match failure {
        Some(f) if f.refuses_writes() => (format!("{f}; retry later"), "5"),
        Some(f) => (format!("{f}; retry shortly"), "1"),
        None => (Failure::Other.to_string() + "; retry shortly", "1"),
    };
    ApiError::new(Code::StoreUnavailable, message)
        .with_header(RETRY_AFTER, HeaderValue::from_static(retry))
}

impl From<JsonError> for ApiError {
    /// A body the gateway judges that is not one JSON document it can judge: 400 INVALID_JSON.
    /// A duplicate key is named, with the member's pointer in `details`; a number beyond f64 is
    /// "number out of range".
    fn from(e: JsonError) -> ApiError {
        match &e {
            JsonError::Syntax(_) => {
                ApiError::new(Code::InvalidJson, format!("body is not valid JSON: {e}"))
            }
            JsonError::NumberOutOfRange { .. } => {
                ApiError::new(Code::InvalidJson, format!("body has a {e}"))
            }
            JsonError::DuplicateKey { .. } => {
                let message = format!("body has a {e}; names in a JSON object must be unique");
                let at = Violation::new(e.pointer(), "duplicate_key", e.to_string());
                ApiError::new(Code::InvalidJson, message).with_details(vec![at])
            }
        }
    }
}

impl From<AgentError> for ApiError {
    fn from(e: AgentError) -> ApiError {
        let code = match e.error {
            UpstreamError::Timeout(_) => Code::AgentTimeout,
            UpstreamError::Unreachable(_) => Code::AgentUnreachable,
            UpstreamError::TooLarge(_) => Code::AgentProtocolViolation,
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<crate::caller::Refused> for ApiError {
    fn from(e: crate::caller::Refused) -> ApiError {
        ApiError::new(
            Code::Forbidden,
            format!(
                "this agent takes the caller's own token, and the token's audience does not include {:?}",
                e.audience
            ),
        )
    }
}

impl From<NoCard> for ApiError {
    fn from(e: NoCard) -> ApiError {
        ApiError::new(Code::AgentUnavailable, e.to_string())
    }
}

impl From<StreamError> for ApiError {
    fn from(e: StreamError) -> ApiError {
        let code = match e {
            StreamError::Agent(a) => return a.into(),
            StreamError::ShuttingDown
            | StreamError::TooManyTopics(_)
            | StreamError::Reloaded(_) => Code::Unavailable,
            StreamError::NoSuchTask { .. } => Code::TaskNotFound,
            StreamError::NotAnEventStream { .. } => Code::AgentProtocolViolation,
            StreamError::OpenTimeout { .. } => Code::AgentTimeout,
            StreamError::A2a(_) => Code::AgentProtocolViolation,
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<RateLimited> for ApiError {
    /// 429 RATE_LIMITED with `Retry-After` (the seconds until a token). The `RateLimit` and
    /// `RateLimit-Policy` headers are the pipeline's, on every answer to the client.
    fn from(e: RateLimited) -> ApiError {
        let retry = e.quota.reset_secs;
        ApiError::new(Code::RateLimited, e.to_string())
            .with_header(RETRY_AFTER, HeaderValue::from(retry))
            .with_details(serde_json::json!({
                "rate_per_sec": e.rate.per_sec(),
                "burst": e.rate.burst(),
                "retry_after_secs": retry,
            }))
    }
}

impl From<AgentRefused> for ApiError {
    /// An agent not called: 503 AGENT_BUSY past its `max_in_flight`, 503 AGENT_UNAVAILABLE while
    /// it is ejected; both with `Retry-After`.
    fn from(e: AgentRefused) -> ApiError {
        let retry = e.refusal.retry_after_secs();
        let (code, details) = match &e.refusal {
            Refusal::Busy { max_in_flight } => (
                Code::AgentBusy,
                serde_json::json!({ "max_in_flight": max_in_flight }),
            ),
            Refusal::Ejected { failures, .. } | Refusal::Probing { failures, .. } => (
                Code::AgentUnavailable,
                serde_json::json!({ "ejected": true, "consecutive_failures": failures }),
            ),
        };
        ApiError::new(code, e.to_string())
            .with_header(RETRY_AFTER, HeaderValue::from(retry))
            .with_details(details)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_failure_is_store_unavailable_in_the_gateways_words() {
        for (failure, retry) in [
            (Failure::Oom, "5"),
            (Failure::ReadOnly, "5"),
            (Failure::Timeout, "1"),
            (Failure::Other, "1"),
        ] {
            let from_ledger = ApiError::from(LedgerError::Store(failure));
            let from_queue = ApiError::from(QueueError::Store(failure));
            for e in [from_ledger, from_queue] {
                assert_eq!(e.code, Code::StoreUnavailable);
                assert_eq!(e.code.status(), StatusCode::SERVICE_UNAVAILABLE);
                assert_eq!(
                    e.message,
                    format!(
                        "{failure}; retry {}",
                        if retry == "5" { "later" } else { "shortly" }
                    )
                );
                let res = e.into_response();
                assert_eq!(res.headers()[RETRY_AFTER], retry, "{failure:?}");
            }
        }
        // A store known down before it is asked: the same code, a second to wait.
        let down = store_unavailable(None);
        assert_eq!(
            (down.code, down.headers[0].1.to_str().ok()),
            (Code::StoreUnavailable, Some("1"))
        );
    }

    #[test]
    fn a_full_webhook_queue_keeps_unavailable() {
        let e = ApiError::from(LedgerError::QueueFull);
        assert_eq!(e.code, Code::Unavailable);
        assert!(e.code.unrecorded() && Code::StoreUnavailable.unrecorded());
        assert!(!Code::LedgerFull.unrecorded());
    }
}
