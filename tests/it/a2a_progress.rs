//! Push receivers hear a task's progress, not only its states: an a2a-sdk receiver
//! (tests/a2a/receiver.py, every delivery read with a2a-sdk's own `StreamResponse`) gets every
//! tick of a task that reports WORKING three times with a new status message, in order, whether
//! the agent pushes, streams or does neither, for a config created on a running task and for an
//! inline config on a blocking SendMessage, and through a receiver down for 5 s; a CancelTask
//! through the gateway reaches the receiver all three ways; and a resubscription's Task is
//! told to a stream's readers as the updates it brings, never as a second Task.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use a2a_gateway::config::{AgentConfig, Config};

use crate::a2a_gateway::{a2a_agent, card_url, gateway};
use crate::support::a2a_calls::{message, rpc, two_clients, ALICE};
use crate::support::a2a_script::{card, events, task, Answer, ScriptedAgent};
use crate::support::a2a_sdk::{run_client, Sdk, SdkAgent, SdkReceiver, JSONRPC};
use crate::support::redis_server::RedisServer;
use crate::support::{wait_for_within, within};

/// How the agent lets the gateway hear its tasks.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Way {
    /// a2a-sdk's agent with its push sender (`--push`): it pushes to the gateway.
    Pushes,
    /// a2a-sdk's agent without: it streams.
    Streams,
    /// a2a-sdk's agent whose card says neither (`--no-streaming`): the gateway polls.
    Neither,
}

/// A free port on loopback: the gateway's address is its agents' callback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// An a2a-sdk agent of `way` behind a gateway of two clients (receivers on loopback allowed),
/// polling every 200 ms, with `tweak`.
async fn fronted(
    way: Way,
    tweak: impl FnOnce(&mut Config),
) -> (SdkAgent, a2a_gateway::Gateway, crate::support::Http) {
    let agent = match way {
        Way::Pushes => SdkAgent::start_args(JSONRPC, &["--push"]),
        Way::Streams => SdkAgent::start(JSONRPC),
        Way::Neither => SdkAgent::start_args(JSONRPC, &["--no-streaming"]),
    };
    let port = free_port();
    let mut echo: AgentConfig = a2a_agent("echo", &agent.base);
    echo.callback_url = Some(format!("http://127.0.0.1:{port}"));
    echo.poll_interval = Duration::from_millis(200);
    let (gw, http) = gateway(vec![echo], |cfg| {
        cfg.listen = format!("127.0.0.1:{port}").parse().expect("addr");
        two_clients(cfg);
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
        tweak(cfg);
    })
    .await;
    (agent, gw, http)
}

/// One delivery in short: the task's state and its status message's text, if any.
fn said(delivery: &Value) -> String {
    let t = &delivery["task"];
    let state = t["status"]["state"].as_str().unwrap_or("?");
    match t["status"]["message"]["parts"][0]["text"].as_str() {
        Some(text) => format!("{state} {text}"),
        None => state.to_owned(),
    }
}

/// What the receiver heard, each change once: the same thing said twice in a row (a refresh
/// that added an artifact) is one line.
fn heard(r: &SdkReceiver) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for d in r.deliveries() {
        let s = said(&d);
        if out.last() != Some(&s) {
            out.push(s);
        }
    }
    out
}

/// The ticks in order, then COMPLETED.
const TICKS: [&str; 4] = [
    "TASK_STATE_WORKING tick 1",
    "TASK_STATE_WORKING tick 2",
    "TASK_STATE_WORKING tick 3",
    "TASK_STATE_COMPLETED",
];

/// Wait until `r` heard the task end, then check it heard every tick in order, the last
/// delivery carrying the artifact, every request read by a2a-sdk.
async fn hears_every_tick(r: &SdkReceiver, what: &str) {
    let ended = within(Duration::from_secs(30), || async {
        heard(r).last().map(String::as_str) == Some("TASK_STATE_COMPLETED")
    })
    .await;
    assert!(ended, "{what}: the end never heard: {:?}", r.requests());
    let got = heard(r);
    let from = got
        .iter()
        .position(|s| s == TICKS[0])
        .unwrap_or_else(|| panic!("{what}: no first tick in {got:?}"));
    assert_eq!(got[from..], TICKS, "{what}: {got:?}");
    // Before the ticks, at most the task as it was made.
    assert!(
        got[..from]
            .iter()
            .all(|s| s.starts_with("TASK_STATE_SUBMITTED") || s == "TASK_STATE_WORKING"),
        "{what}: {got:?}"
    );
    let last = r.deliveries().pop().expect("a delivery");
    assert_eq!(
        last["task"]["artifacts"][0]["parts"][0]["text"], "ticked",
        "{what}: {last}"
    );
    let refused: Vec<Value> = r
        .requests()
        .into_iter()
        .filter(|q| q["ok"] != true && q["status"] != 503)
        .collect();
    assert!(
        refused.is_empty(),
        "{what}: a2a-sdk could not read: {refused:?}"
    );
}

