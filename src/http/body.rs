//! The gateway's response body: a buffer it built, or an agent's body streamed straight through.
//! An enum rather than a boxed trait object: no allocation per response on the hot path.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};

pub enum Body {
    Full(Option<Bytes>),
    Stream(Incoming),
}

impl Body {
    pub fn empty() -> Body {
        Body::Full(None)
    }
    pub fn full(b: impl Into<Bytes>) -> Body {
        let b = b.into();
        Body::Full((!b.is_empty()).then_some(b))
    }
}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            Body::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Body::Stream(s) => Pin::new(s).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(b) => b.is_none(),
            Body::Stream(s) => s.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Body::Full(None) => SizeHint::with_exact(0),
            Body::Stream(s) => s.size_hint(),
        }
    }
}
