//! No official A2A agent's address reaches a client, on every path (issue 43). A hostile agent
//! writes its own address, in every spelling a browser reads as it, into every address field
//! it can: Part URLs in artifacts, history and status messages, stream events and its pushes;
//! its card's URL fields and fields the proto does not know; its error texts; Location, Link
//! and Content-Location headers. A client without `metrics` or `admin` then reads everything
//! there is to read (every A2A method on both bindings and at `/a2a`, streams, the served
//! cards, ListTasks, `GET /tasks`, `/events`) and a push receiver gets its deliveries: free
//! text aside, none of it names the agent's origin. And the file a rewritten URL names is
//! its task owner's to fetch (and a client's that sees every task), 404 for another client,
//! and nothing else of the agent is reachable through the route.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderMap;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use a2a_gateway::config::{Config, Right};
use a2a_gateway::Gateway;

use crate::a2a_gateway::{a2a_agent, gateway};
use crate::auth::client;
use crate::support::a2a_calls::{rest, rpc};
use crate::support::a2a_script::{self, Answer, ScriptedAgent};
use crate::support::hook::Hook;
use crate::support::{wait_for, Http, Resp};

const ALICE: &str = "alice-key-0123456789abcdef";
const BOB: &str = "bob-key-0123456789abcdef01";
const OPS: &str = "ops-key-0123456789abcdef012";
/// What the agent serves at `/files/secret.bin`.
const SECRET: &[u8] = b"the secret file's contents\n";
/// In the agent's error texts: no client without the right may read it.
const PASSWORD: &str = "hunter2";

/// alice: tasks, streams, events. bob: the same. ops: everything (metrics, admin, all tasks).
fn clients(cfg: &mut Config) {
    use Right::*;
    cfg.clients = vec![
        client("alice", ALICE, &["*"], &[Tasks, Streams, Events]),
        client("bob", BOB, &["*"], &[Tasks, Streams, Events]),
        client(
            "ops",
            OPS,
            &["*"],
            &[Tasks, Streams, Events, AllTasks, Metrics, Admin],
        ),
    ];
    cfg.webhooks.allow = vec!["127.0.0.1/32".into()];
}

/// Every spelling of the agent's origin `http://127.0.0.1:{port}` the agent writes.
struct Spellings {
    base: String,
    port: String,
}

impl Spellings {
    fn of(base: &str) -> Spellings {
        let port = base.rsplit(':').next().expect("a port").to_owned();
        Spellings {
            base: base.to_owned(),
            port,
        }
    }
    fn plain(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
    fn localhost(&self, path: &str) -> String {
        format!("http://localhost:{}{path}", self.port)
    }
    fn short(&self, path: &str) -> String {
        format!("http://127.1:{}{path}", self.port)
    }
    fn encoded(&self, path: &str) -> String {
        format!("HTTP://%31%32%37.0.0.1:{}{path}", self.port)
    }
    fn v6(&self, path: &str) -> String {
        format!("http://[::1]:{}{path}", self.port)
    }
    fn relative(&self, path: &str) -> String {
        format!("//127.0.0.1.:{}{path}", self.port)
    }

    /// Whether `text` names the origin: its port after a `:` (or `%3A`), as any spelling of
    /// `host:port` writes it, and not followed by another digit.
    fn named_in(&self, text: &str) -> bool {
        let lower = text.to_ascii_lowercase();
        [":", "%3a"].iter().any(|sep| {
            let needle = format!("{sep}{}", self.port);
            lower.match_indices(&needle).any(|(at, _)| {
                !lower[at + needle.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit())
            })
        })
    }
}

/// A Task of the agent's own making: its address in a Part URL of the status message, of the
/// history (the client's message and the agent's), of an artifact, each spelled otherwise,
/// beside a presigned URL elsewhere and free text naming it.
fn hostile_task(s: &Spellings, id: &str, state: &str) -> Value {
    let mut t = a2a_script::task(id, "ctx-h", state);
    t["status"]["message"] = json!({"messageId": format!("s-{id}"), "role": "ROLE_AGENT",
        "parts": [{"url": s.encoded("/files/status.bin"), "mediaType": "application/octet-stream"},
                  {"text": format!("free text: {}", s.plain("/readme"))}]});
    t["history"] = json!([
        {"messageId": format!("h1-{id}"), "role": "ROLE_USER", "parts": [{"url": s.short("/files/history.bin")}]},
        {"messageId": format!("h2-{id}"), "role": "ROLE_AGENT", "parts": [{"url": s.localhost("/files/secret.bin")}]},
    ]);
    t["artifacts"] = json!([{"artifactId": "a1", "name": "secret", "parts": [
        {"url": s.plain("/files/secret.bin"), "filename": "secret.bin"},
        {"url": "https://cdn.example.com/presigned.bin?sig=1"},
    ]}]);
    t
}

/// A JSON-RPC error naming the agent's address and a password, in the message, the
/// ErrorInfo's reason and metadata and a field violation (`id` null: the agent did not read
/// the gateway's).
fn hostile_error(s: &Spellings, code: i64, reason: &str) -> String {
    let at = s.plain(&format!("/db?password={PASSWORD}"));
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code,
        "message": format!("internal error at {at}"),
        "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                  "domain": s.localhost(""), "metadata": {"where": at}},
                 {"@type": "type.googleapis.com/google.rpc.BadRequest",
                  "fieldViolations": [{"field": "id", "description": at}]}]}})
    .to_string()
}

