//! Checks of what agents send: Task and Artifact shapes, ids, timestamps, FAILED's error object and
//! COMPLETED's output against the card's `output_schema`.
//!
//! Written by hand rather than as one JSON Schema because several rules depend on other fields
//! (the status decides whether `error` or `output` is required) and on the request (the task id
//! asked for, the agent the card names); every failure becomes a [`Violation`] with a JSON pointer.

use jsonschema::Validator;
use serde_json::{Map, Value};

use super::card::{is_uuid, violations, Card};
use crate::protocol::task::Status;
use crate::protocol::time::{parse_strict, MAX_SKEW_MS};
use crate::protocol::{Violation, MAX_VIOLATIONS};

/// What a Task response is checked against, beyond its own shape.
#[derive(Default, Clone, Copy)]
pub struct TaskExpect<'a> {
    /// The card's agent_id: a task must name the agent that produced it.
    pub agent_id: Option<&'a str>,
    /// The id asked for (GET /tasks/{id}, cancel): the agent must answer about that task.
    pub task_id: Option<&'a str>,
    /// The state the response must be in (SUBMITTED for a create).
    pub status: Option<Status>,
    /// The card's compiled output_schema, checked on COMPLETED.
    pub output: Option<&'a Validator>,
    /// The gateway's clock: an `updated_at` more than [`MAX_SKEW_MS`] ahead is refused.
    pub now_ms: Option<i64>,
}

impl<'a> TaskExpect<'a> {
    /// What any document about a task of the agent with `card` must satisfy at `now_ms`: the
    /// card's agent_id and output_schema (when there is a card), and `task_id` when one was asked.
    pub fn under(card: Option<&'a Card>, task_id: Option<&'a str>, now_ms: i64) -> Self {
        TaskExpect {
            agent_id: card.map(|c| c.agent_id.as_str()),
            task_id,
            status: None,
            output: card.and_then(|c| c.output.as_ref()),
            now_ms: Some(now_ms),
        }
    }
}

#[derive(Default)]
struct Report(Vec<Violation>);

impl Report {
    fn push(&mut self, path: impl Into<String>, rule: &str, message: impl Into<String>) {
        if self.0.len() < MAX_VIOLATIONS {
            self.0.push(Violation::new(path, rule, message));
        }
    }

    fn string<'v>(
        &mut self,
        obj: &'v Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Option<&'v str> {
        match obj.get(key) {
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.push(
                    format!("{base}/{key}"),
                    "type",
                    format!("`{key}` must be a string"),
                );
                None
            }
            None => {
                self.push(base.to_owned(), "required", format!("`{key}` is required"));
                None
            }
        }
    }

    fn uuid(&mut self, obj: &Map<String, Value>, base: &str, key: &str) -> Option<String> {
        let s = self.string(obj, base, key)?;
        if !is_uuid(s) {
            self.push(
                format!("{base}/{key}"),
                "format",
                format!("`{key}` must be a UUID, got {s:?}"),
            );
        }
        Some(s.to_owned())
    }

    fn timestamp(&mut self, obj: &Map<String, Value>, base: &str, key: &str) {
        if let Some(s) = self.string(obj, base, key) {
            if parse_strict(s).is_none() {
                self.push(
                    format!("{base}/{key}"),
                    "format",
                    format!("`{key}` must be ISO 8601 UTC with milliseconds (YYYY-MM-DDTHH:MM:SS.sssZ), got {s:?}"),
                );
            }
        }
    }
}

/// Check one Task document. Empty means conformant.
pub fn check_task(task: &Value, expect: TaskExpect<'_>) -> Vec<Violation> {
    let mut r = Report::default();
    check_task_at(&mut r, task, "", expect);
    r.0
}

