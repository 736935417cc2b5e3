//! The protocols as data, and the seam between them and the shared core. Nothing in here
//! touches a socket, a clock or a store, so all of it is unit-tested directly.
//!
//! **What a protocol contributes** (one folder here, one under the http module):
//! - its card type and checks (`clawpedia::card`), registered in the one table of
//!   [`card::Card`], which the shared registry calls to check a fetched card;
//! - how its agents' answers are checked (`clawpedia::conform`);
//! - how its task documents map to the ledger's record (`clawpedia::task::task_ref` gives a
//!   [`task::TaskRef`]: the id, and the state in the ledger's words at a time; the ledger
//!   keeps the document itself as it came, with its agent and owner);
//! - its routes and handlers, and how it talks to an agent (`http/clawpedia/`).
//!
//! **What is shared, knowing no protocol:** the ledger's vocabulary and its one rule
//! ([`task`]: the states, final or interrupted, `judge`), strict JSON ([`json`]), event streams
//! ([`sse`]) and time ([`time`]) here; and outside this module the registry's mechanics, the
//! ledger and its change feed, the stream hub, the webhook queue, admission, limits, metrics
//! and telemetry.

pub mod a2a;
pub mod card;
pub mod clawpedia;
pub mod digest;
pub mod json;
pub mod node;
pub mod origin;
pub mod percent;
pub mod sse;
pub mod task;
pub mod time;

use serde::Serialize;

/// One problem found in a JSON document: where (`instance_path`, a JSON pointer), which rule
/// (`schema_path`) and what is wrong. This is the shape of every `details` entry the gateway
/// returns for schema and conformance failures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Where in the document: a JSON pointer (empty for the root).
    pub instance_path: String,
    /// Which rule failed: a JSON pointer into the schema, or the name of the check.
    pub schema_path: String,
    /// What is wrong, for a person.
    pub message: String,
}

impl Violation {
    /// A violation at `instance_path` of rule `schema_path`.
    pub fn new(
        instance_path: impl Into<String>,
        schema_path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Violation {
            instance_path: instance_path.into(),
            schema_path: schema_path.into(),
            message: message.into(),
        }
    }
}

/// Upper bound on the violations reported for one document, so a hostile 1 MiB body cannot make
/// the gateway build a response many times larger.
pub const MAX_VIOLATIONS: usize = 100;

/// Why a fetched card was refused, in the words of `a2a_gateway_card_refusals_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardRefusal {
    /// The card is not a valid card of its protocol, or its schemas do not compile.
    Invalid,
    /// The card is over a limit of the gateway's (its size, or the schema budget).
    Budget,
    /// An official A2A card naming no interface the gateway speaks (JSONRPC or HTTP+JSON at
    /// protocolVersion 1.0, or not the configured `binding`).
    NoSupportedInterface,
}

impl CardRefusal {
    /// The metric label: `invalid`, `budget` or `no_supported_interface`.
    pub fn as_str(self) -> &'static str {
        match self {
            CardRefusal::Invalid => "invalid",
            CardRefusal::Budget => "budget",
            CardRefusal::NoSupportedInterface => "no_supported_interface",
        }
    }
}

/// Why a fetched card was refused.
#[derive(Debug, Clone)]
pub struct InvalidCard {
    /// Which kind of refusal.
    pub kind: CardRefusal,
    /// Why, for a person.
    pub message: String,
    /// Each problem found in the card.
    pub details: Vec<Violation>,
}
