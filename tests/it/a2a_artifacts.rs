//! The record keeps what it was given, or says it did not (issue 43): artifacts of 1.5 MB and
//! 7.9 MB read back whole by GetTask, ListTasks and a push receiver; 200 streamed appends
//! folded into one artifact in order; past `[a2a] max_artifact_bytes_per_task` (8 MiB), every
//! artifact still listed, the cut one marked (`a2a-gateway/truncated`, `original_bytes`,
//! `kept_bytes`) and counted (`a2a_gateway_artifacts_truncated_total`). On the in-process
//! ledger and on Redis.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use a2a_gateway::config::Config;

use crate::a2a_gateway::{a2a_agent, gateway};
use crate::support::a2a_calls::{message, rpc};
use crate::support::a2a_script::{card, events, task, Answer, ScriptedAgent};
use crate::support::hook::Hook;
use crate::support::redis_server::RedisServer;
use crate::support::sse::Events;
use crate::support::{wait_for_within, Http};

const TRUNCATED: &str = "a2a-gateway/truncated";
const ORIGINAL_BYTES: &str = "a2a-gateway/original_bytes";
const KEPT_BYTES: &str = "a2a-gateway/kept_bytes";

/// `n` bytes of text that differ along their length and from one `seed` to another (a
/// misplaced or lost piece shows).
fn text(seed: usize, n: usize) -> String {
    let mut s = format!("<{seed}>");
    let mut i = seed;
    while s.len() < n {
        s.push(char::from(b'a' + (i % 26) as u8));
        if i % 61 == 0 {
            s.push(' ');
        }
        i += 7;
    }
    s.truncate(n);
    s
}

/// The gateway's config: push receivers on loopback allowed, Redis when given.
fn store(redis: Option<&RedisServer>, prefix: &str) -> impl FnOnce(&mut Config) {
    let redis = redis.map(|r| r.config(prefix));
    move |cfg: &mut Config| {
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
        cfg.redis = redis;
    }
}

/// A task's artifacts as the gateway's GetTask answers them.
async fn got(http: &Http, id: &str) -> Value {
    let v = rpc(http, "s", None, "GetTask", json!({ "id": id })).await;
    let t = &v["result"];
    assert_eq!(t["id"], id, "GetTask answered the task: {}", short(&v));
    t["artifacts"].clone()
}

/// The tasks ListTasks with `includeArtifacts` answers, by id.
async fn listed(http: &Http) -> std::collections::HashMap<String, Value> {
    let v = rpc(
        http,
        "s",
        None,
        "ListTasks",
        json!({"includeArtifacts": true}),
    )
    .await;
    let tasks = v["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {}", short(&v)));
    tasks
        .iter()
        .map(|t| (t["id"].as_str().unwrap_or("").to_owned(), t.clone()))
        .collect()
}

/// A document too long to print whole, shortened.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 600 {
        format!("{}… ({} bytes)", &s[..600], s.len())
    } else {
        s
    }
}