fn check_task_at(r: &mut Report, task: &Value, base: &str, expect: TaskExpect<'_>) {
    let Some(obj) = task.as_object() else {
        r.push(base.to_owned(), "type", "a Task must be a JSON object");
        return;
    };
    if let Some(id) = r.uuid(obj, base, "task_id") {
        if let Some(want) = expect.task_id {
            if id != want {
                r.push(
                    format!("{base}/task_id"),
                    "const",
                    format!("asked for task {want}, the agent answered about {id}"),
                );
            }
        }
    }
    if let Some(id) = r.string(obj, base, "agent_id") {
        if let Some(want) = expect.agent_id {
            if id != want {
                r.push(
                    format!("{base}/agent_id"),
                    "const",
                    format!("task names agent {id:?}, the card says {want:?}"),
                );
            }
        }
    }
    let status = r.string(obj, base, "status").and_then(|s| {
        let st = Status::parse_clawpedia(s);
        if st.is_none() {
            r.push(
                format!("{base}/status"),
                "enum",
                format!("{s:?} is not an A2A 1.0 state"),
            );
        }
        st
    });
    if let (Some(st), Some(want)) = (status, expect.status) {
        if st != want {
            r.push(
                format!("{base}/status"),
                "const",
                format!("expected {}, got {}", want.as_str(), st.as_str()),
            );
        }
    }
    match obj.get("input") {
        Some(Value::Object(_)) => {}
        Some(_) => r.push(format!("{base}/input"), "type", "`input` must be an object"),
        None => r.push(base.to_owned(), "required", "`input` is required"),
    }
    match obj.get("output") {
        None | Some(Value::Null) | Some(Value::Object(_)) => {}
        Some(_) => r.push(
            format!("{base}/output"),
            "type",
            "`output` must be an object",
        ),
    }
    if let Some(p) = obj.get("prompt") {
        if !p.is_string() && !p.is_null() {
            r.push(
                format!("{base}/prompt"),
                "type",
                "`prompt` must be a string",
            );
        }
    }
    r.timestamp(obj, base, "created_at");
    r.timestamp(obj, base, "updated_at");
    if let Some(now) = expect.now_ms {
        let at = obj
            .get("updated_at")
            .and_then(Value::as_str)
            .and_then(parse_strict);
        if at.is_some_and(|at| at > now + MAX_SKEW_MS) {
            r.push(
                format!("{base}/updated_at"),
                "format",
                "`updated_at` is more than 5 minutes in the future",
            );
        }
    }
    match status {
        Some(Status::Failed) => match obj.get("error") {
            Some(Value::Object(e)) => {
                let at = format!("{base}/error");
                r.string(e, &at, "code");
                r.string(e, &at, "message");
            }
            _ => r.push(
                format!("{base}/error"),
                "required",
                "a FAILED task must carry error {code, message}",
            ),
        },
        Some(Status::Completed) => {
            if let Some(v) = expect.output {
                let output = obj.get("output").unwrap_or(&Value::Null);
                for viol in violations(v, output, &format!("{base}/output")) {
                    r.push(
                        viol.instance_path,
                        &format!("output_schema{}", viol.schema_path),
                        viol.message,
                    );
                }
            }
        }
        _ => {}
    }
}

/// Check a push notification `{"event_type": "task.status.updated", "timestamp", "data": Task}`.
pub fn check_notification(doc: &Value, expect: TaskExpect<'_>) -> Vec<Violation> {
    let mut r = Report::default();
    let Some(obj) = doc.as_object() else {
        r.push("", "type", "a notification must be a JSON object");
        return r.0;
    };
    match obj.get("event_type") {
        Some(Value::String(s)) if s == "task.status.updated" => {}
        Some(_) => r.push(
            "/event_type",
            "const",
            "`event_type` must be \"task.status.updated\"",
        ),
        None => r.push("", "required", "`event_type` is required"),
    }
    r.timestamp(obj, "", "timestamp");
    match obj.get("data") {
        Some(d) => check_task_at(&mut r, d, "/data", expect),
        None => r.push("", "required", "`data` (the Task) is required"),
    }
    r.0
}

