//! The agent over real HTTP on 127.0.0.1:0, talked to with hyper's pooled client.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{HeaderMap, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::body::{OutBody, CHUNK};
use super::*;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

const WAIT: Duration = Duration::from_secs(5);

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

struct Resp {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

fn request(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Request<Full<Bytes>> {
    let mut b = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Full::new(Bytes::from(body.to_string()))).unwrap()
}

/// Sends and returns the response head with the body still open (streams).
async fn open(c: &HttpClient, method: &str, url: &str) -> hyper::Response<Incoming> {
    let fut = c.request(request(method, url, &[], ""));
    tokio::time::timeout(WAIT, fut).await.unwrap().unwrap()
}

async fn call(
    c: &HttpClient,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Resp {
    let fut = async {
        let resp = c
            .request(request(method, url, headers, body))
            .await
            .unwrap();
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Resp {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        }
    };
    tokio::time::timeout(WAIT, fut).await.unwrap()
}

async fn get(c: &HttpClient, url: &str) -> Resp {
    call(c, "GET", url, &[], "").await
}

async fn create(c: &HttpClient, agent: &SampleAgent, input: Value) -> Resp {
    let body = json!({ "input": input }).to_string();
    let url = format!("{}/tasks", agent.base_url());
    call(
        c,
        "POST",
        &url,
        &[("content-type", "application/json")],
        &body,
    )
    .await
}

async fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads stream frames into `seen` until it contains `needle` (false if the stream ended).
async fn read_until(body: &mut Incoming, seen: &mut String, needle: &str) -> bool {
    let fut = async {
        while !seen.contains(needle) {
            match body.frame().await {
                Some(Ok(f)) => {
                    if let Some(d) = f.data_ref() {
                        seen.push_str(&String::from_utf8_lossy(d));
                    }
                }
                _ => return false,
            }
        }
        true
    };
    tokio::time::timeout(WAIT, fut).await.unwrap()
}

fn assert_timestamp(v: &Value) {
    let s = v.as_str().unwrap_or_default();
    assert_eq!(s.len(), 24, "not YYYY-MM-DDTHH:MM:SS.sssZ: {v}");
    assert!(
        s.ends_with('Z') && s.as_bytes()[19] == b'.',
        "bad timestamp {s}"
    );
    assert!(
        chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "bad timestamp {s}"
    );
}

#[tokio::test]
async fn create_get_cancel_then_cancel_again_is_409() {
    let agent = SampleAgent::start(AgentOptions::default()).await.unwrap();
    let c = client();
    let base = agent.base_url();

    let created = create(&c, &agent, json!({"topic": "t", "filename": "a.py"})).await;
    assert_eq!(created.status, 202);
    assert_eq!(created.header("content-type"), "application/json");
    let task = created.json();
    let id = task["task_id"].as_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&id).is_ok());
    assert_eq!(task["status"], "SUBMITTED");
    assert_eq!(task["agent_id"], agent.agent_id().as_str());
    assert_eq!(task["input"], json!({"topic": "t", "filename": "a.py"}));
    assert_timestamp(&task["created_at"]);
    assert_eq!(task["created_at"], task["updated_at"]);

    let got = get(&c, &format!("{base}/tasks/{id}")).await;
    assert_eq!((got.status, got.json()), (200, task.clone()));

    let stream = open(&c, "GET", &format!("{base}/tasks/{id}/stream")).await;
    let cancel_url = format!("{base}/tasks/{id}/cancel");
    let cancelled = call(&c, "POST", &cancel_url, &[], "").await;
    assert_eq!(cancelled.status, 202);
    let cancelled = cancelled.json();
    assert_eq!(cancelled["status"], "CANCELLED");
    assert_timestamp(&cancelled["updated_at"]);
    assert!(cancelled["updated_at"].as_str() > task["updated_at"].as_str());
    assert_eq!(agent.task(&id), Some(cancelled));
    // The agent ends the streams of a task it cancelled.
    let end = tokio::time::timeout(WAIT, stream.into_body().frame()).await;
    assert!(end.unwrap().is_none(), "cancel must end the task's streams");

    let again = call(&c, "POST", &cancel_url, &[], "").await;
    assert_eq!(again.status, 409);
    assert_eq!(again.json()["error"]["code"], "TASK_TERMINAL");
    assert!(again.json()["error"]["message"].is_string());
    assert_eq!(agent.request_count(Route::CancelTask), 2);
    assert_eq!(agent.request_count(Route::CreateTask), 1);

