//! The TOML config: its model, defaults, and one pass that reports *every* problem with its key,
//! so `check-config` can list them all at once instead of failing on the first.

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use hyper::header::{HeaderName, HeaderValue};
use toml::{Table, Value};

use crate::webhook::guard::{Cidr, UrlGuard};
use crate::webhook::retry::{Schedule, DEFAULT_SCHEDULE_SECS};

/// How an agent's non-conformant responses are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conformance {
    /// A broken response becomes 502 AGENT_PROTOCOL_VIOLATION (default).
    Enforce,
    /// Passed on, counted and logged.
    Report,
}

/// A credential: compared in constant time, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
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

#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Route name: the agent is served under `/agents/{name}/`.
    pub name: String,
    /// Base URL, without a trailing slash.
    pub url: String,
    pub card_path: String,
    pub refresh: Duration,
    pub timeout: Duration,
    pub ingest_token: Option<Secret>,
    pub conformance: Conformance,
}

#[derive(Clone)]
pub struct RedisConfig {
    /// May carry a password: never printed (see the Debug impl).
    pub url: String,
    /// Prepended to every key. Its `{hash tag}` keeps all keys in one Redis Cluster slot, which
    /// the atomic scripts need.
    pub prefix: String,
}

impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &redact_url(&self.url))
            .field("prefix", &self.prefix)
            .finish()
    }
}

pub const DEFAULT_REDIS_PREFIX: &str = "a2a:{gw}:";

/// One webhook subscriber: every accepted task status change of the agents it follows is POSTed
/// to `url` as the spec's push-notification payload.
#[derive(Debug, Clone)]
pub struct SubscriberConfig {
    /// 1-64 characters of A-Z a-z 0-9 . _ -; the label in metrics and the admin API.
    pub name: String,
    pub url: String,
    /// A header sent as given with every delivery (`"Authorization: Bearer ..."`), value secret.
    pub auth_header: Option<(HeaderName, Secret)>,
    /// Standard Webhooks signing key (`whsec_...`).
    pub secret: Option<crate::webhook::sign::Secret>,
    /// Route names of the agents followed; `None` follows every agent.
    pub agents: Option<Vec<String>>,
}

impl SubscriberConfig {
    pub fn new(name: &str, url: &str) -> SubscriberConfig {
        SubscriberConfig {
            name: name.into(),
            url: url.into(),
            auth_header: None,
            secret: None,
            agents: None,
        }
    }

    pub fn follows(&self, agent: &str) -> bool {
        self.agents
            .as_ref()
            .is_none_or(|list| list.iter().any(|a| a == agent))
    }
}

/// How deliveries are made and retried (`[webhooks]`).
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Address ranges the URL guard lets deliveries reach although they are not public.
    pub allow: Vec<String>,
    /// Waits between attempts; its length + 1 is the number of attempts.
    pub schedule: Schedule,
    /// One attempt, from connect to the response head.
    pub timeout: Duration,
    /// Deliveries in flight at once, per gateway process.
    pub concurrency: usize,
    /// How long a delivery taken by a worker may stay unacknowledged before another worker
    /// takes it over (the first is presumed dead). Longer than `timeout`.
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
            schedule: Schedule::default(),
            timeout: Duration::from_secs(15),
            concurrency: 64,
            visibility_timeout: Duration::from_secs(60),
            max_queued: 1_000_000,
            max_dead_letters: 100_000,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Largest request body accepted (POST /tasks), in bytes.
    pub max_body_bytes: usize,
    /// How long terminal tasks stay in the ledger.
    pub task_retention: Duration,
    /// Upper bound on tasks held by the in-process ledger.
    pub max_tasks: usize,
    /// Upper bound on the bytes of task documents held by the in-process ledger.
    pub max_ledger_bytes: usize,
    /// Upper bound on concurrent client connections.
    pub max_connections: usize,
    /// TCP connect timeout towards agents.
    pub connect_timeout: Duration,
    /// Worker threads serving clients; 0 means one per available core.
    pub workers: usize,
    pub agents: Vec<AgentConfig>,
    pub redis: Option<RedisConfig>,
    pub subscribers: Vec<SubscriberConfig>,
    pub webhooks: WebhookConfig,
    /// Bearer token of the `/admin/` routes; without one they are disabled.
    pub admin_token: Option<Secret>,
    pub streams: crate::stream::StreamConfig,
}

