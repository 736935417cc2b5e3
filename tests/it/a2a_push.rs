//! A2A push notifications kept and delivered by the gateway: the official SDK clients set
//! configs, a real receiver gets every change in order with the config's token and
//! Authorization; an a2a-sdk agent that pushes is given the gateway's own config, one that does
//! not is polled; URLs are guarded, configs are the task owner's, secrets stay secret; a
//! receiver down for 30 s misses nothing, and neither does a kill -9 with 1,000 deliveries
//! queued on Redis.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use serde_json::{json, Value};

use a2a_gateway::config::{Config, Right};

use crate::a2a_gateway::{a2a_agent, card_url, gateway};
use crate::auth::client;
use crate::support::a2a_calls::{error_code, message, rest, rpc, two_clients, ALICE, BOB};
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::a2a_sdk::{run_client_with, Sdk, SdkAgent, HTTP_JSON, JSONRPC};
use crate::support::hook::{Hook, Received};
use crate::support::process::GwProc;
use crate::support::redis_server::RedisServer;
use crate::support::wait_for_within;

const ADMIN: &str = "admin-key-0123456789abcdef0";

/// A free port on loopback (bound, then let go): the gateway's own address has to be known
/// before it starts, to be the `callback_url` an agent pushes to.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Alice, Bob and an admin; the receivers on loopback allowed.
fn clients_and_receivers(cfg: &mut Config) {
    two_clients(cfg);
    cfg.clients.push(client(
        "admin",
        ADMIN,
        &["*"],
        &[Right::Admin, Right::Metrics],
    ));
    cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
}

/// One delivery as a receiver reads it: the task it is about and the state it says.
fn change(d: &Received) -> (String, String) {
    let j = d.json();
    (
        j["task"]["id"]
            .as_str()
            .expect("a StreamResponse task")
            .to_owned(),
        j["task"]["status"]["state"]
            .as_str()
            .expect("state")
            .to_owned(),
    )
}

/// The states each push config (told by its token) received, in arrival order, a redelivery
/// of the same `webhook-id` counted once.
fn by_token(hook: &Hook) -> HashMap<String, Vec<String>> {
    told_by_token(hook, |d| change(d).1)
}

/// What each push config received, as [`by_token`], each delivery told as its state and, when
/// its task has artifacts, ` +` and their texts (an artifact is news of its own: it is
/// delivered when it comes, in the state the task is in).
fn said_by_token(hook: &Hook) -> HashMap<String, Vec<String>> {
    told_by_token(hook, |d| {
        let texts: Vec<String> = d.json()["task"]["artifacts"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p["text"].as_str().map(str::to_owned))
            .collect();
        match texts.is_empty() {
            true => change(d).1,
            false => format!("{} +{}", change(d).1, texts.join(",")),
        }
    })
}

fn told_by_token(hook: &Hook, told: impl Fn(&Received) -> String) -> HashMap<String, Vec<String>> {
    let mut seen = HashSet::new();
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for d in hook.received() {
        let token = d
            .header("x-a2a-notification-token")
            .unwrap_or("")
            .to_owned();
        if seen.insert((token.clone(), d.msg_id())) {
            out.entry(token).or_default().push(told(&d));
        }
    }
    out
}

