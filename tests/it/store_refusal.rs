//! A Redis that answers but refuses the gateway's writes: a redis-server of the test's own
//! filled to its `maxmemory` with `noeviction`. Clients of both protocols get 503
//! STORE_UNAVAILABLE (JSON-RPC: HTTP 200, -32000, ErrorInfo reason STORE_UNAVAILABLE) with
//! none of Redis's words, `/readyz` is not ready, `a2a_gateway_store_errors_total{kind="oom"}`
//! counts, the shipped alert fires in promtool on the series the failure made, and once memory
//! is freed the gateway is ready again by itself.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use serde_json::json;

use a2a_gateway::config::AgentConfig;

use crate::a2a_gateway::{a2a_agent, gateway};
use crate::support::a2a_calls::{error_code, message, reason, reopening, rest, rpc};
use crate::support::a2a_script::ScriptedAgent;
use crate::support::redis_server::RedisServer;
use crate::support::*;

/// Words of Redis's own errors that no answer may carry.
const REDIS_WORDS: [&str; 6] = [
    "OOM",
    "maxmemory",
    "user_script",
    "script",
    "redis:",
    "command not allowed",
];

fn assert_no_redis_words(what: &str, text: &str) {
    for w in REDIS_WORDS {
        assert!(!text.contains(w), "{what} carries Redis's {w:?}: {text}");
    }
}

/// One command over a raw connection (RESP), its reply's first line.
fn command(port: u16, args: &[&[u8]]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("redis");
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    s.write_all(&out).expect("sent");
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\r\n") {
        s.read_exact(&mut byte).expect("a reply");
        reply.push(byte[0]);
    }
    String::from_utf8_lossy(&reply).trim_end().to_owned()
}

/// Fill `r` to its memory limit as a busy deployment does: `maxmemory` a little above what it
/// holds, `noeviction`, then 16 KiB values until Redis answers OOM; then held a little over
/// it. The keys written.
fn fill(r: &RedisServer) -> Vec<String> {
    let info = r.cli(&["INFO", "memory"]);
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    r.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    r.cli(&[
        "CONFIG",
        "SET",
        "maxmemory",
        &(used + 512 * 1024).to_string(),
    ]);
    let value = vec![b'x'; 16 * 1024];
    let mut keys = Vec::new();
    for i in 0..10_000 {
        let key = format!("test-filler:{i}");
        let reply = command(r.port, &[b"SET", key.as_bytes(), &value]);
        if reply.starts_with("-OOM") {
            // At the limit Redis hovers on its edge: a connection's buffers freed let a write
            // through, and the next write refuses again. Held over it, as a deployment that
            // keeps filling is, so that every write of the test meets the refusal.
            let info = r.cli(&["INFO", "memory"]);
            let used: u64 = info
                .lines()
                .find_map(|l| l.strip_prefix("used_memory:"))
                .and_then(|v| v.trim().parse().ok())
                .expect("used_memory");
            r.cli(&[
                "CONFIG",
                "SET",
                "maxmemory",
                &(used - 256 * 1024).to_string(),
            ]);
            return keys;
        }
        assert_eq!(reply, "+OK", "filling Redis");
        keys.push(key);
    }
    panic!("Redis never reached its maxmemory");
}

