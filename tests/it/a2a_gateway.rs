//! Official A2A agents behind the gateway, driven by the official SDKs on both sides: a2a-sdk
//! agents (one JSON-RPC only, one HTTP+JSON only) and the a2a-sdk and @a2a-js/sdk clients, each
//! over both bindings, starting from the card the gateway serves. Every non-streaming,
//! non-push operation gives the same result through the gateway as direct to the agent.

use serde_json::{json, Value};

use a2a_gateway::config::{AgentConfig, Config, Protocol};
use a2a_gateway::Gateway;

use crate::a2a_sdk::{comparable, expected};
use crate::support::a2a_sdk::{run_client, run_clients, Run, Sdk, SdkAgent, HTTP_JSON, JSONRPC};
use crate::support::Http;

/// The drivers' scenarios that neither stream nor push nor list (those come with later
/// routes): `a2a_sdk::SCENARIOS` less `list`, `stream` and `subscribe`.
pub fn unary() -> Vec<&'static str> {
    crate::a2a_sdk::SCENARIOS
        .iter()
        .copied()
        .filter(|s| !matches!(*s, "list" | "stream" | "subscribe"))
        .collect()
}

/// An A2A agent entry for the gateway.
pub fn a2a_agent(name: &str, base: &str) -> AgentConfig {
    let mut a = AgentConfig::new(name, base);
    a.protocol = Protocol::A2a;
    a
}

/// A gateway on port 0 in front of `agents`, with `tweak`, ready.
pub async fn gateway(agents: Vec<AgentConfig>, tweak: impl FnOnce(&mut Config)) -> (Gateway, Http) {
    let mut cfg = Config::with_agents("127.0.0.1:0".parse().expect("addr"), agents);
    tweak(&mut cfg);
    let gw = Gateway::start(cfg).await.expect("gateway starts");
    let http = Http::new(format!("http://{}", gw.addr()));
    http.ready().await;
    (gw, http)
}

/// The card URL the gateway serves for agent `name`.
pub fn card_url(http: &Http, name: &str) -> String {
    format!("{}/agents/{name}/.well-known/agent-card.json", http.base)
}

#[tokio::test(flavor = "multi_thread")]
async fn both_sdks_over_both_bindings_get_through_the_gateway_what_they_get_direct() {
    let rpc = SdkAgent::start(JSONRPC);
    let rest = SdkAgent::start(HTTP_JSON);
    let (_gw, http) = gateway(
        vec![a2a_agent("rpc", &rpc.base), a2a_agent("rest", &rest.base)],
        |_| {},
    )
    .await;
    let unary = unary();
    assert_eq!(unary.len(), 9, "{unary:?}");
    let rpc_card = card_url(&http, "rpc");
    let rest_card = card_url(&http, "rest");
    // Every client binding towards every agent binding: the gateway translates.
    let runs: Vec<Run<'_>> = [Sdk::Python, Sdk::Js]
        .into_iter()
        .flat_map(|sdk| {
            [
                (sdk, rpc_card.as_str(), JSONRPC),
                (sdk, rpc_card.as_str(), HTTP_JSON),
                (sdk, rest_card.as_str(), JSONRPC),
                (sdk, rest_card.as_str(), HTTP_JSON),
            ]
        })
        .map(|(sdk, url, binding)| (sdk, url, binding, None, unary.as_slice()))
        .collect();
    // The clients are processes: wait for them off the runtime's async threads.
    let outs = tokio::task::block_in_place(|| run_clients(&runs));
    for out in &outs {
        for s in &unary {
            let doc = &out["scenarios"][s];
            assert_eq!(comparable(&doc["result"]), expected(s), "{s}: {doc}");
        }
    }
    // The agents saw the gateway's requests, each at their own interface's path, in their
    // own binding, with A2A-Version 1.0.
    for (agent, prefix) in [(&rpc, "/a2a/jsonrpc"), (&rest, "/a2a/rest/")] {
        let calls: Vec<Value> = agent
            .recorded()
            .into_iter()
            .filter(|r| r["path"] != "/.well-known/agent-card.json")
            .collect();
        assert!(calls.len() >= 4 * unary.len(), "{}", calls.len());
        for r in &calls {
            assert!(
                r["path"].as_str().is_some_and(|p| p.starts_with(prefix)),
                "{r}"
            );
            assert_eq!(r["headers"]["a2a-version"], "1.0", "{r}");
        }
    }
    // Counted by method, client binding and outcome.
    let sends = http
        .metric(
            "a2a_gateway_a2a_requests_total",
            &[
                ("agent", "rest"),
                ("method", "SendMessage"),
                ("binding", "JSONRPC"),
                ("outcome", "ok"),
            ],
        )
        .await;
    assert!(sends >= 2.0 * 8.0, "{sends}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_served_card_names_only_the_gateway() {
    let rpc = SdkAgent::start_with(JSONRPC, Some("agent.internal.example"));
    let (_gw, http) = gateway(vec![a2a_agent("echo", &rpc.base)], |_| {}).await;
    for path in [
        "/agents/echo/.well-known/agent-card.json",
        "/agents/echo/agent-card.json",
    ] {
        let r = http.get(path).await;
        assert_eq!(r.status, 200, "{r:?}");
        let card = r.json();
        assert_eq!(
            card["supportedInterfaces"],
            json!([
                {"url": format!("{}/agents/echo", http.base), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": format!("{}/agents/echo/jsonrpc", http.base), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": http.base, "protocolBinding": "GRPC", "tenant": "echo", "protocolVersion": "1.0"},
                {"url": format!("{}/agents/echo/jsonrpc", http.base), "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": format!("{}/agents/echo", http.base), "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
            ]),
            "{card}"
        );
        // And 0.3's fields, for 0.3's clients: the gateway's 0.3 interfaces, JSON-RPC first.
        assert_eq!(card["url"], format!("{}/agents/echo/jsonrpc", http.base));
        assert_eq!(card["preferredTransport"], "JSONRPC");
        assert_eq!(card["protocolVersion"], "0.3.0");
        assert_eq!(
            card["additionalInterfaces"],
            json!([{"url": format!("{}/agents/echo", http.base), "transport": "HTTP+JSON"}])
        );
        // The agent streams, and the gateway serves its streams; the gateway keeps and
        // delivers push configs itself, whatever the agent does.
        assert_eq!(card["capabilities"]["streaming"], true);
        assert_eq!(card["capabilities"]["pushNotifications"], true);
        assert!(
            card.get("securitySchemes").is_none(),
            "no clients: no scheme"
        );
        let text = card.to_string();
        assert!(!text.contains("agent.internal.example"), "{text}");
        assert!(!text.contains(&rpc.base), "{text}");
    }
    // The agent's interface named another host: the gateway called the configured origin.
    let url = card_url(&http, "echo");
    let out =
        tokio::task::block_in_place(|| run_client(Sdk::Js, &url, HTTP_JSON, None, &["send-hello"]));
    assert_eq!(comparable(&out["result"]), expected("send-hello"), "{out}");
    // /agents says what the agent is.
    let listed = http.get("/agents").await.json();
    let entry = &listed["agents"][0];
    assert_eq!(entry["protocol"], "a2a", "{listed}");
    assert_eq!(entry["binding"], "JSONRPC", "{listed}");
}
