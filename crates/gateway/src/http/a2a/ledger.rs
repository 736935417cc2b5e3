//! What the official A2A routes keep in the ledger, and how they ask it.
//!
//! - **Tasks** are keyed `{agent}/{id}` ([`key`]): an A2A task id is the agent's, and two agents
//!   may hand out the same one. A Clawpedia id never holds a `/` (`route::valid_id`), so the two
//!   protocols' records cannot meet, and a reload that changes an agent's protocol leaves its old
//!   tasks where the new protocol's routes do not look.
//! - **Contexts** belong to the client whose message first named or received them: a claim in
//!   the ledger (`TaskLedger::claim_context`), taken atomically, so two replicas racing for one
//!   context give it to one client, living while a task in it is live and a retention after
//!   the last, never given to another client while it lives, and counted against its owner's
//!   `max_contexts`, which is checked before the agent is called.
//! - **A recorded document** is bounded in two parts (`protocol::a2a::kept`): its artifacts by
//!   `[a2a] max_artifact_bytes_per_task`, the rest by `max_task_document_bytes` (the history
//!   going first). Past either, what was cut is said in the record and counted
//!   (`a2a_gateway_artifacts_truncated_total{agent}`): a reader never takes a cut task for a
//!   whole one.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::frame::Failure;
use crate::http::context::Ctx;
use crate::ledger::{self, Applied, ContextClaim, ContextHold, Record};
use crate::protocol::a2a::answer::TaskHead;
use crate::protocol::a2a::kept::{self, Bounds};
use crate::protocol::a2a::{A2aError, ErrorKind, TaskState};
use crate::protocol::node::Json;
use crate::protocol::task::{Head, Status, TaskRef};
use crate::protocol::time::now_ms;
use crate::protocol::Violation;
use crate::state::State;

/// The ledger key of A2A task `id` of `agent` (see `protocol::a2a::ledger_key`).
pub fn key(agent: &str, id: &str) -> String {
    crate::protocol::a2a::ledger_key(agent, id)
}

/// The ledger's state for an A2A state.
pub fn status_of(state: TaskState) -> Status {
    state.status()
}

/// The A2A state the ledger records as `status`.
pub fn state_of(status: Status) -> TaskState {
    TaskState::of_status(status)
}

/// The task `id` of `agent` as the caller may see it: its record, or TaskNotFoundError for an
/// unknown task (unless the agent passes unknown ids through: then `None`) and for another
/// client's, worded alike.
pub async fn visible(
    state: &State,
    ctx: &Ctx,
    agent: &str,
    passthrough: bool,
    id: &str,
) -> Result<Option<Record>, Failure> {
    let record = state.ledger.get(&key(agent, id)).await?;
    match &record {
        Some(r) if ctx.caller.sees(r.owner.as_deref()) => {
            // Its later calls go to the replica that holds it.
            if let Some(a) = state.registry.by_name(agent) {
                crate::http::exchange::replica::pin(ctx, a, r);
            }
            Ok(record)
        }
        // An id the gateway has not seen goes to an agent that passes them through only for a
        // caller that may see tasks without an owner (no clients, or `all_tasks`), as on the
        // Clawpedia routes: another could reach, and then own, a task created elsewhere.
        None if passthrough && ctx.caller.sees(None) => Ok(None),
        Some(_) => {
            state
                .metrics
                .auth_failures
                .with_label_values(&["not_owner"])
                .inc();
            Err(not_found(id))
        }
        None => Err(not_found(id)),
    }
}

/// TaskNotFoundError for `id`: the same words for an unknown task and another client's. They
/// say "not found" as the SDKs' servers do: a client that reads only the message (a gRPC status
/// read by its text, as the conformance kit's gRPC client does) reads the same.
pub fn not_found(id: &str) -> Failure {
    A2aError::new(
        ErrorKind::TaskNotFound,
        format!(
            "task {:?} not found: it is not known to the gateway",
            id.chars().take(64).collect::<String>()
        ),
    )
    .into()
}

