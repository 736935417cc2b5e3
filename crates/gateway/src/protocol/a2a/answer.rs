//! Checks of what agents answer, and the accessors the ledger reads from a valid answer.
//!
//! A Task must have a valid `id`, a `contextId` (the proto does not mark it REQUIRED, the
//! gateway needs it to scope contexts) and a known `status.state` (UNSPECIFIED is not a state);
//! `status.timestamp`, when given, is RFC 3339 (a2a-sdk writes microseconds, so any RFC 3339
//! form is read, not only the millisecond one). The task must be the one asked about. Unknown
//! fields pass.

use serde_json::Value;

use super::check::{self, fields, oneof, opt, req, Ck, T};
use super::state::TaskState;
use super::{card, Method};
use crate::protocol::node::{Json, Object};
use crate::protocol::time::parse_lenient;
use crate::protocol::Violation;

fn status(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "TaskStatus",
        &[
            req("state", "state", T::Enum(check::STATES)),
            opt("message", "message", T::Msg(check::message)),
            opt("timestamp", "timestamp", T::Time),
        ],
    );
}

fn artifact(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "Artifact",
        &[
            req("artifactId", "artifact_id", T::Id),
            opt("name", "name", T::Str),
            opt("description", "description", T::Str),
            req("parts", "parts", T::Msgs(check::part)),
            opt("metadata", "metadata", T::Struct),
            opt("extensions", "extensions", T::Strs),
        ],
    );
}

fn task(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "Task",
        &[
            req("id", "id", T::Id),
            req("contextId", "context_id", T::Id),
            req("status", "status", T::Msg(status)),
            opt("artifacts", "artifacts", T::Msgs(artifact)),
            opt("history", "history", T::Msgs(check::message)),
            opt("metadata", "metadata", T::Struct),
        ],
    );
}

fn status_update(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "TaskStatusUpdateEvent",
        &[
            req("taskId", "task_id", T::Id),
            req("contextId", "context_id", T::Id),
            req("status", "status", T::Msg(status)),
            opt("metadata", "metadata", T::Struct),
        ],
    );
}

fn artifact_update(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "TaskArtifactUpdateEvent",
        &[
            req("taskId", "task_id", T::Id),
            req("contextId", "context_id", T::Id),
            req("artifact", "artifact", T::Msg(artifact)),
            opt("append", "append", T::Bool),
            opt("lastChunk", "last_chunk", T::Bool),
            opt("metadata", "metadata", T::Struct),
        ],
    );
}

fn send_response(ck: &mut Ck, o: &dyn Object, at: &str) {
    oneof(ck, o, at, "SendMessageResponse", &["task", "message"]);
    fields(
        ck,
        o,
        at,
        "SendMessageResponse",
        &[
            opt("task", "task", T::Msg(task)),
            opt("message", "message", T::Msg(check::message)),
        ],
    );
}

fn stream_response(ck: &mut Ck, o: &dyn Object, at: &str) {
    oneof(
        ck,
        o,
        at,
        "StreamResponse",
        &["task", "message", "statusUpdate", "artifactUpdate"],
    );
    fields(
        ck,
        o,
        at,
        "StreamResponse",
        &[
            opt("task", "task", T::Msg(task)),
            opt("message", "message", T::Msg(check::message)),
            opt("statusUpdate", "status_update", T::Msg(status_update)),
            opt("artifactUpdate", "artifact_update", T::Msg(artifact_update)),
        ],
    );
}

fn list_tasks(ck: &mut Ck, o: &dyn Object, at: &str) {
    // `tasks` is REQUIRED but an empty page is a valid answer: present, possibly empty.
    if o.get("tasks").is_none_or(|t| t.array_len().is_none()) {
        ck.push(
            &format!("{at}/tasks"),
            "ListTasksResponse",
            "tasks is a list (possibly empty)",
        );
    }
    fields(
        ck,
        o,
        at,
        "ListTasksResponse",
        &[
            opt("tasks", "tasks", T::Msgs(task)),
            opt("nextPageToken", "next_page_token", T::Str),
            opt("pageSize", "page_size", T::Int(0, i32::MAX as i64)),
            opt("totalSize", "total_size", T::Int(0, i32::MAX as i64)),
        ],
    );
}

