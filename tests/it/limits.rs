//! Limits over real sockets: a client past its `rate_per_sec` (429 RATE_LIMITED with
//! `Retry-After`, `RateLimit-Policy` and `RateLimit`; the bucket refills); an agent at its
//! `max_in_flight` (503 AGENT_BUSY without a call, a streamed artifact body holding its place
//! until it is dropped); an agent ejected after `eject_after` 5xx answers or connection
//! failures (503 AGENT_UNAVAILABLE with the reason, no call while ejected), a failing probe
//! ejecting it again and a succeeding one bringing it back; `GET /agents` and the metrics
//! saying so at each step.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Method;
use serde_json::{json, Value};

use a2a_gateway::config::{Config, Right};
use sample::{NewArtifact, Reply, Route, SampleAgent};

use crate::auth::client;
use crate::support::*;

const SLOW: &str = "slow-key-0123456789abcdef";
const FREE: &str = "free-key-0123456789abcdef";
const OPS: &str = "ops-key-0123456789abcdef";

/// `name = value` of one member of a structured-field list such as `"client";r=1;t=2`.
fn param(field: &str, name: &str) -> Option<u64> {
    field
        .split(';')
        .find_map(|p| p.trim().strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
}

/// One sample of `family` (with `labels`) as the client of `key` scrapes it.
async fn metric_as(g: &TestGateway, key: &str, family: &str, labels: &[(&str, &str)]) -> f64 {
    let r = g.http.get_as("/metrics", key).await;
    assert_eq!(r.status, 200, "{r:?}");
    metric_value(&String::from_utf8_lossy(&r.body), family, labels)
}

/// Wait until agent `a` has no request in flight (`what` is why it should come to that).
async fn nothing_in_flight(g: &TestGateway, what: &str) {
    wait_for(what, || async {
        g.metric("a2a_gateway_agent_in_flight", &[("agent", "a")])
            .await
            == 0.0
    })
    .await;
}

/// The catalog entry of agent `name`, as the client of `key` (none: no clients configured).
async fn entry(g: &TestGateway, key: Option<&str>, name: &str) -> Value {
    let r = match key {
        Some(k) => g.http.get_as("/agents", k).await,
        None => g.http.get("/agents").await,
    };
    assert_eq!(r.status, 200, "{r:?}");
    r.json()["agents"]
        .as_array()
        .and_then(|l| l.iter().find(|a| a["name"] == name).cloned())
        .unwrap_or_else(|| panic!("no agent {name} in {r:?}"))
}

#[tokio::test]
async fn a_client_past_its_rate_gets_429_with_ratelimit_headers_until_its_bucket_refills() {
    let (_a, g) = single("a", |cfg: &mut Config| {
        // slow: a token every 4 s, two at once. free: no rate.
        let mut slow = client("slow", SLOW, &["*"], &[Right::Tasks]);
        slow.rate_per_sec = Some(0.25);
        slow.burst = Some(2);
        cfg.clients = vec![
            slow,
            client("free", FREE, &["*"], &[Right::Tasks, Right::Metrics]),
        ];
    })
    .await;
    let first = g.http.get_as("/agents", SLOW).await;
    assert_eq!(first.status, 200, "{first:?}");
    // The bucket is the one policy: 2 requests over the 8 s an empty bucket takes to fill.
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"client\";q=2;w=8"),
        "{first:?}"
    );
    let now = first.header("ratelimit").expect("RateLimit on a success");
    assert!(now.starts_with("\"client\";"), "{now}");
    assert_eq!(param(now, "r"), Some(1), "{now}");
    assert!(
        param(now, "t").is_some_and(|t| (1..=4).contains(&t)),
        "{now}"
    );

    let second = g.http.get_as("/agents", SLOW).await;
    assert_eq!(second.status, 200, "{second:?}");
    assert_eq!(
        param(second.header("ratelimit").expect("RateLimit"), "r"),
        Some(0)
    );

    let refused = g.http.get_as("/agents", SLOW).await;
    let err = assert_api_error(&refused, 429, "RATE_LIMITED");
    let retry: u64 = refused
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in whole seconds");
    assert!((1..=4).contains(&retry), "{refused:?}");
    assert_eq!(
        refused.header("ratelimit-policy"),
        Some("\"client\";q=2;w=8")
    );
    let now = refused.header("ratelimit").expect("RateLimit on the 429");
    assert_eq!(
        (param(now, "r"), param(now, "t")),
        (Some(0), Some(retry)),
        "{now}"
    );
    assert_eq!(err["details"]["rate_per_sec"], json!(0.25), "{err}");
    assert_eq!(err["details"]["burst"], json!(2), "{err}");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"slow\"")),
        "{err}"
    );
    // Any route costs a token, the agent routes too.
    let create = g.http.post_task_as("a", SLOW).await;
    assert_api_error(&create, 429, "RATE_LIMITED");

    // Other clients are not slowed, and an unlimited one gets no RateLimit headers.
    let free = g.http.get_as("/agents", FREE).await;
    assert_eq!(free.status, 200);
    assert_eq!(free.header("ratelimit"), None);
    assert_eq!(free.header("ratelimit-policy"), None);
    assert_eq!(
        metric_as(
            &g,
            FREE,
            "a2a_gateway_rate_limited_total",
            &[("client", "slow")]
        )
        .await,
        2.0
    );
    assert_eq!(
        metric_as(
            &g,
            FREE,
            "a2a_gateway_rate_limited_total",
            &[("client", "free")]
        )
        .await,
        0.0
    );

    // The bucket refills: a token comes back within the Retry-After.
    wait_for("slow's bucket to refill", || async {
        g.http.get_as("/agents", SLOW).await.status == 200
    })
    .await;
}

