//! Safe retries of create: `Idempotency-Key` (replay, reuse with another body, in flight, bad
//! keys), late answers recorded after the client's 504, and the key shared by two replicas on
//! one Redis while the agent answers after the timeout.

use std::time::Duration;

use crate::support::redis_server::RedisServer;
use crate::support::*;
use a2a_gateway::config::{Config, RedisConfig};
use a2a_gateway::ledger::idempotency::fingerprint;
use a2a_gateway::ledger::{Answer, Claim, MemoryLedger, RedisLedger, TaskLedger};
use bytes::Bytes;
use hyper::Method;
use sample::{Reply, Route};
use serde_json::{json, Value};

fn body() -> Value {
    json!({ "input": good_input() })
}

async fn create_with_key(http: &Http, path: &str, key: &str, body: &Value) -> Resp {
    http.send(
        Method::POST,
        path,
        &[
            ("content-type", "application/json"),
            ("idempotency-key", key),
        ],
        serde_json::to_vec(body).expect("json"),
    )
    .await
}

fn task_id(r: &Resp) -> String {
    r.json()["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task_id in {r:?}"))
        .to_owned()
}

/// The agent answers its next create only after `after`.
fn answer_late(a: &sample::SampleAgent, after: Duration) {
    a.script_once(
        Route::CreateTask,
        Reply::Delay(after, Box::new(Reply::Default)),
    );
}

