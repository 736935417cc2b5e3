//! The identity keys of the config: `[[clients]]`, `[auth.jwt]` and `[cors]`.

use super::*;

/// A right a client may hold (`[[clients]] can`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Right {
    /// Create, get and cancel tasks, list artifacts and fetch their content.
    Tasks,
    /// Subscribe to task streams.
    Streams,
    /// Open `/events`.
    Events,
    /// See every client's tasks (reads, streams and `/events`), not only its own.
    AllTasks,
    /// Scrape `/metrics`, and read agent URLs and error texts.
    Metrics,
    /// Call `/admin/*`.
    Admin,
}

impl Right {
    /// Every right.
    pub const ALL: [Right; 6] = [
        Right::Tasks,
        Right::Streams,
        Right::Events,
        Right::AllTasks,
        Right::Metrics,
        Right::Admin,
    ];

    /// The right as the config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Tasks => "tasks",
            Right::Streams => "streams",
            Right::Events => "events",
            Right::AllTasks => "all_tasks",
            Right::Metrics => "metrics",
            Right::Admin => "admin",
        }
    }
}

/// The official A2A methods, by the 1.0 proto's names (`[[clients]] methods`; the names
/// `protocol::a2a::Method` gives its methods, which `auth` checks they stay).
pub const A2A_METHODS: [&str; 11] = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
];

/// One client of the gateway (`[[clients]]`): who it is, how it proves it, what it may use.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientConfig {
    /// 1-64 characters of A-Z a-z 0-9 . _ -; in logs and the `client` metrics label, and the
    /// owner recorded on the tasks it creates.
    pub name: String,
    /// Hex SHA-256 of its bearer key (the key itself is never in the file).
    pub key_sha256: Option<String>,
    /// The `sub` of the JWTs that are this client: the one way a token binds to an entry (a
    /// token whose `sub` merely equals a client's name is not that client). A bound token gets
    /// exactly this entry's rights and agents, whatever its claims say.
    pub jwt_subject: Option<String>,
    /// The `name` of the `[[auth.oidc]]` issuer whose tokens `jwt_subject` is for; absent: the
    /// tokens of `[auth.jwt]`. One `sub` at two identity providers is two identities.
    pub jwt_issuer: Option<String>,
    /// The subject of its client certificate, in RFC 4514 form as the gateway renders it
    /// (`"CN=orchestrator-a,O=Example"`: last RDN first, no spaces around `,`): a certificate
    /// verified against `[tls] client_ca_file` with exactly this subject is this client.
    pub cert_subject: Option<String>,
    /// Route names or card `agent_id`s it may use; `["*"]` for every agent.
    pub agents: Vec<String>,
    /// What it may do.
    #[serde(deserialize_with = "de::rights")]
    pub can: Vec<Right>,
    /// The official A2A methods it may call, by the 1.0 proto's names ([`A2A_METHODS`]; a 0.3
    /// call counts as the 1.0 method it is). Beside `can`: an A2A call needs what `can` asks
    /// of it and its method here; another is refused with 403 FORBIDDEN before the agent is
    /// called. Absent: every method. The served card is no method: any client reads it.
    #[serde(deserialize_with = "de::methods")]
    pub methods: Vec<String>,
    /// Streams (task streams and `/events`) it may hold open at once, per replica.
    pub max_streams: usize,
    /// Requests a second it may make on each replica (a token bucket); absent: unlimited. Past
    /// it, 429 RATE_LIMITED.
    pub rate_per_sec: Option<f64>,
    /// The bucket's size: requests it may make at once after a quiet spell. Absent: one
    /// second's worth (`rate_per_sec` rounded up, at least 1).
    pub burst: Option<u64>,
    /// Tasks it created that are not final yet, across every replica; past it a create is
    /// refused with 429 TOO_MANY_TASKS before the agent is called. Absent: no cap of its own.
    pub max_live_tasks: Option<u64>,
    /// Official A2A conversations (contexts) it holds, across every replica: a context is its
    /// while a task in it is live and `2 × task_retention_secs` after the last ends. Past it, a
    /// message that would start another is refused with 429 TOO_MANY_CONTEXTS before the
    /// agent is called.
    pub max_contexts: u64,
    /// Bytes of the in-process ledger its tasks may hold (documents, push configs); past it,
    /// its creates are refused with 503 LEDGER_FULL before the agent is called, never another
    /// client's. Absent: a tenth of `max_ledger_bytes`.
    pub max_ledger_bytes: Option<usize>,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            name: String::new(),
            key_sha256: None,
            jwt_subject: None,
            jwt_issuer: None,
            cert_subject: None,
            agents: vec!["*".into()],
            can: vec![Right::Tasks, Right::Streams],
            methods: A2A_METHODS.map(String::from).to_vec(),
            max_streams: 100,
            rate_per_sec: None,
            burst: None,
            max_live_tasks: None,
            max_contexts: DEFAULT_MAX_CONTEXTS,
            max_ledger_bytes: None,
        }
    }
}

