//! A2A errors (§3.3.2, §5.4) and their two renderings: a JSON-RPC error object (§9.5) and a
//! google.rpc.Status (§11.6). Both carry the same `google.rpc.ErrorInfo`, so a client of either
//! binding, and either SDK, reads the same reason.
//!
//! What the SDKs read (tests/a2a/README.md, "Wire facts"): a2a-sdk maps a JSON-RPC error by its
//! `code`, a REST error by the ErrorInfo `reason`; @a2a-js/sdk the same. Neither reads `domain`
//! for the mapping, so the gateway's own errors (domain `a2a-gateway`, JSON-RPC code -32000) reach
//! users as generic errors whose message and ErrorInfo are kept.

use serde_json::{json, Map, Value};

use crate::protocol::{Violation, MAX_VIOLATIONS};

/// `@type` of a google.rpc.ErrorInfo detail.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// `@type` of a google.rpc.BadRequest detail.
pub const BAD_REQUEST_TYPE: &str = "type.googleapis.com/google.rpc.BadRequest";
/// The ErrorInfo domain of the protocol's errors.
pub const A2A_DOMAIN: &str = "a2a-protocol.org";
/// The ErrorInfo domain of the gateway's own errors.
pub const GATEWAY_DOMAIN: &str = "a2a-gateway";
/// The JSON-RPC code of the gateway's own errors (the implementation-defined server range).
pub const GATEWAY_CODE: i64 = -32000;

/// Which error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// -32001, 404.
    TaskNotFound,
    /// -32002, 400.
    TaskNotCancelable,
    /// -32003, 400.
    PushNotificationNotSupported,
    /// -32004, 400.
    UnsupportedOperation,
    /// -32005, 400.
    ContentTypeNotSupported,
    /// -32006, 500.
    InvalidAgentResponse,
    /// -32007, 400.
    ExtendedAgentCardNotConfigured,
    /// -32008, 400.
    ExtensionSupportRequired,
    /// -32009, 400.
    VersionNotSupported,
    /// JSON-RPC -32700: the body is not one JSON document.
    ParseError,
    /// JSON-RPC -32600: not a valid request object.
    InvalidRequest,
    /// JSON-RPC -32601.
    MethodNotFound,
    /// JSON-RPC -32602, 400 with a google.rpc.BadRequest naming the fields.
    InvalidParams,
    /// JSON-RPC -32603, 500.
    InternalError,
    /// The gateway's own: domain `a2a-gateway`, JSON-RPC -32000, `reason` the gateway's code
    /// (`AGENT_BUSY`, `AGENT_TIMEOUT`, `RATE_LIMITED`...) under HTTP `status`.
    Gateway {
        /// UPPER_SNAKE code, as on the Clawpedia routes.
        reason: String,
        /// The HTTP status on REST routes (and for refusals before admission on JSON-RPC).
        status: u16,
    },
    /// An error an agent sent that is none of the above (another code, reason or domain): kept
    /// as it came so that it can be relayed in either binding.
    Other(Box<OtherError>),
}

/// An error of no kind the gateway knows, kept as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherError {
    /// Its JSON-RPC code (-32603 when it came as REST).
    pub code: i64,
    /// Its HTTP status (500 when it came as JSON-RPC).
    pub status: u16,
    /// Its ErrorInfo reason, or empty.
    pub reason: String,
    /// Its ErrorInfo domain, or empty.
    pub domain: String,
}

fn other(code: i64, status: u16, reason: &str, domain: &str) -> ErrorKind {
    ErrorKind::Other(Box::new(OtherError {
        code,
        status,
        reason: reason.to_owned(),
        domain: domain.to_owned(),
    }))
}