/// Whose a context is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextOwner {
    /// The caller's, or no clients are configured.
    Caller,
    /// Held for the caller's message on its way: kept by [`keep_context`] once the message is
    /// answered, or freed by [`drop_context`] (a new claim, or the caller's own held by
    /// another of its messages).
    Claimed(PendingContext),
    /// Another client's.
    Other,
}

/// A context held for a message on its way (see [`ContextOwner::Claimed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingContext {
    agent: String,
    context: String,
    owner: String,
}

/// How long a context an answer names is kept: `task_retention` after its last task goes, and a
/// final task goes `task_retention` after it ends (a live task keeps its context alive itself,
/// through the ledger); a Message-only context, `task_retention` after its last message.
pub fn context_keep(state: &State, with_task: bool) -> std::time::Duration {
    let r = state.config.task_retention;
    if with_task {
        r * 2
    } else {
        r
    }
}

/// The caller's `max_contexts` (none without clients).
fn max_contexts(ctx: &Ctx) -> Option<u64> {
    match &ctx.caller {
        crate::auth::Caller::Client(c) => Some(c.max_contexts),
        _ => None,
    }
}

/// Whether the caller may start one more context (a message that names none: the agent will
/// make one): asked before the agent is called. Past its `max_contexts`, TOO_MANY_CONTEXTS;
/// a full store, LEDGER_FULL.
pub async fn context_room(state: &State, ctx: &Ctx) -> Result<(), Failure> {
    let (Some(owner), Some(max)) = (ctx.caller.owner(), max_contexts(ctx)) else {
        return Ok(());
    };
    state.ledger.context_room(owner, max).await?;
    Ok(())
}

/// Hold `context_id` of `agent` for the caller's message (for `hold`), before the agent is
/// called: a new claim counts against the caller's `max_contexts` (past it,
/// TOO_MANY_CONTEXTS); another client's is [`ContextOwner::Other`]. Without clients every
/// context is everyone's.
pub async fn hold_context(
    state: &State,
    ctx: &Ctx,
    agent: &str,
    context_id: &str,
    hold: std::time::Duration,
) -> Result<ContextOwner, Failure> {
    let Some(owner) = ctx.caller.owner() else {
        return Ok(ContextOwner::Caller);
    };
    let claim = state
        .ledger
        .claim_context(
            agent,
            context_id,
            owner,
            ContextHold::Hold(hold),
            max_contexts(ctx),
        )
        .await?;
    Ok(match claim {
        ContextClaim::Other => ContextOwner::Other,
        ContextClaim::Claimed | ContextClaim::Owned => ContextOwner::Claimed(PendingContext {
            agent: agent.to_owned(),
            context: context_id.to_owned(),
            owner: owner.to_string(),
        }),
    })
}

/// The context an agent's answer names, kept for the caller for `keep` (the agent made it or
/// took the message in it: never refused for the caller's bound); another client's is
/// [`ContextOwner::Other`].
pub async fn answered_in(
    state: &State,
    ctx: &Ctx,
    agent: &str,
    context_id: &str,
    keep: std::time::Duration,
) -> Result<ContextOwner, Failure> {
    let Some(owner) = ctx.caller.owner() else {
        return Ok(ContextOwner::Caller);
    };
    let claim = state
        .ledger
        .claim_context(agent, context_id, owner, ContextHold::Keep(keep), None)
        .await?;
    Ok(match claim {
        ContextClaim::Other => ContextOwner::Other,
        ContextClaim::Claimed | ContextClaim::Owned => ContextOwner::Caller,
    })
}

/// Keep a held context: its message was answered.
pub async fn keep_context(state: &State, p: &PendingContext, keep: std::time::Duration) {
    let kept = state
        .ledger
        .claim_context(
            &p.agent,
            &p.context,
            &p.owner,
            ContextHold::Keep(keep),
            None,
        )
        .await;
    match kept {
        Ok(ContextClaim::Other) => {
            tracing::warn!(context = %p.context, "a held context was another client's when kept")
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(context = %p.context, error = %e, "a context claim was not kept; it lapses with its hold")
        }
    }
}

