//! docs/quickstart-a2a.md as written: its titled code blocks (```python title="agent.py"```, and
//! so on) are extracted to an empty directory exactly as the page has them, the commands of its
//! `sh` blocks are run there as written (`sh -c`, the built gateway on `PATH` as `a2a-gateway`),
//! and what the clients print is compared with the page's `... prints` blocks.
//!
//! What the test changes, and nothing else:
//! - the ports: every `9999` (the agent) and `8080` (the gateway) in what it extracts becomes a
//!   free port, by a plain text replacement;
//! - the installs: the page's `pip install` and `npm install` are not run; the repo's pinned
//!   packages stand for them (`python3` with a2a-sdk, as tests/it/support/a2a_sdk.rs finds it,
//!   and tests/node/node_modules linked as the directory's `node_modules`), and the page's pins
//!   must be theirs.
//!
//! It also runs the page's warnings: @a2a-js/sdk given the base URL without its trailing slash
//! fails with the 404 the page quotes, a2a-sdk without it works, and the card without the key is
//! 401.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::a2a_sdk::{require_sdks, DEADLINE};
use crate::support::bin;
use crate::support::child::repo;

const PAGE: &str = "docs/quickstart-a2a.md";
/// The ports the page uses, replaced by free ones in everything extracted.
const AGENT_PORT: &str = "9999";
const GATEWAY_PORT: &str = "8080";

/// One fenced code block of the page.
#[derive(Debug, Clone)]
struct Block {
    /// The info string's first word (`python`, `sh`, `toml`...).
    lang: String,
    /// Its `title="..."`, when it has one.
    title: Option<String>,
    /// The lines between the fences, each ending in a newline.
    text: String,
}

/// The page's top-level fenced blocks, in order.
fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for line in markdown.lines() {
        match open.as_mut() {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    let info = info.trim();
                    let title = info.split_once("title=\"").and_then(|(_, rest)| {
                        rest.split_once('"').map(|(title, _)| title.to_owned())
                    });
                    open = Some(Block {
                        lang: info.split_whitespace().next().unwrap_or("").to_owned(),
                        title,
                        text: String::new(),
                    });
                }
            }
            Some(block) => {
                if line.trim_end() == "```" {
                    out.extend(open.take());
                } else {
                    block.text.push_str(line);
                    block.text.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "{PAGE}: a code block is never closed");
    out
}

/// The titled blocks by title; a title given twice is a mistake of the page.
fn titled(blocks: &[Block]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for b in blocks {
        if let Some(title) = &b.title {
            let before = out.insert(title.clone(), b.text.clone());
            assert!(before.is_none(), "{PAGE}: two blocks titled {title:?}");
        }
    }
    out
}

/// The commands of the page's `sh` blocks, a line continued by `\` joined with the next.
fn commands(blocks: &[Block]) -> Vec<String> {
    let mut out = Vec::new();
    for b in blocks.iter().filter(|b| b.lang == "sh") {
        let mut current = String::new();
        for line in b.text.lines() {
            match line.strip_suffix('\\') {
                Some(head) => {
                    current.push_str(head);
                    current.push(' ');
                }
                None => {
                    current.push_str(line);
                    if !current.trim().is_empty() {
                        out.push(current.trim().to_owned());
                    }
                    current.clear();
                }
            }
        }
    }
    out
}

