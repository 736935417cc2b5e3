//! Rights per A2A method (`[[clients]] methods`), beside `can`: a client limited to GetTask
//! and ListTasks is refused SendMessage with 403 FORBIDDEN on every binding and version (the
//! method in the ErrorInfo metadata), at the fleet's endpoints too, before the agent is called,
//! counted by client; it still reads its task, lists, and reads the served card. A reload that
//! takes a streaming method away ends the streams it opened.

use std::time::Duration;

use hyper::Method;
use serde_json::json;

use a2a_gateway::config::{Config, Right};
use a2a_sample_agent::{AgentOptions, Route, SampleAgent};

use crate::a2a_gateway::{a2a_agent, gateway};
use crate::auth::client;
use crate::support::a2a_calls::{
    assert_forbidden, error_code, grpc_send, message, raw, rest, rpc, send_03,
};
use crate::support::{grpc, metric_value, Http};

const READER: &str = "reader-key-0123456789abcdef";
const WRITER: &str = "writer-key-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(10);

/// reader: `tasks` and every method (until the test's reload); writer: every right it needs
/// here and every method.
fn clients(cfg: &mut Config) {
    use Right::*;
    cfg.clients = vec![
        client("reader", READER, &["*"], &[Tasks]),
        client("writer", WRITER, &["*"], &[Tasks, Streams, Metrics]),
    ];
}

/// The calls the agent received on its three bindings.
fn agent_calls(agent: &SampleAgent) -> usize {
    [Route::A2aJsonRpc, Route::A2aRest, Route::A2aGrpc]
        .into_iter()
        .map(|r| agent.request_count(r))
        .sum()
}

