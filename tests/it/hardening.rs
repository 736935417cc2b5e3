//! What a production gateway must not let its clients or agents do to it: hold connections
//! open without a word, lose query strings, freeze tasks with future timestamps, proxy to an
//! agent without a card, echo a huge input back many times in an error, or take the memory
//! with a small card whose schemas compile large.

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

/// The regex-bomb card: 1,000 properties of `"pattern": "\\w{20000}"` (about 12 KB),
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
