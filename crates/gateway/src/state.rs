//! [`State`]: what every request handler is given, one per worker thread.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::ledger::TaskLedger;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::upstream::Upstream;
use crate::webhook::queue::DeliveryQueue;
use crate::{auth, limits, stream, telemetry, tls};

/// Everything a request handler needs. One per worker thread: the shared parts are `Arc`s, the
/// upstream client (and so its connection pool) is the worker's own. Cheap to clone, for work
/// that outlives its request (a create's late answer, `http::create`).
#[derive(Clone)]
pub struct State {
    /// The gateway's configuration, read and checked before start.
    pub config: Arc<Config>,
    /// The configured agents and the card each one currently serves.
    pub registry: Arc<Registry>,
    /// Where tasks are recorded: in this process, or in Redis when configured.
    pub ledger: Arc<dyn TaskLedger>,
    /// This worker's own client towards agents (and its own connection pool).
    pub upstream: Upstream,
    /// The Prometheus families, shared by every worker.
    pub metrics: Arc<Metrics>,
    /// Webhook deliveries (in Redis when configured), for the admin API and metrics.
    pub queue: Arc<dyn DeliveryQueue>,
    /// Live task streams and the change feed, shared by every worker.
    pub hub: Arc<stream::Hub>,
    /// Creates still awaited past their agent's timeout, across all workers (bounded).
    pub late_answers: Arc<tokio::sync::Semaphore>,
    /// The clients and how they authenticate (off when none are configured).
    pub auth: Arc<auth::Auth>,
    /// Set when a drain begins: `/readyz` answers 503 while requests are still served, so a load
    /// balancer stops sending before the listener closes.
    pub draining: Arc<AtomicBool>,
    /// The token buckets of rate-limited clients, shared by every worker. Apart from `auth`
    /// so that they outlive a reload of the clients (keyed by client name).
    pub buckets: Arc<limits::Buckets>,
    /// The server certificate, when `[tls]` is configured: the accept loop handshakes with the
    /// one current at each accept (swapped by [`Gateway::reload_tls`]).
    pub tls: Option<Arc<tls::Tls>>,
    /// The tracer, when `[telemetry] otlp_endpoint` is set.
    pub telemetry: Option<Arc<telemetry::Telemetry>>,
    /// The whole-fleet numbers of `/api/fleet`, shared by every worker for a second.
    pub fleet_totals: Arc<FleetTotals>,
    /// The fleet page's samples (`crate::samples`), shared by every worker.
    pub samples: Arc<crate::samples::Samples>,
    /// The A2A tasks with push configs this replica polls (their agents do not push).
    pub poller: Arc<crate::reconcile::Poller>,
    /// The address the listener is bound to (`listen`, its port 0 resolved): the base of the
    /// URLs the gateway writes where no request says one and `public_url` is unset.
    pub local_addr: std::net::SocketAddr,
}

/// The whole-fleet part of `/api/fleet` (task counts, webhook queue, streams), kept for a
/// second and shared by every caller that may see it: a read costs the store a round of
/// commands (on Redis, a pipeline per partition), and any number of open pages should cost it
/// about one round a second, not one per page.
#[derive(Default)]
pub struct FleetTotals(std::sync::Mutex<Option<(Instant, Arc<serde_json::Value>)>>);

/// How long [`FleetTotals`] serves one read.
const TOTALS_FOR: Duration = Duration::from_secs(1);

impl FleetTotals {
    /// The totals read within the last second, if any.
    pub fn fresh(&self, now: Instant) -> Option<Arc<serde_json::Value>> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.as_ref()
            .filter(|(at, _)| now.saturating_duration_since(*at) < TOTALS_FOR)
            .map(|(_, v)| v.clone())
    }

    /// Keep `v`, read at `at`.
    pub fn keep(&self, at: Instant, v: Arc<serde_json::Value>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some((at, v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fleet_totals_serve_one_read_for_a_second() {
        let t = FleetTotals::default();
        let at = Instant::now();
        assert!(t.fresh(at).is_none());
        t.keep(at, Arc::new(json!({"tasks": 1})));
        assert_eq!(
            t.fresh(at + Duration::from_millis(999)).as_deref(),
            Some(&json!({"tasks": 1}))
        );
        assert!(
            t.fresh(at + TOTALS_FOR).is_none(),
            "read again after a second"
        );
    }
}
