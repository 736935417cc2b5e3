//! Headless Chromium driven over the Chrome DevTools Protocol (CDP), for tests that need to look
//! at what a page does rather than have the page report back: navigate, evaluate JavaScript,
//! wait for the DOM to reach a state, take screenshots.
//!
//! One browser, one page, one WebSocket to that page's target. Commands are sent one at a time
//! (`&mut self`), so a command's answer is simply the next message carrying its id; the events
//! Chromium sends in between are not needed by anything here and are dropped.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long Chromium may take to start and offer its page target (a cold start on a loaded CI
/// machine takes seconds).
const LAUNCH: Duration = Duration::from_secs(20);
/// How long one CDP command may take to be answered.
const COMMAND: Duration = Duration::from_secs(30);
/// How long a navigation may take to reach `document.readyState === "complete"`.
const LOAD: Duration = Duration::from_secs(30);

/// A headless Chromium with one page, connected over CDP. Chromium is killed (and waited for)
/// on drop, and its profile directory removed.
pub struct Browser {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    _chromium: Chromium,
}

/// Chromium's process and profile, owned from the moment it is spawned so that a launch that
/// panics half-way (no port, no page target) leaves no browser running behind the test.
struct Chromium {
    child: Child,
    profile: tempfile::TempDir,
}

