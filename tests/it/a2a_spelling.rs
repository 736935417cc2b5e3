//! A2A requests spelling fields with their proto names (`message_id`, `context_id`, `task_id`),
//! as ProtoJSON lets every client: read on both bindings, in bodies and REST query parameters,
//! passed to the agent in JSON names (a scripted JSON-RPC agent and an a2a-sdk REST agent show
//! what reached them), with `google.protobuf.Struct` contents as sent; one field in both
//! spellings refused naming it; and another client's task or context named with a proto name
//! refused exactly as the JSON name is, without the agent being called. And int32 fields given
//! as strings (`"pageSize": "10"`), which ProtoJSON reads as their numbers: read so on both
//! bindings, a string holding no integer still InvalidParams.

use std::sync::Arc;

use hyper::Method;
use serde_json::{json, Value};

use crate::a2a_gateway::{a2a_agent, gateway};
use crate::support::a2a_calls::*;
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::a2a_sdk::{SdkAgent, HTTP_JSON};

/// An agent whose new task is named by the message's text (INPUT_REQUIRED, in the message's
/// context or `ctx-{text}`), which completes a task a message continues, and which answers
/// GetTask with the task asked about.
async fn naming_agent() -> ScriptedAgent {
    ScriptedAgent::start(Arc::new(|method, params| {
        let m = &params["message"];
        let ctx = |id: &str| {
            m["contextId"]
                .as_str()
                .map_or_else(|| format!("ctx-{id}"), str::to_owned)
        };
        match method {
            "SendMessage" => match m["taskId"].as_str() {
                Some(t) => {
                    Answer::Result(json!({"task": task(t, &ctx(t), "TASK_STATE_COMPLETED")}))
                }
                None => {
                    let text = m["parts"][0]["text"].as_str().unwrap_or("");
                    Answer::Result(
                        json!({"task": task(text, &ctx(text), "TASK_STATE_INPUT_REQUIRED")}),
                    )
                }
            },
            _ => {
                let id = params["id"].as_str().unwrap_or("");
                Answer::Result(task(id, &format!("ctx-{id}"), "TASK_STATE_INPUT_REQUIRED"))
            }
        }
    }))
    .await
}

/// A user message in proto names: `message_id` (new), `role`, one text part, and `extra`.
fn proto_message(text: &str, extra: Value) -> Value {
    let mut m = json!({"message_id": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]});
    if let (Some(m), Value::Object(x)) = (m.as_object_mut(), extra) {
        m.extend(x);
    }
    json!({ "message": m })
}

/// The params of the agent's last call.
fn last_params(agent: &ScriptedAgent) -> Value {
    agent
        .calls()
        .last()
        .map(|c| c["params"].clone())
        .expect("the agent was called")
}

/// The keys of an object, sorted.
fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn int32_fields_given_as_strings_are_read_as_their_numbers_on_both_bindings() {
    let agent = naming_agent().await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], two_clients).await;
    // SendMessage over JSON-RPC: the agent reads the number.
    let mut sent = message("int-1", json!({}));
    sent["configuration"] = json!({"historyLength": "3"});
    let v = rpc(&http, "s", Some(ALICE), "SendMessage", sent).await;
    assert_eq!(v["result"]["task"]["id"], "int-1", "{v}");
    assert_eq!(last_params(&agent)["configuration"]["historyLength"], 3);
    // And over HTTP+JSON, in the body.
    let mut sent = message("int-2", json!({}));
    sent["configuration"] = json!({"historyLength": "0"});
    let r = rest(
        &http,
        Method::POST,
        "/agents/s/message:send",
        Some(ALICE),
        Some(sent),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(last_params(&agent)["configuration"]["historyLength"], 0);
    // GetTask's historyLength and ListTasks' pageSize, taken (both were InvalidParams).
    let v = rpc(
        &http,
        "s",
        Some(ALICE),
        "GetTask",
        json!({"id": "int-1", "historyLength": "3"}),
    )
    .await;
    assert_eq!(v["result"]["id"], "int-1", "{v}");
    let v = rpc(
        &http,
        "s",
        Some(ALICE),
        "ListTasks",
        json!({"pageSize": "1"}),
    )
    .await;
    assert_eq!(v["result"]["pageSize"], 1, "{v}");
    assert_eq!(
        v["result"]["tasks"].as_array().map(Vec::len),
        Some(1),
        "{v}"
    );
    assert_eq!(v["result"]["totalSize"], 2, "{v}");
    // A string that holds no integer is still refused, naming the field.
    for bad in ["ten", "1.5", ""] {
        let v = rpc(
            &http,
            "s",
            Some(ALICE),
            "ListTasks",
            json!({ "pageSize": bad }),
        )
        .await;
        assert_eq!(error_code(&v), -32602, "{bad:?}: {v}");
        assert!(v.to_string().contains("pageSize"), "{bad:?}: {v}");
    }
}

