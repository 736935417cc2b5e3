//! Webhook deliveries per second through Redis to a subscriber on loopback: Clawpedia webhook
//! deliveries and official A2A push notifications, by the same method.
//!
//!     cargo bench --bench webhook_delivery
//!     DELIVERIES=50000 CONCURRENCY=256 cargo bench --bench webhook_delivery
//!     CLUSTER=1 cargo bench --bench webhook_delivery    # on a three-master Redis Cluster
//!     PROTOCOLS=a2a,clawpedia ROUNDS=3 cargo bench --bench webhook_delivery
//!
//! Starts a redis-server of its own (on PATH; with CLUSTER=1 three, joined with
//! `redis-cli --cluster create`) and a subscriber server in this process. Each
//! scenario queues its status changes through the Redis ledger's apply script (the same script
//! the gateway's ingest runs, deliveries included), then starts a gateway whose worker drains
//! them, and times the drain from start to the subscriber's last 2xx. Everything (Redis, the
//! gateway, the subscriber) shares this machine's cores.
//!
//! Scenarios: "wide", one change on each of N tasks (N lanes: as parallel as delivery gets);
//! "deep", 100 changes on each of N/100 tasks (per-task order makes each lane sequential).
//!
//! Protocols (`PROTOCOLS`, default `clawpedia,a2a`, run in that order; each scenario on a
//! fresh Redis and subscriber, the same gateway config, concurrency and number of changes):
//! - `clawpedia`: Clawpedia tasks of agent "a", each change queued for the configured
//!   subscriber "s" (`webhook_delivery/wide`, `webhook_delivery/deep`).
//! - `a2a`: official A2A tasks of agent "b" (ledger key `b/{id}`, an A2A Task document), each
//!   recorded SUBMITTED and given one push config (`put_push_config`, url the subscriber, with
//!   a token and Bearer credentials) before the clock starts; then its changes (WORKING, then
//!   alternating INPUT_REQUIRED / WORKING, each a transition) go through the same apply script,
//!   which queues each for the config on lane `~push:{config id}`; the worker reads the config
//!   from the ledger at each attempt and POSTs `{"task": ...}` (`webhook_delivery/a2a_push/wide`,
//!   `.../deep`). Subscriber "s" hears only Clawpedia agents, so the A2A changes queue nothing
//!   else.
//!
//! `ROUNDS=n` (default 1) runs every scenario n times, the protocols' order flipping each round,
//! and ends with each figure's median (min–max) over the rounds.

// The tests' subscriber and redis-server helpers; the bench uses a part of each.
#[allow(dead_code)]
#[path = "../tests/it/support/hook.rs"]
mod hook;
#[allow(dead_code)]
#[path = "../tests/it/support/redis_cluster.rs"]
mod redis_cluster;
#[allow(dead_code)]
#[path = "../tests/it/support/redis_server.rs"]
mod redis_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::config::{AgentConfig, Config, Protocol, RedisConfig, SubscriberConfig};
use a2a_gateway::ledger::{PushPut, RedisLedger, TaskLedger};
use a2a_gateway::protocol::a2a::push::PushConfig;
use a2a_gateway::protocol::a2a::{ledger_key, TaskState};
use a2a_gateway::protocol::task::{Head, Status, Verdict};
use a2a_gateway::webhook::queue::Outbox;
use a2a_gateway::Gateway;
use bytes::Bytes;
use futures_util::stream::StreamExt;

/// The Clawpedia agent, followed by subscriber "s".
const CLAWPEDIA_AGENT: &str = "a";
/// The official A2A agent, whose tasks' push configs get its changes.
const A2A_AGENT: &str = "b";
/// What each push config sends as `X-A2A-Notification-Token` and `Authorization`.
const PUSH_TOKEN: &str = "tok-bench";
const PUSH_SCHEME: &str = "Bearer";
const PUSH_CREDENTIALS: &str = "cred-bench";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn at_text(at_ms: i64) -> String {
    a2a_gateway::protocol::time::format(
        chrono::DateTime::from_timestamp_millis(at_ms).expect("time"),
    )
}

