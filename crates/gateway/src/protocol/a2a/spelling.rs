//! Both spellings of a proto field, in a client's request: `messageId` and `message_id`.
//!
//! Protocol Buffers' JSON mapping tells every parser to accept the lowerCamelCase JSON name and
//! the field's proto name alike; a2a-sdk's servers do, and clients write either (the official
//! conformance kit's REST client writes `message_id`). So the gateway reads both, and renames
//! once, when the request is read (by each wire form's envelope, `http::a2a::wire`): every later
//! step (the checks, ownership's `taskId`, `contextId` and `referenceTaskIds`, the `messageId`'s
//! claim, the request to the agent) sees the JSON name only. A `task_id` that reached the agent
//! beside a check that read `taskId` would be an ownership bypass; renamed here, it cannot.
//!
//! Only proto fields are renamed, by the message type at that place in the document (the
//! tables of [`super::check`]): the contents of a `google.protobuf.Struct` or `Value`
//! (`metadata`, a data part's `data`) keep their keys exactly as sent, and so does a field the
//! proto does not know. A field given in both spellings in one object is InvalidParams naming
//! it.
//!
//! An int32 field written as a string (`"pageSize": "10"`, which ProtoJSON's parsers accept as
//! they accept the number) is read as its number here too, once: ListTasks' page, GetTask's
//! `historyLength` and the agent read a number. A string that holds no integer is left for the
//! check to refuse (InvalidParams).
//!
//! Cost: a request already in JSON names (nearly all) is only scanned: each object at a proto
//! message's place is asked whether a key holds an `_`, and nothing is allocated.

use serde_json::{Map, Value};

use super::check::{self, Ck, F};
use super::{A2aError, Method};

/// A proto message where a request may hold one: its name (for violations), its fields (the
/// check's own table), and the fields holding a message, with that message's shape.
struct Shape {
    rule: &'static str,
    fields: &'static [F],
    below: &'static [(&'static str, Nest, &'static Shape)],
}

/// Whether a message field holds one message or a list of them.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Nest {
    One,
    Many,
}

static PART: Shape = Shape {
    rule: "Part",
    fields: check::PART,
    below: &[],
};
static MESSAGE: Shape = Shape {
    rule: "Message",
    fields: check::MESSAGE,
    below: &[("parts", Nest::Many, &PART)],
};
static AUTHENTICATION: Shape = Shape {
    rule: "AuthenticationInfo",
    fields: check::AUTHENTICATION,
    below: &[],
};
static PUSH_CONFIG: Shape = Shape {
    rule: "TaskPushNotificationConfig",
    fields: check::PUSH_CONFIG,
    below: &[("authentication", Nest::One, &AUTHENTICATION)],
};
static CONFIGURATION: Shape = Shape {
    rule: "SendMessageConfiguration",
    fields: check::CONFIGURATION,
    below: &[("taskPushNotificationConfig", Nest::One, &PUSH_CONFIG)],
};
static SEND_MESSAGE: Shape = Shape {
    rule: "SendMessageRequest",
    fields: check::SEND_MESSAGE_REQUEST,
    below: &[
        ("message", Nest::One, &MESSAGE),
        ("configuration", Nest::One, &CONFIGURATION),
    ],
};
static GET_TASK: Shape = flat("GetTaskRequest", check::GET_TASK_REQUEST);
static LIST_TASKS: Shape = flat("ListTasksRequest", check::LIST_TASKS_REQUEST);
static CANCEL_TASK: Shape = flat("CancelTaskRequest", check::CANCEL_TASK_REQUEST);
static SUBSCRIBE: Shape = flat("SubscribeToTaskRequest", check::SUBSCRIBE_TO_TASK_REQUEST);
static CONFIG_REQUEST: Shape = flat(
    "GetTaskPushNotificationConfigRequest",
    check::PUSH_CONFIG_REQUEST,
);
static LIST_CONFIGS: Shape = flat(
    "ListTaskPushNotificationConfigsRequest",
    check::LIST_PUSH_CONFIGS_REQUEST,
);
static EXTENDED_CARD: Shape = flat("GetExtendedAgentCardRequest", check::EXTENDED_CARD_REQUEST);

