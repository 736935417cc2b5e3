//! A lean HTTP/1.1 transport for task-stream subscribers.
//!
//! An event-stream subscriber holds its connection for minutes or hours and, after the response
//! head, only ever receives. Served by hyper, each one keeps a connection's read and write
//! buffers and futures (about 33 KB, measured); ten thousand subscribers on one task would
//! cost a third of a gigabyte. So `GET .../tasks/{id}/stream` over HTTP/1.1 is recognised
//! from the first bytes the accept loop peeks, and this module is its transport: it reads and
//! parses the head (httparse, as hyper does) into the same [`Request`] hyper would build, hands
//! it to the one pipeline ([`pipeline::handle`]), and writes the answer, the events as chunks
//! straight from the shared ring: per subscriber, a socket, a cursor and a small task. Only the
//! byte framing is this module's own; request ids, routing, checks, metrics and error bodies are
//! the pipeline's. The connection closes when the stream ends. Anything else (HTTP/2, other
//! routes) is hyper's.

use std::future::poll_fn;
use std::io::IoSlice;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Response, StatusCode, Version};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::body::Body;
use super::context::Conn;
use super::error::{ApiError, Code};
use super::linger;
use super::pipeline;
use super::request::{request_id, Request, RequestBody, X_REQUEST_ID};
use super::route::stream_route;
use crate::state::State;

/// The longest request head read on this path (hyper's default limit is larger, but a stream
/// request has no reason to be big).
const MAX_HEAD: usize = 16 * 1024;
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether the first bytes of a connection are an HTTP/1.1 GET of a task stream.
pub(super) fn wants(peeked: &[u8]) -> bool {
    let Some(rest) = peeked.strip_prefix(b"GET ") else {
        return false;
    };
    let Some(end) = rest.iter().position(|&b| b == b' ') else {
        return false;
    };
    if !rest[end..].starts_with(b" HTTP/1.1\r\n") {
        return false;
    }
    let Ok(target) = std::str::from_utf8(&rest[..end]) else {
        return false;
    };
    let path = target.split('?').next().unwrap_or(target);
    stream_route(path).is_some()
}

/// How reading the head ended.
enum HeadRead {
    Done(Vec<u8>),
    TooLarge,
    Gone,
}

/// Read the request head, up to its blank line (CRLF or bare LF line ends, as httparse takes
/// them). Bytes a client sends after it are read too and never used: the connection closes
/// after the stream.
async fn read_head(stream: &mut TcpStream) -> HeadRead {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        loop {
            if stream.readable().await.is_err() {
                return HeadRead::Gone;
            }
            // Read into the buffer itself, never past MAX_HEAD + 1 bytes: no chunk on this
            // future, which every subscriber keeps for as long as it subscribes.
            let len = buf.len();
            let room = (MAX_HEAD + 1 - len).min(1024);
            buf.resize(len + room, 0);
            let read = stream.try_read(&mut buf[len..]);
            buf.truncate(len + *read.as_ref().unwrap_or(&0));
            let from = len.saturating_sub(3);
            match read {
                Ok(0) => return HeadRead::Gone,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return HeadRead::Gone,
            };
            // Only the new bytes (and the three before them) can complete the blank line.
            let tail = &buf[from..];
            if tail.windows(2).any(|w| w == b"\n\n") || tail.windows(4).any(|w| w == b"\r\n\r\n") {
                return HeadRead::Done(std::mem::take(&mut buf));
            }
            if buf.len() > MAX_HEAD {
                return HeadRead::TooLarge;
            }
        }
    };
    tokio::time::timeout(HEAD_TIMEOUT, read)
        .await
        .unwrap_or(HeadRead::Gone)
}

/// The request a head describes, as hyper would build it (a GET with no body); a malformed head
/// is refused here, as hyper refuses a malformed head itself.
fn parse_head(buf: &[u8]) -> Result<Request, ApiError> {
    let bad = |m: &str| ApiError::new(Code::InvalidRequest, m.to_owned());
    let mut slots = [httparse::EMPTY_HEADER; 100];
    let mut parsed = httparse::Request::new(&mut slots);
    match parsed.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(bad("malformed request head")),
    }
    let target = parsed.path.ok_or_else(|| bad("no request target"))?;
    let mut req = hyper::Request::new(RequestBody::Empty);
    *req.method_mut() = Method::GET;
    *req.version_mut() = Version::HTTP_11;
    *req.uri_mut() = target.parse().map_err(|_| bad("bad request target"))?;
    let headers = req.headers_mut();
    headers.reserve(parsed.headers.len());
    for h in parsed.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| bad("bad header name"))?;
        let value = HeaderValue::from_bytes(h.value).map_err(|_| bad("bad header value"))?;
        headers.append(name, value);
    }
    Ok(req)
}

