//! The official A2A SDKs as test peers: agents built with `a2a-sdk` 1.3.0's server classes
//! (tests/a2a/agent.py, one binding each) and the client drivers of `a2a-sdk` (client.py) and
//! `@a2a-js/sdk` 1.3.0 (client.mjs), so A2A tests exercise real third-party code, not ours.
//!
//! Nothing is skipped silently: without the pinned packages every user of this module fails
//! with the commands that install them (what `scripts/test` and `.ci/run` run).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

use super::child::repo;

/// How long an agent gets to print its listening line, and a client run to finish.
pub const DEADLINE: Duration = Duration::from_secs(60);

const INSTALL: &str = "install the pinned A2A SDKs (scripts/test does this): \
    `python3 -m pip install -r tests/requirements/a2a.txt` and `npm ci --prefix tests/node`";

/// Panics, naming the install commands, unless both SDKs are installed at their pins.
pub fn require_sdks() {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        let py = Command::new("python3")
            .args([
                "-c",
                "import importlib.metadata as m, uvicorn, starlette, sse_starlette, httpx, a2a.server.routes, grpc, a2a.types.a2a_pb2_grpc; \
                 v = m.version('a2a-sdk'); assert v == '1.3.0', v",
            ])
            .output()
            .map_err(|e| format!("python3 not runnable ({e})"))?;
        if !py.status.success() {
            return Err(format!(
                "a2a-sdk 1.3.0 with its HTTP server and gRPC is not importable by python3: {}",
                String::from_utf8_lossy(&py.stderr).trim()
            ));
        }
        let pkg = repo("tests/node/node_modules/@a2a-js/sdk/package.json");
        let text = std::fs::read_to_string(&pkg)
            .map_err(|e| format!("@a2a-js/sdk is not installed ({}: {e})", pkg.display()))?;
        let version = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["version"].as_str().map(str::to_owned));
        if version.as_deref() != Some("1.3.0") {
            return Err(format!("@a2a-js/sdk is {version:?}, not 1.3.0"));
        }
        Ok(())
    });
    if let Err(why) = checked {
        panic!("{why}\n{INSTALL}");
    }
}

/// Which binding an agent serves or a client uses, as cards spell it.
pub const JSONRPC: &str = "JSONRPC";
/// The REST binding.
pub const HTTP_JSON: &str = "HTTP+JSON";

/// A running a2a-sdk agent, killed when dropped.
pub struct SdkAgent {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Its card: `{base}/.well-known/agent-card.json`.
    pub card_url: String,
    /// Where it records the requests it receives, one JSON line each.
    pub record: PathBuf,
    _dir: tempfile::TempDir,
}

impl SdkAgent {
    /// An agent serving only `binding`, its card naming 127.0.0.1.
    pub fn start(binding: &str) -> SdkAgent {
        SdkAgent::start_with(binding, None)
    }

    /// An agent serving only `binding`, its card's interface naming `public_host` (the agent
    /// still listens on 127.0.0.1): for "a card must never steer the gateway".
    pub fn start_with(binding: &str, public_host: Option<&str>) -> SdkAgent {
        match public_host {
            Some(host) => SdkAgent::start_args(binding, &["--public-host", host]),
            None => SdkAgent::start_args(binding, &[]),
        }
    }

    /// An agent serving only `binding`, with more of agent.py's flags (`--push`).
    pub fn start_args(binding: &str, extra: &[&str]) -> SdkAgent {
        let dir = tempfile::tempdir().expect("temp dir");
        let record = dir.path().join("requests.jsonl");
        let mut args: Vec<std::ffi::OsString> = vec![
            "--binding".into(),
            binding.into(),
            "--record".into(),
            record.clone().into(),
        ];
        args.extend(extra.iter().map(Into::into));
        let (child, base) = spawn_listening("tests/a2a/agent.py", &args);
        SdkAgent {
            child,
            card_url: format!("{base}/.well-known/agent-card.json"),
            base,
            record,
            _dir: dir,
        }
    }

    /// Every request the agent received so far, in order.
    pub fn recorded(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("record line {l:?}: {e}")))
            .collect()
    }
}

impl Drop for SdkAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `script` (a Python file of the repo) with `--port 0` and `args`, and wait for its
/// `listening on URL` line (what it wrote on stderr is told if it never comes): the child and
/// the URL.
fn spawn_listening(script: &str, args: &[std::ffi::OsString]) -> (Child, String) {
    require_sdks();
    let mut cmd = Command::new("python3");
    cmd.arg(repo(script)).args(["--port", "0"]).args(args);
    listening(cmd, script)
}

/// Start `cmd` (a peer that prints `listening on URL` once it accepts) and wait for that line
/// (what it wrote on stderr is told if it never comes): the child and the URL. `script` names
/// it in a failure.
pub fn listening(mut cmd: Command, script: &str) -> (Child, String) {
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("start {script}: {e}"));
    let stderr = Arc::new(Mutex::new(String::new()));
    if let Some(mut err) = child.stderr.take() {
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = String::new();
            let _ = err.read_to_string(&mut buf);
            if let Ok(mut s) = sink.lock() {
                s.push_str(&buf);
            }
        });
    }
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    loop {
        match rx.recv_timeout(DEADLINE) {
            Ok(line) => {
                if let Some(base) = line.strip_prefix("listening on ") {
                    return (child, base.trim().to_owned());
                }
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{script} {args:?} never said it was listening; stderr:\n{}",
                    stderr.lock().map(|s| s.clone()).unwrap_or_default()
                )
            }
        }
    }
}

