//! a2a-gateway: one endpoint in front of a fleet of A2A 1.0 agents.
//!
//! Layout: `protocol` is the A2A core with no I/O (types, state machine, schemas, conformance);
//! everything that touches a socket or a store sits at the edge (`registry` fetches cards,
//! `upstream` talks to agents, `ledger` records tasks behind a trait, `http` serves clients).
//! [`Gateway::start`] wires them together; tests start it in-process on port 0.

pub mod config;
pub mod http;
pub mod ledger;
pub mod metrics;
pub mod protocol;
pub mod registry;
pub mod sample;
pub mod upstream;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use config::Config;
use ledger::{MemoryLedger, TaskLedger};
use metrics::Metrics;
use registry::Registry;
use upstream::Upstream;

/// Everything a request handler needs, shared by all connections.
pub struct State {
    pub config: Config,
    pub registry: Arc<Registry>,
    pub ledger: Arc<dyn TaskLedger>,
    pub upstream: Upstream,
    pub metrics: Arc<Metrics>,
}

/// A running gateway.
pub struct Gateway {
    addr: SocketAddr,
    state: Arc<State>,
    stop: watch::Sender<bool>,
    server: JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
}

impl Gateway {
    /// Bind, start fetching every agent's card (without waiting for any), and serve.
    pub async fn start(config: Config) -> Result<Gateway, StartError> {
        if config.redis.is_some() {
            return Err(StartError::Setup(
                "[redis] is configured, but this build only has the in-process store; remove [redis] to run on it".into(),
            ));
        }
        let metrics =
            Arc::new(Metrics::new().map_err(|e| StartError::Setup(format!("metrics: {e}")))?);
        let upstream = Upstream::new(config.connect_timeout).map_err(StartError::Setup)?;
        let ledger: Arc<dyn TaskLedger> = Arc::new(MemoryLedger::new(
            config.max_tasks,
            config.task_retention,
            metrics.ledger_evictions.clone(),
        ));
        let registry = Arc::new(Registry::new(&config.agents));
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| StartError::Listen {
                    addr: config.listen,
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
        let (stop, stop_rx) = watch::channel(false);
        registry.spawn_refreshers(upstream.clone(), metrics.clone(), stop_rx.clone());
        let state = Arc::new(State {
            config,
            registry,
            ledger,
            upstream,
            metrics,
        });
        let server = tokio::spawn(http::serve(listener, state.clone(), stop_rx));
        Ok(Gateway {
            addr,
            state,
            stop,
            server,
        })
    }

    /// The address actually bound (port 0 resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// Stop accepting, let in-flight requests finish (bounded), stop card refreshes.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.server.await;
    }

    /// Serve until the process is asked to stop (Ctrl-C or SIGTERM).
    pub async fn run_until_signal(self) {
        shutdown_signal().await;
        tracing::info!("shutting down");
        self.shutdown().await;
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
