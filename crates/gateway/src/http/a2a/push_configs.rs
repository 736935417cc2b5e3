//! A2A push configs, kept and delivered by the gateway (§3.1.7–§3.1.10): a client's config
//! never reaches the agent.
//!
//! - Create, Get, List and Delete are answered here from the ledger, for the task's owner
//!   only (another client's task is TaskNotFound, as everywhere), with at most
//!   `[a2a] max_push_configs_per_task` per task. Every URL passes the webhook guard
//!   (`[webhooks] allow`) before it is stored; a refused one is InvalidParams with the reason.
//! - An inline `configuration.taskPushNotificationConfig` of SendMessage is read and checked
//!   before the agent is called ([`take_inline`]), taken out of the message, and stored once the
//!   agent's answer names the task ([`keep_inline`]).
//! - Every accepted change of the task is then queued for each config in the ledger's atomic
//!   apply, and delivered by the webhook worker (`webhook::worker`, `Sender::send_push`).
//! - The gateway learns of each change the best way the agent offers ([`follow`]): an agent
//!   whose card says `pushNotifications` is given one config per task pointing at
//!   `{callback}/agents/{name}/notifications`, with a token of the gateway's own for that task
//!   ([`ingest`] compares it in constant time); an agent that streams has the task followed on
//!   its one shared stream (`follow.rs`); any other agent's task is polled with GetTask
//!   (`poll.rs`), while it has configs and is not final. The reconciler stays the backstop.

use std::sync::Arc;

use bytes::Bytes;
use hyper::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use subtle::ConstantTimeEq;

use super::frame::Failure;
use super::ledger as a2a_ledger;
use super::to_agent::{self, held_card};
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::request::{read_body, Request};
use crate::ledger::PushPut;
use crate::protocol::a2a::answer::{check_answer, of_task, payload, Payload};
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::push::{self, PushConfig};
use crate::protocol::a2a::{A2aError, Call, ErrorKind, Method};
use crate::protocol::task::Verdict;
use crate::registry::Agent;
use crate::state::State;
use crate::webhook::guard::UrlGuard;

/// The id of the one config the gateway gives an agent that pushes, per task.
pub const GATEWAY_CONFIG_ID: &str = "a2a-gateway";

/// Which URL of the gateway's an agent pushed to.
enum Via {
    /// A task's (`?task=`): its push config, one per task.
    Task(String),
    /// A blocking message's (`?send=`): bound to the task its first push names.
    Send(String),
}

/// The header an agent's push carries the gateway's token in (§4.3.3, as a2a-sdk sends it).
pub const TOKEN_HEADER: &str = "x-a2a-notification-token";

fn invalid(message: impl Into<String>) -> Failure {
    A2aError::new(ErrorKind::InvalidParams, message).into()
}

/// The four push-config methods on `agent`'s task, for the caller.
pub async fn op(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: &Arc<Agent>,
    call: &Call,
) -> Result<Value, Failure> {
    let id = call.task_id().unwrap_or_default();
    // Configs belong to a task the ledger holds: an id it never recorded has none, whatever
    // `passthrough_unknown_tasks` says.
    let Some(record) = a2a_ledger::visible(state, ctx, &agent.cfg.name, false, id).await? else {
        return Err(a2a_ledger::not_found(id));
    };
    let key = a2a_ledger::key(&agent.cfg.name, id);
    let config_id = || call.params.get("id").and_then(Value::as_str).unwrap_or("");
    match call.method {
        Method::CreateTaskPushNotificationConfig => {
            // Without an id, the config's id is the task's (as a2a-sdk's servers do): one
            // config per task, replaced by the next without an id.
            let mut cfg = push::read(&call.params, || id.to_owned())?;
            cfg.version = version_of(ctx);
            guard(state, &cfg.url).await?;
            store(state, &key, &cfg).await?;
            if !record.head.status.is_terminal() {
                follow(state, agent, id).await;
            }
            Ok(cfg.served(id))
        }
        Method::GetTaskPushNotificationConfig => {
            let want = config_id();
            configs(state, &key)
                .await?
                .into_iter()
                .find(|c| c.id == want)
                .map(|c| c.served(id))
                .ok_or_else(|| {
                    A2aError::new(
                        ErrorKind::TaskNotFound,
                        format!("task {id:?} has no push config {want:?}"),
                    )
                    .into()
                })
        }
        Method::ListTaskPushNotificationConfigs => {
            let list: Vec<Value> = configs(state, &key)
                .await?
                .iter()
                .map(|c| c.served(id))
                .collect();
            let mut out = Map::new();
            out.insert("configs".into(), Value::Array(list));
            // At most `max_push_configs_per_task` (bounded): always one page.
            out.insert("nextPageToken".into(), Value::from(""));
            Ok(Value::Object(out))
        }
        Method::DeleteTaskPushNotificationConfig => {
            // Deleting what is not there is not an error: the client's intent holds.
            state.ledger.delete_push_config(&key, config_id()).await?;
            Ok(Value::Object(Map::new()))
        }
        _ => Err(A2aError::new(ErrorKind::UnsupportedOperation, "not a push-config method").into()),
    }
}

