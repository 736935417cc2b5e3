//! The official A2A 1.0 protocol (a2aproject), which the agent speaks with
//! `AgentOptions::protocol = Protocol::A2a`: its card at `/.well-known/agent-card.json` names
//! two interfaces, the JSON-RPC binding at `/a2a/jsonrpc` and the HTTP+JSON binding under
//! `/a2a/rest`, with the same tasks behind both.
//!
//! What a message does, by its text, as tests/a2a/agent.py (an agent on a2a-sdk's own server
//! classes) does, so the official SDKs' clients see the same from both:
//! - `hello`: COMPLETED with an artifact `Hello, world!`; `hello slowly`: WORKING, the same
//!   after 1.5 s (to subscribe to);
//! - `need input`: INPUT_REQUIRED, asking `what else?`; the next message on the task completes
//!   it with an artifact `got: {text}` (multi-turn);
//! - `slow`: WORKING until canceled (with `progress`, completed after the demo's delays);
//! - `fail`: FAILED (`it failed`); `reject`: REJECTED;
//! - `message`: a Message (`you said: message`), no task;
//! - anything else: COMPLETED with an artifact `echo: {text}`.
//!
//! CancelTask cancels a live task (TaskNotCancelableError for a final one), GetTask reads one
//! (`historyLength` applied), ListTasks lists the agent's own tasks newest first (one page: a
//! gateway serves ListTasks from its ledger). SendStreamingMessage and SubscribeToTask stream
//! (`a2a_stream`); push configs are kept per task and each change of the task is pushed to
//! them. The two bindings, in 1.0 or (with `Protocol::A2aV0_3`) in 0.3 (`v0_3`), are
//! `a2a_bindings`; this file is the calls behind them. Tasks are bounded by `max_tasks`, the
//! oldest evicted first.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::shared::{lock, Shared};

/// An A2A error: the JSON-RPC code, the HTTP status, the google.rpc code name and reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Parse,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    TaskNotFound,
    TaskNotCancelable,
    Unsupported,
}

