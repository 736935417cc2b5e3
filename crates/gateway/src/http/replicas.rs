//! The replicas' keeper: one loop for every agent with replicas. It resolves the names of
//! `discover = "dns"` agents every `discover_interval_ms` (a failure or an empty answer keeps
//! the last set), removes the metric series of replicas that left, and once a replica has
//! been gone `replica_grace_ms`, fails its live tasks in the ledger: nobody else holds them,
//! and a client waiting on one must hear that it ended rather than wait forever.
//!
//! A task failed here is failed like any news (`ledger::apply_counted`): a replica of the
//! gateway that fails it first wins, the others' duplicates change nothing, and a final task
//! stays final.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use hyper::header::HeaderValue;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::config::{AgentConfig, Discover, Protocol};
use crate::ledger::listing::{Query, Scope};
use crate::protocol::task::{Head, Status, TaskRef};
use crate::registry::replicas::{address_of, Replica};
use crate::registry::{dns, Agent};
use crate::state::State;

/// How often the loop looks (DNS is resolved on each agent's own interval).
const TICK: Duration = Duration::from_millis(250);
/// One resolution may take this long.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);
/// Live tasks failed per gone replica per turn, a page at a time: bounded work per tick.
const PAGES_PER_TURN: usize = 20;

/// Keep every agent's replicas until `stop`.
pub async fn run(state: Arc<ArcSwap<State>>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut resolved: HashMap<String, Instant> = HashMap::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let s = state.load_full();
        let now = Instant::now();
        for agent in s.registry.agents() {
            if agent.cfg.discover == Some(Discover::Dns) {
                let due = resolved
                    .get(&agent.cfg.name)
                    .is_none_or(|t| now.duration_since(*t) >= agent.cfg.discover_interval);
                if due {
                    resolved.insert(agent.cfg.name.clone(), now);
                    discover(&s, agent).await;
                }
            }
            for (r, _) in agent.replicas.gone() {
                r.limits.unbind(&s.metrics, &agent.cfg.name);
            }
            for r in agent.replicas.expire(agent.cfg.replica_grace) {
                r.limits.unbind(&s.metrics, &agent.cfg.name);
                if r.host.is_some() {
                    crate::upstream::names::set(&r.address, None);
                }
                if agent.cfg.pins() {
                    fail_tasks_of(&s, agent, &r).await;
                }
            }
        }
        resolved.retain(|name, _| s.registry.by_name(name).is_some());
    }
}

/// Resolve a discovered agent's name and make its addresses the replicas.
async fn discover(s: &State, agent: &Arc<Agent>) {
    let cfg = &agent.cfg;
    let Ok(uri) = cfg.url.parse::<hyper::Uri>() else {
        return;
    };
    let (Some(host), scheme) = (uri.host(), uri.scheme_str().unwrap_or("http")) else {
        return;
    };
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    let nameserver = s.config.discovery.nameserver();
    match dns::resolve(host, port, nameserver, RESOLVE_TIMEOUT).await {
        Ok(addrs) => {
            let path = uri.path().trim_end_matches('/');
            let members: Vec<(String, String)> = addrs
                .iter()
                .filter_map(|a| {
                    let base = format!("{scheme}://{a}{path}");
                    Some((address_of(&base)?, base))
                })
                .collect();
            // Called by its configured name: the `Host` its server expects.
            let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host);
            let named = HeaderValue::from_str(authority).ok();
            if scheme == "https" {
                for (address, _) in &members {
                    crate::upstream::names::set(address, Some(host));
                }
            }
            let (joined, left) = agent.replicas.set(cfg, members, named);
            for r in &joined {
                r.limits.bind(&s.metrics, &cfg.name);
            }
            // The first replicas of an agent with no card yet: its card is fetched from them
            // now, not at the next turn of its backoff.
            if !joined.is_empty() && agent.card().is_err() {
                agent.ask_refetch();
            }
            if !joined.is_empty() || !left.is_empty() {
                tracing::info!(agent = %cfg.name, joined = joined.len(), left = left.len(),
                    replicas = agent.replicas.live().len(), "the agent's replicas changed (DNS)");
            }
        }
        // The last set stands: a resolver hiccup must not empty the agent.
        Err(e) => {
            tracing::warn!(agent = %cfg.name, error = %e, "resolving the agent's replicas failed; the last set is kept")
        }
    }
}

/// Fail every live task the ledger holds on `replica` of `agent`, with a status message that
/// says the replica left.
async fn fail_tasks_of(s: &State, agent: &Agent, replica: &Replica) {
    let live: Vec<Status> = Status::ALL
        .into_iter()
        .filter(|st| !st.is_terminal())
        .collect();
    let mut query = Query {
        scope: Scope::All,
        agents: vec![agent.cfg.name.as_str().into()],
        statuses: live,
        since_ms: None,
        context: None,
        after: None,
        limit: crate::ledger::listing::MAX_PAGE,
    };
    let mut failed = 0usize;
    for _ in 0..PAGES_PER_TURN {
        let page = match s.ledger.list(&query).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(agent = %agent.cfg.name, error = %e, "the live tasks of a gone replica could not be listed; they are failed when it is next gone");
                return;
            }
        };
        for t in &page.tasks {
            if t.record.replica.as_deref() == Some(&*replica.address)
                && fail(s, &agent.cfg, &t.key, &t.record.task).await
            {
                failed += 1;
            }
        }
        match page.next {
            Some(next) => query.after = Some(next),
            None => break,
        }
    }
    tracing::warn!(agent = %agent.cfg.name, replica = %replica.address, failed,
        "a replica was gone past replica_grace_ms: its live tasks are failed");
}

/// The words a task failed for its replica's leaving carries.
const LEFT: &str = "the agent's replica that held this task left (gone from its urls or DNS past replica_grace_ms)";

/// Record task `key` (document `doc`) of an agent of `cfg` as FAILED now; whether it was taken.
async fn fail(s: &State, cfg: &AgentConfig, key: &str, doc: &Bytes) -> bool {
    let Ok(Value::Object(mut task)) = serde_json::from_slice::<Value>(doc) else {
        return false;
    };
    let now = crate::protocol::time::now();
    let context = task
        .get("contextId")
        .and_then(Value::as_str)
        .map(Arc::<str>::from);
    match cfg.protocol {
        Protocol::A2a => {
            task.insert(
                "status".into(),
                json!({
                    "state": "TASK_STATE_FAILED",
                    "timestamp": now,
                    "message": {
                        "role": "ROLE_AGENT",
                        "messageId": uuid::Uuid::new_v4().to_string(),
                        "parts": [{ "text": LEFT }],
                    },
                }),
            );
        }
        Protocol::Clawpedia => {
            task.insert("status".into(), Value::from("failed"));
            task.insert("updated_at".into(), Value::from(now.as_str()));
            task.insert(
                "error".into(),
                json!({ "code": "REPLICA_GONE", "message": LEFT }),
            );
        }
    }
    let Ok(raw) = serde_json::to_vec(&task) else {
        return false;
    };
    let task_ref = TaskRef {
        task_id: key.to_owned(),
        head: Head {
            status: Status::Failed,
            updated_ms: crate::protocol::time::now_ms(),
        },
        context: if cfg.protocol == Protocol::A2a {
            context
        } else {
            None
        },
        content: 0,
    };
    crate::ledger::apply_counted(
        s.ledger.as_ref(),
        &s.metrics,
        &cfg.name,
        &task_ref,
        crate::ledger::Doc::written(Bytes::from(raw)),
        None,
        crate::ledger::Origin::default(),
    )
    .await
    .is_ok_and(|a| a.verdict.is_accepted())
}
