//! Official A2A contexts bounded and fair: one client filling conversations at full speed for
//! 60 s is refused its own new ones (TOO_MANY_CONTEXTS, before the agent is called) while
//! another client's new conversations work throughout, on the in-process ledger and on Redis;
//! the agent never makes a task for a refused message; a client's contexts free themselves
//! once their tasks are gone; the refusal's shape on both bindings.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::auth::sha;
use crate::support::a2a_calls::{error_code, message, reason, rest, rpc};
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::process::GwProc;
use crate::support::redis_server::RedisServer;
use crate::support::Http;

const FILLER: &str = "filler-key-0123456789abcdef";
const OTHER: &str = "other-key-0123456789abcdef0";
/// The filler's `max_contexts`.
const MAX: u64 = 300;

/// A scripted agent whose every message makes a COMPLETED task in a new context, counted.
async fn counting() -> (ScriptedAgent, Arc<AtomicUsize>) {
    let made = Arc::new(AtomicUsize::new(0));
    let n = made.clone();
    let agent = ScriptedAgent::start(Arc::new(move |method: &str, _: &Value| match method {
        "SendMessage" => {
            let i = n.fetch_add(1, Ordering::SeqCst);
            let id = format!("t-{i}");
            Answer::Result(json!({"task": task(&id, &format!("c-{i}"), "TASK_STATE_COMPLETED")}))
        }
        _ => Answer::Status(500, b"not scripted".to_vec()),
    }))
    .await;
    (agent, made)
}

/// A gateway process of its own (its RSS is measured) in front of `agent`: the filler with
/// `max_contexts = 300`, another client with the default; `max_tasks = 1000`, as the issue's
/// run; `redis` appended to the config when given.
fn process(agent: &str, redis: Option<&RedisServer>, retention_secs: u64, max: u64) -> GwProc {
    let mut f = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("temp file");
    let store = redis.map_or(String::new(), |r| {
        format!("[redis]\n{}prefix = \"ctx:\"\n", r.toml())
    });
    write!(
        f,
        r#"
listen = "127.0.0.1:0"
workers = 2
max_tasks = 1000
task_retention_secs = {retention_secs}
[[agents]]
name = "e"
protocol = "a2a"
url = "{agent}"
[[clients]]
name = "filler"
key_sha256 = "{filler}"
max_contexts = {max}
[[clients]]
name = "other"
key_sha256 = "{other}"
{store}"#,
        filler = sha(FILLER),
        other = sha(OTHER),
    )
    .expect("write config");
    let (_, path) = f.keep().expect("kept");
    GwProc::spawn(&path)
}

/// One SendMessage in a new conversation as `key`: `Ok` its task's state, `Err` the error's
/// reason.
async fn converse(http: &Http, key: &str) -> Result<String, String> {
    let v = rpc(
        http,
        "e",
        Some(key),
        "SendMessage",
        message("hi", json!({})),
    )
    .await;
    match v.get("result") {
        Some(r) => Ok(r["task"]["status"]["state"]
            .as_str()
            .unwrap_or("?")
            .to_owned()),
        None => Err(reason(&v).to_owned()),
    }
}