fn sdk(sdk: Sdk, card: &str, binding: &str, token: &str, extra: &[&str], scenario: &str) -> Value {
    tokio::task::block_in_place(|| {
        run_client_with(sdk, card, binding, Some(token), extra, &[scenario])
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_clients_keep_configs_at_the_gateway_and_a_receiver_gets_every_change_in_order() {
    // An a2a-sdk agent that pushes: the gateway gives it one config per task, to itself.
    let agent = SdkAgent::start_args(JSONRPC, &["--push"]);
    let port = free_port();
    let mut echo = a2a_agent("echo", &agent.base);
    echo.callback_url = Some(format!("http://127.0.0.1:{port}"));
    let (_gw, http) = gateway(vec![echo], |cfg| {
        cfg.listen = format!("127.0.0.1:{port}").parse().expect("addr");
        clients_and_receivers(cfg);
    })
    .await;
    let hook = Hook::start().await;
    let card = card_url(&http, "echo");
    let url = hook.url();
    // a2a-sdk: a message with an inline config (no id: the task's), waiting for input.
    let sent = sdk(
        Sdk::Python,
        &card,
        JSONRPC,
        ALICE,
        &[
            "--text",
            "need input",
            "--push-url",
            &url,
            "--push-token",
            "tok-py",
            "--push-auth",
            "Bearer cred-py",
        ],
        "send-push",
    );
    let id = sent["result"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned();
    wait_for_within(
        "the task waits for input",
        Duration::from_secs(10),
        || async {
            let v = rpc(&http, "echo", Some(ALICE), "GetTask", json!({"id": id})).await;
            v["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        },
    )
    .await;
    // @a2a-js/sdk over HTTP+JSON: a second config, with its own id, token and credentials.
    let set = sdk(
        Sdk::Js,
        &card,
        HTTP_JSON,
        ALICE,
        &[
            "--task",
            &id,
            "--push-id",
            "js",
            "--push-url",
            &url,
            "--push-token",
            "tok-js",
            "--push-auth",
            "Basic cred-js",
        ],
        "push-set",
    );
    assert_eq!(
        set["result"],
        json!({"id": "js", "taskId": id, "url": url, "token": "tok-js", "authentication": {"scheme": "Basic"}}),
        "credentials are never served back: {set}"
    );
    let listed = sdk(
        Sdk::Python,
        &card,
        HTTP_JSON,
        ALICE,
        &["--task", &id],
        "push-list",
    );
    let ids: BTreeMap<String, Value> = listed["result"]["configs"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|c| (c["id"].as_str().unwrap_or("").to_owned(), c.clone()))
        .collect();
    assert_eq!(
        ids.keys().collect::<Vec<_>>(),
        [&id, &"js".to_owned()],
        "{listed}"
    );
    assert_eq!(ids[&id]["token"], "tok-py", "{listed}");
    assert!(!listed.to_string().contains("cred-"), "{listed}");
    let got = sdk(
        Sdk::Js,
        &card,
        JSONRPC,
        ALICE,
        &["--task", &id, "--push-id", "js"],
        "push-get",
    );
    assert_eq!(got["result"]["url"], url.as_str(), "{got}");
    // Bob sees none of it, and cannot add, read or delete.
    let theirs = sdk(
        Sdk::Python,
        &card,
        JSONRPC,
        BOB,
        &["--task", &id],
        "push-list",
    );
    assert_eq!(theirs["error"]["type"], "TaskNotFoundError", "{theirs}");
    for (method, params) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": url}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "js"}),
        ),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": "js"}),
        ),
    ] {
        let v = rpc(&http, "echo", Some(BOB), method, params).await;
        assert_eq!(error_code(&v), -32001, "{method}: {v}");
    }
    // The task goes on: WORKING, an artifact, COMPLETED, pushed by the agent to the gateway.
    let done = rpc(
        &http,
        "echo",
        Some(ALICE),
        "SendMessage",
        message("the rest", json!({"taskId": id})),
    )
    .await;
    assert!(done.get("result").is_some(), "{done}");
    wait_for_within(
        "both configs hear of COMPLETED",
        Duration::from_secs(20),
        || async {
            let got = by_token(&hook);
            ["tok-py", "tok-js"].iter().all(|t| {
                got.get(*t).and_then(|s| s.last()).map(String::as_str)
                    == Some("TASK_STATE_COMPLETED")
            })
        },
    )
    .await;
    let got = said_by_token(&hook);
    // Every change after each config existed, in order, each once: the artifact when it came.
    assert_eq!(
        got["tok-js"],
        [
            "TASK_STATE_WORKING",
            "TASK_STATE_WORKING +got: the rest",
            "TASK_STATE_COMPLETED +got: the rest"
        ],
        "{got:?}"
    );
    let py = &got["tok-py"];
    assert_eq!(
        py[py.len() - 4..],
        [
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_WORKING",
            "TASK_STATE_WORKING +got: the rest",
            "TASK_STATE_COMPLETED +got: the rest"
        ],
        "{got:?}"
    );
    // The final Task carries the artifact the agent pushed before its last status.
    let last = hook
        .received()
        .into_iter()
        .rev()
        .find(|d| d.header("x-a2a-notification-token") == Some("tok-js"))
        .expect("a delivery");
    assert!(
        last.json()["task"]["artifacts"]
            .to_string()
            .contains("got: the rest"),
        "{}",
        last.json()
    );
    for d in hook.received() {
        assert_eq!(d.header("content-type"), Some("application/a2a+json"));
        assert!(d
            .header("webhook-id")
            .is_some_and(|i| i.starts_with("msg_")));
        assert!(d.header("webhook-timestamp").is_some());
        let want = match d.header("x-a2a-notification-token") {
            Some("tok-py") => "Bearer cred-py",
            Some("tok-js") => "Basic cred-js",
            other => panic!("a delivery with token {other:?}"),
        };
        assert_eq!(d.header("authorization"), Some(want));
        assert_eq!(change(&d).0, id);
    }
    // What the agent saw: the message without the client's config, and the gateway's one
    // config for the task, pointing at the gateway with a token of its own.
    let calls = agent.recorded();
    let text = serde_json::to_string(&calls).expect("json");
    assert!(
        !text.contains(&url) && !text.contains("tok-py") && !text.contains("tok-js"),
        "{text}"
    );
    let configs: Vec<&Value> = calls
        .iter()
        .filter(|c| c["body"]["method"] == "CreateTaskPushNotificationConfig")
        .collect();
    assert_eq!(configs.len(), 1, "one gateway config per task: {configs:?}");
    let params = &configs[0]["body"]["params"];
    assert_eq!(
        params["url"],
        format!("http://127.0.0.1:{port}/agents/echo/notifications?task={id}")
    );
    assert_eq!(
        (params["id"].as_str(), params["taskId"].as_str()),
        (Some("a2a-gateway"), Some(id.as_str()))
    );
    assert_eq!(params["token"].as_str().map(str::len), Some(64), "{params}");
    // The agent's pushes were taken with that token; a wrong one is refused.
    let r = http
        .send(
            Method::POST,
            "/agents/echo/notifications",
            &[
                ("content-type", "application/json"),
                ("x-a2a-notification-token", "wrong"),
            ],
            bytes::Bytes::from(json!({"task": task(&id, "c", "TASK_STATE_WORKING")}).to_string()),
        )
        .await;
    assert_eq!(r.status, 401, "{r:?}");
    // Deleted: gone from the list (the client's intent holds, even twice).
    for _ in 0..2 {
        let del = sdk(
            Sdk::Js,
            &card,
            JSONRPC,
            ALICE,
            &["--task", &id, "--push-id", "js"],
            "push-delete",
        );
        assert_eq!(del["result"], json!({"deleted": true}), "{del}");
    }
    let listed = rpc(
        &http,
        "echo",
        Some(ALICE),
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    )
    .await;
    assert_eq!(
        listed["result"]["configs"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    let scraped = http.get_as("/metrics", ADMIN).await;
    let delivered = crate::support::metric_value(
        &String::from_utf8_lossy(&scraped.body),
        "a2a_gateway_webhook_deliveries_total",
        &[
            ("subscriber", "a2a_push"),
            ("agent", "echo"),
            ("outcome", "delivered"),
        ],
    );
    assert!(delivered >= 5.0, "{delivered}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_streams_but_does_not_push_is_followed_on_its_stream() {
    // a2a-sdk's agent without --push: it streams, and takes no configs.
    let agent = SdkAgent::start(HTTP_JSON);
    let mut echo = a2a_agent("echo", &agent.base);
    // Long: a change learnt by polling would arrive late, so what arrives came by the stream.
    echo.poll_interval = Duration::from_secs(3600);
    let (_gw, http) = gateway(vec![echo], clients_and_receivers).await;
    let hook = Hook::start().await;
    let card = card_url(&http, "echo");
    let sent = sdk(
        Sdk::Js,
        &card,
        JSONRPC,
        ALICE,
        &[
            "--text",
            "hello slowly",
            "--push-url",
            &hook.url(),
            "--push-token",
            "tok-stream",
        ],
        "send-push",
    );
    let id = sent["result"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned();
    wait_for_within("COMPLETED delivered", Duration::from_secs(20), || async {
        by_token(&hook)
            .get("tok-stream")
            .and_then(|s| s.last())
            .map(String::as_str)
            == Some("TASK_STATE_COMPLETED")
    })
    .await;
    // Every change after the config, in order, each once: the stream saw WORKING.
    // The change that made the task (the inline config came with it), then every change
    // after, in order, each once: the stream saw WORKING.
    assert_eq!(
        said_by_token(&hook)["tok-stream"],
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_WORKING +Hello, world!",
            "TASK_STATE_COMPLETED +Hello, world!"
        ],
        "{:?}",
        said_by_token(&hook)
    );
    let calls = agent.recorded();
    let text = serde_json::to_string(&calls).expect("json");
    assert!(
        !text.contains("pushNotificationConfig")
            && !text.contains("tok-stream")
            && !text.contains(&hook.url()),
        "the inline config never reached the agent: {text}"
    );
    let subscribed = calls
        .iter()
        .filter(|c| {
            c["path"]
                .as_str()
                .is_some_and(|p| p.ends_with(&format!("{id}:subscribe")))
        })
        .count();
    assert_eq!(subscribed, 1, "one SubscribeToTask: {text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_neither_pushes_nor_streams_is_polled_until_the_task_is_final() {
    let (phase, agent, _gw, http) = polled(
        &["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
        Duration::from_millis(100),
        clients_and_receivers,
    )
    .await;
    let hook = Hook::start().await;
    let mut m = message("go", json!({}));
    m["configuration"] =
        json!({"taskPushNotificationConfig": {"url": hook.url(), "token": "tok-poll"}});
    let sent = rpc(&http, "e", Some(ALICE), "SendMessage", m).await;
    assert_eq!(sent["result"]["task"]["id"], "t-0", "{sent}");
    wait_for_within("WORKING delivered", Duration::from_secs(10), || async {
        by_token(&hook)
            .get("tok-poll")
            .is_some_and(|s| s.len() == 2)
    })
    .await;
    phase.store(1, Ordering::SeqCst);
    wait_for_within("COMPLETED delivered", Duration::from_secs(10), || async {
        by_token(&hook)
            .get("tok-poll")
            .is_some_and(|s| s.len() == 3)
    })
    .await;
    assert_eq!(
        by_token(&hook)["tok-poll"],
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ]
    );
    // The agent was asked with GetTask, never given a config; once final, no more polls.
    let methods = agent.methods();
    assert!(
        methods.iter().filter(|m| *m == "GetTask").count() >= 2,
        "{methods:?}"
    );
    assert!(
        methods.iter().all(|m| m == "SendMessage" || m == "GetTask"),
        "{methods:?}"
    );
    assert!(!serde_json::to_string(&agent.calls())
        .expect("json")
        .contains("tok-poll"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = agent.methods().len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(agent.methods().len(), after, "no poll of a final task");
}

/// A scripted agent `e` in `states` by its phase (see [`phased`]), polled every `poll` by a
/// gateway of Alice, Bob and an admin with `tweak`: the phase, the agent, the gateway, its
/// client.
async fn polled(
    states: &'static [&'static str],
    poll: Duration,
    tweak: impl FnOnce(&mut Config),
) -> (
    Arc<AtomicUsize>,
    ScriptedAgent,
    a2a_gateway::Gateway,
    crate::support::Http,
) {
    let phase = Arc::new(AtomicUsize::new(0));
    let agent = phased(phase.clone(), states).await;
    let mut e = a2a_agent("e", &agent.base);
    e.poll_interval = poll;
    let (gw, http) = gateway(vec![e], tweak).await;
    (phase, agent, gw, http)
}

/// A new task of agent `e`, sent as `token`: its id.
async fn new_task(http: &crate::support::Http, token: Option<&str>) -> String {
    let sent = rpc(http, "e", token, "SendMessage", message("go", json!({}))).await;
    sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned()
}

/// A new task of `token`'s with a push config to `url`, its WORKING (a `phased` agent's) then
/// learnt through the gateway by a GetTask: the change the config hears of.
async fn watched_working_task(http: &crate::support::Http, token: &str, url: &str) -> String {
    let id = new_task(http, Some(token)).await;
    let v = rpc(
        http,
        "e",
        Some(token),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": url}),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let got = rpc(http, "e", Some(token), "GetTask", json!({"id": id})).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_WORKING",
        "{got}"
    );
    id
}

/// A scripted agent whose every task is in the state `phase` says (a GetTask answers it), the
/// state timed now.
async fn phased(phase: Arc<AtomicUsize>, states: &'static [&'static str]) -> ScriptedAgent {
    let n = Arc::new(AtomicUsize::new(0));
    let script = Arc::new(move |method: &str, params: &Value| match method {
        "SendMessage" => {
            let id = format!("t-{}", n.fetch_add(1, Ordering::SeqCst));
            Answer::Result(json!({"task": task(&id, &format!("c-{id}"), "TASK_STATE_SUBMITTED")}))
        }
        "GetTask" => {
            let id = params["id"].as_str().unwrap_or("");
            let s = states[phase.load(Ordering::SeqCst).min(states.len() - 1)];
            Answer::Result(task(id, &format!("c-{id}"), s))
        }
        _ => Answer::Status(500, b"not scripted".to_vec()),
    });
    ScriptedAgent::start(script).await
}

#[tokio::test(flavor = "multi_thread")]
async fn guards_bounds_and_both_bindings_for_configs() {
    let phase = Arc::new(AtomicUsize::new(0));
    let agent = phased(phase.clone(), &["TASK_STATE_WORKING"]).await;
    let (_gw, http) = gateway(vec![a2a_agent("e", &agent.base)], |cfg| {
        clients_and_receivers(cfg);
        cfg.a2a.max_push_configs_per_task = 2;
    })
    .await;
    let id = new_task(&http, Some(ALICE)).await;
    // The webhook guard: a metadata address, a private one and a non-http URL are refused,
    // with the reason, and nothing is stored.
    for url in [
        "http://169.254.169.254/latest",
        "http://10.0.0.1/x",
        "http://[::1]:9/x",
        "ftp://127.0.0.1/x",
    ] {
        let v = rpc(
            &http,
            "e",
            Some(ALICE),
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": url}),
        )
        .await;
        assert_eq!(error_code(&v), -32602, "{url}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("url")),
            "{v}"
        );
    }
    // A port is 1 to 65535 (65536 read as none would deliver to port 80), over both
    // bindings and inline, with the reason; nothing is stored.
    for url in ["http://127.0.0.1:0/x", "http://127.0.0.1:65536/x"] {
        let v = rpc(
            &http,
            "e",
            Some(ALICE),
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": url}),
        )
        .await;
        assert_eq!(error_code(&v), -32602, "{url}: {v}");
        let m = v["error"]["message"].as_str().unwrap_or("");
        assert!(m.contains("url") && m.contains("1 to 65535"), "{url}: {v}");
        let r = rest(
            &http,
            Method::POST,
            &format!("/agents/e/tasks/{id}/pushNotificationConfigs"),
            Some(ALICE),
            Some(json!({"taskId": id, "url": url})),
        )
        .await;
        assert_eq!(r.status, 400, "{url}: {r:?}");
        let mut m = message("port", json!({}));
        m["configuration"] = json!({"taskPushNotificationConfig": {"url": url}});
        let v = rpc(&http, "e", Some(ALICE), "SendMessage", m).await;
        assert_eq!(error_code(&v), -32602, "{url}: {v}");
    }
    let listed = rpc(
        &http,
        "e",
        Some(ALICE),
        "ListTaskPushNotificationConfigs",
        json!({ "taskId": id }),
    )
    .await;
    assert_eq!(listed["result"]["configs"], json!([]), "{listed}");
    // An id of the store's own (`~`) is never a client's.
    let v = rpc(
        &http,
        "e",
        Some(ALICE),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "id": "~token", "url": "http://127.0.0.1:9/x"}),
    )
    .await;
    assert_eq!(error_code(&v), -32602, "{v}");
    // A name is checked by what it resolves to now, and what that is is not told (on a
    // gateway that allows no loopback address).
    let (_strict, strict) = gateway(vec![a2a_agent("e", &agent.base)], two_clients).await;
    let theirs = new_task(&strict, Some(ALICE)).await;
    let v = rpc(
        &strict,
        "e",
        Some(ALICE),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": theirs, "url": "http://localhost:9/x"}),
    )
    .await;
    assert_eq!(error_code(&v), -32602, "{v}");
    let m = v["error"]["message"].as_str().unwrap_or("");
    assert!(
        m.contains("localhost") && !m.contains("127.0.0.1") && !m.contains("::1"),
        "{v}"
    );
    // Over HTTP+JSON: created (201 or 200), listed, read, at most two per task.
    let base = format!("/agents/e/tasks/{id}/pushNotificationConfigs");
    for cid in ["a", "b"] {
        let r = rest(
            &http,
            Method::POST,
            &base,
            Some(ALICE),
            Some(json!({"taskId": id, "id": cid, "url": "http://127.0.0.1:9/x"})),
        )
        .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.json()["id"], cid);
    }
    let r = rest(
        &http,
        Method::POST,
        &base,
        Some(ALICE),
        Some(json!({"taskId": id, "id": "c", "url": "http://127.0.0.1:9/x"})),
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(
        r.json()["error"]["details"][0]["reason"],
        "INVALID_PARAMS",
        "{r:?}"
    );
    assert!(r.json()["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("max_push_configs_per_task")));
    // Replacing one of the same id is not a third.
    let r = rest(
        &http,
        Method::POST,
        &base,
        Some(ALICE),
        Some(json!({"taskId": id, "id": "b", "url": "http://127.0.0.1:8/y"})),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = rest(&http, Method::GET, &format!("{base}/b"), Some(ALICE), None).await;
    assert_eq!(r.json()["url"], "http://127.0.0.1:8/y", "{r:?}");
    let r = rest(&http, Method::GET, &base, Some(BOB), None).await;
    assert_eq!(r.status, 404, "{r:?}");
    let r = rest(
        &http,
        Method::DELETE,
        &format!("{base}/a"),
        Some(ALICE),
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    // At /a2a without a tenant, the caller's task is found by id.
    let v = rpc(
        &http,
        "",
        Some(ALICE),
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    )
    .await;
    let ids: Vec<&str> = v["result"]["configs"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["b"], "{v}");
    let v = rpc(
        &http,
        "",
        Some(BOB),
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    )
    .await;
    assert_eq!(error_code(&v), -32001, "{v}");
    // A config on a task the ledger never recorded: TaskNotFound, whatever the id.
    let v = rpc(
        &http,
        "e",
        Some(ALICE),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": "nope", "url": "http://127.0.0.1:9/x"}),
    )
    .await;
    assert_eq!(error_code(&v), -32001, "{v}");
    // None of this reached the agent.
    assert_eq!(
        agent.methods(),
        ["SendMessage", "SendMessage"],
        "{:?}",
        agent.methods()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_stay_out_of_metrics_dead_letters_the_fleet_page_and_answers() {
    let (phase, _agent, _gw, http) = polled(
        &["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
        Duration::from_millis(100),
        |cfg| {
            clients_and_receivers(cfg);
            cfg.webhooks.retry_schedule_secs = vec![1];
            cfg.webhooks.max_attempts = Some(1);
        },
    )
    .await;
    let hook = Hook::start().await;
    hook.set_status(500);
    let mut m = message("go", json!({}));
    // Not waiting for the task (a blocking message would be answered only once it is final).
    m["configuration"] = json!({"returnImmediately": true,
        "taskPushNotificationConfig": {"url": hook.url(), "token": "SECRET-TOKEN-7f3a",
        "authentication": {"scheme": "Bearer", "credentials": "SECRET-CRED-9b1c"}}});
    let sent = rpc(&http, "e", Some(ALICE), "SendMessage", m).await;
    assert!(sent["result"]["task"]["id"].is_string(), "{sent}");
    phase.store(1, Ordering::SeqCst);
    let dead = || async {
        let r = http.get_as("/admin/dead-letters", ADMIN).await;
        assert_eq!(r.status, 200, "{r:?}");
        r
    };
    wait_for_within(
        "the delivery dead-lettered",
        Duration::from_secs(20),
        || async {
            dead().await.json()["dead_letters"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        },
    )
    .await;
    // The receiver did get the secrets, as configured: the test would see them if leaked.
    assert!(hook.attempts() >= 1);
    let letters = dead().await;
    assert_eq!(
        letters.json()["dead_letters"][0]["subscriber"],
        "~push:t-0",
        "{letters:?}"
    );
    let metrics = http.get_as("/metrics", ADMIN).await;
    let fleet = http.get_as("/api/fleet", ADMIN).await;
    let list = rpc(
        &http,
        "e",
        Some(ALICE),
        "ListTaskPushNotificationConfigs",
        json!({"taskId": "t-0"}),
    )
    .await;
    for (what, text) in [
        (
            "dead letters",
            String::from_utf8_lossy(&letters.body).into_owned(),
        ),
        (
            "metrics",
            String::from_utf8_lossy(&metrics.body).into_owned(),
        ),
        ("fleet", String::from_utf8_lossy(&fleet.body).into_owned()),
    ] {
        assert!(
            !text.contains("SECRET-TOKEN") && !text.contains("SECRET-CRED"),
            "{what}: {text}"
        );
    }
    assert!(
        list.to_string().contains("SECRET-TOKEN") && !list.to_string().contains("SECRET-CRED"),
        "{list}"
    );
    assert!(String::from_utf8_lossy(&metrics.body).contains(
        r#"a2a_gateway_webhook_deliveries_total{agent="e",outcome="dead",subscriber="a2a_push"} 1"#
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_queue_leaves_push_deliveries_out_and_still_records_the_change() {
    let phase = Arc::new(AtomicUsize::new(0));
    let agent = phased(phase.clone(), &["TASK_STATE_WORKING"]).await;
    let mut e = a2a_agent("e", &agent.base);
    e.poll_interval = Duration::from_secs(3600);
    let (_gw, http) = gateway(vec![e], |cfg| {
        clients_and_receivers(cfg);
        cfg.webhooks.max_queued = 1;
        cfg.webhooks.retry_schedule_secs = vec![3600];
    })
    .await;
    // A receiver that is not there: what is queued stays queued.
    let url = format!("http://127.0.0.1:{}/gone", free_port());
    let mut ids = Vec::new();
    for _ in 0..2 {
        // The change, learnt through the gateway: the first fills the queue.
        ids.push(watched_working_task(&http, ALICE, &url).await);
    }
    // The second task's change is in the ledger all the same (ListTasks reads the ledger).
    let listed = rpc(&http, "e", Some(ALICE), "ListTasks", json!({})).await;
    let states: BTreeMap<String, String> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap_or("").to_owned(),
                t["status"]["state"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for id in &ids {
        assert_eq!(states[id], "TASK_STATE_WORKING", "{listed}");
    }
    let scraped = http.get_as("/metrics", ADMIN).await;
    let left_out = crate::support::metric_value(
        &String::from_utf8_lossy(&scraped.body),
        "a2a_gateway_webhook_deliveries_total",
        &[
            ("subscriber", "a2a_push"),
            ("agent", "e"),
            ("outcome", "queue_full"),
        ],
    );
    assert_eq!(left_out, 1.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_down_for_30_s_misses_nothing_and_gets_it_in_order() {
    const STATES: &[&str] = &[
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ];
    let phase = Arc::new(AtomicUsize::new(0));
    let agent = phased(phase.clone(), STATES).await;
    let mut e = a2a_agent("e", &agent.base);
    e.poll_interval = Duration::from_secs(3600);
    let (_gw, http) = gateway(vec![e], |cfg| {
        clients_and_receivers(cfg);
        cfg.webhooks.retry_schedule_secs = vec![1, 2, 4, 8, 8, 8, 8, 8, 8];
    })
    .await;
    let mut hook = Hook::start().await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let id = new_task(&http, Some(ALICE)).await;
        let v = rpc(
            &http,
            "e",
            Some(ALICE),
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": hook.url(), "token": format!("tok-{id}")}),
        )
        .await;
        assert!(v.get("result").is_some(), "{v}");
        ids.push(id);
    }
    hook.stop().await;
    let down = std::time::Instant::now();
    // Each change learnt by a GetTask through the gateway, while the receiver is down.
    for (p, want) in STATES.iter().enumerate() {
        phase.store(p, Ordering::SeqCst);
        for id in &ids {
            let v = rpc(&http, "e", Some(ALICE), "GetTask", json!({"id": id})).await;
            assert_eq!(v["result"]["status"]["state"], *want, "{v}");
        }
    }
    tokio::time::sleep(Duration::from_secs(30).saturating_sub(down.elapsed())).await;
    assert!(hook.received().is_empty());
    hook.restart().await;
    wait_for_within(
        "every change delivered",
        Duration::from_secs(60),
        || async {
            let got = by_token(&hook);
            ids.iter().all(|id| {
                got.get(&format!("tok-{id}"))
                    .is_some_and(|s| s.len() >= STATES.len())
            })
        },
    )
    .await;
    let got = by_token(&hook);
    for id in &ids {
        assert_eq!(got[&format!("tok-{id}")], STATES, "{id}: {got:?}");
    }
}

fn process_config(redis: &str, agent: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    write!(
        f,
        r#"
listen = "127.0.0.1:0"
workers = 1
[[agents]]
name = "e"
protocol = "a2a"
url = "{agent}"
poll_interval_ms = 200
[redis]
{redis}prefix = "push:"
[webhooks]
allow = ["127.0.0.1/32"]
retry_schedule_secs = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
timeout_ms = 1000
visibility_timeout_secs = 6
concurrency = 32
"#,
    )
    .expect("write config");
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_1000_push_deliveries_queued_on_redis_loses_none() {
    let redis = RedisServer::start();
    let hook = Hook::start().await;
    // A slow receiver: deliveries pile up, some are in flight at the kill.
    hook.set_delay(Duration::from_millis(700));
    let phase = Arc::new(AtomicUsize::new(0));
    let agent = phased(
        phase.clone(),
        &["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
    )
    .await;
    let cfg = process_config(&redis.toml(), &agent.base);
    let mut first = GwProc::spawn_logged(cfg.path());
    first.ready().await;
    // 500 tasks with two configs each; then every task completes (learnt by polling): 1,000
    // deliveries, queued in the step that records each change.
    let http = first.http.clone();
    let ids: Vec<String> = {
        let mut ids = Vec::new();
        for _ in 0..500 {
            ids.push(new_task(&http, None).await);
        }
        ids
    };
    use futures_util::stream::StreamExt;
    futures_util::stream::iter(ids.iter().flat_map(|id| ["a", "b"].map(|c| (id.clone(), c))))
        .map(|(id, c)| {
            let http = http.clone();
            let url = hook.url();
            async move {
                let v = rpc(&http, "e", None, "CreateTaskPushNotificationConfig", json!({"taskId": id, "id": c, "url": url,
                    "token": format!("SECRETTOK-{c}"), "authentication": {"scheme": "Bearer", "credentials": "SECRETCRED"}})).await;
                assert!(v.get("result").is_some(), "{v}");
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    phase.store(1, Ordering::SeqCst);
    wait_for_within("every task completed", Duration::from_secs(60), || async {
        first
            .metric("a2a_gateway_task_transitions_total", &[("to", "COMPLETED")])
            .await
            >= 500.0
    })
    .await;
    let before_kill = hook.count();
    first.kill();
    assert!(
        before_kill < 1000,
        "most deliveries were still queued at the kill ({before_kill} of 1000)"
    );
    hook.set_delay(Duration::ZERO);
    let second = GwProc::spawn_logged(cfg.path());
    second.ready().await;
    let expected: HashSet<(String, String)> = ids
        .iter()
        .flat_map(|id| ["a", "b"].map(|c| (id.clone(), format!("SECRETTOK-{c}"))))
        .collect();
    let delivered = || {
        hook.received()
            .iter()
            .filter(|d| change(d).1 == "TASK_STATE_COMPLETED")
            .map(|d| {
                (
                    change(d).0,
                    d.header("x-a2a-notification-token")
                        .unwrap_or("")
                        .to_owned(),
                )
            })
            .collect::<HashSet<_>>()
    };
    wait_for_within("every delivery made", Duration::from_secs(90), || async {
        delivered().is_superset(&expected)
    })
    .await;
    assert_eq!(delivered(), expected);
    // No secret in either process's log, nor in /metrics.
    let metrics = String::from_utf8_lossy(&second.http.get("/metrics").await.body).into_owned();
    for (what, text) in [
        ("first log", first.log()),
        ("second log", second.log()),
        ("metrics", metrics),
    ] {
        assert!(
            !text.contains("SECRETTOK") && !text.contains("SECRETCRED"),
            "{what}: {text}"
        );
    }
}

/// Alice's receivers are gone and her deliveries pile up, past her share of the queue
/// (`max_queued_per_client = 3`, the queue itself holding 100): her deliveries past it are left
/// out and counted, Bob's (and Alice's own tasks' records) are untouched. `redis` or in process.
async fn one_client_past_its_share_of_the_queue(redis: Option<&RedisServer>) {
    let phase = Arc::new(AtomicUsize::new(0));
    let agent = phased(phase.clone(), &["TASK_STATE_WORKING"]).await;
    let mut e = a2a_agent("e", &agent.base);
    e.poll_interval = Duration::from_secs(3600);
    let (_gw, http) = gateway(vec![e], |cfg| {
        clients_and_receivers(cfg);
        cfg.webhooks.max_queued = 100;
        cfg.webhooks.max_queued_per_client = Some(3);
        cfg.webhooks.retry_schedule_secs = vec![3600];
        // One partition: each partition holds its share of every bound (3 / P, rounded up).
        cfg.redis = redis.map(|r| a2a_gateway::config::RedisConfig {
            partitions: 1,
            ..r.config("share")
        });
    })
    .await;
    // Each task's config hears of WORKING: five deliveries, to a receiver that is not there.
    let gone = format!("http://127.0.0.1:{}/gone", free_port());
    let mut alice = Vec::new();
    for _ in 0..5 {
        alice.push(watched_working_task(&http, ALICE, &gone).await);
    }
    let left_out = || async {
        let scraped = http.get_as("/metrics", ADMIN).await;
        crate::support::metric_value(
            &String::from_utf8_lossy(&scraped.body),
            "a2a_gateway_webhook_deliveries_total",
            &[
                ("subscriber", "a2a_push"),
                ("agent", "e"),
                ("outcome", "queue_full"),
            ],
        )
    };
    // Her share holds three; the queue had room for all five.
    assert_eq!(left_out().await, 2.0, "Alice's two past her share left out");
    // Bob, with room in the queue but none of his own used: every delivery of his task.
    let hook = Hook::start().await;
    let id = watched_working_task(&http, BOB, &hook.url()).await;
    wait_for_within("Bob's WORKING delivered", Duration::from_secs(10), || {
        let hook = &hook;
        let id = id.clone();
        async move {
            hook.received()
                .iter()
                .any(|d| change(d) == (id.clone(), "TASK_STATE_WORKING".to_owned()))
        }
    })
    .await;
    if let Some(r) = redis {
        // The shares as Redis counts them: Alice's three waiting, Bob's gone with his delivery.
        let cq = r.cli(&["--scan", "--pattern", "*wh:cq"]);
        wait_for_within("Bob's share back", Duration::from_secs(5), || {
            let cq = cq.clone();
            async move { r.cli(&["HGET", &cq, "bob"]).is_empty() }
        })
        .await;
        assert_eq!(r.cli(&["HGET", &cq, "alice"]), "3", "{cq}");
    }
    let before = left_out().await;
    // Alice's changes are recorded all the same.
    for id in &alice {
        let got = rpc(&http, "e", Some(ALICE), "GetTask", json!({"id": id})).await;
        assert_eq!(
            got["result"]["status"]["state"], "TASK_STATE_WORKING",
            "{got}"
        );
    }
    assert_eq!(left_out().await, before, "nothing of Bob's left out");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_client_past_its_share_of_the_queue_is_left_out_and_another_is_not() {
    one_client_past_its_share_of_the_queue(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_client_past_its_share_of_the_queue_on_redis_is_left_out_and_another_is_not() {
    let redis = RedisServer::start();
    one_client_past_its_share_of_the_queue(Some(&redis)).await;
}
