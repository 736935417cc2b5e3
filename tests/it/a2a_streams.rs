//! A2A streams through the gateway: one upstream per task shared by every subscriber of either
//! binding, the task as it is now first, the ledger's rule on every event, and the gateway's
//! own endings as both SDKs read them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use a2a_gateway::config::Right;

use crate::a2a_gateway::{a2a_agent, card_url, gateway};
use crate::a2a_sdk::expected;
use crate::auth::client;
use crate::support::a2a_calls::{error_code, message, reason, rest, rpc, ALICE, BOB, WAIT};
use crate::support::a2a_script::{card, events, task, Answer, ScriptedAgent};
use crate::support::a2a_sdk::{
    run_client_with, run_clients, Run, Sdk, SdkAgent, HTTP_JSON, JSONRPC,
};
use crate::support::sse::Events;
use crate::support::{wait_for, Http};

/// A scripted agent that streams: SendStreamingMessage answers with the stream the test
/// feeds (`feed`); SubscribeToTask and GetTask as `other` says.
struct Streaming {
    agent: ScriptedAgent,
    feed: tokio::sync::mpsc::Sender<Value>,
}

type Other = Arc<dyn Fn(&str, &Value) -> Answer + Send + Sync>;

async fn streaming(other: Other) -> Streaming {
    let (tx, answer) = events();
    let answer = Arc::new(Mutex::new(Some(answer)));
    let agent = ScriptedAgent::start(Arc::new(move |method, params| {
        if method == "SendStreamingMessage" {
            if let Some(a) = answer.lock().expect("lock").take() {
                return a;
            }
            return Answer::Status(500, b"one stream per test".to_vec());
        }
        other(method, params)
    }))
    .await;
    let mut c = card(&format!("{}/rpc", agent.base));
    c["capabilities"]["streaming"] = json!(true);
    agent.set_card(c);
    Streaming { agent, feed: tx }
}

fn refuse_all() -> Other {
    Arc::new(|_, _| Answer::Status(500, b"not scripted".to_vec()))
}

fn status(id: &str, state: &str) -> Value {
    let t = task(id, "ctx-1", state);
    json!({"statusUpdate": {"taskId": id, "contextId": "ctx-1", "status": t["status"]}})
}

fn artifact(id: &str, text: &str) -> Value {
    json!({"artifactUpdate": {"taskId": id, "contextId": "ctx-1",
        "artifact": {"artifactId": "a-1", "parts": [{"text": text}]}}})
}

/// How a test subscriber speaks.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Via {
    /// `POST message:stream` or `POST tasks/{id}:subscribe`.
    RestPost,
    /// `GET tasks/{id}:subscribe`.
    RestGet,
    /// JSON-RPC at `/agents/{name}/jsonrpc`, with this id.
    Rpc(i64),
    /// JSON-RPC at `/a2a`, without a tenant, with this id.
    Fleet(i64),
}

/// A stream opened on the gateway at `base`: `None` for message:stream's body, else the task
/// to subscribe to. The stream, or the plain answer when it is not one (status, JSON).
async fn open(
    base: &str,
    agent: &str,
    via: Via,
    task: Option<&str>,
    token: Option<&str>,
) -> Result<Events, (u16, Value)> {
    open_over(base, agent, via, task, token, false).await
}