/// A message with no message fields.
const fn flat(rule: &'static str, fields: &'static [F]) -> Shape {
    Shape {
        rule,
        fields,
        below: &[],
    }
}

/// The request message of `method`.
fn request(method: Method) -> &'static Shape {
    match method {
        Method::SendMessage | Method::SendStreamingMessage => &SEND_MESSAGE,
        Method::GetTask => &GET_TASK,
        Method::ListTasks => &LIST_TASKS,
        Method::CancelTask => &CANCEL_TASK,
        Method::SubscribeToTask => &SUBSCRIBE,
        // The request is the config itself.
        Method::CreateTaskPushNotificationConfig => &PUSH_CONFIG,
        Method::GetTaskPushNotificationConfig | Method::DeleteTaskPushNotificationConfig => {
            &CONFIG_REQUEST
        }
        Method::ListTaskPushNotificationConfigs => &LIST_CONFIGS,
        Method::GetExtendedAgentCard => &EXTENDED_CARD,
    }
}

/// The field of `method`'s request message whose proto name is `name` and whose JSON name is
/// another (`history_length`: `historyLength`), as (JSON name, proto name): for REST query
/// parameters.
pub fn top_level(method: Method, name: &str) -> Option<(&'static str, &'static str)> {
    request(method)
        .fields
        .iter()
        .find(|f| f.spelled_apart && f.proto == name)
        .map(|f| (f.json, f.proto))
}

/// Renames every proto field of `params`, the request message of `method`, spelled with its
/// proto name to its JSON name, at every depth the proto gives it, and reads an int32 field
/// given as a string as its number (see the module doc). A field given in both
/// spellings in one object is InvalidParams naming it (every such field, at most
/// `MAX_VIOLATIONS`).
pub fn to_json_names(method: Method, params: &mut Map<String, Value>) -> Result<(), A2aError> {
    let mut ck = Ck::default();
    rename(&mut ck, params, request(method), &At::Root);
    if ck.out.is_empty() {
        Ok(())
    } else {
        Err(A2aError::invalid_params(ck.out))
    }
}

/// Where an object is, written as a JSON pointer only for a violation.
enum At<'a> {
    Root,
    Field(&'a At<'a>, &'static str),
    Item(&'a At<'a>, usize),
}

impl At<'_> {
    fn write(&self, out: &mut String) {
        match self {
            At::Root => {}
            At::Field(parent, name) => {
                parent.write(out);
                out.push('/');
                out.push_str(name);
            }
            At::Item(parent, i) => {
                parent.write(out);
                out.push('/');
                out.push_str(&i.to_string());
            }
        }
    }

    /// The pointer of member `name` of the object here.
    fn member(&self, name: &str) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out.push('/');
        out.push_str(name);
        out
    }
}

