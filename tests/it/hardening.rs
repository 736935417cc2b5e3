//! What a production gateway must not let its clients or agents do to it: hold connections
//! open without a word, lose query strings, freeze tasks with future timestamps, proxy to an
//! agent without a card, echo a huge input back many times in an error, take the memory with a
//! small card whose schemas compile large, or pass on a document that reads one way to the
//! gateway and another way to the agent (duplicate keys).

use std::time::Duration;

use crate::support::*;
use a2a_sample_agent::{Reply, Route};
use serde_json::json;
use tokio::io::AsyncReadExt;

#[tokio::test]
async fn a_silent_connection_is_closed() {
    let a = agent().await;
    let g = TestGateway::start(&[("a", &a)], |_| {}).await;
    let mut tcp = tokio::net::TcpStream::connect(g.gw.addr())
        .await
        .expect("connect");
    let mut buf = [0u8; 16];
    // The gateway closes it after 10 s of silence: read returns end of stream, not a timeout.
    let n = tokio::time::timeout(Duration::from_secs(20), tcp.read(&mut buf))
        .await
        .expect("closed by the gateway within 20 s");
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    // And the gateway still serves.
    assert_eq!(g.http.get("/healthz").await.status, 200);
}

#[tokio::test]
async fn query_strings_and_the_client_host_reach_the_agent() {
    let a = agent().await;
    let g = TestGateway::start(&[("a", &a)], |_| {}).await;
    g.ready().await;
    let r = g
        .http
        .post_json(
            "/agents/a/tasks?priority=high&x=1",
            &json!({"input": good_input()}),
        )
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    let id = r.json()["task_id"].as_str().expect("id").to_owned();
    g.http.get(&format!("/tasks/{id}?view=full")).await;
    let seen = a.requests();
    let create = seen
        .iter()
        .find(|r| r.route == Route::CreateTask)
        .expect("create seen");
    assert_eq!(create.query.as_deref(), Some("priority=high&x=1"));
    let host = g.http.base.trim_start_matches("http://");
    assert_eq!(
        create
            .headers
            .get("x-forwarded-host")
            .and_then(|v| v.to_str().ok()),
        Some(host)
    );
    let get = seen
        .iter()
        .find(|r| r.route == Route::GetTask)
        .expect("get seen");
    assert_eq!(get.query.as_deref(), Some("view=full"));
}

#[tokio::test]
async fn an_updated_at_far_in_the_future_is_not_recorded() {
    let (a, g) = single("a", |_| {}).await;
    let id = g.create_task("a").await;
    let mut future = a.task(&id).expect("task");
    future["status"] = json!("WORKING");
    future["updated_at"] = json!("2999-01-01T00:00:00.000Z");
    a.script_once(Route::GetTask, Reply::Json(200, future));
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_api_error(&r, 502, "AGENT_PROTOCOL_VIOLATION");
    // Had it been recorded, every honest later update would be refused as stale.
    a.set_status(
        &id,
        "COMPLETED",
        json!({"output": {"summary": "s", "filename": "avg.py"}}),
    );
    assert_eq!(
        g.http.get(&format!("/tasks/{id}")).await.json()["status"],
        "COMPLETED"
    );
}

#[tokio::test]
async fn no_card_no_proxying_on_any_route() {
    let (_a, g) = single("a", |cfg| cfg.agents[0].refresh = Duration::from_secs(1)).await;
    let id = g.create_task("a").await;
    // A gateway that never had a card for this agent: its routes refuse, the agent is not asked.
    let b = agent().await;
    b.script(Route::Card, Reply::Json(500, json!({"error": "down"})));
    // The task is unknown to this gateway: with pass-through, only the card stands in the way.
    let g2 = TestGateway::start(&[("b", &b)], |cfg| {
        cfg.agents[0].passthrough_unknown_tasks = true
    })
    .await;
    g2.ready().await;
    let before = b.request_count(Route::GetTask) + b.request_count(Route::ListArtifacts);
    for path in [
        format!("/agents/b/tasks/{id}"),
        format!("/agents/b/tasks/{id}/artifacts"),
    ] {
        let r = g2.http.get(&path).await;
        assert_api_error(&r, 503, "AGENT_UNAVAILABLE");
    }
    assert_eq!(
        b.request_count(Route::GetTask) + b.request_count(Route::ListArtifacts),
        before
    );
}