/// The fixed facts of each protocol kind: kind, JSON-RPC code, HTTP status, gRPC status name,
/// ErrorInfo reason, default message.
const TABLE: [(ErrorKind, i64, u16, &str, &str, &str); 14] = [
    (
        ErrorKind::TaskNotFound,
        -32001,
        404,
        "NOT_FOUND",
        "TASK_NOT_FOUND",
        "Task not found",
    ),
    (
        ErrorKind::TaskNotCancelable,
        -32002,
        400,
        "FAILED_PRECONDITION",
        "TASK_NOT_CANCELABLE",
        "Task cannot be canceled",
    ),
    (
        ErrorKind::PushNotificationNotSupported,
        -32003,
        400,
        "FAILED_PRECONDITION",
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        "Push Notification is not supported",
    ),
    (
        ErrorKind::UnsupportedOperation,
        -32004,
        400,
        "FAILED_PRECONDITION",
        "UNSUPPORTED_OPERATION",
        "This operation is not supported",
    ),
    (
        ErrorKind::ContentTypeNotSupported,
        -32005,
        400,
        "INVALID_ARGUMENT",
        "CONTENT_TYPE_NOT_SUPPORTED",
        "Incompatible content types",
    ),
    (
        ErrorKind::InvalidAgentResponse,
        -32006,
        500,
        "INTERNAL",
        "INVALID_AGENT_RESPONSE",
        "Invalid agent response",
    ),
    (
        ErrorKind::ExtendedAgentCardNotConfigured,
        -32007,
        400,
        "FAILED_PRECONDITION",
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        "Extended Agent Card not configured",
    ),
    (
        ErrorKind::ExtensionSupportRequired,
        -32008,
        400,
        "FAILED_PRECONDITION",
        "EXTENSION_SUPPORT_REQUIRED",
        "Extension support required",
    ),
    (
        ErrorKind::VersionNotSupported,
        -32009,
        400,
        "FAILED_PRECONDITION",
        "VERSION_NOT_SUPPORTED",
        "Version not supported",
    ),
    // §9.5's JSONParseError; by §11.6's rule its reason is JSON_PARSE (a2a-sdk's REST server
    // says INVALID_REQUEST for it, @a2a-js/sdk has none; neither maps it to a class).
    (
        ErrorKind::ParseError,
        -32700,
        400,
        "INVALID_ARGUMENT",
        "JSON_PARSE",
        "Invalid JSON payload",
    ),
    (
        ErrorKind::InvalidRequest,
        -32600,
        400,
        "INVALID_ARGUMENT",
        "INVALID_REQUEST",
        "Request payload validation error",
    ),
    (
        ErrorKind::MethodNotFound,
        -32601,
        404,
        "NOT_FOUND",
        "METHOD_NOT_FOUND",
        "Method not found",
    ),
    (
        ErrorKind::InvalidParams,
        -32602,
        400,
        "INVALID_ARGUMENT",
        "INVALID_PARAMS",
        "Invalid parameters",
    ),
    // §11.6's rule would give INTERNAL; both SDKs say INTERNAL_ERROR, and interoperating wins.
    (
        ErrorKind::InternalError,
        -32603,
        500,
        "INTERNAL",
        "INTERNAL_ERROR",
        "Internal error",
    ),
];

