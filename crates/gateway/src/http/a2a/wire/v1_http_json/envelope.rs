//! The HTTP+JSON binding (§11): routes relative to an interface's base URL (the gateway mounts
//! them under `/agents/{name}/`), in both directions, and the agent's REST answers.
//!
//! - Routes (§11.3, the proto's HTTP annotations, and what both SDK servers accept):
//!   `POST message:send`, `POST message:stream`, `GET tasks`, `GET tasks/{id}`,
//!   `POST tasks/{id}:cancel`, `GET|POST tasks/{id}:subscribe` (the spec text says POST, the proto
//!   GET; both SDK servers take both, both SDK clients POST), `POST|GET
//!   tasks/{taskId}/pushNotificationConfigs`, `GET|DELETE
//!   tasks/{taskId}/pushNotificationConfigs/{id}`, `GET extendedAgentCard`.
//! - Ids are path segments, percent-decoded after the path is split at `/`, so an id holding
//!   `/` must arrive as `%2F` (@a2a-js/sdk encodes with encodeURIComponent; a2a-sdk does not
//!   encode at all, so its ids with `/` cannot be addressed over REST by any server). The verb
//!   is split at the segment's LAST literal `:`, so `tasks/a:b:cancel` cancels `a:b`, and a
//!   `%3A` never splits.
//! - Query parameters (§11.5) are typed by the request message's fields, named either way
//!   (`historyLength` or `history_length`, read as `historyLength`); a repeated parameter for a
//!   non-repeated field, or one given in both spellings, is refused (one request, one reading);
//!   `A2A-Version` is not a field and is skipped; parameters the proto does not know pass
//!   through as strings. Bodies' proto names are read as JSON names too
//!   ([`crate::protocol::a2a::spelling`]).
//! - Bodies are read by the strict reader. An empty body is `{}` (@a2a-js/sdk POSTs cancel and
//!   subscribe without one). a2a-sdk's client puts `id` in the cancel body and `taskId` in the
//!   push-config body; a body naming another task than the path is InvalidParams.

use serde_json::{json, Map, Value};

use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method, Reply};
use crate::protocol::json;
use crate::protocol::percent::{self, decode_query, encode_component, MAX_QUERY_PARAMS};
use crate::protocol::Violation;

/// Why a request is not a call.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteError {
    /// No A2A route has this path: a plain 404.
    NotFound,
    /// The path is a route, not for this HTTP method: 405 with `Allow` set to these.
    MethodNotAllowed(&'static [&'static str]),
    /// The route's parameters or body are wrong: answer the error (google.rpc.Status).
    Invalid(A2aError),
}

fn invalid(at: &str, rule: &str, msg: impl Into<String>) -> RouteError {
    RouteError::Invalid(A2aError::invalid_params(vec![Violation::new(
        at, rule, msg,
    )]))
}

/// The query fields of a GET method and their JSON types.
#[derive(Clone, Copy)]
enum Q {
    Str,
    Int,
    Bool,
}

fn query_fields(method: Method) -> &'static [(&'static str, Q)] {
    match method {
        Method::GetTask => &[("historyLength", Q::Int)],
        Method::ListTasks => &[
            ("contextId", Q::Str),
            ("status", Q::Str),
            ("pageSize", Q::Int),
            ("pageToken", Q::Str),
            ("historyLength", Q::Int),
            ("statusTimestampAfter", Q::Str),
            ("includeArtifacts", Q::Bool),
        ],
        Method::ListTaskPushNotificationConfigs => &[("pageSize", Q::Int), ("pageToken", Q::Str)],
        _ => &[],
    }
}