fn list_configs(ck: &mut Ck, o: &dyn Object, at: &str) {
    fields(
        ck,
        o,
        at,
        "ListTaskPushNotificationConfigsResponse",
        &[
            opt("configs", "configs", T::Msgs(check::push_config)),
            opt("nextPageToken", "next_page_token", T::Str),
        ],
    );
}

/// Checks an agent's answer to `method` (one StreamResponse for the streaming methods). With
/// `task`, the answer must be about that task (GetTask, CancelTask, a subscription's events, a
/// SendMessage continuing it).
pub fn check_answer(method: Method, answer: &dyn Json, task: Option<&str>) -> Vec<Violation> {
    let mut ck = Ck::default();
    let Some(o) = answer.as_object() else {
        ck.push("", method.as_str(), "the answer is a JSON object");
        return ck.out;
    };
    match method {
        Method::SendMessage => send_response(&mut ck, o, ""),
        Method::SendStreamingMessage | Method::SubscribeToTask => stream_response(&mut ck, o, ""),
        Method::GetTask | Method::CancelTask => self::task(&mut ck, o, ""),
        Method::ListTasks => list_tasks(&mut ck, o, ""),
        Method::CreateTaskPushNotificationConfig | Method::GetTaskPushNotificationConfig => {
            check::push_config(&mut ck, o, "")
        }
        Method::ListTaskPushNotificationConfigs => list_configs(&mut ck, o, ""),
        Method::DeleteTaskPushNotificationConfig => {}
        Method::GetExtendedAgentCard => ck.out.extend(card::check_card(answer)),
    }
    if let Some((at, got)) = task.and_then(|_| answered_task_id(method, answer)) {
        if task != Some(got) {
            ck.push(
                at,
                "task",
                format!("the answer is about task {got:?}, not the one asked about"),
            );
        }
    }
    ck.out
}

/// Where the answer names its task, and the id.
fn answered_task_id(method: Method, answer: &dyn Json) -> Option<(&'static str, &str)> {
    let pick = |at: &'static str| {
        let mut v = answer;
        for name in at.split('/').skip(1) {
            v = v.get(name)?;
        }
        v.as_str().map(|s| (at, s))
    };
    match method {
        Method::GetTask | Method::CancelTask => pick("/id"),
        Method::SendMessage => pick("/task/id"),
        Method::SendStreamingMessage | Method::SubscribeToTask => pick("/task/id")
            .or_else(|| pick("/statusUpdate/taskId"))
            .or_else(|| pick("/artifactUpdate/taskId")),
        Method::CreateTaskPushNotificationConfig | Method::GetTaskPushNotificationConfig => {
            pick("/taskId")
        }
        _ => None,
    }
}

/// The one member of a SendMessageResponse or StreamResponse, in serde_json's tree (`J`) or in
/// the view of either tree (`dyn Json`, [`payload_of`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Payload<'a, J: ?Sized = Value> {
    /// A Task.
    Task(&'a J),
    /// A Message.
    Message(&'a J),
    /// A TaskStatusUpdateEvent.
    StatusUpdate(&'a J),
    /// A TaskArtifactUpdateEvent.
    ArtifactUpdate(&'a J),
}

/// The payload of a (checked) SendMessageResponse or StreamResponse.
pub fn payload(answer: &Value) -> Option<Payload<'_>> {
    let o = answer.as_object()?;
    pick(|k| o.get(k).filter(|v| v.is_object()))
}

/// [`payload`], of an answer in either tree (an answer read in place).
pub fn payload_of<'a>(answer: &'a dyn Json) -> Option<Payload<'a, dyn Json + 'a>> {
    let o = answer.as_object()?;
    pick(|k| o.get(k).filter(|v| v.is_object()))
}

/// The first of the oneof's members that `get` finds an object, in the proto's order.
fn pick<'a, J: ?Sized>(get: impl Fn(&str) -> Option<&'a J>) -> Option<Payload<'a, J>> {
    get("task")
        .map(Payload::Task)
        .or_else(|| get("message").map(Payload::Message))
        .or_else(|| get("statusUpdate").map(Payload::StatusUpdate))
        .or_else(|| get("artifactUpdate").map(Payload::ArtifactUpdate))
}