#[tokio::test]
async fn an_agent_at_max_in_flight_answers_agent_busy_without_a_call_and_recovers() {
    let (a, g) = single("a", |cfg: &mut Config| {
        cfg.agents[0].max_in_flight = 2;
    })
    .await;
    let ids = [g.create_task("a").await, g.create_task("a").await];
    assert_eq!(
        g.metric("a2a_gateway_agent_in_flight", &[("agent", "a")])
            .await,
        0.0
    );
    // Two reads the agent answers slowly hold both places.
    for _ in 0..2 {
        a.script_once(
            Route::GetTask,
            Reply::Delay(Duration::from_secs(3), Box::new(Reply::Default)),
        );
    }
    let held: Vec<_> = ids
        .iter()
        .map(|id| {
            let http = g.http.clone();
            let path = format!("/agents/a/tasks/{id}");
            tokio::spawn(async move { http.get(&path).await })
        })
        .collect();
    wait_for("both reads at the agent", || async {
        a.request_count(Route::GetTask) == 2
    })
    .await;
    assert_eq!(
        g.metric("a2a_gateway_agent_in_flight", &[("agent", "a")])
            .await,
        2.0
    );

    let busy = g.http.get(&format!("/agents/a/tasks/{}", ids[0])).await;
    let err = assert_api_error(&busy, 503, "AGENT_BUSY");
    assert_eq!(busy.header("retry-after"), Some("1"));
    assert_eq!(err["details"]["max_in_flight"], json!(2), "{err}");
    let create = g.http.post_task("a").await;
    assert_api_error(&create, 503, "AGENT_BUSY");
    assert_eq!(
        a.request_count(Route::GetTask),
        2,
        "the agent was not called"
    );
    assert_eq!(
        a.request_count(Route::CreateTask),
        2,
        "the agent was not called"
    );
    assert_eq!(
        g.metric("a2a_gateway_agent_busy_total", &[("agent", "a")])
            .await,
        2.0
    );
    // Busy is not a failure of the agent's: it stays in service.
    assert_eq!(entry(&g, None, "a").await["health"], "ok");

    for h in held {
        assert_eq!(h.await.expect("read").status, 200);
    }
    nothing_in_flight(&g, "the places to come free").await;
    assert_eq!(
        g.http
            .get(&format!("/agents/a/tasks/{}", ids[0]))
            .await
            .status,
        200
    );
    g.create_task("a").await;
}

#[tokio::test]
async fn a_create_awaited_past_its_timeout_holds_its_place_until_the_late_answer() {
    let (a, g) = single("a", |cfg: &mut Config| {
        cfg.agents[0].max_in_flight = 1;
        cfg.agents[0].timeout = Duration::from_millis(300);
    })
    .await;
    a.script_once(
        Route::CreateTask,
        Reply::Delay(Duration::from_secs(2), Box::new(Reply::Default)),
    );
    let r = g.http.post_task("a").await;
    assert_api_error(&r, 504, "AGENT_TIMEOUT");
    // The agent is still working on the create, and the gateway still waiting for it.
    let create = |key: &'static str| {
        let g = &g;
        async move {
            g.http
                .send(
                    Method::POST,
                    "/agents/a/tasks",
                    &[
                        ("content-type", "application/json"),
                        ("idempotency-key", key),
                    ],
                    serde_json::to_vec(&json!({ "input": good_input() })).expect("json"),
                )
                .await
        }
    };
    let busy = create("k1").await;
    assert_api_error(&busy, 503, "AGENT_BUSY");
    assert_eq!(a.request_count(Route::CreateTask), 1);
    wait_for("the late answer", || async {
        g.metric(
            "a2a_gateway_late_answers_total",
            &[("agent", "a"), ("outcome", "recorded")],
        )
        .await
            == 1.0
    })
    .await;
    nothing_in_flight(&g, "the place to come free").await;
    // The refused create's key was released, not left in flight: its retry goes through.
    let retried = create("k1").await;
    assert_eq!(retried.status, 202, "{retried:?}");
}