/// Parses a client's REST request: `http_method`, the path `tail` relative to the interface base
/// (no leading `/`, still percent-encoded), the raw query string, and the body.
pub fn parse_request(
    http_method: &str,
    tail: &str,
    query: Option<&str>,
    body: &[u8],
) -> Result<Call, RouteError> {
    let (method, ids) = route(http_method, tail)?;
    let mut params = match method {
        Method::SendMessage
        | Method::SendStreamingMessage
        | Method::CancelTask
        | Method::SubscribeToTask
        | Method::CreateTaskPushNotificationConfig
            if http_method == "POST" =>
        {
            read_body(body)?
        }
        _ => Map::new(),
    };
    read_query(method, query, &mut params)?;
    // Proto names (`task_id`) read as JSON names, once, before the path's ids are compared.
    crate::protocol::a2a::spelling::to_json_names(method, &mut params)
        .map_err(RouteError::Invalid)?;
    let path_fields: &[&str] = match method {
        Method::GetTask | Method::CancelTask | Method::SubscribeToTask => &["id"],
        Method::CreateTaskPushNotificationConfig | Method::ListTaskPushNotificationConfigs => {
            &["taskId"]
        }
        Method::GetTaskPushNotificationConfig | Method::DeleteTaskPushNotificationConfig => {
            &["taskId", "id"]
        }
        _ => &[],
    };
    for (field, value) in path_fields.iter().zip(ids) {
        match params.get(*field) {
            Some(Value::String(s)) if *s == value => {}
            None | Some(Value::Null) => {}
            Some(_) => {
                return Err(invalid(
                    &format!("/{field}"),
                    "rest/path",
                    format!("{field} in the body differs from the one in the path"),
                ))
            }
        }
        params.insert((*field).to_owned(), Value::from(value));
    }
    Ok(Call::new(method, params))
}

/// Which method a path and HTTP method name, and the decoded path ids (task id, config id).
fn route(http_method: &str, tail: &str) -> Result<(Method, Vec<String>), RouteError> {
    const POST: &[&str] = &["POST"];
    const GET: &[&str] = &["GET"];
    const GET_POST: &[&str] = &["GET", "POST"];
    const GET_DELETE: &[&str] = &["GET", "DELETE"];
    let allow = |allowed: &'static [&'static str], m: Method, ids: Vec<String>| {
        if allowed.contains(&http_method) {
            Ok((m, ids))
        } else {
            Err(RouteError::MethodNotAllowed(allowed))
        }
    };
    let segs: Vec<&str> = tail.split('/').collect();
    match segs.as_slice() {
        ["message:send"] => allow(POST, Method::SendMessage, vec![]),
        ["message:stream"] => allow(POST, Method::SendStreamingMessage, vec![]),
        ["extendedAgentCard"] => allow(GET, Method::GetExtendedAgentCard, vec![]),
        ["tasks"] => allow(GET, Method::ListTasks, vec![]),
        ["tasks", seg] if !seg.is_empty() => {
            let (id, verb) = match seg.rsplit_once(':') {
                Some((id, "cancel")) => (id, Some(Method::CancelTask)),
                Some((id, "subscribe")) => (id, Some(Method::SubscribeToTask)),
                _ => (*seg, None),
            };
            let id = decode_segment(id)?;
            match verb {
                Some(Method::CancelTask) => allow(POST, Method::CancelTask, vec![id]),
                Some(m) => allow(GET_POST, m, vec![id]),
                None => allow(GET, Method::GetTask, vec![id]),
            }
        }
        ["tasks", seg, "pushNotificationConfigs"] if !seg.is_empty() => {
            let id = decode_segment(seg)?;
            match http_method {
                "POST" => Ok((Method::CreateTaskPushNotificationConfig, vec![id])),
                "GET" => Ok((Method::ListTaskPushNotificationConfigs, vec![id])),
                _ => Err(RouteError::MethodNotAllowed(GET_POST)),
            }
        }
        ["tasks", seg, "pushNotificationConfigs", cfg] if !seg.is_empty() && !cfg.is_empty() => {
            let ids = vec![decode_segment(seg)?, decode_segment(cfg)?];
            match http_method {
                "GET" => Ok((Method::GetTaskPushNotificationConfig, ids)),
                "DELETE" => Ok((Method::DeleteTaskPushNotificationConfig, ids)),
                _ => Err(RouteError::MethodNotAllowed(GET_DELETE)),
            }
        }
        _ => Err(RouteError::NotFound),
    }
}