impl Kind {
    pub(crate) fn row(self) -> (i64, u16, &'static str, &'static str) {
        match self {
            Kind::Parse => (-32700, 400, "INVALID_ARGUMENT", "PARSE_ERROR"),
            Kind::InvalidRequest => (-32600, 400, "INVALID_ARGUMENT", "INVALID_REQUEST"),
            Kind::MethodNotFound => (-32601, 404, "NOT_FOUND", "METHOD_NOT_FOUND"),
            Kind::InvalidParams => (-32602, 400, "INVALID_ARGUMENT", "INVALID_PARAMS"),
            Kind::TaskNotFound => (-32001, 404, "NOT_FOUND", "TASK_NOT_FOUND"),
            Kind::TaskNotCancelable => (-32002, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE"),
            Kind::Unsupported => (-32004, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION"),
        }
    }
}

pub(crate) struct Failure(pub(crate) Kind, pub(crate) String);

/// How long `hello slowly` works before it completes.
const HELLO_SLOWLY: std::time::Duration = std::time::Duration::from_millis(1500);

pub(crate) type Answer = Result<Value, Failure>;

pub(crate) fn fail(kind: Kind, message: impl Into<String>) -> Failure {
    Failure(kind, message.into())
}

pub(crate) fn error_info(reason: &str) -> Value {
    json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org"})
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn agent_message(text: &str, task_id: &str, context_id: &str) -> Value {
    json!({"messageId": id(), "role": "ROLE_AGENT", "parts": [{"text": text}],
        "taskId": task_id, "contextId": context_id})
}

fn state_of(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("")
}

/// Whether a task goes on by itself (WORKING, or SUBMITTED): a stream of it watches it.
pub(crate) fn is_live(task: &Value) -> bool {
    matches!(
        state_of(task),
        "TASK_STATE_WORKING" | "TASK_STATE_SUBMITTED"
    )
}

/// Whether a stream ends at this state (§11.7: a final or interrupted one).
pub(crate) fn ends_stream(state: &str) -> bool {
    is_final(state)
        || matches!(
            state,
            "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED"
        )
}

fn is_final(state: &str) -> bool {
    matches!(
        state,
        "TASK_STATE_COMPLETED"
            | "TASK_STATE_FAILED"
            | "TASK_STATE_CANCELED"
            | "TASK_STATE_REJECTED"
    )
}

fn set_status(task: &mut Value, state: &str, message: Option<Value>) {
    let mut status = json!({"state": state, "timestamp": now()});
    if let Some(m) = message {
        status["message"] = m;
    }
    task["status"] = status;
}

fn history_push(task: &mut Value, message: Value) {
    if let Some(h) = task["history"].as_array_mut() {
        h.push(message);
    } else {
        task["history"] = json!([message]);
    }
}

fn complete(task: &mut Value, artifact: Option<(&str, String)>) {
    if let Some((name, text)) = artifact {
        task["artifacts"] = json!([{"artifactId": id(), "name": name, "parts": [{"text": text}]}]);
    }
    set_status(task, "TASK_STATE_COMPLETED", None);
}

/// What `text` does to `task` (a new one, or a live one it continues).
fn act(task: &mut Value, text: &str) {
    let (tid, ctx) = (
        task["id"].as_str().unwrap_or("").to_owned(),
        task["contextId"].as_str().unwrap_or("").to_owned(),
    );
    if state_of(task) == "TASK_STATE_INPUT_REQUIRED" {
        return complete(task, Some(("answer", format!("got: {text}"))));
    }
    match text {
        "hello" => complete(task, Some(("greeting", "Hello, world!".into()))),
        // Completed by `send` after HELLO_SLOWLY, as tests/a2a/agent.py's (to subscribe to).
        "hello slowly" => set_status(task, "TASK_STATE_WORKING", None),
        "need input" => {
            let ask = agent_message("what else?", &tid, &ctx);
            history_push(task, ask.clone());
            set_status(task, "TASK_STATE_INPUT_REQUIRED", Some(ask));
        }
        "fail" => {
            let why = agent_message("it failed", &tid, &ctx);
            history_push(task, why.clone());
            set_status(task, "TASK_STATE_FAILED", Some(why));
        }
        "reject" => set_status(task, "TASK_STATE_REJECTED", None),
        "slow" => set_status(task, "TASK_STATE_WORKING", None),
        other => complete(task, Some(("echo", format!("echo: {other}")))),
    }
}

/// SendMessage's inline push config (`configuration.taskPushNotificationConfig`), kept for the
/// task it made or continued.
fn keep_inline(shared: &Shared, params: &Map<String, Value>, task: &Value) -> Result<(), Failure> {
    let Some(Value::Object(c)) = params
        .get("configuration")
        .and_then(|c| c.get("taskPushNotificationConfig"))
    else {
        return Ok(());
    };
    let id = task["id"].as_str().unwrap_or("");
    keep_config(shared, config_of(id, c)?).map(|_| ())
}

/// SendMessage: a new task, the next turn of one, or (`message`) a Message.
pub(crate) fn send(shared: &Arc<Shared>, params: &Map<String, Value>) -> Answer {
    let Some(msg) = params.get("message").and_then(Value::as_object) else {
        return Err(fail(Kind::InvalidParams, "params.message is required"));
    };
    if msg
        .get("messageId")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(fail(Kind::InvalidParams, "message.messageId is required"));
    }
    let text = msg
        .get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let text = text.trim();
    let asked_context = msg
        .get("contextId")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty());
    let mut user = Value::Object(msg.clone());
    if let Some(task_id) = msg
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        let mut tasks = lock(&shared.a2a);
        let Some(task) = tasks.map.get_mut(task_id) else {
            return Err(fail(Kind::TaskNotFound, format!("no task {task_id:?}")));
        };
        if is_final(state_of(task)) {
            return Err(fail(
                Kind::InvalidParams,
                format!("task {task_id} is in a final state: it takes no more messages"),
            ));
        }
        if asked_context.is_some_and(|c| Some(c) != task["contextId"].as_str()) {
            return Err(fail(
                Kind::InvalidParams,
                "the message's contextId is not the task's",
            ));
        }
        user["contextId"] = task["contextId"].clone();
        history_push(task, user);
        act(task, text);
        let task = task.clone();
        drop(tasks);
        keep_inline(shared, params, &task)?;
        shared.push_a2a(&task);
        return Ok(json!({ "task": task }));
    }
    let context = asked_context.map_or_else(id, str::to_owned);
    if text == "message" {
        let mut m = agent_message("you said: message", "", &context);
        if let Some(o) = m.as_object_mut() {
            o.remove("taskId");
        }
        return Ok(json!({ "message": m }));
    }
    let task_id = id();
    user["taskId"] = json!(task_id);
    user["contextId"] = json!(context);
    let mut task = json!({"id": task_id, "contextId": context, "history": [user],
        "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": now()}});
    act(&mut task, text);
    let slow = state_of(&task) == "TASK_STATE_WORKING";
    lock(&shared.a2a).insert(task_id.clone(), task.clone());
    keep_inline(shared, params, &task)?;
    shared.push_a2a(&task);
    if text == "hello slowly" {
        let shared = shared.clone();
        let task_id = task_id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(HELLO_SLOWLY).await;
            let done = lock(&shared.a2a).map.get_mut(&task_id).and_then(|t| {
                (state_of(t) == "TASK_STATE_WORKING").then(|| {
                    complete(t, Some(("greeting", "Hello, world!".into())));
                    t.clone()
                })
            });
            if let Some(t) = done {
                shared.push_a2a(&t);
            }
        });
        return Ok(json!({ "task": task }));
    }
    if let (true, Some(p)) = (slow, shared.progress) {
        let shared = shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep(p.to_working + p.to_completed).await;
            let done = lock(&shared.a2a).map.get_mut(&task_id).and_then(|t| {
                (state_of(t) == "TASK_STATE_WORKING").then(|| {
                    complete(t, Some(("echo", "slow, and done".into())));
                    t.clone()
                })
            });
            if let Some(t) = done {
                shared.push_a2a(&t);
            }
        });
    }
    Ok(json!({ "task": task }))
}

