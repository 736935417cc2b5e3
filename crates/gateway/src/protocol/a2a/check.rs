//! Request checks against a2a.proto's shapes, and the small field-table machinery the answer and
//! card checks share.
//!
//! Each message is a table of its fields: ProtoJSON name, proto name, type, required. A check
//! reports a [`Violation`] naming the field by JSON pointer for: a missing required field (an
//! empty string or list counts as missing, §5.7), a wrong JSON type, an unknown enum name (enums
//! by full name; integers are refused), an invalid id ([`super::id`]), a Part that holds other
//! than exactly one of `text`/`raw`/`url`/`data`, and a known field spelled with its proto name
//! (`task_id` for `taskId`). A client's request never holds one here: it is read with both
//! spellings and renamed once, when it is read ([`super::spelling`], from the tables below), so
//! every check and the agent see `taskId`. In an agent's answer or card a proto spelling is a
//! violation: the gateway reads `contextId`, and would see none where the agent meant one.
//!
//! A field the proto does not know is never refused or stripped: extensions carry data in them.
//! `null` for a known field is the proto's "not set", as in ProtoJSON.

use serde_json::{Map, Value};

use super::id::id_problem;
use super::{Call, Method};
use crate::protocol::node::{Json, Object};
use crate::protocol::time::parse_lenient;
use crate::protocol::{Violation, MAX_VIOLATIONS};

/// The violations found so far, bounded by [`MAX_VIOLATIONS`].
#[derive(Default)]
pub(crate) struct Ck {
    pub(crate) out: Vec<Violation>,
}

impl Ck {
    pub(crate) fn push(&mut self, at: &str, rule: &str, msg: impl Into<String>) {
        if self.out.len() < MAX_VIOLATIONS {
            self.out.push(Violation::new(at, rule, msg));
        }
    }
}

/// A message check: the object, its pointer.
pub(crate) type MsgFn = fn(&mut Ck, &dyn Object, &str);

/// The JSON type of a field.
#[derive(Clone, Copy)]
pub(crate) enum T {
    /// Any string.
    Str,
    /// An A2A id.
    Id,
    /// An int32 within bounds.
    Int(i64, i64),
    /// A boolean.
    Bool,
    /// One of these enum names.
    Enum(&'static [&'static str]),
    /// An RFC 3339 timestamp.
    Time,
    /// A google.protobuf.Struct: an object.
    Struct,
    /// A google.protobuf.Value: anything.
    Any,
    /// bytes: a base64 string.
    Bytes,
    /// repeated string.
    Strs,
    /// repeated id.
    Ids,
    /// A message.
    Msg(MsgFn),
    /// repeated message.
    Msgs(MsgFn),
    /// map<string, message>.
    MapOf(MsgFn),
}

/// One field of a message.
pub(crate) struct F {
    pub(crate) json: &'static str,
    pub(crate) proto: &'static str,
    pub(crate) ty: T,
    pub(crate) required: bool,
    /// Whether the proto name is spelled otherwise than the JSON name (it has an underscore),
    /// known when the table is built rather than compared on every check.
    pub(crate) spelled_apart: bool,
}

/// An optional field.
pub(crate) const fn opt(json: &'static str, proto: &'static str, ty: T) -> F {
    F {
        json,
        proto,
        ty,
        required: false,
        spelled_apart: !same(json, proto),
    }
}

/// A REQUIRED field.
pub(crate) const fn req(json: &'static str, proto: &'static str, ty: T) -> F {
    F {
        json,
        proto,
        ty,
        required: true,
        spelled_apart: !same(json, proto),
    }
}

/// `a == b`, for the tables' constants.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

