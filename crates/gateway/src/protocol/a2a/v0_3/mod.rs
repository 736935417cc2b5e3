//! A2A 0.3 (shared/spec/a2a-0.3.0/: specification.md, a2a.json, a2a.proto) as data, translated
//! to and from A2A 1.0's ProtoJSON, the gateway's neutral form. No I/O: the two 0.3 wire forms
//! (in `http::a2a::wire`) and the card reader call these.
//!
//! 0.3 has two JSON spellings of the same objects, which differ only at the leaves ([`model`]):
//! a2a.json's, on JSON-RPC (`kind` discriminators, lowercase kebab-case states and roles,
//! `TextPart`/`FilePart`/`DataPart`, a bare Task or Message as a send's result), and the JSON of
//! its proto, on HTTP+JSON (`content` for a message's parts, `TASK_STATE_CANCELLED`, a part's
//! `file.fileWithUri`, a push config under `name`). Both map onto 1.0 as a2a-sdk 1.3's
//! compatibility layer maps them.
//!
//! States: every 0.3 state has its 1.0 state and back (`unknown` is TASK_STATE_UNSPECIFIED); a
//! 1.0 state 0.3 cannot say does not exist today (1.0 added none), so the nearest-state rule
//! is only: anything unknown is `unknown`.

pub mod calls;
pub mod card;
pub mod model;

use serde_json::{Map, Value};

use super::error::dotted;
use super::{A2aError, ErrorKind, Method};

/// The version a 0.3 interface states (`protocolVersion` of an interface the gateway serves).
pub const VERSION: &str = "0.3";
/// The `protocolVersion` a 0.3 card states at its top level.
pub const CARD_VERSION: &str = "0.3.0";

/// Whether `v` (trimmed) names 0.3: `0.3` or `0.3.x`. The caller decides what an absent or
/// empty version means (§3.6: a client's is 0.3).
pub fn is_v0_3(v: &str) -> bool {
    super::version::is_version(v, VERSION)
}

/// The 0.3 JSON-RPC method names, with the 1.0 operation each is.
const METHODS: [(&str, Method); 10] = [
    ("message/send", Method::SendMessage),
    ("message/stream", Method::SendStreamingMessage),
    ("tasks/get", Method::GetTask),
    ("tasks/cancel", Method::CancelTask),
    ("tasks/resubscribe", Method::SubscribeToTask),
    (
        "tasks/pushNotificationConfig/set",
        Method::CreateTaskPushNotificationConfig,
    ),
    (
        "tasks/pushNotificationConfig/get",
        Method::GetTaskPushNotificationConfig,
    ),
    (
        "tasks/pushNotificationConfig/list",
        Method::ListTaskPushNotificationConfigs,
    ),
    (
        "tasks/pushNotificationConfig/delete",
        Method::DeleteTaskPushNotificationConfig,
    ),
    (
        "agent/getAuthenticatedExtendedCard",
        Method::GetExtendedAgentCard,
    ),
];

/// The operation a 0.3 JSON-RPC method name is (case-sensitive, as JSON-RPC's are).
pub fn method_of(name: &str) -> Option<Method> {
    METHODS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
}

/// The 0.3 JSON-RPC name of an operation; `None` for ListTasks, which 0.3 has only over
/// HTTP+JSON and gRPC.
pub fn name_of(method: Method) -> Option<&'static str> {
    METHODS.iter().find(|(_, m)| *m == method).map(|(n, _)| *n)
}