pub const DEFAULT_CARD_PATH: &str = "/agent-card.json";
pub const DEFAULT_REFRESH_SECS: u64 = 300;
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

impl Config {
    /// A config with defaults and the given agents (used by `demo` and tests).
    pub fn with_agents(listen: SocketAddr, agents: Vec<AgentConfig>) -> Config {
        Config {
            listen,
            max_body_bytes: 1 << 20,
            task_retention: Duration::from_secs(24 * 3600),
            max_tasks: 1_000_000,
            max_ledger_bytes: 1 << 30,
            max_connections: 16_384,
            connect_timeout: Duration::from_secs(2),
            workers: 0,
            agents,
            redis: None,
            subscribers: Vec::new(),
            webhooks: WebhookConfig::default(),
            admin_token: None,
            streams: crate::stream::StreamConfig::default(),
        }
    }

    /// The number of worker threads to run.
    pub fn worker_count(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    pub fn load(path: &Path) -> Result<Config, Vec<Problem>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![Problem::new(
                "",
                format!("cannot read {}: {e}", path.display()),
            )]
        })?;
        Config::parse(&text)
    }

    /// Parse and check; on failure, every problem found.
    pub fn parse(text: &str) -> Result<Config, Vec<Problem>> {
        let table: Table = text.parse().map_err(|e: toml::de::Error| {
            vec![Problem::new(
                "",
                format!("not valid TOML: {}", e.message().trim()),
            )]
        })?;
        let mut c = Checker::default();
        let cfg = c.config(&table);
        if c.problems.is_empty() {
            Ok(cfg)
        } else {
            Err(c.problems)
        }
    }
}

impl AgentConfig {
    pub fn new(name: &str, url: &str) -> AgentConfig {
        AgentConfig {
            name: name.into(),
            url: url.trim_end_matches('/').into(),
            card_path: DEFAULT_CARD_PATH.into(),
            refresh: Duration::from_secs(DEFAULT_REFRESH_SECS),
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
            ingest_token: None,
            conformance: Conformance::Enforce,
        }
    }
}

/// One thing wrong with a config, at a key such as `agents[1].url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl Problem {
    fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
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

#[derive(Default)]
struct Checker {
    problems: Vec<Problem>,
}

const TOP_KEYS: &[&str] = &[
    "listen",
    "max_body_bytes",
    "task_retention_secs",
    "max_tasks",
    "max_ledger_bytes",
    "max_connections",
    "connect_timeout_ms",
    "workers",
    "agents",
    "redis",
    "subscribers",
    "webhooks",
    "admin_token",
    "streams",
];
const STREAM_KEYS: &[&str] = &[
    "ping_interval_ms",
    "linger_ms",
    "replay_events",
    "replay_bytes",
    "subscriber_lag_bytes",
    "max_topics",
    "max_event_bytes",
    "reconnect_max_ms",
    "max_buffer_bytes",
];
const AGENT_KEYS: &[&str] = &[
    "name",
    "url",
    "card_path",
    "refresh_secs",
    "timeout_ms",
    "ingest_token",
    "conformance",
];
const REDIS_KEYS: &[&str] = &["url", "prefix"];
const SUBSCRIBER_KEYS: &[&str] = &["name", "url", "auth_header", "secret", "agents"];
const WEBHOOK_KEYS: &[&str] = &[
    "allow",
    "retry_schedule_secs",
    "max_attempts",
    "timeout_ms",
    "concurrency",
    "visibility_timeout_secs",
    "max_queued",
    "max_dead_letters",
];

impl Checker {
    fn problem(&mut self, key: impl Into<String>, msg: impl Into<String>) {
        self.problems.push(Problem::new(key, msg));
    }

