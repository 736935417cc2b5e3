//! Webhook delivery to subscribers.
//!
//! Pure parts: [`sign`] writes and checks Standard Webhooks signatures, [`guard`] decides which
//! subscriber URLs and resolved addresses may be reached, and [`retry`] holds the schedule and
//! the meaning of each response. Edge parts: [`queue`] is the durable queue behind one trait
//! (Redis lanes, stream and scripts, or in process), [`send`] makes one attempt, and [`worker`]
//! runs them, each client's attempts in flight bounded by its [`share`]. Every accepted task status change becomes one delivery per matching subscriber,
//! queued in the same atomic step that records it (the ledger's outbox), so a crash loses
//! nothing and at worst delivers twice under the same `webhook-id` for receivers to
//! deduplicate. Deliveries for one subscriber and task go out one at a time, in order. The
//! design, as built: docs/webhook-delivery.md.

pub mod guard;
pub mod push;
pub mod queue;
pub mod retry;
pub mod send;
pub mod share;
pub mod sign;
pub mod worker;

/// The config's checks of a subscriber URL: the URL guard under the allow list's good entries
/// (a bad entry is reported at its own key, `webhooks.allow[i]`, by [`guard::Cidr`]'s parse).
pub fn check_subscriber_url(allow: &[String], url: &str) -> Result<(), guard::GuardError> {
    let allow: Vec<&String> = allow
        .iter()
        .filter(|a| a.parse::<guard::Cidr>().is_ok())
        .collect();
    let guard = guard::UrlGuard::new(&allow).unwrap_or_default();
    guard.check_url(url).map(drop)
}

/// The config's webhook parts, checked with the crate's `ConfigRules` (the config module knows
/// neither the guard, the schedule's limits nor signing keys).
#[cfg(test)]
mod config_tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{Config, Problem};

    fn parse(text: &str) -> Result<Config, Vec<Problem>> {
        Config::parse_with(text, &crate::ConfigRules)
    }

    const KEY: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn subscribers_and_webhooks_parse() {
        let cfg = parse(&format!(
            r#"
            listen = "127.0.0.1:0"
            admin_token = "admin-0123456789abcdef"
            [[agents]]
            name = "a"
            url = "http://x"
            [[agents]]
            name = "b"
            url = "http://y"
            [webhooks]
            allow = ["127.0.0.1/32", "10.0.0.0/8"]
            retry_schedule_secs = [1, 2]
            max_attempts = 5
            timeout_ms = 2000
            visibility_timeout_secs = 30
            concurrency = 8
            [[subscribers]]
            name = "ops"
            url = "http://127.0.0.1:9/hook"
            auth_header = "Authorization: Bearer sub-secret-token"
            secret = "{KEY}"
            agents = ["b"]
            [[subscribers]]
            name = "all"
            url = "https://hooks.example.com/x"
        "#
        ))
        .expect("valid");
        let w = &cfg.webhooks;
        let schedule = retry::Schedule::from_config(w).expect("schedule");
        assert_eq!(schedule.max_attempts(), 5, "the last wait repeats");
        assert_eq!(schedule.delays()[3], Duration::from_secs(2));
        assert_eq!((w.concurrency, w.timeout), (8, Duration::from_secs(2)));
        let ops = &cfg.subscribers[0];
        let claw = crate::config::Protocol::Clawpedia;
        assert!(ops.follows("b", claw) && !ops.follows("a", claw));
        assert!(cfg.subscribers[1].follows("a", claw));
        // Official A2A changes only for a subscriber that lists the protocol.
        assert!(!cfg.subscribers[1].follows("a", crate::config::Protocol::A2a));
        let (name, value) = ops.auth_header.as_ref().expect("auth header");
        assert_eq!(
            (name.as_str(), value.expose()),
            ("authorization", "Bearer sub-secret-token")
        );
        let shown = format!("{cfg:?}");
        assert!(
            !shown.contains("sub-secret-token") && !shown.contains("MfKQ9r8"),
            "{shown}"
        );
        assert!(!shown.contains("admin-0123456789abcdef"));
    }

    #[test]
    fn subscriber_problems_are_reported_with_their_keys() {
        let problems = parse(
            r#"
            listen = "127.0.0.1:0"
            [[agents]]
            name = "a"
            url = "http://x"
            [webhooks]
            retry_schedule_secs = [0]
            timeout_ms = 10000
            visibility_timeout_secs = 12
            allow = ["10.0.0.0/33"]
            [[subscribers]]
            name = "s"
            url = "http://10.1.2.3/hook"
            secret = "not-a-secret"
            auth_header = "no colon here"
            agents = ["nobody"]
            [[subscribers]]
            name = "s"
            url = "http://169.254.169.254/latest"
            colour = 1
        "#,
        )
        .expect_err("broken");
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "webhooks.allow[0]",
                "webhooks.retry_schedule_secs",
                "webhooks.visibility_timeout_secs",
                "subscribers[0].url",
                "subscribers[0].auth_header",
                "subscribers[0].secret",
                "subscribers[0].agents",
                "subscribers[1].colour",
                "subscribers[1].url",
                "subscribers[1].name",
            ],
            "{problems:?}"
        );
        // A private address is refused unless allowed; allowing it makes the URL acceptable.
        let ok = parse(
            "listen = \"127.0.0.1:0\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n[webhooks]\nallow = [\"10.0.0.0/8\"]\n[[subscribers]]\nname=\"s\"\nurl=\"http://10.1.2.3/hook\"\n",
        );
        assert!(ok.is_ok(), "{ok:?}");
        // A port that is no port is a problem at check-config, not a delivery to port 80.
        let p = parse(
            "listen = \"127.0.0.1:0\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n[[subscribers]]\nname=\"s\"\nurl=\"https://hooks.example.com:65536/x\"\n",
        )
        .expect_err("port");
        assert_eq!(p[0].key, "subscribers[0].url");
        assert!(p[0].message.contains("1 to 65535"), "{p:?}");
    }
}