/// What the ledger records of a task or a status event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskHead<'a> {
    /// The task's id.
    pub id: &'a str,
    /// Its context.
    pub context_id: &'a str,
    /// Its state.
    pub state: TaskState,
    /// `status.timestamp` in ms since the epoch, when given (a missing one is recorded as the
    /// time of recording, by the caller, who has the clock).
    pub timestamp_ms: Option<i64>,
}

fn head<'a>(
    id: Option<&'a dyn Json>,
    context: Option<&'a dyn Json>,
    status: Option<&'a dyn Json>,
) -> Option<TaskHead<'a>> {
    let status = status?;
    Some(TaskHead {
        id: id?.as_str()?,
        context_id: context?.as_str()?,
        state: TaskState::parse(status.get("state")?.as_str()?)?,
        timestamp_ms: status
            .get("timestamp")
            .and_then(|t| t.as_str())
            .and_then(parse_lenient),
    })
}

/// The head of a Task, or of the task in a SendMessageResponse/StreamResponse, or of a
/// TaskStatusUpdateEvent in a StreamResponse; `None` for a Message, an artifact update or
/// anything without a known state.
pub fn task_of(answer: &Value) -> Option<TaskHead<'_>> {
    match payload(answer) {
        Some(Payload::Task(t)) => of_task(t),
        Some(Payload::StatusUpdate(e)) => {
            let e: &dyn Json = e;
            head(e.get("taskId"), e.get("contextId"), e.get("status"))
        }
        Some(Payload::Message(_) | Payload::ArtifactUpdate(_)) => None,
        None => of_task(answer),
    }
}

/// The head of a bare Task document.
pub fn of_task(t: &dyn Json) -> Option<TaskHead<'_>> {
    head(t.get("id"), t.get("contextId"), t.get("status"))
}