/// Check a List Artifacts body `{"artifacts": [Artifact, ...]}` for the given task.
pub fn check_artifact_list(body: &Value, task_id: &str) -> Vec<Violation> {
    let mut r = Report::default();
    let Some(list) = body.get("artifacts").and_then(Value::as_array) else {
        r.push("", "required", "body must be {\"artifacts\": [...]}");
        return r.0;
    };
    for (i, a) in list.iter().enumerate() {
        check_artifact_at(&mut r, a, &format!("/artifacts/{i}"), task_id);
    }
    r.0
}

const ARTIFACT_TYPES: [&str; 5] = ["file", "log", "url", "text", "json"];

fn check_artifact_at(r: &mut Report, a: &Value, base: &str, task_id: &str) {
    let Some(obj) = a.as_object() else {
        r.push(base.to_owned(), "type", "an Artifact must be a JSON object");
        return;
    };
    r.uuid(obj, base, "artifact_id");
    if let Some(t) = r.string(obj, base, "task_id") {
        if t != task_id {
            r.push(
                format!("{base}/task_id"),
                "const",
                format!("artifact belongs to task {t}, listed under {task_id}"),
            );
        }
    }
    let kind = r.string(obj, base, "type");
    if let Some(k) = kind {
        if !ARTIFACT_TYPES.contains(&k) {
            r.push(
                format!("{base}/type"),
                "enum",
                format!("{k:?} is not an artifact type"),
            );
        }
    }
    r.string(obj, base, "content");
    let at = format!("{base}/metadata");
    match obj.get("metadata") {
        Some(Value::Object(m)) => {
            r.timestamp(m, &at, "created_at");
            for key in ["filename", "mime_type", "description"] {
                if m.get(key).is_some_and(|v| !v.is_string()) {
                    r.push(
                        format!("{at}/{key}"),
                        "type",
                        format!("`{key}` must be a string"),
                    );
                }
            }
            if kind == Some("file") {
                r.string(m, &at, "filename");
                r.string(m, &at, "mime_type");
            }
        }
        _ => r.push(at, "required", "`metadata` object is required"),
    }
}

