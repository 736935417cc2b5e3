//! The listener: hyper-util's auto builder (HTTP/1.1 and h2c), a bound on open connections,
//! timeouts hyper does not set by itself, and graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::State;

/// How long in-flight requests get to finish after shutdown is asked for.
const DRAIN: Duration = Duration::from_secs(10);

/// Bind `workers` listeners on one address with SO_REUSEPORT (the first resolves port 0, the
/// others join it), ready to be handed to worker runtimes.
pub fn bind(addr: SocketAddr, workers: usize) -> std::io::Result<Vec<std::net::TcpListener>> {
    let one = |addr: SocketAddr| -> std::io::Result<std::net::TcpListener> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        s.set_reuse_address(true)?;
        s.set_reuse_port(true)?;
        s.set_nonblocking(true)?;
        s.bind(&addr.into())?;
        s.listen(1024)?;
        Ok(s.into())
    };
    let first = one(addr)?;
    let bound = first.local_addr()?;
    let mut all = vec![first];
    for _ in 1..workers.max(1) {
        all.push(one(bound)?);
    }
    Ok(all)
}

/// Serve one listener until `shutdown`; `slots` bounds open connections across all workers.
pub async fn serve(
    listener: TcpListener,
    state: Arc<State>,
    slots: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
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
        let st = state.clone();
        let svc = service_fn(move |req| crate::http::handle(st.clone(), peer, req));
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), svc)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(DRAIN) => tracing::warn!("connections still open after the drain period; closing"),
    }
}
