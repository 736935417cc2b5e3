//! A2A 1.0 as data: types, the task state machine, schema compilation and the conformance checks
//! of what agents send. Nothing in here touches a socket, a clock or a store, so all of it is
//! unit-tested directly and shared by every edge (HTTP handlers, notifications, streams).

pub mod a2a;
pub mod budget;
pub mod card;
pub mod conform;
pub mod json;
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