#[tokio::test]
async fn the_same_key_and_body_get_the_same_answer_without_a_second_create() {
    let (a, g) = single("a", |_| {}).await;
    let first = create_with_key(&g.http, "/agents/a/tasks", "order-1", &body()).await;
    assert_eq!(first.status, 202, "{first:?}");
    assert_eq!(first.header("idempotent-replayed"), None);
    let again = create_with_key(&g.http, "/agents/a/tasks", "order-1", &body()).await;
    assert_eq!(again.status, 202, "{again:?}");
    assert_eq!(again.body, first.body);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert!(again
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/json")));
    // The structured-field form of the same key is the same key; the card's agent_id is the
    // same scope as the route name.
    let quoted = create_with_key(&g.http, "/agents/a/tasks", "\"order-1\"", &body()).await;
    assert_eq!(quoted.body, first.body);
    let by_id = format!("/agents/{}/tasks", a.agent_id());
    let aliased = create_with_key(&g.http, &by_id, "order-1", &body()).await;
    assert_eq!(aliased.body, first.body);
    assert_eq!(a.request_count(Route::CreateTask), 1);
    // A new key is a new task; the agent-less form takes keys too.
    let agentless = json!({ "agent": "a", "input": good_input() });
    let other = create_with_key(&g.http, "/tasks", "order-2", &agentless).await;
    assert_eq!(other.status, 202, "{other:?}");
    assert_ne!(task_id(&other), task_id(&first));
    let replay = create_with_key(&g.http, "/tasks", "order-2", &agentless).await;
    assert_eq!(replay.body, other.body);
    assert_eq!(a.request_count(Route::CreateTask), 2);
    // The task behind the key is the one recorded.
    let id = task_id(&first);
    assert_eq!(g.http.get(&format!("/tasks/{id}")).await.status, 200);
}

#[tokio::test]
async fn a_key_reused_with_another_body_is_refused() {
    let (a, g) = single("a", |_| {}).await;
    let first = create_with_key(&g.http, "/agents/a/tasks", "k", &body()).await;
    assert_eq!(first.status, 202, "{first:?}");
    let other = json!({ "input": { "topic": "medians instead", "filename": "med.py" } });
    let r = create_with_key(&g.http, "/agents/a/tasks", "k", &other).await;
    let err = assert_api_error(&r, 422, "IDEMPOTENCY_KEY_REUSED");
    assert!(!err["message"].as_str().unwrap_or("").contains("medians"));
    // The agent-less form forwards another body, but the key is judged on what the client sent.
    let agentless = json!({ "agent": "a", "input": good_input() });
    let r = create_with_key(&g.http, "/tasks", "k", &agentless).await;
    assert_api_error(&r, 422, "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(a.request_count(Route::CreateTask), 1);
    // A request refused before the agent is called holds no key.
    let bad = json!({ "input": { "topic": 5 } });
    let r = create_with_key(&g.http, "/agents/a/tasks", "fresh", &bad).await;
    assert_api_error(&r, 422, "INPUT_SCHEMA_VIOLATION");
    let r = create_with_key(&g.http, "/agents/a/tasks", "fresh", &body()).await;
    assert_eq!(r.status, 202, "{r:?}");
}

#[tokio::test]
async fn a_second_try_while_the_first_is_in_flight_is_told_to_retry() {
    let (a, g) = single("a", |_| {}).await;
    answer_late(&a, Duration::from_millis(1500));
    let http = g.http.clone();
    let first =
        tokio::spawn(
            async move { create_with_key(&http, "/agents/a/tasks", "slow", &body()).await },
        );
    wait_for("the agent has the first create", || async {
        a.request_count(Route::CreateTask) == 1
    })
    .await;
    let second = create_with_key(&g.http, "/agents/a/tasks", "slow", &body()).await;
    assert_api_error(&second, 409, "IDEMPOTENCY_IN_PROGRESS");
    assert_eq!(second.header("retry-after"), Some("1"));
    let other = json!({ "input": { "topic": "something else", "filename": "x.py" } });
    let reused = create_with_key(&g.http, "/agents/a/tasks", "slow", &other).await;
    assert_api_error(&reused, 422, "IDEMPOTENCY_KEY_REUSED");
    let first = first.await.expect("first create");
    assert_eq!(first.status, 202, "{first:?}");
    let third = create_with_key(&g.http, "/agents/a/tasks", "slow", &body()).await;
    assert_eq!(third.body, first.body);
    assert_eq!(a.request_count(Route::CreateTask), 1);
}

#[tokio::test]
async fn malformed_keys_are_invalid_requests() {
    let (a, g) = single("a", |_| {}).await;
    let long = "k".repeat(256);
    // (Bytes outside ASCII are refused too: see the unit test; this client cannot send them.)
    for key in [long.as_str(), "has space", "", "tab\there", "\"\""] {
        let r = create_with_key(&g.http, "/agents/a/tasks", key, &body()).await;
        let err = assert_api_error(&r, 400, "INVALID_REQUEST");
        assert!(
            err["message"]
                .as_str()
                .is_some_and(|m| m.contains("Idempotency-Key") && !m.contains(&long)),
            "{err}"
        );
    }
    let r = g
        .http
        .send(
            Method::POST,
            "/agents/a/tasks",
            &[
                ("content-type", "application/json"),
                ("idempotency-key", "one"),
                ("idempotency-key", "two"),
            ],
            serde_json::to_vec(&body()).expect("json"),
        )
        .await;
    assert_api_error(&r, 400, "INVALID_REQUEST");
    assert_eq!(a.request_count(Route::CreateTask), 0);
    let longest = "k".repeat(255);
    let r = create_with_key(&g.http, "/agents/a/tasks", &longest, &body()).await;
    assert_eq!(r.status, 202, "{r:?}");
}

#[tokio::test]
async fn a_timed_out_create_says_the_task_may_exist_and_records_it_when_it_comes() {
    let (a, g) = single("a", |cfg| {
        cfg.agents[0].timeout = Duration::from_millis(300)
    })
    .await;
    answer_late(&a, Duration::from_millis(800));
    let r = g.http.post_task("a").await;
    let err = assert_api_error(&r, 504, "AGENT_TIMEOUT");
    let message = err["message"].as_str().unwrap_or("");
    assert!(
        message.contains("300 ms") && message.contains("may have created the task"),
        "{err}"
    );
    assert_eq!(err["details"]["task_may_exist"], true, "{err}");
    assert_eq!(err["details"]["late_answer_secs"], 60, "{err}");
    // The late answer is recorded: the agent-less GET finds the task through the ledger.
    wait_for("the agent made the task", || async {
        a.task_ids().len() == 1
    })
    .await;
    let id = a.task_ids()[0].clone();
    wait_for("the late answer is recorded", || async {
        g.http.get(&format!("/tasks/{id}")).await.status == 200
    })
    .await;
    assert_eq!(a.request_count(Route::CreateTask), 1);
}

#[tokio::test]
async fn late_answers_can_be_turned_off() {
    let (a, g) = single("a", |cfg| {
        cfg.agents[0].timeout = Duration::from_millis(200);
        cfg.late_answer = Duration::ZERO;
    })
    .await;
    answer_late(&a, Duration::from_millis(400));
    let r = create_with_key(&g.http, "/agents/a/tasks", "k", &body()).await;
    let err = assert_api_error(&r, 504, "AGENT_TIMEOUT");
    assert_eq!(err["details"]["late_answer_secs"], 0, "{err}");
    // Not awaited: the key is free again for the retry.
    let retry = create_with_key(&g.http, "/agents/a/tasks", "k", &body()).await;
    assert_eq!(retry.status, 202, "{retry:?}");
    assert_eq!(retry.header("idempotent-replayed"), None);
}

#[tokio::test]
async fn a_retry_after_a_timeout_gets_the_task_of_the_late_answer() {
    let (a, g) = single("a", |cfg| {
        cfg.agents[0].timeout = Duration::from_millis(300)
    })
    .await;
    answer_late(&a, Duration::from_millis(1000));
    let r = create_with_key(&g.http, "/agents/a/tasks", "order-7", &body()).await;
    let err = assert_api_error(&r, 504, "AGENT_TIMEOUT");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("same Idempotency-Key")),
        "{err}"
    );
    let early = create_with_key(&g.http, "/agents/a/tasks", "order-7", &body()).await;
    assert_api_error(&early, 409, "IDEMPOTENCY_IN_PROGRESS");
    let retry = retry_until_answered(&g.http, "order-7").await;
    assert_eq!(retry.status, 202, "{retry:?}");
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    let id = task_id(&retry);
    assert_eq!(a.task_ids(), [id.as_str()]);
    assert_eq!(a.request_count(Route::CreateTask), 1);
    let got = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(got.status, 200, "{got:?}");
    let late = [("agent", "a"), ("outcome", "recorded")];
    assert_eq!(g.metric("a2a_gateway_late_answers_total", &late).await, 1.0);
    for (outcome, n) in [("claimed", 1.0), ("replayed", 1.0)] {
        let labels = [("agent", "a"), ("outcome", outcome)];
        assert_eq!(
            g.metric("a2a_gateway_idempotency_keys_total", &labels)
                .await,
            n,
            "{outcome}"
        );
    }
    let labels = [("agent", "a"), ("outcome", "in_progress")];
    assert!(
        g.metric("a2a_gateway_idempotency_keys_total", &labels)
            .await
            >= 1.0
    );
}

