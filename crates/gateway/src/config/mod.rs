//! The TOML config as plain data: serde types with `deny_unknown_fields`, each default written
//! once (the `Default` impls), and [`Config::validate`] for every rule serde cannot express.
//! [`Config::parse`] reports *every* problem with its key, so `check-config` can list them all
//! at once: unknown keys (with the nearest valid one) and wrong types first ([`keys`]), then
//! every semantic problem. This module is a leaf: it imports no other module of the crate.
//! The domain modules build their runtime types from it, and rules that need their knowledge
//! (the webhook URL guard, signing keys, the retry schedule) come in through [`Rules`].

mod agent;
mod de;
mod identity;
pub mod keys;
mod rules;
mod secrets;
mod store;
mod telemetry;
mod tls;
mod validate;

pub use agent::{A2aVersion, AgentConfig, Binding, Conformance, Discover, Identity, Protocol};
pub use identity::{
    AssertionConfig, AuthConfig, ClientConfig, CorsConfig, JwtConfig, OidcConfig, Right,
    ScopeRights, MAX_SCOPE_LEN, OIDC_ALGORITHMS,
};
pub use rules::{Check, NoRules, Refused, Rules};
pub use tls::{ClientAuth, PemKind, TlsConfig};

pub use store::{RedisConfig, MAX_PARTITIONS};
pub use telemetry::{LogFormat, TelemetryConfig};
pub use validate::redact_url;
pub use validate::Problem;
use validate::{merge, parse_header_line, Validator};

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use hyper::header::HeaderName;
use serde::Deserialize;
use toml::Table;

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

/// One webhook subscriber (`[[subscribers]]`): every accepted task status change of the agents
/// it follows is POSTed to `url` as the spec's push-notification payload.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
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
    /// The protocols whose agents' changes are delivered: the default `["clawpedia"]` keeps
    /// the payloads a receiver built for Clawpedia tasks; `"a2a"` adds official A2A tasks.
    pub protocols: Option<Vec<Protocol>>,
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

    /// Whether this subscriber hears about `agent`'s tasks, `agent` speaking `protocol`.
    pub fn follows(&self, agent: &str, protocol: Protocol) -> bool {
        self.hears(protocol)
            && self
                .agents
                .as_ref()
                .is_none_or(|list| list.iter().any(|a| a == agent))
    }

    /// Whether this subscriber takes changes of `protocol`'s tasks (`protocols`, by default
    /// only Clawpedia's).
    pub fn hears(&self, protocol: Protocol) -> bool {
        match &self.protocols {
            Some(list) => list.contains(&protocol),
            None => protocol == Protocol::Clawpedia,
        }
    }
}

/// What the delivery queue holds at most ([`WebhookConfig::queue_bounds`]; the queue's
/// `webhook::queue::Bounds`).
/// `[[subscribers]]`' deliveries are all of a change or none, and past `queued` or `bytes` the
/// change is not recorded; a client's push deliveries (a task's configs are its owner's) are
/// left out past those or past the client's own share, so one client cannot fill the queue
/// every client and subscriber shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueBounds {
    /// Messages (`webhooks.max_queued`).
    pub queued: usize,
    /// Bytes of their bodies (`webhooks.max_queued_bytes`).
    pub bytes: usize,
    /// One client's push messages (`webhooks.max_queued_per_client`).
    pub per_client: usize,
    /// Bytes of one client's push messages (a quarter of `bytes`).
    pub per_client_bytes: usize,
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
    /// One client's push deliveries in flight at once, per gateway process (each
    /// `[[subscribers]]` entry a share of its own): a client whose receivers hang waits on its
    /// own share, not on everyone's. `None`: a quarter of `concurrency` ([`WebhookConfig::per_client`]).
    pub max_in_flight_per_client: Option<usize>,
    /// How long a delivery taken by a worker may stay unacknowledged before another worker
    /// takes it over (the first is presumed dead). Longer than `timeout`.
    #[serde(rename = "visibility_timeout_secs", deserialize_with = "de::secs")]
    pub visibility_timeout: Duration,
    /// Deliveries waiting (queued or scheduled for retry) at most; past it, new status changes
    /// are refused with 503 rather than queued without bound.
    pub max_queued: usize,
    /// The bytes of the deliveries waiting at most (their bodies): past it a change for
    /// `[[subscribers]]` is refused as past `max_queued`, and push configs' deliveries are
    /// left out. Each client's push deliveries hold a quarter of it at most.
    pub max_queued_bytes: u64,
    /// One client's push deliveries waiting at most (a task's configs are its owner's):
    /// past it that client's deliveries of a change are left out (`outcome="queue_full"`),
    /// never another client's. `None`: a quarter of `max_queued` ([`WebhookConfig::queue_bounds`]).
    pub max_queued_per_client: Option<usize>,
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
            max_in_flight_per_client: None,
            visibility_timeout: Duration::from_secs(60),
            max_queued: 1_000_000,
            max_queued_bytes: 1 << 30,
            max_queued_per_client: None,
            max_dead_letters: 100_000,
        }
    }
}

impl WebhookConfig {
    /// One client's (or one subscriber's) deliveries in flight at most: the key, or a quarter
    /// of `concurrency` (at least 1) when it is not given.
    pub fn per_client(&self) -> usize {
        self.max_in_flight_per_client
            .unwrap_or(self.concurrency / 4)
            .max(1)
    }

