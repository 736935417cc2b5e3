//! A2A task streams as data (§3.1.2, §3.1.6, §3.5, §9.4): what one StreamResponse does to the
//! Task it is about ([`fold`]), and how the gateway stores an event.
//!
//! The gateway writes an event once, as the bare StreamResponse in an SSE event
//! (`data: {json}\n\n`, [`event_frame`]), and each subscriber's wire form derives its own
//! framing from it (`http::a2a::wire`): the shared part is never copied into a second stored
//! form. Pings are SSE comments (`: ping`): both SDKs parse the data of every event as a
//! response, and skip comments. The gateway's own endings are `event: error`
//! ([`error_event`]), whose data is the error in the subscriber's form.

use serde_json::{Map, Value};

use super::answer::Payload;

/// An SSE comment keeping a quiet stream open; no SDK reads it as an event.
pub const PING: &[u8] = b": ping\n\n";

/// What one StreamResponse did to the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Folded {
    /// A whole Task: it replaced what was known.
    Task,
    /// A status update: the task's state moved (or was said again).
    Status,
    /// An artifact update: added, replaced or extended an artifact.
    Artifact,
    /// A message: appended to the history.
    Message,
}

impl Folded {
    /// Whether the task's state may have changed.
    pub fn moves_state(self) -> bool {
        matches!(self, Folded::Task | Folded::Status)
    }

    /// Whether the ledger is given the task after it: a state, or an artifact (what a push
    /// config's receiver reads, `answer::content_of`). A message joins only the history.
    pub fn records(self) -> bool {
        !matches!(self, Folded::Message)
    }
}

/// What changed from task `old` to task `new` (a whole Task an agent sent again mid-stream,
/// such as the first event of a resubscription), as the StreamResponses a subscriber reads
/// (§3.1.2: after the first Task, status and artifact updates): an `artifactUpdate` for each
/// artifact that is new or different, then a `statusUpdate` if the status's state or message
/// differs (a status only stamped again is no news). Nothing for a Task that says nothing new;
/// an artifact gone from `new` has no update to say so.
pub fn changes(old: &Value, new: &Value) -> Vec<Value> {
    let ids = |k: &str| new.get(k).cloned().unwrap_or(Value::Null);
    let (task_id, context_id) = (ids("id"), ids("contextId"));
    let mut out = Vec::new();
    let before = old.get("artifacts").and_then(Value::as_array);
    for a in new
        .get("artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = a.get("artifactId");
        let same = before
            .into_iter()
            .flatten()
            .any(|b| b.get("artifactId") == id && b == a);
        if !same {
            let mut e = Map::new();
            e.insert("taskId".into(), task_id.clone());
            e.insert("contextId".into(), context_id.clone());
            e.insert("artifact".into(), a.clone());
            let mut w = Map::new();
            w.insert("artifactUpdate".into(), Value::Object(e));
            out.push(Value::Object(w));
        }
    }
    let said = |t: &Value| {
        let s = t.get("status");
        (
            s.and_then(|s| s.get("state")).cloned(),
            s.and_then(|s| s.get("message")).cloned(),
        )
    };
    if let Some(status) = new.get("status").filter(|_| said(old) != said(new)) {
        let mut e = Map::new();
        e.insert("taskId".into(), task_id);
        e.insert("contextId".into(), context_id);
        e.insert("status".into(), status.clone());
        let mut w = Map::new();
        w.insert("statusUpdate".into(), Value::Object(e));
        out.push(Value::Object(w));
    }
    out
}

/// Apply one (checked) StreamResponse payload to `task`, as a2a-sdk's task manager does: a Task
/// replaces it; a status update takes its place as the status, the message of the status it
/// replaces going to the history; an artifact update replaces the artifact of its
/// `artifactId`, or with `append` extends its parts (an artifact not known yet is added;
/// `lastChunk` changes nothing kept); a message joins the history. Parts appended to an
/// artifact the ledger cut are not added after the gap, only counted as lost
/// ([`super::kept::absorb`]).
pub fn fold(task: &mut Value, event: Payload<'_>) -> Folded {
    let Some(t) = task.as_object_mut() else {
        if let Payload::Task(v) = event {
            *task = v.clone();
        }
        return Folded::Task;
    };
    match event {
        Payload::Task(v) => {
            *task = v.clone();
            Folded::Task
        }
        Payload::StatusUpdate(e) => {
            if let Some(status) = e.get("status") {
                let old = t.insert("status".to_owned(), status.clone());
                if let Some(msg) = old.as_ref().and_then(|s| s.get("message")).cloned() {
                    history(t).push(msg);
                }
            }
            Folded::Status
        }
        Payload::ArtifactUpdate(e) => {
            if let Some(artifact) = e.get("artifact") {
                let append = e.get("append").and_then(Value::as_bool) == Some(true);
                add_artifact(t, artifact, append);
            }
            Folded::Artifact
        }
        Payload::Message(m) => {
            history(t).push(m.clone());
            Folded::Message
        }
    }
}

fn history(t: &mut Map<String, Value>) -> &mut Vec<Value> {
    let h = t
        .entry("history")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !h.is_array() {
        *h = Value::Array(Vec::new());
    }
    match h {
        Value::Array(a) => a,
        _ => unreachable!("made an array above"),
    }
}

fn add_artifact(t: &mut Map<String, Value>, artifact: &Value, append: bool) {
    let id = artifact.get("artifactId").and_then(Value::as_str);
    let list = t
        .entry("artifacts")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let Value::Array(list) = list else { return };
    let known = id.and_then(|id| {
        list.iter()
            .position(|a| a.get("artifactId").and_then(Value::as_str) == Some(id))
    });
    match known {
        Some(i) if append && super::kept::absorb(&mut list[i], artifact.get("parts")) => {}
        Some(i) if append => {
            let more = artifact
                .get("parts")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if let Some(Value::Array(parts)) = list[i].get_mut("parts") {
                parts.extend(more);
            } else if let Some(o) = list[i].as_object_mut() {
                o.insert("parts".to_owned(), Value::Array(more));
            }
        }
        Some(i) => list[i] = artifact.clone(),
        None => list.push(artifact.clone()),
    }
}

