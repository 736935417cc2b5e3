//! The Clawpedia task stream route: a subscription to the task's shared stream (see
//! `crate::stream`).

use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::error::ApiResult;
use crate::http::exchange::task_agent;
use crate::http::request::Request;
use crate::http::response::{event_stream, no_more_events};
use crate::state::State;

/// GET /tasks/{id}/stream. A task the ledger knows to be over answers 204, so an EventSource
/// stops reconnecting.
pub async fn subscribe(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    req: Request,
) -> ApiResult {
    let (agent, record) = task_agent(state, ctx, prefix, task_id).await?;
    if record.as_ref().is_some_and(|r| r.head.status.is_terminal()) {
        return Ok(no_more_events());
    }
    // A live task on a replica that is gone: 503 REPLICA_UNAVAILABLE, not a stream that ends.
    if agent.cfg.pins() {
        crate::http::exchange::replica::target(&agent, Some(ctx), None)?;
    }
    // What the stream stands on, judged again when credentials change: this agent, and
    // `all_tasks` for a task that is not the caller's own.
    if let Some(p) = &ctx.permit {
        p.relies_on_agents(Some(vec![agent.cfg.name.as_str().into()]));
        let own = record.as_ref().and_then(|r| r.owner.as_deref());
        if own.is_none() || own != ctx.caller.owner().map(|o| &**o) {
            p.relies_on_all_tasks();
        }
        p.settle();
    }
    agent.card()?;
    let last_id = last_event_id(req.headers(), req.uri());
    // Ending the connection cuts only this subscriber over HTTP/1; over HTTP/2 it would cut
    // every stream multiplexed with it, so there a slow subscriber is cut when next polled.
    let kill = (req.version() < hyper::Version::HTTP_2).then(|| ctx.kill.clone());
    match state
        .hub
        .subscribe(&agent, &state.upstream, task_id, last_id.as_deref(), kill)
        .await?
    {
        None => Ok(no_more_events()),
        Some(mut sub) => {
            sub.hold(ctx.permit.take());
            Ok(event_stream(Body::Events(Box::new(sub))))
        }
    }
}

/// `Last-Event-ID`, or the `last_event_id` query parameter (a browser's EventSource cannot set
/// the header on its first request).
fn last_event_id(headers: &hyper::HeaderMap, uri: &hyper::Uri) -> Option<String> {
    if let Some(v) = headers.get("last-event-id").and_then(|v| v.to_str().ok()) {
        return Some(v.to_owned());
    }
    uri.query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("last_event_id="))
            .filter(|v| v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
            .map(str::to_owned)
    })
}
