//! The fleet page for both protocols, in Chromium: recent tasks from the ledger on first load
//! for a key without `events`; a Clawpedia task and an official A2A task (an a2a-sdk agent,
//! streamed through the gateway) seen live from SUBMITTED to COMPLETED; an artifact downloaded
//! through its link; sparklines drawn from real traffic, with a failing agent's errors in its
//! line; times in UTC; the lowest text contrast measured on the live page.

use std::time::{Duration, Instant};

use a2a_gateway::config::Right;
use bytes::Bytes;
use serde_json::{json, Value};

use crate::a2a_gateway::a2a_agent;
use crate::auth::client;
use crate::support::a2a_sdk::{SdkAgent, HTTP_JSON};
use crate::support::cdp::Browser;
use crate::support::*;
use sample::{Reply, Route};

const OPS: &str = "ops-key-0123456789abcdef0123";
const VIEWER: &str = "viewer-key-0123456789abcdef01";
const WAIT: Duration = Duration::from_secs(20);

/// `base` under another name of the same host (`127.0.0.1` and `localhost`): a second replica
/// address of one process.
fn other_name(base: &str) -> String {
    match base.contains("127.0.0.1") {
        true => base.replacen("127.0.0.1", "localhost", 1),
        false => base.replacen("localhost", "127.0.0.1", 1),
    }
}

/// The `host:port` a replica at `base` is named by.
fn replica_address(base: &str) -> String {
    a2a_gateway::registry::replicas::address_of(base).expect("host:port")
}

/// The page with `key` in the session, loaded: a row for each of the four agents.
async fn page_with_key(b: &mut Browser, base: &str, key: &str) {
    b.navigate(&format!("{base}/ui")).await;
    // As a person would: the page asks for a key; it is typed in and submitted.
    b.wait_for(
        "the key dialog",
        "document.getElementById('key-dialog').open",
        WAIT,
    )
    .await;
    b.eval(&format!(
        "document.getElementById('key').value = '{key}'; \
         document.getElementById('key-form').requestSubmit(); true"
    ))
    .await;
    b.wait_for(
        "the agents' rows",
        "document.querySelectorAll('#agents tbody tr').length === 4",
        WAIT,
    )
    .await;
}

/// A Clawpedia task created on `agent` as `key`: its id.
async fn create_as(http: &Http, agent: &str, key: &str) -> String {
    let r = http.post_task_as(agent, key).await;
    assert_eq!(r.status, 202, "{r:?}");
    r.json()["task_id"].as_str().expect("task_id").to_owned()
}

