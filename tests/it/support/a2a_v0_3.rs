//! The A2A 0.3 fleet as test peers: agents of a2a-sdk 0.3.26 (tests/a2a/v0_3/agent.py) and
//! @a2a-js/sdk 0.3.14 (agent.mjs), their clients' drivers (client.py, client.mjs), and a push
//! receiver that reads deliveries with a2a-sdk 0.3's own types (receiver.py). a2a-sdk 0.3 lives
//! beside 1.3 in its own folder (`tests/a2a/v0_3/a2a-site`, `pip install --target`, what
//! scripts/test does), put first on `PYTHONPATH`; @a2a-js/sdk 0.3 is tests/node's `a2a-js-0.3`.
//!
//! Nothing is skipped: without them every user of this module fails, naming the install.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::OnceLock;

use serde_json::Value;

use super::a2a_sdk::{listening, require_sdks, run_json};
use super::child::repo;

const INSTALL: &str = "install the pinned A2A 0.3 SDKs (scripts/test does this): \
    `python3 -m pip install --target tests/a2a/v0_3/a2a-site -r tests/requirements/v0_3/a2a.txt` \
    and `npm ci --prefix tests/node`";

/// Where a2a-sdk 0.3 is installed.
pub fn site() -> PathBuf {
    repo("tests/a2a/v0_3/a2a-site")
}

/// Panics, naming the install commands, unless both 0.3 SDKs are installed at their pins.
pub fn require_v0_3() {
    require_sdks();
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        let py = Command::new("python3")
            .env("PYTHONPATH", site())
            .args([
                "-c",
                "import importlib.metadata as m, uvicorn, a2a.server.apps; \
                 v = m.version('a2a-sdk'); assert v == '0.3.26', v",
            ])
            .output()
            .map_err(|e| format!("python3 not runnable ({e})"))?;
        if !py.status.success() {
            return Err(format!(
                "a2a-sdk 0.3.26 is not importable from {}: {}",
                site().display(),
                String::from_utf8_lossy(&py.stderr).trim()
            ));
        }
        let pkg = repo("tests/node/node_modules/a2a-js-0.3/package.json");
        let text = std::fs::read_to_string(&pkg)
            .map_err(|e| format!("@a2a-js/sdk 0.3 is not installed ({}: {e})", pkg.display()))?;
        let version = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["version"].as_str().map(str::to_owned));
        if version.as_deref() != Some("0.3.14") {
            return Err(format!(
                "@a2a-js/sdk (a2a-js-0.3) is {version:?}, not 0.3.14"
            ));
        }
        Ok(())
    });
    if let Err(why) = checked {
        panic!("{why}\n{INSTALL}");
    }
}

/// Which 0.3 SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk03 {
    /// a2a-sdk 0.3.26.
    Python,
    /// @a2a-js/sdk 0.3.14.
    Js,
}

impl Sdk03 {
    /// The command running `script` of tests/a2a/v0_3 (`agent`, `client`, `receiver`) of this SDK.
    fn command(self, script: &str) -> Command {
        match self {
            Sdk03::Python => {
                let mut c = Command::new("python3");
                c.env("PYTHONPATH", site())
                    .arg(repo(&format!("tests/a2a/v0_3/{script}.py")));
                c
            }
            Sdk03::Js => {
                let mut c = Command::new("node");
                c.arg(repo(&format!("tests/a2a/v0_3/{script}.mjs")));
                c
            }
        }
    }
}

/// A running 0.3 agent, killed when dropped.
pub struct Agent03 {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Its card.
    pub card_url: String,
}

impl Agent03 {
    /// `sdk`'s agent serving only `binding`, with more of its flags (`--push`, `--card-file F`).
    pub fn start(sdk: Sdk03, binding: &str, extra: &[&str]) -> Agent03 {
        require_v0_3();
        let mut cmd = sdk.command("agent");
        cmd.args(["--port", "0", "--binding", binding]).args(extra);
        let (child, base) = listening(cmd, &format!("{sdk:?} 0.3 agent"));
        Agent03 {
            child,
            card_url: format!("{base}/.well-known/agent-card.json"),
            base,
        }
    }
}

impl Drop for Agent03 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A push receiver reading deliveries with a2a-sdk 0.3's `Task`, killed when dropped.
pub struct Receiver03 {
    child: Child,
    /// Where configs point.
    pub url: String,
    record: PathBuf,
    _dir: tempfile::TempDir,
}

impl Receiver03 {
    /// A receiver that takes every delivery a2a-sdk 0.3 can read.
    pub fn start() -> Receiver03 {
        require_v0_3();
        let dir = tempfile::tempdir().expect("temp dir");
        let record = dir.path().join("received.jsonl");
        let mut cmd = Sdk03::Python.command("receiver");
        cmd.args(["--port", "0", "--record"]).arg(&record);
        let (child, base) = listening(cmd, "0.3 receiver");
        Receiver03 {
            child,
            url: format!("{base}/push"),
            record,
            _dir: dir,
        }
    }

    /// Every request received so far: `{"ok", "status", "headers", "body", "error"?}`.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("record line {l:?}: {e}")))
            .collect()
    }
}

impl Drop for Receiver03 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `sdk`'s 0.3 client driver from `card_url` over `binding` through `scenarios` (with
/// `extra` flags: `--token T`, `--task ID`, `--push-url U`...): its JSON document,
/// `{"binding", "scenarios": {NAME: {"result"} | {"error"}}}`.
pub fn run_client03(
    sdk: Sdk03,
    card_url: &str,
    binding: &str,
    extra: &[&str],
    scenarios: &[&str],
) -> Value {
    require_v0_3();
    let mut cmd = sdk.command("client");
    cmd.args(["--card-url", card_url, "--binding", binding])
        .args(extra)
        .args(scenarios);
    run_json(cmd, &format!("{sdk:?} 0.3 client {binding} {scenarios:?}"))
}

/// Runs google-adk's `RemoteA2aAgent` on a2a-sdk 0.3 (tests/a2a/v0_3/adk_client.py, from
/// `tests/a2a/v0_3/adk-site`) with `text` to the agent of `card_url`: its JSON document,
/// `{"a2a_sdk", "texts", "error"?}`.
pub fn run_adk03(card_url: &str, text: &str) -> Value {
    require_v0_3();
    let site = repo("tests/a2a/v0_3/adk-site");
    let mut cmd = Command::new("python3");
    cmd.env("PYTHONPATH", &site)
        .env("PYTHONWARNINGS", "ignore")
        .arg(repo("tests/a2a/v0_3/adk_client.py"))
        .args(["--card-url", card_url, "--text", text]);
    let what = format!(
        "adk_client.py (google-adk on a2a-sdk 0.3: python3 -m pip install --target {} -r \
         tests/requirements/v0_3/adk.txt, as scripts/test does)",
        site.display()
    );
    run_json(cmd, &what)
}

/// A driver's document as two runs compare: error messages left out (the gateway words its
/// own, an SDK's messages name URLs), what an SDK tells an error by kept (its type, code,
/// HTTP status).
pub fn comparable(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| k.as_str() != "message")
                .map(|(k, v)| (k.clone(), comparable(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(comparable).collect()),
        other => other.clone(),
    }
}
