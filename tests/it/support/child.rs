//! A child process of the built binary, for the command-line tests: both outputs read as they
//! come, killed when dropped, and the configs and waits those tests share.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::{bin, Http};

/// How long a child gets to do what the test is waiting for before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);
/// SIGTERM must stop the server in "a few seconds", even with an idle keep-alive connection open
/// (well under the gateway's 10 s drain period for busy connections).
pub const STOP_DEADLINE: Duration = Duration::from_secs(5);

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A child process that is killed (and reaped) when dropped, whatever the test did.
pub struct Proc {
    child: Child,
    stdout_lines: mpsc::UnboundedReceiver<String>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Everything a finished child said.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

impl Proc {
    /// Start the binary with `args` and `env`, reading both of its outputs as they come (so a
    /// chatty child never blocks on a full pipe).
    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Proc {
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("the binary starts");
        let (tx, stdout_lines) = mpsc::unbounded_channel();
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let keep_out = stdout.clone();
        let keep_err = stderr.clone();
        let readers = vec![
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    keep_out
                        .lock()
                        .expect("stdout buffer")
                        .push_str(&format!("{line}\n"));
                    let _ = tx.send(line);
                }
            }),
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut err = err;
                let mut chunk = [0u8; 8192];
                while let Ok(n) = err.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    *keep_err.lock().expect("stderr buffer") =
                        String::from_utf8_lossy(&buf).into_owned();
                }
            }),
        ];
        Proc {
            child,
            stdout_lines,
            stdout,
            stderr,
            readers,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the child has written to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        self.stderr.lock().expect("stderr buffer").clone()
    }

    /// The address from the `listening on http://ADDR` line the server prints at start.
    pub async fn listening_addr(&mut self) -> String {
        let wait = async {
            while let Some(line) = self.stdout_lines.recv().await {
                if let Some(addr) = line.trim().strip_prefix("listening on http://") {
                    return Some(addr.to_owned());
                }
            }
            None
        };
        match tokio::time::timeout(DEADLINE, wait).await {
            Ok(Some(addr)) => addr,
            _ => panic!(
                "no `listening on http://ADDR` line; stdout: {:?} stderr: {:?}",
                self.stdout.lock().expect("stdout"),
                self.stderr.lock().expect("stderr")
            ),
        }
    }

    /// The next line of stdout that contains `needle` (lines before it are passed over).
    pub async fn line_containing(&mut self, needle: &str) -> String {
        let wait = async {
            while let Some(line) = self.stdout_lines.recv().await {
                if line.contains(needle) {
                    return Some(line);
                }
            }
            None
        };
        match tokio::time::timeout(DEADLINE, wait).await {
            Ok(Some(line)) => line,
            _ => panic!(
                "no line with {needle:?}; stdout: {:?} stderr: {:?}",
                self.stdout.lock().expect("stdout"),
                self.stderr.lock().expect("stderr")
            ),
        }
    }

    /// Wait (without blocking the runtime) for the child to exit by itself, then collect its output.
    pub async fn finish(self) -> Finished {
        self.finish_within(DEADLINE).await
    }

    pub async fn finish_within(mut self, limit: Duration) -> Finished {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {limit:?}; stderr: {:?}",
                self.stderr.lock().expect("stderr")
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        for r in std::mem::take(&mut self.readers) {
            let _ = r.join();
        }
        let stdout = self.stdout.lock().expect("stdout").clone();
        let stderr = self.stderr.lock().expect("stderr").clone();
        Finished {
            status,
            stdout,
            stderr,
        }
    }

    /// `kill -TERM pid`, then wait for the child to exit within [`STOP_DEADLINE`].
    pub async fn terminate(self) -> Finished {
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -TERM failed");
        self.finish_within(STOP_DEADLINE).await
    }
}

/// Run the binary to completion.
pub async fn run(args: &[&str]) -> Finished {
    Proc::spawn(args, &[]).finish().await
}

pub fn temp_config(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new()
        .suffix(".toml")
        .tempfile()
        .expect("temp file");
    std::fs::write(file.path(), text).expect("config written");
    file
}

pub fn path_of(file: &tempfile::NamedTempFile) -> &str {
    file.path().to_str().expect("utf-8 temp path")
}

/// A config on a free port in front of `agents` (route name, base URL), with `extra` appended
/// to every `[[agents]]` table.
pub fn serving_config(agents: &[(&str, String)], extra: &str) -> tempfile::NamedTempFile {
    let mut text = String::from("listen = \"127.0.0.1:0\"\n");
    for (name, url) in agents {
        text.push_str(&format!(
            "\n[[agents]]\nname = \"{name}\"\nurl = \"{url}\"\n{extra}\n"
        ));
    }
    temp_config(&text)
}

/// Serve `config` with the binary (and `env`): the process, the address it printed, and a
/// client for that address.
pub async fn serve(config: &tempfile::NamedTempFile, env: &[(&str, &str)]) -> (Proc, String, Http) {
    let mut p = Proc::spawn(&["--config", path_of(config)], env);
    let addr = p.listening_addr().await;
    let http = Http::new(format!("http://{addr}"));
    (p, addr, http)
}

/// The text without terminal colour sequences (`ESC [ ... m`), which the logs may carry.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn assert_no_panic(f: &Finished) {
    assert!(
        !f.output().contains("panicked"),
        "the binary panicked: {f:?}"
    );
}
