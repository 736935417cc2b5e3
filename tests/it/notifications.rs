//! POST /agents/{name}/notifications: push notifications from agents, authenticated with the
//! agent's ingest_token and judged by the ledger like every other source of news.

use std::time::Duration;

use crate::support::*;
use a2a_gateway::config::Conformance;
use a2a_sample_agent::{card_for, SampleAgent};
use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Value};

async fn gateway(a: &SampleAgent, conformance: Conformance) -> TestGateway {
    let g = TestGateway::start(&[("a", a)], |cfg| {
        ingest(cfg);
        cfg.agents[0].conformance = conformance;
        cfg.agents[0].refresh = Duration::from_secs(1);
    })
    .await;
    g.ready().await;
    g
}

async fn push(g: &TestGateway, auth: Option<&str>, body: &Value) -> Resp {
    g.http.push("a", auth, body).await
}

async fn refused(g: &TestGateway, reason: &str) -> f64 {
    g.metric(
        "a2a_gateway_notifications_refused_total",
        &[("reason", reason)],
    )
    .await
}

async fn ingested(g: &TestGateway) -> f64 {
    g.metric(
        "a2a_gateway_notifications_ingested_total",
        &[("agent", "a")],
    )
    .await
}

#[tokio::test]
async fn pushes_without_the_right_token_are_refused() {
    let a = agent().await;
    let g = gateway(&a, Conformance::Enforce).await;
    let id = g.create_task("a").await;
    let body = notification(&moved(&a, &id, "WORKING"));
    for auth in [None, Some("wrong-token-0123456789abcdef"), Some("")] {
        let r = push(&g, auth, &body).await;
        assert_eq!(r.status, 401, "{auth:?}: {r:?}");
        assert_eq!(r.error_code(), "UNAUTHORIZED");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    }
    assert_eq!(refused(&g, "unauthorized").await, 3.0);
    // Nothing was recorded: the agent-less GET still asks the agent, which says WORKING now,
    // but the ledger never saw a push.
    assert_eq!(ingested(&g).await, 0.0);
}

#[tokio::test]
async fn an_agent_without_an_ingest_token_gets_no_ingest() {
    let (a, g) = single("a", |_| {}).await;
    let id = g.create_task("a").await;
    let r = push(&g, Some(TOKEN), &notification(&moved(&a, &id, "WORKING"))).await;
    assert_eq!(r.status, 401, "{r:?}");
}

#[tokio::test]
async fn the_state_machine_judges_every_push() {
    let a = agent().await;
    let g = gateway(&a, Conformance::Enforce).await;
    let id = g.create_task("a").await;
    let working = moved(&a, &id, "WORKING");
    let r = push(&g, Some(TOKEN), &notification(&working)).await;
    assert_eq!(
        (r.status, r.json()["verdict"].clone()),
        (202, json!("transition")),
        "{r:?}"
    );
    // The same update again: acknowledged, nothing changes.
    let r = push(&g, Some(TOKEN), &notification(&working)).await;
    assert_eq!(
        (r.status, r.json()["verdict"].clone()),
        (200, json!("duplicate")),
        "{r:?}"
    );
    let done = moved(&a, &id, "COMPLETED");
    assert_eq!(
        push(&g, Some(TOKEN), &notification(&done)).await.status,
        202
    );
    // The ledger now answers for the task, whatever the agent would say.
    a.set_status(&id, "WORKING", Value::Null);
    let got = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(got.json()["status"], "COMPLETED", "{got:?}");
    assert_eq!(got.header("x-a2a-source"), Some("ledger"));
    // A late push of an earlier state is refused, and so is any change after the end.
    let r = push(&g, Some(TOKEN), &notification(&working)).await;
    assert_eq!(r.status, 409, "{r:?}");
    assert_eq!(r.error_code(), "TASK_TERMINAL");
    assert_eq!(
        r.json()["error"]["details"]["recorded"]["status"],
        "COMPLETED"
    );
    let failed = moved(&a, &id, "FAILED");
    assert_eq!(
        push(&g, Some(TOKEN), &notification(&failed))
            .await
            .error_code(),
        "TASK_TERMINAL"
    );
    assert_eq!(refused(&g, "terminal").await, 2.0);
    assert_eq!(ingested(&g).await, 2.0);
}