/// Free a held context: its message was not sent on, or not answered.
pub async fn drop_context(state: &State, p: &PendingContext) {
    if let Err(e) = state
        .ledger
        .drop_context(&p.agent, &p.context, &p.owner)
        .await
    {
        tracing::warn!(context = %p.context, error = %e, "a context claim was not freed; it lapses with its hold");
    }
}

/// The bounds of a recorded Task: `max_task_document_bytes` for the Task without its
/// artifacts, `[a2a] max_artifact_bytes_per_task` for its artifacts (`protocol::a2a::kept`).
pub fn bounds(state: &State) -> Bounds {
    Bounds {
        task: state.config.max_task_document_bytes,
        artifacts: state.config.a2a.max_artifact_bytes_per_task,
    }
}

/// Task `task` of `agent` as the ledger keeps it (`protocol::a2a::kept`): whole within its
/// bounds, else cut down, what was cut said in it and counted.
pub fn bounded(state: &State, agent: &str, task: &dyn Json) -> Bytes {
    bounded_whole(state, agent, task).0
}

/// [`bounded`], and the Task as kept when it was cut (none: the document is the task's JSON
/// whole, which an answer can reuse rather than write again; a cut one is handed back so that
/// whoever goes on folding into the task folds into what the ledger holds).
pub(super) fn bounded_whole(state: &State, agent: &str, task: &dyn Json) -> (Bytes, Option<Value>) {
    let w = written(task, bounds(state), 0, b"", b"");
    count_cut(state, agent, w.cut);
    (w.raw, w.kept)
}

/// Count the artifacts `agent`'s task had cut (nothing to look up for a task that had none).
fn count_cut(state: &State, agent: &str, cut: u64) {
    if cut > 0 {
        state
            .metrics
            .artifacts_truncated
            .with_label_values(&[agent])
            .inc_by(cut);
    }
}

/// The SendMessageResponse's opening, `{"task":`, and its close.
const TASK_OPEN: &[u8] = br#"{"task":"#;
const TASK_CLOSE: &[u8] = b"}";

/// A Task written once, for the ledger and for the answer: the SendMessageResponse
/// `{"task":…}` around it, and the Task's slice of it, which the ledger keeps (one buffer for
/// the record, the answer and the messageId's replay of it). `hint`: about how long the Task's
/// JSON is (the agent's body), so that it is written without growing its buffer. A Task over
/// its bounds is cut down as [`bounded`] cuts it, and has no answer written around it.
fn framed(state: &State, agent: &str, task: &dyn Json, hint: usize) -> (Bytes, Option<Bytes>) {
    let w = written(task, bounds(state), hint, TASK_OPEN, TASK_CLOSE);
    count_cut(state, agent, w.cut);
    (w.raw, w.whole)
}

/// A task document written for the ledger.
struct Written {
    /// What the ledger keeps.
    raw: Bytes,
    /// Within the bounds: the whole buffer, `raw` with its opening and close around it.
    whole: Option<Bytes>,
    /// Over them: the Task as kept, and the artifacts cut.
    kept: Option<Value>,
    cut: u64,
}

/// The one writer of a task document for the ledger: `task` between `open` and `close` in one
/// buffer of about `hint` bytes, and the task's slice of it; over its bounds, the task cut down
/// (`kept::keep`) and no whole. A Task under both bounds costs one write and one comparison.
fn written(task: &dyn Json, b: Bounds, hint: usize, open: &[u8], close: &[u8]) -> Written {
    let mut w = Vec::with_capacity(hint.min(b.most()) + open.len() + close.len());
    w.extend_from_slice(open);
    task.write_json(&mut w);
    let len = w.len() - open.len();
    if !kept::fits(task, len, b) {
        drop(w);
        let k = kept::keep(task, b);
        return Written {
            raw: exact(serde_json::to_vec(&k.task).unwrap_or_default()),
            whole: None,
            kept: Some(k.task),
            cut: k.cut,
        };
    }
    w.extend_from_slice(close);
    let whole = exact(w);
    Written {
        raw: whole.slice(open.len()..open.len() + len),
        whole: Some(whole),
        kept: None,
        cut: 0,
    }
}

