//! How an A2A subscriber reads its topic: each stored StreamResponse framed for the
//! subscriber's wire form ([`Framing`], through the form's [`Frames`]), and the gateway's own endings of a stream ([`Ending`]),
//! written as `event: error` in that binding.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Frame;

use crate::protocol::a2a::stream as a2a;
use crate::protocol::a2a::A2aError;

/// How a client's wire form writes a stream's events (implemented by each form, in
/// `http::a2a::wire`): the stream hub frames events through it and names no form.
pub trait Frames: Sync + Send + fmt::Debug {
    /// A stored event as the subscriber reads it; `id`: what its form echoes (a JSON-RPC id,
    /// written as JSON).
    fn event(&self, id: Option<&str>, stored: &Bytes) -> Bytes;
    /// The gateway's last event of a stream, `event: error` in the subscriber's form.
    fn error(&self, id: Option<&str>, e: &A2aError) -> Bytes;
    /// The last frame of a stream: `e`, the gateway's ending, if it ended it; `None` at a
    /// plain end. An SSE form writes the ending as [`Frames::error`] and nothing else; gRPC
    /// ends every stream with trailers (its status).
    fn last(&self, id: Option<&str>, e: Option<&A2aError>) -> Option<Frame<Bytes>> {
        e.map(|e| Frame::data(self.error(id, e)))
    }
    /// Whether the topic's pings (SSE comments) reach this subscriber: not over gRPC, whose
    /// connection has HTTP/2's own.
    fn pings(&self) -> bool {
        true
    }
}

/// How an agent's stream is cut into events, by the agent's wire form (an SSE parser; gRPC's
/// messages and final status): the feed reads every form's streams through it.
pub trait Decoder: Send + Sync {
    /// Data as it came; the events it completes appended to `out`. An error: the stream broke
    /// its form's rules (why, for the operator).
    fn feed(
        &mut self,
        data: &[u8],
        out: &mut Vec<crate::protocol::sse::Event>,
    ) -> Result<(), String>;
    /// The stream's trailers (gRPC's status), events they complete appended to `out`.
    fn trailers(
        &mut self,
        _trailers: &hyper::HeaderMap,
        _out: &mut Vec<crate::protocol::sse::Event>,
    ) -> Result<(), String> {
        Ok(())
    }
}

impl Decoder for crate::protocol::sse::Parser {
    fn feed(
        &mut self,
        data: &[u8],
        out: &mut Vec<crate::protocol::sse::Event>,
    ) -> Result<(), String> {
        crate::protocol::sse::Parser::feed(self, data, out).map_err(|e| e.to_string())
    }
}

/// How one subscriber reads its topic's events.
#[derive(Debug, Clone)]
pub enum Framing {
    /// As stored: a Clawpedia topic's events, and the gateway's own subscribers of an A2A
    /// topic (the neutral StreamResponse; the endings a google.rpc.Status).
    Stored,
    /// In a client's wire form, with what that form echoes.
    Form(&'static dyn Frames, Option<Box<str>>),
}

impl Framing {
    /// A stored A2A frame as this subscriber reads it.
    pub fn frame(&self, stored: &Bytes) -> Bytes {
        match self {
            Framing::Form(form, id) => form.event(id.as_deref(), stored),
            Framing::Stored => stored.clone(),
        }
    }

    /// The gateway's last event of an A2A stream, `e` (`None`: the stream's plain end), as
    /// this subscriber reads it; `None` when it reads nothing more.
    pub(super) fn last(&self, e: Option<&A2aError>) -> Option<Frame<Bytes>> {
        match self {
            Framing::Form(form, id) => form.last(id.as_deref(), e),
            Framing::Stored => {
                e.map(|e| Frame::data(a2a::error_event(e.to_status().to_string().as_bytes())))
            }
        }
    }

    /// Whether this subscriber reads the topic's pings.
    pub(super) fn pings(&self) -> bool {
        match self {
            Framing::Form(form, _) => form.pings(),
            Framing::Stored => true,
        }
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
    /// The agent ended its stream with an error of its own: relayed as it came to a
    /// subscriber that reads agents' texts, withheld from any other ([`A2aError::withheld`]).
    Agent(Arc<A2aError>),
}

impl Ending {
    /// The error a subscriber reads: `agent_texts`, whether it may read the agent's own words;
    /// `agent`, the agent's name.
    pub fn error(&self, agent_texts: bool, agent: &str) -> A2aError {
        match self {
            Ending::Draining => ending(
                DRAINING,
                503,
                "the gateway is draining its streams: subscribe to the task again",
            ),
            Ending::Upstream(why) => ending(UPSTREAM_ERROR, 502, why),
            Ending::Agent(e) if agent_texts || !e.agents => (**e).clone(),
            Ending::Agent(e) => e.withheld(agent),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::a2a::ErrorKind;

    /// An agent's error ending a stream reaches a subscriber that reads agents' texts as it
    /// came, and any other withheld; the gateway's own endings are every subscriber's alike.
    #[test]
    fn an_agents_ending_is_withheld_from_a_subscriber_without_the_right() {
        let own = A2aError::new(
            ErrorKind::InternalError,
            "crashed at http://127.0.0.1:18103/x",
        )
        .the_agents_own();
        let e = Ending::Agent(Arc::new(own.clone()));
        assert_eq!(e.error(true, "echo"), own);
        let withheld = e.error(false, "echo");
        assert_eq!(withheld.kind, ErrorKind::InternalError);
        assert!(!withheld.message.contains("18103"), "{withheld:?}");
        let framed = Framing::Stored.last(Some(&withheld)).expect("a frame");
        let framed = framed.into_data().expect("data");
        assert!(!String::from_utf8_lossy(&framed).contains("18103"));
        let up = Ending::Upstream("it broke".into());
        assert_eq!(up.error(false, "echo"), up.error(true, "echo"));
    }
}