fn esc(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Checks `obj` (at `at`) against `fields`; `rule` names the message. A field's pointer is
/// written only when it is needed (a violation, or a message to descend into): the checks run
/// on every request and every answer, and nearly all of them pass.
pub(crate) fn fields(ck: &mut Ck, obj: &dyn Object, at: &str, rule: &str, table: &[F]) {
    // A proto name differs from its JSON name where it has an underscore (ProtoJSON's
    // lowerCamelCase): an object none of whose keys has one cannot hold such a spelling, and
    // needs no lookup of it (nearly every object).
    // Asked once, and only of an object checked against a field spelled apart.
    let mut snake = None;
    for f in table {
        if f.spelled_apart
            && *snake.get_or_insert_with(|| obj.any_key(&|k| k.contains('_')))
            && obj.contains_key(f.proto)
        {
            ck.push(
                &format!("{at}/{}", esc(f.proto)),
                rule,
                format!("A2A JSON spells this field {:?} (camelCase, §5.5)", f.json),
            );
        }
        match obj.get(f.json).filter(|v| !v.is_null()) {
            None => {
                if f.required {
                    ck.push(
                        &format!("{at}/{}", f.json),
                        rule,
                        format!("{} is required", f.json),
                    );
                }
            }
            Some(v) => value(ck, v, at, rule, f),
        }
    }
}

/// An int32 as ProtoJSON reads one: a JSON number, or a string holding one (`"10"`, `"-3"`,
/// `"1e2"`), either integral ("Either numbers or strings are accepted", the proto3 JSON
/// mapping; a2a-sdk's and Go's parsers take both). `None` for anything else: a string that is
/// not a number, a fraction, a number beyond i64.
pub(crate) fn proto_int(v: &dyn Json) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let f = match (v.as_number(), v.as_str()) {
        (Some(n), _) => n.as_f64()?,
        (None, Some(s)) => return int_text(s),
        (None, None) => return None,
    };
    integral(f)
}

/// The integer a string holds in JSON's number grammar: `"10"`, `"-3"`, `"1e2"`; not `""`,
/// `" 1"`, `"+1"`, `"0x10"`, `"inf"` or `"1.5"`.
pub(crate) fn int_text(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if !digits.starts_with(|c: char| c.is_ascii_digit())
        || !digits
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    match s.parse::<i64>() {
        Ok(n) => Some(n),
        Err(_) => integral(s.parse::<f64>().ok()?),
    }
}

/// `f` as an integer, when it is one within i64.
fn integral(f: f64) -> Option<i64> {
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e18).then_some(f as i64)
}