/// An error as 0.3 writes it (0.3 has no ErrorInfo): `{code, message, data}`, the JSON-RPC
/// `error` member and the HTTP+JSON body alike. The gateway's own errors are -32000, their
/// message starting with the reason, `data` `{"reason", "domain": "a2a-gateway", ...metadata}`;
/// the protocol's keep their code, with `data` only when there is something to say (the
/// fields a request got wrong, as `fieldViolations`, and any metadata).
pub fn error_object(e: &A2aError) -> Value {
    let reason = e.kind.reason();
    let mut data = Map::new();
    let message = match &e.kind {
        ErrorKind::Gateway { .. } | ErrorKind::Other(_) => {
            data.insert("reason".to_owned(), Value::from(reason));
            data.insert("domain".to_owned(), Value::from(e.kind.domain()));
            if e.message.starts_with(reason) {
                e.message.clone()
            } else {
                format!("{reason}: {}", e.message)
            }
        }
        _ => e.message.clone(),
    };
    for (k, v) in &e.metadata {
        data.entry(k.clone()).or_insert_with(|| v.clone());
    }
    if !e.details.is_empty() {
        let violations: Vec<Value> = e
            .details
            .iter()
            .map(|v| serde_json::json!({"field": dotted(&v.instance_path), "description": v.message}))
            .collect();
        data.insert("fieldViolations".to_owned(), Value::Array(violations));
    }
    let mut out = Map::new();
    out.insert("code".to_owned(), Value::from(e.kind.jsonrpc_code()));
    out.insert("message".to_owned(), Value::from(message));
    if !data.is_empty() {
        out.insert("data".to_owned(), Value::Object(data));
    }
    Value::Object(out)
}

/// An error a 0.3 agent sent (`{code, message, data}`), read back: the protocol's codes as
/// their kinds; the gateway's code with `data.domain` `a2a-gateway` as the gateway's
/// (`wire::the_agents` then takes it out of the gateway's name); anything else an error of the
/// agent's own. `status`: the HTTP status it came under (REST), for a kind of no code.
pub fn read_error(e: &Value, status: u16) -> A2aError {
    let code = e.get("code").and_then(Value::as_i64).unwrap_or(-32603);
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let data = e.get("data").and_then(Value::as_object);
    let reason = data
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let domain = data
        .and_then(|d| d.get("domain"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = match ErrorKind::from_code(code) {
        Some(k) => k,
        None if code == super::error::GATEWAY_CODE && domain == super::error::GATEWAY_DOMAIN => {
            ErrorKind::Gateway {
                reason: reason.to_owned(),
                status: if status >= 400 { status } else { 503 },
            }
        }
        None => ErrorKind::Other(Box::new(super::error::OtherError {
            code,
            status: if status >= 400 { status } else { 500 },
            reason: reason.to_owned(),
            domain: domain.to_owned(),
        })),
    };
    A2aError::new(kind, message).the_agents_own()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_0_3_method_names_one_operation_and_back() {
        for (name, m) in METHODS {
            assert_eq!(method_of(name), Some(m));
            assert_eq!(name_of(m), Some(name));
        }
        assert_eq!(method_of("SendMessage"), None);
        assert_eq!(method_of("message/Send"), None);
        assert_eq!(name_of(Method::ListTasks), None);
    }

    #[test]
    fn errors_are_0_3_objects_the_gateways_with_their_reason_in_data() {
        let busy = A2aError::gateway("AGENT_BUSY", 503, "too many").with_metadata("agent", "echo");
        let v = error_object(&busy);
        assert_eq!(v["code"], -32000);
        assert_eq!(v["message"], "AGENT_BUSY: too many");
        assert_eq!(
            v["data"],
            serde_json::json!({"reason": "AGENT_BUSY", "domain": "a2a-gateway", "agent": "echo"})
        );
        let back = read_error(&v, 200);
        assert_eq!(back.kind.reason(), "AGENT_BUSY");
        assert!(back.agents);
        let nf = error_object(&A2aError::of(ErrorKind::TaskNotFound));
        assert_eq!(nf["code"], -32001);
        assert_eq!(nf.get("data"), None);
        assert_eq!(read_error(&nf, 404).kind, ErrorKind::TaskNotFound);
        let bad = A2aError::invalid_params(vec![crate::protocol::Violation::new(
            "/message/parts/0/kind",
            "x",
            "no kind",
        )]);
        assert_eq!(
            error_object(&bad)["data"]["fieldViolations"][0]["field"],
            "message.parts[0].kind"
        );
    }

    #[test]
    fn zero_point_three_with_any_patch_is_0_3() {
        for ok in ["0.3", "0.3.0", " 0.3.1 "] {
            assert!(is_v0_3(ok), "{ok}");
        }
        for bad in ["", "0.2", "1.0", "0.30", "0.3.", "0.3.x", "0"] {
            assert!(!is_v0_3(bad), "{bad}");
        }
    }
}
