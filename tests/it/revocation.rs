//! Withdrawn credentials cut what they opened: a reload that removes a client, rotates its key,
//! or takes away a right or an agent ends that client's open streams within a second, on the
//! lean path, HTTP/2 and `/events`, with `event: access_revoked` and the reason; so does a
//! JWT's `exp` passing. Streams whose access did not change carry on.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::Algorithm;
use serde_json::json;

use a2a_gateway::config::{JwtConfig, Right};

use crate::auth::{client, sha};
use crate::support::process::GwProc;
use crate::support::sse::Events;
use crate::support::*;

const ALICE: &str = "alice-key-0123456789abcdef";
const BOB: &str = "bob-key-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(10);
/// "Within a second" of the withdrawal.
const PROMPT: Duration = Duration::from_secs(1);

/// A stream opened as `auth` (a key or a JWT), over HTTP/1.1 (a task stream's GET takes the
/// lean path) or HTTP/2 (h2c).
async fn open(base: &str, path: &str, auth: &str, h2: bool) -> Events {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build_http();
    let req = hyper::Request::get(format!("{base}{path}"))
        .header("authorization", format!("Bearer {auth}"))
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let res = client.request(req).await.expect("stream opens");
    if h2 {
        assert_eq!(res.version(), hyper::Version::HTTP_2);
    }
    Events::new(res)
}

/// The stream's next events until `access_revoked`: its reason, and whether the stream then
/// ended; `None` if none came within `wait`.
async fn revoked(s: &mut Events, wait: Duration) -> Option<(String, bool)> {
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = s.next_event(left).await?;
        if e.event == "access_revoked" {
            let reason = serde_json::from_str::<serde_json::Value>(&e.data).expect("JSON data")
                ["reason"]
                .as_str()
                .expect("reason")
                .to_owned();
            let ended = s.until_end(Duration::from_secs(2)).await;
            assert!(!s.raw.contains("retry:"), "no reconnect hint: {:?}", s.raw);
            return Some((reason, ended));
        }
    }
}

fn config_text(agent: &str, with_alice: bool) -> String {
    let mut t = format!(
        "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"{agent}\"\n\
         [[clients]]\nname = \"bob\"\nkey_sha256 = \"{}\"\ncan = [\"tasks\", \"streams\", \"events\", \"metrics\"]\n",
        sha(BOB)
    );
    if with_alice {
        t.push_str(&format!(
            "[[clients]]\nname = \"alice\"\nkey_sha256 = \"{}\"\ncan = [\"tasks\", \"streams\", \"events\"]\n",
            sha(ALICE)
        ));
    }
    t
}

