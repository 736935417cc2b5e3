//! ListTasks and `GET /tasks`, served from the ledger: 250 final tasks over two agents and three
//! clients, created through two replicas on one redis-server, paged by 100, 50 and 7 (each page
//! from either replica) while new tasks keep arriving. Every caller sees each of its final tasks
//! exactly once and no other client's, through JSON-RPC (`/a2a` and the agent's endpoint), the
//! REST binding, `GET /tasks`, and the clients of `a2a-sdk` and `@a2a-js/sdk`; a token from
//! another caller or with other filters is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Value};

use a2a_gateway::config::{Config, Right};

use crate::a2a_gateway::{a2a_agent, gateway};
use crate::auth::client;
use crate::support::a2a_calls::*;
use crate::support::a2a_script::{task, Answer, ScriptedAgent};
use crate::support::a2a_sdk::{run_clients, Run, Sdk, HTTP_JSON, JSONRPC};
use crate::support::redis_server::RedisServer;
use crate::support::Http;

const CAROL: &str = "carol-key-0123456789abcdef";
const CLIENTS: [(&str, &str); 3] = [("alice", ALICE), ("bob", BOB), ("carol", CAROL)];

fn clients(cfg: &mut Config) {
    use Right::*;
    cfg.clients = vec![
        client("alice", ALICE, &["*"], &[Tasks]),
        client("bob", BOB, &["*"], &[Tasks]),
        client("carol", CAROL, &["*"], &[Tasks]),
        client("ops", OPS, &["*"], &[Tasks, AllTasks]),
    ];
}

/// An agent that completes every message at once, in a task named by the message's text, in
/// the context its message names (or one of the task's own).
async fn completing() -> ScriptedAgent {
    ScriptedAgent::start(Arc::new(|method, params| {
        let m = &params["message"];
        let id = m["parts"][0]["text"].as_str().unwrap_or("t");
        let ctx = m["contextId"]
            .as_str()
            .map_or_else(|| format!("ctx-{id}"), str::to_owned);
        match method {
            "SendMessage" => {
                Answer::Result(json!({"task": task(id, &ctx, "TASK_STATE_COMPLETED")}))
            }
            _ => Answer::Status(500, b"unexpected".to_vec()),
        }
    }))
    .await
}

/// SendMessage through `http` to `agent` as `token`: the task `id`, completed.
async fn send(http: &Http, agent: &str, token: &str, id: &str) {
    let mut m = message(id, json!({}));
    m["tenant"] = json!(agent);
    let v = rpc(http, "", Some(token), "SendMessage", m).await;
    assert_eq!(
        v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{v}"
    );
}

async fn get(http: &Http, path: &str, token: &str) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let r = http
        .send(
            Method::GET,
            path,
            &[("authorization", &auth), ("a2a-version", "1.0")],
            Bytes::new(),
        )
        .await;
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