fn read_body(body: &[u8]) -> Result<Map<String, Value>, RouteError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match json::parse(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(invalid(
            "",
            "rest/body",
            "the body is a JSON object (the request message)",
        )),
        Err(e) => Err(RouteError::Invalid(A2aError::new(
            ErrorKind::ParseError,
            format!("Invalid JSON payload: {e}"),
        ))),
    }
}

fn read_query(
    method: Method,
    query: Option<&str>,
    params: &mut Map<String, Value>,
) -> Result<(), RouteError> {
    let fields = query_fields(method);
    // Each parameter read, by its field's JSON name, with the proto name it was sent as.
    let mut seen: Vec<(String, Option<&'static str>)> = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        if seen.len() >= MAX_QUERY_PARAMS {
            return Err(invalid(
                "",
                "rest/query",
                format!("at most {MAX_QUERY_PARAMS} query parameters"),
            ));
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let sent = decode_query(k).ok_or_else(|| {
            invalid(
                "",
                "rest/query",
                "a query parameter name is not percent-encoded UTF-8",
            )
        })?;
        // A field's proto name is its JSON name (`history_length`: `historyLength`).
        let (key, proto) = match crate::protocol::a2a::spelling::top_level(method, &sent) {
            Some((json, proto)) => (json.to_owned(), Some(proto)),
            None => (sent, None),
        };
        let at = format!("/{}", key.replace('~', "~0").replace('/', "~1"));
        let value = decode_query(v)
            .ok_or_else(|| invalid(&at, "rest/query", "not percent-encoded UTF-8"))?;
        if key.eq_ignore_ascii_case(crate::protocol::a2a::VERSION_HEADER) {
            continue;
        }
        if let Some((_, before)) = seen.iter().find(|(k, _)| *k == key) {
            let msg = match before
                .or(proto)
                .filter(|_| before.is_some() != proto.is_some())
            {
                Some(p) => format!("{key} is given twice, as {key} and as {p}: give it once"),
                None => format!("{key} is given more than once"),
            };
            return Err(invalid(&at, "rest/query", msg));
        }
        seen.push((key.clone(), proto));
        let typed = match fields.iter().find(|(name, _)| *name == key) {
            Some((_, Q::Int)) => match value.parse::<i64>() {
                Ok(n) if value.bytes().all(|b| b.is_ascii_digit() || b == b'-') => Value::from(n),
                _ => return Err(invalid(&at, "rest/query", format!("{key} is an integer"))),
            },
            Some((_, Q::Bool)) => match value.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => {
                    return Err(invalid(
                        &at,
                        "rest/query",
                        format!("{key} is true or false"),
                    ))
                }
            },
            Some((_, Q::Str)) | None => Value::from(value),
        };
        params.insert(key, typed);
    }
    Ok(())
}

fn decode_segment(seg: &str) -> Result<String, RouteError> {
    percent::decode(seg, false)
        .ok_or_else(|| invalid("/id", "rest/path", "a path id is percent-encoded UTF-8"))
}

/// The gateway's request to a REST agent, relative to the interface URL.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRequest {
    /// `GET`, `POST` or `DELETE`.
    pub http_method: &'static str,
    /// The path to append to the interface URL's path, starting with `/`.
    pub path: String,
    /// The query string without `?`, empty when none.
    pub query: String,
    /// The JSON body, for POST.
    pub body: Option<Value>,
}