async fn forbidden_count(http: &Http, labels: &[(&str, &str)]) -> f64 {
    let text = http.get_as("/metrics", WRITER).await;
    assert_eq!(text.status, 200);
    let mut all = vec![("outcome", "FORBIDDEN"), ("client", "reader")];
    all.extend_from_slice(labels);
    metric_value(
        &String::from_utf8_lossy(&text.body),
        "a2a_gateway_a2a_requests_total",
        &all,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_calls_only_its_methods_on_every_binding_and_version() {
    let agent = SampleAgent::start(AgentOptions::a2a("Echo"))
        .await
        .expect("sample agent starts");
    let (gw, http) = gateway(vec![a2a_agent("echo", &agent.base_url())], clients).await;
    // With every method, the reader makes a task of its own; the writer makes one too.
    let mine = rpc(
        &http,
        "echo",
        Some(READER),
        "SendMessage",
        message("hello", json!({})),
    )
    .await;
    let mine = mine["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {mine}"))
        .to_owned();
    let theirs = rpc(
        &http,
        "echo",
        Some(WRITER),
        "SendMessage",
        message("hello", json!({})),
    )
    .await;
    let theirs = theirs["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {theirs}"))
        .to_owned();
    // The reload: the reader may read and list, nothing else.
    let mut next = (*gw.config()).clone();
    next.clients[0].methods = vec!["GetTask".into(), "ListTasks".into()];
    gw.reload(next).await.expect("reloaded");

    let before = agent_calls(&agent);
    // JSON-RPC 1.0, at the agent's route and at the fleet's (with and without a tenant):
    // HTTP 200, the gateway's -32000, the request's id.
    for (what, at, params) in [
        ("jsonrpc", "echo", message("hello", json!({}))),
        (
            "fleet",
            "",
            json!({"tenant": "echo", "message": message("hello", json!({}))["message"]}),
        ),
        ("fleet, no tenant", "", message("hello", json!({}))),
    ] {
        let v = rpc(&http, at, Some(READER), "SendMessage", params).await;
        assert_eq!(error_code(&v), -32000, "{what}: {v}");
        assert_forbidden(what, &v, "SendMessage");
    }
    // The streaming methods and the extended card are methods too.
    for (what, method, params) in [
        (
            "stream",
            "SendStreamingMessage",
            message("hello", json!({})),
        ),
        ("subscribe", "SubscribeToTask", json!({ "id": mine })),
        ("cancel", "CancelTask", json!({ "id": mine })),
    ] {
        let v = rpc(&http, "echo", Some(READER), method, params).await;
        assert_forbidden(what, &v, method);
    }
    // HTTP+JSON 1.0: 403 and a google.rpc.Status.
    for (path, body, m) in [
        (
            "/agents/echo/message:send".to_owned(),
            Some(message("hello", json!({}))),
            "SendMessage",
        ),
        (
            "/agents/echo/message:stream".to_owned(),
            Some(message("hello", json!({}))),
            "SendStreamingMessage",
        ),
        (
            format!("/agents/echo/tasks/{mine}:subscribe"),
            None,
            "SubscribeToTask",
        ),
    ] {
        let r = rest(&http, Method::POST, &path, Some(READER), body).await;
        assert_eq!(r.status, 403, "{path}: {r:?}");
        let v = r.json();
        assert_eq!(v["error"]["status"], "PERMISSION_DENIED", "{path}: {v}");
        assert_forbidden(&path, &v, m);
    }
    let r = rest(
        &http,
        Method::GET,
        "/agents/echo/extendedAgentCard",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(r.status, 403, "{r:?}");
    assert_forbidden("extended card", &r.json(), "GetExtendedAgentCard");
    // 0.3's message/send counts as SendMessage: JSON-RPC without A2A-Version (HTTP 200,
    // -32000, its id), and HTTP+JSON under v1/ (403); 0.3's error names the 1.0 method.
    let auth = format!("Bearer {READER}");
    let h03 = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let (status, _, v) = raw(
        &http,
        Method::POST,
        "/agents/echo/jsonrpc",
        &h03,
        &send_03(7),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!((v["id"].clone(), error_code(&v)), (json!(7), -32000), "{v}");
    assert_eq!(
        v["error"]["data"],
        json!({"reason": "FORBIDDEN", "domain": "a2a-gateway", "method": "SendMessage"}),
        "{v}"
    );
    // 0.3's HTTP+JSON speaks the 0.3 proto's JSON: `ROLE_USER`, `content`.
    let rest03 = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER", "content": [{"text": "hello"}]}});
    let (status, _, v) = raw(
        &http,
        Method::POST,
        "/agents/echo/v1/message:send",
        &h03,
        &rest03.to_string(),
    )
    .await;
    assert_eq!(status, 403, "{v}");
    assert_eq!(v["data"]["reason"], "FORBIDDEN", "{v}");
    assert_eq!(v["data"]["method"], "SendMessage", "{v}");
    // gRPC, at the service's root (tenant or not) and under the agent: PERMISSION_DENIED.
    let md = grpc::bearer(Some(READER));
    let md: Vec<(&str, &str)> = md.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for (what, path, msg) in [
        (
            "service",
            "/lf.a2a.v1.A2AService/SendMessage",
            grpc_send(Some("echo")),
        ),
        (
            "service, no tenant",
            "/lf.a2a.v1.A2AService/SendMessage",
            grpc_send(None),
        ),
        (
            "under the agent",
            "/agents/echo/lf.a2a.v1.A2AService/SendMessage",
            grpc_send(None),
        ),
    ] {
        let a = grpc::call_path(&http.base, path, "SendMessage", &msg, &md).await;
        assert_eq!(
            (a.code, a.reason()),
            (7, "FORBIDDEN"),
            "{what}: {:?}",
            a.status
        );
        assert_forbidden(what, &a.status, "SendMessage");
    }
    assert_eq!(
        agent_calls(&agent),
        before,
        "no refused call reached the agent"
    );

    // What it may do, it does: its task read on every binding, the writer's task not found
    // (ownership, not the method), the listing, the served card.
    let got = rpc(
        &http,
        "echo",
        Some(READER),
        "GetTask",
        json!({ "id": mine }),
    )
    .await;
    assert_eq!(got["result"]["id"], mine.as_str(), "{got}");
    let r = rest(
        &http,
        Method::GET,
        &format!("/agents/echo/tasks/{mine}"),
        Some(READER),
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.json()["id"].clone()),
        (200, json!(mine)),
        "{r:?}"
    );
    let a = grpc::call(
        &http.base,
        "GetTask",
        &json!({"tenant": "echo", "id": mine}),
        &md,
    )
    .await;
    assert_eq!(a.code, 0, "{:?}", a.status);
    assert_eq!(a.messages[0]["id"], mine.as_str());
    let (status, _, v) = raw(
        &http,
        Method::POST,
        "/agents/echo/jsonrpc",
        &h03,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": mine}})
            .to_string(),
    )
    .await;
    assert_eq!(
        (status, v["result"]["id"].clone()),
        (200, json!(mine)),
        "{v}"
    );
    let other = rpc(
        &http,
        "echo",
        Some(READER),
        "GetTask",
        json!({ "id": theirs }),
    )
    .await;
    assert_eq!(
        error_code(&other),
        -32001,
        "TaskNotFound, not FORBIDDEN: {other}"
    );
    let listed = rpc(&http, "echo", Some(READER), "ListTasks", json!({})).await;
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("a listing: {listed}"))
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids, [mine.as_str()], "{listed}");
    let listed = rpc(&http, "", Some(READER), "ListTasks", json!({})).await;
    assert!(
        listed["result"]["tasks"].is_array(),
        "the fleet's: {listed}"
    );
    let r = rest(&http, Method::GET, "/agents/echo/tasks", Some(READER), None).await;
    assert_eq!(r.status, 200, "{r:?}");
    for path in [
        "/agents/echo/.well-known/agent-card.json",
        "/agents/echo/agent-card.json",
    ] {
        let r = http.get_as(path, READER).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert!(r.json()["supportedInterfaces"].is_array(), "{path}: {r:?}");
    }
    // The writer's methods did not change: its message reaches the agent.
    let sent = rpc(
        &http,
        "echo",
        Some(WRITER),
        "SendMessage",
        message("hello", json!({})),
    )
    .await;
    assert!(sent["result"]["task"].is_object(), "{sent}");
    assert!(agent_calls(&agent) > before);

    // Each refusal counted once, by the 1.0 method, its binding and version, and the client.
    for (labels, n) in [
        (
            vec![
                ("agent", "echo"),
                ("method", "SendMessage"),
                ("binding", "JSONRPC"),
                ("version", "1.0"),
            ],
            1.0,
        ),
        (
            vec![
                ("agent", ""),
                ("method", "SendMessage"),
                ("binding", "JSONRPC"),
                ("version", "1.0"),
            ],
            2.0,
        ),
        (
            vec![
                ("agent", "echo"),
                ("method", "SendMessage"),
                ("binding", "HTTP+JSON"),
                ("version", "1.0"),
            ],
            1.0,
        ),
        (
            vec![
                ("agent", "echo"),
                ("method", "SendMessage"),
                ("binding", "JSONRPC"),
                ("version", "0.3"),
            ],
            1.0,
        ),
        (
            vec![
                ("agent", "echo"),
                ("method", "SendMessage"),
                ("binding", "HTTP+JSON"),
                ("version", "0.3"),
            ],
            1.0,
        ),
        (vec![("method", "SendMessage"), ("binding", "GRPC")], 3.0),
        (vec![("method", "SubscribeToTask")], 2.0),
        (vec![("method", "GetExtendedAgentCard")], 1.0),
        (vec![("method", "GetTask")], 0.0),
    ] {
        assert_eq!(forbidden_count(&http, &labels).await, n, "{labels:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_that_takes_a_streaming_method_away_ends_the_streams_it_opened() {
    let agent = SampleAgent::start(AgentOptions::a2a("Echo"))
        .await
        .expect("sample agent starts");
    let (gw, http) = gateway(vec![a2a_agent("echo", &agent.base_url())], clients).await;
    let md = grpc::bearer(Some(WRITER));
    let md: Vec<(&str, &str)> = md.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut sent = grpc::open(
        &http.base,
        "SendStreamingMessage",
        &json!({"tenant": "echo", "message": {"messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER", "parts": [{"text": "slow"}]}}),
        &md,
    )
    .await
    .unwrap_or_else(|a| panic!("refused: {:?}", a.status));
    let first = sent.next(WAIT).await.expect("the first event");
    assert!(first["task"]["id"].is_string(), "a task first: {first}");
    // A subscription to another task of the writer's: SubscribeToTask stays its.
    let other = rpc(
        &http,
        "echo",
        Some(WRITER),
        "SendMessage",
        json!({"message": message("slow", json!({}))["message"],
            "configuration": {"returnImmediately": true}}),
    )
    .await;
    let other = other["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {other}"))
        .to_owned();
    let mut sub = grpc::open(
        &http.base,
        "SubscribeToTask",
        &json!({"tenant": "echo", "id": other}),
        &md,
    )
    .await
    .unwrap_or_else(|a| panic!("refused: {:?}", a.status));
    assert!(sub.next(WAIT).await.is_some(), "the task first");

    let mut next = (*gw.config()).clone();
    next.clients[1].methods = a2a_gateway::config::ClientConfig::default()
        .methods
        .into_iter()
        .filter(|m| m != "SendStreamingMessage")
        .collect();
    gw.reload(next).await.expect("reloaded");
    // The message's stream ends, ACCESS_REVOKED as gRPC's PERMISSION_DENIED.
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            if sent.next(Duration::from_millis(500)).await.is_none() {
                if let Some(end) = sent.ended.clone() {
                    return end;
                }
            }
        }
    })
    .await;
    let (code, status) = ended.expect("the stream ends within seconds");
    assert_eq!(
        (code, status["error"]["details"][0]["reason"].clone()),
        (7, json!("ACCESS_REVOKED")),
        "{status}"
    );
    // The subscription, opened by a method the client keeps, is still open.
    assert!(sub.next(Duration::from_secs(1)).await.is_none());
    assert!(sub.ended.is_none(), "{:?}", sub.ended);
    // A new message stream is refused; a new subscription is not.
    let refused = grpc::open(
        &http.base,
        "SendStreamingMessage",
        &grpc_send(Some("echo")),
        &md,
    )
    .await
    .err()
    .expect("refused before a stream");
    assert_eq!((refused.code, refused.reason()), (7, "FORBIDDEN"));
    assert_forbidden("stream", &refused.status, "SendStreamingMessage");
    let mut again = grpc::open(
        &http.base,
        "SubscribeToTask",
        &json!({"tenant": "echo", "id": other}),
        &md,
    )
    .await
    .unwrap_or_else(|a| panic!("refused: {:?}", a.status));
    assert!(again.next(WAIT).await.is_some(), "the task first");
}