/// Checks field `f` of the object at `parent`, whose value is `v`.
fn value(ck: &mut Ck, v: &dyn Json, parent: &str, rule: &str, f: &F) {
    let name = f.json;
    let at = || format!("{parent}/{name}");
    match f.ty {
        T::Str => match v.as_str() {
            Some("") if f.required => ck.push(&at(), rule, format!("{name} must not be empty")),
            Some(_) => {}
            None => ck.push(&at(), rule, format!("{name} is a string")),
        },
        T::Id => match v.as_str() {
            Some(s) => {
                if let Some(p) = id_problem(s) {
                    ck.push(&at(), rule, format!("{name}: {p}"));
                }
            }
            None => ck.push(&at(), rule, format!("{name} is a string")),
        },
        T::Int(min, max) => match proto_int(v) {
            Some(n) if (min..=max).contains(&n) => {}
            Some(n) => ck.push(
                &at(),
                rule,
                format!("{name} is between {min} and {max}, not {n}"),
            ),
            None => ck.push(&at(), rule, format!("{name} is an integer")),
        },
        T::Bool => {
            if !v.is_boolean() {
                ck.push(&at(), rule, format!("{name} is true or false"));
            }
        }
        T::Enum(names) => match v.as_str() {
            Some(s) if names.contains(&s) => {}
            Some(s) => ck.push(
                &at(),
                rule,
                format!(
                    "{name}: {:?} is not one of {}",
                    s.chars().take(64).collect::<String>(),
                    names.join(", ")
                ),
            ),
            None => ck.push(
                &at(),
                rule,
                format!(
                    "{name} is an enum name (a string), one of {}",
                    names.join(", ")
                ),
            ),
        },
        T::Time => match v.as_str() {
            Some(s) if parse_lenient(s).is_some() => {}
            _ => ck.push(&at(), rule, format!("{name} is an RFC 3339 timestamp")),
        },
        T::Struct => {
            if !v.is_object() {
                ck.push(&at(), rule, format!("{name} is an object"));
            }
        }
        T::Any => {}
        T::Bytes => match v.as_str() {
            Some(s)
                if s.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_')
                }) => {}
            _ => ck.push(&at(), rule, format!("{name} is base64")),
        },
        T::Strs | T::Ids => match v.array_len() {
            Some(len) => {
                if f.required && len == 0 {
                    ck.push(&at(), rule, format!("{name} needs at least one element"));
                }
                for (i, item) in (0..len).filter_map(|i| Some((i, v.at(i)?))) {
                    let iat = || format!("{parent}/{name}/{i}");
                    match (item.as_str(), f.ty) {
                        (Some(s), T::Ids) => {
                            if let Some(p) = id_problem(s) {
                                ck.push(&iat(), rule, format!("{name}: {p}"));
                            }
                        }
                        (Some(_), _) => {}
                        (None, _) => ck.push(&iat(), rule, format!("{name} holds strings")),
                    }
                }
            }
            None => ck.push(&at(), rule, format!("{name} is a list")),
        },
        T::Msg(check) => match v.as_object() {
            Some(o) => below(parent, Seg::Name(name), |at| check(ck, o, at)),
            None => ck.push(&at(), rule, format!("{name} is an object")),
        },
        T::Msgs(check) => match v.array_len() {
            Some(len) => {
                if f.required && len == 0 {
                    ck.push(&at(), rule, format!("{name} needs at least one element"));
                }
                below(parent, Seg::Name(name), |at| {
                    for (i, item) in (0..len).filter_map(|i| Some((i, v.at(i)?))) {
                        below(at, Seg::Index(i), |iat| match item.as_object() {
                            Some(o) => check(ck, o, iat),
                            None => ck.push(iat, rule, format!("{name} holds objects")),
                        });
                    }
                });
            }
            None => ck.push(&at(), rule, format!("{name} is a list")),
        },
        T::MapOf(check) => match v.as_object() {
            Some(m) => {
                let at = at();
                m.for_each(&mut |k, item| {
                    let iat = format!("{at}/{}", esc(k));
                    match item.as_object() {
                        Some(o) => check(ck, o, &iat),
                        None => ck.push(&iat, rule, format!("{name} maps names to objects")),
                    }
                });
            }
            None => ck.push(&at(), rule, format!("{name} is an object")),
        },
    }
}

/// One step of a JSON pointer.
#[derive(Clone, Copy)]
enum Seg<'a> {
    Name(&'a str),
    Index(usize),
}

/// `f` called with the pointer `parent/seg`, written on the stack when it fits (the pointers
/// the checks descend through are short): no allocation per sub-message checked.
fn below<R>(parent: &str, seg: Seg<'_>, f: impl FnOnce(&str) -> R) -> R {
    let mut buf = [0u8; 160];
    let mut digits = [0u8; 20];
    let tail: &[u8] = match seg {
        Seg::Name(n) => n.as_bytes(),
        Seg::Index(mut i) => {
            let mut at = digits.len();
            loop {
                at -= 1;
                digits[at] = b'0' + (i % 10) as u8;
                i /= 10;
                if i == 0 {
                    break;
                }
            }
            &digits[at..]
        }
    };
    let len = parent.len() + 1 + tail.len();
    if len > buf.len() {
        let mut owned = String::with_capacity(len);
        owned.push_str(parent);
        owned.push('/');
        owned.push_str(std::str::from_utf8(tail).unwrap_or_default());
        return f(&owned);
    }
    buf[..parent.len()].copy_from_slice(parent.as_bytes());
    buf[parent.len()] = b'/';
    buf[parent.len() + 1..len].copy_from_slice(tail);
    // Whole UTF-8 strings and a '/' joined: always UTF-8.
    f(std::str::from_utf8(&buf[..len]).unwrap_or_default())
}

/// Exactly one of `members` is set (a proto oneof).
pub(crate) fn oneof(ck: &mut Ck, obj: &dyn Object, at: &str, rule: &str, members: &[&str]) {
    let is_set = |m: &str| obj.get(m).is_some_and(|v| !v.is_null());
    if members.iter().filter(|m| is_set(m)).count() != 1 {
        let set: Vec<&str> = members.iter().copied().filter(|m| is_set(m)).collect();
        let what = if set.is_empty() {
            "none".to_owned()
        } else {
            set.join(" and ")
        };
        ck.push(
            at,
            rule,
            format!(
                "{rule} holds exactly one of {}, not {what}",
                members.join(", ")
            ),
        );
    }
}