/// The SendMessageResponse `{"task":…}` around a Task's JSON.
pub fn task_response(task: &[u8]) -> Bytes {
    let mut w = Vec::with_capacity(task.len() + TASK_OPEN.len() + TASK_CLOSE.len());
    w.extend_from_slice(TASK_OPEN);
    w.extend_from_slice(task);
    w.extend_from_slice(TASK_CLOSE);
    Bytes::from(w)
}

/// A written document as the ledger keeps it: the in-process ledger holds the bytes it is
/// given for the task's lifetime, so a buffer that grew past its length by more than an
/// eighth is copied into one of its size.
fn exact(v: Vec<u8>) -> Bytes {
    if v.capacity() - v.len() > v.len() / 8 + 16 {
        Bytes::copy_from_slice(&v)
    } else {
        Bytes::from(v)
    }
}

/// What the ledger records of an A2A task's head: its key, its state, and its status time. A
/// missing timestamp is the time of recording; so is one further ahead than the clock skew
/// the gateway allows (`MAX_SKEW_MS`): a far-future time would make every later update of the
/// task stale, freezing it.
///
/// `task` is the Task the head was read from: its content digest goes with it
/// (`answer::content_of`).
pub fn task_ref(agent: &str, head: &TaskHead<'_>, task: &dyn Json) -> TaskRef {
    let now = now_ms();
    let updated_ms = head
        .timestamp_ms
        .filter(|t| *t <= now + crate::protocol::time::MAX_SKEW_MS)
        .unwrap_or(now);
    TaskRef {
        task_id: key(agent, head.id),
        head: Head {
            status: status_of(head.state),
            updated_ms,
        },
        context: (!head.context_id.is_empty()).then(|| head.context_id.into()),
        content: crate::protocol::a2a::answer::content_of(task),
    }
}

/// What recording an agent's Task gave: the verdict, and which document to answer with (the
/// agent's, or the ledger's when it refused the update: the client sees the ledger's state).
pub struct Recorded {
    /// The ledger's verdict.
    pub applied: Applied,
    /// The SendMessageResponse written around the agent's Task, whose slice the ledger was
    /// given; none when the Task was over the bound (the ledger was given less).
    framed: Option<Bytes>,
    /// Whether the client sees the agent's Task (else the ledger's record).
    agents: bool,
}

impl Recorded {
    /// The Task to relay; `task` is the agent's, as recorded.
    pub fn task(&self, task: &Value) -> Value {
        if self.agents {
            return task.clone();
        }
        crate::protocol::json::parse(&self.applied.record.task).unwrap_or_else(|_| task.clone())
    }

    /// The SendMessageResponse `{"task":…}` to relay, written: the bytes written for the
    /// ledger when they are the agent's Task whole, so the answer does not write the Task a
    /// second time.
    pub fn task_response(&self, task: &dyn Json) -> Bytes {
        let agents = || {
            let mut w = Vec::new();
            task.write_json(&mut w);
            task_response(&w)
        };
        match (self.agents, &self.framed) {
            (true, Some(framed)) => framed.clone(),
            (true, None) => agents(),
            // A refusal, the rare path: the record is read to be sure it is one document.
            (false, _) => match crate::protocol::json::parse(&self.applied.record.task) {
                Ok(_) => task_response(&self.applied.record.task),
                Err(_) => agents(),
            },
        }
    }
}

