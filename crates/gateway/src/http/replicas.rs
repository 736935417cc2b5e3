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
use crate::registry::replicas::address_of;
use crate::registry::{dns, Agent};
use crate::state::State;

/// How often the loop looks (DNS is resolved on each agent's own interval).
const TICK: Duration = Duration::from_millis(250);
/// One resolution may take this long.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);
/// Addresses of unknown replicas remembered per agent (when each was first seen), for their
/// grace: past it the oldest is forgotten, and its tasks' grace starts again.
const MAX_UNKNOWN: usize = 1024;

/// What the keeper holds of one agent between turns.
#[derive(Default)]
struct Kept {
    /// When its name was last resolved.
    resolved: Option<Instant>,
    /// Its sweep of live tasks, when one is under way or asked for: the listing's cursor, and
    /// whether a task it passed still waits out a grace.
    sweep: Option<Sweep>,
    /// Replicas no longer known (expired, or never known to this gateway) by address, with
    /// when their grace started.
    unknown: HashMap<Arc<str>, Instant>,
}

/// One pass over an agent's live tasks, a page per turn.
#[derive(Default)]
struct Sweep {
    after: Option<crate::ledger::listing::Position>,
    /// A task passed whose replica's grace is still running: sweep again once this one ends.
    waiting: bool,
    /// Not before this (a sweep asked again while tasks wait out their grace).
    not_before: Option<Instant>,
}

/// Keep every agent's replicas until `stop`.
pub async fn run(state: Arc<ArcSwap<State>>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut kept: HashMap<String, Kept> = HashMap::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let s = state.load_full();
        let now = Instant::now();
        // Names are resolved concurrently: one slow nameserver delays no other agent.
        let due: Vec<&Arc<Agent>> = s
            .registry
            .agents()
            .iter()
            .filter(|a| a.cfg.discover == Some(Discover::Dns))
            .filter(|a| {
                kept.get(&a.cfg.name)
                    .and_then(|k| k.resolved)
                    .is_none_or(|t| now.duration_since(t) >= a.cfg.discover_interval)
            })
            .collect();
        for a in &due {
            kept.entry(a.cfg.name.clone()).or_default().resolved = Some(now);
        }
        futures_util::future::join_all(due.iter().map(|a| discover(&s, a))).await;
        for agent in s.registry.agents() {
            if !agent.cfg.pins() {
                continue;
            }
            // The first turn sweeps every agent once: tasks of replicas that left before a
            // restart wait out their grace, then fail, like those of replicas that leave now.
            let k = kept.entry(agent.cfg.name.clone()).or_insert_with(|| Kept {
                sweep: Some(Sweep::default()),
                ..Kept::default()
            });
            keep(&s, agent, k, now).await;
        }
        kept.retain(|name, _| s.registry.by_name(name).is_some());
    }
}

/// One turn for one agent with replicas.
async fn keep(s: &State, agent: &Arc<Agent>, k: &mut Kept, now: Instant) {
    let name = agent.cfg.name.as_str();
    let grace = agent.cfg.replica_grace;
    for r in agent.replicas.expire(grace) {
        // Its series go with it (a gone replica's stay through its grace: it may come back).
        r.limits.unbind(&s.metrics, name);
        if r.host.is_some() {
            crate::upstream::names::set(&r.address, None);
        }
        if agent.replicas.knows(&r.address) {
            continue;
        }
        // Past its grace already: its tasks fail at the next sweep.
        remember(
            &mut k.unknown,
            &r.address,
            now.checked_sub(grace).unwrap_or(now),
        );
        k.sweep.get_or_insert_with(Sweep::default);
    }
    if agent.replicas.take_unknown_seen() {
        k.sweep.get_or_insert_with(Sweep::default);
    }
    // A replica whose card is not checked yet takes no new work: its card is fetched soon.
    if agent.replicas.live().iter().any(|r| !r.checked()) && agent.replicas.live().len() > 1 {
        agent.ask_refetch();
    }
    let Some(sweep) = k.sweep.as_mut() else {
        return;
    };
    if sweep.not_before.is_some_and(|t| now < t) {
        return;
    }
    match sweep_page(s, agent, sweep, &mut k.unknown, now).await {
        Ok(true) => {
            let waiting = sweep.waiting;
            k.sweep = waiting.then(|| Sweep {
                not_before: Some(now + (grace / 4).clamp(TICK, Duration::from_secs(5))),
                ..Sweep::default()
            });
        }
        Ok(false) => {}
        // Asked again at the next turn, from where it stopped.
        Err(e) => {
            tracing::warn!(agent = name, error = %e, "the live tasks of gone replicas could not be listed; trying again")
        }
    }
}

/// Remember an unknown replica from `since` (the grace of its tasks starts then), the oldest
/// forgotten past [`MAX_UNKNOWN`]; when its grace started.
fn remember(unknown: &mut HashMap<Arc<str>, Instant>, address: &str, since: Instant) -> Instant {
    if let Some(t) = unknown.get(address) {
        return *t;
    }
    if unknown.len() >= MAX_UNKNOWN {
        let oldest = unknown
            .iter()
            .min_by_key(|(_, t)| **t)
            .map(|(a, _)| a.clone());
        if let Some(oldest) = oldest {
            unknown.remove(&oldest);
        }
    }
    unknown.insert(address.into(), since);
    since
}

/// One page of an agent's live tasks: each whose replica is neither a member nor gone within
/// its grace, and has been unknown for a grace, is failed. Ok(true) at the last page.
async fn sweep_page(
    s: &State,
    agent: &Agent,
    sweep: &mut Sweep,
    unknown: &mut HashMap<Arc<str>, Instant>,
    now: Instant,
) -> Result<bool, crate::ledger::LedgerError> {
    let query = Query {
        scope: Scope::All,
        agents: vec![agent.cfg.name.as_str().into()],
        statuses: Status::ALL
            .into_iter()
            .filter(|st| !st.is_terminal())
            .collect(),
        since_ms: None,
        context: None,
        after: sweep.after.clone(),
        limit: crate::ledger::listing::MAX_PAGE,
    };
    let page = s.ledger.list(&query).await?;
    let grace = agent.cfg.replica_grace;
    let mut failed = 0usize;
    for t in &page.tasks {
        let Some(address) = t.record.replica.as_deref() else {
            continue;
        };
        if agent.replicas.knows(address) {
            if agent.replicas.find(address).is_none() {
                sweep.waiting = true;
            }
            continue;
        }
        let since = remember(unknown, address, now);
        if now.duration_since(since) < grace {
            sweep.waiting = true;
            continue;
        }
        if fail(s, &agent.cfg, &t.key, &t.record.task).await {
            failed += 1;
        }
    }
    if failed > 0 {
        tracing::warn!(agent = %agent.cfg.name, failed,
            "live tasks of replicas gone past replica_grace_ms are failed");
    }
    match page.next {
        Some(next) => {
            sweep.after = Some(next);
            Ok(false)
        }
        None => Ok(true),
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
            let (joined, left) = agent.replicas.set(cfg, members, named);
            if scheme == "https" {
                for r in &joined {
                    crate::upstream::names::set(&r.address, Some(host));
                }
            }
            for r in &joined {
                r.limits.bind(&s.metrics, &cfg.name);
            }
            // Replicas joined: the card is fetched now (from them, for an agent with none yet)
            // and theirs checked against it, so that they take new work at once.
            if !joined.is_empty() {
                agent.refetch_now();
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