/// The task states a ListTasks filter may name (UNSPECIFIED means no filter).
pub(crate) const STATE_FILTERS: &[&str] = &[
    "TASK_STATE_UNSPECIFIED",
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
];
/// The states a task may be in (UNSPECIFIED is not one).
pub(crate) const STATES: &[&str] = &[
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
];
/// The roles a message may have.
pub(crate) const ROLES: &[&str] = &["ROLE_USER", "ROLE_AGENT"];

const NON_NEG: T = T::Int(0, i32::MAX as i64);

/// Part: exactly one of text/raw/url/data, plus metadata, filename, mediaType.
pub(crate) fn part(ck: &mut Ck, o: &dyn Object, at: &str) {
    oneof(ck, o, at, "Part", &["text", "raw", "url", "data"]);
    fields(ck, o, at, "Part", PART);
}

/// Part's fields.
pub(crate) const PART: &[F] = &[
    opt("text", "text", T::Str),
    opt("raw", "raw", T::Bytes),
    opt("url", "url", T::Str),
    opt("data", "data", T::Any),
    opt("metadata", "metadata", T::Struct),
    opt("filename", "filename", T::Str),
    opt("mediaType", "media_type", T::Str),
];

/// Message (either direction).
pub(crate) fn message(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(ck, o, at, "Message", MESSAGE);
}

/// Message's fields.
pub(crate) const MESSAGE: &[F] = &[
    req("messageId", "message_id", T::Id),
    opt("contextId", "context_id", T::Id),
    opt("taskId", "task_id", T::Id),
    req("role", "role", T::Enum(ROLES)),
    req("parts", "parts", T::Msgs(part)),
    opt("metadata", "metadata", T::Struct),
    opt("extensions", "extensions", T::Strs),
    opt("referenceTaskIds", "reference_task_ids", T::Ids),
];

fn authentication(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(ck, o, at, "AuthenticationInfo", AUTHENTICATION);
}

/// AuthenticationInfo's fields.
pub(crate) const AUTHENTICATION: &[F] = &[
    req("scheme", "scheme", T::Str),
    opt("credentials", "credentials", T::Str),
];

/// TaskPushNotificationConfig's fields.
pub(crate) const PUSH_CONFIG: &[F] = &[
    opt("tenant", "tenant", T::Str),
    opt("id", "id", T::Id),
    opt("taskId", "task_id", T::Id),
    req("url", "url", T::Str),
    opt("token", "token", T::Str),
    opt("authentication", "authentication", T::Msg(authentication)),
];

/// TaskPushNotificationConfig (the request of Create, the inline config, and answers).
pub(crate) fn push_config(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(ck, o, at, "TaskPushNotificationConfig", PUSH_CONFIG);
    if let Some(url) = o.get("url").and_then(|v| v.as_str()) {
        let lower = url.to_ascii_lowercase();
        if !(url.is_empty() || lower.starts_with("https://") || lower.starts_with("http://")) {
            ck.push(
                &format!("{at}/url"),
                "TaskPushNotificationConfig",
                "url is an absolute http(s) URL",
            );
        }
    }
}

fn configuration(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(ck, o, at, "SendMessageConfiguration", CONFIGURATION);
}

/// SendMessageConfiguration's fields.
pub(crate) const CONFIGURATION: &[F] = &[
    opt("acceptedOutputModes", "accepted_output_modes", T::Strs),
    opt(
        "taskPushNotificationConfig",
        "task_push_notification_config",
        T::Msg(push_config),
    ),
    opt("historyLength", "history_length", NON_NEG),
    opt("returnImmediately", "return_immediately", T::Bool),
];

const TENANT: F = opt("tenant", "tenant", T::Str);

