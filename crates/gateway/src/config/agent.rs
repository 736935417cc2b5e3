//! `[[agents]]`: one agent behind the gateway, the protocol it speaks and how it is reached.

use std::time::Duration;

use hyper::header::HeaderName;
use serde::Deserialize;

use super::{de, Secret};

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

/// The protocol an agent speaks (`[[agents]] protocol`): what its card is, which routes serve
/// it, and how its task documents map to the ledger's records (see the protocol module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Clawpedia A2A 1.0, the REST task protocol with input and output schemas on the card.
    #[default]
    Clawpedia,
    /// The official A2A 1.0 protocol (a2aproject): JSON-RPC and HTTP+JSON bindings, contexts,
    /// multi-turn tasks.
    A2a,
}

/// The official A2A binding the gateway uses towards an agent (`[[agents]] binding`): without
/// it, the first of the card's `supportedInterfaces` the gateway speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP (§9).
    #[serde(rename = "JSONRPC")]
    JsonRpc,
    /// HTTP+JSON, the REST binding (§11).
    #[serde(rename = "HTTP+JSON")]
    HttpJson,
    /// gRPC (§10), called at `grpc_url` (or the card's gRPC port on `url`'s host).
    #[serde(rename = "GRPC")]
    Grpc,
}

/// The official A2A version the gateway speaks to an agent (`[[agents]] a2a_version`): without
/// it, the newest its card offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum A2aVersion {
    /// A2A 1.0.
    #[serde(rename = "1.0")]
    V1_0,
    /// A2A 0.3.
    #[serde(rename = "0.3")]
    V0_3,
}

impl Protocol {
    /// Every protocol, as the config spells it.
    pub const ALL: [Protocol; 2] = [Protocol::Clawpedia, Protocol::A2a];

    /// The protocol as the config spells it (`clawpedia`, `a2a`).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Clawpedia => "clawpedia",
            Protocol::A2a => "a2a",
        }
    }
}

/// What an agent is told of who is calling (`[[agents]] identity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Identity {
    /// Nothing: the agent sees the gateway only (the default).
    #[default]
    None,
    /// `A2A-Caller: <JWT>` signed by the gateway (`[auth.assertion]`), naming the client.
    Assertion,
    /// A token client's own bearer token as `A2A-Caller`, when its audience includes
    /// `token_audience` (else 403); other callers get an assertion.
    Token,
}

/// How an agent's replicas are found besides its configured `url`/`urls` (`[[agents]] discover`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Discover {
    /// Every address `url`'s host resolves to is a replica (a Kubernetes headless Service),
    /// re-resolved every `discover_interval_ms`.
    Dns,
}

