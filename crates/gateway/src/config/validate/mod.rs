//! The checks of one pass over a parsed config: every semantic problem, with its key.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use hyper::header::{HeaderName, HeaderValue};

mod identity;

use super::*;

/// The screen's problems (sorted by rank) merged into the validator's (already in document
/// order, each entry's own problems before those relating it to other entries), dropping any
/// problem at or under a key the screen already reported (its value was set aside).
pub(super) fn merge(mut early: Vec<(Vec<i64>, Problem)>, late: Vec<Problem>) -> Vec<Problem> {
    early.sort_by(|a, b| a.0.cmp(&b.0));
    let covered = |p: &Problem| {
        early.iter().any(|(_, e)| {
            p.key == e.key
                || p.key.strip_prefix(e.key.as_str()).is_some_and(|rest| {
                    !e.key.is_empty() && (rest.starts_with('.') || rest.starts_with('['))
                })
        })
    };
    let late: Vec<(Vec<i64>, Problem)> = late
        .into_iter()
        .filter(|p| !covered(p))
        .map(|p| (keys::rank::<Config>(&p.key), p))
        .collect();
    let mut out = Vec::with_capacity(early.len() + late.len());
    let mut early = early.into_iter().peekable();
    for (rank, p) in late {
        while let Some((_, e)) = early.next_if(|(r, _)| *r < rank) {
            out.push(e);
        }
        out.push(p);
    }
    out.extend(early.map(|(_, p)| p));
    out
}

/// One thing wrong with a config, at a key such as `agents[1].url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where, as a key path such as `agents[1].url`; empty for the file as a whole.
    pub key: String,
    /// What is wrong there.
    pub message: String,
}

impl Problem {
    /// A problem at `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

/// `rate_per_sec` bounds: a request every 1000 s at the slowest (its bucket's window, in the
/// `RateLimit-Policy` header, stays a small integer), a million a second at most.
const MIN_RATE: f64 = 0.001;
const MAX_RATE: f64 = 1_000_000.0;
/// `burst` at most: a bucket larger than this is no limit.
const MAX_BURST: u64 = 1_000_000;
/// `max_in_flight` at most.
const MAX_IN_FLIGHT: u64 = 1_000_000;
/// `eject_after` at most.
const MAX_EJECT_AFTER: u64 = 10_000;

#[derive(Default)]
pub(super) struct Validator {
    pub(super) problems: Vec<Problem>,
}

impl Validator {
    fn problem(&mut self, key: impl Into<String>, msg: impl Into<String>) {
        self.problems.push(Problem::new(key, msg));
    }

    /// A count or size within `1..=max`.
    fn range(&mut self, key: &str, value: u64, max: u64) {
        if value < 1 || value > max {
            self.problem(key, format!("must be between 1 and {max}"));
        }
    }

    fn millis(&mut self, key: &str, d: Duration, max: u64) {
        self.range(key, u64::try_from(d.as_millis()).unwrap_or(u64::MAX), max);
    }

    fn secs(&mut self, key: &str, d: Duration, max: u64) {
        self.range(key, d.as_secs(), max);
    }