/// SendMessageRequest's fields.
pub(crate) const SEND_MESSAGE_REQUEST: &[F] = &[
    TENANT,
    req("message", "message", T::Msg(message)),
    opt("configuration", "configuration", T::Msg(configuration)),
    opt("metadata", "metadata", T::Struct),
];
/// GetTaskRequest's fields.
pub(crate) const GET_TASK_REQUEST: &[F] = &[
    TENANT,
    req("id", "id", T::Id),
    opt("historyLength", "history_length", NON_NEG),
];
/// ListTasksRequest's fields.
pub(crate) const LIST_TASKS_REQUEST: &[F] = &[
    TENANT,
    opt("contextId", "context_id", T::Id),
    opt("status", "status", T::Enum(STATE_FILTERS)),
    opt("pageSize", "page_size", T::Int(1, 100)),
    opt("pageToken", "page_token", T::Str),
    opt("historyLength", "history_length", NON_NEG),
    opt("statusTimestampAfter", "status_timestamp_after", T::Time),
    opt("includeArtifacts", "include_artifacts", T::Bool),
];
/// CancelTaskRequest's fields.
pub(crate) const CANCEL_TASK_REQUEST: &[F] = &[
    TENANT,
    req("id", "id", T::Id),
    opt("metadata", "metadata", T::Struct),
];
/// SubscribeToTaskRequest's fields.
pub(crate) const SUBSCRIBE_TO_TASK_REQUEST: &[F] = &[TENANT, req("id", "id", T::Id)];
/// What CreateTaskPushNotificationConfig asks beyond a TaskPushNotificationConfig's fields
/// ([`PUSH_CONFIG`]): its `taskId`.
const CREATE_PUSH_CONFIG_REQUEST: &[F] = &[req("taskId", "task_id", T::Id)];
/// Get- and DeleteTaskPushNotificationConfigRequest's fields.
pub(crate) const PUSH_CONFIG_REQUEST: &[F] = &[
    TENANT,
    req("taskId", "task_id", T::Id),
    req("id", "id", T::Id),
];
/// ListTaskPushNotificationConfigsRequest's fields.
pub(crate) const LIST_PUSH_CONFIGS_REQUEST: &[F] = &[
    TENANT,
    req("taskId", "task_id", T::Id),
    opt("pageSize", "page_size", NON_NEG),
    opt("pageToken", "page_token", T::Str),
];
/// GetExtendedAgentCardRequest's fields.
pub(crate) const EXTENDED_CARD_REQUEST: &[F] = &[TENANT];

/// The request message of `call` checked against its proto shape.
pub fn check_request(call: &Call) -> Vec<Violation> {
    let mut ck = Ck::default();
    let p = &call.params;
    let (rule, table): (&str, &[F]) = match call.method {
        Method::SendMessage | Method::SendStreamingMessage => {
            ("SendMessageRequest", SEND_MESSAGE_REQUEST)
        }
        Method::GetTask => ("GetTaskRequest", GET_TASK_REQUEST),
        Method::ListTasks => ("ListTasksRequest", LIST_TASKS_REQUEST),
        Method::CancelTask => ("CancelTaskRequest", CANCEL_TASK_REQUEST),
        Method::SubscribeToTask => ("SubscribeToTaskRequest", SUBSCRIBE_TO_TASK_REQUEST),
        Method::CreateTaskPushNotificationConfig => {
            push_config(&mut ck, p, "");
            ("TaskPushNotificationConfig", CREATE_PUSH_CONFIG_REQUEST)
        }
        Method::GetTaskPushNotificationConfig | Method::DeleteTaskPushNotificationConfig => {
            ("GetTaskPushNotificationConfigRequest", PUSH_CONFIG_REQUEST)
        }
        Method::ListTaskPushNotificationConfigs => (
            "ListTaskPushNotificationConfigsRequest",
            LIST_PUSH_CONFIGS_REQUEST,
        ),
        Method::GetExtendedAgentCard => ("GetExtendedAgentCardRequest", EXTENDED_CARD_REQUEST),
    };
    fields(&mut ck, p, "", rule, table);
    ck.out
}