/// Record the agent's Task `task` (read as `head`) of `agent` through the ledger's one rule,
/// for `owner` when the caller's message created it. A missing `status.timestamp` is recorded
/// as now. `hint`: about how many bytes the Task's JSON takes (the agent's body), 0 if unknown.
pub async fn record(
    state: &State,
    ctx: &Ctx,
    agent: &str,
    head: &TaskHead<'_>,
    task: &dyn Json,
    owner: Option<&str>,
    hint: usize,
) -> Result<Recorded, Failure> {
    let mut task_ref = task_ref(agent, head, task);
    if head.timestamp_ms.is_none() && task_ref.head.status == Status::Submitted {
        // A SUBMITTED without a time (a2a-sdk's agents stamp none) can only be a task's first
        // state, and the agent made it after this request began: recorded at "now", it would
        // be later than the agent's own stamped WORKING made meanwhile, and make that stale
        // (the task would stay SUBMITTED in the ledger). Recorded at the request's start.
        task_ref.head.updated_ms = ctx.started_ms().min(task_ref.head.updated_ms);
    }
    // Another client's task is not moved by an answer to this caller's request, nor shown to
    // it (an agent that answers about another task, in report mode too). Owners never change,
    // so the check holds for the apply below. A caller that sees every task (no clients, or
    // `all_tasks`; `sees(None)` is exactly that) has no other client's task to be kept from.
    let recorded = if ctx.caller.sees(None) {
        None
    } else {
        state.ledger.get(&task_ref.task_id).await?
    };
    if let Some(r) = recorded {
        if !ctx.caller.sees(r.owner.as_deref()) {
            return Err(invalid_answer(
                "/id",
                "owner",
                "the agent answered about a task of another client",
            ));
        }
    }
    let (raw, framed) = framed(state, agent, task, hint);
    let doc = ledger::Doc::written(raw);
    let applied =
        crate::http::exchange::apply(state, agent, Some(ctx), &task_ref, doc, owner).await?;
    // Refused, or a duplicate of a final task: what the ledger holds is what the client sees
    // (a live task's duplicate is the agent's, which may say more at the same time).
    let duplicate = matches!(applied.verdict, crate::protocol::task::Verdict::Duplicate);
    let final_duplicate = duplicate && applied.record.head.status.is_terminal();
    let agents = applied.verdict.is_accepted() || (duplicate && !final_duplicate);
    Ok(Recorded {
        applied,
        framed,
        agents,
    })
}

/// Apply a Task of `agent` that is news of the gateway's own asking or an agent's push (no
/// client's answer: no owner, but for the first push of a blocking message's send, which
/// names the message's client), through the ledger's one rule, bounded like every recorded
/// document; recorded at `at_least` ms at the earliest (0: as its status says). `ctx`: the
/// push's request, none for the gateway's own asking.
pub async fn apply_news(
    state: &State,
    agent: &str,
    head: &TaskHead<'_>,
    task: &Value,
    at_least: i64,
    owner: Option<&str>,
    ctx: Option<&Ctx>,
) -> Result<Applied, crate::ledger::LedgerError> {
    let mut task_ref = task_ref(agent, head, task);
    task_ref.head.updated_ms = task_ref.head.updated_ms.max(at_least);
    if head.timestamp_ms.is_none() && task_ref.head.status == Status::Submitted {
        // A SUBMITTED without a time (a2a-sdk stamps none) of a task the ledger knows: applied
        // at "now" it would make the agent's stamped next state, made before now, stale. Of a
        // task still SUBMITTED it is applied at the recorded time (news only if its content
        // changed); of a task past it, it says nothing new.
        if let Some(record) = state.ledger.get(&task_ref.task_id).await? {
            if record.head.status != Status::Submitted {
                return Ok(Applied {
                    verdict: crate::protocol::task::Verdict::Duplicate,
                    record,
                    push_dropped: 0,
                });
            }
            task_ref.head.updated_ms = record.head.updated_ms.max(at_least);
        }
    }
    let doc = ledger::Doc::written(bounded(state, agent, task));
    crate::http::exchange::apply(state, agent, ctx, &task_ref, doc, owner).await
}

