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
//! (`a2a_stream`); push configs are not served (the card says so). With
//! `Protocol::A2aV0_3` every route speaks A2A 0.3 (`v0_3`): its method names, a2a.json's shapes
//! on JSON-RPC, the 0.3 proto's on HTTP+JSON under `/a2a/rest/v1/`. Tasks are bounded by
//! `max_tasks`, the oldest evicted first.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{json, Map, Value};

use super::a2a_stream;
use super::body::OutBody;
use super::shared::{lock, Shared};
use super::v0_3::{self, Spelling};

/// An A2A error: the JSON-RPC code, the HTTP status, the google.rpc code name and reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Parse,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    TaskNotFound,
    TaskNotCancelable,
    Unsupported,
}

impl Kind {
    fn row(self) -> (i64, u16, &'static str, &'static str) {
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

pub(crate) struct Failure(Kind, String);

/// How long `hello slowly` works before it completes.
const HELLO_SLOWLY: std::time::Duration = std::time::Duration::from_millis(1500);

pub(crate) type Answer = Result<Value, Failure>;

fn fail(kind: Kind, message: impl Into<String>) -> Failure {
    Failure(kind, message.into())
}

fn error_info(reason: &str) -> Value {
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

fn cancel(shared: &Shared, params: &Map<String, Value>) -> Answer {
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

fn list(shared: &Shared, params: &Map<String, Value>) -> Answer {
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
fn push_config(shared: &Shared, method: &str, params: &Map<String, Value>) -> Answer {
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
fn call(shared: &Arc<Shared>, method: &str, params: &Map<String, Value>) -> Answer {
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

fn json(status: u16, content_type: &'static str, v: &Value) -> Response<OutBody> {
    let mut res = Response::new(OutBody::full(Bytes::from(
        serde_json::to_vec(v).unwrap_or_default(),
    )));
    *res.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    res
}

/// Whether the agent speaks 0.3 (`Protocol::A2aV0_3`).
fn v0_3(shared: &Shared) -> bool {
    shared.protocol == crate::Protocol::A2aV0_3
}

/// Whether a 1.0 method answers with a stream.
fn streams(method: &str) -> bool {
    matches!(method, "SendStreamingMessage" | "SubscribeToTask")
}

/// `POST /a2a/jsonrpc`: one JSON-RPC 2.0 request (§9; in 0.3, its method names and shapes).
pub(crate) fn jsonrpc(shared: &Arc<Shared>, body: &[u8]) -> Response<OutBody> {
    let old = v0_3(shared);
    let reply = |id: &Value, method: &str, out: Answer| {
        let v = match out {
            Ok(result) if old => {
                json!({"jsonrpc": "2.0", "id": id, "result": v0_3::answer_for(Spelling::Json, method, &result)})
            }
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(Failure(kind, message)) => {
                let (code, _, _, reason) = kind.row();
                let mut error = json!({"code": code, "message": message});
                if !old {
                    error["data"] = json!([error_info(reason)]);
                }
                json!({"jsonrpc": "2.0", "id": id, "error": error})
            }
        };
        json(200, "application/json", &v)
    };
    let req: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => return reply(&Value::Null, "", Err(fail(Kind::Parse, "not JSON"))),
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let (Some("2.0"), Some(name)) = (
        req.get("jsonrpc").and_then(Value::as_str),
        req.get("method").and_then(Value::as_str),
    ) else {
        return reply(
            &id,
            "",
            Err(fail(Kind::InvalidRequest, "not a JSON-RPC 2.0 request")),
        );
    };
    let method = if old {
        match v0_3::method(name) {
            Some(m) => m,
            None => {
                return reply(
                    &id,
                    "",
                    Err(fail(Kind::MethodNotFound, "not an A2A 0.3 method")),
                )
            }
        }
    } else {
        name
    };
    let empty = Map::new();
    let mut params = match req.get("params") {
        None => empty,
        Some(Value::Object(p)) => p.clone(),
        Some(_) => {
            return reply(
                &id,
                method,
                Err(fail(Kind::InvalidParams, "params is an object")),
            )
        }
    };
    if old {
        if let Some(Value::Object(m)) = params.get("message") {
            let m = v0_3::message_in(Spelling::Json, m);
            params.insert("message".to_owned(), Value::Object(m));
        }
        v0_3::params_in(method, &mut params);
    }
    if streams(method) {
        let rpc_id = id.clone();
        let frame: a2a_stream::Frame = Box::new(move |e| {
            let result = if old {
                v0_3::answer_out(Spelling::Json, e)
            } else {
                e.clone()
            };
            let doc = json!({"jsonrpc": "2.0", "id": rpc_id, "result": result});
            Bytes::from(format!("data: {doc}\n\n"))
        });
        return match a2a_stream::open(shared, method, &params, frame) {
            Ok(res) => res,
            Err(e) => reply(&id, method, Err(e)),
        };
    }
    reply(&id, method, call(shared, method, &params))
}

/// The HTTP+JSON binding (§11.3) under `/a2a/rest`: `tail` is the path after it (in 0.3, its
/// routes under `/v1`, the 0.3 proto's JSON).
pub(crate) fn rest(
    shared: &Arc<Shared>,
    http_method: &hyper::Method,
    tail: &str,
    query: Option<&str>,
    body: &[u8],
) -> Response<OutBody> {
    let old = v0_3(shared);
    let tail = match (old, tail.strip_prefix("/v1")) {
        (false, _) => tail,
        (true, Some(t)) if t.starts_with('/') => t,
        (true, _) => {
            return rest_error(
                true,
                fail(Kind::MethodNotFound, "0.3's routes are under /v1"),
            )
        }
    };
    let tail = if old && tail == "/card" {
        "/extendedAgentCard"
    } else {
        tail
    };
    let frame: a2a_stream::Frame = Box::new(move |e| {
        let e = if old {
            v0_3::answer_out(Spelling::Proto, e)
        } else {
            e.clone()
        };
        Bytes::from(format!("data: {e}\n\n"))
    });
    match rest_call(shared, http_method, tail, query, body, frame) {
        Ok(Rest::Answer(method, v)) if old => json(
            200,
            "application/json",
            &v0_3::answer_for(Spelling::Proto, method, &v),
        ),
        Ok(Rest::Answer(_, v)) => json(200, "application/a2a+json", &v),
        Ok(Rest::Stream(res)) => res,
        Err(f) => rest_error(old, f),
    }
}

/// A REST error: google.rpc.Status in 1.0, `{code, message}` (the JSON-RPC code) in 0.3, under
/// the error's HTTP status.
fn rest_error(old: bool, Failure(kind, message): Failure) -> Response<OutBody> {
    let (code, status, grpc, reason) = kind.row();
    let body = if old {
        json!({"code": code, "message": message})
    } else {
        json!({"error": {"code": status, "status": grpc, "message": message,
            "details": [error_info(reason)]}})
    };
    json(status, "application/json", &body)
}

/// What a REST call gives: one answer, or a stream.
enum Rest {
    /// The answer to the method of that (1.0) name.
    Answer(&'static str, Value),
    Stream(Response<OutBody>),
}

fn rest_call(
    shared: &Arc<Shared>,
    http_method: &hyper::Method,
    tail: &str,
    query: Option<&str>,
    body: &[u8],
    frame: a2a_stream::Frame,
) -> Result<Rest, Failure> {
    use hyper::Method as M;
    let mut params = Map::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = decode(v).unwrap_or_default();
        let typed = match k {
            "pageSize" | "historyLength" => {
                v.parse::<u64>().map(Value::from).unwrap_or(Value::Null)
            }
            _ => Value::from(v),
        };
        params.insert(k.to_owned(), typed);
    }
    let body_params = || -> Result<Map<String, Value>, Failure> {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(mut o)) => {
                if v0_3(shared) {
                    if let Some(Value::Object(m)) = o.get("message") {
                        let m = v0_3::message_in(Spelling::Proto, m);
                        o.insert("message".to_owned(), Value::Object(m));
                    }
                }
                Ok(o)
            }
            _ => Err(fail(Kind::InvalidParams, "the body is a JSON object")),
        }
    };
    let one = |method: &'static str, a: Answer| a.map(|v| Rest::Answer(method, v));
    let stream = |method: &str, params: &Map<String, Value>| {
        a2a_stream::open(shared, method, params, frame).map(Rest::Stream)
    };
    let segs: Vec<&str> = tail.trim_start_matches('/').split('/').collect();
    match (http_method, segs.as_slice()) {
        (&M::POST, ["message:send"]) => one("SendMessage", send(shared, &body_params()?)),
        (&M::POST, ["message:stream"]) => stream("SendStreamingMessage", &body_params()?),
        (&M::GET, ["tasks"]) => one("ListTasks", list(shared, &params)),
        (&M::POST, ["tasks", t]) if t.ends_with(":cancel") => {
            let id = decode(&t[..t.len() - ":cancel".len()]).unwrap_or_default();
            params.insert("id".into(), Value::from(id));
            one("CancelTask", cancel(shared, &params))
        }
        (&M::GET | &M::POST, ["tasks", t]) if t.ends_with(":subscribe") => {
            let id = decode(&t[..t.len() - ":subscribe".len()]).unwrap_or_default();
            params.insert("id".into(), Value::from(id));
            stream("SubscribeToTask", &params)
        }
        (&M::GET, ["tasks", t]) => {
            params.insert("id".into(), Value::from(decode(t).unwrap_or_default()));
            one("GetTask", get(shared, &params))
        }
        (_, ["tasks", t, "pushNotificationConfigs", rest @ ..]) if rest.len() <= 1 => {
            let method = match (http_method, rest) {
                (&M::POST, []) => "CreateTaskPushNotificationConfig",
                (&M::GET, []) => "ListTaskPushNotificationConfigs",
                (&M::GET, [_]) => "GetTaskPushNotificationConfig",
                (&M::DELETE, [_]) => "DeleteTaskPushNotificationConfig",
                _ => return Err(fail(Kind::MethodNotFound, "no such route")),
            };
            let mut p = if method == "CreateTaskPushNotificationConfig" {
                body_params()?
            } else {
                Map::new()
            };
            if v0_3(shared) {
                v0_3::params_in(method, &mut p);
            }
            p.insert("taskId".into(), Value::from(decode(t).unwrap_or_default()));
            if let [id] = rest {
                p.insert("id".into(), Value::from(decode(id).unwrap_or_default()));
            }
            one(method, push_config(shared, method, &p))
        }
        (&M::GET, ["extendedAgentCard"]) => one(
            "GetExtendedAgentCard",
            call(shared, "GetExtendedAgentCard", &params),
        ),
        _ => Err(fail(Kind::MethodNotFound, "no such route")),
    }
}

/// `%XX` decoding of a path segment or query value; `None` for a bad escape or UTF-8.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
