//! Live reload (SIGHUP, or `Gateway::reload`), the SIGTERM drain, and secrets read from files:
//! a reload under load fails no request; agents added, removed (their streams end with a final
//! event) and kept (their streams go on); keys rotated; a broken file refused while the old
//! config runs on; a drain during which `/readyz` says 503, in-flight work finishes and streams
//! end with a `retry:` hint; a subscriber key rotated through its `secret_file`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use a2a_gateway::config::{AgentConfig, Right};
use sample::{Reply, Route};

use crate::auth::{client, sha};
use crate::support::hook::Hook;
use crate::support::process::GwProc;
use crate::support::sse::Events;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);

async fn subscribe(base: &str, path: &str) -> Events {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http();
    let req = hyper::Request::get(format!("{base}{path}"))
        .body(http_body_util::Full::new(Bytes::new()))
        .expect("request");
    Events::new(client.request(req).await.expect("stream opens"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_load_fails_no_request_and_swaps_the_agents() {
    let (a, b, c) = (agent().await, agent().await, agent().await);
    let g = TestGateway::start(&[("a", &a), ("b", &b)], |cfg| {
        cfg.workers = 2;
    })
    .await;
    g.ready().await;
    let (ta, tb) = (g.create_task("a").await, g.create_task("b").await);
    let mut on_a = subscribe(&g.http.base, &format!("/agents/a/tasks/{ta}/stream")).await;
    let mut on_b = subscribe(&g.http.base, &format!("/agents/b/tasks/{tb}/stream")).await;
    wait_for("both upstreams", || {
        let n = a.stream_connections(&ta) + b.stream_connections(&tb);
        async move { n == 2 }
    })
    .await;
    // Load: creates on the kept agent, four at a time, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut loops = Vec::new();
    for _ in 0..4 {
        let (http, stop, done, failed) =
            (g.http.clone(), stop.clone(), done.clone(), failed.clone());
        loops.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let r = http.post_task("a").await;
                if r.status == 202 {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    eprintln!("failed under reload: {r:?}");
                }
            }
        }));
    }
    wait_for("load running", || {
        let n = done.load(Ordering::Relaxed);
        async move { n >= 50 }
    })
    .await;
    let before = done.load(Ordering::Relaxed);
    // a unchanged, b removed, c added.
    let mut next = (*g.gw.config()).clone();
    next.agents = vec![next.agents[0].clone(), AgentConfig::new("c", &c.base_url())];
    let r = g.gw.reload(next).await.expect("reload applied");
    assert_eq!(r.agents_added, ["c"]);
    assert_eq!(r.agents_removed, ["b"]);
    assert!(
        r.agents_changed.is_empty() && r.need_restart.is_empty(),
        "{r:?}"
    );
    wait_for("c's card", || async {
        g.http.post_task("c").await.status == 202
    })
    .await;
    wait_for("load after the reload", || {
        let n = done.load(Ordering::Relaxed);
        async move { n >= before + 100 }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.await.expect("load loop");
    }
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "no request failed during the reload"
    );
    // b is gone: its routes are unknown, and its stream ended with a final event.
    assert_api_error(&g.http.post_task("b").await, 404, "UNKNOWN_AGENT");
    let last = on_b.next_event(WAIT).await.expect("final event");
    assert_eq!(last.event, "upstream_error", "{}", on_b.raw);
    assert!(last.data.contains("removed"), "{}", last.data);
    assert!(on_b.until_end(WAIT).await, "b's stream ended");
    // a's stream was not touched: it still carries what the agent sends.
    a.push_event(&ta, "log", r#"{"message":"after the reload"}"#);
    let e = on_a.next_event(WAIT).await.expect("a's stream goes on");
    assert!(e.data.contains("after the reload"), "{}", e.data);
    assert_eq!(
        a.streams_opened(&ta),
        1,
        "the kept agent's upstream was not reopened"
    );
    let catalog = g.http.get("/agents").await.json();
    let names: Vec<&str> = catalog["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|x| x["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(
        g.metric("a2a_gateway_config_reloads_total", &[("result", "applied")])
            .await,
        1.0
    );
}

#[tokio::test]
async fn a_reload_rotates_client_keys_and_ends_what_the_old_key_opened() {
    const OLD: &str = "old-key-0123456789abcdef";
    const NEW: &str = "new-key-0123456789abcdef";
    let (a, g) = single("a", |cfg| {
        cfg.clients = vec![client("orch", OLD, &["*"], &[Right::Tasks, Right::Streams])];
    })
    .await;
    let body = json!({ "input": good_input() });
    let made = g
        .http
        .post_json_as("/agents/a/tasks", OLD, &body, &[])
        .await;
    assert_eq!(made.status, 202);
    let id = made.json()["task_id"].as_str().expect("id").to_owned();
    let mut open = subscribe(
        &g.http.base,
        &format!("/tasks/{id}/stream?access_token={OLD}"),
    )
    .await;
    wait_for("upstream", || {
        let n = a.stream_connections(&id);
        async move { n == 1 }
    })
    .await;
    let mut next = (*g.gw.config()).clone();
    next.clients[0].key_sha256 = Some(sha(NEW));
    next.clients.push(client(
        "auditor",
        "auditor-key-0123456789",
        &["*"],
        &[Right::Tasks],
    ));
    let r = g.gw.reload(next).await.expect("applied");
    // The reload reports clients (its log line says what this says), not only agents.
    assert_eq!(
        (r.clients.added.as_slice(), r.clients.changed.as_slice()),
        (&["auditor".to_owned()][..], &["orch".to_owned()][..]),
        "{r:?}"
    );
    assert!(
        r.clients.removed.is_empty() && r.agents_changed.is_empty(),
        "{r:?}"
    );
    let r = g
        .http
        .post_json_as("/agents/a/tasks", OLD, &body, &[])
        .await;
    assert_api_error(&r, 401, "UNAUTHORIZED");
    let r = g
        .http
        .post_json_as("/agents/a/tasks", NEW, &body, &[])
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    // The task is still the client's (ownership is by name, not by key).
    assert_eq!(
        g.http.get_as(&format!("/tasks/{id}"), NEW).await.status,
        200
    );
    // The stream opened with the old key ends: the key that opened it is withdrawn.
    let e = open
        .next_event(WAIT)
        .await
        .expect("the open stream is told");
    assert_eq!(e.event, "access_revoked");
    assert_eq!(e.data, r#"{"reason":"key_rotated"}"#);
    assert!(open.until_end(WAIT).await, "and ends");
}

fn write(path: &std::path::Path, text: &str) {
    let mut f = std::fs::File::create(path).expect("create");
    f.write_all(text.as_bytes()).expect("write");
}

/// SIGHUP with a broken file: refused, every problem logged, the old config serving; then a
/// good file applied. SIGHUP never stops the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_a_good_file_and_refuses_a_broken_one() {
    let a = agent().await;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("gateway.toml");
    let base = format!(
        "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"{}\"\n",
        a.base_url()
    );
    write(&path, &base);
    let mut p = GwProc::spawn_logged(&path);
    p.ready().await;
    write(
        &path,
        &format!("{base}timout_ms = 5\n[[agents]]\nname = \"b b\"\nurl = \"ftp://x\"\n"),
    );
    p.signal("HUP");
    wait_for("the refusal counted", || async {
        p.metric("a2a_gateway_config_reloads_total", &[("result", "refused")])
            .await
            == 1.0
    })
    .await;
    assert_eq!(
        p.http.post_task("a").await.status,
        202,
        "the old config serves"
    );
    // Every problem is logged with its key.
    let log = p.log();
    for key in ["agents[0].timout_ms", "agents[1].name", "agents[1].url"] {
        assert!(log.contains(key), "{key} in the log: {log}");
    }
    // A good file: a client is added, so requests need its key from now on.
    write(
        &path,
        &format!(
            "{base}\n[[clients]]\nname = \"orch\"\nkey_sha256 = \"{}\"\ncan = [\"tasks\", \"metrics\"]\n",
            sha("orch-key-0123456789abcdef")
        ),
    );
    p.signal("HUP");
    wait_for("the new config", || async {
        p.http.post_task("a").await.status == 401
    })
    .await;
    let key = "orch-key-0123456789abcdef";
    let r = p
        .http
        .post_json_as(
            "/agents/a/tasks",
            key,
            &json!({ "input": good_input() }),
            &[],
        )
        .await;
    assert_eq!(r.status, 202);
    let text = String::from_utf8(p.http.get_as("/metrics", key).await.body.to_vec()).expect("utf8");
    assert_eq!(
        metric_value(
            &text,
            "a2a_gateway_config_reloads_total",
            &[("result", "applied")]
        ),
        1.0
    );
    assert!(p.exit_status().is_none(), "SIGHUP did not stop the gateway");
}

/// SIGTERM: `/readyz` 503 for drain_delay_ms while requests are still served, then the
/// listener closes, a create in flight finishes, a stream ends with a `retry:` hint, and the
/// process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_without_cutting_a_request() {
    let a = agent().await;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("gateway.toml");
    write(
        &path,
        &format!(
            "listen = \"127.0.0.1:0\"\ndrain_delay_ms = 1500\nshutdown_grace_ms = 5000\n\
             [[agents]]\nname = \"a\"\nurl = \"{}\"\n",
            a.base_url()
        ),
    );
    let mut p = GwProc::spawn(&path);
    p.ready().await;
    let id = p.http.create_task("a").await;
    // A subscriber on the lean path, read to its end.
    let addr = p.http.base.trim_start_matches("http://").to_owned();
    let mut tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    tcp.write_all(format!("GET /tasks/{id}/stream HTTP/1.1\r\nHost: gw\r\n\r\n").as_bytes())
        .await
        .expect("head");
    wait_for("upstream", || {
        let n = a.stream_connections(&id);
        async move { n == 1 }
    })
    .await;
    let reader = tokio::spawn(async move {
        let mut raw = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(20), tcp.read_to_end(&mut raw)).await;
        String::from_utf8_lossy(&raw).into_owned()
    });
    // A create the agent takes 2.5 s to answer: in flight through the delay and the close.
    a.script_once(
        Route::CreateTask,
        Reply::Delay(Duration::from_millis(2500), Box::new(Reply::Default)),
    );
    let http = p.http.clone();
    let slow = tokio::spawn(async move { http.post_task("a").await });
    wait_for("the slow create at the agent", || {
        let n = a.request_count(Route::CreateTask);
        async move { n == 2 }
    })
    .await;
    p.signal("TERM");
    wait_for("not ready while draining", || async {
        p.http.get("/readyz").await.status == 503
    })
    .await;
    let r = p.http.get("/readyz").await;
    assert_eq!(r.json()["missing"], json!(["draining"]), "{r:?}");
    // Still serving during the delay.
    assert_eq!(p.http.get("/healthz").await.status, 200);
    let slow = slow.await.expect("slow create");
    assert_eq!(slow.status, 202, "the in-flight create finished: {slow:?}");
    let stream = reader.await.expect("reader");
    assert!(
        stream.contains("retry: 1000"),
        "the stream ended with a retry hint: {stream}"
    );
    let status = p.exit_within(Duration::from_secs(15)).await;
    assert!(status.success(), "exit 0 after a drain: {status:?}");
}