/// Whether a head declares a body: a stream request has none, and one that declares a body is
/// refused rather than read.
fn declares_body(headers: &HeaderMap) -> bool {
    headers.contains_key(hyper::header::TRANSFER_ENCODING)
        || headers
            .get(hyper::header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

/// A refusal of this path's own, made before the pipeline, with a request id like every answer:
/// the client's `x-request-id` when the head could be read, else a new one.
fn refusal(headers: &HeaderMap, e: ApiError) -> Response<Body> {
    let mut res = e.into_response();
    res.headers_mut()
        .insert(X_REQUEST_ID.clone(), request_id(headers));
    res
}

/// Serve one stream request on `stream`, then close it.
pub(super) async fn serve(mut stream: TcpStream, state: &Arc<State>, conn: &Conn) {
    let buf = match read_head(&mut stream).await {
        HeadRead::Done(buf) => buf,
        HeadRead::Gone => return,
        HeadRead::TooLarge => {
            let too_large = ApiError::new(
                Code::InvalidRequest,
                format!("request head over {MAX_HEAD} bytes"),
            );
            let mut res = refusal(&HeaderMap::new(), too_large);
            *res.status_mut() = StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
            let _ = respond(&mut stream, res, &conn.kill, Duration::from_secs(10)).await;
            // Boxed, like every path but the subscriber's: its buffer must not size this
            // future.
            Box::pin(linger::close(stream)).await;
            return;
        }
    };
    // A refusal of a request whose body is still coming: closed lingering (see linger.rs).
    let mut unread_body = false;
    let res = match parse_head(&buf) {
        // Boxed: the pipeline's future holds any handler's state (a create's exchange, say),
        // and inline it would size this future, which lives as long as the subscription.
        Ok(req) if !declares_body(req.headers()) => {
            Box::pin(pipeline::handle(state, conn, req)).await
        }
        Ok(req) => {
            unread_body = true;
            refusal(
                req.headers(),
                ApiError::new(Code::InvalidRequest, "a stream request takes no body"),
            )
        }
        Err(e) => refusal(&HeaderMap::new(), e),
    };
    drop(buf);
    // A client that stops reading is let go after this long stuck on one write (the sweep
    // cuts slow subscribers only while the topic lives; this also covers the last writes).
    let deadline = (state.hub.config().ping_interval * 2).max(Duration::from_secs(10));
    let _ = respond(&mut stream, res, &conn.kill, deadline).await;
    if unread_body {
        Box::pin(linger::close(stream)).await;
        return;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.shutdown()).await;
}

fn head_bytes(status: StatusCode, headers: &HeaderMap, framing: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (k, v) in headers {
        out.extend_from_slice(k.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"date: ");
    out.extend_from_slice(httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes());
    out.extend_from_slice(b"\r\nconnection: close\r\n");
    if !framing.is_empty() {
        out.extend_from_slice(framing.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `work`, failed if it takes longer than `limit`.
async fn within<T>(
    limit: Duration,
    work: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

async fn respond(
    stream: &mut TcpStream,
    res: Response<Body>,
    kill: &Notify,
    limit: Duration,
) -> std::io::Result<()> {
    let (parts, body) = res.into_parts();
    let sub = match body {
        Body::Events(sub) => sub,
        Body::Full(b) => {
            let b = b.unwrap_or_default();
            // A 204 or 304 has no body and must not say it has one.
            let framing = if matches!(parts.status.as_u16(), 204 | 304) {
                String::new()
            } else {
                format!("content-length: {}", b.len())
            };
            let head = head_bytes(parts.status, &parts.headers, &framing);
            within(limit, stream.write_all(&head)).await?;
            return within(limit, stream.write_all(&b)).await;
        }
        // The stream route answers with nothing else.
        _ => return Ok(()),
    };
    let mut sub = *sub;
    let head = head_bytes(parts.status, &parts.headers, "transfer-encoding: chunked");
    // The head's memory goes before the stream starts: a subscriber keeps this future (and
    // what it holds) for as long as it subscribes.
    drop(parts);
    within(limit, stream.write_all(&head)).await?;
    drop(head);
    let mut probe = [0u8; 16];
    loop {
        let next = tokio::select! {
            f = poll_fn(|cx| sub.poll_next(cx)) => f,
            _ = kill.notified() => return Ok(()),
            r = stream.readable() => {
                r?;
                // The client has nothing more to send on a stream: a read of 0 means it left,
                // and bytes mean it is not an event-stream client. Either way, close.
                match stream.try_read(&mut probe) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Ok(_) => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        };
        match next {
            // An empty chunk would be the chunked encoding's end.
            Some(Ok(frame)) if frame.is_empty() => {}
            Some(Ok(frame)) => {
                tokio::select! {
                    r = within(limit, write_chunk(stream, &frame)) => r?,
                    // A subscriber too slow to take a write is cut by the topic's sweep.
                    _ = kill.notified() => return Ok(()),
                }
            }
            // Cut as a slow consumer: end without the last chunk, so the client sees an
            // incomplete response, not a clean end.
            Some(Err(_)) => return Ok(()),
            None => return within(limit, stream.write_all(b"0\r\n\r\n")).await,
        }
    }
}

/// One chunk of the chunked encoding, in one vectored write where the socket takes it.
async fn write_chunk(stream: &mut TcpStream, data: &Bytes) -> std::io::Result<()> {
    let mut size = [0u8; 18];
    let n = {
        use std::io::Write;
        let mut w = &mut size[..];
        let _ = write!(w, "{:x}\r\n", data.len());
        18 - w.len()
    };
    let parts: [&[u8]; 3] = [&size[..n], data, b"\r\n"];
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut written = 0;
    while written < total {
        let mut skip = written;
        let mut slices = Vec::with_capacity(3);
        for p in parts {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            slices.push(IoSlice::new(&p[skip..]));
            skip = 0;
        }
        let n = stream.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written += n;
    }
    Ok(())
}