    fn unknown_keys(&mut self, t: &Table, known: &[&str], prefix: &str) {
        for k in t.keys().filter(|k| !known.contains(&k.as_str())) {
            self.problem(format!("{prefix}{k}"), "unknown key");
        }
    }

    fn string<'t>(&mut self, t: &'t Table, key: &str, at: &str) -> Option<&'t str> {
        match t.get(key) {
            None => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.problem(at, "must be a string");
                None
            }
        }
    }

    /// A positive integer within `1..=max`, or the default when absent.
    fn int(&mut self, t: &Table, key: &str, at: &str, default: u64, max: u64) -> u64 {
        match t.get(key) {
            None => default,
            Some(Value::Integer(i)) if *i >= 1 && (*i as u64) <= max => *i as u64,
            Some(Value::Integer(_)) => {
                self.problem(at, format!("must be between 1 and {max}"));
                default
            }
            Some(_) => {
                self.problem(at, "must be an integer");
                default
            }
        }
    }

    fn config(&mut self, t: &Table) -> Config {
        self.unknown_keys(t, TOP_KEYS, "");
        let listen = match self.string(t, "listen", "listen") {
            Some(s) => s.parse().unwrap_or_else(|_| {
                self.problem("listen", format!("{s:?} is not an IP:port address"));
                SocketAddr::from(([127, 0, 0, 1], 0))
            }),
            None => {
                self.problem(
                    "listen",
                    "is required (e.g. \"127.0.0.1:8080\"; port 0 picks a free port)",
                );
                SocketAddr::from(([127, 0, 0, 1], 0))
            }
        };
        let mut cfg = Config::with_agents(listen, Vec::new());
        cfg.max_body_bytes = self.int(
            t,
            "max_body_bytes",
            "max_body_bytes",
            cfg.max_body_bytes as u64,
            1 << 30,
        ) as usize;
        cfg.task_retention = Duration::from_secs(self.int(
            t,
            "task_retention_secs",
            "task_retention_secs",
            cfg.task_retention.as_secs(),
            365 * 86_400,
        ));
        cfg.max_tasks =
            self.int(t, "max_tasks", "max_tasks", cfg.max_tasks as u64, 1 << 32) as usize;
        cfg.max_ledger_bytes = self.int(
            t,
            "max_ledger_bytes",
            "max_ledger_bytes",
            cfg.max_ledger_bytes as u64,
            1 << 40,
        ) as usize;
        cfg.max_connections = self.int(
            t,
            "max_connections",
            "max_connections",
            cfg.max_connections as u64,
            1 << 22,
        ) as usize;
        cfg.connect_timeout = Duration::from_millis(self.int(
            t,
            "connect_timeout_ms",
            "connect_timeout_ms",
            cfg.connect_timeout.as_millis() as u64,
            600_000,
        ));
        if t.contains_key("workers") {
            cfg.workers = self.int(t, "workers", "workers", 1, 1024) as usize;
        }

        match t.get("agents") {
            Some(Value::Array(list)) => {
                let mut names = HashSet::new();
                for (i, a) in list.iter().enumerate() {
                    let at = format!("agents[{i}]");
                    let Value::Table(a) = a else {
                        self.problem(at, "must be a table ([[agents]])");
                        continue;
                    };
                    if let Some(agent) = self.agent(a, &at) {
                        if !names.insert(agent.name.clone()) {
                            self.problem(
                                format!("{at}.name"),
                                format!("{:?} is used by another agent", agent.name),
                            );
                        }
                        cfg.agents.push(agent);
                    }
                }
                if list.is_empty() {
                    self.problem("agents", "at least one [[agents]] entry is required");
                }
            }
            Some(_) => self.problem("agents", "must be an array of tables ([[agents]])"),
            None => self.problem("agents", "at least one [[agents]] entry is required"),
        }

        match t.get("redis") {
            None => {}
            Some(Value::Table(r)) => {
                self.unknown_keys(r, REDIS_KEYS, "redis.");
                match self.string(r, "url", "redis.url") {
                    Some(u) if u.starts_with("rediss://") => self.problem(
                        "redis.url",
                        "rediss:// (TLS) is not built into this gateway; use redis:// on a private network, a unix:// socket, or a TLS sidecar",
                    ),
                    Some(u) if u.starts_with("redis://") || u.starts_with("unix://") => {
                        let prefix = self
                            .string(r, "prefix", "redis.prefix")
                            .unwrap_or(DEFAULT_REDIS_PREFIX);
                        if prefix.is_empty() || prefix.len() > 64 {
                            self.problem("redis.prefix", "must be 1-64 characters");
                        }
                        // The atomic scripts touch several keys; in Redis Cluster they must all
                        // hash to one slot, which only a {hash tag} guarantees.
                        let tagged = prefix
                            .find('{')
                            .and_then(|open| prefix[open..].find('}').map(|close| close > 1))
                            .unwrap_or(false);
                        if !tagged {
                            self.problem(
                                "redis.prefix",
                                format!("{prefix:?} needs a {{hash tag}} such as \"a2a:{{gw}}:\" so every key lands in one cluster slot"),
                            );
                        }
                        cfg.redis = Some(RedisConfig {
                            url: u.to_owned(),
                            prefix: prefix.to_owned(),
                        });
                    }
                    Some(u) => self.problem(
                        "redis.url",
                        format!(
                            "{:?} must start with redis:// or unix://",
                            redact_url(u)
                        ),
                    ),
                    None => self.problem("redis.url", "is required in [redis]"),
                }
            }
            Some(_) => self.problem("redis", "must be a table ([redis])"),
        }

        match t.get("webhooks") {
            None => {}
            Some(Value::Table(w)) => cfg.webhooks = self.webhooks(w),
            Some(_) => self.problem("webhooks", "must be a table ([webhooks])"),
        }
        let guard = UrlGuard::new(&cfg.webhooks.allow).unwrap_or_default();
        match t.get("subscribers") {
            None => {}
            Some(Value::Array(list)) => {
                let mut names = HashSet::new();
                for (i, s) in list.iter().enumerate() {
                    let at = format!("subscribers[{i}]");
                    let Value::Table(s) = s else {
                        self.problem(at, "must be a table ([[subscribers]])");
                        continue;
                    };
                    if let Some(sub) = self.subscriber(s, &at, &guard, &cfg.agents) {
                        if !names.insert(sub.name.clone()) {
                            self.problem(
                                format!("{at}.name"),
                                format!("{:?} is used by another subscriber", sub.name),
                            );
                        }
                        cfg.subscribers.push(sub);
                    }
                }
            }
            Some(_) => self.problem(
                "subscribers",
                "must be an array of tables ([[subscribers]])",
            ),
        }
        match t.get("streams") {
            None => {}
            Some(Value::Table(st)) => cfg.streams = self.streams(st),
            Some(_) => self.problem("streams", "must be a table ([streams])"),
        }
        if let Some(tok) = self.string(t, "admin_token", "admin_token") {
            if tok.len() < 16 {
                self.problem("admin_token", "must be at least 16 characters");
            }
            cfg.admin_token = Some(Secret::new(tok));
        }
        cfg
    }

    fn streams(&mut self, t: &Table) -> crate::stream::StreamConfig {
        self.unknown_keys(t, STREAM_KEYS, "streams.");
        let mut s = crate::stream::StreamConfig::default();
        let ms = |d: Duration| d.as_millis() as u64;
        s.ping_interval = Duration::from_millis(self.int(
            t,
            "ping_interval_ms",
            "streams.ping_interval_ms",
            ms(s.ping_interval),
            3_600_000,
        ));
        s.linger = Duration::from_millis(self.int(
            t,
            "linger_ms",
            "streams.linger_ms",
            ms(s.linger),
            3_600_000,
        ));
        s.replay_events = self.int(
            t,
            "replay_events",
            "streams.replay_events",
            s.replay_events as u64,
            1_000_000,
        ) as usize;
        s.replay_bytes = self.int(
            t,
            "replay_bytes",
            "streams.replay_bytes",
            s.replay_bytes as u64,
            1 << 30,
        ) as usize;
        s.lag_bytes = self.int(
            t,
            "subscriber_lag_bytes",
            "streams.subscriber_lag_bytes",
            s.lag_bytes,
            1 << 30,
        );
        s.max_topics = self.int(
            t,
            "max_topics",
            "streams.max_topics",
            s.max_topics as u64,
            1 << 24,
        ) as usize;
        s.max_event_bytes = self.int(
            t,
            "max_event_bytes",
            "streams.max_event_bytes",
            s.max_event_bytes as u64,
            64 << 20,
        ) as usize;
        s.max_buffer_bytes = self.int(
            t,
            "max_buffer_bytes",
            "streams.max_buffer_bytes",
            s.max_buffer_bytes,
            1 << 40,
        );
        s.reconnect_max = Duration::from_millis(self.int(
            t,
            "reconnect_max_ms",
            "streams.reconnect_max_ms",
            ms(s.reconnect_max),
            3_600_000,
        ));
        s
    }

    fn webhooks(&mut self, w: &Table) -> WebhookConfig {
        self.unknown_keys(w, WEBHOOK_KEYS, "webhooks.");
        let mut out = WebhookConfig::default();
        match w.get("allow") {
            None => {}
            Some(Value::Array(list)) => {
                for (i, v) in list.iter().enumerate() {
                    let at = format!("webhooks.allow[{i}]");
                    match v {
                        Value::String(s) => match s.parse::<Cidr>() {
                            Ok(_) => out.allow.push(s.clone()),
                            Err(e) => self.problem(at, e.to_string()),
                        },
                        _ => self.problem(at, "must be a string such as \"10.0.0.0/8\""),
                    }
                }
            }
            Some(_) => self.problem("webhooks.allow", "must be an array of address ranges"),
        }
        let mut secs: Vec<u64> = DEFAULT_SCHEDULE_SECS.to_vec();
        match w.get("retry_schedule_secs") {
            None => {}
            Some(Value::Array(list)) => {
                secs.clear();
                for v in list {
                    match v {
                        Value::Integer(i) if *i >= 0 => secs.push(*i as u64),
                        _ => {
                            self.problem(
                                "webhooks.retry_schedule_secs",
                                "must be a list of whole seconds",
                            );
                            break;
                        }
                    }
                }
            }
            Some(_) => self.problem(
                "webhooks.retry_schedule_secs",
                "must be a list of whole seconds",
            ),
        }
        if w.contains_key("max_attempts") {
            // More attempts than the schedule has waits repeat its last wait; fewer cut it short.
            let n = self.int(w, "max_attempts", "webhooks.max_attempts", 1, 101) as usize;
            let last = secs.last().copied().unwrap_or(5);
            secs.resize(n - 1, last);
        }
        match Schedule::from_secs(&secs) {
            Ok(s) => out.schedule = s,
            Err(e) => self.problem("webhooks.retry_schedule_secs", e.to_string()),
        }
        out.timeout = Duration::from_millis(self.int(
            w,
            "timeout_ms",
            "webhooks.timeout_ms",
            out.timeout.as_millis() as u64,
            300_000,
        ));
        out.concurrency = self.int(
            w,
            "concurrency",
            "webhooks.concurrency",
            out.concurrency as u64,
            10_000,
        ) as usize;
        out.visibility_timeout = Duration::from_secs(self.int(
            w,
            "visibility_timeout_secs",
            "webhooks.visibility_timeout_secs",
            out.visibility_timeout.as_secs(),
            86_400,
        ));
        if out.visibility_timeout < out.timeout + Duration::from_secs(5) {
            self.problem(
                "webhooks.visibility_timeout_secs",
                "must exceed webhooks.timeout_ms by at least 5 s, or live deliveries would be taken over and sent twice",
            );
        }
        out.max_queued = self.int(
            w,
            "max_queued",
            "webhooks.max_queued",
            out.max_queued as u64,
            1 << 32,
        ) as usize;
        out.max_dead_letters = self.int(
            w,
            "max_dead_letters",
            "webhooks.max_dead_letters",
            out.max_dead_letters as u64,
            1 << 24,
        ) as usize;
        out
    }

    /// The required `name` (a route-safe name) and `url` (checked by `check`) of an
    /// `[[agents]]` or `[[subscribers]]` entry.
    fn name_and_url<'t>(
        &mut self,
        t: &'t Table,
        at: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> (Option<&'t str>, Option<&'t str>) {
        let name = self.string(t, "name", &format!("{at}.name"));
        match name {
            None => self.problem(format!("{at}.name"), "is required"),
            Some(n) if !valid_name(n) => self.problem(
                format!("{at}.name"),
                format!("{n:?} must be 1-64 characters of A-Z a-z 0-9 . _ -"),
            ),
            _ => {}
        }
        let url = self.string(t, "url", &format!("{at}.url"));
        match url.map(&check) {
            None => self.problem(format!("{at}.url"), "is required"),
            Some(Err(e)) => self.problem(format!("{at}.url"), e),
            Some(Ok(())) => {}
        }
        (name, url)
    }

    fn subscriber(
        &mut self,
        s: &Table,
        at: &str,
        guard: &UrlGuard,
        agents: &[AgentConfig],
    ) -> Option<SubscriberConfig> {
        self.unknown_keys(s, SUBSCRIBER_KEYS, &format!("{at}."));
        let (name, url) = self.name_and_url(s, at, |u| {
            guard.check_url(u).map(|_| ()).map_err(|e| e.to_string())
        });
        let mut sub = SubscriberConfig::new(name.unwrap_or(""), url.unwrap_or(""));
        if let Some(h) = self.string(s, "auth_header", &format!("{at}.auth_header")) {
            match parse_header_line(h) {
                Some(pair) => sub.auth_header = Some(pair),
                // The value is a credential: the message does not repeat it.
                None => self.problem(
                    format!("{at}.auth_header"),
                    "must be one header line such as \"Authorization: Bearer <token>\"",
                ),
            }
        }
        if let Some(secret) = self.string(s, "secret", &format!("{at}.secret")) {
            match crate::webhook::sign::Secret::parse(secret) {
                Ok(k) => sub.secret = Some(k),
                Err(e) => self.problem(format!("{at}.secret"), e.to_string()),
            }
        }
        match s.get("agents") {
            None => {}
            Some(Value::Array(list)) => {
                let mut follow = Vec::new();
                for v in list {
                    match v.as_str() {
                        Some(a) if agents.iter().any(|c| c.name == a) => follow.push(a.to_owned()),
                        Some(a) => self.problem(
                            format!("{at}.agents"),
                            format!("{a:?} is not the name of an [[agents]] entry"),
                        ),
                        None => {
                            self.problem(format!("{at}.agents"), "must be a list of agent names")
                        }
                    }
                }
                sub.agents = Some(follow);
            }
            Some(_) => self.problem(format!("{at}.agents"), "must be a list of agent names"),
        }
        (name.is_some() && url.is_some()).then_some(sub)
    }

    fn agent(&mut self, a: &Table, at: &str) -> Option<AgentConfig> {
        self.unknown_keys(a, AGENT_KEYS, &format!("{at}."));
        let (name, url) = self.name_and_url(a, at, check_agent_url);
        let mut agent = AgentConfig::new(name.unwrap_or(""), url.unwrap_or(""));
        if let Some(p) = self.string(a, "card_path", &format!("{at}.card_path")) {
            if !p.starts_with('/') || p.contains(char::is_whitespace) {
                self.problem(
                    format!("{at}.card_path"),
                    "must be an absolute path such as \"/agent-card.json\"",
                );
            }
            agent.card_path = p.to_owned();
        }
        agent.refresh = Duration::from_secs(self.int(
            a,
            "refresh_secs",
            &format!("{at}.refresh_secs"),
            DEFAULT_REFRESH_SECS,
            7 * 86_400,
        ));
        agent.timeout = Duration::from_millis(self.int(
            a,
            "timeout_ms",
            &format!("{at}.timeout_ms"),
            DEFAULT_TIMEOUT_MS,
            600_000,
        ));
        if let Some(tok) = self.string(a, "ingest_token", &format!("{at}.ingest_token")) {
            if tok.len() < 16 {
                self.problem(
                    format!("{at}.ingest_token"),
                    "must be at least 16 characters",
                );
            }
            agent.ingest_token = Some(Secret::new(tok));
        }
        match self.string(a, "conformance", &format!("{at}.conformance")) {
            None | Some("enforce") => {}
            Some("report") => agent.conformance = Conformance::Report,
            Some(other) => self.problem(
                format!("{at}.conformance"),
                format!("{other:?} must be \"enforce\" or \"report\""),
            ),
        }
        (name.is_some() && url.is_some()).then_some(agent)
    }
}

