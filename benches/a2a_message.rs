//! An official A2A SendMessage through the gateway, without sockets: what the gateway adds to
//! each call between a client speaking JSON-RPC and an agent speaking HTTP+JSON (the
//! translation the SDK tests show working):
//!
//! 1. read the client's JSON-RPC request (the JSON-RPC form's `Form::read`: the strict reader,
//!    the id);
//! 2. check it against the proto (`check::check_request`);
//! 3. write the agent's request in its form (the HTTP+JSON form's `Form::request`);
//! 4. read the agent's answer back through what was sent (`Sent::read`) and check it
//!    (`answer::check_answer`);
//! 5. record the Task in the in-process ledger, keyed `{agent}/{id}`;
//! 6. the neutral answer, written for the JSON-RPC client (`Front::answer`).
//!
//! And what A2A 0.3 adds (group `a2a_message_versions`): the same message and answer through a
//! 1.0 client's form and a 0.3 client's (read, then the neutral answer written back), and
//! through a 1.0 agent's form and a 0.3 agent's (the request written, the answer read back):
//! the difference is what translating costs per message. Beside them (`client_grpc`,
//! `agent_grpc`), the same through the gRPC form: a2a.proto's messages read into ProtoJSON and
//! written back by their descriptors.
//!
//!     cargo bench --bench a2a_message

use std::time::Duration;

use a2a_gateway::http::a2a::frame::neutral;
use a2a_gateway::http::a2a::wire::v0_3_jsonrpc::V03JsonRpc;
use a2a_gateway::http::a2a::wire::v1_grpc::V1Grpc;
use a2a_gateway::http::a2a::wire::v1_http_json::V1HttpJson;
use a2a_gateway::http::a2a::wire::v1_jsonrpc::V1JsonRpc;
use a2a_gateway::http::a2a::wire::{Echo, Form, Front, Read};
use a2a_gateway::ledger::{MemoryLedger, TaskLedger};
use a2a_gateway::protocol::a2a::answer::{check_answer, task_of};
use a2a_gateway::protocol::a2a::check::check_request;
use a2a_gateway::protocol::a2a::held::HeldCard;
use a2a_gateway::protocol::a2a::{ledger_key, Call, Method};
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

/// A client's JSON-RPC request read by its form.
fn read(request: &[u8]) -> (Call, Echo) {
    match V1JsonRpc.read(&hyper::Method::POST, "jsonrpc", None, request) {
        Read::Call(call, echo) => (call, echo),
        _ => panic!("a call"),
    }
}

/// An agent whose card offers HTTP+JSON only.
fn rest_agent() -> HeldCard {
    let card = serde_json::json!({
        "name": "Echo", "description": "echoes", "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://agent.example/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": []}]
    });
    HeldCard::compile(card, Default::default()).expect("a card")
}