/// A task of "ticks" sent without waiting, and a config created on it while it runs.
async fn config_on_a_running_task(way: Way) {
    let (_agent, _gw, http) = fronted(way, |_| {}).await;
    let r = SdkReceiver::start();
    let mut m = message("ticks", json!({}));
    m["configuration"] = json!({"returnImmediately": true});
    let sent = rpc(&http, "echo", Some(ALICE), "SendMessage", m).await;
    let id = sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned();
    let made = rpc(
        &http,
        "echo",
        Some(ALICE),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": r.url, "token": "tok"}),
    )
    .await;
    assert_eq!(made["result"]["taskId"], id.as_str(), "{made}");
    hears_every_tick(&r, &format!("{way:?}, a config on a running task")).await;
    for d in r.requests() {
        assert_eq!(d["headers"]["x-a2a-notification-token"], "tok", "{d}");
    }
}

/// A blocking SendMessage of "ticks" with an inline config: answered when the task completes,
/// its config having heard every tick.
async fn inline_on_a_blocking_message(way: Way, r: SdkReceiver, tweak: impl FnOnce(&mut Config)) {
    let (agent, _gw, http) = fronted(way, tweak).await;
    let mut m = message("ticks", json!({}));
    m["configuration"] =
        json!({"taskPushNotificationConfig": {"url": r.url, "token": "tok-inline"}});
    let sent = rpc(&http, "echo", Some(ALICE), "SendMessage", m).await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{way:?}: the blocking client is answered at the end: {sent}"
    );
    hears_every_tick(&r, &format!("{way:?}, an inline config")).await;
    // The client's config never reached the agent.
    let text = serde_json::to_string(&agent.recorded()).expect("json");
    assert!(
        !text.contains("tok-inline") && !text.contains(&r.url),
        "{way:?}: {text}"
    );
    let methods: Vec<String> = agent
        .recorded()
        .iter()
        .filter_map(|c| c["body"]["method"].as_str().map(str::to_owned))
        .collect();
    match way {
        Way::Streams => assert!(
            methods.contains(&"SendStreamingMessage".to_owned()),
            "{methods:?}"
        ),
        Way::Neither => {
            let send = agent
                .recorded()
                .into_iter()
                .find(|c| c["body"]["method"] == "SendMessage")
                .expect("a SendMessage");
            assert_eq!(
                send["body"]["params"]["configuration"]["returnImmediately"], true,
                "{send}"
            );
            assert!(methods.contains(&"GetTask".to_owned()), "{methods:?}");
        }
        Way::Pushes => {
            let send = agent
                .recorded()
                .into_iter()
                .find(|c| c["body"]["method"] == "SendMessage")
                .expect("a SendMessage");
            let own = &send["body"]["params"]["configuration"]["taskPushNotificationConfig"];
            assert!(
                own["url"]
                    .as_str()
                    .is_some_and(|u| u.contains("/agents/echo/notifications?send=")),
                "the gateway's own config, inline: {send}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_on_a_running_task_hears_every_tick_of_an_agent_that_pushes() {
    config_on_a_running_task(Way::Pushes).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_on_a_running_task_hears_every_tick_of_an_agent_that_streams() {
    config_on_a_running_task(Way::Streams).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_on_a_running_task_hears_every_tick_a_poll_sees() {
    config_on_a_running_task(Way::Neither).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_inline_config_on_a_blocking_message_hears_every_tick_of_an_agent_that_pushes() {
    inline_on_a_blocking_message(Way::Pushes, SdkReceiver::start(), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_inline_config_on_a_blocking_message_hears_every_tick_of_an_agent_that_streams() {
    inline_on_a_blocking_message(Way::Streams, SdkReceiver::start(), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_inline_config_on_a_blocking_message_hears_every_tick_a_poll_sees() {
    inline_on_a_blocking_message(Way::Neither, SdkReceiver::start(), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_redis_an_inline_config_hears_every_tick_of_an_agent_that_pushes() {
    // The send's binding (send.lua) and the refreshes queued by apply.lua.
    let redis = RedisServer::start();
    inline_on_a_blocking_message(Way::Pushes, SdkReceiver::start(), |cfg| {
        cfg.redis = Some(redis.config("progress:"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_redis_a_config_on_a_running_task_hears_every_tick_a_poll_sees() {
    let redis = RedisServer::start();
    let (_agent, _gw, http) = fronted(Way::Neither, |cfg| {
        cfg.redis = Some(redis.config("progress:"));
    })
    .await;
    let r = SdkReceiver::start();
    let mut m = message("ticks", json!({}));
    m["configuration"] = json!({"returnImmediately": true});
    let sent = rpc(&http, "echo", Some(ALICE), "SendMessage", m).await;
    let id = sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned();
    rpc(
        &http,
        "echo",
        Some(ALICE),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": r.url}),
    )
    .await;
    hears_every_tick(&r, "Redis, polled").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_down_for_5_s_still_hears_every_tick_in_order() {
    let r = SdkReceiver::unavailable_for(5.0);
    // Retried every second (the default schedule waits 5 s, then 5 min).
    inline_on_a_blocking_message(Way::Streams, r, |cfg| {
        cfg.webhooks.retry_schedule_secs = vec![1; 20];
    })
    .await;
}

/// A task of "slow" with a config, canceled through the gateway: the receiver hears CANCELED.
async fn a_cancel_is_heard(way: Way) {
    let (_agent, _gw, http) = fronted(way, |_| {}).await;
    let r = SdkReceiver::start();
    let mut m = message("slow", json!({}));
    m["configuration"] = json!({"returnImmediately": true,
        "taskPushNotificationConfig": {"url": r.url, "token": "tok-cancel"}});
    let sent = rpc(&http, "echo", Some(ALICE), "SendMessage", m).await;
    let id = sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned();
    wait_for_within("the task working", Duration::from_secs(10), || async {
        heard(&r).iter().any(|s| s == "TASK_STATE_WORKING")
    })
    .await;
    let canceled = rpc(&http, "echo", Some(ALICE), "CancelTask", json!({"id": id})).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    wait_for_within("CANCELED heard", Duration::from_secs(8), || async {
        heard(&r).last().map(String::as_str) == Some("TASK_STATE_CANCELED")
    })
    .await;
    let got = heard(&r);
    assert_eq!(
        got.iter().filter(|s| *s == "TASK_STATE_CANCELED").count(),
        1,
        "{way:?}: {got:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_through_the_gateway_is_heard_from_an_agent_that_pushes() {
    a_cancel_is_heard(Way::Pushes).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_through_the_gateway_is_heard_from_an_agent_that_streams() {
    a_cancel_is_heard(Way::Streams).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_through_the_gateway_is_heard_from_an_agent_that_is_polled() {
    a_cancel_is_heard(Way::Neither).await;
}

/// An agent whose stream of a new task ends after WORKING; subscribed again, it sends the Task
/// (WORKING, as it was), an artifact and COMPLETED. Both SDKs' `message:stream` through the
/// gateway read one Task, first, then updates only (§3.1.2).
#[tokio::test(flavor = "multi_thread")]
async fn a_resubscription_s_task_is_told_as_updates_and_the_stream_holds_one_task() {
    let made: Arc<Mutex<u32>> = Arc::new(Mutex::new(0));
    let agent = ScriptedAgent::start(Arc::new({
        let made = made.clone();
        move |method: &str, params: &Value| match method {
            "SendStreamingMessage" => {
                let n = {
                    let mut m = made.lock().expect("lock");
                    *m += 1;
                    *m
                };
                let id = format!("t-{n}");
                let ctx = format!("c-{n}");
                let (tx, answer) = events();
                let working = task(&id, &ctx, "TASK_STATE_WORKING");
                let _ = tx.try_send(json!({"task": task(&id, &ctx, "TASK_STATE_SUBMITTED")}));
                let _ = tx.try_send(json!({"statusUpdate": {"taskId": id, "contextId": ctx,
                    "status": working["status"].clone()}}));
                // The stream ends here (the sender dropped), the task live.
                answer
            }
            "SubscribeToTask" => {
                let id = params["id"].as_str().unwrap_or("").to_owned();
                let ctx = id.replace("t-", "c-");
                let (tx, answer) = events();
                let _ = tx.try_send(json!({"task": task(&id, &ctx, "TASK_STATE_WORKING")}));
                let _ = tx.try_send(json!({"artifactUpdate": {"taskId": id, "contextId": ctx,
                    "artifact": {"artifactId": "a-1", "parts": [{"text": "done"}]}}}));
                let done = task(&id, &ctx, "TASK_STATE_COMPLETED");
                let _ = tx.try_send(json!({"statusUpdate": {"taskId": id, "contextId": ctx,
                    "status": done["status"].clone()}}));
                answer
            }
            _ => Answer::Status(500, b"not scripted".to_vec()),
        }
    }))
    .await;
    let mut c = card(&format!("{}/rpc", agent.base));
    c["capabilities"]["streaming"] = json!(true);
    agent.set_card(c);
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], |_| {}).await;
    let card = card_url(&http, "s");
    for sdk in [Sdk::Python, Sdk::Js] {
        let out =
            tokio::task::block_in_place(|| run_client(sdk, &card, JSONRPC, None, &["stream"]));
        let events = out["result"]["events"]
            .as_array()
            .unwrap_or_else(|| panic!("{sdk:?}: {out}"))
            .clone();
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(
            kinds,
            ["task", "status", "artifact", "status"],
            "{sdk:?}: one Task, first; then updates: {events:?}"
        );
        assert_eq!(
            events[0]["state"], "TASK_STATE_SUBMITTED",
            "{sdk:?}: {events:?}"
        );
        assert_eq!(
            events[1]["state"], "TASK_STATE_WORKING",
            "{sdk:?}: {events:?}"
        );
        assert_eq!(events[2]["text"], "done", "{sdk:?}: {events:?}");
        assert_eq!(
            events[3]["state"], "TASK_STATE_COMPLETED",
            "{sdk:?}: {events:?}"
        );
    }
    let subscribes = agent
        .methods()
        .iter()
        .filter(|m| *m == "SubscribeToTask")
        .count();
    assert_eq!(
        subscribes,
        2,
        "one resubscription per stream: {:?}",
        agent.methods()
    );
}