/// The agent's card: its address in every URL field, and in fields the proto does not know.
fn hostile_card(s: &Spellings) -> Value {
    let mut c = a2a_script::card(&s.plain("/rpc"));
    c["capabilities"] = json!({"streaming": true, "pushNotifications": true,
        "extendedAgentCard": true, "x-debug": s.plain("/debug"),
        "extensions": [{"uri": s.v6("/ext"), "description": "the agent's own"}]});
    c["documentationUrl"] = json!(s.localhost("/docs"));
    c["iconUrl"] = json!(s.short("/icon.png"));
    c["provider"] = json!({"organization": "Hostile", "url": s.encoded("/"),
        "x-contact": s.plain("/who")});
    c["x-internal"] = json!(s.plain("/internal"));
    c["skills"][0]["x-endpoint"] = json!(s.plain("/skill"));
    c["url"] = json!(s.plain("/v03"));
    c
}

/// The agent's stream of a task: the Task, a status with a message naming it, an artifact
/// naming it, then `last` (a final or interrupted state, so the stream closes).
fn hostile_events(s: &Spellings, id: &str, last: &str) -> Answer {
    let (tx, answer) = a2a_script::events();
    let events = [
        json!({"task": hostile_task(s, id, "TASK_STATE_WORKING")}),
        json!({"statusUpdate": {"taskId": id, "contextId": "ctx-h", "status": {
            "state": "TASK_STATE_WORKING", "message": {"messageId": format!("e1-{id}"),
            "role": "ROLE_AGENT", "parts": [{"url": s.v6("/files/stream.bin")}]}}}}),
        json!({"artifactUpdate": {"taskId": id, "contextId": "ctx-h", "artifact": {
            "artifactId": "a2", "parts": [{"url": s.relative("/files/stream.bin")}]}}}),
        json!({"statusUpdate": {"taskId": id, "contextId": "ctx-h", "status": {"state": last}}}),
    ];
    for e in events {
        let _ = tx.try_send(e);
    }
    answer
}

/// The hostile agent's script (`base` is its own address once it listens).
fn script(base: Arc<OnceLock<String>>, made: Arc<AtomicUsize>) -> a2a_script::Script {
    Arc::new(move |method, params| {
        let s = Spellings::of(base.get().map_or("http://127.0.0.1:1", String::as_str));
        let id = params["id"].as_str().unwrap_or_default().to_owned();
        let text = params["message"]["parts"][0]["text"].as_str().unwrap_or("");
        let next = || format!("t-{}", made.fetch_add(1, Ordering::SeqCst));
        match (method, text, id.as_str()) {
            ("SendMessage", "message", _) => Answer::Result(json!({"message": {
                "messageId": "m-answer", "role": "ROLE_AGENT", "contextId": "ctx-m",
                "parts": [{"url": s.plain("/files/secret.bin")}]}})),
            ("SendMessage", "fail", _) => {
                Answer::Raw(hostile_error(&s, -32603, "INTERNAL_ERROR").into_bytes())
            }
            ("SendMessage", "err-task", _) => {
                Answer::Result(json!({"task": hostile_task(&s, "t-err", "TASK_STATE_WORKING")}))
            }
            ("SendMessage", ..) => {
                Answer::Result(json!({"task": hostile_task(&s, &next(), "TASK_STATE_WORKING")}))
            }
            ("GetTask", _, "t-err") => {
                Answer::Raw(hostile_error(&s, -32001, "TASK_NOT_FOUND").into_bytes())
            }
            ("GetTask", ..) => Answer::Result(hostile_task(&s, &id, "TASK_STATE_WORKING")),
            ("CancelTask", _, "t-err") => {
                Answer::Raw(hostile_error(&s, -32099, &s.plain("/reason")).into_bytes())
            }
            ("CancelTask", ..) => Answer::Result(hostile_task(&s, &id, "TASK_STATE_CANCELED")),
            ("SendStreamingMessage", ..) => hostile_events(&s, &next(), "TASK_STATE_COMPLETED"),
            ("SubscribeToTask", _, "t-err") => {
                let (tx, answer) = a2a_script::events();
                let _ =
                    tx.try_send(json!({"task": hostile_task(&s, "t-err", "TASK_STATE_WORKING")}));
                let _ = tx.try_send(Value::String(hostile_error(&s, -32603, "INTERNAL_ERROR")));
                answer
            }
            ("SubscribeToTask", ..) => hostile_events(&s, &id, "TASK_STATE_INPUT_REQUIRED"),
            ("CreateTaskPushNotificationConfig", ..) => Answer::Result(params.clone()),
            ("GetExtendedAgentCard", ..) => Answer::Result(hostile_card(&s)),
            _ => Answer::Raw(hostile_error(&s, -32601, "METHOD_NOT_FOUND").into_bytes()),
        }
    })
}