/// The state of task `id`'s row in "Recent tasks" (`null` without one).
fn recent(id: &str) -> String {
    format!(r#"document.querySelector('#recent tr[data-task="{id}"]')?.dataset.status ?? null"#)
}

/// Every state `id` shows in "Recent tasks" until `last`, in order, without repeats.
async fn watch(b: &mut Browser, id: &str, last: &str) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    let mut seen: Vec<String> = Vec::new();
    while Instant::now() < deadline {
        if let Some(s) = b.eval(&recent(id)).await.as_str() {
            if seen.last().map(String::as_str) != Some(s) {
                seen.push(s.to_owned());
            }
            if s == last {
                return seen;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{id} never showed {last}; it showed {seen:?}");
}

/// An A2A message streamed through the gateway (HTTP+JSON `message:stream`) as `key`, read to
/// its end; the task's id.
async fn stream_message(http: &Http, key: &str, text: &str) -> String {
    let body = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]}});
    let auth = format!("Bearer {key}");
    let r = http
        .send(
            hyper::Method::POST,
            "/agents/echo/message:stream",
            &[
                ("content-type", "application/json"),
                ("a2a-version", "1.0"),
                ("accept", "text/event-stream"),
                ("authorization", &auth),
            ],
            Bytes::from(body.to_string()),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let text = String::from_utf8_lossy(&r.body).into_owned();
    let first = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no event: {text}"));
    let v: Value = serde_json::from_str(first).expect("json");
    v["task"]["id"].as_str().expect("a task first").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_page_shows_both_protocols_recent_tasks_artifacts_and_pictures() {
    let scripts = agent().await;
    let failing = agent().await;
    failing.script(
        Route::CreateTask,
        Reply::Json(
            503,
            json!({"error": {"code": "BUSY", "message": "down for the test"}}),
        ),
    );
    let echo = SdkAgent::start(HTTP_JSON);
    let g = TestGateway::start(&[("scripts", &scripts), ("failing", &failing)], |cfg| {
        ingest(cfg);
        cfg.agents.push(a2a_agent("echo", &echo.base));
        // One agent served by two replicas (`urls`): the same a2a-sdk process under two names.
        let mut twin = a2a_agent("twin", &echo.base);
        twin.urls = vec![echo.base.clone(), other_name(&echo.base)];
        cfg.agents.push(twin);
        cfg.clients = vec![
            client("ops", OPS, &["*"], &Right::ALL),
            client("viewer", VIEWER, &["*"], &[Right::Tasks, Right::AllTasks]),
        ];
    })
    .await;
    g.ready().await;
    let http = g.http.clone();
    // Before the page opens: a finished task of each protocol.
    let before = create_as(&http, "scripts", OPS).await;
    assert_eq!(
        http.push_task("scripts", TOKEN, &moved(&scripts, &before, "COMPLETED"))
            .await
            .status,
        202
    );
    let a2a_before = stream_message(&http, OPS, "hello").await;

    // A key without `events`: the recent tasks are there on first load, from the ledger.
    let mut b = Browser::launch(1440, 1400).await;
    page_with_key(&mut b, &http.base, VIEWER).await;
    b.wait_for(
        "both finished tasks listed on first load",
        &format!(
            "({}) === 'COMPLETED' && ({}) === 'TASK_STATE_COMPLETED'",
            recent(&before),
            recent(&a2a_before)
        ),
        WAIT,
    )
    .await;
    assert_eq!(
        b.eval("document.getElementById('status').textContent")
            .await
            .as_str()
            .map(|s| s.contains("lacks the `events` right")),
        Some(true)
    );
    let connection = crate::ui::connection_texts(&mut b).await;
    assert_eq!(
        connection.as_array().map(Vec::len),
        Some(1),
        "one connection state: {connection}"
    );
    let row = b
        .eval(&format!(
            r#"(() => {{ const tr = document.querySelector('#recent tr[data-task="{a2a_before}"]');
              return [tr.dataset.protocol, tr.cells[2].textContent, tr.cells[4].textContent,
                      tr.querySelector('button.link').textContent, tr.querySelector('button.link').title]; }})()"#
        ))
        .await;
    assert_eq!(row[0], "a2a", "{row}");
    assert_eq!(row[1], "A2A", "{row}");
    let when = row[2].as_str().unwrap_or("");
    assert!(
        when.ends_with(" UTC") && when.len() == 23,
        "UTC with the date: {when}"
    );
    assert!(
        row[3]
            .as_str()
            .is_some_and(|s| s.ends_with('…') && s.len() < 16),
        "short: {row}"
    );
    assert_eq!(row[4], a2a_before.as_str(), "the whole id on hover");

    // With every right: both protocols live, SUBMITTED to COMPLETED.
    let mut b = Browser::launch(1440, 1400).await;
    page_with_key(&mut b, &http.base, OPS).await;
    b.wait_for(
        "the live feed connected",
        "document.getElementById('status').textContent === 'Live.'",
        WAIT,
    )
    .await;
    // The agent with replicas lists each under its health, with its address for this key
    // (`admin`: it may read agents' addresses); an agent with one replica lists none.
    b.wait_for(
        "the replicas of the agent with `urls`",
        "document.querySelectorAll('#agents tr[data-agent=twin] ul.replicas li').length === 2",
        WAIT,
    )
    .await;
    let replicas = b
        .eval(
            r#"[...document.querySelectorAll('#agents tr[data-agent=twin] ul.replicas li')]
                 .map((li) => [li.dataset.replica, li.dataset.state, li.textContent])"#,
        )
        .await;
    let want = [
        replica_address(&echo.base),
        replica_address(&other_name(&echo.base)),
    ];
    for (i, address) in want.iter().enumerate() {
        let li = &replicas[i];
        assert_eq!(li[0], address.as_str(), "{replicas}");
        assert_eq!(li[1], "ok", "{replicas}");
        assert!(
            li[2]
                .as_str()
                .is_some_and(|t| t.contains("in flight") && t.contains("task")),
            "{replicas}"
        );
    }
    assert_eq!(
        b.eval("document.querySelectorAll('#agents tr[data-agent=echo] ul.replicas').length")
            .await,
        0
    );
    let id = create_as(&http, "scripts", OPS).await;
    let pushes = async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            http.push_task("scripts", TOKEN, &moved(&scripts, &id, "WORKING"))
                .await
                .status,
            202
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            http.push_task("scripts", TOKEN, &moved(&scripts, &id, "COMPLETED"))
                .await
                .status,
            202
        );
    };
    let (seen, ()) = tokio::join!(watch(&mut b, &id, "COMPLETED"), pushes);
    assert_eq!(
        seen,
        ["SUBMITTED", "WORKING", "COMPLETED"],
        "Clawpedia, seen live"
    );
    let streamed = tokio::spawn({
        let http = http.clone();
        async move { stream_message(&http, OPS, "hello slowly").await }
    });
    // The task's id, from the page: the A2A row that is not the first one.
    let find = format!(
        "[...document.querySelectorAll('#recent tr[data-protocol=a2a]')].map(tr => tr.dataset.task).find(t => t !== '{a2a_before}') ?? null"
    );
    let deadline = Instant::now() + WAIT;
    let mut a2a_seen: Vec<String> = Vec::new();
    let mut found = None;
    while Instant::now() < deadline {
        if found.is_none() {
            found = b.eval(&find).await.as_str().map(str::to_owned);
        }
        if let Some(t) = &found {
            if let Some(s) = b.eval(&recent(t)).await.as_str() {
                if a2a_seen.last().map(String::as_str) != Some(s) {
                    a2a_seen.push(s.to_owned());
                }
                if s == "TASK_STATE_COMPLETED" {
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let a2a_id = streamed.await.expect("the stream ran");
    assert_eq!(found.as_deref(), Some(a2a_id.as_str()));
    assert_eq!(
        a2a_seen,
        [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED"
        ],
        "A2A, seen live"
    );

    // Open the A2A task: its artifact, downloaded through its link; its stream said ended.
    b.eval(&format!(
        r#"document.querySelector('#recent tr[data-task="{a2a_id}"] button.link').click(); true"#
    ))
    .await;
    b.wait_for(
        "the A2A task's artifact",
        "document.querySelector('#detail-artifacts li[data-artifact] a.download') !== null",
        WAIT,
    )
    .await;
    let listed = b
        .eval("document.querySelector('#detail-artifacts li[data-artifact]').textContent")
        .await;
    assert!(
        listed.as_str().is_some_and(|t| t.contains("greeting")
            && t.contains("text/plain")
            && t.contains("13 B")),
        "{listed}"
    );
    // Downloaded as a person would: the link clicked, the file saved by the browser.
    let downloads = tempfile::tempdir().expect("temp dir");
    let allowed = b
        .send(
            "Browser.setDownloadBehavior",
            json!({"behavior": "allow", "downloadPath": downloads.path(), "eventsEnabled": true}),
        )
        .await;
    assert!(allowed.is_ok(), "{allowed:?}");
    b.eval("document.querySelector('#detail-artifacts a.download').click(); true")
        .await;
    // Saved under the artifact's name, as bytes (never rendered by the page's origin).
    let deadline = Instant::now() + WAIT;
    let saved = loop {
        let found = std::fs::read_dir(downloads.path())
            .ok()
            .and_then(|mut d| d.find_map(|e| e.ok().map(|e| e.path())))
            .filter(|p| p.extension().is_none_or(|x| x != "crdownload"));
        match found {
            Some(p) => break p,
            None if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            None => panic!("nothing downloaded"),
        }
    };
    assert!(
        saved
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("greeting")),
        "{saved:?}"
    );
    let content = std::fs::read_to_string(&saved).expect("the artifact downloaded");
    assert_eq!(content, "Hello, world!");
    assert_eq!(
        b.eval("document.getElementById('detail-stream-state').textContent")
            .await
            .as_str()
            .map(|s| s.contains("ended") || s.contains("live feed")),
        Some(true)
    );
    assert_eq!(
        b.eval("document.getElementById('task-detail').dataset.pushConfigs")
            .await,
        "0"
    );

    // Open the finished Clawpedia task: its stream says it ended, never "reconnecting".
    b.eval(&format!(
        r#"document.querySelector('#recent tr[data-task="{id}"] button.link').click(); true"#
    ))
    .await;
    b.wait_for(
        "the finished task's stream said ended",
        "document.getElementById('detail-stream-state').textContent.includes('ended')",
        WAIT,
    )
    .await;

    // Traffic for the pictures: a failing agent's errors, the others' requests.
    for _ in 0..6 {
        let r = http
            .post_json_as(
                "/agents/failing/tasks",
                OPS,
                &json!({"input": good_input()}),
                &[],
            )
            .await;
        assert!(r.status >= 500, "{r:?}");
        create_as(&http, "scripts", OPS).await;
    }
    let errors = "(() => { const s = document.querySelector('#agents tr[data-agent=failing] [data-chart=errors] svg'); \
                  return s && Number(s.dataset.max) > 0 && s.querySelector('polyline') !== null ? Number(s.dataset.max) : null; })()";
    let max = b
        .wait_for(
            "the failing agent's errors drawn",
            errors,
            Duration::from_secs(40),
        )
        .await;
    assert!(max.as_f64().is_some_and(|m| m > 0.0), "{max}");
    let requests = b
        .eval("Number(document.querySelector('#agents tr[data-agent=scripts] [data-chart=requests] svg').dataset.max)")
        .await;
    assert!(requests.as_f64().is_some_and(|m| m > 0.0), "{requests}");
    let calm = b
        .eval("Number(document.querySelector('#agents tr[data-agent=scripts] [data-chart=errors] svg').dataset.max)")
        .await;
    assert_eq!(
        calm.as_f64(),
        Some(0.0),
        "the healthy agent's errors stay flat"
    );
    let transitions = b
        .eval("Number(document.querySelector('#transitions li[data-state=COMPLETED] svg').dataset.max)")
        .await;
    assert!(
        transitions.as_f64().is_some_and(|m| m > 0.0),
        "{transitions}"
    );
    // Drawn with DOM calls, named for assistive technology.
    let label = b
        .eval("document.querySelector('#agents tr[data-agent=failing] [data-chart=errors] svg').getAttribute('aria-label')")
        .await;
    assert!(
        label
            .as_str()
            .is_some_and(|l| l.starts_with("errors/s over the last 10 minutes")),
        "{label}"
    );
    // What the page drew is what /api/fleet serves: each agent's samples, oldest first, and
    // the fleet's; `?samples=false` (the page's polls between two samples) leaves them out.
    let full = http.get_as("/api/fleet", OPS).await.json();
    let failing_samples = full["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == "failing"))
        .map(|a| a["samples"].clone())
        .expect("the failing agent");
    let errs: Vec<f64> = failing_samples
        .as_array()
        .expect("samples")
        .iter()
        .map(|s| s["errors_per_sec"].as_f64().expect("errors_per_sec"))
        .collect();
    assert!(errs.iter().any(|e| *e > 0.0), "{failing_samples}");
    let at: Vec<&str> = failing_samples
        .as_array()
        .expect("samples")
        .iter()
        .filter_map(|s| s["at"].as_str())
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "oldest first: {at:?}");
    assert!(
        full["samples"][0]["transitions_per_sec"]["COMPLETED"].is_number(),
        "{}",
        full["samples"]
    );
    let lean = http.get_as("/api/fleet?samples=false", OPS).await.json();
    assert!(
        lean["samples"].is_null() && lean["agents"][0].get("samples").is_none(),
        "{lean}"
    );
    crate::ui::accessibility(&mut b).await;
    let path = crate::ui::screenshot_path("fleet-two-protocols.png");
    b.screenshot(&path).await;
    eprintln!("screenshot: {}", path.display());
}
