//! The agent catalog: the agent list and each agent's cached card, and the fleet snapshot the
//! `/ui` page polls (the catalog with live numbers, the task counts, the webhook queue and the
//! streams).

use hyper::header::{HeaderValue, CACHE_CONTROL};
use std::sync::Arc;
use std::time::Instant;

use hyper::StatusCode;
use serde::Serialize;
use serde_json::{json, Value};

use crate::auth::{Agents, Caller};
use crate::config::Protocol;
use crate::config::Right;
use crate::http::admission;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::named_agent;
use crate::http::public::Base;
use crate::http::request::Request;
use crate::http::response::{self, to_json};
use crate::limits::Health;
use crate::protocol::task::Status;
use crate::registry::{Agent, CardSlot, CardState};
use crate::state::State;

#[derive(Serialize)]
struct Entry<'a> {
    name: &'a str,
    /// `clawpedia` or `a2a`.
    protocol: &'static str,
    /// An A2A agent's binding towards the agent (the card's interface the gateway uses).
    #[serde(skip_serializing_if = "Option::is_none")]
    binding: Option<&'static str>,
    /// An A2A agent's version in use towards the agent (`1.0`, `0.3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    a2a_version: Option<&'static str>,
    /// What the card got wrong that the gateway read past, as codes
    /// (`missing_protocol_version`); left out when nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    card_warnings: Vec<&'static str>,
    /// The card as the gateway serves it (on `GET /agents`): the URL a client starts from.
    #[serde(skip_serializing_if = "Option::is_none")]
    card_url: Option<String>,
    agent_id: Option<&'a str>,
    display_name: Option<&'a str>,
    capabilities: Option<&'a [String]>,
    card_state: &'static str,
    fetched_at: Option<String>,
    /// Where the card is fetched from (`url` and `card_path`): an agent's address, so only
    /// for callers that may read agents' errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    card_fetch_url: Option<String>,
    /// The last fetch's error, naming the URL fetched: for the same callers only.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    /// Why the last fetched card was refused (`invalid`, `budget`, `no_supported_interface`).
    #[serde(skip_serializing_if = "Option::is_none")]
    card_refusal: Option<&'static str>,
    /// `ok`, `ejected` (not called until `ejected_until`, then probed) or `probing`.
    health: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ejected_until: Option<String>,
    /// Why it was ejected: an error text, so only for callers that may read those.
    #[serde(skip_serializing_if = "Option::is_none")]
    ejection_reason: Option<String>,
    /// Its replicas, each with its health on this gateway, its requests in flight and the
    /// tasks pinned to it; their addresses only for callers that may read agents' errors.
    replicas: Vec<ReplicaEntry>,
    /// On `/api/fleet` only.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    live: Option<Live>,
}

/// One replica of an agent, as `/agents` shows it.
#[derive(Serialize)]
struct ReplicaEntry {
    /// `host:port`: an agent's address, so only for callers that may read agents' errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<String>,
    /// `ok`, `ejected`, `probing`, `card_mismatch` or `gone`.
    health: &'static str,
    in_flight: usize,
    /// Tasks this gateway has pinned to it since it joined.
    tasks_held: u64,
}

/// The replicas of `a`, members first, then those gone within their grace.
fn replicas_of(a: &Agent, errors: bool) -> Vec<ReplicaEntry> {
    let live = a.replicas.live();
    let checked = live.len() > 1 && a.replicas.any_checked();
    let member = live.iter().map(|r| ReplicaEntry {
        address: errors.then(|| r.address.to_string()),
        health: r.health(checked),
        in_flight: r.limits.in_flight(),
        tasks_held: r.tasks_held(),
    });
    let gone = a.replicas.gone().into_iter().map(|(r, _)| ReplicaEntry {
        address: errors.then(|| r.address.to_string()),
        health: "gone",
        in_flight: r.limits.in_flight(),
        tasks_held: r.tasks_held(),
    });
    member.chain(gone).collect()
}

/// An agent's live numbers on this replica (`/api/fleet`).
#[derive(Serialize)]
struct Live {
    in_flight: usize,
    /// Exchanges with the agent since it was configured; a rate is the difference of two reads.
    requests: u64,
    /// Those that failed (a 5xx, a timeout, no connection).
    errors: u64,
    /// The last ten minutes, a sample every 10 s, oldest first (`crate::samples`): what the
    /// page draws its sparklines from.
    #[serde(skip_serializing_if = "Option::is_none")]
    samples: Option<Vec<crate::samples::AgentSample>>,
}

/// Whether the caller may read agents' error texts (which can name internal hosts): without
/// clients anyone, with them `metrics` and `admin` clients.
fn sees_errors(ctx: &Ctx) -> bool {
    ctx.caller.reads_agents_texts()
}

/// The agent's card URL as an operator may see it: any credential in it masked.
fn fetch_url(a: &Agent) -> String {
    crate::config::redact_url(&a.cfg.card_fetch_url())
}

