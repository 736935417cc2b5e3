//! Webhook fan-out: every accepted status change reaches its subscribers, signed, in order per
//! task, through retries, 410s, dead letters and a Redis restart. Real gateway on loopback,
//! real subscriber servers, and (where named) a real redis-server of the test's own.

use std::time::{Duration, Instant};

use crate::support::hook::{Hook, Received};
use crate::support::redis_server::RedisServer;
use crate::support::*;
use a2a_gateway::config::{Config, RedisConfig, Secret, SubscriberConfig};
use a2a_sample_agent::SampleAgent;
use base64::Engine;
use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Value};

const ADMIN: &str = "admin-token-0123456789abcdef";

fn secret(n: u8) -> String {
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode([n; 32])
    )
}

fn subscriber(name: &str, hook: &Hook, key: Option<&str>) -> SubscriberConfig {
    let mut s = SubscriberConfig::new(name, &hook.url());
    s.secret = key.map(Secret::new).into_iter().collect();
    s
}

/// A gateway in front of agent `a` taking its pushes, delivering to `subs` (retries every
/// second), on Redis when given.
async fn gateway(
    a: &SampleAgent,
    redis: Option<RedisConfig>,
    subs: Vec<SubscriberConfig>,
    tweak: impl FnOnce(&mut Config),
) -> TestGateway {
    let g = TestGateway::start(&[("a", a)], |cfg| {
        ingest(cfg);
        cfg.subscribers = subs;
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
        cfg.webhooks.retry_schedule_secs = vec![1; 10];
        cfg.webhooks.timeout = Duration::from_secs(2);
        cfg.webhooks.visibility_timeout = Duration::from_secs(8);
        cfg.admin_token = Some(Secret::new(ADMIN));
        cfg.redis = redis;
        tweak(cfg);
    })
    .await;
    g.ready().await;
    g
}

async fn admin(g: &TestGateway, method: Method, path: &str, body: &str) -> Resp {
    g.http
        .send(
            method,
            path,
            &[
                ("authorization", &format!("Bearer {ADMIN}")),
                ("content-type", "application/json"),
            ],
            Bytes::from(body.to_owned()),
        )
        .await
}

async fn wait_count(hook: &Hook, n: usize) {
    let what = format!("{n} deliveries");
    wait_for(&what, || async { hook.count() >= n }).await;
}

/// Deliveries per task, as status lists in arrival order.
fn by_task(received: &[Received]) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::<String, Vec<String>>::new();
    for r in received {
        let (t, s) = r.change();
        out.entry(t).or_default().push(s);
    }
    out
}

