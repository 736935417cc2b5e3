//! The TOML config as plain data: serde types with `deny_unknown_fields`, each default written
//! once (the `Default` impls), and [`Config::validate`] for every rule serde cannot express.
//! [`Config::parse`] reports *every* problem with its key, so `check-config` can list them all
//! at once: unknown keys (with the nearest valid one) and wrong types first ([`keys`]), then
//! every semantic problem. This module is a leaf: it imports no other module of the crate.
//! The domain modules build their runtime types from it, and rules that need their knowledge
//! (the webhook URL guard, signing keys, the retry schedule) come in through [`Rules`].

mod de;
mod identity;
pub mod keys;
mod rules;
mod secrets;
mod store;
mod telemetry;
mod tls;
mod validate;

pub use identity::{AuthConfig, ClientConfig, CorsConfig, JwtConfig, Right};
pub use rules::{NoRules, Rules};
pub use tls::{ClientAuth, PemKind, TlsConfig};

pub use store::RedisConfig;
pub use telemetry::{LogFormat, TelemetryConfig};
pub use validate::redact_url;
pub use validate::Problem;
use validate::{merge, parse_header_line, Validator};

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use hyper::header::HeaderName;
use serde::Deserialize;
use toml::Table;

/// How an agent's non-conformant responses are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Conformance {
    /// A broken response becomes 502 AGENT_PROTOCOL_VIOLATION (default).
    #[default]
    Enforce,
    /// Passed on, counted and logged.
    Report,
}

/// A credential from the config (a token, a header value, a signing key): compared in constant
/// time, never printed.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A secret from the config file.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    /// The secret itself, for the one place that sends or compares it; never log the result.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// Constant-time comparison (the length of the secret is not hidden).
    pub fn matches(&self, candidate: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        self.0.as_bytes().ct_eq(candidate).into()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// `[[agents]]`. Compared whole by a reload: an agent whose entry is unchanged keeps its card,
/// its streams and its counters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// Route name: the agent is served under `/agents/{name}/`.
    pub name: String,
    /// Base URL, without a trailing slash.
    #[serde(deserialize_with = "de::base_url")]
    pub url: String,
    /// A PEM file of CA certificates trusted for this agent's https connections, beside the
    /// system roots (webpki-roots); relative to the config file's directory. Only this agent's
    /// origin trusts it.
    pub ca_file: Option<String>,
    /// Where the agent serves its card, under its base URL.
    pub card_path: String,
    /// How often the card is fetched again (sooner when the agent's Cache-Control says so).
    #[serde(rename = "refresh_secs", deserialize_with = "de::secs")]
    pub refresh: Duration,
    /// How long one exchange with the agent may take (connect, answer, body).
    #[serde(rename = "timeout_ms", deserialize_with = "de::millis")]
    pub timeout: Duration,
    /// The bearer token the agent must send on its push notifications; none means no ingest.
    pub ingest_token: Option<Secret>,
    /// A file holding `ingest_token` (read at start and at every reload).
    pub ingest_token_file: Option<String>,
    /// Whether a non-conformant agent answer is refused (`enforce`) or only counted (`report`).
    pub conformance: Conformance,
    /// Whether get, cancel, artifacts and stream under `/agents/{name}/tasks/{id}` are forwarded
    /// for a task id the ledger has never recorded (for an agent whose tasks are also created
    /// elsewhere than through the gateway). Off: such ids are 404 TASK_NOT_FOUND, and the agent
    /// is not contacted.
    pub passthrough_unknown_tasks: bool,
    /// A header sent on every call to this agent (`"Authorization: Bearer ..."`): the agent's
    /// own credential. The client's credentials never reach an agent; this is all it gets.
    #[serde(deserialize_with = "de::header_line")]
    pub upstream_auth_header: Option<(HeaderName, Secret)>,
    /// A file holding the `upstream_auth_header` line.
    pub upstream_auth_header_file: Option<String>,
    /// Requests to this agent in flight at once on this replica (create, get, cancel, the
    /// artifact list, artifact content); past it 503 AGENT_BUSY at once, without a call. Bounds
    /// what one slow agent can hold of the gateway (connections, memory, late-answer slots).
    pub max_in_flight: usize,
    /// Consecutive failures (no connection, no answer in time, a 5xx) that eject the agent: it
    /// is answered 503 AGENT_UNAVAILABLE without a call until a probe after `eject_secs`
    /// succeeds. 0 never ejects.
    pub eject_after: u64,
    /// How long an ejection lasts before one request probes the agent.
    #[serde(rename = "eject_secs", deserialize_with = "de::secs")]
    pub eject: Duration,
}

impl Default for AgentConfig {
    fn default() -> AgentConfig {
        AgentConfig {
            name: String::new(),
            url: String::new(),
            ca_file: None,
            card_path: "/agent-card.json".into(),
            refresh: Duration::from_secs(300),
            timeout: Duration::from_millis(10_000),
            ingest_token: None,
            conformance: Conformance::Enforce,
            passthrough_unknown_tasks: false,
            upstream_auth_header: None,
            ingest_token_file: None,
            upstream_auth_header_file: None,
            max_in_flight: 256,
            eject_after: 5,
            eject: Duration::from_secs(10),
        }
    }
}

