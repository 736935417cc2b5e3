//! The SDK harness's own tests, direct to the SDK agents (no gateway): both official clients
//! over both bindings give the scripted results, and give the same results. Through-gateway
//! equivalence tests compare against exactly these documents.

use serde_json::{json, Value};

use crate::support::a2a_sdk::{run_clients, Run, Sdk, SdkAgent, HTTP_JSON, JSONRPC};

/// Every scenario the drivers know but `card`.
pub(crate) const SCENARIOS: &[&str] = &[
    "send-hello",
    "get",
    "get-missing",
    "cancel",
    "cancel-final",
    "multi-turn",
    "fail",
    "reject",
    "message",
    "list",
    "stream",
    "subscribe",
];

fn task(state: &str, artifacts: &[&str]) -> Value {
    json!({"kind": "task", "state": state, "artifacts": artifacts, "has_id": true, "has_context": true})
}

fn with_text(mut v: Value, text: &str) -> Value {
    v["status_text"] = json!(text);
    v
}

/// What each scenario must give, whichever SDK and binding.
pub(crate) fn expected(scenario: &str) -> Value {
    let hello = task("TASK_STATE_COMPLETED", &["Hello, world!"]);
    match scenario {
        "send-hello" => json!({"send": hello}),
        "get" => json!({"send": hello, "get": hello, "same_id": true}),
        "get-missing" => {
            json!({"get": {"error": {"type": "TaskNotFoundError", "reason": "TASK_NOT_FOUND"}}})
        }
        "cancel" => json!({"send_state_is_live": true,
            "cancel": task("TASK_STATE_CANCELED", &[]), "get": task("TASK_STATE_CANCELED", &[])}),
        "cancel-final" => json!({"send": hello,
            "cancel": {"error": {"type": "TaskNotCancelableError", "reason": "TASK_NOT_CANCELABLE"}}}),
        "multi-turn" => json!({
            "first": with_text(task("TASK_STATE_INPUT_REQUIRED", &[]), "what else?"),
            "second": task("TASK_STATE_COMPLETED", &["got: blue"]),
            "same_task": true, "same_context": true}),
        "fail" => json!({"send": with_text(task("TASK_STATE_FAILED", &[]), "it failed")}),
        "reject" => json!({"send": task("TASK_STATE_REJECTED", &[])}),
        "message" => {
            json!({"send": {"kind": "message", "role": "ROLE_AGENT", "text": "you said: message"}})
        }
        "list" => json!({"sent_listed": true}),
        "stream" => json!({"events": [
            task("TASK_STATE_SUBMITTED", &[]),
            {"kind": "status", "state": "TASK_STATE_WORKING"},
            {"kind": "artifact", "text": "Hello, world!"},
            {"kind": "status", "state": "TASK_STATE_COMPLETED"}]}),
        "subscribe" => json!({"first": [task("TASK_STATE_SUBMITTED", &[])],
            "last": [{"kind": "status", "state": "TASK_STATE_COMPLETED"}], "count_at_least_2": true}),
        other => panic!("no expectation for {other}"),
    }
}

/// An SDK error reduced to what both SDKs surface alike: its class and ErrorInfo reason
/// (@a2a-js/sdk also keeps the JSON-RPC code or HTTP status, a2a-sdk does not).
pub(crate) fn comparable(v: &Value) -> Value {
    match v {
        Value::Object(o) if o.contains_key("error") && o.len() == 1 => {
            let e = &o["error"];
            json!({"error": {"type": e["type"], "reason": e["reason"]}})
        }
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), comparable(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(comparable).collect()),
        other => other.clone(),
    }
}

fn both_sdks_give_the_scripted_results(binding: &str) {
    let agent = SdkAgent::start(binding);
    let outs = run_clients(&[
        (Sdk::Python, &agent.card_url, binding, None, SCENARIOS),
        (Sdk::Js, &agent.card_url, binding, None, SCENARIOS),
    ]);
    for (sdk, out) in [Sdk::Python, Sdk::Js].into_iter().zip(&outs) {
        assert_eq!(out["binding"], binding, "{sdk:?}: {out}");
        for s in SCENARIOS {
            let doc = &out["scenarios"][s];
            assert_eq!(doc["binding"], binding, "{sdk:?} {s}: {doc}");
            assert_eq!(
                comparable(&doc["result"]),
                expected(s),
                "{sdk:?} {binding} {s}: {doc}"
            );
        }
    }
    assert_eq!(
        comparable(&outs[0]),
        comparable(&outs[1]),
        "a2a-sdk and @a2a-js/sdk disagree"
    );
    // Each SDK's own error detail is still there for tests that need it.
    assert_eq!(
        outs[1]["scenarios"]["get-missing"]["result"]["get"]["error"][if binding == JSONRPC {
            "code"
        } else {
            "status_code"
        }],
        if binding == JSONRPC {
            json!(-32001)
        } else {
            json!(404)
        }
    );
    // The agent served only its one binding, and every request named A2A-Version 1.0.
    let posts: Vec<Value> = agent
        .recorded()
        .into_iter()
        .filter(|r| r["path"] != "/.well-known/agent-card.json")
        .collect();
    assert!(!posts.is_empty());
    for r in &posts {
        let path = r["path"].as_str().unwrap_or("");
        let prefix = if binding == JSONRPC {
            "/a2a/jsonrpc"
        } else {
            "/a2a/rest/"
        };
        assert!(path.starts_with(prefix), "{binding} agent got {r}");
        assert_eq!(r["headers"]["a2a-version"], "1.0", "{r}");
    }
}

