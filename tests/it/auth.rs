//! Who may call what (client identity, rights, ownership), on every route family and every
//! connection path: hyper's HTTP/1.1, HTTP/2 (h2c), and the lean HTTP/1.1 stream path. The
//! outcomes: 401 without or with wrong credentials, 403 outside a client's rights or agents,
//! 404 for another client's task, 429 past `max_streams`. Also: credentials stay at the edge,
//! `/events` carries only the caller's tasks, idempotency keys are per client, CORS, and
//! ownership across two replicas on one Redis.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Method;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use a2a_gateway::config::{ClientConfig, Config, CorsConfig, Right, Secret};
use sample::{NewArtifact, Route, SampleAgent};

use crate::support::sse::Events;
use crate::support::*;

const ALICE: &str = "alice-key-0123456789abcdef";
const BOB: &str = "bob-key-0123456789abcdef";
const OPS: &str = "ops-key-0123456789abcdef";
const PEEK: &str = "peek-key-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(10);

pub fn sha(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn client(name: &str, key: &str, agents: &[&str], can: &[Right]) -> ClientConfig {
    ClientConfig {
        name: name.into(),
        key_sha256: Some(sha(key)),
        agents: agents.iter().map(|a| a.to_string()).collect(),
        can: can.to_vec(),
        max_streams: 100,
        ..ClientConfig::default()
    }
}

/// alice: agent a only, tasks + streams, two streams at most. bob: every agent, tasks, streams,
/// events. ops: everything. peek: metrics only.
fn clients(cfg: &mut Config) {
    use Right::*;
    let mut alice = client("alice", ALICE, &["a"], &[Tasks, Streams]);
    alice.max_streams = 2;
    cfg.clients = vec![
        alice,
        client("bob", BOB, &["*"], &[Tasks, Streams, Events]),
        client(
            "ops",
            OPS,
            &["*"],
            &[Tasks, Streams, Events, AllTasks, Metrics, Admin],
        ),
        client("peek", PEEK, &["*"], &[Metrics]),
    ];
    ingest(cfg);
}

async fn two_agents(tweak: impl FnOnce(&mut Config)) -> (SampleAgent, SampleAgent, TestGateway) {
    let (a, b) = (agent().await, agent().await);
    let g = TestGateway::start(&[("a", &a), ("b", &b)], tweak).await;
    g.ready().await;
    (a, b, g)
}

/// A request as `key`'s client (no credentials with `None`).
async fn call(
    g: &TestGateway,
    method: Method,
    path: &str,
    key: Option<&str>,
    body: &Value,
) -> Resp {
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = auth.as_deref() {
        headers.push(("authorization", a));
    }
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(serde_json::to_vec(body).expect("json"))
    };
    g.http.send(method, path, &headers, body).await
}

async fn get(g: &TestGateway, path: &str, key: Option<&str>) -> Resp {
    call(g, Method::GET, path, key, &Value::Null).await
}

async fn create(g: &TestGateway, agent: &str, key: &str) -> String {
    let r = call(
        g,
        Method::POST,
        &format!("/agents/{agent}/tasks"),
        Some(key),
        &json!({ "input": good_input() }),
    )
    .await;
    assert_eq!(r.status, 202, "{r:?}");
    r.json()["task_id"].as_str().expect("task_id").to_owned()
}

/// A GET on the lean stream path (an HTTP/1.1 stream request from the first bytes): status and
/// body, read until the server closes (or `wait` passes, for a stream that stays open).
async fn lean(g: &TestGateway, path: &str, auth: Option<&str>, wait: Duration) -> RawResp {
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: gw\r\nAccept: text/event-stream\r\n");
    if let Some(k) = auth {
        head.push_str(&format!("Authorization: Bearer {k}\r\n"));
    }
    head.push_str("\r\n");
    let mut tcp = tokio::net::TcpStream::connect(g.gw.addr())
        .await
        .expect("connect");
    tcp.write_all(head.as_bytes()).await.expect("head");
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(wait, tcp.read_to_end(&mut raw)).await;
    parse_raw_response(&raw)
}

/// A GET over HTTP/2 (h2c): status and body (the head only for a stream that stays open).
async fn h2(g: &TestGateway, path: &str, key: Option<&str>) -> (u16, Bytes) {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let mut req = hyper::Request::get(format!("{}{path}", g.http.base));
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let res = client
        .request(req.body(Full::new(Bytes::new())).expect("request"))
        .await
        .expect("h2 request");
    assert_eq!(res.version(), hyper::Version::HTTP_2);
    let status = res.status().as_u16();
    if status == 200 {
        return (status, Bytes::new());
    }
    (
        status,
        res.into_body().collect().await.expect("body").to_bytes(),
    )
}

fn code_of(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).expect("JSON error body");
    v["error"]["code"].as_str().expect("code").to_owned()
}