/// Secrets from files, read at start and at every reload: an ingest token, the admin token,
/// and a subscriber's signing keys, rotated with a receiver that knows only the new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_come_from_files_and_a_subscriber_key_rotates() {
    const OLD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const NEW: &str = "whsec_QWxhZGRpbjpvcGVuIHNlc2FtZTAxMjM0NTY3";
    let a = agent().await;
    let hook = Hook::start().await;
    let dir = tempfile::tempdir().expect("dir");
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        write(&p, text);
        p
    };
    file("ingest.token", &format!("{TOKEN}\n"));
    file("admin.token", "admin-token-from-a-file-0123\n");
    let keys = file("hook.keys", &format!("{OLD}\n"));
    let path = file(
        "gateway.toml",
        &format!(
            "listen = \"127.0.0.1:0\"\nadmin_token_file = \"admin.token\"\n\
             [[agents]]\nname = \"a\"\nurl = \"{}\"\ningest_token_file = \"ingest.token\"\n\
             [webhooks]\nallow = [\"127.0.0.1/32\"]\n\
             [[subscribers]]\nname = \"hook\"\nurl = \"{}\"\nsecret_file = \"hook.keys\"\n",
            a.base_url(),
            hook.url()
        ),
    );
    let p = GwProc::spawn(&path);
    p.ready().await;
    let r = p
        .http
        .get_as("/admin/subscribers", "admin-token-from-a-file-0123")
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["subscribers"][0]["signed"], true);
    let id = p.http.create_task("a").await;
    wait_for("the first delivery", || async { hook.count() >= 1 }).await;
    hook.received()[0]
        .verify(OLD)
        .expect("signed with the old key");
    // Rotation: both keys, the new first; the receiver already knows only the new one.
    write(&keys, &format!("{NEW}\n{OLD}\n"));
    p.signal("HUP");
    wait_for("the reload", || async {
        p.metric("a2a_gateway_config_reloads_total", &[("result", "applied")])
            .await
            == 1.0
    })
    .await;
    // The ingest token came from its file: the agent's push is taken.
    let working = moved(&a, &id, "WORKING");
    assert_eq!(p.push(&working).await.status, 202);
    wait_for("the second delivery", || async { hook.count() >= 2 }).await;
    let second = hook.received().into_iter().nth(1).expect("second");
    second
        .verify(NEW)
        .expect("a receiver that knows only the new key accepts it");
    let sigs = second
        .header("webhook-signature")
        .expect("signatures")
        .to_owned();
    assert_eq!(sigs.split(' ').count(), 2, "{sigs}");
}

