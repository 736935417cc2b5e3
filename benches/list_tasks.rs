//! ListTasks (and `GET /tasks`) at 100,000 tasks: how long the ledger takes to answer one page of
//! 50, on each store, and what the listing index costs in memory.
//!
//! The ledger is filled with `TASKS` (100,000) official A2A tasks over two agents and three
//! owners (a realistic ~600-byte Task each: a status, an artifact, a two-message history), most
//! final, with status timestamps one to a few ms apart (ties included). Then `SAMPLES` pages are
//! asked, each timed: one owner's first page, the next page from a token's position deep in the
//! listing, every task's first page (`all_tasks`), and one owner's COMPLETED tasks. Printed:
//! p50, p99 and max per kind and store, the fill rate, and the memory: the in-process ledger's
//! RSS growth (the whole ledger, tasks and index) and, on Redis, `used_memory` growth and the
//! listing index's own share (MEMORY USAGE of its sorted sets).
//!
//!     cargo bench --bench list_tasks              # both stores (Redis: redis-server on PATH)
//!     TASKS=20000 SAMPLES=500 cargo bench --bench list_tasks
//!
//! Redis is a redis-server of this run's own on a free port, without persistence.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::ledger::listing::{Position, Query, Scope};
use a2a_gateway::ledger::{Evictions, MemoryLedger, RedisLedger, TaskLedger};
use a2a_gateway::protocol::task::{Head, Status};
use bytes::Bytes;

mod support;
use support::{env, rss_kib};

const AGENTS: [&str; 2] = ["alpha", "beta"];
const OWNERS: [&str; 3] = ["alice", "bob", "carol"];

fn doc(id: &str, ctx: &str, state: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"id":"{id}","contextId":"{ctx}","status":{{"state":"{state}","timestamp":"2026-12-01T10:00:00.000Z"}},"artifacts":[{{"artifactId":"a-{id}","name":"answer","parts":[{{"text":"the three points of the report, in a sentence each, as asked"}}]}}],"history":[{{"messageId":"m-{id}","role":"ROLE_USER","parts":[{{"text":"summarise the attached report in three bullet points"}}],"contextId":"{ctx}"}},{{"messageId":"r-{id}","role":"ROLE_AGENT","parts":[{{"text":"done"}}],"contextId":"{ctx}"}}]}}"#
    ))
}

/// Fill `l` with `n` tasks, 64 at a time; the wall time.
async fn fill(l: &Arc<dyn TaskLedger>, n: usize) -> Duration {
    let start = Instant::now();
    let mut pending = Vec::with_capacity(64);
    for i in 0..n {
        let l = l.clone();
        pending.push(tokio::spawn(async move {
            let agent = AGENTS[i % 2];
            let owner = OWNERS[(i / 2) % 3];
            let key = format!("{agent}/t-{i:06}");
            let status = if i % 10 == 0 {
                Status::Working
            } else {
                Status::Completed
            };
            let state = if status == Status::Working {
                "TASK_STATE_WORKING"
            } else {
                "TASK_STATE_COMPLETED"
            };
            let head = Head {
                status,
                updated_ms: 1_764_000_000_000 + (i as i64 * 3) / 2,
            };
            let d = doc(&key, &format!("ctx-{i}"), state);
            l.apply(agent, &key, head, d, Some(owner))
                .await
                .expect("apply");
        }));
        if pending.len() == 64 {
            for p in pending.drain(..) {
                p.await.expect("task");
            }
        }
    }
    for p in pending {
        p.await.expect("task");
    }
    start.elapsed()
}