#[tokio::test]
async fn every_route_family_refuses_missing_and_wrong_credentials() {
    let (a, _b, g) = two_agents(clients).await;
    let id = create(&g, "a", ALICE).await;
    let art = a.add_artifact(&id, NewArtifact::Text("hi".into()));
    let routes: Vec<(Method, String)> = vec![
        (Method::POST, "/agents/a/tasks".into()),
        (Method::POST, "/tasks".into()),
        (Method::GET, format!("/tasks/{id}")),
        (Method::GET, format!("/agents/a/tasks/{id}")),
        (Method::POST, format!("/tasks/{id}/cancel")),
        (Method::GET, format!("/tasks/{id}/artifacts")),
        (Method::GET, format!("/artifacts/{art}/content")),
        (Method::GET, "/agents".into()),
        (Method::GET, "/agents/a/agent-card.json".into()),
        (Method::GET, "/metrics".into()),
        (Method::GET, "/events".into()),
        (Method::GET, "/admin/subscribers".into()),
        (Method::GET, "/admin/dead-letters".into()),
    ];
    for (m, path) in &routes {
        for key in [None, Some("not-a-key-of-anyone"), Some("")] {
            let r = call(&g, m.clone(), path, key, &json!({"input": good_input()})).await;
            assert_api_error(&r, 401, "UNAUTHORIZED");
            let challenge = r.header("www-authenticate").expect("challenge");
            assert!(challenge.starts_with("Bearer"), "{m} {path}: {challenge}");
            if key.is_some_and(|k| !k.is_empty()) {
                assert!(challenge.contains("invalid_token"), "{challenge}");
            }
        }
    }
    // A scheme other than Bearer is refused, not ignored.
    let r = g
        .http
        .send(
            Method::GET,
            "/agents",
            &[("authorization", "Basic YWxpY2U6eA==")],
            Bytes::new(),
        )
        .await;
    assert_api_error(&r, 401, "UNAUTHORIZED");
    // Task streams, on every path: the lean HTTP/1.1 path, HTTP/2, and hyper's HTTP/1.1
    // (a request the lean path does not take: HTTP/1.0).
    let stream = format!("/agents/a/tasks/{id}/stream");
    for auth in [None, Some("wrong")] {
        let r = lean(&g, &stream, auth, WAIT).await;
        assert_eq!(r.status, 401, "lean: {r:?}");
        assert_eq!(r.json()["error"]["code"], "UNAUTHORIZED");
        let (status, body) = h2(&g, &stream, auth).await;
        assert_eq!((status, code_of(&body).as_str()), (401, "UNAUTHORIZED"));
    }
    let r = lean(&g, &format!("{stream}?access_token=wrong"), None, WAIT).await;
    assert_eq!(r.status, 401);
    let r = raw_request(
        g.gw.addr(),
        &format!("GET {stream} HTTP/1.0\r\nHost: gw\r\n\r\n"),
        b"",
    )
    .await;
    assert_eq!(r.status, 401, "HTTP/1.0 through hyper: {r:?}");
    // The probes need nothing, and say nothing about agents.
    assert_eq!(get(&g, "/healthz", None).await.status, 200);
    let ready = get(&g, "/readyz", None).await;
    assert_eq!(ready.status, 200);
    let body = ready.json();
    assert_eq!(body, json!({ "ready": true, "missing": [] }));
    // Pushes still take the agent's ingest token, and only that.
    let working = a.set_status(&id, "WORKING", Value::Null).expect("task");
    assert_eq!(g.http.push_task("a", TOKEN, &working).await.status, 202);
    let failures = |reason: &'static str| {
        let g = &g;
        async move {
            get(g, "/metrics", Some(OPS))
                .await
                .body
                .to_vec()
                .pipe_metric("a2a_gateway_auth_failures_total", &[("reason", reason)])
        }
    };
    let missing = failures("missing").await;
    let invalid = failures("invalid").await;
    // No credentials: each route, then a stream on the lean path, over HTTP/2 and HTTP/1.0.
    assert_eq!(missing, (routes.len() + 3) as f64);
    // A wrong key and an empty bearer on each route; Basic; a wrong key on the lean path, over
    // HTTP/2, and in ?access_token=.
    assert_eq!(invalid, (routes.len() * 2 + 4) as f64);
}

/// `metric_value` on a scrape body.
trait PipeMetric {
    fn pipe_metric(self, family: &str, labels: &[(&str, &str)]) -> f64;
}

impl PipeMetric for Vec<u8> {
    fn pipe_metric(self, family: &str, labels: &[(&str, &str)]) -> f64 {
        metric_value(&String::from_utf8(self).expect("utf8"), family, labels)
    }
}

