//! The agent catalog: the agent list and each agent's cached card.

use hyper::header::{HeaderValue, CACHE_CONTROL};
use hyper::StatusCode;
use serde::Serialize;

use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::response::{self, to_json};
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
}

/// GET /agents: every agent, with its card's state.
pub fn agents(state: &State) -> ApiResult {
    let slots: Vec<_> = state
        .registry
        .agents()
        .iter()
        .map(|a| (a, a.slot()))
        .collect();
    let entries: Vec<Entry<'_>> = slots
        .iter()
        .map(|(a, s)| Entry {
            name: &a.cfg.name,
            agent_id: s.card.as_deref().map(|c| c.agent_id.as_str()),
            display_name: s.card.as_deref().map(|c| c.display_name.as_str()),
            capabilities: s.card.as_deref().map(|c| c.capabilities.as_slice()),
            card_state: s.state.as_str(),
            fetched_at: s.fetched_at.map(crate::protocol::time::format),
            last_error: s.last_error.as_deref(),
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
    let agent = state
        .registry
        .resolve(name)
        .ok_or_else(|| ApiError::new(Code::UnknownAgent, format!("no agent named {name:?}")))?;
    ctx.agent = Some(agent.clone());
    let slot = agent.slot();
    let card = slot.card.ok_or_else(|| {
        ApiError::new(
            Code::AgentUnavailable,
            format!(
                "agent {name:?} has no valid card: {}",
                slot.last_error.as_deref().unwrap_or("not fetched yet")
            ),
        )
    })?;
    let mut res = response::json(StatusCode::OK, card.served.clone());
    res.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(slot.state.as_str()) {
        res.headers_mut().insert("x-a2a-card-state", v);
    }
    if slot.state == CardState::Stale {
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