#[tokio::test]
async fn proto_field_names_are_read_on_both_bindings_and_reach_the_agent_as_json_names() {
    let agent = naming_agent().await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], two_clients).await;

    // JSON-RPC: message_id and context_id, Struct contents in snake_case of their own, and a
    // data part whose data names fields of the proto: the Structs reach the agent as sent.
    let mut sent = proto_message(
        "rpc-1",
        json!({"context_id": "ctx-rpc", "metadata": {"trace_id": "t-9"}}),
    );
    sent["message"]["parts"]
        .as_array_mut()
        .expect("parts")
        .push(json!({"data": {"task_id": "kept", "context_id": "kept"}, "media_type": "application/json"}));
    sent["configuration"] = json!({"return_immediately": false, "history_length": 5});
    sent["metadata"] = json!({"client_ref": {"deep_key": 1}});
    let mid = sent["message"]["message_id"].clone();
    let v = rpc(&http, "s", Some(ALICE), "SendMessage", sent).await;
    assert_eq!(
        (
            &v["result"]["task"]["id"],
            &v["result"]["task"]["contextId"]
        ),
        (&json!("rpc-1"), &json!("ctx-rpc")),
        "{v}"
    );
    let got = last_params(&agent);
    let m = &got["message"];
    assert_eq!(
        keys(m),
        ["contextId", "messageId", "metadata", "parts", "role"],
        "{got}"
    );
    assert_eq!(
        (&m["messageId"], &m["contextId"]),
        (&mid, &json!("ctx-rpc"))
    );
    assert_eq!(m["metadata"], json!({"trace_id": "t-9"}));
    assert_eq!(
        m["parts"][1],
        json!({"data": {"task_id": "kept", "context_id": "kept"}, "mediaType": "application/json"})
    );
    assert_eq!(
        got["configuration"],
        json!({"returnImmediately": false, "historyLength": 5})
    );
    assert_eq!(got["metadata"], json!({"client_ref": {"deep_key": 1}}));

    // HTTP+JSON: the same, in a body.
    let body = proto_message("rest-1", json!({"context_id": "ctx-rest"}));
    let mid = body["message"]["message_id"].clone();
    let r = rest(
        &http,
        Method::POST,
        "/agents/s/message:send",
        Some(ALICE),
        Some(body),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["task"]["contextId"], "ctx-rest", "{r:?}");
    let m = last_params(&agent)["message"].clone();
    assert_eq!(keys(&m), ["contextId", "messageId", "parts", "role"], "{m}");
    assert_eq!(
        (&m["messageId"], &m["contextId"]),
        (&mid, &json!("ctx-rest"))
    );

    // task_id continues the caller's own task, on both bindings, and the agent reads taskId.
    let v = rpc(
        &http,
        "s",
        Some(ALICE),
        "SendMessage",
        proto_message("more", json!({"task_id": "rpc-1", "context_id": "ctx-rpc"})),
    )
    .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
    assert_eq!(last_params(&agent)["message"]["taskId"], "rpc-1");
    assert!(last_params(&agent)["message"].get("task_id").is_none());
    let r = rest(
        &http,
        Method::POST,
        "/agents/s/message:send",
        Some(ALICE),
        Some(proto_message(
            "more",
            json!({"task_id": "rest-1", "context_id": "ctx-rest"}),
        )),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["task"]["status"]["state"].clone()),
        (200, json!("TASK_STATE_COMPLETED")),
        "{r:?}"
    );
    assert_eq!(last_params(&agent)["message"]["taskId"], "rest-1");

    // GetTask: history_length in a REST query and in JSON-RPC params, historyLength to the
    // agent.
    let v = rpc(
        &http,
        "s",
        Some(ALICE),
        "SendMessage",
        message("get-1", json!({})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "get-1", "{v}");
    let r = rest(
        &http,
        Method::GET,
        "/agents/s/tasks/get-1?history_length=2",
        Some(ALICE),
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        last_params(&agent),
        json!({"id": "get-1", "historyLength": 2})
    );
    let v = rpc(
        &http,
        "s",
        Some(ALICE),
        "GetTask",
        json!({"id": "get-1", "history_length": 1}),
    )
    .await;
    assert_eq!(v["result"]["id"], "get-1", "{v}");
    assert_eq!(
        last_params(&agent),
        json!({"id": "get-1", "historyLength": 1})
    );

    // ListTasks (from the ledger) reads context_id and page_size from the query and the body.
    let r = rest(
        &http,
        Method::GET,
        "/agents/s/tasks?context_id=ctx-rpc&page_size=1",
        Some(ALICE),
        None,
    )
    .await;
    let listed = r.json();
    assert_eq!(
        (
            r.status,
            listed["tasks"].as_array().map(|t| t.len()),
            &listed["tasks"][0]["id"],
            &listed["pageSize"]
        ),
        (200, Some(1), &json!("rpc-1"), &json!(1)),
        "{listed}"
    );
    let v = rpc(
        &http,
        "s",
        Some(ALICE),
        "ListTasks",
        json!({"context_id": "ctx-rest"}),
    )
    .await;
    assert_eq!(v["result"]["tasks"][0]["id"], "rest-1", "{v}");
    assert_eq!(v["result"]["totalSize"], 1, "{v}");

    // The same message in proto names, then in JSON names: one message, answered once.
    let calls = agent.calls().len();
    let first = proto_message("dup-1", json!({}));
    let mid = first["message"]["message_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let once = rpc(&http, "s", Some(ALICE), "SendMessage", first).await;
    assert_eq!(once["result"]["task"]["id"], "dup-1", "{once}");
    let again = rpc(
        &http,
        "s",
        Some(ALICE),
        "SendMessage",
        json!({"message": {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": "dup-1"}]}}),
    )
    .await;
    assert_eq!(again["result"], once["result"], "{again}");
    assert_eq!(agent.calls().len(), calls + 1, "answered once");

    // One field in both spellings: InvalidParams naming it, on both bindings; the agent is
    // not called.
    let calls = agent.calls().len();
    let both = json!({"message": {"message_id": "m-both", "messageId": "m-both", "role": "ROLE_USER",
        "parts": [{"text": "both"}]}});
    let v = rpc(&http, "s", Some(ALICE), "SendMessage", both.clone()).await;
    assert_eq!(error_code(&v), -32602, "{v}");
    assert_eq!(reason(&v), "INVALID_PARAMS", "{v}");
    assert_eq!(
        v["error"]["data"][1]["fieldViolations"][0]["field"], "message.messageId",
        "{v}"
    );
    let r = rest(
        &http,
        Method::POST,
        "/agents/s/message:send",
        Some(ALICE),
        Some(both),
    )
    .await;
    let e = r.json();
    assert_eq!(
        (
            r.status,
            &e["error"]["status"],
            &e["error"]["details"][0]["reason"]
        ),
        (400, &json!("INVALID_ARGUMENT"), &json!("INVALID_PARAMS")),
        "{e}"
    );
    assert_eq!(
        e["error"]["details"][1]["fieldViolations"][0]["field"], "message.messageId",
        "{e}"
    );
    let r = rest(
        &http,
        Method::GET,
        "/agents/s/tasks/get-1?historyLength=1&history_length=1",
        Some(ALICE),
        None,
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(
        r.json()["error"]["details"][1]["fieldViolations"][0]["field"],
        "historyLength"
    );
    assert_eq!(agent.calls().len(), calls, "none reached the agent");
}

#[tokio::test]
async fn another_clients_task_or_context_in_proto_names_is_refused_as_in_json_names() {
    let agent = naming_agent().await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], two_clients).await;
    let v = rpc(
        &http,
        "s",
        Some(ALICE),
        "SendMessage",
        message("a-own", json!({})),
    )
    .await;
    assert_eq!(
        (
            &v["result"]["task"]["id"],
            &v["result"]["task"]["contextId"]
        ),
        (&json!("a-own"), &json!("ctx-a-own")),
        "{v}"
    );
    let calls = agent.calls().len();
    for (json_name, proto_name, value) in [
        ("taskId", "task_id", json!("a-own")),
        ("contextId", "context_id", json!("ctx-a-own")),
        ("referenceTaskIds", "reference_task_ids", json!(["a-own"])),
    ] {
        // JSON-RPC: the same error, whichever spelling.
        let as_json = rpc(
            &http,
            "s",
            Some(BOB),
            "SendMessage",
            message("blue", json!({ json_name: value })),
        )
        .await;
        assert_eq!(error_code(&as_json), -32001, "{json_name}: {as_json}");
        let as_proto = rpc(
            &http,
            "s",
            Some(BOB),
            "SendMessage",
            message("blue", json!({ proto_name: value })),
        )
        .await;
        assert_eq!(as_proto["error"], as_json["error"], "{proto_name}");
        // HTTP+JSON: the same status and body.
        let mut answers = Vec::new();
        for name in [json_name, proto_name] {
            let r = rest(
                &http,
                Method::POST,
                "/agents/s/message:send",
                Some(BOB),
                Some(proto_message("blue", json!({ name: value }))),
            )
            .await;
            answers.push((r.status, r.json()));
        }
        assert_eq!(answers[0].0, 404, "{json_name}: {:?}", answers[0]);
        assert_eq!(
            answers[0].1["error"]["details"][0]["reason"],
            "TASK_NOT_FOUND"
        );
        assert_eq!(answers[1], answers[0], "{proto_name}");
    }
    // The push-config methods name the task as task_id too.
    for method in [
        "GetTaskPushNotificationConfig",
        "DeleteTaskPushNotificationConfig",
    ] {
        let as_json = rpc(
            &http,
            "s",
            Some(BOB),
            method,
            json!({"taskId": "a-own", "id": "a-own"}),
        )
        .await;
        assert_eq!(error_code(&as_json), -32001, "{method}: {as_json}");
        let as_proto = rpc(
            &http,
            "s",
            Some(BOB),
            method,
            json!({"task_id": "a-own", "id": "a-own"}),
        )
        .await;
        assert_eq!(as_proto["error"], as_json["error"], "{method}");
    }
    let listed = rpc(
        &http,
        "s",
        Some(BOB),
        "ListTaskPushNotificationConfigs",
        json!({"task_id": "a-own"}),
    )
    .await;
    assert_eq!(error_code(&listed), -32001, "{listed}");
    let made = rpc(
        &http,
        "s",
        Some(BOB),
        "CreateTaskPushNotificationConfig",
        json!({"task_id": "a-own", "url": "https://hooks.example.com/x"}),
    )
    .await;
    assert_eq!(error_code(&made), -32001, "{made}");
    assert_eq!(
        agent.calls().len(),
        calls,
        "none of bob's calls reached the agent"
    );
    // Its owner continues it in proto names.
    let v = rpc(
        &http,
        "s",
        Some(ALICE),
        "SendMessage",
        proto_message("on", json!({"task_id": "a-own", "context_id": "ctx-a-own"})),
    )
    .await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
}

/// An a2a-sdk agent serving HTTP+JSON gets JSON names in its bodies and queries whatever
/// spelling the client used, and answers them as it answers the SDK's own clients.
#[tokio::test(flavor = "multi_thread")]
async fn a_rest_agent_gets_json_names_from_a_proto_named_request() {
    let agent = SdkAgent::start(HTTP_JSON);
    let (_gw, http) = gateway(vec![a2a_agent("echo", &agent.base)], |_| {}).await;
    let sent = proto_message("need input", json!({"metadata": {"my_key": "v"}}));
    let mid = sent["message"]["message_id"].clone();
    let v = rpc(&http, "echo", None, "SendMessage", sent).await;
    let t = &v["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
    let (id, ctx) = (
        t["id"].as_str().expect("id").to_owned(),
        t["contextId"].as_str().expect("ctx").to_owned(),
    );
    let posted = |agent: &SdkAgent| -> Vec<Value> {
        agent
            .recorded()
            .into_iter()
            .filter(|r| r["method"] == "POST" && r["path"] == "/a2a/rest/message:send")
            .collect()
    };
    let sends = posted(&agent);
    assert_eq!(sends.len(), 1, "{sends:?}");
    let m = &sends[0]["body"]["message"];
    assert_eq!(
        (&m["messageId"], &m["metadata"]),
        (&mid, &json!({"my_key": "v"}))
    );
    assert!(m.get("message_id").is_none(), "{m}");
    // The agent's own query parameter is historyLength, whatever the client wrote.
    let r = rest(
        &http,
        Method::GET,
        &format!("/agents/echo/tasks/{id}?history_length=1"),
        None,
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json()["history"].as_array().map(Vec::len),
        Some(1),
        "{r:?}"
    );
    let get = agent
        .recorded()
        .into_iter()
        .rfind(|r| r["method"] == "GET" && r["path"] == format!("/a2a/rest/tasks/{id}"))
        .expect("GetTask reached the agent");
    assert_eq!(get["query"], "historyLength=1", "{get}");
    // The task continued with task_id and context_id over REST: the agent reads them.
    let r = rest(
        &http,
        Method::POST,
        "/agents/echo/message:send",
        None,
        Some(proto_message(
            "blue",
            json!({"task_id": id, "context_id": ctx}),
        )),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json()["task"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{r:?}"
    );
    let sends = posted(&agent);
    let m = &sends.last().expect("sent")["body"]["message"];
    assert_eq!((&m["taskId"], &m["contextId"]), (&json!(id), &json!(ctx)));
    assert!(
        m.get("task_id").is_none() && m.get("context_id").is_none(),
        "{m}"
    );
}
