//! A2A streams (§3.1.2, §3.1.6): `SendStreamingMessage` (`POST message:stream`) and
//! `SubscribeToTask` (`tasks/{id}:subscribe`), over either binding, on one shared stream per
//! task per replica (`crate::stream`'s A2A topics).
//!
//! - **The creator's `message:stream` is the upstream.** Its first event makes (or continues)
//!   the task: judged, its ownership checked and recorded with the caller as owner like a
//!   SendMessage answer; then the stream becomes the task's topic, fed by [`feed`], and the
//!   creator reads it from that first event on. A first event that is a Message is the whole
//!   stream (no task).
//! - **A subscriber joins** the task's topic: the task as it is now first, then the live
//!   events. With no topic yet, the gateway opens one upstream `SubscribeToTask` for all.
//! - **Plain answers, not streams**, for what is refused before: another client's task or an
//!   unknown one (TaskNotFoundError), a final task (UnsupportedOperationError: it has no more
//!   events, and the agent is not called), the `streams` right or a stream slot, the agent's own
//!   error to the stream request.
//!
//! Each subscriber holds a stream slot (`max_streams`) judged again when credentials change.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::HeaderMap;
use hyper::Response;
use serde_json::{json, Value};

use super::agent_stream;
use super::feed::{self, Upstream};
use super::frame::{neutral, slot_refused, Failure};
use super::ledger as a2a_ledger;
use super::message::{admit, before_agent, judge_and_record, opened_by, Judged};
use super::to_agent;
use super::wire::Front;
use crate::http::admission;
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, Code};
use crate::protocol::a2a::answer::{payload, Payload};
use crate::protocol::a2a::stream as a2a_stream;
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method};
use crate::protocol::task::Verdict;
use crate::registry::Agent;
use crate::state::State;
use crate::stream::topic::{Framing, Subscription};
use crate::stream::StreamError;

/// What a streaming call answered: an event stream (framed already), or a neutral answer
/// for the route to frame (a refusal before the stream).
pub enum Streamed {
    /// `text/event-stream`, framed for the subscriber's binding.
    Events(Response<Body>),
    /// A plain answer, to be reframed.
    Neutral(Response<Body>),
}

/// Run the streaming `call` on `agent` for the caller, framed for `front`.
pub async fn run(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    headers: &HeaderMap,
    call: Call,
    front: &Front,
    http1: bool,
) -> Streamed {
    let method = call.method;
    let framing = front.framing();
    match to_agent::held_card(agent) {
        Ok(held) if held.streams() => {}
        Ok(_) => {
            let e = A2aError::new(
                ErrorKind::UnsupportedOperation,
                "the agent does not stream (its card's capabilities.streaming is not true)",
            );
            return Streamed::Neutral(neutral(method, Err(e.into())));
        }
        Err(f) => return Streamed::Neutral(neutral(method, Err(f))),
    }
    let permit = match admission::stream_of_call(state, ctx, headers) {
        Ok(p) => p,
        Err(e) => return Streamed::Neutral(slot_refused(method, e)),
    };
    let opened = match method {
        Method::SendStreamingMessage => {
            send(state, ctx, agent, headers, call, framing, http1).await
        }
        _ => subscribe(state, ctx, agent, headers, &call, framing, http1).await,
    };
    match opened {
        Ok(Opened::Stream(mut sub, owner, _)) => {
            // What the stream stands on, judged again when credentials change: this agent,
            // the method that opened it, and `all_tasks` for a task that is not the caller's
            // own.
            if let Some(p) = &permit {
                p.relies_on_agents(Some(vec![agent.cfg.name.as_str().into()]));
                p.relies_on_method(method);
                if owner.is_none() || owner.as_deref() != ctx.caller.owner().map(|o| &**o) {
                    p.relies_on_all_tasks();
                }
                p.settle();
            }
            sub.hold(permit);
            if ctx.caller.reads_agents_texts() {
                sub.show_agents_texts();
            }
            Streamed::Events(front.stream_response(Body::Events(sub)))
        }
        Ok(Opened::One(frame)) => Streamed::Events(front.stream_response(Body::Full(Some(frame)))),
        Err(f) => Streamed::Neutral(neutral(method, Err(f))),
    }
}

/// A stream opened: a subscription (with the task's owner, for the permit, and its id), or a
/// stream of one event (the agent answered the message with a Message).
pub(super) enum Opened {
    Stream(Box<Subscription>, Option<Arc<str>>, String),
    One(Bytes),
}

/// Ending the connection cuts only this subscriber over HTTP/1; over HTTP/2 it would cut every
/// stream multiplexed with it, so there a slow subscriber is cut when next polled.
fn kill_of(ctx: &Ctx, http1: bool) -> Option<Arc<tokio::sync::Notify>> {
    http1.then(|| ctx.kill.clone())
}

fn unsupported_final(id: &str) -> Failure {
    A2aError::new(
        ErrorKind::UnsupportedOperation,
        format!(
            "task {:?} is in a final state: it has no more events to stream; GetTask reads it",
            id.chars().take(64).collect::<String>()
        ),
    )
    .into()
}