    pub(super) fn config(&mut self, c: &Config, rules: &dyn Rules) {
        if let Some(tls) = &c.tls {
            self.tls(tls, rules);
        }
        self.range("max_body_bytes", c.max_body_bytes as u64, 1 << 30);
        self.secs("task_retention_secs", c.task_retention, 365 * 86_400);
        self.range("max_tasks", c.max_tasks as u64, 1 << 32);
        self.range("max_ledger_bytes", c.max_ledger_bytes as u64, 1 << 40);
        self.range("max_connections", c.max_connections as u64, 1 << 22);
        self.millis("connect_timeout_ms", c.connect_timeout, 600_000);
        self.secs("idempotency_ttl_secs", c.idempotency_ttl, 30 * 86_400);
        if c.late_answer > Duration::from_secs(3600) {
            self.problem("late_answer_secs", "must be between 0 and 3600");
        }
        if c.workers != 0 {
            self.range("workers", c.workers as u64, 1024);
        }
        if c.drain_delay > Duration::from_secs(600) {
            self.problem("drain_delay_ms", "must be between 0 and 600000");
        }
        self.millis("shutdown_grace_ms", c.shutdown_grace, 3_600_000);

        // Route names by their lower case: two names that differ only in case are one name to
        // a person reading routes, metrics and subscriber lists, and a typo away from each other.
        let mut names: HashMap<String, usize> = HashMap::new();
        for (i, a) in c.agents.iter().enumerate() {
            let at = format!("agents[{i}]");
            self.agent(a, &at, rules);
            if a.name.is_empty() {
                continue;
            }
            match names.entry(a.name.to_ascii_lowercase()) {
                Entry::Vacant(v) => {
                    v.insert(i);
                }
                Entry::Occupied(o) => {
                    let first = &c.agents[*o.get()].name;
                    let message = if *first == a.name {
                        format!("{:?} is used by another agent", a.name)
                    } else {
                        format!(
                            "{:?} differs from {first:?} (agents[{}].name) only in case; route names must differ ignoring case",
                            a.name,
                            o.get()
                        )
                    };
                    self.problem(format!("{at}.name"), message);
                }
            }
        }
        if c.agents.is_empty() {
            self.problem("agents", "at least one [[agents]] entry is required");
        }
        self.shared_origins(&c.agents);
        if let Some(r) = &c.redis {
            self.redis(r);
            // Each partition enforces its share of the bound (max_queued / P): a share below a
            // few messages would refuse changes with the queue all but empty.
            let least = usize::from(r.partitions.max(1)) * 64;
            if c.webhooks.max_queued < least {
                self.problem(
                    "webhooks.max_queued",
                    format!(
                        "must be at least {least} with [redis] partitions = {}: each partition holds max_queued / partitions",
                        r.partitions
                    ),
                );
            }
        }
        self.webhooks(&c.webhooks, rules);
        let mut names = HashSet::new();
        for (i, s) in c.subscribers.iter().enumerate() {
            let at = format!("subscribers[{i}]");
            self.subscriber(s, &at, &c.webhooks.allow, &c.agents, rules);
            if !s.name.is_empty() && !names.insert(s.name.as_str()) {
                self.problem(
                    format!("{at}.name"),
                    format!("{:?} is used by another subscriber", s.name),
                );
            }
        }
        self.streams(&c.streams);
        self.identity(c, rules);
        self.telemetry(&c.telemetry);
    }

    fn telemetry(&mut self, t: &TelemetryConfig) {
        if let Some(url) = &t.otlp_endpoint {
            let ok = url
                .parse::<hyper::Uri>()
                .ok()
                .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
                .is_some_and(|u| u.host().is_some() && u.query().is_none());
            if !ok {
                self.problem(
                    "telemetry.otlp_endpoint",
                    "must be an http:// or https:// URL (the collector's OTLP/HTTP base, e.g. http://127.0.0.1:4318)",
                );
            }
        }
        if t.service_name.trim().is_empty() || t.service_name.len() > 128 {
            self.problem("telemetry.service_name", "must be 1-128 characters");
        }
        if !(0.0..=1.0).contains(&t.sample_ratio) {
            self.problem("telemetry.sample_ratio", "must be between 0.0 and 1.0");
        }
    }

    /// The required `name` (a route-safe name) and `url` (checked by `check`) of an
    /// `[[agents]]` or `[[subscribers]]` entry.
    fn name_and_url(
        &mut self,
        at: &str,
        name: &str,
        url: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) {
        if name.is_empty() {
            self.problem(format!("{at}.name"), "is required");
        } else if !valid_name(name) {
            self.problem(
                format!("{at}.name"),
                format!("{name:?} must be 1-64 characters of A-Z a-z 0-9 . _ -"),
            );
        }
        if url.is_empty() {
            self.problem(format!("{at}.url"), "is required");
        } else if let Err(e) = check(url) {
            self.problem(format!("{at}.url"), e);
        }
    }

