//! The in-process ledger's bounds are fair (issue 24, part 1): one global `max_tasks`, final
//! tasks evicted first and oldest first, a fresh live task never evicted to admit another, 503
//! LEDGER_FULL and 429 TOO_MANY_TASKS (`[[clients]] max_live_tasks`) before any agent call,
//! and `a2a_gateway_ledger_evictions_total{reason}`.
//!
//! Each test fails on the main of before issue 24: there the bounds were per shard (112 tasks
//! kept for 100), eviction took the oldest task of a shard whatever its state (another client's
//! live task included), and neither code existed.

use a2a_gateway::config::{Config, Right};
use a2a_sample_agent::{AgentOptions, Route};
use serde_json::json;

use crate::auth::client;
use crate::support::*;

const A: &str = "client-a-key-0123456789abcdef";
const B: &str = "client-b-key-0123456789abcdef";
const OPS: &str = "client-ops-key-0123456789abcdef";

fn two_clients(cfg: &mut Config) {
    cfg.clients = vec![
        client("a", A, &["*"], &[Right::Tasks]),
        client("b", B, &["*"], &[Right::Tasks]),
        client("ops", OPS, &["*"], &[Right::Metrics]),
    ];
}

/// One sample of a metric family, scraped as a client with the `metrics` right.
async fn scraped(http: &Http, family: &str, labels: &[(&str, &str)]) -> f64 {
    let r = http.get_as("/metrics", OPS).await;
    assert_eq!(r.status, 200, "{r:?}");
    let text = String::from_utf8(r.body.to_vec()).expect("utf8");
    assert!(text.contains(family), "{family} is exported");
    metric_value(&text, family, labels)
}

/// An agent that keeps few tasks of its own (the tests make big ones) and logs no request.
async fn lean_agent() -> a2a_sample_agent::SampleAgent {
    agent_with(AgentOptions {
        max_tasks: 100,
        record_capacity: 0,
        ..AgentOptions::default()
    })
    .await
}

/// Issue 43: a client's live tasks hold at most its `max_ledger_bytes` (a tenth of the
/// ledger's by default): past it its own creates are LEDGER_FULL before the agent is called,
/// and another client's big creates are still admitted.
#[tokio::test]
async fn one_clients_live_bytes_are_its_share_and_another_client_still_creates() {
    let a = lean_agent().await;
    let g = TestGateway::start(&[("a", &a)], |cfg| {
        two_clients(cfg);
        cfg.max_body_bytes = 2 << 20;
        cfg.max_ledger_bytes = 32 << 20;
    })
    .await;
    g.ready().await;
    let http = &g.http;
    let big = json!({ "input": { "topic": "x".repeat(1 << 20), "filename": "big.py" } });
    let mut b_created = 0;
    let refused = loop {
        let before = a.request_count(Route::CreateTask);
        let r = http.post_json_as("/agents/a/tasks", B, &big, &[]).await;
        match r.status {
            202 => b_created += 1,
            503 => break (r, before),
            s => panic!("unexpected {s}: {r:?}"),
        }
        assert!(b_created < 10, "B's share is a tenth of 32 MiB");
    };
    let (r, before) = refused;
    assert_api_error(&r, 503, "LEDGER_FULL");
    assert!(
        String::from_utf8_lossy(&r.body).contains("max_ledger_bytes")
            && String::from_utf8_lossy(&r.body).contains("share"),
        "says it is the client's share: {r:?}"
    );
    assert_eq!(
        a.request_count(Route::CreateTask),
        before,
        "before the agent"
    );
    assert!((2..=3).contains(&b_created), "{b_created}");
    // A's creates are its own share: admitted.
    for _ in 0..b_created {
        let r = http.post_json_as("/agents/a/tasks", A, &big, &[]).await;
        assert_eq!(r.status, 202, "{r:?}");
    }
}

