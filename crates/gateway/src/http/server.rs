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
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::context::Conn;
use super::lean;
use super::pipeline;
use super::request::RequestBody;
use crate::metrics::{OpenConnection, Transport};
use crate::state::State;

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
        // Open from here to the end of its task, under the transport it is served by.
        let open = {
            let current = state.load();
            let transport = match current.tls {
                Some(_) => Transport::Tls,
                None => Transport::Http,
            };
            current.metrics.open_connection(transport)
        };
        tokio::spawn(connection(
            stream,
            Conn::new(peer),
            state.clone(),
            builder.clone(),
            graceful.watcher(),
            shutdown.clone(),
            (permit, open),
        ));
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(grace) => tracing::warn!("connections still open after shutdown_grace_ms; closing"),
    }
}

/// One accepted connection, in a task of its own, from its first bytes to its end: TLS and
/// hyper, or the lean stream path. A lean subscriber keeps this task's future for as long as
/// it subscribes, so every other path's state is boxed (see the size test below): only what
/// the lean path needs is inline.
async fn connection(
    stream: TcpStream,
    conn: Conn,
    st: Arc<ArcSwap<State>>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    watcher: Watcher,
    mut stop: watch::Receiver<bool>,
    held: (OwnedSemaphorePermit, OpenConnection),
) {
    // The connection slot and the open-connections gauge, released when the connection ends,
    // whichever way.
    let (_permit, mut open) = held;
    // The protocol sniffing of the auto builder reads with no deadline of its own, and
    // header_read_timeout starts only after it: a client that sends nothing must not hold a
    // connection slot forever. peek, not readable(): readiness may be reported spuriously; a
    // byte may not. The watcher is held meanwhile, so a shutdown must end this wait too, or the
    // drain would wait for silent clients.
    // Boxed: its peek buffer would otherwise stay in this future for the connection's life.
    let Some(lean) = Box::pin(first_bytes(&stream, &mut stop)).await else {
        return;
    };
    // TLS: the handshake is this task's, not the accept loop's, and bounded in time; the
    // certificate is the one current now (a reload changes later handshakes only).
    let current = st.load_full();
    if let Some(tls) = current.tls.clone() {
        drop(current);
        Box::pin(serve_tls(tls, stream, conn, st, builder, watcher, stop)).await;
        return;
    }
    // Task-stream subscribers take the lean path (see lean.rs): a long-lived connection that
    // only receives should not keep a whole HTTP stack.
    if lean {
        open.serve_as(&current.metrics, Transport::Lean);
        let Some(rewound) = lean::serve(stream, &current, &conn).await else {
            return;
        };
        // Not a subscription after all (a JSON-RPC call of another method): hyper's.
        open.serve_as(&current.metrics, Transport::Http);
        drop(current);
        let io = TokioIo::new(rewound);
        Box::pin(serve_hyper(&builder, io, st, conn, watcher)).await;
        return;
    }
    drop(current);
    Box::pin(serve_hyper(
        &builder,
        TokioIo::new(stream),
        st,
        conn,
        watcher,
    ))
    .await;
}

/// Wait for the client's first bytes (within [`FIRST_BYTES`], or until a shutdown): `None` if
/// none came, else whether they start a request for the lean stream path.
async fn first_bytes(stream: &TcpStream, stop: &mut watch::Receiver<bool>) -> Option<bool> {
    let mut first = [0u8; 512];
    let n = tokio::select! {
        r = tokio::time::timeout(FIRST_BYTES, stream.peek(&mut first)) => match r {
            Ok(Ok(n)) if n > 0 => n,
            _ => return None,
        },
        _ = stop.wait_for(|stopping| *stopping) => return None,
    };
    Some(lean::wants(&first[..n]))
}

/// A TLS connection: the handshake, counted, then hyper (h2 or http/1.1 as ALPN chose).
async fn serve_tls(
    tls: Arc<crate::tls::Tls>,
    stream: TcpStream,
    conn: Conn,
    st: Arc<ArcSwap<State>>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    watcher: Watcher,
    mut stop: watch::Receiver<bool>,
) {
    let peer = conn.peer;
    let accepted = tokio::select! {
        r = tls.accept(stream, TLS_START) => Some(r),
        _ = stop.wait_for(|stopping| *stopping) => None,
    };
    let result = match &accepted {
        Some(Ok(_)) => "ok",
        Some(Err(e)) => e.label(),
        None => "closed",
    };
    let metrics = &st.load().metrics;
    metrics.tls_handshakes.with_label_values(&[result]).inc();
    if let Some(reason) = accepted.as_ref().and_then(|r| r.as_ref().err()?.reason()) {
        metrics
            .tls_handshake_failures
            .with_label_values(&[reason])
            .inc();
    }
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
    // An answer sent before the body was read must reach a client still sending it.
    let conn = builder.serve_connection_with_upgrades(super::linger::Lingering::new(io), svc);
    tokio::select! {
        _ = watcher.watch(conn.into_owned()) => {}
        _ = kill.notified() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the futures a function returns, without calling it.
    fn future_size<A, B, C, D, E, F, G, Fut>(_: fn(A, B, C, D, E, F, G) -> Fut) -> usize {
        std::mem::size_of::<Fut>()
    }

    /// What a lean subscriber's connection task holds inline for as long as it subscribes, as
    /// measured in the build `cargo test` makes (a release build's is smaller). Every one of
    /// 10,000 subscribers on a task pays for each byte: with the TLS branch inline (a rustls
    /// connection in the future), it was 6,808 bytes here, and a plaintext subscriber cost
    /// 8.8 KB of RSS in benches/sse_fanout.rs instead of 2.6 KB. A change that grows it must
    /// shrink it again, or measure the bench and say why the bound moves. (1,968 until the
    /// A2A subscriptions came to this path; their head and body are read in a boxed future.)
    const LEAN_TASK_BYTES: usize = 1760;

    #[test]
    fn a_lean_subscribers_task_does_not_grow_past_its_measured_size() {
        let size = future_size(connection);
        assert!(
            size <= LEAN_TASK_BYTES,
            "the connection task grew to {size} bytes (measured: {LEAN_TASK_BYTES})"
        );
    }
}