/// The REST request for `call` towards an agent whose interface declares `tenant` (§8.3.2: then
/// every path is under `/{tenant}/`, and the body's `tenant` is that value).
pub fn agent_request(call: &Call, tenant: Option<&str>) -> Result<AgentRequest, A2aError> {
    let params = call.with_tenant(tenant);
    let field = |name: &str| -> Result<String, A2aError> {
        match params.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(encode_component(s)),
            _ => Err(A2aError::invalid_params(vec![Violation::new(
                format!("/{name}"),
                "required",
                format!("{name} is required"),
            )])),
        }
    };
    let (http_method, path, body) = match call.method {
        Method::SendMessage => ("POST", "/message:send".to_owned(), true),
        Method::SendStreamingMessage => ("POST", "/message:stream".to_owned(), true),
        Method::GetTask => ("GET", format!("/tasks/{}", field("id")?), false),
        Method::ListTasks => ("GET", "/tasks".to_owned(), false),
        Method::CancelTask => ("POST", format!("/tasks/{}:cancel", field("id")?), true),
        Method::SubscribeToTask => ("POST", format!("/tasks/{}:subscribe", field("id")?), false),
        Method::CreateTaskPushNotificationConfig => (
            "POST",
            format!("/tasks/{}/pushNotificationConfigs", field("taskId")?),
            true,
        ),
        Method::ListTaskPushNotificationConfigs => (
            "GET",
            format!("/tasks/{}/pushNotificationConfigs", field("taskId")?),
            false,
        ),
        Method::GetTaskPushNotificationConfig => (
            "GET",
            format!(
                "/tasks/{}/pushNotificationConfigs/{}",
                field("taskId")?,
                field("id")?
            ),
            false,
        ),
        Method::DeleteTaskPushNotificationConfig => (
            "DELETE",
            format!(
                "/tasks/{}/pushNotificationConfigs/{}",
                field("taskId")?,
                field("id")?
            ),
            false,
        ),
        Method::GetExtendedAgentCard => ("GET", "/extendedAgentCard".to_owned(), false),
    };
    let path = match tenant.filter(|t| !t.is_empty()) {
        Some(t) => format!("/{}{path}", encode_component(t)),
        None => path,
    };
    let mut query = String::new();
    for (name, _) in query_fields(call.method) {
        let value = match params.get(*name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::Bool(b)) => b.to_string(),
            _ => continue,
        };
        if !query.is_empty() {
            query.push('&');
        }
        query.push_str(name);
        query.push('=');
        query.push_str(&encode_component(&value));
    }
    Ok(AgentRequest {
        http_method,
        path,
        query,
        body: body.then_some(Value::Object(params)),
    })
}

