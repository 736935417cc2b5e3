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
//!
//! The official A2A protocol's subscriptions come here too: `tasks/{id}:subscribe` by GET or
//! POST (both SDKs POST), and JSON-RPC `SubscribeToTask`, which is a POST to
//! `/agents/{name}/jsonrpc` or `/a2a` like every other JSON-RPC call. So a plaintext HTTP/1.1
//! connection whose first request is such a POST is read here, its small body included, and
//! only a `SubscribeToTask` stays: any other call is handed to hyper with the bytes already
//! read put back in front of the socket ([`Rewind`]), so keep-alive JSON-RPC clients pay one
//! copy of their first request, nothing after.

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

use super::a2a::wire;
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

/// The largest body read on this path: a subscription's (`{"jsonrpc", "id", "method",
/// "params": {"id", "tenant"}}`) is far smaller; a larger one goes to hyper.
const MAX_BODY: usize = 16 * 1024;

/// Whether the first bytes of a connection are an HTTP/1.1 request this path may serve: a GET
/// of a task stream, a GET or POST of an A2A `tasks/{id}:subscribe`, or a POST to a JSON-RPC
/// endpoint (kept only if it is a `SubscribeToTask`, see the module doc).
pub(super) fn wants(peeked: &[u8]) -> bool {
    let (get, rest) = match (peeked.strip_prefix(b"GET "), peeked.strip_prefix(b"POST ")) {
        (Some(rest), _) => (true, rest),
        (_, Some(rest)) => (false, rest),
        _ => return false,
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
    (get && stream_route(path).is_some())
        || is_subscribe(path)
        || (!get && wire::may_post_subscribe(path))
}

/// `/agents/{name}/tasks/{id}:subscribe`.
fn is_subscribe(path: &str) -> bool {
    let mut segs = path.split('/');
    matches!(
        (segs.next(), segs.next(), segs.next(), segs.next(), segs.next(), segs.next()),
        (Some(""), Some("agents"), Some(n), Some("tasks"), Some(t), None)
            if !n.is_empty() && t.len() > ":subscribe".len() && t.ends_with(":subscribe")
    )
}

/// A connection handed to hyper after this path read its first bytes: those bytes first, then
/// the socket.
pub(super) struct Rewind {
    read: Vec<u8>,
    at: usize,
    stream: TcpStream,
}

impl tokio::io::AsyncRead for Rewind {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let me = self.get_mut();
        if me.at < me.read.len() {
            let n = (me.read.len() - me.at).min(buf.remaining());
            buf.put_slice(&me.read[me.at..me.at + n]);
            me.at += n;
            if me.at == me.read.len() {
                me.read = Vec::new();
                me.at = 0;
            }
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut me.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Rewind {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
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

/// The request a head describes, as hyper would build it (a GET or a POST, its body not read
/// yet), and the head's length; a malformed head is refused here, as hyper refuses a malformed
/// head itself.
fn parse_head(buf: &[u8]) -> Result<(Request, usize), ApiError> {
    let bad = |m: &str| ApiError::new(Code::InvalidRequest, m.to_owned());
    let mut slots = [httparse::EMPTY_HEADER; 100];
    let mut parsed = httparse::Request::new(&mut slots);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        _ => return Err(bad("malformed request head")),
    };
    let target = parsed.path.ok_or_else(|| bad("no request target"))?;
    let mut req = hyper::Request::new(RequestBody::Empty);
    *req.method_mut() = match parsed.method {
        Some("POST") => Method::POST,
        _ => Method::GET,
    };
    *req.version_mut() = Version::HTTP_11;
    *req.uri_mut() = target.parse().map_err(|_| bad("bad request target"))?;
    let headers = req.headers_mut();
    headers.reserve(parsed.headers.len());
    for h in parsed.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| bad("bad header name"))?;
        let value = HeaderValue::from_bytes(h.value).map_err(|_| bad("bad header value"))?;
        headers.append(name, value);
    }
    Ok((req, len))
}

/// What a head says of its body: none, `Content-Length` bytes, or anything else (chunked, or
/// a length this path does not read).
enum Declared {
    None,
    Length(usize),
    Other,
}

fn declared(headers: &HeaderMap) -> Declared {
    if headers.contains_key(hyper::header::TRANSFER_ENCODING) {
        return Declared::Other;
    }
    let mut lengths = headers.get_all(hyper::header::CONTENT_LENGTH).iter();
    match (lengths.next(), lengths.next()) {
        (None, _) => Declared::None,
        // Digits only, as hyper reads it (`parse` would take a leading `+`).
        (Some(v), None) if !v.is_empty() && v.as_bytes().iter().all(u8::is_ascii_digit) => {
            match std::str::from_utf8(v.as_bytes())
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
            {
                Some(0) => Declared::None,
                Some(n) if n <= MAX_BODY => Declared::Length(n),
                _ => Declared::Other,
            }
        }
        _ => Declared::Other,
    }
}

/// Read the rest of a `len`-byte body after the head (`buf[head..]` holds its first bytes).
async fn read_body(stream: &mut TcpStream, buf: &mut Vec<u8>, head: usize, len: usize) -> bool {
    let want = head + len;
    let read = async {
        while buf.len() < want {
            if stream.readable().await.is_err() {
                return false;
            }
            let have = buf.len();
            buf.resize(want, 0);
            match stream.try_read(&mut buf[have..]) {
                Ok(0) => return false,
                Ok(n) => buf.truncate(have + n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => buf.truncate(have),
                Err(_) => return false,
            }
        }
        true
    };
    tokio::time::timeout(HEAD_TIMEOUT, read)
        .await
        .unwrap_or(false)
}

/// A refusal of this path's own, made before the pipeline, with a request id like every answer:
/// the client's `x-request-id` when the head could be read, else a new one.
fn refusal(headers: &HeaderMap, e: ApiError) -> Response<Body> {
    let mut res = e.into_response();
    res.headers_mut()
        .insert(X_REQUEST_ID.clone(), request_id(headers));
    res
}

/// What the head (and a subscription's body) said.
enum Read {
    /// A request for the pipeline.
    Serve(Request),
    /// Refused before the pipeline; whether a body it declared is left unread.
    Refuse(Response<Body>, bool),
    /// Not this path's: hyper serves the connection.
    Handoff,
}

/// Parse the head in `buf` and read a POST's small body: the request, its refusal, or a
/// handoff to hyper (`None`: the client left).
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Read> {
    let (mut req, head) = match parse_head(buf) {
        Ok(r) => r,
        Err(e) => return Some(Read::Refuse(refusal(&HeaderMap::new(), e), false)),
    };
    let post = req.method() == Method::POST;
    let posted = post && wire::may_post_subscribe(req.uri().path());
    // A client that waits for `100 Continue` before its body is hyper's to answer.
    if post && req.headers().contains_key(hyper::header::EXPECT) {
        return Some(Read::Handoff);
    }
    match declared(req.headers()) {
        Declared::Length(len) if post => {
            if !read_body(stream, buf, head, len).await {
                return None;
            }
            let body = Bytes::copy_from_slice(&buf[head..head + len]);
            if posted && !wire::posts_subscribe(&body) {
                return Some(Read::Handoff);
            }
            *req.body_mut() = RequestBody::Read(Some(body));
            Some(Read::Serve(req))
        }
        Declared::None if !posted => Some(Read::Serve(req)),
        // hyper reads anything else of a POST (a JSON-RPC call without a body, a chunked
        // body), and answers it on a connection it keeps.
        _ if post => Some(Read::Handoff),
        _ => Some(Read::Refuse(
            refusal(
                req.headers(),
                ApiError::new(Code::InvalidRequest, "a stream request takes no body"),
            ),
            true,
        )),
    }
}

/// Serve one stream request on `stream`, then close it; or hand the connection back for hyper
/// (`Some`): its first request is not a subscription after all.
pub(super) async fn serve(stream: TcpStream, state: &Arc<State>, conn: &Conn) -> Option<Rewind> {
    // Everything before the answer is written is boxed: the request, its body, the head's
    // buffer and the pipeline's future must not size this future, which a subscriber keeps for
    // as long as it subscribes.
    let (mut stream, res, unread_body) = match Box::pin(prepare(stream, state, conn)).await {
        Prepared::Answer(stream, res, unread) => (stream, res, unread),
        Prepared::Handoff(rewound) => return Some(rewound),
        Prepared::Done => return None,
    };
    // A client that stops reading is let go after this long stuck on one write (the sweep
    // cuts slow subscribers only while the topic lives; this also covers the last writes).
    let deadline = (state.hub.config().ping_interval * 2).max(Duration::from_secs(10));
    let _ = respond(&mut stream, res, &conn.kill, deadline).await;
    if unread_body {
        Box::pin(linger::close(stream)).await;
        return None;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.shutdown()).await;
    None
}

/// What a connection's first request came to before its answer is written.
enum Prepared {
    /// The answer to write, and whether the request's body is left unread (a refusal: the
    /// connection then closes lingering, see linger.rs).
    Answer(TcpStream, Response<Body>, bool),
    /// Not this path's request: hyper serves the connection.
    Handoff(Rewind),
    /// Answered already, or the client left.
    Done,
}

/// Read the head (and a subscription's small body) and answer it through the pipeline.
async fn prepare(mut stream: TcpStream, state: &Arc<State>, conn: &Conn) -> Prepared {
    let mut buf = match read_head(&mut stream).await {
        HeadRead::Done(buf) => buf,
        HeadRead::Gone => return Prepared::Done,
        HeadRead::TooLarge => {
            let too_large = ApiError::new(
                Code::InvalidRequest,
                format!("request head over {MAX_HEAD} bytes"),
            );
            let mut res = refusal(&HeaderMap::new(), too_large);
            *res.status_mut() = StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
            let _ = respond(&mut stream, res, &conn.kill, Duration::from_secs(10)).await;
            linger::close(stream).await;
            return Prepared::Done;
        }
    };
    let Some(read) = read_request(&mut stream, &mut buf).await else {
        return Prepared::Done;
    };
    match read {
        Read::Handoff => Prepared::Handoff(Rewind {
            read: buf,
            at: 0,
            stream,
        }),
        // Boxed: the pipeline's future holds any handler's state (a create's exchange, say).
        Read::Serve(req) => {
            let res = Box::pin(pipeline::handle(state, conn, req)).await;
            Prepared::Answer(stream, res, false)
        }
        Read::Refuse(res, unread) => Prepared::Answer(stream, res, unread),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requests_this_path_takes() {
        let took = |head: &str| wants(head.as_bytes());
        assert!(took("GET /agents/a/tasks/t/stream HTTP/1.1\r\n"));
        assert!(took("GET /tasks/t/stream?last_event_id=x HTTP/1.1\r\n"));
        assert!(took("GET /agents/a/tasks/t:subscribe HTTP/1.1\r\n"));
        assert!(took("POST /agents/a/tasks/t%2Fu:subscribe HTTP/1.1\r\n"));
        assert!(took("POST /agents/a/jsonrpc HTTP/1.1\r\n"));
        assert!(took("POST /a2a HTTP/1.1\r\n"));
        // Not this path's: HTTP/2's preface, other versions and methods, other routes.
        assert!(!took("PRI * HTTP/2.0\r\n"));
        assert!(!took("GET /agents/a/tasks/t/stream HTTP/1.0\r\n"));
        assert!(!took("POST /agents/a/tasks/t/stream HTTP/1.1\r\n"));
        assert!(!took("GET /agents/a/jsonrpc HTTP/1.1\r\n"));
        assert!(!took("POST /agents/a/message:stream HTTP/1.1\r\n"));
        assert!(!took("POST /agents/a/tasks/:subscribe HTTP/1.1\r\n"));
        assert!(!took("POST /agents/a/x/jsonrpc HTTP/1.1\r\n"));
        assert!(!took("DELETE /a2a HTTP/1.1\r\n"));
    }

    #[test]
    fn only_a_subscribe_call_stays_and_lengths_are_read_as_hyper_reads_them() {
        assert!(wire::posts_subscribe(
            br#"{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"t"}}"#
        ));
        assert!(!wire::posts_subscribe(
            br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}"#
        ));
        assert!(!wire::posts_subscribe(b"not json"));
        assert!(
            !wire::posts_subscribe(br#"[{"method":"SubscribeToTask"}]"#),
            "a batch is hyper's"
        );
        let with = |pairs: &[(&str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(
                    HeaderName::from_bytes(k.as_bytes()).expect("name"),
                    HeaderValue::from_str(v).expect("value"),
                );
            }
            declared(&h)
        };
        assert!(matches!(with(&[]), Declared::None));
        assert!(matches!(with(&[("content-length", "0")]), Declared::None));
        assert!(matches!(
            with(&[("content-length", "42")]),
            Declared::Length(42)
        ));
        for odd in [
            &[("content-length", "+42")][..],
            &[("content-length", " 42")][..],
            &[("content-length", "42"), ("content-length", "42")][..],
            &[("content-length", "42"), ("transfer-encoding", "chunked")][..],
            &[("content-length", "99999999")][..],
        ] {
            assert!(matches!(with(odd), Declared::Other), "{odd:?}");
        }
    }
}
