//! What every message takes, SendMessage's and SendStreamingMessage's alike: the checks the
//! ledger makes before the agent is called ([`before_agent`], [`admit`]), and the one judgement
//! of its answer, recorded for the caller ([`judge_and_record`]: SendMessage's answer, a
//! stream's first event).

use serde_json::Value;

use super::frame::Failure;
use super::ledger::{self as a2a_ledger, ContextOwner, PendingContext};
use super::to_agent::{conform, held_card};
use crate::http::context::Ctx;
use crate::http::error::{store_unavailable, Code};
use crate::protocol::a2a::answer::{of_task, payload_of, Payload};
use crate::protocol::a2a::check::{named_context_id, named_task_ids};
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method};
use crate::protocol::node::Json;
use crate::registry::Agent;
use crate::state::State;
use std::sync::Arc;

/// What a message (SendMessage, SendStreamingMessage) must pass before the agent is called:
/// the tasks it names the caller's, the agent's A2A card, the ledger
/// reachable. The card.
pub async fn before_agent(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    call: &Call,
) -> Result<Arc<HeldCard>, Failure> {
    let name = agent.cfg.name.as_str();
    let named = named_task_ids(&call.params);
    if named.len() > MAX_NAMED_TASKS {
        return Err(
            A2aError::invalid_params(vec![crate::protocol::Violation::new(
                "/message/referenceTaskIds",
                "maxItems",
                format!("a message names at most {MAX_NAMED_TASKS} tasks"),
            )])
            .into(),
        );
    }
    let pass = agent.cfg.passthrough_unknown_tasks;
    // The first named (`taskId`, else a reference) pins the message to its task's replica.
    let continues = !named.is_empty();
    for id in named {
        a2a_ledger::visible(state, ctx, name, pass, id).await?;
    }
    let has_task = call
        .params
        .get("message")
        .and_then(|m| m.get("taskId"))
        .is_some_and(|t| t.is_string());
    if !has_task {
        // Only a `taskId` holds a message to a replica that is gone; references follow one
        // that is there.
        crate::http::exchange::replica::unpin_gone(ctx);
    }
    if let (false, Some(context)) = (continues, named_context_id(&call.params)) {
        crate::http::exchange::replica::pin_context(state, ctx, agent, context).await;
    }
    let held = held_card(agent)?;
    if !state.ledger.available() {
        let mut refused = store_unavailable(state.ledger.refusing());
        refused.message += ": the message was not sent to the agent";
        return Err(refused.into());
    }
    Ok(held)
}

/// Whether a failure is the ledger's not taking the record (its store failed, or the webhook
/// queue is full), after which a created task is recorded later rather than refused.
fn is_unavailable(f: &Failure) -> bool {
    matches!(&f.error.kind, ErrorKind::Gateway { reason, .. }
        if Code::ALL.iter().any(|c| c.unrecorded() && c.as_str() == reason))
}

/// The most tasks one message may name (`taskId` and `referenceTaskIds`): each is a ledger read.
const MAX_NAMED_TASKS: usize = 64;

/// Whether the ledger takes this message, before the agent is called: room for a new task
/// (`new_task`: the client's `max_live_tasks`, the ledger's bounds) and for the context it
/// names, held for the caller (another client's is TaskNotFoundError, worded like an unknown
/// task; a new one past the caller's `max_contexts`, TOO_MANY_CONTEXTS), or, naming none, for
/// the one the agent will make.
pub async fn admit(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    call: &Call,
    new_task: bool,
    bytes: usize,
) -> Result<Option<PendingContext>, Failure> {
    if new_task {
        crate::http::create::admit_task(state, &ctx.caller, bytes).await?;
    }
    let Some(context) = named_context_id(&call.params) else {
        // A new task in no named context: the agent makes one for it.
        if new_task {
            a2a_ledger::context_room(state, ctx).await?;
        }
        return Ok(None);
    };
    // Held while the message is with the agent (and its late answer awaited); kept once it is
    // answered, freed otherwise: a message the agent never took claims nothing for long.
    let hold = agent.cfg.timeout + state.config.late_answer + std::time::Duration::from_secs(5);
    match a2a_ledger::hold_context(state, ctx, &agent.cfg.name, context, hold).await? {
        ContextOwner::Other => Err(A2aError::new(
            ErrorKind::TaskNotFound,
            format!(
                "context {:?} is not known to the gateway",
                context.chars().take(64).collect::<String>()
            ),
        )
        .into()),
        ContextOwner::Claimed(p) => Ok(Some(p)),
        ContextOwner::Caller => Ok(None),
    }
}