/// `max_contexts` and `token_max_contexts` when not set.
pub const DEFAULT_MAX_CONTEXTS: u64 = 10_000;

/// `token_rate_per_sec` when not set.
pub const DEFAULT_TOKEN_RATE: f64 = 20.0;

/// `max_token_subjects` when not set.
pub const DEFAULT_MAX_TOKEN_SUBJECTS: usize = 100_000;

/// `[auth]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// JWT bearer tokens, checked against keys from a file.
    pub jwt: Option<JwtConfig>,
    /// `[[auth.oidc]]`: JWT bearer tokens of identity providers whose keys are fetched by URL
    /// (OpenID Connect discovery), one entry per issuer.
    pub oidc: Vec<OidcConfig>,
    /// `max_contexts` of a token subject without a `[[clients]]` entry (`jwt:{sub}`), each its
    /// own.
    pub token_max_contexts: u64,
    /// Requests a second each token subject without a `[[clients]]` entry may make on each
    /// replica (a token bucket per subject); past it, 429 RATE_LIMITED. A bound token has its
    /// entry's `rate_per_sec` instead.
    pub token_rate_per_sec: f64,
    /// A token subject's bucket: requests at once after a quiet spell. Absent: one second's
    /// worth (`token_rate_per_sec` rounded up, at least 1).
    pub token_burst: Option<u64>,
    /// Token subjects whose buckets a replica holds at most, the least recently used evicted
    /// (an evicted subject starts again with a full bucket).
    pub max_token_subjects: usize,
    /// `[auth.assertion]`: the keys the gateway signs `A2A-Caller` assertions with.
    pub assertion: Option<AssertionConfig>,
}

/// `[auth.assertion]`: the gateway's signing keys for the `A2A-Caller` assertions it sends to
/// agents with `identity = "assertion"` (or `"token"`), published at `/.well-known/jwks.json`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AssertionConfig {
    /// PEM private keys (PKCS#8; ECDSA P-256 for ES256 or Ed25519 for EdDSA), relative to the
    /// config file's directory. The first signs; all are published, so a rotation lists the
    /// next key first and keeps the old one until its assertions have expired (60 s). Every
    /// replica must be given the same files.
    pub key_files: Vec<String>,
}

impl Default for AuthConfig {
    fn default() -> AuthConfig {
        AuthConfig {
            jwt: None,
            oidc: Vec::new(),
            token_max_contexts: DEFAULT_MAX_CONTEXTS,
            token_rate_per_sec: DEFAULT_TOKEN_RATE,
            token_burst: None,
            max_token_subjects: DEFAULT_MAX_TOKEN_SUBJECTS,
            assertion: None,
        }
    }
}

