//! The create-task hot path of the gateway, without sockets: parse the request (`json::parse`),
//! validate `input` against the spec's example card, then check and record the agent's 202 answer
//! in the ledger.
//!
//!     cargo bench --bench create_task
//!
//! Load runs (gateway vs nginx in front of the same agent) measure the sockets; this measures
//! the work the gateway adds per request.
//!
//! The schema budget (`protocol::clawpedia::card::check_budget`) runs when a card is compiled, not per
//! request: `validate_input` uses the compiled validator, and its per-request cost is that of
//! the validator alone. The `card_compile` group shows what the budget adds to a card compile:
//! the budget walk alone, the schema compile alone (with the regex limits, `jsonschema` builds
//! each pattern's engine at compile time rather than on first use), and the whole
//! `Card::compile` of the spec's example card.

use std::time::Duration;

use a2a_gateway::ledger::{MemoryLedger, TaskLedger};
use a2a_gateway::protocol::clawpedia::card::{check_budget, compile_schema_within, Budget, Card};
use a2a_gateway::protocol::clawpedia::conform::{check_task, TaskExpect};
use a2a_gateway::protocol::clawpedia::task::task_ref;
use a2a_gateway::protocol::json;
use a2a_gateway::protocol::task::Status;
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde_json::Value;

fn spec_card() -> Card {
    Card::compile(a2a_sample_agent::spec_example_card()).expect("the spec's example card is valid")
}

const REQUEST: &[u8] = br#"{"input":{"topic":"read a local CSV file and calculate the average of the age column","filename":"data_processor.py"}}"#;

/// A request with 24 numbers in its input (integers, decimals, exponents).
const REQUEST_NUMBERS: &[u8] = br#"{"input":{"topic":"averages","filename":"avg.py","ages":[31,27,45,52,19,38,61,23],"weights":[71.5,64.25,80.125,55.75,90.5,68.0,77.3,59.9],"scale":[1e3,2.5e-3,6.02e23,1.6e-19,3e8,9.81,1e-9,4.2e1]}}"#;

fn answer(task_id: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"task_id":"{task_id}","agent_id":"f47ac10b-58cc-4372-a567-0e02b2c3d479","status":"SUBMITTED","input":{{"topic":"read a local CSV file and calculate the average of the age column","filename":"data_processor.py"}},"created_at":"2023-10-27T10:02:00.000Z","updated_at":"2023-10-27T10:02:00.000Z"}}"#
    ))
}

fn bench(c: &mut Criterion) {
    let card = spec_card();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let ledger = MemoryLedger::new(
        1_000_000,
        Duration::from_secs(3600),
        a2a_gateway::ledger::Evictions::unregistered(),
    );
    let mut g = c.benchmark_group("create_task");
    g.throughput(Throughput::Elements(1));

    // serde_json's own reading, for reference; the gateway reads with `json::parse` (one
    // document: duplicate keys refused).
    g.bench_function("parse_request_serde_json", |b| {
        b.iter(|| serde_json::from_slice::<Value>(REQUEST).expect("json"))
    });
    g.bench_function("parse_request", |b| {
        b.iter(|| json::parse(REQUEST).expect("json"))
    });
    // Numbers are where serde_json's `arbitrary_precision` costs (a string per number).
    g.bench_function("parse_request_numbers", |b| {
        b.iter(|| json::parse(REQUEST_NUMBERS).expect("json"))
    });
    let doc: Value = json::parse(REQUEST).expect("json");
    g.bench_function("validate_input", |b| {
        b.iter(|| assert!(card.input.is_valid(&doc["input"])))
    });

    // Fresh task ids, like real traffic: each iteration records a new task.
    let mut n = 0u64;
    let mut next_answer = move || {
        n += 1;
        answer(&format!("00000000-0000-4000-8000-{n:012x}"))
    };
    let sample = answer("00000000-0000-4000-8000-000000000000");
    g.bench_function("parse_answer", |b| {
        b.iter(|| json::parse(&sample).expect("json"))
    });
    let parsed: Value = json::parse(&sample).expect("json");
    g.bench_function("check_answer", |b| {
        b.iter(|| {
            let expect = TaskExpect {
                agent_id: Some(&card.agent_id),
                task_id: None,
                status: Some(Status::Submitted),
                output: None,
                now_ms: None,
            };
            assert!(check_task(&parsed, expect).is_empty());
            task_ref(&parsed).expect("task ref")
        })
    });
    g.bench_function("record_answer", |b| {
        b.iter_batched(
            &mut next_answer,
            |raw| {
                // The task id sits at a fixed offset of the answer built by `answer`.
                let id = std::str::from_utf8(&raw[12..48]).expect("id");
                let head = a2a_gateway::protocol::task::Head {
                    status: Status::Submitted,
                    updated_ms: 1,
                };
                rt.block_on(ledger.apply("scripts", id, head, raw.clone(), None))
                    .expect("apply")
            },
            BatchSize::SmallInput,
        )
    });
    // Check the agent's 202 answer and record it: what the gateway does after the exchange.
    let check_and_record = |raw: Bytes| {
        let task: Value = json::parse(&raw).expect("json");
        let expect = TaskExpect {
            agent_id: Some(&card.agent_id),
            task_id: None,
            status: Some(Status::Submitted),
            output: None,
            now_ms: None,
        };
        assert!(check_task(&task, expect).is_empty());
        let r = task_ref(&task).expect("task ref");
        rt.block_on(ledger.apply("scripts", &r.task_id, r.head, raw, None))
            .expect("apply")
    };
    g.bench_function("check_and_record_answer", |b| {
        b.iter_batched(&mut next_answer, check_and_record, BatchSize::SmallInput)
    });
    g.bench_function("whole_hot_path", |b| {
        b.iter_batched(
            &mut next_answer,
            |raw| {
                let doc: Value = json::parse(REQUEST).expect("json");
                assert!(card.input.is_valid(&doc["input"]));
                check_and_record(raw)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// What the budget costs: at card compile time, on the spec's example card.
fn card_compile(c: &mut Criterion) {
    let spec = a2a_sample_agent::spec_example_card();
    let mut g = c.benchmark_group("card_compile");
    g.throughput(Throughput::Elements(1));
    let schemas = [("input_schema", &spec["input_schema"])];
    g.bench_function("budget_check", |b| {
        b.iter(|| check_budget(&schemas, &Budget::DEFAULT).expect("within budget"))
    });
    g.bench_function("compile_input_schema", |b| {
        b.iter(|| compile_schema_within(&spec["input_schema"], &Budget::DEFAULT).expect("compiles"))
    });
    g.bench_function("whole_card", |b| {
        b.iter_batched(
            || spec.clone(),
            |doc| Card::compile(doc).expect("valid card"),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench, card_compile);
criterion_main!(benches);
