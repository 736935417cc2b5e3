//! What the gateway guarantees for official A2A tasks, whatever the agent says: final states
//! stay final, tasks and contexts are their creator's (on one gateway and across two replicas
//! on one redis-server), a hostile agent's answers are refused and record nothing, a message
//! sent twice is answered once, and the SDKs surface the gateway's own errors.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use serde_json::{json, Value};

use a2a_gateway::config::{Config, Right};

use crate::a2a_gateway::{a2a_agent, card_url, gateway};
use crate::auth::client;
use crate::support::a2a_calls::*;
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::a2a_sdk::{run_clients, Run, Sdk, SdkAgent, HTTP_JSON, JSONRPC};
use crate::support::redis_server::RedisServer;
use crate::support::sse::Events;
use crate::support::Http;

#[tokio::test]
async fn a_final_task_stays_final_whatever_the_agent_says_later() {
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = ScriptedAgent::start(reopening(calls.clone())).await;
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], |_| {}).await;
    let mut events = Events::new(http.open("/events").await);
    let sent = rpc(&http, "s", None, "SendMessage", message("go", json!({}))).await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    // The agent reopens the completed task: the client sees the ledger's state, not the agent's.
    let again = rpc(
        &http,
        "s",
        None,
        "SendMessage",
        message("more", json!({"taskId": "t-1"})),
    )
    .await;
    assert_eq!(
        again["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{again}"
    );
    assert_eq!(
        again["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "done"
    );
    let refused = http
        .metric(
            "a2a_gateway_transitions_refused_total",
            &[("agent", "s"), ("reason", "terminal")],
        )
        .await;
    assert_eq!(refused, 1.0);
    // On /events: the change, then the refusal in A2A's words.
    let mut seen = Vec::new();
    while let Some(e) = events.next_event(WAIT).await {
        let d: Value = serde_json::from_str(&e.data).expect("json");
        seen.push((e.event.clone(), d.clone()));
        if e.event == "task.transition.refused" {
            assert_eq!(d["protocol"], "a2a", "{d}");
            assert_eq!(d["task_id"], "t-1");
            assert_eq!(d["recorded"], "TASK_STATE_COMPLETED");
            assert_eq!(d["offered"], "TASK_STATE_WORKING");
            break;
        }
    }
    let change = seen
        .iter()
        .find(|(e, _)| e == "task.status.updated")
        .unwrap_or_else(|| panic!("the change: {seen:?}"));
    assert_eq!(change.1["protocol"], "a2a");
    assert_eq!(change.1["agent"], "s");
    assert_eq!(change.1["data"]["id"], "t-1");
    // GetTask and CancelTask on the final task never reach the agent, in either binding.
    let before = calls.load(Ordering::SeqCst);
    let got = rpc(&http, "s", None, "GetTask", json!({"id": "t-1"})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    let cancel = rpc(&http, "s", None, "CancelTask", json!({"id": "t-1"})).await;
    assert_eq!(error_code(&cancel), -32002, "{cancel}");
    let r = rest(
        &http,
        Method::POST,
        "/agents/s/tasks/t-1:cancel",
        None,
        None,
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(
        r.json()["error"]["details"][0]["reason"],
        "TASK_NOT_CANCELABLE"
    );
    let r = rest(&http, Method::GET, "/agents/s/tasks/t-1", None, None).await;
    assert_eq!(r.json()["status"]["state"], "TASK_STATE_COMPLETED", "{r:?}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before,
        "{:?}",
        agent.methods()
    );
    assert!(!agent.methods().contains(&"CancelTask".to_owned()));
}

#[tokio::test]
async fn a_hostile_agent_is_refused_and_records_nothing() {
    // A listener the card names: the gateway must never connect to it.
    let decoy = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let decoy_url = format!("http://{}/rpc", decoy.local_addr().expect("addr"));
    let connected = Arc::new(AtomicUsize::new(0));
    let seen = connected.clone();
    tokio::spawn(async move {
        while decoy.accept().await.is_ok() {
            seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    let agent = ScriptedAgent::start(Arc::new(|method, params| {
        let text = params["message"]["parts"][0]["text"].as_str().unwrap_or("");
        match (method, text) {
            ("SendMessage", "other id") => Answer::Result(json!({"task": task("t-9", "c", "TASK_STATE_WORKING")})),
            ("SendMessage", "unknown state") => Answer::Result(json!({"task": task("t-2", "c", "TASK_STATE_EXPLODED")})),
            ("SendMessage", "huge") => {
                let mut t = task("t-3", "c", "TASK_STATE_COMPLETED");
                t["metadata"] = json!({"pad": "x".repeat(10 << 20)});
                Answer::Result(json!({ "task": t }))
            }
            ("SendMessage", "duplicate keys") => Answer::Raw(
                br#"{"jsonrpc":"2.0","id":"ID","result":{"task":{"id":"t-4","id":"t-5","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}"#.to_vec(),
            ),
            ("SendMessage", "odd id") => Answer::Result(json!({"task": task("a/b:c", "c", "TASK_STATE_WORKING")})),
            ("GetTask", _) if params["id"] == "a/b:c" => Answer::Result(task("a/b:c", "c", "TASK_STATE_WORKING")),
            ("GetTask", _) => Answer::Result(task("not-the-one", "c", "TASK_STATE_WORKING")),
            ("CancelTask", _) => Answer::Result(task("a/b:c", "c", "TASK_STATE_CANCELED")),
            _ => Answer::Result(task("t-0", "c", "TASK_STATE_WORKING")),
        }
    }))
    .await;
    agent.set_card(crate::support::a2a_script::card(&decoy_url));
    let (_gw, http) = gateway(vec![a2a_agent("h", &agent.base)], |_| {}).await;
    for text in ["unknown state", "huge"] {
        let v = rpc(&http, "h", None, "SendMessage", message(text, json!({}))).await;
        assert_eq!(error_code(&v), -32006, "{text}: {v}");
    }
    for id in ["t-2", "t-3"] {
        let v = rpc(&http, "h", None, "GetTask", json!({ "id": id })).await;
        assert_eq!(error_code(&v), -32001, "{id} was recorded: {v}");
    }
    // Duplicate keys: the strict reader refuses the answer whatever its id.
    let v = rpc(
        &http,
        "h",
        None,
        "SendMessage",
        message("duplicate keys", json!({})),
    )
    .await;
    assert_eq!(error_code(&v), -32006, "{v}");
    for id in ["t-4", "t-5"] {
        let v = rpc(&http, "h", None, "GetTask", json!({ "id": id })).await;
        assert_eq!(error_code(&v), -32001, "{v}");
    }
    // An id with a slash and a colon: recorded, read and canceled by both bindings.
    let v = rpc(
        &http,
        "h",
        None,
        "SendMessage",
        message("odd id", json!({})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "a/b:c", "{v}");
    let r = rest(&http, Method::GET, "/agents/h/tasks/a%2Fb:c", None, None).await;
    assert_eq!(
        (r.status, r.json()["id"].clone()),
        (200, json!("a/b:c")),
        "{r:?}"
    );
    let v = rpc(&http, "h", None, "GetTask", json!({"id": "a/b:c"})).await;
    assert_eq!(v["result"]["id"], "a/b:c", "{v}");
    // A task the agent answers about with another id: refused.
    let v = rpc(
        &http,
        "h",
        None,
        "SendMessage",
        message("other id", json!({})),
    )
    .await;
    assert!(v.get("result").is_some(), "{v}");
    let v = rpc(&http, "h", None, "GetTask", json!({"id": "t-9"})).await;
    assert_eq!(error_code(&v), -32006, "an answer about another task: {v}");
    let r = rest(
        &http,
        Method::POST,
        "/agents/h/tasks/a%2Fb:c:cancel",
        None,
        None,
    )
    .await;
    assert_eq!(r.json()["status"]["state"], "TASK_STATE_CANCELED", "{r:?}");
    // Every call went to the configured origin, none to the host the card names.
    assert_eq!(connected.load(Ordering::SeqCst), 0);
    assert!(agent.methods().len() >= 8, "{:?}", agent.methods());
    for c in agent.calls() {
        assert_eq!(c["headers"]["a2a-version"], "1.0");
        assert!(
            c["id"].as_str().is_some_and(|i| i.starts_with("gw-")),
            "the gateway's own ids: {c}"
        );
    }
}

#[tokio::test]
async fn a_message_sent_twice_is_answered_once_even_after_a_timeout() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let agent = ScriptedAgent::start(Arc::new(move |method, params| {
        if method != "SendMessage" {
            return Answer::Result(task("slow-1", "c", "TASK_STATE_WORKING"));
        }
        counted.fetch_add(1, Ordering::SeqCst);
        let slow = params["message"]["parts"][0]["text"] == "slow";
        let answer = Answer::Result(json!({"task": task(if slow { "slow-1" } else { "fast-1" }, "c", "TASK_STATE_COMPLETED")}));
        if slow {
            Answer::Later(Duration::from_millis(1200), Box::new(answer))
        } else {
            answer
        }
    }))
    .await;
    let mut cfg = a2a_agent("m", &agent.base);
    cfg.timeout = Duration::from_millis(400);
    let (_gw, http) = gateway(vec![cfg], |_| {}).await;
    let fast = message("fast", json!({}));
    let first = rpc(&http, "m", None, "SendMessage", fast.clone()).await;
    // The same message again, over the other binding: the recorded answer, no second call.
    let r = rest(
        &http,
        Method::POST,
        "/agents/m/message:send",
        None,
        Some(fast),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json(), first["result"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // A blocking send that outlives timeout_ms: AGENT_TIMEOUT, and the retry finds the task.
    let slow = message("slow", json!({}));
    let timed_out = rpc(&http, "m", None, "SendMessage", slow.clone()).await;
    assert_eq!(
        (error_code(&timed_out), reason(&timed_out)),
        (-32000, "AGENT_TIMEOUT"),
        "{timed_out}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let retry = rpc(&http, "m", None, "SendMessage", slow).await;
    assert_eq!(retry["result"]["task"]["id"], "slow-1", "{retry}");
    assert_eq!(
        retry["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2, "{:?}", agent.methods());
    // A messageId reused for another message is refused.
    let mut other = message("fast", json!({}));
    other["message"]["messageId"] = first["result"]["task"]["id"].clone();
    let mut reused = message("different", json!({}));
    reused["message"]["messageId"] = other["message"]["messageId"].clone();
    rpc(&http, "m", None, "SendMessage", other).await;
    let v = rpc(&http, "m", None, "SendMessage", reused).await;
    assert_eq!(error_code(&v), -32602, "{v}");
}

/// B cannot read, cancel or continue A's task, by taskId, contextId or referenceTaskIds; A can,
/// on `first` and on `second` (another replica, when they share a store).
async fn only_the_creator_sees_its_task(first: &Http, second: &Http, agent: &SdkAgent) {
    let sent = rpc(
        first,
        "echo",
        Some(ALICE),
        "SendMessage",
        message("need input", json!({})),
    )
    .await;
    let t = &sent["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{sent}");
    let (id, ctx) = (
        t["id"].as_str().expect("id"),
        t["contextId"].as_str().expect("ctx"),
    );
    let before = agent.recorded().len();
    for http in [first, second] {
        let get = rpc(http, "echo", Some(BOB), "GetTask", json!({ "id": id })).await;
        assert_eq!(error_code(&get), -32001, "{get}");
        let cancel = rpc(http, "echo", Some(BOB), "CancelTask", json!({ "id": id })).await;
        assert_eq!(error_code(&cancel), -32001, "{cancel}");
        // In JSON names and in proto names alike (issue 42: a proto name is read as the JSON
        // name before ownership looks at it).
        for extra in [
            json!({ "taskId": id }),
            json!({ "contextId": ctx }),
            json!({ "referenceTaskIds": [id] }),
            json!({ "task_id": id }),
            json!({ "context_id": ctx }),
            json!({ "reference_task_ids": [id] }),
        ] {
            let v = rpc(
                http,
                "echo",
                Some(BOB),
                "SendMessage",
                message("blue", extra.clone()),
            )
            .await;
            assert_eq!(error_code(&v), -32001, "{extra}: {v}");
        }
        let push = rpc(
            http,
            "echo",
            Some(BOB),
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "x"}),
        )
        .await;
        assert_eq!(error_code(&push), -32001, "{push}");
        let r = rest(
            http,
            Method::GET,
            &format!("/agents/echo/tasks/{id}"),
            Some(BOB),
            None,
        )
        .await;
        assert_eq!(r.status, 404, "{r:?}");
        assert_eq!(r.json()["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
        let fleet = rpc(http, "", Some(BOB), "GetTask", json!({ "id": id })).await;
        assert_eq!(error_code(&fleet), -32001, "{fleet}");
    }
    assert_eq!(
        agent.recorded().len(),
        before,
        "none of B's calls reached the agent"
    );
    // A reads it on both, by the agent's route and by /a2a, and continues it.
    for http in [first, second] {
        let got = rpc(http, "echo", Some(ALICE), "GetTask", json!({ "id": id })).await;
        assert_eq!(got["result"]["id"], id, "{got}");
        let fleet = rpc(http, "", Some(ALICE), "GetTask", json!({ "id": id })).await;
        assert_eq!(fleet["result"]["id"], id, "{fleet}");
    }
    // A's push config, kept by the gateway: made on one replica, read on the other; B
    // neither reads nor deletes it.
    let url = "http://127.0.0.1:9/hook";
    let made = rpc(
        first,
        "echo",
        Some(ALICE),
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "id": "x", "url": url}),
    )
    .await;
    assert_eq!(made["result"]["id"], "x", "{made}");
    for http in [first, second] {
        let theirs = rpc(
            http,
            "echo",
            Some(BOB),
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": "x"}),
        )
        .await;
        assert_eq!(error_code(&theirs), -32001, "{theirs}");
    }
    let push = rpc(
        second,
        "echo",
        Some(ALICE),
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": "x"}),
    )
    .await;
    assert_eq!(
        (&push["result"]["url"], &push["result"]["taskId"]),
        (&json!(url), &json!(id)),
        "{push}"
    );
    let done = rpc(
        second,
        "echo",
        Some(ALICE),
        "SendMessage",
        message("blue", json!({"taskId": id, "contextId": ctx})),
    )
    .await;
    assert_eq!(
        done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{done}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_and_contexts_are_their_creators_on_one_gateway() {
    let agent = SdkAgent::start(JSONRPC);
    let (_gw, http) = gateway(vec![a2a_agent("echo", &agent.base)], |cfg| {
        two_clients(cfg);
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
    })
    .await;
    only_the_creator_sees_its_task(&http, &http, &agent).await;
    // The card describes the gateway's bearer scheme, not the agent's.
    let card = http
        .get_as("/agents/echo/.well-known/agent-card.json", BOB)
        .await
        .json();
    assert!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"].is_object(),
        "{card}"
    );
    // Credentials stay at the edge: the agent never saw a client's key.
    for r in agent.recorded() {
        let text = r.to_string();
        assert!(!text.contains(ALICE) && !text.contains(BOB), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_and_contexts_are_their_creators_across_two_replicas() {
    let redis = RedisServer::start();
    let agent = SdkAgent::start(JSONRPC);
    let store = |cfg: &mut Config| {
        two_clients(cfg);
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
        cfg.redis = Some(redis.config("a2a-own"));
    };
    let (_g1, one) = gateway(vec![a2a_agent("echo", &agent.base)], store).await;
    let (_g2, two) = gateway(vec![a2a_agent("echo", &agent.base)], store).await;
    only_the_creator_sees_its_task(&one, &two, &agent).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdks_surface_the_gateways_own_errors_on_both_bindings() {
    let release = Arc::new(tokio::sync::Notify::new());
    let go = release.clone();
    let agent = ScriptedAgent::start(Arc::new(move |_, params| {
        let text = params["message"]["parts"][0]["text"].as_str().unwrap_or("");
        let t = Box::new(Answer::Result(json!({"task": task(
            &uuid::Uuid::new_v4().to_string(),
            "c",
            "TASK_STATE_COMPLETED"
        )})));
        // The holder keeps the busy agent's one slot until every SDK client has run (sixteen
        // client processes on a loaded machine can take longer than any fixed hold).
        if text == "hold" {
            Answer::Until(go.clone(), Duration::from_secs(25), t)
        } else {
            Answer::Later(Duration::from_millis(1500), t)
        }
    }))
    .await;
    let mut slow = a2a_agent("slow", &agent.base);
    slow.timeout = Duration::from_millis(300);
    let mut busy = a2a_agent("busy", &agent.base);
    busy.max_in_flight = 1;
    busy.timeout = Duration::from_secs(30);
    let (_gw, http) = gateway(vec![slow, busy], |cfg| {
        use Right::*;
        cfg.clients = vec![
            client("alice", ALICE, &["*"], &[Tasks]),
            client("reader", BOB, &["*"], &[Events]),
        ];
    })
    .await;
    // One message holds the busy agent's only slot while the SDKs send theirs.
    let holder = {
        let http = Http::new(http.base.clone());
        tokio::spawn(async move {
            rpc(
                &http,
                "busy",
                Some(ALICE),
                "SendMessage",
                message("hold", json!({})),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (slow_card, busy_card) = (card_url(&http, "slow"), card_url(&http, "busy"));
    let one = &["send-hello"][..];
    let mut runs: Vec<Run<'_>> = Vec::new();
    for sdk in [Sdk::Python, Sdk::Js] {
        for binding in [JSONRPC, HTTP_JSON] {
            runs.push((sdk, busy_card.as_str(), binding, Some(ALICE), one));
            runs.push((sdk, slow_card.as_str(), binding, Some(ALICE), one));
            runs.push((sdk, slow_card.as_str(), binding, Some(BOB), one));
            runs.push((sdk, slow_card.as_str(), binding, Some("not-a-key"), one));
        }
    }
    let outs = tokio::task::block_in_place(|| run_clients(&runs));
    for (run, out) in runs.iter().zip(&outs) {
        let (sdk, url, binding, token, _) = run;
        let text = out.to_string();
        // a2a-sdk's REST transport keeps only the HTTP status of an error whose reason is not
        // the protocol's (`HTTP Error 503: ...`); every other client shows the gateway's code.
        let status_only = matches!(sdk, Sdk::Python) && *binding == HTTP_JSON;
        let want = match (url.contains("/busy/"), *token) {
            (true, _) if status_only => "HTTP Error 503",
            (true, _) => "AGENT_BUSY",
            (false, Some(t)) if t == ALICE && status_only => "HTTP Error 504",
            (false, Some(t)) if t == ALICE => "AGENT_TIMEOUT",
            // @a2a-js/sdk reads a refusal's JSON-RPC body and keeps its code, not the status.
            (false, Some(t)) if t == BOB => "403|FORBIDDEN",
            _ => "401|UNAUTHORIZED",
        };
        assert!(
            !text.contains("TASK_STATE_COMPLETED"),
            "{sdk:?} {binding}: an error, not a result: {out}"
        );
        assert!(
            want.split('|').any(|w| text.contains(w)),
            "{sdk:?} {binding} {url} {token:?}: {want} readable in {out}"
        );
    }
    release.notify_one();
    let held = holder.await.expect("holder");
    assert!(held.get("result").is_some(), "{held}");
}

#[tokio::test]
async fn what_the_review_found_stays_fixed() {
    // One agent for every case: it answers a continuation of "b-own" with alice's task, a
    // message "impostor" with an error in the gateway's name, "chat" with a Message, and
    // anything else with a new task of the id the message asks for.
    let agent = ScriptedAgent::start(Arc::new(|method, params| {
        let text = params["message"]["parts"][0]["text"].as_str().unwrap_or("");
        match (method, text) {
            ("SendMessage", "impostor") => Answer::Raw(
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "slow down",
                    "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMITED", "domain": "a2a-gateway"}]}})
                .to_string()
                .into_bytes(),
            ),
            ("SendMessage", "chat") => Answer::Result(json!({"message": {"messageId": "m", "role": "ROLE_AGENT",
                "contextId": params["message"]["contextId"], "parts": [{"text": "hi"}]}})),
            ("SendMessage", _) if params["message"]["taskId"] == "b-own" => {
                Answer::Result(json!({"task": task("a-own", "ctx-a", "TASK_STATE_COMPLETED")}))
            }
            ("SendMessage", _) => Answer::Result(json!({"task": task(text, &format!("ctx-{text}"), "TASK_STATE_INPUT_REQUIRED")})),
            // GetTask: the task asked about, as the agent has it.
            _ => {
                let id = params["id"].as_str().unwrap_or("");
                Answer::Result(task(id, &format!("ctx-{id}"), "TASK_STATE_INPUT_REQUIRED"))
            }
        }
    }))
    .await;
    let mut cfg = a2a_agent("v", &agent.base);
    cfg.conformance = a2a_gateway::config::Conformance::Report;
    cfg.passthrough_unknown_tasks = true;
    let (_gw, http) = gateway(vec![cfg], |cfg| {
        two_clients(cfg);
        // Room for three context claims: alice's two and one more.
        cfg.max_tasks = 3;
    })
    .await;
    let a = rpc(
        &http,
        "v",
        Some(ALICE),
        "SendMessage",
        message("a-own", json!({})),
    )
    .await;
    assert_eq!(
        a["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{a}"
    );
    let b = rpc(
        &http,
        "v",
        Some(BOB),
        "SendMessage",
        message("b-own", json!({})),
    )
    .await;
    assert_eq!(b["result"]["task"]["id"], "b-own", "{b}");
    // An answer to bob's continuation that is about alice's task: refused in report mode too,
    // neither relayed nor applied.
    let v = rpc(
        &http,
        "v",
        Some(BOB),
        "SendMessage",
        message("more", json!({"taskId": "b-own"})),
    )
    .await;
    assert_eq!(error_code(&v), -32006, "{v}");
    assert!(!v.to_string().contains("ctx-a"), "{v}");
    let still = rpc(&http, "v", Some(ALICE), "GetTask", json!({"id": "a-own"})).await;
    assert_eq!(
        still["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{still}"
    );
    // passthrough_unknown_tasks does not pass a client that sees only its own tasks through.
    let calls = agent.calls().len();
    let v = rpc(
        &http,
        "v",
        Some(BOB),
        "GetTask",
        json!({"id": "unknown-to-gw"}),
    )
    .await;
    assert_eq!(error_code(&v), -32001, "{v}");
    assert_eq!(agent.calls().len(), calls, "not forwarded");
    // An agent's error in the gateway's domain is the agent's, not the gateway's.
    let v = rpc(
        &http,
        "v",
        Some(ALICE),
        "SendMessage",
        message("impostor", json!({})),
    )
    .await;
    assert_eq!(v["error"]["data"][0]["domain"], "agent", "{v}");
    assert_eq!(v["error"]["data"][0]["reason"], "RATE_LIMITED", "{v}");
    let served = http.get_as("/metrics", OPS).await;
    let impostor = crate::support::metric_value(
        &String::from_utf8_lossy(&served.body),
        "a2a_gateway_a2a_requests_total",
        &[
            ("agent", "v"),
            ("method", "SendMessage"),
            ("outcome", "agent_error"),
        ],
    );
    assert_eq!(impostor, 1.0);
    // Context claims are never evicted: alice's two hold while the store is full, and a new
    // context is refused rather than pushing one out.
    let one = rpc(
        &http,
        "v",
        Some(BOB),
        "SendMessage",
        message("chat", json!({"contextId": "ctx-x"})),
    )
    .await;
    assert!(one.get("result").is_some(), "{one}");
    let full = rpc(
        &http,
        "v",
        Some(BOB),
        "SendMessage",
        message("chat", json!({"contextId": "ctx-y"})),
    )
    .await;
    assert_eq!(
        (error_code(&full), reason(&full)),
        (-32000, "LEDGER_FULL"),
        "{full}"
    );
    let theirs = rpc(
        &http,
        "v",
        Some(BOB),
        "SendMessage",
        message("chat", json!({"contextId": "ctx-a-own"})),
    )
    .await;
    assert_eq!(
        error_code(&theirs),
        -32001,
        "alice's context is still hers: {theirs}"
    );
}

#[tokio::test]
async fn a_retry_after_a_timeout_gets_its_task_whatever_the_clients_limit() {
    let agent = ScriptedAgent::start(Arc::new(|method, _| match method {
        "SendMessage" => Answer::Later(
            Duration::from_millis(1000),
            Box::new(Answer::Result(
                json!({"task": task("late-1", "c", "TASK_STATE_WORKING")}),
            )),
        ),
        _ => Answer::Result(task("late-1", "c", "TASK_STATE_WORKING")),
    }))
    .await;
    let mut cfg = a2a_agent("l", &agent.base);
    cfg.timeout = Duration::from_millis(300);
    let (_gw, http) = gateway(vec![cfg], |cfg| {
        two_clients(cfg);
        cfg.clients[0].max_live_tasks = Some(1);
    })
    .await;
    let m = message("go", json!({}));
    let first = rpc(&http, "l", Some(ALICE), "SendMessage", m.clone()).await;
    assert_eq!(reason(&first), "AGENT_TIMEOUT", "{first}");
    crate::support::wait_for("the late answer recorded", || async {
        rpc(&http, "l", Some(ALICE), "GetTask", json!({"id": "late-1"}))
            .await
            .get("result")
            .is_some()
    })
    .await;
    // alice now holds her one live task: the retry is its answer, not TOO_MANY_TASKS.
    let retry = rpc(&http, "l", Some(ALICE), "SendMessage", m).await;
    assert_eq!(retry["result"]["task"]["id"], "late-1", "{retry}");
    let other = rpc(
        &http,
        "l",
        Some(ALICE),
        "SendMessage",
        message("again", json!({})),
    )
    .await;
    assert_eq!(reason(&other), "TOO_MANY_TASKS", "{other}");
}

#[tokio::test]
async fn what_the_second_review_found_stays_fixed() {
    let agent = ScriptedAgent::start(Arc::new(|method, params| {
        let text = params["message"]["parts"][0]["text"].as_str().unwrap_or("");
        match (method, text) {
            // A proxy's 502 in front of the agent: no A2A error in the body.
            ("SendMessage", "proxy down") => Answer::Status(502, b"bad gateway".to_vec()),
            ("SendMessage", "refuse") => Answer::Raw(
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32004, "message": "no"}})
                    .to_string()
                    .into_bytes(),
            ),
            ("SendMessage", _) => {
                Answer::Result(json!({"task": task("s-1", "ctx-s", "TASK_STATE_WORKING")}))
            }
            // GetTask answered about another task than the one asked about.
            _ => Answer::Result(task("someone-else", "c", "TASK_STATE_WORKING")),
        }
    }))
    .await;
    let mut cfg = a2a_agent("w", &agent.base);
    cfg.conformance = a2a_gateway::config::Conformance::Report;
    cfg.eject_after = 0;
    let (_gw, http) = gateway(vec![cfg], two_clients).await;
    // The gateway's own AGENT_UNREACHABLE stays in its own domain.
    let v = rpc(
        &http,
        "w",
        Some(ALICE),
        "SendMessage",
        message("proxy down", json!({})),
    )
    .await;
    assert_eq!(reason(&v), "AGENT_UNREACHABLE", "{v}");
    assert_eq!(v["error"]["data"][0]["domain"], "a2a-gateway", "{v}");
    // A message the agent refused claims no context: another client may then use it.
    let v = rpc(
        &http,
        "w",
        Some(BOB),
        "SendMessage",
        message("refuse", json!({"contextId": "ctx-free"})),
    )
    .await;
    assert_eq!(error_code(&v), -32004, "{v}");
    let v = rpc(
        &http,
        "w",
        Some(ALICE),
        "SendMessage",
        message("hello", json!({"contextId": "ctx-free"})),
    )
    .await;
    assert_eq!(v["result"]["task"]["id"], "s-1", "{v}");
    // An answer about another task is refused in report mode too.
    let v = rpc(&http, "w", Some(ALICE), "GetTask", json!({"id": "s-1"})).await;
    assert_eq!(error_code(&v), -32006, "{v}");
    assert!(!v.to_string().contains("someone-else\",\"contextId"), "{v}");
}