impl AgentConfig {
    /// An agent with `name` at `url` and every other key at its default.
    pub fn new(name: &str, url: &str) -> AgentConfig {
        AgentConfig {
            name: name.into(),
            url: url.trim_end_matches('/').into(),
            ..AgentConfig::default()
        }
    }
}

/// One webhook subscriber (`[[subscribers]]`): every accepted task status change of the agents
/// it follows is POSTed to `url` as the spec's push-notification payload.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubscriberConfig {
    /// 1-64 characters of A-Z a-z 0-9 . _ -; the label in metrics and the admin API.
    pub name: String,
    /// Where deliveries are POSTed.
    pub url: String,
    /// A header sent as given with every delivery (`"Authorization: Bearer ..."`), value secret.
    #[serde(deserialize_with = "de::header_line")]
    pub auth_header: Option<(HeaderName, Secret)>,
    /// A file holding the `auth_header` line.
    pub auth_header_file: Option<String>,
    /// Standard Webhooks signing keys (`whsec_...`): one, or a list while a key is rotated
    /// (every delivery is then signed with each); the webhook module decodes them.
    #[serde(deserialize_with = "de::one_or_many")]
    pub secret: Vec<Secret>,
    /// A file holding the signing keys, one per line.
    pub secret_file: Option<String>,
    /// Route names of the agents followed; `None` follows every agent.
    pub agents: Option<Vec<String>>,
}

impl SubscriberConfig {
    /// A subscriber with `name` at `url`, following every agent, with no auth header and no signing key.
    pub fn new(name: &str, url: &str) -> SubscriberConfig {
        SubscriberConfig {
            name: name.into(),
            url: url.into(),
            ..SubscriberConfig::default()
        }
    }

    /// Whether this subscriber hears about `agent`'s tasks.
    pub fn follows(&self, agent: &str) -> bool {
        self.agents
            .as_ref()
            .is_none_or(|list| list.iter().any(|a| a == agent))
    }
}

/// How deliveries are made and retried (`[webhooks]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookConfig {
    /// Address ranges (`"10.0.0.0/8"`) the URL guard lets deliveries reach although they are
    /// not public.
    pub allow: Vec<String>,
    /// Waits between attempts, in seconds; its length + 1 is the number of attempts.
    pub retry_schedule_secs: Vec<u64>,
    /// Attempts in all: more than the schedule has repeat its last wait, fewer cut it short.
    pub max_attempts: Option<u64>,
    /// One attempt, from connect to the response head.
    #[serde(rename = "timeout_ms", deserialize_with = "de::millis")]
    pub timeout: Duration,
    /// Deliveries in flight at once, per gateway process.
    pub concurrency: usize,
    /// How long a delivery taken by a worker may stay unacknowledged before another worker
    /// takes it over (the first is presumed dead). Longer than `timeout`.
    #[serde(rename = "visibility_timeout_secs", deserialize_with = "de::secs")]
    pub visibility_timeout: Duration,
    /// Deliveries waiting (queued or scheduled for retry) at most; past it, new status changes
    /// are refused with 503 rather than queued without bound.
    pub max_queued: usize,
    /// Dead letters kept; past it the oldest are dropped (and counted).
    pub max_dead_letters: usize,
}

impl Default for WebhookConfig {
    fn default() -> WebhookConfig {
        WebhookConfig {
            allow: Vec::new(),
            // Standard Webhooks' schedule: 7 retries, 8 attempts in all.
            retry_schedule_secs: vec![5, 300, 1800, 7200, 18000, 36000, 36000],
            max_attempts: None,
            timeout: Duration::from_secs(15),
            concurrency: 64,
            visibility_timeout: Duration::from_secs(60),
            max_queued: 1_000_000,
            max_dead_letters: 100_000,
        }
    }
}

impl WebhookConfig {
    /// The waits between attempts, in seconds, after `max_attempts` is applied (more attempts
    /// than the schedule has repeat its last wait; fewer cut it short).
    pub fn retry_waits_secs(&self) -> Vec<u64> {
        let mut secs = self.retry_schedule_secs.clone();
        if let Some(n) = self.max_attempts {
            let last = secs.last().copied().unwrap_or(5);
            secs.resize(n.saturating_sub(1) as usize, last);
        }
        secs
    }
}