/// A task's life, created through the gateway and finished by the agent's own pushes, reaches
/// two subscribers, each with its own signature (checked as a receiver would) and headers.
#[tokio::test]
async fn a_tasks_life_reaches_two_signed_subscribers() {
    let r = RedisServer::start();
    let (one, two) = (Hook::start().await, Hook::start().await);
    let (k1, k2) = (secret(1), secret(2));
    let mut s1 = subscriber("one", &one, Some(&k1));
    s1.auth_header = Some((
        hyper::header::AUTHORIZATION,
        Secret::new("Bearer subscriber-one-token"),
    ));
    let s2 = subscriber("two", &two, Some(&k2));
    let a = agent().await;
    let g = gateway(&a, Some(r.config("t:")), vec![s1, s2], |_| {}).await;
    // The agent pushes its changes to the gateway, as its card says.
    let endpoint = format!("{}/agents/a/notifications", g.http.base);
    let mut card = a.card();
    card["notification_config"] = json!({
        "endpoint_url": endpoint,
        "auth_header": format!("Authorization: Bearer {TOKEN}"),
    });
    a.set_card(card);
    let id = g.create_task("a").await;
    a.set_status(&id, "WORKING", Value::Null).expect("known");
    a.set_status(
        &id,
        "COMPLETED",
        json!({"output": {"summary": "done", "filename": "avg.py"}}),
    )
    .expect("known");
    wait_count(&one, 3).await;
    wait_count(&two, 3).await;
    assert_eq!(
        a.notifications_sent(),
        2,
        "WORKING and COMPLETED came as the agent's pushes"
    );
    for (hook, key, other) in [(&one, &k1, &k2), (&two, &k2, &k1)] {
        let got = hook.received();
        let statuses: Vec<String> = got.iter().map(|d| d.change().1).collect();
        assert_eq!(statuses, ["SUBMITTED", "WORKING", "COMPLETED"]);
        for d in &got {
            d.verify(key).unwrap_or_else(|e| panic!("signature: {e}"));
            assert!(d.verify(other).is_err(), "another key must not verify");
            let j = d.json();
            assert_eq!(j["event_type"], "task.status.updated");
            assert_eq!(j["data"]["task_id"], id.as_str());
            assert!(a2a_gateway::protocol::time::parse_strict(
                j["timestamp"].as_str().expect("ts")
            )
            .is_some());
            assert_eq!(d.header("content-type"), Some("application/json"));
            assert!(d.msg_id().starts_with("msg_"));
        }
        // One id per change, the same for both subscribers.
        let ids: std::collections::HashSet<String> = got.iter().map(Received::msg_id).collect();
        assert_eq!(ids.len(), 3);
    }
    assert_eq!(
        one.received()[0].header("authorization"),
        Some("Bearer subscriber-one-token")
    );
    assert_eq!(two.received()[0].header("authorization"), None);
    assert_eq!(
        one.received()
            .iter()
            .map(Received::msg_id)
            .collect::<Vec<_>>(),
        two.received()
            .iter()
            .map(Received::msg_id)
            .collect::<Vec<_>>()
    );
    // A late, conflicting push is refused and reaches nobody; a repeat is acknowledged only.
    let late = json!({"task_id": id, "agent_id": a.agent_id(), "status": "WORKING", "input": good_input(),
        "created_at": a2a_gateway::protocol::time::now(), "updated_at": a2a_gateway::protocol::time::now()});
    assert_eq!(g.push(&late).await.status, 409);
    let done = a.task(&id).expect("task");
    assert_eq!(g.push(&done).await.status, 200, "duplicate acknowledged");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!((one.count(), two.count()), (3, 3));
    assert_eq!(
        g.metric(
            "a2a_gateway_webhook_deliveries_total",
            &[("subscriber", "one"), ("outcome", "delivered")]
        )
        .await,
        3.0
    );
    assert_eq!(g.metric("a2a_gateway_webhook_queue_depth", &[]).await, 0.0);
}

pub(crate) async fn down_then_up(redis: Option<RedisConfig>) {
    let mut hook = Hook::start().await;
    let a = agent().await;
    let g = gateway(&a, redis, vec![subscriber("s", &hook, None)], |_| {}).await;
    hook.stop().await;
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(g.create_task("a").await);
    }
    for id in &ids {
        assert_eq!(g.push(&moved(&a, id, "WORKING")).await.status, 202);
    }
    for id in &ids {
        assert_eq!(g.push(&moved(&a, id, "COMPLETED")).await.status, 202);
    }
    // Down for a while: attempts fail and are retried on the schedule.
    wait_for("failed attempts", || async {
        g.metric(
            "a2a_gateway_webhook_deliveries_total",
            &[("outcome", "retry")],
        )
        .await
            >= 10.0
    })
    .await;
    assert!(g.metric("a2a_gateway_webhook_queue_depth", &[]).await >= 30.0);
    hook.restart().await;
    wait_count(&hook, 30).await;
    let lanes = by_task(&hook.received());
    assert_eq!(lanes.len(), 10);
    for (task, statuses) in lanes {
        assert_eq!(statuses, ["SUBMITTED", "WORKING", "COMPLETED"], "{task}");
    }
    wait_for("queue drained", || async {
        g.metric("a2a_gateway_webhook_queue_depth", &[]).await == 0.0
    })
    .await;
}

#[tokio::test]
async fn a_subscriber_down_then_up_gets_everything_in_order_in_process() {
    down_then_up(None).await;
}

