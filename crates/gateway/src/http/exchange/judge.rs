//! Step 4, **judge**: whether what the agent answered is within its protocol. A broken answer
//! is counted and logged; in `enforce` mode it becomes 502 AGENT_PROTOCOL_VIOLATION, in
//! `report` mode it passes (and what cannot be read one way is not recorded).

use serde_json::Value;

use crate::config::Conformance;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, Code};
use crate::protocol::json::{self, JsonError};
use crate::protocol::Violation;
use crate::registry::Agent;
use crate::state::State;

/// A non-conformant agent answer: counted and logged; refused in `enforce` mode.
pub fn conformance(
    state: &State,
    agent: &Agent,
    ctx: &Ctx,
    kind: &'static str,
    found: Vec<Violation>,
) -> Result<(), ApiError> {
    if found.is_empty() {
        return Ok(());
    }
    let mode = match agent.cfg.conformance {
        Conformance::Enforce => "enforce",
        Conformance::Report => "report",
    };
    state
        .metrics
        .protocol_violations
        .with_label_values(&[agent.cfg.name.as_str(), kind, mode])
        .inc();
    tracing::warn!(agent = %agent.cfg.name, request_id = ?ctx.request_id, kind, mode, first = %found[0].message, count = found.len(), "agent response violates A2A 1.0");
    match agent.cfg.conformance {
        Conformance::Report => Ok(()),
        Conformance::Enforce => Err(ApiError::new(
            Code::AgentProtocolViolation,
            format!(
                "agent {:?} answered outside the A2A 1.0 protocol ({kind})",
                agent.cfg.name
            ),
        )
        .with_details(found)),
    }
}

/// Whether `doc`, an agent's answer, names another agent than its card: then the card is out
/// of date (the agent restarted under a new `agent_id`), and its refresh loop is asked to
/// fetch it now (at most once per `registry::REFETCH_EVERY`), so that the answers after it are
/// judged under the card the agent serves now.
pub fn check_identity(agent: &Agent, card: &crate::protocol::card::Card, doc: &Value) {
    if card.names_other_agent(doc) && agent.ask_refetch() {
        tracing::info!(agent = %agent.cfg.name, "an answer names another agent_id than the card's; fetching the card again");
    }
}

/// The agent's answer as one JSON document (`protocol::json::parse`). An answer that is not JSON,
/// or names a key twice, is a conformance failure: 502 in enforce mode; `None` in report mode,
/// where the answer is relayed as it is and not recorded (the gateway records no document it
/// cannot read one way).
pub fn parse_agent_json(
    agent: &Agent,
    ctx: &Ctx,
    state: &State,
    kind: &'static str,
    body: &[u8],
) -> Result<Option<Value>, ApiError> {
    match json::parse(body) {
        Ok(v) => Ok(Some(v)),
        Err(e) => conformance(state, agent, ctx, kind, vec![json_violation(&e)]).map(|()| None),
    }
}

/// What is wrong with an agent's answer that is not one JSON document, as a violation.
pub fn json_violation(e: &JsonError) -> Violation {
    match e {
        JsonError::Syntax(_) => Violation::new("", "type", format!("response is not JSON: {e}")),
        JsonError::NumberOutOfRange { .. } => {
            Violation::new("", "number", format!("response has a {e}"))
        }
        JsonError::DuplicateKey { .. } => {
            Violation::new(e.pointer(), "duplicate_key", format!("response has a {e}"))
        }
    }
}