#[tokio::test]
async fn schema_errors_do_not_echo_a_huge_input() {
    let (_a, g) = single("a", |_| {}).await;
    let huge = "y".repeat(200_000);
    let r = g
        .http
        .post_json(
            "/agents/a/tasks",
            &json!({"input": {"topic": huge, "filename": huge}}),
        )
        .await;
    assert_api_error(&r, 422, "INPUT_SCHEMA_VIOLATION");
    assert!(r.body.len() < 4096, "error body of {} bytes", r.body.len());
    assert_eq!(
        r.json()["error"]["details"][0]["instance_path"],
        "/input/filename"
    );
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let a = agent().await;
    let token = "ingest-token-0123456789abcdef";
    let g = TestGateway::start(&[("a", &a)], |cfg| {
        cfg.agents[0].ingest_token = Some(a2a_gateway::config::Secret::new(token));
    })
    .await;
    g.ready().await;
    let id = g.create_task("a").await;
    let task = a
        .set_status(&id, "WORKING", serde_json::Value::Null)
        .expect("task");
    let body = json!({"event_type": "task.status.updated", "timestamp": a2a_gateway::protocol::time::now(), "data": task});
    let auth = format!("bearer {token}");
    let r = g
        .http
        .send(
            hyper::Method::POST,
            "/agents/a/notifications",
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
            serde_json::to_vec(&body).expect("json"),
        )
        .await;
    assert_eq!(r.status, 202, "{r:?}");
}

/// An agent that answers the head of a file download and then goes quiet: the relay is cut
/// after the agent's timeout instead of holding the client's connection forever.
#[tokio::test]
async fn a_stalled_file_body_is_cut_after_the_agent_timeout() {
    use tokio::io::AsyncWriteExt;
    let card =
        serde_json::to_vec(&a2a_sample_agent::card_for("Stalling agent", None)).expect("card");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let card = card.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = s.read(&mut buf).await.unwrap_or(0);
                if buf[..n].starts_with(b"GET /agent-card.json") {
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", card.len());
                    let _ = s.write_all(head.as_bytes()).await;
                    let _ = s.write_all(&card).await;
                } else {
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 1000\r\n\r\n0123456789";
                    let _ = s.write_all(head.as_bytes()).await;
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
            });
        }
    });
    let mut cfg_agent = a2a_gateway::config::AgentConfig::new("s", &format!("http://{addr}"));
    cfg_agent.timeout = Duration::from_millis(500);
    let cfg = a2a_gateway::config::Config::with_agents(
        "127.0.0.1:0".parse().expect("addr"),
        vec![cfg_agent],
    );
    let gw = a2a_gateway::Gateway::start(cfg).await.expect("gateway");
    let http = Http::new(format!("http://{}", gw.addr()));
    wait_for("the card", || async {
        http.get("/agents/s/agent-card.json").await.status == 200
    })
    .await;
    let res = http.open("/agents/s/artifacts/abc/content").await;
    assert_eq!(res.status(), 200);
    let body = tokio::time::timeout(
        Duration::from_secs(10),
        http_body_util::BodyExt::collect(res.into_body()),
    )
    .await
    .expect("the relay ends instead of hanging");
    assert!(
        body.is_err(),
        "a 1000-byte body with 10 bytes sent cannot complete"
    );
}

