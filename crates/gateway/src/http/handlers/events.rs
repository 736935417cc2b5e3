//! GET /events?agent=NAME&task=ID...: one event stream for many tasks (see `crate::stream::events`).

use crate::auth::{Agents, Caller};
use crate::config::Right;
use crate::http::admission;
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::request::Request;
use crate::http::response::event_stream;
use crate::state::State;
use crate::stream::events::{self, Filter, MAX_TASKS};

fn bad(message: String) -> ApiError {
    ApiError::new(Code::InvalidRequest, message)
}

fn filter(state: &State, ctx: &Ctx, query: Option<&str>) -> Result<Filter, ApiError> {
    let mut f = Filter::default();
    if let Caller::Client(c) = &ctx.caller {
        if !c.can(Right::AllTasks) {
            f.owner = Some(c.name.clone());
        }
        if matches!(c.agents, Agents::Only(_)) {
            f.allowed = Some(
                state
                    .registry
                    .agents()
                    .iter()
                    .filter(|a| c.agents.allows(a))
                    .map(|a| a.cfg.name.clone())
                    .collect(),
            );
        }
    }
    for kv in query.unwrap_or("").split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        if k == "access_token" {
            // The credential, read by admission; never echoed in a message.
            continue;
        }
        let plain = !v.is_empty()
            && v.len() <= 128
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !plain {
            return Err(bad(format!(
                "{k}={v:?}: expected a name or id of A-Z a-z 0-9 - _ ."
            )));
        }
        match k {
            "agent" => {
                let agent = state.registry.resolve(v).ok_or_else(|| {
                    ApiError::new(Code::UnknownAgent, format!("no agent named {v:?}"))
                })?;
                admission::agent(state, ctx, &agent)?;
                f.agents.push(agent.cfg.name.clone());
            }
            "task" => f.tasks.push(v.to_owned()),
            _ => {
                return Err(bad(format!(
                    "unknown parameter {k:?}; expected agent, task, access_token"
                )))
            }
        }
    }
    if f.tasks.len() > MAX_TASKS {
        return Err(bad(format!(
            "at most {MAX_TASKS} task filters per connection"
        )));
    }
    Ok(f)
}

/// GET /events. A client without `all_tasks` hears only of its own tasks, and every client
/// only of its agents: a `task=` filter for a task it may not see opens no stream.
pub async fn events(state: &State, ctx: &mut Ctx, req: Request) -> ApiResult {
    if *state.hub.stopping().borrow() {
        return Err(ApiError::new(
            Code::Unavailable,
            "the gateway is shutting down",
        ));
    }
    let f = filter(state, ctx, req.uri().query())?;
    // Listen first: a change that happens while the task streams open is not missed.
    let changes = state.hub.feed.subscribe();
    let mut live = Vec::new();
    for task in &f.tasks {
        let Some(rec) = state.ledger.get(task).await? else {
            continue;
        };
        let wanted = f.agents.is_empty() || f.agents.iter().any(|a| **a == *rec.agent);
        let visible = ctx.caller.sees(rec.owner.as_deref())
            && f.allowed
                .as_ref()
                .is_none_or(|l| l.iter().any(|a| **a == *rec.agent));
        if !wanted || !visible || rec.head.status.is_terminal() {
            continue;
        }
        if let Some(agent) = state
            .registry
            .by_name(&rec.agent)
            .filter(|a| a.card().is_ok())
        {
            live.push((agent.clone(), task.as_str()));
        }
    }
    // Opened together: each may wait for its agent. A task whose stream cannot be opened still
    // has its status changes on this stream.
    let opened = futures_util::future::join_all(live.iter().map(|(agent, task)| {
        state
            .hub
            .subscribe(agent, &state.upstream, task, None, None)
    }))
    .await;
    let subs: Vec<_> = live
        .iter()
        .zip(opened)
        .filter_map(|((_, task), r)| match r {
            Ok(Some(sub)) => Some((std::sync::Arc::from(*task), sub)),
            _ => None,
        })
        .collect();
    // What the stream stands on, judged again when credentials change: the agents it hears
    // of, and `all_tasks` when it hears of every client's tasks.
    let permit = ctx.permit.take();
    if let Some(p) = &permit {
        let named = (!f.agents.is_empty()).then_some(&f.agents);
        let agents = named.or(f.allowed.as_ref());
        p.relies_on_agents(agents.map(|l| l.iter().map(|a| a.as_str().into()).collect()));
        if f.owner.is_none() {
            p.relies_on_all_tasks();
        }
        p.settle();
    }
    let (tx, rx) = events::channel();
    let run = events::run(
        f,
        changes,
        subs,
        tx,
        state.hub.config().ping_interval,
        state.metrics.clone(),
        state.hub.stopping(),
        permit,
    );
    tokio::spawn(run);
    Ok(event_stream(Body::Channel(rx)))
}
