//! A connection to the store (one node or a cluster, timed into the command histogram) and
//! how one is made: the link a store keeps, the CA bundle of `rediss://`, and which failures
//! mean the connection, not the call, broke.

use std::time::{Duration, Instant};

use prometheus::Histogram;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};

use super::{StoreError, StoreResult};

/// Connect and answer timeouts of every connection.
pub(super) const TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to the store: one node (reconnecting by itself) or a cluster (following MOVED
/// and ASK, refreshing its slot map). Cheap to clone: both are handles to one multiplexed
/// connection. Every command and pipeline sent through it is timed into
/// `a2a_gateway_redis_command_duration_seconds` once the store is instrumented
/// ([`Store::instrument`]): this is the one place every call of the ledger, the queue and the
/// pinger passes.
#[derive(Clone)]
pub struct Conn {
    kind: Kind,
    timer: Option<Histogram>,
}

#[derive(Clone)]
enum Kind {
    /// One Redis node.
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

/// `fut`, observed into `timer` from now to its answer (an error's included).
fn timed<'a, T: Send + 'a>(
    timer: Option<&'a Histogram>,
    fut: RedisFuture<'a, T>,
) -> RedisFuture<'a, T> {
    match timer {
        None => fut,
        Some(h) => Box::pin(async move {
            let at = Instant::now();
            let r = fut.await;
            h.observe(at.elapsed().as_secs_f64());
            r
        }),
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let fut = match &mut self.kind {
            Kind::Single(c) => c.req_packed_command(cmd),
            Kind::Cluster(c) => c.req_packed_command(cmd),
        };
        timed(self.timer.as_ref(), fut)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let fut = match &mut self.kind {
            Kind::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Kind::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        };
        timed(self.timer.as_ref(), fut)
    }

    fn get_db(&self) -> i64 {
        match &self.kind {
            Kind::Single(c) => c.get_db(),
            Kind::Cluster(c) => c.get_db(),
        }
    }
}

/// How to make a connection. One per store, cloned only to make a worker's own connection:
/// its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub(super) enum Link {
    Single(redis::Client),
    Cluster(ClusterClient),
}

impl Link {
    pub(super) async fn connect(&self, timer: Option<Histogram>) -> StoreResult<Conn> {
        let kind = match self {
            Link::Single(client) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(TIMEOUT))
                    .set_response_timeout(Some(TIMEOUT))
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_millis(500));
                ConnectionManager::new_with_config(client.clone(), config)
                    .await
                    .map(Kind::Single)?
            }
            Link::Cluster(client) => client.get_async_connection().await.map(Kind::Cluster)?,
        };
        Ok(Conn { kind, timer })
    }
}

/// Whether a failed call may not have reached Redis, or its answer was lost: a broken or
/// refused connection, a timeout, a cluster in the middle of a change. An idempotent call is
/// safe to send again on a fresh connection.
pub fn is_broken(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_cluster_error()
        || matches!(
            e.kind(),
            redis::ErrorKind::Server(
                redis::ServerErrorKind::TryAgain
                    | redis::ServerErrorKind::ClusterDown
                    | redis::ServerErrorKind::MasterDown
                    | redis::ServerErrorKind::ReadOnly
                    | redis::ServerErrorKind::BusyLoading
            )
        )
}

/// PEM of `ca_file` followed by the system roots: `rediss://` servers are checked against
/// both (redis-rs takes one bundle that replaces its default roots).
pub(super) fn root_bundle(ca_file: &str) -> Result<Vec<u8>, StoreError> {
    use base64::Engine;
    let mut pem = std::fs::read(ca_file).map_err(|source| StoreError::CaFile {
        path: ca_file.to_owned(),
        source,
    })?;
    if !pem.ends_with(b"\n") {
        pem.push(b'\n');
    }
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        pem.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
        let b64 = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
        for line in b64.as_bytes().chunks(64) {
            pem.extend_from_slice(line);
            pem.push(b'\n');
        }
        pem.extend_from_slice(b"-----END CERTIFICATE-----\n");
    }
    Ok(pem)
}