/// The context an answer names, for the caller: another client's is refused (the agent
/// answered in it); any other is the caller's from now, kept as long as `with_task` says
/// (a Task's context outlives the Task by a retention; a Message's, the message).
pub async fn answered_context(
    state: &State,
    ctx: &Ctx,
    agent: &str,
    context: &str,
    at: &str,
    with_task: bool,
) -> Result<(), Failure> {
    let keep = a2a_ledger::context_keep(state, with_task);
    match a2a_ledger::answered_in(state, ctx, agent, context, keep).await? {
        ContextOwner::Other => Err(a2a_ledger::invalid_answer(
            at,
            "owner",
            "the agent answered in another client's context",
        )),
        _ => {
            crate::http::exchange::replica::keep_context(state, ctx, agent, context, keep).await;
            Ok(())
        }
    }
}

/// What a message's answer was, judged and recorded ([`judge_and_record`]).
pub enum Judged {
    /// A Message: the context it names is the caller's from now on.
    Message,
    /// A task, recorded for the caller (`recorded.applied.verdict` says how the ledger took it).
    Task {
        /// The task's id.
        id: String,
        /// What the ledger holds.
        recorded: a2a_ledger::Recorded,
    },
    /// A task the ledger could not take now (its store failed, the webhook queue is full): the
    /// agent has it all the same. Why.
    Unrecorded(Failure),
    /// An answer the conformance mode let pass that is neither (report mode): no task read.
    Unread,
}

/// The task a stream's first status update opens (a stream may open with the task's first
/// status rather than the Task itself).
pub fn opened_by(status: &dyn Json) -> Value {
    let field = |k: &str| status.get(k).map_or(Value::Null, |v| v.to_value());
    serde_json::json!({
        "id": field("taskId"), "contextId": field("contextId"), "status": field("status"),
    })
}

/// A message's answer (SendMessage's answer, SendStreamingMessage's first event) judged and
/// recorded for the caller: within A2A 1.0 (`conform`, for `method`), about the task the
/// message `continues` if it continues one (read from the raw id, so an unreadable state
/// does not skip it), not another client's task (a new task with a held id, an unreadable one
/// too) nor context; a Task (or, opening a stream, its first status) recorded with the caller
/// as its owner. `hint`: about how many bytes the answer takes, 0 if unknown.
pub async fn judge_and_record(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    method: Method,
    answer: &dyn Json,
    continues: Option<&str>,
    hint: usize,
) -> Result<Judged, Failure> {
    let name = agent.cfg.name.as_str();
    conform(state, ctx, agent, method, answer, continues)?;
    // A stream may open with the task's first status rather than the Task itself.
    let opened: Value;
    let task: &dyn Json = match payload_of(answer) {
        Some(Payload::Message(m)) => {
            if let Some(context) = m.get("contextId").and_then(|c| c.as_str()) {
                answered_context(state, ctx, name, context, "/message/contextId", false).await?;
            }
            return Ok(Judged::Message);
        }
        Some(Payload::Task(task)) => task,
        Some(Payload::StatusUpdate(e)) if method.is_streaming() => {
            opened = opened_by(e);
            &opened
        }
        _ => return Ok(Judged::Unread),
    };
    let head = of_task(task);
    let streams = method.is_streaming();
    if streams && head.is_none() {
        // A stream is a task's or nothing: its first event must name one it can be about.
        return Err(a2a_ledger::invalid_answer(
            "/task",
            "task",
            "the stream's first event names no task with a state and a context",
        ));
    }
    // Whatever the conformance mode: an answer about another task than the one the message
    // continues is never recorded nor relayed.
    let named = task.get("id").and_then(|id| id.as_str());
    if let (Some(want), Some(got)) = (continues, named) {
        if want != got {
            return Err(a2a_ledger::invalid_answer(
                "/task/id",
                "task",
                if streams {
                    "the stream is about another task than the one the message continues"
                } else {
                    "the answer is about another task than the one the message continues"
                },
            ));
        }
    }
    let Some(head) = head else {
        // Unreadable (report mode): not recorded, and not relayed if the ledger holds that id
        // for another client.
        if let Some(got) = named {
            if a2a_ledger::held_by_another(state, ctx, got).await? {
                return Err(a2a_ledger::invalid_answer(
                    "/task/id",
                    "owner",
                    "the agent answered with the id of a task the gateway holds for another client",
                ));
            }
        }
        return Ok(Judged::Unread);
    };
    if continues.is_none() && a2a_ledger::held_by_another(state, ctx, head.id).await? {
        return Err(a2a_ledger::invalid_answer(
            "/task/id",
            "owner",
            "the agent answered a new task with the id of a task the gateway holds for another client",
        ));
    }
    answered_context(state, ctx, name, head.context_id, "/task/contextId", true).await?;
    let owner = ctx.caller.owner().map(|o| &**o);
    match a2a_ledger::record(state, ctx, name, &head, task, owner, hint).await {
        Ok(recorded) => Ok(Judged::Task {
            id: head.id.to_owned(),
            recorded,
        }),
        Err(failure) if is_unavailable(&failure) => Ok(Judged::Unrecorded(failure)),
        Err(f) => Err(f),
    }
}
