//! Calls to the official A2A routes for the integration tests: raw JSON-RPC and REST requests
//! (so a test sees exactly what went on the wire), the clients they are made as, and a
//! scripted agent that reopens completed tasks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Value};

use a2a_gateway::config::{Config, Right};

use crate::auth::client;
use crate::support::a2a_script::{task, Answer};
use crate::support::{Http, Resp};

pub const ALICE: &str = "alice-key-0123456789abcdef";
pub const BOB: &str = "bob-key-0123456789abcdef01";
pub const OPS: &str = "ops-key-0123456789abcdef012";
pub const WAIT: Duration = Duration::from_secs(10);

pub fn two_clients(cfg: &mut Config) {
    use Right::*;
    cfg.clients = vec![
        client("alice", ALICE, &["*"], &[Tasks]),
        client("bob", BOB, &["*"], &[Tasks]),
        client("ops", OPS, &["*"], &[Tasks, Events, AllTasks, Metrics]),
    ];
}

/// One JSON-RPC call to `/agents/{agent}/jsonrpc` (or `/a2a` for `agent` ""), as `token`.
pub async fn rpc(
    http: &Http,
    agent: &str,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let path = if agent.is_empty() {
        "/a2a".to_owned()
    } else {
        format!("/agents/{agent}/jsonrpc")
    };
    let body = json!({"jsonrpc": "2.0", "id": "c-1", "method": method, "params": params});
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json"), ("a2a-version", "1.0")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    let r = http
        .send(Method::POST, &path, &headers, Bytes::from(body.to_string()))
        .await;
    assert_eq!(r.status, 200, "{method}: {r:?}");
    let v = r.json();
    assert_eq!(v["id"], "c-1", "{v}");
    v
}

/// A REST call under `/agents/{agent}/`, as `token`.
pub async fn rest(
    http: &Http,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Resp {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("a2a-version", "1.0")];
    if body.is_some() {
        headers.push(("content-type", "application/a2a+json"));
    }
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    let body = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
    http.send(method, path, &headers, body).await
}

pub fn message(text: &str, extra: Value) -> Value {
    let mut m = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]});
    if let (Some(m), Value::Object(x)) = (m.as_object_mut(), extra) {
        m.extend(x);
    }
    json!({ "message": m })
}

pub fn error_code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error: {v}"))
}

pub fn reason(v: &Value) -> &str {
    v["error"]["data"][0]["reason"].as_str().unwrap_or("")
}

/// The ErrorInfo of a 1.0 error: JSON-RPC's `error.data[0]`, HTTP+JSON's `error.details[0]`.
pub fn info_of(v: &Value) -> &Value {
    let e = &v["error"];
    if e["data"].is_array() {
        &e["data"][0]
    } else {
        &e["details"][0]
    }
}

/// A 1.0 refusal for method `m`: FORBIDDEN in the gateway's domain, naming `m`.
pub fn assert_forbidden(what: &str, v: &Value, m: &str) {
    let info = info_of(v);
    assert_eq!(info["reason"], "FORBIDDEN", "{what}: {v}");
    assert_eq!(info["domain"], "a2a-gateway", "{what}: {v}");
    assert_eq!(info["metadata"]["method"], m, "{what}: {v}");
}

/// A 0.3 JSON-RPC `message/send` with `id`, as its body.
pub fn send_03(id: i64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "message/send", "params": {
        "message": {"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(),
            "role": "user", "parts": [{"kind": "text", "text": "hello"}]}}})
    .to_string()
}

/// A gRPC SendMessage request (ProtoJSON), with `tenant` if given.
pub fn grpc_send(tenant: Option<&str>) -> Value {
    let mut m = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER", "parts": [{"text": "hello"}]}});
    if let Some(t) = tenant {
        m["tenant"] = json!(t);
    }
    m
}

/// A scripted agent that completes every new task at once, and reopens it (WORKING) when a
/// message continues it; cancel would cancel it.
pub fn reopening(calls: Arc<AtomicUsize>) -> crate::support::a2a_script::Script {
    Arc::new(move |method, params| {
        calls.fetch_add(1, Ordering::SeqCst);
        match method {
            "SendMessage" if params["message"]["taskId"].is_string() => {
                Answer::Result(json!({"task": task("t-1", "ctx-1", "TASK_STATE_WORKING")}))
            }
            "SendMessage" => {
                let mut t = task("t-1", "ctx-1", "TASK_STATE_COMPLETED");
                t["artifacts"] = json!([{"artifactId": "a", "parts": [{"text": "done"}]}]);
                Answer::Result(json!({ "task": t }))
            }
            "CancelTask" => Answer::Result(task("t-1", "ctx-1", "TASK_STATE_CANCELED")),
            _ => Answer::Result(task("t-1", "ctx-1", "TASK_STATE_WORKING")),
        }
    })
}

/// A raw request to the gateway: (status, headers, JSON body).
pub async fn raw(
    http: &Http,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Resp, Value) {
    let r = http
        .send(method, path, headers, Bytes::from(body.to_owned()))
        .await;
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, r, v)
}
