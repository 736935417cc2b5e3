//! The artifact routes: the list of a task's artifacts (checked, and each id remembered for
//! the agent-less content route) and an artifact's content (streamed through, never buffered).

use bytes::Bytes;
use hyper::header::{HeaderValue, LOCATION};
use hyper::{Method, StatusCode};

use crate::http::admission;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::{
    build_request, conformance, named_agent, parse_agent_json, pass_through, unknown_agent,
    ClientSide, Exchange,
};
use crate::http::public::{self, rewrite_file_links, Base, Redirect};
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
    let Some(mut list) = parse_agent_json(agent, ctx, state, "artifacts", &answer.body)? else {
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
    // No agent address reaches a client: a file's link on the agent's origin becomes the
    // gateway's content route.
    let base = Base::of(state, req.headers(), req.uri());
    let rewritten = rewrite_file_links(&mut list, agent, &base).map_err(|why| {
        ApiError::new(
            Code::AgentProtocolViolation,
            format!("agent {:?}: {why}", agent.cfg.name),
        )
    })?;
    if !rewritten {
        return Ok(answer.relay());
    }
    let body = serde_json::to_vec(&list).map_err(|e| {
        ApiError::new(
            Code::AgentProtocolViolation,
            format!("the agent's artifact list could not be written again: {e}"),
        )
    })?;
    let mut res = answer.relay_with(body.into());
    base.mark(res.headers_mut());
    Ok(res)
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
    let listed_task = listed.as_ref().map(|l| l.task_id.clone());
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
    // The content is on the replica that holds the artifact's task.
    if agent.cfg.pins() {
        let task = match listed_task {
            Some(t) => Some(t),
            None => state.ledger.artifact(artifact_id).await?.map(|l| l.task_id),
        };
        if let Some(task) = task {
            if let Some(r) = state.ledger.get(&task).await? {
                crate::http::exchange::replica::pin(ctx, &agent, &r);
            }
        }
    }
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
    let mut res = pass_through(state, &agent, ctx, up, agent.cfg.timeout).await?;
    if res.status().is_redirection() {
        let base = Base::of(state, req.headers(), req.uri());
        located(&mut res, &agent, &base, artifact_id)?;
    }
    Ok(res)
}

/// A redirect's `Location` judged (see [`public::redirect`]): the agent's own content route
/// becomes the gateway's, another origin passes, any other path on the agent's origin is 502.
fn located(
    res: &mut hyper::Response<crate::http::body::Body>,
    agent: &crate::registry::Agent,
    base: &Base<'_>,
    artifact_id: &str,
) -> Result<(), ApiError> {
    let Some(location) = res.headers().get(LOCATION) else {
        return Ok(());
    };
    // A Location that is not plain text could hide the agent's address from the check.
    let judged = match location.to_str() {
        Ok(l) => public::redirect(agent, base, artifact_id, l),
        Err(_) => Redirect::Refused,
    };
    match judged {
        Redirect::Elsewhere => Ok(()),
        Redirect::Gateway(to) => {
            let to = HeaderValue::try_from(to).map_err(|_| {
                ApiError::new(
                    Code::AgentProtocolViolation,
                    "the agent's redirect cannot be rewritten to a header value",
                )
            })?;
            res.headers_mut().insert(LOCATION, to);
            base.mark(res.headers_mut());
            Ok(())
        }
        Redirect::Refused => Err(ApiError::new(
            Code::AgentProtocolViolation,
            format!(
                "agent {:?} redirected artifact {artifact_id}'s content to another path of its own origin; only its /artifacts/{artifact_id}/content or another origin may be named",
                agent.cfg.name
            ),
        )),
    }
}
