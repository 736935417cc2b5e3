//! The fleet page (`GET /ui`) in a real browser: Debian's headless Chromium, driven over the
//! DevTools protocol (`support::cdp`), against `a2a-gateway demo` run as a process (without and
//! with `--key`), and against a gateway in front of 200 agents. The tests look at the DOM the
//! page built from the gateway's answers: agent rows, a task moving from SUBMITTED to COMPLETED
//! on the live feed, a refused transition, the key prompt. Screenshots are saved under
//! `target/ui/` (the README's is one of them).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::a2a_calls::{message, rpc};
use crate::support::cdp::Browser;
use crate::support::child::Proc;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);

/// Where the screenshots go: `target/ui/NAME` (next to the build; CI keeps the directory).
pub(crate) fn screenshot_path(name: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::support::child::repo("target"))
        .join("ui")
        .join(name)
}

/// The demo as a process: its gateway's base URL and the ingest token it printed (the demo
/// makes one per run, and prints it in its push example).
async fn demo(args: &[&str]) -> (Proc, String, String) {
    let mut all = vec!["demo", "--listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let mut p = Proc::spawn(&all, &[]);
    let base = format!("http://{}", p.listening_addr().await);
    let push = p.line_containing("/notifications").await;
    let token = push
        .split("Bearer ")
        .nth(1)
        .and_then(|t| t.split('\'').next())
        .expect("the push example names the ingest token")
        .to_owned();
    (p, base, token)
}

/// The state of `id`'s row in "Recent tasks", if it has one.
fn recent_state(id: &str) -> String {
    format!(r#"document.querySelector('#recent tr[data-task="{id}"]')?.dataset.status ?? null"#)
}

/// Create a task on the demo's `scripts` agent (with `key`, if any); its id.
async fn create(http: &Http, key: Option<&str>) -> String {
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = auth.as_deref() {
        headers.push(("authorization", a));
    }
    let body = json!({"input": {"topic": "a fleet page", "filename": "fleet.py"}});
    let r = http
        .send(
            hyper::Method::POST,
            "/agents/scripts/tasks",
            &headers,
            serde_json::to_vec(&body).expect("json"),
        )
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    r.json()["task_id"].as_str().expect("task_id").to_owned()
}

/// Every state `id` shows in "Recent tasks" until it shows COMPLETED, in order, without
/// repeats: what a person watching the page would have seen.
async fn watch_until_completed(b: &mut Browser, id: &str) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    let mut seen: Vec<String> = Vec::new();
    while Instant::now() < deadline {
        if let Some(s) = b.eval(&recent_state(id)).await.as_str() {
            if seen.last().map(String::as_str) != Some(s) {
                seen.push(s.to_owned());
            }
            if s == "COMPLETED" {
                return seen;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{id} never showed COMPLETED; it showed {seen:?}");
}

/// The task-stream requests the gateway has answered: (all of them, those answered 204).
async fn stream_requests(http: &Http) -> (f64, f64) {
    let text = String::from_utf8_lossy(&http.get("/metrics").await.body).into_owned();
    let family = "a2a_gateway_requests_total";
    (
        metric_value(&text, family, &[("route", "stream")]),
        metric_value(&text, family, &[("route", "stream"), ("status", "204")]),
    )
}

/// The agent rows: (name, display name, card state, health).
async fn agent_rows(b: &mut Browser) -> Value {
    b.eval(
        "[...document.querySelectorAll('#agents tbody tr')].map(tr => [tr.dataset.agent, \
         tr.cells[1].textContent, tr.cells[3].dataset.state, tr.cells[4].dataset.state])",
    )
    .await
}

/// A key pressed and released, as a person at the keyboard would (`code`: its key code).
async fn press(b: &mut Browser, key: &str, code: u32) {
    for kind in ["rawKeyDown", "keyUp"] {
        let mut params =
            json!({"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code});
        if key == "Enter" && kind == "rawKeyDown" {
            b.send(
                "Input.dispatchKeyEvent",
                json!({"type": "char", "key": "Enter", "text": "\r"}),
            )
            .await
            .expect("key");
        }
        params["nativeVirtualKeyCode"] = json!(code);
        b.send("Input.dispatchKeyEvent", params).await.expect("key");
    }
}

/// What the page promises for accessibility, checked on the page as it stands: every form
/// control labelled, every button named, and every visible text at a contrast of at least
/// 4.5:1 against the background it is drawn on (WCAG AA for normal text).
pub(crate) async fn accessibility(b: &mut Browser) {
    let report = b
        .eval(
            r#"(() => {
  const lum = (c) => {
    const [r, g, b] = c.match(/[\d.]+/g).slice(0, 3).map(Number).map((v) => {
      v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const alpha = (c) => { const m = c.match(/[\d.]+/g); return m.length > 3 ? Number(m[3]) : 1; };
  const background = (e) => {
    for (; e; e = e.parentElement) {
      const bg = getComputedStyle(e).backgroundColor;
      if (alpha(bg) > 0) return bg;
    }
    return "rgb(255, 255, 255)";
  };
  const unlabelled = [...document.querySelectorAll("input, select, textarea")]
    .filter((i) => i.type !== "hidden" && i.labels.length === 0 && !i.getAttribute("aria-label"))
    .map((i) => i.id || i.name);
  const unnamed = [...document.querySelectorAll("button")]
    .filter((x) => !(x.getAttribute("aria-label") || x.textContent.trim()))
    .map((x) => x.id || x.outerHTML.slice(0, 60));
  let worst = { ratio: 99, text: "" };
  for (const e of document.querySelectorAll("body *")) {
    const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || e.closest("[hidden], dialog:not([open]), .sr-only") || !e.getClientRects().length) continue;
    const l1 = lum(getComputedStyle(e).color), l2 = lum(background(e));
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    if (ratio < worst.ratio) worst = { ratio, text: e.textContent.trim().slice(0, 40) };
  }
  return { unlabelled, unnamed, worst };
})()"#,
        )
        .await;
    assert_eq!(report["unlabelled"], json!([]), "{report}");
    assert_eq!(report["unnamed"], json!([]), "{report}");
    let worst = report["worst"]["ratio"].as_f64().expect("ratio");
    assert!(worst >= 4.5, "text below 4.5:1 contrast: {report}");
    eprintln!(
        "accessibility: lowest text contrast {worst:.2}:1 ({})",
        report["worst"]["text"]
    );
}

/// Wait for the demo's three agents' rows (two Clawpedia agents, one official A2A agent), and
/// check what they say.
async fn expect_demo_agents(b: &mut Browser) {
    b.wait_for(
        "the three agents' rows",
        "document.querySelectorAll('#agents tbody tr').length === 3",
        WAIT,
    )
    .await;
    assert_eq!(
        agent_rows(b).await,
        json!([
            ["scripts", "Python Script Generator", "fresh", "ok"],
            ["summaries", "Script Summarizer", "fresh", "ok"],
            ["echo", "Echo", "fresh", "ok"]
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_page_shows_the_demo_live_without_a_key() {
    let (_demo, base, ingest) = demo(&[]).await;
    let http = Http::new(base.clone());
    let mut b = Browser::launch(1440, 1200).await;
    b.navigate(&format!("{base}/ui")).await;
    expect_demo_agents(&mut b).await;
    // No clients: no key asked for, and the page says why everything is visible.
    assert_eq!(
        b.eval("document.getElementById('key-dialog').open").await,
        false
    );
    let who = b.eval("document.getElementById('who').textContent").await;
    assert!(
        who.as_str().is_some_and(|w| w.contains("No clients")),
        "{who}"
    );
    // No admin: the admin actions are not shown (not merely marked hidden).
    assert_eq!(
        b.eval("getComputedStyle(document.getElementById('admin-actions')).display")
            .await,
        "none"
    );
    // The demo's finished sample tasks (one of each protocol) are counted.
    b.wait_for(
        "the task counts",
        "document.querySelector('#task-counts li[data-state=COMPLETED] .n')?.textContent === '2'",
        WAIT,
    )
    .await;
    b.wait_for(
        "the live feed connected",
        "document.getElementById('status').textContent === 'Live.'",
        WAIT,
    )
    .await;

    // A task created now moves on the page as the agent pushes its changes.
    let id = create(&http, None).await;
    let seen = watch_until_completed(&mut b, &id).await;
    assert_eq!(seen, ["SUBMITTED", "WORKING", "COMPLETED"], "seen live");
    let feed = b
        .eval(&format!(
            "[...document.querySelectorAll('#feed li[data-task=\"{id}\"]')].map(li => li.dataset.status)"
        ))
        .await;
    assert_eq!(
        feed,
        json!(["COMPLETED", "WORKING", "SUBMITTED"]),
        "newest first"
    );
    b.wait_for(
        "the COMPLETED count to include it",
        "document.querySelector('#task-counts li[data-state=COMPLETED] .n')?.textContent === '3'",
        WAIT,
    )
    .await;

    // A late push that would reopen it: refused, and on the feed with the reason.
    let mut task = http.get(&format!("/tasks/{id}")).await.json();
    task["status"] = json!("WORKING");
    task["updated_at"] = json!(a2a_gateway::protocol::time::now());
    let r = http.push_task("scripts", &ingest, &task).await;
    assert_eq!((r.status, r.error_code().as_str()), (409, "TASK_TERMINAL"));
    let refused = b
        .wait_for(
            "the refused transition on the feed",
            &format!(
                "document.querySelector('#feed li[data-kind=refused][data-task=\"{id}\"]')?.textContent"
            ),
            WAIT,
        )
        .await;
    let text = refused.as_str().expect("text");
    assert!(
        text.contains("REFUSED")
            && text.contains("scripts: COMPLETED → WORKING refused (terminal)"),
        "{text}"
    );

    // Open a task that is still working, with the keyboard only: Tab to its button in
    // "Recent tasks", Enter. Its record, and its stream live.
    let live = create(&http, None).await;
    b.wait_for(
        "the new task's row",
        &format!("{} !== null", recent_state(&live)),
        WAIT,
    )
    .await;
    b.eval("document.activeElement?.blur(); window.focus(); true")
        .await;
    let target = format!("document.querySelector('#recent tr[data-task=\"{live}\"] button')");
    let mut tabs = 0;
    while b
        .eval(&format!("document.activeElement === {target}"))
        .await
        != true
    {
        tabs += 1;
        assert!(tabs <= 100, "the task's button is not reachable with Tab");
        press(&mut b, "Tab", 9).await;
    }
    // Every state the stream line shows from here on, and the stream requests the gateway
    // answered so far.
    b.eval(
        "window.streamStates = []; \
         new MutationObserver(() => window.streamStates.push( \
           document.getElementById('detail-stream-state').textContent)) \
         .observe(document.getElementById('detail-stream-state'), \
           {childList: true, characterData: true, subtree: true}); true",
    )
    .await;
    let streams_before = stream_requests(&http).await;
    press(&mut b, "Enter", 13).await;
    b.wait_for(
        "the task panel",
        &format!(
            "!document.getElementById('task-detail').hidden && \
             document.getElementById('detail-id').textContent === '{live}' && \
             document.activeElement.id === 'detail-heading'"
        ),
        WAIT,
    )
    .await;
    b.wait_for(
        "a log event on the task's stream",
        "document.querySelector('#detail-stream li[data-event=log]') !== null",
        WAIT,
    )
    .await;
    b.wait_for(
        "the record to reach COMPLETED and the artifacts to be listed",
        "document.getElementById('task-detail').dataset.status === 'COMPLETED' && \
         document.querySelectorAll('#detail-artifacts li[data-artifact]').length >= 1",
        WAIT,
    )
    .await;
    let record = b
        .eval("JSON.parse(document.getElementById('detail-record').textContent)")
        .await;
    assert_eq!(record["task_id"], live.as_str());
    // Its stream says it ended, closed by the page on the gateway's last event: it never said
    // it was reconnecting, and no request for the stream followed, not even after Chromium's
    // reconnection delay (3 s) would have passed.
    b.wait_for(
        "the stream line to say ended",
        "document.getElementById('detail-stream-state').textContent === '(ended: the task is COMPLETED)'",
        WAIT,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        b.eval("document.getElementById('detail-stream-state').textContent")
            .await,
        "(ended: the task is COMPLETED)"
    );
    let states = b.eval("window.streamStates").await;
    let shown: Vec<&str> = states
        .as_array()
        .expect("the observed states")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        shown.contains(&"(live)") && !shown.iter().any(|s| s.contains("reconnecting")),
        "{shown:?}"
    );
    let streams_after = stream_requests(&http).await;
    assert_eq!(
        (
            streams_after.0 - streams_before.0,
            streams_after.1 - streams_before.1
        ),
        (1.0, 0.0),
        "one stream request, answered 200, and none answered 204 after it"
    );
    // Streams and webhooks as the gateway counts them (no subscribers in the demo).
    let webhooks = b
        .eval("document.querySelector('#webhook-stats dd[data-stat=queue_depth]')?.textContent")
        .await;
    assert_eq!(webhooks, "0");
    accessibility(&mut b).await;
    let path = screenshot_path("fleet-demo.png");
    b.screenshot(&path).await;
    eprintln!("screenshot: {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_page_asks_for_a_key_and_keeps_it_for_the_session() {
    const KEY: &str = "demo-operator-key-0123456789";
    let (_demo, base, _) = demo(&["--key", KEY]).await;
    let http = Http::new(base.clone());
    let mut b = Browser::launch(1280, 900).await;
    b.navigate(&format!("{base}/ui")).await;
    // The page loads without a key, shows nothing of the fleet, and asks.
    b.wait_for(
        "the key prompt",
        "document.getElementById('key-dialog').open && document.activeElement.id === 'key'",
        WAIT,
    )
    .await;
    assert_eq!(
        b.eval("document.querySelectorAll('#agents tbody tr').length")
            .await,
        0
    );
    // Escape dismisses the prompt; "Enter a key" brings it back.
    press(&mut b, "Escape", 27).await;
    b.wait_for(
        "the prompt dismissed, with a way back",
        "!document.getElementById('key-dialog').open && !document.getElementById('enter-key').hidden",
        WAIT,
    )
    .await;
    b.eval("document.getElementById('enter-key').click()").await;
    b.wait_for(
        "the prompt again",
        "document.getElementById('key-dialog').open",
        WAIT,
    )
    .await;
    let submit = |key: &str| {
        format!(
            "(() => {{ document.getElementById('key').value = {key:?}; \
             document.getElementById('key-form').requestSubmit(); return true; }})()"
        )
    };
    b.eval(&submit("not-the-key")).await;
    b.wait_for(
        "the wrong key refused",
        "document.getElementById('key-dialog').open && \
         document.getElementById('key-error').textContent.includes('not accepted')",
        WAIT,
    )
    .await;
    b.eval(&submit(KEY)).await;
    expect_demo_agents(&mut b).await;
    let who = b.eval("document.getElementById('who').textContent").await;
    assert_eq!(who, "Key: operator (sees every task), admin");
    // Kept for this tab's session only.
    assert_eq!(
        b.eval("[sessionStorage.getItem('a2a-gateway.key'), localStorage.length]")
            .await,
        json!([KEY, 0])
    );
    assert_ne!(
        b.eval("getComputedStyle(document.getElementById('admin-actions')).display")
            .await,
        "none",
        "an admin key gets the admin actions"
    );
    // The live feed is an EventSource with ?access_token=.
    b.wait_for(
        "the live feed connected",
        "document.getElementById('status').textContent === 'Live.'",
        WAIT,
    )
    .await;
    let id = create(&http, Some(KEY)).await;
    let seen = watch_until_completed(&mut b, &id).await;
    assert_eq!(seen, ["SUBMITTED", "WORKING", "COMPLETED"], "seen live");
    // A reload keeps the key (same session); forgetting it asks again.
    b.navigate(&format!("{base}/ui")).await;
    b.wait_for(
        "the agents again, without a prompt",
        "document.querySelectorAll('#agents tbody tr').length === 3 && \
         !document.getElementById('key-dialog').open",
        WAIT,
    )
    .await;
    b.eval("document.getElementById('forget-key').click()")
        .await;
    b.wait_for(
        "the prompt after forgetting the key",
        "document.getElementById('key-dialog').open && \
         sessionStorage.getItem('a2a-gateway.key') === null",
        WAIT,
    )
    .await;
    // Nothing seen with the key is left on the page.
    assert_eq!(
        b.eval(
            "document.querySelectorAll('#feed li, #recent tbody tr, #agents tbody tr, \
             #task-counts li').length"
        )
        .await,
        0
    );
    let path = screenshot_path("fleet-key-prompt.png");
    b.screenshot(&path).await;
    eprintln!("screenshot: {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_page_renders_200_agents_and_keeps_up_with_a_burst() {
    const N: usize = 200;
    let mut agents = Vec::with_capacity(N);
    for _ in 0..N {
        agents.push(agent().await);
    }
    // The first agent's card carries markup in its display name: the page must show it as text.
    const HOSTILE: &str = r#"<img src=x onerror="window.__xss=1">"#;
    let mut card = agents[0].card();
    card["display_name"] = json!(HOSTILE);
    agents[0].set_card(card);
    let names: Vec<String> = (0..N).map(|i| format!("agent-{i:03}")).collect();
    let pairs: Vec<(&str, &sample::SampleAgent)> = names
        .iter()
        .map(String::as_str)
        .zip(agents.iter())
        .collect();
    let g = TestGateway::start(&pairs, |_| {}).await;
    g.ready().await;
    let mut b = Browser::launch(1440, 1200).await;
    let started = Instant::now();
    b.navigate(&format!("{}/ui", g.http.base)).await;
    b.wait_for(
        "all 200 agent rows",
        "document.querySelectorAll('#agents tbody tr').length === 200",
        WAIT,
    )
    .await;
    let wall = started.elapsed();
    // From the page's own clock: navigation start to the first render of the agents.
    let first_render = b
        .eval("performance.getEntriesByName('a2a:agents-rendered')[0]?.startTime ?? null")
        .await;
    let first_render = first_render
        .as_f64()
        .expect("the page marks its first render");
    let rendered: Vec<String> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('#agents tbody tr')].map(tr => tr.dataset.agent)")
            .await,
    )
    .expect("names");
    assert_eq!(rendered, names, "every agent, in the gateway's order");
    assert_eq!(
        b.eval(
            "[document.querySelector('#agents tbody tr').cells[1].textContent, \
             document.querySelectorAll('img').length, window.__xss ?? null]"
        )
        .await,
        json!([HOSTILE, 0, null]),
        "an agent's display name is text, never markup"
    );
    // And the browser itself refuses HTML sinks on this page (Trusted Types, from the CSP).
    assert_eq!(
        b.eval(
            "(() => { try { document.body.insertAdjacentHTML('beforeend', '<b>x</b>'); \
             return 'written'; } catch (e) { return e.name; } })()"
        )
        .await,
        "TypeError"
    );
    eprintln!(
        "200 agents: first render {first_render:.0} ms after navigation start ({} ms until the test saw all rows)",
        wall.as_millis()
    );
    b.wait_for(
        "the live feed connected",
        "document.getElementById('status').textContent === 'Live.'",
        WAIT,
    )
    .await;

    // A burst of about 100 transitions a second for 3 s: creates spread over the agents.
    let burst = Instant::now();
    let mut slowest = Duration::ZERO;
    for tick in 0..30u32 {
        let due = burst + Duration::from_millis(100) * tick;
        tokio::time::sleep_until(due.into()).await;
        let creates = (0..10).map(|i| {
            let http = g.http.clone();
            let agent = names[(tick as usize * 10 + i) % N].clone();
            async move {
                let r = http.post_task(&agent).await;
                assert_eq!(r.status, 202, "{r:?}");
            }
        });
        futures_util::future::join_all(creates).await;
        // The page still answers promptly while the burst goes on.
        let asked = Instant::now();
        b.eval("document.querySelectorAll('#feed li').length").await;
        slowest = slowest.max(asked.elapsed());
    }
    let took = burst.elapsed();
    let counts = b
        .wait_for(
            "the feed and the recent tasks filled, and capped",
            "(() => { const f = document.querySelectorAll('#feed li').length, \
             r = document.querySelectorAll('#recent tbody tr').length; \
             return f === 200 && r === 100 ? [f, r] : null; })()",
            WAIT,
        )
        .await;
    assert_eq!(counts, json!([200, 100]));
    b.wait_for(
        "the SUBMITTED count to include the burst",
        "Number(document.querySelector('#task-counts li[data-state=SUBMITTED] .n')?.textContent) === 300",
        WAIT,
    )
    .await;
    eprintln!(
        "burst: 300 transitions in {} ms; the slowest page evaluation during it took {} ms",
        took.as_millis(),
        slowest.as_millis()
    );
    let path = screenshot_path("fleet-200-agents.png");
    b.screenshot(&path).await;
    eprintln!("screenshot: {}", path.display());
    // The figures, also in a file: a passing test's output is not shown, and scripts/test prints it.
    let report = json!({
        "agents": N,
        "first_render_ms": first_render,
        "all_rows_seen_ms": wall.as_millis() as u64,
        "burst_transitions": 300,
        "burst_ms": took.as_millis() as u64,
        "slowest_eval_during_burst_ms": slowest.as_millis() as u64,
    });
    let report_path = screenshot_path("fleet-200-agents.json");
    std::fs::write(&report_path, format!("{report:#}\n")).expect("report written");
}

/// What the page's layout gets wrong, measured in the page: every state name shown in full
/// (no ellipsis, nothing clipped by a box that hides overflow) and inside its panel; every task
/// count tile and every item of the transitions legend inside its panel's box, and each of their
/// parts inside the item; no panel alone in a row that it leaves partly empty. Each list names
/// what it found.
pub(crate) async fn layout(b: &mut Browser) -> Value {
    b.eval(
        r##"(() => {
  const EPS = 0.5;
  const shown = (e) => e.getClientRects().length > 0 && !e.closest("[hidden], .sr-only, dialog:not([open])");
  const what = (e) => {
    const home = e.closest("[id]");
    return `${home ? "#" + home.id + " " : ""}${e.tagName.toLowerCase()}${[...e.classList].map((c) => "." + c).join("")} ${JSON.stringify(e.textContent.trim().slice(0, 40))}`;
  };
  const px = (r) => [r.left, r.right, r.top, r.bottom].map((v) => Math.round(v)).join(",");
  // The box a panel's content must stay in: its border box less its borders.
  const inner = (p) => {
    const r = p.getBoundingClientRect(), s = getComputedStyle(p);
    const bl = parseFloat(s.borderLeftWidth), br = parseFloat(s.borderRightWidth);
    const bt = parseFloat(s.borderTopWidth), bb = parseFloat(s.borderBottomWidth);
    return { left: r.left + bl, right: r.right - br, top: r.top + bt, bottom: r.bottom - bb };
  };
  const within = (a, b, vertical) => a.left >= b.left - EPS && a.right <= b.right + EPS &&
    (!vertical || (a.top >= b.top - EPS && a.bottom <= b.bottom + EPS));
  // The text's own extent, not its element's box.
  const text = (e) => { const r = document.createRange(); r.selectNodeContents(e); return r.getBoundingClientRect(); };
  const truncated = [], outside = [], crowded = [];
  for (const e of document.querySelectorAll(".state")) {
    if (!shown(e) || !e.textContent.trim()) continue;
    const s = getComputedStyle(e);
    if (s.display !== "inline" && e.scrollWidth > e.clientWidth) {
      truncated.push(`${what(e)}: ${e.scrollWidth} px of text in ${e.clientWidth} px${s.textOverflow === "ellipsis" ? ", with an ellipsis" : ""}`);
      continue;
    }
    const t = text(e), panel = e.closest(".panel");
    // Every box between the name and its panel that hides what overflows it sideways.
    for (let a = e; a && a !== panel.parentElement; a = a.parentElement) {
      if (getComputedStyle(a).overflowX === "visible") continue;
      if (!within(t, a.getBoundingClientRect(), false)) {
        truncated.push(`${what(e)}: text at ${px(t)} cut by ${what(a)} at ${px(a.getBoundingClientRect())}`);
        break;
      }
    }
    if (!within(t, inner(panel), false)) outside.push(`${what(e)} at ${px(t)}, its panel at ${px(inner(panel))}`);
  }
  for (const li of document.querySelectorAll("#task-counts > li, #transitions > li")) {
    if (!shown(li)) continue;
    const panel = li.closest(".panel"), r = li.getBoundingClientRect();
    if (!within(r, inner(panel), true)) outside.push(`${what(li)} at ${px(r)}, its panel at ${px(inner(panel))}`);
    for (const part of li.children) {
      if (!shown(part)) continue;
      const q = part.getBoundingClientRect();
      if (!within(q, r, true)) outside.push(`${what(part)} at ${px(q)}, outside its item at ${px(r)}`);
    }
  }
  // The panels side by side with each one (overlapping it vertically) must fill the row.
  const main = document.getElementById("main"), ms = getComputedStyle(main), mr = main.getBoundingClientRect();
  const width = mr.width - parseFloat(ms.paddingLeft) - parseFloat(ms.paddingRight);
  const panels = [...main.children].filter((p) => p.classList.contains("panel") && shown(p));
  for (const p of panels) {
    const r = p.getBoundingClientRect();
    const row = panels.map((q) => q.getBoundingClientRect()).filter((q) => q.top < r.bottom - 1 && q.bottom > r.top + 1);
    const used = Math.max(...row.map((q) => q.right)) - Math.min(...row.map((q) => q.left));
    if (used < 0.95 * width) crowded.push(`${what(p.querySelector("h2"))}: its row uses ${Math.round(used)} of ${Math.round(width)} px`);
  }
  return { width: window.innerWidth, truncated, outside, crowded };
})()"##,
    )
    .await
}

/// Every element whose own text tells the state of the page's connection to the gateway: the
/// page must show one.
pub(crate) async fn connection_texts(b: &mut Browser) -> Value {
    b.eval(
        r#"(() => {
  const words = /\b(not connected|disconnected|connected|connecting|reconnecting|live\.)/i;
  return [...document.querySelectorAll("body *")]
    .filter((e) => e.getClientRects().length > 0 && !e.closest("[hidden], .sr-only, dialog:not([open])"))
    .filter((e) => [...e.childNodes].some((n) => n.nodeType === 3 && words.test(n.textContent)))
    .map((e) => `${e.id || e.tagName.toLowerCase()}: ${e.textContent.trim()}`);
})()"#,
    )
    .await
}

/// How task `id` is shown in the live feed, in "Recent tasks" and (when it is the open one) in
/// the task panel: for each, the text of the entry and of its state.
async fn task_entries(b: &mut Browser, id: &str) -> Value {
    b.eval(&format!(
        r#"(() => {{
  const entries = [...document.querySelectorAll('#feed li[data-kind=transition][data-task="{id}"], #recent tr[data-task="{id}"]')];
  const panel = document.getElementById("task-detail");
  if (!panel.hidden && panel.dataset.task === "{id}") entries.push(panel);
  return entries.map((e) => ({{ where: e.closest("[id]").id, text: e.textContent, state: e.querySelector(".state")?.textContent ?? null }}));
}})()"#
    ))
    .await
}

/// Each of `entries` ([`task_entries`]) names its protocol and shows the state in that
/// protocol's spelling only.
fn assert_protocol_spelling(entries: &Value, protocol: &str) {
    let list = entries.as_array().expect("entries");
    assert!(list.len() >= 2, "the task is listed: {entries}");
    let (other, a2a) = match protocol {
        "A2A" => ("Clawpedia", true),
        _ => ("A2A", false),
    };
    for e in list {
        let text = e["text"].as_str().unwrap_or_default();
        let state = e["state"].as_str().unwrap_or_default();
        assert!(
            text.contains(protocol) && !text.contains(other),
            "the protocol named, only its own: {e}"
        );
        assert!(
            state.starts_with("TASK_STATE_") == a2a
                && !state.is_empty()
                && state.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
            "the state in {protocol}'s spelling: {e}"
        );
    }
}

/// A message to the demo's official A2A agent (JSON-RPC SendMessage): its task's id and state.
async fn a2a_message(http: &Http, text: &str) -> (String, String) {
    let v = rpc(http, "echo", None, "SendMessage", message(text, json!({}))).await;
    let task = &v["result"]["task"];
    match (task["id"].as_str(), task["status"]["state"].as_str()) {
        (Some(id), Some(state)) => (id.to_owned(), state.to_owned()),
        _ => panic!("{text}: {v}"),
    }
}

/// The fleet page at 1280 and 1920 px, against the demo with tasks of both protocols in most of
/// their states: every state name in full and inside its panel, every count tile and legend
/// item inside the Tasks panel, no row half empty; one connection state on the page; each
/// task's protocol named beside its state, spelled the protocol's way. The screenshots are the
/// docs' (`docs/images/`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_page_fits_1280_and_1920_px_and_names_each_tasks_protocol() {
    let (_demo, base, ingest) = demo(&[]).await;
    let http = Http::new(base.clone());
    let mut pages = Vec::new();
    for width in [1280, 1920] {
        let mut b = Browser::launch(width, 1000).await;
        b.navigate(&format!("{base}/ui")).await;
        expect_demo_agents(&mut b).await;
        pages.push((width, b));
    }
    // The live feed is open on both pages once a task made now shows on them.
    let first = create(&http, None).await;
    for (_, b) in &mut pages {
        b.wait_for(
            "the live feed",
            &format!("document.querySelector('#feed li[data-task=\"{first}\"]') !== null"),
            WAIT,
        )
        .await;
    }
    // Clawpedia: one cancelled, one failed (as its agent's push would say; the agent's later
    // pushes are refused, on the feed), one completing on its own.
    let cancelled = create(&http, None).await;
    let r = http
        .post_json(&format!("/tasks/{cancelled}/cancel"), &json!({}))
        .await;
    assert_eq!(r.status, 202, "{r:?}");
    let failed = create(&http, None).await;
    let mut task = http.get(&format!("/tasks/{failed}")).await.json();
    task["status"] = json!("FAILED");
    task["error"] = json!({"code": "OUT_OF_PAPER", "message": "the printer is empty"});
    task["updated_at"] = json!(a2a_gateway::protocol::time::now());
    let r = http.push_task("scripts", &ingest, &task).await;
    assert_eq!(r.status, 202, "{r:?}");
    // A2A: completed, waiting for input, failed, rejected; one working, then canceled.
    let mut a2a = Vec::new();
    for text in ["hello", "need input", "fail", "reject"] {
        a2a.push(a2a_message(&http, text).await);
    }
    let (slow, _) = a2a_message(&http, "slow").await;
    let v = rpc(&http, "echo", None, "CancelTask", json!({"id": slow})).await;
    assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    a2a.push((slow, "TASK_STATE_CANCELED".into()));
    let mut expected = vec![
        (first.clone(), "COMPLETED".to_owned()),
        (cancelled, "CANCELLED".into()),
        (failed, "FAILED".into()),
    ];
    expected.extend(a2a.iter().cloned());
    let (hello, _) = a2a[0].clone();
    for (width, b) in &mut pages {
        for (id, state) in &expected {
            b.wait_for(
                &format!("{id} shown {state} at {width} px"),
                &format!("({}) === '{state}'", recent_state(id)),
                WAIT,
            )
            .await;
        }
        // The A2A task opened: its panel too names the protocol.
        b.eval(&format!(
            r#"document.querySelector('#recent tr[data-task="{hello}"] button.link').click(); true"#
        ))
        .await;
        b.wait_for(
            "the A2A task's panel",
            "document.getElementById('task-detail').dataset.status === 'TASK_STATE_COMPLETED'",
            WAIT,
        )
        .await;
        let mut shown = vec![(task_entries(b, &hello).await, "A2A")];
        // The Clawpedia task opened, as the screenshot shows it.
        b.eval(&format!(
            r#"document.querySelector('#recent tr[data-task="{first}"] button.link').click(); true"#
        ))
        .await;
        b.wait_for(
            "the Clawpedia task's panel, its artifacts and its stream ended",
            "document.getElementById('task-detail').dataset.status === 'COMPLETED' && \
             document.querySelectorAll('#detail-artifacts li[data-artifact]').length >= 1 && \
             document.getElementById('detail-stream-state').textContent.includes('ended')",
            WAIT,
        )
        .await;
        shown.push((task_entries(b, &first).await, "Clawpedia"));
        // Every A2A task in A2A's words, every Clawpedia task in Clawpedia's.
        for (id, _) in &expected {
            let protocol = if a2a.iter().any(|(a, _)| a == id) {
                "A2A"
            } else {
                "Clawpedia"
            };
            shown.push((task_entries(b, id).await, protocol));
        }
        // The pictures drawn from two samples at least (one every 10 s).
        b.wait_for(
            "two samples in the agents' pictures",
            "Number(document.querySelector('#agents tr[data-agent=scripts] [data-chart=requests] svg')?.dataset.points) >= 2",
            Duration::from_secs(60),
        )
        .await;
        // And one still moving when the picture is taken.
        let working = create(&http, None).await;
        b.wait_for(
            "a task working",
            &format!("({}) === 'WORKING'", recent_state(&working)),
            WAIT,
        )
        .await;
        let report = layout(b).await;
        eprintln!("layout at {width} px: {report}");
        assert_eq!(report["width"], *width, "the window's width");
        assert_eq!(report["truncated"], json!([]), "at {width} px: {report}");
        assert_eq!(report["outside"], json!([]), "at {width} px: {report}");
        assert_eq!(report["crowded"], json!([]), "at {width} px: {report}");
        let connection = connection_texts(b).await;
        assert_eq!(
            connection.as_array().map(Vec::len),
            Some(1),
            "one connection state at {width} px: {connection}"
        );
        for (entries, protocol) in &shown {
            assert_protocol_spelling(entries, protocol);
        }
        accessibility(b).await;
        let path = screenshot_path(&format!("fleet-page-{width}.png"));
        b.screenshot(&path).await;
        eprintln!("screenshot: {}", path.display());
    }
}