impl ErrorKind {
    fn row(
        &self,
    ) -> Option<&'static (
        ErrorKind,
        i64,
        u16,
        &'static str,
        &'static str,
        &'static str,
    )> {
        TABLE.iter().find(|r| &r.0 == self)
    }

    /// The JSON-RPC error code.
    pub fn jsonrpc_code(&self) -> i64 {
        match self {
            ErrorKind::Gateway { .. } => GATEWAY_CODE,
            ErrorKind::Other(o) => o.code,
            k => k.row().map_or(-32603, |r| r.1),
        }
    }

    /// The HTTP status on the REST binding (§5.4).
    pub fn http_status(&self) -> u16 {
        match self {
            ErrorKind::Gateway { status, .. } => *status,
            ErrorKind::Other(o) => o.status,
            k => k.row().map_or(500, |r| r.2),
        }
    }

    /// google.rpc.Status `status`, and gRPC's status code: the gRPC code name (§5.4's column;
    /// for the gateway's own errors [`gateway_grpc`]'s table, else Google's HTTP mapping).
    pub fn grpc_status(&self) -> &'static str {
        match self {
            ErrorKind::Gateway { reason, status } => {
                gateway_grpc(reason).unwrap_or_else(|| grpc_for_http(*status))
            }
            ErrorKind::Other(o) => grpc_for_http(o.status),
            k => k.row().map_or("INTERNAL", |r| r.3),
        }
    }

    /// The ErrorInfo `reason`.
    pub fn reason(&self) -> &str {
        match self {
            ErrorKind::Gateway { reason, .. } => reason,
            ErrorKind::Other(o) => &o.reason,
            k => k.row().map_or("INTERNAL_ERROR", |r| r.4),
        }
    }

    /// The ErrorInfo `domain`.
    pub fn domain(&self) -> &str {
        match self {
            ErrorKind::Gateway { .. } => GATEWAY_DOMAIN,
            ErrorKind::Other(o) => &o.domain,
            _ => A2A_DOMAIN,
        }
    }

    fn default_message(&self) -> &'static str {
        match self {
            ErrorKind::Gateway { .. } | ErrorKind::Other(_) => "Error",
            k => k.row().map_or("Error", |r| r.5),
        }
    }

    /// The protocol kind with this JSON-RPC code, if one.
    pub fn from_code(code: i64) -> Option<ErrorKind> {
        TABLE.iter().find(|r| r.1 == code).map(|r| r.0.clone())
    }

    /// The protocol kind with this ErrorInfo reason (domain `a2a-protocol.org`), if one. Accepts
    /// `INTERNAL` for InternalError too (§11.6's own rule).
    pub fn from_reason(reason: &str) -> Option<ErrorKind> {
        if reason == "INTERNAL" {
            return Some(ErrorKind::InternalError);
        }
        TABLE.iter().find(|r| r.4 == reason).map(|r| r.0.clone())
    }
}

/// The gRPC code of the gateway's own errors by their reason: one table wherever a gRPC status
/// is written (the gRPC binding's `grpc-status`, the HTTP+JSON binding's google.rpc.Status),
/// docs/official-a2a.md's. A reason not here takes its HTTP status's code.
pub fn gateway_grpc(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "UNAUTHORIZED" => "UNAUTHENTICATED",
        "FORBIDDEN" | "ACCESS_REVOKED" => "PERMISSION_DENIED",
        "RATE_LIMITED" | "TOO_MANY_STREAMS" | "TOO_MANY_TASKS" | "TOO_MANY_CONTEXTS"
        | "PAYLOAD_TOO_LARGE" | "SLOW_CONSUMER" => "RESOURCE_EXHAUSTED",
        "AGENT_BUSY"
        | "AGENT_UNAVAILABLE"
        | "AGENT_UNREACHABLE"
        | "LEDGER_FULL"
        | "STORE_UNAVAILABLE"
        | "REPLICA_UNAVAILABLE"
        | "AUTH_UNAVAILABLE"
        | "DRAINING"
        | "UPSTREAM_ERROR" => "UNAVAILABLE",
        "AGENT_TIMEOUT" => "DEADLINE_EXCEEDED",
        _ => return None,
    })
}

/// Google's mapping of HTTP statuses to canonical codes (google/rpc/code.proto).
fn grpc_for_http(status: u16) -> &'static str {
    match status {
        400 | 413 | 415 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        502 | 503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        400..=499 => "FAILED_PRECONDITION",
        _ => "INTERNAL",
    }
}

