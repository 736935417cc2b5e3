//! The cards' refresh: one loop per agent, and one fetch of one agent's card, recorded in its
//! slot (the last good card never replaced by a failure), its `agent_id` indexed, and, for an
//! agent with several replicas, every replica's card checked against it (`shape`).

use super::*;

impl Registry {
    /// Start one refresh loop for each of `agents`. Each fetches at once, so a slow agent delays
    /// only itself. A loop works in the registry `current` holds at each turn, with the card
    /// client `upstream` holds then (a reload may rebuild it for new CA files), and ends as soon
    /// as its agent is retired by a reload.
    pub fn spawn_refreshers(
        current: &Arc<ArcSwap<Registry>>,
        agents: &[Arc<Agent>],
        upstream: &Arc<ArcSwap<Upstream>>,
        metrics: Arc<Metrics>,
        shutdown: watch::Receiver<bool>,
    ) {
        for agent in agents {
            // Its limits' series exist from the start, not from its first request.
            agent.replicas.bind(&metrics, &agent.cfg.name);
            let (current, agent, up, m, mut stop) = (
                current.clone(),
                agent.clone(),
                upstream.clone(),
                metrics.clone(),
                shutdown.clone(),
            );
            tokio::spawn(async move {
                let mut failures = 0u32;
                loop {
                    let reg = current.load_full();
                    if agent.is_retired() || !reg.holds(&agent) {
                        return;
                    }
                    let client = up.load_full();
                    let wait = match reg.refresh(&agent, &client, &m).await {
                        Ok(next) => {
                            failures = 0;
                            next
                        }
                        Err(()) => {
                            failures = failures.saturating_add(1);
                            backoff(failures, agent.cfg.refresh)
                        }
                    };
                    drop((reg, client));
                    let first = agent.replicas.live().first().map(|r| r.limits.clone());
                    let back = async {
                        match &first {
                            Some(l) => l.back.notified().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        // An answer named another agent_id than the card's.
                        _ = agent.refetch.notified() => {}
                        // Back from an ejection: it may have restarted as another agent.
                        _ = back => {}
                        _ = agent.retire.notified() => return,
                        _ = stop.changed() => return,
                    }
                }
            });
        }
    }

    /// One fetch of one agent's card. Ok(delay until the next), or Err after recording why.
    pub async fn refresh(&self, agent: &Agent, up: &Upstream, m: &Metrics) -> Result<Duration, ()> {
        let name = agent.cfg.name.as_str();
        // Replicas are checked against the serving card before it is refetched, so that the
        // refetch goes to one still serving it (see `fetch::source`).
        let checked = agent.slot().shape;
        if let Some(serving) = &checked {
            shape::check(agent, up, serving).await;
        }
        let outcome = fetch(agent, up, &self.compiles)
            .await
            .and_then(|f| self.not_shadowed(name, f));
        let result_label = match &outcome {
            Ok(Fetched::NotModified { .. }) => "not_modified",
            Ok(Fetched::New { .. }) => "ok",
            // An oversized card is the agent's mistake, not a network failure.
            Err(CardError::Invalid(_))
            | Err(CardError::OverBudget(_))
            | Err(CardError::NoInterface(_))
            | Err(CardError::Upstream(UpstreamError::TooLarge(_))) => "invalid",
            Err(CardError::Status(_)) => "http_error",
            Err(CardError::Upstream(UpstreamError::Timeout(_))) => "timeout",
            Err(CardError::Upstream(_)) => "unreachable",
        };
        m.card_fetches
            .with_label_values(&[name, result_label])
            .inc();
        let refusal = match &outcome {
            Err(CardError::Invalid(_)) => Some(Refusal::Invalid),
            Err(CardError::NoInterface(_)) => Some(Refusal::NoSupportedInterface),
            Err(CardError::OverBudget(_))
            | Err(CardError::Upstream(UpstreamError::TooLarge(_))) => Some(Refusal::Budget),
            _ => None,
        };
        if let Some(r) = refusal {
            m.card_refusals.with_label_values(&[name, r.as_str()]).inc();
        }
        match outcome {
            Ok(Fetched::NotModified { max_age }) => {
                agent.update(|s| {
                    s.attempted = true;
                    if s.card.is_some() {
                        s.state = CardState::Fresh;
                        s.fetched_at = Some(Utc::now());
                        s.fetched_instant = Some(Instant::now());
                        s.last_error = None;
                        s.public_error = None;
                    }
                });
                Ok(max_age.unwrap_or(agent.cfg.refresh))
            }
            Ok(Fetched::New {
                card,
                shape,
                etag,
                max_age,
            }) => {
                let card = Arc::new(*card);
                let old = agent.slot().card;
                // Said once per card that raises it, not at every refresh.
                let warning = card.warning(name);
                if old.as_ref().map(|c| c.warning(name)) != Some(warning) {
                    warn_about(name, &card);
                }
                let old_id = old.and_then(|c| c.agent_id().map(str::to_owned));
                if let Some(new_id) = card.agent_id() {
                    let mut ids = self.by_id.write().unwrap_or_else(|p| p.into_inner());
                    let mine = |a: &Arc<Agent>| a.cfg.name == name;
                    if let Some(old) = old_id.filter(|o| o != new_id) {
                        if ids.get(&old).is_some_and(mine) {
                            ids.remove(&old);
                        }
                    }
                    match (ids.get(new_id), self.by_name.get(name)) {
                        // First come keeps the alias: two agents claiming one agent_id is a
                        // fleet misconfiguration, not something to resolve by whoever refreshed last.
                        (Some(other), _) if !mine(other) => tracing::warn!(
                            agent = name,
                            other = %other.cfg.name,
                            agent_id = %new_id,
                            "two agents' cards claim the same agent_id; it keeps routing to the first"
                        ),
                        (_, Some(me)) => {
                            ids.insert(new_id.to_owned(), me.clone());
                        }
                        _ => {}
                    }
                }
                agent.update(|s| {
                    *s = CardSlot {
                        card: Some(card),
                        state: CardState::Fresh,
                        fetched_at: Some(Utc::now()),
                        fetched_instant: Some(Instant::now()),
                        last_error: None,
                        public_error: None,
                        refusal: None,
                        etag,
                        attempted: true,
                        shape: Some(Arc::new(shape.clone())),
                    }
                });
                // A first card, or another one: the replicas are compared with it now.
                if checked.as_deref() != Some(&shape) {
                    shape::check(agent, up, &shape).await;
                }
                Ok(max_age.unwrap_or(agent.cfg.refresh))
            }
            Err(e) => {
                let reason = e.to_string();
                let public = e.public();
                tracing::warn!(agent = name, error = %reason, "agent card fetch failed; last good card (if any) keeps serving");
                agent.update(|s| {
                    s.attempted = true;
                    s.state = if s.card.is_some() {
                        CardState::Stale
                    } else {
                        CardState::Unavailable
                    };
                    s.last_error = Some(reason);
                    s.public_error = Some(public);
                    s.refusal = refusal;
                });
                Err(())
            }
        }
    }
}