    /// What the delivery queue holds at most, in all and per client (the defaults of the keys
    /// not given applied).
    pub fn queue_bounds(&self) -> QueueBounds {
        let bytes = usize::try_from(self.max_queued_bytes).unwrap_or(usize::MAX);
        QueueBounds {
            queued: self.max_queued,
            bytes,
            per_client: self
                .max_queued_per_client
                .unwrap_or(self.max_queued / 4)
                .max(1),
            per_client_bytes: (bytes / 4).max(1),
        }
    }

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

/// `[a2a]`: what the gateway keeps for official A2A agents' tasks.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct A2aConfig {
    /// Push configs a task may hold (CreateTaskPushNotificationConfig past it is
    /// InvalidParams).
    pub max_push_configs_per_task: usize,
    /// Upper bound on a recorded Task's artifacts (its `artifacts` list as written), apart from
    /// `max_task_document_bytes`, which bounds the rest: an artifact an agent may answer whole
    /// (8 MiB, the agent answer limit) is recorded whole. Past it the record keeps every
    /// artifact listed, the cut ones marked (`protocol::a2a::kept`).
    pub max_artifact_bytes_per_task: usize,
}

impl Default for A2aConfig {
    fn default() -> A2aConfig {
        A2aConfig {
            max_push_configs_per_task: 10,
            max_artifact_bytes_per_task: 8 << 20,
        }
    }
}

/// `[streams]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    /// Upper bound on one recorded A2A Task without its artifacts (they have their own,
    /// `[a2a] max_artifact_bytes_per_task`): past it the record drops the task's `history`
    /// first.
    pub max_task_document_bytes: usize,
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
    /// Official A2A agents' tasks: push configs, artifacts.
    pub a2a: A2aConfig,
    /// Bearer token of the `/admin/` routes; without one they are disabled. Only without
    /// clients: with them, the `admin` right replaces it.
    pub admin_token: Option<Secret>,
    /// A file holding `admin_token`.
    pub admin_token_file: Option<String>,
    /// The base of every URL the gateway writes for its clients (`"https://gw.example.com"`,
    /// kept without a trailing `/`): artifact content links, redirects. Without it, a URL is
    /// built from the request: `https` exactly when `[tls]` is set, and its `Host` header
    /// (never `X-Forwarded-*`, which any client can send).
    #[serde(deserialize_with = "de::opt_base_url")]
    pub public_url: Option<String>,
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
    /// How `discover = "dns"` agents' names are resolved.
    pub discovery: DiscoveryConfig,
    /// `text` or `json` log lines (read at start: a change needs a restart).
    pub log_format: LogFormat,
    /// One log line per request (`a2a_gateway::access`): client, agent, route, status,
    /// duration, request id and trace id.
    pub access_log: bool,
}

/// `[discovery]`: where `discover = "dns"` names are resolved.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiscoveryConfig {
    /// A DNS server (`"10.0.0.10:53"`) asked directly; without it, the system resolver.
    pub nameserver: Option<String>,
}

impl DiscoveryConfig {
    /// The nameserver's address, when one is configured and valid (checked at start).
    pub fn nameserver(&self) -> Option<SocketAddr> {
        self.nameserver.as_deref().and_then(|n| n.parse().ok())
    }
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
            max_task_document_bytes: 1 << 20,
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
            a2a: A2aConfig::default(),
            admin_token: None,
            admin_token_file: None,
            public_url: None,
            allow_anonymous: false,
            clients: Vec::new(),
            auth: AuthConfig::default(),
            cors: None,
            telemetry: TelemetryConfig::default(),
            discovery: DiscoveryConfig::default(),
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
        !self.clients.is_empty() || self.auth.jwt.is_some() || !self.auth.oidc.is_empty()
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
        for o in &mut self.auth.oidc {
            if let Some(ca) = o.ca_file.as_mut() {
                fix(ca);
            }
        }
        if let Some(a) = self.auth.assertion.as_mut() {
            a.key_files.iter_mut().for_each(fix);
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
        // `urls` without `url`: the first replica stands for the agent where one address is
        // needed (its card path, the origin of the file URLs it names).
        for a in &mut cfg.agents {
            if a.url.is_empty() {
                if let Some(first) = a.urls.first() {
                    a.url = first.clone();
                }
            }
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

    /// What a valid config may still get wrong, for `check-config` and the start-up log to say:
    /// no problem, but a likely mistake.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if !self.listen.ip().is_loopback() && self.public_url.is_none() {
            w.push(format!(
                "public_url: not set while listen ({}) is not loopback: URLs written for clients take their host from each request's Host header; set public_url to the address clients use",
                self.listen
            ));
        }
        for (i, o) in self.auth.oidc.iter().enumerate() {
            let bound = self
                .clients
                .iter()
                .any(|c| c.jwt_subject.is_some() && c.jwt_issuer.as_deref() == Some(&o.name));
            if o.scopes.is_empty() && !bound {
                w.push(format!(
                    "auth.oidc[{i}].scopes: empty, and no [[clients]] entry has jwt_issuer = {:?}: the tokens of {:?} can do nothing (a token's rights come from its scopes); map a scope, e.g. scopes = {{ \"a2a\" = {{ can = [\"tasks\", \"streams\"] }} }}",
                    o.name, o.name
                ));
            }
        }
        for (i, a) in self.agents.iter().enumerate() {
            if a.protocol == Protocol::A2a && a.card_path == "/agent-card.json" {
                w.push(format!(
                    "agents[{i}].card_path: {:?} is Clawpedia's card path, and agent {:?} has protocol = \"a2a\": an official A2A agent serves its card at /.well-known/agent-card.json (leave card_path out for the protocol's default)",
                    a.card_path, a.name
                ));
            }
        }
        w
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

/// What the config tests of several files share.
#[cfg(test)]
pub(crate) mod testing {
    /// SHA-256 of "test", and of "test2": two clients' key hashes.
    pub const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    pub const HASH2: &str = "a57dc21a5a080e90e7df96108954414da40039b3f7f9235ca63435938c0c1159";
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
}