/// 1.5 MB and 7.9 MB text artifacts (under the 8 MiB an agent may answer, and the 8 MiB
/// default of `max_artifact_bytes_per_task`; over the 1 MiB `max_task_document_bytes` that
/// once bounded them) come back whole from GetTask, ListTasks and the push delivery.
async fn large_artifacts_are_kept_whole(redis: Option<&RedisServer>) {
    const SIZES: [usize; 2] = [1_500_000, 7_900_000];
    let n = Arc::new(AtomicUsize::new(0));
    let agent = ScriptedAgent::start(Arc::new(move |method: &str, _: &Value| match method {
        "SendMessage" => {
            let i = n.fetch_add(1, Ordering::SeqCst).min(SIZES.len() - 1);
            let mut t = task(&format!("t-{i}"), &format!("c-{i}"), "TASK_STATE_COMPLETED");
            t["artifacts"] = json!([{"artifactId": format!("a-{i}"), "name": "report.txt",
                "parts": [{"text": text(i, SIZES[i]), "mediaType": "text/plain"}]}]);
            Answer::Result(json!({ "task": t }))
        }
        _ => Answer::Status(500, b"not scripted".to_vec()),
    }))
    .await;
    let (_gw, http) = gateway(
        vec![a2a_agent("s", &agent.base)],
        store(redis, "arts-large"),
    )
    .await;
    let hook = Hook::start().await;
    for (i, size) in SIZES.iter().enumerate() {
        let mut m = message("report", json!({}));
        m["configuration"] = json!({"taskPushNotificationConfig": {"url": hook.url(),
            "token": format!("tok-{i}")}});
        let sent = rpc(&http, "s", None, "SendMessage", m).await;
        let answered = &sent["result"]["task"]["artifacts"][0]["parts"][0]["text"];
        assert_eq!(
            answered.as_str().map(str::len),
            Some(*size),
            "the answer carries it"
        );
    }
    let want = |i: usize| {
        json!([{"artifactId": format!("a-{i}"), "name": "report.txt",
            "parts": [{"text": text(i, SIZES[i]), "mediaType": "text/plain"}]}])
    };
    let all = listed(&http).await;
    for i in 0..SIZES.len() {
        let id = format!("t-{i}");
        let read = got(&http, &id).await;
        assert!(read == want(i), "GetTask {id}: {}", short(&read));
        let in_list = all.get(&id).map(|t| t["artifacts"].clone());
        assert!(
            in_list.as_ref() == Some(&want(i)),
            "ListTasks {id}: {:?}",
            in_list.as_ref().map(short)
        );
    }
    // The receivers: each config's delivery carries its task's artifact whole.
    wait_for_within("both deliveries", Duration::from_secs(30), || async {
        hook.received().len() >= SIZES.len()
    })
    .await;
    for i in 0..SIZES.len() {
        let token = format!("tok-{i}");
        let delivered: Vec<Value> = hook
            .received()
            .iter()
            .filter(|d| d.header("x-a2a-notification-token") == Some(token.as_str()))
            .map(|d| d.json())
            .collect();
        assert!(!delivered.is_empty(), "{token} delivered");
        for d in delivered {
            assert!(
                d["task"]["artifacts"] == want(i),
                "the push of t-{i}: {}",
                short(&d)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn artifacts_of_1_5_and_7_9_mb_are_read_whole_by_get_list_and_push() {
    large_artifacts_are_kept_whole(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn artifacts_of_1_5_and_7_9_mb_are_read_whole_by_get_list_and_push_on_redis() {
    let redis = RedisServer::start();
    large_artifacts_are_kept_whole(Some(&redis)).await;
}

/// An agent that streams: SendStreamingMessage answers with `script`'s events (a Task first),
/// fed in order.
async fn streaming(script: Vec<Value>) -> ScriptedAgent {
    let script = Arc::new(std::sync::Mutex::new(Some(script)));
    let agent = ScriptedAgent::start(Arc::new(move |method: &str, _: &Value| {
        let taken = script.lock().expect("lock").take();
        match (method, taken) {
            ("SendStreamingMessage", Some(evs)) => {
                let (tx, answer) = events();
                tokio::spawn(async move {
                    for e in evs {
                        if tx.send(e).await.is_err() {
                            return;
                        }
                    }
                });
                answer
            }
            _ => Answer::Status(500, b"one stream per test".to_vec()),
        }
    }))
    .await;
    let mut c = card(&format!("{}/rpc", agent.base));
    c["capabilities"]["streaming"] = json!(true);
    agent.set_card(c);
    agent
}

/// A streamed TaskArtifactUpdateEvent of task `t-1`.
fn update(artifact: Value, append: bool, last: bool) -> Value {
    json!({"artifactUpdate": {"taskId": "t-1", "contextId": "ctx-1", "artifact": artifact,
        "append": append, "lastChunk": last}})
}

fn completed() -> Value {
    let t = task("t-1", "ctx-1", "TASK_STATE_COMPLETED");
    json!({"statusUpdate": {"taskId": "t-1", "contextId": "ctx-1", "status": t["status"]}})
}

/// `message:stream` on the gateway, read to its end (what the agent streamed, relayed).
async fn stream_to_end(http: &Http) {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::builder()
        .method(hyper::Method::POST)
        .uri(format!("{}/agents/s/message:stream", http.base))
        .header("accept", "text/event-stream")
        .header("a2a-version", "1.0")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(message("go", json!({})).to_string())))
        .expect("request");
    let res = client.request(req).await.expect("the gateway answers");
    let mut s = Events::new(res);
    assert!(
        s.until_end(Duration::from_secs(120)).await,
        "the stream ends"
    );
    assert!(!s.failed, "ended by the agent's completion, not cut");
    let end = &s.raw[s.raw.len().saturating_sub(600)..];
    assert!(
        s.raw.contains("TASK_STATE_COMPLETED"),
        "relayed to the end: …{end}"
    );
}

/// The one part of artifact `tail` (longer than any slack the cut leaves).
fn tail_part() -> Value {
    json!({"text": text(7, 1_000)})
}

/// The chunks of the appended artifact in the stream tests.
fn chunk(i: usize, n: usize) -> Value {
    json!({"text": text(1_000 + i, n)})
}

/// A Task, a small artifact `intro`, then artifact `big` in `chunks` chunks of `n` bytes (the
/// first not an append, the last `lastChunk`), then `tail` when asked, then COMPLETED.
fn appended(chunks: usize, n: usize, tail: bool) -> Vec<Value> {
    let mut evs = vec![json!({"task": task("t-1", "ctx-1", "TASK_STATE_WORKING")})];
    evs.push(update(
        json!({"artifactId": "intro", "name": "intro.txt",
        "parts": [{"text": "what follows"}]}),
        false,
        true,
    ));
    for i in 0..chunks {
        let a = json!({"artifactId": "big", "name": "big.txt", "parts": [chunk(i, n)]});
        evs.push(update(a, i > 0, i + 1 == chunks));
    }
    if tail {
        evs.push(update(
            json!({"artifactId": "tail", "name": "tail.txt",
            "parts": [tail_part()]}),
            false,
            true,
        ));
    }
    evs.push(completed());
    evs
}

/// 200 streamed appends of 10 KB (2 MB in all: past the 1 MiB `max_task_document_bytes`, which
/// no longer bounds artifacts) folded into one artifact, in order, after the artifact before
/// it; read back so by GetTask and ListTasks.
async fn appends_are_folded(redis: Option<&RedisServer>) {
    const CHUNKS: usize = 200;
    const N: usize = 10_000;
    let agent = streaming(appended(CHUNKS, N, false)).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], store(redis, "arts-fold")).await;
    stream_to_end(&http).await;
    let want = json!([
        {"artifactId": "intro", "name": "intro.txt", "parts": [{"text": "what follows"}]},
        {"artifactId": "big", "name": "big.txt",
            "parts": (0..CHUNKS).map(|i| chunk(i, N)).collect::<Vec<_>>()},
    ]);
    let read = got(&http, "t-1").await;
    let parts = read[1]["parts"].as_array().map_or(0, Vec::len);
    assert!(
        read == want,
        "GetTask: {parts} parts of big, {}",
        short(&read)
    );
    let all = listed(&http).await;
    assert!(
        all.get("t-1").map(|t| &t["artifacts"]) == Some(&want),
        "ListTasks: {:?}",
        all.get("t-1").map(short)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn two_hundred_streamed_appends_are_folded_into_one_artifact_in_order() {
    appends_are_folded(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_hundred_streamed_appends_are_folded_into_one_artifact_in_order_on_redis() {
    let redis = RedisServer::start();
    appends_are_folded(Some(&redis)).await;
}

/// Appends past the 8 MiB default bound (45 of 200 KB, each event under the 256 KiB of
/// `[streams] max_event_bytes`: 9 MB), then another artifact: the
/// record keeps every artifact's id and name, `big` a prefix of its parts and marked with what
/// it had and what is kept, `tail` listed with no parts and marked; both counted once.
async fn past_the_bound_the_record_says_what_it_cut(redis: Option<&RedisServer>) {
    const CHUNKS: usize = 45;
    const N: usize = 200_000;
    let agent = streaming(appended(CHUNKS, N, true)).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], store(redis, "arts-cut")).await;
    stream_to_end(&http).await;
    let read = got(&http, "t-1").await;
    let ids: Vec<(&str, &str)> = read
        .as_array()
        .map(|l| {
            l.iter()
                .map(|a| {
                    (
                        a["artifactId"].as_str().unwrap_or("?"),
                        a["name"].as_str().unwrap_or("?"),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        ids,
        [
            ("intro", "intro.txt"),
            ("big", "big.txt"),
            ("tail", "tail.txt")
        ],
        "every artifact listed: {}",
        short(&read)
    );
    assert!(read.to_string().len() <= 8 << 20, "within the bound");
    // The one before the cut: whole, unmarked.
    assert_eq!(
        read[0],
        json!({"artifactId": "intro", "name": "intro.txt", "parts": [{"text": "what follows"}]})
    );
    // The cut one: a prefix of its parts (the last kept may be a text cut short), and what it
    // had and kept, in bytes of its parts' JSON.
    let big = &read[1];
    let parts = big["parts"].as_array().expect("parts");
    assert!(
        parts.len() > 30 && parts.len() < CHUNKS,
        "{} parts",
        parts.len()
    );
    let whole = |p: &Value| p.to_string().len() as u64;
    for (i, p) in parts.iter().enumerate() {
        let want = chunk(i, N);
        if i + 1 < parts.len() {
            assert!(*p == want, "part {i} whole");
        } else {
            let kept = p["text"].as_str().unwrap_or("");
            let given = want["text"].as_str().unwrap_or("");
            assert!(
                !kept.is_empty() && given.starts_with(kept),
                "part {i} a prefix"
            );
        }
    }
    let original: u64 = (0..CHUNKS).map(|i| whole(&chunk(i, N))).sum();
    let kept: u64 = parts.iter().map(whole).sum();
    let meta = &big["metadata"];
    assert_eq!(meta[TRUNCATED], json!(true), "{}", short(big));
    assert_eq!(meta[ORIGINAL_BYTES], json!(original));
    assert_eq!(meta[KEPT_BYTES], json!(kept));
    assert!(
        kept < original && kept > 7 << 20,
        "most of the bound kept: {kept}"
    );
    // After the cut: listed, no parts, marked.
    let tail = &read[2];
    assert_eq!(tail["parts"], json!([]));
    assert_eq!(tail["metadata"][TRUNCATED], json!(true));
    assert_eq!(tail["metadata"][ORIGINAL_BYTES], json!(whole(&tail_part())));
    assert_eq!(tail["metadata"][KEPT_BYTES], json!(0));
    // ListTasks reads the same record.
    let all = listed(&http).await;
    assert!(
        all.get("t-1").map(|t| &t["artifacts"]) == Some(&read),
        "ListTasks"
    );
    // Counted once each, by agent.
    let counted = http
        .metric("a2a_gateway_artifacts_truncated_total", &[("agent", "s")])
        .await;
    assert_eq!(counted, 2.0, "big and tail");
}

#[tokio::test(flavor = "multi_thread")]
async fn past_the_artifact_bound_every_artifact_stays_listed_and_the_cut_says_so() {
    past_the_bound_the_record_says_what_it_cut(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn past_the_artifact_bound_every_artifact_stays_listed_and_the_cut_says_so_on_redis() {
    let redis = RedisServer::start();
    past_the_bound_the_record_says_what_it_cut(Some(&redis)).await;
}