/// The issue's regex-bomb card: 1,000 properties of `"pattern": "\\w{20000}"` (about 12 KB),
/// which took 3 GB of RSS to compile unbounded. The real gateway process refuses it within
/// 64 MiB of its idle RSS, says why on `/agents`, counts it, and its other agent keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regex_bomb_card_is_refused_without_taking_the_memory() {
    use crate::support::process::GwProc;
    use std::io::Write;
    let good = agent().await;
    // Until the gateway is measured idle, the bomb's agent serves a card refused at no cost.
    let bomb = agent_with(sample::AgentOptions {
        card: json!({"protocol_version": "1.0"}),
        ..Default::default()
    })
    .await;
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    write!(
        f,
        "listen = \"127.0.0.1:0\"\n\
         [[agents]]\nname = \"good\"\nurl = \"{}\"\n\
         [[agents]]\nname = \"bomb\"\nurl = \"{}\"\nrefresh_secs = 1\n",
        good.base_url(),
        bomb.base_url()
    )
    .expect("config");
    let gw = GwProc::spawn(f.path());
    gw.ready().await;
    let (idle, _) = gw.rss();

    let props: serde_json::Map<String, serde_json::Value> = (0..1_000)
        .map(|i| {
            (
                format!("p{i}"),
                json!({"type": "string", "pattern": "\\w{20000}"}),
            )
        })
        .collect();
    let mut card = sample::card_for("Regex Bomb", None);
    card["input_schema"] = json!({"type": "object", "properties": props});
    assert!(serde_json::to_vec(&card).expect("json").len() < 64 << 10);
    bomb.set_card(card);
    let fetches = bomb.card_fetches();

    let catalog = |name: &'static str| {
        let http = &gw.http;
        async move {
            let r = http.get("/agents").await;
            r.json()["agents"]
                .as_array()
                .and_then(|l| l.iter().find(|e| e["name"] == name).cloned())
                .unwrap_or_default()
        }
    };
    wait_for_within("the bomb card refused", Duration::from_secs(15), || async {
        bomb.card_fetches() > fetches
            && catalog("bomb").await["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("budget"))
    })
    .await;
    let e = catalog("bomb").await;
    assert_eq!(e["card_state"], "unavailable", "{e}");
    let why = e["last_error"].as_str().unwrap_or_default();
    assert!(why.contains("patterns") && why.contains("limit"), "{why}");

    // Within the pattern count, each `\w{20000}` reaches the regex engine, which stops at its
    // size limit: the first one refuses the card.
    let props: serde_json::Map<String, serde_json::Value> = (0..64)
        .map(|i| {
            (
                format!("p{i}"),
                json!({"type": "string", "pattern": "\\w{20000}"}),
            )
        })
        .collect();
    let mut card = sample::card_for("Regex Bomb", None);
    card["input_schema"] = json!({"type": "object", "properties": props});
    bomb.set_card(card);
    wait_for_within(
        "the bomb card refused by the regex size limit",
        Duration::from_secs(15),
        || async {
            catalog("bomb").await["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("limit per pattern"))
        },
    )
    .await;

    let (now, peak) = gw.rss();
    eprintln!(
        "regex-bomb cards: idle RSS {} KiB, after the refusals {} KiB, peak {} KiB",
        idle >> 10,
        now >> 10,
        peak >> 10
    );
    assert!(
        peak < idle + (64 << 20),
        "peak RSS {peak} above idle {idle} + 64 MiB"
    );
    assert!(
        gw.metric(
            "a2a_gateway_card_refusals_total",
            &[("agent", "bomb"), ("reason", "budget")]
        )
        .await
            >= 1.0
    );
    assert!(
        gw.metric(
            "a2a_gateway_card_fetches_total",
            &[("agent", "bomb"), ("result", "invalid")]
        )
        .await
            >= 1.0
    );

    // The other agent on the same gateway is fresh and serving.
    let g = catalog("good").await;
    assert_eq!(g["card_state"], "fresh", "{g}");
    let r = gw
        .http
        .post_json("/agents/good/tasks", &json!({"input": good_input()}))
        .await;
    assert_eq!(r.status, 202, "{r:?}");
}

/// POST `body` exactly as given, as JSON.
async fn post_raw(g: &TestGateway, path: &str, body: &str) -> Resp {
    g.http
        .send(
            hyper::Method::POST,
            path,
            &[("content-type", "application/json")],
            body.to_owned(),
        )
        .await
}

/// An agent whose card takes `{"topic": lowercase letters}` (and anything else besides), behind
/// a ready gateway.
async fn strict_topic() -> (a2a_sample_agent::SampleAgent, TestGateway) {
    let a = agent().await;
    let mut card = a2a_sample_agent::card_for("Strict topics", None);
    card["input_schema"] = json!({
        "type": "object",
        "properties": {"topic": {"type": "string", "pattern": "^[a-z]+$"}},
        "required": ["topic"]
    });
    a.set_card(card);
    let g = TestGateway::start(&[("a", &a)], |_| {}).await;
    g.ready().await;
    (a, g)
}

/// The issue's case: validated on the last `topic`, forwarded with both, read by an agent that
/// keeps the first. One document: the duplicate is refused and the agent never sees it.
#[tokio::test]
async fn a_duplicate_key_is_refused_before_the_agent() {
    let (a, g) = strict_topic().await;
    let r = post_raw(
        &g,
        "/agents/a/tasks",
        r#"{"input":{"topic":"!!! not matching"}}"#,
    )
    .await;
    assert_api_error(&r, 422, "INPUT_SCHEMA_VIOLATION");
    for (path, body) in [
        (
            "/agents/a/tasks",
            r#"{"input":{"topic":"!!! not matching","topic":"aaa"}}"#,
        ),
        (
            "/tasks",
            r#"{"agent":"a","input":{"topic":"!!! not matching","topic":"aaa"}}"#,
        ),
    ] {
        let r = post_raw(&g, path, body).await;
        let err = assert_api_error(&r, 400, "INVALID_JSON");
        let message = err["message"].as_str().expect("message");
        assert!(
            message.contains(r#"duplicate key "topic" in the object at /input"#),
            "{message}"
        );
        assert_eq!(err["details"][0]["instance_path"], "/input/topic", "{err}");
        assert_eq!(err["details"][0]["schema_path"], "duplicate_key", "{err}");
    }
    assert_eq!(
        a.request_count(Route::CreateTask),
        0,
        "the agent saw nothing"
    );
    // The last value alone passes: what was refused was the duplicate.
    let r = post_raw(&g, "/agents/a/tasks", r#"{"input":{"topic":"aaa"}}"#).await;
    assert_eq!(r.status, 202, "{r:?}");
    assert_eq!(a.request_count(Route::CreateTask), 1);
}

#[tokio::test]
async fn a_nested_duplicate_is_refused_and_the_same_key_at_other_depths_is_not() {
    let (a, g) = strict_topic().await;
    let r = post_raw(
        &g,
        "/agents/a/tasks",
        r#"{"input":{"topic":"aaa","deep":{"list":[{"k":1},{"k":1,"k":2}]}}}"#,
    )
    .await;
    let err = assert_api_error(&r, 400, "INVALID_JSON");
    assert_eq!(
        err["details"][0]["instance_path"], "/input/deep/list/1/k",
        "{err}"
    );
    assert_eq!(a.request_count(Route::CreateTask), 0);
    // `topic` at four depths, `k` in two sibling objects: one document, passed on byte for byte.
    let body = r#"{"topic":"top","input":{"topic":"aaa","deep":{"topic":"bbb","deep":{"topic":"ccc"},"list":[{"k":1},{"k":2}]}}}"#;
    let r = post_raw(&g, "/agents/a/tasks", body).await;
    assert_eq!(r.status, 202, "{r:?}");
    let seen = a.requests();
    let create = seen
        .iter()
        .find(|r| r.route == Route::CreateTask)
        .expect("create seen");
    assert_eq!(create.body, body.as_bytes());
}

#[tokio::test]
async fn a_push_with_a_duplicate_key_is_refused_and_not_recorded() {
    let (a, g) = single("a", ingest).await;
    let id = g.create_task("a").await;
    let task = moved(&a, &id, "WORKING");
    let clean = serde_json::to_string(&notification(&task)).expect("json");
    let body = clean.replacen(
        r#""status":"WORKING""#,
        r#""status":"COMPLETED","status":"WORKING""#,
        1,
    );
    assert_ne!(body, clean, "the duplicate is in the body");
    let auth = format!("Bearer {TOKEN}");
    let push = |body: String| {
        let auth = auth.clone();
        let http = g.http.clone();
        async move {
            http.send(
                hyper::Method::POST,
                "/agents/a/notifications",
                &[
                    ("content-type", "application/json"),
                    ("authorization", &auth),
                ],
                body,
            )
            .await
        }
    };
    let r = push(body).await;
    let err = assert_api_error(&r, 400, "INVALID_JSON");
    assert_eq!(err["details"][0]["instance_path"], "/data/status", "{err}");
    assert_eq!(
        g.metric(
            "a2a_gateway_notifications_ingested_total",
            &[("agent", "a")]
        )
        .await,
        0.0
    );
    // Had the refused push been recorded, this one would be a duplicate (200).
    let r = push(clean).await;
    assert_eq!(r.status, 202, "{r:?}");
    assert_eq!(r.json()["verdict"], "transition");
}

#[tokio::test]
async fn an_agent_answer_with_a_duplicate_key_is_a_protocol_violation() {
    use a2a_gateway::config::Conformance;
    let raw = |a: &a2a_sample_agent::SampleAgent, id: &str| {
        let t = serde_json::to_string(&a.task(id).expect("task")).expect("json");
        let dup = t.replacen(
            r#""status":"SUBMITTED""#,
            r#""status":"SUBMITTED","status":"CANCELLED""#,
            1,
        );
        assert_ne!(dup, t);
        Reply::Raw {
            status: 200,
            content_type: "application/json".into(),
            body: dup.into(),
        }
    };
    // Enforce: refused, with the member named.
    let (a, g) = single("a", |_| {}).await;
    let id = g.create_task("a").await;
    a.script_once(Route::GetTask, raw(&a, &id));
    let r = g.http.get(&format!("/tasks/{id}")).await;
    let err = assert_api_error(&r, 502, "AGENT_PROTOCOL_VIOLATION");
    assert_eq!(err["details"][0]["instance_path"], "/status", "{err}");
    assert_eq!(err["details"][0]["schema_path"], "duplicate_key", "{err}");
    // Report: passed on as it is, counted, and not recorded (read last-wins it would have
    // recorded CANCELLED, and the next read would come from the ledger).
    let (a, g) = single("a", |cfg| cfg.agents[0].conformance = Conformance::Report).await;
    let id = g.create_task("a").await;
    let scripted = raw(&a, &id);
    a.script_once(Route::GetTask, scripted.clone());
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    let Reply::Raw { body, .. } = scripted else {
        unreachable!()
    };
    assert_eq!(r.body, body);
    let violations = [("agent", "a"), ("kind", "task"), ("mode", "report")];
    assert_eq!(
        g.metric("a2a_gateway_protocol_violations_total", &violations)
            .await,
        1.0
    );
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-a2a-source"), None, "{r:?}");
    assert_eq!(r.json()["status"], "SUBMITTED");
}

#[tokio::test]
async fn an_admin_body_with_a_duplicate_key_is_refused() {
    const ADMIN: &str = "admin-token-0123456789abcdef";
    let (_a, g) = single("a", |cfg| {
        cfg.admin_token = Some(a2a_gateway::config::Secret::new(ADMIN))
    })
    .await;
    let auth = format!("Bearer {ADMIN}");
    let redrive = |body: &'static str| {
        let http = g.http.clone();
        let auth = auth.clone();
        async move {
            http.send(
                hyper::Method::POST,
                "/admin/dead-letters/redrive",
                &[
                    ("content-type", "application/json"),
                    ("authorization", &auth),
                ],
                body,
            )
            .await
        }
    };
    let r = redrive(r#"{"limit":1,"limit":0}"#).await;
    let err = assert_api_error(&r, 400, "INVALID_JSON");
    assert_eq!(err["details"][0]["instance_path"], "/limit", "{err}");
    assert_eq!(redrive(r#"{"limit":1}"#).await.status, 200);
}

/// A number beyond f64 is valid JSON, but the gateway could only compare it with a schema as
/// infinity: refused with a clear 400 rather than judged wrongly, and the agent sees nothing.
#[tokio::test]
async fn a_number_beyond_f64_is_refused_as_out_of_range() {
    let (a, g) = strict_topic().await;
    let r = post_raw(
        &g,
        "/agents/a/tasks",
        r#"{"input":{"topic":"aaa","n":1e400}}"#,
    )
    .await;
    let err = assert_api_error(&r, 400, "INVALID_JSON");
    let message = err["message"].as_str().expect("message");
    assert!(message.contains("number out of range"), "{message}");
    assert_eq!(a.request_count(Route::CreateTask), 0);
    // Within f64, big numbers pass and are forwarded as written.
    let body = r#"{"input":{"topic":"aaa","n":1.5e308,"m":-12345678901234567890123456789}}"#;
    let r = post_raw(&g, "/agents/a/tasks", body).await;
    assert_eq!(r.status, 202, "{r:?}");
    let seen = a.requests();
    let create = seen
        .iter()
        .find(|r| r.route == Route::CreateTask)
        .expect("create seen");
    assert_eq!(create.body, body.as_bytes());
}

// --- Attacks that were already refused, kept refused -------------------------------------------

/// Request smuggling: a body framed two ways (Content-Length and chunked) must not let a second
/// request hidden in it reach the agent.
#[tokio::test]
async fn a_body_framed_two_ways_smuggles_no_request() {
    let (a, g) = single("a", |_| {}).await;
    // The hidden request is a valid create: had it been read as a request, the agent would
    // have seen it.
    let inner = serde_json::to_string(&json!({ "input": good_input() })).expect("json");
    let hidden = format!(
        "POST /agents/a/tasks HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{inner}",
        inner.len()
    );
    let body = format!("0\r\n\r\n{hidden}");
    let head = format!(
        "POST /agents/a/tasks HTTP/1.1\nHost: gw\nContent-Type: application/json\n\
         Content-Length: {}\nTransfer-Encoding: chunked",
        body.len()
    );
    let r = raw_request(g.gw.addr(), &head, body.as_bytes()).await;
    assert!(r.status >= 400, "an ambiguous body is refused: {r:?}");
    // Give a smuggled request the time it would take to arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        a.request_count(Route::CreateTask),
        0,
        "a smuggled request reached the agent"
    );
    // The gateway still serves.
    assert_eq!(g.http.get("/healthz").await.status, 200);
}

/// A request head far over any sane size is refused (hyper's limit), and the gateway serves on.
#[tokio::test]
async fn an_oversized_header_is_refused() {
    let (a, g) = single("a", |_| {}).await;
    let head = format!(
        "GET /agents/a/tasks/t-1 HTTP/1.1\nHost: gw\nX-Big: {}",
        "x".repeat(512 * 1024)
    );
    let r = raw_request(g.gw.addr(), &head, b"").await;
    assert!(
        r.status == 431 || r.status == 400,
        "an oversized head is refused: {}",
        r.status
    );
    assert_eq!(a.request_count(Route::GetTask), 0);
    assert_eq!(g.http.get("/healthz").await.status, 200);
}

/// JSON nested far deeper than any document needs is refused as INVALID_JSON, not a stack
/// overflow, and never reaches the agent.
#[tokio::test]
async fn deeply_nested_json_is_refused() {
    let (a, g) = single("a", |_| {}).await;
    let depth = 10_000;
    let body = format!(
        r#"{{"input":{{"topic":"t","filename":"a.py","deep":{}1{}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let r = post_raw(&g, "/agents/a/tasks", &body).await;
    assert_api_error(&r, 400, "INVALID_JSON");
    assert_eq!(a.request_count(Route::CreateTask), 0);
    assert_eq!(g.http.get("/healthz").await.status, 200);
}

/// A 2 MB body written whole before reading: the 413 is read, 20 times in 20, because the
/// gateway closes lingering (it reads and discards the rest of the body after its answer)
/// instead of resetting the connection under the client's writes. Two clients: Python's
/// `http.client`, which writes the whole body before it reads (and saw a broken pipe in about
/// a third of tries before the lingering close), and a raw socket writing head and body at once.
/// Also on the lean path, for a stream GET that declares a body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_refusal_reaches_a_client_that_writes_its_whole_body_first() {
    use tokio::io::AsyncWriteExt;
    // The binary, as deployed (its own runtime and threads).
    let a = agent().await;
    let config = crate::support::child::serving_config(&[("a", a.base_url())], "");
    let (_p, addr, http) = crate::support::child::serve(&config, &[]).await;
    http.ready().await;
    let addr: std::net::SocketAddr = addr.parse().expect("addr");
    let script = r#"
import http.client, sys
host, port, method, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
for i in range(20):
    c = http.client.HTTPConnection(host, port, timeout=20)
    try:
        c.request(method, path, body=b"x" * (2 << 20), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        print(r.status)
    except Exception as e:
        print(type(e).__name__)
    c.close()
"#;
    for (method, path, want) in [
        ("POST", "/agents/a/tasks", "413"),
        ("GET", "/tasks/some-task/stream", "400"),
        ("POST", "/tasks/some-task/stream", "405"),
    ] {
        let out = tokio::process::Command::new("python3")
            .args([
                "-c",
                script,
                &addr.ip().to_string(),
                &addr.port().to_string(),
                method,
                path,
            ])
            .output()
            .await
            .expect("python3 runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got, vec![want; 20], "http.client, {method} {path}: {text}");
    }
    let body = vec![b'x'; 2 << 20];
    for i in 0..20 {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut all = format!(
            "POST /agents/a/tasks HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        all.extend_from_slice(&body);
        let wrote = tokio::time::timeout(Duration::from_secs(20), tcp.write_all(&all))
            .await
            .expect("the write ends");
        assert!(
            wrote.is_ok(),
            "raw try {i}: the whole body is taken: {wrote:?}"
        );
        let mut raw = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(20), tcp.read_to_end(&mut raw))
            .await
            .expect("the answer comes");
        assert!(read.is_ok(), "raw try {i}: read {read:?}");
        let text = String::from_utf8_lossy(&raw);
        assert!(text.starts_with("HTTP/1.1 413"), "raw try {i}: {text:?}");
    }
    assert_eq!(http.get("/healthz").await.status, 200);
}
