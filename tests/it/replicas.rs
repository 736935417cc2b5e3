//! One `[[agents]]` entry in front of several replicas (`urls = [...]`, issue 49), against three
//! a2a-sdk agents (tests/a2a/agent.py) with a2a-sdk's default InMemoryTaskStore, where a task
//! lives on the replica that made it and nowhere else. tests/a2a/replica_run.py drives 300
//! tasks (two turns, GetTask, and for every fifth a push config, a stream, a cancel and a
//! message in the task's context) or 600 new tasks, and the agents' recorded requests tell
//! where each call went:
//!
//! - through nginx's round-robin, later calls of a task reach replicas that do not hold it
//!   (TaskNotFoundError, counted and printed: the baseline);
//! - through the gateway, every call naming a task reaches the replica that made it, and a
//!   message naming only a context the replica of that context; none is lost;
//! - the gateway spreads new tasks evenly: 150 to 250 of 600 on each of three.

use std::collections::{BTreeMap, HashMap};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use a2a_gateway::config::Config;
use a2a_gateway::Gateway;

use crate::support::a2a_sdk::{require_sdks, SdkAgent, JSONRPC};
use crate::support::child::repo;
use crate::support::hook::Hook;
use crate::support::nginx::Nginx;
use crate::support::Http;

/// Tasks of the multi-turn run, and how many are driven at once.
const TASKS: usize = 300;
const CONCURRENCY: usize = 16;
/// New tasks of the balance run, and the share each of three replicas must get.
const NEW: usize = 600;
const FAIR: std::ops::RangeInclusive<usize> = 150..=250;
/// How long one run of the driver may take.
const RUN_DEADLINE: Duration = Duration::from_secs(300);

/// Three a2a-sdk agents (JSON-RPC, pushing to the configs they are given), each recording what
/// it receives.
fn replicas() -> Vec<SdkAgent> {
    (0..3)
        .map(|_| SdkAgent::start_args(JSONRPC, &["--push"]))
        .collect()
}

/// `host:port` of an agent's base URL.
fn host_port(agent: &SdkAgent) -> &str {
    agent
        .base
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("{}", agent.base))
}

/// A free port on loopback (bound, then let go): the gateway's own address has to be known
/// before it starts, to be the `callback_url` the agents push to.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Runs tests/a2a/replica_run.py against the JSON-RPC endpoint `url` with `args`: its report.
fn drive(url: &str, args: &[&str]) -> Value {
    require_sdks();
    let mut cmd = Command::new("python3");
    cmd.arg(repo("tests/a2a/replica_run.py"))
        .args(["--url", url])
        .args(args)
        .stdin(Stdio::null());
    let what = format!("replica_run.py --url {url} {args:?}");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.output());
    });
    let out = match rx.recv_timeout(RUN_DEADLINE) {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => panic!("{what}: cannot run ({e})"),
        Err(_) => panic!("{what}: no report within {RUN_DEADLINE:?}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} exited {}: {stdout}\n{stderr}",
        out.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what} printed no JSON report ({e}): {stdout}\n{stderr}"))
}

/// The multi-turn run: 300 tasks, 16 at once, every fifth with the extras, pushes to `push`.
fn drive_tasks(url: &str, push: &str) -> Value {
    let tasks = TASKS.to_string();
    let concurrency = CONCURRENCY.to_string();
    tokio::task::block_in_place(|| {
        drive(
            url,
            &[
                "--tasks",
                &tasks,
                "--concurrency",
                &concurrency,
                "--every",
                "5",
                "--push-url",
                push,
            ],
        )
    })
}