async fn configs(state: &State, key: &str) -> Result<Vec<PushConfig>, Failure> {
    Ok(state
        .ledger
        .push_configs(key)
        .await?
        .iter()
        .filter_map(|c| PushConfig::decode(c))
        .collect())
}

/// The webhook guard's verdict on a config URL: its literal address, or every address its
/// name resolves to now (each attempt resolves through the guard again).
async fn guard(state: &State, url: &str) -> Result<(), Failure> {
    let g = UrlGuard::new(&state.config.webhooks.allow).unwrap_or_default();
    // The URL itself (scheme, user info, a literal address): the guard's reason.
    let uri = g
        .check_url(url)
        .map_err(|e| invalid(format!("url: refused: {e}")))?;
    let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
    if host.parse::<std::net::IpAddr>().is_err() {
        // A name: what it resolves to is not told (a client must not map the gateway's
        // network by it), and the look-up is bounded.
        let resolved = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            g.resolve_host(host, uri.port_u16().unwrap_or(0)),
        )
        .await;
        if let Err(why) = resolved
            .map_err(|_| "timed out".to_owned())
            .and_then(|r| r.map_err(|e| e.to_string()))
        {
            tracing::debug!(host, why, "a push config's URL was refused");
            return Err(invalid(format!(
                "url: refused: {host} does not resolve to an address the gateway may reach (public, or in [webhooks] allow)"
            )));
        }
    }
    Ok(())
}

/// Store `cfg` on task `key`; whether it is new there (not a config of the same id replaced).
async fn store(state: &State, key: &str, cfg: &PushConfig) -> Result<bool, Failure> {
    let max = state.config.a2a.max_push_configs_per_task;
    match state
        .ledger
        .put_push_config(key, &cfg.id, Bytes::from(cfg.encode()), max)
        .await?
    {
        PushPut::Stored { created } => Ok(created),
        PushPut::Full => Err(invalid(format!(
            "the task holds {max} push configs already (a2a.max_push_configs_per_task)"
        ))),
        PushPut::NoTask => Err(a2a_ledger::not_found(
            crate::protocol::a2a::split_ledger_key(key).map_or(key, |(_, id)| id),
        )),
    }
}

/// What a send keeps for the agent's first push (`TaskLedger::put_send`'s entry).
#[derive(Serialize, Deserialize)]
pub struct SendEntry {
    /// The token of the gateway's config given to the agent.
    pub token: String,
    /// The client whose message it is (the task's owner).
    pub owner: Option<String>,
    /// The client's inline config, stored on the task once bound.
    pub config: PushConfig,
}

impl SendEntry {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A stored entry, or `None` for bytes that are not one.
    pub fn decode(bytes: &[u8]) -> Option<SendEntry> {
        serde_json::from_slice(bytes).ok()
    }
}

/// The version a config made by this request's client is delivered in: 0.3's, for a 0.3
/// client; none (1.0's) otherwise.
fn version_of(ctx: &Ctx) -> Option<String> {
    ctx.speaks
        .filter(|v| *v == crate::protocol::a2a::v0_3::VERSION)
        .map(str::to_owned)
}

/// SendMessage's inline config, read, checked and guarded before the agent is called, and
/// taken out of the message: the agent never sees it.
pub async fn take_inline(
    state: &State,
    ctx: &Ctx,
    call: &mut Call,
) -> Result<Option<PushConfig>, Failure> {
    let Some(conf) = call
        .params
        .get_mut("configuration")
        .and_then(Value::as_object_mut)
    else {
        return Ok(None);
    };
    let Some(inline) = conf.remove("taskPushNotificationConfig") else {
        return Ok(None);
    };
    let Value::Object(o) = inline else {
        return Ok(None);
    };
    // Without an id, the task's id once the answer names it (`keep_inline`).
    let mut cfg = push::read(&o, String::new).map_err(|mut e| {
        e.message = format!("configuration.taskPushNotificationConfig.{}", e.message);
        Failure::from(e)
    })?;
    cfg.version = version_of(ctx);
    guard(state, &cfg.url).await?;
    Ok(Some(cfg))
}