/// Every task id a SendMessage names, for ownership: `message.taskId` and each of
/// `message.referenceTaskIds` (strings only; the request check refuses the rest).
pub fn named_task_ids(params: &Map<String, Value>) -> Vec<&str> {
    let Some(m) = params.get("message").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut out: Vec<&str> = m
        .get("taskId")
        .and_then(Value::as_str)
        .into_iter()
        .collect();
    out.extend(
        m.get("referenceTaskIds")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str),
    );
    out
}

/// The contextId a SendMessage names, if any.
pub fn named_context_id(params: &Map<String, Value>) -> Option<&str> {
    params.get("message")?.get("contextId")?.as_str()
}

/// The inline push config of a SendMessage (`configuration.taskPushNotificationConfig`).
pub fn inline_push_config(params: &Map<String, Value>) -> Option<&Value> {
    params
        .get("configuration")?
        .get("taskPushNotificationConfig")
        .filter(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(method: Method, params: Value) -> Vec<Violation> {
        let Value::Object(p) = params else {
            panic!("object")
        };
        check_request(&Call::new(method, p))
    }

    fn paths(v: &[Violation]) -> Vec<&str> {
        v.iter().map(|v| v.instance_path.as_str()).collect()
    }

    fn send(message: Value) -> Value {
        json!({"message": message})
    }

    #[test]
    fn what_both_sdks_send_passes() {
        let sdk = json!({"message": {"messageId": "70ed00be-024c-4bdc-abd8-f08949184daa",
            "role": "ROLE_USER", "parts": [{"text": "hello"}]}, "configuration": {}});
        assert_eq!(check(Method::SendMessage, sdk.clone()), []);
        assert_eq!(check(Method::SendStreamingMessage, sdk), []);
        let full = json!({"tenant": "", "message": {"messageId": "m", "contextId": "c", "taskId": "t",
            "role": "ROLE_USER", "referenceTaskIds": ["t0"], "extensions": ["https://x/ext"],
            "metadata": {"k": [1]}, "parts": [
                {"text": "a", "mediaType": "text/plain"}, {"raw": "aGk=", "filename": "f.bin"},
                {"url": "https://x/f.png"}, {"data": {"any": ["json"]}}, {"data": null, "text": "x"}]},
            "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 0,
                "returnImmediately": true, "taskPushNotificationConfig": {"url": "https://hook",
                "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "c"}}},
            "metadata": {}});
        assert_eq!(check(Method::SendMessage, full), []);
        assert_eq!(
            check(Method::GetTask, json!({"id": "t", "historyLength": 10})),
            []
        );
        assert_eq!(
            check(Method::CancelTask, json!({"id": "t", "metadata": {}})),
            []
        );
        assert_eq!(check(Method::SubscribeToTask, json!({"id": "t"})), []);
        assert_eq!(
            check(
                Method::ListTasks,
                json!({"contextId": "c", "status": "TASK_STATE_WORKING",
            "pageSize": 100, "pageToken": "x", "historyLength": 0,
            "statusTimestampAfter": "2025-11-09T10:30:00Z", "includeArtifacts": true})
            ),
            []
        );
        assert_eq!(check(Method::ListTasks, json!({})), []);
        assert_eq!(
            check(
                Method::CreateTaskPushNotificationConfig,
                json!({"taskId": "t", "url": "https://x/hook", "authentication": {"scheme": "Basic"}})
            ),
            []
        );
        assert_eq!(
            check(
                Method::GetTaskPushNotificationConfig,
                json!({"taskId": "t", "id": "c"})
            ),
            []
        );
        assert_eq!(
            check(
                Method::DeleteTaskPushNotificationConfig,
                json!({"taskId": "t", "id": "c"})
            ),
            []
        );
        assert_eq!(
            check(
                Method::ListTaskPushNotificationConfigs,
                json!({"taskId": "t", "pageSize": 5})
            ),
            []
        );
        assert_eq!(check(Method::GetExtendedAgentCard, json!({})), []);
    }

    #[test]
    fn unknown_fields_pass_through() {
        let v = check(
            Method::SendMessage,
            json!({"x-ext": {"deep": 1}, "message": {"messageId": "m",
            "role": "ROLE_USER", "parts": [{"text": "a", "x-part": true}], "x-msg": 1}}),
        );
        assert_eq!(v, []);
    }

    #[test]
    fn messages_are_checked_field_by_field() {
        let v = check(Method::SendMessage, json!({}));
        assert_eq!(paths(&v), ["/message"]);
        let v = check(
            Method::SendMessage,
            send(json!({"role": "ROLE_USER", "parts": [{"text": "a"}]})),
        );
        assert_eq!(paths(&v), ["/message/messageId"]);
        let v = check(
            Method::SendMessage,
            send(json!({"messageId": "", "role": "ROLE_USER", "parts": [{"text": "a"}]})),
        );
        assert_eq!(paths(&v), ["/message/messageId"]);
        let v = check(
            Method::SendMessage,
            send(json!({"messageId": "m", "role": "user", "parts": []})),
        );
        assert_eq!(paths(&v), ["/message/role", "/message/parts"]);
        let v = check(
            Method::SendMessage,
            send(json!({"messageId": "m", "role": 1, "parts": [{"text": "a"}]})),
        );
        assert_eq!(paths(&v), ["/message/role"]);
        let v = check(
            Method::SendMessage,
            send(json!({"messageId": "m", "role": "ROLE_UNSPECIFIED", "parts": [{"text": "a"}]})),
        );
        assert_eq!(paths(&v), ["/message/role"]);
        // A Part with two members, with none, and with a wrong type.
        let v = check(
            Method::SendMessage,
            send(json!({"messageId": "m", "role": "ROLE_USER",
            "parts": [{"text": "a", "url": "https://x"}, {"mediaType": "text/plain"}, {"text": 5}, {"raw": "not base64!"}]})),
        );
        assert_eq!(
            paths(&v),
            [
                "/message/parts/0",
                "/message/parts/1",
                "/message/parts/2/text",
                "/message/parts/3/raw"
            ]
        );
        assert!(v[0].message.contains("text and url"));
        // Ids: a 300-byte taskId, a reference with a space.
        let v = check(
            Method::SendMessage,
            send(json!({"messageId": "m", "role": "ROLE_USER",
            "taskId": "x".repeat(300), "referenceTaskIds": ["ok", "not ok"], "parts": [{"text": "a"}]})),
        );
        assert_eq!(
            paths(&v),
            ["/message/taskId", "/message/referenceTaskIds/1"]
        );
        // A config with a bad URL and no auth scheme.
        let v = check(
            Method::SendMessage,
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]},
            "configuration": {"historyLength": -1, "returnImmediately": "yes",
                "taskPushNotificationConfig": {"url": "file:///etc/passwd", "authentication": {}}}}),
        );
        assert_eq!(
            paths(&v),
            [
                "/configuration/taskPushNotificationConfig/authentication/scheme",
                "/configuration/taskPushNotificationConfig/url",
                "/configuration/historyLength",
                "/configuration/returnImmediately",
            ]
        );
    }

    #[test]
    fn proto_spellings_of_known_fields_are_refused() {
        // A client's request reaches the check renamed (spelling.rs); the check itself still
        // refuses what it is handed in proto names (an agent's answer; a request the renaming
        // missed), never letting task_id pass where it reads taskId.
        let v = check(
            Method::SendMessage,
            send(json!({"messageId": "m", "role": "ROLE_USER",
            "task_id": "someone-elses", "parts": [{"text": "a"}]})),
        );
        assert_eq!(paths(&v), ["/message/task_id"]);
        assert!(v[0].message.contains("taskId"));
        let v = check(
            Method::SendMessage,
            send(json!({"message_id": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]})),
        );
        assert_eq!(paths(&v), ["/message/message_id", "/message/messageId"]);
        let v = check(
            Method::SendMessage,
            send(json!({"messageId": "m", "role": "ROLE_USER",
            "reference_task_ids": ["t"], "parts": [{"text": "a"}]})),
        );
        assert_eq!(paths(&v), ["/message/reference_task_ids"]);
        let v = check(
            Method::GetTaskPushNotificationConfig,
            json!({"task_id": "t", "taskId": "t", "id": "c"}),
        );
        assert_eq!(paths(&v), ["/task_id"]);
    }

    #[test]
    fn other_requests_name_their_fields() {
        assert_eq!(paths(&check(Method::GetTask, json!({}))), ["/id"]);
        assert_eq!(
            paths(&check(
                Method::GetTask,
                json!({"id": "t", "historyLength": -1})
            )),
            ["/historyLength"]
        );
        assert_eq!(
            paths(&check(Method::GetTask, json!({"id": "a\u{0}b"}))),
            ["/id"]
        );
        assert_eq!(paths(&check(Method::GetTask, json!({"id": 7}))), ["/id"]);
        assert_eq!(check(Method::GetTask, json!({"id": "tasks/x:cancel"})), []);
        assert_eq!(
            paths(&check(Method::CancelTask, json!({"id": ""}))),
            ["/id"]
        );
        for size in [0, 101] {
            assert_eq!(
                paths(&check(Method::ListTasks, json!({"pageSize": size}))),
                ["/pageSize"]
            );
        }
        assert_eq!(
            paths(&check(Method::ListTasks, json!({"status": "COMPLETED"}))),
            ["/status"]
        );
        assert_eq!(
            check(
                Method::ListTasks,
                json!({"status": "TASK_STATE_UNSPECIFIED"})
            ),
            []
        );
        assert_eq!(
            paths(&check(
                Method::ListTasks,
                json!({"statusTimestampAfter": "yesterday"})
            )),
            ["/statusTimestampAfter"]
        );
        assert_eq!(
            paths(&check(
                Method::ListTasks,
                json!({"includeArtifacts": "true"})
            )),
            ["/includeArtifacts"]
        );
        assert_eq!(
            paths(&check(
                Method::CreateTaskPushNotificationConfig,
                json!({"url": "https://x"})
            )),
            ["/taskId"]
        );
        assert_eq!(
            paths(&check(
                Method::CreateTaskPushNotificationConfig,
                json!({"taskId": "t"})
            )),
            ["/url"]
        );
        assert_eq!(
            paths(&check(
                Method::DeleteTaskPushNotificationConfig,
                json!({"taskId": "t"})
            )),
            ["/id"]
        );
        assert_eq!(
            paths(&check(Method::ListTaskPushNotificationConfigs, json!({}))),
            ["/taskId"]
        );
        assert_eq!(
            paths(&check(Method::GetExtendedAgentCard, json!({"tenant": 3}))),
            ["/tenant"]
        );
    }

    #[test]
    fn pointers_below_are_written_whole() {
        let at = |parent: &str, seg| below(parent, seg, str::to_owned);
        assert_eq!(at("/message", Seg::Name("parts")), "/message/parts");
        assert_eq!(at("", Seg::Index(0)), "/0");
        assert_eq!(at("/a", Seg::Index(10)), "/a/10");
        assert_eq!(
            at("/a", Seg::Index(usize::MAX)),
            format!("/a/{}", usize::MAX)
        );
        let long = format!("/{}", "é".repeat(100));
        assert_eq!(at(&long, Seg::Name("x")), format!("{long}/x"));
        assert_eq!(at(&long, Seg::Index(7)), format!("{long}/7"));
    }

    #[test]
    fn violations_are_bounded() {
        let parts: Vec<Value> = (0..500).map(|_| json!({})).collect();
        let v = check(
            Method::SendMessage,
            send(json!({"messageId": "m", "role": "ROLE_USER", "parts": parts})),
        );
        assert_eq!(v.len(), MAX_VIOLATIONS);
    }

    #[test]
    fn ownership_accessors() {
        let Value::Object(p) = json!({"message": {"taskId": "t1", "contextId": "c1",
            "referenceTaskIds": ["t2", 3, "t3"]},
            "configuration": {"taskPushNotificationConfig": {"url": "https://x"}}})
        else {
            unreachable!()
        };
        assert_eq!(named_task_ids(&p), ["t1", "t2", "t3"]);
        assert_eq!(named_context_id(&p), Some("c1"));
        assert!(inline_push_config(&p).is_some());
        assert!(named_task_ids(&Map::new()).is_empty());
        assert!(inline_push_config(&Map::new()).is_none());
    }
}
