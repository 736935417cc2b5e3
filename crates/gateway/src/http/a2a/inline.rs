//! A blocking SendMessage with an inline push config (`configuration.taskPushNotificationConfig`,
//! `returnImmediately` not set): the config hears the whole task, not only its end. The agent
//! answers a blocking message when the task is done, so a config stored once the answer names
//! the task would hear only the end; the gateway must hear the task while the client waits, the
//! best way the agent offers ([`Plan`]):
//!
//! - **the agent pushes** ([`Plan::Pushed`]): the message it is sent carries the gateway's own
//!   config inline, `{callback}/agents/{name}/notifications?send={id}` with a fresh token (the
//!   client's config never reaches the agent). The first push naming a task binds the send and
//!   that task together (`TaskLedger::bind_send`, first wins across replicas): the task is
//!   recorded for the client, the client's config stored on it, the token is the task's push
//!   token from then on; a push naming another task is refused (401). An unbound send ends
//!   with its message (`TaskLedger::end_send`).
//! - **the agent streams** ([`Plan::Streamed`]): the message is sent as SendStreamingMessage,
//!   its stream shared as the task's topic like any stream (`stream::shared`), and the client
//!   answered from the ledger when the stream reaches a final or interrupted state. The call
//!   holds a place of the agent's `max_in_flight`, as every message does.
//! - **neither** ([`Plan::Polled`]): the message is sent with `returnImmediately: true`, the
//!   task polled (`poll.rs`), and the client answered from the ledger at a final or
//!   interrupted state.
//!
//! In the last two the client waits at most the agent's `timeout_ms` from its request's start,
//! then gets the task as the ledger holds it (a SendMessageResponse with a live Task: the task
//! exists, and its config goes on hearing it).

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::HeaderMap;
use hyper::Response;
use serde_json::{Map, Value};

use super::frame::{neutral_written, Failure};
use super::ledger as a2a_ledger;
use super::stream::{shared, Opened};
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::ledger::Record;
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::push::PushConfig;
use crate::protocol::a2a::{Call, ErrorKind, Method};
use crate::registry::Agent;
use crate::state::State;
use crate::stream::topic::Framing;

/// How the gateway hears a blocking message's task while its client waits (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The agent pushes to the gateway's own config, given inline: a send's (its id), or, for
    /// a message that continues a task the ledger holds, that task's (none).
    Pushed(Option<String>),
    /// The message goes as SendStreamingMessage.
    Streamed,
    /// The message goes with `returnImmediately: true`, and the task is polled.
    Polled,
}

/// Whether a message waits for its task: the default; `configuration.returnImmediately: true`
/// does not.
pub fn blocking(call: &Call) -> bool {
    call.params
        .get("configuration")
        .and_then(|c| c.get("returnImmediately"))
        .and_then(Value::as_bool)
        != Some(true)
}

/// How long a send is held: the message with the agent, and its late answer awaited.
fn send_ttl(state: &State, agent: &Agent) -> Duration {
    agent.cfg.timeout + state.config.late_answer + Duration::from_secs(5)
}

