//! The admin API: dead letters and subscribers. Admission (`http::admission`) lets only a
//! client with the `admin` right in, or, without clients, `Authorization: Bearer <admin_token>`
//! (constant-time compare); without either the routes do not exist, so an unconfigured
//! gateway exposes no operator surface.

use hyper::StatusCode;
use serde_json::{json, Value};

use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::request::{read_body, Request};
use crate::http::response;
use crate::state::State;

/// Most dead letters listed or redriven in one call.
const MAX_PAGE: usize = 1000;

fn ok(body: Value) -> ApiResult {
    Ok(response::json(
        StatusCode::OK,
        serde_json::to_vec(&body).unwrap_or_default(),
    ))
}

/// `limit` from the query string: 1..=MAX_PAGE, default 100.
fn limit(query: Option<&str>) -> Result<usize, ApiError> {
    let Some(v) = query
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("limit="))
    else {
        return Ok(100);
    };
    v.parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_PAGE).contains(n))
        .ok_or_else(|| {
            ApiError::new(
                Code::InvalidRequest,
                format!("limit must be a whole number from 1 to {MAX_PAGE}"),
            )
        })
}

/// GET /admin/dead-letters?limit=N: the newest dead letters first.
pub async fn dead_letters(state: &State, req: Request) -> ApiResult {
    let n = limit(req.uri().query())?;
    let letters = state.queue.dead_letters(n).await?;
    let total = state.queue.stats().await?.dead;
    ok(json!({ "total": total, "dead_letters": letters }))
}

/// POST /admin/dead-letters/redrive, body optional `{"subscriber": "...", "limit": N}`: put dead
/// letters back at the end of their lanes, oldest first.
pub async fn redrive(state: &State, req: Request) -> ApiResult {
    let (_, raw) = read_body(req, state.config.max_body_bytes).await?;
    let body: Value = if raw.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        crate::protocol::json::parse(&raw)?
    };
    let bad = |m: &str| ApiError::new(Code::InvalidRequest, m);
    let Value::Object(body) = body else {
        return Err(bad("body must be a JSON object"));
    };
    if let Some(k) = body.keys().find(|k| *k != "subscriber" && *k != "limit") {
        return Err(bad(&format!(
            "unknown field {k:?}; expected subscriber, limit"
        )));
    }
    let subscriber = match body.get("subscriber") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(bad("subscriber must be a string")),
    };
    let n = match body.get("limit") {
        None => MAX_PAGE,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_PAGE as u64).contains(n))
            .ok_or_else(|| bad("limit must be a whole number from 1 to 1000"))?
            as usize,
    };
    let moved = state.queue.redrive(subscriber, n).await?;
    if moved > 0 {
        tracing::info!(moved, subscriber = ?subscriber, "dead letters redriven");
    }
    ok(json!({ "redriven": moved }))
}

/// GET /admin/subscribers: the configured subscribers and which are disabled. Credentials are
/// never shown (only whether a secret or auth header is set).
pub async fn subscribers(state: &State) -> ApiResult {
    let disabled = state.queue.disabled().await?;
    let list: Vec<Value> = state
        .config
        .subscribers
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                // The origin only: a path or query can carry a token (Slack-style URLs).
                "url": origin(&s.url),
                "agents": s.agents,
                "signed": !s.secret.is_empty(),
                "auth_header": s.auth_header.as_ref().map(|(n, _)| n.as_str()),
                "disabled": disabled.iter().find(|(n, _)| *n == s.name).map(|(_, r)| r),
            })
        })
        .collect();
    ok(json!({ "subscribers": list }))
}

fn origin(url: &str) -> String {
    match url.parse::<hyper::Uri>() {
        Ok(u) => match (u.scheme_str(), u.authority()) {
            (Some(scheme), Some(auth)) => format!("{scheme}://{auth}"),
            _ => String::new(),
        },
        Err(_) => String::new(),
    }
}

/// POST /admin/subscribers/{name}/enable: lift a 410's disable; parked deliveries resume.
pub async fn enable(state: &State, name: &str) -> ApiResult {
    if !state.config.subscribers.iter().any(|s| s.name == name) {
        return Err(ApiError::new(
            Code::NotFound,
            format!("no subscriber named {name:?}"),
        ));
    }
    let resumed = state.queue.enable(name).await?;
    tracing::info!(subscriber = name, resumed, "subscriber re-enabled");
    ok(json!({ "subscriber": name, "enabled": true, "lanes_resumed": resumed }))
}