/// A free port on loopback (bound, then let go): the gateway's own address is the agent's
/// `callback_url`, so it must be known before the gateway starts.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The hostile agent, serving its files with hostile headers, and a gateway in front of it as
/// `h` (pushing to the gateway at its own listener), with alice, bob and ops.
async fn hostile() -> (ScriptedAgent, Spellings, Gateway, Http) {
    let (agent, s) = hostile_agent().await;
    let (gw, http) = front(&agent, |_| {}).await;
    (agent, s, gw, http)
}

/// The hostile agent (see the module doc), its files served with headers naming it.
async fn hostile_agent() -> (ScriptedAgent, Spellings) {
    let base = Arc::new(OnceLock::new());
    let agent = ScriptedAgent::start(script(base.clone(), Arc::new(AtomicUsize::new(1)))).await;
    let _ = base.set(agent.base.clone());
    let s = Spellings::of(&agent.base);
    agent.set_card(hostile_card(&s));
    let own = [
        ("location", s.plain("/tasks/x")),
        ("content-location", s.localhost("/x")),
        ("link", format!("<{}>; rel=next", s.short("/next"))),
        ("refresh", format!("0; url={}", s.plain("/"))),
    ];
    let own: Vec<(&str, &str)> = own.iter().map(|(k, v)| (*k, v.as_str())).collect();
    agent.set_headers(&own);
    let mut file_headers = own.clone();
    file_headers.push(("content-type", "application/octet-stream"));
    let cookie = format!("session=1; Domain=127.0.0.1; Path=/; x={}", s.plain("/"));
    file_headers.push(("set-cookie", &cookie));
    for path in [
        "/files/secret.bin",
        "/files/status.bin",
        "/files/stream.bin",
    ] {
        agent.serve_file(path, 200, &file_headers, SECRET);
    }
    agent.serve_file("/admin/secret", 200, &[], b"the agent's admin page");
    (agent, s)
}

/// A gateway in front of `agent` as `h`, which pushes to it at its own listener; alice, bob
/// and ops; `tweak` applied last.
async fn front(agent: &ScriptedAgent, tweak: impl FnOnce(&mut Config)) -> (Gateway, Http) {
    let port = free_port();
    let mut h = a2a_agent("h", &agent.base);
    h.callback_url = Some(format!("http://127.0.0.1:{port}"));
    h.eject_after = 0;
    gateway(vec![h], |cfg| {
        cfg.listen = format!("127.0.0.1:{port}").parse().expect("addr");
        clients(cfg);
        tweak(cfg);
    })
    .await
}

/// One answer a client (or a receiver) got.
struct Seen {
    what: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Seen {
    fn of(what: impl Into<String>, r: &Resp) -> Seen {
        Seen {
            what: what.into(),
            headers: r.headers.clone(),
            body: r.body.to_vec(),
        }
    }
}

/// A Part's `text` taken out of every Part of `v`: free text is the agent's content, passed as
/// it came; everything else is scanned.
fn without_free_text(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::Array(parts)) = o.get_mut("parts") {
                for p in parts.iter_mut().filter_map(Value::as_object_mut) {
                    p.remove("text");
                }
            }
            o.values_mut().for_each(without_free_text);
        }
        Value::Array(items) => items.iter_mut().for_each(without_free_text),
        _ => {}
    }
}

