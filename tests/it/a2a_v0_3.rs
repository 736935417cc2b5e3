//! The fleet as it is: A2A 0.3 clients and agents (a2a-sdk 0.3.26, @a2a-js/sdk 0.3.14) beside
//! 1.0's (a2a-sdk 1.3.0, @a2a-js/sdk 1.3.0, our sample agent), through the gateway, each pair
//! giving what the same client gets direct from an agent of its own version, in its own words.

use std::sync::{Arc, Mutex};

use hyper::Method;
use serde_json::{json, Value};

use crate::a2a_gateway::{a2a_agent, card_url, gateway};
use crate::support::a2a_calls::{raw, two_clients, ALICE, BOB};
use crate::support::a2a_script::{Answer, ScriptedAgent};
use crate::support::a2a_sdk::{run_clients, Run, Sdk, SdkAgent, HTTP_JSON, JSONRPC};
use crate::support::a2a_v0_3::{comparable, run_client03, Agent03, Receiver03, Sdk03};

/// What the 0.3 drivers run against every agent.
const SCENARIOS_03: &[&str] = &[
    "send-hello",
    "get",
    "get-missing",
    "cancel",
    "multi-turn",
    "fail",
    "message",
    "stream",
    "subscribe",
];

/// What the 1.3 drivers run against the 0.3 agents.
const SCENARIOS_13: &[&str] = &[
    "send-hello",
    "get",
    "get-missing",
    "cancel",
    "cancel-final",
    "multi-turn",
    "fail",
    "reject",
    "message",
    "stream",
    "subscribe",
];

/// The four 0.3 agents: both SDKs, both bindings.
fn agents_03() -> Vec<(&'static str, Agent03)> {
    vec![
        ("py03rpc", Agent03::start(Sdk03::Python, JSONRPC, &[])),
        ("py03rest", Agent03::start(Sdk03::Python, HTTP_JSON, &[])),
        ("js03rpc", Agent03::start(Sdk03::Js, JSONRPC, &[])),
        ("js03rest", Agent03::start(Sdk03::Js, HTTP_JSON, &[])),
    ]
}

/// Waits (at most `secs` seconds) until `receiver` holds a completed delivery of every task of
/// `ids`, each delivery one a2a-sdk 0.3 read, with `token`: every request it received.
async fn completed_03(receiver: &Receiver03, ids: &[String], token: &str, secs: u64) -> Vec<Value> {
    let done = || async {
        let got = receiver.requests();
        ids.iter().all(|id| {
            got.iter().any(|r| {
                r["body"]["id"] == id.as_str() && r["body"]["status"]["state"] == "completed"
            })
        })
    };
    let reached = crate::support::within(std::time::Duration::from_secs(secs), done).await;
    let got = receiver.requests();
    assert!(
        reached,
        "no completed delivery of every task of {ids:?}: {got:?}"
    );
    for r in &got {
        assert_eq!(r["ok"], true, "a2a-sdk 0.3 reads every delivery: {r}");
        assert_eq!(r["body"]["kind"], "task", "{r}");
        assert_eq!(r["headers"]["x-a2a-notification-token"], token, "{r}");
    }
    got
}