    /// `[tls]`: each file readable and holding what it must, the key that of the certificate,
    /// and `client_auth` only where it means something.
    fn tls(&mut self, t: &TlsConfig, rules: &dyn Rules) {
        let pem = |v: &mut Self, key: &str, path: &str, kind: PemKind| {
            if path.is_empty() {
                v.problem(key, "is required in [tls]");
                false
            } else if let Err(e) = rules.pem_file(kind, Path::new(path)) {
                v.problem(key, e);
                false
            } else {
                true
            }
        };
        let cert = pem(self, "tls.cert_file", &t.cert_file, PemKind::CertChain);
        let key = pem(self, "tls.key_file", &t.key_file, PemKind::PrivateKey);
        if cert && key {
            if let Err(e) = rules.key_pair(Path::new(&t.cert_file), Path::new(&t.key_file)) {
                self.problem("tls.key_file", e);
            }
        }
        match &t.client_ca_file {
            Some(ca) if ca.is_empty() => self.problem(
                "tls.client_ca_file",
                "must name a PEM file of CA certificates (or leave the key out)",
            ),
            Some(ca) => {
                pem(self, "tls.client_ca_file", ca, PemKind::TrustAnchors);
            }
            None if t.client_auth.is_some() => self.problem(
                "tls.client_auth",
                "needs tls.client_ca_file: without a CA to verify them, no client certificate is asked for",
            ),
            None => {}
        }
    }

    /// Agents on one https origin share pooled connections, and a connection is verified once:
    /// they must trust the same CA, or one agent's `ca_file` would vouch for the other.
    fn shared_origins(&mut self, agents: &[AgentConfig]) {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, a) in agents.iter().enumerate() {
            let Some(origin) = https_origin(&a.url) else {
                continue;
            };
            match seen.entry(origin) {
                Entry::Vacant(v) => {
                    v.insert(i);
                }
                Entry::Occupied(o) if agents[*o.get()].ca_file != a.ca_file => {
                    self.problem(
                        format!("agents[{i}].ca_file"),
                        format!(
                            "differs from agents[{}].ca_file on the same origin {}: agents on one origin share connections, so they must trust the same CA",
                            o.get(),
                            o.key()
                        ),
                    );
                }
                Entry::Occupied(_) => {}
            }
        }
    }

    fn agent(&mut self, a: &AgentConfig, at: &str, rules: &dyn Rules) {
        self.name_and_url(at, &a.name, &a.url, check_agent_url);
        if let Some(ca) = &a.ca_file {
            if !a.url.starts_with("https://") {
                self.problem(
                    format!("{at}.ca_file"),
                    "is only used for an https:// agent url",
                );
            } else if ca.is_empty() {
                self.problem(
                    format!("{at}.ca_file"),
                    "must name a PEM file of CA certificates (or leave the key out)",
                );
            } else if let Err(e) = rules.pem_file(PemKind::TrustAnchors, Path::new(ca)) {
                self.problem(format!("{at}.ca_file"), e);
            }
        }
        if uuid_shaped(&a.name) {
            // `/agents/{name}/` and `POST /tasks {"agent": ...}` take a route name or a card's
            // agent_id, route names first: a UUID as a route name could hide another agent's
            // agent_id, and cards are only fetched once the gateway runs.
            self.problem(
                format!("{at}.name"),
                format!(
                    "{:?} has the form of a card agent_id (a UUID), which routes also accept; a route name that is one could hide another agent",
                    a.name
                ),
            );
        }
        if !a.card_path.starts_with('/') || a.card_path.contains(char::is_whitespace) {
            self.problem(
                format!("{at}.card_path"),
                "must be an absolute path such as \"/agent-card.json\"",
            );
        }
        self.secs(&format!("{at}.refresh_secs"), a.refresh, 7 * 86_400);
        self.millis(&format!("{at}.timeout_ms"), a.timeout, 600_000);
        self.range(
            &format!("{at}.max_in_flight"),
            a.max_in_flight as u64,
            MAX_IN_FLIGHT,
        );
        if a.eject_after > MAX_EJECT_AFTER {
            self.problem(
                format!("{at}.eject_after"),
                format!("must be between 0 (never eject) and {MAX_EJECT_AFTER}"),
            );
        }
        self.secs(&format!("{at}.eject_secs"), a.eject, 3600);
        if let Some(tok) = &a.ingest_token {
            if tok.expose().len() < 16 {
                self.problem(
                    format!("{at}.ingest_token"),
                    "must be at least 16 characters",
                );
            }
        }
    }