/// The one command of the page that `is` picks out: `what` names it in a failure.
fn command(all: &[String], what: &str, is: impl Fn(&str) -> bool) -> String {
    let found: Vec<&String> = all.iter().filter(|c| is(c)).collect();
    assert_eq!(
        found.len(),
        1,
        "{PAGE}: one command to {what} expected, found {found:?} among {all:?}"
    );
    found[0].clone()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The pinned version of `name` in a requirements file (`name==V` or `name[extras]==V`).
fn pip_pin(requirements: &str, name: &str) -> String {
    requirements
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .find_map(|l| {
            let (spec, version) = l.split_once("==")?;
            let bare = spec.split('[').next().unwrap_or(spec);
            (bare == name).then(|| version.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no {name}== pin in the requirements"))
}

/// A process of the page's, its outputs kept as they come; killed when dropped.
struct Running {
    child: Child,
    what: String,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    lines: mpsc::Receiver<String>,
}

impl Running {
    /// `sh -c "exec COMMAND"` in `dir` with `path` as PATH.
    fn start(dir: &Path, path: &str, command: &str) -> Running {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {command}"))
            .current_dir(dir)
            .env("PATH", path)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start `{command}`: {e}"));
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, lines) = mpsc::channel();
        if let Some(mut out) = child.stdout.take() {
            let keep = stdout.clone();
            std::thread::spawn(move || {
                let mut pending = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n) = out.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    pending.extend_from_slice(&chunk[..n]);
                    while let Some(at) = pending.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=at).collect();
                        let line = String::from_utf8_lossy(&line).into_owned();
                        if let Ok(mut s) = keep.lock() {
                            s.push_str(&line);
                        }
                        let _ = tx.send(line.trim_end().to_owned());
                    }
                }
            });
        }
        if let Some(mut err) = child.stderr.take() {
            let keep = stderr.clone();
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = err.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut s) = keep.lock() {
                        s.push_str(&String::from_utf8_lossy(&chunk[..n]));
                    }
                }
            });
        }
        Running {
            child,
            what: command.to_owned(),
            stdout,
            stderr,
            lines,
        }
    }

    fn said(&self) -> String {
        format!(
            "`{}` said on stdout:\n{}\nand on stderr:\n{}",
            self.what,
            self.stdout.lock().map(|s| s.clone()).unwrap_or_default(),
            self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
        )
    }

    /// Panics (with what it said) if the process has exited.
    fn alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("exited {status}; {}", self.said());
        }
    }

    /// Waits for a stdout line equal to `line`.
    fn wait_line(&mut self, line: &str) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(got) if got == line => return,
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("no line {line:?}; {}", self.said())
                }
            }
            self.alive();
            assert!(
                Instant::now() < deadline,
                "no line {line:?} within {DEADLINE:?}; {}",
                self.said()
            );
        }
    }

    /// Waits until `check` holds, the process still running.
    fn wait_until(&mut self, what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + DEADLINE;
        while !check() {
            self.alive();
            assert!(
                Instant::now() < deadline,
                "not {what} within {DEADLINE:?}; {}",
                self.said()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `sh -c COMMAND` in `dir` to its end, within [`DEADLINE`].
fn run(dir: &Path, path: &str, command: &str) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => panic!("`{command}` cannot run: {e}"),
        Err(_) => panic!("`{command}` did not finish within {DEADLINE:?}"),
    }
}

fn said(command: &str, out: &Output) -> String {
    format!(
        "`{command}` exited {}; stdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The status of `GET path` on 127.0.0.1:`port` (None: no connection, or no answer).
fn status_of(port: u16, path: &str) -> Option<u16> {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    tcp.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

#[test]
fn the_quickstart_page_runs_as_written() {
    require_sdks();
    let page = std::fs::read_to_string(repo(PAGE)).expect("docs/quickstart-a2a.md");
    let blocks = blocks(&page);
    let files = titled(&blocks);
    let all = commands(&blocks);

    // The page's pins are the ones the repo's packages are installed at.
    let python_pin = pip_pin(
        &std::fs::read_to_string(repo("tests/requirements/a2a.txt")).expect("a2a.txt"),
        "a2a-sdk",
    );
    let node: Value = serde_json::from_str(
        &std::fs::read_to_string(repo("tests/node/package.json")).expect("package.json"),
    )
    .expect("package.json is JSON");
    let node_pin = node["dependencies"]["@a2a-js/sdk"]
        .as_str()
        .expect("@a2a-js/sdk in tests/node/package.json");
    for install in [
        format!("python3 -m pip install \"a2a-sdk[http-server]=={python_pin}\" uvicorn"),
        format!("npm install @a2a-js/sdk@{node_pin}"),
    ] {
        assert!(
            all.iter().any(|c| c.contains(&install)),
            "{PAGE} does not install with `{install}`: {all:?}"
        );
    }

    // The files, with free ports in place of the page's.
    let agent_port = free_port();
    let gateway_port = loop {
        let p = free_port();
        if p != agent_port {
            break p;
        }
    };
    let ports = |text: &str| {
        text.replace(AGENT_PORT, &agent_port.to_string())
            .replace(GATEWAY_PORT, &gateway_port.to_string())
    };
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, ports_in_it) in [
        ("agent.py", &[AGENT_PORT][..]),
        ("gateway.toml", &[AGENT_PORT, GATEWAY_PORT][..]),
        ("client.py", &[GATEWAY_PORT][..]),
        ("client.mjs", &[GATEWAY_PORT][..]),
    ] {
        let text = files
            .get(name)
            .unwrap_or_else(|| panic!("{PAGE}: no block titled {name:?}"));
        for port in ports_in_it {
            assert!(
                text.contains(port),
                "{PAGE}: {name} does not use port {port}"
            );
        }
        std::fs::write(dir.path().join(name), ports(text)).expect("write a page's file");
    }
    // What `npm install @a2a-js/sdk@...` would have made, and the gateway on PATH.
    std::os::unix::fs::symlink(
        repo("tests/node/node_modules"),
        dir.path().join("node_modules"),
    )
    .expect("link node_modules");
    let bin_dir = dir.path().join(".bin");
    std::fs::create_dir(&bin_dir).expect(".bin");
    std::os::unix::fs::symlink(bin(), bin_dir.join("a2a-gateway")).expect("link a2a-gateway");
    let path = std::env::join_paths(
        std::iter::once(bin_dir.clone()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .expect("PATH");
    let path = path.to_string_lossy().into_owned();

    // 1. The agent, as the page runs it.
    let run_agent = command(&all, "run the agent", |c| c.ends_with(" agent.py"));
    let mut agent = Running::start(dir.path(), &path, &run_agent);
    agent.wait_until("serving its card", || {
        status_of(agent_port, "/.well-known/agent-card.json") == Some(200)
    });

    // 2. The gateway: the config checked, then served.
    let check = command(&all, "check the config", |c| {
        c.starts_with("a2a-gateway check-config")
    });
    let out = run(dir.path(), &path, &check);
    assert!(out.status.success(), "{}", said(&check, &out));
    let serve = command(&all, "serve", |c| c.starts_with("a2a-gateway --config"));
    let mut gateway = Running::start(dir.path(), &path, &serve);
    gateway.wait_line(&ports("listening on http://127.0.0.1:8080"));
    gateway.wait_until("ready", || status_of(gateway_port, "/readyz") == Some(200));
    assert!(
        page.contains("/agents/echo/.well-known/agent-card.json"),
        "{PAGE} names the served card's path"
    );
    assert_eq!(
        status_of(gateway_port, "/agents/echo/.well-known/agent-card.json"),
        Some(401),
        "the card without the key"
    );

    // 3 and 4. Both clients as the page runs them, and without the trailing slash.
    let run_py = command(&all, "run client.py", |c| c.ends_with(" client.py"));
    let run_js = command(&all, "run client.mjs", |c| c.ends_with(" client.mjs"));
    let py_no_slash = run_py.replace("client.py", &without_slash(dir.path(), "client.py"));
    let js_no_slash = run_js.replace("client.mjs", &without_slash(dir.path(), "client.mjs"));
    let runs = [
        run_py.clone(),
        run_js.clone(),
        py_no_slash.clone(),
        js_no_slash.clone(),
    ];
    let outs: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .iter()
            .map(|c| s.spawn(|| run(dir.path(), &path, c)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panic!("a client run panicked")))
            .collect()
    });
    for (command, out, prints) in [
        (&run_py, &outs[0], "client.py prints"),
        (&run_js, &outs[1], "client.mjs prints"),
        (&py_no_slash, &outs[2], "client.py prints"),
    ] {
        let want = files
            .get(prints)
            .unwrap_or_else(|| panic!("{PAGE}: no block titled {prints:?}"));
        assert!(out.status.success(), "{}", said(command, out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want.trim(),
            "{}",
            said(command, out)
        );
    }
    assert!(
        want_echo(&files["client.py prints"]) && want_echo(&files["client.mjs prints"]),
        "{PAGE}: the clients print the agent's echo"
    );
    // @a2a-js/sdk without the trailing slash: the 404 the page warns of.
    let js_failed = &outs[3];
    let quoted = "http://127.0.0.1:8080/agents/.well-known/agent-card.json";
    assert!(page.contains(quoted), "{PAGE} quotes {quoted}");
    assert!(
        !js_failed.status.success()
            && String::from_utf8_lossy(&js_failed.stderr).contains(&format!(
                "Failed to fetch Agent Card from {}: 404",
                ports(quoted)
            )),
        "{}",
        said(&js_no_slash, js_failed)
    );

    // The fleet's endpoint, by the page's curl, twice: the same task, answered once.
    // Its JSON spans lines inside quotes: the block is run whole, as a shell reads a paste.
    let curls: Vec<&Block> = blocks
        .iter()
        .filter(|b| b.lang == "sh" && b.text.starts_with("curl ") && b.text.contains("/a2a "))
        .collect();
    assert_eq!(curls.len(), 1, "{PAGE}: one curl block for /a2a");
    let curl = ports(&curls[0].text);
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let out = run(dir.path(), &path, &curl);
        assert!(out.status.success(), "{}", said(&curl, &out));
        let answer: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", said(&curl, &out)));
        let task = &answer["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
        assert_eq!(
            task["artifacts"][0]["parts"][0]["text"], "echo: hello through /a2a",
            "{answer}"
        );
        tasks.push(task["id"].clone());
    }
    assert_eq!(tasks[0], tasks[1], "the same messageId is answered once");
    assert!(page.contains("echo: hello through /a2a"));

    agent.alive();
    gateway.alive();
}

/// The client `name` as extracted into `dir`, given the gateway's base URL without the trailing
/// slash, written beside it: the variant's file name.
fn without_slash(dir: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(dir.join(name)).expect("an extracted client");
    let with = "/agents/echo/'";
    assert_eq!(
        text.matches(with).count(),
        1,
        "{PAGE}: {name} gives the base URL once, with its trailing slash"
    );
    let other = name.replacen("client", "client-no-slash", 1);
    std::fs::write(dir.join(&other), text.replace(with, "/agents/echo'"))
        .expect("write the variant");
    other
}

/// Whether a client's shown output holds the agent's answer to the page's message.
fn want_echo(output: &str) -> bool {
    output.contains("TASK_STATE_COMPLETED") && output.contains("echo: hello through the gateway")
}

/// The block reader on a page of known shape.
#[test]
fn the_block_reader() {
    let md = "text\n```python title=\"a.py\"\nprint(1)\n```\n```sh\nrun a \\\n  --b\nrun c\n```\n";
    let b = blocks(md);
    assert_eq!(b.len(), 2);
    assert_eq!(
        (
            b[0].lang.as_str(),
            b[0].title.as_deref(),
            b[0].text.as_str()
        ),
        ("python", Some("a.py"), "print(1)\n")
    );
    assert_eq!(commands(&b), ["run a    --b", "run c"]);
}
