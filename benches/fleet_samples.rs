//! What the fleet page's samples cost (`crate::samples`, served in `/api/fleet`), at 200
//! agents with the full ten minutes (60 samples each): the bytes they add to one `/api/fleet`
//! answer, the time to write them (one answer's share of the work), the time of one sampling
//! turn (every 10 s), and the memory they hold.
//!
//!     cargo bench --bench fleet_samples
//!     AGENTS=500 ROUNDS=200 cargo bench --bench fleet_samples
//!
//! The samples are taken from a real `Metrics` with traffic recorded between turns (requests,
//! 5xx answers, latencies, transitions), so every sample has numbers and a p99.

use std::sync::Arc;
use std::time::Instant;

use a2a_gateway::metrics::Metrics;
use a2a_gateway::protocol::task::Status;
use a2a_gateway::samples::{AgentSample, Samples, KEEP};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    // `cargo test --benches` runs this once in a quick mode.
    let quick =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let agents = env("AGENTS", if quick { 10 } else { 200 });
    let rounds = env("ROUNDS", if quick { 3 } else { 100 });
    let metrics = Metrics::new().expect("metrics");
    let samples = Samples::default();
    let names: Vec<Arc<str>> = (0..agents)
        .map(|i| Arc::from(format!("agent-{i:03}")))
        .collect();
    let mut turns = Vec::new();
    for t in 0..=(KEEP as i64) {
        for (i, n) in names.iter().enumerate() {
            let n: &str = n;
            for k in 0..(1 + (i + t as usize) % 7) {
                let status = if k % 5 == 4 { "503" } else { "202" };
                metrics
                    .requests
                    .with_label_values(&["create", n, "ops", status])
                    .inc();
                metrics
                    .request_seconds
                    .with_label_values(&["create", n, "ops"])
                    .observe(0.001 * (1 + k) as f64);
            }
        }
        metrics
            .transition(Some(Status::Working), Status::Completed)
            .inc_by(3);
        let start = Instant::now();
        samples.take(
            &metrics,
            &names,
            t * 10_000,
            Instant::now() + std::time::Duration::from_secs(10 * t as u64),
        );
        turns.push(start.elapsed().as_secs_f64() * 1e3);
    }
    // What /api/fleet adds: every agent's samples and the fleet's, written as JSON.
    let mut writes = Vec::new();
    let mut bytes = 0;
    for _ in 0..rounds {
        let start = Instant::now();
        let all: Vec<Vec<AgentSample>> = names.iter().map(|n| samples.agent(n)).collect();
        let out = serde_json::to_vec(&(all, samples.fleet())).expect("json");
        writes.push(start.elapsed().as_secs_f64() * 1e3);
        bytes = out.len();
    }
    writes.sort_by(f64::total_cmp);
    turns.sort_by(f64::total_cmp);
    let held = agents * KEEP.next_power_of_two() * std::mem::size_of::<AgentSample>();
    println!(
        "fleet_samples: {agents} agents x {KEEP} samples: {bytes} bytes in /api/fleet ({:.0} per agent); \
         written in p50 {:.2} ms, p99 {:.2} ms ({rounds} writes); one sampling turn p50 {:.2} ms, max {:.2} ms; \
         held: {} KiB of samples ({} B each, a ring of {} per agent) plus the fleet's {KEEP}",
        bytes as f64 / agents as f64,
        percentile(&writes, 0.5),
        percentile(&writes, 0.99),
        percentile(&turns, 0.5),
        percentile(&turns, 1.0),
        held / 1024,
        std::mem::size_of::<AgentSample>(),
        KEEP.next_power_of_two(),
    );
    assert!(samples.agent("agent-000").len() == KEEP && bytes > 0);
}
