//! The artifact routes: the list of a task's artifacts (checked, and each id remembered for
//! the agent-less content route) and an artifact's content (streamed through, never buffered).

use bytes::Bytes;
use hyper::{Method, StatusCode};

use crate::http::admission;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::{
    build_request, conformance, named_agent, parse_agent_json, pass_through, unknown_agent,
    ClientSide, Exchange,
};
use crate::http::request::Request;
use crate::http::route::valid_id;
use crate::protocol::clawpedia::conform::{artifact_ids, check_artifact_list};
use crate::state::State;

/// GET /tasks/{id}/artifacts: checked, and each artifact id remembered for the agent-less
/// `/artifacts/{id}/content`.
pub async fn list(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    task_id: &str,
    req: Request,
) -> ApiResult {
    let ex = Exchange::resolve(state, ctx, prefix, task_id).await?;
    let path = format!("/tasks/{task_id}/artifacts");
    let answer = ex.call(Method::GET, &path, ClientSide::of(&req)).await?;
    if answer.status() != StatusCode::OK {
        return Ok(answer.relay());
    }
    let (agent, ctx) = (&ex.agent, ex.ctx());
    let Some(list) = parse_agent_json(agent, ctx, state, "artifacts", &answer.body)? else {
        return Ok(answer.relay());
    };
    conformance(
        state,
        agent,
        ctx,
        "artifacts",
        check_artifact_list(&list, task_id),
    )?;
    let ids: Vec<String> = artifact_ids(&list)
        .filter(|id| valid_id(id))
        .map(str::to_owned)
        .collect();
    if !ids.is_empty() {
        state
            .ledger
            .note_artifacts(&agent.cfg.name, task_id, ids)
            .await?;
    }
    Ok(answer.relay())
}

/// GET /artifacts/{id}/content: 302s and file bodies pass through with their Content-Type.
///
/// With clients configured, an artifact is the caller's to fetch when the task it was listed
/// under is: so it must have been listed through the gateway, except for an `all_tasks`
/// client under `/agents/{name}/` (which, like the agent itself, may fetch any).
pub async fn content(
    state: &State,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    artifact_id: &str,
    req: Request,
) -> ApiResult {
    let named = prefix
        .map(|name| named_agent(state, ctx, name))
        .transpose()?;
    let unknown = || {
        ApiError::new(Code::ArtifactNotFound, format!("artifact {artifact_id} is not known to the gateway; list its task's artifacts first, or use /agents/{{name}}/artifacts/{artifact_id}/content"))
    };
    // Asked only when it decides something: the agent-less route, or a caller who sees only
    // its own tasks.
    let listed = if named.is_none() || !ctx.caller.sees(None) {
        state.ledger.artifact(artifact_id).await?
    } else {
        None
    };
    if !ctx.caller.sees(None) {
        let listed = listed.as_ref().ok_or_else(unknown)?;
        let record = state.ledger.get(&listed.task_id).await?;
        let visible = record.as_ref().filter(|r| *r.agent == *listed.agent);
        if visible.is_none() {
            return Err(unknown());
        }
        admission::task(state, ctx, &listed.task_id, visible).map_err(|_| unknown())?;
    }
    let agent = match (named, listed) {
        (Some(agent), Some(l)) if *l.agent != agent.cfg.name => return Err(unknown()),
        (Some(agent), _) => agent,
        (None, Some(l)) => state
            .registry
            .by_name(&l.agent)
            .cloned()
            .ok_or_else(|| unknown_agent(&l.agent))?,
        (None, None) => return Err(unknown()),
    };
    ctx.agent = Some(agent.clone());
    admission::agent(state, ctx, &agent)?;
    let up = build_request(
        &agent,
        ctx,
        Method::GET,
        &format!("/artifacts/{artifact_id}/content"),
        ClientSide::of(&req),
        Bytes::new(),
        false,
    )?;
    // A file body: the agent's own timeout is the longest it may go quiet mid-body.
    pass_through(state, &agent, ctx, up, agent.cfg.timeout).await
}
