//! A Clawpedia Task document as the ledger reads it: `task_id`, `status` (the ledger's own
//! spelling of the six states) and `updated_at`.

use serde_json::Value;

use crate::protocol::task::{Head, Status, TaskRef};
use crate::protocol::time::parse_lenient;

/// The ledger's view of a Task document that has already passed (or, in report mode, been
/// reported by) the conformance check. `None` when it lacks a readable `task_id`, `status` or
/// `updated_at`: such a document cannot be recorded, whatever the conformance mode.
pub fn task_ref(task: &Value) -> Option<TaskRef> {
    let task_id = task.get("task_id")?.as_str()?;
    let status = Status::parse_clawpedia(task.get("status")?.as_str()?)?;
    let updated_ms = parse_lenient(task.get("updated_at")?.as_str()?)?;
    Some(TaskRef {
        task_id: task_id.to_owned(),
        head: Head { status, updated_ms },
        context: None,
        content: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ref_reads_head() {
        let t = serde_json::json!({"task_id":"x","status":"WORKING","updated_at":"1970-01-01T00:00:00.007Z"});
        let r = task_ref(&t).expect("readable");
        assert_eq!(r.task_id, "x");
        assert_eq!(
            r.head,
            Head {
                status: Status::Working,
                updated_ms: 7
            }
        );
        assert!(task_ref(&serde_json::json!({"task_id":"x","status":"DONE","updated_at":"1970-01-01T00:00:00.007Z"})).is_none());
    }
}
