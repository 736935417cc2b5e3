//! The official A2A routes at their edges: the extended card, reloads that change an agent's
//! protocol or binding, subscribers' `protocols`, `report` mode, and each binding's own shapes
//! for refusals before admission and for JSON-RPC's own errors.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use serde_json::{json, Value};

use crate::a2a_gateway::{a2a_agent, gateway};
use crate::support::a2a_calls::*;
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::redis_server::RedisServer;
use crate::support::Http;

#[tokio::test]
async fn the_extended_card_is_forwarded_with_the_agents_credential_and_rewritten() {
    let agent = ScriptedAgent::start(Arc::new(|method, _| match method {
        "GetExtendedAgentCard" => {
            let mut c = crate::support::a2a_script::card("http://agent.internal.example:7/rpc");
            c["name"] = json!("Scripted, extended");
            c["documentationUrl"] = json!("http://agent.internal.example:7/docs");
            c["signatures"] = json!([{"protected": "x", "signature": "y"}]);
            Answer::Result(c)
        }
        _ => Answer::Result(task("t", "c", "TASK_STATE_WORKING")),
    }))
    .await;
    let mut card = crate::support::a2a_script::card(&format!("{}/rpc", agent.base));
    card["capabilities"]["extendedAgentCard"] = json!(true);
    agent.set_card(card);
    let mut cfg = a2a_agent("x", &agent.base);
    cfg.upstream_auth_header = Some((
        hyper::header::AUTHORIZATION,
        a2a_gateway::config::Secret::new("Bearer agent-own-credential"),
    ));
    let (_gw, http) = gateway(vec![cfg], two_clients).await;
    let v = rpc(&http, "x", Some(ALICE), "GetExtendedAgentCard", json!({})).await;
    let served = &v["result"];
    assert_eq!(served["name"], "Scripted, extended", "{v}");
    assert_eq!(
        served["supportedInterfaces"][1]["url"],
        format!("{}/agents/x/jsonrpc", http.base)
    );
    assert!(
        served.get("documentationUrl").is_none() && served.get("signatures").is_none(),
        "{served}"
    );
    assert!(
        !served.to_string().contains("agent.internal.example"),
        "{served}"
    );
    let r = rest(
        &http,
        Method::GET,
        "/agents/x/extendedAgentCard",
        Some(ALICE),
        None,
    )
    .await;
    assert_eq!(r.json()["name"], "Scripted, extended", "{r:?}");
    // The agent got its own credential, never the client's.
    let calls = agent.calls();
    assert!(!calls.is_empty());
    for c in &calls {
        assert_eq!(
            c["headers"]["authorization"], "Bearer agent-own-credential",
            "{c}"
        );
    }
}

#[tokio::test]
async fn a_reload_that_changes_the_protocol_makes_a_new_agent() {
    let (old, g) = crate::support::single("x", |_| {}).await;
    let done = g.create_task("x").await;
    let live = g.create_task("x").await;
    let finished = old
        .set_status(&done, "COMPLETED", crate::support::fields_for("COMPLETED"))
        .expect("task");
    assert_eq!(finished["status"], "COMPLETED");
    let r = g.http.get(&format!("/agents/x/tasks/{done}")).await;
    assert_eq!(r.json()["status"], "COMPLETED", "{r:?}");
    let scripted = ScriptedAgent::start(Arc::new(|_, _| {
        Answer::Result(task("t", "c", "TASK_STATE_WORKING"))
    }))
    .await;
    let mut next = g.gw.config().as_ref().clone();
    next.agents[0] = a2a_agent("x", &scripted.base);
    g.gw.reload(next).await.expect("applied");
    crate::support::wait_for("the A2A card", || async {
        g.http
            .get("/agents/x/.well-known/agent-card.json")
            .await
            .status
            == 200
    })
    .await;
    // The final Clawpedia task is still readable from the ledger; the live one is not found.
    let r = g.http.get(&format!("/tasks/{done}")).await;
    assert_eq!(
        (r.status, r.json()["status"].clone()),
        (200, json!("COMPLETED")),
        "{r:?}"
    );
    let r = g.http.get(&format!("/tasks/{live}")).await;
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (404, "TASK_NOT_FOUND"),
        "{r:?}"
    );
    // Under /agents/x/ the routes are A2A's, and the old ids are not its tasks.
    let v = rpc(&g.http, "x", None, "GetTask", json!({ "id": live })).await;
    assert_eq!(error_code(&v), -32001, "{v}");
    assert!(scripted.calls().is_empty(), "{:?}", scripted.methods());
}

