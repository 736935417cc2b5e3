//! How an A2A subscriber reads its topic: each stored StreamResponse framed for the
//! subscriber's binding ([`Framing`]), and the gateway's own endings of a stream ([`Ending`]),
//! written as `event: error` in that binding.

use std::sync::Arc;

use bytes::Bytes;

use crate::protocol::a2a::stream as a2a;
use crate::protocol::a2a::A2aError;

/// How one subscriber reads its topic's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    /// As stored (a Clawpedia topic).
    Stored,
    /// The bare StreamResponse (A2A over HTTP+JSON).
    Rest,
    /// A JSON-RPC response to the subscriber's request id, written as JSON.
    JsonRpc(Box<str>),
}

impl Framing {
    /// The subscriber's JSON-RPC id, written as JSON, if it has one.
    fn rpc_id(&self) -> Option<&str> {
        match self {
            Framing::JsonRpc(id) => Some(id),
            _ => None,
        }
    }

    /// A stored A2A frame as this subscriber reads it.
    pub(super) fn frame(&self, stored: &Bytes) -> Bytes {
        match self {
            Framing::JsonRpc(id) => a2a::jsonrpc_frame(id, stored)
                .map(Bytes::from)
                .unwrap_or_else(|| stored.clone()),
            _ => stored.clone(),
        }
    }

    /// The gateway's last event of an A2A stream, `event: error` in this subscriber's binding.
    pub(super) fn error(&self, e: &A2aError) -> Bytes {
        Bytes::from(a2a::error_frame(self.rpc_id(), e))
    }
}

/// Why the gateway ends an A2A topic's streams itself (each subscriber gets it as an
/// `event: error` whose ErrorInfo reason says which).
#[derive(Debug, Clone)]
pub enum Ending {
    /// The gateway is draining (SIGTERM), or the agent changed by a reload: subscribe again.
    Draining,
    /// The agent's stream broke the protocol, or the agent went: why.
    Upstream(Arc<str>),
    /// The agent ended its stream with an error of its own: relayed as it came.
    Agent(Arc<A2aError>),
}

impl Ending {
    /// The error a subscriber reads.
    pub fn error(&self) -> A2aError {
        match self {
            Ending::Draining => ending(
                DRAINING,
                503,
                "the gateway is draining its streams: subscribe to the task again",
            ),
            Ending::Upstream(why) => ending(UPSTREAM_ERROR, 502, why),
            Ending::Agent(e) => (**e).clone(),
        }
    }
}

/// One of the gateway's endings: its reason as the ErrorInfo's and as the message's first word
/// (a2a-sdk keeps only the message of an error code it does not know, the gateway's -32000).
pub(super) fn ending(reason: &str, status: u16, why: &str) -> A2aError {
    A2aError::gateway(reason, status, format!("{reason}: {why}"))
}

/// The ErrorInfo reasons of the gateway's own endings of an A2A stream.
pub const DRAINING: &str = "DRAINING";
/// See [`DRAINING`].
pub const UPSTREAM_ERROR: &str = "UPSTREAM_ERROR";
/// See [`DRAINING`].
pub const SLOW_CONSUMER: &str = "SLOW_CONSUMER";
/// See [`DRAINING`].
pub const ACCESS_REVOKED: &str = "ACCESS_REVOKED";