#[tokio::test]
async fn one_clients_big_creates_never_make_another_clients_live_task_unknown() {
    let a = lean_agent().await;
    let g = TestGateway::start(&[("a", &a)], |cfg| {
        two_clients(cfg);
        cfg.max_body_bytes = 2 << 20;
        cfg.max_ledger_bytes = 32 << 20;
        // B may take the whole ledger (its own share is a tenth by default): the ledger's
        // own bound is what this test holds.
        cfg.clients[1].max_ledger_bytes = Some(32 << 20);
    })
    .await;
    g.ready().await;
    let http = &g.http;
    let mine = http.post_task_as("a", A).await;
    assert_eq!(mine.status, 202, "{mine:?}");
    let mine = mine.json()["task_id"].as_str().expect("id").to_owned();
    let big = json!({ "input": { "topic": "x".repeat(1 << 20), "filename": "big.py" } });
    let (mut created, mut full) = (0, 0);
    for _ in 0..60 {
        let before = a.request_count(Route::CreateTask);
        let r = http.post_json_as("/agents/a/tasks", B, &big, &[]).await;
        match r.status {
            202 => created += 1,
            503 => {
                assert_api_error(&r, 503, "LEDGER_FULL");
                assert!(r.header("retry-after").is_some(), "{r:?}");
                assert_eq!(
                    a.request_count(Route::CreateTask),
                    before,
                    "refused before the agent is called"
                );
                full += 1;
            }
            s => panic!("unexpected {s}: {r:?}"),
        }
        let get = http.get_as(&format!("/agents/a/tasks/{mine}"), A).await;
        assert_eq!(get.status, 200, "A's live task stays known: {get:?}");
    }
    assert!(
        created >= 20,
        "the budget admits B's creates first ({created})"
    );
    assert!(full > 0, "B is refused once only fresh live tasks remain");
    let cancel = http
        .post_json_as(
            &format!("/agents/a/tasks/{mine}/cancel"),
            A,
            &json!({}),
            &[],
        )
        .await;
    assert!(cancel.status == 200 || cancel.status == 202, "{cancel:?}");
    assert_eq!(cancel.json()["status"], "CANCELLED", "{cancel:?}");
    assert_eq!(
        scraped(
            http,
            "a2a_gateway_ledger_evictions_total",
            &[("reason", "stale")]
        )
        .await,
        0.0
    );
}

#[tokio::test]
async fn ledger_full_and_too_many_tasks_come_with_retry_after_before_any_agent_call() {
    let a = agent().await;
    let g = TestGateway::start(&[("a", &a)], |cfg| {
        two_clients(cfg);
        cfg.clients[0].max_live_tasks = Some(2);
        cfg.max_tasks = 4;
    })
    .await;
    g.ready().await;
    let http = &g.http;
    let t1 = http.post_task_as("a", A).await;
    assert_eq!(t1.status, 202, "{t1:?}");
    assert_eq!(http.post_task_as("a", A).await.status, 202);
    let calls = a.request_count(Route::CreateTask);
    let r = http.post_task_as("a", A).await;
    assert_api_error(&r, 429, "TOO_MANY_TASKS");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    assert_eq!(a.request_count(Route::CreateTask), calls, "no agent call");
    // Another client is not held by A's cap; the ledger's bound (4) is next.
    assert_eq!(http.post_task_as("a", B).await.status, 202);
    assert_eq!(http.post_task_as("a", B).await.status, 202);
    let calls = a.request_count(Route::CreateTask);
    let r = http.post_task_as("a", B).await;
    assert_api_error(&r, 503, "LEDGER_FULL");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    assert_eq!(a.request_count(Route::CreateTask), calls, "no agent call");
    // One of A's tasks finishes (the gateway learns it on a read): A may create again, and
    // the final task makes room for it.
    let t1 = t1.json()["task_id"].as_str().expect("id").to_owned();
    moved(&a, &t1, "COMPLETED");
    let get = http.get_as(&format!("/agents/a/tasks/{t1}"), A).await;
    assert_eq!(get.json()["status"], "COMPLETED", "{get:?}");
    let again = http.post_task_as("a", A).await;
    assert_eq!(again.status, 202, "{again:?}");
    assert_eq!(
        scraped(
            http,
            "a2a_gateway_ledger_evictions_total",
            &[("reason", "final")]
        )
        .await,
        1.0
    );
}