/// A2A changes reach only the subscribers that list `protocols = ["a2a"]`, on both stores, with
/// the protocol and the agent beside the Task; a Clawpedia subscriber's payloads keep their shape.
async fn only_a2a_subscribers_hear_of_a2a_tasks(redis: Option<a2a_gateway::config::RedisConfig>) {
    use crate::support::hook::Hook;
    use a2a_gateway::config::{Protocol, SubscriberConfig};
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = ScriptedAgent::start(reopening(calls)).await;
    let (a2a_hook, claw_hook) = (Hook::start().await, Hook::start().await);
    let mut both = SubscriberConfig::new("both", &a2a_hook.url());
    both.protocols = Some(vec![Protocol::Clawpedia, Protocol::A2a]);
    let plain = SubscriberConfig::new("plain", &claw_hook.url());
    let (_gw, http) = gateway(vec![a2a_agent("s", &agent.base)], move |cfg| {
        cfg.subscribers = vec![both, plain];
        cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
        cfg.redis = redis;
    })
    .await;
    let sent = rpc(&http, "s", None, "SendMessage", message("go", json!({}))).await;
    assert_eq!(sent["result"]["task"]["id"], "t-1", "{sent}");
    crate::support::wait_for("the A2A delivery", || async { a2a_hook.count() >= 1 }).await;
    let d = a2a_hook.received()[0].json();
    assert_eq!(d["event_type"], "task.status.updated", "{d}");
    assert_eq!(
        (d["protocol"].as_str(), d["agent"].as_str()),
        (Some("a2a"), Some("s")),
        "{d}"
    );
    assert_eq!(d["data"]["id"], "t-1");
    assert_eq!(d["data"]["status"]["state"], "TASK_STATE_COMPLETED");
    // The default subscriber hears nothing of it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(claw_hook.count(), 0);
}

#[tokio::test]
async fn only_a2a_subscribers_hear_of_a2a_tasks_in_process() {
    only_a2a_subscribers_hear_of_a2a_tasks(None).await;
}

#[tokio::test]
async fn only_a2a_subscribers_hear_of_a2a_tasks_on_redis() {
    let redis = RedisServer::start();
    only_a2a_subscribers_hear_of_a2a_tasks(Some(redis.config("a2a-hooks"))).await;
}

#[tokio::test]
async fn report_mode_relays_a_broken_answer_and_counts_it() {
    let agent = ScriptedAgent::start(Arc::new(|_, _| {
        let mut t = task("r-1", "c", "TASK_STATE_WORKING");
        t["status"]["state"] = json!("TASK_STATE_EXPLODED");
        Answer::Result(json!({ "task": t }))
    }))
    .await;
    let mut cfg = a2a_agent("r", &agent.base);
    cfg.conformance = a2a_gateway::config::Conformance::Report;
    let (_gw, http) = gateway(vec![cfg], |_| {}).await;
    let v = rpc(&http, "r", None, "SendMessage", message("go", json!({}))).await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_EXPLODED",
        "{v}"
    );
    let counted = http
        .metric(
            "a2a_gateway_protocol_violations_total",
            &[("agent", "r"), ("mode", "report")],
        )
        .await;
    assert_eq!(counted, 1.0);
    // Unreadable, so not recorded.
    let got = rpc(&http, "r", None, "GetTask", json!({"id": "r-1"})).await;
    assert_eq!(error_code(&got), -32001, "{got}");
}

