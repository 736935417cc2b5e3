//! Response bodies: one enum so the hot path needs no boxing, a file body sent in 64 KiB frames
//! (zero-copy slices of the `Bytes` already held) so a proxy's streaming is observable, and an
//! event-stream body fed by a bounded channel that adds pings when the stream is quiet.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

use super::state::{iso, now_ms};

/// Frame size for file bodies.
pub(crate) const CHUNK: usize = 64 * 1024;

/// Every body the agent sends.
pub(crate) enum OutBody {
    /// A whole body in one frame (or none).
    Full(Option<Bytes>),
    /// A known body sent in `CHUNK`-sized frames.
    Chunked(Bytes),
    /// A server-sent-event stream (or gRPC's messages, ending in trailers).
    Events(EventBody),
    /// A whole body, then trailers (a gRPC answer: its message, then its status).
    Trailed(Option<Bytes>, Option<hyper::HeaderMap>),
}

impl OutBody {
    pub(crate) fn empty() -> Self {
        OutBody::Full(None)
    }

    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        OutBody::Full((!bytes.is_empty()).then_some(bytes))
    }
}

impl Body for OutBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            OutBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            OutBody::Chunked(rest) => {
                if rest.is_empty() {
                    return Poll::Ready(None);
                }
                let n = rest.len().min(CHUNK);
                Poll::Ready(Some(Ok(Frame::data(rest.split_to(n)))))
            }
            OutBody::Events(ev) => ev.poll_next(cx),
            OutBody::Trailed(b, t) => Poll::Ready(match b.take() {
                Some(b) => Some(Ok(Frame::data(b))),
                None => t.take().map(|t| Ok(Frame::trailers(t))),
            }),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            OutBody::Full(b) => b.is_none(),
            OutBody::Chunked(rest) => rest.is_empty(),
            OutBody::Events(_) => false,
            OutBody::Trailed(b, t) => b.is_none() && t.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            OutBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            OutBody::Chunked(rest) => SizeHint::with_exact(rest.len() as u64),
            OutBody::Events(_) | OutBody::Trailed(..) => SizeHint::default(),
        }
    }
}

/// An event stream: what is pushed on the channel, plus `event: ping` after `every` of quiet.
/// Ends when the channel's senders are gone (task closed, evicted, or agent stopped).
pub(crate) struct EventBody {
    rx: mpsc::Receiver<Bytes>,
    ping: Option<(Duration, Pin<Box<Sleep>>)>,
    /// Sent when the channel ends (a gRPC stream's status).
    trailers: Option<hyper::HeaderMap>,
}

impl EventBody {
    /// `every == 0` means no pings.
    pub(crate) fn new(rx: mpsc::Receiver<Bytes>, every: Duration) -> Self {
        let ping = (!every.is_zero()).then(|| (every, Box::pin(tokio::time::sleep(every))));
        EventBody {
            rx,
            ping,
            trailers: None,
        }
    }

    /// This stream, ending with `trailers` once its events are sent.
    pub(crate) fn ending_with(mut self, trailers: hyper::HeaderMap) -> Self {
        self.trailers = Some(trailers);
        self
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let frame = match self.rx.poll_recv(cx) {
            Poll::Ready(Some(bytes)) => bytes,
            Poll::Ready(None) => {
                return Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
            }
            Poll::Pending => {
                let quiet_for_long = match &mut self.ping {
                    Some((_, sleep)) => sleep.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                if !quiet_for_long {
                    return Poll::Pending;
                }
                ping_event()
            }
        };
        if let Some((every, sleep)) = &mut self.ping {
            sleep.as_mut().reset(Instant::now() + *every);
        }
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }
}

fn ping_event() -> Bytes {
    sse_event("ping", &format!("{{\"timestamp\":\"{}\"}}", iso(now_ms())))
}

/// Formats one well-formed SSE event: CR/LF cannot leak out of the event name, and every line
/// of `data` (whatever its line ending) becomes its own `data:` line.
pub(crate) fn sse_event(event: &str, data: &str) -> Bytes {
    let mut out = String::with_capacity(event.len() + data.len() + 16);
    out.push_str("event: ");
    out.extend(event.chars().filter(|c| *c != '\r' && *c != '\n'));
    out.push('\n');
    let normalized = data.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}