/// The plan for a blocking message with the inline config `cfg` to `agent` (its card `held`),
/// and `call` made ready for it (the client's params were fingerprinted before: what the
/// gateway adds here is not the client's message). A send the ledger cannot hold falls back to
/// the next way.
pub async fn plan(
    state: &State,
    ctx: &Ctx,
    agent: &Agent,
    held: &HeldCard,
    call: &mut Call,
    cfg: &PushConfig,
) -> Plan {
    if held.pushes() {
        if let Some(base) = super::push_configs::callback(state, agent) {
            let token = format!(
                "{}{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            );
            let notifications = format!("{base}/agents/{}/notifications", agent.cfg.name);
            // A message that continues a task the ledger holds: the task's own config (its
            // token, the one standing), and the client's config kept on it now.
            let continues = call
                .params
                .get("message")
                .and_then(|m| m.get("taskId"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let Some(task) = continues {
                let key = a2a_ledger::key(&agent.cfg.name, &task);
                if let Ok(Some(standing)) = state.ledger.push_token(&key, Some(&token)).await {
                    if super::push_configs::keep_config(state, &agent.cfg.name, &task, cfg).await {
                        let url = format!(
                            "{notifications}?task={}",
                            crate::protocol::percent::encode_component(&task)
                        );
                        give(call, url, standing);
                        return Plan::Pushed(None);
                    }
                }
            }
            let id = uuid::Uuid::new_v4().simple().to_string();
            let entry = super::push_configs::SendEntry {
                token: token.clone(),
                owner: ctx.caller.owner().map(|o| o.to_string()),
                config: cfg.clone(),
            };
            let kept = state
                .ledger
                .put_send(&id, Bytes::from(entry.encode()), send_ttl(state, agent))
                .await;
            match kept {
                Ok(true) => {
                    give(call, format!("{notifications}?send={id}"), token);
                    return Plan::Pushed(Some(id));
                }
                Ok(false) => {
                    tracing::warn!(agent = %agent.cfg.name, "the ledger holds as many sends as it may: a blocking message's inline config is heard another way")
                }
                Err(e) => {
                    tracing::warn!(agent = %agent.cfg.name, error = %e, "a send could not be kept: a blocking message's inline config is heard another way")
                }
            }
        }
    }
    if held.streams() {
        return Plan::Streamed;
    }
    configuration(call).insert("returnImmediately".into(), Value::Bool(true));
    Plan::Polled
}

/// Give the agent the gateway's own config inline, in the place of the client's.
fn give(call: &mut Call, url: String, token: String) {
    let mut own = Map::new();
    own.insert("url".into(), Value::from(url));
    own.insert("token".into(), Value::from(token));
    configuration(call).insert("taskPushNotificationConfig".into(), Value::Object(own));
}

/// The message's `configuration` object, made if absent.
fn configuration(call: &mut Call) -> &mut Map<String, Value> {
    let c = call
        .params
        .entry("configuration")
        .or_insert_with(|| Value::Object(Map::new()));
    if !c.is_object() {
        *c = Value::Object(Map::new());
    }
    match c {
        Value::Object(o) => o,
        _ => unreachable!("made an object above"),
    }
}

/// When a waiting client is answered at the latest: the agent's timeout from its request's
/// start.
fn deadline(ctx: &Ctx, agent: &Agent) -> tokio::time::Instant {
    let elapsed = Duration::from_millis(
        u64::try_from(crate::protocol::time::now_ms() - ctx.started_ms()).unwrap_or(0),
    );
    tokio::time::Instant::now() + agent.cfg.timeout.saturating_sub(elapsed)
}

/// Whether a task waits for nobody but its client now: final, or interrupted.
fn settled(r: &Record) -> bool {
    r.head.status.is_terminal() || r.head.status.is_interrupted()
}

/// The task `key` as the ledger holds it once it is final or interrupted, or at `until`: read
/// at growing intervals (20 ms to 250 ms); `None` when the ledger holds none.
async fn settled_record(state: &State, key: &str, until: tokio::time::Instant) -> Option<Record> {
    let mut wait = Duration::from_millis(20);
    loop {
        let record = state.ledger.get(key).await.ok().flatten();
        let now = tokio::time::Instant::now();
        if record.as_ref().is_none_or(settled) || now >= until {
            return record;
        }
        tokio::time::sleep(wait.min(until - now)).await;
        wait = (wait * 2).min(Duration::from_millis(250));
    }
}

/// The SendMessageResponse of a recorded task.
fn answer_of(record: &Record) -> Response<Body> {
    neutral_written(a2a_ledger::task_response(&record.task))
}

/// [`Plan::Polled`]: the agent answered task `id` live; the client is answered from the ledger
/// once the poll finds it final or interrupted (or at the deadline).
pub async fn polled_answer(state: &State, ctx: &Ctx, agent: &Agent, id: &str) -> Option<Bytes> {
    let key = a2a_ledger::key(&agent.cfg.name, id);
    let record = settled_record(state, &key, deadline(ctx, agent)).await?;
    Some(a2a_ledger::task_response(&record.task))
}

/// [`Plan::Streamed`]: the message sent as a stream (the checks before the agent done, `held`
/// its card), within the agent's `max_in_flight`; the client answered from the ledger when the
/// stream reaches a final or interrupted state (or at the deadline).
pub async fn streamed(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    held: Arc<HeldCard>,
    headers: &HeaderMap,
    call: &Call,
    cfg: &PushConfig,
) -> Result<Response<Body>, Failure> {
    let replica = crate::http::exchange::replica::target(agent, Some(ctx), None)?;
    let mut pass = crate::http::exchange::call::admit_replica(state, agent, Some(ctx), &replica)?;
    let streaming = Call::new(Method::SendStreamingMessage, call.params.clone());
    let opened = shared(
        state,
        ctx,
        agent,
        held,
        headers,
        &streaming,
        Some(cfg),
        Framing::Stored,
        None,
    )
    .await;
    let (mut sub, id) = match opened {
        Ok(Opened::Stream(sub, _, id)) => (sub, id),
        // A Message: the whole answer (a SendMessageResponse is the same object).
        Ok(Opened::One(frame)) => {
            pass.report(Ok(hyper::StatusCode::OK));
            let json = crate::protocol::a2a::stream::frame_json(&frame)
                .map(Bytes::copy_from_slice)
                .unwrap_or_default();
            return Ok(neutral_written(json));
        }
        Err(f) => {
            // The agent's failure counts against its circuit; a refusal of the gateway's own
            // (the ledger, the stream room) is no outcome of the agent's.
            let agents = matches!(&f.error.kind, ErrorKind::Gateway { reason, .. }
                if reason.starts_with("AGENT_"));
            if agents {
                pass.report(Ok(hyper::StatusCode::BAD_GATEWAY));
            }
            return Err(f);
        }
    };
    let until = deadline(ctx, agent);
    // The shared stream read to its end: it ends at a final or interrupted state, or when it
    // breaks (the ledger then says what is known).
    let _ = tokio::time::timeout_at(until, async {
        while let Some(Ok(_)) = poll_fn(|cx| sub.poll_next(cx)).await {}
    })
    .await;
    drop(sub);
    pass.report(Ok(hyper::StatusCode::OK));
    let key = a2a_ledger::key(&agent.cfg.name, &id);
    let record = settled_record(state, &key, until).await;
    let Some(record) = record else {
        return Err(a2a_ledger::not_found(&id));
    };
    if !settled(&record) {
        // Answered at the deadline with the task live: it is followed on, for its config.
        super::push_configs::follow(state, agent, &id).await;
    }
    Ok(answer_of(&record))
}