/// One A2A error: which, a message for a person, ErrorInfo metadata, and (for InvalidParams and
/// InvalidAgentResponse) the violations found, which render as a google.rpc.BadRequest.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aError {
    /// Which error.
    pub kind: ErrorKind,
    /// For a person.
    pub message: String,
    /// The violations, each naming a field (`instance_path`, a JSON pointer into the params).
    pub details: Vec<Violation>,
    /// google.rpc.ErrorInfo `metadata` (string values, as the proto's map<string, string>).
    pub metadata: Map<String, Value>,
    /// An agent's own error, read from its answer: its message, metadata and details are the
    /// agent's text, shown only to clients that may read agents' errors ([`A2aError::withheld`]).
    pub agents: bool,
}

impl A2aError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> A2aError {
        A2aError {
            kind,
            message: message.into(),
            details: Vec::new(),
            metadata: Map::new(),
            agents: false,
        }
    }

    /// An error of `kind` with the spec's standard message.
    pub fn of(kind: ErrorKind) -> A2aError {
        let message = kind.default_message();
        A2aError::new(kind, message)
    }

    /// InvalidParams naming the fields in `details` (at most [`MAX_VIOLATIONS`]).
    pub fn invalid_params(mut details: Vec<Violation>) -> A2aError {
        details.truncate(MAX_VIOLATIONS);
        let message = match details.first() {
            Some(v) if details.len() == 1 => format!("Invalid parameters: {}", v.message),
            _ => "Invalid parameters".to_owned(),
        };
        A2aError {
            details,
            ..A2aError::new(ErrorKind::InvalidParams, message)
        }
    }

    /// InvalidAgentResponse with the violations found in the agent's answer.
    pub fn invalid_agent_response(mut details: Vec<Violation>) -> A2aError {
        details.truncate(MAX_VIOLATIONS);
        A2aError {
            details,
            ..A2aError::of(ErrorKind::InvalidAgentResponse)
        }
    }

    /// The gateway's own error `reason` under HTTP `status`, e.g. (`AGENT_BUSY`, 503).
    pub fn gateway(reason: &str, status: u16, message: impl Into<String>) -> A2aError {
        A2aError::new(
            ErrorKind::Gateway {
                reason: reason.to_owned(),
                status,
            },
            message,
        )
    }

    /// With one ErrorInfo metadata entry.
    pub fn with_metadata(mut self, key: &str, value: &str) -> A2aError {
        self.metadata.insert(key.to_owned(), Value::from(value));
        self
    }

    /// Marked as an agent's own error (see [`A2aError::agents`]).
    pub fn the_agents_own(mut self) -> A2aError {
        self.agents = true;
        self
    }

    /// The agent's error as a client that may not read agents' texts gets it: its kind kept
    /// whole where the protocol defines it (JSON-RPC code, HTTP status, ErrorInfo reason), so
    /// that an SDK still tells which error it is; for a kind of the agent's own, its code and
    /// status, its reason when that is a plain code (`A-Z 0-9 _`, at most 64, as a Clawpedia
    /// agent's `error.code`), else `AGENT_ERROR`, in the domain `agent`. The message is the
    /// gateway's; the agent's message, metadata and field violations are not kept.
    pub fn withheld(&self, agent: &str) -> A2aError {
        let kind = match &self.kind {
            ErrorKind::Other(o) => {
                let plain = !o.reason.is_empty()
                    && o.reason.len() <= 64
                    && o.reason
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
                other(
                    o.code,
                    o.status,
                    if plain { &o.reason } else { "AGENT_ERROR" },
                    "agent",
                )
            }
            k => k.clone(),
        };
        let message = format!(
            "{}: agent {agent:?}'s own text is shown only to clients with the metrics or admin right",
            match &kind {
                ErrorKind::Other(o) => o.reason.as_str(),
                k => k.default_message(),
            }
        );
        A2aError::new(kind, message)
    }

    /// The `details` array both renderings carry: ErrorInfo first, then a BadRequest when there
    /// are violations.
    pub fn detail_objects(&self) -> Vec<Value> {
        let mut info = json!({
            "@type": ERROR_INFO_TYPE,
            "reason": self.kind.reason(),
            "domain": self.kind.domain(),
        });
        if !self.metadata.is_empty() {
            info["metadata"] = Value::Object(self.metadata.clone());
        }
        let mut out = vec![info];
        if !self.details.is_empty() {
            let violations: Vec<Value> = self
                .details
                .iter()
                .map(|v| json!({"field": dotted(&v.instance_path), "description": v.message}))
                .collect();
            out.push(json!({"@type": BAD_REQUEST_TYPE, "fieldViolations": violations}));
        }
        out
    }

    /// The JSON-RPC `error` member (§9.5): `{code, message, data: [ErrorInfo, BadRequest?]}`.
    pub fn to_jsonrpc(&self) -> Value {
        json!({
            "code": self.kind.jsonrpc_code(),
            "message": self.message,
            "data": self.detail_objects(),
        })
    }

    /// The REST body (§11.6): `{"error": {code, status, message, details}}`, sent under
    /// [`ErrorKind::http_status`].
    pub fn to_status(&self) -> Value {
        json!({"error": {
            "code": self.kind.http_status(),
            "status": self.kind.grpc_status(),
            "message": self.message,
            "details": self.detail_objects(),
        }})
    }

    /// A JSON-RPC `error` member an agent sent, read back. Known codes become their kind; the
    /// gateway's code with domain `a2a-gateway` becomes [`ErrorKind::Gateway`] (status 503
    /// unless the metadata says `httpStatus`); anything else is [`ErrorKind::Other`].
    pub fn from_jsonrpc(error: &Value) -> A2aError {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
        let message = str_of(error.get("message")).unwrap_or("").to_owned();
        let details = error.get("data").and_then(Value::as_array);
        let (info, violations) = read_details(details);
        let kind = match (ErrorKind::from_code(code), &info) {
            (Some(k), _) => k,
            (None, Some((reason, domain, _)))
                if code == GATEWAY_CODE && domain == GATEWAY_DOMAIN =>
            {
                ErrorKind::Gateway {
                    reason: reason.clone(),
                    status: 503,
                }
            }
            (None, info) => other(
                code,
                500,
                info.as_ref().map_or("", |i| i.0.as_str()),
                info.as_ref().map_or("", |i| i.1.as_str()),
            ),
        };
        finish(kind, message, info, violations)
    }

    /// A google.rpc.Status body an agent sent under HTTP `status`, read back; `None` when the
    /// body is not one (`{"error": {...}}`). The kind comes from the ErrorInfo reason when its
    /// domain is the protocol's, else it is [`ErrorKind::Other`] (or Gateway for ours).
    pub fn from_status(status: u16, body: &Value) -> Option<A2aError> {
        let error = body.get("error").filter(|e| e.is_object())?;
        let message = str_of(error.get("message")).unwrap_or("").to_owned();
        let (info, violations) = read_details(error.get("details").and_then(Value::as_array));
        let kind = match &info {
            Some((reason, domain, _)) if domain == A2A_DOMAIN => ErrorKind::from_reason(reason)
                .unwrap_or_else(|| other(-32603, status, reason, domain)),
            Some((reason, domain, _)) if domain == GATEWAY_DOMAIN => ErrorKind::Gateway {
                reason: reason.clone(),
                status,
            },
            Some((reason, domain, _)) => other(-32603, status, reason, domain),
            None => other(-32603, status, "", ""),
        };
        Some(finish(kind, message, info, violations))
    }
}