#[tokio::test]
async fn out_of_order_and_backwards_pushes_are_refused() {
    let a = agent().await;
    let g = gateway(&a, Conformance::Enforce).await;
    let id = g.create_task("a").await;
    let working = moved(&a, &id, "WORKING");
    let input_required = moved(&a, &id, "INPUT_REQUIRED");
    assert_eq!(
        push(&g, Some(TOKEN), &notification(&input_required))
            .await
            .status,
        202
    );
    let r = push(&g, Some(TOKEN), &notification(&working)).await;
    assert_eq!(
        (r.status, r.error_code()),
        (409, "TRANSITION_REFUSED".to_owned()),
        "{r:?}"
    );
    assert_eq!(r.json()["error"]["details"]["reason"], "stale");
    let mut submitted = input_required.clone();
    submitted["status"] = json!("SUBMITTED");
    submitted["updated_at"] = json!(a2a_gateway::protocol::time::now());
    let r = push(&g, Some(TOKEN), &notification(&submitted)).await;
    assert_eq!(r.json()["error"]["details"]["reason"], "backwards", "{r:?}");
}

#[tokio::test]
async fn malformed_pushes_get_clear_errors() {
    let a = agent().await;
    let g = gateway(&a, Conformance::Enforce).await;
    let id = g.create_task("a").await;
    let mut broken = notification(&moved(&a, &id, "FAILED"));
    broken["event_type"] = json!("task.done");
    broken["data"]
        .as_object_mut()
        .expect("task")
        .remove("error");
    let r = push(&g, Some(TOKEN), &broken).await;
    assert_eq!(
        (r.status, r.error_code()),
        (422, "INVALID_NOTIFICATION".to_owned()),
        "{r:?}"
    );
    let paths: Vec<String> = r.json()["error"]["details"]
        .as_array()
        .expect("details")
        .iter()
        .map(|d| d["instance_path"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(
        paths.contains(&"/event_type".to_owned()) && paths.contains(&"/data/error".to_owned()),
        "{paths:?}"
    );
    let auth = format!("Bearer {TOKEN}");
    let r = g
        .http
        .send(
            Method::POST,
            "/agents/a/notifications",
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
            Bytes::from_static(b"{nope"),
        )
        .await;
    assert_eq!(r.error_code(), "INVALID_JSON");
    let r = g
        .http
        .send(
            Method::POST,
            "/agents/a/notifications",
            &[("content-type", "text/plain"), ("authorization", &auth)],
            Bytes::from_static(b"{}"),
        )
        .await;
    assert_eq!(r.error_code(), "UNSUPPORTED_MEDIA_TYPE");
    let r = g
        .http
        .send(Method::GET, "/agents/a/notifications", &[], Bytes::new())
        .await;
    assert_eq!(r.status, 405);
    // In report mode a sloppy but recordable push is accepted.
    let b = agent().await;
    let g = gateway(&b, Conformance::Report).await;
    let id = g.create_task("a").await;
    let mut sloppy = notification(&moved(&b, &id, "WORKING"));
    sloppy["timestamp"] = json!("just now");
    assert_eq!(push(&g, Some(TOKEN), &sloppy).await.status, 202);
}

/// The sample agent itself pushes to the gateway, with the auth header its card names.
#[tokio::test]
async fn a_real_agent_push_reaches_the_ledger() {
    let a = agent().await;
    let g = gateway(&a, Conformance::Enforce).await;
    let endpoint = format!("{}/agents/a/notifications", g.http.base);
    let mut card = card_for(
        "Pushing agent",
        Some((&endpoint, &format!("Authorization: Bearer {TOKEN}"))),
    );
    card["agent_id"] = json!(a.agent_id());
    a.set_card(card);
    wait_for("the card with notification_config is served", || async {
        g.http.get("/agents/a/agent-card.json").await.json()["notification_config"]["endpoint_url"]
            == endpoint.as_str()
    })
    .await;
    let id = g.create_task("a").await;
    moved(&a, &id, "WORKING");
    moved(&a, &id, "COMPLETED");
    // Wait on the pushes themselves: a GET meanwhile would ask the agent and record its answer,
    // racing the pushes it is meant to observe.
    wait_for("the agent's two pushes are answered", || async {
        a.notifications_sent() + a.notifications_failed() == 2
    })
    .await;
    assert_eq!(a.notifications_failed(), 0);
    assert_eq!(ingested(&g).await, 2.0);
    let got = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(got.header("x-a2a-source"), Some("ledger"), "{got:?}");
    assert_eq!(got.json()["status"], "COMPLETED");
}