/// `[[agents]]`. Compared whole by a reload: an agent whose entry is unchanged keeps its card,
/// its streams and its counters.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// Route name: the agent is served under `/agents/{name}/`.
    pub name: String,
    /// The protocol the agent speaks (default `clawpedia`).
    pub protocol: Protocol,
    /// Base URL, without a trailing slash.
    #[serde(deserialize_with = "de::base_url")]
    pub url: String,
    /// The base URLs of the agent's replicas, instead of `url` (one agent served by several
    /// processes: new tasks are balanced, each task's later calls pinned to its replica).
    #[serde(deserialize_with = "de::base_urls")]
    pub urls: Vec<String>,
    /// With `dns`, the replicas are every address `url`'s host resolves to.
    pub discover: Option<Discover>,
    /// How often a `discover = "dns"` name is resolved again.
    #[serde(rename = "discover_interval_ms", deserialize_with = "de::millis")]
    pub discover_interval: Duration,
    /// How long a replica may be gone (from `urls` or from DNS) before its live tasks are
    /// failed in the ledger; meanwhile their calls get 503 REPLICA_UNAVAILABLE.
    #[serde(rename = "replica_grace_ms", deserialize_with = "de::millis")]
    pub replica_grace: Duration,
    /// The replicas share their task store: any replica takes any call, nothing is pinned.
    pub shared_state: bool,
    /// At most this many replicas are used (and labelled in metrics); addresses past it are
    /// left out, and said so in the log.
    pub max_replicas: usize,
    /// A PEM file of CA certificates trusted for this agent's https connections, beside the
    /// system roots (webpki-roots); relative to the config file's directory. Only this agent's
    /// origin trusts it.
    pub ca_file: Option<String>,
    /// Where the agent serves its card, under its base URL; empty (the default) means the
    /// protocol's place for it ([`AgentConfig::card_path`]).
    pub card_path: String,
    /// An A2A agent's binding, when not the card's first one the gateway speaks.
    pub binding: Option<Binding>,
    /// An A2A agent's version, when not the newest its card offers.
    pub a2a_version: Option<A2aVersion>,
    /// Where a gRPC agent's service is called (`http://host:port` for h2c, `https://...` for
    /// TLS); without it, `url`'s scheme and host with the port of the card's gRPC interface.
    /// Never a host the card names.
    #[serde(deserialize_with = "de::opt_base_url")]
    pub grpc_url: Option<String>,
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
    /// How long a task of this agent that is neither final nor waiting for its client
    /// (INPUT_REQUIRED) may stay unchanged before the gateway asks the agent for it (the
    /// reconciler: for agents that do not push). 0 turns it off for this agent.
    #[serde(rename = "reconcile_after_ms", deserialize_with = "de::millis")]
    pub reconcile_after: Duration,
    /// The gateway's base URL as this agent reaches it (`"http://gateway.internal:8080"`): an
    /// official A2A agent that pushes is given `{callback_url}/agents/{name}/notifications` as
    /// the push config of each task a client follows. Without it, `public_url`; with neither,
    /// the agent is not asked to push and its tasks are polled.
    #[serde(deserialize_with = "de::opt_base_url")]
    pub callback_url: Option<String>,
    /// How often an official A2A task with push configs is asked for (GetTask) while it is not
    /// final, when its agent does not push to the gateway.
    #[serde(rename = "poll_interval_ms", deserialize_with = "de::millis")]
    pub poll_interval: Duration,
    /// Whether each request to the agent carries `A2A-Caller`, and what: see [`Identity`].
    /// A client's own `A2A-Caller` never reaches an agent, whatever this says.
    pub identity: Identity,
    /// With `identity = "token"`: the audience a caller's token must include to be sent on.
    pub token_audience: Option<String>,
    /// Claims of a token caller's token copied into its assertion (`email`, `groups`...).
    pub forward_claims: Vec<String>,
}

impl Default for AgentConfig {
    fn default() -> AgentConfig {
        AgentConfig {
            name: String::new(),
            protocol: Protocol::default(),
            url: String::new(),
            urls: Vec::new(),
            discover: None,
            discover_interval: Duration::from_millis(5_000),
            replica_grace: Duration::from_millis(60_000),
            shared_state: false,
            max_replicas: 64,
            ca_file: None,
            card_path: String::new(),
            binding: None,
            a2a_version: None,
            grpc_url: None,
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
            reconcile_after: Duration::from_millis(15_000),
            callback_url: None,
            poll_interval: Duration::from_millis(2_000),
            identity: Identity::None,
            token_audience: None,
            forward_claims: Vec::new(),
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

    /// The configured base URLs of its replicas: `urls`, or else `url` alone. With
    /// `discover = "dns"`, `url` names them all; the registry resolves it.
    pub fn base_urls(&self) -> &[String] {
        if self.urls.is_empty() {
            std::slice::from_ref(&self.url)
        } else {
            &self.urls
        }
    }

    /// Whether later calls of a task go to the replica that holds it: the agent is configured
    /// with replicas (`urls`, even one, or `discover`), and they do not share their task store.
    /// An agent of one `url` pins nothing: a change of its `url` moves its tasks with it.
    pub fn pins(&self) -> bool {
        !self.shared_state && (!self.urls.is_empty() || self.discover.is_some())
    }

    /// Whether the gateway's own calls of a task need its owner or its replica from the
    /// ledger (`ledger::holder_of`): the agent is told who calls, or its calls are pinned.
    pub fn needs_holder(&self) -> bool {
        self.identity != Identity::None || self.pins()
    }

    /// Where the card is fetched, under `url`: `card_path`, or the protocol's default
    /// (`/agent-card.json` for Clawpedia, `/.well-known/agent-card.json` for A2A, §8.2).
    pub fn card_path(&self) -> &str {
        match (self.card_path.as_str(), self.protocol) {
            ("", Protocol::Clawpedia) => "/agent-card.json",
            ("", Protocol::A2a) => "/.well-known/agent-card.json",
            (path, _) => path,
        }
    }

    /// The URL its card is fetched from: `url` and [`AgentConfig::card_path`]. An agent's
    /// address: for operators only (`/agents` to `metrics` and `admin` callers), never a client.
    pub fn card_fetch_url(&self) -> String {
        format!("{}{}", self.url, self.card_path())
    }
}