    fn redis(&mut self, r: &RedisConfig) {
        let nodes = r.nodes();
        if nodes.is_empty() {
            self.problem(
                "redis.url",
                "is required in [redis] (or `urls` with `cluster = true`)",
            );
        }
        if !r.urls.is_empty() && !r.cluster {
            self.problem(
                "redis.urls",
                "lists the seed nodes of a cluster: set `cluster = true`, or use `url` for one node",
            );
        }
        let key = |u: &str| {
            if !r.url.is_empty() && u == r.url {
                "redis.url"
            } else {
                "redis.urls"
            }
        };
        for u in &nodes {
            let ok = u.starts_with("redis://")
                || u.starts_with("rediss://")
                || (u.starts_with("unix://") && !r.cluster);
            if !ok {
                let want = if r.cluster {
                    "redis:// or rediss:// (a cluster is reached over TCP)"
                } else {
                    "redis://, rediss:// or unix://"
                };
                self.problem(
                    key(u),
                    format!("{:?} must start with {want}", redact_url(u)),
                );
            } else if let Err(e) = redis::IntoConnectionInfo::into_connection_info(u.as_str()) {
                // The error text never holds the password (redis-rs redacts it); the URL is
                // redacted here.
                self.problem(
                    key(u),
                    format!("{:?} is not a Redis URL: {e}", redact_url(u)),
                );
            }
        }
        let tls = nodes.iter().filter(|u| u.starts_with("rediss://")).count();
        if tls != 0 && tls != nodes.len() {
            self.problem("redis.urls", "mixes rediss:// and redis:// nodes");
        }
        if r.ca_file.is_some() && tls == 0 {
            self.problem("redis.ca_file", "is for rediss:// (TLS) nodes");
        }
        let prefix = r.prefix.as_str();
        if prefix.is_empty() || prefix.len() > 64 {
            self.problem("redis.prefix", "must be 1-64 characters");
        }
        // Redis hashes a key on its first {...}: each partition puts its own hash tag right
        // after the prefix, so the prefix itself must not carry one (`a2a:{gw}:` was the old
        // default; see `[redis] partitions` and the migration note in docs/configuration.md).
        if prefix.contains(['{', '}']) {
            self.problem(
                "redis.prefix",
                format!("{prefix:?} must not contain braces: each partition adds its own {{hash tag}} after the prefix (use e.g. \"a2a:\")"),
            );
        }
        if r.partitions == 0 || r.partitions > crate::store::MAX_PARTITIONS {
            self.problem(
                "redis.partitions",
                format!("must be 1-{}", crate::store::MAX_PARTITIONS),
            );
        }
        // WAIT holds the connection's other commands behind it, and every answer is awaited
        // 2 s at most: a longer wait would turn a slow replica into a broken connection.
        if r.wait_timeout.is_zero() || r.wait_timeout > std::time::Duration::from_millis(1500) {
            self.problem(
                "redis.wait_timeout_ms",
                "must be 1-1500 (0 would wait forever; each Redis answer is awaited 2 s at most)",
            );
        }
    }

