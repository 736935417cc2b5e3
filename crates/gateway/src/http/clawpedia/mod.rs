//! The Clawpedia A2A 1.0 routes (docs/spec/): create, get, cancel, artifacts, task streams and
//! the agents' push notifications. Each handler reads the request in this protocol's words,
//! then talks to the agent and records what it says through the shared steps of
//! `http::exchange` (a create through `http::create`); the documents' checks are
//! `protocol::clawpedia`'s.

pub mod artifacts;
pub mod create;
pub mod notifications;
pub mod streams;
pub mod tasks;

use std::sync::Arc;

use crate::http::error::{ApiError, Code};
use crate::protocol::clawpedia::card::Card;
use crate::registry::Agent;

/// The agent's serving card, read as a Clawpedia card: 503 AGENT_UNAVAILABLE while it has none
/// (`registry::NoCard`), 502 AGENT_PROTOCOL_VIOLATION if the agent speaks another protocol.
pub fn card_of(agent: &Agent) -> Result<Arc<Card>, ApiError> {
    agent.card()?.clawpedia().ok_or_else(|| {
        ApiError::new(
            Code::AgentProtocolViolation,
            format!(
                "agent {:?} does not speak the Clawpedia protocol",
                agent.cfg.name
            ),
        )
    })
}