#[tokio::test]
async fn a_subscriber_down_then_up_gets_everything_in_order_on_redis() {
    let r = RedisServer::start();
    down_then_up(Some(r.config("t:"))).await;
}

pub(crate) async fn gone_disables(redis: Option<RedisConfig>) {
    let hook = Hook::start().await;
    let a = agent().await;
    let g = gateway(&a, redis, vec![subscriber("s", &hook, None)], |_| {}).await;
    hook.answer_next(410, None);
    let first = g.create_task("a").await;
    wait_for("disabled", || async {
        g.metric(
            "a2a_gateway_webhook_deliveries_total",
            &[("outcome", "disabled")],
        )
        .await
            == 1.0
    })
    .await;
    let listed = admin(&g, Method::GET, "/admin/subscribers", "")
        .await
        .json();
    assert!(
        listed["subscribers"][0]["disabled"]
            .as_str()
            .is_some_and(|r| r.starts_with("410 Gone")),
        "{listed}"
    );
    // While disabled nothing is sent; new changes go to the dead letters rather than pile up.
    let second = g.create_task("a").await;
    wait_for("dead letter of the disabled subscriber", || async {
        g.metric("a2a_gateway_webhook_dead_letters", &[]).await == 1.0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(hook.count(), 0);
    assert_eq!(hook.attempts(), 1, "one attempt: the 410");
    let dead = admin(&g, Method::GET, "/admin/dead-letters", "")
        .await
        .json();
    assert_eq!(dead["dead_letters"][0]["task_id"], second.as_str());
    assert_eq!(dead["dead_letters"][0]["last_error"], "subscriber disabled");
    // Enabled: the parked delivery goes out; the dead letter once redriven.
    let r = admin(&g, Method::POST, "/admin/subscribers/s/enable", "").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["lanes_resumed"], 1);
    wait_count(&hook, 1).await;
    assert_eq!(hook.received()[0].change().0, first);
    let r = admin(&g, Method::POST, "/admin/dead-letters/redrive", "").await;
    assert_eq!(r.json()["redriven"], 1);
    wait_count(&hook, 2).await;
    assert_eq!(hook.received()[1].change().0, second);
    let r = admin(&g, Method::POST, "/admin/subscribers/nobody/enable", "").await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn gone_disables_the_subscriber_until_enabled_in_process() {
    gone_disables(None).await;
}

#[tokio::test]
async fn gone_disables_the_subscriber_until_enabled_on_redis() {
    let r = RedisServer::start();
    gone_disables(Some(r.config("t:"))).await;
}

pub(crate) async fn dead_letters(redis: Option<RedisConfig>) {
    let hook = Hook::start().await;
    // 3xx is a failure: redirects are never followed.
    hook.set_status(302);
    let a = agent().await;
    let g = gateway(&a, redis, vec![subscriber("s", &hook, None)], |cfg| {
        cfg.webhooks.retry_schedule_secs = vec![1, 1];
    })
    .await;
    let id = g.create_task("a").await;
    wait_for("dead letter", || async {
        g.metric("a2a_gateway_webhook_dead_letters", &[]).await == 1.0
    })
    .await;
    assert_eq!(hook.attempts(), 3, "max attempts = schedule + 1");
    let listed = admin(&g, Method::GET, "/admin/dead-letters", "").await;
    assert_eq!(listed.status, 200);
    let j = listed.json();
    assert_eq!(j["total"], 1);
    let d = &j["dead_letters"][0];
    assert_eq!(d["subscriber"], "s");
    assert_eq!(d["task_id"], id.as_str());
    assert_eq!(d["attempts"], 3);
    assert_eq!(d["last_error"], "HTTP 302");
    assert_eq!(d["payload"]["data"]["status"], "SUBMITTED");
    // Without the token: 401; bad input: 400.
    let r = g.http.get("/admin/dead-letters").await;
    assert_eq!((r.status, r.error_code().as_str()), (401, "UNAUTHORIZED"));
    let r = admin(
        &g,
        Method::POST,
        "/admin/dead-letters/redrive",
        "{\"limit\": 0}",
    )
    .await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (400, "INVALID_REQUEST")
    );
    let r = admin(&g, Method::POST, "/admin/dead-letters/redrive", "[").await;
    assert_eq!(r.error_code(), "INVALID_JSON");
    // Fixed subscriber, redrive: delivered with the same id.
    hook.set_status(204);
    let r = admin(
        &g,
        Method::POST,
        "/admin/dead-letters/redrive",
        "{\"subscriber\": \"s\"}",
    )
    .await;
    assert_eq!(r.json()["redriven"], 1, "{r:?}");
    wait_count(&hook, 1).await;
    assert_eq!(hook.received()[0].change(), (id, "SUBMITTED".to_owned()));
    assert_eq!(g.metric("a2a_gateway_webhook_dead_letters", &[]).await, 0.0);
    let r = admin(&g, Method::POST, "/admin/dead-letters/redrive", "").await;
    assert_eq!(r.json()["redriven"], 0);
}

#[tokio::test]
async fn exhausted_deliveries_become_dead_letters_and_redrive_in_process() {
    dead_letters(None).await;
}

#[tokio::test]
async fn exhausted_deliveries_become_dead_letters_and_redrive_on_redis() {
    let r = RedisServer::start();
    dead_letters(Some(r.config("t:"))).await;
}

#[tokio::test]
async fn the_admin_api_does_not_exist_without_a_token() {
    let hook = Hook::start().await;
    let a = agent().await;
    let g = gateway(&a, None, vec![subscriber("s", &hook, None)], |cfg| {
        cfg.admin_token = None;
    })
    .await;
    let r = admin(&g, Method::GET, "/admin/dead-letters", "").await;
    assert_eq!((r.status, r.error_code().as_str()), (404, "NOT_FOUND"));
}

/// A throttling subscriber's Retry-After is honoured: the next attempt waits at least that long
/// (the schedule says one second).
#[tokio::test]
async fn retry_after_is_honoured() {
    let hook = Hook::start().await;
    hook.answer_next(503, Some("3"));
    let a = agent().await;
    let g = gateway(&a, None, vec![subscriber("s", &hook, None)], |_| {}).await;
    let started = Instant::now();
    g.create_task("a").await;
    wait_count(&hook, 1).await;
    let waited = hook.received()[0].at - started;
    assert!(waited >= Duration::from_secs(3), "retried after {waited:?}");
    assert_eq!(hook.attempts(), 2);
}

/// A subscriber URL whose name resolves to loopback is refused at delivery time unless loopback
/// is allowed: the request never leaves the gateway.
#[tokio::test]
async fn the_guard_refuses_names_that_resolve_to_private_addresses() {
    let hook = Hook::start().await;
    let a = agent().await;
    let mut sub =
        SubscriberConfig::new("s", &format!("http://localhost:{}/hook", hook.addr.port()));
    sub.secret = Vec::new();
    let g = gateway(&a, None, vec![sub], |cfg| cfg.webhooks.allow.clear()).await;
    g.create_task("a").await;
    wait_for("a refused attempt", || async {
        g.metric("a2a_gateway_webhook_attempts_total", &[("result", "error")])
            .await
            >= 1.0
    })
    .await;
    assert_eq!(hook.attempts(), 0);
}

/// Redis restarted empty under a running gateway: it recovers (consumer group recreated) without
/// a restart and keeps accepting and delivering.
#[tokio::test]
async fn redis_restarted_empty_is_survived() {
    let mut r = RedisServer::start();
    let hook = Hook::start().await;
    let a = agent().await;
    let g = gateway(
        &a,
        Some(r.config("t:")),
        vec![subscriber("s", &hook, None)],
        |_| {},
    )
    .await;
    g.create_task("a").await;
    wait_count(&hook, 1).await;
    r.restart_empty();
    // The first calls after the restart may fail while connections re-establish.
    let mut after = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while after.len() < 5 && Instant::now() < deadline {
        let res = g.http.post_task("a").await;
        // Refused before the agent while the ledger is known down; passed on pending (and
        // recorded later) if it failed after the agent accepted.
        assert!(res.status == 202 || res.status == 503, "{res:?}");
        if res.status == 202 && res.header("x-a2a-ledger").is_none() {
            after.push(res.json()["task_id"].as_str().expect("id").to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(after.len(), 5, "recorded again after the restart");
    wait_count(&hook, 6).await;
    let delivered: Vec<String> = hook.received().iter().map(|d| d.change().0).collect();
    for id in &after {
        assert!(delivered.contains(id), "{id} delivered");
    }
}

/// Changes the gateway sees itself, in the agent's answers to create, get and cancel, are
/// delivered like pushed ones, once each: a repeated GET or a GET of the terminal task adds none.
#[tokio::test]
async fn changes_seen_in_answers_are_delivered_once_each() {
    let hook = Hook::start().await;
    let a = agent().await;
    let g = gateway(&a, None, vec![subscriber("s", &hook, None)], |_| {}).await;
    let id = g.create_task("a").await;
    a.set_status(&id, "WORKING", Value::Null).expect("known");
    for _ in 0..3 {
        let r = g.http.get(&format!("/agents/a/tasks/{id}")).await;
        assert_eq!(r.json()["status"], "WORKING");
    }
    let r = g
        .http
        .post_empty(&format!("/agents/a/tasks/{id}/cancel"))
        .await;
    assert_eq!(r.json()["status"], "CANCELLED", "{r:?}");
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(r.header("x-a2a-source"), Some("ledger"));
    wait_count(&hook, 3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let statuses: Vec<String> = hook.received().iter().map(|d| d.change().1).collect();
    assert_eq!(statuses, ["SUBMITTED", "WORKING", "CANCELLED"]);
    assert_eq!(
        a.notifications_sent(),
        0,
        "no pushes: the gateway saw these itself"
    );
}

/// A queued message of a newer format version (a replica of a later release wrote it during a
/// rolling upgrade) is neither sent nor dropped: it stays in its lane, for a replica that reads
/// it, and a message of this version behind another lane goes out meanwhile.
#[tokio::test]
async fn a_message_of_a_newer_format_is_left_for_a_newer_replica() {
    let r = RedisServer::start();
    let hook = Hook::start().await;
    let a = agent().await;
    let g = gateway(
        &a,
        Some(r.config("t:")),
        vec![subscriber("s", &hook, None)],
        |_| {},
    )
    .await;
    let keys = a2a_gateway::store::Keyspace::new("t:", 16);
    let task = "from-the-future";
    let wh = format!("{}wh:", keys.part(keys.of(task)));
    let cli = |args: &[&str]| r.cli(args);
    let lane = format!("{wh}lane:s:{task}");
    let entry = format!(
        "1 {}\nmsg_future\n{{\"later\":true}}",
        a2a_gateway::webhook::queue::FORMAT + 1
    );
    cli(&["RPUSH", &lane, &entry]);
    cli(&["INCR", &format!("{wh}queued")]);
    cli(&[
        "XADD",
        &format!("{wh}stream"),
        "*",
        "s",
        "s",
        "t",
        task,
        "a",
        "0",
    ]);
    wait_for("the newer message is looked at and left", || async {
        g.metric(
            "a2a_gateway_webhook_deliveries_total",
            &[("outcome", "newer_format")],
        )
        .await
            >= 1.0
    })
    .await;
    // Meanwhile this version's own deliveries go out.
    let id = g.create_task("a").await;
    wait_count(&hook, 1).await;
    assert_eq!(hook.received()[0].change().0, id);
    assert!(hook.received().iter().all(|d| d.msg_id() != "msg_future"));
    assert_eq!(cli(&["LLEN", &lane]), "1", "the message is still queued");
    assert_eq!(cli(&["LINDEX", &lane, "0"]), entry, "and unchanged");
}
