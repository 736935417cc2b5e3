//! The agent's A2A 0.3 (`Protocol::A2aV0_3`): the same tasks as its 1.0, its words 0.3's. What
//! it reads is a client's message (text parts; a2a.json's `kind`/`user` on JSON-RPC, the 0.3
//! proto's `content`/`ROLE_USER` on HTTP+JSON) and the ids of its other calls; what it writes is
//! what it holds, Tasks and Messages of text parts, and their stream events. Only that much of
//! 0.3 (the gateway's `protocol::a2a::v0_3` translates the whole model; this agent stands in
//! front of it as a peer, so it speaks for itself).

use serde_json::{json, Map, Value};

/// Which of 0.3's spellings.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spelling {
    /// a2a.json's, on JSON-RPC.
    Json,
    /// The 0.3 proto's, on HTTP+JSON.
    Proto,
}

/// The 1.0 JSON-RPC name of a 0.3 method.
pub(crate) fn method(name: &str) -> Option<&'static str> {
    Some(match name {
        "message/send" => "SendMessage",
        "message/stream" => "SendStreamingMessage",
        "tasks/get" => "GetTask",
        "tasks/cancel" => "CancelTask",
        "tasks/resubscribe" => "SubscribeToTask",
        "tasks/pushNotificationConfig/set" => "CreateTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/get" => "GetTaskPushNotificationConfig",
        "tasks/pushNotificationConfig/list" => "ListTaskPushNotificationConfigs",
        "tasks/pushNotificationConfig/delete" => "DeleteTaskPushNotificationConfig",
        "agent/getAuthenticatedExtendedCard" => "GetExtendedAgentCard",
        _ => return None,
    })
}

/// A client's 0.3 message as the 1.0 message the agent acts on: its text parts, its role and
/// ids (anything else it does not act on).
pub(crate) fn message_in(s: Spelling, m: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for k in ["messageId", "contextId", "taskId"] {
        if let Some(v) = m.get(k).filter(|v| v.is_string()) {
            out.insert(k.to_owned(), v.clone());
        }
    }
    out.insert("role".to_owned(), json!("ROLE_USER"));
    let key = match s {
        Spelling::Json => "parts",
        Spelling::Proto => "content",
    };
    let parts: Vec<Value> = m
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").cloned())
        .map(|t| json!({ "text": t }))
        .collect();
    out.insert("parts".to_owned(), Value::Array(parts));
    out
}

fn state(s: Spelling, v1: &str) -> &'static str {
    let (json, proto) = match v1 {
        "TASK_STATE_SUBMITTED" => ("submitted", "TASK_STATE_SUBMITTED"),
        "TASK_STATE_WORKING" => ("working", "TASK_STATE_WORKING"),
        "TASK_STATE_INPUT_REQUIRED" => ("input-required", "TASK_STATE_INPUT_REQUIRED"),
        "TASK_STATE_COMPLETED" => ("completed", "TASK_STATE_COMPLETED"),
        "TASK_STATE_CANCELED" => ("canceled", "TASK_STATE_CANCELLED"),
        "TASK_STATE_FAILED" => ("failed", "TASK_STATE_FAILED"),
        "TASK_STATE_REJECTED" => ("rejected", "TASK_STATE_REJECTED"),
        _ => ("unknown", "TASK_STATE_UNSPECIFIED"),
    };
    match s {
        Spelling::Json => json,
        Spelling::Proto => proto,
    }
}

fn parts_out(s: Spelling, parts: &Value) -> Value {
    let parts = parts.as_array().into_iter().flatten().map(|p| match s {
        Spelling::Json => json!({"kind": "text", "text": p["text"]}),
        Spelling::Proto => json!({ "text": p["text"] }),
    });
    Value::Array(parts.collect())
}

/// A held (1.0) Message in 0.3.
pub(crate) fn message_out(s: Spelling, m: &Value) -> Value {
    let mut out = m.clone();
    let parts = parts_out(s, &m["parts"]);
    if let Some(o) = out.as_object_mut() {
        o.remove("parts");
        match s {
            Spelling::Json => {
                let role = if m["role"] == "ROLE_USER" {
                    "user"
                } else {
                    "agent"
                };
                o.insert("role".to_owned(), json!(role));
                o.insert("parts".to_owned(), parts);
                o.insert("kind".to_owned(), json!("message"));
            }
            Spelling::Proto => {
                o.insert("content".to_owned(), parts);
            }
        }
    }
    out
}

fn status_out(s: Spelling, st: &Value) -> Value {
    let mut out = json!({"state": state(s, st["state"].as_str().unwrap_or(""))});
    if let Some(t) = st.get("timestamp") {
        out["timestamp"] = t.clone();
    }
    if let Some(m) = st.get("message") {
        out["message"] = message_out(s, m);
    }
    out
}

/// A held (1.0) Task in 0.3.
pub(crate) fn task_out(s: Spelling, t: &Value) -> Value {
    let mut out = json!({"id": t["id"], "contextId": t["contextId"],
        "status": status_out(s, &t["status"])});
    if let Some(h) = t["history"].as_array() {
        out["history"] = Value::Array(h.iter().map(|m| message_out(s, m)).collect());
    }
    if let Some(a) = t["artifacts"].as_array() {
        let artifacts = a.iter().map(|a| {
            let mut a = a.clone();
            a["parts"] = parts_out(s, &a["parts"]);
            a
        });
        out["artifacts"] = Value::Array(artifacts.collect());
    }
    if s == Spelling::Json {
        out["kind"] = json!("task");
    }
    out
}

