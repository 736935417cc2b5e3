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
}

impl GwProc {
    pub fn spawn(config: &std::path::Path) -> GwProc {
        let mut child = Command::new(bin())
            .arg("--config")
            .arg(config)
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("gateway binary starts");
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