type Info = (String, String, Map<String, Value>);

fn finish(
    kind: ErrorKind,
    message: String,
    info: Option<Info>,
    details: Vec<Violation>,
) -> A2aError {
    let message = if message.is_empty() {
        kind.default_message().to_owned()
    } else {
        message
    };
    A2aError {
        kind,
        message,
        details,
        metadata: info.map(|i| i.2).unwrap_or_default(),
        agents: false,
    }
}

fn str_of(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// The first ErrorInfo (reason, domain, metadata) and every BadRequest field violation.
fn read_details(details: Option<&Vec<Value>>) -> (Option<Info>, Vec<Violation>) {
    let mut info = None;
    let mut violations = Vec::new();
    for d in details.into_iter().flatten() {
        match str_of(d.get("@type")) {
            Some(ERROR_INFO_TYPE) if info.is_none() => {
                let metadata = d
                    .get("metadata")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                info = Some((
                    str_of(d.get("reason")).unwrap_or("").to_owned(),
                    str_of(d.get("domain")).unwrap_or("").to_owned(),
                    metadata,
                ));
            }
            Some(BAD_REQUEST_TYPE) => {
                for fv in d
                    .get("fieldViolations")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .take(MAX_VIOLATIONS)
                {
                    violations.push(Violation::new(
                        pointer(str_of(fv.get("field")).unwrap_or("")),
                        "google.rpc.BadRequest",
                        str_of(fv.get("description")).unwrap_or(""),
                    ));
                }
            }
            _ => {}
        }
    }
    violations.truncate(MAX_VIOLATIONS);
    (info, violations)
}

/// A JSON pointer as a BadRequest field path: `/message/parts/0/text` → `message.parts[0].text`
/// (the spec's and a2a-sdk's style).
pub fn dotted(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push('[');
            out.push_str(&seg);
            out.push(']');
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

/// The inverse of [`dotted`], for fields read back from a BadRequest.
pub fn pointer(dotted: &str) -> String {
    let mut out = String::new();
    for part in dotted.split('.').filter(|p| !p.is_empty()) {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            out.push('/');
            out.push_str(&name.replace('~', "~0").replace('/', "~1"));
        }
        for idx in rest.split('[') {
            let idx = idx.trim_end_matches(']');
            if !idx.is_empty() {
                out.push('/');
                out.push_str(idx);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_error_has_the_spec_code_status_and_reason() {
        let want = [
            (ErrorKind::TaskNotFound, -32001, 404, "TASK_NOT_FOUND"),
            (
                ErrorKind::TaskNotCancelable,
                -32002,
                400,
                "TASK_NOT_CANCELABLE",
            ),
            (
                ErrorKind::PushNotificationNotSupported,
                -32003,
                400,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ),
            (
                ErrorKind::UnsupportedOperation,
                -32004,
                400,
                "UNSUPPORTED_OPERATION",
            ),
            (
                ErrorKind::ContentTypeNotSupported,
                -32005,
                400,
                "CONTENT_TYPE_NOT_SUPPORTED",
            ),
            (
                ErrorKind::InvalidAgentResponse,
                -32006,
                500,
                "INVALID_AGENT_RESPONSE",
            ),
            (
                ErrorKind::ExtendedAgentCardNotConfigured,
                -32007,
                400,
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ),
            (
                ErrorKind::ExtensionSupportRequired,
                -32008,
                400,
                "EXTENSION_SUPPORT_REQUIRED",
            ),
            (
                ErrorKind::VersionNotSupported,
                -32009,
                400,
                "VERSION_NOT_SUPPORTED",
            ),
            (ErrorKind::ParseError, -32700, 400, "JSON_PARSE"),
            (ErrorKind::InvalidRequest, -32600, 400, "INVALID_REQUEST"),
            (ErrorKind::MethodNotFound, -32601, 404, "METHOD_NOT_FOUND"),
            (ErrorKind::InvalidParams, -32602, 400, "INVALID_PARAMS"),
            (ErrorKind::InternalError, -32603, 500, "INTERNAL_ERROR"),
        ];
        for (kind, code, status, reason) in want {
            assert_eq!(kind.jsonrpc_code(), code, "{kind:?}");
            assert_eq!(kind.http_status(), status, "{kind:?}");
            assert_eq!(kind.reason(), reason, "{kind:?}");
            assert_eq!(kind.domain(), A2A_DOMAIN);
            assert_eq!(ErrorKind::from_code(code), Some(kind.clone()));
            assert_eq!(ErrorKind::from_reason(reason), Some(kind));
        }
        assert_eq!(ErrorKind::TaskNotFound.grpc_status(), "NOT_FOUND");
        assert_eq!(
            ErrorKind::VersionNotSupported.grpc_status(),
            "FAILED_PRECONDITION"
        );
    }

    #[test]
    fn renders_as_the_spec_shows() {
        let e = A2aError::of(ErrorKind::TaskNotFound).with_metadata("taskId", "t-1");
        assert_eq!(
            e.to_jsonrpc(),
            json!({"code": -32001, "message": "Task not found", "data": [{
                "@type": ERROR_INFO_TYPE, "reason": "TASK_NOT_FOUND",
                "domain": "a2a-protocol.org", "metadata": {"taskId": "t-1"}}]})
        );
        assert_eq!(
            e.to_status(),
            json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "Task not found",
                "details": [{"@type": ERROR_INFO_TYPE, "reason": "TASK_NOT_FOUND",
                    "domain": "a2a-protocol.org", "metadata": {"taskId": "t-1"}}]}})
        );
    }

    #[test]
    fn invalid_params_names_the_field_in_a_bad_request() {
        let e = A2aError::invalid_params(vec![Violation::new(
            "/message/parts/0",
            "Part",
            "a Part holds exactly one of text, raw, url, data",
        )]);
        let status = e.to_status();
        assert_eq!(status["error"]["code"], 400);
        assert_eq!(status["error"]["details"][0]["reason"], "INVALID_PARAMS");
        assert_eq!(status["error"]["details"][1]["@type"], BAD_REQUEST_TYPE);
        assert_eq!(
            status["error"]["details"][1]["fieldViolations"][0]["field"],
            "message.parts[0]"
        );
        let back = A2aError::from_status(400, &status).expect("a Status");
        assert_eq!(back.kind, ErrorKind::InvalidParams);
        assert_eq!(back.details[0].instance_path, "/message/parts/0");
        let back = A2aError::from_jsonrpc(&e.to_jsonrpc());
        assert_eq!(back.kind, ErrorKind::InvalidParams);
        assert_eq!(back.details.len(), 1);
    }

    #[test]
    fn the_gateways_own_errors_round_trip() {
        let e = A2aError::gateway("AGENT_BUSY", 503, "the agent is at its concurrency limit");
        let rpc = e.to_jsonrpc();
        assert_eq!(rpc["code"], -32000);
        assert_eq!(rpc["data"][0]["domain"], "a2a-gateway");
        assert_eq!(rpc["data"][0]["reason"], "AGENT_BUSY");
        let status = e.to_status();
        assert_eq!(status["error"]["code"], 503);
        assert_eq!(status["error"]["status"], "UNAVAILABLE");
        assert_eq!(A2aError::from_status(503, &status), Some(e.clone()));
        assert_eq!(A2aError::from_jsonrpc(&rpc), e);
        assert_eq!(
            A2aError::gateway("RATE_LIMITED", 429, "slow down")
                .kind
                .grpc_status(),
            "RESOURCE_EXHAUSTED"
        );
    }

    #[test]
    fn what_the_sdk_servers_send_reads_back() {
        // a2a-sdk 1.3.0's JSON-RPC InvalidParams, as it was observed (metadata not strings).
        let rpc = json!({"code": -32602, "message": "Validation failed", "data": [
            {"@type": ERROR_INFO_TYPE, "reason": "INVALID_PARAMS", "domain": A2A_DOMAIN,
             "metadata": {"errors": [{"field": "message.message_id", "message": "Field is required."}]}},
            {"@type": BAD_REQUEST_TYPE, "fieldViolations": [
                {"field": "message.message_id", "description": "Field is required."}]}]});
        let e = A2aError::from_jsonrpc(&rpc);
        assert_eq!(e.kind, ErrorKind::InvalidParams);
        assert_eq!(e.message, "Validation failed");
        assert_eq!(e.details[0].instance_path, "/message/message_id");
        // An unknown code and domain are kept, not turned into something else.
        let e = A2aError::from_jsonrpc(&json!({"code": -32042, "message": "quota",
            "data": [{"@type": ERROR_INFO_TYPE, "reason": "QUOTA", "domain": "example.com"}]}));
        assert_eq!(e.kind.jsonrpc_code(), -32042);
        assert_eq!(e.kind.reason(), "QUOTA");
        assert_eq!(e.kind.domain(), "example.com");
        // Not a Status at all.
        assert_eq!(
            A2aError::from_status(502, &json!({"detail": "bad gateway"})),
            None
        );
        assert_eq!(A2aError::from_status(502, &json!("oops")), None);
        // A Status without ErrorInfo keeps the HTTP status.
        let e =
            A2aError::from_status(418, &json!({"error": {"message": "teapot"}})).expect("Status");
        assert_eq!(e.kind.http_status(), 418);
        assert_eq!(e.message, "teapot");
        // A missing message gets the standard one.
        assert_eq!(
            A2aError::from_jsonrpc(&json!({"code": -32001})).message,
            "Task not found"
        );
    }

    /// An agent's error withheld keeps what an SDK maps by (code, status, a plain reason) and
    /// none of the agent's words: message, metadata, violations, an address in the reason.
    #[test]
    fn an_agents_error_withheld_keeps_its_kind_and_none_of_its_text() {
        let leak = "http://127.0.0.1:18103/db?password=hunter2";
        let sent = json!({"code": -32001, "message": format!("internal error at {leak}"),
            "data": [{"@type": ERROR_INFO_TYPE, "reason": "TASK_NOT_FOUND",
                "domain": A2A_DOMAIN, "metadata": {"where": leak}},
                {"@type": BAD_REQUEST_TYPE, "fieldViolations": [{"field": "id", "description": leak}]}]});
        let e = A2aError::from_jsonrpc(&sent).the_agents_own();
        assert!(e.agents && e.to_jsonrpc().to_string().contains(leak));
        let w = e.withheld("echo");
        assert_eq!(w.kind, ErrorKind::TaskNotFound);
        assert!(!w.agents, "nothing of the agent's is left to withhold");
        for rendered in [w.to_jsonrpc(), w.to_status()] {
            let text = rendered.to_string();
            assert!(
                !text.contains("18103") && !text.contains("hunter2"),
                "{text}"
            );
            assert!(
                text.contains("TASK_NOT_FOUND") && text.contains("echo"),
                "{text}"
            );
        }
        assert_eq!(w.to_jsonrpc()["code"], -32001);
        assert_eq!(w.to_status()["error"]["code"], 404);
        // A kind of the agent's own: its code and status, its reason when plain, else none.
        let own = |reason: &str| {
            A2aError::from_status(
                409,
                &json!({"error": {"code": 409, "message": leak, "details": [
                    {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": "agent.internal"}]}}),
            )
            .expect("a status")
            .the_agents_own()
            .withheld("echo")
        };
        let w = own("QUOTA_EXCEEDED");
        assert_eq!(w.kind.reason(), "QUOTA_EXCEEDED");
        assert_eq!((w.kind.http_status(), w.kind.domain()), (409, "agent"));
        let w = own(leak);
        assert_eq!(w.kind.reason(), "AGENT_ERROR");
        assert!(!w.to_status().to_string().contains("18103"));
    }

    #[test]
    fn field_paths_convert_both_ways() {
        for (p, d) in [
            ("/message/parts/0/text", "message.parts[0].text"),
            ("/id", "id"),
            ("", ""),
            (
                "/configuration/taskPushNotificationConfig/url",
                "configuration.taskPushNotificationConfig.url",
            ),
            ("/tasks/3/history/1", "tasks[3].history[1]"),
        ] {
            assert_eq!(dotted(p), d);
            assert_eq!(pointer(d), p);
        }
    }
}
