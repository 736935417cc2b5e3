//! Replicas as operators live with them (issue 49): a replica killed (ejected, its final tasks
//! read from the ledger, its live ones REPLICA_UNAVAILABLE, then FAILED once a reload took it
//! out of `urls` for `replica_grace_ms`), two gateway processes on one Redis pinning alike, a
//! gateway restarted without a replica in `urls` failing its live tasks after the grace,
//! replicas followed in DNS, Clawpedia agents as replicas, and `/agents` showing replica
//! addresses to operators only.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{json, Value};

use a2a_gateway::config::{Config, Right};
use a2a_gateway::Gateway;
use a2a_sample_agent::{AgentOptions, NewArtifact, Route, SampleAgent};

use crate::auth::client;
use crate::support::a2a_calls::{error_code, info_of, message, reason, rest, rpc};
use crate::support::a2a_sdk::{SdkAgent, JSONRPC};
use crate::support::dnsmasq::Dnsmasq;
use crate::support::process::GwProc;
use crate::support::redis_server::RedisServer;
use crate::support::{within, Http};

/// The config `text` as an operator writes it, parsed (its problems told when refused).
fn parse(text: &str) -> Config {
    Config::parse(text).unwrap_or_else(|problems| {
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        panic!("the config is refused:\n{text}\n{}", said.join("\n"))
    })
}

/// Mock Clawpedia agents as replicas of one agent: `listen` each, one card (one `agent_id`).
async fn clawpedia_replicas_on(listen: &[SocketAddr]) -> Vec<SampleAgent> {
    let card = a2a_sample_agent::card_for("Sample Agent", None);
    clawpedia_replicas_with(&card, listen).await
}

/// Mock Clawpedia agents serving `card` (replicas of one agent, started in more than one go):
/// `listen` each. A replica whose card names another `agent_id` is `card_mismatch`.
async fn clawpedia_replicas_with(card: &Value, listen: &[SocketAddr]) -> Vec<SampleAgent> {
    let mut out = Vec::new();
    for l in listen {
        let a = SampleAgent::start(AgentOptions {
            listen: *l,
            card: card.clone(),
            ..AgentOptions::default()
        })
        .await
        .unwrap_or_else(|e| panic!("agent on {l}: {e}"));
        out.push(a);
    }
    out
}

/// A gateway in-process on `cfg`, ready.
async fn start(cfg: Config) -> (Gateway, Http) {
    let gw = Gateway::start(cfg).await.expect("gateway starts");
    let http = Http::new(format!("http://{}", gw.addr()));
    http.ready().await;
    (gw, http)
}

