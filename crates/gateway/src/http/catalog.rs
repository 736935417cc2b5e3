//! Operational routes and the agent catalog: health, readiness, metrics, the agent list and
//! each agent's cached card.

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use serde::Serialize;

use super::body::Body;
use super::error::{ApiError, ApiResult, Code};
use super::Ctx;
use crate::protocol::task::Status;
use crate::registry::CardState;
use crate::State;

pub fn json_response(status: StatusCode, body: impl Into<bytes::Bytes>) -> Response<Body> {
    let mut res = Response::new(Body::full(body));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

fn to_json(v: &impl Serialize) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(v)
        .map_err(|e| ApiError::new(Code::Unavailable, format!("serialization: {e}")))
}

pub fn healthz() -> ApiResult {
    Ok(json_response(StatusCode::OK, &br#"{"status":"ok"}"#[..]))
}

/// Ready once the listener is up and every agent has had a card attempt (successful or not: a
/// dead agent must not keep the whole gateway out of a load balancer). Lists agents without a card.
pub fn readyz(state: &State) -> ApiResult {
    let mut pending = Vec::new();
    let mut without_card = Vec::new();
    for a in state.registry.agents() {
        let s = a.slot();
        if !s.attempted {
            pending.push(a.cfg.name.as_str());
        }
        if s.card.is_none() {
            without_card.push(serde_json::json!({"agent": a.cfg.name, "reason": s.last_error.unwrap_or_else(|| "not fetched yet".into())}));
        }
    }
    // With Redis, a replica that does not hear other replicas' changes would serve streams
    // that miss them: not ready until it is subscribed.
    let relaying = state.config.redis.is_none() || state.hub.feed.is_relayed();
    let ready = pending.is_empty() && relaying;
    let body = to_json(&serde_json::json!({
        "ready": ready,
        "awaiting_first_card_attempt": pending,
        "agents_without_card": without_card,
        "change_feed": if relaying { "ok" } else { "not subscribed to Redis" },
    }))?;
    Ok(json_response(
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        body,
    ))
}

pub async fn metrics(state: &State) -> ApiResult {
    let m = &state.metrics;
    // Gauges that are cheaper to compute at scrape time than to keep current.
    for a in state.registry.agents() {
        if let Some(at) = a.slot().fetched_instant {
            m.card_age_seconds
                .with_label_values(&[a.cfg.name.as_str()])
                .set(at.elapsed().as_secs() as i64);
        }
    }
    match state.ledger.counts().await {
        Ok(counts) => {
            for (st, n) in Status::ALL.iter().zip(counts) {
                m.tasks.with_label_values(&[st.as_str()]).set(n as i64);
            }
        }
        Err(e) => tracing::warn!(error = %e, "ledger counts unavailable for /metrics"),
    }
    m.stream_buffered_bytes.set(state.hub.buffered() as i64);
    match state.queue.stats().await {
        Ok(q) => {
            m.webhook_queued.set(q.queued as i64);
            m.webhook_retrying.set(q.retrying as i64);
            m.webhook_dead.set(q.dead as i64);
        }
        Err(e) => tracing::warn!(error = %e, "webhook queue stats unavailable for /metrics"),
    }
    let mut res = Response::new(Body::full(m.encode()));
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(res)
}

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
    Ok(json_response(
        StatusCode::OK,
        to_json(&serde_json::json!({ "agents": entries }))?,
    ))
}

/// The cached card as the gateway serves it (auth_header removed when the card was compiled).
pub fn card(state: &State, ctx: &mut Ctx, name: &str, _req: &Request<Incoming>) -> ApiResult {
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
    let mut res = json_response(StatusCode::OK, card.served.clone());
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