/// Every sample of `family` in a scrape: (labels as written, value).
fn samples(text: &str, family: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(family)?.strip_prefix('{'))
        .filter_map(|l| {
            let (labels, value) = l.split_once("} ")?;
            Some((labels.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_at_maxmemory_is_store_unavailable_on_both_protocols_and_not_ready() {
    let r = RedisServer::start();
    let a = agent().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let s = ScriptedAgent::start(reopening(calls.clone())).await;
    let agents = vec![
        AgentConfig::new("scripts", &a.base_url()),
        a2a_agent("echo", &s.base),
    ];
    let (_gw, http) = gateway(agents, |c| {
        c.redis = Some(r.config("full:"));
        c.webhooks.allow = vec!["127.0.0.1/32".into()];
    })
    .await;
    let http = &http;
    // Before: a task of each protocol.
    let before = http.post_task("scripts").await;
    assert_eq!(before.status, 202, "{before:?}");
    let sent = rpc(http, "echo", None, "SendMessage", message("hi", json!({}))).await;
    let a2a_task = sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {sent}"))
        .to_owned();

    let fillers = fill(&r);
    // A write that reaches Redis: a push config on the A2A task, over JSON-RPC.
    let config = |id: &str| json!({"taskId": a2a_task, "id": id, "url": "http://127.0.0.1:9/hook"});
    let refused = rpc(
        http,
        "echo",
        None,
        "CreateTaskPushNotificationConfig",
        config("c-1"),
    )
    .await;
    assert_eq!(error_code(&refused), -32000, "{refused}");
    assert_eq!(reason(&refused), "STORE_UNAVAILABLE", "{refused}");
    assert_eq!(
        refused["error"]["data"][0]["domain"], "a2a-gateway",
        "{refused}"
    );
    assert_no_redis_words(
        "JSON-RPC CreateTaskPushNotificationConfig",
        &refused.to_string(),
    );
    // The same over HTTP+JSON: 503 with Retry-After and a google.rpc.Status.
    let path = format!("/agents/echo/tasks/{a2a_task}/pushNotificationConfigs");
    let refused = rest(http, Method::POST, &path, None, Some(config("c-2"))).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("5"), "{refused:?}");
    let status = refused.json();
    assert_eq!(
        status["error"]["details"][0]["reason"], "STORE_UNAVAILABLE",
        "{status}"
    );
    assert_no_redis_words("REST CreateTaskPushNotificationConfig", &status.to_string());

    // The replica is not ready while Redis refuses writes, and says why.
    let ready = http.get("/readyz").await;
    assert_eq!(ready.status, 503, "{ready:?}");
    let ready = ready.json();
    assert_eq!(ready["missing"], json!(["redis"]), "{ready}");
    assert_eq!(
        ready["ledger"], "Redis refuses writes (out of memory)",
        "{ready}"
    );

    // Creates of both protocols are refused before their agent is called.
    let (held, a2a_calls) = (a.task_ids().len(), calls.load(Ordering::SeqCst));
    let create = http.post_task("scripts").await;
    assert_eq!(create.status, 503, "{create:?}");
    assert_eq!(create.error_code(), "STORE_UNAVAILABLE");
    assert_eq!(create.header("retry-after"), Some("5"), "{create:?}");
    assert_no_redis_words("a Clawpedia create", &String::from_utf8_lossy(&create.body));
    let keyed = http
        .send(
            Method::POST,
            "/agents/scripts/tasks",
            &[
                ("content-type", "application/json"),
                ("idempotency-key", "k-1"),
            ],
            Bytes::from(json!({"input": good_input()}).to_string()),
        )
        .await;
    assert_eq!(keyed.status, 503, "{keyed:?}");
    assert_eq!(keyed.error_code(), "STORE_UNAVAILABLE");
    let over_rpc = rpc(
        http,
        "echo",
        None,
        "SendMessage",
        message("again", json!({})),
    )
    .await;
    assert_eq!(error_code(&over_rpc), -32000, "{over_rpc}");
    assert_eq!(reason(&over_rpc), "STORE_UNAVAILABLE", "{over_rpc}");
    assert_no_redis_words("JSON-RPC SendMessage", &over_rpc.to_string());
    let over_rest = rest(
        http,
        Method::POST,
        "/agents/echo/message:send",
        None,
        Some(message("again", json!({}))),
    )
    .await;
    assert_eq!(over_rest.status, 503, "{over_rest:?}");
    assert!(over_rest.header("retry-after").is_some(), "{over_rest:?}");
    assert_eq!(
        over_rest.json()["error"]["details"][0]["reason"],
        "STORE_UNAVAILABLE"
    );
    assert_no_redis_words(
        "REST SendMessage",
        &String::from_utf8_lossy(&over_rest.body),
    );
    assert_eq!(
        a.task_ids().len(),
        held,
        "a refused create reached the agent"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        a2a_calls,
        "a refused message reached the agent"
    );

    // Counted by kind, and still counting with no request at all: the probe writes.
    let scrape = |http: Http| async move {
        String::from_utf8(http.get("/metrics").await.body.to_vec()).expect("utf8")
    };
    let first = scrape(http.clone()).await;
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let second = scrape(http.clone()).await;
    let secs = t0.elapsed().as_secs_f64();
    let before = samples(&first, "a2a_gateway_store_errors_total");
    let after = samples(&second, "a2a_gateway_store_errors_total");
    assert_eq!(before.len(), 4, "every kind is exported: {before:?}");
    let oom = |s: &[(String, f64)]| {
        s.iter()
            .find(|(l, _)| l == "kind=\"oom\"")
            .map_or(0.0, |(_, v)| *v)
    };
    assert!(
        oom(&before) >= 2.0,
        "the refused writes are counted: {before:?}"
    );
    let per_sec = (oom(&after) - oom(&before)) / secs;
    eprintln!("a refusing store counts {per_sec:.2} oom a second with no traffic");
    assert!(per_sec >= 1.0, "the probe keeps counting: {per_sec}/s");
    alert_fires_on(&before, &after, secs);

    // Memory freed: ready again by itself, and creates go through and are recorded.
    for k in &fillers {
        command(r.port, &[b"DEL", k.as_bytes()]);
    }
    wait_for("ready once Redis takes writes", || async {
        http.get("/readyz").await.status == 200
    })
    .await;
    let again = http.post_task("scripts").await;
    assert_eq!(again.status, 202, "{again:?}");
    assert_eq!(again.header("x-a2a-ledger"), None, "recorded: {again:?}");
    let stored = rpc(
        http,
        "echo",
        None,
        "CreateTaskPushNotificationConfig",
        config("c-3"),
    )
    .await;
    assert!(stored["result"].is_object(), "{stored}");
}

/// promtool, on the shipped alert rules, fed the series the refusing gateway exported: each
/// sample of `a2a_gateway_store_errors_total` as it grew between the two scrapes `secs`
/// apart, kept up for ten minutes of one scrape a minute, as Prometheus would have them from
/// a replica `gw-1:8080`. The alert is firing for that replica five minutes in.
fn alert_fires_on(before: &[(String, f64)], after: &[(String, f64)], secs: f64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/alerts.yml");
    let mut series = String::new();
    for (labels, v0) in before {
        let v1 = after
            .iter()
            .find(|(l, _)| l == labels)
            .map_or(*v0, |(_, v)| *v);
        let per_minute = ((v1 - v0) / secs * 60.0).round();
        series.push_str(&format!(
            "      - series: 'a2a_gateway_store_errors_total{{job=\"a2a-gateway\",instance=\"gw-1:8080\",{labels}}}'\n        values: '{v0}+{per_minute}x10'\n"
        ));
    }
    let firing = "ALERTS{alertname=\"A2AGatewayStoreRefusingWrites\",alertstate=\"firing\"";
    let test = format!(
        "rule_files:\n  - {}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}    promql_expr_test:\n      - expr: '{firing}}}'\n        eval_time: 5m\n        exp_samples:\n          - labels: '{firing},job=\"a2a-gateway\",instance=\"gw-1:8080\",severity=\"critical\"}}'\n            value: 1\n",
        rules.display()
    );
    let file = dir.path().join("refusing.test.yml");
    std::fs::write(&file, &test).expect("test file");
    let out = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("promtool on PATH");
    assert!(
        out.status.success(),
        "promtool: {}{}\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