async fn filling(redis: Option<&RedisServer>) {
    let (agent, made) = counting().await;
    let gw = process(&agent.base, redis, 86_400, MAX);
    gw.ready().await;
    let http = gw.http.clone();
    let (rss_start, _) = gw.rss();
    let until = Instant::now() + Duration::from_secs(60);
    let fillers: Vec<_> = (0..4)
        .map(|_| {
            let http = http.clone();
            tokio::spawn(async move {
                let (mut ok, mut refused, mut other) = (0u64, 0u64, Vec::new());
                while Instant::now() < until {
                    match converse(&http, FILLER).await {
                        Ok(_) => ok += 1,
                        Err(r) if r == "TOO_MANY_CONTEXTS" => refused += 1,
                        Err(r) => other.push(r),
                    }
                }
                (ok, refused, other)
            })
        })
        .collect();
    // Meanwhile another client starts a conversation every 250 ms: each one works, all the
    // way through (every 5 s of the 60 saw some).
    let start = Instant::now();
    let mut others = 0u64;
    let mut slowest = Duration::ZERO;
    let mut windows = [0u32; 12];
    while Instant::now() < until {
        let t = Instant::now();
        let got = converse(&http, OTHER).await;
        slowest = slowest.max(t.elapsed());
        assert_eq!(got, Ok("TASK_STATE_COMPLETED".into()), "after {others}");
        others += 1;
        let w = (t.duration_since(start).as_secs() / 5) as usize;
        if let Some(n) = windows.get_mut(w) {
            *n += 1;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (mut ok, mut refused) = (0, 0);
    for f in fillers {
        let (o, r, other) = f.await.expect("joined");
        assert!(
            other.is_empty(),
            "the filler got only its own refusal: {other:?}"
        );
        ok += o;
        refused += r;
    }
    assert!(
        windows.iter().all(|n| *n > 0),
        "another client's conversations throughout, by 5 s: {windows:?}"
    );
    assert!(refused > 0, "the filler was refused");
    assert!(
        (MAX..=MAX + 4).contains(&ok),
        "the filler got its max_contexts conversations (and at most the ones in flight at once): {ok}"
    );
    // No task at the agent for a refused message.
    assert_eq!(
        made.load(Ordering::SeqCst) as u64,
        ok + others,
        "the agent made a task for each message the gateway let through, none more"
    );
    let (rss_end, _) = gw.rss();
    eprintln!(
        "filling {}: filler {ok} ok, {refused} refused; other {others} ok (slowest {slowest:?}); RSS {} -> {} KiB",
        if redis.is_some() { "on Redis" } else { "in process" },
        rss_start / 1024,
        rss_end / 1024
    );
    assert!(
        rss_end < rss_start + 64 * 1024 * 1024,
        "memory within bound: {rss_start} -> {rss_end}"
    );
    if let Some(r) = redis {
        let used: u64 = r
            .cli(&["INFO", "memory"])
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("used_memory");
        eprintln!(
            "filling on Redis: used_memory {used} B after {} messages",
            ok + others
        );
        assert!(used < 64 * 1024 * 1024, "Redis within bound: {used}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_client_filling_contexts_for_60_s_starves_no_other_in_process() {
    filling(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_client_filling_contexts_for_60_s_starves_no_other_on_redis() {
    let redis = RedisServer::start();
    filling(Some(&redis)).await;
}

/// The refusal on both bindings, and contexts that free themselves: with a retention of 2 s a
/// client's finished conversations stop counting 4 s after their tasks end.
#[tokio::test(flavor = "multi_thread")]
async fn too_many_contexts_is_a_429_on_rest_and_frees_itself_after_the_retention() {
    const FEW: u64 = 20;
    for redis in [None, Some(RedisServer::start())] {
        let (agent, made) = counting().await;
        let gw = process(&agent.base, redis.as_ref(), 2, FEW);
        gw.ready().await;
        let http = &gw.http;
        for _ in 0..FEW {
            assert_eq!(
                converse(http, FILLER).await,
                Ok("TASK_STATE_COMPLETED".into())
            );
        }
        let before = made.load(Ordering::SeqCst);
        // JSON-RPC: HTTP 200 with the gateway's -32000 and its reason.
        let v = rpc(
            http,
            "e",
            Some(FILLER),
            "SendMessage",
            message("hi", json!({})),
        )
        .await;
        assert_eq!(error_code(&v), -32000, "{v}");
        assert_eq!(reason(&v), "TOO_MANY_CONTEXTS", "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("max_contexts")),
            "{v}"
        );
        // REST: 429 with Retry-After.
        let r = rest(
            http,
            hyper::Method::POST,
            "/agents/e/message:send",
            Some(FILLER),
            Some(message("hi", json!({}))),
        )
        .await;
        assert_eq!(r.status, 429, "{r:?}");
        assert!(r.header("retry-after").is_some(), "{r:?}");
        let body = r.json();
        let rest_reason = body["error"]["details"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|d| d["reason"].as_str());
        assert_eq!(rest_reason, Some("TOO_MANY_CONTEXTS"), "{body}");
        // A context the filler holds is still its own to write in.
        let mine = json!({"contextId": "c-0"});
        let v = rpc(
            http,
            "e",
            Some(FILLER),
            "SendMessage",
            message("again", mine),
        )
        .await;
        assert!(v.get("result").is_some(), "its own context: {v}");
        assert_eq!(
            made.load(Ordering::SeqCst),
            before + 1,
            "only that one reached the agent"
        );
        // Its tasks are final: kept 2 s, then their contexts 2 s more; then it may start again.
        tokio::time::sleep(Duration::from_millis(4500)).await;
        assert_eq!(
            converse(http, FILLER).await,
            Ok("TASK_STATE_COMPLETED".into()),
            "redis: {}",
            redis.is_some()
        );
    }
}

/// Whatever the ledger would refuse is refused before the agent is called: a store of contexts
/// full of Message-only conversations (no task to evict) refuses the next new one LEDGER_FULL,
/// naming what is full, and the agent never hears of it (no orphan task, no reply to lose).
#[tokio::test(flavor = "multi_thread")]
async fn a_full_store_refuses_before_the_agent_is_called_and_says_what_is_full() {
    let heard = Arc::new(AtomicUsize::new(0));
    let n = heard.clone();
    let agent = ScriptedAgent::start(Arc::new(move |method: &str, _: &Value| match method {
        "SendMessage" => {
            let i = n.fetch_add(1, Ordering::SeqCst);
            Answer::Result(
                json!({"message": {"messageId": format!("m-{i}"), "role": "ROLE_AGENT",
                "contextId": format!("c-{i}"), "parts": [{"text": "noted"}]}}),
            )
        }
        _ => Answer::Status(500, b"not scripted".to_vec()),
    }))
    .await;
    let (_gw, http) = crate::a2a_gateway::gateway(
        vec![crate::a2a_gateway::a2a_agent("e", &agent.base)],
        |cfg| {
            crate::support::a2a_calls::two_clients(cfg);
            cfg.max_tasks = 16;
        },
    )
    .await;
    use crate::support::a2a_calls::{ALICE, BOB};
    let mut refused = None;
    for i in 0..64 {
        let who = if i % 2 == 0 { ALICE } else { BOB };
        let v = rpc(
            &http,
            "e",
            Some(who),
            "SendMessage",
            message("hi", json!({})),
        )
        .await;
        if v.get("error").is_some() {
            refused = Some((i, v));
            break;
        }
    }
    let (i, v) = refused.expect("the store of contexts filled");
    assert!(i >= 16, "the store holds max_tasks contexts: {i}");
    assert_eq!(reason(&v), "LEDGER_FULL", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("conversations (contexts)")),
        "says what is full: {v}"
    );
    assert_eq!(
        heard.load(Ordering::SeqCst),
        i,
        "the refused message never reached the agent"
    );
}
