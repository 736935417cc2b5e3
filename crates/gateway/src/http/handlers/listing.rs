//! `GET /tasks`: the gateway's own listing of tasks, for both protocols, from the ledger
//! (`ledger::listing`): the caller's tasks (every task with `all_tasks`), on the agents it may
//! use, newest status first, in keyset pages. What the caller may see is decided again on every
//! page; a page token is bound to the caller and the filters ([`scope`], [`caller_id`] are
//! shared with A2A's ListTasks).

use std::sync::Arc;

use hyper::StatusCode;
use serde::Serialize;

use crate::auth::Caller;
use crate::config::Right;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::named_agent;
use crate::http::request::Request;
use crate::http::response;
use crate::ledger::listing::{Query, Scope, Token, DEFAULT_PAGE, MAX_PAGE};
use crate::protocol::a2a::{split_ledger_key, TaskState};
use crate::protocol::percent;
use crate::protocol::task::Status;
use crate::state::State;

/// Whose tasks the caller lists: every task with `all_tasks` (or with no clients configured),
/// else its own; an unauthenticated caller none.
pub fn scope(caller: &Caller) -> Scope {
    match caller {
        Caller::Open => Scope::All,
        Caller::Client(_) if caller.can(Right::AllTasks) => Scope::All,
        Caller::Client(c) => Scope::Owner(c.name.clone()),
        // Never admitted to a listing (it needs the `tasks` right); were it, an owner no task
        // has: nothing.
        Caller::Public => Scope::Owner(Arc::from("")),
    }
}

/// Who a page token is bound to: the client's name, or none without clients.
pub fn caller_id(caller: &Caller) -> &str {
    caller.owner().map_or("", |o| o)
}

#[derive(Serialize)]
struct Item<'a> {
    agent: &'a str,
    protocol: &'static str,
    task_id: &'a str,
    status: &'static str,
    owner: Option<&'a str>,
    created_at: String,
    updated_at: String,
}

#[derive(Serialize)]
struct Listing<'a> {
    tasks: Vec<Item<'a>>,
    next_page_token: String,
    total_size: u64,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(Code::InvalidRequest, message)
}

/// A status in either protocol's words: `COMPLETED` and `TASK_STATE_COMPLETED` alike, and
/// `CANCELLED` or `TASK_STATE_CANCELED`.
fn status_of(s: &str) -> Option<Status> {
    Status::parse(s).or_else(|| TaskState::parse(s).map(TaskState::status))
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(crate::protocol::time::format)
        .unwrap_or_default()
}

/// `GET /tasks?agent=&status=&page_size=&page_token=`.
pub async fn tasks(state: &State, ctx: &mut Ctx, req: Request) -> ApiResult {
    let (mut agent, mut status, mut size, mut token) = (None, None, None, None);
    for pair in req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .take(percent::MAX_QUERY_PARAMS)
    {
        if pair.is_empty() {
            continue;
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(k), Some(v)) = (percent::decode_query(k), percent::decode_query(v)) else {
            return Err(invalid("the query is not percent-encoded UTF-8"));
        };
        let slot = match k.as_str() {
            "agent" => &mut agent,
            "status" => &mut status,
            "page_size" => &mut size,
            "page_token" => &mut token,
            other => {
                return Err(invalid(format!(
                    "unknown query parameter {:?}; expected agent, status, page_size, page_token",
                    other.chars().take(64).collect::<String>()
                )))
            }
        };
        if slot.replace(v).is_some() {
            return Err(invalid(format!("query parameter {k} is given twice")));
        }
    }
    // Given empty is not left out: it names no agent, no state, no size.
    for (name, given) in [("agent", &agent), ("status", &status), ("page_size", &size)] {
        if given.as_deref() == Some("") {
            return Err(invalid(format!("{name} is empty; leave it out for any")));
        }
    }
    let agents: Vec<Arc<str>> = match agent.as_deref() {
        Some(name) => vec![Arc::from(named_agent(state, ctx, name)?.cfg.name.as_str())],
        None => state
            .registry
            .agents()
            .iter()
            .filter(|a| ctx.caller.may_use(a))
            .map(|a| Arc::from(a.cfg.name.as_str()))
            .collect(),
    };
    let statuses = match status.as_deref() {
        Some(s) => vec![status_of(s).ok_or_else(|| {
            invalid("status is a task state in either protocol's words (COMPLETED, TASK_STATE_COMPLETED)")
        })?],
        None => Status::ALL.to_vec(),
    };
    let limit = match size.as_deref() {
        None => DEFAULT_PAGE,
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| invalid(format!("page_size is a whole number from 1 to {MAX_PAGE}")))?,
    };
    let filter = statuses
        .first()
        .filter(|_| statuses.len() == 1)
        .map_or("", |s| s.as_str());
    let bound = Token::of(&[
        "GET /tasks",
        caller_id(&ctx.caller),
        agent.as_deref().unwrap_or(""),
        filter,
    ]);
    let after = match token.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => Some(bound.decode(t).ok_or_else(|| {
            invalid("page_token is not a token of this listing: another caller's, or one of other filters")
        })?),
        None => None,
    };
    let query = Query {
        scope: scope(&ctx.caller),
        agents,
        statuses,
        since_ms: None,
        context: None,
        after,
        limit,
    };
    let page = state.ledger.list(&query).await?;
    let tasks = page
        .tasks
        .iter()
        .map(|t| {
            let r = &t.record;
            let (protocol, task_id, status) = match split_ledger_key(&t.key) {
                Some((_, id)) => ("a2a", id, TaskState::of_status(r.head.status).as_str()),
                None => ("clawpedia", &*t.key, r.head.status.as_str()),
            };
            Item {
                agent: &r.agent,
                protocol,
                task_id,
                status,
                owner: r.owner.as_deref(),
                created_at: rfc3339(r.created_ms),
                updated_at: rfc3339(r.head.updated_ms),
            }
        })
        .collect();
    let body = Listing {
        tasks,
        next_page_token: page
            .next
            .as_ref()
            .map_or_else(String::new, |p| bound.encode(p)),
        total_size: page.total,
    };
    Ok(response::json(StatusCode::OK, response::to_json(&body)?))
}