#[test]
fn both_sdks_over_jsonrpc_direct_to_an_sdk_agent() {
    both_sdks_give_the_scripted_results(JSONRPC);
}

#[test]
fn both_sdks_over_http_json_direct_to_an_sdk_agent() {
    both_sdks_give_the_scripted_results(HTTP_JSON);
}

#[test]
fn the_agent_records_what_reached_it_without_credentials() {
    let agent = SdkAgent::start(HTTP_JSON);
    let outs = run_clients(&[
        (
            Sdk::Js,
            &agent.card_url,
            HTTP_JSON,
            Some("s3cret-js"),
            &["send-hello"],
        ),
        (
            Sdk::Python,
            &agent.card_url,
            HTTP_JSON,
            Some("s3cret-py"),
            &["send-hello"],
        ),
    ]);
    for out in &outs {
        assert_eq!(
            out["result"]["send"]["state"], "TASK_STATE_COMPLETED",
            "{out}"
        );
    }
    let recorded = agent.recorded();
    let sends: Vec<&Value> = recorded
        .iter()
        .filter(|r| r["method"] == "POST" && r["path"] == "/a2a/rest/message:send")
        .collect();
    assert_eq!(sends.len(), 2, "{recorded:?}");
    for r in sends {
        assert_eq!(r["headers"]["authorization"], "<redacted>");
        assert_eq!(r["body"]["message"]["role"], "ROLE_USER");
        assert_eq!(r["body"]["message"]["parts"], json!([{"text": "hello"}]));
    }
    let raw = std::fs::read_to_string(&agent.record).unwrap_or_default();
    assert!(!raw.contains("s3cret"), "a credential reached the record");
}

#[test]
fn the_card_can_name_another_host_than_the_agent_listens_on() {
    let agent = SdkAgent::start_with(JSONRPC, Some("agent.public.invalid"));
    let out = &run_clients(&[(Sdk::Python, &agent.card_url, JSONRPC, None, &["card"])])[0];
    let iface = &out["card"]["supportedInterfaces"];
    assert_eq!(iface.as_array().map(Vec::len), Some(1), "{out}");
    assert_eq!(iface[0]["protocolBinding"], "JSONRPC");
    assert_eq!(iface[0]["protocolVersion"], "1.0");
    let url = iface[0]["url"].as_str().unwrap_or("");
    let port = agent.base.rsplit(':').next().unwrap_or("");
    assert_eq!(
        url,
        format!("http://agent.public.invalid:{port}/a2a/jsonrpc")
    );
    assert_eq!(out["card"]["capabilities"]["streaming"], true);
}

/// Our sample agent in its official A2A mode (`sample-agent --protocol a2a`), direct and through
/// the gateway: both official clients over both of its bindings give what they give an agent
/// on a2a-sdk's own server classes.
#[tokio::test(flavor = "multi_thread")]
async fn the_sample_agent_answers_the_sdks_as_an_sdk_agent_does() {
    use a2a_gateway::config::Binding;
    let sample =
        a2a_sample_agent::SampleAgent::start(a2a_sample_agent::AgentOptions::a2a("Sample"))
            .await
            .expect("sample agent starts");
    let direct = format!("{}{}", sample.base_url(), a2a_sample_agent::A2A_CARD_PATH);
    let mut via_rest = crate::a2a_gateway::a2a_agent("rest", &sample.base_url());
    via_rest.binding = Some(Binding::HttpJson);
    let mut via_rpc = crate::a2a_gateway::a2a_agent("rpc", &sample.base_url());
    via_rpc.binding = Some(Binding::JsonRpc);
    let (_gw, http) = crate::a2a_gateway::gateway(vec![via_rpc, via_rest], |_| {}).await;
    let (rpc_card, rest_card) = (
        crate::a2a_gateway::card_url(&http, "rpc"),
        crate::a2a_gateway::card_url(&http, "rest"),
    );
    let scenarios: Vec<&str> = SCENARIOS
        .iter()
        .copied()
        .filter(|s| !matches!(*s, "stream" | "subscribe"))
        .collect();
    let runs: Vec<Run<'_>> = [Sdk::Python, Sdk::Js]
        .into_iter()
        .flat_map(|sdk| {
            [
                (sdk, direct.as_str(), JSONRPC),
                (sdk, direct.as_str(), HTTP_JSON),
                (sdk, rpc_card.as_str(), JSONRPC),
                (sdk, rest_card.as_str(), HTTP_JSON),
            ]
        })
        .map(|(sdk, url, binding)| (sdk, url, binding, None, scenarios.as_slice()))
        .collect();
    let outs = tokio::task::block_in_place(|| run_clients(&runs));
    for (run, out) in runs.iter().zip(&outs) {
        for s in &scenarios {
            let doc = &out["scenarios"][s];
            assert_eq!(
                comparable(&doc["result"]),
                expected(s),
                "{:?} {} {}: {s}: {doc}",
                run.0,
                run.1,
                run.2
            );
        }
    }
}
