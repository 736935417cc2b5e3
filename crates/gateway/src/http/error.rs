//! Errors the gateway itself produces, always as `{"error":{"code","message","details"?}}` with a
//! stable code (documented in the README) and the status that goes with it.

use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::Serialize;
use serde_json::Value;

use super::body::Body;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidJson,
    InvalidRequest,
    InputSchemaViolation,
    UnknownAgent,
    TaskNotFound,
    ArtifactNotFound,
    TaskTerminal,
    AgentUnavailable,
    AgentUnreachable,
    AgentTimeout,
    AgentProtocolViolation,
    PayloadTooLarge,
    UnsupportedMediaType,
    NotFound,
    MethodNotAllowed,
    Unavailable,
    Unauthorized,
    RequestTimeout,
    TransitionRefused,
    InvalidNotification,
}

impl Code {
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
            Code::Unauthorized => "UNAUTHORIZED",
            Code::RequestTimeout => "REQUEST_TIMEOUT",
            Code::TransitionRefused => "TRANSITION_REFUSED",
            Code::InvalidNotification => "INVALID_NOTIFICATION",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Code::InvalidJson | Code::InvalidRequest => StatusCode::BAD_REQUEST,
            Code::InputSchemaViolation => StatusCode::UNPROCESSABLE_ENTITY,
            Code::UnknownAgent | Code::TaskNotFound | Code::ArtifactNotFound | Code::NotFound => {
                StatusCode::NOT_FOUND
            }
            Code::TaskTerminal | Code::TransitionRefused => StatusCode::CONFLICT,
            Code::Unauthorized => StatusCode::UNAUTHORIZED,
            Code::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Code::InvalidNotification => StatusCode::UNPROCESSABLE_ENTITY,
            Code::AgentUnavailable | Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::AgentUnreachable | Code::AgentProtocolViolation => StatusCode::BAD_GATEWAY,
            Code::AgentTimeout => StatusCode::GATEWAY_TIMEOUT,
            Code::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        }
    }
}

/// An error answer of the gateway's own.
#[derive(Debug)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: impl Serialize) -> ApiError {
        self.details = serde_json::to_value(details).ok();
        self
    }

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
        .unwrap_or_else(|_| br#"{"error":{"code":"INTERNAL","message":"error body"}}"#.to_vec());
        let mut res = Response::new(Body::full(body));
        *res.status_mut() = self.code.status();
        res.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if self.code == Code::Unauthorized {
            res.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
        }
        res
    }
}

pub type ApiResult = Result<Response<Body>, ApiError>;
