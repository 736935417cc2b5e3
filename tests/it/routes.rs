//! Every route of the gateway over real HTTP, in front of real sample agents on loopback: the
//! proxied A2A endpoints in both forms, every error code the gateway produces, conformance in
//! both modes, proxy header hygiene, and the operational routes (health, readiness, metrics).

use std::time::Duration;

use crate::support::sample::{card_for, AgentOptions, NewArtifact, Reply, Route, SampleAgent};
use crate::support::*;
use a2a_gateway::config::{AgentConfig, Config, Conformance};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Method;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// One sample agent served as `a` behind a ready gateway (with `tweak`), and one task on it.
async fn single_task(tweak: impl FnOnce(&mut Config)) -> (SampleAgent, TestGateway, String) {
    let (a, g) = single("a", tweak).await;
    let id = create(&g).await;
    (a, g, id)
}

/// Two sample agents, `a` and `b`, behind one ready gateway.
async fn pair() -> (SampleAgent, SampleAgent, TestGateway) {
    let a = agent().await;
    let b = agent().await;
    let g = TestGateway::start(&[("a", &a), ("b", &b)], |_| {}).await;
    g.ready().await;
    (a, b, g)
}

/// Create a task through `path` (a create route) with a valid input; returns its id.
async fn create_at(g: &TestGateway, path: &str, body: &Value) -> String {
    let r = g.http.post_json(path, body).await;
    assert_eq!(r.status, 202, "create through {path}: {r:?}");
    let t = r.json();
    assert_eq!(t["status"], "SUBMITTED", "{t}");
    t["task_id"]
        .as_str()
        .expect("created task has a task_id")
        .to_owned()
}

async fn create(g: &TestGateway) -> String {
    create_at(g, "/agents/a/tasks", &json!({ "input": good_input() })).await
}

/// The requests `agent` received on `route`, oldest first.
fn received(agent: &SampleAgent, route: Route) -> Vec<crate::support::sample::Recorded> {
    agent
        .requests()
        .into_iter()
        .filter(|r| r.route == route)
        .collect()
}

/// Requests the agent received other than card fetches.
fn contacted(agent: &SampleAgent) -> usize {
    agent
        .requests()
        .iter()
        .filter(|r| r.route != Route::Card)
        .count()
}

fn recorded_header(rec: &crate::support::sample::Recorded, name: &str) -> Option<String> {
    rec.headers
        .get(name)
        .map(|v| v.to_str().expect("header is text").to_owned())
}

/// Header `name` of the first request `agent` received on `route`.
fn first_header(agent: &SampleAgent, route: Route, name: &str) -> Option<String> {
    let first = received(agent, route)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("the agent received no {route:?} request"));
    recorded_header(&first, name)
}

/// The task as the agent holds it, in `status` and with `extra` merged in (a scripted answer).
fn task_doc(agent: &SampleAgent, id: &str, status: &str, extra: Value) -> Value {
    let mut t = agent.task(id).expect("the agent knows the task");
    t["status"] = json!(status);
    if let (Some(t), Value::Object(extra)) = (t.as_object_mut(), extra) {
        t.extend(extra);
    }
    t
}

/// The `instance_path`s of a protocol-violation answer, asserting each detail's shape.
fn violation_paths(r: &Resp) -> Vec<String> {
    let err = assert_api_error(r, 502, "AGENT_PROTOCOL_VIOLATION");
    let details = err["details"]
        .as_array()
        .unwrap_or_else(|| panic!("protocol violation without details: {err}"));
    assert!(!details.is_empty(), "{err}");
    details
        .iter()
        .map(|d| {
            assert!(d["schema_path"].is_string(), "{d}");
            assert!(d["message"].is_string(), "{d}");
            d["instance_path"]
                .as_str()
                .expect("instance_path")
                .to_owned()
        })
        .collect()
}

