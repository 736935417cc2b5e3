//! A real browser (Debian's headless Chromium, with its web security on) against the gateway's
//! CORS: a page served from an allowed origin, on another port, creates a task with a key and
//! follows it on an EventSource with `?access_token=`; a page from an origin not allowed is
//! kept out by the browser itself. Each page reports what it saw by POSTing it to the server
//! that served it (its own origin, so no CORS is involved in reporting).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use a2a_gateway::config::{CorsConfig, Right};

use crate::auth::client;
use crate::support::*;

const KEY: &str = "browser-key-0123456789abcdef";
const WAIT: Duration = Duration::from_secs(30);

/// The page a page server serves, set once the gateway's address is known.
type Page = Arc<OnceLock<String>>;

/// Serves `page` at `/` and forwards every POSTed body (the page's reports) to the channel.
async fn page_server(page: Page) -> (SocketAddr, mpsc::UnboundedReceiver<Value>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (page, tx) = (page.clone(), tx.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (page, tx) = (page.clone(), tx.clone());
                    async move {
                        let res = if req.method() == hyper::Method::POST {
                            let body = req.into_body().collect().await.map(|b| b.to_bytes());
                            if let Ok(v) =
                                serde_json::from_slice::<Value>(&body.unwrap_or_default())
                            {
                                let _ = tx.send(v);
                            }
                            hyper::Response::builder()
                                .status(204)
                                .body(Full::new(Bytes::new()))
                        } else if req.uri().path() == "/" {
                            let html = page.get().cloned().unwrap_or_default();
                            hyper::Response::builder()
                                .header("content-type", "text/html; charset=utf-8")
                                .body(Full::new(Bytes::from(html)))
                        } else {
                            hyper::Response::builder()
                                .status(404)
                                .body(Full::new(Bytes::new()))
                        };
                        Ok::<_, Infallible>(res.expect("response"))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    (addr, rx)
}

/// The page: create a task on agent `a` with the key, open its stream with `?access_token=`,
/// report the task id when the stream is open, and everything seen once two `log` events came.
/// It also tries a create without the key (the gateway's 401 must be readable by the page).
fn page(gateway: &str, key: &str) -> String {
    let input = good_input();
    format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>a2a console</title></head><body>
<script>
const gw = {gateway:?}, key = {key:?}, input = {input};
const report = (v) => fetch("/report", {{ method: "POST", body: JSON.stringify(v) }});
(async () => {{
  const out = {{ origin: location.origin, logs: [] }};
  try {{
    const anon = await fetch(gw + "/agents/a/tasks", {{ method: "POST",
      headers: {{ "Content-Type": "application/json" }},
      body: JSON.stringify({{ input }}) }});
    out.unauthenticated = {{ status: anon.status, code: (await anon.json()).error.code,
      challenge: anon.headers.get("www-authenticate") }};
    const r = await fetch(gw + "/agents/a/tasks", {{ method: "POST",
      headers: {{ "Authorization": "Bearer " + key, "Content-Type": "application/json" }},
      body: JSON.stringify({{ input }}) }});
    out.create_status = r.status;
    out.request_id = r.headers.get("x-request-id");
    const task = await r.json();
    out.task_id = task.task_id;
    const es = new EventSource(gw + "/agents/a/tasks/" + task.task_id + "/stream?access_token=" + encodeURIComponent(key));
    es.onopen = () => report({{ open: true, task_id: task.task_id }});
    es.addEventListener("log", (e) => {{
      out.logs.push(JSON.parse(e.data));
      if (out.logs.length === 2) {{ es.close(); report(out); }}
    }});
    es.onerror = () => {{ if (es.readyState === EventSource.CLOSED) report({{ error: "stream closed", out }}); }};
  }} catch (e) {{
    report({{ blocked: true, error: String(e), out }});
  }}
}})();
</script></body></html>"#
    )
}

/// Headless Chromium on `url`, killed when dropped.
struct Chromium {
    child: Child,
    _profile: tempfile::TempDir,
}

impl Chromium {
    fn open(url: &str) -> Chromium {
        let profile = tempfile::tempdir().expect("profile dir");
        let child = crate::support::cdp::headless(profile.path())
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium runs (Debian's chromium package; scripts/test installs it)");
        Chromium {
            child,
            _profile: profile,
        }
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Value>, what: &str) -> Value {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no report from the page in time: {what}"))
        .expect("page server runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_an_allowed_origin_creates_and_follows_a_task_and_another_is_kept_out() {
    let a = agent().await;
    // The pages' servers first: their ports make the origins, and the allowed one goes into
    // the gateway's config. The pages themselves name the gateway, so they are set after it.
    let (console, evil): (Page, Page) = (Arc::default(), Arc::default());
    let (console_addr, mut console_rx) = page_server(console.clone()).await;
    let (evil_addr, mut evil_rx) = page_server(evil.clone()).await;
    let origin = format!("http://127.0.0.1:{}", console_addr.port());
    let g = TestGateway::start(&[("a", &a)], |cfg| {
        cfg.clients = vec![client(
            "console",
            KEY,
            &["a"],
            &[Right::Tasks, Right::Streams],
        )];
        cfg.cors = Some(CorsConfig {
            allow_origins: vec![origin.clone()],
            ..CorsConfig::default()
        });
        ingest(cfg);
    })
    .await;
    g.ready().await;
    let html = page(&g.http.base, KEY);
    console.set(html.clone()).expect("page set once");
    evil.set(html).expect("page set once");
    // One page per browser: headless Chromium opens a single target.
    let _console_tab = Chromium::open(&format!("http://{console_addr}/"));
    let _evil_tab = Chromium::open(&format!("http://{evil_addr}/"));
    // The allowed page: its stream opens with ?access_token=, then it receives what the agent
    // sends on the task's stream.
    let opened = next(&mut console_rx, "stream open").await;
    assert_eq!(opened["open"], true, "{opened}");
    let id = opened["task_id"].as_str().expect("task id").to_owned();
    wait_for("the gateway's upstream stream", || {
        let n = a.stream_connections(&id);
        async move { n == 1 }
    })
    .await;
    a.push_event(&id, "log", r#"{"level":"INFO","message":"one"}"#);
    a.push_event(&id, "log", r#"{"level":"INFO","message":"two"}"#);
    let out = next(&mut console_rx, "the page's findings").await;
    assert_eq!(out["origin"], origin.as_str());
    assert_eq!(out["create_status"], 202, "{out}");
    assert_eq!(out["task_id"], id.as_str());
    assert!(
        out["request_id"].is_string(),
        "exposed header readable: {out}"
    );
    assert_eq!(
        out["unauthenticated"],
        json!({ "status": 401, "code": "UNAUTHORIZED", "challenge": "Bearer realm=\"a2a-gateway\"" })
    );
    let messages: Vec<&str> = out["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .filter_map(|l| l["message"].as_str())
        .collect();
    assert_eq!(messages, ["one", "two"]);
    // The task is the console's, made with its key.
    let auth = format!("Bearer {KEY}");
    let r = g
        .http
        .send(
            hyper::Method::GET,
            &format!("/tasks/{id}"),
            &[("authorization", &auth)],
            Bytes::new(),
        )
        .await;
    assert_eq!(r.status, 200);
    // The page on another origin: the browser refuses it the answers (no CORS headers for it).
    let blocked = next(&mut evil_rx, "the other origin's outcome").await;
    assert_eq!(blocked["blocked"], true, "{blocked}");
    assert!(
        blocked["error"]
            .as_str()
            .is_some_and(|e| e.contains("TypeError")),
        "{blocked}"
    );
    // Both pages sent their creates; only the allowed one's (with the key) reached the agent.
    assert_eq!(a.request_count(sample::Route::CreateTask), 1);
}