fn query(scope: Scope, statuses: Vec<Status>, after: Option<Position>) -> Query {
    Query {
        scope,
        agents: AGENTS.iter().map(|a| Arc::from(*a)).collect(),
        statuses,
        since_ms: None,
        context: None,
        after,
        limit: 50,
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn measure(name: &str, l: &Arc<dyn TaskLedger>, samples: usize) {
    // A position deep in one owner's listing, to resume from.
    let mut deep = query(Scope::Owner("bob".into()), Status::ALL.to_vec(), None);
    for _ in 0..200 {
        let page = l.list(&deep).await.expect("list");
        match page.next {
            Some(p) => deep.after = Some(p),
            None => break,
        }
    }
    let kinds: Vec<(&str, Query)> = vec![
        (
            "owner, first page",
            query(Scope::Owner("alice".into()), Status::ALL.to_vec(), None),
        ),
        ("owner, deep page", deep),
        (
            "all_tasks, first page",
            query(Scope::All, Status::ALL.to_vec(), None),
        ),
        (
            "owner, COMPLETED",
            query(Scope::Owner("carol".into()), vec![Status::Completed], None),
        ),
    ];
    for (kind, q) in kinds {
        let mut times = Vec::with_capacity(samples);
        let mut total = 0;
        for _ in 0..samples {
            let t = Instant::now();
            let page = l.list(&q).await.expect("list");
            times.push(t.elapsed());
            assert_eq!(page.tasks.len(), 50, "{kind}: a full page");
            total = page.total;
        }
        times.sort();
        println!(
            "{name:>6} | {kind:<22} | p50 {:>8.1} µs | p99 {:>8.1} µs | max {:>8.1} µs | totalSize {total}",
            pct(&times, 0.50).as_secs_f64() * 1e6,
            pct(&times, 0.99).as_secs_f64() * 1e6,
            times[times.len() - 1].as_secs_f64() * 1e6,
        );
    }
}

struct Redis(Child, u16);
impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn used_memory(port: u16) -> u64 {
    redis_cli(port, &["info", "memory"])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn start_redis() -> Option<Redis> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let r = Redis(child, port);
    for _ in 0..100 {
        if redis_cli(port, &["ping"]).trim() == "PONG" {
            return Some(r);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing of ours either way.
    let tasks = env("TASKS", 100_000);
    let samples = env("SAMPLES", 2_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        println!("list_tasks: {tasks} tasks (2 agents, 3 owners), pages of 50, {samples} samples each");
        let before = rss_kib();
        let memory: Arc<dyn TaskLedger> = Arc::new(MemoryLedger::new(
            1_000_000,
            Duration::from_secs(3600),
            Evictions::unregistered(),
        ));
        let took = fill(&memory, tasks).await;
        let grown = rss_kib().saturating_sub(before);
        println!(
            "memory | filled in {:.1} s ({:.0} tasks/s); RSS +{:.1} MiB ({:.0} B per task, documents included)",
            took.as_secs_f64(),
            tasks as f64 / took.as_secs_f64(),
            grown as f64 / 1024.0,
            grown as f64 * 1024.0 / tasks as f64
        );
        measure("memory", &memory, samples).await;
        drop(memory);

        let Some(redis) = start_redis() else {
            println!("redis | skipped: no redis-server on PATH");
            return;
        };
        let base = used_memory(redis.1);
        let ledger = RedisLedger::connect(
            &format!("redis://127.0.0.1:{}", redis.1),
            "bench:",
            Duration::from_secs(3600),
        )
        .await
        .expect("redis ledger");
        let ledger: Arc<dyn TaskLedger> = Arc::new(ledger);
        let took = fill(&ledger, tasks).await;
        let used = used_memory(redis.1).saturating_sub(base);
        // The listing index's own sorted sets: `ls:` (per owner or every task, agent, state) and
        // `lsx` (their expiry).
        let mut index = 0u64;
        for key in redis_cli(redis.1, &["--scan", "--pattern", "*ls*"]).lines() {
            if key.contains("ls:") || key.ends_with("lsx") {
                index += redis_cli(redis.1, &["memory", "usage", key])
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0);
            }
        }
        println!(
            " redis | filled in {:.1} s ({:.0} tasks/s); used_memory +{:.1} MiB ({:.0} B per task), of which the listing index {:.1} MiB ({:.0} B per task)",
            took.as_secs_f64(),
            tasks as f64 / took.as_secs_f64(),
            used as f64 / 1048576.0,
            used as f64 / tasks as f64,
            index as f64 / 1048576.0,
            index as f64 / tasks as f64
        );
        redis_cli(redis.1, &["config", "resetstat"]);
        measure("redis", &ledger, samples).await;
        // Where a page's time goes on the server: the listing script (one call per partition)
        // and the reads of the page's records.
        for line in redis_cli(redis.1, &["info", "commandstats"]).lines() {
            if line.starts_with("cmdstat_evalsha") || line.starts_with("cmdstat_hmget") {
                println!(" redis | {line}");
            }
        }
    });
}
