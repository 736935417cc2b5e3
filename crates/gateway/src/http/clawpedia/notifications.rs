//! POST /agents/{name}/notifications: the push notifications of the spec, agent → gateway.
//!
//! The endpoint an agent's card names as `notification_config.endpoint_url`. The agent proves
//! itself with `Authorization: Bearer <ingest_token>` of its config entry (compared in constant
//! time; no token configured means no ingest). The body is checked like any agent answer, and
//! the Task in it goes through the ledger's one rule: an update that would change a terminal
//! task or move one backwards is refused with 409, and a repeat of an accepted one is
//! acknowledged without effect.

use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::Value;

use crate::config::Conformance;
use crate::http::admission;
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::{apply, unknown_agent};
use crate::http::request::{is_json, read_body, Request};
use crate::http::response;
use crate::protocol::clawpedia::conform::{check_notification, TaskExpect};
use crate::protocol::clawpedia::task::task_ref;
use crate::protocol::task::{Refusal, Verdict};
use crate::state::State;

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(Code::Unauthorized, message)
}

/// POST /agents/{name}/notifications.
pub async fn ingest(state: &State, ctx: &mut Ctx, name: &str, req: Request) -> ApiResult {
    let agent = state
        .registry
        .resolve(name)
        .ok_or_else(|| unknown_agent(name))?;
    ctx.agent = Some(agent.clone());
    let refuse = |reason: &'static str| {
        state
            .metrics
            .notifications_refused
            .with_label_values(&[agent.cfg.name.as_str(), reason])
            .inc();
    };
    let Some(token) = agent.cfg.ingest_token.as_ref() else {
        refuse("unauthorized");
        return Err(unauthorized("this agent has no ingest_token configured; the gateway accepts no notifications for it"));
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| admission::bearer(v.as_bytes()));
    if !presented.is_some_and(|p| token.matches(p)) {
        refuse("unauthorized");
        return Err(unauthorized(
            "Authorization: Bearer <this agent's ingest_token> is required",
        ));
    }
    if !is_json(req.headers()) {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "notifications take Content-Type: application/json",
        ));
    }
    let (_, raw) = read_body(req, state.config.max_body_bytes).await?;
    // One document, as for a create: a duplicate key is refused, not read one way of several.
    let doc = crate::protocol::json::parse(&raw)?;
    let card = super::card_of(&agent).ok();
    let expect = TaskExpect::under(card.as_deref(), None, crate::protocol::time::now_ms());
    let found = check_notification(&doc, expect);
    if !found.is_empty() {
        state
            .metrics
            .protocol_violations
            .with_label_values(&[
                agent.cfg.name.as_str(),
                "notification",
                match agent.cfg.conformance {
                    Conformance::Enforce => "enforce",
                    Conformance::Report => "report",
                },
            ])
            .inc();
        if agent.cfg.conformance == Conformance::Enforce {
            refuse("invalid");
            return Err(ApiError::new(
                Code::InvalidNotification,
                "notification does not follow A2A 1.0",
            )
            .with_details(found));
        }
    }
    let data = &doc["data"];
    let horizon = crate::protocol::time::now_ms() + crate::protocol::time::MAX_SKEW_MS;
    let Some(task) = task_ref(data).filter(|t| t.head.updated_ms <= horizon) else {
        refuse("invalid");
        return Err(ApiError::new(
            Code::InvalidNotification,
            "notification data is not a recordable Task (task_id, status, updated_at)",
        ));
    };
    // The ledger keeps the Task itself, as every other source of news records it.
    let task_raw = bytes::Bytes::from(
        serde_json::to_vec(data)
            .map_err(|e| ApiError::new(Code::InvalidNotification, e.to_string()))?,
    );
    let doc = crate::ledger::Doc::copied(&task_raw);
    let applied = apply(state, &agent.cfg.name, Some(ctx), &task, doc, None).await?;
    let answer = |status: StatusCode, verdict: &str| -> Response<Body> {
        let body = serde_json::json!({ "task_id": task.task_id, "status": task.head.status.as_str(), "verdict": verdict });
        response::json(status, serde_json::to_vec(&body).unwrap_or_default())
    };
    match applied.verdict {
        Verdict::Duplicate => Ok(answer(StatusCode::OK, "duplicate")),
        Verdict::Refused(reason) => {
            refuse(reason.as_str());
            let code = if reason == Refusal::Terminal {
                Code::TaskTerminal
            } else {
                Code::TransitionRefused
            };
            let recorded: Value =
                serde_json::from_slice(&applied.record.task).unwrap_or(Value::Null);
            let details = if reason == Refusal::ForeignAgent {
                serde_json::json!({ "reason": reason.as_str() })
            } else {
                serde_json::json!({ "reason": reason.as_str(), "recorded": recorded })
            };
            Err(ApiError::new(
                code,
                format!(
                    "update of task {} refused: {}",
                    task.task_id,
                    reason.as_str()
                ),
            )
            .with_details(details))
        }
        v => {
            state
                .metrics
                .notifications_ingested
                .with_label_values(&[agent.cfg.name.as_str()])
                .inc();
            let mut res = answer(
                StatusCode::ACCEPTED,
                if matches!(v, Verdict::New) {
                    "new"
                } else if matches!(v, Verdict::Refresh) {
                    "refresh"
                } else {
                    "transition"
                },
            );
            res.headers_mut()
                .insert("cache-control", HeaderValue::from_static("no-store"));
            Ok(res)
        }
    }
}
