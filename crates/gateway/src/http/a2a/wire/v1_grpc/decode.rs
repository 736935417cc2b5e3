//! A gRPC agent's server stream cut into events for the feed (`stream::framing::Decoder`):
//! each StreamResponse message read into its ProtoJSON (an event's data, as an SSE form's
//! event carries it), and a final status other than OK an `error` event whose data is the
//! status in the HTTP+JSON binding's shape (`a2a_grpc::status::read`).

use a2a_grpc::{frame::Deframer, json, status};
use hyper::HeaderMap;

use crate::protocol::sse::Event;
use crate::stream::framing::Decoder;

/// Reads one gRPC stream's messages, each at most `max` bytes.
pub struct StreamDecoder {
    messages: Deframer,
}

impl StreamDecoder {
    /// A decoder of a new stream.
    pub fn new(max: usize) -> StreamDecoder {
        StreamDecoder {
            messages: Deframer::new(max),
        }
    }
}

fn event(event: &str, data: String) -> Event {
    Event {
        event: event.to_owned(),
        data,
        id: None,
    }
}

impl Decoder for StreamDecoder {
    fn feed(&mut self, data: &[u8], out: &mut Vec<Event>) -> Result<(), String> {
        self.messages.push(data);
        let desc = a2a_grpc::stream_response();
        while let Some(m) = self.messages.next_message().map_err(|e| e.to_string())? {
            let v = json::to_json(&desc, &m)?;
            out.push(event("message", v.to_string()));
        }
        Ok(())
    }

    fn trailers(&mut self, trailers: &HeaderMap, out: &mut Vec<Event>) -> Result<(), String> {
        if self.messages.holds_partial() {
            return Err("the stream ended inside a message".to_owned());
        }
        let text = |name: &str| trailers.get(name).and_then(|v| v.to_str().ok());
        let code = text("grpc-status")
            .and_then(|c| c.trim().parse::<u32>().ok())
            .ok_or("the stream's trailers carry no grpc-status")?;
        if code != status::OK {
            let (body, _) = status::read(
                code,
                text("grpc-message").unwrap_or(""),
                text("grpc-status-details-bin"),
            );
            out.push(event("error", body.to_string()));
        }
        Ok(())
    }
}
