//! Plain-HTTP/1.1 connections to agents for buffered exchanges, kept alive per worker.
//!
//! Why not hyper-util's pooled client for these: on every request it clones the client, builds
//! a pool key, formats the `Host` header, locks its pool to take a connection and again to give
//! it back, and spawns a task that waits for the connection to be idle before giving it back.
//! A create is one small request and one small answer on a kept-alive connection, so that
//! bookkeeping was a measurable share of the gateway's CPU per create (benches/load/README.md).
//! Here the request that used a connection gives it back itself, once it has read the whole
//! answer, to its worker's own list: no task per request, and a lock that only the worker's
//! own thread takes (the card refreshes' client, on the main runtime, has a pool of its own).
//!
//! Only buffered exchanges with `http://` agents come here ([`super::Upstream::fetch`]): TLS
//! agents (ALPN, per-agent roots) and streamed bodies keep the pooled client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::http::uri::{Authority, PathAndQuery};
use hyper::{header, Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

use super::{describe, read_limited, UpstreamError};

/// One worker's kept-alive HTTP/1.1 connections, by agent origin (`host:port`).
pub struct Http1Pool {
    connector: HttpConnector,
    idle: Mutex<Lists>,
    max_idle_per_origin: usize,
    idle_timeout: Duration,
    /// Whether the reaper task runs ([`Http1Pool::reap_in_background`]).
    reaping: AtomicBool,
}

/// The connections given back, by origin, and when they were last swept of closed and
/// expired ones (on a give-back at most once per idle timeout, and by the reaper, so that
/// connections idle past the timeout are closed whether or not requests still come).
struct Lists {
    by_origin: HashMap<Authority, Vec<Idle>>,
    swept: Instant,
}

impl Lists {
    fn sweep(&mut self, now: Instant, timeout: Duration) {
        self.swept = now;
        self.by_origin.retain(|_, list| {
            list.retain(|c| !c.tx.is_closed() && now.duration_since(c.since) <= timeout);
            !list.is_empty()
        });
    }
}

/// A connection given back after its exchange. It may not be ready for the next request yet
/// (its connection task has not seen the end of the answer): such a one is skipped, not
/// dropped, so that a busy worker does not close connections it is about to reuse.
struct Idle {
    tx: SendRequest<Full<Bytes>>,
    since: Instant,
}

impl Http1Pool {
    /// Connections made by `connector`; at most `max_idle_per_origin` kept per origin, each
    /// for at most `idle_timeout` unused.
    pub fn new(
        connector: HttpConnector,
        max_idle_per_origin: usize,
        idle_timeout: Duration,
    ) -> Self {
        Http1Pool {
            connector,
            idle: Mutex::new(Lists {
                by_origin: HashMap::new(),
                swept: Instant::now(),
            }),
            max_idle_per_origin,
            idle_timeout,
            reaping: AtomicBool::new(false),
        }
    }

    /// Start, once, on the current runtime, the task that closes connections idle past the
    /// timeout when no give-back does (traffic stopped): every half timeout, until the pool is
    /// dropped. Called from a request, since a pool is made before its worker's runtime runs.
    pub fn reap_in_background(pool: &Arc<Http1Pool>) {
        // Called on every exchange: a plain load first, so the common case writes nothing.
        if pool.reaping.load(Ordering::Relaxed) || pool.reaping.swap(true, Ordering::Relaxed) {
            return;
        }
        let weak: Weak<Http1Pool> = Arc::downgrade(pool);
        let every = (pool.idle_timeout / 2).max(Duration::from_millis(10));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(pool) = weak.upgrade() else { return };
                pool.sweep(Instant::now());
            }
        });
    }

    /// Drop closed connections and those idle past the timeout.
    fn sweep(&self, now: Instant) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.sweep(now, self.idle_timeout);
    }

    /// Send `req` (absolute `http://` URI) and read its whole answer, at most `limit` bytes.
    /// A request that a kept-alive connection could not take (the agent had closed it; hyper
    /// hands the request back unsent) is sent once more on a new connection; a request that
    /// may have been sent is never repeated.
    pub async fn fetch(
        &self,
        mut req: Request<Full<Bytes>>,
        limit: usize,
    ) -> Result<(hyper::http::response::Parts, Bytes), UpstreamError> {
        let authority = origin_form(&mut req)?;
        let (mut tx, reused) = match self.checkout(&authority) {
            Some(tx) => (tx, true),
            None => (self.connect(&authority).await?, false),
        };
        let res = match tx.try_send_request(req).await {
            Ok(res) => res,
            Err(mut e) => match e.take_message() {
                Some(req) if reused => {
                    tx = self.connect(&authority).await?;
                    tx.send_request(req).await.map_err(|e| unreachable(&e))?
                }
                _ => return Err(unreachable(e.error())),
            },
        };
        let (parts, body) = res.into_parts();
        let body = read_limited(body, limit).await?;
        self.checkin(authority, tx);
        Ok((parts, body))
    }

    /// The most recently used ready connection to `authority`, if any; closed and expired ones
    /// are dropped on the way.
    fn checkout(&self, authority: &Authority) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.by_origin.get_mut(authority)?;
        let now = Instant::now();
        let mut i = list.len();
        while i > 0 {
            i -= 1;
            let c = &list[i];
            if c.tx.is_closed() || now.duration_since(c.since) > self.idle_timeout {
                // The last element moves to `i`: it was looked at already (and kept).
                list.swap_remove(i);
            } else if c.tx.is_ready() {
                return Some(list.swap_remove(i).tx);
            }
        }
        None
    }

    /// Give a connection back after a whole exchange; dropped (closed) past the bound.
    fn checkin(&self, authority: Authority, tx: SendRequest<Full<Bytes>>) {
        if tx.is_closed() {
            return;
        }
        let now = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if now.duration_since(idle.swept) > self.idle_timeout {
            idle.sweep(now, self.idle_timeout);
        }
        let list = idle.by_origin.entry(authority).or_default();
        if list.len() < self.max_idle_per_origin {
            list.push(Idle { tx, since: now });
        }
    }

    /// A new connection, its connection task spawned on this worker.
    async fn connect(
        &self,
        authority: &Authority,
    ) -> Result<SendRequest<Full<Bytes>>, UpstreamError> {
        let uri = Uri::builder()
            .scheme("http")
            .authority(authority.clone())
            .path_and_query("/")
            .build()
            .map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
        let io = self
            .connector
            .clone()
            .call(uri)
            .await
            .map_err(|e| UpstreamError::Unreachable(describe(&e)))?;
        let (tx, conn) = http1::handshake(io).await.map_err(|e| unreachable(&e))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %describe(&e), "agent connection ended");
            }
        });
        Ok(tx)
    }
}

