//! Official A2A 1.0 (a2aproject; spec and normative proto in shared/spec/a2a-1.0.1/) as data.
//!
//! # One Call, many envelopes
//!
//! Every wire form (a version over a binding) carries the same proto messages. So each form's
//! envelope is read into one [`Call`] — the method and its request message — and every answer
//! is one [`Reply`]: the response message, or an [`A2aError`]. The forms themselves, which
//! translate between their envelope and a `Call`/`Reply` in both directions (a client's request
//! in, the gateway's request out to the agent; the agent's answer in, the client's answer out),
//! are `http::a2a::wire`: nothing here names one.
//!
//! The JSON-RPC `result` and the REST body are the same message for every method but one:
//! DeleteTaskPushNotificationConfig answers google.protobuf.Empty, which JSON-RPC servers of both
//! SDKs send as `result: null` and REST servers as `{}` (a2a-sdk, 200) or no body
//! (@a2a-js/sdk, 204). A `Reply` carries it as `{}` ([`Method::answers_empty`]).
//!
//! Nothing here touches a socket, a clock or a store. The checks ([`check`], [`answer`],
//! [`card`]) report [`crate::protocol::Violation`]s naming the field by JSON pointer, and let
//! fields the proto does not know pass through untouched (extensions use them).

pub mod answer;
pub mod card;
pub mod check;
pub mod error;
pub mod held;
pub mod id;
pub mod kept;
pub mod method;
pub mod push;
pub mod spelling;
pub mod state;
pub mod stream;
pub mod v0_3;
pub mod version;

pub use error::{A2aError, ErrorKind};
pub use method::Method;
pub use state::{Role, TaskState};

use serde_json::{Map, Value};

/// One A2A operation, whichever binding it came in: the method and its request message
/// (`SendMessageRequest`, `GetTaskRequest`...) as a ProtoJSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Which operation.
    pub method: Method,
    /// The proto request message.
    pub params: Map<String, Value>,
}

impl Call {
    /// A call of `method` with `params`.
    pub fn new(method: Method, params: Map<String, Value>) -> Call {
        Call { method, params }
    }

    /// The task the call names (`id` or `taskId`, by method), if it names one as a string.
    pub fn task_id(&self) -> Option<&str> {
        self.params.get(self.method.task_field()?)?.as_str()
    }

    /// The params with the tenant the agent's interface declares (§8.3.2: exactly that value,
    /// or none): whatever tenant the client sent is replaced, since the agent must only ever see
    /// its own interface's tenant.
    pub fn with_tenant(&self, tenant: Option<&str>) -> Map<String, Value> {
        let mut params = self.params.clone();
        match tenant.filter(|t| !t.is_empty()) {
            Some(t) => {
                params.insert("tenant".to_owned(), Value::from(t));
            }
            None => {
                params.remove("tenant");
            }
        }
        params
    }

    /// The params as [`Call::with_tenant`] gives them, written without copying them.
    pub fn params_with_tenant<'a>(&'a self, tenant: Option<&'a str>) -> WithTenant<'a> {
        WithTenant {
            params: &self.params,
            tenant: tenant.filter(|t| !t.is_empty()),
        }
    }
}

/// A call's params with the agent interface's tenant in place of the client's, serialized from
/// the call's own map (a request's params are its bulk: a copy of them per request shows).
pub struct WithTenant<'a> {
    params: &'a Map<String, Value>,
    tenant: Option<&'a str>,
}

impl serde::Serialize for WithTenant<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        for (k, v) in self.params {
            if k != "tenant" {
                map.serialize_entry(k, v)?;
            }
        }
        if let Some(t) = self.tenant {
            map.serialize_entry("tenant", t)?;
        }
        map.end()
    }
}

/// An answer: the proto response message (Task, SendMessageResponse, ListTasksResponse,
/// StreamResponse, TaskPushNotificationConfig, AgentCard, `{}` for Empty), or an error.
pub type Reply = Result<Value, A2aError>;

/// The ledger key of A2A task `id` of `agent`: `{agent}/{id}`. An A2A task id is the agent's,
/// and two agents may hand out the same one; a Clawpedia id never holds a `/`, so the two
/// protocols' records cannot meet.
pub fn ledger_key(agent: &str, id: &str) -> String {
    format!("{agent}/{id}")
}

/// The agent and the A2A id of a key written by [`ledger_key`]; `None` for a Clawpedia id.
pub fn split_ledger_key(key: &str) -> Option<(&str, &str)> {
    key.split_once('/')
}

/// The media type of the HTTP+JSON binding.
pub const A2A_JSON: &str = "application/a2a+json";
/// The header (and query parameter) naming the protocol version.
pub const VERSION_HEADER: &str = "A2A-Version";
/// The header naming the extensions a client asks for; forwarded to agents.
pub const EXTENSIONS_HEADER: &str = "A2A-Extensions";

/// Whether a Content-Type is one A2A's JSON bindings read: `application/a2a+json` or
/// `application/json`, with any parameters.
pub fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case(A2A_JSON) || essence.eq_ignore_ascii_case("application/json")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_names_its_task_and_takes_the_agents_tenant() {
        let Value::Object(params) = json!({"id": "t-1", "tenant": "client-said"}) else {
            unreachable!()
        };
        let call = Call::new(Method::GetTask, params);
        assert_eq!(call.task_id(), Some("t-1"));
        assert_eq!(
            call.with_tenant(Some("agents")).get("tenant"),
            Some(&json!("agents"))
        );
        assert_eq!(call.with_tenant(None).get("tenant"), None);
        assert_eq!(call.with_tenant(Some("")).get("tenant"), None);
        let Value::Object(params) = json!({"taskId": "t-2", "id": "cfg"}) else {
            unreachable!()
        };
        assert_eq!(
            Call::new(Method::DeleteTaskPushNotificationConfig, params).task_id(),
            Some("t-2")
        );
    }
}
