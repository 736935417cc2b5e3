//! A running gateway's life after start: a reload (SIGHUP, or [`Gateway::reload`]) swaps a
//! whole new generation of the config in, and a drain (SIGTERM) stops it without cutting
//! what is in flight. See docs/architecture.md, "Reload and drain".

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::config::{self, Config};
use crate::registry::Registry;
use crate::reload::{Changes, ReloadError, Reloaded};
use crate::state::State;
use crate::upstream::Upstream;
use crate::{auth, stream, webhook, ConfigRules, Gateway};

/// What a reload does with the webhook worker.
enum Webhooks {
    /// Give the running worker (if any) this sender.
    Swap(webhook::send::Sender),
    /// Start this worker: the first subscribers.
    Start(webhook::worker::Worker),
}

impl Gateway {
    /// Apply a new config (already read and checked: `Config::load_with`), atomically: the next
    /// request of every worker sees all of it, none sees part. Agents added, changed and removed
    /// (an unchanged agent keeps its card, streams and counters; a removed one's streams end with
    /// a final event, a changed one's with a retry hint); clients, keys and JWKS; subscribers and
    /// their keys; limits; CORS. `listen`, `workers` and `[redis]` keep their running values
    /// (named in [`Reloaded::need_restart`]). Requests in flight and open streams go on.
    /// An error (the JWKS file or a subscriber cannot be used) changes nothing.
    pub async fn reload(&self, new: Config) -> Result<Reloaded, ReloadError> {
        let _one = self.reloading.lock().await;
        let result = self.reload_inner(new);
        let label = if result.is_ok() { "applied" } else { "refused" };
        self.metrics
            .config_reloads
            .with_label_values(&[label])
            .inc();
        result
    }

