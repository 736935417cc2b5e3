//! Webhook deliveries per second through Redis to a subscriber on loopback.
//!
//!     cargo bench --bench webhook_delivery
//!     DELIVERIES=50000 CONCURRENCY=256 cargo bench --bench webhook_delivery
//!     CLUSTER=1 cargo bench --bench webhook_delivery    # on a three-master Redis Cluster
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

use a2a_gateway::config::{AgentConfig, Config, RedisConfig, SubscriberConfig};
use a2a_gateway::ledger::{RedisLedger, TaskLedger};
use a2a_gateway::protocol::task::{Head, Status};
use a2a_gateway::webhook::queue::Outbox;
use a2a_gateway::Gateway;
use bytes::Bytes;
use futures_util::stream::StreamExt;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn task_doc(id: &str, status: Status, at_ms: i64) -> Bytes {
    let at = a2a_gateway::protocol::time::format(
        chrono::DateTime::from_timestamp_millis(at_ms).expect("time"),
    );
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

async fn scenario(name: &str, tasks: usize, per_task: usize, concurrency: usize, cluster: bool) {
    let redis = Redis::start(cluster);
    let hook = hook::Hook::start().await;
    let prefix = "bench:";
    let sub = SubscriberConfig::new("s", &hook.url());
    let total = tasks * per_task;
    // No bound in the way: each partition enforces its share (max_queued / P) and random task
    // ids fill the partitions unevenly, so the bound is the total for every partition.
    let bound = (total + 1) * 16;
    let outbox = Arc::new(Outbox::new(
        &[a2a_gateway::config::AgentConfig::new(
            "a",
            "http://127.0.0.1:1",
        )],
        std::slice::from_ref(&sub),
        bound,
        1000,
    ));
    let store = a2a_gateway::store::Store::new(&redis.config(prefix)).expect("store");
    store.connect_now().await.expect("redis");
    let ledger = Arc::new(RedisLedger::new(store, Duration::from_secs(3600)).with_outbox(outbox));
    // Queue: per task, SUBMITTED then alternating WORKING / INPUT_REQUIRED, each a transition.
    let base = a2a_gateway::protocol::time::now_ms() - 3_600_000;
    let ids: Vec<String> = (0..tasks)
        .map(|_| uuid::Uuid::new_v4().to_string())
        .collect();
    let queued_at = Instant::now();
    futures_util::stream::iter(ids.iter().cloned())
        .map(|id| {
            let ledger = ledger.clone();
            async move {
                for k in 0..per_task {
                    let status = match k {
                        0 => Status::Submitted,
                        k if k % 2 == 1 => Status::Working,
                        _ => Status::InputRequired,
                    };
                    let at = base + k as i64;
                    let head = Head {
                        status,
                        updated_ms: at,
                    };
                    let applied = ledger
                        .apply("a", &id, head, task_doc(&id, status, at), None)
                        .await
                        .expect("apply");
                    assert!(applied.verdict.is_accepted());
                }
            }
        })
        .buffer_unordered(256)
        .collect::<Vec<()>>()
        .await;
    let queue_secs = queued_at.elapsed().as_secs_f64();

    let mut cfg = Config::with_agents(
        "127.0.0.1:0".parse().expect("addr"),
        vec![AgentConfig::new("a", "http://127.0.0.1:9")],
    );
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
    println!(
        "webhook_delivery/{name}{}: {total} changes ({tasks} tasks x {per_task}), concurrency {concurrency}: \
         queued at {:.0}/s (apply script), delivered {delivered} in {secs:.2} s = {:.0} deliveries/s",
        if cluster { " (cluster of 3)" } else { "" },
        total as f64 / queue_secs,
        delivered as f64 / secs
    );
    assert_eq!(delivered, total, "every queued change delivered");
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        scenario("wide", n, 1, concurrency, cluster).await;
        scenario("deep", (n / 100).max(1), 100, concurrency, cluster).await;
    });
}
