//! Step 5, **record**: what the agent said about a task, through the ledger's one rule, with
//! the caller as the owner of a task its create made. Also the one way news about a task
//! enters the ledger from the HTTP edge, for every protocol ([`apply`]).

use bytes::Bytes;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;

use crate::http::context::Ctx;
use crate::http::error::{ApiError, Code};
use crate::ledger::{apply_counted, Applied, Doc, LedgerError, Origin};
use crate::protocol::task::{Refusal, TaskRef, Verdict};
use crate::protocol::Violation;
use crate::registry::Agent;
use crate::state::State;
use crate::telemetry;

/// Record what an agent said about a task, through the ledger's rule. Returns the body to pass on:
/// the agent's own if the ledger accepted it (or it repeats what is recorded), the recorded task
/// if it was refused; AGENT_PROTOCOL_VIOLATION if the task is recorded under another agent.
///
/// `task` is what the agent's protocol read from the document `raw` (`None`: it could not be
/// read as a recordable task). `asked` is the task the request was about (get, cancel): a
/// document about another task is refused in every conformance mode.
pub async fn record(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    asked: Option<&str>,
    task: Option<TaskRef>,
    raw: &Bytes,
) -> Result<(Option<Verdict>, Bytes), ApiError> {
    let horizon = crate::protocol::time::now_ms() + crate::protocol::time::MAX_SKEW_MS;
    let task = task.filter(|t| t.head.updated_ms <= horizon);
    let Some(task) = task else {
        // Cannot be judged (report mode let it through): it proves nothing, and it must not
        // contradict a record either, so where the task is recorded the record answers.
        if let Some(id) = asked {
            if let Some(r) = state.ledger.get(id).await? {
                return Ok((None, r.task));
            }
        }
        return Ok((None, raw.clone()));
    };
    if let Some(want) = asked.filter(|id| *id != task.task_id) {
        // Whatever the conformance mode: an answer about another task is never passed on as
        // the answer about this one, nor recorded.
        state
            .metrics
            .protocol_violations
            .with_label_values(&[agent.cfg.name.as_str(), "task_identity", "enforce"])
            .inc();
        return Err(ApiError::new(
            Code::AgentProtocolViolation,
            format!(
                "asked about task {want}, agent {:?} answered about task {}",
                agent.cfg.name, task.task_id
            ),
        )
        .with_details(vec![Violation::new(
            "/task_id",
            "const",
            format!("expected {want}"),
        )]));
    }
    let name = agent.cfg.name.as_str();
    // The answer to a create (nothing asked about) names the task the caller now owns.
    let owner = if asked.is_none() {
        ctx.caller.owner().map(|o| &**o)
    } else {
        None
    };
    // A slice of the agent's body: copied, not to pin the body's buffer.
    let doc = crate::ledger::Doc::copied(raw);
    let applied = apply(state, name, Some(ctx), &task, doc, owner).await?;
    if let (Some(me), Some(holder)) = (owner, applied.record.owner.as_deref()) {
        if me != holder {
            // A create answered with a task another client created (an agent replaying an
            // answer, say): never handed to this client, whatever the verdict.
            state
                .metrics
                .protocol_violations
                .with_label_values(&[name, "task_owner", "enforce"])
                .inc();
            return Err(ApiError::new(
                Code::AgentProtocolViolation,
                format!("agent {name:?} answered a create with a task another client created"),
            )
            .with_details(vec![Violation::new(
                "/task_id",
                "task_owner",
                format!("task {} belongs to another client", task.task_id),
            )]));
        }
    }
    match applied.verdict {
        Verdict::Refused(Refusal::ForeignAgent) => {
            // The standing record is another agent's task: it is no answer to this request, and
            // passing the agent's document on would let it speak for a task it does not own.
            Err(ApiError::new(
                Code::AgentProtocolViolation,
                format!("agent {name:?} answered about a task that belongs to another agent"),
            )
            .with_details(vec![Violation::new(
                "/task_id",
                Refusal::ForeignAgent.as_str(),
                format!("task {} is recorded under another agent", task.task_id),
            )]))
        }
        // A duplicate repeats the record's state and time; the record's document is the one
        // every later read returns, so it is the one to pass on now as well.
        Verdict::Refused(_) | Verdict::Duplicate => {
            Ok((Some(applied.verdict), applied.record.task))
        }
        v => Ok((Some(v), raw.clone())),
    }
}

/// The one way news about a task enters the ledger from the HTTP edge, for every protocol
/// (agents' answers, their pushes, the gateway's own polls): apply `doc` as `task` of `agent`,
/// and count and log what the state machine decided; within the request `ctx` when there is
/// one (its id, and a `ledger apply` span of its trace that the change's deliveries continue).
/// `owner`: the client whose message or create this answers.
pub async fn apply(
    state: &State,
    agent: &str,
    ctx: Option<&Ctx>,
    task: &TaskRef,
    doc: Doc,
    owner: Option<&str>,
) -> Result<Applied, LedgerError> {
    let request_id = ctx.and_then(|c| c.request_id.to_str().ok());
    let span = ctx.and_then(|c| c.trace.as_ref()).map(|t| {
        // A create learns its task id here: the request's span gets it too.
        t.set(KeyValue::new(telemetry::TASK_ID, task.task_id.clone()));
        t.child(
            "ledger apply",
            SpanKind::Internal,
            vec![
                KeyValue::new(telemetry::TASK_ID, task.task_id.clone()),
                KeyValue::new(telemetry::AGENT, agent.to_owned()),
            ],
        )
    });
    // The deliveries of this change are the apply's children.
    let stored = span.as_ref().map(|s| s.stored());
    // Where the task lives, for an agent whose calls are pinned: the replica that answered.
    // The request's own agent when it is this one (no lookup on the hot path).
    let own = ctx
        .and_then(|c| c.agent.as_ref())
        .filter(|a| a.cfg.name == agent);
    let pins = match own {
        Some(a) => a.cfg.pins(),
        None => state.registry.by_name(agent).is_some_and(|a| a.cfg.pins()),
    };
    let replica = super::replica::recorded(pins, ctx);
    let applied = apply_counted(
        state.ledger.as_ref(),
        &state.metrics,
        agent,
        task,
        doc,
        owner,
        Origin {
            request_id,
            trace: stored.as_deref(),
            replica: replica.as_ref().map(|r| &*r.address),
        },
    )
    .await;
    if let (Some(r), Ok(a)) = (&replica, &applied) {
        if a.verdict == crate::protocol::task::Verdict::New {
            r.held_one();
        }
    }
    if let Some(span) = &span {
        match &applied {
            Ok(a) => span.set(KeyValue::new(telemetry::VERDICT, a.verdict.label())),
            Err(e) => span.fail(e.to_string()),
        }
    }
    applied
}