#[tokio::test]
async fn after_250_creates_at_most_100_are_kept_and_the_evicted_are_the_oldest_final() {
    let a = agent_with(AgentOptions {
        record_capacity: 0,
        ..AgentOptions::default()
    })
    .await;
    let g = TestGateway::start(&[("a", &a)], |cfg| cfg.max_tasks = 100).await;
    g.ready().await;
    let http = &g.http;
    let mut ids = Vec::new();
    for i in 0..250 {
        let id = http.create_task("a").await;
        // Every fifth task stays live; the others finish, in the order they were created.
        if i % 5 != 0 {
            moved(&a, &id, "COMPLETED");
            let get = http.get(&format!("/agents/a/tasks/{id}")).await;
            assert_eq!(get.json()["status"], "COMPLETED", "{get:?}");
        }
        ids.push(id);
    }
    let fleet = http.get("/api/fleet").await.json();
    let held: u64 = fleet["tasks"]
        .as_object()
        .expect("task counts")
        .values()
        .filter_map(|v| v.as_u64())
        .sum();
    assert!(held <= 100, "held {held}: {fleet}");
    // 50 live tasks are kept whatever their age; the 50 newest final ones with them.
    let finals: Vec<&String> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 5 != 0)
        .map(|(_, id)| id)
        .collect();
    let gets = a.request_count(Route::GetTask);
    for (i, id) in ids.iter().enumerate() {
        let r = http.get(&format!("/agents/a/tasks/{id}")).await;
        if i % 5 == 0 {
            assert_eq!(r.status, 200, "live task {i} kept: {r:?}");
        }
    }
    for (n, id) in finals.iter().enumerate() {
        let r = http.get(&format!("/agents/a/tasks/{id}")).await;
        let kept = n >= finals.len() - 50;
        assert_eq!(
            r.status,
            if kept { 200 } else { 404 },
            "final task {n} of {}: {r:?}",
            finals.len()
        );
    }
    // The kept final tasks were answered from the ledger; only live ones reached the agent.
    assert!(a.request_count(Route::GetTask) - gets <= 2 * 50);
    assert_eq!(
        g.metric("a2a_gateway_ledger_evictions_total", &[("reason", "final")])
            .await,
        150.0
    );
}

#[tokio::test]
async fn on_redis_max_live_tasks_counts_the_clients_tasks_on_every_replica() {
    let r = crate::support::redis_server::RedisServer::start();
    let a = agent().await;
    let replica = |cfg: &mut Config| {
        two_clients(cfg);
        cfg.clients[0].max_live_tasks = Some(2);
        cfg.redis = Some(a2a_gateway::config::RedisConfig {
            url: r.url(),
            prefix: "fair:".into(),
            ..Default::default()
        });
    };
    let g1 = TestGateway::start(&[("a", &a)], replica).await;
    let g2 = TestGateway::start(&[("a", &a)], replica).await;
    g1.ready().await;
    g2.ready().await;
    let t1 = g1.http.post_task_as("a", A).await;
    assert_eq!(t1.status, 202, "{t1:?}");
    assert_eq!(g2.http.post_task_as("a", A).await.status, 202);
    let calls = a.request_count(Route::CreateTask);
    for g in [&g1, &g2] {
        let r = g.http.post_task_as("a", A).await;
        assert_api_error(&r, 429, "TOO_MANY_TASKS");
        assert!(r.header("retry-after").is_some(), "{r:?}");
    }
    assert_eq!(a.request_count(Route::CreateTask), calls, "no agent call");
    // B is not held by A's cap.
    assert_eq!(g2.http.post_task_as("a", B).await.status, 202);
    // One of A's tasks finishes (learnt by a read on the other replica): A may create again.
    let t1 = t1.json()["task_id"].as_str().expect("id").to_owned();
    moved(&a, &t1, "COMPLETED");
    let get = g2.http.get_as(&format!("/agents/a/tasks/{t1}"), A).await;
    assert_eq!(get.json()["status"], "COMPLETED", "{get:?}");
    assert_eq!(g1.http.post_task_as("a", A).await.status, 202);
}
