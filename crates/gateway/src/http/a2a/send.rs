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
use super::ledger::{self as a2a_ledger, PendingContext};
use super::message;
use super::to_agent;
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::create::idempotency::{self, Claimed};
use crate::http::create::pending::record_later;
use crate::http::create::{drive, Finish};
use crate::http::error::{ApiError, ApiResult, Code};
use crate::ledger::idempotency::Fingerprinting;
use crate::protocol::a2a::answer::{of_task, payload_of, Payload};
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method};
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
    let push = super::push_configs::take_inline(state, ctx, &mut call).await?;
    let held = message::before_agent(state, ctx, agent, &call).await?;
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
    let pending =
        match message::admit(state, ctx, agent, &call, continues.is_none(), params_len).await {
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
            // A refusal of the caller's (its token is not meant for this agent), or a task
            // whose replica is gone (or an agent with no replica yet), is its own answer;
            // anything else says the agent cannot be called. The key keeps the same.
            let own = matches!(
                e.code,
                Code::Forbidden | Code::ReplicaUnavailable | Code::AgentUnavailable
            );
            let answer = if own {
                e
            } else {
                ApiError::new(
                    Code::AgentUnreachable,
                    "the agent request could not be built",
                )
            };
            let res = ApiError::new(answer.code, answer.message.clone()).into_response();
            idempotency::settle(state, &key, &res, false).await;
            if let Some(p) = &pending {
                a2a_ledger::drop_context(state, p).await;
            }
            if let Some(Plan::Pushed(Some(send))) = &plan {
                let _ = state.ledger.end_send(send).await;
            }
            return Err(answer.into());
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
        let judged = message::judge_and_record(
            state,
            ctx,
            agent,
            Method::SendMessage,
            answer,
            continues,
            hint,
        );
        let (id, recorded) = match judged.await? {
            message::Judged::Task { id, recorded } => (id, recorded),
            // The agent has the task: an error now would make the client send the message
            // again and the agent make a second task. The answer goes on, and the task is
            // recorded as soon as the ledger answers (its webhooks follow).
            message::Judged::Unrecorded(_) => {
                let name = agent.cfg.name.as_str();
                let task = match payload_of(answer) {
                    Some(Payload::Task(task)) => task,
                    _ => answer,
                };
                let task_ref = of_task(task).map(|head| a2a_ledger::task_ref(name, &head, task));
                let raw = a2a_ledger::bounded(state, name, task);
                let pending = record_later(state, agent, ctx, task_ref, raw);
                tracing::warn!(agent = %agent.cfg.name, request_id = ?ctx.request_id, pending,
                    "A2A task made but not recorded yet: the ledger is unavailable");
                return Ok(Answer::Doc(reply.into_value()));
            }
            message::Judged::Message | message::Judged::Unread => {
                return Ok(Answer::Doc(reply.into_value()))
            }
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
