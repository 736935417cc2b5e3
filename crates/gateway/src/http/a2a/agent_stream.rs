//! An official A2A agent's event stream, read: the answer to a stream request (its stream, or
//! the error it answered instead), its events one at a time within the event-stream rules, each
//! read back in the agent's wire form. What the stream's events mean is the feed's (`feed`).

use std::collections::VecDeque;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::StatusCode;
use serde_json::Value;

use super::files::{self, Shape};
use super::to_agent;
use super::wire::Sent;
use crate::protocol::a2a::{A2aError, Call, Method};
use crate::protocol::sse::Event;
use crate::registry::Agent;
use crate::state::State;
use crate::stream::framing::Decoder;
use crate::upstream::MAX_AGENT_JSON;

/// The gateway's own `SubscribeToTask` of task `id` (a shared stream's upstream, or its
/// resubscription).
pub fn subscribe_call(id: &str) -> Call {
    let mut params = serde_json::Map::new();
    params.insert("id".to_owned(), Value::from(id));
    Call::new(Method::SubscribeToTask, params)
}

/// Why an agent's stream could not be read on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// It broke the event-stream rules (an event or a line over `max_event_bytes`): the
    /// agent's fault, not worth a second connection.
    #[error("{0}")]
    Broken(String),
    /// The connection failed mid-stream (the agent was killed or restarted, a proxy cut it):
    /// like the stream's end, which a new subscription may get past.
    #[error("the agent's stream failed: {0}")]
    Cut(String),
}

/// Reads one agent stream's events, one at a time, cut as the agent's form cuts them (SSE
/// events, gRPC messages: `wire::Form::stream_decoder`).
pub struct Reader {
    /// The decoder (bounded by `streams.max_event_bytes`).
    decoder: Box<dyn Decoder>,
    /// Events decoded and not yet handed out.
    pending: VecDeque<Event>,
}

impl Reader {
    /// A reader of a new stream sent as `sent`, events at most `max_event_bytes`.
    pub fn new(sent: &Sent, max_event_bytes: usize) -> Reader {
        Reader {
            decoder: sent.stream_decoder(max_event_bytes),
            pending: VecDeque::new(),
        }
    }

    /// The next event; `Ok(None)` at the stream's end, `Err` when it broke the event-stream
    /// rules or the connection failed (see [`ReadError`]).
    pub async fn next(&mut self, body: &mut Incoming) -> Result<Option<Event>, ReadError> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(Some(e));
            }
            match body.frame().await {
                Some(Ok(frame)) => {
                    let mut out = Vec::new();
                    let read = match frame.into_data() {
                        Ok(data) => self.decoder.feed(&data, &mut out),
                        Err(frame) => match frame.into_trailers() {
                            Ok(trailers) => self.decoder.trailers(&trailers, &mut out),
                            Err(_) => Ok(()),
                        },
                    };
                    read.map_err(ReadError::Broken)?;
                    self.pending.extend(out);
                }
                Some(Err(e)) => return Err(ReadError::Cut(e.to_string())),
                None => return Ok(None),
            }
        }
    }
}

/// The agent's answer to a stream request: its event stream, or what it answered instead
/// read as the error it is (an agent refuses a stream with a plain error answer).
pub async fn stream_or_answer(
    res: hyper::Response<Incoming>,
    call: &Call,
    sent: &Sent,
    timeout: Duration,
) -> Result<Incoming, A2aError> {
    if res.status() == StatusCode::OK && sent.is_stream(res.headers()) {
        return Ok(res.into_body());
    }
    let (parts, body) = res.into_parts();
    // Bounded in time too: an agent that sends a head and stalls its body holds nothing long.
    let body = tokio::time::timeout(timeout, crate::upstream::read_limited(body, MAX_AGENT_JSON))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    match to_agent::read(call, sent, &parts, &body) {
        Err(e) => Err(e),
        Ok(_) => Err(A2aError::invalid_agent_response(vec![
            crate::protocol::Violation::new(
                "",
                "stream",
                "the agent answered a stream request with one answer, not an event stream",
            ),
        ])),
    }
}

/// One event of the agent's stream read back in its form: the StreamResponse, its file URLs
/// rewritten (`files::localize`; `owner`: the client a Message outside any task goes to), or
/// the error the agent sent (`event: error`, or an error in the form's envelope), as the agent's.
pub async fn read_event(
    (state, agent, owner): (&State, &Agent, Option<&str>),
    e: &Event,
    method: Method,
    sent: &Sent,
) -> Result<Value, A2aError> {
    let mut event = sent.read_event(method, e.data.as_bytes(), e.event == "error")?;
    files::localize(state, agent, owner, Shape::Response, &mut event).await;
    Ok(event)
}
