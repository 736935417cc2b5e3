//! The official agent's streams (`SendStreamingMessage`, `SubscribeToTask`), over both bindings
//! and both versions: a message's task as a stream of events (the Task first, at SUBMITTED; then
//! WORKING, its artifacts, and the state it reached), and a subscription's (the Task as it is,
//! then each change until it is final or waits for input). A live task (`slow`) is watched every
//! [`WATCH`] until it changes, at most [`LONGEST`]. Events are framed by the caller's binding and
//! version (`Frame`), and go out as SSE without pings (an A2A client reads every `data` line as
//! an event).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::Response;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::a2a::{self, Failure};
use super::body::{EventBody, OutBody};
use super::shared::{lock, Shared};

/// How often a live task is looked at.
const WATCH: Duration = Duration::from_millis(100);
/// How long a stream of a live task lasts at most.
const LONGEST: Duration = Duration::from_secs(600);

/// How one event is written for the caller: a StreamResponse in, an SSE frame out.
pub(crate) type Frame = Box<dyn Fn(&Value) -> Bytes + Send + Sync>;

/// The events of `method` (SendStreamingMessage or SubscribeToTask) with `params`, as an SSE
/// response framed by `frame`; the call's error when it fails before a stream.
pub(crate) fn open(
    shared: &Arc<Shared>,
    method: &str,
    params: &Map<String, Value>,
    frame: Frame,
) -> Result<Response<OutBody>, Failure> {
    let (first, live) = if method == "SendStreamingMessage" {
        match a2a::send(shared, params)? {
            v if v.get("message").is_some() => (vec![v], None),
            v => {
                let task = v["task"].clone();
                (staged(&task), a2a::is_live(&task).then_some(task))
            }
        }
    } else {
        let task = a2a::get(shared, params)?;
        let live = a2a::is_live(&task).then(|| task.clone());
        (vec![json!({ "task": task })], live)
    };
    let (tx, rx) = mpsc::channel(16);
    let shared = shared.clone();
    tokio::spawn(async move {
        for e in &first {
            if tx.send(frame(e)).await.is_err() {
                return;
            }
        }
        if let Some(task) = live {
            watch(&shared, task, &tx, &frame).await;
        }
    });
    let mut res = Response::new(OutBody::Events(EventBody::new(rx, Duration::ZERO)));
    let h = res.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(res)
}

/// A message's task as events: the Task at SUBMITTED, then (unless it was refused outright)
/// WORKING, each artifact, and its status now.
fn staged(task: &Value) -> Vec<Value> {
    let (id, context) = (&task["id"], &task["contextId"]);
    let mut submitted = task.clone();
    if let Some(o) = submitted.as_object_mut() {
        o.remove("artifacts");
        o.insert(
            "status".to_owned(),
            json!({"state": "TASK_STATE_SUBMITTED", "timestamp": task["status"]["timestamp"]}),
        );
    }
    let update = |status: &Value| json!({"statusUpdate": {"taskId": id, "contextId": context, "status": status}});
    let mut out = vec![json!({ "task": submitted })];
    let state = task["status"]["state"].as_str().unwrap_or("");
    if state != "TASK_STATE_REJECTED" {
        out.push(update(
            &json!({"state": "TASK_STATE_WORKING", "timestamp": task["status"]["timestamp"]}),
        ));
    }
    for a in task["artifacts"].as_array().into_iter().flatten() {
        out.push(json!({"artifactUpdate": {"taskId": id, "contextId": context, "artifact": a}}));
    }
    if state != "TASK_STATE_WORKING" {
        out.push(update(&task["status"]));
    }
    out
}

/// Each change of a live task, until it is final or waits for input (or the stream is gone).
async fn watch(shared: &Shared, mut task: Value, tx: &mpsc::Sender<Bytes>, frame: &Frame) {
    let id = task["id"].as_str().unwrap_or("").to_owned();
    let until = tokio::time::Instant::now() + LONGEST;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(WATCH).await;
        let Some(now) = lock(&shared.a2a).map.get(&id).cloned() else {
            return;
        };
        if now["status"] == task["status"] {
            continue;
        }
        let (context, had) = (
            &now["contextId"],
            task["artifacts"].as_array().map_or(0, Vec::len),
        );
        for a in now["artifacts"].as_array().into_iter().flatten().skip(had) {
            let e = json!({"artifactUpdate": {"taskId": id, "contextId": context, "artifact": a}});
            if tx.send(frame(&e)).await.is_err() {
                return;
            }
        }
        let e =
            json!({"statusUpdate": {"taskId": id, "contextId": context, "status": now["status"]}});
        if tx.send(frame(&e)).await.is_err() || !a2a::is_live(&now) {
            return;
        }
        task = now;
    }
}