/// A reload that changes an agent's settings but not the agent (its limits here) keeps its
/// card, its open streams and its requests in flight: no 503 while a card is fetched again,
/// no stream cut, and the new max_in_flight counts what was already in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_change_keeps_the_agents_card_streams_and_in_flight_count() {
    let (a, g) = single("a", |_| {}).await;
    let id = g.create_task("a").await;
    let mut stream = subscribe(&g.http.base, &format!("/tasks/{id}/stream")).await;
    wait_for("upstream", || {
        let n = a.stream_connections(&id);
        async move { n == 1 }
    })
    .await;
    // One create held at the agent across the reload.
    a.script_once(
        Route::CreateTask,
        Reply::Delay(Duration::from_millis(1500), Box::new(Reply::Default)),
    );
    let http = g.http.clone();
    let held = tokio::spawn(async move { http.post_task("a").await });
    wait_for("the held create at the agent", || {
        let n = a.request_count(Route::CreateTask);
        async move { n == 2 }
    })
    .await;
    let mut next = (*g.gw.config()).clone();
    next.agents[0].max_in_flight = 1;
    let r = g.gw.reload(next).await.expect("applied");
    assert!(
        r.agents_changed.is_empty() && r.agents_removed.is_empty(),
        "{r:?}"
    );
    // At once: the card is there (no 503 while it is fetched again), and ready stays ready.
    assert_eq!(g.http.get("/readyz").await.status, 200);
    let busy = g.http.post_task("a").await;
    assert_api_error(&busy, 503, "AGENT_BUSY");
    assert_eq!(
        held.await.expect("held").status,
        202,
        "the held create finished"
    );
    assert_eq!(g.http.post_task("a").await.status, 202);
    a.push_event(&id, "log", r#"{"message":"same stream"}"#);
    let e = stream.next_event(WAIT).await.expect("the stream goes on");
    assert!(e.data.contains("same stream"));
    assert_eq!(a.streams_opened(&id), 1);
}