#[tokio::test]
async fn an_artifact_body_holds_its_place_until_it_ends_or_is_dropped() {
    let (a, g) = single("a", |cfg: &mut Config| {
        cfg.agents[0].max_in_flight = 1;
    })
    .await;
    let id = g.create_task("a").await;
    // Larger than what the sockets between them buffer: the relay cannot finish unread.
    let big = Bytes::from(vec![b'x'; 64 << 20]);
    let art = a.add_artifact(
        &id,
        NewArtifact::File {
            filename: "big.bin".into(),
            mime_type: "application/octet-stream".into(),
            body: big,
        },
    );
    let path = format!("/agents/a/artifacts/{art}/content");
    let res = g.http.open(&path).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        g.metric("a2a_gateway_agent_in_flight", &[("agent", "a")])
            .await,
        1.0
    );
    let busy = g.http.get(&format!("/agents/a/tasks/{id}")).await;
    assert_api_error(&busy, 503, "AGENT_BUSY");
    // A client that hangs up mid-body frees the place.
    drop(res);
    nothing_in_flight(&g, "the relay to end").await;
    // Read to its end, a body frees it as well.
    let res = g.http.open(&path).await;
    let body = res.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(body.len(), 64 << 20);
    nothing_in_flight(&g, "the relay to end").await;
    assert_eq!(
        g.http.get(&format!("/agents/a/tasks/{id}")).await.status,
        200
    );
}

#[tokio::test]
async fn an_agent_answering_5xx_in_a_row_is_ejected_then_probed_back() {
    let (a, g) = single("a", |cfg: &mut Config| {
        cfg.agents[0].eject_after = 3;
        cfg.agents[0].eject = Duration::from_secs(1);
    })
    .await;
    let m = |family: &'static str| {
        let g = &g;
        async move { g.metric(family, &[("agent", "a")]).await }
    };
    assert_eq!(m("a2a_gateway_agent_ejected").await, 0.0);
    let down = json!({ "error": "overloaded" });
    a.script(Route::CreateTask, Reply::Json(500, down.clone()));
    // An answer that is not a 5xx resets the count: two failures, a 400, three failures.
    for _ in 0..2 {
        assert_eq!(g.http.post_task("a").await.status, 500);
    }
    a.script_once(
        Route::CreateTask,
        Reply::Json(400, json!({ "error": "bad" })),
    );
    assert_eq!(g.http.post_task("a").await.status, 400);
    for _ in 0..2 {
        assert_eq!(g.http.post_task("a").await.status, 500);
    }
    assert_eq!(entry(&g, None, "a").await["health"], "ok");
    assert_eq!(g.http.post_task("a").await.status, 500);
    assert_eq!(a.request_count(Route::CreateTask), 6);

    // Ejected: answered at once, with the reason, and the agent is not called.
    let r = g.http.post_task("a").await;
    let err = assert_api_error(&r, 503, "AGENT_UNAVAILABLE");
    let msg = err["message"].as_str().expect("message");
    assert!(
        msg.contains("ejected after 3 consecutive failures")
            && msg.contains("answered 500 Internal Server Error"),
        "{msg}"
    );
    assert!(r.header("retry-after").is_some_and(|v| v == "1"), "{r:?}");
    assert_eq!(err["details"]["consecutive_failures"], json!(3), "{err}");
    assert_eq!(
        a.request_count(Route::CreateTask),
        6,
        "not called while ejected"
    );
    let e = entry(&g, None, "a").await;
    assert_eq!(e["health"], "ejected", "{e}");
    assert!(e["ejected_until"].is_string(), "{e}");
    assert_eq!(
        e["ejection_reason"],
        "3 consecutive failures, the last: answered 500 Internal Server Error",
        "{e}"
    );
    assert_eq!(
        e["card_state"], "fresh",
        "the card is not the agent's health"
    );
    assert_eq!(m("a2a_gateway_agent_ejected").await, 1.0);
    assert_eq!(m("a2a_gateway_agent_ejections_total").await, 1.0);

    // After eject_secs one request probes; it fails, and the agent is ejected again.
    wait_for("the probe", || async {
        a.request_count(Route::CreateTask) == 7 || {
            let r = g.http.post_task("a").await;
            assert!(
                r.status == 503 || r.status == 500,
                "only refusals before the probe: {r:?}"
            );
            false
        }
    })
    .await;
    assert_eq!(m("a2a_gateway_agent_ejections_total").await, 2.0);
    let e = entry(&g, None, "a").await;
    assert_eq!(e["health"], "ejected", "{e}");
    assert!(
        e["ejection_reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("4 consecutive failures")),
        "{e}"
    );

    // The agent recovers: the next probe succeeds and closes the circuit.
    a.clear_scripts();
    wait_for("a probe to succeed", || async {
        let r = g.http.post_task("a").await;
        assert!(r.status == 503 || r.status == 202, "{r:?}");
        r.status == 202
    })
    .await;
    assert_eq!(
        a.request_count(Route::CreateTask),
        8,
        "one probe after the failed one"
    );
    let e = entry(&g, None, "a").await;
    assert_eq!(e["health"], "ok", "{e}");
    assert!(e.get("ejected_until").is_none() && e.get("ejection_reason").is_none());
    assert_eq!(m("a2a_gateway_agent_ejected").await, 0.0);
    g.create_task("a").await;
    assert_eq!(m("a2a_gateway_agent_ejections_total").await, 2.0);
}

