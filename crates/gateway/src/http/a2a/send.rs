//! SendMessage: the one A2A operation that may make a task. The checks the ledger makes before
//! the agent is called (another client's task or context, an inline push config, the client's
//! limits), the `messageId`'s claim, then the create driver (which lets the exchange outlive a
//! timed-out request and records the task whenever the answer comes) with [`SendFinish`], the
//! step from the agent's answer to the neutral answer.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::HeaderMap;
use hyper::http::response::Parts;
use hyper::Response;
use serde_json::Value;

use super::frame::{neutral, neutral_written, Failure};
use super::inline::{self, Plan};
use super::ledger::{self as a2a_ledger, ContextOwner, PendingContext};
use super::to_agent;
use super::to_agent::{conform, held_card};
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::create::idempotency::{self, Claimed};
use crate::http::create::pending::record_later;
use crate::http::create::{drive, Finish};
use crate::http::error::{store_unavailable, ApiError, ApiResult, Code};
use crate::ledger::idempotency::Fingerprinting;
use crate::protocol::a2a::answer::{of_task, payload_of, Payload};
use crate::protocol::a2a::check::{named_context_id, named_task_ids};
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method};
use crate::protocol::node::Json;
use crate::registry::Agent;
use crate::state::State;

/// SendMessage: the checks the ledger makes before the agent is called, the `messageId`'s
/// claim, then the create driver (which lets the exchange outlive a timed-out request and
/// records the task whenever the answer comes) with [`SendFinish`].
pub async fn send(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    headers: &HeaderMap,
    call: Call,
) -> Response<Body> {
    match send_checked(state, ctx, agent, headers, call).await {
        Ok(res) => res,
        Err(f) => neutral(Method::SendMessage, Err(f)),
    }
}