#[tokio::test]
async fn rights_and_agents_are_enforced_with_403() {
    let (_a, _b, g) = two_agents(clients).await;
    let body = json!({ "input": good_input() });
    // Outside alice's agents: the route's agent, the body's agent, the card.
    let r = call(&g, Method::POST, "/agents/b/tasks", Some(ALICE), &body).await;
    assert_api_error(&r, 403, "FORBIDDEN");
    let r = call(
        &g,
        Method::POST,
        "/tasks",
        Some(ALICE),
        &json!({ "agent": "b", "input": good_input() }),
    )
    .await;
    assert_api_error(&r, 403, "FORBIDDEN");
    assert_api_error(
        &get(&g, "/agents/b/agent-card.json", Some(ALICE)).await,
        403,
        "FORBIDDEN",
    );
    assert_eq!(
        get(&g, "/agents/a/agent-card.json", Some(ALICE))
            .await
            .status,
        200
    );
    // The catalog lists only alice's agents.
    let names = |r: Resp| -> Vec<String> {
        r.json()["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .map(|a| a["name"].as_str().expect("name").to_owned())
            .collect()
    };
    assert_eq!(names(get(&g, "/agents", Some(ALICE)).await), ["a"]);
    assert_eq!(names(get(&g, "/agents", Some(BOB)).await), ["a", "b"]);
    // Rights alice lacks.
    for path in [
        "/events",
        "/metrics",
        "/admin/subscribers",
        "/admin/dead-letters",
    ] {
        assert_api_error(&get(&g, path, Some(ALICE)).await, 403, "FORBIDDEN");
    }
    assert_api_error(
        &call(
            &g,
            Method::POST,
            "/admin/dead-letters/redrive",
            Some(BOB),
            &json!({}),
        )
        .await,
        403,
        "FORBIDDEN",
    );
    // peek scrapes and does nothing else.
    assert_eq!(get(&g, "/metrics", Some(PEEK)).await.status, 200);
    assert_api_error(
        &call(&g, Method::POST, "/agents/a/tasks", Some(PEEK), &body).await,
        403,
        "FORBIDDEN",
    );
    // ops administers.
    assert_eq!(get(&g, "/admin/subscribers", Some(OPS)).await.status, 200);
    let text = get(&g, "/metrics", Some(OPS)).await.body.to_vec();
    let forbidden = text.clone().pipe_metric(
        "a2a_gateway_auth_failures_total",
        &[("reason", "forbidden")],
    );
    assert!(forbidden >= 9.0, "{forbidden}");
    // Request metrics carry the client, a bounded label.
    let alice_403 = text.pipe_metric(
        "a2a_gateway_requests_total",
        &[("client", "alice"), ("status", "403")],
    );
    assert!(alice_403 >= 7.0, "{alice_403}");
}

#[tokio::test]
async fn tasks_belong_to_their_creator_on_every_route_and_path() {
    let (a, _b, g) = two_agents(clients).await;
    let bobs = create(&g, "a", BOB).await;
    let art = a.add_artifact(&bobs, NewArtifact::Text("bob's".into()));
    // bob lists his task's artifacts: the gateway learns which task the artifact belongs to.
    assert_eq!(
        get(&g, &format!("/tasks/{bobs}/artifacts"), Some(BOB))
            .await
            .status,
        200
    );
    for path in [
        format!("/tasks/{bobs}"),
        format!("/agents/a/tasks/{bobs}"),
        format!("/tasks/{bobs}/artifacts"),
        format!("/agents/a/tasks/{bobs}/artifacts"),
    ] {
        assert_api_error(&get(&g, &path, Some(ALICE)).await, 404, "TASK_NOT_FOUND");
        assert_eq!(get(&g, &path, Some(BOB)).await.status, 200, "{path}");
        assert_eq!(
            get(&g, &path, Some(OPS)).await.status,
            200,
            "{path}: all_tasks"
        );
    }
    for path in [
        format!("/tasks/{bobs}/cancel"),
        format!("/agents/a/tasks/{bobs}/cancel"),
    ] {
        let r = call(&g, Method::POST, &path, Some(ALICE), &Value::Null).await;
        assert_api_error(&r, 404, "TASK_NOT_FOUND");
    }
    for path in [
        format!("/artifacts/{art}/content"),
        format!("/agents/a/artifacts/{art}/content"),
    ] {
        assert_api_error(
            &get(&g, &path, Some(ALICE)).await,
            404,
            "ARTIFACT_NOT_FOUND",
        );
        let r = get(&g, &path, Some(BOB)).await;
        assert_eq!((r.status, &r.body[..]), (200, &b"bob's"[..]), "{path}");
    }
    // Streams, on the lean path (with ?access_token=) and over HTTP/2.
    for path in [
        format!("/tasks/{bobs}/stream"),
        format!("/agents/a/tasks/{bobs}/stream"),
    ] {
        let r = lean(&g, &format!("{path}?access_token={ALICE}"), None, WAIT).await;
        assert_eq!(
            (r.status, r.json()["error"]["code"].clone()),
            (404, json!("TASK_NOT_FOUND"))
        );
        let (status, body) = h2(&g, &path, Some(ALICE)).await;
        assert_eq!((status, code_of(&body).as_str()), (404, "TASK_NOT_FOUND"));
        let (status, _) = h2(&g, &path, Some(BOB)).await;
        assert_eq!(status, 200, "bob streams his own task");
    }
    // The agent's cancel was never called for alice.
    assert_eq!(a.request_count(Route::CancelTask), 0);
    // A task the gateway first saw in a push has no owner: only all_tasks clients see it.
    let direct = Http::new(a.base_url())
        .post_json("/tasks", &json!({ "input": good_input() }))
        .await;
    let unowned = direct.json()["task_id"].as_str().expect("id").to_owned();
    let doc = a.task(&unowned).expect("agent has it");
    assert_eq!(g.http.push_task("a", TOKEN, &doc).await.status, 202);
    assert_api_error(
        &get(&g, &format!("/tasks/{unowned}"), Some(BOB)).await,
        404,
        "TASK_NOT_FOUND",
    );
    assert_eq!(
        get(&g, &format!("/tasks/{unowned}"), Some(OPS))
            .await
            .status,
        200
    );
    let not_owner = get(&g, "/metrics", Some(OPS))
        .await
        .body
        .to_vec()
        .pipe_metric(
            "a2a_gateway_auth_failures_total",
            &[("reason", "not_owner")],
        );
    assert!(not_owner >= 11.0, "{not_owner}");
}

#[tokio::test]
async fn credentials_stay_at_the_edge() {
    let (a, b, g) = two_agents(|cfg| {
        clients(cfg);
        cfg.agents[0].upstream_auth_header = Some((
            hyper::header::AUTHORIZATION,
            Secret::new("Bearer agent-a-own-secret"),
        ));
    })
    .await;
    let id = create(&g, "a", ALICE).await;
    assert_eq!(
        get(&g, &format!("/tasks/{id}?x=1"), Some(ALICE))
            .await
            .status,
        200
    );
    // Two credentials in one request are refused, never one picked (issue 23).
    assert_api_error(
        &get(
            &g,
            &format!("/tasks/{id}?x=1&access_token={ALICE}"),
            Some(ALICE),
        )
        .await,
        400,
        "INVALID_REQUEST",
    );
    let r = lean(
        &g,
        &format!("/tasks/{id}/stream?access_token={ALICE}"),
        None,
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    let seen = a.requests();
    let routes: Vec<Route> = seen.iter().map(|r| r.route).collect();
    for want in [
        Route::Card,
        Route::CreateTask,
        Route::GetTask,
        Route::Stream,
    ] {
        assert!(routes.contains(&want), "{want:?} in {routes:?}");
    }
    for r in &seen {
        let auth = r.headers.get("authorization").and_then(|v| v.to_str().ok());
        assert_eq!(
            auth,
            Some("Bearer agent-a-own-secret"),
            "{:?} {}",
            r.route,
            r.path
        );
        let all = format!("{:?} {:?}", r.headers, r.query);
        assert!(
            !all.contains(ALICE),
            "the client's key reached the agent: {all}"
        );
    }
    let get_query = seen
        .iter()
        .find(|r| r.route == Route::GetTask)
        .and_then(|r| r.query.clone());
    assert_eq!(
        get_query.as_deref(),
        Some("x=1"),
        "the rest of the query goes on"
    );
    // An agent without an upstream_auth_header gets no Authorization at all.
    let (b_agent, b_id) = (&b, create(&g, "b", BOB).await);
    let to_b = b_agent.requests();
    assert!(
        to_b.iter()
            .any(|r| r.route == Route::CreateTask && r.body.len() > 2),
        "{b_id}"
    );
    assert!(to_b
        .iter()
        .all(|r| !r.headers.contains_key("authorization")));
}

#[tokio::test]
async fn a_client_over_its_max_streams_gets_429_until_one_closes() {
    let (_a, _b, g) = two_agents(clients).await;
    let (t1, t2, t3) = (
        create(&g, "a", ALICE).await,
        create(&g, "a", ALICE).await,
        create(&g, "a", ALICE).await,
    );
    // Two streams held open: one on the lean path, one over HTTP/2.
    let mut lean_tcp = tokio::net::TcpStream::connect(g.gw.addr())
        .await
        .expect("connect");
    lean_tcp
        .write_all(
            format!("GET /tasks/{t1}/stream?access_token={ALICE} HTTP/1.1\r\nHost: gw\r\n\r\n")
                .as_bytes(),
        )
        .await
        .expect("head");
    let mut first = [0u8; 12];
    lean_tcp.read_exact(&mut first).await.expect("answer");
    assert_eq!(&first, b"HTTP/1.1 200");
    let h2c: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let req = hyper::Request::get(format!("{}/tasks/{t2}/stream", g.http.base))
        .header("authorization", format!("Bearer {ALICE}"))
        .body(Full::new(Bytes::new()))
        .expect("request");
    let held = h2c.request(req).await.expect("h2 stream");
    assert_eq!(held.status(), 200);
    // A third, on either path, is refused; other clients are not affected.
    let r = lean(
        &g,
        &format!("/tasks/{t3}/stream?access_token={ALICE}"),
        None,
        WAIT,
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (429, json!("TOO_MANY_STREAMS"))
    );
    let (status, body) = h2(&g, &format!("/tasks/{t3}/stream"), Some(ALICE)).await;
    assert_eq!((status, code_of(&body).as_str()), (429, "TOO_MANY_STREAMS"));
    let (status, _) = h2(&g, &format!("/tasks/{t3}/stream"), Some(OPS)).await;
    assert_eq!(status, 200);
    let refused = get(&g, "/metrics", Some(OPS))
        .await
        .body
        .to_vec()
        .pipe_metric("a2a_gateway_streams_refused_total", &[("client", "alice")]);
    assert_eq!(refused, 2.0);
    // Closing one frees its slot.
    drop(lean_tcp);
    wait_for("a slot comes free", || async {
        let (status, _) = h2(&g, &format!("/tasks/{t3}/stream"), Some(ALICE)).await;
        status == 200
    })
    .await;
    drop(held);
}

/// `/events` and task streams share one `max_streams` budget.
#[tokio::test]
async fn events_count_against_max_streams() {
    const CAROL: &str = "carol-key-0123456789abcdef";
    let (_a, _b, g) = two_agents(|cfg| {
        clients(cfg);
        let mut carol = client(
            "carol",
            CAROL,
            &["*"],
            &[Right::Tasks, Right::Streams, Right::Events],
        );
        carol.max_streams = 1;
        cfg.clients.push(carol);
    })
    .await;
    let id = create(&g, "a", CAROL).await;
    let client = Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::get(format!("{}/events?access_token={CAROL}", g.http.base))
        .body(Full::new(Bytes::new()))
        .expect("request");
    let events = client.request(req).await.expect("events");
    assert_eq!(events.status(), 200);
    let r = get(&g, &format!("/events?access_token={CAROL}"), None).await;
    assert_api_error(&r, 429, "TOO_MANY_STREAMS");
    let r = lean(
        &g,
        &format!("/tasks/{id}/stream?access_token={CAROL}"),
        None,
        WAIT,
    )
    .await;
    assert_eq!(r.status, 429, "{r:?}");
    drop(events);
    wait_for("the /events slot comes free", || async {
        let (status, _) = h2(&g, &format!("/tasks/{id}/stream"), Some(CAROL)).await;
        status == 200
    })
    .await;
}

#[tokio::test]
async fn events_carry_only_the_callers_own_tasks_unless_all_tasks() {
    let (a, _b, g) = two_agents(clients).await;
    let open = |path: String| {
        let base = g.http.base.clone();
        async move {
            let client = Client::builder(TokioExecutor::new()).build_http();
            let req = hyper::Request::get(format!("{base}{path}"))
                .body(Full::new(Bytes::new()))
                .expect("request");
            Events::new(client.request(req).await.expect("events"))
        }
    };
    let mut bobs = open(format!("/events?access_token={BOB}")).await;
    let mut all = open(format!("/events?access_token={OPS}")).await;
    let alices = create(&g, "a", ALICE).await;
    let bob_task = create(&g, "b", BOB).await;
    let mut seen_all = Vec::new();
    while seen_all.len() < 2 {
        let e = all.next_event(WAIT).await.expect("ops hears every change");
        let d: Value = serde_json::from_str(&e.data).expect("json");
        seen_all.push(d["data"]["task_id"].as_str().expect("id").to_owned());
    }
    seen_all.sort();
    let mut want = vec![alices.clone(), bob_task.clone()];
    want.sort();
    assert_eq!(seen_all, want);
    let e = bobs.next_event(WAIT).await.expect("bob hears his own");
    let d: Value = serde_json::from_str(&e.data).expect("json");
    assert_eq!(d["data"]["task_id"], bob_task.as_str());
    assert!(
        bobs.next_event(Duration::from_millis(500)).await.is_none(),
        "bob never hears of alice's task: {}",
        bobs.raw
    );
    // A task filter for someone else's task opens no stream of it and says nothing of it,
    // even when the task changes and its agent streams (ops, with all_tasks, hears both).
    let mut peeking = open(format!("/events?task={alices}&access_token={BOB}")).await;
    let mut ops_peek = open(format!("/events?task={alices}&access_token={OPS}")).await;
    wait_for("ops' stream of alice's task", || {
        let n = a.stream_connections(&alices);
        async move { n >= 1 }
    })
    .await;
    a.push_event(&alices, "log", r#"{"message":"alice's log"}"#);
    let working = a.set_status(&alices, "WORKING", Value::Null).expect("task");
    assert_eq!(g.http.push_task("a", TOKEN, &working).await.status, 202);
    let mut heard = Vec::new();
    while heard.len() < 2 {
        let e = ops_peek
            .next_event(WAIT)
            .await
            .expect("ops hears alice's task");
        heard.push(e.event);
    }
    heard.sort();
    assert_eq!(heard, ["log", "task.status.updated"]);
    assert!(
        peeking
            .next_event(Duration::from_millis(300))
            .await
            .is_none(),
        "bob hears nothing of alice's task: {}",
        peeking.raw
    );
}

/// An agent that answers a create with a task another client created (replaying an answer,
/// say) does not hand that task to the new caller.
#[tokio::test]
async fn a_create_answered_with_another_clients_task_is_refused() {
    let (a, _b, g) = two_agents(clients).await;
    let bobs = create(&g, "a", BOB).await;
    let doc = a.task(&bobs).expect("the agent has bob's task");
    a.script_once(Route::CreateTask, sample::Reply::Json(202, doc));
    let r = call(
        &g,
        Method::POST,
        "/agents/a/tasks",
        Some(ALICE),
        &json!({ "input": good_input() }),
    )
    .await;
    let e = assert_api_error(&r, 502, "AGENT_PROTOCOL_VIOLATION");
    assert!(
        !e.to_string().contains("\"status\""),
        "no task document: {e}"
    );
    // Still bob's, for bob only.
    assert_api_error(
        &get(&g, &format!("/tasks/{bobs}"), Some(ALICE)).await,
        404,
        "TASK_NOT_FOUND",
    );
    assert_eq!(
        get(&g, &format!("/tasks/{bobs}"), Some(BOB)).await.status,
        200
    );
}

#[tokio::test]
async fn idempotency_keys_are_scoped_per_client() {
    let (a, _b, g) = two_agents(clients).await;
    let body = json!({ "input": good_input() });
    let create_with = |key: &'static str| {
        let (g, body) = (&g, body.clone());
        async move {
            let r = g
                .http
                .post_json_as(
                    "/agents/a/tasks",
                    key,
                    &body,
                    &[("idempotency-key", "same-key-1")],
                )
                .await;
            assert_eq!(r.status, 202, "{r:?}");
            (
                r.json()["task_id"].as_str().expect("id").to_owned(),
                r.header("idempotent-replayed").is_some(),
            )
        }
    };
    let (alice1, replayed) = create_with(ALICE).await;
    assert!(!replayed);
    let (bob1, replayed) = create_with(BOB).await;
    assert!(!replayed, "bob's key is his own");
    assert_ne!(alice1, bob1);
    let (alice2, replayed) = create_with(ALICE).await;
    assert!(replayed);
    assert_eq!(alice1, alice2);
    // Agents that honour the header themselves see a key of each client's own, never the
    // client's raw key (the same on every retry of one client).
    let sent: Vec<String> = a
        .requests()
        .iter()
        .filter(|r| r.route == Route::CreateTask)
        .filter_map(|r| {
            r.headers
                .get("idempotency-key")?
                .to_str()
                .ok()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_ne!(sent[0], sent[1]);
    assert!(
        sent.iter().all(|k| k != "same-key-1" && k.len() == 64),
        "{sent:?}"
    );
}

#[tokio::test]
async fn cors_answers_preflights_and_marks_answers_for_allowed_origins_only() {
    const ORIGIN: &str = "http://console.example.test:8080";
    let (_a, _b, g) = two_agents(|cfg| {
        clients(cfg);
        cfg.cors = Some(CorsConfig {
            allow_origins: vec![ORIGIN.into()],
            ..CorsConfig::default()
        });
    })
    .await;
    let preflight = |origin: &'static str, path: &'static str| {
        let g = &g;
        async move {
            g.http
                .send(
                    Method::OPTIONS,
                    path,
                    &[
                        ("origin", origin),
                        ("access-control-request-method", "POST"),
                        (
                            "access-control-request-headers",
                            "authorization, content-type",
                        ),
                    ],
                    Bytes::new(),
                )
                .await
        }
    };
    let r = preflight(ORIGIN, "/agents/a/tasks").await;
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(r.header("access-control-allow-origin"), Some(ORIGIN));
    let allowed = r
        .header("access-control-allow-headers")
        .expect("headers")
        .to_owned();
    for h in ["authorization", "content-type", "last-event-id"] {
        assert!(allowed.contains(h), "{allowed}");
    }
    assert!(r
        .header("access-control-allow-methods")
        .expect("methods")
        .contains("POST"));
    let r = preflight("http://evil.example.test", "/agents/a/tasks").await;
    assert_api_error(&r, 403, "FORBIDDEN");
    assert!(r.header("access-control-allow-origin").is_none());
    // Real answers, errors included, carry the origin for an allowed page only.
    // The catalog's own answer depends on Host too (its `card_url`s): one Vary names both.
    for (key, status, vary) in [(Some(ALICE), 200, "host, origin"), (None, 401, "origin")] {
        let auth = key.map(|k| format!("Bearer {k}"));
        let mut headers = vec![("origin", ORIGIN)];
        if let Some(a) = auth.as_deref() {
            headers.push(("authorization", a));
        }
        let r = g
            .http
            .send(Method::GET, "/agents", &headers, Bytes::new())
            .await;
        assert_eq!(r.status, status);
        assert_eq!(r.header("access-control-allow-origin"), Some(ORIGIN));
        let exposed = r.header("access-control-expose-headers").expect("exposed");
        assert!(exposed.contains("x-request-id"), "{exposed}");
        assert_eq!(r.header("vary"), Some(vary));
        assert_eq!(r.headers.get_all("vary").iter().count(), 1);
    }
    let r = g
        .http
        .send(
            Method::GET,
            "/healthz",
            &[("origin", "http://evil.example.test")],
            Bytes::new(),
        )
        .await;
    assert!(r.header("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn without_cors_config_no_cors_headers_are_sent() {
    let (_a, _b, g) = two_agents(clients).await;
    let r = g
        .http
        .send(
            Method::OPTIONS,
            "/agents/a/tasks",
            &[
                ("origin", "http://x.test"),
                ("access-control-request-method", "POST"),
            ],
            Bytes::new(),
        )
        .await;
    assert_api_error(&r, 405, "METHOD_NOT_ALLOWED");
    assert!(r.header("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn without_clients_everything_stays_open_and_admin_keeps_its_token() {
    let (_a, _b, g) = two_agents(|cfg| {
        cfg.admin_token = Some(Secret::new("admin-token-0123456789"));
    })
    .await;
    let id = g.create_task("a").await;
    assert_eq!(g.http.get(&format!("/tasks/{id}")).await.status, 200);
    assert_eq!(g.http.get("/metrics").await.status, 200);
    assert_api_error(&g.http.get("/admin/subscribers").await, 401, "UNAUTHORIZED");
    let r = g
        .http
        .send(
            Method::GET,
            "/admin/subscribers",
            &[("authorization", "Bearer admin-token-0123456789")],
            Bytes::new(),
        )
        .await;
    assert_eq!(r.status, 200);
    // Still detailed for a developer on loopback.
    assert!(g.http.get("/readyz").await.json()["agents_without_card"].is_array());
    let anon = g
        .metric("a2a_gateway_requests_total", &[("client", "anonymous")])
        .await;
    assert!(anon >= 3.0, "{anon}");
}

/// Two gateway processes on one Redis: a task created through one replica is its creator's on
/// the other too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ownership_holds_across_replicas_on_one_redis() {
    use crate::support::process::GwProc;
    use std::io::Write;
    let r = crate::support::redis_server::RedisServer::start();
    let a = agent().await;
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    write!(
        f,
        "listen = \"127.0.0.1:0\"\n\
         [[agents]]\nname = \"a\"\nurl = \"{}\"\n\
         [[clients]]\nname = \"alice\"\nkey_sha256 = \"{}\"\n\
         [[clients]]\nname = \"bob\"\nkey_sha256 = \"{}\"\n\
         [[clients]]\nname = \"ops\"\nkey_sha256 = \"{}\"\ncan = [\"tasks\", \"all_tasks\", \"metrics\"]\n\
         [redis]\nurl = \"{}\"\n",
        a.base_url(),
        sha(ALICE),
        sha(BOB),
        sha(OPS),
        r.url()
    )
    .expect("config");
    let (p1, p2) = (GwProc::spawn(f.path()), GwProc::spawn(f.path()));
    p1.ready().await;
    p2.ready().await;
    let send = |p: &GwProc, key: &str, path: &str| {
        let (http, key, path) = (p.http.clone(), key.to_owned(), path.to_owned());
        async move { http.get_as(&path, &key).await }
    };
    let created = p1
        .http
        .post_json_as(
            "/agents/a/tasks",
            ALICE,
            &json!({ "input": good_input() }),
            &[],
        )
        .await;
    assert_eq!(created.status, 202, "{created:?}");
    let id = created.json()["task_id"].as_str().expect("id").to_owned();
    let path = format!("/tasks/{id}");
    assert_eq!(
        send(&p2, ALICE, &path).await.status,
        200,
        "alice's on the other replica"
    );
    assert_api_error(&send(&p2, BOB, &path).await, 404, "TASK_NOT_FOUND");
    assert_api_error(&send(&p1, BOB, &path).await, 404, "TASK_NOT_FOUND");
    assert_eq!(send(&p2, OPS, &path).await.status, 200);
    // Idempotency keys are per client across replicas too: bob's key does not replay alice's.
    drop((p1, p2));
}

/// The fleet snapshot (`/api/fleet`, what the `/ui` page shows) gives each client its own
/// agents with their live numbers; the numbers about every client's tasks (counts, webhooks,
/// streams) only to a client that sees every task, and `admin` only to an admin. The page
/// itself is public; its data is not.
#[tokio::test]
async fn the_fleet_snapshot_shows_each_client_what_it_may_see() {
    let (_a, b, g) = two_agents(clients).await;
    let page = g.http.get("/ui").await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let r = get(&g, "/api/fleet", None).await;
    assert_eq!((r.status, r.error_code().as_str()), (401, "UNAUTHORIZED"));
    create(&g, "a", ALICE).await;
    let names = |v: &Value| -> Vec<String> {
        v["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .map(|a| a["name"].as_str().expect("name").to_owned())
            .collect()
    };
    let alice = get(&g, "/api/fleet", Some(ALICE)).await;
    assert_eq!(alice.header("cache-control"), Some("no-store"));
    let alice = alice.json();
    assert_eq!(names(&alice), ["a"], "alice may use agent a only");
    assert_eq!(
        alice["caller"],
        json!({"client": "alice", "sees_all": false, "admin": false, "rights": ["tasks", "streams"]})
    );
    for part in ["tasks", "webhooks", "streams"] {
        assert!(
            alice[part].is_null(),
            "{part} is about every client's tasks: {alice}"
        );
    }
    let a = &alice["agents"][0];
    assert_eq!(
        (&a["card_state"], &a["health"], &a["in_flight"]),
        (&json!("fresh"), &json!("ok"), &json!(0))
    );
    assert_eq!(
        (&a["requests"], &a["errors"]),
        (&json!(1), &json!(0)),
        "{a}"
    );
    // A failing exchange is counted as an error of that agent only.
    b.script_once(
        Route::CreateTask,
        sample::Reply::Json(500, json!({"oops": true})),
    );
    let r = call(
        &g,
        Method::POST,
        "/agents/b/tasks",
        Some(OPS),
        &json!({ "input": good_input() }),
    )
    .await;
    assert_eq!(r.status, 500, "the agent's answer, passed on: {r:?}");
    let ops = get(&g, "/api/fleet", Some(OPS)).await.json();
    assert_eq!(names(&ops), ["a", "b"]);
    assert_eq!(
        ops["caller"],
        json!({"client": "ops", "sees_all": true, "admin": true,
            "rights": ["tasks", "streams", "events", "all_tasks", "metrics", "admin"]})
    );
    let counts: Vec<(&str, u64)> = ["a", "b"]
        .iter()
        .zip(ops["agents"].as_array().expect("agents"))
        .map(|(n, a)| {
            (
                *n,
                a["requests"].as_u64().expect("n") * 10 + a["errors"].as_u64().expect("n"),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [("a", 10), ("b", 11)],
        "requests*10 + errors: {ops}"
    );
    assert_eq!(ops["tasks"]["SUBMITTED"], 1, "{ops}");
    assert_eq!(ops["tasks"].as_object().map(|o| o.len()), Some(8));
    assert_eq!(ops["webhooks"]["queue_depth"], 0);
    assert_eq!(ops["webhooks"]["dead_letters"], 0);
    assert_eq!(ops["streams"], json!({"upstreams": 0, "subscribers": 0}));
    // peek: every agent, but not every task.
    let peek = get(&g, "/api/fleet", Some(PEEK)).await.json();
    assert_eq!(names(&peek), ["a", "b"]);
    assert!(peek["tasks"].is_null() && !peek["caller"]["admin"].as_bool().expect("bool"));
}

/// `/events` opened with `key` as `?access_token=`.
async fn events_as(g: &TestGateway, key: &str) -> Events {
    let client = Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::get(format!("{}/events?access_token={key}", g.http.base))
        .body(Full::new(Bytes::new()))
        .expect("request");
    Events::new(client.request(req).await.expect("events"))
}

/// An update the state machine refuses is on `/events` as `event: task.transition.refused`,
/// with what was recorded, what was offered and why, for a client that sees every task; a
/// client that sees only its own tasks does not get it, even for its own task.
#[tokio::test]
async fn refused_transitions_reach_only_clients_that_see_every_task() {
    let (a, _b, g) = two_agents(clients).await;
    let (mut bobs, mut all) = (events_as(&g, BOB).await, events_as(&g, OPS).await);
    let id = create(&g, "a", BOB).await;
    let done = a
        .set_status(&id, "COMPLETED", fields_for("COMPLETED"))
        .expect("task");
    assert_eq!(g.http.push_task("a", TOKEN, &done).await.status, 202);
    for s in [&mut bobs, &mut all] {
        for status in ["SUBMITTED", "COMPLETED"] {
            let e = s.next_event(WAIT).await.expect("the change");
            let d: Value = serde_json::from_str(&e.data).expect("json");
            assert_eq!(d["data"]["status"], status, "{}", e.data);
        }
    }
    // The agent, late, says the finished task is working again.
    let late = doc_at(
        &a,
        &id,
        "WORKING",
        a2a_gateway::protocol::time::now_ms() + 1000,
    );
    let r = g.http.push_task("a", TOKEN, &late).await;
    assert_eq!((r.status, r.error_code().as_str()), (409, "TASK_TERMINAL"));
    let e = all.next_event(WAIT).await.expect("ops hears the refusal");
    assert_eq!(e.event, "task.transition.refused");
    let mut d: Value = serde_json::from_str(&e.data).expect("json");
    let at = d["at"].take();
    assert!(
        at.as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .is_some(),
        "at is RFC 3339: {at}"
    );
    assert_eq!(
        d,
        json!({"task_id": id, "agent": "a", "recorded": "COMPLETED", "offered": "WORKING",
            "reason": "terminal", "at": null})
    );
    assert!(
        bobs.next_event(Duration::from_millis(500)).await.is_none(),
        "bob sees only his own tasks' changes, not refusals: {}",
        bobs.raw
    );
}

/// A client with `all_tasks` kept to agent a: a refusal of agent b's update to a's task (a
/// `foreign_agent`) is not for it, nor are the fleet's totals; a client that may use every
/// agent gets both.
#[tokio::test]
async fn a_client_kept_to_some_agents_sees_neither_foreign_refusals_nor_fleet_totals() {
    const AUDITOR: &str = "auditor-key-0123456789abcdef";
    let (a, b, g) = two_agents(|cfg| {
        clients(cfg);
        cfg.clients.push(client(
            "auditor",
            AUDITOR,
            &["a"],
            &[Right::Events, Right::AllTasks, Right::Tasks],
        ));
        cfg.agents[1].ingest_token = Some(Secret::new(TOKEN));
    })
    .await;
    let fleet = get(&g, "/api/fleet", Some(AUDITOR)).await.json();
    assert_eq!(fleet["caller"]["sees_all"], false, "{fleet}");
    assert!(
        fleet["tasks"].is_null() && fleet["webhooks"].is_null(),
        "{fleet}"
    );
    assert_eq!(fleet["agents"].as_array().map(Vec::len), Some(1));
    let (mut auditor, mut all) = (events_as(&g, AUDITOR).await, events_as(&g, OPS).await);
    let id = create(&g, "a", OPS).await;
    for s in [&mut auditor, &mut all] {
        let e = s.next_event(WAIT).await.expect("the create, on agent a");
        assert_eq!(e.event, "task.status.updated");
    }
    // Agent b claims a's task.
    let mut stolen = doc_at(
        &a,
        &id,
        "WORKING",
        a2a_gateway::protocol::time::now_ms() + 1000,
    );
    stolen["agent_id"] = json!(b.agent_id());
    let r = g.http.push_task("b", TOKEN, &stolen).await;
    assert_ne!(r.status, 202, "{r:?}");
    let e = all.next_event(WAIT).await.expect("ops hears the refusal");
    assert_eq!(e.event, "task.transition.refused");
    let d: Value = serde_json::from_str(&e.data).expect("json");
    assert_eq!(
        (&d["agent"], &d["reason"], &d["recorded"]),
        (&json!("b"), &json!("foreign_agent"), &json!("SUBMITTED"))
    );
    assert!(
        auditor
            .next_event(Duration::from_millis(500))
            .await
            .is_none(),
        "the auditor may not use agent b: {}",
        auditor.raw
    );
}

/// One bearer parser for every credential the gateway reads: a client's key, the
/// `admin_token` and an agent's `ingest_token`. An empty `Bearer ` (or one of blanks) is 401 on
/// each, and the scheme is read in any case on each.
#[tokio::test]
async fn an_empty_bearer_is_refused_alike_on_every_kind_of_route() {
    let (_a, _b, with_clients) = two_agents(clients).await;
    let (_c, _d, admin) = two_agents(|cfg| {
        cfg.admin_token = Some(Secret::new("admin-token-0123456789"));
        ingest(cfg);
    })
    .await;
    let push = serde_json::to_vec(&json!({"not": "read"})).expect("json");
    for empty in ["Bearer ", "Bearer    ", "bearer \t"] {
        for (g, method, path) in [
            (&with_clients, Method::GET, "/agents"),
            (&with_clients, Method::POST, "/agents/a/tasks"),
            (&admin, Method::GET, "/admin/subscribers"),
            (&admin, Method::POST, "/agents/a/notifications"),
        ] {
            let r = g
                .http
                .send(
                    method.clone(),
                    path,
                    &[
                        ("authorization", empty),
                        ("content-type", "application/json"),
                    ],
                    push.clone(),
                )
                .await;
            assert_api_error(&r, 401, "UNAUTHORIZED");
        }
    }
    // The scheme in another case names the same credential on each.
    for (g, method, path, auth, want) in [
        (
            &with_clients,
            Method::GET,
            "/agents",
            format!("bEaReR {OPS}"),
            200,
        ),
        (
            &admin,
            Method::GET,
            "/admin/subscribers",
            "BEARER admin-token-0123456789".to_owned(),
            200,
        ),
    ] {
        let r = g
            .http
            .send(
                method,
                path,
                &[("authorization", auth.as_str())],
                Bytes::new(),
            )
            .await;
        assert_eq!(r.status, want, "{path}: {r:?}");
    }
    let r = admin
        .http
        .push("a", Some(&format!(" {TOKEN} ")), &json!({}))
        .await;
    // The token is read (surrounding blanks are not part of it): past the 401, the body is
    // what is refused.
    assert_ne!(r.status, 401, "{r:?}");
}