/// `[streams]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamsConfig {
    /// A quiet stream gets the gateway's `event: ping` this often.
    #[serde(rename = "ping_interval_ms", deserialize_with = "de::millis")]
    pub ping_interval: Duration,
    /// How long a topic without subscribers keeps its upstream open.
    #[serde(rename = "linger_ms", deserialize_with = "de::millis")]
    pub linger: Duration,
    /// Events kept per task for replay and for subscribers catching up.
    pub replay_events: usize,
    /// Bytes of events kept per task for replay (the oldest go first; the last event always stays).
    pub replay_bytes: usize,
    /// A subscriber further behind than this is cut (it resumes with Last-Event-ID).
    #[serde(rename = "subscriber_lag_bytes")]
    pub lag_bytes: u64,
    /// Tasks streamed at once per replica.
    pub max_topics: usize,
    /// Largest event (or line) accepted from an agent.
    pub max_event_bytes: usize,
    /// Longest wait between upstream reconnection attempts.
    #[serde(rename = "reconnect_max_ms", deserialize_with = "de::millis")]
    pub reconnect_max: Duration,
    /// Bytes all task streams of a replica may buffer together.
    pub max_buffer_bytes: u64,
}

impl Default for StreamsConfig {
    fn default() -> Self {
        StreamsConfig {
            ping_interval: Duration::from_secs(15),
            linger: Duration::from_secs(5),
            replay_events: 1000,
            replay_bytes: 1 << 20,
            lag_bytes: 1 << 20,
            max_topics: 10_000,
            max_event_bytes: 256 * 1024,
            reconnect_max: Duration::from_secs(10),
            max_buffer_bytes: 256 << 20,
        }
    }
}

/// The whole file. Fields are in document order: problems are listed in this order.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Required: [`Config::parse`] reports a file without it.
    pub listen: SocketAddr,
    /// HTTPS on `listen`, with optional client certificates; absent, plaintext HTTP.
    pub tls: Option<TlsConfig>,
    /// Largest request body accepted (POST /tasks), in bytes.
    pub max_body_bytes: usize,
    /// How long terminal tasks stay in the ledger.
    #[serde(rename = "task_retention_secs", deserialize_with = "de::secs")]
    pub task_retention: Duration,
    /// Upper bound on tasks held by the in-process ledger.
    pub max_tasks: usize,
    /// Upper bound on the bytes of task documents held by the in-process ledger.
    pub max_ledger_bytes: usize,
    /// Upper bound on concurrent client connections.
    pub max_connections: usize,
    /// TCP connect timeout towards agents.
    #[serde(rename = "connect_timeout_ms", deserialize_with = "de::millis")]
    pub connect_timeout: Duration,
    /// How long the answer to a create with an `Idempotency-Key` is kept for replay.
    #[serde(rename = "idempotency_ttl_secs", deserialize_with = "de::secs")]
    pub idempotency_ttl: Duration,
    /// How long past the agent's `timeout_ms` the gateway keeps waiting for the answer to a
    /// create (the client has had its 504), so the task is recorded when it comes; 0 gives up
    /// at the timeout.
    #[serde(rename = "late_answer_secs", deserialize_with = "de::secs")]
    pub late_answer: Duration,
    /// Worker threads serving clients; 0 means one per available core.
    pub workers: usize,
    /// On SIGTERM, how long `/readyz` answers 503 while requests are still served, before the
    /// listener closes (time for a load balancer to stop sending).
    #[serde(rename = "drain_delay_ms", deserialize_with = "de::millis")]
    pub drain_delay: Duration,
    /// On SIGTERM, how long requests in flight get to finish once the listener has closed.
    #[serde(rename = "shutdown_grace_ms", deserialize_with = "de::millis")]
    pub shutdown_grace: Duration,
    /// The agents behind the gateway, by route name.
    pub agents: Vec<AgentConfig>,
    /// The shared store: absent, the gateway runs on its in-process ledger and queue.
    pub redis: Option<RedisConfig>,
    /// How webhooks are delivered.
    pub webhooks: WebhookConfig,
    /// Who receives webhooks.
    pub subscribers: Vec<SubscriberConfig>,
    /// Task event streams.
    pub streams: StreamsConfig,
    /// Bearer token of the `/admin/` routes; without one they are disabled. Only without
    /// clients: with them, the `admin` right replaces it.
    pub admin_token: Option<Secret>,
    /// A file holding `admin_token`.
    pub admin_token_file: Option<String>,
    /// Without clients or JWT: whether a `listen` address other than loopback may serve every
    /// caller unauthenticated (it refuses to start otherwise).
    pub allow_anonymous: bool,
    /// The gateway's clients: with any (or with `[auth.jwt]`), every route but the probes needs
    /// credentials.
    pub clients: Vec<ClientConfig>,
    /// Other ways to authenticate clients.
    pub auth: AuthConfig,
    /// Browser origins allowed to call the gateway.
    pub cors: Option<CorsConfig>,
    /// OpenTelemetry traces (off without `otlp_endpoint`).
    pub telemetry: TelemetryConfig,
    /// `text` or `json` log lines (read at start: a change needs a restart).
    pub log_format: LogFormat,
    /// One log line per request (`a2a_gateway::access`): client, agent, route, status,
    /// duration, request id and trace id.
    pub access_log: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: None,
            max_body_bytes: 1 << 20,
            task_retention: Duration::from_secs(24 * 3600),
            max_tasks: 1_000_000,
            max_ledger_bytes: 1 << 30,
            max_connections: 16_384,
            connect_timeout: Duration::from_secs(2),
            idempotency_ttl: Duration::from_secs(86_400),
            late_answer: Duration::from_secs(60),
            workers: 0,
            drain_delay: Duration::ZERO,
            shutdown_grace: Duration::from_millis(10_000),
            agents: Vec::new(),
            redis: None,
            webhooks: WebhookConfig::default(),
            subscribers: Vec::new(),
            streams: StreamsConfig::default(),
            admin_token: None,
            admin_token_file: None,
            allow_anonymous: false,
            clients: Vec::new(),
            auth: AuthConfig::default(),
            cors: None,
            telemetry: TelemetryConfig::default(),
            log_format: LogFormat::Text,
            access_log: false,
        }
    }
}