/// What a push config's receiver reads in a Task besides its state, as one digest
/// (`task::TaskRef::content`): its status message and its artifacts, as JSON (the same bytes
/// whichever tree holds the Task). The status time and the history are left out: a refresh
/// that only restamps the status, or a message appended to the history, is no news.
pub fn content_of(task: &dyn Json) -> u64 {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| {
        let mut w = scratch.borrow_mut();
        w.clear();
        match task.get("status").and_then(|s| s.get("message")) {
            Some(m) => m.write_json(&mut w),
            None => w.extend_from_slice(b"-"),
        }
        w.push(b'\n');
        match task.get("artifacts") {
            Some(a) => a.write_json(&mut w),
            None => w.extend_from_slice(b"-"),
        }
        let mut d = crate::protocol::digest::Digest::default();
        d.write(&w);
        // A scratch grown by a large task is not kept at that size.
        if w.capacity() > 64 * 1024 {
            *w = Vec::new();
        }
        d.finish()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(v: &[Violation]) -> Vec<&str> {
        v.iter().map(|v| v.instance_path.as_str()).collect()
    }

    fn sdk_task() -> Value {
        // a2a-sdk 1.3.0's answer to "hello", as it was observed (microsecond timestamps).
        json!({"id": "6618f45f-94be-4aa3-82eb-66b82a55318c", "contextId": "c0c8a1a4",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T09:50:56.123456Z"},
            "artifacts": [{"artifactId": "a1", "name": "greeting", "parts": [{"text": "Hello, world!"}]}],
            "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hello"}]}]})
    }

    #[test]
    fn content_is_the_status_message_and_the_artifacts() {
        let t = sdk_task();
        let base = content_of(&t);
        assert_ne!(base, 0);
        // The status time and the history are not content.
        let mut u = t.clone();
        u["status"]["timestamp"] = json!("2026-12-01T09:51:00Z");
        u["history"] = json!([]);
        assert_eq!(content_of(&u), base);
        // An artifact, a part of one, or the status message: content.
        let mut u = t.clone();
        u["artifacts"][0]["parts"][0]["text"] = json!("Hello, again!");
        assert_ne!(content_of(&u), base);
        let mut u = t.clone();
        u["artifacts"] = json!([]);
        assert_ne!(content_of(&u), base);
        let mut u = t.clone();
        u["status"]["message"] =
            json!({"messageId": "s", "role": "ROLE_AGENT", "parts": [{"text": "tick 1"}]});
        let tick1 = content_of(&u);
        assert_ne!(tick1, base);
        u["status"]["message"]["parts"][0]["text"] = json!("tick 2");
        assert_ne!(content_of(&u), tick1);
        // The same Task read in place, members in another order: the same digest.
        let doc = r#"{"status":{"timestamp":"2026-12-01T09:50:56.123456Z","state":"TASK_STATE_COMPLETED"},"artifacts":[{"parts":[{"text":"Hello, world!"}],"name":"greeting","artifactId":"a1"}],"contextId":"c0c8a1a4","id":"6618f45f-94be-4aa3-82eb-66b82a55318c"}"#;
        let node = crate::protocol::json::read_in_place(doc.as_bytes()).expect("a node");
        assert_eq!(content_of(&node), base);
    }

    #[test]
    fn an_answer_read_in_place_is_judged_as_its_tree_is() {
        let docs = [
            r#"{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-12-01T09:50:56.123456Z"},"artifacts":[{"artifactId":"a","parts":[{"text":"x"}]}],"history":[{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}]}}"#,
            r#"{"task":{"id":"t","context_id":"c","status":{"state":"TASK_STATE_DONE"},"artifacts":[{"parts":[]}],"history":[{"messageId":"","role":"USER","parts":[{"text":"a","raw":"b"},{}]}]}}"#,
            r#"{"task":{"id":"t/../x","contextId":null,"status":{"state":1,"timestamp":"yesterday"},"metadata":[],"history":{}}}"#,
            r#"{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"data":{"k":[1]}}],"extensions":["e",2],"referenceTaskIds":[""]}}"#,
            r#"{"task":{"id":"t"},"message":{"messageId":"m"}}"#,
            r#"{"message":[],"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}"#,
            r#"{}"#,
            r#"[]"#,
        ];
        for doc in docs {
            let tree = crate::protocol::json::parse(doc.as_bytes()).expect("a tree");
            let node = crate::protocol::json::read_in_place(doc.as_bytes()).expect("a node");
            for (method, task) in [
                (Method::SendMessage, None),
                (Method::SendMessage, Some("t")),
                (Method::SendStreamingMessage, Some("other")),
                (Method::GetTask, Some("t")),
            ] {
                let want = check_answer(method, &tree, task);
                assert_eq!(check_answer(method, &node, task), want, "{doc}");
            }
            let head = |j: &dyn Json| {
                j.get("task")
                    .and_then(of_task)
                    .map(|h| (h.id.to_owned(), h.state, h.timestamp_ms))
            };
            assert_eq!(head(&node), head(&tree), "{doc}");
            fn kind<J: ?Sized>(p: Option<Payload<'_, J>>) -> &'static str {
                match p {
                    Some(Payload::Task(_)) => "task",
                    Some(Payload::Message(_)) => "message",
                    Some(Payload::StatusUpdate(_)) => "statusUpdate",
                    Some(Payload::ArtifactUpdate(_)) => "artifactUpdate",
                    None => "none",
                }
            }
            assert_eq!(kind(payload_of(&node)), kind(payload(&tree)), "{doc}");
        }
        // The corpus is not all clean: the checks found something to say.
        let bad = crate::protocol::json::read_in_place(docs[1].as_bytes()).expect("a node");
        assert!(check_answer(Method::SendMessage, &bad, None).len() >= 6);
    }

    #[test]
    fn real_answers_pass_and_their_heads_read() {
        let t = sdk_task();
        assert_eq!(
            check_answer(
                Method::GetTask,
                &t,
                Some("6618f45f-94be-4aa3-82eb-66b82a55318c")
            ),
            []
        );
        let send = json!({"task": t});
        assert_eq!(check_answer(Method::SendMessage, &send, None), []);
        let h = task_of(&send).expect("head");
        assert_eq!(
            (h.id, h.context_id, h.state),
            (
                "6618f45f-94be-4aa3-82eb-66b82a55318c",
                "c0c8a1a4",
                TaskState::Completed
            )
        );
        assert_eq!(h.timestamp_ms, parse_lenient("2026-12-01T09:50:56.123Z"));
        let msg = json!({"message": {"messageId": "m2", "contextId": "c", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}});
        assert_eq!(check_answer(Method::SendMessage, &msg, None), []);
        assert_eq!(task_of(&msg), None);
        assert!(matches!(payload(&msg), Some(Payload::Message(_))));
        let ev = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}});
        assert_eq!(
            check_answer(Method::SendStreamingMessage, &ev, Some("t")),
            []
        );
        let h = task_of(&ev).expect("head");
        assert_eq!((h.state, h.timestamp_ms), (TaskState::Working, None));
        let art = json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": false, "lastChunk": true,
            "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}});
        assert_eq!(check_answer(Method::SubscribeToTask, &art, Some("t")), []);
        assert_eq!(
            check_answer(
                Method::ListTasks,
                &json!({"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}),
                None
            ),
            []
        );
        assert_eq!(
            check_answer(Method::DeleteTaskPushNotificationConfig, &json!({}), None),
            []
        );
        assert_eq!(
            check_answer(
                Method::CreateTaskPushNotificationConfig,
                &json!({"id": "c", "taskId": "t", "url": "https://x"}),
                Some("t")
            ),
            []
        );
        assert_eq!(
            check_answer(
                Method::ListTaskPushNotificationConfigs,
                &json!({"configs": [{"url": "https://x"}]}),
                None
            ),
            []
        );
    }

    #[test]
    fn broken_answers_name_what_is_wrong() {
        let mut t = sdk_task();
        t["status"]["state"] = json!("TASK_STATE_DONE");
        assert_eq!(
            paths(&check_answer(Method::GetTask, &t, None)),
            ["/status/state"]
        );
        t["status"]["state"] = json!("TASK_STATE_UNSPECIFIED");
        assert_eq!(
            paths(&check_answer(Method::GetTask, &t, None)),
            ["/status/state"]
        );
        t["status"]["state"] = json!("completed");
        assert_eq!(task_of(&t), None);
        let t =
            json!({"id": "a/b:c", "status": {"state": "TASK_STATE_WORKING", "timestamp": "noon"}});
        assert_eq!(
            paths(&check_answer(Method::GetTask, &t, None)),
            ["/contextId", "/status/timestamp"]
        );
        let t = json!({"id": "x".repeat(300), "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}});
        assert_eq!(paths(&check_answer(Method::GetTask, &t, None)), ["/id"]);
        // The answer is about another task.
        assert_eq!(
            paths(&check_answer(Method::GetTask, &sdk_task(), Some("other"))),
            ["/id"]
        );
        let ev = json!({"statusUpdate": {"taskId": "t2", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}});
        assert_eq!(
            paths(&check_answer(Method::SubscribeToTask, &ev, Some("t"))),
            ["/statusUpdate/taskId"]
        );
        // Oneofs.
        assert_eq!(
            paths(&check_answer(Method::SendMessage, &json!({}), None)),
            [""]
        );
        let both = json!({"task": sdk_task(), "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}});
        assert_eq!(paths(&check_answer(Method::SendMessage, &both, None)), [""]);
        assert_eq!(
            paths(&check_answer(
                Method::SendStreamingMessage,
                &json!({"kind": "task"}),
                None
            )),
            [""]
        );
        // A bare Task where a SendMessageResponse is due (0.3's shape).
        assert_eq!(
            paths(&check_answer(Method::SendMessage, &sdk_task(), None)),
            [""]
        );
        assert_eq!(
            paths(&check_answer(Method::GetTask, &json!([]), None)),
            [""]
        );
        assert_eq!(
            paths(&check_answer(
                Method::ListTasks,
                &json!({"nextPageToken": ""}),
                None
            )),
            ["/tasks"]
        );
        let ev = json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": {"artifactId": "a", "parts": []}}});
        assert_eq!(
            paths(&check_answer(Method::SubscribeToTask, &ev, None)),
            ["/artifactUpdate/artifact/parts"]
        );
    }
}
