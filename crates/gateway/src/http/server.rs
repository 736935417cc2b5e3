//! The listener: hyper-util's auto builder (HTTP/1.1 and h2c, or HTTP/1.1 and HTTP/2 by ALPN
//! over TLS with `[tls]`), a bound on open connections, timeouts hyper does not set by itself,
//! and graceful shutdown. The lean stream path is plaintext only: over TLS every request is
//! hyper's.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::context::Conn;
use super::lean;
use super::pipeline;
use super::request::RequestBody;
use crate::metrics::Transport;
use crate::State;

/// How long a new connection may stay silent before it is closed.
const FIRST_BYTES: Duration = Duration::from_secs(10);

/// How long a TLS connection has, once it has spoken, to finish its handshake and send the
/// first bytes of its first request.
const TLS_START: Duration = Duration::from_secs(10);

/// Bind the address once and hand each worker a clone of the listening socket: the workers'
/// accept loops share one accept queue, and whichever worker is free takes the next connection.
/// (SO_REUSEPORT would spread connections in the kernel, but it would also let a second gateway
/// started on the same port silently take half the traffic.)
pub fn bind(addr: SocketAddr, workers: usize) -> std::io::Result<Vec<std::net::TcpListener>> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    let first: std::net::TcpListener = s.into();
    let mut all = Vec::with_capacity(workers.max(1));
    for _ in 1..workers.max(1) {
        all.push(first.try_clone()?);
    }
    all.insert(0, first);
    Ok(all)
}

/// Serve one listener until `shutdown`; `slots` bounds open connections across all workers.
/// `state` is this worker's, swapped whole by a config reload: each request loads the current
/// one (a lean stream connection, its one request), so a reload reaches keep-alive connections
/// at their next request. After `shutdown`, connections get `grace` to finish.
pub async fn serve(
    listener: TcpListener,
    state: Arc<ArcSwap<State>>,
    slots: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // Without a timer this timeout panics; with it, a client that never finishes its
        // headers cannot hold a connection (and a slot of max_connections) forever.
        .header_read_timeout(Duration::from_secs(30))
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        // HTTP/2 server connections have no idle timeout of their own: ping dead peers away.
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(20));
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();

    loop {
        // Backpressure: at the connection bound, stop accepting and let the kernel queue.
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = shutdown.changed() => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = Conn::new(peer);
        // Open from here to the end of its task, under the transport it is served by.
        let mut open = {
            let current = state.load();
            let transport = match current.tls {
                Some(_) => Transport::Tls,
                None => Transport::Http,
            };
            current.metrics.open_connection(transport)
        };
        let st = state.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            // The protocol sniffing of the auto builder reads with no deadline of its own, and
            // header_read_timeout starts only after it: a client that sends nothing must not
            // hold a connection slot forever.
            // peek, not readable(): readiness may be reported spuriously; a byte may not.
            // The watcher is held meanwhile, so a shutdown must end this wait too, or the drain
            // would wait for silent clients.
            let mut first = [0u8; 512];
            let spoke = tokio::select! {
                r = tokio::time::timeout(FIRST_BYTES, stream.peek(&mut first)) => match r {
                    Ok(Ok(n)) if n > 0 => Some(n),
                    _ => None,
                },
                _ = stop.wait_for(|stopping| *stopping) => None,
            };
            let Some(n) = spoke else {
                drop(permit);
                return;
            };
            // TLS: the handshake is this task's, not the accept loop's, and bounded in time;
            // the certificate is the one current now (a reload changes later handshakes only).
            let current = st.load_full();
            if let Some(tls) = current.tls.clone() {
                let accepted = tokio::select! {
                    r = tls.accept(stream, TLS_START) => Some(r),
                    _ = stop.wait_for(|stopping| *stopping) => None,
                };
                let result = match &accepted {
                    Some(Ok(_)) => "ok",
                    Some(Err(e)) => e.label(),
                    None => "closed",
                };
                current
                    .metrics
                    .tls_handshakes
                    .with_label_values(&[result])
                    .inc();
                if let Some(reason) = accepted.as_ref().and_then(|r| r.as_ref().err()?.reason()) {
                    current
                        .metrics
                        .tls_handshake_failures
                        .with_label_values(&[reason])
                        .inc();
                }
                drop(current);
                match accepted {
                    Some(Ok((io, cert_subject))) => {
                        let conn = Conn {
                            https: true,
                            cert_subject,
                            ..conn
                        };
                        serve_hyper(&builder, TokioIo::new(io), st, conn, watcher).await;
                    }
                    Some(Err(e)) => tracing::debug!(%peer, error = %e, "TLS connection refused"),
                    None => {}
                }
                drop(permit);
                return;
            }
            // Task-stream subscribers take the lean path (see lean.rs): a long-lived
            // connection that only receives should not keep a whole HTTP stack.
            if lean::wants(&first[..n]) {
                open.serve_as(&current.metrics, Transport::Lean);
                lean::serve(stream, &current, &conn).await;
                drop(permit);
                return;
            }
            drop(current);
            serve_hyper(&builder, TokioIo::new(stream), st, conn, watcher).await;
            drop(open);
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(grace) => tracing::warn!("connections still open after shutdown_grace_ms; closing"),
    }
}

/// One connection served by hyper, plaintext or TLS: its requests, with their bodies, go
/// through the one pipeline, until it closes, the drain ends it, or it is killed.
async fn serve_hyper<I>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    state: Arc<ArcSwap<State>>,
    conn: Conn,
    watcher: Watcher,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let kill = conn.kill.clone();
    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let (state, conn) = (state.load_full(), conn.clone());
        async move {
            let req = req.map(RequestBody::Incoming);
            Ok::<_, Infallible>(pipeline::handle(&state, &conn, req).await)
        }
    });
    let conn = builder.serve_connection_with_upgrades(io, svc);
    tokio::select! {
        _ = watcher.watch(conn.into_owned()) => {}
        _ = kill.notified() => {}
    }
}