impl Config {
    /// A config with defaults and the given agents (used by `demo` and tests).
    pub fn with_agents(listen: SocketAddr, agents: Vec<AgentConfig>) -> Config {
        Config {
            listen,
            agents,
            ..Config::default()
        }
    }

    /// Whether callers must authenticate: clients or `[auth.jwt]` are configured.
    pub fn auth_enabled(&self) -> bool {
        !self.clients.is_empty() || self.auth.jwt.is_some()
    }

    /// Make every file path in the config relative to `dir` (the config file's directory), so
    /// the gateway reads the same files whatever directory it was started from.
    pub fn resolve_paths(&mut self, dir: &Path) {
        let fix = |p: &mut String| {
            if !p.is_empty() && Path::new(p.as_str()).is_relative() {
                *p = dir.join(p.as_str()).to_string_lossy().into_owned();
            }
        };
        if let Some(jwt) = self.auth.jwt.as_mut() {
            fix(&mut jwt.jwks_file);
        }
        if let Some(tls) = self.tls.as_mut() {
            fix(&mut tls.cert_file);
            fix(&mut tls.key_file);
            if let Some(ca) = tls.client_ca_file.as_mut() {
                fix(ca);
            }
        }
        for a in &mut self.agents {
            if let Some(ca) = a.ca_file.as_mut() {
                fix(ca);
            }
        }
        for p in self.secret_files_mut() {
            fix(p);
        }
    }