fn rename(ck: &mut Ck, obj: &mut Map<String, Value>, shape: &Shape, at: &At<'_>) {
    // A proto name differs from its JSON name only where it holds an `_`: an object with no such
    // key is left as it is, unread but for its keys.
    if obj.keys().any(|k| k.contains('_')) {
        for f in shape.fields.iter().filter(|f| f.spelled_apart) {
            if !obj.contains_key(f.proto) {
                continue;
            }
            if obj.contains_key(f.json) {
                ck.push(
                    &at.member(f.json),
                    shape.rule,
                    format!(
                        "{} is given twice, as {} and as {}: give it once",
                        f.json, f.json, f.proto
                    ),
                );
                continue;
            }
            if let Some(v) = obj.remove(f.proto) {
                obj.insert(f.json.to_owned(), v);
            }
        }
    }
    for f in shape.fields {
        if !matches!(f.ty, check::T::Int(..)) {
            continue;
        }
        if let Some(v) = obj.get_mut(f.json).filter(|v| !v.is_i64()) {
            if let Some(n) = check::proto_int(&*v) {
                *v = Value::from(n);
            }
        }
    }
    for &(name, nest, sub) in shape.below {
        match (nest, obj.get_mut(name)) {
            (Nest::One, Some(Value::Object(o))) => rename(ck, o, sub, &At::Field(at, name)),
            (Nest::Many, Some(Value::Array(items))) => {
                let here = At::Field(at, name);
                for (i, item) in items.iter_mut().enumerate() {
                    if let Value::Object(o) = item {
                        rename(ck, o, sub, &At::Item(&here, i));
                    }
                }
            }
            // Anything else is the check's to refuse.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::a2a::check::{check_request, T};
    use crate::protocol::a2a::Call;
    use serde_json::json;

    /// Whether `f` holds a message (one or a list), and which.
    fn nest_of(f: &F) -> Option<Nest> {
        match f.ty {
            T::Msg(_) => Some(Nest::One),
            T::Msgs(_) => Some(Nest::Many),
            _ => None,
        }
    }

    const METHODS: [Method; 11] = [
        Method::SendMessage,
        Method::SendStreamingMessage,
        Method::GetTask,
        Method::ListTasks,
        Method::CancelTask,
        Method::SubscribeToTask,
        Method::CreateTaskPushNotificationConfig,
        Method::GetTaskPushNotificationConfig,
        Method::DeleteTaskPushNotificationConfig,
        Method::ListTaskPushNotificationConfigs,
        Method::GetExtendedAgentCard,
    ];

    fn renamed(method: Method, v: Value) -> Result<Value, A2aError> {
        let Value::Object(mut p) = v else {
            panic!("an object")
        };
        to_json_names(method, &mut p)?;
        Ok(Value::Object(p))
    }

    fn pointers(e: &A2aError) -> Vec<&str> {
        e.details.iter().map(|v| v.instance_path.as_str()).collect()
    }

    #[test]
    fn int32_fields_given_as_strings_are_read_as_their_numbers() {
        let got = renamed(
            Method::ListTasks,
            json!({"pageSize": "10", "historyLength": "3", "contextId": "42"}),
        )
        .expect("read");
        // A string field that looks like a number stays a string: only int32 fields change.
        assert_eq!(
            got,
            json!({"pageSize": 10, "historyLength": 3, "contextId": "42"})
        );
        let got =
            renamed(Method::GetTask, json!({"id": "t", "history_length": "1e1"})).expect("read");
        assert_eq!(got, json!({"id": "t", "historyLength": 10}));
        // Nested: a message's configuration.
        let got = renamed(
            Method::SendMessage,
            json!({"message": {}, "configuration": {"historyLength": "-1"}}),
        )
        .expect("read");
        assert_eq!(got["configuration"]["historyLength"], -1);
        // What holds no integer is left for the check, which refuses it as it did.
        for bad in [
            "ten",
            "",
            " 10",
            "+10",
            "1.5",
            "0x10",
            "inf",
            "99999999999999999999",
        ] {
            let got = renamed(Method::ListTasks, json!({ "pageSize": bad })).expect("read");
            assert_eq!(got["pageSize"], bad, "{bad:?}");
            let call = Call::new(
                Method::ListTasks,
                got.as_object().cloned().expect("an object"),
            );
            let found = check_request(&call);
            assert_eq!(found.len(), 1, "{bad:?}: {found:?}");
            assert_eq!(found[0].instance_path, "/pageSize", "{bad:?}");
        }
        // Read, then checked: a number out of bounds is refused with its bound.
        let got = renamed(Method::ListTasks, json!({"pageSize": "1000"})).expect("read");
        let found = check_request(&Call::new(
            Method::ListTasks,
            got.as_object().cloned().expect("an object"),
        ));
        assert!(
            found[0].message.contains("between 1 and 100, not 1000"),
            "{found:?}"
        );
    }

    /// Every shape descends into every message field its table has, as one or many as the
    /// table says: a message field the renaming did not follow would keep its proto names.
    #[test]
    fn every_message_field_is_followed() {
        fn walk(shape: &'static Shape, seen: &mut Vec<&'static str>) {
            if seen.contains(&shape.rule) {
                return;
            }
            seen.push(shape.rule);
            for f in shape.fields {
                let below = shape.below.iter().find(|(name, _, _)| *name == f.json);
                match (nest_of(f), below) {
                    (Some(nest), Some((_, n, sub))) => {
                        assert_eq!(*n, nest, "{}.{}", shape.rule, f.json);
                        walk(sub, seen);
                    }
                    (None, None) => {}
                    (want, got) => panic!(
                        "{}.{}: the table says {want:?}, the shape {:?}",
                        shape.rule,
                        f.json,
                        got.map(|g| g.1)
                    ),
                }
            }
            for (name, _, _) in shape.below {
                assert!(
                    shape.fields.iter().any(|f| f.json == *name),
                    "{}.{name} is no field",
                    shape.rule
                );
            }
        }
        let mut seen = Vec::new();
        for m in METHODS {
            walk(request(m), &mut seen);
        }
        assert!(seen.contains(&"AuthenticationInfo"), "{seen:?}");
    }

    /// The whole of SendMessageRequest in proto names, Struct contents in snake_case of their
    /// own: every proto field renamed at every depth, the Struct contents and unknown fields
    /// as sent, and the result passes the check as the camelCase request does.
    #[test]
    fn a_send_message_in_proto_names_reads_as_in_json_names() {
        let proto = json!({"tenant": "t", "metadata": {"client_ref": {"deep_key": 1}},
            "x_vendor": {"keep_me": true},
            "message": {"message_id": "m", "context_id": "c", "task_id": "t-1", "role": "ROLE_USER",
                "reference_task_ids": ["t-0"], "extensions": ["https://x/ext"],
                "metadata": {"trace_id": "abc"},
                "parts": [
                    {"text": "a", "media_type": "text/plain", "metadata": {"part_key": 1}},
                    {"data": {"snake_key": {"inner_key": [1]}, "message_id": "not a field"}},
                    {"raw": "aGk=", "filename": "f.bin"}]},
            "configuration": {"accepted_output_modes": ["text/plain"], "history_length": 2,
                "return_immediately": true,
                "task_push_notification_config": {"url": "https://hook", "task_id": "t-1",
                    "authentication": {"scheme": "Bearer", "credentials": "c"}}}});
        let json_names = json!({"tenant": "t", "metadata": {"client_ref": {"deep_key": 1}},
            "x_vendor": {"keep_me": true},
            "message": {"messageId": "m", "contextId": "c", "taskId": "t-1", "role": "ROLE_USER",
                "referenceTaskIds": ["t-0"], "extensions": ["https://x/ext"],
                "metadata": {"trace_id": "abc"},
                "parts": [
                    {"text": "a", "mediaType": "text/plain", "metadata": {"part_key": 1}},
                    {"data": {"snake_key": {"inner_key": [1]}, "message_id": "not a field"}},
                    {"raw": "aGk=", "filename": "f.bin"}]},
            "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 2,
                "returnImmediately": true,
                "taskPushNotificationConfig": {"url": "https://hook", "taskId": "t-1",
                    "authentication": {"scheme": "Bearer", "credentials": "c"}}}});
        for m in [Method::SendMessage, Method::SendStreamingMessage] {
            let got = renamed(m, proto.clone()).expect("renamed");
            assert_eq!(got, json_names);
            let Value::Object(p) = got else {
                unreachable!()
            };
            assert_eq!(check_request(&Call::new(m, p)), []);
        }
        // Already in JSON names: unchanged.
        assert_eq!(
            renamed(Method::SendMessage, json_names.clone()).expect("as it is"),
            json_names
        );
    }

    #[test]
    fn every_request_reads_its_proto_names() {
        let cases = [
            (
                Method::GetTask,
                json!({"id": "t", "history_length": 3}),
                json!({"id": "t", "historyLength": 3}),
            ),
            (
                Method::ListTasks,
                json!({"context_id": "c", "status": "TASK_STATE_WORKING", "page_size": 5,
                    "page_token": "p", "history_length": 0,
                    "status_timestamp_after": "2025-11-09T10:30:00Z", "include_artifacts": true}),
                json!({"contextId": "c", "status": "TASK_STATE_WORKING", "pageSize": 5,
                    "pageToken": "p", "historyLength": 0,
                    "statusTimestampAfter": "2025-11-09T10:30:00Z", "includeArtifacts": true}),
            ),
            (
                Method::CancelTask,
                json!({"id": "t", "metadata": {"why_not": "x"}}),
                json!({"id": "t", "metadata": {"why_not": "x"}}),
            ),
            (
                Method::CreateTaskPushNotificationConfig,
                json!({"task_id": "t", "url": "https://x", "authentication": {"scheme": "Basic"}}),
                json!({"taskId": "t", "url": "https://x", "authentication": {"scheme": "Basic"}}),
            ),
            (
                Method::GetTaskPushNotificationConfig,
                json!({"task_id": "t", "id": "c"}),
                json!({"taskId": "t", "id": "c"}),
            ),
            (
                Method::DeleteTaskPushNotificationConfig,
                json!({"task_id": "t", "id": "c"}),
                json!({"taskId": "t", "id": "c"}),
            ),
            (
                Method::ListTaskPushNotificationConfigs,
                json!({"task_id": "t", "page_size": 5, "page_token": "p"}),
                json!({"taskId": "t", "pageSize": 5, "pageToken": "p"}),
            ),
        ];
        for (m, proto, json_names) in cases {
            let got = renamed(m, proto).expect("renamed");
            assert_eq!(got, json_names, "{m:?}");
            let Value::Object(p) = got else {
                unreachable!()
            };
            assert_eq!(check_request(&Call::new(m, p)), [], "{m:?}");
        }
        // A name of another message's field is not this one's: left for the agent, as any
        // field the proto does not know.
        assert_eq!(
            renamed(Method::GetTask, json!({"id": "t", "task_id": "u"})).expect("kept"),
            json!({"id": "t", "task_id": "u"})
        );
        assert_eq!(
            top_level(Method::ListTasks, "page_size"),
            Some(("pageSize", "page_size"))
        );
        assert_eq!(top_level(Method::ListTasks, "pageSize"), None);
        assert_eq!(top_level(Method::GetTask, "page_size"), None);
    }

    #[test]
    fn a_field_in_both_spellings_is_refused_naming_it() {
        let e = renamed(
            Method::SendMessage,
            json!({"message": {"message_id": "m", "messageId": "m", "role": "ROLE_USER",
                "parts": [{"text": "a"}]}}),
        )
        .expect_err("both spellings");
        assert_eq!(e.kind, super::super::ErrorKind::InvalidParams);
        assert_eq!(pointers(&e), ["/message/messageId"]);
        assert!(e.message.contains("message_id"), "{}", e.message);
        // Every one, at every depth, even with null as one of them.
        let e = renamed(
            Method::SendMessage,
            json!({"message": {"messageId": "m", "task_id": "a", "taskId": "b", "role": "ROLE_USER",
                "parts": [{"text": "a"}, {"text": "b", "media_type": "x", "mediaType": null}]},
                "configuration": {"task_push_notification_config": {"url": "https://h",
                    "taskId": "t", "task_id": "t"}}}),
        )
        .expect_err("both spellings");
        assert_eq!(
            pointers(&e),
            [
                "/message/taskId",
                "/message/parts/1/mediaType",
                "/configuration/taskPushNotificationConfig/taskId",
            ]
        );
        let e = renamed(
            Method::GetTaskPushNotificationConfig,
            json!({"task_id": "t", "taskId": "t", "id": "c"}),
        )
        .expect_err("both spellings");
        assert_eq!(pointers(&e), ["/taskId"]);
    }

    #[test]
    fn the_wrong_type_at_a_message_field_is_left_for_the_check() {
        for v in [
            json!({"message": "hi"}),
            json!({"message": [{"message_id": "m"}]}),
            json!({"message": {"message_id": "m", "parts": {"media_type": "x"}}}),
        ] {
            let got = renamed(Method::SendMessage, v.clone()).expect("not refused here");
            let Value::Object(p) = got else {
                unreachable!()
            };
            assert!(!check_request(&Call::new(Method::SendMessage, p)).is_empty());
        }
    }
}