    fn webhooks(&mut self, w: &WebhookConfig, rules: &dyn Rules) {
        for (i, entry) in w.allow.iter().enumerate() {
            if let Err(e) = rules.allow_entry(entry) {
                self.problem(format!("webhooks.allow[{i}]"), e);
            }
        }
        match w.max_attempts {
            Some(n) if !(1..=101).contains(&n) => {
                self.problem("webhooks.max_attempts", "must be between 1 and 101")
            }
            _ => {
                if let Err(e) = rules.retry_schedule(&w.retry_waits_secs()) {
                    self.problem("webhooks.retry_schedule_secs", e);
                }
            }
        }
        self.millis("webhooks.timeout_ms", w.timeout, 300_000);
        self.range("webhooks.concurrency", w.concurrency as u64, 10_000);
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
        self.range(
            "webhooks.max_dead_letters",
            w.max_dead_letters as u64,
            1 << 24,
        );
    }

    fn subscriber(
        &mut self,
        s: &SubscriberConfig,
        at: &str,
        allow: &[String],
        agents: &[AgentConfig],
        rules: &dyn Rules,
    ) {
        self.name_and_url(at, &s.name, &s.url, |u| rules.subscriber_url(allow, u));
        for secret in &s.secret {
            if let Err(e) = rules.signing_secret(secret.expose()) {
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
    }

    fn streams(&mut self, s: &StreamsConfig) {
        self.millis("streams.ping_interval_ms", s.ping_interval, 3_600_000);
        self.millis("streams.linger_ms", s.linger, 3_600_000);
        self.range("streams.replay_events", s.replay_events as u64, 1_000_000);
        self.range("streams.replay_bytes", s.replay_bytes as u64, 1 << 30);
        self.range("streams.subscriber_lag_bytes", s.lag_bytes, 1 << 30);
        self.range("streams.max_topics", s.max_topics as u64, 1 << 24);
        self.range(
            "streams.max_event_bytes",
            s.max_event_bytes as u64,
            64 << 20,
        );
        self.range("streams.max_buffer_bytes", s.max_buffer_bytes, 1 << 40);
        self.millis("streams.reconnect_max_ms", s.reconnect_max, 3_600_000);
    }
}

/// A UUID in its hyphenated 8-4-4-4-12 form, in any case: the form a card's `agent_id` takes
/// (`protocol::card::is_uuid`, the card schema's `format: uuid`; written again here because
/// this module imports no other of the crate).
fn uuid_shaped(n: &str) -> bool {
    let b = n.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The scheme, host and port of an https URL, as connections are pooled by them (`None` for
/// anything else).
fn https_origin(u: &str) -> Option<String> {
    let uri: hyper::Uri = u.parse().ok()?;
    if uri.scheme_str() != Some("https") {
        return None;
    }
    let host = uri.host()?.to_ascii_lowercase();
    Some(format!("https://{host}:{}", uri.port_u16().unwrap_or(443)))
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn check_agent_url(u: &str) -> Result<(), String> {
    let uri: hyper::Uri = u.parse().map_err(|e| format!("{u:?} is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => return Err(format!("{u:?} must be an http:// or https:// URL")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("{u:?} has no host"));
    }
    if uri.query().is_some() {
        return Err(format!("{u:?} must not have a query string"));
    }
    if u.contains('@') {
        return Err("credentials in the URL are not supported".into());
    }
    Ok(())
}

/// `"Name: value"` as a header name and a secret value.
pub(super) fn parse_header_line(line: &str) -> Option<(HeaderName, Secret)> {
    let (name, value) = line.split_once(':')?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
    let value = value.trim();
    // Must be a valid header value; the check is done here so delivery cannot fail on it.
    HeaderValue::from_str(value)
        .ok()
        .filter(|_| !value.is_empty())?;
    Some((name, Secret::new(value)))
}

/// A URL with any password replaced, for messages.
pub fn redact_url(u: &str) -> String {
    // The query too: redis-rs reads a unix socket's password from `?pass=`.
    let (u, query) = match u.split_once('?') {
        Some((u, _)) => (u, "?***"),
        None => (u, ""),
    };
    match (u.find("://"), u.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}{query}", &u[..s + 3], &u[at..]),
        _ => format!("{u}{query}"),
    }
}