/// Reads a REST agent's answer to `method`: a 2xx body is the response message (an empty one is
/// `{}` for Empty, as @a2a-js/sdk's 204); any other status is its google.rpc.Status read back.
/// Everything else is InvalidAgentResponse (the HTTP status is kept in the metadata).
pub fn parse_agent_answer(method: Method, status: u16, body: &[u8]) -> Reply {
    let empty = body.iter().all(u8::is_ascii_whitespace);
    let bad = |msg: String| {
        Err(
            A2aError::invalid_agent_response(vec![Violation::new("", "rest/answer", msg)])
                .with_metadata("httpStatus", &status.to_string()),
        )
    };
    if (200..300).contains(&status) {
        if empty {
            return if method.answers_empty() {
                Ok(json!({}))
            } else {
                bad(format!(
                    "HTTP {status} without a body for {}",
                    method.as_str()
                ))
            };
        }
        return match json::parse(body) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => bad(format!(
                "the answer to {} is not a JSON object",
                method.as_str()
            )),
            Err(e) => bad(format!("the answer is not one JSON document: {e}")),
        };
    }
    match json::parse(body)
        .ok()
        .and_then(|v| A2aError::from_status(status, &v))
    {
        Some(e) => Err(e.the_agents_own()),
        None => bad(format!("HTTP {status} without a google.rpc.Status body")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::a2a::is_json_media_type;
    use crate::protocol::percent::query_param;

    fn call(m: &str, tail: &str, q: Option<&str>, body: &str) -> Call {
        parse_request(m, tail, q, body.as_bytes()).unwrap_or_else(|e| panic!("{m} {tail}: {e:?}"))
    }

    #[test]
    fn every_route_becomes_its_method() {
        let c = call(
            "POST",
            "message:send",
            None,
            r#"{"message":{"messageId":"m"}}"#,
        );
        assert_eq!(c.method, Method::SendMessage);
        assert_eq!(c.params["message"]["messageId"], "m");
        assert_eq!(
            call("POST", "message:stream", None, "{}").method,
            Method::SendStreamingMessage
        );
        let c = call("GET", "tasks/t-1", Some("historyLength=3"), "");
        assert_eq!((c.method, c.task_id()), (Method::GetTask, Some("t-1")));
        assert_eq!(c.params["historyLength"], 3);
        assert_eq!(
            call("POST", "tasks/t-1:cancel", None, "").method,
            Method::CancelTask
        );
        assert_eq!(
            call("GET", "tasks/t-1:subscribe", None, "").method,
            Method::SubscribeToTask
        );
        assert_eq!(
            call("POST", "tasks/t-1:subscribe", None, "").method,
            Method::SubscribeToTask
        );
        let c = call(
            "POST",
            "tasks/t-1/pushNotificationConfigs",
            None,
            r#"{"url":"https://x"}"#,
        );
        assert_eq!(
            (c.method, c.task_id()),
            (Method::CreateTaskPushNotificationConfig, Some("t-1"))
        );
        assert_eq!(
            call("GET", "tasks/t-1/pushNotificationConfigs", None, "").method,
            Method::ListTaskPushNotificationConfigs
        );
        let c = call("GET", "tasks/t-1/pushNotificationConfigs/c-1", None, "");
        assert_eq!(c.method, Method::GetTaskPushNotificationConfig);
        assert_eq!(
            (c.params["taskId"].as_str(), c.params["id"].as_str()),
            (Some("t-1"), Some("c-1"))
        );
        assert_eq!(
            call("DELETE", "tasks/t-1/pushNotificationConfigs/c-1", None, "").method,
            Method::DeleteTaskPushNotificationConfig
        );
        assert_eq!(
            call("GET", "extendedAgentCard", None, "").method,
            Method::GetExtendedAgentCard
        );
        let c = call(
            "GET",
            "tasks",
            Some("contextId=c%201&status=TASK_STATE_WORKING&pageSize=50&includeArtifacts=true&statusTimestampAfter=2025-11-09T10%3A30%3A00Z&A2A-Version=1.0&x-ext=a+b"),
            "",
        );
        assert_eq!(c.method, Method::ListTasks);
        assert_eq!(
            Value::Object(c.params),
            json!({"contextId": "c 1", "status": "TASK_STATE_WORKING", "pageSize": 50,
                   "includeArtifacts": true, "statusTimestampAfter": "2025-11-09T10:30:00Z",
                   "x-ext": "a b"})
        );
    }

    #[test]
    fn bodies_and_queries_are_read_with_either_spelling_of_a_field() {
        let c = call(
            "POST",
            "message:send",
            None,
            r#"{"message":{"message_id":"m","context_id":"c","task_id":"t","role":"ROLE_USER",
                "parts":[{"data":{"task_id":"kept"}}]},"configuration":{"return_immediately":true}}"#,
        );
        assert_eq!(
            Value::Object(c.params),
            json!({"message": {"messageId": "m", "contextId": "c", "taskId": "t",
                "role": "ROLE_USER", "parts": [{"data": {"task_id": "kept"}}]},
                "configuration": {"returnImmediately": true}})
        );
        let c = call("GET", "tasks/t-1", Some("history_length=3"), "");
        assert_eq!(
            Value::Object(c.params),
            json!({"id": "t-1", "historyLength": 3})
        );
        let c = call(
            "GET",
            "tasks",
            Some("context_id=c&page_size=5&page_token=p&history_length=0&status_timestamp_after=2025-11-09T10%3A30%3A00Z&include_artifacts=true&status=TASK_STATE_WORKING"),
            "",
        );
        assert_eq!(
            Value::Object(c.params),
            json!({"contextId": "c", "pageSize": 5, "pageToken": "p", "historyLength": 0,
                "statusTimestampAfter": "2025-11-09T10:30:00Z", "includeArtifacts": true,
                "status": "TASK_STATE_WORKING"})
        );
        let c = call(
            "GET",
            "tasks/t/pushNotificationConfigs",
            Some("page_size=2"),
            "",
        );
        assert_eq!(c.params["pageSize"], 2);
        // A body's task_id is the path's taskId: the same one passes, another is refused.
        let c = call(
            "POST",
            "tasks/t/pushNotificationConfigs",
            None,
            r#"{"task_id":"t","url":"https://x"}"#,
        );
        assert_eq!(
            Value::Object(c.params),
            json!({"taskId": "t", "url": "https://x"})
        );
        let refused = |tail: &str, q: Option<&str>, body: &str| match parse_request(
            if body.is_empty() { "GET" } else { "POST" },
            tail,
            q,
            body.as_bytes(),
        ) {
            Err(RouteError::Invalid(e)) => {
                assert_eq!(e.kind, ErrorKind::InvalidParams);
                assert_eq!(e.to_status()["error"]["code"], 400);
                (e.details[0].instance_path.clone(), e.message)
            }
            other => panic!("{tail}: {other:?}"),
        };
        let (at, _) = refused(
            "tasks/t/pushNotificationConfigs",
            None,
            r#"{"task_id":"u","url":"https://x"}"#,
        );
        assert_eq!(at, "/taskId");
        // One field in both spellings, in a body or a query: refused naming it.
        let (at, msg) = refused(
            "message:send",
            None,
            r#"{"message":{"message_id":"m","messageId":"m","role":"ROLE_USER","parts":[{"text":"a"}]}}"#,
        );
        assert_eq!(at, "/message/messageId");
        assert!(msg.contains("message_id"), "{msg}");
        for q in [
            "historyLength=1&history_length=2",
            "history_length=1&historyLength=1",
        ] {
            let (at, msg) = refused("tasks/t", Some(q), "");
            assert_eq!(at, "/historyLength", "{q}");
            assert!(msg.contains("history_length"), "{q}: {msg}");
        }
        let (at, msg) = refused("tasks", Some("page_size=1&page_size=2"), "");
        assert_eq!(at, "/pageSize");
        assert!(msg.contains("more than once"), "{msg}");
    }

    #[test]
    fn ids_with_slash_and_colon_survive_encoding() {
        let id = "a/b:c%d ü";
        let tail = format!("tasks/{}:cancel", encode_component(id));
        assert_eq!(call("POST", &tail, None, "").task_id(), Some(id));
        // Unencoded colons: the verb is after the LAST one (a2a-sdk's client does not encode).
        assert_eq!(
            call("POST", "tasks/a:b:cancel", None, "").task_id(),
            Some("a:b")
        );
        assert_eq!(call("GET", "tasks/a:b", None, "").task_id(), Some("a:b"));
        // An encoded colon never splits.
        let c = call("GET", "tasks/x%3Acancel", None, "");
        assert_eq!((c.method, c.task_id()), (Method::GetTask, Some("x:cancel")));
        // A raw slash is another path, not part of the id.
        assert_eq!(
            parse_request("GET", "tasks/a/b", None, b""),
            Err(RouteError::NotFound)
        );
    }

    #[test]
    fn wrong_routes_methods_and_params_are_told_apart() {
        for tail in [
            "",
            "tasks/",
            "message:sendx",
            "tasks/t/x",
            "v1/message:send",
            "tasks/t/pushNotificationConfigs/",
        ] {
            assert_eq!(
                parse_request("GET", tail, None, b""),
                Err(RouteError::NotFound),
                "{tail}"
            );
        }
        assert_eq!(
            parse_request("GET", "message:send", None, b""),
            Err(RouteError::MethodNotAllowed(&["POST"]))
        );
        assert_eq!(
            parse_request("GET", "tasks/t:cancel", None, b""),
            Err(RouteError::MethodNotAllowed(&["POST"]))
        );
        assert_eq!(
            parse_request("DELETE", "tasks/t:subscribe", None, b""),
            Err(RouteError::MethodNotAllowed(&["GET", "POST"]))
        );
        assert_eq!(
            parse_request("POST", "tasks", None, b""),
            Err(RouteError::MethodNotAllowed(&["GET"]))
        );
        assert_eq!(
            parse_request("PUT", "tasks/t/pushNotificationConfigs/c", None, b""),
            Err(RouteError::MethodNotAllowed(&["GET", "DELETE"]))
        );
        let kind = |r: Result<Call, RouteError>| match r {
            Err(RouteError::Invalid(e)) => e.kind,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            kind(parse_request("POST", "message:send", None, b"{")),
            ErrorKind::ParseError
        );
        assert_eq!(
            kind(parse_request(
                "POST",
                "message:send",
                None,
                br#"{"a":1,"a":2}"#
            )),
            ErrorKind::ParseError
        );
        assert_eq!(
            kind(parse_request("POST", "message:send", None, b"[]")),
            ErrorKind::InvalidParams
        );
        assert_eq!(
            kind(parse_request(
                "GET",
                "tasks/t",
                Some("historyLength=ten"),
                b""
            )),
            ErrorKind::InvalidParams
        );
        assert_eq!(
            kind(parse_request(
                "GET",
                "tasks/t",
                Some("historyLength=1.5"),
                b""
            )),
            ErrorKind::InvalidParams
        );
        assert_eq!(
            kind(parse_request(
                "GET",
                "tasks",
                Some("pageSize=1&pageSize=2"),
                b""
            )),
            ErrorKind::InvalidParams
        );
        assert_eq!(
            kind(parse_request(
                "GET",
                "tasks",
                Some("includeArtifacts=yes"),
                b""
            )),
            ErrorKind::InvalidParams
        );
        assert_eq!(
            kind(parse_request("GET", "tasks/%ZZ", None, b"")),
            ErrorKind::InvalidParams
        );
        assert_eq!(
            kind(parse_request("GET", "tasks/%FF", None, b"")),
            ErrorKind::InvalidParams
        );
        assert_eq!(
            kind(parse_request(
                "POST",
                "tasks/t:cancel",
                None,
                br#"{"id":"other"}"#
            )),
            ErrorKind::InvalidParams
        );
        assert_eq!(
            kind(parse_request(
                "POST",
                "tasks/t/pushNotificationConfigs",
                None,
                br#"{"taskId":"u","url":"https://x"}"#
            )),
            ErrorKind::InvalidParams
        );
        // a2a-sdk's own cancel body, naming the same task, is fine.
        assert_eq!(
            call("POST", "tasks/t:cancel", None, r#"{"id":"t","tenant":""}"#).task_id(),
            Some("t")
        );
        let many = vec!["a=1"; 65].join("&");
        assert_eq!(
            kind(parse_request("GET", "tasks", Some(&many), b"")),
            ErrorKind::InvalidParams
        );
    }

    #[test]
    fn calls_become_agent_requests_with_the_agents_tenant() {
        let Value::Object(p) = json!({"id": "a/b:c", "tenant": "client", "metadata": {"k": 1}})
        else {
            unreachable!()
        };
        let r = agent_request(&Call::new(Method::CancelTask, p.clone()), None).expect("request");
        assert_eq!(
            (r.http_method, r.path.as_str()),
            ("POST", "/tasks/a%2Fb%3Ac:cancel")
        );
        assert_eq!(r.body, Some(json!({"id": "a/b:c", "metadata": {"k": 1}})));
        let r =
            agent_request(&Call::new(Method::GetTask, p.clone()), Some("t 1")).expect("request");
        assert_eq!(
            (r.http_method, r.path.as_str(), r.body),
            ("GET", "/t%201/tasks/a%2Fb%3Ac", None)
        );
        let r = agent_request(&Call::new(Method::SubscribeToTask, p), None).expect("request");
        assert_eq!((r.http_method, r.body), ("POST", None));
        let Value::Object(p) = json!({"status": "TASK_STATE_WORKING", "pageSize": 7, "includeArtifacts": false, "pageToken": "a&b"})
        else {
            unreachable!()
        };
        let r = agent_request(&Call::new(Method::ListTasks, p), None).expect("request");
        assert_eq!(
            r.query,
            "status=TASK_STATE_WORKING&pageSize=7&pageToken=a%26b&includeArtifacts=false"
        );
        let r = agent_request(&Call::new(Method::GetTask, Map::new()), None);
        assert!(r.is_err());
        // Round trip: what the gateway sends parses back to the same call.
        let Value::Object(p) = json!({"taskId": "t:1", "id": "c/2"}) else {
            unreachable!()
        };
        let c = Call::new(Method::DeleteTaskPushNotificationConfig, p);
        let r = agent_request(&c, None).expect("request");
        let back = parse_request(r.http_method, r.path.trim_start_matches('/'), None, b"")
            .expect("parses");
        assert_eq!(back, c);
    }

    #[test]
    fn agent_answers_are_read_with_their_status() {
        assert_eq!(
            parse_agent_answer(Method::GetTask, 200, br#"{"id":"t"}"#),
            Ok(json!({"id": "t"}))
        );
        assert_eq!(
            parse_agent_answer(Method::DeleteTaskPushNotificationConfig, 204, b""),
            Ok(json!({}))
        );
        assert_eq!(
            parse_agent_answer(Method::DeleteTaskPushNotificationConfig, 200, b"{}"),
            Ok(json!({}))
        );
        assert_eq!(
            parse_agent_answer(
                Method::CreateTaskPushNotificationConfig,
                201,
                br#"{"id":"c"}"#
            ),
            Ok(json!({"id": "c"}))
        );
        let e = parse_agent_answer(
            Method::GetTask,
            404,
            br#"{"error":{"code":404,"status":"NOT_FOUND","message":"Task not found","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{}}]}}"#,
        )
        .expect_err("error");
        assert_eq!(e.kind, ErrorKind::TaskNotFound);
        for (status, body) in [
            (200, ""),
            (200, "[]"),
            (200, "{"),
            (200, r#"{"a":1,"a":2}"#),
            (502, "<html>bad gateway</html>"),
            (500, ""),
        ] {
            let e = parse_agent_answer(Method::GetTask, status, body.as_bytes()).expect_err(body);
            assert_eq!(e.kind, ErrorKind::InvalidAgentResponse, "{status} {body}");
            assert_eq!(e.metadata["httpStatus"], status.to_string());
        }
    }

    #[test]
    fn media_types_and_query_helpers() {
        assert!(is_json_media_type("application/a2a+json"));
        assert!(is_json_media_type("Application/JSON; charset=utf-8"));
        assert!(!is_json_media_type("text/plain"));
        assert!(!is_json_media_type("application/jsonx"));
        assert_eq!(
            query_param(Some("a=1&A2A-Version=1.0"), "a2a-version").as_deref(),
            Some("1.0")
        );
        assert_eq!(query_param(Some("a=1"), "A2A-Version"), None);
        assert_eq!(query_param(None, "A2A-Version"), None);
        assert_eq!(encode_component("a-Z_0.~ /:%"), "a-Z_0.~%20%2F%3A%25");
    }
}