fn file_bytes(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i.wrapping_mul(31) % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

async fn metrics_text(g: &TestGateway) -> (Resp, String) {
    let r = g.http.get("/metrics").await;
    let text = String::from_utf8(r.body.to_vec()).expect("metrics are UTF-8");
    (r, text)
}

// ---------------------------------------------------------------------------------------------
// The proxied routes
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn create_under_an_agent_forwards_the_body_unchanged_and_answers_202() {
    let (a, g) = single("a", |_| {}).await;
    let body = json!({ "input": good_input(), "note": "kept" });
    let id = create_at(&g, "/agents/a/tasks", &body).await;
    let creates = received(&a, Route::CreateTask);
    assert_eq!(creates.len(), 1);
    let forwarded: Value = serde_json::from_slice(&creates[0].body).expect("agent got JSON");
    assert_eq!(forwarded, body);
    assert_eq!(
        recorded_header(&creates[0], "content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        a.task(&id).expect("agent holds the task")["status"],
        "SUBMITTED"
    );
}

#[tokio::test]
async fn agentless_create_by_route_name_sends_the_agent_only_the_input() {
    let (a, g) = single("a", |_| {}).await;
    let id = create_at(
        &g,
        "/tasks",
        &json!({ "agent": "a", "input": good_input() }),
    )
    .await;
    let creates = received(&a, Route::CreateTask);
    assert_eq!(creates.len(), 1);
    let forwarded: Value = serde_json::from_slice(&creates[0].body).expect("agent got JSON");
    assert_eq!(forwarded, json!({ "input": good_input() }));
    assert!(a.task(&id).is_some());
}

#[tokio::test]
async fn agentless_create_by_agent_id_reaches_that_agent() {
    let (a, b, g) = pair().await;
    let id = create_at(
        &g,
        "/tasks",
        &json!({ "agent": b.agent_id(), "input": good_input() }),
    )
    .await;
    assert!(b.task(&id).is_some(), "created on b");
    assert_eq!(a.request_count(Route::CreateTask), 0);
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["agent_id"], b.agent_id().as_str());
}

#[tokio::test]
async fn the_cards_agent_id_works_as_the_route_name() {
    let (a, g) = single("a", |_| {}).await;
    let prefix = format!("/agents/{}", a.agent_id());
    let id = create_at(
        &g,
        &format!("{prefix}/tasks"),
        &json!({ "input": good_input() }),
    )
    .await;
    let r = g.http.get(&format!("{prefix}/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["task_id"], id.as_str());
    let r = g.http.get(&format!("{prefix}/tasks/{id}/artifacts")).await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = g
        .http
        .post_empty(&format!("{prefix}/tasks/{id}/cancel"))
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    assert_eq!(a.request_count(Route::CancelTask), 1);
}

#[tokio::test]
async fn get_task_answers_the_agents_current_state_in_both_forms() {
    let (a, g, id) = single_task(|_| {}).await;
    a.set_status(&id, "WORKING", Value::Null)
        .expect("agent knows the task");
    for path in [format!("/agents/a/tasks/{id}"), format!("/tasks/{id}")] {
        let r = g.http.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(r.json()["status"], "WORKING", "{path}");
        assert_eq!(r.json(), a.task(&id).expect("task"), "{path}");
    }
    let gets = received(&a, Route::GetTask);
    assert_eq!(gets.len(), 2);
    assert!(gets.iter().all(|r| r.path == format!("/tasks/{id}")));
}

#[tokio::test]
async fn cancel_in_both_forms_reaches_the_agent() {
    let (a, g) = single("a", |_| {}).await;
    let first = create(&g).await;
    let second = create(&g).await;
    for (id, path) in [
        (&first, format!("/agents/a/tasks/{first}/cancel")),
        (&second, format!("/tasks/{second}/cancel")),
    ] {
        let r = g.http.post_empty(&path).await;
        assert_eq!(r.status, 202, "{path}: {r:?}");
        assert_eq!(r.json()["status"], "CANCELLED", "{path}");
        assert_eq!(a.task(id).expect("task")["status"], "CANCELLED", "{path}");
    }
    let cancels = received(&a, Route::CancelTask);
    assert_eq!(cancels.len(), 2);
    assert!(
        cancels.iter().all(|r| r.body.is_empty()),
        "cancel has no body"
    );
}

#[tokio::test]
async fn artifacts_are_listed_in_both_forms() {
    let (a, g, id) = single_task(|_| {}).await;
    let text = a.add_artifact(&id, NewArtifact::Text("hello".into()));
    let log = a.add_artifact(&id, NewArtifact::Log("line".into()));
    for path in [
        format!("/agents/a/tasks/{id}/artifacts"),
        format!("/tasks/{id}/artifacts"),
    ] {
        let r = g.http.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        let list = r.json();
        let listed: Vec<(&str, &str)> = list["artifacts"]
            .as_array()
            .expect("artifacts array")
            .iter()
            .map(|x| {
                (
                    x["artifact_id"].as_str().expect("artifact_id"),
                    x["type"].as_str().expect("type"),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [(text.as_str(), "text"), (log.as_str(), "log")],
            "{path}"
        );
    }
    assert_eq!(a.request_count(Route::ListArtifacts), 2);
}

#[tokio::test]
async fn agentless_artifact_content_is_not_found_until_listed_through_the_gateway() {
    let (a, g, id) = single_task(|_| {}).await;
    let art = a.add_artifact(&id, NewArtifact::Text("the content".into()));
    let agentless = format!("/artifacts/{art}/content");

    let r = g.http.get(&agentless).await;
    assert_api_error(&r, 404, "ARTIFACT_NOT_FOUND");
    assert_eq!(a.request_count(Route::ArtifactContent), 0);

    // Under the agent's prefix no listing is needed.
    let r = g
        .http
        .get(&format!("/agents/a/artifacts/{art}/content"))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(&r.body[..], b"the content");
    let r = g.http.get(&agentless).await;
    assert_api_error(&r, 404, "ARTIFACT_NOT_FOUND");

    let r = g.http.get(&format!("/tasks/{id}/artifacts")).await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = g.http.get(&agentless).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(&r.body[..], b"the content");
    assert!(r
        .header("content-type")
        .is_some_and(|ct| ct.starts_with("text/plain")));
    assert_eq!(a.request_count(Route::ArtifactContent), 2);
}

#[tokio::test]
async fn file_artifact_bodies_stream_through_with_their_content_type() {
    let (a, g, id) = single_task(|_| {}).await;
    // Larger than anything the gateway buffers from an agent (8 MiB): only a streamed body fits.
    let body = file_bytes(9 * 1024 * 1024 + 123);
    let art = a.add_artifact(
        &id,
        NewArtifact::File {
            filename: "model.bin".into(),
            mime_type: "application/x-sample-model".into(),
            body: body.clone(),
        },
    );
    let r = g.http.get(&format!("/tasks/{id}/artifacts")).await;
    assert_eq!(r.status, 200, "{r:?}");
    for path in [
        format!("/agents/a/artifacts/{art}/content"),
        format!("/artifacts/{art}/content"),
    ] {
        let r = g.http.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {:?} {:?}", r.status, r.headers);
        assert_eq!(
            r.header("content-type"),
            Some("application/x-sample-model"),
            "{path}"
        );
        assert_eq!(r.body.len(), body.len(), "{path}");
        assert!(r.body == body, "{path}: bytes differ");
    }
}

/// The sample agent redirects a file to `/downloads/{id}` on its own origin: an address of the
/// agent's a client must not get (issue 23), so the gateway answers 502 and follows nothing.
#[tokio::test]
async fn a_redirect_to_another_path_of_the_agents_origin_is_refused_unfollowed() {
    let (a, g, id) = single_task(|_| {}).await;
    let art = a.add_artifact(
        &id,
        NewArtifact::Redirect {
            filename: "report.pdf".into(),
            mime_type: "application/pdf".into(),
            body: Bytes::from_static(b"%PDF-1.7 not really"),
        },
    );
    let r = g
        .http
        .get(&format!("/agents/a/artifacts/{art}/content"))
        .await;
    assert_api_error(&r, 502, "AGENT_PROTOCOL_VIOLATION");
    assert_eq!(r.header("location"), None);
    assert!(!String::from_utf8_lossy(&r.body).contains(&a.base_url()));
    assert_eq!(
        a.request_count(Route::Download),
        0,
        "the gateway followed it"
    );
}

#[tokio::test]
async fn task_stream_passes_agent_events_through() {
    let (a, g, id) = single_task(|_| {}).await;
    let res = g.http.open(&format!("/tasks/{id}/stream")).await;
    assert_eq!(res.status(), 200);
    let h = res.headers();
    assert_eq!(
        h.get("cache-control").map(|v| v.as_bytes()),
        Some(&b"no-cache"[..])
    );
    assert_eq!(
        h.get("x-accel-buffering").map(|v| v.as_bytes()),
        Some(&b"no"[..])
    );
    assert!(h
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream")));
    wait_for("the agent's stream is open", || {
        let open = a.stream_connections(&id);
        async move { open == 1 }
    })
    .await;
    a.push_event(
        &id,
        "log",
        r#"{"level":"INFO","message":"through the gateway"}"#,
    );
    let mut body = res.into_body();
    let mut seen = String::new();
    while !seen.contains("through the gateway") {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("event arrives in time")
            .expect("stream still open")
            .expect("frame");
        if let Ok(data) = frame.into_data() {
            seen.push_str(&String::from_utf8_lossy(&data));
        }
    }
    assert!(seen.contains("event: log\n"), "{seen}");
    // The gateway numbers the events itself.
    assert!(
        seen.contains("\nid: ") || seen.starts_with("id: "),
        "{seen}"
    );
    // When the task ends (here: cancelled through the gateway) the stream closes with the
    // task's final state.
    let r = g.http.post_empty(&format!("/tasks/{id}/cancel")).await;
    assert_eq!(r.json()["status"], "CANCELLED", "{r:?}");
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(f) = body.frame().await {
            if let Ok(d) = f.expect("clean end").into_data() {
                seen.push_str(&String::from_utf8_lossy(&d));
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the stream ends when the task ends");
    assert!(seen.contains("event: status\n"), "{seen}");
    assert!(seen.contains("CANCELLED"), "{seen}");
}

#[tokio::test]
async fn the_stream_gets_anti_buffering_headers_even_when_the_agent_sends_none() {
    let (a, g, id) = single_task(|_| {}).await;
    let events = "event: log\ndata: {\"message\":\"one\"}\n\n";
    a.script(
        Route::Stream,
        Reply::Raw {
            status: 200,
            content_type: "text/event-stream".into(),
            body: Bytes::from_static(events.as_bytes()),
        },
    );
    let res = g.http.open(&format!("/agents/a/tasks/{id}/stream")).await;
    assert_eq!(res.status(), 200);
    let h = |n: &str| {
        res.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(h("cache-control").as_deref(), Some("no-cache"));
    assert_eq!(h("x-accel-buffering").as_deref(), Some("no"));
    assert_eq!(h("content-type").as_deref(), Some("text/event-stream"));
    assert_eq!(h("content-encoding"), None);
    let mut body = res.into_body();
    let mut seen = String::new();
    while !seen.contains("\n\n") {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("event in time")
            .expect("open")
            .expect("frame");
        if let Ok(d) = frame.into_data() {
            seen.push_str(&String::from_utf8_lossy(&d));
        }
    }
    assert!(
        seen.ends_with("event: log\ndata: {\"message\":\"one\"}\n\n"),
        "{seen}"
    );
    assert_eq!(
        first_header(&a, Route::Stream, "accept").as_deref(),
        Some("text/event-stream")
    );
}

// ---------------------------------------------------------------------------------------------
// Errors of the gateway's own
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn malformed_json_is_invalid_json() {
    let (a, g) = single("a", |_| {}).await;
    let r = g
        .http
        .send(
            Method::POST,
            "/agents/a/tasks",
            &[("content-type", "application/json")],
            r#"{"input": {"topic": "x""#,
        )
        .await;
    assert_api_error(&r, 400, "INVALID_JSON");
    assert_eq!(a.request_count(Route::CreateTask), 0);
}

#[tokio::test]
async fn a_body_without_an_input_object_is_invalid_request() {
    let (a, g) = single("a", |_| {}).await;
    for body in [
        json!({}),
        json!({ "input": "topic" }),
        json!({ "input": null }),
        json!([{ "input": good_input() }]),
        json!(good_input()),
    ] {
        let r = g.http.post_json("/agents/a/tasks", &body).await;
        assert_api_error(&r, 400, "INVALID_REQUEST");
    }
    assert_eq!(a.request_count(Route::CreateTask), 0);
}

#[tokio::test]
async fn agentless_create_without_agent_is_invalid_request() {
    let (a, g) = single("a", |_| {}).await;
    for body in [
        json!({ "input": good_input() }),
        json!({ "agent": 7, "input": good_input() }),
    ] {
        let r = g.http.post_json("/tasks", &body).await;
        assert_api_error(&r, 400, "INVALID_REQUEST");
    }
    let r = g.http.post_json("/tasks", &json!({ "agent": "a" })).await;
    assert_api_error(&r, 400, "INVALID_REQUEST");
    assert_eq!(a.request_count(Route::CreateTask), 0);
}

#[tokio::test]
async fn input_schema_violations_are_all_reported_without_contacting_the_agent() {
    let (a, g) = single("a", |_| {}).await;
    let bad = json!({ "topic": 42, "filename": "not a script.sh" });
    for (path, body) in [
        ("/agents/a/tasks", json!({ "input": bad })),
        ("/tasks", json!({ "agent": "a", "input": bad })),
    ] {
        let r = g.http.post_json(path, &body).await;
        let err = assert_api_error(&r, 422, "INPUT_SCHEMA_VIOLATION");
        let details = err["details"].as_array().expect("details array");
        let mut found: Vec<(String, String)> = details
            .iter()
            .map(|d| {
                let obj = d.as_object().expect("detail is an object");
                assert_eq!(obj.len(), 3, "{d}");
                assert!(d["message"].as_str().is_some_and(|m| !m.is_empty()), "{d}");
                (
                    d["instance_path"]
                        .as_str()
                        .expect("instance_path")
                        .to_owned(),
                    d["schema_path"].as_str().expect("schema_path").to_owned(),
                )
            })
            .collect();
        found.sort();
        assert_eq!(found.len(), 2, "{path}: {err}");
        assert_eq!(found[0].0, "/input/filename", "{err}");
        assert!(found[0].1.ends_with("pattern"), "{err}");
        assert_eq!(found[1].0, "/input/topic", "{err}");
        assert!(found[1].1.ends_with("type"), "{err}");
    }
    assert_eq!(a.request_count(Route::CreateTask), 0);
}

#[tokio::test]
async fn a_missing_required_property_is_a_schema_violation() {
    let (a, g) = single("a", |_| {}).await;
    let r = g
        .http
        .post_json("/agents/a/tasks", &json!({ "input": { "topic": "t" } }))
        .await;
    let err = assert_api_error(&r, 422, "INPUT_SCHEMA_VIOLATION");
    let details = err["details"].as_array().expect("details");
    assert_eq!(details.len(), 1, "{err}");
    assert!(details[0]["schema_path"]
        .as_str()
        .is_some_and(|p| p.ends_with("required")));
    assert!(details[0]["message"]
        .as_str()
        .is_some_and(|m| m.contains("filename")));
    assert_eq!(a.request_count(Route::CreateTask), 0);
}

#[tokio::test]
async fn an_unknown_agent_is_unknown_agent_in_every_form() {
    let (a, g) = single("a", |_| {}).await;
    let some_id = uuid::Uuid::new_v4().to_string();
    let r = g.http.post_task("nobody").await;
    assert_api_error(&r, 404, "UNKNOWN_AGENT");
    let r = g
        .http
        .post_json(
            "/tasks",
            &json!({ "agent": "nobody", "input": good_input() }),
        )
        .await;
    assert_api_error(&r, 404, "UNKNOWN_AGENT");
    for path in [
        format!("/agents/nobody/tasks/{some_id}"),
        format!("/agents/nobody/tasks/{some_id}/artifacts"),
        format!("/agents/nobody/tasks/{some_id}/stream"),
        format!("/agents/nobody/artifacts/{some_id}/content"),
    ] {
        let r = g.http.get(&path).await;
        assert_api_error(&r, 404, "UNKNOWN_AGENT");
    }
    let r = g
        .http
        .post_empty(&format!("/agents/nobody/tasks/{some_id}/cancel"))
        .await;
    assert_api_error(&r, 404, "UNKNOWN_AGENT");
    assert_eq!(contacted(&a), 0, "the agent was contacted");
}

#[tokio::test]
async fn an_agentless_unknown_task_is_task_not_found() {
    let (a, g) = single("a", |_| {}).await;
    let id = uuid::Uuid::new_v4().to_string();
    for path in [
        format!("/tasks/{id}"),
        format!("/tasks/{id}/artifacts"),
        format!("/tasks/{id}/stream"),
    ] {
        let r = g.http.get(&path).await;
        assert_api_error(&r, 404, "TASK_NOT_FOUND");
    }
    let r = g.http.post_empty(&format!("/tasks/{id}/cancel")).await;
    assert_api_error(&r, 404, "TASK_NOT_FOUND");
    assert_eq!(contacted(&a), 0, "the agent was contacted");
}

#[tokio::test]
async fn a_task_of_one_agent_is_not_found_under_another() {
    let (a, b, g) = pair().await;
    let id = create(&g).await;
    for path in [
        format!("/agents/b/tasks/{id}"),
        format!("/agents/b/tasks/{id}/artifacts"),
        format!("/agents/b/tasks/{id}/stream"),
    ] {
        let r = g.http.get(&path).await;
        assert_api_error(&r, 404, "TASK_NOT_FOUND");
    }
    let r = g
        .http
        .post_empty(&format!("/agents/b/tasks/{id}/cancel"))
        .await;
    assert_api_error(&r, 404, "TASK_NOT_FOUND");
    assert_eq!(contacted(&b), 0, "the agent was contacted");
    assert_eq!(a.request_count(Route::CancelTask), 0);
    assert_eq!(a.task(&id).expect("task")["status"], "SUBMITTED");
}

#[tokio::test]
async fn cancel_of_a_terminal_task_is_task_terminal() {
    let (a, g, id) = single_task(|_| {}).await;
    let r = g.http.post_empty(&format!("/tasks/{id}/cancel")).await;
    assert_eq!(r.status, 202, "{r:?}");
    let r = g.http.post_empty(&format!("/tasks/{id}/cancel")).await;
    let err = assert_api_error(&r, 409, "TASK_TERMINAL");
    assert_eq!(err["details"]["status"], "CANCELLED", "{err}");
    assert_eq!(a.request_count(Route::CancelTask), 1);
}

#[tokio::test]
async fn an_agent_with_an_invalid_card_is_unavailable_with_the_reason() {
    let mut card = card_for("Broken", None);
    card["description"] = json!("short");
    let a = agent_with(AgentOptions {
        card,
        ..Default::default()
    })
    .await;
    let g = TestGateway::start(&[("a", &a)], |_| {}).await;
    g.ready().await;
    let r = g.http.post_task("a").await;
    let err = assert_api_error(&r, 503, "AGENT_UNAVAILABLE");
    let msg = err["message"].as_str().expect("message");
    // The answer says the kind; what is wrong with the card (its own text) is the catalog's,
    // for operators.
    assert!(msg.ends_with("has no valid card: invalid card"), "{msg}");
    let catalog = g.http.get("/agents").await.json();
    let why = catalog["agents"][0]["last_error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("/description"),
        "the reason names the field: {why}"
    );
    let r = g
        .http
        .post_json("/tasks", &json!({ "agent": "a", "input": good_input() }))
        .await;
    assert_api_error(&r, 503, "AGENT_UNAVAILABLE");
    assert_eq!(a.request_count(Route::CreateTask), 0);
}

#[tokio::test]
async fn an_agent_unreachable_from_the_start_is_unavailable_with_the_reason() {
    let (_a, g) = single("a", |cfg| {
        // Port 1 on loopback: nothing listens there, and no ephemeral port is ever 1.
        cfg.agents
            .push(AgentConfig::new("dead", "http://127.0.0.1:1"));
    })
    .await;
    let r = g.http.post_task("dead").await;
    let err = assert_api_error(&r, 503, "AGENT_UNAVAILABLE");
    let msg = err["message"].as_str().expect("message");
    assert!(msg.contains("card fetch failed"), "{msg}");
}

#[tokio::test]
async fn an_agent_closing_the_connection_is_unreachable() {
    let (a, g) = single("a", |_| {}).await;
    a.script(Route::CreateTask, Reply::Close);
    let r = g.http.post_task("a").await;
    let err = assert_api_error(&r, 502, "AGENT_UNREACHABLE");
    assert!(err["message"]
        .as_str()
        .is_some_and(|m| m.contains("unreachable")));
    assert!(a.request_count(Route::CreateTask) >= 1);
}

#[tokio::test]
async fn an_agent_that_was_shut_down_is_unreachable() {
    let (a, g, id) = single_task(|_| {}).await;
    a.shutdown().await;
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_api_error(&r, 502, "AGENT_UNREACHABLE");
    let r = g.http.post_empty(&format!("/tasks/{id}/cancel")).await;
    assert_api_error(&r, 502, "AGENT_UNREACHABLE");
}

#[tokio::test]
async fn a_hanging_agent_is_a_timeout() {
    let (a, g) = single("a", |cfg| {
        cfg.agents[0].timeout = Duration::from_millis(300)
    })
    .await;
    a.script(Route::CreateTask, Reply::Hang);
    let r = g.http.post_task("a").await;
    let err = assert_api_error(&r, 504, "AGENT_TIMEOUT");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("300 ms")),
        "{err}"
    );
}

#[tokio::test]
async fn a_hanging_artifact_download_is_a_timeout() {
    let (a, g) = single("a", |cfg| {
        cfg.agents[0].timeout = Duration::from_millis(300)
    })
    .await;
    let id = create(&g).await;
    let art = a.add_artifact(&id, NewArtifact::Text("x".into()));
    a.script(Route::ArtifactContent, Reply::Hang);
    let r = g
        .http
        .get(&format!("/agents/a/artifacts/{art}/content"))
        .await;
    assert_api_error(&r, 504, "AGENT_TIMEOUT");
}

#[tokio::test]
async fn a_create_answered_with_a_non_uuid_task_id_is_a_protocol_violation() {
    let (a, g) = single("a", |_| {}).await;
    let mut t = task_doc(&a, &create(&g).await, "SUBMITTED", Value::Null);
    t["task_id"] = json!("task-1");
    a.script_once(Route::CreateTask, Reply::Json(202, t));
    let r = g.http.post_task("a").await;
    assert_eq!(violation_paths(&r), ["/task_id"]);
    let r = g.http.get("/tasks/task-1").await;
    assert_api_error(&r, 404, "TASK_NOT_FOUND");
}

#[tokio::test]
async fn a_create_answered_in_working_is_a_protocol_violation() {
    let (a, g, id) = single_task(|_| {}).await;
    let t = task_doc(&a, &id, "WORKING", Value::Null);
    a.script_once(Route::CreateTask, Reply::Json(202, t));
    let r = g.http.post_task("a").await;
    assert_eq!(violation_paths(&r), ["/status"]);
}

#[tokio::test]
async fn a_failed_task_without_error_is_a_protocol_violation() {
    let (a, g, id) = single_task(|_| {}).await;
    let t = task_doc(&a, &id, "FAILED", Value::Null);
    a.script_once(Route::GetTask, Reply::Json(200, t));
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(violation_paths(&r), ["/error"]);
    // Not recorded: the next (correct) answer is still SUBMITTED.
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["status"], "SUBMITTED");
}

#[tokio::test]
async fn timestamps_without_milliseconds_are_a_protocol_violation() {
    let (a, g, id) = single_task(|_| {}).await;
    let t = task_doc(
        &a,
        &id,
        "WORKING",
        json!({ "updated_at": "2030-01-01T00:00:00Z" }),
    );
    a.script_once(Route::GetTask, Reply::Json(200, t));
    let r = g.http.get(&format!("/agents/a/tasks/{id}")).await;
    assert_eq!(violation_paths(&r), ["/updated_at"]);
}

#[tokio::test]
async fn a_create_answered_200_instead_of_202_is_a_protocol_violation() {
    let (a, g) = single("a", |_| {}).await;
    let t = task_doc(&a, &create(&g).await, "SUBMITTED", Value::Null);
    a.script_once(Route::CreateTask, Reply::Json(200, t));
    let r = g.http.post_task("a").await;
    assert_eq!(violation_paths(&r), [""]);
}

#[tokio::test]
async fn a_task_answer_that_is_not_json_is_a_protocol_violation() {
    let (a, g, id) = single_task(|_| {}).await;
    a.script_once(
        Route::GetTask,
        Reply::Raw {
            status: 200,
            content_type: "application/json".into(),
            body: Bytes::from_static(b"<html>WORKING</html>"),
        },
    );
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(violation_paths(&r), [""]);
}

#[tokio::test]
async fn a_file_artifact_without_filename_is_a_protocol_violation() {
    let (a, g, id) = single_task(|_| {}).await;
    a.add_artifact(
        &id,
        NewArtifact::File {
            filename: "a.py".into(),
            mime_type: "text/x-python".into(),
            body: Bytes::from_static(b"print(1)"),
        },
    );
    // The agent's own (correct) list, with the file's required filename taken out.
    let mut list = g.http.get(&format!("/tasks/{id}/artifacts")).await.json();
    list["artifacts"][0]["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("filename");
    a.script_once(Route::ListArtifacts, Reply::Json(200, list));
    let r = g.http.get(&format!("/agents/a/tasks/{id}/artifacts")).await;
    assert_eq!(violation_paths(&r), ["/artifacts/0/metadata"]);
}

#[tokio::test]
async fn report_mode_passes_a_broken_answer_on_and_counts_it() {
    let (a, g, id) = single_task(|cfg| cfg.agents[0].conformance = Conformance::Report).await;
    let violations = [("agent", "a"), ("kind", "task"), ("mode", "report")];
    assert_eq!(
        g.metric("a2a_gateway_protocol_violations_total", &violations)
            .await,
        0.0
    );
    let t = task_doc(&a, &id, "FAILED", Value::Null);
    a.script_once(Route::GetTask, Reply::Json(200, t.clone()));
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json(), t, "the broken answer is passed on as is");
    assert_eq!(
        g.metric("a2a_gateway_protocol_violations_total", &violations)
            .await,
        1.0
    );
}

#[tokio::test]
async fn an_agents_own_error_answer_is_passed_through() {
    let (a, g) = single("a", |_| {}).await;
    let refusal = json!({ "error": { "code": "QUOTA_EXCEEDED", "message": "try tomorrow" } });
    a.script_once(Route::CreateTask, Reply::Json(429, refusal.clone()));
    let r = g.http.post_task("a").await;
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.json(), refusal);

    let id = create(&g).await;
    let broken = json!({ "error": { "code": "DISK_FULL", "message": "no space" } });
    a.script_once(Route::GetTask, Reply::Json(500, broken.clone()));
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(r.status, 500, "{r:?}");
    assert_eq!(r.json(), broken);
}

/// A task created at the agent itself, not through the gateway: the ledger has never seen it.
async fn created_at_the_agent(a: &SampleAgent) -> String {
    let r = Http::new(a.base_url())
        .post_json("/tasks", &json!({ "input": good_input() }))
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    r.json()["task_id"].as_str().expect("task_id").to_owned()
}

/// Under an agent's prefix, a task id the ledger has never recorded is 404 TASK_NOT_FOUND on
/// every task route, without contacting the agent: a client cannot read, stream or cancel a
/// task the gateway does not guard (here one created at the agent directly).
#[tokio::test]
async fn task_routes_under_an_agent_refuse_ids_the_gateway_has_never_seen() {
    let (a, g) = single("a", |_| {}).await;
    let agent_id = a.agent_id();
    let direct = created_at_the_agent(&a).await;
    let before = contacted(&a);
    for id in [direct.clone(), uuid::Uuid::new_v4().to_string()] {
        for prefix in ["a", agent_id.as_str()] {
            for path in [
                format!("/agents/{prefix}/tasks/{id}"),
                format!("/agents/{prefix}/tasks/{id}/artifacts"),
                format!("/agents/{prefix}/tasks/{id}/stream"),
            ] {
                let r = g.http.get(&path).await;
                assert_api_error(&r, 404, "TASK_NOT_FOUND");
            }
            let r = g
                .http
                .post_empty(&format!("/agents/{prefix}/tasks/{id}/cancel"))
                .await;
            assert_api_error(&r, 404, "TASK_NOT_FOUND");
        }
    }
    assert_eq!(contacted(&a), before, "the agent was contacted");
    assert_eq!(a.task(&direct).expect("task")["status"], "SUBMITTED");
    // Counted under the agent the route names, whichever of its names it used.
    let refused = [("route", "get_task"), ("agent", "a"), ("status", "404")];
    assert_eq!(g.metric("a2a_gateway_requests_total", &refused).await, 4.0);
    assert_eq!(g.metric("a2a_gateway_stream_upstreams", &[]).await, 0.0);
}

/// `passthrough_unknown_tasks = true`: for an agent whose tasks are also created elsewhere,
/// unknown ids are forwarded as before, and what the agent answers is recorded.
#[tokio::test]
async fn a_passthrough_agent_serves_tasks_created_elsewhere() {
    let (a, g) = single("a", |cfg| cfg.agents[0].passthrough_unknown_tasks = true).await;
    let id = created_at_the_agent(&a).await;
    let r = g.http.get(&format!("/agents/a/tasks/{id}/artifacts")).await;
    assert_eq!(r.status, 200, "{r:?}");
    let stream = g.http.open(&format!("/agents/a/tasks/{id}/stream")).await;
    assert_eq!(stream.status(), 200, "{stream:?}");
    drop(stream);
    let r = g.http.get(&format!("/agents/a/tasks/{id}")).await;
    assert_eq!((r.status, &r.json()["status"]), (200, &json!("SUBMITTED")));
    // Recorded by that answer: the agent-less route finds it now.
    assert_eq!(g.http.get(&format!("/tasks/{id}")).await.status, 200);
    let other = created_at_the_agent(&a).await;
    let r = g
        .http
        .post_empty(&format!("/agents/a/tasks/{other}/cancel"))
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    assert_eq!(r.json()["status"], "CANCELLED");
    assert_eq!(a.task(&other).expect("task")["status"], "CANCELLED");
}

#[tokio::test]
async fn an_unknown_task_under_a_passthrough_agent_gets_the_agents_own_404() {
    let (a, g) = single("a", |cfg| cfg.agents[0].passthrough_unknown_tasks = true).await;
    let id = uuid::Uuid::new_v4().to_string();
    let r = g.http.get(&format!("/agents/a/tasks/{id}")).await;
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(r.json()["error"]["code"], "TASK_NOT_FOUND");
    assert_eq!(a.request_count(Route::GetTask), 1, "asked the agent");
}

#[tokio::test]
async fn a_body_over_the_limit_with_content_length_is_payload_too_large() {
    let (a, g) = single("a", |cfg| cfg.max_body_bytes = 4096).await;
    let fits = json!({ "input": { "topic": "t", "filename": "a.py", "pad": "x".repeat(3000) } });
    let r = g.http.post_json("/agents/a/tasks", &fits).await;
    assert_eq!(r.status, 202, "a body under the limit passes: {r:?}");
    let over = json!({ "input": { "topic": "t", "filename": "a.py", "pad": "x".repeat(5000) } });
    let r = g.http.post_json("/agents/a/tasks", &over).await;
    assert_api_error(&r, 413, "PAYLOAD_TOO_LARGE");
    assert_eq!(a.request_count(Route::CreateTask), 1);
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_payload_too_large() {
    let (a, g) = single("a", |cfg| cfg.max_body_bytes = 4096).await;
    let chunked = |doc: &Value| {
        let json = serde_json::to_vec(doc).expect("json");
        let mut body = Vec::new();
        for part in json.chunks(1000) {
            body.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
            body.extend_from_slice(part);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"0\r\n\r\n");
        body
    };
    let head = "POST /agents/a/tasks HTTP/1.1\nHost: gw\n\
                Content-Type: application/json\nTransfer-Encoding: chunked";
    let fits = json!({ "input": { "topic": "t", "filename": "a.py", "pad": "x".repeat(3000) } });
    let r = raw_request(g.gw.addr(), head, &chunked(&fits)).await;
    assert_eq!(
        r.status, 202,
        "a chunked body under the limit passes: {r:?}"
    );
    let over = json!({ "input": { "topic": "t", "filename": "a.py", "pad": "x".repeat(5000) } });
    let r = raw_request(g.gw.addr(), head, &chunked(&over)).await;
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(r.json()["error"]["code"], "PAYLOAD_TOO_LARGE");
    assert_eq!(a.request_count(Route::CreateTask), 1);
}

#[tokio::test]
async fn a_non_json_content_type_is_unsupported_media_type() {
    let (a, g) = single("a", |_| {}).await;
    let body = serde_json::to_vec(&json!({ "input": good_input() })).expect("json");
    for headers in [
        &[("content-type", "text/plain")][..],
        &[("content-type", "application/x-www-form-urlencoded")][..],
        &[][..],
    ] {
        let r = g
            .http
            .send(Method::POST, "/agents/a/tasks", headers, body.clone())
            .await;
        assert_api_error(&r, 415, "UNSUPPORTED_MEDIA_TYPE");
    }
    assert_eq!(a.request_count(Route::CreateTask), 0);
    let r = g
        .http
        .send(
            Method::POST,
            "/agents/a/tasks",
            &[("content-type", "application/json; charset=utf-8")],
            body,
        )
        .await;
    assert_eq!(r.status, 202, "a charset parameter is fine: {r:?}");
}

#[tokio::test]
async fn unknown_paths_and_crafted_ids_are_not_found() {
    let (a, g) = single("a", |_| {}).await;
    for path in [
        "/nothing-here",
        "/",
        "/tasks/..",
        "/tasks/../agent-card.json",
        "/agents/a/tasks/..",
        "/agents/a/tasks/../../agent-card.json",
        "/agents/a/tasks/%2e%2e/cancel",
        "/tasks/a%2Fb",
        "/agents/a/tasks/t/",
        "/agents/a/tasks/t/cancel/again",
        "/agents/a/downloads/x",
    ] {
        let head = format!("GET {path} HTTP/1.1\nHost: gw");
        let r = raw_request(g.gw.addr(), &head, b"").await;
        assert_eq!(r.status, 404, "{path}: {r:?}");
        let j = r.json();
        assert_eq!(j["error"]["code"], "NOT_FOUND", "{path}: {j}");
        assert!(j["error"]["message"].is_string(), "{path}: {j}");
    }
    assert_eq!(contacted(&a), 0, "the agent was contacted");
}

#[tokio::test]
async fn wrong_methods_are_method_not_allowed_with_allow() {
    let (a, g) = single("a", |_| {}).await;
    let id = uuid::Uuid::new_v4().to_string();
    for (method, path, allow) in [
        (Method::DELETE, format!("/tasks/{id}"), "GET"),
        (Method::POST, format!("/agents/a/tasks/{id}"), "GET"),
        (Method::GET, "/agents/a/tasks".to_owned(), "POST"),
        // One path, two routes: GET lists the tasks, POST creates one.
        (Method::PUT, "/tasks".to_owned(), "GET, POST"),
        (Method::GET, format!("/tasks/{id}/cancel"), "POST"),
        (Method::POST, format!("/artifacts/{id}/content"), "GET"),
        (Method::POST, "/healthz".to_owned(), "GET"),
        (Method::DELETE, "/metrics".to_owned(), "GET"),
    ] {
        let r = g.http.send(method.clone(), &path, &[], Bytes::new()).await;
        assert_api_error(&r, 405, "METHOD_NOT_ALLOWED");
        assert_eq!(r.header("allow"), Some(allow), "{method} {path}");
    }
    assert_eq!(contacted(&a), 0, "the agent was contacted");
}

// ---------------------------------------------------------------------------------------------
// Proxy hygiene
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn hop_by_hop_headers_do_not_reach_the_agent() {
    let (a, g) = single("a", |_| {}).await;
    let body = serde_json::to_vec(&json!({ "input": good_input() })).expect("json");
    let head = format!(
        "POST /agents/a/tasks HTTP/1.1\nHost: gw\nContent-Type: application/json\n\
         Content-Length: {}\nKeep-Alive: timeout=5\nTE: trailers\nUpgrade: websocket\n\
         X-Hop-Secret: only-for-the-gateway\nProxy-Authorization: Basic Z3c6Z3c=\n\
         Authorization: Bearer end-to-end\nX-End-To-End: kept",
        body.len()
    );
    // raw_request adds `Connection: close`; this one names a header as hop-by-hop as well.
    let head = format!("{head}\nConnection: keep-alive, X-Hop-Secret");
    let r = raw_request(g.gw.addr(), &head, &body).await;
    assert_eq!(r.status, 202, "{r:?}");
    let creates = received(&a, Route::CreateTask);
    assert_eq!(creates.len(), 1);
    let seen = &creates[0];
    for gone in [
        "connection",
        "keep-alive",
        "te",
        "upgrade",
        "x-hop-secret",
        "proxy-authorization",
    ] {
        assert_eq!(
            recorded_header(seen, gone),
            None,
            "{gone} reached the agent"
        );
    }
    // The client's Authorization is its credential for the gateway: never passed on (an agent
    // gets only its own `upstream_auth_header`; see auth::credentials_stay_at_the_edge).
    assert_eq!(recorded_header(seen, "authorization"), None);
    assert_eq!(
        recorded_header(seen, "x-end-to-end").as_deref(),
        Some("kept")
    );
}

#[tokio::test]
async fn a_client_request_id_is_propagated_and_echoed() {
    let (a, g, id) = single_task(|_| {}).await;
    let r = g
        .http
        .send(
            Method::GET,
            &format!("/tasks/{id}"),
            &[("x-request-id", "orchestrator-req-0042")],
            Bytes::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-request-id"), Some("orchestrator-req-0042"));
    assert_eq!(
        first_header(&a, Route::GetTask, "x-request-id").as_deref(),
        Some("orchestrator-req-0042")
    );
}

#[tokio::test]
async fn a_request_id_is_generated_when_missing_and_echoed() {
    let (a, g) = single("a", |_| {}).await;
    let r = g.http.post_task("a").await;
    assert_eq!(r.status, 202, "{r:?}");
    let echoed = r
        .header("x-request-id")
        .expect("x-request-id on the answer");
    assert!(uuid::Uuid::parse_str(echoed).is_ok(), "{echoed}");
    assert_eq!(
        first_header(&a, Route::CreateTask, "x-request-id").as_deref(),
        Some(echoed)
    );
    let other = g.http.get("/healthz").await;
    assert_ne!(
        other.header("x-request-id"),
        Some(echoed),
        "every request gets its own id"
    );
    assert!(
        other.header("x-request-id").is_some(),
        "even on the gateway's own routes"
    );
}

#[tokio::test]
async fn an_unsafe_client_request_id_is_replaced() {
    let (a, g) = single("a", |_| {}).await;
    let long = "x".repeat(200);
    for unsafe_id in ["two words", long.as_str()] {
        let r = g
            .http
            .send(
                Method::POST,
                "/agents/a/tasks",
                &[
                    ("content-type", "application/json"),
                    ("x-request-id", unsafe_id),
                ],
                serde_json::to_vec(&json!({ "input": good_input() })).expect("json"),
            )
            .await;
        assert_eq!(r.status, 202, "{r:?}");
        let echoed = r.header("x-request-id").expect("x-request-id");
        assert!(uuid::Uuid::parse_str(echoed).is_ok(), "{echoed}");
    }
    for rec in received(&a, Route::CreateTask) {
        let sent = recorded_header(&rec, "x-request-id").expect("x-request-id");
        assert!(uuid::Uuid::parse_str(&sent).is_ok(), "{sent}");
    }
}

#[tokio::test]
async fn forwarding_headers_are_set() {
    let (a, g, id) = single_task(|_| {}).await;
    let r = g
        .http
        .send(
            Method::GET,
            &format!("/tasks/{id}"),
            &[("x-forwarded-for", "203.0.113.7")],
            Bytes::new(),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        first_header(&a, Route::CreateTask, "x-forwarded-for").as_deref(),
        Some("127.0.0.1")
    );
    assert_eq!(
        first_header(&a, Route::CreateTask, "x-forwarded-proto").as_deref(),
        Some("http")
    );
    assert_eq!(
        first_header(&a, Route::GetTask, "x-forwarded-for").as_deref(),
        Some("203.0.113.7, 127.0.0.1")
    );
    assert_eq!(
        first_header(&a, Route::GetTask, "x-forwarded-proto").as_deref(),
        Some("http")
    );
}

// ---------------------------------------------------------------------------------------------
// Health, readiness, metrics
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn healthz_answers_ok() {
    let (_a, g) = single("a", |_| {}).await;
    let r = g.http.get("/healthz").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["status"], "ok");
}

#[tokio::test]
async fn readyz_waits_for_a_first_card_attempt_of_every_agent_and_lists_those_without_a_card() {
    let good = agent().await;
    let slow = agent().await;
    // The slow agent never answers its card request until it is shut down.
    slow.script(Route::Card, Reply::Hang);
    let g = TestGateway::start(&[("good", &good), ("slow", &slow)], |cfg| {
        cfg.agents[1].timeout = Duration::from_secs(60);
    })
    .await;
    wait_for("the good agent's card", || {
        let http = g.http.clone();
        async move { http.get("/agents").await.json()["agents"][0]["card_state"] == "fresh" }
    })
    .await;
    let r = g.http.get("/readyz").await;
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.json()["ready"], false);
    assert_eq!(r.json()["awaiting_first_card_attempt"], json!(["slow"]));

    slow.shutdown().await;
    g.ready().await;
    let r = g.http.get("/readyz").await;
    assert_eq!(r.status, 200, "{r:?}");
    let j = r.json();
    assert_eq!(j["ready"], true);
    assert_eq!(j["awaiting_first_card_attempt"], json!([]));
    let without = j["agents_without_card"].as_array().expect("list");
    assert_eq!(without.len(), 1, "{j}");
    assert_eq!(without[0]["agent"], "slow");
    assert!(
        without[0]["reason"].as_str().is_some_and(|s| !s.is_empty()),
        "{j}"
    );
}

#[tokio::test]
async fn metrics_count_requests_transitions_states_and_validation_failures() {
    let (a, g) = single("a", |_| {}).await;
    let working = create(&g).await;
    let _submitted = create(&g).await;
    a.set_status(&working, "WORKING", Value::Null)
        .expect("task");
    let r = g.http.get(&format!("/tasks/{working}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = g
        .http
        .post_json("/agents/a/tasks", &json!({ "input": { "topic": 1 } }))
        .await;
    assert_eq!(r.status, 422, "{r:?}");

    let (r, text) = metrics_text(&g).await;
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .is_some_and(|ct| ct.starts_with("text/plain; version=0.0.4")));
    let m = |family: &str, labels: &[(&str, &str)]| metric_value(&text, family, labels);
    let req = "a2a_gateway_requests_total";
    assert_eq!(
        m(
            req,
            &[("route", "create_task"), ("agent", "a"), ("status", "202")]
        ),
        2.0
    );
    assert_eq!(
        m(
            req,
            &[("route", "create_task"), ("agent", "a"), ("status", "422")]
        ),
        1.0
    );
    assert_eq!(
        m(
            req,
            &[("route", "get_task"), ("agent", "a"), ("status", "200")]
        ),
        1.0
    );
    let tr = "a2a_gateway_task_transitions_total";
    assert_eq!(m(tr, &[("from", "none"), ("to", "SUBMITTED")]), 2.0);
    assert_eq!(m(tr, &[("from", "SUBMITTED"), ("to", "WORKING")]), 1.0);
    assert_eq!(m("a2a_gateway_tasks", &[("state", "SUBMITTED")]), 1.0);
    assert_eq!(m("a2a_gateway_tasks", &[("state", "WORKING")]), 1.0);
    assert_eq!(m("a2a_gateway_tasks", &[("state", "COMPLETED")]), 0.0);
    assert!(
        text.contains("a2a_gateway_tasks{state=\"CANCELLED\"} 0"),
        "every state is exported"
    );
    assert_eq!(
        m("a2a_gateway_validation_failures_total", &[("agent", "a")]),
        1.0
    );
    assert_eq!(
        m(
            "a2a_gateway_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    assert_eq!(
        m(
            "a2a_gateway_upstream_duration_seconds_count",
            &[("agent", "a")]
        ),
        3.0
    );
    assert_eq!(
        m(
            "a2a_gateway_card_fetches_total",
            &[("agent", "a"), ("result", "ok")]
        ),
        1.0
    );
    assert!(
        m(
            "a2a_gateway_request_duration_seconds_count",
            &[("route", "create_task")]
        ) >= 3.0,
        "latency histogram"
    );
}

#[tokio::test]
async fn metrics_carry_no_task_or_request_ids() {
    let (a, g, id) = single_task(|_| {}).await;
    a.set_status(&id, "WORKING", Value::Null).expect("task");
    let art = a.add_artifact(&id, NewArtifact::Text("x".into()));
    g.http
        .send(
            Method::GET,
            &format!("/tasks/{id}"),
            &[("x-request-id", "rid-never-a-label")],
            Bytes::new(),
        )
        .await;
    g.http.get(&format!("/tasks/{id}/artifacts")).await;
    g.http.get(&format!("/artifacts/{art}/content")).await;
    g.http
        .get(&format!("/tasks/{}", uuid::Uuid::new_v4()))
        .await;
    let (_, text) = metrics_text(&g).await;
    assert!(
        metric_value(
            &text,
            "a2a_gateway_requests_total",
            &[("route", "get_task")]
        ) >= 2.0
    );
    for secret in [id.as_str(), art.as_str(), "rid-never-a-label"] {
        assert!(!text.contains(secret), "{secret} appears in the metrics");
    }
}