/// `"Name: value"` as a header name and a secret value.
fn parse_header_line(line: &str) -> Option<(HeaderName, Secret)> {
    let (name, value) = line.split_once(':')?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
    let value = value.trim();
    // Must be a valid header value; the check is done here so delivery cannot fail on it.
    HeaderValue::from_str(value)
        .ok()
        .filter(|_| !value.is_empty())?;
    Some((name, Secret::new(value)))
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

/// A URL with any password replaced, for messages.
fn redact_url(u: &str) -> String {
    match (u.find("://"), u.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &u[..s + 3], &u[at..]),
        _ => u.to_owned(),
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
            [redis]
            url = "redis://127.0.0.1:6379"
        "#,
        )
        .expect("valid");
        assert_eq!(cfg.max_body_bytes, 2048);
        let a = &cfg.agents[0];
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
    fn redis_needs_a_supported_url_and_a_hash_tagged_prefix() {
        let base = "listen = \"127.0.0.1:1\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n[redis]\n";
        let p = Config::parse(&format!("{base}url = \"rediss://h:6380\"\n")).expect_err("tls");
        assert_eq!(p[0].key, "redis.url");
        let p = Config::parse(&format!("{base}url = \"redis://h\"\nprefix = \"a2a:\"\n"))
            .expect_err("no tag");
        assert_eq!(p[0].key, "redis.prefix");
        let p = Config::parse(&format!(
            "{base}url = \"redis://h\"\nprefix = \"a2a:{{}}:\"\n"
        ))
        .expect_err("empty tag");
        assert_eq!(p[0].key, "redis.prefix");
        let ok = Config::parse(&format!(
            "{base}url = \"redis://:pw@h\"\nprefix = \"x:{{t}}:\"\n"
        ))
        .expect("ok");
        let r = ok.redis.expect("redis");
        assert_eq!(r.prefix, "x:{t}:");
        assert!(!format!("{r:?}").contains("pw"), "{r:?}");
    }

    const KEY: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn subscribers_and_webhooks_parse() {
        let cfg = Config::parse(&format!(
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
        assert_eq!(w.schedule.max_attempts(), 5, "the last wait repeats");
        assert_eq!(w.schedule.delays()[3], Duration::from_secs(2));
        assert_eq!((w.concurrency, w.timeout), (8, Duration::from_secs(2)));
        let ops = &cfg.subscribers[0];
        assert!(ops.follows("b") && !ops.follows("a"));
        assert!(cfg.subscribers[1].follows("a"));
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
        let problems = Config::parse(
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
        let ok = Config::parse(
            "listen = \"127.0.0.1:0\"\n[[agents]]\nname=\"a\"\nurl=\"http://x\"\n[webhooks]\nallow = [\"10.0.0.0/8\"]\n[[subscribers]]\nname=\"s\"\nurl=\"http://10.1.2.3/hook\"\n",
        );
        assert!(ok.is_ok(), "{ok:?}");
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
}
