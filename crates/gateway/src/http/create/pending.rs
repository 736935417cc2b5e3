//! A created task the ledger could not take when its answer came (the store was down): the
//! agent has made it, so the client gets its 202 (marked `x-a2a-ledger: pending`) and the task
//! is recorded in the background as soon as the ledger answers.

use std::sync::Arc;

use bytes::Bytes;

use super::late_permit;
use crate::http::context::Ctx;
use crate::http::exchange::record;
use crate::protocol::task::TaskRef;
use crate::registry::Agent;
use crate::state::State;

/// Record a created task whose ledger write failed, in a task of its own, retrying with
/// backoff until the ledger answers, for up to `late_answer_secs` (the late-answer path's
/// bound, and its permits: at most `MAX_LATE_ANSWERS` at once). `false` if it cannot be awaited
/// (late answers off, or too many awaited): the task is then recorded only if a later push or
/// read brings it.
pub fn record_later(
    state: &Arc<State>,
    agent: &Arc<Agent>,
    ctx: &Ctx,
    task: Option<TaskRef>,
    body: Bytes,
) -> bool {
    let name = agent.cfg.name.as_str();
    let count = |outcome: &str| {
        state
            .metrics
            .pending_records
            .with_label_values(&[name, outcome])
            .inc();
    };
    let within = state.config.late_answer;
    let Some(permit) = late_permit(state) else {
        count("dropped");
        return false;
    };
    let (state, agent, ctx) = (state.clone(), agent.clone(), ctx.detached());
    tokio::spawn(async move {
        let deadline = std::time::Instant::now() + within;
        let mut wait = std::time::Duration::from_millis(100);
        let name = agent.cfg.name.as_str();
        let outcome = loop {
            tokio::time::sleep(wait).await;
            match record(&state, &agent, &ctx, None, task.clone(), &body).await {
                Ok(_) => break "recorded",
                Err(e) if e.code.unrecorded() && std::time::Instant::now() < deadline => {
                    wait = (wait * 2).min(std::time::Duration::from_secs(2));
                }
                Err(e) => {
                    tracing::error!(agent = %name, request_id = ?ctx.request_id, error = %e.message,
                        "a created task could not be recorded within late_answer_secs: the gateway does not know it until a push or read brings it");
                    break "lost";
                }
            }
        };
        if outcome == "recorded" {
            tracing::info!(agent = %name, request_id = ?ctx.request_id, "a created task was recorded once the ledger answered");
        }
        state
            .metrics
            .pending_records
            .with_label_values(&[name, outcome])
            .inc();
        drop(permit);
    });
    true
}