/// Turn `req`'s absolute URI into origin form with a `Host` header, as HTTP/1.1 sends it;
/// the origin it was for.
fn origin_form(req: &mut Request<Full<Bytes>>) -> Result<Authority, UpstreamError> {
    let authority = req
        .uri()
        .authority()
        .cloned()
        .ok_or_else(|| UpstreamError::Unreachable("the agent URL has no host".into()))?;
    let path = req
        .uri()
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    *req.uri_mut() = Uri::from(path);
    if !req.headers().contains_key(header::HOST) {
        if let Ok(host) = header::HeaderValue::from_str(authority.as_str()) {
            req.headers_mut().insert(header::HOST, host);
        }
    }
    Ok(authority)
}

fn unreachable(e: &hyper::Error) -> UpstreamError {
    UpstreamError::Unreachable(describe(e))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// An HTTP/1.1 agent on loopback that answers every request with `answer` (its connection
    /// kept open unless `close`), counting the connections it accepts.
    async fn agent(answer: &'static str, close: bool) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    loop {
                        let Ok(n) = s.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        // One request (no body here) ends at its blank line.
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            let head = if close { "Connection: close\r\n" } else { "" };
                            let res = format!(
                                "HTTP/1.1 200 OK\r\n{head}Content-Length: {}\r\n\r\n{answer}",
                                answer.len()
                            );
                            if s.write_all(res.as_bytes()).await.is_err() || close {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    fn pool() -> Http1Pool {
        Http1Pool::new(HttpConnector::new(), 4, Duration::from_secs(90))
    }

    fn get(url: &str) -> Request<Full<Bytes>> {
        Request::get(format!("{url}/tasks/t1"))
            .body(Full::new(Bytes::new()))
            .expect("request")
    }

    #[tokio::test]
    async fn one_connection_serves_consecutive_exchanges() {
        let (url, accepted) = agent("{\"ok\":true}", false).await;
        let pool = pool();
        for _ in 0..20 {
            let (parts, body) = pool.fetch(get(&url), 1024).await.expect("fetch");
            assert_eq!(parts.status, 200);
            assert_eq!(&body[..], b"{\"ok\":true}");
            // Let the connection task see the end of the answer, as the next request would.
            tokio::task::yield_now().await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_agent_that_closes_gets_a_new_connection_each_time() {
        let (url, accepted) = agent("{}", true).await;
        let pool = pool();
        for _ in 0..5 {
            let (parts, _) = pool.fetch(get(&url), 1024).await.expect("fetch");
            assert_eq!(parts.status, 200);
            tokio::task::yield_now().await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn concurrent_exchanges_keep_at_most_the_bound() {
        let (url, accepted) = agent("{}", false).await;
        let pool = Arc::new(pool());
        let all: Vec<_> = (0..10)
            .map(|_| {
                let (pool, url) = (pool.clone(), url.clone());
                tokio::spawn(async move { pool.fetch(get(&url), 1024).await })
            })
            .collect();
        for t in all {
            t.await.expect("join").expect("fetch");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 10);
        let kept: usize = pool
            .idle
            .lock()
            .expect("lock")
            .by_origin
            .values()
            .map(Vec::len)
            .sum();
        assert_eq!(kept, 4, "the pool keeps max_idle_per_origin connections");
    }

    #[tokio::test]
    async fn an_answer_over_the_limit_is_refused_and_its_connection_not_reused() {
        let (url, accepted) = agent("0123456789", false).await;
        let pool = pool();
        let err = pool.fetch(get(&url), 4).await.expect_err("too large");
        assert!(matches!(err, UpstreamError::TooLarge(4)), "{err:?}");
        pool.fetch(get(&url), 1024).await.expect("fetch");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn idle_connections_are_closed_after_the_timeout_without_more_requests() {
        let (url, _) = agent("{}", false).await;
        let pool = Arc::new(Http1Pool::new(
            HttpConnector::new(),
            4,
            Duration::from_millis(100),
        ));
        Http1Pool::reap_in_background(&pool);
        pool.fetch(get(&url), 1024).await.expect("fetch");
        let kept = |p: &Http1Pool| -> usize {
            p.idle
                .lock()
                .expect("lock")
                .by_origin
                .values()
                .map(Vec::len)
                .sum()
        };
        assert_eq!(kept(&pool), 1);
        // No request comes after: only the reaper can close it (within 1.5 timeouts).
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(kept(&pool), 0, "the idle connection outlived its timeout");
    }

    #[tokio::test]
    async fn an_agent_that_is_down_is_unreachable() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        drop(listener);
        let err = pool().fetch(get(&url), 1024).await.expect_err("down");
        assert!(matches!(err, UpstreamError::Unreachable(_)), "{err:?}");
    }
}
