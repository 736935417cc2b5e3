//! A lean HTTP/1.1 path for task-stream subscribers.
//!
//! An event-stream subscriber holds its connection for minutes or hours and, after the response
//! head, only ever receives. Served by hyper, each one keeps a connection's read and write
//! buffers and futures (about 33 KB, measured); ten thousand subscribers on one task would
//! cost a third of a gigabyte. So `GET .../tasks/{id}/stream` over HTTP/1.1 is recognised
//! from the first bytes the accept loop peeks, its head is read and parsed here (httparse, as
//! hyper does), the same handler as the hyper route answers it, and the events are written as
//! chunks straight from the shared ring: per subscriber, a socket, a cursor and a small task.
//! The connection closes when the stream ends. Anything else (HTTP/2, other routes) is hyper's.

use std::future::poll_fn;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::body::Body;
use super::error::{ApiError, Code};
use super::{request_id_of, stream_route, tasks, Ctx, X_REQUEST_ID};
use crate::State;

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

/// Read the request head (up to the blank line) without reading past it.
async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        loop {
            let mut chunk = [0u8; 1024];
            stream.readable().await.ok()?;
            match stream.try_read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return None,
            }
            if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                return Some(());
            }
            if buf.len() > MAX_HEAD {
                return None;
            }
        }
    };
    tokio::time::timeout(HEAD_TIMEOUT, read).await.ok()??;
    Some(buf)
}

struct Head {
    path: String,
    headers: HeaderMap,
}

fn parse_head(buf: &[u8]) -> Result<Head, ApiError> {
    let bad = |m: &str| ApiError::new(Code::InvalidRequest, m.to_owned());
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(bad("malformed request head")),
    }
    let path = req.path.ok_or_else(|| bad("no request target"))?.to_owned();
    let mut headers = HeaderMap::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| bad("bad header name"))?;
        let value = HeaderValue::from_bytes(h.value).map_err(|_| bad("bad header value"))?;
        headers.append(name, value);
    }
    Ok(Head { path, headers })
}

/// Serve one stream request on `stream`, then close it.
pub(super) async fn serve(mut stream: TcpStream, state: Arc<State>, peer: SocketAddr) {
    let started = Instant::now();
    let kill = Arc::new(Notify::new());
    let (res, agent) = {
        let Some(buf) = read_head(&mut stream).await else {
            return;
        };
        let mut ctx = Ctx {
            request_id: HeaderValue::from_static("-"),
            peer,
            agent: None,
            kill: kill.clone(),
        };
        let result = match parse_head(&buf) {
            Err(e) => Err(e),
            Ok(head) => {
                ctx.request_id = request_id_of(&head.headers);
                match (
                    head.path.parse::<hyper::Uri>(),
                    stream_route(head.path.split('?').next().unwrap_or("")),
                ) {
                    (Ok(uri), Some((prefix, task))) => {
                        tasks::stream_of(
                            &state,
                            &mut ctx,
                            prefix,
                            task,
                            &head.headers,
                            &uri,
                            hyper::Version::HTTP_11,
                        )
                        .await
                    }
                    _ => Err(ApiError::new(Code::NotFound, "no such route")),
                }
            }
        };
        let mut res = result.unwrap_or_else(ApiError::into_response);
        res.headers_mut()
            .insert(X_REQUEST_ID.clone(), ctx.request_id.clone());
        (res, ctx.agent.map(|a| a.cfg.name.clone()))
    };
    let agent = agent.unwrap_or_default();
    let m = &state.metrics;
    m.requests
        .with_label_values(&["stream", &agent, res.status().as_str()])
        .inc();
    m.request_seconds
        .with_label_values(&["stream", &agent])
        .observe(started.elapsed().as_secs_f64());
    let _ = respond(&mut stream, res, &kill).await;
    let _ = stream.shutdown().await;
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
    out.extend_from_slice(framing.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out
}

async fn respond(
    stream: &mut TcpStream,
    res: Response<Body>,
    kill: &Notify,
) -> std::io::Result<()> {
    let (parts, body) = res.into_parts();
    let sub = match body {
        Body::Events(sub) => sub,
        Body::Full(b) => {
            let b = b.unwrap_or_default();
            let framing = format!("content-length: {}", b.len());
            stream
                .write_all(&head_bytes(parts.status, &parts.headers, &framing))
                .await?;
            return stream.write_all(&b).await;
        }
        // The stream route answers with nothing else.
        _ => return Ok(()),
    };
    let mut sub = *sub;
    stream
        .write_all(&head_bytes(
            parts.status,
            &parts.headers,
            "transfer-encoding: chunked",
        ))
        .await?;
    let mut probe = [0u8; 16];
    loop {
        let next = tokio::select! {
            f = poll_fn(|cx| sub.poll_next(cx)) => f,
            _ = kill.notified() => return Ok(()),
            r = stream.readable() => {
                r?;
                // The client sends nothing more on a stream; a read of 0 means it left.
                match stream.try_read(&mut probe) {
                    Ok(0) => return Ok(()),
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            }
        };
        match next {
            Some(Ok(frame)) => {
                tokio::select! {
                    r = write_chunk(stream, &frame) => r?,
                    // A subscriber too slow to take a write is cut by the topic's sweep.
                    _ = kill.notified() => return Ok(()),
                }
            }
            // Cut as a slow consumer: end without the last chunk, so the client sees an
            // incomplete response, not a clean end.
            Some(Err(_)) => return Ok(()),
            None => return stream.write_all(b"0\r\n\r\n").await,
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