/// Store a message's inline config for the task the agent's answer (or a stream's first event,
/// or the agent's first push to a send) named, with the task as it is now queued for it, and
/// follow the task when `follows` (a live task answered by SendMessage; a stream tells the
/// gateway the rest itself). A config the task holds already (kept by the agent's first push)
/// is not queued the task again.
pub async fn keep_inline(
    state: &Arc<State>,
    agent: &Arc<Agent>,
    id: &str,
    cfg: &PushConfig,
    follows: bool,
) {
    if keep_config(state, &agent.cfg.name, id, cfg).await && follows {
        follow(state, agent, id).await;
    }
}

/// [`keep_inline`]'s storing: whether the config is kept.
pub(super) async fn keep_config(state: &State, agent: &str, id: &str, cfg: &PushConfig) -> bool {
    let key = a2a_ledger::key(agent, id);
    let named;
    let cfg = if cfg.id.is_empty() {
        named = PushConfig {
            id: push::default_id(id),
            ..cfg.clone()
        };
        &named
    } else {
        cfg
    };
    match store(state, &key, cfg).await {
        Err(e) => {
            tracing::warn!(agent, task_id = id, error = %e.error.message, "an inline push config could not be kept");
            false
        }
        Ok(false) => true,
        Ok(true) => {
            // The config was part of the message that made the task: it hears of the task as
            // it is now too.
            if !matches!(state.ledger.push_current(&key, &cfg.id).await, Ok(true)) {
                tracing::warn!(
                    agent,
                    task_id = id,
                    "the task as it is now was not queued for its inline push config"
                );
            }
            true
        }
    }
}

/// Where an agent reaches the gateway: `callback_url`, else `public_url`.
pub(super) fn callback(state: &State, agent: &Agent) -> Option<String> {
    agent
        .cfg
        .callback_url
        .clone()
        .or_else(|| state.config.public_url.clone())
}

/// Make sure the gateway hears of task `id`'s changes while it has configs, the best way the
/// agent offers: it pushes them to the gateway; else the gateway follows the task's shared
/// stream; else it polls the task.
pub async fn follow(state: &Arc<State>, agent: &Arc<Agent>, id: &str) {
    let held = held_card(agent).ok();
    if let (Some(held), Some(base)) = (&held, callback(state, agent)) {
        if held.pushes() {
            let key = a2a_ledger::key(&agent.cfg.name, id);
            let fresh = format!(
                "{}{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            );
            match state.ledger.push_token(&key, Some(&fresh)).await {
                // Asked already (by this replica or another).
                Ok(Some(t)) if t != fresh => return,
                Ok(Some(t)) if ask_to_push(state, agent, held, id, &base, &t).await => {
                    // What happened before the agent took the config (a fast task may be
                    // over already) is asked for once.
                    super::poll::get_and_apply(state, &state.upstream, agent, id).await;
                    return;
                }
                _ => {}
            }
        }
    }
    if held.is_some_and(|h| h.streams()) && super::follow::start(state, agent, id) {
        return;
    }
    state.poller.watch(&agent.cfg.name, id);
}

/// Give the agent the gateway's own push config of task `id`; whether it took it.
async fn ask_to_push(
    state: &State,
    agent: &Agent,
    held: &HeldCard,
    id: &str,
    base: &str,
    token: &str,
) -> bool {
    let mut params = Map::new();
    params.insert("taskId".into(), Value::from(id));
    params.insert("id".into(), Value::from(GATEWAY_CONFIG_ID));
    // The task is named in the URL, so its token is checked before the body is read.
    let task = crate::protocol::percent::encode_component(id);
    params.insert(
        "url".into(),
        Value::from(format!(
            "{base}/agents/{}/notifications?task={task}",
            agent.cfg.name
        )),
    );
    params.insert("token".into(), Value::from(token));
    let call = Call::new(Method::CreateTaskPushNotificationConfig, params);
    let Ok(holder) = to_agent::owner_of(state, agent, id).await else {
        return false;
    };
    let Ok(out) = to_agent::own_request(agent, held, &holder, &call) else {
        return false;
    };
    let answer = match state
        .upstream
        .exchange(
            out.request,
            agent.cfg.timeout,
            crate::upstream::MAX_AGENT_JSON,
        )
        .await
    {
        Ok((parts, body)) => to_agent::read(&call, &out.sent, &parts, &body),
        Err(e) => {
            tracing::warn!(agent = %agent.cfg.name, task_id = id, error = %e, "could not ask the agent to push; polling the task");
            return false;
        }
    };
    match answer {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(agent = %agent.cfg.name, task_id = id, error = %e.message, "the agent refused the gateway's push config; polling the task");
            false
        }
    }
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(Code::Unauthorized, message)
}

