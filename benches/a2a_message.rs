//! An official A2A SendMessage through the gateway, without sockets: what the gateway adds to
//! each call between a client speaking JSON-RPC and an agent speaking HTTP+JSON (the
//! translation the SDK tests show working):
//!
//! 1. read the client's JSON-RPC request (`jsonrpc::parse_request`: the strict reader, the id);
//! 2. check it against the proto (`check::check_request`);
//! 3. build the agent's REST request (`rest::agent_request`) and serialize its body;
//! 4. read the agent's answer (`rest::parse_agent_answer`) and check it (`answer::check_answer`);
//! 5. record the Task in the in-process ledger, keyed `{agent}/{id}`;
//! 6. frame the neutral answer and reframe it for the JSON-RPC client.
//!
//!     cargo bench --bench a2a_message

use std::time::Duration;

use a2a_gateway::http::a2a::frame::{neutral, reframe, Front};
use a2a_gateway::ledger::{MemoryLedger, TaskLedger};
use a2a_gateway::protocol::a2a::answer::{check_answer, task_of};
use a2a_gateway::protocol::a2a::check::check_request;
use a2a_gateway::protocol::a2a::{jsonrpc, ledger_key, rest, Method};
use a2a_gateway::protocol::task::{Head, TaskRef};
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","id":17,"method":"SendMessage","params":{"message":{"messageId":"7c1f5a52-2b1e-4f0e-9d7b-3f0a9c1d2e4f","role":"ROLE_USER","parts":[{"text":"summarise the attached report in three bullet points"}],"contextId":"ctx-42"},"configuration":{"acceptedOutputModes":["text/plain"]}}}"#;

fn answer(id: &str) -> Vec<u8> {
    format!(
        r#"{{"task":{{"id":"{id}","contextId":"ctx-42","status":{{"state":"TASK_STATE_COMPLETED","timestamp":"2026-12-01T10:00:00.000Z"}},"artifacts":[{{"artifactId":"a-1","parts":[{{"text":"- one\n- two\n- three"}}]}}],"history":[{{"messageId":"7c1f5a52-2b1e-4f0e-9d7b-3f0a9c1d2e4f","role":"ROLE_USER","parts":[{{"text":"summarise the attached report in three bullet points"}}]}}]}}}}"#
    )
    .into_bytes()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let ledger = MemoryLedger::new(
        1_000_000,
        Duration::from_secs(3600),
        a2a_gateway::ledger::Evictions::unregistered(),
    );
    let body = answer("task-1");
    let mut g = c.benchmark_group("a2a_message");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_client_jsonrpc", |b| {
        b.iter(|| jsonrpc::parse_request(REQUEST).expect("a request"))
    });
    let call = jsonrpc::parse_request(REQUEST).expect("a request").call;
    g.bench_function("check_request", |b| b.iter(|| check_request(&call)));
    g.bench_function("agent_rest_request", |b| {
        b.iter(|| {
            let r = rest::agent_request(&call, None).expect("a request");
            serde_json::to_vec(&r.body).expect("json")
        })
    });
    g.bench_function("read_and_check_answer", |b| {
        b.iter(|| {
            let v = rest::parse_agent_answer(Method::SendMessage, 200, &body).expect("an answer");
            let found = check_answer(Method::SendMessage, &v, None);
            assert!(found.is_empty(), "{found:?}");
            v
        })
    });
    let mut n = 0u64;
    g.bench_function("record", |b| {
        let v = rest::parse_agent_answer(Method::SendMessage, 200, &body).expect("an answer");
        let raw = Bytes::from(serde_json::to_vec(&v["task"]).expect("json"));
        b.iter(|| {
            n += 1;
            let id = format!("task-{n}");
            let head = task_of(&v).expect("a task");
            let key = TaskRef {
                task_id: ledger_key("echo", &id),
                head: Head {
                    status: a2a_gateway::protocol::a2a::TaskState::status(head.state),
                    updated_ms: head.timestamp_ms.unwrap_or(0),
                },
                // Read with the head, as the gateway does: the ledger does not read the
                // document again for it.
                context: Some(head.context_id.into()),
                // The digest a push config's news is judged by, made as the gateway makes it.
                content: a2a_gateway::protocol::a2a::answer::content_of(&v["task"]),
            };
            rt.block_on(ledger.apply_traced("echo", &key, raw.clone(), Some("alice"), None))
                .expect("applied")
        })
    });
    let v = rest::parse_agent_answer(Method::SendMessage, 200, &body).expect("an answer");
    let front = Front::JsonRpc(jsonrpc::RpcId::Int(17.into()));
    g.bench_function("frame_for_jsonrpc", |b| {
        b.iter(|| {
            reframe(
                neutral(Method::SendMessage, Ok(v.clone())),
                &front,
                Method::SendMessage,
            )
        })
    });
    let mut m = 0u64;
    g.bench_function("whole_path", |b| {
        b.iter(|| {
            m += 1;
            let req = jsonrpc::parse_request(REQUEST).expect("a request");
            assert!(check_request(&req.call).is_empty());
            let out = rest::agent_request(&req.call, None).expect("a request");
            let _sent = serde_json::to_vec(&out.body).expect("json");
            let v = rest::parse_agent_answer(Method::SendMessage, 200, &body).expect("an answer");
            assert!(check_answer(Method::SendMessage, &v, None).is_empty());
            let head = task_of(&v).expect("a task");
            let key = ledger_key("echo", &format!("whole-{m}"));
            let raw = Bytes::from(serde_json::to_vec(&v["task"]).expect("json"));
            let h = Head {
                status: a2a_gateway::protocol::a2a::TaskState::status(head.state),
                updated_ms: head.timestamp_ms.unwrap_or(0),
            };
            rt.block_on(ledger.apply("echo", &key, h, raw, Some("alice")))
                .expect("applied");
            reframe(
                neutral(Method::SendMessage, Ok(v)),
                &Front::JsonRpc(req.id),
                Method::SendMessage,
            )
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
