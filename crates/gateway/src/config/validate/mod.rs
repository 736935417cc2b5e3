//! The checks of one pass over a parsed config: every semantic problem, with its key.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use hyper::header::{HeaderName, HeaderValue};

mod caller;
mod identity;
mod placeholders;
mod replicas;
mod store;
mod webhooks;

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
    pub(super) fn problem(&mut self, key: impl Into<String>, msg: impl std::fmt::Display) {
        self.problems.push(Problem::new(key, msg.to_string()));
    }

    /// A count or size within `1..=max`.
    pub(super) fn range(&mut self, key: &str, value: u64, max: u64) {
        if value < 1 || value > max {
            self.problem(key, format!("must be between 1 and {max}"));
        }
    }

    pub(super) fn millis(&mut self, key: &str, d: Duration, max: u64) {
        self.range(key, u64::try_from(d.as_millis()).unwrap_or(u64::MAX), max);
    }

    pub(super) fn secs(&mut self, key: &str, d: Duration, max: u64) {
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
        self.range(
            "max_task_document_bytes",
            c.max_task_document_bytes as u64,
            64 << 20,
        );
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
            if s.name == "a2a_push" {
                // The name every A2A push config's deliveries are counted under.
                self.problem(
                    format!("{at}.name"),
                    "\"a2a_push\" is reserved for official A2A tasks' push configs",
                );
            }
            if !s.name.is_empty() && !names.insert(s.name.as_str()) {
                self.problem(
                    format!("{at}.name"),
                    format!("{:?} is used by another subscriber", s.name),
                );
            }
        }
        self.streams(&c.streams);
        self.range(
            "a2a.max_push_configs_per_task",
            c.a2a.max_push_configs_per_task as u64,
            1000,
        );
        self.range(
            "a2a.max_artifact_bytes_per_task",
            c.a2a.max_artifact_bytes_per_task as u64,
            64 << 20,
        );
        self.identity(c, rules);
        self.caller(c, rules);
        self.replicas(c);
        self.placeholders(c);
        if let Some(u) = &c.public_url {
            if let Err(e) = check_public_url(u) {
                self.problem("public_url", e);
            }
        }
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
    pub(super) fn name_and_url(
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
            } else if let Err(e) = rules.check(Check::PemFile(kind, Path::new(path))) {
                v.problem(key, e);
                false
            } else {
                true
            }
        };
        let cert = pem(self, "tls.cert_file", &t.cert_file, PemKind::CertChain);
        let key = pem(self, "tls.key_file", &t.key_file, PemKind::PrivateKey);
        if cert && key {
            if let Err(e) = rules.check(Check::KeyPair {
                cert_file: Path::new(&t.cert_file),
                key_file: Path::new(&t.key_file),
            }) {
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
        if a.binding.is_some() && a.protocol != Protocol::A2a {
            self.problem(
                format!("{at}.binding"),
                "chooses an official A2A binding: only for an agent with protocol = \"a2a\"",
            );
        }
        if let Some(g) = &a.grpc_url {
            if a.protocol != Protocol::A2a {
                self.problem(
                    format!("{at}.grpc_url"),
                    "is where an official A2A agent's gRPC service is: only for an agent with protocol = \"a2a\"",
                );
            } else if let Err(why) = check_grpc_url(g) {
                self.problem(format!("{at}.grpc_url"), why);
            }
        }
        if a.a2a_version.is_some() && a.protocol != Protocol::A2a {
            self.problem(
                format!("{at}.a2a_version"),
                "chooses an official A2A version: only for an agent with protocol = \"a2a\"",
            );
        }
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
            } else if let Err(e) = rules.check(Check::PemFile(PemKind::TrustAnchors, Path::new(ca)))
            {
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
        if !a.card_path.is_empty()
            && (!a.card_path.starts_with('/') || a.card_path.contains(char::is_whitespace))
        {
            self.problem(
                format!("{at}.card_path"),
                "must be an absolute path such as \"/agent-card.json\" (or be left out: the protocol's default)",
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
        if a.reconcile_after > Duration::from_secs(86_400) {
            self.problem(
                format!("{at}.reconcile_after_ms"),
                "must be between 0 (off) and 86400000",
            );
        }
        if a.poll_interval < Duration::from_millis(100)
            || a.poll_interval > Duration::from_secs(3600)
        {
            self.problem(
                format!("{at}.poll_interval_ms"),
                "must be between 100 and 3600000",
            );
        }
        if let Some(tok) = &a.ingest_token {
            if tok.expose().len() < 16 {
                self.problem(
                    format!("{at}.ingest_token"),
                    "must be at least 16 characters",
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
/// (`protocol::clawpedia::card::is_uuid`, the card schema's `format: uuid`; written again here because
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

/// `public_url`: an absolute http(s) URL with a host, and neither query, fragment nor
/// credentials (it prefixes paths the gateway writes).
fn check_public_url(u: &str) -> Result<(), String> {
    check_agent_url(u)?;
    if u.contains('#') {
        return Err(format!(
            "{u:?} must have no fragment: paths are appended to it"
        ));
    }
    Ok(())
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

/// A gRPC agent's address: `http://` or `https://`, a host, an optional port, nothing else
/// (gRPC's paths are the service's own).
fn check_grpc_url(u: &str) -> Result<(), String> {
    let parsed = url::Url::parse(u).map_err(|e| format!("{u:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "{u:?}: http://host:port (h2c) or https://host:port (TLS)"
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{u:?} names no host"));
    }
    if parsed.path() != "/" || parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!(
            "{u:?}: a gRPC service is at an origin only (no path, query or fragment)"
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!("{u:?}: no credentials in the URL"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing::*;
    use std::time::Duration;

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let problems = Config::parse(
            r#"
            listen = "nowhere"
            colour = "blue"
            [[agents]]
            name = "a b"
            url = "ftp://x"
            timeout_ms = 0
            conformance = "maybe"
            [[agents]]
            url = "http://ok"
            [redis]
            url = "http://x"
        "#,
        )
        .expect_err("broken");
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "colour",
                "listen",
                "agents[0].name",
                "agents[0].url",
                "agents[0].timeout_ms",
                "agents[0].conformance",
                "agents[1].name",
                "redis.url"
            ]
        );
    }

    #[test]
    fn idempotency_and_late_answer_keys_have_defaults_and_bounds() {
        let base = "listen = \"127.0.0.1:1\"\n";
        let agents = "[[agents]]\nname=\"a\"\nurl=\"http://x\"\n";
        let cfg = Config::parse(&format!("{base}{agents}")).expect("defaults");
        assert_eq!(cfg.idempotency_ttl, Duration::from_secs(86_400));
        assert_eq!(cfg.late_answer, Duration::from_secs(60));
        let cfg = Config::parse(&format!(
            "{base}idempotency_ttl_secs = 60\nlate_answer_secs = 0\n{agents}"
        ))
        .expect("off");
        assert_eq!(cfg.idempotency_ttl, Duration::from_secs(60));
        assert_eq!(cfg.late_answer, Duration::ZERO);
        let p = Config::parse(&format!(
            "{base}idempotency_ttl_secs = 0\nlate_answer_secs = 3601\n{agents}"
        ))
        .expect_err("out of range");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["idempotency_ttl_secs", "late_answer_secs"]);
    }

    #[test]
    fn the_record_bounds_have_defaults_and_bounds() {
        let base = "listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n";
        let cfg = Config::parse(base).expect("defaults");
        assert_eq!(cfg.max_task_document_bytes, 1 << 20);
        assert_eq!(cfg.a2a.max_artifact_bytes_per_task, 8 << 20);
        let cfg = Config::parse(&format!(
            "{base}[a2a]\nmax_artifact_bytes_per_task = 1024\n"
        ))
        .expect("set");
        assert_eq!(cfg.a2a.max_artifact_bytes_per_task, 1024);
        for bad in [0, (64 << 20) + 1] {
            let p = Config::parse(&format!(
                "{base}[a2a]\nmax_artifact_bytes_per_task = {bad}\n"
            ))
            .expect_err("out of range");
            let shown: Vec<String> = p.iter().map(ToString::to_string).collect();
            assert_eq!(
                shown,
                ["a2a.max_artifact_bytes_per_task: must be between 1 and 67108864"]
            );
        }
    }

    #[test]
    fn a_clients_share_of_the_deliveries_defaults_to_a_quarter_and_is_bounded() {
        let base = "listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n";
        let cfg = Config::parse(base).expect("defaults");
        assert_eq!(cfg.webhooks.max_in_flight_per_client, None);
        assert_eq!(cfg.webhooks.per_client(), 16);
        let cfg = Config::parse(&format!("{base}[webhooks]\nconcurrency = 2\n")).expect("small");
        assert_eq!(cfg.webhooks.per_client(), 1, "never 0");
        let cfg = Config::parse(&format!(
            "{base}[webhooks]\nconcurrency = 10\nmax_in_flight_per_client = 10\n"
        ))
        .expect("all of it");
        assert_eq!(cfg.webhooks.per_client(), 10);
        for bad in ["0", "11"] {
            let p = Config::parse(&format!(
                "{base}[webhooks]\nconcurrency = 10\nmax_in_flight_per_client = {bad}\n"
            ))
            .expect_err("out of range");
            let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
            assert_eq!(keys, ["webhooks.max_in_flight_per_client"], "{bad}");
            assert!(p[0]
                .message
                .contains("between 1 and webhooks.concurrency (10)"));
        }
    }

    #[test]
    fn a_clients_share_of_the_queue_defaults_to_a_quarter_and_is_bounded() {
        let base = "listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n";
        let cfg = Config::parse(base).expect("defaults");
        let b = cfg.webhooks.queue_bounds();
        assert_eq!(
            (b.queued, b.bytes, b.per_client, b.per_client_bytes),
            (1_000_000, 1 << 30, 250_000, 1 << 28)
        );
        let cfg = Config::parse(&format!(
            "{base}[webhooks]\nmax_queued = 100\nmax_queued_per_client = 100\nmax_queued_bytes = 4194304\n"
        ))
        .expect("all of it");
        let b = cfg.webhooks.queue_bounds();
        assert_eq!((b.per_client, b.per_client_bytes), (100, 1 << 20));
        for (bad, key) in [
            (
                "max_queued_per_client = 0",
                "webhooks.max_queued_per_client",
            ),
            (
                "max_queued_per_client = 101",
                "webhooks.max_queued_per_client",
            ),
            ("max_queued_bytes = 1000", "webhooks.max_queued_bytes"),
        ] {
            let p = Config::parse(&format!("{base}[webhooks]\nmax_queued = 100\n{bad}\n"))
                .expect_err("out of range");
            let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
            assert_eq!(keys, [key], "{bad}");
        }
    }

    #[test]
    fn duplicate_names_and_missing_agents_are_problems() {
        let p = Config::parse("listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n[[agents]]\nname=\"a\"\nurl=\"http://y\"\n").expect_err("dup");
        assert_eq!(p[0].key, "agents[1].name");
        let p = Config::parse("listen = \"127.0.0.1:1\"").expect_err("none");
        assert_eq!(p[0].key, "agents");
        let p = Config::parse("listen = ").expect_err("toml");
        assert!(p[0].message.starts_with("not valid TOML"));
    }

    #[test]
    fn route_names_that_differ_only_in_case_are_problems() {
        let p = Config::parse(
            "listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"scripts\"\nurl=\"http://x\"\n\
             [[agents]]\nname=\"other\"\nurl=\"http://y\"\n\
             [[agents]]\nname=\"Scripts\"\nurl=\"http://z\"\n",
        )
        .expect_err("case collision");
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].key, "agents[2].name");
        assert!(p[0].message.contains("agents[0].name"), "{}", p[0].message);
        assert!(p[0].message.contains("only in case"), "{}", p[0].message);
    }

    #[test]
    fn a_route_name_shaped_like_an_agent_id_is_a_problem() {
        for name in [
            "f47ac10b-58cc-4372-a567-0e02b2c3d479",
            "F47AC10B-58CC-4372-A567-0E02B2C3D479",
        ] {
            let p = Config::parse(&format!(
                "listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n\
                 [[agents]]\nname=\"{name}\"\nurl=\"http://y\"\n"
            ))
            .expect_err("uuid route name");
            assert_eq!(p.len(), 1, "{p:?}");
            assert_eq!(p[0].key, "agents[1].name");
            assert!(p[0].message.contains("agent_id"), "{}", p[0].message);
        }
        // Only the agent_id form: hex without the hyphens cannot be an agent_id.
        Config::parse(
            "listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"f47ac10b58cc4372a5670e02b2c3d479\"\nurl=\"http://x\"\n",
        )
        .expect("not the agent_id form");
    }

    #[test]
    fn limits_have_defaults_and_bounds() {
        let cfg = Config::parse(&format!(
            r#"
            listen = "127.0.0.1:1"
            [[clients]]
            name = "a"
            key_sha256 = "{HASH}"
            rate_per_sec = 50
            burst = 100
            [[clients]]
            name = "b"
            key_sha256 = "{HASH2}"
            rate_per_sec = 0.5
            [[agents]]
            name = "x"
            url = "http://x"
            [[agents]]
            name = "y"
            url = "http://y"
            max_in_flight = 8
            eject_after = 0
            eject_secs = 1
        "#
        ))
        .expect("valid");
        let (a, b) = (&cfg.clients[0], &cfg.clients[1]);
        assert_eq!((a.rate_per_sec, a.burst), (Some(50.0), Some(100)));
        assert_eq!((b.rate_per_sec, b.burst), (Some(0.5), None));
        let (x, y) = (&cfg.agents[0], &cfg.agents[1]);
        assert_eq!(
            (x.max_in_flight, x.eject_after, x.eject),
            (256, 5, Duration::from_secs(10))
        );
        assert_eq!(
            (y.max_in_flight, y.eject_after, y.eject),
            (8, 0, Duration::from_secs(1))
        );
        let p = Config::parse(&format!(
            r#"
            listen = "127.0.0.1:1"
            [[clients]]
            name = "a"
            key_sha256 = "{HASH}"
            rate_per_sec = 0
            burst = 0
            [[clients]]
            name = "b"
            key_sha256 = "{HASH2}"
            burst = 5
            [[clients]]
            name = "c"
            key_sha256 = "{}"
            rate_per_sec = "fast"
            [[agents]]
            name = "x"
            url = "http://x"
            max_in_flight = 0
            eject_after = 10001
            eject_secs = 0
        "#,
            "0".repeat(64)
        ))
        .expect_err("out of range");
        let shown: Vec<String> = p.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "agents[0].max_in_flight: must be between 1 and 1000000",
                "agents[0].eject_after: must be between 0 (never eject) and 10000",
                "agents[0].eject_secs: must be between 1 and 3600",
                "clients[0].rate_per_sec: must be a number between 0.001 and 1000000",
                "clients[0].burst: must be between 1 and 1000000",
                "clients[1].burst: has no effect without rate_per_sec (the client is not rate-limited)",
                "clients[2].rate_per_sec: must be a number",
            ],
        );
    }

    #[test]
    fn an_agent_speaks_clawpedia_unless_told_or_a2a_with_a_binding() {
        let agents = |extra: &str| {
            format!(
                "listen = \"127.0.0.1:1\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n{extra}"
            )
        };
        let cfg = Config::parse(&agents("")).expect("valid");
        assert_eq!(cfg.agents[0].protocol, Protocol::Clawpedia);
        assert_eq!(cfg.agents[0].card_path(), "/agent-card.json");
        let cfg = Config::parse(&agents("protocol = \"clawpedia\"")).expect("valid");
        assert_eq!(cfg.agents[0].protocol, Protocol::Clawpedia);
        let cfg = Config::parse(&agents("protocol = \"a2a\"")).expect("valid");
        assert_eq!(cfg.agents[0].protocol, Protocol::A2a);
        assert_eq!(cfg.agents[0].card_path(), "/.well-known/agent-card.json");
        let cfg = Config::parse(&agents(
            "protocol = \"a2a\"\nbinding = \"HTTP+JSON\"\ncard_path = \"/card\"",
        ))
        .expect("valid");
        assert_eq!(
            cfg.agents[0].binding,
            Some(crate::config::Binding::HttpJson)
        );
        assert_eq!(cfg.agents[0].card_path(), "/card");
        assert!(cfg.warnings().is_empty(), "{:?}", cfg.warnings());
        // Clawpedia's card path on an "a2a" agent: valid (an agent may serve its card there),
        // but a likely leftover that check-config and the start-up log point out.
        let cfg = Config::parse(&agents(
            "protocol = \"a2a\"\ncard_path = \"/agent-card.json\"",
        ))
        .expect("valid");
        let w = cfg.warnings();
        assert!(
            w.len() == 1
                && w[0].starts_with("agents[0].card_path")
                && w[0].contains("/.well-known/agent-card.json"),
            "{w:?}"
        );
        let cfg = Config::parse(&agents("card_path = \"/agent-card.json\"")).expect("valid");
        assert!(cfg.warnings().is_empty(), "{:?}", cfg.warnings());
        let problems = Config::parse(&agents("binding = \"JSONRPC\"")).expect_err("clawpedia");
        assert_eq!(problems[0].key, "agents[0].binding");
        let cfg = Config::parse(&agents(
            "protocol = \"a2a\"\nbinding = \"GRPC\"\ngrpc_url = \"http://127.0.0.1:50051/\"",
        ))
        .expect("grpc");
        assert_eq!(cfg.agents[0].binding, Some(crate::config::Binding::Grpc));
        assert_eq!(
            cfg.agents[0].grpc_url.as_deref(),
            Some("http://127.0.0.1:50051")
        );
        for bad in [
            "127.0.0.1:50051",
            "http://h:1/path",
            "ftp://h:1",
            "http://:1",
            "http://h:1?q",
        ] {
            let problems = Config::parse(&agents(&format!(
                "protocol = \"a2a\"\ngrpc_url = \"{bad}\""
            )))
            .expect_err(bad);
            assert_eq!(problems[0].key, "agents[0].grpc_url", "{bad}");
        }
        let problems = Config::parse(&agents("grpc_url = \"http://h:1\"")).expect_err("clawpedia");
        assert_eq!(problems[0].key, "agents[0].grpc_url");
        let problems = Config::parse(&agents("protocol = \"grpc\"")).expect_err("unknown");
        assert_eq!(problems[0].key, "agents[0].protocol");
        // The accepted values are named.
        assert!(problems[0].message.contains("clawpedia"), "{}", problems[0]);
    }
}