fn task_id(params: &Map<String, Value>) -> Result<&str, Failure> {
    params
        .get("id")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| fail(Kind::InvalidParams, "params.id is required"))
}

fn with_history(mut task: Value, n: Option<u64>) -> Value {
    if let (Some(n), Some(h)) = (n, task["history"].as_array_mut()) {
        let keep = usize::try_from(n).unwrap_or(usize::MAX);
        let drop = h.len().saturating_sub(keep);
        h.drain(..drop);
    }
    task
}

pub(crate) fn get(shared: &Shared, params: &Map<String, Value>) -> Answer {
    let id = task_id(params)?;
    let task = lock(&shared.a2a).map.get(id).cloned();
    let task = task.ok_or_else(|| fail(Kind::TaskNotFound, format!("no task {id:?}")))?;
    Ok(with_history(
        task,
        params.get("historyLength").and_then(Value::as_u64),
    ))
}

pub(crate) fn cancel(shared: &Shared, params: &Map<String, Value>) -> Answer {
    let id = task_id(params)?;
    let mut tasks = lock(&shared.a2a);
    let task = tasks
        .map
        .get_mut(id)
        .ok_or_else(|| fail(Kind::TaskNotFound, format!("no task {id:?}")))?;
    if is_final(state_of(task)) {
        return Err(fail(Kind::TaskNotCancelable, "the task is final"));
    }
    set_status(task, "TASK_STATE_CANCELED", None);
    let task = task.clone();
    drop(tasks);
    shared.push_a2a(&task);
    Ok(task)
}

