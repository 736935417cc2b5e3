//! Issue 24, parts 2 and 3: a restarted agent serves again at once (its card refetched when an
//! answer names another `agent_id`, and on demand), and the reconciler brings the tasks of
//! agents that do not push to their final state, on the memory store and on Redis with two
//! replicas, each check made once, by one replica.
//!
//! Each fails on the main of before issue 24: there a new `agent_id` was refused for up to
//! `refresh_secs` (300 s), no route refetched a card, the sample agent had no `--agent-id`, and
//! nothing asked a quiet task's agent: it stayed SUBMITTED.

use std::time::Duration;

use a2a_gateway::config::{Config, RedisConfig, Secret, SubscriberConfig};
use a2a_sample_agent::{AgentOptions, Progress, Route, SampleAgent};
use serde_json::Value;

use crate::support::child::Proc;
use crate::support::hook::Hook;
use crate::support::redis_server::RedisServer;
use crate::support::sse::Events;
use crate::support::*;

const ADMIN: &str = "admin-token-0123456789abcdef";

/// A free port on loopback (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

async fn sample_agent_process(port: u16, agent_id: &str) -> Proc {
    let listen = format!("127.0.0.1:{port}");
    let mut p = Proc::spawn(
        &["sample-agent", "--listen", &listen, "--agent-id", agent_id],
        &[],
    );
    p.line_containing("sample agent listening on").await;
    p
}

#[tokio::test]
async fn a_sample_agent_restarted_with_a_new_agent_id_serves_again_within_5_s() {
    let port = free_port();
    let first = uuid::Uuid::new_v4().to_string();
    let agent = sample_agent_process(port, &first).await;
    let url = format!("http://127.0.0.1:{port}");
    let cfgs = vec![a2a_gateway::config::AgentConfig::new("a", &url)];
    let mut cfg = Config::with_agents("127.0.0.1:0".parse().expect("addr"), cfgs);
    cfg.admin_token = Some(Secret::new(ADMIN));
    let gw = a2a_gateway::Gateway::start(cfg).await.expect("starts");
    let http = Http::new(format!("http://{}", gw.addr()));
    http.ready().await;
    let catalog = http.get("/agents").await.json();
    assert_eq!(catalog["agents"][0]["agent_id"], first.as_str());
    assert_eq!(http.post_task("a").await.status, 202);

    // The same agent restarts on the same port, as another agent_id (the default card's
    // refresh is 300 s away).
    agent.terminate().await;
    let second = uuid::Uuid::new_v4().to_string();
    let _agent = sample_agent_process(port, &second).await;
    let restarted = std::time::Instant::now();
    let mut answers = Vec::new();
    loop {
        let r = http.post_task("a").await;
        answers.push(r.status);
        if r.status == 202 {
            assert_eq!(r.json()["agent_id"], second.as_str(), "{r:?}");
            break;
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(5),
            "no 202 within 5 s of the restart: {answers:?}, last {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let catalog = http.get("/agents").await.json();
    assert_eq!(catalog["agents"][0]["agent_id"], second.as_str());
    assert_eq!(catalog["agents"][0]["card_state"], "fresh");

    // And on demand: the admin route refetches and answers the entry after the fetch.
    let r = http
        .send(
            hyper::Method::POST,
            "/admin/agents/a/refresh",
            &[("authorization", &format!("Bearer {ADMIN}"))],
            bytes::Bytes::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["name"], "a");
    assert_eq!(r.json()["agent_id"], second.as_str());
    assert_eq!(r.json()["card_state"], "fresh");
    let unknown = http
        .send(
            hyper::Method::POST,
            "/admin/agents/nobody/refresh",
            &[("authorization", &format!("Bearer {ADMIN}"))],
            bytes::Bytes::new(),
        )
        .await;
    assert_api_error(&unknown, 404, "UNKNOWN_AGENT");
    let anonymous = http.post_empty("/admin/agents/a/refresh").await;
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    gw.shutdown().await;
}

/// An agent that finishes its tasks on its own (about 1 s to WORKING, 1 s more to COMPLETED)
/// and pushes nothing.
async fn quiet_agent() -> SampleAgent {
    agent_with(AgentOptions {
        progress: Some(Progress {
            to_working: Duration::from_millis(500),
            to_completed: Duration::from_millis(1000),
        }),
        ..AgentOptions::default()
    })
    .await
}

fn reconciling(hook: &Hook, redis: Option<RedisConfig>) -> impl FnOnce(&mut Config) + '_ {
    move |cfg| {
        cfg.agents[0].reconcile_after = Duration::from_millis(300);
        cfg.agents[0].timeout = Duration::from_millis(1000);
        cfg.subscribers = vec![SubscriberConfig::new("orchestrator", &hook.url())];
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
        cfg.redis = redis;
    }
}

async fn completed_on_events(events: &mut Events, id: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let e = events
            .next_event(left)
            .await
            .unwrap_or_else(|| panic!("no COMPLETED of {id} on /events: {}", events.raw));
        let data: Value = serde_json::from_str(&e.data).unwrap_or(Value::Null);
        let task = if data.get("task").is_some() {
            &data["task"]
        } else {
            &data
        };
        if e.data.contains(id) && e.data.contains("COMPLETED") {
            let _ = task;
            return;
        }
    }
}

