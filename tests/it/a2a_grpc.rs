//! A2A 1.0's gRPC binding through the gateway (issue 35): a2a-sdk 1.3.0's gRPC client, starting
//! from the card the gateway serves, to a2a-sdk agents of each binding; the JSON clients of
//! both SDKs to an a2a-sdk gRPC agent; the gateway's statuses as gRPC carries them (raw, and as
//! the SDK reads them); push configs and streams over gRPC beside the other bindings.

use std::time::Duration;

use serde_json::{json, Value};

use a2a_gateway::config::{Binding, Right};

use crate::a2a_gateway::{a2a_agent, card_url, gateway};
use crate::a2a_sdk::{comparable, expected, SCENARIOS};
use crate::auth::client;
use crate::support::a2a_calls::{message, rest, ALICE, BOB, WAIT};
use crate::support::a2a_sdk::{
    run_client_with, run_clients, Run, Sdk, SdkAgent, HTTP_JSON, JSONRPC,
};
use crate::support::grpc::{self, bearer};
use crate::support::hook::Hook;
use crate::support::sse::Events;
use crate::support::{metric_value, wait_for, wait_for_within, Http};

const GRPC: &str = "GRPC";

/// What each scenario gives over gRPC through the gateway: what it gives over any binding.
fn check_scenarios(out: &Value, scenarios: &[&str], what: &str) {
    for s in scenarios {
        let doc = &out["scenarios"][s];
        assert_eq!(comparable(&doc["result"]), expected(s), "{what} {s}: {doc}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_sdks_grpc_client_gets_through_the_gateway_to_agents_of_each_binding_what_it_gets_direct(
) {
    let g = SdkAgent::start(GRPC);
    let rpc = SdkAgent::start(JSONRPC);
    let rest_agent = SdkAgent::start(HTTP_JSON);
    let (_gw, http) = gateway(
        vec![
            a2a_agent("g", &g.base),
            a2a_agent("rpc", &rpc.base),
            a2a_agent("rest", &rest_agent.base),
        ],
        |_| {},
    )
    .await;
    // The served card lists the gRPC interface: the gateway's listener, the agent as tenant.
    let card = http
        .get("/agents/rpc/.well-known/agent-card.json")
        .await
        .json();
    let grpc_iface: Vec<&Value> = card["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter(|i| i["protocolBinding"] == GRPC)
        .collect();
    assert_eq!(
        grpc_iface,
        [
            &json!({"url": http.base, "protocolBinding": "GRPC", "tenant": "rpc", "protocolVersion": "1.0"})
        ],
        "{card}"
    );
    let cards: Vec<String> = ["g", "rpc", "rest"]
        .iter()
        .map(|n| card_url(&http, n))
        .collect();
    let mut runs: Vec<Run<'_>> = cards
        .iter()
        .map(|c| (Sdk::Python, c.as_str(), GRPC, None, SCENARIOS))
        .collect();
    // Direct to the gRPC agent: what the same client gets without the gateway.
    runs.push((Sdk::Python, g.card_url.as_str(), GRPC, None, SCENARIOS));
    let outs = tokio::task::block_in_place(|| run_clients(&runs));
    for (out, what) in outs.iter().zip(["via g", "via rpc", "via rest", "direct"]) {
        assert_eq!(out["binding"], GRPC, "{what}: {out}");
        check_scenarios(out, SCENARIOS, what);
    }
    // The gRPC agent saw the gateway's gRPC calls: 1.0, no tenant of the client's (its card
    // declares none), nothing but the service's paths.
    let calls: Vec<Value> = g
        .recorded()
        .into_iter()
        .filter(|r| r["path"] != "/.well-known/agent-card.json")
        .collect();
    assert!(calls.len() >= 2 * SCENARIOS.len(), "{}", calls.len());
    for r in &calls {
        let path = r["path"].as_str().unwrap_or("");
        assert!(path.starts_with("/lf.a2a.v1.A2AService/"), "{r}");
        if r["headers"]["x-forwarded-for"].is_string() {
            assert_eq!(r["headers"]["a2a-version"], "1.0", "{r}");
        }
    }
    // Counted under its own binding label.
    let sends = http
        .metric(
            "a2a_gateway_a2a_requests_total",
            &[("agent", "rest"), ("binding", GRPC), ("outcome", "ok")],
        )
        .await;
    assert!(sends >= SCENARIOS.len() as f64, "{sends}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_json_clients_of_both_sdks_reach_a_grpc_agent() {
    let g = SdkAgent::start(GRPC);
    let (_gw, http) = gateway(vec![a2a_agent("g", &g.base)], |_| {}).await;
    let card = card_url(&http, "g");
    let runs: Vec<Run<'_>> = [Sdk::Python, Sdk::Js]
        .into_iter()
        .flat_map(|sdk| [(sdk, JSONRPC), (sdk, HTTP_JSON)])
        .map(|(sdk, b)| (sdk, card.as_str(), b, None, SCENARIOS))
        .collect();
    let outs = tokio::task::block_in_place(|| run_clients(&runs));
    for (out, run) in outs.iter().zip(&runs) {
        check_scenarios(out, SCENARIOS, &format!("{:?} {}", run.0, run.2));
    }
    // `/agents` says which binding the gateway speaks to it.
    let agents = http.get("/agents").await.json();
    let g_entry = agents["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["name"] == "g"))
        .cloned()
        .unwrap_or_else(|| agents.clone());
    assert_eq!(g_entry["binding"], GRPC, "{agents}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grpc_agent_is_called_at_grpc_url_or_at_the_cards_port_on_the_configured_host_only() {
    // The card names a host the gateway must not call: the gRPC port is taken from it, the
    // host from `url`.
    let steer = SdkAgent::start_with(GRPC, Some("agent.invalid"));
    // With grpc_url, the card's port does not matter either: the card below says
    // `host:port`, and grpc_url names the real one.
    let hostport = SdkAgent::start_args(GRPC, &["--grpc-url-form", "host-port"]);
    let its_card = Http::new(hostport.base.clone())
        .get("/.well-known/agent-card.json")
        .await
        .json();
    let named = its_card["supportedInterfaces"][0]["url"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(
        named.starts_with("127.0.0.1:"),
        "the card says host:port: {named}"
    );
    let real = named.rsplit(':').next().unwrap_or("").to_owned();
    let mut with_url = a2a_agent("with-url", &hostport.base);
    with_url.grpc_url = Some(format!("http://127.0.0.1:{real}"));
    with_url.binding = Some(Binding::Grpc);
    let (_gw, http) = gateway(vec![a2a_agent("steer", &steer.base), with_url], |_| {}).await;
    for name in ["steer", "with-url"] {
        let r = grpc::call(
            &http.base,
            "SendMessage",
            &json!({"tenant": name, "message": {"messageId": "m-1", "role": "ROLE_USER",
                "parts": [{"text": "hello"}]}}),
            &[("a2a-version", "1.0")],
        )
        .await;
        assert_eq!(r.code, 0, "{name}: {:?}", r.status);
        assert_eq!(
            r.messages[0]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{name}: {:?}",
            r.messages
        );
    }
    // Under an agent's route the service needs no tenant: the route names the agent (what a
    // proxy that prefixes gRPC paths sends). At the root, SendMessage without one is refused.
    let plain =
        json!({"message": {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "hello"}]}});
    let r = grpc::call_path(
        &http.base,
        "/agents/steer/lf.a2a.v1.A2AService/SendMessage",
        "SendMessage",
        &plain,
        &[],
    )
    .await;
    assert_eq!(r.code, 0, "{:?}", r.status);
    let id = r.messages[0]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    let r = grpc::call(&http.base, "GetTask", &json!({"id": id}), &[]).await;
    assert_eq!(
        r.messages[0]["id"],
        id.as_str(),
        "found without a tenant: {:?}",
        r.status
    );
    let r = grpc::call(&http.base, "SendMessage", &plain, &[]).await;
    assert_eq!(r.code, 3, "{:?}", r.status);
}

/// Metadata as the raw client takes it.
fn refs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, s)| (*k, s.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn statuses_over_grpc_carry_the_tables_codes_and_the_sdk_reads_them() {
    let g = SdkAgent::start(GRPC);
    let (_gw, http) = gateway(vec![a2a_agent("g", &g.base)], |cfg| {
        let mut limited = client(
            "limited",
            "limited-key-0123456789abcd",
            &["*"],
            &[Right::Tasks],
        );
        limited.rate_per_sec = Some(1.0);
        limited.burst = Some(1);
        cfg.clients = vec![
            client("alice", ALICE, &["*"], &[Right::Tasks, Right::Streams]),
            client("bob", BOB, &["*"], &[Right::Tasks]),
            client(
                "reader",
                "reader-key-0123456789abcdef",
                &["*"],
                &[Right::Metrics],
            ),
            limited,
        ];
    })
    .await;
    let base = http.base.clone();
    let send = |text: &str| {
        json!({"tenant": "g", "message": {"messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER", "parts": [{"text": text}]}})
    };
    let md = |t: Option<&str>| -> Vec<(&'static str, String)> { bearer(t) };
    let as_refs = |v: &[(&'static str, String)]| -> Vec<(&'static str, String)> { v.to_vec() };
    // No credentials: UNAUTHENTICATED; a client without `tasks`: PERMISSION_DENIED.
    let r = grpc::call(&base, "SendMessage", &send("hello"), &[]).await;
    assert_eq!((r.code, r.reason()), (16, "UNAUTHORIZED"), "{:?}", r.status);
    assert_eq!(r.status["error"]["details"][0]["domain"], "a2a-gateway");
    assert_eq!(r.head["content-type"], "application/grpc");
    let reader = as_refs(&md(Some("reader-key-0123456789abcdef")));
    let r = grpc::call(&base, "SendMessage", &send("hello"), &refs(&reader)).await;
    assert_eq!((r.code, r.reason()), (7, "FORBIDDEN"), "{:?}", r.status);
    // Over the limit: RESOURCE_EXHAUSTED with a RetryInfo.
    let limited = as_refs(&md(Some("limited-key-0123456789abcd")));
    let mut exhausted = None;
    for _ in 0..5 {
        let r = grpc::call(
            &base,
            "GetTask",
            &json!({"tenant": "g", "id": "x"}),
            &refs(&limited),
        )
        .await;
        if r.code == 8 {
            exhausted = Some(r);
            break;
        }
    }
    let r = exhausted.expect("the limit is reached");
    assert_eq!(r.reason(), "RATE_LIMITED", "{:?}", r.status);
    assert!(
        r.retry.is_some_and(|d| d >= Duration::from_secs(1)),
        "{:?}",
        r.retry
    );
    // Ownership: alice's task is not bob's (NOT_FOUND, the protocol's TASK_NOT_FOUND).
    let alice = as_refs(&md(Some(ALICE)));
    let bob = as_refs(&md(Some(BOB)));
    let r = grpc::call(&base, "SendMessage", &send("hello"), &refs(&alice)).await;
    assert_eq!(r.code, 0, "{:?}", r.status);
    let id = r.messages[0]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    let r = grpc::call(
        &base,
        "GetTask",
        &json!({"tenant": "g", "id": id}),
        &refs(&bob),
    )
    .await;
    assert_eq!(
        (r.code, r.reason()),
        (5, "TASK_NOT_FOUND"),
        "{:?}",
        r.status
    );
    assert_eq!(
        r.status["error"]["details"][0]["domain"],
        "a2a-protocol.org"
    );
    // Without a tenant, a call that names a task finds the caller's; a final task stays
    // final: cancel is FAILED_PRECONDITION (TASK_NOT_CANCELABLE).
    let r = grpc::call(&base, "GetTask", &json!({"id": id}), &refs(&alice)).await;
    assert_eq!(r.code, 0, "{:?}", r.status);
    assert_eq!(r.messages[0]["status"]["state"], "TASK_STATE_COMPLETED");
    let r = grpc::call(&base, "CancelTask", &json!({"id": id}), &refs(&alice)).await;
    assert_eq!(
        (r.code, r.reason()),
        (9, "TASK_NOT_CANCELABLE"),
        "{:?}",
        r.status
    );
    // An unknown tenant and one a client may not use read alike: INVALID_ARGUMENT naming it.
    let r = grpc::call(
        &base,
        "SendMessage",
        &json!({"tenant": "nope", "message": send("x")["message"]}),
        &refs(&alice),
    )
    .await;
    assert_eq!(r.code, 3, "{:?}", r.status);
    assert!(r.status.to_string().contains("tenant"), "{:?}", r.status);
    // 0.3's service, and a method the service lacks: UNIMPLEMENTED.
    let r = grpc::call_path(
        &base,
        "/a2a.v1.A2AService/SendMessage",
        "SendMessage",
        &send("x"),
        &refs(&alice),
    )
    .await;
    assert_eq!(r.code, 12, "{:?}", r.status);
    let r = grpc::call_path(
        &base,
        "/lf.a2a.v1.A2AService/Nope",
        "SendMessage",
        &send("x"),
        &refs(&alice),
    )
    .await;
    assert_eq!(r.code, 12, "{:?}", r.status);
    // A version the gateway does not speak: FAILED_PRECONDITION (VERSION_NOT_SUPPORTED).
    let mut v2 = alice.clone();
    v2.push(("a2a-version", "2.0".to_owned()));
    let r = grpc::call(&base, "GetTask", &json!({"id": id}), &refs(&v2)).await;
    assert_eq!(
        (r.code, r.reason()),
        (9, "VERSION_NOT_SUPPORTED"),
        "{:?}",
        r.status
    );
    // grpc-timeout bounds the call: "slow" works for 20 s.
    let mut short = alice.clone();
    short.push(("grpc-timeout", "300m".to_owned()));
    let started = std::time::Instant::now();
    let r = grpc::call(&base, "SendMessage", &send("slow"), &refs(&short)).await;
    assert_eq!((r.code, r.reason()), (4, "AGENT_TIMEOUT"), "{:?}", r.status);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A call its deadline cut is counted like any other (JSON's HTTP 200 and gRPC's alike
    // hide it from requests_total's status): the timeout alert sees it.
    let metrics = http.get_as("/metrics", "reader-key-0123456789abcdef").await;
    assert_eq!(metrics.status, 200);
    let cut = metric_value(
        &String::from_utf8_lossy(&metrics.body),
        "a2a_gateway_a2a_requests_total",
        &[
            ("agent", "g"),
            ("method", "SendMessage"),
            ("binding", GRPC),
            ("outcome", "AGENT_TIMEOUT"),
            ("client", "alice"),
        ],
    );
    assert_eq!(cut, 1.0);
    // A request at the service's path that is not gRPC gets plain HTTP errors, not a gRPC
    // status under HTTP 200: 401 without credentials, 415 without gRPC's content type.
    let plain = http
        .send(
            hyper::Method::POST,
            "/lf.a2a.v1.A2AService/SendMessage",
            &[],
            bytes::Bytes::new(),
        )
        .await;
    assert_eq!(plain.status, 401, "{plain:?}");
    assert!(plain.header("grpc-status").is_none(), "{plain:?}");
    let auth = format!("Bearer {ALICE}");
    for headers in [
        vec![("authorization", auth.as_str())],
        vec![
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ],
    ] {
        let r = http
            .send(
                hyper::Method::POST,
                "/agents/g/lf.a2a.v1.A2AService/SendMessage",
                &headers,
                bytes::Bytes::from_static(b"{}"),
            )
            .await;
        assert_eq!(r.status, 415, "{headers:?}: {r:?}");
    }
    // a2a-sdk's gRPC client reads the same statuses.
    let card = card_url(&http, "g");
    let outs = tokio::task::block_in_place(|| {
        [
            run_client_with(
                Sdk::Python,
                &card,
                GRPC,
                Some(BOB),
                &["--grpc-token", ""],
                &["send-hello"],
            ),
            run_client_with(
                Sdk::Python,
                &card,
                GRPC,
                Some("reader-key-0123456789abcdef"),
                &[],
                &["send-hello"],
            ),
            run_client_with(
                Sdk::Python,
                &card,
                GRPC,
                Some(BOB),
                &["--task", &id],
                &["push-list"],
            ),
        ]
    });
    let message_of = |v: &Value| v["error"]["message"].as_str().unwrap_or("").to_owned();
    assert!(
        message_of(&outs[0]).contains("UNAUTHENTICATED"),
        "{}",
        outs[0]
    );
    assert!(
        message_of(&outs[1]).contains("PERMISSION_DENIED"),
        "{}",
        outs[1]
    );
    assert_eq!(outs[2]["error"]["type"], "TaskNotFoundError", "{}", outs[2]);
}

#[tokio::test(flavor = "multi_thread")]
async fn push_configs_and_the_extended_card_over_grpc() {
    let g = SdkAgent::start(GRPC);
    let (_gw, http) = gateway(vec![a2a_agent("g", &g.base)], |cfg| {
        crate::support::a2a_calls::two_clients(cfg);
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
    })
    .await;
    let hook = Hook::start().await;
    let card = card_url(&http, "g");
    let url = hook.url();
    let sdk = |token: &str, extra: &[&str], scenario: &str| {
        tokio::task::block_in_place(|| {
            run_client_with(Sdk::Python, &card, GRPC, Some(token), extra, &[scenario])
        })
    };
    let sent = sdk(
        ALICE,
        &[
            "--text",
            "need input",
            "--push-url",
            &url,
            "--push-token",
            "tok-g",
        ],
        "send-push",
    );
    let id = sent["result"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned();
    let set = sdk(
        ALICE,
        &[
            "--task",
            &id,
            "--push-id",
            "second",
            "--push-url",
            &url,
            "--push-token",
            "tok-2",
        ],
        "push-set",
    );
    assert_eq!(set["result"]["id"], "second", "{set}");
    let listed = sdk(ALICE, &["--task", &id], "push-list");
    let ids: Vec<&str> = listed["result"]["configs"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{listed}");
    let got = sdk(ALICE, &["--task", &id, "--push-id", "second"], "push-get");
    assert_eq!(got["result"]["url"], url.as_str(), "{got}");
    let deleted = sdk(
        ALICE,
        &["--task", &id, "--push-id", "second"],
        "push-delete",
    );
    assert!(deleted.get("error").is_none(), "{deleted}");
    // The task goes on over gRPC; the remaining config hears it end.
    let r = grpc::call(
        &http.base,
        "SendMessage",
        &json!({"message": {"messageId": "m-2", "role": "ROLE_USER", "taskId": id,
            "parts": [{"text": "blue"}]}, "tenant": "g"}),
        &[("authorization", &format!("Bearer {ALICE}"))],
    )
    .await;
    assert_eq!(r.code, 0, "{:?}", r.status);
    wait_for_within(
        "the config hears COMPLETED",
        Duration::from_secs(20),
        || async {
            hook.received().iter().any(|d| {
                d.header("x-a2a-notification-token") == Some("tok-g")
                    && d.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            })
        },
    )
    .await;
    assert!(
        !hook
            .received()
            .iter()
            .any(|d| d.header("x-a2a-notification-token") == Some("tok-2")
                && d.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"),
        "a deleted config hears nothing more"
    );
    // The extended card: the agent has none (its card says so), answered as gRPC's status.
    let r = grpc::call(
        &http.base,
        "GetExtendedAgentCard",
        &json!({"tenant": "g"}),
        &[("authorization", &format!("Bearer {ALICE}"))],
    )
    .await;
    assert_eq!(
        r.reason(),
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        "{:?}",
        r.status
    );
}

/// A JSON-RPC or REST subscriber of task `id`, as SSE.
async fn sse_subscriber(base: &str, id: &str, rpc_id: Option<i64>) -> Events {
    use bytes::Bytes;
    use http_body_util::Full;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let (path, body) = match rpc_id {
        Some(n) => (
            "/agents/s/jsonrpc".to_owned(),
            json!({"jsonrpc": "2.0", "id": n, "method": "SubscribeToTask", "params": {"id": id}})
                .to_string(),
        ),
        None => (format!("/agents/s/tasks/{id}:subscribe"), String::new()),
    };
    let mut req = hyper::Request::post(format!("{base}{path}"))
        .header("accept", "text/event-stream")
        .header("a2a-version", "1.0");
    if !body.is_empty() {
        req = req.header("content-type", "application/json");
    }
    let res = client
        .request(req.body(Full::new(Bytes::from(body))).expect("request"))
        .await
        .expect("answers");
    assert_eq!(res.status(), 200);
    Events::new(res)
}

/// The state of a StreamResponse (its task's or status update's), or `artifact`.
fn state_of(v: &Value) -> String {
    if let Some(t) = v.get("task") {
        return t["status"]["state"].as_str().unwrap_or("?").to_owned();
    }
    if let Some(s) = v.get("statusUpdate") {
        return s["status"]["state"].as_str().unwrap_or("?").to_owned();
    }
    if v.get("artifactUpdate").is_some() {
        return "artifact".to_owned();
    }
    format!("other:{v}")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_subscribers_over_grpc_and_both_json_bindings_share_one_upstream() {
    // A JSON-RPC agent: the gRPC subscribers share its stream with the JSON ones.
    let agent = SdkAgent::start(JSONRPC);
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], |_| {}).await;
    let base = http.base.clone();
    let md = [("a2a-version", "1.0")];
    // The creator streams over gRPC: three ticks, then WORKING until canceled.
    let mut creator = grpc::open(
        &base,
        "SendStreamingMessage",
        &json!({"tenant": "s", "message": {"messageId": "m-1", "role": "ROLE_USER",
            "parts": [{"text": "ticks then wait"}]}}),
        &md,
    )
    .await
    .unwrap_or_else(|a| panic!("refused: {:?}", a.status));
    let first = creator.next(WAIT).await.expect("the first event");
    let id = first["task"]["id"]
        .as_str()
        .expect("a task first")
        .to_owned();
    // Wait for the ticks to pass: subscribers then join a task that is WORKING for 20 s.
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|s: &&String| s.as_str() == "TASK_STATE_WORKING")
        .count()
        < 3
    {
        let e = creator.next(WAIT).await.expect("ticks");
        seen.push(state_of(&e));
    }
    let mut grpc_subs = Vec::new();
    let mut sse_subs = Vec::new();
    for i in 0..99i64 {
        match i % 3 {
            0 => grpc_subs.push(
                grpc::open(
                    &base,
                    "SubscribeToTask",
                    &json!({"tenant": "s", "id": id}),
                    &md,
                )
                .await
                .unwrap_or_else(|a| panic!("refused: {:?}", a.status)),
            ),
            1 => sse_subs.push((Some(i), sse_subscriber(&base, &id, Some(i)).await)),
            _ => sse_subs.push((None, sse_subscriber(&base, &id, None).await)),
        }
    }
    for s in grpc_subs.iter_mut() {
        let first = s.next(WAIT).await.expect("the task first");
        assert_eq!(first["task"]["id"], id.as_str());
    }
    for (rpc_id, s) in sse_subs.iter_mut() {
        let e = s.next_event(WAIT).await.expect("the task first");
        let doc: Value = serde_json::from_str(&e.data).expect("json");
        let v = if rpc_id.is_some() {
            doc["result"].clone()
        } else {
            doc
        };
        assert_eq!(v["task"]["id"], id.as_str(), "{v}");
    }
    wait_for("a hundred subscribers", || async {
        http.metric("a2a_gateway_stream_subscribers", &[]).await == 100.0
    })
    .await;
    // Canceled over REST: every subscriber reads CANCELED and its stream's end.
    let r = rest(
        &http,
        hyper::Method::POST,
        &format!("/agents/s/tasks/{id}:cancel"),
        None,
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    grpc_subs.push(creator);
    for s in grpc_subs.iter_mut() {
        let mut last = String::new();
        while let Some(e) = s.next(WAIT).await {
            last = state_of(&e);
        }
        assert_eq!(last, "TASK_STATE_CANCELED");
        let (code, status) = s.ended.clone().expect("the stream ended with its status");
        assert_eq!(code, 0, "{status}");
    }
    for (rpc_id, s) in sse_subs.iter_mut() {
        let mut last = String::new();
        while let Some(e) = s.next_event(WAIT).await {
            let doc: Value = serde_json::from_str(&e.data).expect("json");
            let v = if rpc_id.is_some() {
                doc["result"].clone()
            } else {
                doc
            };
            last = state_of(&v);
        }
        assert_eq!(last, "TASK_STATE_CANCELED");
    }
    // One stream upstream for all of them: the creator's.
    let methods: Vec<String> = agent
        .recorded()
        .iter()
        .filter_map(|r| r["body"]["method"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        methods
            .iter()
            .filter(|m| m.as_str() == "SendStreamingMessage")
            .count(),
        1,
        "{methods:?}"
    );
    assert!(
        !methods.iter().any(|m| m == "SubscribeToTask"),
        "{methods:?}"
    );
    let _ = message;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateways_stream_endings_are_the_streams_final_status() {
    let g = SdkAgent::start(GRPC);
    let (gw, http) = gateway(vec![a2a_agent("g", &g.base)], |_| {}).await;
    let mut s = grpc::open(
        &http.base,
        "SendStreamingMessage",
        &json!({"tenant": "g", "message": {"messageId": "m-1", "role": "ROLE_USER",
            "parts": [{"text": "slow"}]}}),
        &[],
    )
    .await
    .unwrap_or_else(|a| panic!("refused: {:?}", a.status));
    let first = s.next(WAIT).await.expect("the first event");
    assert!(
        first.get("task").is_some() || first.get("statusUpdate").is_some(),
        "{first}"
    );
    // Draining ends every stream with DRAINING: UNAVAILABLE.
    let stopping = tokio::spawn(async move { gw.shutdown().await });
    while s.next(WAIT).await.is_some() {}
    let (code, status) = s.ended.clone().expect("a final status");
    assert_eq!(code, 14, "{status}");
    assert_eq!(
        status["error"]["details"][0]["reason"], "DRAINING",
        "{status}"
    );
    let _ = stopping.await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sample_agent_serves_grpc_as_an_sdk_agent_does_direct_and_behind_the_gateway() {
    let sample =
        a2a_sample_agent::SampleAgent::start(a2a_sample_agent::AgentOptions::a2a("Sample"))
            .await
            .expect("sample agent starts");
    // Its card lists its three bindings, gRPC on its own listener.
    let own = Http::new(sample.base_url())
        .get(a2a_sample_agent::A2A_CARD_PATH)
        .await
        .json();
    let bindings: Vec<&str> = own["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter_map(|i| i["protocolBinding"].as_str())
        .collect();
    assert_eq!(bindings, ["JSONRPC", "HTTP+JSON", GRPC], "{own}");
    let direct = format!("{}{}", sample.base_url(), a2a_sample_agent::A2A_CARD_PATH);
    let mut via_grpc = a2a_agent("g", &sample.base_url());
    via_grpc.binding = Some(Binding::Grpc);
    let (_gw, http) = gateway(vec![via_grpc], |_| {}).await;
    let agents = http.get("/agents").await.json();
    assert!(
        agents.to_string().contains("\"binding\":\"GRPC\""),
        "{agents}"
    );
    let card = card_url(&http, "g");
    // Its tasks complete at once: nothing to subscribe to while live.
    let scenarios: Vec<&str> = SCENARIOS
        .iter()
        .copied()
        .filter(|s| *s != "subscribe")
        .collect();
    let runs: Vec<Run<'_>> = vec![
        (
            Sdk::Python,
            direct.as_str(),
            GRPC,
            None,
            scenarios.as_slice(),
        ),
        (Sdk::Python, card.as_str(), GRPC, None, scenarios.as_slice()),
        (
            Sdk::Python,
            card.as_str(),
            JSONRPC,
            None,
            scenarios.as_slice(),
        ),
        (
            Sdk::Js,
            card.as_str(),
            HTTP_JSON,
            None,
            scenarios.as_slice(),
        ),
    ];
    let outs = tokio::task::block_in_place(|| run_clients(&runs));
    for (run, out) in runs.iter().zip(&outs) {
        check_scenarios(out, &scenarios, &format!("{:?} {} {}", run.0, run.1, run.2));
    }
    // The gateway called it over gRPC only.
    let grpc_calls = sample.request_count(a2a_sample_agent::Route::A2aGrpc);
    assert!(grpc_calls >= 3 * scenarios.len(), "{grpc_calls}");
    assert_eq!(sample.request_count(a2a_sample_agent::Route::A2aJsonRpc), 0);
}