pub(crate) fn list(shared: &Shared, params: &Map<String, Value>) -> Answer {
    let context = params.get("contextId").and_then(Value::as_str);
    let status = params
        .get("status")
        .and_then(Value::as_str)
        .filter(|s| *s != "TASK_STATE_UNSPECIFIED");
    let size = params
        .get("pageSize")
        .and_then(Value::as_u64)
        .unwrap_or(50)
        .clamp(1, 100) as usize;
    let mut tasks: Vec<Value> = lock(&shared.a2a)
        .map
        .values()
        .filter(|t| context.is_none_or(|c| t["contextId"] == c))
        .filter(|t| status.is_none_or(|s| state_of(t) == s))
        .cloned()
        .collect();
    let total = tasks.len();
    tasks.sort_by(|a, b| {
        let at = |t: &Value| t["status"]["timestamp"].as_str().unwrap_or("").to_owned();
        at(b).cmp(&at(a))
    });
    tasks.truncate(size);
    Ok(json!({"tasks": tasks, "nextPageToken": "", "pageSize": size, "totalSize": total}))
}

/// A push config as kept: `{id, taskId, url, token?}` (1.0's TaskPushNotificationConfig), its
/// id the task's when none is given, as the SDK servers name it.
fn config_of(task_id: &str, c: &Map<String, Value>) -> Result<Value, Failure> {
    let url = c
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .ok_or_else(|| fail(Kind::InvalidParams, "a push config's url is an http(s) URL"))?;
    let id = c
        .get("id")
        .and_then(Value::as_str)
        .filter(|i| !i.is_empty())
        .unwrap_or(task_id);
    let mut out = json!({"id": id, "taskId": task_id, "url": url});
    if let Some(t) = c.get("token").and_then(Value::as_str) {
        out["token"] = json!(t);
    }
    Ok(out)
}

/// Keeps `config` for its task (one of the same id replaced), at most MAX_PUSH_CONFIGS.
fn keep_config(shared: &Shared, config: Value) -> Result<Value, Failure> {
    let task_id = config["taskId"].as_str().unwrap_or("").to_owned();
    let mut tasks = lock(&shared.a2a);
    if !tasks.map.contains_key(&task_id) {
        return Err(fail(Kind::TaskNotFound, format!("no task {task_id:?}")));
    }
    let kept = tasks.push.entry(task_id).or_default();
    kept.retain(|c| c["id"] != config["id"]);
    if kept.len() >= super::official::MAX_PUSH_CONFIGS {
        return Err(fail(
            Kind::InvalidParams,
            "too many push configs for this task",
        ));
    }
    kept.push(config.clone());
    Ok(config)
}

/// The four push-config methods.
pub(crate) fn push_config(shared: &Shared, method: &str, params: &Map<String, Value>) -> Answer {
    let task_id = params
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| fail(Kind::InvalidParams, "params.taskId is required"))?;
    let id = params.get("id").and_then(Value::as_str).unwrap_or(task_id);
    if method == "CreateTaskPushNotificationConfig" {
        return keep_config(shared, config_of(task_id, params)?);
    }
    let mut tasks = lock(&shared.a2a);
    if !tasks.map.contains_key(task_id) {
        return Err(fail(Kind::TaskNotFound, format!("no task {task_id:?}")));
    }
    let kept = tasks.push.entry(task_id.to_owned()).or_default();
    match method {
        "ListTaskPushNotificationConfigs" => Ok(json!({"configs": kept.clone()})),
        "GetTaskPushNotificationConfig" => kept
            .iter()
            .find(|c| c["id"] == id)
            .cloned()
            .ok_or_else(|| fail(Kind::TaskNotFound, format!("no push config {id:?}"))),
        _ => {
            kept.retain(|c| c["id"] != id);
            Ok(json!({}))
        }
    }
}

/// One call, whichever binding it came in.
pub(crate) fn call(shared: &Arc<Shared>, method: &str, params: &Map<String, Value>) -> Answer {
    match method {
        "SendMessage" => send(shared, params),
        "GetTask" => get(shared, params),
        "CancelTask" => cancel(shared, params),
        "ListTasks" => list(shared, params),
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => push_config(shared, method, params),
        "GetExtendedAgentCard" => Err(fail(Kind::Unsupported, "no extended card")),
        other => Err(fail(
            Kind::MethodNotFound,
            format!("no method {:?}", other.chars().take(64).collect::<String>()),
        )),
    }
}