async fn create(http: &Http, key: &str) -> String {
    let r = http
        .post_json_as(
            "/agents/a/tasks",
            key,
            &json!({ "input": good_input() }),
            &[],
        )
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    r.json()["task_id"].as_str().expect("task_id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_removed_by_sighup_loses_its_lean_h2_and_events_streams_within_a_second() {
    let a = agent().await;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, config_text(&a.base_url(), true)).expect("write");
    let p = GwProc::spawn(&path);
    p.ready().await;
    let base = p.http.base.clone();
    let (t_alice, t_bob) = (create(&p.http, ALICE).await, create(&p.http, BOB).await);

    let mut lean = open(&base, &format!("/tasks/{t_alice}/stream"), ALICE, false).await;
    let mut h2 = open(&base, &format!("/tasks/{t_alice}/stream"), ALICE, true).await;
    let mut events = open(&base, "/events", ALICE, false).await;
    let mut bob_lean = open(&base, &format!("/tasks/{t_bob}/stream"), BOB, false).await;
    let mut bob_events = open(&base, &format!("/events?task={t_bob}"), BOB, false).await;
    wait_for("both tasks' upstream streams", || {
        let n = a.stream_connections(&t_alice) + a.stream_connections(&t_bob);
        async move { n >= 2 }
    })
    .await;
    let scrape = p.http.get_as("/metrics", BOB).await;
    let text = String::from_utf8_lossy(&scrape.body);
    assert!(
        metric_value(
            &text,
            "a2a_gateway_connections_open",
            &[("transport", "lean")]
        ) >= 2.0,
        "the task streams are on the lean path: {text}"
    );
    // Before: alice's streams carry her task's events.
    a.push_event(&t_alice, "log", r#"{"message":"before"}"#);
    for s in [&mut lean, &mut h2] {
        let e = s
            .next_event(WAIT)
            .await
            .expect("an event before the reload");
        assert!(e.data.contains("before"), "{e:?}");
    }

    std::fs::write(&path, config_text(&a.base_url(), false)).expect("write");
    let sent = Instant::now();
    p.signal("HUP");
    let (l, h, e) = tokio::join!(
        revoked(&mut lean, WAIT),
        revoked(&mut h2, WAIT),
        revoked(&mut events, WAIT)
    );
    let took = sent.elapsed();
    for (name, got) in [("lean", l), ("h2", h), ("/events", e)] {
        assert_eq!(
            got,
            Some(("client_removed".to_owned(), true)),
            "{name}: access_revoked with client_removed, then the end"
        );
    }
    assert!(took < PROMPT, "all three ended {took:?} after SIGHUP");
    // Her key opens nothing now.
    let r = p.http.get_as(&format!("/tasks/{t_alice}"), ALICE).await;
    assert_api_error(&r, 401, "UNAUTHORIZED");

    // Bob's streams carry on, on both paths.
    a.push_event(&t_bob, "log", r#"{"message":"bob goes on"}"#);
    let e = bob_lean
        .next_event(WAIT)
        .await
        .expect("bob's stream goes on");
    assert!(e.data.contains("bob goes on"), "{e:?}");
    let e = bob_events
        .next_event(WAIT)
        .await
        .expect("bob's /events goes on");
    assert!(e.data.contains("bob goes on"), "{e:?}");
    assert!(!bob_lean.raw.contains("access_revoked") && !bob_events.raw.contains("access_revoked"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_withdrawal_ends_the_streams_it_touches_with_its_reason() {
    use Right::*;
    let (a, b) = (agent().await, agent().await);
    let keys =
        ["rot", "rights", "agents", "kept", "ops"].map(|n| format!("{n}-key-0123456789abcdef"));
    let g = TestGateway::start(&[("a", &a), ("b", &b)], |cfg| {
        cfg.clients = vec![
            client("rot", &keys[0], &["*"], &[Tasks, Streams]),
            client("rights", &keys[1], &["*"], &[Tasks, Streams, Events]),
            client("agents", &keys[2], &["*"], &[Tasks, Streams]),
            client("kept", &keys[3], &["*"], &[Tasks, Streams, Events]),
            client("ops", &keys[4], &["*"], &[Tasks, Streams, Events, AllTasks]),
        ];
    })
    .await;
    g.ready().await;
    let base = g.http.base.clone();
    let mut task = Vec::new();
    for k in &keys[..4] {
        task.push(create(&g.http, k).await);
    }
    let t_ops_reads = create(&g.http, &keys[3]).await;
    let mut rot = open(
        &base,
        &format!("/tasks/{}/stream", task[0]),
        &keys[0],
        false,
    )
    .await;
    let mut rights = open(&base, "/events", &keys[1], true).await;
    let mut agents = open(&base, &format!("/tasks/{}/stream", task[2]), &keys[2], true).await;
    let mut kept = open(
        &base,
        &format!("/tasks/{}/stream", task[3]),
        &keys[3],
        false,
    )
    .await;
    let mut kept_events = open(&base, "/events", &keys[3], false).await;
    // ops reads a task of another client: that stream stands on all_tasks.
    let mut ops = open(
        &base,
        &format!("/tasks/{t_ops_reads}/stream"),
        &keys[4],
        false,
    )
    .await;
    wait_for("the upstream streams", || {
        let n: usize = task.iter().map(|t| a.stream_connections(t)).sum::<usize>()
            + a.stream_connections(&t_ops_reads);
        async move { n >= 4 }
    })
    .await;

    let mut next = (*g.gw.config()).clone();
    next.clients[0].key_sha256 = Some(sha("rot-new-key-0123456789abcdef"));
    next.clients[1].can = vec![Tasks, Streams];
    next.clients[2].agents = vec!["b".into()];
    next.clients[4].can = vec![Tasks, Streams, Events];
    // kept's entry changes in nothing its streams stand on (a new rate only).
    next.clients[3].rate_per_sec = Some(1000.0);
    g.gw.reload(next).await.expect("applied");

    let (r0, r1, r2, r4) = tokio::join!(
        revoked(&mut rot, WAIT),
        revoked(&mut rights, WAIT),
        revoked(&mut agents, WAIT),
        revoked(&mut ops, WAIT),
    );
    assert_eq!(r0, Some(("key_rotated".into(), true)), "rot");
    assert_eq!(
        r1,
        Some(("right_removed".into(), true)),
        "rights (/events needs events)"
    );
    assert_eq!(
        r2,
        Some(("agent_removed".into(), true)),
        "agents (may no longer use a)"
    );
    assert_eq!(r4, Some(("right_removed".into(), true)), "ops (all_tasks)");
    // kept's streams are untouched.
    a.push_event(&task[3], "log", r#"{"message":"kept"}"#);
    let e = kept.next_event(WAIT).await.expect("kept goes on");
    assert!(e.data.contains("kept"), "{e:?}");
    assert!(!kept.raw.contains("access_revoked"));
    assert!(
        revoked(&mut kept_events, Duration::from_millis(500))
            .await
            .is_none(),
        "kept's /events goes on: {:?}",
        kept_events.raw
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokens_streams_end_within_a_second_of_its_exp() {
    use crate::jwt::{claims, fixture, now, sign};
    let a = agent().await;
    let g = TestGateway::start(&[("a", &a)], |cfg| {
        cfg.auth.jwt = Some(JwtConfig {
            jwks_file: fixture("jwks.json").to_string_lossy().into_owned(),
            issuer: "https://idp.example.test/".into(),
            audience: "a2a-gateway".into(),
            leeway: Duration::ZERO,
        });
        cfg.clients = vec![client("bob", BOB, &["*"], &[Right::Tasks, Right::Streams])];
    })
    .await;
    g.ready().await;
    let exp = now() + 3;
    let mut c = claims(
        "dave",
        json!({ "a2a_agents": ["*"], "a2a_can": ["tasks", "streams", "events"] }),
    );
    c["exp"] = json!(exp);
    let token = sign(Algorithm::RS256, "rsa-1", &c);
    let t = create(&g.http, &token).await;
    let t_bob = create(&g.http, BOB).await;
    let base = g.http.base.clone();
    let mut lean = open(&base, &format!("/tasks/{t}/stream"), &token, false).await;
    let mut events = open(&base, "/events", &token, true).await;
    let mut bob = open(&base, &format!("/tasks/{t_bob}/stream"), BOB, false).await;
    let (l, e) = tokio::join!(revoked(&mut lean, WAIT), revoked(&mut events, WAIT));
    let late = chrono::Utc::now().timestamp_millis() - exp * 1000;
    assert_eq!(l, Some(("token_expired".into(), true)), "lean");
    assert_eq!(e, Some(("token_expired".into(), true)), "/events over h2");
    assert!(
        (0..1000).contains(&late),
        "ended {late} ms after exp (not before, within a second)"
    );
    a.push_event(&t_bob, "log", r#"{"message":"bob"}"#);
    let e = bob.next_event(WAIT).await.expect("bob's stream goes on");
    assert!(e.data.contains("bob"));
}