impl Drop for Chromium {
    /// Kill the whole process group: killed alone, the browser leaves its helpers (zygotes,
    /// renderers) writing into the profile for a moment, racing its removal.
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's Chromium, headless, with a profile of its own and nothing running in the
/// background: the command every browser test starts from.
pub fn headless(profile: &Path) -> Command {
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

impl Browser {
    /// Start Chromium with a `width`×`height` window on `about:blank` and connect to its page.
    ///
    /// `--remote-debugging-port=0` lets Chromium pick a free port, which it writes to
    /// `DevToolsActivePort` in the profile directory: no port can clash between parallel tests.
    pub async fn launch(width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().expect("chromium profile dir");
        let child = headless(profile.path())
            .arg("--remote-debugging-port=0")
            .arg(format!("--window-size={width},{height}"))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromium runs (Debian's chromium package; scripts/test installs it)");
        let mut chromium = Chromium { child, profile };
        let deadline = Instant::now() + LAUNCH;
        let port_file = chromium.profile.path().join("DevToolsActivePort");
        // The file can be seen before its port is written into it: wait for a port.
        let port: u16 = loop {
            let first = std::fs::read_to_string(&port_file).unwrap_or_default();
            if let Some(port) = first.lines().next().and_then(|l| l.trim().parse().ok()) {
                break port;
            }
            if let Ok(Some(status)) = chromium.child.try_wait() {
                panic!("chromium exited ({status}) before offering its DevTools port");
            }
            assert!(
                Instant::now() < deadline,
                "chromium wrote no DevToolsActivePort within {LAUNCH:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // The page target can appear in the list a moment after the port opens. The HTTP
        // client reads by Content-Length: Chromium's DevTools server ignores `Connection: close`,
        // so a read to EOF (`raw_request`) would hang.
        let http = super::Http::new(format!("http://127.0.0.1:{port}"));
        let url = loop {
            let list = tokio::time::timeout(COMMAND, http.get("/json/list"))
                .await
                .expect("chromium answers /json/list")
                .json();
            let page = list
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["type"] == "page");
            if let Some(url) = page.and_then(|t| t["webSocketDebuggerUrl"].as_str()) {
                break url.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "chromium offered no page target within {LAUNCH:?}: {list}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap_or_else(|e| panic!("CDP WebSocket to {url}: {e}"));
        Browser {
            ws,
            next_id: 1,
            _chromium: chromium,
        }
    }

    /// Send one CDP command and wait for its answer: the `result`, or the CDP error's message.
    pub async fn send(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({ "id": id, "method": method, "params": params }).to_string();
        let exchange = async {
            self.ws
                .send(Message::text(msg))
                .await
                .map_err(|e| format!("{method}: send: {e}"))?;
            loop {
                let frame = match self.ws.next().await {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(format!("{method}: receive: {e}")),
                    None => return Err(format!("{method}: the CDP connection closed")),
                };
                let v: Value = serde_json::from_str(&frame)
                    .map_err(|e| format!("{method}: not JSON ({e}): {frame}"))?;
                // Events have no id; answers to earlier, timed-out commands have another one.
                if v["id"] != id {
                    continue;
                }
                return match v.get("error") {
                    Some(err) => Err(match err["message"].as_str() {
                        Some(message) => format!("{method}: {message}"),
                        None => format!("{method}: {err}"),
                    }),
                    None => Ok(v["result"].clone()),
                };
            }
        };
        tokio::time::timeout(COMMAND, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("{method}: no answer within {COMMAND:?}")))
    }

    /// [`Browser::send`] for commands a test expects to succeed.
    async fn must(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params)
            .await
            .unwrap_or_else(|e| panic!("CDP {e}"))
    }

    /// Load `url` and wait until the new document's `readyState` is `"complete"`.
    ///
    /// The old document is marked first: right after `Page.navigate` answers, the old document
    /// can still be the one evaluated, and `about:blank` is already complete.
    pub async fn navigate(&mut self, url: &str) {
        self.must("Page.enable", json!({})).await;
        self.eval("window.__cdpOldDocument = true").await;
        let nav = self.must("Page.navigate", json!({ "url": url })).await;
        if let Some(err) = nav["errorText"].as_str() {
            panic!("navigating to {url}: {err}");
        }
        // No loaderId: a same-document navigation (a fragment), the marker stays.
        let fresh = if nav["loaderId"].is_string() {
            "!window.__cdpOldDocument && "
        } else {
            ""
        };
        let loaded = format!("{fresh}document.readyState === 'complete'");
        self.wait_for(&format!("{url} loaded"), &loaded, LOAD).await;
    }

    /// Evaluate `js` in the page (awaiting a promise) and return its value as JSON, or the
    /// description of what it threw (e.g. `"Error: boom\n    at …"`).
    pub async fn try_eval(&mut self, js: &str) -> Result<Value, String> {
        let params = json!({ "expression": js, "returnByValue": true, "awaitPromise": true });
        let r = self.send("Runtime.evaluate", params).await?;
        if let Some(ex) = r.get("exceptionDetails") {
            let text = ex["exception"]["description"]
                .as_str()
                .or(ex["text"].as_str())
                .unwrap_or("exception without a description");
            return Err(text.to_owned());
        }
        // `undefined` has no value.
        Ok(r["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    /// [`Browser::try_eval`], panicking with what the page threw.
    pub async fn eval(&mut self, js: &str) -> Value {
        self.try_eval(js)
            .await
            .unwrap_or_else(|e| panic!("evaluating {js:?} threw: {e}"))
    }

    /// Evaluate `js_predicate` every 50 ms until its value is truthy (as JavaScript judges it),
    /// and return that value. A throw counts as not yet (the element may not exist yet).
    pub async fn wait_for(&mut self, what: &str, js_predicate: &str, limit: Duration) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let last = self.try_eval(js_predicate).await;
            if let Ok(v) = &last {
                if truthy(v) {
                    return v.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {limit:?} waiting for {what}; {js_predicate} last gave {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Save a PNG of the whole page (beyond the viewport too) to `path`, creating its directory.
    pub async fn screenshot(&mut self, path: &Path) {
        let params = json!({ "format": "png", "captureBeyondViewport": true });
        let shot = self.must("Page.captureScreenshot", params).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().expect("screenshot data"))
            .expect("screenshot data is base64");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("screenshot directory");
        }
        std::fs::write(path, png)
            .unwrap_or_else(|e| panic!("writing the screenshot {}: {e}", path.display()));
    }
}

/// JavaScript's truthiness for a value that came back as JSON (`NaN` arrives as `null`).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}