async fn send_checked(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    headers: &HeaderMap,
    mut call: Call,
) -> Result<Response<Body>, Failure> {
    // An inline push config is the gateway's to keep: checked and guarded now, taken out of
    // the message (the agent never sees it), stored once the answer names the task.
    let push = super::push_configs::take_inline(state, &mut call).await?;
    let held = before_agent(state, ctx, agent, &call).await?;
    let name = agent.cfg.name.as_str();
    let continues = call
        .params
        .get("message")
        .and_then(|m| m.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    // The params written once: the message's fingerprint is their digest, and the agent's
    // request carries them as they are when it can (no tenant to set).
    let mut params = Vec::with_capacity(256);
    let _ = serde_json::to_writer(&mut params, &call.params);
    let mut written = Fingerprinting::default();
    let _ = std::io::Write::write_all(&mut written, &params);
    let params_len = params.len();
    // The same messageId with another push config is another message.
    if let Some(p) = &push {
        let _ = std::io::Write::write_all(&mut written, &p.encode());
    }
    let fingerprinted = written.finish();
    // The messageId first: a retry of a message already answered (a send that timed out, say)
    // gets its answer, whatever the client's limits say now.
    let message_id = call
        .params
        .get("message")
        .and_then(|m| m.get("messageId"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let scope = format!("msg:{}", idempotency::scope(name, &ctx.caller));
    let claimed = idempotency::claim(
        state,
        name,
        scope,
        message_id,
        fingerprinted,
        agent.cfg.timeout,
    )
    .await;
    let key = match claimed {
        Ok(Claimed::Held(h)) => h,
        Ok(Claimed::Answered(replay)) => return Ok(replay),
        Err(e) if e.code == Code::IdempotencyKeyReused => {
            return Err(A2aError::invalid_params(vec![crate::protocol::Violation::new(
                "/message/messageId",
                "idempotency",
                "this messageId was sent before with another message; a new message needs a new messageId",
            )])
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    // A blocking message with an inline config: the gateway hears its task while the client
    // waits (`inline`), and its call to the agent says how.
    // Boxed, as every rare branch here: a message without one does not carry its size.
    let plan = match &push {
        Some(cfg) if inline::blocking(&call) => {
            Some(Box::pin(inline::plan(state, ctx, agent, &held, &mut call, cfg)).await)
        }
        _ => None,
    };
    if let (Some(Plan::Streamed), Some(cfg)) = (&plan, &push) {
        drop(params);
        // A refusal (before the agent, or the agent's own error) frees the messageId for a
        // retry; an answer, the task as the ledger holds it, is the message's.
        let streamed = inline::streamed(state, ctx, agent, held, headers, &call, cfg);
        let (mut res, keep) = match Box::pin(streamed).await {
            Ok(res) => (res, true),
            Err(f) => (neutral(Method::SendMessage, Err(f)), false),
        };
        replayed_withheld(&mut res, agent);
        idempotency::settle(state, &key, &res, keep).await;
        return Ok(res);
    }
    // Then what this message may take: room for a new task, and the context it names (claimed
    // only by a message the gateway sends on). Refused, the messageId is free again.
    let pending = match admit(state, ctx, agent, &call, continues.is_none(), params_len).await {
        Ok(p) => p,
        Err(f) => {
            let free = neutral(Method::SendMessage, Ok(Value::Null));
            idempotency::settle(state, &key, &free, false).await;
            return Err(f);
        }
    };
    // The params as written serve the agent's request unless the plan changed the call.
    let written = plan.is_none().then_some(&params[..]);
    let out = match to_agent::request(agent, &held, ctx, headers, &call, written) {
        Ok(out) => out,
        Err(e) => {
            let res = e.into_response();
            idempotency::settle(state, &key, &res, false).await;
            if let Some(p) = &pending {
                a2a_ledger::drop_context(state, p).await;
            }
            if let Some(Plan::Pushed(Some(send))) = &plan {
                let _ = state.ledger.end_send(send).await;
            }
            return Err(ApiError::new(
                Code::AgentUnreachable,
                "the agent request could not be built",
            )
            .into());
        }
    };
    // Not held while the agent answers.
    drop(params);
    let finish = SendFinish {
        call,
        sent: out.sent,
        continues,
        pending,
        push,
        plan,
    };
    match drive(state, ctx, agent.clone(), finish, out.request, Some(key)).await {
        Ok(res) => Ok(res),
        Err(e) => Err(e.into()),
    }
}

/// What a message (SendMessage, SendStreamingMessage) must pass before the agent is called:
/// the tasks it names the caller's, the agent's A2A card, the ledger
/// reachable. The card.
pub(super) async fn before_agent(
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
    for id in named {
        a2a_ledger::visible(state, ctx, name, pass, id).await?;
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
pub(super) async fn admit(
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
pub(super) async fn answered_context(
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
        _ => Ok(()),
    }
}

/// SendMessage's step from the agent's answer to the neutral answer: judged, the task's
/// ownership checked, recorded with the caller as its owner.
struct SendFinish {
    call: Call,
    /// What the message was sent to the agent as.
    sent: super::wire::Sent,
    /// The task the message continues (`message.taskId`).
    continues: Option<String>,
    /// The context the message named, claimed for the caller until it is answered.
    pending: Option<PendingContext>,
    /// The message's inline push config, kept for the task the answer names.
    push: Option<crate::protocol::a2a::push::PushConfig>,
    /// How the gateway hears the task while the client waits, for a blocking message with an
    /// inline config (`inline`).
    plan: Option<Plan>,
}

impl Finish for SendFinish {
    /// The driver's own refusals (AGENT_BUSY, AGENT_TIMEOUT, no connection) as the neutral
    /// A2A answer, so that its replay and its framing are every other answer's.
    fn refused(&self, e: ApiError) -> Response<Body> {
        neutral(Method::SendMessage, Err(e.into()))
    }

    async fn finish(
        &self,
        state: &Arc<State>,
        agent: &Arc<Agent>,
        ctx: &Ctx,
        res: Parts,
        body: Bytes,
    ) -> ApiResult {
        let owner = ctx.caller.owner().map(|o| &**o);
        let reply = to_agent::read_answer(state, agent, owner, &self.call, &self.sent, &res, &body)
            .await
            .map_err(Failure::from);
        let answer = match reply {
            Ok(a) => self.judge(state, agent, ctx, a, body.len()).await,
            Err(f) => Err(f),
        };
        if let Some(Plan::Pushed(Some(send))) = &self.plan {
            // Answered: a send no push bound binds nothing from now on.
            if let Err(e) = state.ledger.end_send(send).await {
                tracing::warn!(error = %e, "a send was not ended; it lapses with its lease");
            }
        }
        if let Some(p) = &self.pending {
            match &answer {
                Ok(_) => {
                    a2a_ledger::keep_context(state, p, a2a_ledger::context_keep(state, true)).await
                }
                Err(_) => a2a_ledger::drop_context(state, p).await,
            }
        }
        // The gateway's own failure after the agent answered (the ledger could not be asked):
        // not an answer for the messageId to replay.
        let unsettled = matches!(&answer, Err(f) if matches!(&f.error.kind,
            ErrorKind::Gateway { status, .. } if *status >= 500));
        let mut res = match answer {
            Ok(Answer::Doc(v)) => neutral(Method::SendMessage, Ok(v)),
            Ok(Answer::Written(json)) => neutral_written(json),
            Err(f) => neutral(Method::SendMessage, Err(f)),
        };
        if unsettled {
            res.extensions_mut().insert(crate::http::create::Unsettled);
        }
        replayed_withheld(&mut res, agent);
        Ok(res)
    }
}

impl SendFinish {
    async fn judge(
        &self,
        state: &Arc<State>,
        agent: &Arc<Agent>,
        ctx: &Ctx,
        reply: to_agent::AgentAnswer<'_>,
        hint: usize,
    ) -> Result<Answer, Failure> {
        let answer = reply.json();
        let continues = self.continues.as_deref();
        let judged = judge_and_record(
            state,
            ctx,
            agent,
            Method::SendMessage,
            answer,
            continues,
            hint,
        );
        let (id, recorded) = match judged.await? {
            Judged::Task { id, recorded } => (id, recorded),
            // The agent has the task: an error now would make the client send the message
            // again and the agent make a second task. The answer goes on, and the task is
            // recorded as soon as the ledger answers (its webhooks follow).
            Judged::Unrecorded { task_ref, raw, .. } => {
                let pending = record_later(state, agent, ctx, Some(task_ref), raw);
                tracing::warn!(agent = %agent.cfg.name, request_id = ?ctx.request_id, pending,
                    "A2A task made but not recorded yet: the ledger is unavailable");
                return Ok(Answer::Doc(reply.into_value()));
            }
            Judged::Message | Judged::Unread => return Ok(Answer::Doc(reply.into_value())),
        };
        if let Some(p) = &self.push {
            let status = recorded.applied.record.head.status;
            let live = !status.is_terminal();
            // Boxed: the rare message with a push config pays for its future (most of this
            // one's size, a third of the exchange's), not every message.
            Box::pin(super::push_configs::keep_inline(state, agent, &id, p, live)).await;
            if self.plan == Some(Plan::Polled) && live && !status.is_interrupted() {
                // Sent with returnImmediately for the client that waits: it is answered once
                // the poll finds the task settled.
                let settled = Box::pin(inline::polled_answer(state, ctx, agent, &id)).await;
                if let Some(answer) = settled {
                    return Ok(Answer::Written(answer));
                }
            }
        }
        let task = match payload_of(answer) {
            Some(Payload::Task(task)) => task,
            _ => answer,
        };
        Ok(Answer::Written(recorded.task_response(task)))
    }
}

/// What a message's answer was, judged and recorded ([`judge_and_record`]).
pub(super) enum Judged {
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
    /// agent has it all the same. What to record once the ledger answers.
    Unrecorded {
        /// The task's head.
        task_ref: crate::protocol::task::TaskRef,
        /// Its document, bounded as the ledger keeps it.
        raw: Bytes,
        /// Why it was not recorded.
        failure: Failure,
    },
    /// An answer the conformance mode let pass that is neither (report mode): no task read.
    Unread,
}

/// The task a stream's first status update opens (a stream may open with the task's first
/// status rather than the Task itself).
pub(super) fn opened_by(status: &dyn Json) -> Value {
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
pub(super) async fn judge_and_record(
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
    // Whatever the conformance mode: an answer about another task than the one the message
    // continues is never recorded nor relayed.
    let named = task.get("id").and_then(|id| id.as_str());
    if let (Some(want), Some(got)) = (continues, named) {
        if want != got {
            return Err(a2a_ledger::invalid_answer(
                "/task/id",
                "task",
                "the answer is about another task than the one the message continues",
            ));
        }
    }
    let Some(head) = of_task(task) else {
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
        Err(failure) if is_unavailable(&failure) => Ok(Judged::Unrecorded {
            task_ref: a2a_ledger::task_ref(name, &head, task),
            raw: a2a_ledger::bounded(state, name, task),
            failure,
        }),
        Err(f) => Err(f),
    }
}

/// The messageId's replay is a fresh answer, whoever sends the message again: an agent's own
/// error in `res` is kept for it without its text (`frame::withheld_of`).
fn replayed_withheld(res: &mut Response<Body>, agent: &Agent) {
    if let Some(w) = super::frame::withheld_of(res, &agent.cfg.name) {
        let kept = serde_json::to_vec(&w.to_status()).unwrap_or_default();
        res.extensions_mut()
            .insert(crate::http::create::ReplayAs(kept.into()));
    }
}

/// What SendMessage relays: a document, or the SendMessageResponse already written around the
/// recorded Task's bytes.
enum Answer {
    Doc(Value),
    Written(Bytes),
}