/// Whether task `id` is held in the ledger for another client than the caller's under any of
/// the A2A agents (a new task an agent hands out must not be one the ledger keeps for someone
/// else, on whatever agent). Without an owner (no clients) nobody else holds anything, and the
/// agents are not even listed.
pub async fn held_by_another(state: &State, ctx: &Ctx, id: &str) -> Result<bool, Failure> {
    let Some(me) = ctx.caller.owner() else {
        return Ok(false);
    };
    let agents: Vec<Arc<str>> = state
        .registry
        .agents()
        .iter()
        .filter(|a| a.cfg.protocol == crate::config::Protocol::A2a)
        .map(|a| Arc::from(a.cfg.name.as_str()))
        .collect();
    Ok(records_under(state, &agents, id).await?.iter().any(|r| {
        r.as_ref()
            .and_then(|r| r.owner.as_deref())
            .is_some_and(|o| o != &**me)
    }))
}

/// The records of task `id` under each of `agents`, in their order: one ledger read each, all
/// at once (on Redis, one round trip's wait rather than one per agent).
pub async fn records_under(
    state: &State,
    agents: &[Arc<str>],
    id: &str,
) -> Result<Vec<Option<Record>>, Failure> {
    let keys: Vec<String> = agents.iter().map(|a| key(a, id)).collect();
    let reads = keys.iter().map(|k| state.ledger.get(k));
    futures_util::future::join_all(reads)
        .await
        .into_iter()
        .map(|r| r.map_err(Failure::from))
        .collect()
}

/// A recorded Task with at most `history_length` messages of history (the last ones; 0: none),
/// as GetTask answers it.
pub fn with_history(mut task: Value, history_length: Option<u64>) -> Value {
    if let (Some(n), Some(o)) = (history_length, task.as_object_mut()) {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if n == 0 {
            o.remove("history");
        } else if let Some(Value::Array(h)) = o.get_mut("history") {
            let drop = h.len().saturating_sub(n);
            h.drain(..drop);
        }
    }
    task
}