async fn delivered(hook: &Hook, id: &str) {
    wait_for_within(
        "the webhook delivery of COMPLETED",
        Duration::from_secs(15),
        || async {
            hook.changes()
                .contains(&(id.to_owned(), "COMPLETED".to_owned()))
        },
    )
    .await;
}

/// The ledger's record, read from the ledger itself (the answer says it was not the agent).
async fn recorded(http: &Http, id: &str) -> Resp {
    let r = http.get(&format!("/agents/a/tasks/{id}")).await;
    assert_eq!(r.header("x-a2a-source"), Some("ledger"), "{r:?}");
    r
}

#[tokio::test]
async fn a_non_pushing_agents_task_reaches_completed_with_no_client_asking() {
    let a = quiet_agent().await;
    let hook = Hook::start().await;
    let g = TestGateway::start(&[("a", &a)], reconciling(&hook, None)).await;
    g.ready().await;
    let mut events = Events::new(g.http.open("/events").await);
    let id = g.create_task("a").await;
    completed_on_events(&mut events, &id).await;
    delivered(&hook, &id).await;
    let r = recorded(&g.http, &id).await;
    assert_eq!(r.json()["status"], "COMPLETED");
    let fleet = g.http.get("/api/fleet").await.json();
    assert_eq!(fleet["tasks"]["COMPLETED"], 1, "{fleet}");
    assert_eq!(fleet["tasks"]["SUBMITTED"], 0, "{fleet}");
    assert_eq!(
        g.metric(
            "a2a_gateway_reconciles_total",
            &[("agent", "a"), ("outcome", "final")]
        )
        .await,
        1.0
    );
    // Every check the gateway made is one GET at the agent, and nothing else asked.
    let checks = g
        .metric("a2a_gateway_reconciles_total", &[("agent", "a")])
        .await;
    assert_eq!(checks as usize, a.request_count(Route::GetTask));
}

#[tokio::test]
async fn reconcile_after_ms_0_turns_it_off() {
    let a = quiet_agent().await;
    let hook = Hook::start().await;
    let g = TestGateway::start(&[("a", &a)], |cfg| {
        reconciling(&hook, None)(cfg);
        cfg.agents[0].reconcile_after = Duration::ZERO;
    })
    .await;
    g.ready().await;
    let id = g.create_task("a").await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(a.request_count(Route::GetTask), 0);
    let fleet = g.http.get("/api/fleet").await.json();
    assert_eq!(fleet["tasks"]["SUBMITTED"], 1, "{fleet} ({id})");
}