/// `[auth.jwt]`: tokens from an identity provider, verified against its published keys, read
/// from a file (`[[auth.oidc]]` fetches them from the identity provider by URL).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JwtConfig {
    /// A JWKS document (RS256, ES256 and EdDSA keys); relative to the config file's directory.
    pub jwks_file: String,
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud` (one of the token's audiences).
    pub audience: String,
    /// Clock skew tolerated on `exp` and `nbf`.
    #[serde(rename = "leeway_secs", deserialize_with = "de::secs")]
    pub leeway: Duration,
}

impl Default for JwtConfig {
    fn default() -> JwtConfig {
        JwtConfig {
            jwks_file: String::new(),
            issuer: String::new(),
            audience: String::new(),
            leeway: Duration::from_secs(30),
        }
    }
}

/// The algorithms a token may be signed with when `algorithms` is not set (the only ones the
/// gateway accepts at all).
pub const OIDC_ALGORITHMS: [&str; 3] = ["RS256", "ES256", "EdDSA"];

/// `[[auth.oidc]]`: an OpenID Connect identity provider whose keys the gateway fetches: the
/// discovery document at `{issuer}/.well-known/openid-configuration`, then its `jwks_uri`,
/// refetched every `jwks_refresh_secs` and when a token names a key it does not hold. These
/// URLs are the operator's configuration: `https`, or `http` to a loopback address.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OidcConfig {
    /// The issuer's name in this config: 1-64 characters of A-Z a-z 0-9 . _ -, unique; the
    /// `issuer` label of its metrics, the `{name}` of its unbound subjects (`jwt:{name}:{sub}`)
    /// and what `[[clients]] jwt_issuer` names.
    pub name: String,
    /// The required `iss`, and where discovery starts.
    pub issuer: String,
    /// The required `aud` (one of the token's audiences).
    pub audience: String,
    /// Clock skew tolerated on `exp` and `nbf`.
    #[serde(rename = "leeway_secs", deserialize_with = "de::secs")]
    pub leeway: Duration,
    /// The algorithms its tokens may be signed with (among RS256, ES256 and EdDSA).
    pub algorithms: Vec<String>,
    /// CA certificates (PEM) to trust for the issuer's https URLs, beside the public roots;
    /// relative to the config file's directory.
    pub ca_file: Option<String>,
    /// How often its keys are fetched again (shorter when the answer's Cache-Control max-age
    /// is).
    #[serde(rename = "jwks_refresh_secs", deserialize_with = "de::secs")]
    pub jwks_refresh: Duration,
    /// What each scope of a token's `scope` (or `scp`) claim grants. A token of this issuer
    /// without a `[[clients]]` entry gets the union of its scopes' rights and nothing else:
    /// its `a2a_can` and `a2a_agents` claims are not read, and no mapped scope is no right.
    #[serde(deserialize_with = "de::scopes")]
    pub scopes: BTreeMap<String, ScopeRights>,
}

/// The longest scope `[[auth.oidc]] scopes` may name, and that the gateway reads from a token.
pub const MAX_SCOPE_LEN: usize = 256;

/// What one scope grants (`[[auth.oidc]] scopes`): each key read as `[[clients]]` reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScopeRights {
    /// Route names or card `agent_id`s; `["*"]` (the default) for every agent.
    pub agents: Vec<String>,
    /// Rights, as `[[clients]] can`; absent: none.
    #[serde(deserialize_with = "de::rights")]
    pub can: Vec<Right>,
    /// Official A2A methods, as `[[clients]] methods`; absent: every method.
    #[serde(deserialize_with = "de::methods")]
    pub methods: Vec<String>,
}

impl Default for ScopeRights {
    fn default() -> ScopeRights {
        ScopeRights {
            agents: vec!["*".into()],
            can: Vec::new(),
            methods: A2A_METHODS.map(String::from).to_vec(),
        }
    }
}

impl Default for OidcConfig {
    fn default() -> OidcConfig {
        OidcConfig {
            name: String::new(),
            issuer: String::new(),
            audience: String::new(),
            leeway: Duration::from_secs(30),
            algorithms: OIDC_ALGORITHMS.map(String::from).to_vec(),
            ca_file: None,
            jwks_refresh: Duration::from_secs(300),
            scopes: BTreeMap::new(),
        }
    }
}

impl OidcConfig {
    /// The discovery document's URL: `{issuer}/.well-known/openid-configuration` (one `/`
    /// between them, whether the issuer ends with one or not).
    pub fn discovery_url(&self) -> String {
        format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        )
    }
}

/// `[cors]`: which browser origins may call the gateway.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorsConfig {
    /// Exact origins (`"https://console.example.com"`); no wildcard.
    pub allow_origins: Vec<String>,
    /// How long a browser may cache a preflight answer.
    #[serde(rename = "max_age_secs", deserialize_with = "de::secs")]
    pub max_age: Duration,
}

impl Default for CorsConfig {
    fn default() -> CorsConfig {
        CorsConfig {
            allow_origins: Vec::new(),
            max_age: Duration::from_secs(600),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::testing::*;
    use std::time::Duration;

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
            methods = ["GetTask", "ListTasks"]
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
        assert_eq!(
            a.methods, A2A_METHODS,
            "every method when the key is absent"
        );
        assert_eq!(a.max_streams, 100);
        assert_eq!(cfg.clients[1].can.len(), 3);
        assert_eq!(cfg.clients[1].methods, ["GetTask", "ListTasks"]);
        let jwt = cfg.auth.jwt.as_ref().expect("jwt");
        assert_eq!(jwt.leeway, Duration::from_secs(30));
        let cors = cfg.cors.as_ref().expect("cors");
        assert_eq!(cors.max_age, Duration::from_secs(600));
        let (name, value) = cfg.agents[0].upstream_auth_header.as_ref().expect("header");
        assert_eq!(name.as_str(), "authorization");
        assert!(value.matches(b"Bearer agent-secret"));
        assert!(!format!("{cfg:?}").contains("agent-secret"));
    }
}