/// What of an answer's body is scanned: each JSON document in it (the body, or each event's
/// data) without its free text; anything else as it is.
fn scanned(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one = |s: &str| match serde_json::from_str::<Value>(s) {
        Ok(mut v) => {
            without_free_text(&mut v);
            v.to_string()
        }
        Err(_) => s.to_owned(),
    };
    if serde_json::from_str::<Value>(&text).is_ok() {
        return one(&text);
    }
    text.lines()
        .map(|l| match l.strip_prefix("data:") {
            Some(d) => one(d.trim()),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An event stream read until `stop` (and a moment after, for what it caused), or for `for_`,
/// as `key`.
async fn read_stream(
    base: &str,
    path: &str,
    key: &str,
    for_: Duration,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> Seen {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = Request::get(format!("{base}{path}"))
        .header("authorization", format!("Bearer {key}"))
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let res = tokio::time::timeout(Duration::from_secs(10), client.request(req))
        .await
        .expect("head in time")
        .expect("stream request");
    let (parts, mut body) = res.into_parts();
    let mut got = Vec::new();
    let read = async {
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(d) = frame.into_data() {
                got.extend_from_slice(&d);
            }
        }
    };
    let _ = tokio::time::timeout_at((Instant::now() + for_).into(), async {
        tokio::select! {
            _ = read => {}
            _ = async {
                let _ = stop.await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            } => {}
        }
    })
    .await;
    Seen {
        what: format!("stream {path}"),
        headers: parts.headers,
        body: got,
    }
}

fn msg(text: &str) -> Value {
    crate::support::a2a_calls::message(text, json!({}))
}

/// The rewritten URLs of a Task's artifact and status message (`task` a Task).
fn file_urls(task: &Value) -> (String, String) {
    let artifact = task["artifacts"][0]["parts"][0]["url"].as_str();
    let status = task["status"]["message"]["parts"][0]["url"].as_str();
    (
        artifact
            .unwrap_or_else(|| panic!("an artifact URL: {task}"))
            .to_owned(),
        status
            .unwrap_or_else(|| panic!("a status URL: {task}"))
            .to_owned(),
    )
}

/// Issue 43's scan. On main before the fix, the Part URLs passed both bindings unchanged (and
/// were recorded and pushed so), the agent's error text reached every client, and the served
/// card carried `x-internal`.
#[tokio::test(flavor = "multi_thread")]
async fn no_path_shows_a_client_or_a_receiver_the_a2a_agents_address() {
    let (agent, s, _gw, http) = hostile().await;
    let hook = Hook::start().await;
    let mut seen: Vec<Seen> = Vec::new();
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let events = tokio::spawn({
        let base = http.base.clone();
        async move { read_stream(&base, "/events", ALICE, Duration::from_secs(90), stopped).await }
    });
    let alice = Some(ALICE);

    // The served cards.
    for path in [
        "/agents/h/.well-known/agent-card.json",
        "/agents/h/agent-card.json",
    ] {
        let r = http.get_as(path, ALICE).await;
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.json()["skills"].is_array(), "{r:?}");
        seen.push(Seen::of(path, &r));
    }
    let r = call(&http, false, ALICE, "GetExtendedAgentCard", json!({})).await;
    assert_eq!(r.json()["result"]["name"], "Scripted", "{r:?}");
    seen.push(Seen::of("rpc GetExtendedAgentCard", &r));
    let r = rest(
        &http,
        Method::GET,
        "/agents/h/extendedAgentCard",
        alice,
        None,
    )
    .await;
    seen.push(Seen::of("rest extendedAgentCard", &r));

    // SendMessage on both bindings and at /a2a: tasks t-1, t-2, t-3; a Message; t-err.
    let r = call(&http, false, ALICE, "SendMessage", msg("hello")).await;
    assert_eq!(r.json()["result"]["task"]["id"], "t-1", "{r:?}");
    seen.push(Seen::of("rpc SendMessage", &r));
    let r = rest(
        &http,
        Method::POST,
        "/agents/h/message:send",
        alice,
        Some(msg("hello")),
    )
    .await;
    assert_eq!(r.json()["task"]["id"], "t-2", "{r:?}");
    seen.push(Seen::of("rest message:send", &r));
    let mut fleet = msg("hello");
    fleet["tenant"] = json!("h");
    seen.push(Seen::of(
        "/a2a SendMessage",
        &call(&http, true, ALICE, "SendMessage", fleet).await,
    ));
    let r = call(&http, false, ALICE, "SendMessage", msg("message")).await;
    assert!(
        r.json()["result"]["message"]["parts"][0]["url"].is_string(),
        "{r:?}"
    );
    seen.push(Seen::of("rpc SendMessage answered a Message", &r));
    rpc(&http, "h", alice, "SendMessage", msg("err-task")).await;

    // A receiver of t-1's changes; the agent is given the gateway's own config, and pushes.
    let cfg = json!({"taskId": "t-1", "url": hook.url(), "token": "tok-alice"});
    let v = rpc(&http, "h", alice, "CreateTaskPushNotificationConfig", cfg).await;
    assert!(v["result"].is_object(), "{v}");
    wait_for("the agent is given the gateway's config", || async {
        agent
            .methods()
            .iter()
            .any(|m| m == "CreateTaskPushNotificationConfig")
    })
    .await;
    let given = agent
        .calls()
        .into_iter()
        .find(|c| c["method"] == "CreateTaskPushNotificationConfig")
        .expect("the gateway's config");
    let (url, token) = (
        given["params"]["url"].as_str().expect("url").to_owned(),
        given["params"]["token"].as_str().expect("token").to_owned(),
    );
    let pushes = Http::new(url.split("/agents/").next().expect("base").to_owned());
    let path = format!("/agents/{}", url.split("/agents/").nth(1).expect("path"));
    for event in [
        json!({"artifactUpdate": {"taskId": "t-1", "contextId": "ctx-h", "artifact": {
            "artifactId": "a3", "parts": [{"url": s.relative("/files/push.bin")}]}}}),
        json!({"statusUpdate": {"taskId": "t-1", "contextId": "ctx-h", "status": {
            "state": "TASK_STATE_WORKING", "timestamp": chrono::Utc::now().to_rfc3339(),
            "message": {"messageId": "p1", "role": "ROLE_AGENT",
                "parts": [{"url": s.v6("/files/push.bin")}]}}}}),
    ] {
        let r = pushes
            .send(
                Method::POST,
                &path,
                &[
                    ("content-type", "application/json"),
                    ("x-a2a-notification-token", &token),
                ],
                Bytes::from(event.to_string()),
            )
            .await;
        assert!(
            r.status == 202 || r.status == 200,
            "the push is taken: {r:?}"
        );
    }
    wait_for("the receiver hears the pushed artifact", || async {
        hook.received().iter().any(|d| {
            d.json()["task"]["artifacts"]
                .as_array()
                .is_some_and(|a| a.len() >= 2)
        })
    })
    .await;

    // Every read of the tasks, both bindings and /a2a; the ledger's answers among them.
    let get = json!({"id": "t-1"});
    seen.push(Seen::of(
        "rpc GetTask",
        &call(&http, false, ALICE, "GetTask", get.clone()).await,
    ));
    seen.push(Seen::of(
        "/a2a GetTask",
        &call(&http, true, ALICE, "GetTask", get).await,
    ));
    seen.push(Seen::of(
        "rest GetTask",
        &rest(&http, Method::GET, "/agents/h/tasks/t-2", alice, None).await,
    ));
    let c = call(&http, false, ALICE, "CancelTask", json!({"id": "t-2"})).await;
    assert_eq!(
        c.json()["result"]["status"]["state"],
        "TASK_STATE_CANCELED",
        "{c:?}"
    );
    seen.push(Seen::of("rpc CancelTask", &c));
    seen.push(Seen::of(
        "rest CancelTask",
        &rest(
            &http,
            Method::POST,
            "/agents/h/tasks/t-3:cancel",
            alice,
            None,
        )
        .await,
    ));
    let r = rest(&http, Method::GET, "/agents/h/tasks/t-2", alice, None).await;
    assert_eq!(
        r.json()["status"]["state"],
        "TASK_STATE_CANCELED",
        "from the ledger: {r:?}"
    );
    seen.push(Seen::of("rest GetTask of a final task", &r));
    let list = json!({"includeArtifacts": true, "historyLength": 10});
    let l = call(&http, false, ALICE, "ListTasks", list.clone()).await;
    assert!(
        l.json()["result"]["tasks"]
            .as_array()
            .is_some_and(|t| t.len() >= 4),
        "{l:?}"
    );
    seen.push(Seen::of("rpc ListTasks", &l));
    seen.push(Seen::of(
        "/a2a ListTasks",
        &call(&http, true, ALICE, "ListTasks", list).await,
    ));
    seen.push(Seen::of(
        "rest ListTasks",
        &rest(
            &http,
            Method::GET,
            "/agents/h/tasks?includeArtifacts=true",
            alice,
            None,
        )
        .await,
    ));
    seen.push(Seen::of("GET /tasks", &http.get_as("/tasks", ALICE).await));

    // Streams: a message streamed (both bindings), a subscription (both bindings).
    let streamed = rest(
        &http,
        Method::POST,
        "/agents/h/message:stream",
        alice,
        Some(msg("stream")),
    )
    .await;
    assert!(
        String::from_utf8_lossy(&streamed.body).contains("artifactUpdate"),
        "{streamed:?}"
    );
    seen.push(Seen::of("rest message:stream", &streamed));
    seen.push(Seen::of(
        "rpc SendStreamingMessage",
        &rpc_stream(&http, "SendStreamingMessage", msg("stream")).await,
    ));
    let sub = rest(
        &http,
        Method::GET,
        "/agents/h/tasks/t-1:subscribe",
        alice,
        None,
    )
    .await;
    assert!(
        String::from_utf8_lossy(&sub.body).contains("statusUpdate"),
        "{sub:?}"
    );
    seen.push(Seen::of("rest SubscribeToTask", &sub));
    seen.push(Seen::of(
        "rpc SubscribeToTask",
        &rpc_stream(&http, "SubscribeToTask", json!({"id": "t-1"})).await,
    ));

    // The agent's errors: to a message, a read, a cancel, on a stream.
    let e = call(&http, false, ALICE, "SendMessage", msg("fail")).await;
    assert_eq!(e.json()["error"]["code"], -32603, "the kind kept: {e:?}");
    seen.push(Seen::of("rpc SendMessage failed", &e));
    let e = call(&http, false, ALICE, "GetTask", json!({"id": "t-err"})).await;
    assert_eq!(e.json()["error"]["code"], -32001, "the kind kept: {e:?}");
    assert_eq!(
        e.json()["error"]["data"][0]["reason"],
        "TASK_NOT_FOUND",
        "{e:?}"
    );
    seen.push(Seen::of("rpc GetTask failed", &e));
    let r = rest(&http, Method::GET, "/agents/h/tasks/t-err", alice, None).await;
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(
        r.json()["error"]["details"][0]["reason"],
        "TASK_NOT_FOUND",
        "{r:?}"
    );
    seen.push(Seen::of("rest GetTask failed", &r));
    let e = call(&http, false, ALICE, "CancelTask", json!({"id": "t-err"})).await;
    assert_eq!(e.json()["error"]["code"], -32099, "{e:?}");
    assert_eq!(
        e.json()["error"]["data"][0]["reason"],
        "AGENT_ERROR",
        "{e:?}"
    );
    seen.push(Seen::of("rpc CancelTask failed", &e));
    let sub = rest(
        &http,
        Method::GET,
        "/agents/h/tasks/t-err:subscribe",
        alice,
        None,
    )
    .await;
    assert!(
        String::from_utf8_lossy(&sub.body).contains("event: error"),
        "{sub:?}"
    );
    seen.push(Seen::of("rest SubscribeToTask failed", &sub));
    seen.push(Seen::of(
        "rpc SubscribeToTask failed",
        &rpc_stream(&http, "SubscribeToTask", json!({"id": "t-err"})).await,
    ));

    let _ = stop.send(());
    seen.push(events.await.expect("the /events reader"));
    for d in hook.received() {
        seen.push(Seen {
            what: "a push delivery".into(),
            headers: HeaderMap::new(),
            body: serde_json::to_vec(&d.json()).expect("json"),
        });
    }

    // The scan reached what it meant to, and what it looks for is there to be found.
    let all = seen
        .iter()
        .map(|x| String::from_utf8_lossy(&x.body).into_owned())
        .collect::<String>();
    assert!(all.contains("/agents/h/files/"), "rewritten URLs were read");
    assert!(
        all.contains("https://cdn.example.com/presigned.bin?sig=1"),
        "URLs elsewhere pass"
    );
    assert!(
        all.contains(&format!("free text: {}", s.plain("/readme"))),
        "free text passes as it came"
    );
    let events = &seen
        .iter()
        .find(|x| x.what == "stream /events")
        .expect("/events")
        .body;
    assert!(
        String::from_utf8_lossy(events).contains("t-1"),
        "/events carried the changes"
    );
    assert!(hook.count() >= 1, "the receiver got deliveries");
    let ops = call(&http, false, OPS, "GetTask", json!({"id": "t-err"})).await;
    assert!(
        String::from_utf8_lossy(&ops.body).contains(PASSWORD),
        "ops reads the agent's error text: {ops:?}"
    );

    let mut leaks = Vec::new();
    for x in &seen {
        let body = scanned(&x.body);
        if s.named_in(&body) || body.contains(PASSWORD) {
            leaks.push(format!("{}: {body}", x.what));
        }
        for (k, v) in &x.headers {
            if s.named_in(&String::from_utf8_lossy(v.as_bytes())) {
                leaks.push(format!("{}: header {k}: {v:?}", x.what));
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "the agent's origin ({}) reached a client or receiver:\n{}",
        s.base,
        leaks.join("\n")
    );
}

/// One JSON-RPC call as `key` at `/agents/h/jsonrpc` (or `/a2a` for `fleet`), whole: its
/// headers are scanned too.
async fn call(http: &Http, fleet: bool, key: &str, method: &str, params: Value) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": "c-1", "method": method, "params": params});
    let path = if fleet { "/a2a" } else { "/agents/h/jsonrpc" };
    let r = http
        .send(
            Method::POST,
            path,
            &[
                ("content-type", "application/json"),
                ("a2a-version", "1.0"),
                ("authorization", &format!("Bearer {key}")),
            ],
            Bytes::from(body.to_string()),
        )
        .await;
    assert_eq!(r.status, 200, "{method}: {r:?}");
    r
}

/// A streaming JSON-RPC call as alice, read whole (the stream closes at a final or an
/// interrupted state).
async fn rpc_stream(http: &Http, method: &str, params: Value) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    http.send(
        Method::POST,
        "/agents/h/jsonrpc",
        &[
            ("content-type", "application/json"),
            ("a2a-version", "1.0"),
            ("accept", "text/event-stream"),
            ("authorization", &format!("Bearer {ALICE}")),
        ],
        Bytes::from(body.to_string()),
    )
    .await
}

/// The rewritten URL serves the file the agent serves, to the task's owner and to a client
/// that sees every task; another client gets the 404 of an unknown file; the id is the same
/// however the task is read; no id and no path reaches anything else of the agent; the
/// agent's headers naming it, its cookies, its redirects to itself and its error texts do not
/// come through.
#[tokio::test(flavor = "multi_thread")]
async fn a_rewritten_file_is_the_owners_and_nothing_else_of_the_agent_is_reachable() {
    let (agent, s, gw, http) = hostile().await;
    let alice = Some(ALICE);
    let sent = rpc(&http, "h", alice, "SendMessage", msg("hello")).await;
    let task = &sent["result"]["task"];
    let (artifact, status) = file_urls(task);
    let root = format!("http://{}/agents/h/files/", gw.addr());
    for u in [&artifact, &status] {
        assert!(u.starts_with(&root), "{u} under {root}");
    }
    // The same file of the same task is the same URL however the task is read.
    let got = rpc(&http, "h", alice, "GetTask", json!({"id": "t-1"})).await;
    assert_eq!(
        file_urls(&got["result"]),
        (artifact.clone(), status.clone())
    );
    let path = |u: &str| {
        u.trim_start_matches(&format!("http://{}", gw.addr()))
            .to_owned()
    };
    for (u, key) in [(&artifact, ALICE), (&status, ALICE), (&artifact, OPS)] {
        let r = http.get_as(&path(u), key).await;
        assert_eq!(r.status, 200, "{u}: {r:?}");
        assert_eq!(&r.body[..], SECRET);
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        for h in [
            "location",
            "content-location",
            "link",
            "refresh",
            "set-cookie",
        ] {
            assert!(r.header(h).is_none(), "{h} of the agent's passed: {r:?}");
        }
    }
    // Another client: the 404 of a file the gateway does not know, worded alike.
    let id = artifact.rsplit('/').next().expect("id");
    let theirs = http.get_as(&path(&artifact), BOB).await;
    let unknown = http
        .get_as("/agents/h/files/AAAAAAAAAAAAAAAAAAAAAA", BOB)
        .await;
    assert_eq!((theirs.status, unknown.status), (404, 404), "{theirs:?}");
    let words = |r: &Resp, id: &str| {
        r.json()["error"]["message"]
            .as_str()
            .expect("message")
            .replace(id, "ID")
    };
    assert_eq!(
        words(&theirs, id),
        words(&unknown, "AAAAAAAAAAAAAAAAAAAAAA")
    );
    // A Message outside any task: its file is the client's it was answered to.
    let m = rpc(&http, "h", alice, "SendMessage", msg("message")).await;
    let own = m["result"]["message"]["parts"][0]["url"]
        .as_str()
        .expect("url")
        .to_owned();
    assert_eq!(http.get_as(&path(&own), ALICE).await.status, 200);
    assert_eq!(http.get_as(&path(&own), BOB).await.status, 404);
    // Nothing else of the agent: made-up ids and paths that try to climb out.
    for p in [
        "/agents/h/files/..%2F..%2Fadmin%2Fsecret",
        "/agents/h/files/%2E%2E/admin/secret",
        "/agents/h/files/admin",
        &format!("/agents/h/files/{id}/..%2F..%2Fadmin%2Fsecret"),
        &format!("/agents/h/files/{id}%2F..%2F..%2Fadmin%2Fsecret"),
    ] {
        let r = http.get_as(p, OPS).await;
        assert_eq!(r.status, 404, "{p}: {r:?}");
    }
    let reached: Vec<String> = agent
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET ") && !r.contains("agent-card.json"))
        .collect();
    assert!(!reached.is_empty());
    for r in &reached {
        assert!(
            r == "GET /files/secret.bin" || r == "GET /files/status.bin",
            "the agent was asked for {r}: {reached:?}"
        );
    }
    // The agent redirects the file to itself: refused; elsewhere: passed on, not followed.
    agent.serve_file(
        "/files/secret.bin",
        302,
        &[("location", &s.localhost("/admin/secret"))],
        b"",
    );
    let r = http.get_as(&path(&artifact), ALICE).await;
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(
        r.json()["error"]["details"][0]["reason"],
        "INVALID_AGENT_RESPONSE"
    );
    assert!(!s.named_in(&String::from_utf8_lossy(&r.body)), "{r:?}");
    agent.serve_file(
        "/files/secret.bin",
        302,
        &[("location", "https://cdn.example.com/f?sig=2")],
        b"",
    );
    let r = http.get_as(&path(&artifact), ALICE).await;
    assert_eq!(
        (r.status, r.header("location")),
        (302, Some("https://cdn.example.com/f?sig=2"))
    );
    // The agent's error text: withheld from alice, read by ops.
    let text = format!(
        "disk full at {}",
        s.plain(&format!("/db?password={PASSWORD}"))
    );
    agent.serve_file(
        "/files/secret.bin",
        500,
        &[("content-type", "text/plain")],
        text.as_bytes(),
    );
    let r = http.get_as(&path(&artifact), ALICE).await;
    assert_eq!(r.status, 500, "{r:?}");
    assert!(
        !s.named_in(&String::from_utf8_lossy(&r.body))
            && !String::from_utf8_lossy(&r.body).contains(PASSWORD),
        "{r:?}"
    );
    let r = http.get_as(&path(&artifact), OPS).await;
    assert!(String::from_utf8_lossy(&r.body).contains(PASSWORD), "{r:?}");
    assert!(
        !agent.requests().iter().any(|r| r.contains("/admin")),
        "{:?}",
        agent.requests()
    );
}

/// Two replicas on one Redis write the same file URL for the same file (the ids' key is
/// shared, `public_url` the base), and either serves it to the task's owner and to no one else.
#[tokio::test(flavor = "multi_thread")]
async fn replicas_on_redis_write_and_serve_the_same_file_urls() {
    let redis = crate::support::redis_server::RedisServer::start();
    let (agent, _) = hostile_agent().await;
    let shared = |cfg: &mut Config| {
        cfg.public_url = Some("https://gw.example.com".into());
        cfg.redis = Some(a2a_gateway::config::RedisConfig {
            url: redis.url(),
            prefix: "gw:".into(),
            ..Default::default()
        });
    };
    let (_one, first) = front(&agent, shared).await;
    let (_two, second) = front(&agent, shared).await;
    let sent = rpc(&first, "h", Some(ALICE), "SendMessage", msg("hello")).await;
    let (artifact, status) = file_urls(&sent["result"]["task"]);
    assert!(
        artifact.starts_with("https://gw.example.com/agents/h/files/"),
        "{artifact}"
    );
    let got = rpc(&second, "h", Some(ALICE), "GetTask", json!({"id": "t-1"})).await;
    assert_eq!(file_urls(&got["result"]), (artifact.clone(), status));
    let path = artifact.trim_start_matches("https://gw.example.com");
    for http in [&first, &second] {
        let r = http.get_as(path, ALICE).await;
        assert_eq!((r.status, &r.body[..]), (200, SECRET), "{r:?}");
        assert_eq!(http.get_as(path, BOB).await.status, 404);
    }
}
