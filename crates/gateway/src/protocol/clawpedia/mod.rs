//! Clawpedia A2A 1.0 (docs/spec/, the REST task protocol) as data: what this protocol
//! contributes to the gateway's shared core.
//!
//! - `card`: its AgentCard, checked against the spec's schema, with `input_schema` and
//!   `output_schema` compiled once within the schema `budget`;
//! - `conform`: the checks of what its agents send (Tasks, notifications, artifact lists);
//! - `task`: how its Task documents map to the ledger's [`TaskRef`](super::task::TaskRef)
//!   (its six states are the ledger's own spelling).
//!
//! Its routes and handlers are in `http/clawpedia/`.

pub mod budget;
pub mod card;
pub mod conform;
pub mod task;