/// `"url1", "url2"` for a TOML array.
fn quoted(urls: &[String]) -> String {
    urls.iter()
        .map(|u| format!("{u:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `host:port` of a base URL.
fn host_port(base: &str) -> String {
    base.strip_prefix("http://")
        .unwrap_or_else(|| panic!("{base}"))
        .trim_end_matches('/')
        .to_owned()
}

/// Agent `name`'s `replicas` in `GET /agents`, as `token` (none: no credential).
pub(crate) async fn replicas_of(http: &Http, token: Option<&str>, name: &str) -> Vec<Value> {
    let r = match token {
        Some(t) => http.get_as("/agents", t).await,
        None => http.get("/agents").await,
    };
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    let agent = v["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["name"] == name))
        .unwrap_or_else(|| panic!("no agent {name} in /agents: {v}"))
        .clone();
    agent["replicas"]
        .as_array()
        .unwrap_or_else(|| panic!("agent {name} without replicas: {agent}"))
        .clone()
}

/// `address -> health` of agent `name`'s replicas (as a caller that sees addresses).
async fn health_by_address(http: &Http, name: &str) -> HashMap<String, String> {
    replicas_of(http, None, name)
        .await
        .iter()
        .map(|r| {
            (
                r["address"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no address: {r}"))
                    .to_owned(),
                r["health"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// SendMessage of `text` through `http`'s agent `echo` (a new task): the task answered, or the
/// answer that has none.
async fn send_new(http: &Http, text: &str) -> Result<Value, Value> {
    send_new_with_id(http, text).await.1
}

/// As `send_new`, with the creating message's messageId (what the replica that took it
/// recorded).
async fn send_new_with_id(http: &Http, text: &str) -> (String, Result<Value, Value>) {
    let params = message(text, json!({}));
    let message_id = params["message"]["messageId"]
        .as_str()
        .expect("a messageId")
        .to_owned();
    let v = rpc(http, "echo", None, "SendMessage", params).await;
    if v["result"]["task"].is_object() {
        (message_id, Ok(v["result"]["task"].clone()))
    } else {
        (message_id, Err(v))
    }
}

fn id_of(task: &Value) -> String {
    task["id"]
        .as_str()
        .unwrap_or_else(|| panic!("task without id: {task}"))
        .to_owned()
}

fn state_of(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

/// Which of `agents` received the message `message_id` that made a task (a2a-sdk's agents
/// record requests, not answers; a later GetTask of a final task may be answered from the
/// gateway's ledger and reach no replica): the indexes of those whose records hold it, a new
/// message (naming no task) with that messageId.
fn holders_of_message(agents: &[SdkAgent], message_id: &str) -> Vec<usize> {
    (0..agents.len())
        .filter(|i| {
            agents[*i].recorded().iter().any(|r| {
                let body = &r["body"];
                let m = &body["params"]["message"];
                body["method"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("Send"))
                    && m["messageId"] == message_id
                    && m["taskId"].as_str().is_none_or(str::is_empty)
            })
        })
        .collect()
}

/// GetTask of `id` through `http`: the JSON-RPC answer.
async fn get_task(http: &Http, id: &str) -> Value {
    rpc(http, "echo", None, "GetTask", json!({ "id": id })).await
}

/// 1. A replica killed with kill -9: new tasks stop going to it within 10 s (ejected), its
///    final tasks are read from the ledger, its live ones answer REPLICA_UNAVAILABLE on both
///    bindings while it is listed (however long), and once a reload took it out of `urls`,
///    they are FAILED after `replica_grace_ms` with a status message saying the replica left.
#[tokio::test(flavor = "multi_thread")]
async fn killed_replica() {
    let mut agents: Vec<SdkAgent> = (0..3).map(|_| SdkAgent::start(JSONRPC)).collect();
    let urls: Vec<String> = agents.iter().map(|a| a.base.clone()).collect();
    let text = |urls: &[String]| {
        format!(
            "listen = \"127.0.0.1:0\"\n\
             [[agents]]\n\
             name = \"echo\"\n\
             protocol = \"a2a\"\n\
             urls = [{}]\n\
             eject_after = 2\n\
             eject_secs = 30\n\
             replica_grace_ms = 3000\n",
            quoted(urls)
        )
    };
    let (gw, http) = start(parse(&text(&urls))).await;

    // Tasks on every replica: some COMPLETED, some left INPUT_REQUIRED. The replica that holds
    // each is the one that recorded its creating message (by messageId).
    let mut finished: Vec<(String, usize)> = Vec::new();
    let mut live: Vec<(String, usize)> = Vec::new();
    for _ in 0..90 {
        let covered = |v: &[(String, usize)]| (0..3).all(|i| v.iter().any(|t| t.1 == i));
        if covered(&finished) && covered(&live) {
            break;
        }
        for (text, want, into) in [
            ("hello", "TASK_STATE_COMPLETED", &mut finished),
            ("need input", "TASK_STATE_INPUT_REQUIRED", &mut live),
        ] {
            let (message_id, t) = send_new_with_id(&http, text).await;
            let t = t.unwrap_or_else(|e| panic!("no task for {text:?}: {e}"));
            assert_eq!(state_of(&t), want, "{t}");
            let id = id_of(&t);
            let g = get_task(&http, &id).await;
            assert_eq!(state_of(&g["result"]), want, "{g}");
            let at = holders_of_message(&agents, &message_id);
            assert_eq!(
                at.len(),
                1,
                "task {id}'s creating message {message_id} recorded by replicas {at:?}"
            );
            into.push((id, at[0]));
        }
    }
    for i in 0..3 {
        assert!(
            finished.iter().any(|t| t.1 == i) && live.iter().any(|t| t.1 == i),
            "replica {i} got no final or no live task: finished {finished:?} live {live:?}"
        );
    }

    // kill -9 replica 0 (dropping an SdkAgent SIGKILLs it).
    let victim = 0usize;
    let victim_addr = host_port(&urls[victim]);
    drop(agents.remove(victim));
    let killed = Instant::now();

    // New tasks: within 10 s the victim is ejected. Until then, new work picked for the dead
    // replica fails with AGENT_UNREACHABLE (documented: the gateway does not retry a message
    // on another replica, the agent may have acted on it); from then on every new task is made,
    // on a live replica (its creating message recorded there; its GetTask answers).
    let mut failed_meanwhile: Vec<Value> = Vec::new();
    let mut made_meanwhile = 0;
    let mut ejected_after = None;
    while killed.elapsed() < Duration::from_secs(10) {
        match send_new(&http, "hello").await {
            Ok(_) => made_meanwhile += 1,
            Err(e) => failed_meanwhile.push(e),
        }
        let health = health_by_address(&http, "echo").await;
        if health.get(&victim_addr).is_some_and(|h| h == "ejected") {
            ejected_after = Some((killed.elapsed(), Instant::now()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "killed replica: ejected after {:?}; meanwhile {made_meanwhile} tasks made, \
         {} failed: {:?}",
        ejected_after.map(|e| e.0),
        failed_meanwhile.len(),
        failed_meanwhile.first()
    );
    let Some((_, ejected_at)) = ejected_after else {
        panic!(
            "the killed replica {victim_addr} is not ejected 10 s after: {:?}",
            health_by_address(&http, "echo").await
        )
    };
    for e in &failed_meanwhile {
        assert_eq!(
            reason(e),
            "AGENT_UNREACHABLE",
            "a new task before the ejection failed otherwise than the dead replica \
             unreachable: {e}"
        );
    }
    let mut failed_after = Vec::new();
    for n in 0..30 {
        let (message_id, t) = send_new_with_id(&http, "need input").await;
        let t = match t {
            Ok(t) => t,
            Err(e) => {
                failed_after.push((n, e));
                continue;
            }
        };
        let id = id_of(&t);
        let g = get_task(&http, &id).await;
        assert_eq!(
            state_of(&g["result"]),
            "TASK_STATE_INPUT_REQUIRED",
            "new task {n} {id} after the ejection, read again: {g}"
        );
        let at = holders_of_message(&agents, &message_id);
        assert_eq!(
            at.len(),
            1,
            "new task {n} {id} after the ejection: its creating message {message_id} recorded \
             by the live replicas {at:?}"
        );
    }
    assert!(
        failed_after.is_empty(),
        "{} of 30 new tasks failed after the ejection (the ejected replica still picked?): {:?}",
        failed_after.len(),
        failed_after.first()
    );

    // Its final tasks are still read (from the ledger); its live ones answer
    // REPLICA_UNAVAILABLE: JSON-RPC's -32000, REST's 503 with Retry-After.
    let check_unavailable = |when: &'static str| {
        let http = http.clone();
        let live = live.clone();
        async move {
            for (id, _) in live.iter().filter(|t| t.1 == victim) {
                let v = get_task(&http, id).await;
                assert_eq!(error_code(&v), -32000, "{when}: GetTask {id}: {v}");
                assert_eq!(
                    reason(&v),
                    "REPLICA_UNAVAILABLE",
                    "{when}: GetTask {id}: {v}"
                );
                let v = rpc(
                    &http,
                    "echo",
                    None,
                    "SendMessage",
                    message("more", json!({ "taskId": id })),
                )
                .await;
                assert_eq!(error_code(&v), -32000, "{when}: second turn of {id}: {v}");
                assert_eq!(reason(&v), "REPLICA_UNAVAILABLE", "{when}: {v}");
                let r = rest(
                    &http,
                    Method::GET,
                    &format!("/agents/echo/tasks/{id}"),
                    None,
                    None,
                )
                .await;
                assert_eq!(r.status, 503, "{when}: REST GET of {id}: {r:?}");
                assert!(r.header("retry-after").is_some(), "{when}: {r:?}");
                assert_eq!(
                    info_of(&r.json())["reason"],
                    "REPLICA_UNAVAILABLE",
                    "{when}: {r:?}"
                );
            }
        }
    };
    for (id, at) in &finished {
        let v = get_task(&http, id).await;
        assert_eq!(
            state_of(&v["result"]),
            "TASK_STATE_COMPLETED",
            "final task {id} of replica {at}: {v}"
        );
    }
    // The others' live tasks are untouched.
    for (id, at) in live.iter().filter(|t| t.1 != victim) {
        let v = get_task(&http, id).await;
        assert_eq!(
            state_of(&v["result"]),
            "TASK_STATE_INPUT_REQUIRED",
            "live task {id} of replica {at}: {v}"
        );
    }
    check_unavailable("ejected").await;
    // Ejected but still listed: the grace does not fail its tasks, however long.
    let past_grace = Duration::from_millis(4500);
    if let Some(left) = past_grace.checked_sub(ejected_at.elapsed()) {
        tokio::time::sleep(left).await;
    }
    check_unavailable("ejected and listed past the grace").await;

    // A reload takes it out of `urls`: after the grace its live tasks are FAILED, saying why.
    let removed = Instant::now();
    gw.reload(parse(&text(&urls[1..])))
        .await
        .expect("reload applied");
    let gone = health_by_address(&http, "echo").await;
    assert_eq!(
        gone.get(&victim_addr).map(String::as_str),
        Some("gone"),
        "{gone:?}"
    );
    let victims: Vec<&String> = live
        .iter()
        .filter(|t| t.1 == victim)
        .map(|t| &t.0)
        .collect();
    let all_failed = within(Duration::from_secs(10), || {
        let http = http.clone();
        let victims = victims.clone();
        async move {
            for id in victims {
                let v = get_task(&http, id).await;
                if state_of(&v["result"]) != "TASK_STATE_FAILED" {
                    return false;
                }
            }
            true
        }
    })
    .await;
    let took = removed.elapsed();
    let mut said = Vec::new();
    for id in &victims {
        said.push(get_task(&http, id).await);
    }
    assert!(all_failed, "not FAILED 10 s after the reload: {said:?}");
    assert!(
        took >= Duration::from_millis(2500),
        "failed {took:?} after the reload, before replica_grace_ms = 3000"
    );
    // The keeper ticks every 250 ms: FAILED within the grace and about a second more.
    assert!(
        took <= Duration::from_millis(4300),
        "failed {took:?} after the reload, later than replica_grace_ms = 3000 and a second"
    );
    for v in &said {
        let t = &v["result"];
        let words = t["status"]["message"]["parts"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        assert!(
            words.to_lowercase().contains("replica"),
            "FAILED without a status message saying the replica left: {t}"
        );
    }
    // The other replicas' tasks are not failed.
    for (id, at) in live.iter().filter(|t| t.1 != victim) {
        let v = get_task(&http, id).await;
        assert_eq!(
            state_of(&v["result"]),
            "TASK_STATE_INPUT_REQUIRED",
            "live task {id} of replica {at} after the grace: {v}"
        );
    }
    eprintln!("killed replica: its live tasks FAILED {took:?} after the reload");
}

/// 2. Two gateway processes on one Redis in front of the same three replicas: a task made
///    through either is continued and read through the other at the replica that holds it
///    (a2a-sdk keeps tasks in memory: a wrong replica answers TaskNotFound).
#[tokio::test(flavor = "multi_thread")]
async fn two_gateways_one_redis_pin_alike() {
    let agents: Vec<SdkAgent> = (0..3).map(|_| SdkAgent::start(JSONRPC)).collect();
    let urls: Vec<String> = agents.iter().map(|a| a.base.clone()).collect();
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("gateway.toml");
    std::fs::write(
        &path,
        format!(
            "listen = \"127.0.0.1:0\"\n\
             [redis]\n{}\
             [[agents]]\n\
             name = \"echo\"\n\
             protocol = \"a2a\"\n\
             urls = [{}]\n",
            redis.toml(),
            quoted(&urls)
        ),
    )
    .expect("config written");
    let a = GwProc::spawn(&path);
    let b = GwProc::spawn(&path);
    a.ready().await;
    b.ready().await;

    let mut tasks = Vec::new();
    for n in 0..24 {
        let (maker, other) = if n % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let t = send_new(&maker.http, "need input").await.expect("a task");
        assert_eq!(state_of(&t), "TASK_STATE_INPUT_REQUIRED", "{t}");
        tasks.push((id_of(&t), t["contextId"].clone(), other.http.clone()));
    }
    for (id, context, other) in &tasks {
        let v = get_task(other, id).await;
        assert_eq!(
            state_of(&v["result"]),
            "TASK_STATE_INPUT_REQUIRED",
            "GetTask of {id} through the other gateway: {v}"
        );
        let v = rpc(
            other,
            "echo",
            None,
            "SendMessage",
            message("more", json!({ "taskId": id, "contextId": context })),
        )
        .await;
        assert_eq!(
            state_of(&v["result"]["task"]),
            "TASK_STATE_COMPLETED",
            "second turn of {id} through the other gateway: {v}"
        );
    }
    // Every call naming a task reached one replica only, the one holding it; and the tasks
    // were spread over more than one.
    let mut at: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, agent) in agents.iter().enumerate() {
        for r in agent.recorded() {
            let p = &r["body"]["params"];
            let named = p["id"].as_str().or(p["message"]["taskId"].as_str());
            if let Some(t) = named {
                at.entry(t.to_owned()).or_default().push(i);
            }
        }
    }
    for (id, ..) in &tasks {
        let seen = at.get(id).cloned().unwrap_or_default();
        assert_eq!(
            seen.len(),
            2,
            "task {id}: GetTask and the second turn: {seen:?}"
        );
        assert!(seen.iter().all(|i| *i == seen[0]), "task {id} at {seen:?}");
    }
    let used: std::collections::BTreeSet<usize> = at.values().map(|v| v[0]).collect();
    assert!(used.len() > 1, "every task on one replica: {used:?}");
}

/// 3. `discover = "dns"` against dnsmasq: replicas on 127.0.0.2 and 127.0.0.3 (one port), then
///    the name's records changed (127.0.0.4 added, 127.0.0.2 removed): seen within 4 s at
///    `discover_interval_ms = 1000`, the removed one `gone`.
#[tokio::test(flavor = "multi_thread")]
async fn dns_discovery_follows_records() {
    // One card for all three (one agent_id): the first is started alone to learn the port.
    let card = a2a_sample_agent::card_for("Sample Agent", None);
    let first = clawpedia_replicas_with(&card, &[SocketAddr::from(([127, 0, 0, 2], 0))])
        .await
        .remove(0);
    let port = first.addr().port();
    let mut others = clawpedia_replicas_with(
        &card,
        &[
            SocketAddr::from(([127, 0, 0, 3], port)),
            SocketAddr::from(([127, 0, 0, 4], port)),
        ],
    )
    .await;
    let third = others.remove(1);
    let second = others.remove(0);
    let ip = |s: &str| s.parse::<IpAddr>().expect("an IP");
    let dns = Dnsmasq::start();
    dns.set("agents.test", &[ip("127.0.0.2"), ip("127.0.0.3")]);
    let (_gw, http) = start(parse(&format!(
        "listen = \"127.0.0.1:0\"\n\
         [discovery]\n\
         nameserver = \"{}\"\n\
         [[agents]]\n\
         name = \"c\"\n\
         url = \"http://agents.test:{port}\"\n\
         discover = \"dns\"\n\
         discover_interval_ms = 1000\n",
        dns.addr
    )))
    .await;
    let a2 = format!("127.0.0.2:{port}");
    let a3 = format!("127.0.0.3:{port}");
    let a4 = format!("127.0.0.4:{port}");
    let want = |set: &[(&str, &str)]| {
        set.iter()
            .map(|(a, h)| (a.to_string(), h.to_string()))
            .collect::<HashMap<_, _>>()
    };
    let both = want(&[(&a2, "ok"), (&a3, "ok")]);
    let seen = within(Duration::from_secs(4), || async {
        health_by_address(&http, "c").await == both
    })
    .await;
    assert!(seen, "{:?}", health_by_address(&http, "c").await);
    // The card is fetched from the first healthy replica once discovery found them (not from
    // the configured name, which only the nameserver knows): wait for it before new work.
    let card_state = || async {
        let v = http.get("/agents").await.json();
        v["agents"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["name"] == "c"))
            .cloned()
            .unwrap_or_else(|| panic!("no agent c in /agents: {v}"))
    };
    let asked = Instant::now();
    let fresh = within(Duration::from_secs(10), || async {
        card_state().await["card_state"] == "fresh"
    })
    .await;
    assert!(
        fresh,
        "agent c's card not fetched from its discovered replicas 10 s after they were seen: {}",
        card_state().await
    );
    eprintln!(
        "dns: the card fresh {:?} after the replicas were seen",
        asked.elapsed()
    );
    // New tasks go to both.
    for _ in 0..20 {
        http.create_task("c").await;
    }
    assert!(
        !first.task_ids().is_empty() && !second.task_ids().is_empty(),
        "{} {}",
        first.task_ids().len(),
        second.task_ids().len()
    );

    dns.set("agents.test", &[ip("127.0.0.3"), ip("127.0.0.4")]);
    let changed = Instant::now();
    let next = want(&[(&a2, "gone"), (&a3, "ok"), (&a4, "ok")]);
    let seen = within(Duration::from_secs(4), || async {
        health_by_address(&http, "c").await == next
    })
    .await;
    assert!(
        seen,
        "4 s after the records changed: {:?}",
        health_by_address(&http, "c").await
    );
    eprintln!(
        "dns: the new set seen {:?} after the change",
        changed.elapsed()
    );
    let before = first.task_ids().len();
    for _ in 0..20 {
        http.create_task("c").await;
    }
    assert_eq!(
        first.task_ids().len(),
        before,
        "a new task went to a removed replica"
    );
    assert!(
        !third.task_ids().is_empty(),
        "no new task on the added replica"
    );
}

/// 4. Clawpedia agents as replicas: each task's get, artifacts and cancel reach the replica
///    that made it (the mock agents keep their own tasks; another answers 404).
#[tokio::test(flavor = "multi_thread")]
async fn clawpedia_replicas() {
    let lo = SocketAddr::from(([127, 0, 0, 1], 0));
    let agents = clawpedia_replicas_on(&[lo, lo, lo]).await;
    let urls: Vec<String> = agents.iter().map(|a| a.base_url()).collect();
    let (_gw, http) = start(parse(&format!(
        "listen = \"127.0.0.1:0\"\n\
         [[agents]]\n\
         name = \"c\"\n\
         urls = [{}]\n",
        quoted(&urls)
    )))
    .await;
    let mut made = Vec::new();
    for _ in 0..24 {
        let id = http.create_task("c").await;
        let holders: Vec<usize> = (0..agents.len())
            .filter(|i| agents[*i].task(&id).is_some())
            .collect();
        assert_eq!(holders.len(), 1, "task {id} held by {holders:?}");
        agents[holders[0]].add_artifact(&id, NewArtifact::Text(format!("for {id}")));
        made.push((id, holders[0]));
    }
    let per: Vec<usize> = (0..3)
        .map(|i| made.iter().filter(|t| t.1 == i).count())
        .collect();
    assert!(per.iter().all(|n| *n > 0), "{per:?}");
    for (id, at) in &made {
        let r = http.get(&format!("/agents/c/tasks/{id}")).await;
        assert_eq!(r.status, 200, "get of {id} (replica {at}): {r:?}");
        let r = http.get(&format!("/agents/c/tasks/{id}/artifacts")).await;
        assert_eq!(r.status, 200, "artifacts of {id} (replica {at}): {r:?}");
        assert!(
            String::from_utf8_lossy(&r.body).contains(&format!("for {id}")),
            "{r:?}"
        );
        let r = http
            .post_json(&format!("/agents/c/tasks/{id}/cancel"), &json!({}))
            .await;
        assert!(r.status < 300, "cancel of {id} (replica {at}): {r:?}");
        assert_eq!(
            agents[*at].task(id).expect("held")["status"],
            "CANCELLED",
            "{id}"
        );
    }
    // Each agent was asked only about its own tasks.
    for (i, a) in agents.iter().enumerate() {
        for r in a.requests() {
            if !matches!(
                r.route,
                Route::GetTask | Route::CancelTask | Route::ListArtifacts
            ) {
                continue;
            }
            let id = r.path.split('/').nth(2).unwrap_or_default();
            assert!(
                a.task(id).is_some(),
                "replica {i} got {} {} for a task it does not hold",
                r.method,
                r.path
            );
        }
        assert!(a.request_count(Route::CancelTask) > 0, "replica {i}");
        assert!(a.request_count(Route::ListArtifacts) > 0, "replica {i}");
    }
}

/// 5. `GET /agents` with clients: a `metrics` client sees each replica's `host:port`, a plain
///    client the same replicas without `address`.
#[tokio::test(flavor = "multi_thread")]
async fn agents_shows_replicas_to_operators_only() {
    const OPS: &str = "ops-key-0123456789abcdef012";
    const PLAIN: &str = "plain-key-0123456789abcdef01";
    let lo = SocketAddr::from(([127, 0, 0, 1], 0));
    let agents = clawpedia_replicas_on(&[lo, lo]).await;
    let urls: Vec<String> = agents.iter().map(|a| a.base_url()).collect();
    let mut cfg = parse(&format!(
        "listen = \"127.0.0.1:0\"\n\
         [[agents]]\n\
         name = \"c\"\n\
         urls = [{}]\n",
        quoted(&urls)
    ));
    cfg.clients = vec![
        client("ops", OPS, &["*"], &[Right::Metrics]),
        client("plain", PLAIN, &["*"], &[Right::Tasks]),
    ];
    let (_gw, http) = start(cfg).await;
    let want: std::collections::BTreeSet<String> = urls.iter().map(|u| host_port(u)).collect();

    let ops = replicas_of(&http, Some(OPS), "c").await;
    let seen: std::collections::BTreeSet<String> = ops
        .iter()
        .map(|r| {
            r["address"]
                .as_str()
                .unwrap_or_else(|| panic!("the metrics client sees no address: {r}"))
                .to_owned()
        })
        .collect();
    assert_eq!(seen, want, "{ops:?}");
    for r in &ops {
        assert_eq!(r["health"], "ok", "{r}");
        assert!(r["in_flight"].is_u64() && r["tasks_held"].is_u64(), "{r}");
    }

    let plain = replicas_of(&http, Some(PLAIN), "c").await;
    assert_eq!(plain.len(), 2, "{plain:?}");
    for r in &plain {
        assert!(r.get("address").is_none(), "a plain client sees {r}");
        assert_eq!(r["health"], "ok", "{r}");
        assert!(r["in_flight"].is_u64() && r["tasks_held"].is_u64(), "{r}");
    }
    let body = String::from_utf8_lossy(&http.get_as("/agents", PLAIN).await.body).into_owned();
    for addr in &want {
        assert!(
            !body.contains(addr.as_str()),
            "{addr} in a plain client's /agents: {body}"
        );
    }
}

/// The words of a task's status message.
fn status_words(task: &Value) -> String {
    task["status"]["message"]["parts"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Whether replica `agent` recorded a SendMessage continuing task `id` (naming its `taskId`).
fn continued_at(agent: &SdkAgent, id: &str) -> bool {
    agent.recorded().iter().any(|r| {
        let body = &r["body"];
        body["method"]
            .as_str()
            .is_some_and(|k| k.starts_with("Send"))
            && body["params"]["message"]["taskId"] == id
    })
}

/// 6. A gateway restarted on its Redis with a replica no longer in `urls`: the live tasks of
///    that replica (unknown to the new process) are FAILED by the sweep made at the start,
///    once the replica has been unknown for `replica_grace_ms` (not before), with a status
///    message saying the replica left; the listed replicas' live tasks stay live and go on.
#[tokio::test(flavor = "multi_thread")]
async fn a_restart_fails_the_tasks_of_a_replica_no_longer_listed() {
    let agents: Vec<SdkAgent> = (0..3).map(|_| SdkAgent::start(JSONRPC)).collect();
    let urls: Vec<String> = agents.iter().map(|a| a.base.clone()).collect();
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("gateway.toml");
    let write = |urls: &[String]| {
        std::fs::write(
            &path,
            format!(
                "listen = \"127.0.0.1:0\"\n\
                 [redis]\n{}\
                 [[agents]]\n\
                 name = \"echo\"\n\
                 protocol = \"a2a\"\n\
                 urls = [{}]\n\
                 replica_grace_ms = 2000\n",
                redis.toml(),
                quoted(urls)
            ),
        )
        .expect("config written")
    };
    write(&urls);
    let mut first = GwProc::spawn(&path);
    first.ready().await;

    // Live tasks until every replica holds one (each task's replica: the one that recorded its
    // creating message).
    let victim = 2usize;
    let mut live: Vec<(String, Value, usize)> = Vec::new();
    for _ in 0..60 {
        if (0..3).all(|i| live.iter().any(|t| t.2 == i)) {
            break;
        }
        let (message_id, t) = send_new_with_id(&first.http, "need input").await;
        let t = t.unwrap_or_else(|e| panic!("no task: {e}"));
        assert_eq!(state_of(&t), "TASK_STATE_INPUT_REQUIRED", "{t}");
        let at = holders_of_message(&agents, &message_id);
        assert_eq!(at.len(), 1, "task {t}: its creating message at {at:?}");
        live.push((id_of(&t), t["contextId"].clone(), at[0]));
    }
    assert!(
        (0..3).all(|i| live.iter().any(|t| t.2 == i)),
        "a replica got no live task of {}: {live:?}",
        live.len()
    );
    first.kill();

    // A new gateway on the same Redis, listing a and b only.
    write(&urls[..2]);
    let spawned = Instant::now();
    let second = GwProc::spawn(&path);
    let listening = Instant::now();
    second.ready().await;
    let http = second.http.clone();
    let victims: Vec<&String> = live
        .iter()
        .filter(|t| t.2 == victim)
        .map(|t| &t.0)
        .collect();

    // Until FAILED, GetTask of c's task answers REPLICA_UNAVAILABLE (c is unknown to this
    // process); the first FAILED read of each is timed from the new process listening.
    let mut failed_after: HashMap<String, Duration> = HashMap::new();
    let mut last: HashMap<String, Value> = HashMap::new();
    while failed_after.len() < victims.len() && listening.elapsed() < Duration::from_secs(8) {
        for id in &victims {
            if failed_after.contains_key(*id) {
                continue;
            }
            let v = get_task(&http, id).await;
            let seen = listening.elapsed();
            if state_of(&v["result"]) == "TASK_STATE_FAILED" {
                failed_after.insert((*id).clone(), seen);
            } else {
                assert_eq!(
                    reason(&v),
                    "REPLICA_UNAVAILABLE",
                    "GetTask {id} of the unlisted replica {seen:?} after the restart, not \
                     FAILED yet: {v}"
                );
            }
            last.insert((*id).clone(), v);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "restart: the process listening {:?} after its spawn; the unlisted replica's {} live \
         tasks FAILED after {failed_after:?} (from listening)",
        listening.duration_since(spawned),
        victims.len()
    );
    assert_eq!(
        failed_after.len(),
        victims.len(),
        "not every live task of the unlisted replica FAILED 8 s after the restart \
         (replica_grace_ms = 2000): {last:?}"
    );
    for (id, took) in &failed_after {
        assert!(
            *took >= Duration::from_millis(1500),
            "task {id} FAILED {took:?} after the restart, before replica_grace_ms = 2000"
        );
        assert!(
            *took <= Duration::from_millis(4000),
            "task {id} FAILED {took:?} after the restart, later than replica_grace_ms = 2000 \
             and 2 s"
        );
    }
    for id in &victims {
        let v = get_task(&http, id).await;
        let t = &v["result"];
        assert_eq!(state_of(t), "TASK_STATE_FAILED", "{v}");
        assert!(
            status_words(t).to_lowercase().contains("replica"),
            "FAILED without a status message saying the replica left: {t}"
        );
    }

    // The listed replicas' live tasks are untouched, and their second turn is made at the
    // replica that holds each.
    for (id, context, at) in live.iter().filter(|t| t.2 != victim) {
        let v = get_task(&http, id).await;
        assert_eq!(
            state_of(&v["result"]),
            "TASK_STATE_INPUT_REQUIRED",
            "live task {id} of replica {at} after the restart: {v}"
        );
        let v = rpc(
            &http,
            "echo",
            None,
            "SendMessage",
            message("more", json!({ "taskId": id, "contextId": context })),
        )
        .await;
        assert_eq!(
            state_of(&v["result"]["task"]),
            "TASK_STATE_COMPLETED",
            "second turn of {id} (replica {at}) after the restart: {v}"
        );
        assert!(
            continued_at(&agents[*at], id),
            "the second turn of {id} not recorded at its replica {at}"
        );
    }
}
/// 7. A message naming only a context follows a task of that context to its replica only while
///    that replica is live: once a reload took the replica out of `urls` (within its grace), it
///    is new work, made on a listed replica; a message naming a live task of that replica is
///    REPLICA_UNAVAILABLE.
#[tokio::test(flavor = "multi_thread")]
async fn a_context_follows_only_a_live_replica() {
    let agents: Vec<SdkAgent> = (0..3).map(|_| SdkAgent::start(JSONRPC)).collect();
    let urls: Vec<String> = agents.iter().map(|a| a.base.clone()).collect();
    let text = |urls: &[String]| {
        format!(
            "listen = \"127.0.0.1:0\"\n\
             [[agents]]\n\
             name = \"echo\"\n\
             protocol = \"a2a\"\n\
             urls = [{}]\n\
             replica_grace_ms = 60000\n",
            quoted(urls)
        )
    };
    let (gw, http) = start(parse(&text(&urls))).await;
    let victim = 2usize;

    // A COMPLETED task on c (its context X), and a live one on c.
    let mut finished: Option<Value> = None;
    let mut live: Option<Value> = None;
    for _ in 0..90 {
        if finished.is_some() && live.is_some() {
            break;
        }
        for (text, want, into) in [
            ("hello", "TASK_STATE_COMPLETED", &mut finished),
            ("need input", "TASK_STATE_INPUT_REQUIRED", &mut live),
        ] {
            if into.is_some() {
                continue;
            }
            let (message_id, t) = send_new_with_id(&http, text).await;
            let t = t.unwrap_or_else(|e| panic!("no task for {text:?}: {e}"));
            assert_eq!(state_of(&t), want, "{t}");
            let at = holders_of_message(&agents, &message_id);
            assert_eq!(at.len(), 1, "task {t}: its creating message at {at:?}");
            if at[0] == victim {
                *into = Some(t);
            }
        }
    }
    let finished = finished.expect("a COMPLETED task on replica c");
    let live = live.expect("a live task on replica c");
    let context = finished["contextId"]
        .as_str()
        .unwrap_or_else(|| panic!("no contextId: {finished}"))
        .to_owned();

    // While c is listed, a message naming only X goes to c.
    let params = message("hello", json!({ "contextId": context }));
    let message_id = params["message"]["messageId"]
        .as_str()
        .expect("id")
        .to_owned();
    let v = rpc(&http, "echo", None, "SendMessage", params).await;
    assert_eq!(
        state_of(&v["result"]["task"]),
        "TASK_STATE_COMPLETED",
        "a message in context {context} while its replica is listed: {v}"
    );
    let at = holders_of_message(&agents, &message_id);
    assert_eq!(
        at,
        vec![victim],
        "a message in context {context} (of replica {victim}) while listed went to {at:?}"
    );

    // A reload takes c out of `urls`: gone, within its grace.
    gw.reload(parse(&text(&urls[..2])))
        .await
        .expect("reload applied");
    let health = health_by_address(&http, "echo").await;
    assert_eq!(
        health.get(&host_port(&urls[victim])).map(String::as_str),
        Some("gone"),
        "{health:?}"
    );

    // A message naming only X is new work, on a or b.
    for n in 0..6 {
        let params = message("hello", json!({ "contextId": context }));
        let message_id = params["message"]["messageId"]
            .as_str()
            .expect("id")
            .to_owned();
        let v = rpc(&http, "echo", None, "SendMessage", params).await;
        assert!(
            v["error"].is_null(),
            "message {n} naming only context {context} (its task's replica gone): {v}"
        );
        assert_eq!(
            state_of(&v["result"]["task"]),
            "TASK_STATE_COMPLETED",
            "message {n} naming only context {context} (its task's replica gone): {v}"
        );
        let at = holders_of_message(&agents, &message_id);
        assert!(
            at.len() == 1 && at[0] != victim,
            "message {n} naming only context {context} (its task's replica gone) went to {at:?}"
        );
    }

    // A message naming c's live task (with or without its context) is REPLICA_UNAVAILABLE.
    let id = id_of(&live);
    let mut answers = Vec::new();
    for extra in [
        json!({ "taskId": id }),
        json!({ "taskId": id, "contextId": live["contextId"] }),
    ] {
        let v = rpc(
            &http,
            "echo",
            None,
            "SendMessage",
            message("more", extra.clone()),
        )
        .await;
        answers.push((extra, v));
    }
    for (extra, v) in &answers {
        assert!(
            v["error"]["code"] == -32000 && reason(v) == "REPLICA_UNAVAILABLE",
            "a second turn naming {extra}, a live task of the gone replica, is not -32000 \
             REPLICA_UNAVAILABLE: {v}\nall answers: {answers:?}"
        );
    }
    assert!(
        !continued_at(&agents[victim], &id),
        "a second turn of {id} reached the gone replica"
    );
}