fn from_stream(e: StreamError) -> Failure {
    match e {
        StreamError::A2a(e) => (*e).clone().into(),
        StreamError::NoSuchTask { task, .. } => a2a_ledger::not_found(&task),
        e => ApiError::from(e).into(),
    }
}

/// SubscribeToTask: the caller's live task's stream, joined.
async fn subscribe(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    headers: &HeaderMap,
    call: &Call,
    framing: Framing,
    http1: bool,
) -> Result<Opened, Failure> {
    let name = agent.cfg.name.as_str();
    let id = call.task_id().unwrap_or_default();
    let Some(record) = a2a_ledger::visible(state, ctx, name, false, id).await? else {
        return Err(a2a_ledger::not_found(id));
    };
    if record.head.status.is_terminal() {
        return Err(unsupported_final(id));
    }
    let held = to_agent::held_card(agent)?;
    // Built now, with this caller's forwarding headers, and used only if nobody streams the
    // task here yet.
    let upstream_call = agent_stream::subscribe_call(id);
    let out = to_agent::stream_request(
        agent,
        &held,
        (Some(ctx), None),
        ctx.on_behalf(),
        headers,
        &upstream_call,
    )?;
    let owner = record.owner.clone();
    let sub = feed::join(
        state,
        agent,
        held,
        id,
        &record,
        out,
        framing,
        kill_of(ctx, http1),
    )
    .await
    .map_err(from_stream)?;
    match sub {
        Some(sub) => Ok(Opened::Stream(Box::new(sub), owner, id.to_owned())),
        None => Err(unsupported_final(id)),
    }
}

/// SendStreamingMessage: the message's checks, the agent's stream opened, its first event
/// judged and recorded, then the stream shared as the task's topic.
async fn send(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    headers: &HeaderMap,
    mut call: Call,
    framing: Framing,
    http1: bool,
) -> Result<Opened, Failure> {
    // An inline push config is the gateway's, as on SendMessage: taken out of the message,
    // kept once the first event names the task.
    let push = super::push_configs::take_inline(state, ctx, &mut call).await?;
    let held = before_agent(state, ctx, agent, &call).await?;
    let kill = kill_of(ctx, http1);
    shared(
        state,
        ctx,
        agent,
        held,
        headers,
        &call,
        push.as_ref(),
        framing,
        kill,
    )
    .await
}

