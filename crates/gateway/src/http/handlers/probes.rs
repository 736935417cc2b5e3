//! The operational routes: liveness, readiness, the Prometheus scrape, the OpenAPI document
//! and the public keys of the gateway's assertions.

use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use crate::http::body::Body;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::response::{self, to_json};
use crate::protocol::task::Status;
use crate::state::State;

/// GET /healthz: the process is up.
pub fn healthz() -> ApiResult {
    Ok(response::json(StatusCode::OK, &br#"{"status":"ok"}"#[..]))
}

/// GET /openapi.json: the OpenAPI document compiled into the binary. Public, like /healthz: it
/// describes the routes, and holds nothing of the config (no agents, no clients, no secrets).
pub fn openapi() -> ApiResult {
    Ok(response::json(
        StatusCode::OK,
        crate::http::openapi::DOCUMENT,
    ))
}

/// The public keys of the gateway's `A2A-Caller` assertions (`crate::caller`), for agents to
/// verify them with: public, as any JWKS. Cacheable for a minute: a rotation publishes the
/// next key a minute before it signs (docs/security.md). 404 without `[auth.assertion]`.
pub fn jwks(state: &State) -> ApiResult {
    let Some(signer) = state.registry.signer() else {
        return Err(ApiError::new(
            Code::NotFound,
            "the gateway signs no assertions ([auth.assertion] is not configured)",
        ));
    };
    let mut res = response::json(StatusCode::OK, signer.jwks());
    res.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("public, max-age=60"),
    );
    Ok(res)
}

/// Ready once the listener is up and every agent has had a card attempt (successful or not: a
/// dead agent must not keep the whole gateway out of a load balancer), and, with Redis, while
/// the store answers and takes writes. Lists agents without a
/// card; with clients configured (anyone may ask, unauthenticated), only the classes of what is
/// missing (`cards`, `redis`): agent names, URLs and error texts are on `GET /agents`.
/// With `[[auth.oidc]]`, `degraded` names what is out of reach without making the gateway
/// unready: an identity provider whose keys could not be fetched (`oidc:{name}`, its name in
/// the config, never its URL or the error). `[[auth.oidc]]` makes clients configured, so only
/// that shape of the answer has it.
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
    // With Redis: connected, answering and taking writes (a replica that started before its
    // Redis serves, not ready, until it has connected; one whose Redis went away, until it is
    // back; one whose Redis refuses writes, out of memory or read-only, until a probe write
    // into every partition succeeds, `store::Store::probe`).
    let ledger = state.ledger.available();
    // Draining (SIGTERM): still serving, but no longer ready, so a load balancer moves away.
    let draining = state.draining.load(std::sync::atomic::Ordering::Acquire);
    let ready = pending.is_empty() && relaying && ledger && !draining;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut missing = Vec::new();
    if !pending.is_empty() {
        missing.push("cards");
    }
    if !relaying || !ledger {
        missing.push("redis");
    }
    if draining {
        missing.push("draining");
    }
    // An identity provider out of reach does not make the gateway unready: the keys it holds
    // still verify tokens, and API-key and certificate clients are served all the same.
    // Given only with `[[auth.oidc]]` issuers (nothing else is ever degraded yet).
    let degraded = (!state.config.auth.oidc.is_empty()).then(|| state.auth.degraded());
    if state.auth.enabled() {
        let mut v = serde_json::json!({ "ready": ready, "missing": missing });
        if let Some(d) = &degraded {
            v["degraded"] = serde_json::json!(d);
        }
        let body = to_json(&v)?;
        return Ok(response::json(status, body));
    }
    let body = to_json(&serde_json::json!({
        "missing": missing,
        "ready": ready,
        "awaiting_first_card_attempt": pending,
        "agents_without_card": without_card,
        "change_feed": if relaying { "ok" } else { "not subscribed to Redis" },
        "ledger": match (ledger, state.ledger.refusing()) {
            (true, _) => "ok",
            (false, Some(crate::store::Failure::Oom)) => "Redis refuses writes (out of memory)",
            (false, Some(_)) => "Redis refuses writes (read-only)",
            (false, None) => "Redis unreachable",
        },
    }))?;
    Ok(response::json(status, body))
}

/// GET /metrics: the Prometheus text format, with the gauges computed at scrape time.
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