/// A 1.0 answer (`{"task"}`, `{"message"}` or a StreamResponse; or a bare Task) in 0.3: bare
/// objects with their `kind` on JSON-RPC, the proto's one-member objects on HTTP+JSON (a bare
/// Task stays bare in both).
pub(crate) fn answer_out(s: Spelling, v: &Value) -> Value {
    let Some((key, inner)) = ["task", "message", "statusUpdate", "artifactUpdate"]
        .iter()
        .find_map(|k| v.get(*k).map(|inner| (*k, inner)))
    else {
        // A bare Task (GetTask's, CancelTask's): bare in both spellings.
        return task_out(s, v);
    };
    let out = match key {
        "task" => task_out(s, inner),
        "message" => message_out(s, inner),
        "statusUpdate" => {
            let st = inner["status"]["state"].as_str().unwrap_or("");
            let ends = super::a2a::ends_stream(st);
            let mut u = json!({"taskId": inner["taskId"], "contextId": inner["contextId"],
                "status": status_out(s, &inner["status"]), "final": ends});
            if s == Spelling::Json {
                u["kind"] = json!("status-update");
            }
            u
        }
        _ => {
            let mut a = inner["artifact"].clone();
            a["parts"] = parts_out(s, &a["parts"]);
            let mut u = json!({"taskId": inner["taskId"], "contextId": inner["contextId"],
                "artifact": a});
            if s == Spelling::Json {
                u["kind"] = json!("artifact-update");
            }
            u
        }
    };
    match s {
        Spelling::Json => out,
        Spelling::Proto => json!({ key: out }),
    }
}

/// A 0.3 call's params where they differ from 1.0's beyond the message: a push config
/// (`{taskId, pushNotificationConfig}`, or on the proto's JSON `{config: {pushNotificationConfig}}`)
/// made flat, `{id, pushNotificationConfigId}` as `{taskId, id}`, a send's inline config under
/// 1.0's name.
pub(crate) fn params_in(method: &str, p: &mut Map<String, Value>) {
    let flat = |c: &Value, task: Option<&Value>| {
        let mut out = Map::new();
        for k in ["id", "url", "token"] {
            if let Some(v) = c.get(k).filter(|v| v.is_string()) {
                out.insert(k.to_owned(), v.clone());
            }
        }
        if let Some(t) = task {
            out.insert("taskId".to_owned(), t.clone());
        }
        out
    };
    match method {
        "SendMessage" | "SendStreamingMessage" => {
            if let Some(Value::Object(c)) = p.get_mut("configuration") {
                let push = c
                    .remove("pushNotificationConfig")
                    .or_else(|| c.remove("pushNotification"));
                if let Some(push) = push {
                    c.insert(
                        "taskPushNotificationConfig".to_owned(),
                        Value::Object(flat(&push, None)),
                    );
                }
            }
        }
        "CreateTaskPushNotificationConfig" => {
            let task = p.get("taskId").cloned();
            let c = p
                .get("pushNotificationConfig")
                .or_else(|| {
                    p.get("config")
                        .and_then(|c| c.get("pushNotificationConfig"))
                })
                .cloned()
                .unwrap_or(Value::Null);
            let mut out = flat(&c, task.as_ref());
            if let Some(id) = p.get("configId").filter(|v| v.is_string()) {
                out.insert("id".to_owned(), id.clone());
            }
            *p = out;
        }
        "GetTaskPushNotificationConfig" | "DeleteTaskPushNotificationConfig" => {
            if let Some(task) = p.remove("id") {
                let id = p.remove("pushNotificationConfigId").unwrap_or(task.clone());
                p.insert("taskId".to_owned(), task);
                p.insert("id".to_owned(), id);
            }
        }
        "ListTaskPushNotificationConfigs" => {
            if let Some(task) = p.remove("id") {
                p.insert("taskId".to_owned(), task);
            }
        }
        _ => {}
    }
}

/// A kept (1.0) push config in 0.3.
fn config_out(s: Spelling, c: &Value) -> Value {
    let mut pnc = json!({"id": c["id"], "url": c["url"]});
    if let Some(t) = c.get("token") {
        pnc["token"] = t.clone();
    }
    match s {
        Spelling::Json => json!({"taskId": c["taskId"], "pushNotificationConfig": pnc}),
        Spelling::Proto => json!({
            "name": format!("tasks/{}/pushNotificationConfigs/{}",
                c["taskId"].as_str().unwrap_or(""), c["id"].as_str().unwrap_or("")),
            "pushNotificationConfig": pnc
        }),
    }
}

/// [`answer_out`] for `method` (a 1.0 name): the push-config methods' answers too.
pub(crate) fn answer_for(s: Spelling, method: &str, v: &Value) -> Value {
    match method {
        "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig" => config_out(s, v),
        "ListTaskPushNotificationConfigs" => {
            let configs: Vec<Value> = v["configs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| config_out(s, c))
                .collect();
            match s {
                Spelling::Json => Value::Array(configs),
                Spelling::Proto => json!({ "configs": configs }),
            }
        }
        "DeleteTaskPushNotificationConfig" => match s {
            Spelling::Json => Value::Null,
            Spelling::Proto => json!({}),
        },
        _ => answer_out(s, v),
    }
}