/// The head of an agent's 200 answer.
fn ok_parts() -> hyper::http::response::Parts {
    hyper::Response::new(()).into_parts().0
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
    let held = rest_agent();
    let parts = ok_parts();
    g.bench_function("parse_client_jsonrpc", |b| b.iter(|| read(REQUEST)));
    let (call, _) = read(REQUEST);
    g.bench_function("check_request", |b| b.iter(|| check_request(&call)));
    g.bench_function("agent_rest_request", |b| {
        b.iter(|| {
            V1HttpJson
                .request("http://127.0.0.1:9000", &held, &call, None)
                .expect("a request")
        })
    });
    let sent = V1HttpJson
        .request("http://127.0.0.1:9000", &held, &call, None)
        .expect("a request")
        .sent;
    g.bench_function("read_and_check_answer", |b| {
        b.iter(|| {
            let v = sent.read(&call, &parts, &body).expect("an answer");
            let found = check_answer(Method::SendMessage, &v, None);
            assert!(found.is_empty(), "{found:?}");
            v
        })
    });
    let mut n = 0u64;
    g.bench_function("record", |b| {
        let v = sent.read(&call, &parts, &body).expect("an answer");
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
            rt.block_on(ledger.apply_traced(
                "echo",
                &key,
                raw.clone(),
                Some("alice"),
                Default::default(),
            ))
            .expect("applied")
        })
    });
    let v = sent.read(&call, &parts, &body).expect("an answer");
    let front = Front {
        form: &V1JsonRpc,
        echo: read(REQUEST).1,
    };
    g.bench_function("frame_for_jsonrpc", |b| {
        b.iter(|| {
            front.answer(
                Method::SendMessage,
                neutral(Method::SendMessage, Ok(v.clone())),
            )
        })
    });
    let mut m = 0u64;
    g.bench_function("whole_path", |b| {
        b.iter(|| {
            m += 1;
            let (call, echo) = read(REQUEST);
            assert!(check_request(&call).is_empty());
            let out = V1HttpJson
                .request("http://127.0.0.1:9000", &held, &call, None)
                .expect("a request");
            let v = out.sent.read(&call, &parts, &body).expect("an answer");
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
            let front = Front {
                form: &V1JsonRpc,
                echo,
            };
            front.answer(Method::SendMessage, neutral(Method::SendMessage, Ok(v)))
        })
    });
    g.finish();
}

/// The message of [`REQUEST`] as a 0.3 client sends it (a2a.json's shapes).
const REQUEST_0_3: &[u8] = br#"{"jsonrpc":"2.0","id":17,"method":"message/send","params":{"message":{"kind":"message","messageId":"7c1f5a52-2b1e-4f0e-9d7b-3f0a9c1d2e4f","role":"user","parts":[{"kind":"text","text":"summarise the attached report in three bullet points"}],"contextId":"ctx-42"},"configuration":{"acceptedOutputModes":["text/plain"],"blocking":true}}}"#;

/// The agent's answer of [`answer`] as a 0.3 agent sends it, to the gateway's id `id`.
fn answer_0_3(rpc_id: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":"{rpc_id}","result":{{"kind":"task","id":"task-1","contextId":"ctx-42","status":{{"state":"completed","timestamp":"2026-12-01T10:00:00.000Z"}},"artifacts":[{{"artifactId":"a-1","parts":[{{"kind":"text","text":"- one\n- two\n- three"}}]}}],"history":[{{"kind":"message","messageId":"7c1f5a52-2b1e-4f0e-9d7b-3f0a9c1d2e4f","role":"user","parts":[{{"kind":"text","text":"summarise the attached report in three bullet points"}}]}}]}}}}"#
    )
    .into_bytes()
}

/// [`answer`] as a 1.0 JSON-RPC agent sends it, to the gateway's id `id`.
fn answer_1_0(rpc_id: &str) -> Vec<u8> {
    let task = String::from_utf8(answer("task-1")).expect("utf8");
    format!(r#"{{"jsonrpc":"2.0","id":"{rpc_id}","result":{task}}}"#).into_bytes()
}

/// An agent whose card offers JSON-RPC at `version` only.
fn rpc_agent(version: &str) -> HeldCard {
    let card = serde_json::json!({
        "name": "Echo", "description": "echoes", "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://agent.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": version}],
        "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": []}]
    });
    HeldCard::compile(card, Default::default()).expect("a card")
}