/// How a listing is asked for: one page after `token`, `size` at a time, from `http`; the
/// (agent, task id) pairs of the page, the next token, the total.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// ListTasks at `/a2a`, without a tenant.
    Fleet,
    /// ListTasks at `/agents/{name}/jsonrpc`.
    Rpc(&'static str),
    /// `GET /agents/{name}/tasks`.
    Rest(&'static str),
    /// `GET /tasks`.
    Gateway,
}

type Listed = Vec<(String, String)>;

async fn page(http: &Http, via: Via, who: &str, size: usize, token: &str) -> (Listed, String, u64) {
    let status = "TASK_STATE_COMPLETED";
    // (the task's agent, the task), the next token, the total.
    let (tasks, next, total): (Vec<(String, Value)>, String, u64) = match via {
        Via::Fleet | Via::Rpc(_) => {
            let agent = if let Via::Rpc(a) = via { a } else { "" };
            let v = rpc(
                http,
                agent,
                Some(who),
                "ListTasks",
                json!({"pageSize": size, "pageToken": token, "status": status}),
            )
            .await;
            let r = &v["result"];
            assert_eq!(r["pageSize"], size, "{v}");
            let tasks = r["tasks"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| panic!("{v}"));
            (
                tasks
                    .into_iter()
                    // An A2A Task does not name its agent: its id does, here.
                    .map(|t| {
                        (
                            t["id"]
                                .as_str()
                                .unwrap_or("")
                                .split('-')
                                .next()
                                .unwrap_or("")
                                .to_owned(),
                            t,
                        )
                    })
                    .collect(),
                r["nextPageToken"]
                    .as_str()
                    .expect("always present")
                    .to_owned(),
                r["totalSize"].as_u64().expect("totalSize"),
            )
        }
        Via::Rest(agent) => {
            let (code, v) = get(
                http,
                &format!("/agents/{agent}/tasks?pageSize={size}&pageToken={token}&status={status}"),
                who,
            )
            .await;
            assert_eq!(code, 200, "{v}");
            let tasks = v["tasks"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| panic!("{v}"));
            (
                tasks.into_iter().map(|t| (agent.to_owned(), t)).collect(),
                v["nextPageToken"]
                    .as_str()
                    .expect("always present")
                    .to_owned(),
                v["totalSize"].as_u64().expect("totalSize"),
            )
        }
        Via::Gateway => {
            let (code, v) = get(
                http,
                &format!("/tasks?page_size={size}&page_token={token}&status=COMPLETED"),
                who,
            )
            .await;
            assert_eq!(code, 200, "{v}");
            let tasks = v["tasks"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| panic!("{v}"));
            for t in &tasks {
                assert_eq!(t["protocol"], "a2a", "{t}");
                assert_eq!(t["status"], "TASK_STATE_COMPLETED", "{t}");
                assert!(t["owner"].is_string(), "{t}");
                assert!(
                    t["created_at"].is_string() && t["updated_at"].is_string(),
                    "{t}"
                );
            }
            (
                tasks
                    .into_iter()
                    .map(|t| {
                        let agent = t["agent"].as_str().unwrap_or("").to_owned();
                        (agent, json!({"id": t["task_id"]}))
                    })
                    .collect(),
                v["next_page_token"]
                    .as_str()
                    .expect("always present")
                    .to_owned(),
                v["total_size"].as_u64().expect("total_size"),
            )
        }
    };
    assert!(tasks.len() <= size);
    let listed = tasks
        .into_iter()
        .map(|(agent, t)| {
            assert!(
                t.get("artifacts").is_none(),
                "artifacts only when asked: {t}"
            );
            (agent, t["id"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    (listed, next, total)
}

/// Every page of one listing, alternating replicas; the pairs listed, in order.
async fn every_page(replicas: [&Http; 2], via: Via, who: &str, size: usize) -> Listed {
    let mut all = Vec::new();
    let mut token = String::new();
    for n in 0..1000 {
        let (listed, next, _) = page(replicas[n % 2], via, who, size, &token).await;
        all.extend(listed);
        if next.is_empty() {
            return all;
        }
        token = next;
    }
    panic!("the listing never ended");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_caller_pages_through_its_own_tasks_once_across_two_replicas() {
    let redis = RedisServer::start();
    let (one, two) = (completing().await, completing().await);
    let agents = || vec![a2a_agent("one", &one.base), a2a_agent("two", &two.base)];
    let store = |cfg: &mut Config| {
        clients(cfg);
        cfg.redis = Some(redis.config("list"));
    };
    let (_g1, r1) = gateway(agents(), store).await;
    let (_g2, r2) = gateway(agents(), store).await;
    // 250 final tasks: "{agent}-{client}-{n}", through either replica.
    let mut mine: BTreeMap<&str, BTreeSet<(String, String)>> = BTreeMap::new();
    let mut sends = Vec::new();
    for n in 0..250usize {
        let agent = ["one", "two"][n % 2];
        let (name, key) = CLIENTS[(n / 2) % 3];
        let id = format!("{agent}-{name}-{n}");
        mine.entry(name)
            .or_default()
            .insert((agent.to_owned(), id.clone()));
        let http = Http::new(if n % 3 == 0 {
            r1.base.clone()
        } else {
            r2.base.clone()
        });
        sends.push(Box::pin(async move { send(&http, agent, key, &id).await }));
        if sends.len() == 16 {
            futures_util::future::join_all(sends.drain(..)).await;
        }
    }
    futures_util::future::join_all(sends).await;
    // New tasks keep arriving while the clients page.
    let stop = Arc::new(AtomicBool::new(false));
    let arriving = {
        let (stop, http) = (stop.clone(), Http::new(r1.base.clone()));
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let (name, key) = CLIENTS[n % 3];
                send(
                    &http,
                    ["one", "two"][n % 2],
                    key,
                    &format!("{}-{name}-new{n}", ["one", "two"][n % 2]),
                )
                .await;
                n += 1;
            }
            n
        })
    };
    let (r1h, r2h) = (&r1, &r2);
    for (name, key) in CLIENTS {
        let own = &mine[name];
        for size in [100, 50, 7] {
            for via in [Via::Fleet, Via::Gateway] {
                let listed = every_page([r1h, r2h], via, key, size).await;
                let set: BTreeSet<_> = listed.iter().cloned().collect();
                assert_eq!(
                    set.len(),
                    listed.len(),
                    "{name} {via:?} {size}: listed twice"
                );
                assert!(
                    own.is_subset(&set),
                    "{name} {via:?} {size}: missing {:?}",
                    own.difference(&set).collect::<Vec<_>>()
                );
                for (_, id) in &set {
                    assert!(
                        id.contains(&format!("-{name}-")),
                        "{name} {via:?}: another client's {id}"
                    );
                }
            }
            // One agent's: its JSON-RPC endpoint and its REST route.
            for agent in ["one", "two"] {
                let want: BTreeSet<_> = own.iter().filter(|(a, _)| a == agent).cloned().collect();
                for via in [Via::Rpc(agent), Via::Rest(agent)] {
                    let listed = every_page([r2h, r1h], via, key, size).await;
                    let set: BTreeSet<_> = listed.iter().cloned().collect();
                    assert_eq!(
                        set.len(),
                        listed.len(),
                        "{name} {via:?} {size}: listed twice"
                    );
                    assert!(want.is_subset(&set), "{name} {via:?} {size}");
                    assert!(
                        set.iter()
                            .all(|(a, id)| a == agent && id.contains(&format!("-{name}-"))),
                        "{name} {via:?}: {set:?}"
                    );
                }
            }
        }
    }
    // Through both official SDKs' clients, over both bindings, from the served card.
    let card = format!("{}/agents/one/.well-known/agent-card.json", r2.base);
    let runs: Vec<Run<'_>> = [Sdk::Python, Sdk::Js]
        .into_iter()
        .flat_map(|sdk| {
            [JSONRPC, HTTP_JSON].map(|b| (sdk, card.as_str(), b, Some(ALICE), &["list-pages"][..]))
        })
        .collect();
    let want: BTreeSet<String> = mine["alice"]
        .iter()
        .filter(|(a, _)| a == "one")
        .map(|(_, id)| id.clone())
        .collect();
    for (run, out) in runs.iter().zip(run_clients(&runs)) {
        let ids: Vec<String> = out["result"]["ids"]
            .as_array()
            .unwrap_or_else(|| panic!("{:?} {}: {out}", run.0, run.2))
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        let set: BTreeSet<String> = ids.iter().cloned().collect();
        assert_eq!(set.len(), ids.len(), "{:?} {}: listed twice", run.0, run.2);
        assert!(want.is_subset(&set), "{:?} {}: {out}", run.0, run.2);
        assert!(
            set.iter().all(|id| id.starts_with("one-alice-")),
            "{:?} {}: {set:?}",
            run.0,
            run.2
        );
    }
    stop.store(true, Ordering::Relaxed);
    let arrived = arriving.await.expect("sender");
    assert!(arrived > 0, "tasks kept arriving while the clients paged");
    // The caller with all_tasks sees everyone's.
    let all = every_page([&r1, &r2], Via::Gateway, OPS, 100).await;
    assert!(
        all.len() >= 250 + arrived,
        "{} of {}",
        all.len(),
        250 + arrived
    );

    // A token is its caller's and its filters'.
    let (_, token, total) = page(&r1, Via::Fleet, ALICE, 7, "").await;
    assert!(total >= mine["alice"].len() as u64);
    assert!(!token.is_empty());
    let stolen = rpc(
        &r2,
        "",
        Some(BOB),
        "ListTasks",
        json!({"pageSize": 7, "pageToken": token, "status": "TASK_STATE_COMPLETED"}),
    )
    .await;
    assert_eq!(error_code(&stolen), -32602, "{stolen}");
    let refiltered = rpc(
        &r2,
        "",
        Some(ALICE),
        "ListTasks",
        json!({"pageSize": 7, "pageToken": token}),
    )
    .await;
    assert_eq!(error_code(&refiltered), -32602, "{refiltered}");
    assert!(refiltered.to_string().contains("pageToken"), "{refiltered}");
    let (_, gw_token, _) = page(&r1, Via::Gateway, ALICE, 7, "").await;
    for (who, query) in [
        (
            BOB,
            format!("/tasks?page_token={gw_token}&status=COMPLETED"),
        ),
        (ALICE, format!("/tasks?page_token={gw_token}")),
        (ALICE, format!("/tasks?page_token={token}&status=COMPLETED")),
    ] {
        let (code, v) = get(&r1, &query, who).await;
        assert_eq!(code, 400, "{query}: {v}");
        assert_eq!(v["error"]["code"], "INVALID_REQUEST", "{v}");
    }
}

/// `GET /tasks` lists both protocols' tasks, each status in its own protocol's words, and takes
/// a status in either; its parameters are checked.
#[tokio::test]
async fn the_gateways_listing_speaks_both_protocols() {
    let scripted = completing().await;
    let base = scripted.base.clone();
    let (_claw, g) = crate::support::single("claw", move |cfg| {
        cfg.agents.push(a2a_agent("echo", &base));
    })
    .await;
    let created = g
        .http
        .post_json(
            "/agents/claw/tasks",
            &json!({"input": crate::support::good_input()}),
        )
        .await;
    assert_eq!(created.status, 202, "{created:?}");
    let claw_id = created.json()["task_id"]
        .as_str()
        .expect("task_id")
        .to_owned();
    let mut m = message("echo-1", json!({}));
    m["tenant"] = json!("echo");
    let sent = rpc(&g.http, "", None, "SendMessage", m).await;
    assert_eq!(sent["result"]["task"]["id"], "echo-1", "{sent}");
    let list = |query: &'static str| {
        let http = g.http.clone();
        async move {
            let r = http.get(&format!("/tasks{query}")).await;
            assert_eq!(r.status, 200, "{query}: {r:?}");
            let v = r.json();
            let pairs: Vec<(String, String, String)> = v["tasks"]
                .as_array()
                .unwrap_or_else(|| panic!("{v}"))
                .iter()
                .map(|t| {
                    let s = |k: &str| t[k].as_str().unwrap_or("").to_owned();
                    (
                        s("agent"),
                        s("task_id"),
                        format!("{}/{}", s("protocol"), s("status")),
                    )
                })
                .collect();
            (pairs, v["total_size"].as_u64().expect("total_size"))
        }
    };
    let (all, total) = list("").await;
    assert_eq!(total, 2, "{all:?}");
    assert!(
        all.contains(&("claw".into(), claw_id.clone(), "clawpedia/SUBMITTED".into())),
        "{all:?}"
    );
    assert!(
        all.contains(&(
            "echo".into(),
            "echo-1".into(),
            "a2a/TASK_STATE_COMPLETED".into()
        )),
        "{all:?}"
    );
    // Either protocol's word for a state matches both protocols' tasks in it.
    for query in ["?status=COMPLETED", "?status=TASK_STATE_COMPLETED"] {
        let (found, _) = list(query).await;
        assert_eq!(
            found.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            ["echo-1"],
            "{query}"
        );
    }
    for query in [
        "?status=SUBMITTED",
        "?status=TASK_STATE_SUBMITTED",
        "?agent=claw",
    ] {
        let (found, _) = list(query).await;
        assert_eq!(
            found.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            [claw_id.as_str()],
            "{query}"
        );
    }
    let cancel = g
        .http
        .post_json(&format!("/agents/claw/tasks/{claw_id}/cancel"), &json!({}))
        .await;
    assert!(cancel.status < 300, "{cancel:?}");
    for query in ["?status=CANCELLED", "?status=TASK_STATE_CANCELED"] {
        let (found, total) = list(query).await;
        assert_eq!(
            found.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            [claw_id.as_str()],
            "{query}"
        );
        assert_eq!(total, 1);
    }
    // Bad parameters are the gateway's 400; an unknown agent its 404.
    for query in [
        "?status=",
        "?status=DONE",
        "?agent=",
        "?page_size=0",
        "?page_size=101",
        "?page_size=ten",
        "?page_token=garbage",
        "?limit=5",
        "?status=COMPLETED&status=FAILED",
    ] {
        let r = g.http.get(&format!("/tasks{query}")).await;
        assert_eq!(r.status, 400, "{query}: {r:?}");
        assert_eq!(r.json()["error"]["code"], "INVALID_REQUEST", "{query}");
    }
    let r = g.http.get("/tasks?agent=nope").await;
    assert_eq!(r.status, 404, "{r:?}");
    // A Clawpedia create naming an A2A agent is the client's mistake, said as such.
    let r = g
        .http
        .post_json("/tasks", &json!({"agent": "echo", "input": {}}))
        .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("SendMessage")),
        "{r:?}"
    );
    // A Clawpedia agent's own /tasks takes POST only.
    let r = g.http.get("/agents/claw/tasks").await;
    assert_eq!(r.status, 405, "{r:?}");
    assert_eq!(r.header("allow"), Some("POST"));
}