/// One catalog entry: the agent, its card's state and its health on this replica; with `live`,
/// its numbers too.
/// `live`: on `/api/fleet`, with the samples when they are asked for.
fn entry<'a>(
    a: &'a Agent,
    s: &'a CardSlot,
    h: &'a Health,
    errors: bool,
    live: Option<Option<&crate::samples::Samples>>,
) -> Entry<'a> {
    Entry {
        name: &a.cfg.name,
        protocol: a.cfg.protocol.as_str(),
        card_url: None,
        binding: s
            .card
            .as_deref()
            .and_then(|c| c.a2a())
            .map(|c| c.interface.binding.as_str()),
        a2a_version: s
            .card
            .as_deref()
            .and_then(|c| c.a2a())
            .map(|c| c.interface.version.as_str()),
        card_warnings: s
            .card
            .as_deref()
            .and_then(|c| c.a2a())
            .map_or_else(Vec::new, |c| c.warnings.clone()),
        agent_id: s.card.as_deref().and_then(|c| c.agent_id()),
        display_name: s.card.as_deref().map(|c| c.display_name()),
        capabilities: s.card.as_deref().map(|c| c.capabilities()),
        card_state: s.state.as_str(),
        fetched_at: s.fetched_at.map(crate::protocol::time::format),
        card_fetch_url: errors.then(|| fetch_url(a)),
        last_error: s
            .last_error
            .as_deref()
            .filter(|_| errors)
            .map(|e| format!("{e} (GET {})", fetch_url(a))),
        card_refusal: s.refusal.map(|r| r.as_str()),
        health: h.as_str(),
        ejected_until: match h {
            Health::Ejected { until, .. } => Some(crate::protocol::time::format(*until)),
            _ => None,
        },
        ejection_reason: match h {
            Health::Ejected {
                failures, reason, ..
            }
            | Health::Probing { failures, reason }
                if errors =>
            {
                Some(format!(
                    "{failures} consecutive failures, the last: {reason}"
                ))
            }
            _ => None,
        },
        replicas: replicas_of(a, errors),
        live: live.map(|samples| {
            let (requests, errors) = a.replicas.totals();
            Live {
                in_flight: a.replicas.in_flight(),
                requests,
                errors,
                samples: samples.map(|s| s.agent(&a.cfg.name)),
            }
        }),
    }
}

/// The agents the caller may use, each with its card slot and health as they are now.
fn usable<'a>(state: &'a State, ctx: &Ctx) -> Vec<(&'a Arc<Agent>, CardSlot, Health)> {
    state
        .registry
        .agents()
        .iter()
        .filter(|a| ctx.caller.may_use(a))
        .map(|a| (a, a.slot(), a.replicas.health()))
        .collect()
}

/// GET /agents: the agents the caller may use, with their cards' state and their health on this
/// replica (ejected or not: `limits::agent`).
pub fn agents(state: &State, ctx: &Ctx, req: &Request) -> ApiResult {
    let errors = sees_errors(ctx);
    let usable = usable(state, ctx);
    let base = Base::of(state, req.headers(), req.uri());
    let entries: Vec<Entry<'_>> = usable
        .iter()
        .map(|(a, s, h)| Entry {
            card_url: Some(format!(
                "{}/agents/{}/{}",
                base.url(),
                a.cfg.name,
                match a.cfg.protocol {
                    Protocol::A2a => ".well-known/agent-card.json",
                    Protocol::Clawpedia => "agent-card.json",
                }
            )),
            ..entry(a, s, h, errors, None)
        })
        .collect();
    let mut res = response::json(
        StatusCode::OK,
        to_json(&serde_json::json!({ "agents": entries }))?,
    );
    base.mark(res.headers_mut());
    Ok(res)
}

/// POST /admin/agents/{name}/refresh: fetch the agent's card now (an operator who knows the
/// agent restarted need not wait for `refresh_secs`), then answer its entry as `GET /agents`
/// shows it after the fetch (a failed fetch shows in its `card_state` and `last_error`).
pub async fn refresh(state: &State, ctx: &Ctx, name: &str) -> ApiResult {
    let Some(agent) = state.registry.by_name(name) else {
        return Err(ApiError::new(
            Code::UnknownAgent,
            format!("no agent is configured as {name:?}"),
        ));
    };
    // Err: the reason is in the slot, which the entry shows.
    let _ = state
        .registry
        .refresh(agent, &state.upstream, &state.metrics)
        .await;
    let (slot, health) = (agent.slot(), agent.replicas.health());
    let body = to_json(&entry(agent, &slot, &health, sees_errors(ctx), None))?;
    Ok(response::json(StatusCode::OK, body))
}

