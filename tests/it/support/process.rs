//! A gateway as a process of its own (the built binary), for tests that kill it or run several.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{bin, Http, Resp, TOKEN};

/// A gateway process of its own, killed with SIGKILL when dropped.
pub struct GwProc {
    child: Child,
    pub http: Http,
    /// What it logged, when started with [`GwProc::spawn_logged`].
    log: Option<std::sync::Arc<std::sync::Mutex<String>>>,
}

impl GwProc {
    pub fn spawn(config: &std::path::Path) -> GwProc {
        GwProc::start(config, false)
    }

    /// Started with its log (stderr, level `warn`) kept for [`GwProc::log`].
    pub fn spawn_logged(config: &std::path::Path) -> GwProc {
        GwProc::start(config, true)
    }

    /// Everything it logged so far (empty unless started with [`GwProc::spawn_logged`]).
    pub fn log(&self) -> String {
        self.log
            .as_ref()
            .map(|l| l.lock().map(|s| s.clone()).unwrap_or_default())
            .unwrap_or_default()
    }

    fn start(config: &std::path::Path, logged: bool) -> GwProc {
        let mut child = Command::new(bin())
            .arg("--config")
            .arg(config)
            .env("RUST_LOG", if logged { "warn" } else { "error" })
            .stdout(Stdio::piped())
            .stderr(if logged {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .expect("gateway binary starts");
        let log = child.stderr.take().map(|err| {
            let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
            let keep = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    if let Ok(mut l) = keep.lock() {
                        l.push_str(&line);
                        l.push('\n');
                    }
                }
            });
            log
        });
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.trim().strip_prefix("listening on http://") {
                    let _ = tx.send(addr.to_owned());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("`listening on` line");
        GwProc {
            child,
            http: Http::new(format!("http://{addr}")),
            log,
        }
    }

    /// The process id, to read its `/proc/PID/status`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's resident set now (`VmRSS`) and at its peak so far (`VmHWM`), in bytes.
    pub fn rss(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("/proc/PID/status");
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("{key} in /proc/PID/status"))
                * 1024
        };
        (kib("VmRSS:"), kib("VmHWM:"))
    }

    /// Send a signal by name (`HUP`, `TERM`) with kill(1).
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill(1) runs")
            .success();
        assert!(ok, "kill -{name} {}", self.pid());
    }

    /// Wait up to `limit` for the process to exit on its own: its exit status.
    pub async fn exit_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the gateway exits in time"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Its exit status, if it has exited.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// kill -9: no shutdown, no drain.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub async fn ready(&self) {
        self.http.ready().await
    }

    pub async fn push(&self, task: &Value) -> Resp {
        self.http.push_task("a", TOKEN, task).await
    }

    pub async fn metric(&self, family: &str, labels: &[(&str, &str)]) -> f64 {
        self.http.metric(family, labels).await
    }
}

impl Drop for GwProc {
    fn drop(&mut self) {
        self.kill();
    }
}