    /// The number of worker threads to run.
    pub fn worker_count(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// [`Config::load_with`] with the config's own rules only.
    pub fn load(path: &Path) -> Result<Config, Vec<Problem>> {
        Config::load_with(path, &NoRules)
    }

    /// [`Config::load`], with the domain checks of `rules`.
    pub fn load_with(path: &Path, rules: &dyn Rules) -> Result<Config, Vec<Problem>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![Problem::new(
                "",
                format!("cannot read {}: {e}", path.display()),
            )]
        })?;
        // Paths in the file are relative to it: resolved before the checks read them.
        let dir = path.parent().unwrap_or(Path::new("."));
        Config::parse_with_dir(&text, rules, dir)
    }

    /// [`Config::parse_with`] with the config's own rules only.
    pub fn parse(text: &str) -> Result<Config, Vec<Problem>> {
        Config::parse_with(text, &NoRules)
    }

    /// Parse and check; on failure, every problem found, in document order. Relative paths
    /// are taken as they are (relative to the working directory).
    pub fn parse_with(text: &str, rules: &dyn Rules) -> Result<Config, Vec<Problem>> {
        Config::parse_with_dir(text, rules, Path::new(""))
    }

    /// [`Config::parse_with`], with relative paths resolved against `dir`.
    fn parse_with_dir(text: &str, rules: &dyn Rules, dir: &Path) -> Result<Config, Vec<Problem>> {
        let mut doc: Table = text.parse().map_err(|e: toml::de::Error| {
            vec![Problem::new(
                "",
                format!("not valid TOML: {}", e.message().trim()),
            )]
        })?;
        let mut early = keys::screen::<Config>(&mut doc);
        if !doc.contains_key("listen") && !early.iter().any(|(_, p)| p.key == "listen") {
            let p = Problem::new(
                "listen",
                "is required (e.g. \"127.0.0.1:8080\"; port 0 picks a free port)",
            );
            early.push((keys::rank::<Config>("listen"), p));
        }
        let mut cfg = match Config::deserialize(toml::Value::Table(doc)) {
            Ok(cfg) => cfg,
            // The screen removed every value serde refuses; this is a bug if it happens.
            Err(e) => {
                let mut problems: Vec<Problem> = early.into_iter().map(|(_, p)| p).collect();
                problems.push(Problem::new("", e.message().trim().to_owned()));
                return Err(problems);
            }
        };
        if !dir.as_os_str().is_empty() {
            cfg.resolve_paths(dir);
        }
        let mut late = cfg.read_secret_files();
        late.extend(cfg.validate_with(rules).err().unwrap_or_default());
        let problems = merge(early, late);
        if problems.is_empty() {
            Ok(cfg)
        } else {
            Err(problems)
        }
    }

    /// [`Config::validate_with`] with the config's own rules only.
    pub fn validate(&self) -> Result<(), Vec<Problem>> {
        self.validate_with(&NoRules)
    }

    /// Every semantic problem, with its key, in document order.
    pub fn validate_with(&self, rules: &dyn Rules) -> Result<(), Vec<Problem>> {
        let mut v = Validator::default();
        v.config(self, rules);
        if v.problems.is_empty() {
            Ok(())
        } else {
            Err(v.problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_config_parses() {
        let cfg = Config::parse(
            r#"
            listen = "127.0.0.1:0"
            max_body_bytes = 2048
            [[agents]]
            name = "scripts"
            url = "http://127.0.0.1:9000/"
            card_path = "/card.json"
            refresh_secs = 5
            timeout_ms = 250
            ingest_token = "0123456789abcdef0123"
            conformance = "report"
            passthrough_unknown_tasks = true
            [redis]
            url = "redis://127.0.0.1:6379"
        "#,
        )
        .expect("valid");
        assert_eq!(cfg.max_body_bytes, 2048);
        let a = &cfg.agents[0];
        assert!(a.passthrough_unknown_tasks);
        assert!(!AgentConfig::default().passthrough_unknown_tasks);
        assert_eq!(a.url, "http://127.0.0.1:9000");
        assert_eq!(a.card_path, "/card.json");
        assert_eq!(a.timeout, Duration::from_millis(250));
        assert_eq!(a.conformance, Conformance::Report);
        assert!(a
            .ingest_token
            .as_ref()
            .is_some_and(|t| t.matches(b"0123456789abcdef0123")));
        assert!(!format!("{a:?}").contains("0123456789abcdef"));
        assert_eq!(
            cfg.redis.map(|r| r.url).as_deref(),
            Some("redis://127.0.0.1:6379")
        );
    }

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
    fn redis_urls_prefixes_and_cluster_keys_are_checked() {
        let base = "listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n[redis]\n";
        let keys_of = |toml: &str| -> Vec<String> {
            Config::parse(&format!("{base}{toml}"))
                .expect_err(toml)
                .into_iter()
                .map(|p| p.key)
                .collect()
        };
        // Braces in the prefix: each partition puts its own hash tag after it.
        assert_eq!(
            keys_of("url = \"redis://h\"\nprefix = \"a2a:{gw}:\"\n"),
            ["redis.prefix"]
        );
        assert_eq!(
            keys_of("url = \"redis://h\"\nprefix = \"\"\n"),
            ["redis.prefix"]
        );
        assert_eq!(keys_of("url = \"http://h\"\n"), ["redis.url"]);
        assert_eq!(
            keys_of("url = \"redis://h\"\npartitions = 0\n"),
            ["redis.partitions"]
        );
        assert_eq!(
            keys_of("url = \"redis://h\"\npartitions = 5000\n"),
            ["redis.partitions"]
        );
        // Seed nodes without `cluster = true`, a unix socket for a cluster, mixed TLS.
        assert_eq!(
            keys_of("urls = [\"redis://a\", \"redis://b\"]\n"),
            ["redis.urls"]
        );
        assert_eq!(
            keys_of("cluster = true\nurls = [\"unix:///tmp/r.sock\"]\n"),
            ["redis.urls"]
        );
        assert_eq!(
            keys_of("cluster = true\nurls = [\"rediss://a\", \"redis://b\"]\n"),
            ["redis.urls"]
        );
        assert_eq!(
            keys_of("url = \"redis://h\"\nca_file = \"/ca.pem\"\n"),
            ["redis.ca_file"]
        );
        assert_eq!(keys_of("cluster = true\n"), ["redis.url"]);
        // Every problem in one pass.
        assert_eq!(
            keys_of("url = \"redis://h\"\nprefix = \"{x}\"\npartitions = 0\n"),
            ["redis.prefix", "redis.partitions"]
        );
        let ok = Config::parse(&format!(
            "{base}url = \"rediss://gw:pw@h:6380\"\nca_file = \"/ca.pem\"\nwait_replicas = 1\n"
        ))
        .expect("tls with a user");
        let r = ok.redis.expect("redis");
        assert_eq!(
            (r.prefix.as_str(), r.partitions, r.wait_replicas),
            ("a2a:", 16, 1)
        );
        assert!(!format!("{r:?}").contains("pw"), "{r:?}");
        let ok = Config::parse(&format!(
            "{base}cluster = true\nurls = [\"redis://:pw@a:7000\", \"redis://:pw@b:7001\"]\n"
        ))
        .expect("cluster");
        let r = ok.redis.expect("redis");
        assert_eq!(r.nodes().len(), 2);
        assert!(!format!("{r:?}").contains("pw"), "{r:?}");
        // A unix socket's password rides in the query string.
        let ok = Config::parse(&format!("{base}url = \"unix:///run/r.sock?pass=pw9\"\n"))
            .expect("unix socket");
        assert!(!format!("{:?}", ok.redis).contains("pw9"));
        // A bound each partition can hold, and a WAIT shorter than an answer's timeout.
        assert_eq!(
            keys_of("url = \"redis://h\"\n[webhooks]\nmax_queued = 100\n"),
            ["webhooks.max_queued"]
        );
        assert_eq!(
            keys_of("url = \"redis://h\"\nwait_replicas = 1\nwait_timeout_ms = 5000\n"),
            ["redis.wait_timeout_ms"]
        );
    }

    #[test]
    fn unknown_keys_name_the_nearest_valid_key() {
        let problems = Config::parse(
            r#"
            listn = "127.0.0.1:0"
            listen = "127.0.0.1:0"
            [[agents]]
            name = "a"
            url = "http://x"
            [[agents]]
            name = "b"
            url = "http://y"
            timout_ms = 5
            [redis]
            url = "redis://h"
            prefx = "a:{t}:"
            [streams]
            ping_interval = 5
            colour = "blue"
        "#,
        )
        .expect_err("unknown keys");
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "listn: unknown key; did you mean listen?",
                "agents[1].timout_ms: unknown key; did you mean timeout_ms?",
                "redis.prefx: unknown key; did you mean prefix?",
                "streams.colour: unknown key; valid keys here: ping_interval_ms, linger_ms, \
                 replay_events, replay_bytes, subscriber_lag_bytes, max_topics, max_event_bytes, \
                 reconnect_max_ms, max_buffer_bytes",
                "streams.ping_interval: unknown key; did you mean ping_interval_ms?",
            ],
        );
    }

    #[test]
    fn wrong_types_are_reported_with_their_keys_alongside_the_rest() {
        let problems = Config::parse(
            r#"
            listen = 8080
            max_tasks = "many"
            [[agents]]
            name = "a"
            url = "http://x"
            refresh_secs = -1
            conformance = "maybe"
            [[agents]]
            name = "a"
            url = 5
            [webhooks]
            allow = "10.0.0.0/8"
        "#,
        )
        .expect_err("broken");
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "listen",
                "max_tasks",
                "agents[0].refresh_secs",
                "agents[0].conformance",
                "agents[1].name",
                "agents[1].url",
                "webhooks.allow",
            ],
            "{problems:?}"
        );
        assert_eq!(problems[1].message, "must be an integer");
    }

    #[test]
    fn the_field_lists_come_from_the_serde_derives() {
        assert_eq!(
            keys::fields_of::<Config>(&["redis"]),
            Some(
                &[
                    "url",
                    "url_file",
                    "cluster",
                    "urls",
                    "ca_file",
                    "prefix",
                    "partitions",
                    "wait_replicas",
                    "wait_timeout_ms"
                ][..]
            )
        );
        assert!(keys::fields_of::<Config>(&["agents"]).is_some_and(|f| f.contains(&"timeout_ms")));
        assert_eq!(keys::fields_of::<Config>(&["listen"]), None);
        assert_eq!(
            keys::nearest("subscriber", &["subscribers", "streams"]),
            Some("subscribers")
        );
        assert_eq!(keys::nearest("colour", &["listen", "workers"]), None);
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

    const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const HASH2: &str = "a57dc21a5a080e90e7df96108954414da40039b3f7f9235ca63435938c0c1159";

    #[test]
    fn clients_jwt_and_cors_parse_with_their_defaults() {
        let cfg = Config::parse(&format!(
            r#"
            listen = "0.0.0.0:8080"
            [[clients]]
            name = "orchestrator-a"
            key_sha256 = "{HASH}"
            [[clients]]
            name = "ops"
            key_sha256 = "{}"
            agents = ["scripts", "f47ac10b-58cc-4372-a567-0e02b2c3d479"]
            can = ["metrics", "admin", "all_tasks"]
            max_streams = 5
            [auth.jwt]
            jwks_file = "jwks.json"
            issuer = "https://idp.example.com/"
            audience = "a2a-gateway"
            [cors]
            allow_origins = ["https://console.example.com", "http://localhost:3000"]
            [[agents]]
            name = "scripts"
            url = "http://x"
            upstream_auth_header = "Authorization: Bearer agent-secret"
        "#,
            HASH2.to_uppercase()
        ))
        .expect("valid");
        assert!(cfg.auth_enabled());
        let a = &cfg.clients[0];
        assert_eq!(a.agents, ["*"]);
        assert_eq!(a.can, [Right::Tasks, Right::Streams]);
        assert_eq!(a.max_streams, 100);
        assert_eq!(cfg.clients[1].can.len(), 3);
        let jwt = cfg.auth.jwt.as_ref().expect("jwt");
        assert_eq!(jwt.leeway, Duration::from_secs(30));
        let cors = cfg.cors.as_ref().expect("cors");
        assert_eq!(cors.max_age, Duration::from_secs(600));
        let (name, value) = cfg.agents[0].upstream_auth_header.as_ref().expect("header");
        assert_eq!(name.as_str(), "authorization");
        assert!(value.matches(b"Bearer agent-secret"));
        assert!(!format!("{cfg:?}").contains("agent-secret"));
    }

    #[test]
    fn identity_problems_are_reported_with_their_keys() {
        let p = Config::parse(&format!(
            r#"
            listen = "127.0.0.1:1"
            admin_token = "0123456789abcdef0123"
            [[clients]]
            name = "a b"
            key_sha256 = "abc"
            agents = ["nobody"]
            [[clients]]
            name = "anonymous"
            key_sha256 = "{HASH}"
            [[clients]]
            name = "c"
            [[clients]]
            name = "d"
            key_sha256 = "{HASH2}"
            can = ["tasks", "root"]
            [[clients]]
            name = "d"
            key_sha256 = "{HASH2}"
            [cors]
            allow_origins = ["https://console.example.com/", "*"]
            [[agents]]
            name = "scripts"
            url = "http://x"
        "#
        ))
        .expect_err("broken");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "admin_token",
                "clients[0].name",
                "clients[0].key_sha256",
                "clients[0].agents",
                "clients[1].name",
                "clients[2].key_sha256",
                "clients[3].can",
                "clients[4].name",
                "clients[4].key_sha256",
                "cors.allow_origins[0]",
                "cors.allow_origins[1]",
            ],
            "{p:#?}"
        );
        assert!(p[0].message.contains("`admin` right"), "{}", p[0].message);
    }

    #[test]
    fn a_public_listen_address_needs_clients_or_allow_anonymous() {
        let agents = "[[agents]]\nname = \"a\"\nurl = \"http://x\"\n";
        let p = Config::parse(&format!("listen = \"0.0.0.0:8080\"\n{agents}")).expect_err("open");
        assert_eq!(p[0].key, "listen");
        assert!(p[0].message.contains("allow_anonymous"), "{}", p[0].message);
        Config::parse(&format!(
            "listen = \"0.0.0.0:8080\"\nallow_anonymous = true\n{agents}"
        ))
        .expect("explicitly open");
        Config::parse(&format!("listen = \"[::1]:8080\"\n{agents}")).expect("loopback");
        Config::parse(&format!(
            "listen = \"0.0.0.0:8080\"\n[[clients]]\nname = \"c\"\nkey_sha256 = \"{HASH}\"\n{agents}"
        ))
        .expect("with clients");
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
    fn jwt_needs_its_keys_issuer_and_audience() {
        let p = Config::parse(
            "listen = \"127.0.0.1:1\"\n[auth.jwt]\nleeway_secs = 900\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n",
        )
        .expect_err("incomplete");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "auth.jwt.jwks_file",
                "auth.jwt.issuer",
                "auth.jwt.audience",
                "auth.jwt.leeway_secs"
            ]
        );
    }

    #[test]
    fn secrets_are_read_from_files_relative_to_the_config() {
        let dir = tempfile::tempdir().expect("dir");
        let put = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        put("admin", "admin-token-0123456789\n");
        put("ingest", "  ingest-token-0123456789  \n");
        put("auth", "Authorization: Bearer agent-secret\n");
        put("keys", "whsec_new\n\nwhsec_old\n");
        put("redis", "redis://:pw@10.0.0.1:6379\n");
        put(
            "gateway.toml",
            r#"
            listen = "127.0.0.1:0"
            admin_token_file = "admin"
            [[agents]]
            name = "a"
            url = "http://x"
            ingest_token_file = "ingest"
            upstream_auth_header_file = "auth"
            [[subscribers]]
            name = "s"
            url = "https://hooks.example.com/a2a"
            secret_file = "keys"
            [redis]
            url_file = "redis"
        "#,
        );
        let cfg = Config::load(&dir.path().join("gateway.toml")).expect("valid");
        assert!(cfg
            .admin_token
            .as_ref()
            .is_some_and(|t| t.matches(b"admin-token-0123456789")));
        let a = &cfg.agents[0];
        assert!(a
            .ingest_token
            .as_ref()
            .is_some_and(|t| t.matches(b"ingest-token-0123456789")));
        let (name, value) = a.upstream_auth_header.as_ref().expect("header");
        assert_eq!(name.as_str(), "authorization");
        assert!(value.matches(b"Bearer agent-secret"));
        let keys: Vec<&str> = cfg.subscribers[0]
            .secret
            .iter()
            .map(Secret::expose)
            .collect();
        assert_eq!(keys, ["whsec_new", "whsec_old"]);
        assert_eq!(
            cfg.redis.as_ref().map(|r| r.url.as_str()),
            Some("redis://:pw@10.0.0.1:6379")
        );
        assert!(
            !format!("{cfg:?}").contains("pw@"),
            "the password never prints"
        );
    }

    #[test]
    fn secret_file_problems_are_reported_at_their_keys() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("empty"), "\n").expect("write");
        std::fs::write(dir.path().join("bad"), "no colon here").expect("write");
        std::fs::write(
            dir.path().join("gateway.toml"),
            r#"
            listen = "127.0.0.1:0"
            admin_token = "admin-token-0123456789"
            admin_token_file = "empty"
            [[agents]]
            name = "a"
            url = "http://x"
            ingest_token_file = "missing"
            upstream_auth_header_file = "bad"
            [[subscribers]]
            name = "s"
            url = "https://hooks.example.com/a2a"
            secret = ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
            secret_file = "empty"
        "#,
        )
        .expect("write");
        let p = Config::load(&dir.path().join("gateway.toml")).expect_err("broken");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "admin_token_file",
                "agents[0].ingest_token_file",
                "agents[0].upstream_auth_header_file",
                "subscribers[0].secret_file",
            ],
            "{p:#?}"
        );
        assert!(p[0].message.contains("not both"), "{}", p[0].message);
        assert!(p[1].message.contains("cannot read"), "{}", p[1].message);
    }

    #[test]
    fn tls_keys_parse_with_their_defaults_and_paths_resolve_against_the_file() {
        let text = format!(
            r#"
            listen = "127.0.0.1:8443"
            [tls]
            cert_file = "server.pem"
            key_file = "/etc/gw/server.key"
            client_ca_file = "ca.pem"
            [[clients]]
            name = "orchestrator-a"
            cert_subject = "CN=orchestrator-a,O=Example"
            [[clients]]
            name = "b"
            key_sha256 = "{HASH}"
            [[agents]]
            name = "secure"
            url = "https://agent.internal:8443"
            ca_file = "agent-ca.pem"
        "#
        );
        let cfg = Config::parse_with_dir(&text, &NoRules, Path::new("/srv/gw")).expect("valid");
        let tls = cfg.tls.as_ref().expect("tls");
        assert_eq!(tls.client_auth(), ClientAuth::Required);
        assert_eq!(tls.cert_file, "/srv/gw/server.pem");
        assert_eq!(tls.key_file, "/etc/gw/server.key");
        assert_eq!(tls.client_ca_file.as_deref(), Some("/srv/gw/ca.pem"));
        assert_eq!(
            cfg.agents[0].ca_file.as_deref(),
            Some("/srv/gw/agent-ca.pem")
        );
        assert_eq!(
            cfg.clients[0].cert_subject.as_deref(),
            Some("CN=orchestrator-a,O=Example")
        );
        let optional = Config::parse(
            "listen = \"127.0.0.1:1\"\n[tls]\ncert_file = \"c\"\nkey_file = \"k\"\nclient_ca_file = \"ca\"\nclient_auth = \"optional\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n",
        )
        .expect("optional");
        assert_eq!(
            optional.tls.map(|t| t.client_auth()),
            Some(ClientAuth::Optional)
        );
    }

    #[test]
    fn tls_problems_are_reported_with_their_keys() {
        let p = Config::parse(
            r#"
            listen = "127.0.0.1:1"
            [tls]
            client_auth = "sometimes"
            [[clients]]
            name = "a"
            cert_subject = "CN=a, O=b"
            [[clients]]
            name = "b"
            cert_subject = "/CN=b"
            [[agents]]
            name = "plain"
            url = "http://x"
            ca_file = "ca.pem"
            [[agents]]
            name = "one"
            url = "https://Agents.internal"
            ca_file = "one.pem"
            [[agents]]
            name = "two"
            url = "https://agents.internal:443/two"
        "#,
        )
        .expect_err("broken");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "tls.cert_file",
                "tls.key_file",
                "tls.client_auth",
                "agents[0].ca_file",
                "agents[2].ca_file",
                "clients[0].cert_subject",
                "clients[1].cert_subject",
            ],
            "{p:#?}"
        );
        assert!(
            p[5].message.contains("space after a separator"),
            "{}",
            p[5].message
        );
        assert!(p[6].message.contains("OpenSSL"), "{}", p[6].message);

        let p = Config::parse(
            r#"
            listen = "127.0.0.1:1"
            [tls]
            cert_file = "c.pem"
            key_file = "k.pem"
            client_auth = "optional"
            [[clients]]
            name = "a"
            cert_subject = "CN=a"
            [[clients]]
            name = "b"
            cert_subject = "CN=a"
            [[agents]]
            name = "x"
            url = "http://x"
        "#,
        )
        .expect_err("no client CA");
        let keys: Vec<&str> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "tls.client_auth",
                "clients[0].cert_subject",
                "clients[1].cert_subject",
                "clients[1].cert_subject",
            ],
            "{p:#?}"
        );
        assert!(p[1].message.contains("client_ca_file"), "{}", p[1].message);
        assert!(p[3].message.contains("same subject"), "{}", p[3].message);
    }
}
