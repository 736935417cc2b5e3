//! An agent's card, whatever its protocol: what the shared registry and catalog need of it
//! (the id it may also be routed by, the name and capabilities listed in `/agents`, the card
//! as served) and why a fetched card is refused. Each protocol checks and compiles its own
//! card; this is the one table that says which does which ([`Card::compile`]).

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::a2a;
use super::clawpedia;
use super::task::TaskRef;
use super::Violation;

pub use super::{CardRefusal as Refusal, InvalidCard};
use crate::config::Protocol;

/// A card that passed its protocol's checks.
#[derive(Debug)]
pub enum Card {
    /// A Clawpedia A2A 1.0 card, with its compiled schemas.
    Clawpedia(Arc<clawpedia::card::Card>),
    /// An official A2A 1.0 card, with the interface the gateway talks to, and the card as the
    /// agent served it (served per request: its URLs are the gateway's).
    A2a(Arc<a2a::held::HeldCard>, Bytes),
}

impl Card {
    /// Check and compile a fetched card the way `protocol` defines it (on the blocking pool:
    /// a Clawpedia card compiles JSON Schemas).
    pub fn compile(
        protocol: Protocol,
        prefer: a2a::card::Prefer,
        doc: Value,
    ) -> Result<Card, InvalidCard> {
        match protocol {
            Protocol::Clawpedia => {
                clawpedia::card::Card::compile(doc).map(|c| Card::Clawpedia(Arc::new(c)))
            }
            Protocol::A2a => {
                let held = a2a::held::HeldCard::compile(doc, prefer)?;
                // The card as the agent served it, serialized once (`served`); the A2A routes
                // serve it rewritten, per request.
                let raw = Bytes::from(serde_json::to_vec(&held.doc).unwrap_or_default());
                Ok(Card::A2a(Arc::new(held), raw))
            }
        }
    }

    /// The agent's other name in routes (`/agents/{agent_id}/...`), if its protocol has one.
    pub fn agent_id(&self) -> Option<&str> {
        match self {
            Card::Clawpedia(c) => Some(&c.agent_id),
            // An A2A card names no id of its own: its agent is routed by name only.
            Card::A2a(..) => None,
        }
    }

    /// The name `/agents` lists.
    pub fn display_name(&self) -> &str {
        match self {
            Card::Clawpedia(c) => &c.display_name,
            Card::A2a(c, _) => &c.display_name,
        }
    }

    /// The capabilities `/agents` lists.
    pub fn capabilities(&self) -> &[String] {
        match self {
            Card::Clawpedia(c) => &c.capabilities,
            Card::A2a(c, _) => &c.capabilities,
        }
    }

    /// The card as the gateway serves it (its secrets removed), serialized once; for an A2A
    /// card, as the agent served it (its routes build the served card per request).
    pub fn served(&self) -> &Bytes {
        match self {
            Card::Clawpedia(c) => &c.served,
            Card::A2a(_, raw) => raw,
        }
    }

    /// Something about the card an operator should hear of when it is fetched (an agent whose
    /// pushes would bypass this gateway, say), for an agent routed as `name`.
    pub fn warning(&self, name: &str) -> Option<String> {
        match self {
            Card::Clawpedia(c) => c.ingest_warning(name),
            Card::A2a(..) => None,
        }
    }

    /// A document the agent answered about a task (`task_id`, when the request named one):
    /// what the ledger reads of it (`None`: nothing recordable), and what is wrong with it
    /// under this card at `now_ms`.
    pub fn read_task(
        &self,
        doc: &Value,
        task_id: Option<&str>,
        now_ms: i64,
    ) -> (Option<TaskRef>, Vec<Violation>) {
        match self {
            Card::Clawpedia(c) => {
                let expect =
                    clawpedia::conform::TaskExpect::under(Some(c.as_ref()), task_id, now_ms);
                (
                    clawpedia::task::task_ref(doc),
                    clawpedia::conform::check_task(doc, expect),
                )
            }
            // A2A answers are read by the A2A routes (`http::a2a`), never through here.
            Card::A2a(..) => (None, Vec::new()),
        }
    }

    /// Whether a document the agent answered names another agent than this card does (its
    /// `agent_id`): the agent restarted under a new identity, and its card is out of date.
    pub fn names_other_agent(&self, doc: &Value) -> bool {
        match self {
            Card::Clawpedia(c) => doc
                .get("agent_id")
                .and_then(Value::as_str)
                .is_some_and(|id| id != c.agent_id),
            Card::A2a(..) => false,
        }
    }

    /// Where the agent serves a task's event stream (a GET, resumed with `Last-Event-ID`).
    pub fn stream_path(&self, task_id: &str) -> String {
        match self {
            Card::Clawpedia(_) | Card::A2a(..) => format!("/tasks/{task_id}/stream"),
        }
    }

    /// Where the agent answers a task's current state (a GET).
    pub fn task_path(&self, task_id: &str) -> String {
        match self {
            Card::Clawpedia(_) | Card::A2a(..) => format!("/tasks/{task_id}"),
        }
    }

    /// The Clawpedia card, for the Clawpedia routes.
    pub fn clawpedia(&self) -> Option<Arc<clawpedia::card::Card>> {
        match self {
            Card::Clawpedia(c) => Some(c.clone()),
            Card::A2a(..) => None,
        }
    }

    /// The official A2A card, for the A2A routes.
    pub fn a2a(&self) -> Option<Arc<a2a::held::HeldCard>> {
        match self {
            Card::A2a(c, _) => Some(c.clone()),
            Card::Clawpedia(_) => None,
        }
    }
}