#[tokio::test]
async fn the_edges_answer_in_each_bindings_own_shape() {
    let agent = ScriptedAgent::start(Arc::new(|_, params| {
        Answer::Result(json!({"task": task("e-1", "c", "TASK_STATE_COMPLETED"), "echo": params}))
    }))
    .await;
    let (_gw, http) = gateway(vec![a2a_agent("e", &agent.base)], |cfg| {
        two_clients(cfg);
        cfg.clients[1].rate_per_sec = Some(0.001);
        cfg.clients[1].burst = Some(1);
        cfg.max_body_bytes = 4096;
    })
    .await;
    let alice = format!("Bearer {ALICE}");
    let json_rpc = |id: &str, method: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"id":"nope"}}}}"#)
    };
    let rpc_headers = [
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
        ("authorization", alice.as_str()),
    ];
    // JSON-RPC's own errors, with the id echoed exactly (an integer stays an integer).
    for (body, code, id) in [
        ("{not json".to_owned(), -32700, Value::Null),
        ("[1, 2]".to_owned(), -32600, Value::Null),
        (
            r#"{"jsonrpc":"2.0","method":"GetTask","params":{}}"#.to_owned(),
            -32600,
            Value::Null,
        ),
        (
            json_rpc(&format!("\"{}\"", "x".repeat(129)), "GetTask"),
            -32600,
            Value::Null,
        ),
        (json_rpc("7", "NoSuchMethod"), -32601, json!(7)),
        (json_rpc("\"s-1\"", "GetTask"), -32001, json!("s-1")),
        (
            json_rpc("12345678901234567890", "GetTask"),
            -32001,
            json!(12345678901234567890u64),
        ),
    ] {
        let (status, _, v) = raw(
            &http,
            Method::POST,
            "/agents/e/jsonrpc",
            &rpc_headers,
            &body,
        )
        .await;
        assert_eq!(
            (status, error_code(&v), v["id"].clone()),
            (200, code, id),
            "{body}: {v}"
        );
    }
    // Versions: absent and 0.3 are refused on both bindings; the query parameter serves.
    for version in [None, Some("0.3"), Some("")] {
        let mut h = vec![
            ("content-type", "application/json"),
            ("authorization", alice.as_str()),
        ];
        if let Some(v) = version {
            h.push(("a2a-version", v));
        }
        let (_, _, v) = raw(
            &http,
            Method::POST,
            "/agents/e/jsonrpc",
            &h,
            &json_rpc("1", "GetTask"),
        )
        .await;
        assert_eq!(error_code(&v), -32009, "{version:?}: {v}");
        let (status, _, v) = raw(&http, Method::GET, "/agents/e/tasks/nope", &h, "").await;
        assert_eq!(status, 400, "{version:?}: {v}");
        assert_eq!(
            v["error"]["details"][0]["reason"], "VERSION_NOT_SUPPORTED",
            "{v}"
        );
    }
    let auth = [("authorization", alice.as_str())];
    let (status, _, v) = raw(
        &http,
        Method::GET,
        "/agents/e/tasks/nope?A2A-Version=1.0",
        &auth,
        "",
    )
    .await;
    assert_eq!(
        (status, v["error"]["details"][0]["reason"].clone()),
        (404, json!("TASK_NOT_FOUND")),
        "{v}"
    );
    // Refusals before admission keep their HTTP status on both bindings: 401 with
    // WWW-Authenticate, 413, 415, 429 with Retry-After; JSON-RPC's carry id null.
    let (status, r, v) = raw(
        &http,
        Method::POST,
        "/agents/e/jsonrpc",
        &[("content-type", "application/json"), ("a2a-version", "1.0")],
        &json_rpc("1", "GetTask"),
    )
    .await;
    assert_eq!(status, 401, "{v}");
    assert!(
        r.header("www-authenticate")
            .is_some_and(|h| h.starts_with("Bearer")),
        "{r:?}"
    );
    assert_eq!(
        (v["id"].clone(), v["error"]["data"][0]["reason"].clone()),
        (Value::Null, json!("UNAUTHORIZED")),
        "{v}"
    );
    // Without A2A-Version the request is 0.3's (§3.6), and so is its refusal: the same status,
    // 0.3's error (no ErrorInfo: `data` is an object naming the reason).
    let (status, _, v) = raw(
        &http,
        Method::POST,
        "/agents/e/jsonrpc",
        &[("content-type", "application/json")],
        &json_rpc("1", "GetTask"),
    )
    .await;
    assert_eq!(status, 401, "{v}");
    assert_eq!(
        (
            v["id"].clone(),
            v["error"]["code"].clone(),
            v["error"]["data"]["reason"].clone()
        ),
        (Value::Null, json!(-32000), json!("UNAUTHORIZED")),
        "{v}"
    );
    let (status, r, v) = raw(
        &http,
        Method::GET,
        "/agents/e/tasks/x",
        &[("a2a-version", "1.0")],
        "",
    )
    .await;
    assert_eq!(status, 401, "{v}");
    assert!(
        r.header("www-authenticate")
            .is_some_and(|h| h.starts_with("Bearer")),
        "{r:?}"
    );
    assert_eq!(v["error"]["status"], "UNAUTHENTICATED", "{v}");
    let big = format!(
        r#"{{"message":{{"messageId":"m","role":"ROLE_USER","parts":[{{"text":"{}"}}]}}}}"#,
        "x".repeat(8192)
    );
    let (status, _, v) = raw(
        &http,
        Method::POST,
        "/agents/e/message:send",
        &rpc_headers,
        &big,
    )
    .await;
    assert_eq!(
        (status, v["error"]["details"][0]["reason"].clone()),
        (413, json!("PAYLOAD_TOO_LARGE")),
        "{v}"
    );
    let text = [
        ("content-type", "text/plain"),
        ("a2a-version", "1.0"),
        ("authorization", alice.as_str()),
    ];
    let (status, _, v) = raw(
        &http,
        Method::POST,
        "/agents/e/jsonrpc",
        &text,
        &json_rpc("1", "GetTask"),
    )
    .await;
    assert_eq!(
        (
            status,
            v["id"].clone(),
            v["error"]["data"][0]["reason"].clone()
        ),
        (415, Value::Null, json!("UNSUPPORTED_MEDIA_TYPE")),
        "{v}"
    );
    let bob = format!("Bearer {BOB}");
    let bob_headers = [
        ("content-type", "application/json"),
        ("a2a-version", "1.0"),
        ("authorization", bob.as_str()),
    ];
    let _first = raw(
        &http,
        Method::POST,
        "/agents/e/jsonrpc",
        &bob_headers,
        &json_rpc("1", "GetTask"),
    )
    .await;
    let (status, r, v) = raw(
        &http,
        Method::POST,
        "/agents/e/jsonrpc",
        &bob_headers,
        &json_rpc("2", "GetTask"),
    )
    .await;
    assert_eq!(
        (status, v["error"]["data"][0]["reason"].clone()),
        (429, json!("RATE_LIMITED")),
        "{v}"
    );
    assert!(r.header("retry-after").is_some(), "{r:?}");
    let (status, r, v) = raw(&http, Method::GET, "/agents/e/tasks/x", &bob_headers, "").await;
    assert_eq!(
        (status, v["error"]["details"][0]["reason"].clone()),
        (429, json!("RATE_LIMITED")),
        "{v}"
    );
    assert!(r.header("retry-after").is_some(), "{r:?}");
    // An inline push config the webhook guard refuses is InvalidParams with the reason, and
    // the message never reaches the agent; A2A-Extensions does.
    let mut m = message("hook me", json!({}));
    m["configuration"] = json!({"taskPushNotificationConfig": {"url": "http://169.254.169.254/"}});
    let v = rpc(&http, "e", Some(ALICE), "SendMessage", m).await;
    assert_eq!(error_code(&v), -32602, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("169.254.169.254")),
        "{v}"
    );
    assert!(agent.calls().is_empty(), "{:?}", agent.calls());
    let ext = [
        ("content-type", "application/a2a+json"),
        ("a2a-version", "1.0"),
        ("a2a-extensions", "https://example.com/ext/v1"),
        ("authorization", alice.as_str()),
    ];
    let mut body = message("with extension", json!({}));
    body["vendorField"] = json!({"kept": [1, 2]});
    let body = body.to_string();
    let (status, _, v) = raw(&http, Method::POST, "/agents/e/message:send", &ext, &body).await;
    assert_eq!(status, 200, "{v}");
    let calls = agent.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        calls[0]["headers"]["a2a-extensions"],
        "https://example.com/ext/v1"
    );
    assert_eq!(calls[0]["headers"]["a2a-version"], "1.0");
    // Fields the proto does not know pass through untouched.
    assert_eq!(
        calls[0]["params"]["vendorField"],
        json!({"kept": [1, 2]}),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_reload_from_a2a_to_clawpedia_keeps_final_a2a_tasks_readable_at_a2a() {
    let agent = ScriptedAgent::start(Arc::new(|_, params| {
        let text = params["message"]["parts"][0]["text"].as_str().unwrap_or("");
        let state = if text == "done" {
            "TASK_STATE_COMPLETED"
        } else {
            "TASK_STATE_WORKING"
        };
        Answer::Result(json!({"task": task(text, "c", state)}))
    }))
    .await;
    let (gw, http) = gateway(vec![a2a_agent("x", &agent.base)], |_| {}).await;
    for text in ["done", "live"] {
        let v = rpc(&http, "x", None, "SendMessage", message(text, json!({}))).await;
        assert_eq!(v["result"]["task"]["id"], text, "{v}");
    }
    let sample = crate::support::agent().await;
    let mut next = gw.config().as_ref().clone();
    next.agents[0] = a2a_gateway::config::AgentConfig::new("x", &sample.base_url());
    gw.reload(next).await.expect("applied");
    crate::support::wait_for("the Clawpedia card", || async {
        http.get("/agents/x/agent-card.json").await.status == 200
    })
    .await;
    let got = rpc(
        &http,
        "",
        None,
        "GetTask",
        json!({"id": "done", "tenant": "x"}),
    )
    .await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    let cancel = rpc(
        &http,
        "",
        None,
        "CancelTask",
        json!({"id": "done", "tenant": "x"}),
    )
    .await;
    assert_eq!(error_code(&cancel), -32002, "{cancel}");
    let live = rpc(
        &http,
        "",
        None,
        "GetTask",
        json!({"id": "live", "tenant": "x"}),
    )
    .await;
    assert_eq!(error_code(&live), -32001, "{live}");
    assert_eq!(agent.methods(), ["SendMessage", "SendMessage"]);
}

#[tokio::test]
async fn binding_chooses_the_interface_and_a_reload_of_it_keeps_the_agent() {
    // The scripted agent speaks JSON-RPC only, though its card lists HTTP+JSON first.
    let agent = ScriptedAgent::start(Arc::new(|_, _| {
        Answer::Result(json!({"task": task("b-1", "c", "TASK_STATE_COMPLETED")}))
    }))
    .await;
    let mut card = crate::support::a2a_script::card(&format!("{}/rpc", agent.base));
    card["supportedInterfaces"] = json!([
        {"url": format!("{}/rest", agent.base), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": format!("{}/rpc", agent.base), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    ]);
    agent.set_card(card);
    let (gw, http) = gateway(vec![a2a_agent("b", &agent.base)], |_| {}).await;
    let listed = http.get("/agents").await.json();
    assert_eq!(listed["agents"][0]["binding"], "HTTP+JSON", "{listed}");
    let v = rpc(&http, "b", None, "SendMessage", message("go", json!({}))).await;
    assert_eq!(
        error_code(&v),
        -32006,
        "a JSON-RPC answer to a REST call: {v}"
    );
    let mut next = gw.config().as_ref().clone();
    next.agents[0].binding = Some(a2a_gateway::config::Binding::JsonRpc);
    gw.reload(next).await.expect("applied");
    crate::support::wait_for("the card compiled for JSONRPC", || async {
        http.get("/agents").await.json()["agents"][0]["binding"] == "JSONRPC"
    })
    .await;
    let v = rpc(&http, "b", None, "SendMessage", message("go", json!({}))).await;
    assert_eq!(v["result"]["task"]["id"], "b-1", "{v}");
    let rest_calls = agent
        .calls()
        .iter()
        .filter(|c| c["method"].is_null())
        .count();
    assert_eq!(
        rest_calls, 1,
        "one REST call before the reload, JSON-RPC after"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_made_while_the_ledger_is_down_is_recorded_once_it_is_back() {
    let mut redis = RedisServer::start();
    let agent = ScriptedAgent::start(Arc::new(|method, _| match method {
        "SendMessage" => Answer::Later(
            Duration::from_millis(1500),
            Box::new(Answer::Result(
                json!({"task": task("p-1", "c", "TASK_STATE_COMPLETED")}),
            )),
        ),
        _ => Answer::Result(task("p-1", "c", "TASK_STATE_WORKING")),
    }))
    .await;
    let config = redis.config("a2a-pending");
    let (_gw, http) = gateway(vec![a2a_agent("p", &agent.base)], move |cfg| {
        cfg.redis = Some(config);
    })
    .await;
    let sender = {
        let http = Http::new(http.base.clone());
        tokio::spawn(
            async move { rpc(&http, "p", None, "SendMessage", message("go", json!({}))).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    redis.kill();
    // The agent made the task: the client gets it, not an error that would make it send again.
    let sent = sender.await.expect("the send");
    assert_eq!(sent["result"]["task"]["id"], "p-1", "{sent}");
    redis.restart();
    crate::support::wait_for("the task recorded once the ledger is back", || async {
        let got = rpc(&http, "p", None, "GetTask", json!({"id": "p-1"})).await;
        got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    })
    .await;
    // Final in the ledger: answered from it, the agent asked nothing more.
    assert_eq!(agent.methods(), ["SendMessage"]);
}

#[tokio::test]
async fn a_far_future_timestamp_does_not_freeze_a_task() {
    let agent = ScriptedAgent::start(Arc::new(|method, _| {
        if method == "SendMessage" {
            let mut t = task("f-1", "c", "TASK_STATE_WORKING");
            t["status"]["timestamp"] = json!("2100-01-01T00:00:00.000Z");
            Answer::Result(json!({ "task": t }))
        } else {
            Answer::Result(task("f-1", "c", "TASK_STATE_COMPLETED"))
        }
    }))
    .await;
    let (_gw, http) = gateway(vec![a2a_agent("f", &agent.base)], |_| {}).await;
    let sent = rpc(&http, "f", None, "SendMessage", message("go", json!({}))).await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{sent}"
    );
    // Recorded at the time of recording, not in 2100: the agent's next answer moves it on.
    let got = rpc(&http, "f", None, "GetTask", json!({"id": "f-1"})).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
}

#[tokio::test]
async fn the_fleet_endpoint_takes_every_method_with_its_tenant() {
    let script = || {
        ScriptedAgent::start(Arc::new(|_, params| {
            let text = params["message"]["parts"][0]["text"]
                .as_str()
                .unwrap_or("t");
            let id = params["id"].as_str().unwrap_or(text);
            Answer::Result(json!({"task": task(id, &format!("ctx-{id}"), "TASK_STATE_COMPLETED")}))
        }))
    };
    let (one, two) = (script().await, script().await);
    let (_gw, http) = gateway(
        vec![a2a_agent("one", &one.base), a2a_agent("two", &two.base)],
        |cfg| {
            use a2a_gateway::config::Right::*;
            cfg.clients = vec![
                crate::auth::client("alice", ALICE, &["one"], &[Tasks]),
                crate::auth::client("bob", BOB, &["*"], &[Tasks]),
            ];
        },
    )
    .await;
    // SendMessage names its agent; the task is then found without one.
    let mut m = message("fleet-1", json!({}));
    m["tenant"] = json!("one");
    let sent = rpc(&http, "", Some(ALICE), "SendMessage", m).await;
    assert_eq!(sent["result"]["task"]["id"], "fleet-1", "{sent}");
    let got = rpc(&http, "", Some(ALICE), "GetTask", json!({"id": "fleet-1"})).await;
    assert_eq!(got["result"]["id"], "fleet-1", "{got}");
    // CancelTask finds it too: final, so not cancelable (an unknown id would be not found).
    let cancel = rpc(
        &http,
        "",
        Some(ALICE),
        "CancelTask",
        json!({"id": "fleet-1"}),
    )
    .await;
    assert_eq!(error_code(&cancel), -32002, "{cancel}");
    let missing = rpc(
        &http,
        "",
        Some(ALICE),
        "CancelTask",
        json!({"id": "no-such"}),
    )
    .await;
    assert_eq!(error_code(&missing), -32001, "{missing}");
    // ListTasks lists it, with a tenant or without.
    for params in [json!({}), json!({"tenant": "one"})] {
        let v = rpc(&http, "", Some(ALICE), "ListTasks", params.clone()).await;
        let ids: Vec<&str> = v["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("{params}: {v}"))
            .iter()
            .filter_map(|t| t["id"].as_str())
            .collect();
        assert!(ids.contains(&"fleet-1"), "{params}: {v}");
    }
    let v = rpc(
        &http,
        "",
        Some(ALICE),
        "ListTasks",
        json!({"tenant": "two"}),
    )
    .await;
    assert_eq!(error_code(&v), -32602, "a tenant alice may not use: {v}");
    // Found without a tenant: the task is alice's, and it has no config "c".
    let push = rpc(
        &http,
        "",
        Some(ALICE),
        "GetTaskPushNotificationConfig",
        json!({"taskId": "fleet-1", "id": "c"}),
    )
    .await;
    assert_eq!(error_code(&push), -32001, "{push}");
    assert!(
        push["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no push config")),
        "{push}"
    );
    // The agent got its own interface's tenant (none), never the client's.
    assert!(
        one.calls()[0]["params"].get("tenant").is_none(),
        "{:?}",
        one.calls()
    );
    // Without a tenant, SendMessage is InvalidParams naming it.
    let v = rpc(
        &http,
        "",
        Some(ALICE),
        "SendMessage",
        message("x", json!({})),
    )
    .await;
    assert_eq!(error_code(&v), -32602, "{v}");
    assert!(v.to_string().contains("tenant"), "{v}");
    // An unknown tenant and one the caller may not use: the same refusal.
    let mut refused = Vec::new();
    for tenant in ["nope", "two"] {
        let mut m = message("x", json!({}));
        m["tenant"] = json!(tenant);
        let v = rpc(&http, "", Some(ALICE), "SendMessage", m).await;
        assert_eq!(error_code(&v), -32602, "{tenant}: {v}");
        refused.push(
            v["error"]["message"]
                .as_str()
                .unwrap_or("")
                .replace(tenant, "T"),
        );
    }
    assert_eq!(refused[0], refused[1]);
    assert!(two.calls().is_empty(), "{:?}", two.calls());
    // Two agents holding one id for one caller: the tenant is required.
    for agent in ["one", "two"] {
        let mut m = message("dup", json!({}));
        m["tenant"] = json!(agent);
        let v = rpc(&http, "", Some(BOB), "SendMessage", m).await;
        assert_eq!(v["result"]["task"]["id"], "dup", "{v}");
    }
    let v = rpc(&http, "", Some(BOB), "GetTask", json!({"id": "dup"})).await;
    assert_eq!(error_code(&v), -32602, "{v}");
    assert!(v.to_string().contains("tenant required"), "{v}");
    let v = rpc(
        &http,
        "",
        Some(BOB),
        "GetTask",
        json!({"id": "dup", "tenant": "two"}),
    )
    .await;
    assert_eq!(v["result"]["id"], "dup", "{v}");
}

#[tokio::test]
async fn the_catalog_gives_each_agent_its_protocol_served_card_and_binding() {
    let scripted = ScriptedAgent::start(Arc::new(|_, _| {
        Answer::Result(task("t", "c", "TASK_STATE_WORKING"))
    }))
    .await;
    let base = scripted.base.clone();
    let (_claw, g) = crate::support::single("claw", move |cfg| {
        cfg.agents.push(a2a_agent("echo", &base));
    })
    .await;
    let r = g
        .http
        .send(
            Method::GET,
            "/agents",
            &[("host", "gw.example.test:8443")],
            bytes::Bytes::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    // Built from the request's Host (no public_url): the answer says so.
    assert_eq!(r.header("vary"), Some("host"));
    let agents = r.json()["agents"].as_array().cloned().expect("agents");
    let by = |name: &str| {
        agents
            .iter()
            .find(|a| a["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {agents:?}"))
    };
    let (claw, echo) = (by("claw"), by("echo"));
    assert_eq!(claw["protocol"], "clawpedia");
    assert_eq!(
        claw["card_url"],
        "http://gw.example.test:8443/agents/claw/agent-card.json"
    );
    assert!(claw.get("binding").is_none(), "{claw}");
    assert_eq!(echo["protocol"], "a2a");
    assert_eq!(echo["binding"], "JSONRPC");
    assert_eq!(
        echo["card_url"],
        "http://gw.example.test:8443/agents/echo/.well-known/agent-card.json"
    );
    // Each is the card the gateway serves.
    for entry in [claw, echo] {
        let url = entry["card_url"].as_str().expect("card_url");
        let path = url.trim_start_matches("http://gw.example.test:8443");
        let card = g.http.get(path).await;
        assert_eq!(card.status, 200, "{path}: {card:?}");
    }
}