/// A message sent to the agent as a stream (the checks before the agent done, `held` its
/// card): room for the task's stream, the ledger's admission, the agent's stream opened, its
/// first event judged and recorded for the caller (the context kept, an inline config `push`
/// kept for the task), then the stream shared as the task's topic, read by the caller from
/// its first event on with `framing`. A blocking SendMessage whose agent streams is sent this
/// way too (`inline`).
#[allow(clippy::too_many_arguments)]
pub(super) async fn shared(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    held: Arc<crate::protocol::a2a::held::HeldCard>,
    headers: &HeaderMap,
    call: &Call,
    push: Option<&crate::protocol::a2a::push::PushConfig>,
    framing: Framing,
    kill: Option<Arc<tokio::sync::Notify>>,
) -> Result<Opened, Failure> {
    let continues = call
        .params
        .get("message")
        .and_then(|m| m.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    // Room for the task's stream, before the agent takes the message (a refusal after would be
    // an error about a task that exists; the room may still go meanwhile, rarely).
    if state.hub.topics() >= state.hub.config().max_topics {
        return Err(ApiError::from(StreamError::TooManyTopics(state.hub.topics())).into());
    }
    let size = serde_json::to_vec(&call.params).map_or(0, |v| v.len());
    let pending = admit(state, ctx, agent, call, continues.is_none(), size).await?;
    let opened = open(state, ctx, agent, &held, headers, call).await;
    let first = match opened {
        Ok(f) => f,
        Err(f) => {
            if let Some(p) = &pending {
                a2a_ledger::drop_context(state, p).await;
            }
            return Err(f);
        }
    };
    let judged = first_event(state, ctx, agent, &first, continues.as_deref(), &framing).await;
    if let Some(p) = &pending {
        match &judged {
            Ok(_) => {
                a2a_ledger::keep_context(state, p, a2a_ledger::context_keep(state, true)).await
            }
            Err(_) => a2a_ledger::drop_context(state, p).await,
        }
    }
    match judged? {
        First::Message(frame) => Ok(Opened::One(frame)),
        First::Task {
            id,
            task,
            json,
            last_ms,
            owner: task_owner,
        } => {
            let key = a2a_ledger::key(&agent.cfg.name, &id);
            if let Some(p) = push {
                // Kept before the feed applies the stream's next events: each reaches it.
                super::push_configs::keep_inline(state, agent, &id, p, false).await;
            }
            let (topic, n, sub) = state
                .hub
                .feed_a2a(agent, &key, framing, kill)
                .map_err(from_stream)?;
            topic.set_phase(crate::stream::topic::Phase::Open);
            let snapshot = Bytes::from(serde_json::to_vec(&task).unwrap_or_default());
            topic.publish_a2a(n, &json, Some(snapshot));
            let up = Upstream::Reading {
                body: first.body,
                reader: first.reader,
                sent: first.sent,
            };
            let task_id = id.clone();
            let start = feed::Start {
                state: state.clone(),
                agent: agent.clone(),
                held,
                topic,
                n,
                id,
                task,
                last_ms,
                owner: task_owner,
                replica: ctx.replica.replica().map(|r| r.address.clone()),
            };
            tokio::spawn(feed::run(start, up));
            let owner = ctx.caller.owner().cloned();
            Ok(Opened::Stream(Box::new(sub), owner, task_id))
        }
    }
}

/// The agent's stream, opened, with its first event read.
struct FirstRead {
    /// The rest of the agent's stream.
    body: hyper::body::Incoming,
    /// Its reader, as the first event left it.
    reader: agent_stream::Reader,
    /// What the stream's request was sent as.
    sent: super::wire::Sent,
    /// The first event, read back (JSON-RPC: its result).
    event: Value,
}

/// Send the message to the agent as a stream request, and read its first event. An answer
/// that is not an event stream is the agent's error (or an invalid answer).
async fn open(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    held: &crate::protocol::a2a::held::HeldCard,
    headers: &HeaderMap,
    call: &Call,
) -> Result<FirstRead, Failure> {
    let out = to_agent::stream_request(
        agent,
        held,
        (Some(ctx), None),
        ctx.on_behalf(),
        headers,
        call,
    )?;
    let timeout = agent.cfg.timeout;
    let res = state
        .upstream
        .send(out.request, timeout)
        .await
        .map_err(|e| Failure::from(ApiError::from(e.at(&agent.cfg.name))))?;
    let mut read = agent_stream::Reader::new(&out.sent, state.hub.config().max_event_bytes);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut body = match agent_stream::stream_or_answer(res, call, &out.sent, timeout).await {
        Ok(body) => body,
        Err(e) => return Err(e.into()),
    };
    let first = tokio::time::timeout_at(deadline, read.next(&mut body))
        .await
        .map_err(|_| {
            Failure::from(ApiError::new(
                Code::AgentTimeout,
                format!("agent {:?} sent no event in time", agent.cfg.name),
            ))
        })?;
    let event = match first {
        Ok(Some(e)) => e,
        Ok(None) => {
            return Err(a2a_ledger::invalid_answer(
                "",
                "stream",
                "the agent's stream ended before its first event",
            ))
        }
        Err(why) => return Err(a2a_ledger::invalid_answer("", "stream", why.to_string())),
    };
    let from = (state, agent, ctx.caller.owner().map(|o| &**o));
    let value = agent_stream::read_event(from, &event, call.method, &out.sent).await?;
    Ok(FirstRead {
        body,
        reader: read,
        sent: out.sent,
        event: value,
    })
}

/// What the first event of the creator's stream was.
enum First {
    /// A Message: the whole answer, framed.
    Message(Bytes),
    /// A task: its id, the Task as recorded, the event's JSON (the ledger's Task when it
    /// refused the agent's), and the status time recorded.
    Task {
        id: String,
        task: Value,
        json: Vec<u8>,
        last_ms: i64,
        /// The task's owner as recorded (not always the caller: an `all_tasks` client may
        /// continue another's task).
        owner: Option<std::sync::Arc<str>>,
    },
}

/// The first event judged and recorded as a message's answer is (`message::judge_and_record`):
/// a Message answers the stream whole; a task's first event opens the task's shared stream.
async fn first_event(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    first: &FirstRead,
    continues: Option<&str>,
    framing: &Framing,
) -> Result<First, Failure> {
    let ev = &first.event;
    let method = Method::SendStreamingMessage;
    let json = serde_json::to_vec(ev).unwrap_or_default();
    let (id, recorded) = match judge_and_record(state, ctx, agent, method, ev, continues, 0).await?
    {
        Judged::Message => {
            let stored = Bytes::from(a2a_stream::event_frame(&json));
            return Ok(First::Message(framing.frame(&stored)));
        }
        Judged::Task { id, recorded } => (id, recorded),
        Judged::Unrecorded(failure) => return Err(failure),
        Judged::Unread => {
            return Err(a2a_ledger::invalid_answer(
                "",
                "stream",
                "the agent's stream opens with neither a Task, a status update nor a Message",
            ))
        }
    };
    let task = match payload(ev) {
        Some(Payload::Task(t)) => t.clone(),
        Some(Payload::StatusUpdate(e)) => opened_by(e),
        _ => json!({}),
    };
    let refused = matches!(recorded.applied.verdict, Verdict::Refused(_));
    let task = recorded.task(&task);
    // Refused (a message that reopens a final task): the creator reads the task as the ledger
    // holds it, not the agent's event.
    let json = if refused {
        serde_json::to_vec(&json!({ "task": &task })).unwrap_or_default()
    } else {
        json
    };
    Ok(First::Task {
        id,
        task,
        json,
        last_ms: recorded.applied.record.head.updated_ms,
        owner: recorded.applied.record.owner.clone(),
    })
}