/// InvalidAgentResponseError with one violation.
pub fn invalid_answer(at: &str, rule: &str, message: impl Into<String>) -> Failure {
    A2aError::invalid_agent_response(vec![Violation::new(at, rule, message)]).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The bounds with `task` for the Task without its artifacts, and `artifacts` for them.
    fn b(task: usize, artifacts: usize) -> Bounds {
        Bounds { task, artifacts }
    }

    /// What the ledger keeps of `t` at `b` (and how many artifacts it cut).
    fn kept_at(t: &dyn Json, b: Bounds) -> (Bytes, u64) {
        let w = written(t, b, 0, b"", b"");
        (w.raw, w.cut)
    }

    #[test]
    fn keys_states_and_bounds() {
        use crate::protocol::a2a::split_ledger_key;
        assert_eq!(key("echo", "a/b:c"), "echo/a/b:c");
        assert_eq!(split_ledger_key("echo/a/b:c"), Some(("echo", "a/b:c")));
        assert_eq!(split_ledger_key("clawpedia-id"), None);
        for s in TaskState::ALL {
            assert_eq!(state_of(status_of(s)), s);
            assert_eq!(status_of(s).is_terminal(), s.is_final());
            assert_eq!(status_of(s).is_interrupted(), s.is_interrupted());
        }
        let t = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
            "history": [{"text": "x".repeat(2000)}], "artifacts": [{"a": 1}]});
        let read = |raw: &Bytes| serde_json::from_slice::<Value>(raw).expect("json");
        assert_eq!(read(&kept_at(&t, b(1 << 20, 1 << 20)).0), t);
        let kept = read(&kept_at(&t, b(500, 1 << 20)).0);
        assert!(kept.get("history").is_none());
        assert_eq!(kept["artifacts"], json!([{"a": 1}]));
        // The rest cut to its least, the artifacts kept all the same: they have a bound of
        // their own.
        let kept = read(&kept_at(&t, b(10, 1 << 20)).0);
        assert_eq!(kept["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(kept["artifacts"], json!([{"a": 1}]));
        // Artifacts over theirs: the history kept (the rest is within its own), nothing
        // counted as cut but what was.
        let (raw, cut) = kept_at(&t, b(1 << 20, 5));
        assert_eq!(read(&raw)["history"], t["history"]);
        assert_eq!(cut, 1);
        // Read in place (members out of key order, as a2a-sdk's agents write them): the same
        // bytes kept at every bound.
        let doc = format!(
            r#"{{"status":{{"state":"TASK_STATE_COMPLETED"}},"id":"t","history":[{{"text":"{}"}}],"contextId":"c","artifacts":[{{"a":1}}]}}"#,
            "x".repeat(2000)
        );
        let node = crate::protocol::json::read_in_place(doc.as_bytes()).expect("a node");
        for at in [
            b(1 << 20, 1 << 20),
            b(500, 1 << 20),
            b(10, 1 << 20),
            b(1 << 20, 5),
        ] {
            assert_eq!(kept_at(&node, at), kept_at(&t, at), "bounds {at:?}");
        }
    }

    #[test]
    fn a_task_is_written_once_for_the_ledger_and_the_answer() {
        let t = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"},
            "history": [{"text": "x".repeat(2000)}]});
        // A Task past the task bound by its artifacts alone is within both bounds all the
        // same: written once too.
        let mut large = t.clone();
        large["artifacts"] = json!([{"artifactId": "a", "parts": [{"text": "y".repeat(5000)}]}]);
        for (t, at) in [(&t, b(1 << 20, 1 << 20)), (&large, b(2100, 5100))] {
            for hint in [0, 10, 2100, 1 << 16] {
                let w = written(t, at, hint, TASK_OPEN, TASK_CLOSE);
                let (raw, framed) = (w.raw, w.whole.expect("within the bounds"));
                assert!(w.kept.is_none() && w.cut == 0);
                let read: Value = serde_json::from_slice(&raw).expect("json");
                assert_eq!(&read, t);
                assert_eq!(
                    serde_json::from_slice::<Value>(&framed).expect("json"),
                    json!({ "task": t })
                );
                // The ledger's bytes are the Task's slice of the answer, not a second copy.
                let at = raw.as_ptr() as usize - framed.as_ptr() as usize;
                assert_eq!(at, TASK_OPEN.len(), "a slice of the answer (hint {hint})");
                assert_eq!(raw.len() + TASK_OPEN.len() + 1, framed.len());
            }
        }
        // Over the bound: cut as `bounded` cuts it, and no answer written around it.
        let w = written(&t, b(500, 1 << 20), 100, TASK_OPEN, TASK_CLOSE);
        assert!(w.whole.is_none());
        assert_eq!(w.raw, kept_at(&t, b(500, 1 << 20)).0);
        assert_eq!(
            w.kept.as_ref().map(|k| k.get("history").is_none()),
            Some(true)
        );
        // One byte over either bound is over.
        let len = serde_json::to_vec(&large).expect("json").len();
        let arts = serde_json::to_vec(&large["artifacts"]).expect("json").len();
        let rest = len - arts - kept::MEMBER_BYTES;
        assert!(written(&large, b(rest, arts), 0, b"", b"").whole.is_some());
        assert!(written(&large, b(rest - 1, arts), 0, b"", b"")
            .whole
            .is_none());
        assert!(written(&large, b(rest, arts - 1), 0, b"", b"")
            .whole
            .is_none());
    }

    #[test]
    fn history_length_keeps_the_last_messages() {
        let t = json!({"id": "t", "history": [1, 2, 3]});
        assert_eq!(with_history(t.clone(), None)["history"], json!([1, 2, 3]));
        assert_eq!(with_history(t.clone(), Some(2))["history"], json!([2, 3]));
        assert!(with_history(t.clone(), Some(0)).get("history").is_none());
        assert_eq!(with_history(t, Some(9))["history"], json!([1, 2, 3]));
    }
}
