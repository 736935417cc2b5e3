//! `a2a-gateway demo` prints curl commands that work when pasted, for both protocols: run each
//! one with sh and check what it prints.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn demo_commands_work_as_printed() {
    commands_work_as_printed(&[]);
}

/// With `--key`, the gateway has a client: every printed command sends the key, and works.
#[test]
fn demo_commands_work_as_printed_with_a_key() {
    let key = "demo-key-0123456789abcdef";
    let printed = commands_work_as_printed(&["--key", key]);
    assert!(
        printed
            .iter()
            .filter(|c| !c.contains("/notifications"))
            .all(|c| c.contains(&format!("Authorization: Bearer {key}"))),
        "{printed:#?}"
    );
}

/// Run the demo with `args`, then every command it prints; the commands.
fn commands_work_as_printed(args: &[&str]) -> Vec<String> {
    if Command::new("curl").arg("--version").output().is_err() {
        panic!("curl is needed for this test (the demo prints curl commands)");
    }
    let mut child = Kill(
        Command::new(crate::support::bin())
            .args(["demo", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("demo starts"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut commands = Vec::new();
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("demo prints its commands within 60 s");
        if line.starts_with("Ctrl-C") {
            break;
        }
        if line.starts_with("curl ") || line.starts_with("id=$(") {
            commands.push(line);
        }
    }
    assert!(commands.len() >= 10, "too few commands: {commands:#?}");
    let run = |cmd: &str| -> String {
        let out = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{cmd} exited {:?}", out.status);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The demo waited for its agents' cards before its own first requests: none of them was
    // answered with a 5xx (a create racing the card fetch is answered 503).
    let metrics = commands
        .iter()
        .find(|c| c.contains("/metrics"))
        .expect("the metrics command");
    let before = run(metrics);
    assert!(
        before.contains("a2a_gateway_requests_total{") && !before.contains("status=\"5"),
        "{before}"
    );
    let mut seen_stream_event = false;
    let mut a2a_commands = 0;
    for cmd in &commands {
        let out = run(cmd);
        assert!(!out.trim().is_empty(), "{cmd} printed nothing");
        if cmd.contains("/metrics") {
            assert!(out.contains("a2a_gateway_requests_total{"), "{out}");
            continue;
        }
        if cmd.contains("/stream") {
            assert!(
                out.contains("event: log"),
                "the watch command shows the task working: {out}"
            );
            seen_stream_event = true;
            continue;
        }
        if cmd.contains("/content") {
            assert!(out.contains("python"), "the generated script: {out}");
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{cmd} printed non-JSON ({e}): {out}"));
        // The official A2A agent's commands: its card, both bindings, the listings.
        if cmd.contains("A2A-Version") || cmd.contains("/.well-known/") {
            assert!(v.get("error").is_none(), "{cmd} failed: {out}");
            let state = |t: &serde_json::Value| t["status"]["state"].clone();
            if cmd.contains("/.well-known/") {
                assert!(v["supportedInterfaces"].is_array(), "{out}");
            } else if cmd.contains("\"SendMessage\"") {
                assert_eq!(state(&v["result"]["task"]), "TASK_STATE_COMPLETED", "{out}");
            } else if cmd.contains("message:send") {
                assert_eq!(state(&v["task"]), "TASK_STATE_INPUT_REQUIRED", "{out}");
            } else if cmd.contains("\"ListTasks\"") {
                assert!(
                    v["result"]["tasks"]
                        .as_array()
                        .is_some_and(|t| !t.is_empty()),
                    "{out}"
                );
                assert!(v["result"]["nextPageToken"].is_string(), "{out}");
            } else if cmd.contains("/agents/echo/tasks?") {
                assert!(
                    v["tasks"].as_array().is_some_and(|t| !t.is_empty()),
                    "{out}"
                );
                assert!(v["nextPageToken"].is_string(), "{out}");
            } else {
                assert_eq!(state(&v), "TASK_STATE_COMPLETED", "{out}");
            }
            a2a_commands += 1;
            continue;
        }
        if cmd.contains("/tasks?page_size") {
            let protocols: std::collections::BTreeSet<&str> = v["tasks"]
                .as_array()
                .unwrap_or_else(|| panic!("{out}"))
                .iter()
                .filter_map(|t| t["protocol"].as_str())
                .collect();
            assert_eq!(
                protocols,
                ["a2a", "clawpedia"].into(),
                "both protocols: {out}"
            );
            continue;
        }
        if cmd.contains("\"topic\":7") {
            assert_eq!(v["error"]["code"], "INPUT_SCHEMA_VIOLATION", "{out}");
        } else if cmd.contains("/cancel") || cmd.contains("/notifications") {
            // A finished task cannot be cancelled, nor reopened by a late push.
            assert_eq!(v["error"]["code"], "TASK_TERMINAL", "{out}");
        } else {
            assert!(v.get("error").is_none(), "{cmd} failed: {out}");
            if cmd.contains("-X POST") {
                assert_eq!(v["status"], "SUBMITTED", "{out}");
            }
        }
    }
    assert!(seen_stream_event);
    assert_eq!(
        a2a_commands, 6,
        "the official A2A agent's commands: {commands:#?}"
    );
    commands
}