fn on_redis(r: &RedisServer) -> RedisConfig {
    RedisConfig {
        url: r.url(),
        prefix: "rc:".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn on_redis_two_replicas_reconcile_each_check_once_and_by_one_replica() {
    let r = RedisServer::start();
    let a = std::sync::Arc::new(quiet_agent().await);
    let hook = Hook::start().await;
    let g1 = TestGateway::start(&[("a", &*a)], reconciling(&hook, Some(on_redis(&r)))).await;
    let g2 = TestGateway::start(&[("a", &*a)], reconciling(&hook, Some(on_redis(&r)))).await;
    g1.ready().await;
    g2.ready().await;
    let mut events = Events::new(g2.http.open("/events").await);
    // When each GET of a task reached the agent, seen every 10 ms: two replicas checking one
    // task at once would show as two GETs of it within a few ms.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(
        Vec::<(String, std::time::Instant)>::new(),
    ));
    let watcher = {
        let (a_reqs, seen) = (a.clone(), seen.clone());
        tokio::spawn(async move {
            let mut known = 0;
            loop {
                let gets: Vec<String> = a_reqs
                    .requests()
                    .into_iter()
                    .filter(|r| r.route == Route::GetTask)
                    .map(|r| r.path)
                    .collect();
                let now = std::time::Instant::now();
                {
                    let mut s = seen.lock().expect("seen");
                    for path in gets.into_iter().skip(known) {
                        s.push((path, now));
                        known += 1;
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let ids: Vec<String> = {
        let mut ids = Vec::new();
        for _ in 0..6 {
            ids.push(g1.create_task("a").await);
        }
        ids
    };
    for id in &ids {
        delivered(&hook, id).await;
    }
    completed_on_events(&mut events, &ids[0]).await;
    for g in [&g1, &g2] {
        for id in &ids {
            assert_eq!(recorded(&g.http, id).await.json()["status"], "COMPLETED");
        }
    }
    watcher.abort();
    for id in &ids {
        let at: Vec<std::time::Instant> = seen
            .lock()
            .expect("seen")
            .iter()
            .filter(|(p, _)| p.ends_with(id.as_str()))
            .map(|(_, t)| *t)
            .collect();
        assert!(!at.is_empty(), "{id} was checked");
        for pair in at.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_millis(150),
                "two checks of {id} {:?} apart: one replica at a time",
                pair[1] - pair[0]
            );
        }
    }
    let gets = a.request_count(Route::GetTask);
    let mut checks = 0.0;
    let mut finals = 0.0;
    for g in [&g1, &g2] {
        checks += g
            .metric("a2a_gateway_reconciles_total", &[("agent", "a")])
            .await;
        finals += g
            .metric(
                "a2a_gateway_reconciles_total",
                &[("agent", "a"), ("outcome", "final")],
            )
            .await;
    }
    assert_eq!(finals, ids.len() as f64, "each task finished by one check");
    assert_eq!(
        checks as usize, gets,
        "every check is one GET at the agent, made by one replica"
    );
    // One delivery per change, whichever replica recorded it.
    let completed = hook
        .received()
        .iter()
        .filter(|d| d.change().1 == "COMPLETED")
        .count();
    assert_eq!(completed, ids.len());
}

#[tokio::test]
async fn a_standalone_sample_agent_with_push_and_ingest_token_pushes_its_changes() {
    // The gateway first (its address goes into the agent's card), on a port of its own.
    let port = free_port();
    let agent_port = free_port();
    let url = format!("http://127.0.0.1:{agent_port}");
    let mut cfgs = vec![a2a_gateway::config::AgentConfig::new("a", &url)];
    cfgs[0].ingest_token = Some(Secret::new(TOKEN));
    // Off: only the agent's pushes can tell the ledger.
    cfgs[0].reconcile_after = Duration::ZERO;
    let cfg = Config::with_agents(format!("127.0.0.1:{port}").parse().expect("addr"), cfgs);
    let gw = a2a_gateway::Gateway::start(cfg).await.expect("starts");
    let push = format!("http://127.0.0.1:{port}/agents/a/notifications");
    let listen = format!("127.0.0.1:{agent_port}");
    let mut agent = Proc::spawn(
        &[
            "sample-agent",
            "--listen",
            &listen,
            "--progress",
            "--push",
            &push,
            "--ingest-token",
            TOKEN,
        ],
        &[],
    );
    agent.line_containing("sample agent listening on").await;
    let http = Http::new(format!("http://{}", gw.addr()));
    // The card's first fetch came before the agent listened: the retry's backoff brings it.
    wait_for("the card", || async {
        http.get("/agents").await.json()["agents"][0]["card_state"] == "fresh"
    })
    .await;
    let id = http.create_task("a").await;
    wait_for_within("the pushed COMPLETED", Duration::from_secs(15), || async {
        let fleet = http.get("/api/fleet").await.json();
        fleet["tasks"]["COMPLETED"] == 1
    })
    .await;
    let r = recorded(&http, &id).await;
    assert_eq!(r.json()["status"], "COMPLETED");
    agent.terminate().await;
    gw.shutdown().await;
}
