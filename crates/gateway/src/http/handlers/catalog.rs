//! The agent catalog: the agent list and each agent's cached card.

use hyper::header::{HeaderValue, CACHE_CONTROL};
use hyper::StatusCode;
use serde::Serialize;

use crate::config::Right;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::named_agent;
use crate::http::response::{self, to_json};
use crate::limits::Health;
use crate::registry::CardState;
use crate::State;

#[derive(Serialize)]
struct Entry<'a> {
    name: &'a str,
    agent_id: Option<&'a str>,
    display_name: Option<&'a str>,
    capabilities: Option<&'a [String]>,
    card_state: &'static str,
    fetched_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<&'a str>,
    /// `ok`, `ejected` (not called until `ejected_until`, then probed) or `probing`.
    health: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ejected_until: Option<String>,
    /// Why it was ejected: an error text, so only for callers that may read those.
    #[serde(skip_serializing_if = "Option::is_none")]
    ejection_reason: Option<String>,
}

/// Whether the caller may read agents' error texts (which can name internal hosts): without
/// clients anyone, with them `metrics` and `admin` clients.
fn sees_errors(ctx: &Ctx) -> bool {
    ctx.caller.can(Right::Metrics) || ctx.caller.can(Right::Admin)
}

/// GET /agents: the agents the caller may use, with their cards' state and their health on this
/// replica (ejected or not: `limits::agent`).
pub fn agents(state: &State, ctx: &Ctx) -> ApiResult {
    let errors = sees_errors(ctx);
    let slots: Vec<_> = state
        .registry
        .agents()
        .iter()
        .filter(|a| ctx.caller.may_use(a))
        .map(|a| (a, a.slot(), a.limits.health()))
        .collect();
    let entries: Vec<Entry<'_>> = slots
        .iter()
        .map(|(a, s, h)| Entry {
            name: &a.cfg.name,
            agent_id: s.card.as_deref().map(|c| c.agent_id.as_str()),
            display_name: s.card.as_deref().map(|c| c.display_name.as_str()),
            capabilities: s.card.as_deref().map(|c| c.capabilities.as_slice()),
            card_state: s.state.as_str(),
            fetched_at: s.fetched_at.map(crate::protocol::time::format),
            last_error: s.last_error.as_deref().filter(|_| errors),
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
        })
        .collect();
    Ok(response::json(
        StatusCode::OK,
        to_json(&serde_json::json!({ "agents": entries }))?,
    ))
}

/// The cached card as the gateway serves it (auth_header removed when the card was compiled).
/// GET /agents/{name}/agent-card.json: the cached card as served (the push credential removed).
pub fn card(state: &State, ctx: &mut Ctx, name: &str) -> ApiResult {
    let agent = named_agent(state, ctx, name)?;
    let errors = sees_errors(ctx);
    let slot = agent.slot();
    let card = slot.card.ok_or_else(|| {
        let why = match slot.last_error.as_deref() {
            Some(e) if errors => e,
            Some(_) => "its card cannot be fetched or is not valid",
            None => "not fetched yet",
        };
        ApiError::new(
            Code::AgentUnavailable,
            format!("agent {name:?} has no valid card: {why}"),
        )
    })?;
    let mut res = response::json(StatusCode::OK, card.served.clone());
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