/// Retry the create with `key` while it is in flight (409), as a client honouring Retry-After
/// would, faster.
async fn retry_until_answered(http: &Http, key: &str) -> Resp {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = create_with_key(http, "/agents/a/tasks", key, &body()).await;
        if r.status != 409 {
            return r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still in flight: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn replica(r: &RedisServer) -> impl FnOnce(&mut Config) + '_ {
    move |cfg| {
        cfg.agents[0].timeout = Duration::from_millis(300);
        cfg.redis = Some(RedisConfig {
            url: r.url(),
            prefix: "idem:".into(),
            ..Default::default()
        });
    }
}

/// The must-show: an idempotent create across two replicas on one Redis, the agent answering
/// after the timeout: one task at the agent, the same task id to both tries.
#[tokio::test]
async fn two_replicas_on_redis_give_one_task_to_a_create_retried_across_them() {
    let r = RedisServer::start();
    let a = agent().await;
    let g1 = TestGateway::start(&[("a", &a)], replica(&r)).await;
    let g2 = TestGateway::start(&[("a", &a)], replica(&r)).await;
    g1.ready().await;
    g2.ready().await;
    answer_late(&a, Duration::from_millis(1000));
    let first = create_with_key(&g1.http, "/agents/a/tasks", "order-42", &body()).await;
    assert_api_error(&first, 504, "AGENT_TIMEOUT");
    // The retry lands on the other replica, as a load balancer may send it.
    let second = retry_until_answered(&g2.http, "order-42").await;
    assert_eq!(second.status, 202, "{second:?}");
    let id = task_id(&second);
    let third = create_with_key(&g1.http, "/agents/a/tasks", "order-42", &body()).await;
    assert_eq!(third.status, 202, "{third:?}");
    assert_eq!(task_id(&third), id);
    assert_eq!(
        a.request_count(Route::CreateTask),
        1,
        "one create at the agent"
    );
    assert_eq!(a.task_ids(), [id.as_str()]);
    for g in [&g1, &g2] {
        let got = g.http.get(&format!("/tasks/{id}")).await;
        assert_eq!(got.status, 200, "{got:?}");
    }
}

/// Claim, complete and release through the trait, alike on both backends.
async fn keys_behave(l: &dyn TaskLedger) {
    let long = Duration::from_secs(60);
    let fp = fingerprint(b"one");
    let answer = Answer {
        status: 202,
        content_type: "application/json".into(),
        body: Bytes::from_static(b"{\"task_id\":\"t\"}\xff\x00"),
    };
    let claim = |scope: &'static str,
                 key: &'static str,
                 f: [u8; 32],
                 token: &'static str,
                 lease: Duration| async move {
        l.claim_key(scope, key, f, token, lease)
            .await
            .expect("claim")
    };
    assert_eq!(claim("a", "k", fp, "t1", long).await, Claim::Claimed);
    assert_eq!(
        claim("a", "k", fingerprint(b"two"), "t2", long).await,
        Claim::InFlight { fingerprint: fp }
    );
    assert_eq!(claim("b", "k", fp, "t3", long).await, Claim::Claimed);
    let complete = |token: &'static str| l.complete_key("a", "k", token, fp, answer.clone(), long);
    assert!(!complete("t2").await.expect("complete"), "not t2's key");
    assert!(complete("t1").await.expect("complete"));
    assert_eq!(
        claim("a", "k", fp, "t4", long).await,
        Claim::Done {
            fingerprint: fp,
            answer: answer.clone()
        }
    );
    l.release_key("a", "k", "t1").await.expect("release");
    assert!(matches!(
        claim("a", "k", fp, "t5", long).await,
        Claim::Done { .. }
    ));
    l.release_key("b", "k", "other").await.expect("release");
    assert!(matches!(
        claim("b", "k", fp, "t6", long).await,
        Claim::InFlight { .. }
    ));
    l.release_key("b", "k", "t3").await.expect("release");
    let short = Duration::from_millis(50);
    assert_eq!(claim("b", "k", fp, "t7", short).await, Claim::Claimed);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        claim("b", "k", fp, "t8", long).await,
        Claim::Claimed,
        "a lapsed lease frees the key"
    );
}