#[tokio::test]
async fn connection_failures_eject_and_the_reason_is_shown_only_to_who_may_read_errors() {
    let (down, up) = (agent().await, agent().await);
    let g = TestGateway::start(&[("down", &down), ("up", &up)], |cfg: &mut Config| {
        for a in &mut cfg.agents {
            a.eject_after = 2;
            a.eject = Duration::from_secs(600);
        }
        cfg.clients = vec![
            client("user", FREE, &["*"], &[Right::Tasks]),
            client("ops", OPS, &["*"], &[Right::Tasks, Right::Metrics]),
        ];
    })
    .await;
    wait_for("both cards", || async {
        g.http.get_as("/readyz", OPS).await.status == 200
    })
    .await;
    let id = {
        let r = g.http.post_task_as("down", FREE).await;
        assert_eq!(r.status, 202, "{r:?}");
        r.json()["task_id"].as_str().expect("task_id").to_owned()
    };
    // The agent goes away: its port refuses connections.
    SampleAgent::shutdown(down).await;
    for _ in 0..2 {
        let r = g
            .http
            .get_as(&format!("/agents/down/tasks/{id}"), FREE)
            .await;
        assert_api_error(&r, 502, "AGENT_UNREACHABLE");
    }
    let r = g
        .http
        .get_as(&format!("/agents/down/tasks/{id}"), FREE)
        .await;
    let err = assert_api_error(&r, 503, "AGENT_UNAVAILABLE");
    assert!(
        err["message"].as_str().is_some_and(
            |m| m.contains("ejected after 2 consecutive failures (the last: unreachable")
        ),
        "{err}"
    );
    let retry: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((590..=600).contains(&retry), "{r:?}");
    let cancel = g
        .http
        .send(
            Method::POST,
            &format!("/agents/down/tasks/{id}/cancel"),
            &[("authorization", &format!("Bearer {FREE}"))],
            Bytes::new(),
        )
        .await;
    assert_api_error(&cancel, 503, "AGENT_UNAVAILABLE");

    // Everyone sees the state; only a client that may read error texts sees why.
    let seen = entry(&g, Some(FREE), "down").await;
    assert_eq!(seen["health"], "ejected", "{seen}");
    assert!(seen["ejected_until"].is_string(), "{seen}");
    assert!(seen.get("ejection_reason").is_none(), "{seen}");
    let ops = entry(&g, Some(OPS), "down").await;
    assert!(
        ops["ejection_reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("2 consecutive failures, the last: unreachable")),
        "{ops}"
    );
    // One agent's ejection is its own.
    assert_eq!(entry(&g, Some(OPS), "up").await["health"], "ok");
    let r = g.http.post_task_as("up", FREE).await;
    assert_eq!(r.status, 202, "{r:?}");
    let labels = [("agent", "down")];
    assert_eq!(
        metric_as(&g, OPS, "a2a_gateway_agent_ejected", &labels).await,
        1.0
    );
    assert_eq!(
        metric_as(&g, OPS, "a2a_gateway_agent_ejected", &[("agent", "up")]).await,
        0.0
    );
    assert_eq!(
        metric_as(&g, OPS, "a2a_gateway_agent_ejections_total", &labels).await,
        1.0
    );
}