/// `{tasks, webhooks, streams}`, read now or within the last second (`FleetTotals`). A store that does
/// not answer leaves its part as `{"unavailable": reason}`; the page still shows the rest.
async fn totals(state: &State) -> Arc<Value> {
    let now = Instant::now();
    if let Some(v) = state.fleet_totals.fresh(now) {
        return v;
    }
    let tasks = match state.ledger.counts().await {
        Ok(counts) => Status::ALL
            .iter()
            .zip(counts)
            .map(|(st, n)| (st.as_str().to_owned(), json!(n)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        Err(e) => json!({ "unavailable": e.to_string() }),
    };
    let webhooks = match (state.queue.stats().await, state.queue.disabled().await) {
        (Ok(q), Ok(disabled)) => json!({
            "queue_depth": q.queued,
            "retrying": q.retrying,
            "dead_letters": q.dead,
            "subscribers": state.config.subscribers.iter().map(|s| json!({
                "name": s.name,
                "disabled": disabled.iter().find(|(n, _)| *n == s.name).map(|(_, r)| r),
            })).collect::<Vec<_>>(),
        }),
        (Err(e), _) | (_, Err(e)) => json!({ "unavailable": e.to_string() }),
    };
    let v = Arc::new(json!({
        "tasks": tasks,
        "webhooks": webhooks,
        "streams": {
            "upstreams": state.metrics.stream_upstreams.get(),
            "subscribers": state.metrics.stream_subscribers.get(),
        },
    }));
    state.fleet_totals.keep(now, v.clone());
    v
}

/// Whether the caller sees the whole fleet: no clients configured, or a client with
/// `all_tasks` or `admin` that may use every agent (a client kept to some agents must not
/// read the others' numbers, nor every subscriber's state).
fn sees_everything(caller: &Caller) -> bool {
    match caller {
        Caller::Open => true,
        Caller::Public => false,
        Caller::Client(c) => {
            (c.can(Right::AllTasks) || c.can(Right::Admin)) && matches!(c.agents, Agents::All)
        }
    }
}

/// GET /api/fleet: everything the fleet page shows, in one read, as far as the caller may see
/// it. Every caller gets the agents it may use, with their numbers on this replica. The task
/// counts, the webhook queue and the streams are about every client's tasks and every agent:
/// only a caller that sees the whole fleet ([`sees_everything`]) gets them (`null`
/// otherwise). `caller.admin` says whether the page may offer the admin actions (redrive,
/// enable), `caller.rights` which routes it may use at all.
pub async fn fleet(state: &State, ctx: &Ctx, req: &Request) -> ApiResult {
    let headers = req.headers();
    // `?samples=false`: the page's polls between two samples (taken every 10 s) leave out
    // what they already have: at 200 agents the samples are most of the answer.
    let samples = !req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "samples=false"));
    let errors = sees_errors(ctx);
    let sees_all = sees_everything(&ctx.caller);
    let admin = admission::is_admin(state, ctx, headers);
    let rights: Vec<&str> = Right::ALL
        .into_iter()
        .filter(|r| ctx.caller.can(*r))
        .map(Right::as_str)
        .collect();
    let usable = usable(state, ctx);
    let agents: Vec<Entry<'_>> = usable
        .iter()
        .map(|(a, s, h)| entry(a, s, h, errors, Some(samples.then_some(&*state.samples))))
        .collect();
    let totals = match sees_all {
        true => Some(totals(state).await),
        false => None,
    };
    let part = |k: &str| totals.as_ref().map_or(&Value::Null, |t| &t[k]);
    let client = match &ctx.caller {
        Caller::Client(c) => Some(&*c.name),
        Caller::Open | Caller::Public => None,
    };
    let body = json!({
        "at": crate::protocol::time::now(),
        "caller": { "client": client, "sees_all": sees_all, "admin": admin, "rights": rights },
        "agents": agents,
        "tasks": part("tasks"),
        "webhooks": part("webhooks"),
        "streams": part("streams"),
        // Fleet-wide, like the totals: for a caller that sees every task.
        "samples": (sees_all && samples).then(|| state.samples.fleet()),
    });
    let mut res = response::json(StatusCode::OK, to_json(&body)?);
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

/// The cached card as the gateway serves it (auth_header removed when the card was compiled).
/// GET /agents/{name}/agent-card.json: the cached card as served (the push credential removed).
pub fn card(state: &State, ctx: &mut Ctx, name: &str) -> ApiResult {
    let agent = named_agent(state, ctx, name)?;
    let errors = sees_errors(ctx);
    let slot = agent.slot();
    let card = slot.card.ok_or_else(|| {
        let why = match (slot.last_error.as_deref(), slot.public_error.as_deref()) {
            (Some(e), _) if errors => e,
            (_, Some(e)) => e,
            _ => "not fetched yet",
        };
        ApiError::new(
            Code::AgentUnavailable,
            format!("agent {name:?} has no valid card: {why}"),
        )
    })?;
    let mut res = response::json(StatusCode::OK, card.served().clone());
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(slot.state.as_str()) {
        res.headers_mut().insert("x-a2a-card-state", v);
    }
    if slot.state == CardState::Stale && errors {
        if let Some(e) = slot
            .last_error
            .as_deref()
            .and_then(|e| HeaderValue::from_str(&e.replace(['\r', '\n'], " ")).ok())
        {
            res.headers_mut().insert("x-a2a-card-error", e);
        }
    }
    Ok(res)
}