    for (method, path) in [
        ("GET", "/tasks/nope"),
        ("POST", "/tasks/nope/cancel"),
        ("GET", "/tasks/nope/artifacts"),
        ("GET", "/tasks/nope/stream"),
        ("GET", "/artifacts/nope/content"),
        ("GET", "/somewhere/else"),
        ("DELETE", "/tasks"),
    ] {
        let r = call(&c, method, &format!("{base}{path}"), &[], "").await;
        assert_eq!(r.status, 404, "{method} {path}");
        assert!(r.json()["error"]["code"].is_string(), "{method} {path}");
    }
    assert_eq!(agent.request_count(Route::Other), 2);
}

#[tokio::test]
async fn create_task_rejects_what_the_spec_does_not_allow() {
    let agent = SampleAgent::start(AgentOptions::default()).await.unwrap();
    let c = client();
    let url = format!("{}/tasks", agent.base_url());
    let ct = ("content-type", "application/json");
    let cases: [(&[(&str, &str)], &str); 6] = [
        (&[], r#"{"input":{}}"#),
        (&[("content-type", "text/plain")], r#"{"input":{}}"#),
        (&[ct], "{not json"),
        (&[ct], r#"{"input":"x"}"#),
        (&[ct], r#"[{"input":{}}]"#),
        (&[ct], r#"{"other":{}}"#),
    ];
    for (headers, body) in cases {
        let r = call(&c, "POST", &url, headers, body).await;
        assert_eq!(r.status, 400, "{headers:?} {body}");
        assert_eq!(r.json()["error"]["code"], "INVALID_REQUEST");
    }
    assert!(agent.task_ids().is_empty());
    let huge = format!("{{\"input\":{{\"x\":\"{}\"}}}}", "a".repeat(9 << 20));
    let r = call(&c, "POST", &url, &[ct], &huge).await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_str()),
        (413, Some("PAYLOAD_TOO_LARGE"))
    );
    assert!(agent.task_ids().is_empty());
    let ok = call(
        &c,
        "POST",
        &url,
        &[("content-type", "Application/JSON; charset=utf-8")],
        r#"{"input":{}}"#,
    )
    .await;
    assert_eq!(ok.status, 202);
    assert_eq!(agent.task_ids().len(), 1);
}

#[tokio::test]
async fn card_etag_304_and_max_age() {
    let card = card_for("Card Test", None);
    let opts = AgentOptions {
        card: card.clone(),
        card_max_age: Some(60),
        ..Default::default()
    };
    let agent = SampleAgent::start(opts).await.unwrap();
    let c = client();
    let url = format!("{}/agent-card.json", agent.base_url());

    let first = get(&c, &url).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.json(), card);
    assert_eq!(agent.card(), card);
    assert_eq!(first.header("cache-control"), "max-age=60");
    let etag = first.header("etag").to_string();
    assert!(
        etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'),
        "{etag}"
    );

    let same = call(&c, "GET", &url, &[("if-none-match", &etag)], "").await;
    assert_eq!(same.status, 304);
    assert!(same.body.is_empty());
    assert_eq!(same.header("etag"), etag);
    let weak = format!("\"other\", W/{etag}");
    let weak = call(&c, "GET", &url, &[("if-none-match", &weak)], "").await;
    assert_eq!(weak.status, 304);
    let other = call(&c, "GET", &url, &[("if-none-match", "\"other\"")], "").await;
    assert_eq!(other.status, 200);
    assert_eq!(agent.card_not_modified(), 2);

    let new_card = card_for("Card Test 2", None);
    agent.set_card(new_card.clone());
    agent.set_card_max_age(None);
    assert_eq!(agent.agent_id(), new_card["agent_id"].as_str().unwrap());
    let changed = call(&c, "GET", &url, &[("if-none-match", &etag)], "").await;
    assert_eq!(changed.status, 200);
    assert_eq!(changed.json(), new_card);
    assert_ne!(changed.header("etag"), etag);
    assert!(changed.headers.get("cache-control").is_none());
    assert_eq!(agent.card_fetches(), 5);
    assert_eq!(agent.card_not_modified(), 2);
}

#[test]
fn card_for_follows_the_spec_schema() {
    let plain = card_for("Name", None);
    for key in [
        "protocol_version",
        "agent_id",
        "display_name",
        "description",
        "capabilities",
        "input_schema",
    ] {
        assert!(plain.get(key).is_some(), "missing {key}");
    }
    assert_eq!(plain["protocol_version"], "1.0");
    assert!(uuid::Uuid::parse_str(plain["agent_id"].as_str().unwrap()).is_ok());
    assert!(plain["description"].as_str().unwrap().len() >= 10);
    assert_eq!(
        plain["input_schema"]["required"],
        json!(["topic", "filename"])
    );
    assert!(plain.get("notification_config").is_none());
    assert_ne!(card_for("Name", None)["agent_id"], plain["agent_id"]);
    let with = card_for(
        "Name",
        Some(("http://127.0.0.1:1/hook", "Authorization: Bearer x")),
    );
    assert_eq!(
        with["notification_config"],
        json!({"endpoint_url": "http://127.0.0.1:1/hook", "auth_header": "Authorization: Bearer x"})
    );
}

#[tokio::test]
async fn progress_reaches_completed_with_two_artifacts_and_stream_events() {
    let progress = Progress {
        to_working: Duration::from_millis(300),
        to_completed: Duration::from_millis(100),
    };
    let agent = SampleAgent::start(AgentOptions {
        progress: Some(progress),
        ..Default::default()
    })
    .await
    .unwrap();
    let c = client();
    let base = agent.base_url();
    let task = create(
        &c,
        &agent,
        json!({"topic": "average \"age\"", "filename": "data_processor.py"}),
    )
    .await;
    let id = task.json()["task_id"].as_str().unwrap().to_string();

    let stream = open(&c, "GET", &format!("{base}/tasks/{id}/stream")).await;
    let mut body = stream.into_body();
    let mut seen = String::new();
    assert!(
        !read_until(&mut body, &mut seen, "\n\n\n").await,
        "stream must end at COMPLETED"
    );
    assert_eq!(
        seen.matches("event: artifact.update\n").count(),
        2,
        "{seen}"
    );
    assert!(seen.starts_with("event: log\ndata: {"), "{seen}");

    let done = agent.task(&id).unwrap();
    assert_eq!(done["status"], "COMPLETED");
    assert_eq!(done["output"]["filename"], "data_processor.py");
    assert!(done["updated_at"].as_str() > done["created_at"].as_str());

    let list = get(&c, &format!("{base}/tasks/{id}/artifacts")).await;
    assert_eq!(list.status, 200);
    let arts = list.json()["artifacts"].as_array().unwrap().clone();
    assert_eq!(arts.len(), 2);
    assert_eq!(arts[0]["type"], "text");
    let file = &arts[1];
    assert_eq!(file["type"], "file");
    assert_eq!(file["task_id"], id.as_str());
    assert_eq!(file["metadata"]["filename"], "data_processor.py");
    assert_eq!(file["metadata"]["mime_type"], "text/x-python");
    assert_timestamp(&file["metadata"]["created_at"]);
    for a in &arts {
        let aid = a["artifact_id"].as_str().unwrap();
        assert!(
            seen.contains(&format!("{{\"artifact_id\":\"{aid}\"}}")),
            "no update for {aid}"
        );
    }
    let aid = file["artifact_id"].as_str().unwrap();
    assert_eq!(file["content"], format!("{base}/artifacts/{aid}/content"));
    let content = get(&c, file["content"].as_str().unwrap()).await;
    assert_eq!(content.status, 200);
    assert_eq!(content.header("content-type"), "text/x-python");
    let script = String::from_utf8_lossy(&content.body).to_string();
    assert!(script.contains(r#"TOPIC = "average \"age\"""#), "{script}");

    // A cancelled task is left alone; a non-string filename falls back to script.py.
    let cancelled = create(&c, &agent, json!({"topic": "x"})).await.json();
    let cid = cancelled["task_id"].as_str().unwrap();
    call(&c, "POST", &format!("{base}/tasks/{cid}/cancel"), &[], "").await;
    let other = create(&c, &agent, json!({"topic": "x", "filename": 7}))
        .await
        .json();
    let oid = other["task_id"].as_str().unwrap().to_string();
    eventually("second task completes", || {
        agent.task(&oid).is_some_and(|t| t["status"] == "COMPLETED")
    })
    .await;
    assert_eq!(agent.task(&oid).unwrap()["output"]["filename"], "script.py");
    assert_eq!(agent.task(cid).unwrap()["status"], "CANCELLED");
    let none = get(&c, &format!("{base}/tasks/{cid}/artifacts")).await;
    assert_eq!(none.json(), json!({"artifacts": []}));
}

#[tokio::test]
async fn file_redirect_and_inline_artifacts_are_served() {
    let agent = SampleAgent::start(AgentOptions::default()).await.unwrap();
    let c = client();
    let base = agent.base_url();
    let id = create(&c, &agent, json!({})).await.json()["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let big = Bytes::from(
        (0..200_000u32)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<u8>>(),
    );

    let file = agent.add_artifact(
        &id,
        NewArtifact::File {
            filename: "data.bin".into(),
            mime_type: "application/x-test".into(),
            body: big.clone(),
        },
    );
    let r = get(&c, &format!("{base}/artifacts/{file}/content")).await;
    assert_eq!(
        (r.status, r.header("content-type")),
        (200, "application/x-test")
    );
    assert_eq!(r.body, big);

    let redirect = agent.add_artifact(
        &id,
        NewArtifact::Redirect {
            filename: "r.txt".into(),
            mime_type: "text/plain".into(),
            body: Bytes::from_static(b"redirected body"),
        },
    );
    let r = get(&c, &format!("{base}/artifacts/{redirect}/content")).await;
    assert_eq!(r.status, 302);
    let location = r.header("location").to_string();
    assert_eq!(location, format!("{base}/downloads/{redirect}"));
    let d = get(&c, &location).await;
    assert_eq!((d.status, d.header("content-type")), (200, "text/plain"));
    assert_eq!(&d.body[..], b"redirected body");
    assert_eq!(agent.request_count(Route::Download), 1);

    let text = agent.add_artifact(&id, NewArtifact::Text("hello".into()));
    let json_id = agent.add_artifact(&id, NewArtifact::Json(json!({"k": [1, 2]})));
    let r = get(&c, &format!("{base}/artifacts/{text}/content")).await;
    assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]));
    assert!(r.header("content-type").starts_with("text/plain"));
    let r = get(&c, &format!("{base}/artifacts/{json_id}/content")).await;
    assert_eq!(
        (r.header("content-type"), r.json()),
        ("application/json", json!({"k": [1, 2]}))
    );
    // Inline artifacts have nothing to download.
    assert_eq!(
        get(&c, &format!("{base}/downloads/{text}")).await.status,
        404
    );

    let list = get(&c, &format!("{base}/tasks/{id}/artifacts"))
        .await
        .json();
    let types: Vec<&str> = list["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["file", "file", "text", "json"]);
    assert_eq!(list["artifacts"][3]["content"], r#"{"k":[1,2]}"#);
    assert_eq!(
        list["artifacts"][2]["metadata"].as_object().unwrap().len(),
        1
    );

    let orphan = agent.add_artifact("no-such-task", NewArtifact::Text("x".into()));
    assert_eq!(
        get(&c, &format!("{base}/artifacts/{orphan}/content"))
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn file_bodies_go_out_in_64k_frames() {
    let body = Bytes::from(vec![7u8; 2 * CHUNK + 10]);
    let mut out = OutBody::Chunked(body.clone());
    assert_eq!(
        hyper::body::Body::size_hint(&out).exact(),
        Some(body.len() as u64)
    );
    let mut sizes = Vec::new();
    while let Some(frame) = out.frame().await {
        sizes.push(frame.unwrap().into_data().unwrap().len());
    }
    assert_eq!(sizes, [CHUNK, CHUNK, 10]);
}

#[tokio::test]
async fn script_once_is_used_before_the_persistent_script_then_default() {
    let agent = SampleAgent::start(AgentOptions::default()).await.unwrap();
    let c = client();
    let id = create(&c, &agent, json!({})).await.json()["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let url = format!("{}/tasks/{id}", agent.base_url());

    agent.script(
        Route::GetTask,
        Reply::Json(500, json!({"error": {"code": "BOOM", "message": "m"}})),
    );
    agent.script_once(Route::GetTask, Reply::Json(503, json!({"once": 1})));
    agent.script_once(
        Route::GetTask,
        Reply::Raw {
            status: 200,
            content_type: "text/event-stream".into(),
            body: Bytes::from_static(b"not json"),
        },
    );
    let r = get(&c, &url).await;
    assert_eq!((r.status, r.json()), (503, json!({"once": 1})));
    let r = get(&c, &url).await;
    assert_eq!(
        (r.status, r.header("content-type"), &r.body[..]),
        (200, "text/event-stream", &b"not json"[..])
    );
    for _ in 0..2 {
        assert_eq!(get(&c, &url).await.status, 500);
    }
    // Other routes are unaffected.
    assert_eq!(
        get(&c, &format!("{}/tasks/{id}/artifacts", agent.base_url()))
            .await
            .status,
        200
    );
    agent.clear_scripts();
    let r = get(&c, &url).await;
    assert_eq!(
        (r.status, r.json()["task_id"].as_str()),
        (200, Some(id.as_str()))
    );

    agent.script_once(
        Route::GetTask,
        Reply::Delay(Duration::from_millis(200), Box::new(Reply::Default)),
    );
    let started = Instant::now();
    assert_eq!(get(&c, &url).await.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(200));

    agent.script_once(Route::GetTask, Reply::Close);
    let closed = tokio::time::timeout(WAIT, c.request(request("GET", &url, &[], "")))
        .await
        .unwrap();
    assert!(
        closed.is_err(),
        "Close must drop the connection without a response"
    );
    assert_eq!(get(&c, &url).await.status, 200);
    assert_eq!(agent.request_count(Route::GetTask), 8);
}

#[tokio::test]
async fn hang_is_ended_by_shutdown() {
    let agent = SampleAgent::start(AgentOptions::default()).await.unwrap();
    agent.script(Route::Card, Reply::Hang);
    let url = format!("{}/agent-card.json", agent.base_url());
    let c = client();
    let pending = tokio::spawn(c.request(request("GET", &url, &[], "")));
    eventually("the hung request to arrive", || agent.card_fetches() == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!pending.is_finished(), "Hang must not answer");

    tokio::time::timeout(WAIT, agent.shutdown()).await.unwrap();
    let result = tokio::time::timeout(WAIT, pending).await.unwrap().unwrap();
    assert!(
        result.is_err(),
        "the hung request must fail once the agent stops"
    );
    let after = tokio::time::timeout(WAIT, client().request(request("GET", &url, &[], "")))
        .await
        .unwrap();
    assert!(after.is_err(), "a stopped agent accepts nothing");
}

#[tokio::test]
async fn push_event_reaches_open_streams_and_close_ends_them() {
    let agent = SampleAgent::start(AgentOptions::default()).await.unwrap();
    let c = client();
    let id = create(&c, &agent, json!({})).await.json()["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let url = format!("{}/tasks/{id}/stream", agent.base_url());

    let first = open(&c, "GET", &url).await;
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["content-type"], "text/event-stream");
    assert_eq!(first.headers()["cache-control"], "no-cache");
    let second = open(&c, "GET", &url).await;
    assert_eq!(
        (agent.stream_connections(&id), agent.streams_opened(&id)),
        (2, 2)
    );

    agent.push_event(&id, "log", "{\"a\":1}\r\nsecond line");
    agent.push_event(&id, "evil\nevent", "x");
    agent.push_raw(&id, Bytes::from_static(b"data: raw\r\r"));
    let mut body = first.into_body();
    let mut seen = String::new();
    assert!(read_until(&mut body, &mut seen, "data: raw\r\r").await);
    assert_eq!(seen, "event: log\ndata: {\"a\":1}\ndata: second line\n\nevent: evilevent\ndata: x\n\ndata: raw\r\r");

    drop(second);
    eventually("the dropped stream to be noticed", || {
        agent.stream_connections(&id) == 1
    })
    .await;
    agent.close_streams(&id);
    let end = tokio::time::timeout(WAIT, body.frame()).await.unwrap();
    assert!(end.is_none(), "close_streams must end the stream");
    assert_eq!(
        (agent.stream_connections(&id), agent.streams_opened(&id)),
        (0, 2)
    );
}

#[tokio::test]
async fn quiet_streams_get_pings_and_terminal_tasks_get_an_empty_stream() {
    let opts = AgentOptions {
        ping_every: Duration::from_millis(100),
        ..Default::default()
    };
    let agent = SampleAgent::start(opts).await.unwrap();
    let c = client();
    let id = create(&c, &agent, json!({})).await.json()["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let url = format!("{}/tasks/{id}/stream", agent.base_url());
    let mut body = open(&c, "GET", &url).await.into_body();
    let mut seen = String::new();
    assert!(read_until(&mut body, &mut seen, "\n\n").await);
    assert!(
        seen.starts_with("event: ping\ndata: {\"timestamp\":\""),
        "{seen}"
    );
    let data: Value =
        serde_json::from_str(seen.trim_end().trim_start_matches("event: ping\ndata: ")).unwrap();
    assert_timestamp(&data["timestamp"]);

    agent.set_status(&id, "COMPLETED", json!({"output": {}}));
    let done = get(&c, &url).await;
    assert_eq!(
        (done.status, done.header("content-type")),
        (200, "text/event-stream")
    );
    assert!(done.body.is_empty());
}

#[tokio::test]
async fn set_status_merges_and_updated_at_strictly_increases() {
    let agent = SampleAgent::start(AgentOptions::default()).await.unwrap();
    let c = client();
    let id = create(&c, &agent, json!({})).await.json()["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut last = agent.task(&id).unwrap()["updated_at"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 0..50 {
        let t = agent
            .set_status(&id, "INPUT_REQUIRED", json!({"prompt": format!("p{i}")}))
            .unwrap();
        let now = t["updated_at"].as_str().unwrap().to_string();
        assert!(now > last, "{now} not after {last}");
        assert_timestamp(&t["updated_at"]);
        last = now;
    }
    let failed = agent
        .set_status(
            &id,
            "FAILED",
            json!({"error": {"code": "E", "message": "m"}}),
        )
        .unwrap();
    assert_eq!(
        (failed["status"].as_str(), failed["prompt"].as_str()),
        (Some("FAILED"), Some("p49"))
    );
    assert_eq!(
        get(&c, &format!("{}/tasks/{id}", agent.base_url()))
            .await
            .json(),
        failed
    );
    assert!(agent.set_status("nope", "WORKING", Value::Null).is_none());
}

#[tokio::test]
async fn the_oldest_tasks_are_evicted_beyond_max_tasks() {
    let agent = SampleAgent::start(AgentOptions {
        max_tasks: 3,
        ..Default::default()
    })
    .await
    .unwrap();
    let c = client();
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            create(&c, &agent, json!({})).await.json()["task_id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let first_art = agent.add_artifact(&ids[2], NewArtifact::Text("x".into()));
    assert_eq!(agent.task_ids(), ids[2..].to_vec());
    assert_eq!(
        get(&c, &format!("{}/tasks/{}", agent.base_url(), ids[0]))
            .await
            .status,
        404
    );
    create(&c, &agent, json!({})).await;
    assert_eq!(
        get(
            &c,
            &format!("{}/artifacts/{first_art}/content", agent.base_url())
        )
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn status_changes_are_pushed_to_the_notification_endpoint() {
    let sink = SampleAgent::start(AgentOptions::default()).await.unwrap();
    sink.script(Route::Other, Reply::Json(200, json!({"ok": true})));
    let hook = format!("{}/webhooks", sink.base_url());
    let card = card_for("Notifier", Some((&hook, "Authorization: Bearer tok")));
    let agent = SampleAgent::start(AgentOptions {
        card,
        ..Default::default()
    })
    .await
    .unwrap();
    let c = client();
    let id = create(&c, &agent, json!({})).await.json()["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    agent.set_status(&id, "WORKING", Value::Null);
    call(
        &c,
        "POST",
        &format!("{}/tasks/{id}/cancel", agent.base_url()),
        &[],
        "",
    )
    .await;
    eventually("two notifications", || agent.notifications_sent() == 2).await;

    let got: Vec<Recorded> = sink
        .requests()
        .into_iter()
        .filter(|r| r.route == Route::Other)
        .collect();
    assert_eq!(got.len(), 2, "creation is not a status change");
    for (rec, status) in got.iter().zip(["WORKING", "CANCELLED"]) {
        assert_eq!(
            (rec.method.as_str(), rec.path.as_str()),
            ("POST", "/webhooks")
        );
        assert_eq!(rec.headers["authorization"], "Bearer tok");
        assert_eq!(rec.headers["content-type"], "application/json");
        let p: Value = serde_json::from_slice(&rec.body).unwrap();
        assert_eq!(p["event_type"], "task.status.updated");
        assert_timestamp(&p["timestamp"]);
        assert_eq!(
            (p["data"]["task_id"].as_str(), p["data"]["status"].as_str()),
            (Some(id.as_str()), Some(status))
        );
    }

    sink.script(Route::Other, Reply::Json(500, json!({})));
    agent.set_status(&id, "FAILED", Value::Null);
    eventually("a failed notification", || {
        agent.notifications_failed() == 1
    })
    .await;
    assert_eq!(agent.notifications_sent(), 2);
}

#[tokio::test]
async fn requests_are_recorded_in_a_bounded_ring_and_counted() {
    let agent = SampleAgent::start(AgentOptions {
        record_capacity: 2,
        ..Default::default()
    })
    .await
    .unwrap();
    let c = client();
    let base = agent.base_url();
    create(&c, &agent, json!({"k": 1})).await;
    call(
        &c,
        "GET",
        &format!("{base}/tasks/x?a=1&b=2"),
        &[("x-trace", "t1")],
        "",
    )
    .await;
    get(&c, &format!("{base}/agent-card.json")).await;
    let recs = agent.requests();
    assert_eq!(recs.len(), 2);
    assert_eq!(
        (
            recs[0].route,
            recs[0].path.as_str(),
            recs[0].query.as_deref()
        ),
        (Route::GetTask, "/tasks/x", Some("a=1&b=2"))
    );
    assert_eq!(recs[0].headers["x-trace"], "t1");
    assert_eq!(recs[1].route, Route::Card);
    assert_eq!(agent.request_count(Route::CreateTask), 1);

    let agent = SampleAgent::start(AgentOptions::default()).await.unwrap();
    create(&c, &agent, json!({"k": 1})).await;
    let rec = &agent.requests()[0];
    assert_eq!(
        (rec.method.as_str(), rec.route),
        ("POST", Route::CreateTask)
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&rec.body).unwrap(),
        json!({"input": {"k": 1}})
    );
}

#[tokio::test]
async fn http2_prior_knowledge_is_served() {
    let agent = SampleAgent::start(AgentOptions::default()).await.unwrap();
    let h2: HttpClient = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let r = get(&h2, &format!("{}/agent-card.json", agent.base_url())).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["agent_id"], agent.agent_id().as_str());
}

// ---------------------------------------------------------------------------------------------
// The official A2A 1.0 protocol (`AgentOptions::a2a`)
// ---------------------------------------------------------------------------------------------

async fn a2a_agent(max_tasks: usize) -> SampleAgent {
    SampleAgent::start(AgentOptions {
        max_tasks,
        ..AgentOptions::a2a("Echo")
    })
    .await
    .unwrap()
}

async fn rpc(c: &HttpClient, agent: &SampleAgent, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let url = format!("{}/a2a/jsonrpc", agent.base_url());
    let r = call(
        c,
        "POST",
        &url,
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["id"], 7, "{v}");
    v
}

fn say(text: &str, task: Option<&str>) -> Value {
    let mut m = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    json!({ "message": m })
}

#[tokio::test]
async fn a2a_card_names_its_three_bindings_at_the_agents_own_paths() {
    let (c, agent) = (client(), a2a_agent(10).await);
    let card = get(&c, &format!("{}{}", agent.base_url(), A2A_CARD_PATH))
        .await
        .json();
    let base = agent.base_url();
    assert_eq!(
        card["supportedInterfaces"],
        json!([
            {"url": format!("{base}/a2a/jsonrpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": format!("{base}/a2a/rest"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": base, "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        ])
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    // The Clawpedia routes are not this agent's.
    assert_eq!(create(&c, &agent, json!({})).await.status, 404);
}

#[tokio::test]
async fn a2a_tasks_take_turns_cancel_and_refuse_in_the_protocols_errors() {
    let (c, agent) = (client(), a2a_agent(10).await);
    let asked = rpc(&c, &agent, "SendMessage", say("need input", None)).await;
    let task = &asked["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    let id = task["id"].as_str().unwrap().to_owned();
    let done = rpc(&c, &agent, "SendMessage", say("blue", Some(&id))).await;
    assert_eq!(
        done["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(
        done["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "got: blue"
    );
    assert_eq!(done["result"]["task"]["contextId"], task["contextId"]);
    // A final task: not cancelable, and takes no more messages.
    let again = rpc(&c, &agent, "CancelTask", json!({"id": id})).await;
    assert_eq!(again["error"]["code"], -32002, "{again}");
    let more = rpc(&c, &agent, "SendMessage", say("more", Some(&id))).await;
    assert_eq!(more["error"]["code"], -32602, "{more}");
    // A slow one works until canceled, over the REST binding.
    let base = agent.base_url();
    let slow = call(
        &c,
        "POST",
        &format!("{base}/a2a/rest/message:send"),
        &[("content-type", "application/a2a+json")],
        &say("slow", None).to_string(),
    )
    .await;
    assert_eq!(slow.status, 200);
    let slow_id = slow.json()["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(slow.json()["task"]["status"]["state"], "TASK_STATE_WORKING");
    let canceled = call(
        &c,
        "POST",
        &format!("{base}/a2a/rest/tasks/{slow_id}:cancel"),
        &[],
        "",
    )
    .await;
    assert_eq!(
        canceled.json()["status"]["state"],
        "TASK_STATE_CANCELED",
        "{:?}",
        canceled.body
    );
    let read = get(
        &c,
        &format!("{base}/a2a/rest/tasks/{slow_id}?historyLength=0"),
    )
    .await;
    assert_eq!(read.json()["status"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(read.json()["history"], json!([]));
    // Errors in each binding's own shape.
    let missing = get(&c, &format!("{base}/a2a/rest/tasks/nope")).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"]["status"], "NOT_FOUND");
    assert_eq!(
        missing.json()["error"]["details"][0]["reason"],
        "TASK_NOT_FOUND"
    );
    let v = rpc(&c, &agent, "GetTask", json!({"id": "nope"})).await;
    assert_eq!(v["error"]["code"], -32001);
    let v = rpc(&c, &agent, "NoSuchMethod", json!({})).await;
    assert_eq!(v["error"]["code"], -32601);
    // A stream: the Task at SUBMITTED, WORKING, the artifact, COMPLETED, each a response to
    // the request's id.
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "SendStreamingMessage",
        "params": say("x", None)});
    let streamed = call(
        &c,
        "POST",
        &format!("{base}/a2a/jsonrpc"),
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await;
    let events: Vec<Value> = String::from_utf8_lossy(&streamed.body)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| {
            assert_eq!(e["id"], 9, "{e}");
            ["task", "statusUpdate", "artifactUpdate"]
                .into_iter()
                .find(|k| e["result"].get(*k).is_some())
                .unwrap_or("?")
        })
        .collect();
    assert_eq!(
        kinds,
        ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    );
    assert_eq!(
        events[3]["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let r = call(&c, "POST", &format!("{base}/a2a/jsonrpc"), &[], "{not json").await;
    assert_eq!(r.json()["error"]["code"], -32700);
    // A Message answer, no task.
    let m = rpc(&c, &agent, "SendMessage", say("message", None)).await;
    assert_eq!(
        m["result"]["message"]["parts"][0]["text"],
        "you said: message"
    );
}

#[tokio::test]
async fn a2a_tasks_are_bounded_oldest_first() {
    let (c, agent) = (client(), a2a_agent(2).await);
    let mut ids = Vec::new();
    for n in 0..3 {
        let v = rpc(&c, &agent, "SendMessage", say(&format!("t{n}"), None)).await;
        ids.push(v["result"]["task"]["id"].as_str().unwrap().to_owned());
    }
    let first = rpc(&c, &agent, "GetTask", json!({"id": ids[0]})).await;
    assert_eq!(
        first["error"]["code"], -32001,
        "the oldest is gone: {first}"
    );
    for id in &ids[1..] {
        let v = rpc(&c, &agent, "GetTask", json!({"id": id})).await;
        assert_eq!(v["result"]["id"], id.as_str());
    }
    let listed = rpc(&c, &agent, "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 2, "{listed}");
}

/// The same agent in A2A 0.3 (`AgentOptions::a2a_v0_3`): a 0.3 card, 0.3's methods and shapes
/// on JSON-RPC, 0.3's proto JSON under `/a2a/rest/v1/`.
#[tokio::test]
async fn a2a_0_3_speaks_0_3_on_both_bindings() {
    let c = client();
    let agent = SampleAgent::start(AgentOptions::a2a_v0_3("Old"))
        .await
        .unwrap();
    let base = agent.base_url();
    let card = get(&c, &format!("{base}{A2A_CARD_PATH}")).await.json();
    assert_eq!(card.get("supportedInterfaces"), None, "{card}");
    assert_eq!(card["url"], format!("{base}/a2a/jsonrpc"));
    assert_eq!(card["protocolVersion"], "0.3.0");
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": "m-1", "role": "user",
        "parts": [{"kind": "text", "text": "need input"}]}}});
    let r = call(
        &c,
        "POST",
        &format!("{base}/a2a/jsonrpc"),
        &[("content-type", "application/json")],
        &send.to_string(),
    )
    .await
    .json();
    let task = &r["result"];
    assert_eq!(task["kind"], "task", "{r}");
    assert_eq!(task["status"]["state"], "input-required", "{r}");
    assert_eq!(task["status"]["message"]["role"], "agent", "{r}");
    assert_eq!(task["status"]["message"]["parts"][0]["kind"], "text", "{r}");
    // 1.0's names are not 0.3's methods.
    let v = rpc(&c, &agent, "SendMessage", say("x", None)).await;
    assert_eq!(v["error"]["code"], -32601, "{v}");
    // HTTP+JSON under /v1, in the 0.3 proto's JSON.
    let id = task["id"].as_str().unwrap();
    let got = get(&c, &format!("{base}/a2a/rest/v1/tasks/{id}"))
        .await
        .json();
    assert_eq!(got["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{got}");
    assert_eq!(
        got["status"]["message"]["content"][0]["text"], "what else?",
        "{got}"
    );
    let sent = call(
        &c,
        "POST",
        &format!("{base}/a2a/rest/v1/message:send"),
        &[("content-type", "application/json")],
        &json!({"message": {"messageId": "m-2", "role": "ROLE_USER", "content": [{"text": "blue"}],
            "taskId": id}})
        .to_string(),
    )
    .await
    .json();
    assert_eq!(
        sent["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{sent}"
    );
    assert_eq!(
        sent["task"]["artifacts"][0]["parts"][0]["text"], "got: blue",
        "{sent}"
    );
    let missing = get(&c, &format!("{base}/a2a/rest/v1/tasks/nope")).await;
    assert_eq!(
        (missing.status, missing.json()["code"].clone()),
        (404, json!(-32001))
    );
}