fn task_doc(id: &str, status: Status, at_ms: i64) -> Bytes {
    let at = at_text(at_ms);
    Bytes::from(
        serde_json::json!({
            "task_id": id,
            "agent_id": "f47ac10b-58cc-4372-a567-0e02b2c3d479",
            "status": status.as_str(),
            "input": {"topic": "averages of a CSV column", "filename": "avg.py"},
            "created_at": at,
            "updated_at": at,
        })
        .to_string(),
    )
}

/// An A2A Task document (ProtoJSON) in `status` at `at_ms`, about the size of [`task_doc`].
fn a2a_task_doc(id: &str, status: Status, at_ms: i64) -> Bytes {
    Bytes::from(
        serde_json::json!({
            "id": id,
            "contextId": "c0c8a1a4-5d1f-4f4e-9a51-3b0f6d3c2e10",
            "status": {
                "state": TaskState::of_status(status).as_str(),
                "timestamp": at_text(at_ms),
            },
            "history": [{"messageId": "m-1", "role": "ROLE_USER",
                "parts": [{"text": "averages of a CSV column, avg.py"}]}],
        })
        .to_string(),
    )
}

/// The k-th change of a task: SUBMITTED, then alternating WORKING / INPUT_REQUIRED, each a
/// transition.
fn status_of_change(k: usize) -> Status {
    match k {
        0 => Status::Submitted,
        k if k % 2 == 1 => Status::Working,
        _ => Status::InputRequired,
    }
}

/// The Redis of one scenario: one node, or a three-master cluster; kept alive while it runs.
enum Redis {
    Single(redis_server::RedisServer),
    Cluster(redis_cluster::RedisCluster),
}

impl Redis {
    fn start(cluster: bool) -> Redis {
        if cluster {
            Redis::Cluster(redis_cluster::RedisCluster::start())
        } else {
            Redis::Single(redis_server::RedisServer::start())
        }
    }

    fn config(&self, prefix: &str) -> RedisConfig {
        match self {
            Redis::Single(r) => r.config(prefix),
            Redis::Cluster(c) => RedisConfig {
                cluster: true,
                urls: c.urls(),
                prefix: prefix.into(),
                ..Default::default()
            },
        }
    }
}

/// The gateway's agents, the same in every scenario: a Clawpedia agent and an official A2A
/// agent (neither is called: the bench only delivers what it queued).
fn agents() -> Vec<AgentConfig> {
    let mut b = AgentConfig::new(A2A_AGENT, "http://127.0.0.1:9");
    b.protocol = Protocol::A2a;
    // Not asked about its tasks while they are drained (the default is 15 s quiet).
    b.reconcile_after = Duration::ZERO;
    vec![AgentConfig::new(CLAWPEDIA_AGENT, "http://127.0.0.1:9"), b]
}

/// What one scenario measured.
#[derive(Clone, Copy)]
struct Figures {
    queued_per_s: f64,
    delivered_per_s: f64,
}

/// One scenario's line label.
fn label(name: &str, protocol: Protocol) -> String {
    match protocol {
        Protocol::Clawpedia => format!("webhook_delivery/{name}"),
        Protocol::A2a => format!("webhook_delivery/a2a_push/{name}"),
    }
}

/// Queue `per_task` changes of each Clawpedia task in `ids`, each for subscriber "s".
async fn queue_clawpedia(ledger: &Arc<RedisLedger>, ids: &[String], per_task: usize, base: i64) {
    futures_util::stream::iter(ids.iter().cloned())
        .map(|id| {
            let ledger = ledger.clone();
            async move {
                for k in 0..per_task {
                    let status = status_of_change(k);
                    let at = base + k as i64;
                    let head = Head {
                        status,
                        updated_ms: at,
                    };
                    let applied = ledger
                        .apply(CLAWPEDIA_AGENT, &id, head, task_doc(&id, status, at), None)
                        .await
                        .expect("apply");
                    assert!(applied.verdict.is_accepted());
                }
            }
        })
        .buffer_unordered(256)
        .collect::<Vec<()>>()
        .await;
}