/// One StreamResponse as an SSE event, as the gateway stores it (and as an HTTP+JSON
/// subscriber reads it): `data: {json}`. `json` is one line (serde_json writes no raw newline).
pub fn event_frame(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    out
}

/// The JSON of a stored [`event_frame`], if it is one.
pub fn frame_json(frame: &[u8]) -> Option<&[u8]> {
    frame.strip_prefix(b"data: ")?.strip_suffix(b"\n\n")
}

/// The StreamResponse `{"task": …}` around a Task's JSON, as a stored frame: the first event
/// of a subscription (§3.1.6: the task as it is now).
pub fn task_frame(task: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(task.len() + 18);
    out.extend_from_slice(br#"data: {"task":"#);
    out.extend_from_slice(task);
    out.extend_from_slice(b"}\n\n");
    out
}

/// The last event of a stream the gateway ends itself: `event: error`, its data the error as
/// the subscriber's form writes one (`data`, one line).
pub fn error_event(data: &[u8]) -> bytes::Bytes {
    let mut out = Vec::with_capacity(data.len() + 20);
    out.extend_from_slice(b"event: error\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    bytes::Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::a2a::answer::payload;
    use serde_json::json;

    fn folded(mut task: Value, events: &[Value]) -> Value {
        for e in events {
            fold(&mut task, payload(e).expect("a payload"));
        }
        task
    }

    #[test]
    fn a_task_sent_again_is_told_as_the_updates_it_brings() {
        let old = json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING", "timestamp": "2026-01-01T00:00:01Z"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "1"}]}]});
        // The same Task again: nothing to tell; nor when only its status time moved.
        assert!(changes(&old, &old).is_empty());
        let mut restamped = old.clone();
        restamped["status"]["timestamp"] = json!("2026-01-01T00:00:09Z");
        assert!(changes(&old, &restamped).is_empty());
        let mut said = old.clone();
        said["status"]["message"] =
            json!({"messageId": "s", "role": "ROLE_AGENT", "parts": [{"text": "tick"}]});
        assert_eq!(changes(&old, &said).len(), 1);
        // A new status, one artifact changed and one new: the artifacts, then the status.
        let new = json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:02Z"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "1"}, {"text": "2"}]},
                          {"artifactId": "b", "parts": [{"text": "x"}]}],
            "history": [{"messageId": "m"}]});
        let told = changes(&old, &new);
        assert_eq!(
            told,
            vec![
                json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": new["artifacts"][0]}}),
                json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": new["artifacts"][1]}}),
                json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": new["status"]}}),
            ]
        );
        // Folding what was told into the old task gives the new one's status and artifacts.
        let folded = folded(old, &told);
        assert_eq!(folded["status"], new["status"]);
        assert_eq!(folded["artifacts"], new["artifacts"]);
        // No Task among them (§3.1.2).
        assert!(told.iter().all(|e| e.get("task").is_none()));
    }

    #[test]
    fn events_fold_into_the_task_as_the_sdk_keeps_it() {
        let t0 = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED",
            "message": {"messageId": "s", "role": "ROLE_AGENT", "parts": [{"text": "queued"}]}}});
        let t = folded(
            t0,
            &[
                json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                    "status": {"state": "TASK_STATE_WORKING"}}}),
                json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
                    "artifact": {"artifactId": "a", "parts": [{"text": "Hel"}]}}}),
                json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": true,
                    "artifact": {"artifactId": "a", "parts": [{"text": "lo"}]}}}),
                json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
                    "artifact": {"artifactId": "b", "parts": [{"text": "x"}]}}}),
                json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
                    "artifact": {"artifactId": "b", "parts": [{"text": "y"}]}}}),
                json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                    "status": {"state": "TASK_STATE_COMPLETED"}}}),
            ],
        );
        assert_eq!(t["status"], json!({"state": "TASK_STATE_COMPLETED"}));
        // The replaced status's message went to the history.
        assert_eq!(t["history"][0]["messageId"], "s");
        assert_eq!(
            t["artifacts"],
            json!([{"artifactId": "a", "parts": [{"text": "Hel"}, {"text": "lo"}]},
                {"artifactId": "b", "parts": [{"text": "y"}]}])
        );
        let whole = json!({"task": {"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_CANCELED"}}});
        let mut again = t.clone();
        assert_eq!(
            fold(&mut again, payload(&whole).expect("task")),
            Folded::Task
        );
        assert_eq!(again, whole["task"]);
        let msg = json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": []}});
        let with_msg = folded(t, &[msg]);
        assert_eq!(with_msg["history"][1]["messageId"], "m");
    }

    #[test]
    fn the_stored_frames_and_an_ending() {
        let stored = event_frame(br#"{"statusUpdate":{"taskId":"t"}}"#);
        assert_eq!(stored, b"data: {\"statusUpdate\":{\"taskId\":\"t\"}}\n\n");
        assert_eq!(
            frame_json(&stored),
            Some(&br#"{"statusUpdate":{"taskId":"t"}}"#[..])
        );
        assert_eq!(frame_json(PING), None);
        assert_eq!(
            task_frame(br#"{"id":"t"}"#),
            event_frame(br#"{"task":{"id":"t"}}"#)
        );
        assert_eq!(&error_event(b"{}")[..], b"event: error\ndata: {}\n\n");
    }
}