/// The gateway's id in a request it wrote (`"id":"gw-N"`), found without reading the body.
fn sent_id(body: &[u8]) -> &str {
    let text = std::str::from_utf8(body).expect("utf8");
    let at = text.find(r#""id":"gw-"#).expect("an id") + r#""id":""#.len();
    let len = text[at..].find('"').expect("the id's end");
    &text[at..at + len]
}

fn versions(c: &mut Criterion) {
    let mut g = c.benchmark_group("a2a_message_versions");
    g.throughput(Throughput::Elements(1));
    let parts = ok_parts();
    let neutral_answer: serde_json::Value =
        serde_json::from_slice(&answer("task-1")).expect("json");
    // A client's side: its request read, the neutral answer written back in its form.
    for (name, form, request) in [
        ("client_1_0", &V1JsonRpc as &dyn Form, REQUEST),
        ("client_0_3", &V03JsonRpc as &dyn Form, REQUEST_0_3),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let Read::Call(call, echo) =
                    form.read(&hyper::Method::POST, "jsonrpc", None, request)
                else {
                    panic!("a call")
                };
                assert!(check_request(&call).is_empty());
                let front = Front { form, echo };
                front.answer(
                    Method::SendMessage,
                    neutral(Method::SendMessage, Ok(neutral_answer.clone())),
                )
            })
        });
    }
    // The same over gRPC: the request as a2a.proto's bytes, the answer written as them.
    let rpc = a2a_grpc::rpc("SendMessage").expect("SendMessage");
    let (call, _) = read(REQUEST);
    let grpc_request = a2a_grpc::frame::encode(
        &a2a_grpc::json::to_bytes(&rpc.input, &serde_json::Value::Object(call.params.clone()))
            .expect("bytes"),
    );
    g.bench_function("client_grpc", |b| {
        b.iter(|| {
            let Read::Call(call, echo) = V1Grpc.read(
                &hyper::Method::POST,
                "/lf.a2a.v1.A2AService/SendMessage",
                None,
                &grpc_request,
            ) else {
                panic!("a call")
            };
            assert!(check_request(&call).is_empty());
            let front = Front {
                form: &V1Grpc,
                echo,
            };
            front.answer(
                Method::SendMessage,
                neutral(Method::SendMessage, Ok(neutral_answer.clone())),
            )
        })
    });
    // An agent's side: the request written in its form, its answer read back.
    for (name, form, version, answer_of) in [
        (
            "agent_1_0",
            &V1JsonRpc as &dyn Form,
            "1.0",
            answer_1_0 as fn(&str) -> Vec<u8>,
        ),
        ("agent_0_3", &V03JsonRpc as &dyn Form, "0.3", answer_0_3),
    ] {
        let held = rpc_agent(version);
        // Each request has a new id: the answer is written for the id of the one it answers.
        let template = String::from_utf8(answer_of("ID")).expect("utf8");
        g.bench_function(name, |b| {
            b.iter(|| {
                let out = form
                    .request("http://127.0.0.1:9000", &held, &call, None)
                    .expect("a request");
                let id = sent_id(&out.body);
                let body = template.replace("\"ID\"", &format!("\"{id}\""));
                let v = out
                    .sent
                    .read(&call, &parts, body.as_bytes())
                    .expect("an answer");
                assert!(check_answer(Method::SendMessage, &v, None).is_empty());
                v
            })
        });
    }
    // A gRPC agent: the request written as a2a.proto's bytes, its answer (the message, the
    // status folded into the head as the transport gives it) read back.
    let held = grpc_agent();
    let grpc_answer = a2a_grpc::frame::encode(
        &a2a_grpc::json::to_bytes(&rpc.output, &neutral_answer).expect("bytes"),
    );
    let mut grpc_parts = ok_parts();
    grpc_parts
        .headers
        .insert("grpc-status", hyper::header::HeaderValue::from_static("0"));
    g.bench_function("agent_grpc", |b| {
        b.iter(|| {
            let out = V1Grpc
                .request("http://127.0.0.1:9000", &held, &call, None)
                .expect("a request");
            let v = out
                .sent
                .read(&call, &grpc_parts, &grpc_answer)
                .expect("an answer");
            assert!(check_answer(Method::SendMessage, &v, None).is_empty());
            v
        })
    });
    g.finish();
}

/// An agent whose card offers gRPC only.
fn grpc_agent() -> HeldCard {
    let card = serde_json::json!({
        "name": "Echo", "description": "echoes", "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://agent.example:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "echoes", "tags": []}]
    });
    HeldCard::compile(card, Default::default()).expect("a card")
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench, versions
}
criterion_main!(benches);