fn count(report: &Value, key: &str) -> u64 {
    report[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in the report: {}", summary(report)))
}

/// The report without its list of tasks, for messages.
fn summary(report: &Value) -> Value {
    let mut r = report.clone();
    if let Some(o) = r.as_object_mut() {
        let n = o.get("tasks").and_then(Value::as_array).map_or(0, Vec::len);
        o.insert("tasks".into(), Value::from(n));
    }
    r
}

/// The driver's tasks: `(id, context, kind, message_id)`.
fn tasks(report: &Value) -> Vec<(String, String, String, String)> {
    let field = |t: &Value, k: &str| t[k].as_str().unwrap_or_default().to_owned();
    report["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("no tasks in the report: {}", summary(report)))
        .iter()
        .map(|t| {
            (
                field(t, "id"),
                field(t, "context"),
                field(t, "kind"),
                field(t, "message_id"),
            )
        })
        .collect()
}

/// One JSON-RPC request an agent recorded, read for what it names.
struct Call {
    method: String,
    /// The task it is about: `params.id` (GetTask, CancelTask, SubscribeToTask),
    /// `params.taskId` (push config calls), `params.message.taskId` (a message continuing one).
    task: Option<String>,
    /// A message's messageId.
    message_id: Option<String>,
}

/// Every JSON-RPC call `agent` recorded (the card fetches left out).
fn calls(agent: &SdkAgent) -> Vec<Call> {
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    agent
        .recorded()
        .into_iter()
        .filter(|r| r["body"]["method"].is_string())
        .map(|r| {
            let body = &r["body"];
            let method = body["method"].as_str().unwrap_or_default().to_owned();
            let params = &body["params"];
            let message = &params["message"];
            let task = match method.as_str() {
                "SendMessage" | "SendStreamingMessage" => text(&message["taskId"]),
                "GetTask" | "CancelTask" | "SubscribeToTask" => text(&params["id"]),
                _ => text(&params["taskId"]),
            };
            Call {
                method,
                task,
                message_id: text(&message["messageId"]),
            }
        })
        .collect()
}

/// Which replica (index) received the message that made each of the driver's tasks, found by
/// its messageId among the messages that name no task; asserted to be exactly one.
fn holders(report: &Value, recorded: &[Vec<Call>]) -> HashMap<String, usize> {
    let mut by_message: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, calls) in recorded.iter().enumerate() {
        for c in calls {
            if c.task.is_none() && c.method.starts_with("Send") {
                if let Some(m) = &c.message_id {
                    by_message.entry(m.as_str()).or_default().push(i);
                }
            }
        }
    }
    tasks(report)
        .into_iter()
        .map(|(id, _, kind, message_id)| {
            let at = by_message
                .get(message_id.as_str())
                .cloned()
                .unwrap_or_default();
            assert_eq!(
                at.len(),
                1,
                "the {kind} task {id}'s creating message {message_id} reached replicas {at:?}"
            );
            (id, at[0])
        })
        .collect()
}

/// A gateway on `port` in front of `agents` as ONE agent `echo` with `urls`, the replicas
/// pushing to it, push receivers on loopback allowed; ready. Written as an operator writes it
/// (TOML), so this file builds whether or not the config has `urls` yet.
async fn gateway(agents: &[SdkAgent]) -> (Gateway, Http) {
    let port = free_port();
    let urls: Vec<String> = agents.iter().map(|a| format!("{:?}", a.base)).collect();
    let text = format!(
        "listen = \"127.0.0.1:{port}\"\n\
         [webhooks]\n\
         allow = [\"127.0.0.1/32\"]\n\
         [[agents]]\n\
         name = \"echo\"\n\
         protocol = \"a2a\"\n\
         urls = [{}]\n\
         callback_url = \"http://127.0.0.1:{port}\"\n",
        urls.join(", ")
    );
    let cfg = Config::parse(&text).unwrap_or_else(|problems| {
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        panic!("the config is refused:\n{text}\n{}", said.join("\n"))
    });
    let gw = Gateway::start(cfg).await.expect("gateway starts");
    let http = Http::new(format!("http://{}", gw.addr()));
    http.ready().await;
    (gw, http)
}

#[tokio::test(flavor = "multi_thread")]
async fn nginx_round_robin_loses_tasks() {
    let agents = replicas();
    let hook = Hook::start().await;
    let upstreams: Vec<&str> = agents.iter().map(host_port).collect();
    let nginx = Nginx::round_robin(&upstreams);
    let report = drive_tasks(&format!("{}/a2a/jsonrpc", nginx.base), &hook.url());
    let lost = count(&report, "task_not_found");
    eprintln!(
        "nginx round-robin, {TASKS} tasks, concurrency {CONCURRENCY}, 3 replicas: \
         {lost} TaskNotFound of {} calls ({})",
        count(&report, "calls_total"),
        report["task_not_found_by_method"]
    );
    // Every task was made (a new task goes anywhere) ...
    let made = tasks(&report);
    assert!(
        made.iter().filter(|t| t.2 == "multi").count() == TASKS,
        "{}",
        summary(&report)
    );
    // ... and later calls, sent to whichever replica is next, miss the one holding the task.
    assert!(lost > 0, "{}", summary(&report));
    // The agents' records say the same: calls naming a task reached replicas without it.
    let recorded: Vec<Vec<Call>> = agents.iter().map(calls).collect();
    let holder = holders(&report, &recorded);
    let astray = recorded
        .iter()
        .enumerate()
        .flat_map(|(i, calls)| calls.iter().map(move |c| (i, c)))
        .filter(|(i, c)| c.task.as_ref().is_some_and(|t| holder.get(t) != Some(i)))
        .count();
    eprintln!("nginx round-robin: {astray} calls naming a task reached a replica without it");
    assert!(astray > 0, "{}\n{}", summary(&report), nginx.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn gateway_pins_every_task_to_its_replica() {
    let agents = replicas();
    let hook = Hook::start().await;
    let (_gw, http) = gateway(&agents).await;
    let report = drive_tasks(&format!("{}/agents/echo/jsonrpc", http.base), &hook.url());
    eprintln!(
        "gateway, {TASKS} tasks, concurrency {CONCURRENCY}, 3 replicas: {}",
        summary(&report)
    );
    assert_eq!(count(&report, "task_not_found"), 0, "{}", summary(&report));
    assert_eq!(count(&report, "other_errors"), 0, "{}", summary(&report));
    let made = tasks(&report);
    let kinds = made.iter().fold(BTreeMap::new(), |mut m, t| {
        *m.entry(t.2.as_str()).or_insert(0usize) += 1;
        m
    });
    let extras = TASKS / 5;
    assert_eq!(
        kinds,
        BTreeMap::from([("context", extras), ("multi", TASKS), ("slow", extras)]),
        "{}",
        summary(&report)
    );

    // Where each task was made, by its creating message's id in the records.
    let recorded: Vec<Vec<Call>> = agents.iter().map(calls).collect();
    let holder = holders(&report, &recorded);
    // Every request naming a task, the driver's and the gateway's own (its push config at the
    // agent, its GetTask, its SubscribeToTask to follow), reached the replica holding it.
    let mut named: HashMap<&str, Vec<(usize, &str)>> = HashMap::new();
    for (i, calls) in recorded.iter().enumerate() {
        for c in calls {
            let Some(t) = &c.task else { continue };
            let at = holder.get(t).unwrap_or_else(|| {
                panic!(
                    "replica {i} got {} naming task {t}, which no driver's message made",
                    c.method
                )
            });
            assert_eq!(
                *at, i,
                "{} of task {t} reached replica {i}; the task is on replica {at}",
                c.method
            );
            named
                .entry(t.as_str())
                .or_default()
                .push((i, c.method.as_str()));
        }
    }
    // And each such call did reach it: GetTask and the second turn of every two-turn task, the
    // cancel of every slow one, a push config at the agent for every task given one.
    for (id, _, kind, _) in &made {
        let seen: Vec<&str> = named
            .get(id.as_str())
            .map(|v| v.iter().map(|(_, m)| *m).collect())
            .unwrap_or_default();
        let wanted: &[&str] = match kind.as_str() {
            "multi" => &["GetTask"],
            "slow" => &["CancelTask"],
            _ => &[],
        };
        for m in wanted {
            assert!(
                seen.contains(m),
                "{kind} task {id}: no {m} at its replica: {seen:?}"
            );
        }
        if kind == "multi" {
            assert!(
                seen.iter()
                    .any(|m| *m == "SendMessage" || *m == "SendStreamingMessage"),
                "task {id}: its second turn never reached its replica: {seen:?}"
            );
        }
    }
    let pushed = named
        .values()
        .filter(|v| {
            v.iter()
                .any(|(_, m)| *m == "CreateTaskPushNotificationConfig")
        })
        .count();
    assert_eq!(
        pushed, extras,
        "one gateway config at the agent per task given a config"
    );

    // A message naming only a context went to the replica of that context.
    let context_of: HashMap<&str, &str> = made
        .iter()
        .filter(|t| t.2 == "multi")
        .map(|t| (t.1.as_str(), t.0.as_str()))
        .collect();
    for (id, context, kind, _) in &made {
        if kind != "context" {
            continue;
        }
        let first = context_of
            .get(context.as_str())
            .unwrap_or_else(|| panic!("task {id}: context {context} was made by no task"));
        assert_eq!(
            holder[id], holder[*first],
            "task {id} in context {context} was made on replica {}, the context's first task \
             {first} on replica {}",
            holder[id], holder[*first]
        );
    }
    // The replicas shared the new tasks (a check of the balance is `balance`).
    let per: Vec<usize> = (0..agents.len())
        .map(|i| holder.values().filter(|r| **r == i).count())
        .collect();
    eprintln!("gateway: tasks made per replica {per:?}");
    assert!(per.iter().all(|n| *n > 0), "{per:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn balance() {
    let agents = replicas();
    let (_gw, http) = gateway(&agents).await;
    let url = format!("{}/agents/echo/jsonrpc", http.base);
    let new = NEW.to_string();
    let concurrency = CONCURRENCY.to_string();
    let report = tokio::task::block_in_place(|| {
        drive(&url, &["--new-only", &new, "--concurrency", &concurrency])
    });
    assert_eq!(count(&report, "task_not_found"), 0, "{}", summary(&report));
    assert_eq!(count(&report, "other_errors"), 0, "{}", summary(&report));
    assert_eq!(tasks(&report).len(), NEW, "{}", summary(&report));
    let recorded: Vec<Vec<Call>> = agents.iter().map(calls).collect();
    let holder = holders(&report, &recorded);
    let per: Vec<usize> = (0..agents.len())
        .map(|i| holder.values().filter(|r| **r == i).count())
        .collect();
    eprintln!("gateway: {NEW} new tasks, concurrency {CONCURRENCY}, per replica {per:?}");
    assert_eq!(per.iter().sum::<usize>(), NEW, "{per:?}");
    for (i, n) in per.iter().enumerate() {
        assert!(
            FAIR.contains(n),
            "replica {i} got {n} of {NEW} new tasks, not {FAIR:?}: {per:?}"
        );
    }
}
