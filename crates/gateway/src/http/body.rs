//! The gateway's response body: a buffer it built, or an agent's body streamed straight through.
//! An enum rather than a boxed trait object: no allocation per response on the hot path.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::limits::Pass;

/// The error a response body fails with: whatever broke under it (the agent's connection, an idle
/// cut).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response the gateway sends.
pub enum Body {
    /// A buffer the gateway built; `None` once sent, or when empty.
    Full(Option<Bytes>),
    /// An agent's body, cut if the agent goes quiet for longer than its idle limit: a stalled
    /// agent must not hold the client's connection (and a connection slot) forever.
    Stream(Box<Relayed>),
    /// A subscriber of a task's shared event stream.
    Events(Box<crate::stream::topic::Subscription>),
    /// Frames a task of the gateway's own produces (`/events`); ends when it drops the sender.
    Channel(tokio::sync::mpsc::Receiver<Bytes>),
    /// A buffer and then trailers: a gRPC answer (its message, then `grpc-status`). Boxed: a
    /// header map is large, and every other body would carry its size.
    Trailed(Box<(Option<Bytes>, Option<hyper::HeaderMap>)>),
}

/// An agent's body being relayed, with the deadline that cuts it when the agent goes quiet.
pub struct Relayed {
    inner: Incoming,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    /// The exchange's hold on its agent (`max_in_flight`): released when the body ends, fails
    /// or is dropped, since the agent is busy with the exchange until then.
    pass: Option<Pass>,
}

impl Body {
    /// A body with no bytes.
    pub fn empty() -> Body {
        Body::Full(None)
    }

    /// A body of these bytes (empty bytes give an empty body).
    pub fn full(b: impl Into<Bytes>) -> Body {
        let b = b.into();
        Body::Full((!b.is_empty()).then_some(b))
    }

    /// `data` (none when empty), then `trailers`.
    pub fn trailed(data: Bytes, trailers: hyper::HeaderMap) -> Body {
        Body::Trailed(Box::new((
            (!data.is_empty()).then_some(data),
            Some(trailers),
        )))
    }

    /// Relay `inner`, failing it after `idle` without a frame, holding `pass` until it ends.
    pub fn relayed(inner: Incoming, idle: Duration, pass: Option<Pass>) -> Body {
        Body::Stream(Box::new(Relayed {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            pass,
        }))
    }
}

#[derive(Debug)]
struct IdleTimeout(Duration);

impl std::fmt::Display for IdleTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the agent sent nothing for {} ms; relay cut",
            self.0.as_millis()
        )
    }
}

impl std::error::Error for IdleTimeout {}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Body::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Body::Events(sub) => Pin::new(sub.as_mut())
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map_err(Into::into))),
            Body::Channel(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
            Body::Trailed(t) => Poll::Ready(match t.0.take() {
                Some(b) => Some(Ok(Frame::data(b))),
                None => t.1.take().map(|h| Ok(Frame::trailers(h))),
            }),
            Body::Stream(r) => match Pin::new(&mut r.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let next = Instant::now() + r.idle;
                    r.deadline.as_mut().reset(next);
                    Poll::Ready(Some(Ok(frame)))
                }
                Poll::Ready(Some(Err(e))) => {
                    r.pass = None;
                    Poll::Ready(Some(Err(e.into())))
                }
                Poll::Ready(None) => {
                    r.pass = None;
                    Poll::Ready(None)
                }
                Poll::Pending => match r.deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        r.pass = None;
                        Poll::Ready(Some(Err(IdleTimeout(r.idle).into())))
                    }
                    Poll::Pending => Poll::Pending,
                },
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(b) => b.is_none(),
            Body::Trailed(t) => t.0.is_none() && t.1.is_none(),
            Body::Stream(r) => r.inner.is_end_stream(),
            Body::Events(_) | Body::Channel(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Body::Full(None) => SizeHint::with_exact(0),
            Body::Trailed(t) => SizeHint::with_exact(t.0.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Stream(r) => r.inner.size_hint(),
            Body::Events(_) | Body::Channel(_) => SizeHint::default(),
        }
    }
}