#[tokio::test]
async fn both_backends_keep_keys_alike() {
    let r = RedisServer::start();
    let redis = RedisLedger::connect(&r.url(), "k:", Duration::from_secs(60))
        .await
        .expect("redis ledger connects");
    keys_behave(&redis).await;
    let evictions = a2a_gateway::ledger::Evictions::unregistered();
    keys_behave(&MemoryLedger::new(1000, Duration::from_secs(60), evictions)).await;
}

/// A replica stopped while a late answer is on its way waits for it (bounded): the task is
/// recorded and the key answered, so the retry on the other replica gets the task at once
/// rather than a 409 until the dead holder's lease lapses.
#[tokio::test]
async fn a_stopping_replica_waits_for_the_late_answer_it_awaits() {
    let r = RedisServer::start();
    let a = agent().await;
    let g1 = TestGateway::start(&[("a", &a)], replica(&r)).await;
    let g2 = TestGateway::start(&[("a", &a)], replica(&r)).await;
    g1.ready().await;
    g2.ready().await;
    answer_late(&a, Duration::from_millis(800));
    let first = create_with_key(&g1.http, "/agents/a/tasks", "deploy-1", &body()).await;
    assert_api_error(&first, 504, "AGENT_TIMEOUT");
    let TestGateway { gw, .. } = g1;
    gw.shutdown().await;
    let retry = create_with_key(&g2.http, "/agents/a/tasks", "deploy-1", &body()).await;
    assert_eq!(retry.status, 202, "{retry:?}");
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    assert_eq!(a.task_ids(), [task_id(&retry).as_str()]);
    assert_eq!(a.request_count(Route::CreateTask), 1);
}

/// A client that hangs up while the agent is still making its task: the exchange goes on
/// without it, so the task is recorded and the key gets its answer, and the client's retry
/// with the same key gets the task rather than a second one.
#[tokio::test]
async fn a_client_that_hangs_up_mid_create_still_gets_its_task_on_retry() {
    use tokio::io::AsyncWriteExt;
    let (a, g) = crate::support::single("a", |_| {}).await;
    a.script_once(
        sample::Route::CreateTask,
        sample::Reply::Delay(
            std::time::Duration::from_millis(600),
            Box::new(sample::Reply::Default),
        ),
    );
    let body = serde_json::to_vec(&serde_json::json!({ "input": crate::support::good_input() }))
        .expect("json");
    let head = format!(
        "POST /agents/a/tasks HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n\
         Idempotency-Key: hang-up-1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut tcp = tokio::net::TcpStream::connect(g.gw.addr())
        .await
        .expect("connect");
    tcp.write_all(head.as_bytes()).await.expect("head");
    tcp.write_all(&body).await.expect("body");
    crate::support::wait_for("the create at the agent", || {
        let n = a.request_count(sample::Route::CreateTask);
        async move { n == 1 }
    })
    .await;
    drop(tcp);
    // The agent answers after the client left; the gateway records the task all the same.
    crate::support::wait_for("the agent made the task", || {
        let n = a.task_ids().len();
        async move { n == 1 }
    })
    .await;
    let id = a.task_ids()[0].clone();
    crate::support::wait_for("the task recorded", || async {
        g.http.get(&format!("/agents/a/tasks/{id}")).await.status == 200
    })
    .await;
    let retry = g
        .http
        .send(
            hyper::Method::POST,
            "/agents/a/tasks",
            &[
                ("content-type", "application/json"),
                ("idempotency-key", "hang-up-1"),
            ],
            body,
        )
        .await;
    assert_eq!(retry.status, 202, "{retry:?}");
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    assert_eq!(retry.json()["task_id"], id.as_str());
    assert_eq!(
        a.request_count(sample::Route::CreateTask),
        1,
        "no second create"
    );
}