/// The artifact ids of a List Artifacts body (for the ledger's artifact → agent index).
pub fn artifact_ids(body: &Value) -> impl Iterator<Item = &str> {
    body.get("artifacts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("artifact_id").and_then(Value::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::clawpedia::card::compile_schema;
    use serde_json::json;

    const TID: &str = "123e4567-e89b-12d3-a456-426614174000";
    const AID: &str = "f47ac10b-58cc-4372-a567-0e02b2c3d479";

    fn task(status: &str) -> Value {
        json!({
            "task_id": TID, "agent_id": AID, "status": status,
            "input": {"topic": "x"}, "created_at": "2023-10-27T10:02:00.000Z",
            "updated_at": "2023-10-27T10:05:00.000Z"
        })
    }

    #[test]
    fn a_conformant_task_passes() {
        let e = TaskExpect {
            agent_id: Some(AID),
            task_id: Some(TID),
            status: Some(Status::Working),
            output: None,
            now_ms: None,
        };
        assert_eq!(check_task(&task("WORKING"), e), vec![]);
        // The spec's own example: COMPLETED with output null, no output_schema.
        let mut t = task("COMPLETED");
        t["output"] = Value::Null;
        assert_eq!(check_task(&t, TaskExpect::default()), vec![]);
    }

    #[test]
    fn every_rule_is_checked() {
        let bad = json!({"task_id": "42", "agent_id": "other", "status": "DONE", "input": [], "output": 3,
                         "created_at": "2023-10-27T10:02:00Z", "updated_at": 7});
        let v = check_task(
            &bad,
            TaskExpect {
                agent_id: Some(AID),
                ..Default::default()
            },
        );
        let paths: Vec<&str> = v.iter().map(|v| v.instance_path.as_str()).collect();
        for p in [
            "/task_id",
            "/agent_id",
            "/status",
            "/input",
            "/output",
            "/created_at",
            "/updated_at",
        ] {
            assert!(paths.contains(&p), "{p} missing from {paths:?}");
        }
    }

    #[test]
    fn failed_needs_error_and_completed_needs_valid_output() {
        let v = check_task(&task("FAILED"), TaskExpect::default());
        assert_eq!(v[0].instance_path, "/error");
        let mut f = task("FAILED");
        f["error"] = json!({"code": "E"});
        assert_eq!(
            check_task(&f, TaskExpect::default())[0].message,
            "`message` is required"
        );

        let schema =
            compile_schema(&json!({"type":"object","required":["script"]})).expect("schema");
        let e = TaskExpect {
            output: Some(&schema),
            ..Default::default()
        };
        let mut c = task("COMPLETED");
        c["output"] = json!({"other": 1});
        let v = check_task(&c, e);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].schema_path.starts_with("output_schema"));
        c["output"] = json!({"script": "print()"});
        assert!(check_task(&c, e).is_empty());
    }

    #[test]
    fn updated_at_far_in_the_future_is_caught() {
        let now = parse_strict("2023-10-27T10:00:00.000Z").expect("ts");
        let e = TaskExpect {
            now_ms: Some(now),
            ..Default::default()
        };
        // task() is updated at 10:05: exactly at the 5 minute bound, accepted.
        assert!(check_task(&task("WORKING"), e).is_empty());
        let e = TaskExpect {
            now_ms: Some(now - 1),
            ..Default::default()
        };
        assert_eq!(
            check_task(&task("WORKING"), e)[0].instance_path,
            "/updated_at"
        );
    }

    #[test]
    fn wrong_task_and_status_are_caught() {
        let e = TaskExpect {
            task_id: Some("00000000-0000-0000-0000-000000000000"),
            status: Some(Status::Submitted),
            ..Default::default()
        };
        let v = check_task(&task("WORKING"), e);
        assert_eq!(v.len(), 2, "{v:?}");
    }

    #[test]
    fn notifications_are_checked() {
        let ok = json!({"event_type": "task.status.updated", "timestamp": "2023-10-27T10:05:00.000Z", "data": task("WORKING")});
        assert_eq!(check_notification(&ok, TaskExpect::default()), vec![]);
        let bad =
            json!({"event_type": "task.created", "timestamp": "now", "data": {"task_id": TID}});
        let v = check_notification(&bad, TaskExpect::default());
        let paths: Vec<&str> = v.iter().map(|v| v.instance_path.as_str()).collect();
        assert!(
            paths.contains(&"/event_type")
                && paths.contains(&"/timestamp")
                && paths.contains(&"/data"),
            "{paths:?}"
        );
        assert!(!check_notification(
            &json!({"event_type": "task.status.updated"}),
            TaskExpect::default()
        )
        .is_empty());
    }

    #[test]
    fn artifacts_are_checked() {
        let ok = json!({"artifacts": [
            {"artifact_id": AID, "task_id": TID, "type": "file", "content": "https://x/y",
             "metadata": {"created_at": "2023-10-27T10:02:00.000Z", "filename": "a.py", "mime_type": "text/x-python"}},
            {"artifact_id": AID, "task_id": TID, "type": "log", "content": "hi",
             "metadata": {"created_at": "2023-10-27T10:02:00.000Z"}}
        ]});
        assert_eq!(check_artifact_list(&ok, TID), vec![]);
        assert_eq!(artifact_ids(&ok).count(), 2);
        let bad = json!({"artifacts": [
            {"artifact_id": AID, "task_id": "other", "type": "file", "content": "u", "metadata": {"created_at": "x"}},
            {"artifact_id": AID, "task_id": TID, "type": "blob", "content": "u"}
        ]});
        let v = check_artifact_list(&bad, TID);
        let paths: Vec<&str> = v.iter().map(|v| v.instance_path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/artifacts/0/task_id",
                "/artifacts/0/metadata/created_at",
                "/artifacts/0/metadata",
                "/artifacts/0/metadata",
                "/artifacts/1/type",
                "/artifacts/1/metadata"
            ]
        );
        assert!(!check_artifact_list(&json!([]), TID).is_empty());
    }
}