/// A push receiver that reads every delivery with a2a-sdk's own `StreamResponse`
/// (tests/a2a/receiver.py), killed when dropped.
pub struct SdkReceiver {
    child: Child,
    /// Where configs point: `http://127.0.0.1:PORT/push`.
    pub url: String,
    record: PathBuf,
    _dir: tempfile::TempDir,
}

impl SdkReceiver {
    /// A receiver that takes every well-formed delivery.
    pub fn start() -> SdkReceiver {
        SdkReceiver::start_args(&[])
    }

    /// A receiver answering 503 for the first `secs` seconds after its first request.
    pub fn unavailable_for(secs: f64) -> SdkReceiver {
        SdkReceiver::start_args(&["--unavailable-for", &secs.to_string()])
    }

    fn start_args(extra: &[&str]) -> SdkReceiver {
        let dir = tempfile::tempdir().expect("temp dir");
        let record = dir.path().join("received.jsonl");
        let mut args: Vec<std::ffi::OsString> = vec!["--record".into(), record.clone().into()];
        args.extend(extra.iter().map(Into::into));
        let (child, base) = spawn_listening("tests/a2a/receiver.py", &args);
        SdkReceiver {
            child,
            url: format!("{base}/push"),
            record,
            _dir: dir,
        }
    }

    /// Every request received so far, in order: `{"ok", "status", "headers", "body", ...}`.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("record line {l:?}: {e}")))
            .collect()
    }

    /// The deliveries taken (parsed by a2a-sdk), each once (a redelivery of one `webhook-id`
    /// counted once), in arrival order: their parsed StreamResponses.
    pub fn deliveries(&self) -> Vec<Value> {
        let mut seen = std::collections::HashSet::new();
        self.requests()
            .into_iter()
            .filter(|r| r["ok"] == true)
            .filter(|r| {
                let id = r["headers"]["webhook-id"].as_str().unwrap_or("").to_owned();
                id.is_empty() || seen.insert(id)
            })
            .map(|r| r["body"].clone())
            .collect()
    }
}

impl Drop for SdkReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which SDK's client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// a2a-sdk (tests/a2a/client.py).
    Python,
    /// @a2a-js/sdk (tests/a2a/client.mjs).
    Js,
}

/// Runs `sdk`'s client driver from `card_url` over `binding` (with `Authorization: Bearer
/// token` when given) through `scenarios`, and returns its JSON document. With several
/// scenarios it is `{"binding": B, "scenarios": {NAME: {...}}}`.
pub fn run_client(
    sdk: Sdk,
    card_url: &str,
    binding: &str,
    token: Option<&str>,
    scenarios: &[&str],
) -> Value {
    run_client_with(sdk, card_url, binding, token, &[], scenarios)
}

/// [`run_client`] with more arguments for the driver (`--task ID` for `follow`).
pub fn run_client_with(
    sdk: Sdk,
    card_url: &str,
    binding: &str,
    token: Option<&str>,
    extra: &[&str],
    scenarios: &[&str],
) -> Value {
    require_sdks();
    let mut cmd = match sdk {
        Sdk::Python => {
            let mut c = Command::new("python3");
            c.arg(repo("tests/a2a/client.py"));
            c
        }
        Sdk::Js => {
            let mut c = Command::new("node");
            c.arg(repo("tests/a2a/client.mjs"));
            c
        }
    };
    cmd.args(["--card-url", card_url, "--binding", binding]);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    cmd.args(extra);
    cmd.args(scenarios);
    run_json(cmd, &format!("{sdk:?} client {binding} {scenarios:?}"))
}

/// Runs `cmd` (a driver printing one JSON document) within [`DEADLINE`]: its document. It
/// must exit 0; `what` names it in a failure.
pub fn run_json(mut cmd: Command, what: &str) -> Value {
    cmd.stdin(Stdio::null());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.output());
    });
    let out = match rx.recv_timeout(DEADLINE) {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => panic!("{what}: cannot run ({e})"),
        Err(_) => panic!("{what}: no answer within {DEADLINE:?}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} exited {}: {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON document ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// One client run: SDK, card URL, binding, token, scenarios.
pub type Run<'a> = (Sdk, &'a str, &'a str, Option<&'a str>, &'a [&'a str]);

/// Runs several client drivers at once (one thread each), in the order given.
pub fn run_clients(runs: &[Run<'_>]) -> Vec<Value> {
    std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .iter()
            .map(|(sdk, url, binding, token, scenarios)| {
                s.spawn(move || run_client(*sdk, url, binding, *token, scenarios))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panic!("a client run panicked")))
            .collect()
    })
}