/// Record each A2A task of `ids` (SUBMITTED: queues nothing, it has no config yet) and store
/// one push config for it, to `url`. Not timed.
async fn record_a2a(ledger: &Arc<RedisLedger>, ids: &[String], url: &str, base: i64) {
    futures_util::stream::iter(ids.iter().cloned())
        .map(|id| {
            let ledger = ledger.clone();
            async move {
                let key = ledger_key(A2A_AGENT, &id);
                let head = Head {
                    status: Status::Submitted,
                    updated_ms: base,
                };
                let doc = a2a_task_doc(&id, Status::Submitted, base);
                let applied = ledger
                    .apply(A2A_AGENT, &key, head, doc, None)
                    .await
                    .expect("record");
                assert_eq!(applied.verdict, Verdict::New);
                // The config's id is the task's, as a2a-sdk names an inline config.
                let config = PushConfig {
                    id: id.clone(),
                    url: url.to_owned(),
                    token: Some(PUSH_TOKEN.into()),
                    scheme: Some(PUSH_SCHEME.into()),
                    credentials: Some(PUSH_CREDENTIALS.into()),
                    version: None,
                };
                let put = ledger
                    .put_push_config(&key, &id, Bytes::from(config.encode()), 10)
                    .await
                    .expect("put push config");
                assert_eq!(put, PushPut::Stored { created: true });
            }
        })
        .buffer_unordered(256)
        .collect::<Vec<()>>()
        .await;
}

/// Queue `per_task` changes (after its SUBMITTED) of each recorded A2A task in `ids`: each a
/// transition, each queued for the task's push config.
async fn queue_a2a(ledger: &Arc<RedisLedger>, ids: &[String], per_task: usize, base: i64) {
    futures_util::stream::iter(ids.iter().cloned())
        .map(|id| {
            let ledger = ledger.clone();
            async move {
                let key = ledger_key(A2A_AGENT, &id);
                for k in 1..=per_task {
                    let status = status_of_change(k);
                    let at = base + k as i64;
                    let head = Head {
                        status,
                        updated_ms: at,
                    };
                    let applied = ledger
                        .apply(A2A_AGENT, &key, head, a2a_task_doc(&id, status, at), None)
                        .await
                        .expect("apply");
                    assert!(
                        matches!(applied.verdict, Verdict::Transition { .. }),
                        "{:?}",
                        applied.verdict
                    );
                }
            }
        })
        .buffer_unordered(256)
        .collect::<Vec<()>>()
        .await;
}

/// What the subscriber got is what was queued, as its receiver reads it.
fn check_received(hook: &hook::Hook, protocol: Protocol) {
    let received = hook.received();
    let first = received.first().expect("a delivery");
    match protocol {
        Protocol::Clawpedia => {
            let j = first.json();
            assert_eq!(j["event_type"], "task.status.updated", "{j}");
            assert!(j["data"]["task_id"].is_string(), "{j}");
        }
        Protocol::A2a => {
            for d in [first, received.last().expect("a delivery")] {
                assert_eq!(d.header("content-type"), Some("application/a2a+json"));
                assert_eq!(d.header("x-a2a-notification-token"), Some(PUSH_TOKEN));
                assert_eq!(
                    d.header("authorization"),
                    Some(format!("{PUSH_SCHEME} {PUSH_CREDENTIALS}").as_str())
                );
                let j = d.json();
                assert!(j["task"]["id"].is_string(), "{j}");
                assert!(j["task"]["status"]["state"].is_string(), "{j}");
            }
        }
    }
}