    fn reload_inner(&self, mut new: Config) -> Result<Reloaded, ReloadError> {
        let old = self.config();
        let mut out = Reloaded::default();
        // What only a restart applies keeps its running value, so the rest stays consistent.
        if new.listen != old.listen {
            out.need_restart.push("listen");
            new.listen = old.listen;
        }
        if new.workers != old.workers {
            out.need_restart.push("workers");
            new.workers = old.workers;
        }
        if new.redis != old.redis {
            out.need_restart.push("redis");
            new.redis = old.redis.clone();
        }
        // The tracer and the logger are made once, at start.
        if new.telemetry != old.telemetry {
            out.need_restart.push("telemetry");
            new.telemetry = old.telemetry.clone();
        }
        if new.log_format != old.log_format {
            out.need_restart.push("log_format");
            new.log_format = old.log_format;
        }
        // Serving TLS or not needs a restart; the files are read again on every reload (that
        // is how a rotated certificate is picked up).
        if new.tls.is_some() != old.tls.is_some() {
            out.need_restart.push("tls");
            new.tls = old.tls.clone();
        }
        if new.shutdown_grace != old.shutdown_grace {
            // The workers' accept loops took it at start.
            out.need_restart.push("shutdown_grace_ms");
            new.shutdown_grace = old.shutdown_grace;
        }
        if new.webhooks.timeout != old.webhooks.timeout {
            // The delivery worker checks its visibility budget with the timeout it started
            // with: a longer one applied only to the sender could outlive it.
            out.need_restart.push("webhooks.timeout_ms");
            new.webhooks.timeout = old.webhooks.timeout;
        }
        for (key, same) in [
            (
                "max_connections",
                new.max_connections == old.max_connections,
            ),
            ("max_tasks", new.max_tasks == old.max_tasks),
            (
                "max_ledger_bytes",
                new.max_ledger_bytes == old.max_ledger_bytes,
            ),
            (
                "task_retention_secs",
                new.task_retention == old.task_retention,
            ),
            ("streams", new.streams == old.streams),
            (
                "webhooks (other than allow)",
                new.webhooks.retry_waits_secs() == old.webhooks.retry_waits_secs()
                    && new.webhooks.concurrency == old.webhooks.concurrency
                    && new.webhooks.per_client() == old.webhooks.per_client()
                    && new.webhooks.visibility_timeout == old.webhooks.visibility_timeout
                    && new.webhooks.queue_bounds() == old.webhooks.queue_bounds()
                    && new.webhooks.max_dead_letters == old.webhooks.max_dead_letters,
            ),
        ] {
            if !same {
                out.need_restart.push(key);
            }
        }

        // 1. Everything that can fail, before anything changes.
        let old_auth = self.auth();
        let auth = Arc::new(old_auth.reloaded(&new)?);
        let webhooks = self.prepare_webhooks(&new)?;
        // An agent's ca_file and the connect timeout are built into the clients towards
        // agents: with any ca_file (its file may have been rotated in place) or a new timeout,
        // every worker and the card refreshes get new clients (cold pools).
        let cas = |c: &Config| -> Vec<(String, String)> {
            c.agents
                .iter()
                .filter_map(|a| a.ca_file.clone().map(|f| (a.url.clone(), f)))
                .collect()
        };
        let rebuild = !(cas(&new).is_empty() && cas(&old).is_empty())
            || new.connect_timeout != old.connect_timeout;
        let mut upstreams = if rebuild {
            let fresh = (0..=self.states.len())
                .map(|_| Upstream::new(new.connect_timeout, &new.agents))
                .collect::<Result<Vec<_>, _>>()?;
            Some(fresh.into_iter())
        } else {
            None
        };
        let signer = crate::caller::of_config(&new)?;
        if let Some(tls) = &new.tls {
            // The last step that can fail: it swaps the certificate when it succeeds.
            self.reload_tls(tls)?;
        }

        // 2. The swap: nothing below fails.
        let new = Arc::new(new);
        let (registry, fresh, ended) = self.registry.load().reload(&new.agents);
        let registry = Arc::new(registry);
        registry.set_signer(signer);
        for a in &ended {
            // Its replicas' series go with it (the new agent of the name binds its own after).
            for r in a.replicas.live().iter() {
                r.limits.unbind(&self.metrics, &a.cfg.name);
            }
            let name = a.cfg.name.clone();
            if new.agents.iter().any(|c| c.name == name) {
                out.agents_changed.push(name);
            } else {
                out.agents_removed.push(name);
            }
        }
        out.clients = Changes::between(&old.clients, &new.clients, |c| &c.name);
        out.subscribers = Changes::between(&old.subscribers, &new.subscribers, |s| &s.name);
        out.agents_added = fresh
            .iter()
            .map(|a| a.cfg.name.clone())
            .filter(|n| !old.agents.iter().any(|c| c.name == *n))
            .collect();
        // The streams of agents that are gone (or are now another agent) end first: a request
        // still on the old state cannot open a new one (the agents are retired), and none on
        // the new state has opened one yet.
        for name in &out.agents_removed {
            let data = serde_json::json!({ "reason": "agent removed from the gateway's config" });
            self.hub
                .close_agent(name, Some((stream::UPSTREAM_ERROR, &data.to_string())));
        }
        for name in &out.agents_changed {
            self.hub.close_agent(name, None);
        }
        if let Some(up) = upstreams.as_mut().and_then(Iterator::next) {
            self.card_upstream.store(Arc::new(up));
        }
        self.registry.store(registry.clone());
        Registry::spawn_refreshers(
            &self.registry,
            &fresh,
            &self.card_upstream,
            self.metrics.clone(),
            self.stop_rx.clone(),
        );
        // The sender before the routes: a delivery for a new subscriber finds it configured.
        let start = self.swap_webhooks(webhooks);
        for s in &self.states {
            let cur = s.load();
            let upstream = upstreams
                .as_mut()
                .and_then(Iterator::next)
                .unwrap_or_else(|| cur.upstream.clone());
            s.store(Arc::new(State {
                config: new.clone(),
                registry: registry.clone(),
                auth: auth.clone(),
                upstream,
                ..State::clone(&cur)
            }));
        }
        // Issuers the reload added (or whose source changed) start fetching their keys; a
        // removed issuer's key gauge goes with it (its fetch counts stay, as counters do).
        auth.start_oidc(&self.metrics);
        let kept: Vec<_> = auth.oidc_discovery().into_iter().map(|(n, _)| n).collect();
        for (gone, _) in old_auth.oidc_discovery() {
            if !kept.contains(&gone) {
                let _ = self.metrics.jwks_keys.remove_label_values(&[&gone]);
            }
        }
        // Every worker serves with the new identity now: streams it no longer grants end.
        auth.revoke_withdrawn(&registry);
        self.outbox.replace(&new.agents, &new.subscribers);
        if let Some(worker) = start {
            // The first subscribers: the worker's thread starts now. Should the OS refuse a
            // thread, the deliveries stay queued for the next start (the reload stands).
            let handle = worker.sender_handle();
            match worker.spawn(self.stop_rx.clone()) {
                Ok(_) => *self.webhooks.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle),
                Err(e) => {
                    tracing::error!(error = %e, "webhook worker thread did not start; deliveries stay queued")
                }
            }
        }
        Ok(out)
    }

    /// The clients every worker serves with now (a gateway has at least one worker).
    fn auth(&self) -> Arc<auth::Auth> {
        self.states[0].load().auth.clone()
    }

    /// What the new config's subscribers need, built before anything is swapped: a sender for
    /// the running worker, or a worker to start (the first subscribers).
    fn prepare_webhooks(&self, cfg: &Config) -> Result<Webhooks, ReloadError> {
        let sender = webhook::send::Sender::new(&cfg.subscribers, &cfg.webhooks)?;
        let running = self
            .webhooks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        if running || !crate::delivers(cfg) {
            return Ok(Webhooks::Swap(sender));
        }
        let state = self.states[0].load();
        let worker = webhook::worker::Worker::new(
            state.queue.clone(),
            sender,
            &cfg.webhooks,
            self.metrics.clone(),
        )?
        .with_telemetry(self.telemetry.clone())
        .with_push(Some(Arc::new(crate::ledger::push::Directory(
            state.ledger.clone(),
        ))));
        Ok(Webhooks::Start(worker))
    }

    /// Put the new sender in place (a running worker, if any, takes it for its next delivery);
    /// the worker to start, if this is the first config with subscribers.
    fn swap_webhooks(&self, plan: Webhooks) -> Option<webhook::worker::Worker> {
        match plan {
            Webhooks::Swap(sender) => {
                if let Some(h) = self
                    .webhooks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                {
                    h.store(Arc::new(sender));
                }
                None
            }
            Webhooks::Start(worker) => Some(worker),
        }
    }

    /// Swap the server certificate (and client CA) for what `cfg` names: every handshake from
    /// now on uses the new files, connections already open keep theirs, none is dropped.
    /// Files that cannot be used change nothing and the error says why (the old certificate
    /// keeps serving). A gateway started without `[tls]` refuses: switching plaintext to TLS
    /// needs a restart.
    pub fn reload_tls(&self, cfg: &config::TlsConfig) -> Result<(), ReloadError> {
        match &self.tls {
            Some(tls) => Ok(tls.reload(cfg)?),
            None => Err(ReloadError::TlsOff),
        }
    }

    /// Drain and stop: `/readyz` answers 503 for `drain_delay_ms` while requests are still
    /// served (so a load balancer stops sending first); then the listeners close, every stream
    /// ends with a `retry:` hint (EventSources reconnect elsewhere), in-flight requests get
    /// `shutdown_grace_ms` to finish, and late answers to creates are awaited (bounded). Card
    /// refreshes and the webhook worker stop; queued deliveries stay queued.
    pub async fn shutdown(self) {
        self.draining.store(true, Ordering::Release);
        let delay = self.config().drain_delay;
        if !delay.is_zero() {
            tracing::info!(
                delay_ms = delay.as_millis() as u64,
                "draining: /readyz answers 503"
            );
            tokio::time::sleep(delay).await;
        }
        let _ = self.stop.send(true);
        // Open event streams would hold the drain up until its deadline: end them now, each
        // with a hint to reconnect.
        self.hub.drain();
        let workers = self.workers;
        let _ = tokio::task::spawn_blocking(move || {
            for w in workers {
                let _ = w.join();
            }
        })
        .await;
        // Last: the spans of the requests that just finished go out too.
        if let Some(t) = &self.telemetry {
            t.shutdown().await;
        }
    }

    /// Serve until the process is asked to stop (Ctrl-C or SIGTERM), then drain.
    pub async fn run_until_signal(self, signals: Signals) {
        self.run_with_signals(signals, None).await
    }

    /// Serve until Ctrl-C or SIGTERM (then drain); on SIGHUP, read `config_path` again and
    /// reload it ([`Gateway::reload`]). A file with problems is refused, each problem logged
    /// with its key, and the running config goes on.
    ///
    /// `signals` are registered by the caller before it tells anyone the gateway is up: a
    /// SIGTERM sent the moment the address is announced must drain, not kill the process.
    pub async fn run_with_signals(
        self,
        mut signals: Signals,
        config_path: Option<std::path::PathBuf>,
    ) {
        loop {
            match signals.next().await {
                Signal::Stop => break,
                Signal::Reload => match &config_path {
                    Some(path) => self.reload_file(path).await,
                    None => tracing::warn!(
                        "SIGHUP: no config file to reload (started without --config)"
                    ),
                },
            }
        }
        tracing::info!("shutting down");
        self.shutdown().await;
    }

    /// Read, check and apply the config at `path`, logging the outcome.
    pub async fn reload_file(&self, path: &std::path::Path) {
        let cfg = match Config::load_with(path, &ConfigRules) {
            Ok(cfg) => cfg,
            Err(problems) => {
                self.metrics
                    .config_reloads
                    .with_label_values(&["refused"])
                    .inc();
                for p in &problems {
                    tracing::error!(problem = %p, "reload refused: {} is not a valid config", path.display());
                }
                return;
            }
        };
        match self.reload(cfg).await {
            Ok(r) => {
                tracing::info!(added = ?r.agents_added, changed = ?r.agents_changed,
                    removed = ?r.agents_removed, clients_added = ?r.clients.added,
                    clients_changed = ?r.clients.changed, clients_removed = ?r.clients.removed,
                    subscribers_added = ?r.subscribers.added,
                    subscribers_changed = ?r.subscribers.changed,
                    subscribers_removed = ?r.subscribers.removed,
                    "config reloaded from {}", path.display());
                if !r.need_restart.is_empty() {
                    tracing::warn!(keys = ?r.need_restart,
                        "reload applied, but these changed keys need a restart; their running values stay");
                }
            }
            Err(e) => tracing::error!(error = %e, "reload refused; the running config goes on"),
        }
    }
}

enum Signal {
    Stop,
    Reload,
}

/// The signals the gateway acts on, registered once (a signal that arrives while a reload runs
/// is not lost). Register them before announcing the address: until then, SIGTERM's default
/// action ends the process without a drain.
pub struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Take over SIGTERM, SIGINT (Ctrl-C) and SIGHUP for this process from now on.
    pub fn register() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
                hup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            async fn on(s: &mut Option<tokio::signal::unix::Signal>) {
                match s.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = on(&mut self.int) => Signal::Stop,
                _ = on(&mut self.term) => Signal::Stop,
                _ = on(&mut self.hup) => Signal::Reload,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Stop
        }
    }
}