/// `POST /agents/{name}/notifications` of an official A2A agent: a StreamResponse the agent
/// pushes for a task the gateway gave it a config for, with that task's token in
/// `X-A2A-Notification-Token` (compared in constant time). Judged like any answer of the agent
/// and applied to the ledger: a change reaches the task's configs (and subscribers, streams,
/// `/events`) like any other: 202 when taken, 200 for a repeat, 409 when the state machine
/// refuses it.
pub async fn ingest(state: &State, ctx: &mut Ctx, agent: Arc<Agent>, req: Request) -> ApiResult {
    ctx.agent = Some(agent.clone());
    let name = agent.cfg.name.as_str();
    let refuse = |reason: &'static str| {
        state
            .metrics
            .notifications_refused
            .with_label_values(&[name, reason])
            .inc();
    };
    // Who may push here at all: an agent the gateway asks to push (its card takes push configs,
    // and it has a callback address); then the URL the gateway gave it: a task's (its token
    // compared in constant time before the body is read; an unknown task and a wrong token are
    // answered alike), or a blocking message's send (`inline`), whose first push binds it to
    // the task it names.
    let pushes = held_card(&agent).is_ok_and(|h| h.pushes()) && callback(state, &agent).is_some();
    let query = req.uri().query().unwrap_or("");
    let param = |k: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(k))
            .and_then(crate::protocol::percent::decode_query)
            .filter(|v| !v.is_empty())
    };
    let via = match (param("task="), param("send=")) {
        (Some(task), None) => Some(Via::Task(task)),
        (None, Some(send)) => Some(Via::Send(send)),
        _ => None,
    };
    let presented = req
        .headers()
        .get(TOKEN_HEADER)
        .map(|v| v.as_bytes().to_vec());
    let (Some(presented), true, Some(via)) = (presented, pushes, via) else {
        refuse("unauthorized");
        return Err(unauthorized(
            "this route takes the pushes of an agent the gateway gave a push config: its URL names the task (or the message) and X-A2A-Notification-Token carries its token",
        ));
    };
    let wrong_token = || {
        refuse("unauthorized");
        unauthorized(
            "X-A2A-Notification-Token must be the token of the gateway's push config of this task",
        )
    };
    let token_of = |id: &str| {
        let key = a2a_ledger::key(name, id);
        async move { state.ledger.push_token(&key, None).await }
    };
    let matches = |expected: &Option<String>| {
        expected
            .as_ref()
            .is_some_and(|e| bool::from(e.as_bytes().ct_eq(presented.as_slice())))
    };
    if let Via::Task(id) = &via {
        if !matches(&token_of(id).await.map_err(ApiError::from)?) {
            return Err(wrong_token());
        }
    }
    let limit = state
        .config
        .max_body_bytes
        .min(crate::upstream::MAX_AGENT_JSON);
    let (_, body) = read_body(req, limit).await?;
    let event = crate::protocol::json::parse(&body).map_err(|e| {
        refuse("invalid");
        ApiError::from(e)
    })?;
    // In the agent's version: read as its form reads a push.
    let form = held_card(&agent)
        .map(|h| super::wire::of_interface(h.interface.binding, h.interface.version))
        .map_err(|_| ApiError::new(Code::AgentUnavailable, "the agent has no card"))?;
    let mut event = form.read_push(event).map_err(|e| {
        refuse("invalid");
        ApiError::new(Code::InvalidRequest, e.message).with_details(e.details)
    })?;
    // Read into the gateway like any answer of the agent's: its file URLs rewritten first.
    super::files::localize(
        state,
        &agent,
        None,
        super::files::Shape::Response,
        &mut event,
    )
    .await;
    let named = payload(&event)
        .and_then(|p| match p {
            Payload::Task(t) => t.get("id"),
            Payload::StatusUpdate(u) | Payload::ArtifactUpdate(u) => u.get("taskId"),
            Payload::Message(m) => m.get("taskId"),
        })
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let id = match &via {
        Via::Task(id) => id.clone(),
        Via::Send(_) => named.clone(),
    };
    let violations = check_answer(Method::SubscribeToTask, &event, Some(&id));
    let Some(p) = payload(&event).filter(|_| violations.is_empty()) else {
        refuse("invalid");
        return Err(ApiError::new(
            Code::InvalidRequest,
            "the body is not a StreamResponse of the task the URL names",
        )
        .with_details(violations));
    };
    if named != id {
        refuse("invalid");
        return Err(ApiError::new(
            Code::InvalidRequest,
            "the event is about another task than the one the URL names",
        ));
    }
    let key = a2a_ledger::key(name, &id);
    let record = state.ledger.get(&key).await.map_err(ApiError::from)?;
    // A send's push: the task's token once bound (every push after the first), else the
    // send's, binding it to this task.
    let bound = match &via {
        Via::Send(send) if !matches(&token_of(&id).await.map_err(ApiError::from)?) => {
            let first = record.is_none() && matches!(p, Payload::Task(_));
            if record.is_none() && !first {
                return Err(wrong_token());
            }
            let entry = state
                .ledger
                .bind_send(send, &id)
                .await
                .map_err(ApiError::from)?
                .filter(|(_, task)| *task == id)
                .and_then(|(e, _)| SendEntry::decode(&e))
                .filter(|e| matches(&Some(e.token.clone())));
            let Some(entry) = entry else {
                return Err(wrong_token());
            };
            // Never another client's task, whatever the agent names.
            if let Some(r) = &record {
                if r.owner.as_deref() != entry.owner.as_deref() {
                    return Err(wrong_token());
                }
            }
            Some(entry)
        }
        _ => None,
    };
    let record = match (record, &bound) {
        (Some(r), _) => r,
        (None, None) => {
            refuse("unauthorized");
            return Err(unauthorized("no such task"));
        }
        // The send's first push, a Task: recorded from itself, for the message's client.
        (None, Some(_)) => crate::ledger::Record {
            agent: name.into(),
            head: crate::protocol::task::Head {
                status: crate::protocol::task::Status::Submitted,
                updated_ms: 0,
            },
            task: Bytes::from_static(b"{}"),
            owner: bound
                .as_ref()
                .and_then(|b| b.owner.as_deref())
                .map(Into::into),
            created_ms: 0,
            replica: None,
        },
    };
    // The event folded into the task as the ledger holds it (a2a-sdk's task-manager rules). An
    // event that changes no state (an artifact, a message) moves no status time: it is applied
    // at the recorded one, a refresh when it changed what a receiver reads (a duplicate when
    // not), so the task's configs hear of it now and the agent's next stamped state is not
    // stale.
    let content = matches!(p, Payload::ArtifactUpdate(_) | Payload::Message(_));
    let mut task = crate::protocol::json::parse(&record.task).map_err(ApiError::from)?;
    crate::protocol::a2a::stream::fold(&mut task, p);
    let Some(head) = of_task(&task) else {
        refuse("invalid");
        return Err(ApiError::new(
            Code::InvalidRequest,
            "the event leaves no readable task",
        ));
    };
    let at_least = if content { record.head.updated_ms } else { 0 };
    let owner = bound.as_ref().and_then(|b| b.owner.as_deref());
    let applied = a2a_ledger::apply_news(state, name, &head, &task, at_least, owner, Some(ctx))
        .await
        .map_err(ApiError::from)?;
    if let Some(entry) = &bound {
        // Bound: the send's token is the task's from now on, and the client's config is kept
        // on the task, hearing of it as it is now.
        if let Err(e) = state.ledger.push_token(&key, Some(&entry.token)).await {
            tracing::warn!(agent = name, task_id = %id, error = %e, "a send's token was not kept for its task");
        }
        keep_config(state, name, &id, &entry.config).await;
    }
    if let Verdict::Refused(reason) = applied.verdict {
        refuse(reason.as_str());
        let code = if reason == crate::protocol::task::Refusal::Terminal {
            Code::TaskTerminal
        } else {
            Code::TransitionRefused
        };
        return Err(ApiError::new(
            code,
            format!("the ledger refused the update: {}", reason.as_str()),
        ));
    }
    // Answered as a Clawpedia push is: 202 for news taken, 200 for a repeat.
    let (status, verdict) = match applied.verdict {
        Verdict::Duplicate => (StatusCode::OK, "duplicate"),
        Verdict::New => (StatusCode::ACCEPTED, "new"),
        Verdict::Refresh => (StatusCode::ACCEPTED, "refresh"),
        _ => (StatusCode::ACCEPTED, "transition"),
    };
    state
        .metrics
        .notifications_ingested
        .with_label_values(&[name])
        .inc();
    let body = serde_json::json!({"task_id": id, "status": applied.record.head.status.as_str(), "verdict": verdict});
    Ok(crate::http::response::json(
        status,
        serde_json::to_vec(&body).unwrap_or_default(),
    ))
}
