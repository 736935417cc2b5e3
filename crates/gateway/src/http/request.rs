//! The request as every stage of the pipeline sees it, whichever connection path it came by, and
//! the helpers that read it: its id, its content type, its body under the configured limit.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::error::{ApiError, Code};
use crate::upstream::{read_limited, UpstreamError};

/// A request on any connection path.
pub type Request = hyper::Request<RequestBody>;

/// The body of a request: hyper's (HTTP/1.1 and HTTP/2), or none at all (the lean stream path
/// serves only body-less GETs and refuses a head that declares a body).
pub enum RequestBody {
    /// A body hyper is reading from the connection.
    Incoming(Incoming),
    /// No body.
    Empty,
    /// A body read whole already (the lean path reads a subscription's small body itself).
    Read(Option<Bytes>),
}

impl HttpBody for RequestBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            RequestBody::Incoming(b) => Pin::new(b).poll_frame(cx),
            RequestBody::Empty => Poll::Ready(None),
            RequestBody::Read(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RequestBody::Incoming(b) => b.is_end_stream(),
            RequestBody::Empty => true,
            RequestBody::Read(b) => b.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RequestBody::Incoming(b) => b.size_hint(),
            RequestBody::Empty => SizeHint::with_exact(0),
            RequestBody::Read(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}

/// `x-request-id`, on requests and answers.
pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// How long a client may take to send its request body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The request id: the client's if it is sane, else a fresh UUID.
pub fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers
        .get(&X_REQUEST_ID)
        .filter(|v| {
            !v.is_empty() && v.len() <= 128 && v.as_bytes().iter().all(|b| b.is_ascii_graphic())
        })
        .cloned()
        .unwrap_or_else(|| {
            let mut buf = uuid::Uuid::encode_buffer();
            let s = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf);
            HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static("invalid"))
        })
}

/// Whether the content type is JSON (`application/json` or any `+json`).
pub fn is_json(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            let mime = ct.split(';').next().unwrap_or("").trim();
            mime.eq_ignore_ascii_case("application/json")
                || (mime.len() > 5 && mime[mime.len() - 5..].eq_ignore_ascii_case("+json"))
        })
}

/// Read a request body under `limit` bytes, refusing early on Content-Length, within
/// [`BODY_TIMEOUT`].
pub async fn read_body(
    req: Request,
    limit: usize,
) -> Result<(hyper::http::request::Parts, Bytes), ApiError> {
    let (parts, body) = req.into_parts();
    let too_large = || {
        ApiError::new(
            Code::PayloadTooLarge,
            format!("request body exceeds {limit} bytes"),
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    // A client trickling its body must not hold the request (and its buffer) open forever.
    let read = tokio::time::timeout(BODY_TIMEOUT, read_limited(body, limit)).await;
    let Ok(read) = read else {
        return Err(ApiError::new(
            Code::RequestTimeout,
            format!(
                "request body not received within {} s",
                BODY_TIMEOUT.as_secs()
            ),
        ));
    };
    match read {
        Ok(b) => Ok((parts, b)),
        Err(UpstreamError::TooLarge(_)) => Err(too_large()),
        Err(e) => Err(ApiError::new(
            Code::InvalidRequest,
            format!("request body could not be read: {e}"),
        )),
    }
}
