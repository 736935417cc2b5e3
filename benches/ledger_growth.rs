//! The in-process ledger while it grows: the time of each SendMessage's ledger calls (the
//! messageId's claim, the new context's claim, the task's record, the context's keep, the
//! messageId's completion: what `http/a2a/send.rs` asks of the ledger for a new task from a
//! configured client, less the reads; an anonymous caller claims no context), one message after another on one thread, from empty to `TASKS` (1,500,000) tasks, on
//! the gateway's allocator (mimalloc). A map's doubling happens inside one of these calls, under
//! its shard's lock, so the slowest calls are stalls that every request of that runtime thread
//! waits through.
//!
//! Printed per band of 100,000 tasks: the median message, the 99.9th percentile, the slowest;
//! then the slowest overall, the messages over 1 ms, the wall time and the RSS growth.
//!
//!     cargo bench --bench ledger_growth
//!     TASKS=500000 cargo bench --bench ledger_growth

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_gateway::ledger::{Answer, Claim, Evictions, MemoryLedger, TaskLedger};
use a2a_gateway::protocol::task::{Head, Status, TaskRef};
use bytes::Bytes;

mod support;
use support::{env, rss_kib};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let tasks = env("TASKS", 1_500_000);
    let band = 100_000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let ledger = MemoryLedger::new(
        4_000_000,
        Duration::from_secs(3600),
        Evictions::unregistered(),
    );
    let rss0 = rss_kib();
    let start = Instant::now();
    let mut times: Vec<u32> = Vec::with_capacity(band);
    let (mut slowest, mut over_1ms) = (Duration::ZERO, 0usize);
    println!("tasks held   | median  | p99.9    | slowest");
    rt.block_on(async {
        for i in 0..tasks {
            let id = format!("{i:08x}-98c5-4029-afd5-2ed658698cc3");
            let doc = Bytes::from(format!(
                r#"{{"id":"{id}","contextId":"c-{id}","status":{{"state":"TASK_STATE_COMPLETED","timestamp":"2026-12-05T10:00:00.000Z"}},"artifacts":[{{"artifactId":"a-{id}","parts":[{{"text":"Hello, world!"}}]}}]}}"#
            ));
            let key = format!("load-1-{i}");
            let context = format!("c-{id}");
            let task = TaskRef {
                task_id: id,
                head: Head {
                    status: Status::Completed,
                    updated_ms: 1_764_900_000_000 + i as i64,
                },
                context: Some(Arc::from(context.as_str())),
                // A task's content digest (made on the HTTP path, not in the ledger).
                content: 1 + i as u64,
            };
            let answer = Answer {
                status: 200,
                content_type: "application/json".into(),
                body: doc.clone(),
            };
            let kept_context = Answer {
                status: 200,
                content_type: String::new(),
                body: Bytes::from_static(b"bench"),
            };
            let t = Instant::now();
            let claim = ledger
                .claim_key("msg:echo", &key, [7; 32], "token", Duration::from_secs(120))
                .await
                .expect("claim");
            assert_eq!(claim, Claim::Claimed);
            let claim = ledger
                .claim_key("ctx:echo", &context, [9; 32], "token", Duration::from_secs(125))
                .await
                .expect("context claim");
            assert_eq!(claim, Claim::Claimed);
            ledger
                .apply_traced("echo", &task, doc, Some("bench"), Default::default())
                .await
                .expect("apply");
            let kept = ledger
                .complete_key(
                    "ctx:echo",
                    &context,
                    "token",
                    [9; 32],
                    kept_context,
                    Duration::from_secs(86_400),
                )
                .await
                .expect("keep");
            assert!(kept);
            let kept = ledger
                .complete_key(
                    "msg:echo",
                    &key,
                    "token",
                    [7; 32],
                    answer,
                    Duration::from_secs(86_400),
                )
                .await
                .expect("complete");
            assert!(kept);
            let d = t.elapsed();
            slowest = slowest.max(d);
            over_1ms += usize::from(d > Duration::from_millis(1));
            times.push(u32::try_from(d.as_nanos()).unwrap_or(u32::MAX));
            if times.len() == band || i + 1 == tasks {
                times.sort_unstable();
                let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
                println!(
                    "{:>12} | {:>5.1} µs | {:>5.1} µs | {:>8.2} ms",
                    i + 1,
                    f64::from(at(0.5)) / 1e3,
                    f64::from(at(0.999)) / 1e3,
                    f64::from(times[times.len() - 1]) / 1e6
                );
                times.clear();
            }
        }
    });
    println!(
        "slowest message {:.2} ms; {} messages over 1 ms; {} tasks in {:.2} s; RSS +{} MB",
        slowest.as_secs_f64() * 1e3,
        over_1ms,
        tasks,
        start.elapsed().as_secs_f64(),
        rss_kib().saturating_sub(rss0) / 1024
    );
}
