//! The checks of `[webhooks]` and `[[subscribers]]`.

use super::*;

impl Validator {
    pub(super) fn webhooks(&mut self, w: &WebhookConfig, rules: &dyn Rules) {
        for (i, entry) in w.allow.iter().enumerate() {
            if let Err(e) = rules.check(Check::AllowEntry(entry)) {
                self.problem(format!("webhooks.allow[{i}]"), e);
            }
        }
        match w.max_attempts {
            Some(n) if !(1..=101).contains(&n) => {
                self.problem("webhooks.max_attempts", "must be between 1 and 101")
            }
            _ => {
                if let Err(e) = rules.check(Check::RetrySchedule(&w.retry_waits_secs())) {
                    self.problem("webhooks.retry_schedule_secs", e);
                }
            }
        }
        self.millis("webhooks.timeout_ms", w.timeout, 300_000);
        self.range("webhooks.concurrency", w.concurrency as u64, 10_000);
        if let Some(n) = w.max_in_flight_per_client {
            if n < 1 || n > w.concurrency {
                self.problem(
                    "webhooks.max_in_flight_per_client",
                    format!(
                        "must be between 1 and webhooks.concurrency ({}): a client's share of the deliveries in flight",
                        w.concurrency
                    ),
                );
            }
        }
        self.secs(
            "webhooks.visibility_timeout_secs",
            w.visibility_timeout,
            86_400,
        );
        if w.visibility_timeout < w.timeout + Duration::from_secs(5) {
            self.problem(
                "webhooks.visibility_timeout_secs",
                "must exceed webhooks.timeout_ms by at least 5 s, or live deliveries would be taken over and sent twice",
            );
        }
        self.range("webhooks.max_queued", w.max_queued as u64, 1 << 32);
        if !(1 << 20..=1 << 40).contains(&w.max_queued_bytes) {
            self.problem(
                "webhooks.max_queued_bytes",
                "must be between 1048576 (1 MiB) and 1099511627776 (1 TiB)",
            );
        }
        if let Some(n) = w.max_queued_per_client {
            if n < 1 || n > w.max_queued {
                self.problem(
                    "webhooks.max_queued_per_client",
                    format!(
                        "must be between 1 and webhooks.max_queued ({}): a client's share of the queue",
                        w.max_queued
                    ),
                );
            }
        }
        self.range(
            "webhooks.max_dead_letters",
            w.max_dead_letters as u64,
            1 << 24,
        );
    }

    pub(super) fn subscriber(
        &mut self,
        s: &SubscriberConfig,
        at: &str,
        allow: &[String],
        agents: &[AgentConfig],
        rules: &dyn Rules,
    ) {
        self.name_and_url(at, &s.name, &s.url, |u| {
            rules
                .check(Check::SubscriberUrl { allow, url: u })
                .map_err(|e| e.to_string())
        });
        for secret in &s.secret {
            if let Err(e) = rules.check(Check::SigningSecret(secret.expose())) {
                self.problem(format!("{at}.secret"), e);
            }
        }
        if s.secret.len() > 8 {
            self.problem(
                format!("{at}.secret"),
                "at most 8 signing keys at once (a rotation needs two)",
            );
        }
        for a in s.agents.iter().flatten() {
            if !agents.iter().any(|c| c.name == *a) {
                self.problem(
                    format!("{at}.agents"),
                    format!("{a:?} is not the name of an [[agents]] entry"),
                );
            }
        }
        if s.protocols.as_ref().is_some_and(Vec::is_empty) {
            self.problem(
                format!("{at}.protocols"),
                "lists no protocol: the subscriber would receive nothing (leave it out for [\"clawpedia\"])",
            );
        }
    }
}