async fn scenario(
    name: &str,
    protocol: Protocol,
    tasks: usize,
    per_task: usize,
    concurrency: usize,
    cluster: bool,
) -> Figures {
    let redis = Redis::start(cluster);
    let hook = hook::Hook::start().await;
    let prefix = "bench:";
    let sub = SubscriberConfig::new("s", &hook.url());
    let total = tasks * per_task;
    // No bound in the way: each partition enforces its share (max_queued / P) and random task
    // ids fill the partitions unevenly, so the bound is the total for every partition.
    let bound = (total + 1) * 16;
    let outbox = Arc::new(Outbox::new(
        &agents(),
        std::slice::from_ref(&sub),
        a2a_gateway::webhook::queue::Bounds {
            queued: bound,
            bytes: usize::MAX / 4,
            per_client: bound,
            per_client_bytes: usize::MAX / 4,
        },
        1000,
    ));
    let store = a2a_gateway::store::Store::new(&redis.config(prefix)).expect("store");
    store.connect_now().await.expect("redis");
    let ledger = Arc::new(RedisLedger::new(store, Duration::from_secs(3600)).with_outbox(outbox));
    let base = a2a_gateway::protocol::time::now_ms() - 3_600_000;
    let ids: Vec<String> = (0..tasks)
        .map(|_| uuid::Uuid::new_v4().to_string())
        .collect();
    if protocol == Protocol::A2a {
        record_a2a(&ledger, &ids, &hook.url(), base).await;
    }
    // Queue: per task, the changes, each a transition (Clawpedia's first a first sighting).
    let queued_at = Instant::now();
    match protocol {
        Protocol::Clawpedia => queue_clawpedia(&ledger, &ids, per_task, base).await,
        Protocol::A2a => queue_a2a(&ledger, &ids, per_task, base).await,
    }
    let queue_secs = queued_at.elapsed().as_secs_f64();

    let mut cfg = Config::with_agents("127.0.0.1:0".parse().expect("addr"), agents());
    cfg.workers = 1;
    cfg.redis = Some(redis.config(prefix));
    cfg.subscribers = vec![sub];
    cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
    cfg.webhooks.concurrency = concurrency;
    cfg.webhooks.max_queued = bound;
    let started = Instant::now();
    let gw = Gateway::start(cfg).await.expect("gateway");
    let deadline = started + Duration::from_secs(600);
    while hook.count() < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let delivered = hook.count();
    gw.shutdown().await;
    let figures = Figures {
        queued_per_s: total as f64 / queue_secs,
        delivered_per_s: delivered as f64 / secs,
    };
    println!(
        "{}{}: {total} changes ({tasks} tasks x {per_task}), concurrency {concurrency}: \
         queued at {:.0}/s (apply script), delivered {delivered} in {secs:.2} s = {:.0} deliveries/s",
        label(name, protocol),
        if cluster { " (cluster of 3)" } else { "" },
        figures.queued_per_s,
        figures.delivered_per_s
    );
    assert_eq!(delivered, total, "every queued change delivered");
    check_received(&hook, protocol);
    figures
}

/// `median (min–max)` of `values`.
fn spread(values: &[f64]) -> String {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    format!("{median:.0} ({:.0}–{:.0})", v[0], v[n - 1])
}

fn main() {
    // `cargo test --benches` runs bench binaries with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = if quick {
        200
    } else {
        env_or("DELIVERIES", 20_000)
    };
    let concurrency = env_or("CONCURRENCY", 256);
    let cluster = env_or("CLUSTER", 0) == 1;
    let rounds = env_or("ROUNDS", 1).max(1);
    let protocols: Vec<Protocol> = std::env::var("PROTOCOLS")
        .unwrap_or_else(|_| "clawpedia,a2a".into())
        .split(',')
        .map(|p| match p.trim() {
            "clawpedia" => Protocol::Clawpedia,
            "a2a" => Protocol::A2a,
            other => panic!("PROTOCOLS: {other:?} is neither clawpedia nor a2a"),
        })
        .collect();
    let shapes = [("wide", n, 1), ("deep", (n / 100).max(1), 100)];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    // Per shape, per protocol: each round's figures.
    let mut all: Vec<Vec<Vec<Figures>>> = vec![vec![Vec::new(); protocols.len()]; shapes.len()];
    rt.block_on(async {
        for round in 0..rounds {
            for (s, &(name, tasks, per_task)) in shapes.iter().enumerate() {
                let mut order: Vec<usize> = (0..protocols.len()).collect();
                if round % 2 == 1 {
                    order.reverse();
                }
                for p in order {
                    let f =
                        scenario(name, protocols[p], tasks, per_task, concurrency, cluster).await;
                    all[s][p].push(f);
                }
            }
        }
    });
    if rounds > 1 {
        println!("webhook_delivery: median (min–max) over {rounds} rounds");
        for (s, &(name, _, _)) in shapes.iter().enumerate() {
            for (p, &protocol) in protocols.iter().enumerate() {
                let rs = &all[s][p];
                let delivered: Vec<f64> = rs.iter().map(|f| f.delivered_per_s).collect();
                let queued: Vec<f64> = rs.iter().map(|f| f.queued_per_s).collect();
                println!(
                    "{}: {} deliveries/s, queued at {}/s",
                    label(name, protocol),
                    spread(&delivered),
                    spread(&queued)
                );
            }
        }
    }
}