/// [`open`], over HTTP/2 (h2c) when `h2`.
async fn open_over(
    base: &str,
    agent: &str,
    via: Via,
    task: Option<&str>,
    token: Option<&str>,
    h2: bool,
) -> Result<Events, (u16, Value)> {
    let (method, path, body) = match (via, task) {
        (Via::RestPost, None) => (
            Method::POST,
            format!("/agents/{agent}/message:stream"),
            message("hi", json!({})).to_string(),
        ),
        (Via::RestPost, Some(t)) => (
            Method::POST,
            format!("/agents/{agent}/tasks/{t}:subscribe"),
            String::new(),
        ),
        (Via::RestGet, Some(t)) => (
            Method::GET,
            format!("/agents/{agent}/tasks/{t}:subscribe"),
            String::new(),
        ),
        (Via::Rpc(id) | Via::Fleet(id), t) => {
            let (m, params) = match t {
                Some(t) => ("SubscribeToTask", json!({ "id": t })),
                None => ("SendStreamingMessage", message("hi", json!({}))),
            };
            let path = match via {
                Via::Fleet(_) => "/a2a".to_owned(),
                _ => format!("/agents/{agent}/jsonrpc"),
            };
            let body = json!({"jsonrpc": "2.0", "id": id, "method": m, "params": params});
            (Method::POST, path, body.to_string())
        }
        (Via::RestGet, None) => unreachable!("message:stream is a POST"),
    };
    // Over HTTP/2, a small window: a subscriber that stops reading stops the gateway's writes
    // after 16 KiB, as a full socket would.
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .http2_initial_stream_window_size(16 * 1024)
        .build_http();
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("accept", "text/event-stream")
        .header("a2a-version", "1.0");
    if !body.is_empty() {
        req = req.header("content-type", "application/json");
    }
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = req.body(Full::new(Bytes::from(body))).expect("request");
    let res = client.request(req).await.expect("the gateway answers");
    let streams = res
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if res.status() == 200 && streams {
        return Ok(Events::new(res));
    }
    let status = res.status().as_u16();
    let body = http_body_util::BodyExt::collect(res.into_body())
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Err((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

/// The next StreamResponse a subscriber reads (pings are comments, never events), unwrapped
/// from its binding's framing: a JSON-RPC response must carry the subscriber's own id.
async fn next_response(s: &mut Events, via: Via) -> Option<Value> {
    let e = s.next_event(WAIT).await?;
    assert_eq!(e.event, "message", "an event of the stream, not {e:?}");
    let doc: Value = serde_json::from_str(&e.data).expect("each event's data is JSON");
    Some(match via {
        Via::Rpc(id) | Via::Fleet(id) => {
            assert_eq!(doc["jsonrpc"], "2.0", "{doc}");
            assert_eq!(doc["id"], id, "the subscriber's own id: {doc}");
            doc["result"].clone()
        }
        _ => doc,
    })
}

/// A StreamResponse in short: its kind and state (or artifact text).
fn kind(v: &Value) -> String {
    if let Some(t) = v.get("task") {
        return format!("task:{}", t["status"]["state"].as_str().unwrap_or("?"));
    }
    if let Some(s) = v.get("statusUpdate") {
        return format!("status:{}", s["status"]["state"].as_str().unwrap_or("?"));
    }
    if let Some(a) = v.get("artifactUpdate") {
        return format!(
            "artifact:{}",
            a["artifact"]["parts"][0]["text"].as_str().unwrap_or("?")
        );
    }
    format!("other:{v}")
}

/// The creator's `message:stream` (as `token`), the agent's first event a Task of `state`,
/// and the creator's stream after it read that Task first.
async fn creating(a: &Streaming, base: &str, via: Via, token: Option<&str>, state: &str) -> Events {
    let creator = tokio::spawn({
        let (base, token) = (base.to_owned(), token.map(str::to_owned));
        async move { open(&base, "s", via, None, token.as_deref()).await }
    });
    a.feed
        .send(json!({"task": task("t-1", "ctx-1", state)}))
        .await
        .expect("the agent streams");
    let mut s = creator.await.expect("joined").expect("a stream");
    let first = next_response(&mut s, via).await.expect("the first event");
    assert_eq!(kind(&first), format!("task:{state}"), "{first}");
    s
}

/// What a subscriber reads until its stream ends, in short (see [`kind`]).
async fn rest_of(s: &mut Events, via: Via) -> Vec<String> {
    let mut seen = Vec::new();
    while let Some(v) = next_response(s, via).await {
        seen.push(kind(&v));
    }
    seen
}

/// Wait until the ledger (or the feed, past the end) counted an update of agent `s`'s task
/// refused for moving a final task.
async fn refused_past_end(http: &Http, what: &str) {
    wait_for(what, || async {
        http.metric(
            "a2a_gateway_transitions_refused_total",
            &[("agent", "s"), ("reason", "terminal")],
        )
        .await
            >= 1.0
    })
    .await;
}

async fn subscribers(http: &Http) -> f64 {
    http.metric("a2a_gateway_stream_subscribers", &[]).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_subscribers_of_both_bindings_share_the_one_upstream_and_final_stays_final() {
    let a = streaming(refuse_all()).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &a.agent.base)], |_| {}).await;
    let base = http.base.clone();
    let creator = creating(&a, &base, Via::RestPost, None, "TASK_STATE_SUBMITTED").await;
    // 99 more, every way a client may subscribe.
    let mut subs = Vec::new();
    for i in 0..99i64 {
        let via = match i % 4 {
            0 => Via::RestPost,
            1 => Via::RestGet,
            2 => Via::Rpc(i),
            _ => Via::Fleet(i),
        };
        let s = open(&base, "s", via, Some("t-1"), None)
            .await
            .unwrap_or_else(|e| panic!("{via:?} subscribes: {e:?}"));
        subs.push((via, s));
    }
    for (via, s) in subs.iter_mut() {
        let first = next_response(s, *via).await.expect("the task first");
        assert_eq!(kind(&first), "task:TASK_STATE_SUBMITTED", "{via:?}");
        assert_eq!(first["task"]["id"], "t-1");
    }
    assert_eq!(subscribers(&http).await, 100.0);
    // Every subscription form over plaintext HTTP/1.1 is on the lean path (the creator's
    // message:stream is hyper's).
    assert_eq!(
        http.metric("a2a_gateway_connections_open", &[("transport", "lean")])
            .await,
        99.0
    );
    for e in [
        status("t-1", "TASK_STATE_WORKING"),
        artifact("t-1", "half"),
        status("t-1", "TASK_STATE_COMPLETED"),
        // Past the end: an agent reopening its completed task.
        status("t-1", "TASK_STATE_WORKING"),
    ] {
        a.feed.send(e).await.expect("the agent streams");
    }
    subs.push((Via::RestPost, creator));
    for (via, s) in subs.iter_mut() {
        let seen = rest_of(s, *via).await;
        assert_eq!(
            seen,
            [
                "status:TASK_STATE_WORKING",
                "artifact:half",
                "status:TASK_STATE_COMPLETED"
            ],
            "{via:?}: every event once, in order, nothing past the end"
        );
        assert!(
            s.ended && !s.failed,
            "{via:?}: the stream closed after COMPLETED"
        );
    }
    assert_eq!(
        a.agent.methods(),
        ["SendStreamingMessage"],
        "the agent saw one stream for a hundred subscribers"
    );
    // The reopening was judged, refused and counted.
    refused_past_end(&http, "the reopening counted").await;
    let t = rest(&http, Method::GET, "/agents/s/tasks/t-1", None, None).await;
    assert_eq!(t.json()["status"]["state"], "TASK_STATE_COMPLETED", "{t:?}");
    assert_eq!(
        t.json()["artifacts"][0]["parts"][0]["text"],
        "half",
        "the streamed artifact is recorded: {t:?}"
    );
    // A final task has no more events: a plain answer, and the agent is not asked.
    let (status, body) = open(&base, "s", Via::RestPost, Some("t-1"), None)
        .await
        .expect_err("not a stream");
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["details"][0]["reason"],
        "UNSUPPORTED_OPERATION"
    );
    let (status, body) = open(&base, "s", Via::Rpc(5), Some("t-1"), None)
        .await
        .expect_err("not a stream");
    assert_eq!(status, 200);
    assert_eq!(error_code(&body), -32004, "{body}");
    assert_eq!(body["id"], 5);
    assert_eq!(a.agent.methods(), ["SendStreamingMessage"]);
    wait_for("the upstream closed", || async {
        http.metric("a2a_gateway_stream_upstreams", &[]).await == 0.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscriber_that_comes_back_gets_the_task_as_it_is_now_then_the_live_events() {
    let a = streaming(refuse_all()).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &a.agent.base)], |_| {}).await;
    let base = http.base.clone();
    let _creator = creating(&a, &base, Via::Rpc(1), None, "TASK_STATE_SUBMITTED").await;
    let mut early = open(&base, "s", Via::RestGet, Some("t-1"), None)
        .await
        .expect("joins");
    assert_eq!(
        kind(&next_response(&mut early, Via::RestGet).await.expect("task")),
        "task:TASK_STATE_SUBMITTED"
    );
    a.feed
        .send(status("t-1", "TASK_STATE_WORKING"))
        .await
        .expect("streams");
    a.feed.send(artifact("t-1", "one")).await.expect("streams");
    assert_eq!(
        kind(
            &next_response(&mut early, Via::RestGet)
                .await
                .expect("event")
        ),
        "status:TASK_STATE_WORKING"
    );
    // It drops, and comes back over the other binding.
    drop(early);
    wait_for("the drop seen", || async {
        subscribers(&http).await == 1.0
    })
    .await;
    let mut back = open(&base, "s", Via::Fleet(9), Some("t-1"), None)
        .await
        .expect("joins again");
    let now = next_response(&mut back, Via::Fleet(9)).await.expect("task");
    assert_eq!(
        kind(&now),
        "task:TASK_STATE_WORKING",
        "the task as it is now: {now}"
    );
    assert_eq!(now["task"]["artifacts"][0]["parts"][0]["text"], "one");
    a.feed
        .send(status("t-1", "TASK_STATE_INPUT_REQUIRED"))
        .await
        .expect("streams");
    assert_eq!(
        kind(&next_response(&mut back, Via::Fleet(9)).await.expect("live")),
        "status:TASK_STATE_INPUT_REQUIRED"
    );
    // An interrupted state closes the stream too (§11.7).
    assert!(next_response(&mut back, Via::Fleet(9)).await.is_none());
    assert!(back.ended && !back.failed);
    assert_eq!(a.agent.methods(), ["SendStreamingMessage"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_outside_the_protocol_is_never_relayed_and_ends_the_stream_with_upstream_error() {
    // What a hostile agent may put on its stream, each with the marker it must not relay: the
    // reason each subscriber's ending carries, and whether it counts as the agent's breach.
    let cases: [(&str, Value, &str, &str, bool); 5] = [
        (
            "another task's event",
            status("t-other", "TASK_STATE_COMPLETED"),
            "t-other",
            "UPSTREAM_ERROR",
            true,
        ),
        (
            "not JSON",
            json!("<html>oops MARK</html>"),
            "MARK",
            "UPSTREAM_ERROR",
            true,
        ),
        (
            "an unknown state",
            json!({"statusUpdate": {"taskId": "t-1", "contextId": "ctx-1",
                "status": {"state": "TASK_STATE_MARK"}}}),
            "TASK_STATE_MARK",
            "UPSTREAM_ERROR",
            true,
        ),
        (
            "two payloads",
            json!({"statusUpdate": {"taskId": "t-1", "contextId": "ctx-1",
                "status": {"state": "TASK_STATE_WORKING"}},
                "message": {"messageId": "MARK", "role": "ROLE_AGENT", "parts": []}}),
            "MARK",
            "UPSTREAM_ERROR",
            true,
        ),
        // The agent's own error ends the stream as the agent's, in each binding.
        (
            "the agent's error",
            json!(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"boom"}}"#),
            "no marker",
            "INTERNAL_ERROR",
            false,
        ),
    ];
    for (what, event, marker, why, breach) in cases {
        let a = streaming(refuse_all()).await;
        let (_gw, http) = gateway(vec![a2a_agent("s", &a.agent.base)], |_| {}).await;
        let base = http.base.clone();
        let mut creator = creating(&a, &base, Via::RestPost, None, "TASK_STATE_WORKING").await;
        let mut rpc_sub = open(&base, "s", Via::Rpc(3), Some("t-1"), None)
            .await
            .expect("joins");
        next_response(&mut rpc_sub, Via::Rpc(3))
            .await
            .expect("task");
        a.feed.send(event).await.expect("streams");
        for (via, s) in [(Via::RestPost, &mut creator), (Via::Rpc(3), &mut rpc_sub)] {
            let e = s.next_event(WAIT).await.expect("an ending");
            assert_eq!(e.event, "error", "{what}, {via:?}: {e:?}");
            let doc: Value = serde_json::from_str(&e.data).expect("JSON");
            let got = match via {
                Via::Rpc(id) => {
                    assert_eq!(doc["id"], id, "{doc}");
                    reason(&doc).to_owned()
                }
                _ => doc["error"]["details"][0]["reason"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            };
            assert_eq!(got, why, "{what}, {via:?}: {doc}");
            assert!(!s.raw.contains(marker), "{what}: never relayed: {}", s.raw);
            assert!(s.until_end(WAIT).await, "{what}, {via:?}: the stream ends");
        }
        assert_eq!(
            http.metric(
                "a2a_gateway_stream_upstream_errors_total",
                &[("agent", "s")]
            )
            .await,
            if breach { 1.0 } else { 0.0 },
            "{what}"
        );
        // The ledger kept what came before.
        let listed = http.get("/tasks?agent=s").await.json();
        assert_eq!(listed["total_size"], 1, "{what}: {listed}");
        assert_eq!(
            listed["tasks"][0]["status"], "TASK_STATE_WORKING",
            "{what}: {listed}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_the_ledger_holds_final_is_not_moved_by_the_stream() {
    // GetTask (a client asking while the stream runs) learns the task completed.
    let other: Other = Arc::new(|method, _| match method {
        "GetTask" => Answer::Result(task("t-1", "ctx-1", "TASK_STATE_COMPLETED")),
        _ => Answer::Status(500, b"not scripted".to_vec()),
    });
    let a = streaming(other).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &a.agent.base)], |_| {}).await;
    let base = http.base.clone();
    let mut events = Events::new(http.open("/events").await);
    let mut s = creating(&a, &base, Via::RestPost, None, "TASK_STATE_SUBMITTED").await;
    let got = rest(&http, Method::GET, "/agents/s/tasks/t-1", None, None).await;
    assert_eq!(got.json()["status"]["state"], "TASK_STATE_COMPLETED");
    // The agent's stream, behind: the ledger refuses it, no subscriber sees it.
    a.feed
        .send(status("t-1", "TASK_STATE_WORKING"))
        .await
        .expect("streams");
    let seen = rest_of(&mut s, Via::RestPost).await;
    assert_eq!(
        seen,
        ["task:TASK_STATE_COMPLETED"],
        "the final task, then the end"
    );
    assert!(s.ended);
    refused_past_end(&http, "the refusal counted").await;
    // On /events, the refusal in A2A's words.
    loop {
        let e = events
            .next_event(WAIT)
            .await
            .expect("the refusal on /events");
        if e.event == "task.transition.refused" {
            let d: Value = serde_json::from_str(&e.data).expect("json");
            assert_eq!(d["protocol"], "a2a", "{d}");
            assert_eq!(d["task_id"], "t-1", "{d}");
            assert_eq!(d["recorded"], "TASK_STATE_COMPLETED", "{d}");
            assert_eq!(d["offered"], "TASK_STATE_WORKING", "{d}");
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn streams_keep_ownership_the_streams_right_and_max_streams() {
    let subscribes = Arc::new(AtomicUsize::new(0));
    let seen = subscribes.clone();
    let other: Other = Arc::new(move |method, _| {
        if method == "SubscribeToTask" {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        Answer::Status(500, b"not scripted".to_vec())
    });
    let a = streaming(other).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &a.agent.base)], |cfg| {
        use Right::*;
        let mut alice = client("alice", ALICE, &["*"], &[Tasks, Streams]);
        alice.max_streams = 1;
        cfg.clients = vec![alice, client("bob", BOB, &["*"], &[Tasks])];
    })
    .await;
    let base = http.base.clone();
    let _mine = creating(&a, &base, Via::RestPost, Some(ALICE), "TASK_STATE_WORKING").await;
    // Alice's one slot is taken.
    let (status, body) = open(&base, "s", Via::RestGet, Some("t-1"), Some(ALICE))
        .await
        .expect_err("no second stream");
    assert_eq!(status, 429, "{body}");
    assert_eq!(
        body["error"]["details"][0]["reason"], "TOO_MANY_STREAMS",
        "{body}"
    );
    // Over JSON-RPC too, at the agent's endpoint and at /a2a: 429 kept, the call's own id.
    for via in [Via::Rpc(7), Via::Fleet(8)] {
        let (status, body) = open(&base, "s", via, Some("t-1"), Some(ALICE))
            .await
            .expect_err("no second stream");
        assert_eq!(status, 429, "{via:?}: {body}");
        assert_eq!(reason(&body), "TOO_MANY_STREAMS", "{via:?}: {body}");
        assert_eq!(error_code(&body), -32000, "{via:?}: {body}");
        let id = match via {
            Via::Rpc(id) | Via::Fleet(id) => id,
            _ => unreachable!(),
        };
        assert_eq!(body["id"], id, "{via:?}: {body}");
    }
    // Bob lacks `streams`.
    let (status, body) = open(&base, "s", Via::Rpc(2), Some("t-1"), Some(BOB))
        .await
        .expect_err("refused");
    assert_eq!(status, 200);
    assert_eq!(reason(&body), "FORBIDDEN", "{body}");
    // With `streams`, alice's task is still not bob's to follow: not found, as unknown.
    let v = rpc(&http, "s", Some(BOB), "GetTask", json!({"id": "t-1"})).await;
    assert_eq!(error_code(&v), -32001, "{v}");
    assert_eq!(subscribes.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_clients_task_is_not_found_and_not_a_stream() {
    let a = streaming(refuse_all()).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &a.agent.base)], |cfg| {
        use Right::*;
        cfg.clients = vec![
            client("alice", ALICE, &["*"], &[Tasks, Streams]),
            client("bob", BOB, &["*"], &[Tasks, Streams]),
        ];
    })
    .await;
    let base = http.base.clone();
    let _mine = creating(&a, &base, Via::Rpc(1), Some(ALICE), "TASK_STATE_WORKING").await;
    let (status, body) = open(&base, "s", Via::RestPost, Some("t-1"), Some(BOB))
        .await
        .expect_err("not bob's");
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
    let (_, body) = open(&base, "s", Via::Fleet(4), Some("t-1"), Some(BOB))
        .await
        .expect_err("not bob's");
    assert_eq!(error_code(&body), -32001, "{body}");
    let (_, unknown) = open(&base, "s", Via::Rpc(4), Some("t-nope"), Some(BOB))
        .await
        .expect_err("unknown");
    assert_eq!(
        unknown["error"]["message"]
            .as_str()
            .map(|m| m.replace("t-nope", "t-1")),
        body["error"]["message"].as_str().map(str::to_owned),
        "worded alike"
    );
    assert_eq!(a.agent.methods(), ["SendStreamingMessage"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn both_sdks_stream_through_the_gateway_over_both_bindings_as_direct() {
    let rpc_agent = SdkAgent::start(JSONRPC);
    let rest_agent = SdkAgent::start(HTTP_JSON);
    let (_gw, http) = gateway(
        vec![
            a2a_agent("rpc", &rpc_agent.base),
            a2a_agent("rest", &rest_agent.base),
        ],
        |_| {},
    )
    .await;
    let card = |n: &str| card_url(&http, n);
    assert_eq!(
        http.get("/agents/rpc/.well-known/agent-card.json")
            .await
            .json()["capabilities"]["streaming"],
        true,
        "the served card says the gateway streams"
    );
    let scenarios: &[&str] = &["stream", "subscribe"];
    let urls = [card("rpc"), card("rest")];
    let runs: Vec<Run<'_>> = [Sdk::Python, Sdk::Js]
        .into_iter()
        .flat_map(|sdk| {
            urls.iter().flat_map(move |u| {
                [JSONRPC, HTTP_JSON].map(|b| (sdk, u.as_str(), b, None, scenarios))
            })
        })
        .collect();
    let outs = tokio::task::block_in_place(|| run_clients(&runs));
    assert_eq!(outs.len(), 8);
    for out in &outs {
        for s in scenarios {
            let doc = &out["scenarios"][s];
            assert_eq!(doc["result"], expected(s), "{s}: {doc}");
        }
    }
    // Through the gateway, each SubscribeToTask took one upstream stream of the agent.
    let subscribes = |a: &SdkAgent| {
        a.recorded()
            .iter()
            .filter(|r| {
                r["body"]["method"] == "SubscribeToTask"
                    || r["path"]
                        .as_str()
                        .is_some_and(|p| p.ends_with(":subscribe"))
            })
            .count()
    };
    assert_eq!(subscribes(&rpc_agent) + subscribes(&rest_agent), 8);
}

/// How the gateway ends the followers' streams.
enum End {
    /// A reload that removes their client.
    Revoke,
    /// A shutdown's drain.
    Drain,
}

/// Four SDK clients (both SDKs, both bindings) following task `t-1` as alice, until the
/// gateway ends their streams (`end`): each saw the task first, then raised an error naming
/// the ending's reason.
async fn sdk_followers_see(end: End, why: &str) {
    let a = streaming(refuse_all()).await;
    let (gw, http) = gateway(vec![a2a_agent("s", &a.agent.base)], |cfg| {
        use Right::*;
        cfg.clients = vec![client("alice", ALICE, &["*"], &[Tasks, Streams])];
    })
    .await;
    let base = http.base.clone();
    let _creator = creating(&a, &base, Via::RestPost, Some(ALICE), "TASK_STATE_WORKING").await;
    let url = card_url(&http, "s");
    let followers: Vec<_> = [Sdk::Python, Sdk::Js]
        .into_iter()
        .flat_map(|sdk| [JSONRPC, HTTP_JSON].map(|b| (sdk, b)))
        .map(|(sdk, binding)| {
            let url = url.clone();
            std::thread::spawn(move || {
                run_client_with(
                    sdk,
                    &url,
                    binding,
                    Some(ALICE),
                    &["--task", "t-1"],
                    &["follow"],
                )
            })
        })
        .collect();
    let subs = gw.metrics().stream_subscribers.clone();
    crate::support::wait_for_within("four SDK subscribers", Duration::from_secs(40), || {
        let n = subs.get();
        async move { n == 5 }
    })
    .await;
    match end {
        End::Revoke => {
            let mut cfg = (*gw.config()).clone();
            cfg.clients = vec![client("bob", BOB, &["*"], &[Right::Tasks])];
            gw.reload(cfg).await.expect("reloaded");
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(60)).await;
                drop(gw);
            });
        }
        End::Drain => {
            tokio::spawn(gw.shutdown());
        }
    }
    for f in followers {
        let out = tokio::task::block_in_place(|| f.join().expect("a follower"));
        let r = &out["result"];
        assert_eq!(r["events"][0]["kind"], "task", "the task first: {out}");
        let err = &r["error"];
        assert!(
            err.is_object(),
            "the SDK raised an error, not garbage or a clean end: {out}"
        );
        assert!(
            err.to_string().contains(why),
            "the SDK's error names {why}: {out}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn both_sdks_read_a_revoked_stream_as_an_error() {
    sdk_followers_see(End::Revoke, "ACCESS_REVOKED").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn both_sdks_read_a_drain_as_an_error() {
    sdk_followers_see(End::Drain, "DRAINING").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdk_agents_stream_is_relayed_to_a_subscriber_in_order() {
    // The a2a-sdk agent's "hello slowly": SubscribeToTask gets the task first, then the rest.
    let agent = SdkAgent::start(JSONRPC);
    let (_gw, http) = gateway(vec![a2a_agent("rpc", &agent.base)], |_| {}).await;
    let sent = rpc(
        &http,
        "rpc",
        None,
        "SendMessage",
        json!({"message": message("hello slowly", json!({}))["message"],
            "configuration": {"returnImmediately": true}}),
    )
    .await;
    let id = sent["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    let mut s = open(&http.base, "rpc", Via::RestPost, Some(&id), None)
        .await
        .expect("a stream");
    let seen = rest_of(&mut s, Via::RestPost).await;
    assert!(
        seen.first().is_some_and(|k| k.starts_with("task:")),
        "{seen:?}"
    );
    assert_eq!(
        seen.last().map(String::as_str),
        Some("status:TASK_STATE_COMPLETED"),
        "{seen:?}"
    );
    let t = rpc(&http, "rpc", None, "GetTask", json!({ "id": id })).await;
    assert_eq!(
        t["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{t}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_does_not_stream_is_not_asked_to() {
    let agent = ScriptedAgent::start(Arc::new(|_, _| {
        Answer::Status(500, b"not scripted".to_vec())
    }))
    .await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], |_| {}).await;
    let card = http
        .get("/agents/s/.well-known/agent-card.json")
        .await
        .json();
    assert_eq!(card["capabilities"]["streaming"], false, "{card}");
    let (status, body) = open(&http.base, "s", Via::Rpc(1), None, None)
        .await
        .expect_err("not a stream");
    assert_eq!(status, 200);
    assert_eq!(error_code(&body), -32004, "{body}");
    let (status, body) = open(&http.base, "s", Via::RestPost, None, None)
        .await
        .expect_err("not a stream");
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["details"][0]["reason"],
        "UNSUPPORTED_OPERATION"
    );
    assert!(agent.methods().is_empty(), "{:?}", agent.methods());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jsonrpc_connection_that_does_not_subscribe_is_served_and_kept_alive() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let a = streaming(refuse_all()).await;
    let (gw, _http) = gateway(vec![a2a_agent("s", &a.agent.base)], |_| {}).await;
    let mut socket = tokio::net::TcpStream::connect(gw.addr())
        .await
        .expect("connect");
    for (i, path) in ["/a2a", "/agents/s/jsonrpc", "/a2a"]
        .into_iter()
        .enumerate()
    {
        let body = json!({"jsonrpc": "2.0", "id": i, "method": "GetTask",
            "params": {"id": "t-none", "tenant": "s"}})
        .to_string();
        let req = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\na2a-version: 1.0\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(req.as_bytes()).await.expect("write");
        // One answer, on the same connection each time.
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        let answer = loop {
            let n = tokio::time::timeout(WAIT, socket.read(&mut chunk))
                .await
                .expect("an answer in time")
                .expect("read");
            assert!(n > 0, "the connection stayed open for request {i}");
            got.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&got).into_owned();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .and_then(|v| v.trim().parse().ok())
                    .expect("a length");
                if body.len() >= len {
                    break (head.to_owned(), body[..len].to_owned());
                }
            }
        };
        assert!(answer.0.starts_with("HTTP/1.1 200"), "{answer:?}");
        assert!(!answer.0.contains("connection: close"), "{answer:?}");
        let doc: Value = serde_json::from_str(&answer.1).expect("JSON");
        assert_eq!(doc["id"], i, "{doc}");
        assert_eq!(error_code(&doc), -32001, "{doc}");
    }
    assert!(a.agent.methods().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscriber_too_far_behind_is_cut_with_slow_consumer() {
    let a = streaming(refuse_all()).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &a.agent.base)], |cfg| {
        cfg.streams.lag_bytes = 4096;
        cfg.streams.ping_interval = Duration::from_millis(200);
    })
    .await;
    let base = http.base.clone();
    let _creator = creating(&a, &base, Via::RestPost, None, "TASK_STATE_WORKING").await;
    // Over HTTP/2, where cutting the connection would cut every stream on it: the subscriber
    // is cut when its stream is next polled.
    let mut slow = open_over(&base, "s", Via::Rpc(8), Some("t-1"), None, true)
        .await
        .expect("joins");
    next_response(&mut slow, Via::Rpc(8)).await.expect("task");
    // It stops reading while the agent sends far more than the window and the lag bound.
    let big = "x".repeat(2000);
    for i in 0..200 {
        a.feed
            .send(artifact("t-1", &format!("{i} {big}")))
            .await
            .expect("streams");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut ending = None;
    while let Some(e) = slow.next_event(WAIT).await {
        if e.event == "error" {
            ending = Some(e);
            break;
        }
    }
    let e = ending.expect("an event: error before the end");
    let doc: Value = serde_json::from_str(&e.data).expect("JSON");
    assert_eq!(doc["id"], 8, "{doc}");
    assert_eq!(reason(&doc), "SLOW_CONSUMER", "{doc}");
    assert!(slow.until_end(WAIT).await, "the stream ends after it");
    assert!(
        http.metric("a2a_gateway_stream_slow_consumer_disconnects_total", &[])
            .await
            >= 1.0,
        "counted"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_on_redis_each_stream_the_task_once_and_final_stays_final() {
    let redis = crate::support::redis_server::RedisServer::start();
    // The second replica subscribes the agent itself (it has no stream of the task).
    let (sub_tx, sub_answer) = events();
    let sub_answer = Arc::new(Mutex::new(Some(sub_answer)));
    let other: Other = Arc::new(move |method, _| match method {
        "SubscribeToTask" => sub_answer
            .lock()
            .expect("lock")
            .take()
            .unwrap_or(Answer::Status(500, b"one subscription".to_vec())),
        _ => Answer::Status(500, b"not scripted".to_vec()),
    });
    let a = streaming(other).await;
    let store = |cfg: &mut a2a_gateway::config::Config| {
        cfg.redis = Some(redis.config("a2a-streams"));
    };
    let (_g1, one) = gateway(vec![a2a_agent("s", &a.agent.base)], store).await;
    let (_g2, two) = gateway(vec![a2a_agent("s", &a.agent.base)], store).await;
    let mut on_one = creating(&a, &one.base, Via::RestPost, None, "TASK_STATE_SUBMITTED").await;
    let joined = tokio::spawn({
        let base = two.base.clone();
        async move { open(&base, "s", Via::Fleet(2), Some("t-1"), None).await }
    });
    sub_tx
        .send(json!({"task": task("t-1", "ctx-1", "TASK_STATE_SUBMITTED")}))
        .await
        .expect("the agent streams to the second replica");
    let mut on_two = joined
        .await
        .expect("joined")
        .expect("a stream on the second replica");
    assert_eq!(
        kind(
            &next_response(&mut on_two, Via::Fleet(2))
                .await
                .expect("task")
        ),
        "task:TASK_STATE_SUBMITTED"
    );
    // Both upstreams carry the work (the second's first); the first replica's the completion;
    // the second's lags behind it and then says WORKING again: the ledger they share refuses it.
    sub_tx
        .send(status("t-1", "TASK_STATE_WORKING"))
        .await
        .expect("streams");
    assert_eq!(
        kind(
            &next_response(&mut on_two, Via::Fleet(2))
                .await
                .expect("work")
        ),
        "status:TASK_STATE_WORKING"
    );
    a.feed
        .send(status("t-1", "TASK_STATE_WORKING"))
        .await
        .expect("streams");
    a.feed
        .send(status("t-1", "TASK_STATE_COMPLETED"))
        .await
        .expect("streams");
    assert_eq!(
        rest_of(&mut on_one, Via::RestPost).await,
        ["status:TASK_STATE_WORKING", "status:TASK_STATE_COMPLETED"]
    );
    let listed = one.get("/tasks?agent=s").await.json();
    assert_eq!(
        listed["tasks"][0]["status"], "TASK_STATE_COMPLETED",
        "{listed}"
    );
    sub_tx
        .send(status("t-1", "TASK_STATE_WORKING"))
        .await
        .expect("streams");
    // The second replica's subscriber: the completion it heard of from the ledger (the change
    // feed), never a WORKING after it.
    assert_eq!(
        rest_of(&mut on_two, Via::Fleet(2)).await,
        ["task:TASK_STATE_COMPLETED"]
    );
    let listed = two.get("/tasks?agent=s").await.json();
    assert_eq!(
        listed["tasks"][0]["status"], "TASK_STATE_COMPLETED",
        "{listed}"
    );
    let methods = a.agent.methods();
    assert_eq!(
        methods,
        ["SendStreamingMessage", "SubscribeToTask"],
        "one upstream per replica"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_stream_that_keeps_ending_before_the_task_is_given_up_on() {
    // Each SubscribeToTask sends the task (still WORKING) and closes at once.
    let other: Other = Arc::new(|method, _| match method {
        "SubscribeToTask" => {
            let (tx, answer) = events();
            let _ = tx.try_send(json!({"task": task("t-1", "ctx-1", "TASK_STATE_WORKING")}));
            answer
        }
        _ => Answer::Status(500, b"not scripted".to_vec()),
    });
    let Streaming { agent, feed } = streaming(other).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], |_| {}).await;
    let a = Streaming { agent, feed };
    let mut s = creating(&a, &http.base, Via::Rpc(4), None, "TASK_STATE_WORKING").await;
    // The creator's stream ends with the task live.
    let Streaming { agent, feed } = a;
    drop(feed);
    let mut ending = None;
    while let Some(e) = s.next_event(Duration::from_secs(15)).await {
        if e.event == "error" {
            ending = Some(e);
            break;
        }
    }
    let e = ending.expect("given up on, with an ending");
    let doc: Value = serde_json::from_str(&e.data).expect("JSON");
    assert_eq!(reason(&doc), "UPSTREAM_ERROR", "{doc}");
    assert!(s.until_end(WAIT).await);
    let subscribes = agent
        .methods()
        .iter()
        .filter(|m| *m == "SubscribeToTask")
        .count();
    assert_eq!(
        subscribes,
        3,
        "three tries, not forever: {:?}",
        agent.methods()
    );
    assert_eq!(
        http.metric("a2a_gateway_stream_upstream_reconnects_total", &[])
            .await,
        3.0
    );
}

/// The agent behind a live stream killed (its connections cut mid-stream, new ones refused),
/// and back `after` the cut, answering SubscribeToTask with the task WORKING, then COMPLETED:
/// what the creator's stream reads after the cut (events' names and data), how many times the
/// gateway subscribed again, and how long the stream took to end.
async fn killed_mid_stream(after: Option<Duration>) -> (Vec<(String, Value)>, usize, Duration) {
    let other: Other = Arc::new(|method, _| match method {
        "SubscribeToTask" => {
            let (tx, answer) = events();
            let _ = tx.try_send(json!({"task": task("t-1", "ctx-1", "TASK_STATE_WORKING")}));
            let _ = tx.try_send(status("t-1", "TASK_STATE_COMPLETED"));
            answer
        }
        _ => Answer::Status(500, b"not scripted".to_vec()),
    });
    let Streaming { agent, feed } = streaming(other).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], |_| {}).await;
    let a = Streaming { agent, feed };
    let mut s = creating(&a, &http.base, Via::Rpc(4), None, "TASK_STATE_WORKING").await;
    let Streaming { mut agent, feed } = a;
    let cut = std::time::Instant::now();
    agent.kill();
    drop(feed);
    if let Some(after) = after {
        tokio::time::sleep(after).await;
        agent.revive().await;
    }
    let mut seen = Vec::new();
    while let Some(e) = s.next_event(Duration::from_secs(15)).await {
        let doc: Value = serde_json::from_str(&e.data).expect("JSON");
        seen.push((e.event, doc));
    }
    let took = cut.elapsed();
    let subscribes = agent
        .methods()
        .iter()
        .filter(|m| *m == "SubscribeToTask")
        .count();
    (seen, subscribes, took)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_killed_mid_stream_and_back_within_the_tries_is_subscribed_to_again() {
    // Cut, then back 600 ms later: the tries at 250 ms (refused) and 750 ms (answered).
    let (seen, subscribes, _) = killed_mid_stream(Some(Duration::from_millis(600))).await;
    assert_eq!(
        subscribes, 1,
        "one SubscribeToTask reached the agent once it was back"
    );
    let kinds: Vec<String> = seen
        .iter()
        .map(|(event, doc)| match event.as_str() {
            "message" => kind(&doc["result"]),
            other => format!("{other}:{doc}"),
        })
        .collect();
    assert_eq!(
        kinds,
        ["status:TASK_STATE_COMPLETED"],
        "the completion read through a new subscription, no error, no Task again"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_killed_mid_stream_for_good_is_tried_three_times_before_upstream_error() {
    let (seen, subscribes, took) = killed_mid_stream(None).await;
    assert_eq!(subscribes, 0, "the agent was never back");
    let (event, doc) = seen.last().expect("an ending");
    assert_eq!(event, "error", "{seen:?}");
    assert_eq!(reason(doc), "UPSTREAM_ERROR", "{doc}");
    assert!(
        !doc.to_string().contains("127.0.0.1"),
        "no agent address in the ending: {doc}"
    );
    // 250 + 500 + 1000 ms of waits before the three tries, not an ending at the cut.
    assert!(
        took >= Duration::from_millis(1700),
        "three tries with 250 ms doubling before giving up: ended after {took:?}"
    );
}