/// Runs `jobs` (each a closure running one client) a few at a time, in order.
fn in_parallel<T: Send>(jobs: Vec<Box<dyn FnOnce() -> T + Send + '_>>) -> Vec<T> {
    let mut out = Vec::new();
    let mut jobs = jobs.into_iter().peekable();
    while jobs.peek().is_some() {
        let batch: Vec<_> = jobs.by_ref().take(4).collect();
        out.extend(std::thread::scope(|s| {
            let handles: Vec<_> = batch.into_iter().map(|j| s.spawn(j)).collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("client thread"))
                .collect::<Vec<_>>()
        }));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn zero_three_clients_get_through_the_gateway_what_they_get_from_their_own_agents() {
    let olds = agents_03();
    let new = SdkAgent::start(JSONRPC);
    let new_rest = SdkAgent::start(HTTP_JSON);
    let sample =
        a2a_sample_agent::SampleAgent::start(a2a_sample_agent::AgentOptions::a2a("Sample"))
            .await
            .expect("sample agent starts");
    let sample03 =
        a2a_sample_agent::SampleAgent::start(a2a_sample_agent::AgentOptions::a2a_v0_3("Old"))
            .await
            .expect("sample agent starts");
    let mut entries: Vec<_> = olds.iter().map(|(n, a)| a2a_agent(n, &a.base)).collect();
    entries.push(a2a_agent("py13", &new.base));
    entries.push(a2a_agent("py13rest", &new_rest.base));
    let mut sample_rest = a2a_agent("samplerest", &sample.base_url());
    sample_rest.binding = Some(a2a_gateway::config::Binding::HttpJson);
    entries.push(a2a_agent("sample", &sample.base_url()));
    entries.push(sample_rest);
    entries.push(a2a_agent("sample03", &sample03.base_url()));
    let (_gw, http) = gateway(entries, |cfg| {
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
    })
    .await;
    let direct = |sdk: Sdk03, binding: &str| -> String {
        let name = match (sdk, binding) {
            (Sdk03::Python, JSONRPC) => "py03rpc",
            (Sdk03::Python, _) => "py03rest",
            (Sdk03::Js, JSONRPC) => "js03rpc",
            (Sdk03::Js, _) => "js03rest",
        };
        olds.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, a)| a.card_url.clone())
            .expect("an agent")
    };
    let clients = [
        (Sdk03::Python, JSONRPC),
        (Sdk03::Python, HTTP_JSON),
        (Sdk03::Js, JSONRPC),
        (Sdk03::Js, HTTP_JSON),
    ];
    let names = [
        "py03rpc",
        "py03rest",
        "js03rpc",
        "js03rest",
        "py13",
        "py13rest",
        "sample",
        "samplerest",
        "sample03",
    ];
    // Every pair through the gateway also sends a message with a push config: the receiver
    // reads what the gateway delivers with a2a-sdk 0.3's own types.
    let receiver = Receiver03::start();
    let push_args = [
        "--push-url",
        receiver.url.as_str(),
        "--push-token",
        "tok-pair",
    ];
    let mut with_push = SCENARIOS_03.to_vec();
    with_push.push("send-push");
    let mut jobs: Vec<Box<dyn FnOnce() -> (String, Value) + Send + '_>> = Vec::new();
    for (sdk, binding) in clients {
        let url = direct(sdk, binding);
        jobs.push(Box::new(move || {
            let out = run_client03(sdk, &url, binding, &[], SCENARIOS_03);
            (format!("{sdk:?} {binding} direct"), out)
        }));
        for name in names {
            let url = card_url(&http, name);
            let (push_args, with_push) = (&push_args, &with_push);
            jobs.push(Box::new(move || {
                let out = run_client03(sdk, &url, binding, push_args, with_push);
                (format!("{sdk:?} {binding} {name}"), out)
            }));
        }
    }
    let outs = tokio::task::block_in_place(|| in_parallel(jobs));
    let by = |key: &str| -> &Value {
        &outs
            .iter()
            .find(|(k, _)| k == key)
            .unwrap_or_else(|| panic!("no run {key}"))
            .1
    };
    for (sdk, binding) in clients {
        let own = by(&format!("{sdk:?} {binding} direct"));
        for s in SCENARIOS_03 {
            assert!(
                own["scenarios"][s].get("result").is_some(),
                "{sdk:?} {binding} direct {s}: {own}"
            );
        }
        for name in names {
            let key = format!("{sdk:?} {binding} {name}");
            let got = by(&key);
            for s in SCENARIOS_03 {
                if *s == "subscribe" {
                    // The SDKs' own resubscription can end before the last event when direct
                    // (a2a-sdk 0.3's REST pair was seen to): compared by what the client then
                    // reads, and the gateway's stream held to its end, the final status.
                    let (got, own) = (
                        &got["scenarios"][s]["result"],
                        &own["scenarios"][s]["result"],
                    );
                    assert_eq!(got["then"], own["then"], "{key} {s}: {got}");
                    assert_eq!(got["count_at_least_2"], true, "{key} {s}: {got}");
                    assert_eq!(
                        got["last"],
                        json!([{"kind": "status", "state": "completed", "final": true}]),
                        "{key} {s}: {got}"
                    );
                    continue;
                }
                assert_eq!(
                    comparable(&got["scenarios"][s]),
                    comparable(&own["scenarios"][s]),
                    "{key} {s}: {got}"
                );
            }
        }
    }
    // Each pair's push config heard the task to its end, in 0.3.
    let pushed: Vec<(String, String)> = outs
        .iter()
        .filter(|(k, _)| !k.ends_with("direct"))
        .map(|(k, out)| {
            let id = out["scenarios"]["send-push"]["result"]["task_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{k}: {out}"))
                .to_owned();
            (k.clone(), id)
        })
        .collect();
    let ids: Vec<String> = pushed.into_iter().map(|(_, id)| id).collect();
    completed_03(&receiver, &ids, "tok-pair", 30).await;
    // Counted by the client's version, under the 1.0 method names.
    let sends = http
        .metric(
            "a2a_gateway_a2a_requests_total",
            &[
                ("agent", "py13"),
                ("method", "SendMessage"),
                ("version", "0.3"),
                ("outcome", "ok"),
            ],
        )
        .await;
    assert!(sends >= 4.0 * 6.0, "{sends}");
    // `/agents` says which version the gateway speaks to each.
    let listed = http.get("/agents").await.json();
    for a in listed["agents"].as_array().expect("agents") {
        let want = if matches!(
            a["name"].as_str(),
            Some("py13" | "py13rest" | "sample" | "samplerest")
        ) {
            "1.0"
        } else {
            "0.3"
        };
        assert_eq!(a["a2a_version"], want, "{a}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_three_clients_reach_zero_three_agents_as_they_reach_one_zero_agents() {
    let olds = agents_03();
    let rpc = SdkAgent::start(JSONRPC);
    let rest = SdkAgent::start(HTTP_JSON);
    let entries: Vec<_> = olds.iter().map(|(n, a)| a2a_agent(n, &a.base)).collect();
    let (_gw, http) = gateway(entries, |cfg| {
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
    })
    .await;
    let cards: Vec<String> = olds.iter().map(|(n, _)| card_url(&http, n)).collect();
    let mut runs: Vec<Run<'_>> = Vec::new();
    for sdk in [Sdk::Python, Sdk::Js] {
        runs.push((sdk, &rpc.card_url, JSONRPC, None, SCENARIOS_13));
        runs.push((sdk, &rest.card_url, HTTP_JSON, None, SCENARIOS_13));
        for card in &cards {
            for binding in [JSONRPC, HTTP_JSON] {
                runs.push((sdk, card, binding, None, SCENARIOS_13));
            }
        }
    }
    let outs = tokio::task::block_in_place(|| run_clients(&runs));
    let per_sdk = 2 + 2 * cards.len();
    for (i, sdk) in [Sdk::Python, Sdk::Js].into_iter().enumerate() {
        let mine = &outs[i * per_sdk..(i + 1) * per_sdk];
        let direct = [(JSONRPC, &mine[0]), (HTTP_JSON, &mine[1])];
        for (j, out) in mine[2..].iter().enumerate() {
            let binding = if j % 2 == 0 { JSONRPC } else { HTTP_JSON };
            let own = direct
                .iter()
                .find(|(b, _)| *b == binding)
                .map(|(_, o)| *o)
                .expect("direct");
            for s in SCENARIOS_13 {
                assert_eq!(
                    crate::a2a_sdk::comparable(&out["scenarios"][s]["result"]),
                    crate::a2a_sdk::comparable(&own["scenarios"][s]["result"]),
                    "{sdk:?} {binding} via {}: {s}: {out}",
                    cards[j / 2]
                );
            }
        }
    }
    // Each pair's push config (made by the 1.3 client, so delivered in 1.0) heard the task to
    // its end, read by a2a-sdk 1.3's own StreamResponse.
    let receiver = crate::support::a2a_sdk::SdkReceiver::start();
    let push_args = [
        "--text",
        "hello slowly",
        "--push-url",
        receiver.url.as_str(),
        "--push-token",
        "tok-13",
    ];
    let mut jobs: Vec<Box<dyn FnOnce() -> Value + Send + '_>> = Vec::new();
    for sdk in [Sdk::Python, Sdk::Js] {
        for card in &cards {
            for binding in [JSONRPC, HTTP_JSON] {
                let push_args = &push_args;
                jobs.push(Box::new(move || {
                    crate::support::a2a_sdk::run_client_with(
                        sdk,
                        card,
                        binding,
                        None,
                        push_args,
                        &["send-push"],
                    )
                }));
            }
        }
    }
    let sent = tokio::task::block_in_place(|| in_parallel(jobs));
    let ids: Vec<String> = sent
        .iter()
        .map(|out| {
            out["result"]["task_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{out}"))
                .to_owned()
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let got = receiver.deliveries();
        let missing: Vec<&String> = ids
            .iter()
            .filter(|id| {
                !got.iter().any(|d| {
                    d["task"]["id"] == id.as_str()
                        && d["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
                })
            })
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no completed delivery for {missing:?}: {:?}",
            receiver.requests()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A message posted to `path` with `headers`, for the version checks.
async fn post(
    http: &crate::support::Http,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, Value) {
    let (status, _, v) = raw(http, Method::POST, path, headers, &body.to_string()).await;
    (status, v)
}

#[tokio::test(flavor = "multi_thread")]
async fn versions_choose_the_form_and_each_refuses_the_others_methods() {
    let (_, old) = agents_03().remove(0);
    let (_gw, http) = gateway(vec![a2a_agent("old", &old.base)], two_clients).await;
    let alice = format!("Bearer {ALICE}");
    let send_03 = json!({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {
        "message": {"kind": "message", "messageId": "m-1", "role": "user",
            "parts": [{"kind": "text", "text": "hello"}]}}});
    // No A2A-Version is 0.3 (§3.6), and `jsonrpc/` is the endpoint.
    for (n, path) in ["/agents/old/jsonrpc", "/agents/old/jsonrpc/"]
        .into_iter()
        .enumerate()
    {
        let mut send = send_03.clone();
        send["params"]["message"]["messageId"] = json!(format!("m-{n}"));
        let (status, v) = post(
            &http,
            path,
            &[
                ("content-type", "application/json"),
                ("authorization", &alice),
            ],
            &send,
        )
        .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"]["kind"], "task", "{v}");
        assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    }
    // A message is answered once whatever version it is retried in: the 1.0 retry of `m-0`
    // gets the task its 0.3 try made.
    let (_, first) = post(
        &http,
        "/agents/old/jsonrpc",
        &[
            ("content-type", "application/json"),
            ("authorization", &alice),
        ],
        &{
            let mut send = send_03.clone();
            send["params"]["message"]["messageId"] = json!("m-0");
            send
        },
    )
    .await;
    let (_, retried) = post(
        &http,
        "/agents/old/jsonrpc",
        &[
            ("content-type", "application/json"),
            ("a2a-version", "1.0"),
            ("authorization", &alice),
        ],
        &json!({"jsonrpc": "2.0", "id": 9, "method": "SendMessage", "params": {"message": {
            "messageId": "m-0", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}),
    )
    .await;
    assert_eq!(
        retried["result"]["task"]["id"], first["result"]["id"],
        "{first} {retried}"
    );
    // A 0.3 method with 1.0, and a 1.0 method without: VersionNotSupported, each in its form.
    let (_, v) = post(
        &http,
        "/agents/old/jsonrpc",
        &[
            ("content-type", "application/json"),
            ("a2a-version", "1.0"),
            ("authorization", &alice),
        ],
        &send_03,
    )
    .await;
    assert_eq!(v["error"]["code"], -32009, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED",
        "{v}"
    );
    let send_10 = json!({"jsonrpc": "2.0", "id": 8, "method": "SendMessage", "params": {}});
    for version in [None, Some(""), Some("0.3")] {
        let mut h = vec![
            ("content-type", "application/json"),
            ("authorization", alice.as_str()),
        ];
        if let Some(v) = version {
            h.push(("a2a-version", v));
        }
        let (_, v) = post(&http, "/agents/old/jsonrpc", &h, &send_10).await;
        assert_eq!(v["error"]["code"], -32009, "{version:?}: {v}");
        assert!(
            v["error"]["data"].is_null() || v["error"]["data"].is_object(),
            "0.3's shape: {v}"
        );
    }
    // The fleet's endpoint is 1.0 only (0.3 has no tenant).
    let (_, v) = post(
        &http,
        "/a2a",
        &[
            ("content-type", "application/json"),
            ("a2a-version", "1.0"),
            ("authorization", &alice),
        ],
        &send_03,
    )
    .await;
    assert_eq!(v["error"]["code"], -32009, "{v}");
    // The gateway's own errors in 0.3: -32000, the reason first, and `data` an object.
    let (status, v) = post(
        &http,
        "/agents/old/jsonrpc",
        &[("content-type", "application/json")],
        &send_03,
    )
    .await;
    assert_eq!(status, 401, "{v}");
    assert_eq!(v["error"]["code"], -32000, "{v}");
    assert_eq!(v["error"]["data"]["reason"], "UNAUTHORIZED", "{v}");
    assert_eq!(v["error"]["data"]["domain"], "a2a-gateway", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("UNAUTHORIZED")),
        "{v}"
    );
    let (status, _, v) = raw(
        &http,
        Method::GET,
        "/agents/old/v1/tasks/nope",
        &[("authorization", alice.as_str())],
        "",
    )
    .await;
    assert_eq!((status, v["code"].clone()), (404, json!(-32001)), "{v}");
    // 0.3's REST listing, from the ledger, scoped to its caller.
    let (status, _, mine) = raw(
        &http,
        Method::GET,
        "/agents/old/v1/tasks?pageSize=10",
        &[("authorization", alice.as_str())],
        "",
    )
    .await;
    assert_eq!(status, 200, "{mine}");
    let tasks = mine["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 2, "{mine}");
    assert_eq!(
        tasks[0]["status"]["state"], "TASK_STATE_COMPLETED",
        "{mine}"
    );
    let bob = format!("Bearer {BOB}");
    let (_, _, theirs) = raw(
        &http,
        Method::GET,
        "/agents/old/v1/tasks",
        &[("authorization", bob.as_str())],
        "",
    )
    .await;
    assert_eq!(theirs["tasks"], json!([]), "{theirs}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_and_contexts_stay_their_owners_across_versions() {
    let (_, old) = agents_03().remove(0);
    let (_gw, http) = gateway(vec![a2a_agent("old", &old.base)], two_clients).await;
    let (alice, bob) = (format!("Bearer {ALICE}"), format!("Bearer {BOB}"));
    // Bob makes a task in 1.0.
    let (_, made) = post(
        &http,
        "/agents/old/jsonrpc",
        &[
            ("content-type", "application/json"),
            ("a2a-version", "1.0"),
            ("authorization", &bob),
        ],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "b-1", "role": "ROLE_USER", "parts": [{"text": "need input"}]}}}),
    )
    .await;
    let task = made["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    let context = made["result"]["task"]["contextId"]
        .as_str()
        .expect("a context")
        .to_owned();
    let rpc03 = |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
    let h03 = [
        ("content-type", "application/json"),
        ("authorization", alice.as_str()),
    ];
    // Alice, in 0.3, cannot read it, continue it, or join its context: as for a task no one
    // made, word for word (the id aside).
    let (_, theirs) = post(
        &http,
        "/agents/old/jsonrpc",
        &h03,
        &rpc03("tasks/get", json!({"id": task})),
    )
    .await;
    let (_, none) = post(
        &http,
        "/agents/old/jsonrpc",
        &h03,
        &rpc03("tasks/get", json!({"id": "no-such"})),
    )
    .await;
    assert_eq!(theirs["error"]["code"], -32001, "{theirs}");
    assert_eq!(
        theirs["error"]["message"]
            .as_str()
            .map(|m| m.replace(&task, "ID")),
        none["error"]["message"]
            .as_str()
            .map(|m| m.replace("no-such", "ID")),
    );
    let (_, cont) = post(
        &http,
        "/agents/old/jsonrpc",
        &h03,
        &rpc03(
            "message/send",
            json!({"message": {"kind": "message", "messageId": "a-1",
            "role": "user", "taskId": task, "contextId": context,
            "parts": [{"kind": "text", "text": "blue"}]}}),
        ),
    )
    .await;
    assert!(cont["error"].is_object(), "{cont}");
    // Alice makes one in 0.3; Bob, in 1.0, cannot read it either.
    let (_, mine) = post(
        &http,
        "/agents/old/jsonrpc",
        &h03,
        &rpc03(
            "message/send",
            json!({"message": {"kind": "message", "messageId": "a-2",
            "role": "user", "parts": [{"kind": "text", "text": "hello"}]}}),
        ),
    )
    .await;
    let id = mine["result"]["id"].as_str().expect("a task").to_owned();
    let (_, got) = post(
        &http,
        "/agents/old/jsonrpc",
        &[
            ("content-type", "application/json"),
            ("a2a-version", "1.0"),
            ("authorization", &bob),
        ],
        &json!({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": id}}),
    )
    .await;
    assert_eq!(got["error"]["code"], -32001, "{got}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zero_three_clients_push_config_gets_the_bare_task_it_reads() {
    let new = SdkAgent::start(JSONRPC);
    let receiver = Receiver03::start();
    let (_gw, http) = gateway(vec![a2a_agent("new", &new.base)], |cfg| {
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
    })
    .await;
    let url = card_url(&http, "new");
    let sent = tokio::task::block_in_place(|| {
        run_client03(
            Sdk03::Python,
            &url,
            JSONRPC,
            &["--push-url", &receiver.url, "--push-token", "tok-03"],
            &["send-push"],
        )
    });
    let result = &sent["scenarios"]["send-push"]["result"];
    assert!(result["task_id"].is_string(), "{sent}");
    let id = result["task_id"].as_str().unwrap_or_default().to_owned();
    let got = completed_03(&receiver, std::slice::from_ref(&id), "tok-03", 20).await;
    assert!(
        got.iter().all(|r| r["body"]["id"] == id.as_str()),
        "{got:?}"
    );
}

/// A 1.0 SendMessage to `agent` through the gateway: it must answer a completed task.
async fn completes_in_1_0(http: &crate::support::Http, agent: &str) {
    let (status, sent) = post(
        http,
        &format!("/agents/{agent}/jsonrpc"),
        &[("content-type", "application/json"), ("a2a-version", "1.0")],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}),
    )
    .await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
}

/// A 0.3 agent scripted by 0.3 method name: its card is 0.3's, its answers a2a.json's.
async fn scripted_03(
    card: impl FnOnce(&str) -> Value,
    seen: Arc<Mutex<Vec<String>>>,
) -> ScriptedAgent {
    let agent = ScriptedAgent::start(Arc::new(move |method, params| {
        seen.lock().expect("lock").push(method.to_owned());
        let state = if params["message"]["taskId"].is_string() {
            "working"
        } else {
            "completed"
        };
        Answer::Result(json!({"kind": "task", "id": "t-1", "contextId": "c-1",
            "status": {"state": state},
            "artifacts": [{"artifactId": "a", "parts": [{"kind": "text", "text": "done"}]}]}))
    }))
    .await;
    agent.set_card(card(&format!("{}/rpc", agent.base)));
    agent
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zero_three_agent_reopening_a_completed_task_is_refused_and_counted() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = scripted_03(
        |url| {
            json!({"name": "old", "description": "d", "version": "1", "protocolVersion": "0.3.0",
                "url": url, "preferredTransport": "JSONRPC", "capabilities": {},
                "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                "skills": [{"id": "s", "name": "s", "description": "s", "tags": []}]})
        },
        seen.clone(),
    )
    .await;
    let (_gw, http) = gateway(vec![a2a_agent("old", &agent.base)], |_| {}).await;
    let send = |extra: Value| {
        let mut m = json!({"kind": "message", "messageId": "m", "role": "user",
            "parts": [{"kind": "text", "text": "go"}]});
        if let Value::Object(e) = extra {
            for (k, v) in e {
                m[k] = v;
            }
        }
        json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": m}})
    };
    let h = [("content-type", "application/json")];
    let (_, first) = post(&http, "/agents/old/jsonrpc", &h, &send(json!({}))).await;
    assert_eq!(first["result"]["status"]["state"], "completed", "{first}");
    let (_, again) = post(
        &http,
        "/agents/old/jsonrpc",
        &h,
        &send(json!({"messageId": "m2", "taskId": "t-1"})),
    )
    .await;
    assert_eq!(again["result"]["status"]["state"], "completed", "{again}");
    let refused = http
        .metric(
            "a2a_gateway_transitions_refused_total",
            &[("agent", "old"), ("reason", "terminal")],
        )
        .await;
    assert_eq!(refused, 1.0);
    // The gateway spoke 0.3 to it.
    assert!(
        seen.lock()
            .expect("lock")
            .iter()
            .all(|m| m == "message/send"),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gemini_cli_agents_card_is_read_and_the_agent_called_in_0_3() {
    let out = std::process::Command::new("node")
        .arg(crate::support::child::repo(
            "tests/a2a/v0_3/gemini_card.mjs",
        ))
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "the card of @google/gemini-cli-a2a-server 0.25.2: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let card: Value = serde_json::from_slice(&out.stdout).expect("a card");
    assert_eq!(card["protocolVersion"], "0.3.0", "{card}");
    assert_eq!(card["name"], "Gemini SDLC Agent", "{card}");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = scripted_03(
        move |url| {
            let mut c = card;
            c["url"] = json!(url);
            c
        },
        seen.clone(),
    )
    .await;
    let (_gw, http) = gateway(vec![a2a_agent("gemini", &agent.base)], |_| {}).await;
    let listed = http.get("/agents").await.json();
    let entry = &listed["agents"][0];
    assert_eq!(entry["card_state"], "fresh", "{entry}");
    assert_eq!(entry["a2a_version"], "0.3", "{entry}");
    assert_eq!(entry["display_name"], "Gemini SDLC Agent", "{entry}");
    completes_in_1_0(&http, "gemini").await;
    assert_eq!(*seen.lock().expect("lock"), ["message/send"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zero_three_agent_that_pushes_is_heard_in_0_3_and_its_client_in_0_3_too() {
    // a2a-sdk 0.3's agent with its own push sender: the gateway gives it a config to itself and
    // reads its pushes (0.3's bare Task) through its form.
    let agent = Agent03::start(Sdk03::Python, JSONRPC, &["--push"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let mut old = a2a_agent("old", &agent.base);
    old.callback_url = Some(format!("http://127.0.0.1:{port}"));
    let receiver = Receiver03::start();
    let (_gw, http) = gateway(vec![old], |cfg| {
        cfg.listen = format!("127.0.0.1:{port}").parse().expect("addr");
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
    })
    .await;
    let url = card_url(&http, "old");
    let sent = tokio::task::block_in_place(|| {
        run_client03(
            Sdk03::Js,
            &url,
            HTTP_JSON,
            &["--push-url", &receiver.url, "--push-token", "tok-js03"],
            &["send-push"],
        )
    });
    let id = sent["scenarios"]["send-push"]["result"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned();
    let got = completed_03(&receiver, std::slice::from_ref(&id), "tok-js03", 20).await;
    assert!(
        got.iter().all(|r| r["body"]["id"] == id.as_str()),
        "{got:?}"
    );
    let heard = http
        .metric(
            "a2a_gateway_notifications_ingested_total",
            &[("agent", "old")],
        )
        .await;
    assert!(heard >= 1.0, "the agent's own pushes were read: {heard}");
    let refused = http
        .metric(
            "a2a_gateway_notifications_refused_total",
            &[("agent", "old"), ("reason", "invalid")],
        )
        .await;
    assert_eq!(refused, 0.0, "none of its pushes was refused");
}

#[tokio::test(flavor = "multi_thread")]
async fn google_adks_remote_agent_on_a2a_sdk_0_3_reaches_the_sample_agent_through_the_gateway() {
    let sample =
        a2a_sample_agent::SampleAgent::start(a2a_sample_agent::AgentOptions::a2a("Sample"))
            .await
            .expect("sample agent starts");
    let direct = format!("{}{}", sample.base_url(), a2a_sample_agent::A2A_CARD_PATH);
    let (_gw, http) = gateway(vec![a2a_agent("sample", &sample.base_url())], |_| {}).await;
    let via = card_url(&http, "sample");
    let (through, alone) = tokio::task::block_in_place(|| {
        (
            crate::support::a2a_v0_3::run_adk03(&via, "hello"),
            crate::support::a2a_v0_3::run_adk03(&direct, "hello"),
        )
    });
    assert_eq!(through["a2a_sdk"], "0.3.26", "{through}");
    assert_eq!(through["texts"], json!(["Hello, world!"]), "{through}");
    assert!(through.get("error").is_none(), "{through}");
    // Without the gateway it cannot: a2a-sdk 0.3 does not read the sample agent's 1.0 card.
    assert!(
        alone["error"].as_str().is_some_and(|e| e.contains("url")),
        "{alone}"
    );
    let sends = http
        .metric(
            "a2a_gateway_a2a_requests_total",
            &[("agent", "sample"), ("version", "0.3"), ("outcome", "ok")],
        )
        .await;
    assert!(sends >= 1.0, "{sends}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sample_agent_pushes_in_both_versions() {
    let sample =
        a2a_sample_agent::SampleAgent::start(a2a_sample_agent::AgentOptions::a2a("Sample"))
            .await
            .expect("sample agent starts");
    let sample03 =
        a2a_sample_agent::SampleAgent::start(a2a_sample_agent::AgentOptions::a2a_v0_3("Old"))
            .await
            .expect("sample agent starts");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let callback = format!("http://127.0.0.1:{port}");
    let mut new = a2a_agent("new", &sample.base_url());
    new.callback_url = Some(callback.clone());
    let mut old = a2a_agent("old", &sample03.base_url());
    old.callback_url = Some(callback);
    let receiver = Receiver03::start();
    let (_gw, http) = gateway(vec![new, old], |cfg| {
        cfg.listen = format!("127.0.0.1:{port}").parse().expect("addr");
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
    })
    .await;
    let mut ids = Vec::new();
    for name in ["new", "old"] {
        let url = card_url(&http, name);
        let sent = tokio::task::block_in_place(|| {
            run_client03(
                Sdk03::Python,
                &url,
                JSONRPC,
                &["--push-url", &receiver.url, "--push-token", "tok"],
                &["send-push"],
            )
        });
        ids.push(
            sent["scenarios"]["send-push"]["result"]["task_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{sent}"))
                .to_owned(),
        );
    }
    completed_03(&receiver, &ids, "tok", 20).await;
    // Each sample agent pushed its tasks to the gateway itself, in its own version.
    for name in ["new", "old"] {
        let heard = http
            .metric(
                "a2a_gateway_notifications_ingested_total",
                &[("agent", name)],
            )
            .await;
        assert!(heard >= 1.0, "{name}: {heard}");
        let refused = http
            .metric(
                "a2a_gateway_notifications_refused_total",
                &[("agent", name), ("reason", "invalid")],
            )
            .await;
        assert_eq!(refused, 0.0, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_1_0_card_without_protocol_version_is_used_at_1_0_with_a_warning() {
    let agent = ScriptedAgent::start(Arc::new(|_, _| {
        Answer::Result(
            json!({"task": crate::support::a2a_script::task("t-1", "c", "TASK_STATE_COMPLETED")}),
        )
    }))
    .await;
    let mut card = crate::support::a2a_script::card(&format!("{}/rpc", agent.base));
    card["supportedInterfaces"][0]
        .as_object_mut()
        .map(|i| i.remove("protocolVersion"));
    agent.set_card(card);
    let (_gw, http) = gateway(vec![a2a_agent("loose", &agent.base)], |_| {}).await;
    let listed = http.get("/agents").await.json();
    let entry = &listed["agents"][0];
    assert_eq!(entry["card_state"], "fresh", "{entry}");
    assert_eq!(entry["a2a_version"], "1.0", "{entry}");
    assert_eq!(
        entry["card_warnings"],
        json!(["missing_protocol_version"]),
        "{entry}"
    );
    completes_in_1_0(&http, "loose").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a2a_version_chooses_the_version_and_a_reload_of_it_keeps_the_agent_and_its_tasks() {
    // One agent speaking both versions at one URL, as a2a-sdk 1.3's compatibility layer serves.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = {
        let seen = seen.clone();
        ScriptedAgent::start(Arc::new(move |method, params| {
            seen.lock().expect("lock").push(method.to_owned());
            let id = if params["message"]["messageId"] == "m-2" { "t-2" } else { "t-1" };
            match method {
                "message/send" => Answer::Result(json!({"kind": "task", "id": id, "contextId": "c",
                    "status": {"state": "completed"}})),
                _ => Answer::Result(json!({"task": crate::support::a2a_script::task(id, "c", "TASK_STATE_COMPLETED")})),
            }
        }))
        .await
    };
    let mut card = crate::support::a2a_script::card(&format!("{}/rpc", agent.base));
    card["supportedInterfaces"] = json!([
        {"url": format!("{}/rpc", agent.base), "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        {"url": format!("{}/rpc", agent.base), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    ]);
    agent.set_card(card);
    let (gw, http) = gateway(vec![a2a_agent("both", &agent.base)], |_| {}).await;
    let listed = http.get("/agents").await.json();
    assert_eq!(
        listed["agents"][0]["a2a_version"], "1.0",
        "the newest: {listed}"
    );
    let send = |mid: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": mid, "role": "ROLE_USER", "parts": [{"text": "go"}]}}})
    };
    let h = [("content-type", "application/json"), ("a2a-version", "1.0")];
    let (_, first) = post(&http, "/agents/both/jsonrpc", &h, &send("m-1")).await;
    assert_eq!(first["result"]["task"]["id"], "t-1", "{first}");
    let mut next = gw.config().as_ref().clone();
    next.agents[0].a2a_version = Some(a2a_gateway::config::A2aVersion::V0_3);
    gw.reload(next).await.expect("applied");
    crate::support::wait_for("the card compiled for 0.3", || async {
        http.get("/agents").await.json()["agents"][0]["a2a_version"] == "0.3"
    })
    .await;
    let (_, second) = post(&http, "/agents/both/jsonrpc", &h, &send("m-2")).await;
    assert_eq!(second["result"]["task"]["id"], "t-2", "{second}");
    // The task made before the reload is still the client's to read.
    let (_, kept) = post(
        &http,
        "/agents/both/jsonrpc",
        &h,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "t-1"}}),
    )
    .await;
    assert_eq!(kept["result"]["id"], "t-1", "{kept}");
    let methods = seen.lock().expect("lock").clone();
    assert_eq!(
        methods.first().map(String::as_str),
        Some("SendMessage"),
        "{methods:?}"
    );
    assert!(methods.iter().any(|m| m == "message/send"), "{methods:?}");
}
