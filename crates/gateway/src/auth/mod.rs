//! Who is calling: the gateway's clients, how they prove it (a bearer key, or a JWT), and what
//! each may do. No I/O here besides reading the JWKS file at load: the pipeline's admission
//! stage (`http::admission`) asks this module who a credential names, and decides with the
//! answer.
//!
//! Keys are never held, only their SHA-256 (from the config); a presented key is hashed and
//! looked up among the clients' hashes, which compare in constant time ([`Digest32`]). A hash is
//! what leaks nothing: comparing raw keys in constant time would still leak their lengths, and
//! where a lookup's timing depends on a stored hash, learning it needs a SHA-256 preimage.
//!
//! A verified JWT is remembered (by the SHA-256 of the token) until its `exp`, so a client that
//! sends the same token on every request pays for one signature check, not one per request.

mod client;
pub mod jwt;
pub mod oidc;
mod scopes;
mod streams;

pub use client::{Agents, Caller, Client, Methods, Rights};

use streams::{Grant, Proof};
pub use streams::{Revoked, StreamCounts, StreamPermit};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::{ClientConfig, Config, Right};
use crate::limits::Rate;
use crate::registry::Registry;

/// Why a request was not authenticated: the `reason` label of
/// `a2a_gateway_auth_failures_total` (with `forbidden` and `not_owner`, which admission counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No credentials.
    Missing,
    /// Credentials that name no client (a wrong key, a bad token).
    Invalid(&'static str),
    /// A JWT past its `exp`.
    Expired,
    /// A JWT of an `[[auth.oidc]]` issuer none of whose keys are held yet (its identity
    /// provider has been out of reach): it cannot be checked; try again after these seconds.
    Unavailable(u64),
    /// A JWT naming a key its `[[auth.oidc]]` issuer does not hold, while the fetch it asked
    /// for runs: the caller may wait for it ([`Auth::keys_fetched`]) and authenticate again.
    KeyPending,
}

impl Failure {
    /// The metrics label.
    pub fn reason(self) -> &'static str {
        match self {
            Failure::Missing => "missing",
            Failure::Invalid(_) => "invalid",
            Failure::Expired => "expired",
            Failure::Unavailable(_) => "unavailable",
            Failure::KeyPending => "invalid",
        }
    }
}

/// A SHA-256 digest whose equality is constant-time (and agrees with its `Hash`: equal digests
/// are equal bytes).
#[derive(Clone, Copy)]
struct Digest32([u8; 32]);

impl std::fmt::Debug for Digest32 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Digest32(..)")
    }
}

impl std::hash::Hash for Digest32 {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl PartialEq for Digest32 {
    fn eq(&self, other: &Self) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl Eq for Digest32 {}

fn digest(b: &[u8]) -> Digest32 {
    Digest32(Sha256::digest(b).into())
}

/// Verified tokens kept at most; when full, the cache starts over (an attacker with many valid
/// tokens only costs itself signature checks).
const MAX_CACHED_TOKENS: usize = 10_000;

/// The clients, their keys and the JWT verifier: what the config says about identity.
pub struct Auth {
    enabled: bool,
    /// SHA-256 of each key → its client.
    keys: HashMap<Digest32, Arc<Client>>,
    by_name: HashMap<String, Arc<Client>>,
    /// `cert_subject` → its client.
    subjects: HashMap<String, Arc<Client>>,
    /// (`jwt_issuer`, `jwt_subject`) → its client: the only way a token names a configured
    /// client (`jwt_issuer` empty: `[auth.jwt]`'s tokens).
    jwt_subjects: HashMap<(String, String), Arc<Client>>,
    jwt: Option<jwt::Verifier>,
    /// `[[auth.oidc]]`: the issuers whose keys are fetched by URL.
    oidc: Vec<oidc::Issuer>,
    /// SHA-256 of a verified token → its client, its `exp` (Unix seconds), and the
    /// `[[auth.oidc]]` key that verified it (which must still be held for the entry to count).
    tokens: Mutex<HashMap<Digest32, Cached>>,
    streams: Arc<StreamCounts>,
    /// 0 at start, one more at each reload: which identity admitted a stream.
    gen: u64,
    /// `[auth] token_max_contexts`.
    token_max_contexts: u64,
    /// `[auth] token_rate_per_sec` and `token_burst`: each token subject's bucket.
    token_rate: Rate,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("enabled", &self.enabled)
            .field("clients", &self.by_name.len())
            .finish()
    }
}

fn decode_hex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let nib = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = nib(b[2 * i])? << 4 | nib(b[2 * i + 1])?;
    }
    Some(out)
}

/// A verified token remembered: its client, its `exp`, the issuer key that verified it.
type Cached = (Arc<Client>, u64, Option<(Arc<oidc::KeyState>, [u8; 32])>);

/// A verified token: its claims, and for an `[[auth.oidc]]` token its issuer (index) and the
/// fingerprint of its key.
type Verified = (jwt::Claims, Option<(usize, [u8; 32])>);

impl Auth {
    /// From a checked config; fails only if the JWKS file cannot be used.
    pub fn from_config(cfg: &Config) -> Result<Auth, jwt::JwksError> {
        Auth::build(cfg, Arc::default(), &[])
    }

    fn build(
        cfg: &Config,
        streams: Arc<StreamCounts>,
        old_oidc: &[oidc::Issuer],
    ) -> Result<Auth, jwt::JwksError> {
        let mut keys = HashMap::new();
        let mut by_name = HashMap::new();
        let mut subjects = HashMap::new();
        let mut jwt_subjects = HashMap::new();
        for c in &cfg.clients {
            let client = Arc::new(Client::from_config(c));
            if let Some(hash) = c.key_sha256.as_deref().and_then(decode_hex32) {
                keys.insert(Digest32(hash), client.clone());
            }
            if let Some(subject) = &c.cert_subject {
                subjects.insert(subject.clone(), client.clone());
            }
            if let Some(sub) = &c.jwt_subject {
                let issuer = c.jwt_issuer.clone().unwrap_or_default();
                jwt_subjects.insert((issuer, sub.clone()), client.clone());
            }
            by_name.insert(c.name.clone(), client);
        }
        let jwt = match &cfg.auth.jwt {
            Some(j) => Some(jwt::Verifier::load(j)?),
            None => None,
        };
        let oidc = cfg
            .auth
            .oidc
            .iter()
            .map(|o| oidc::Issuer::new(o, old_oidc, &streams))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Auth {
            enabled: cfg.auth_enabled(),
            keys,
            by_name,
            subjects,
            jwt_subjects,
            jwt,
            oidc,
            tokens: Mutex::default(),
            streams,
            gen: 0,
            token_max_contexts: cfg.auth.token_max_contexts,
            token_rate: Rate::new(cfg.auth.token_rate_per_sec, cfg.auth.token_burst),
        })
    }

    /// The identity of a reloaded config: new clients, keys and JWKS, with this generation's
    /// open-stream counts carried over (streams opened before the reload still count against
    /// their clients' `max_streams`). Remembered tokens are not: they are checked again.
    pub fn reloaded(&self, cfg: &Config) -> Result<Auth, jwt::JwksError> {
        // An `[[auth.oidc]]` issuer whose source did not change keeps the keys it holds.
        let mut next = Auth::build(cfg, self.streams.clone(), &self.oidc)?;
        next.gen = self.gen + 1;
        Ok(next)
    }

    /// Start fetching the keys of the `[[auth.oidc]]` issuers that are not fetched yet (at
    /// start, and for the issuers a reload added).
    pub fn start_oidc(&self, metrics: &Arc<crate::metrics::Metrics>) {
        for i in &self.oidc {
            i.keys.start(metrics);
        }
    }

    /// The `[[auth.oidc]]` issuers whose identity provider is out of reach (the last fetch
    /// of their keys failed), as `/readyz` names them: `oidc:{name}`.
    pub fn degraded(&self) -> Vec<String> {
        self.oidc
            .iter()
            .filter(|i| i.keys.degraded())
            .map(|i| format!("oidc:{}", i.name))
            .collect()
    }

    /// The `[[auth.oidc]]` issuers: their names and discovery URLs (the served cards'
    /// `openIdConnect` schemes).
    pub fn oidc_discovery(&self) -> Vec<(Arc<str>, String)> {
        self.oidc
            .iter()
            .map(|i| {
                (
                    i.name.clone(),
                    format!(
                        "{}/.well-known/openid-configuration",
                        i.issuer.trim_end_matches('/')
                    ),
                )
            })
            .collect()
    }

    /// Whether bearer tokens are verified at all (`[auth.jwt]` or `[[auth.oidc]]`).
    fn takes_tokens(&self) -> bool {
        self.jwt.is_some() || !self.oidc.is_empty()
    }

    /// Resolves once the fetch of the keys of `bearer`'s issuer that its unknown `kid` asked
    /// for ([`Failure::KeyPending`]) is done, whatever it found (at once if none is running).
    pub async fn keys_fetched(&self, bearer: &[u8]) {
        let iss = std::str::from_utf8(bearer)
            .ok()
            .and_then(oidc::unverified_iss);
        if let Some(issuer) = self
            .oidc
            .iter()
            .find(|i| iss.as_deref() == Some(&*i.issuer))
        {
            issuer.keys.fetched().await;
        }
    }

    /// Whether `bearer` is taken as a token (a JWT) rather than a key.
    pub fn is_token(&self, bearer: &[u8]) -> bool {
        self.takes_tokens() && looks_like_jwt(bearer)
    }

    /// Verify a token with its issuer's keys: the `[[auth.oidc]]` issuer its `iss` names, else
    /// `[auth.jwt]`'s. `kick`: a token naming a key not held asks for a fetch.
    fn verify_token(&self, token: &[u8], kick: bool) -> Result<Verified, Failure> {
        let token = std::str::from_utf8(token).map_err(|_| Failure::Invalid("token"))?;
        let iss = oidc::unverified_iss(token);
        if let Some((at, issuer)) = self
            .oidc
            .iter()
            .enumerate()
            .find(|(_, i)| iss.as_deref() == Some(i.issuer.as_str()))
        {
            let (claims, fp) = issuer.verify(token, kick)?;
            return Ok((claims, Some((at, fp))));
        }
        let Some(verifier) = &self.jwt else {
            return Err(Failure::Invalid("the token's issuer is not configured"));
        };
        match verifier.verify(token) {
            Ok(claims) => Ok((claims, None)),
            Err(jwt::JwtError::Expired) => Err(Failure::Expired),
            Err(jwt::JwtError::Invalid(why)) => Err(Failure::Invalid(why)),
        }
    }

    /// Whether callers must authenticate (clients or JWT are configured).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The client a bearer credential names.
    pub fn authenticate(&self, bearer: &[u8]) -> Result<Arc<Client>, Failure> {
        if bearer.is_empty() {
            return Err(Failure::Missing);
        }
        if self.takes_tokens() && looks_like_jwt(bearer) {
            return self.jwt_client(bearer);
        }
        self.keys
            .get(&digest(bearer))
            .cloned()
            .ok_or(Failure::Invalid("unknown key"))
    }

    /// The client whose `cert_subject` is `subject`, the RFC 4514 subject of a client
    /// certificate the TLS handshake verified. Compared exactly: a subject is public (it is no
    /// secret to compare in constant time), and the certificate's signature is what proves it.
    pub fn authenticate_subject(&self, subject: &str) -> Result<Arc<Client>, Failure> {
        self.subjects.get(subject).cloned().ok_or(Failure::Invalid(
            "the client certificate's subject names no client",
        ))
    }

    /// The client of a JWT: from the cache while the token has not expired, else verified.
    fn jwt_client(&self, token: &[u8]) -> Result<Arc<Client>, Failure> {
        let id = digest(token);
        let now = jwt::now_secs();
        {
            let mut cache = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((client, exp, key)) = cache.get(&id) {
                // A key its identity provider withdrew verifies nothing any more.
                let held = key.as_ref().is_none_or(|(k, fp)| k.holds(fp));
                if now < *exp && held {
                    return Ok(client.clone());
                }
                if !held {
                    cache.remove(&id);
                }
            }
        }
        let (claims, key) = self.verify_token(token, true)?;
        let exp = claims.exp;
        let client = self.claims_client(claims, key.map(|(at, _)| at))?;
        let key = key.map(|(at, fp)| (self.oidc[at].keys.clone(), fp));
        let mut cache = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED_TOKENS {
            cache.clear();
        }
        cache.insert(id, (client.clone(), exp, key));
        Ok(client)
    }

    /// The client a verified token names: the `[[clients]]` entry bound to its `sub` by
    /// `jwt_subject` (and to its `[[auth.oidc]]` issuer by `jwt_issuer`), or else the identity
    /// `jwt:{sub}` (`[auth.jwt]`) or `jwt:{name}:{sub}` (the issuer's `name`): one `sub` at two
    /// identity providers is two identities. A `sub` that equals a configured client's name is
    /// not that client: names are the operator's, a subject is the identity provider's, and
    /// only `jwt_subject` joins the two. An unbound `[auth.jwt]` token has the agents and
    /// rights of its claims (`a2a_agents`, `a2a_can`) and every method; an unbound
    /// `[[auth.oidc]]` token has the union of what its issuer's `scopes` grant its scopes,
    /// its claims unread. Either way, without claims or a mapped scope, a token grants nothing
    /// (no agent, no right): the identity provider must say what a subject may do.
    fn claims_client(
        &self,
        claims: jwt::Claims,
        issuer: Option<usize>,
    ) -> Result<Arc<Client>, Failure> {
        let jwt::Claims {
            sub,
            a2a_agents,
            a2a_can,
            scope,
            scp,
            ..
        } = claims;
        let issuer = issuer.and_then(|at| self.oidc.get(at));
        let key = (issuer.map(|i| i.name.to_string()).unwrap_or_default(), sub);
        if let Some(c) = self.jwt_subjects.get(&key) {
            return Ok(c.clone());
        }
        let sub = key.1;
        let (name, agents, rights, methods) = match issuer {
            Some(i) => {
                let scopes = jwt::scopes(&scope, &scp).ok_or(Failure::Invalid(
                    "the token carries more scopes than the gateway reads",
                ))?;
                let g = i.scopes.grant(scopes);
                (
                    format!("jwt:{}:{sub}", i.name),
                    g.agents,
                    g.rights,
                    g.methods,
                )
            }
            None => {
                let can = match &a2a_can {
                    None => Vec::new(),
                    Some(list) => list
                        .iter()
                        .map(|r| parse_right(r).ok_or(Failure::Invalid("unknown right in a2a_can")))
                        .collect::<Result<Vec<_>, _>>()?,
                };
                (
                    format!("jwt:{sub}"),
                    Agents::of(a2a_agents.as_deref().unwrap_or_default()),
                    Rights::of(&can),
                    // Its rights are its claims', which name no method: every one.
                    Methods::ALL,
                )
            }
        };
        let defaults = ClientConfig::default();
        Ok(Arc::new(Client {
            // Apart from every configured name (those are A-Z a-z 0-9 . _ - only): its tasks
            // and its stream count are its own.
            name: name.into(),
            label: "jwt".into(),
            agents,
            rights,
            methods,
            max_streams: defaults.max_streams,
            // A bucket of its own (by this name), in the bounded table of token subjects.
            rate: Some(self.token_rate),
            max_live_tasks: None,
            max_contexts: self.token_max_contexts,
            max_ledger_bytes: None,
        }))
    }

    /// A stream slot for `client`, opened with `credential` and needing `right`, or `None`
    /// when the client holds `max_streams` already.
    pub fn open_stream(
        &self,
        client: &Arc<Client>,
        credential: Credential<'_>,
        right: Right,
    ) -> Option<StreamPermit> {
        let proof = match credential {
            Credential::Cert(subject) => Proof::Cert(subject.into()),
            Credential::Bearer(b) if self.takes_tokens() && looks_like_jwt(b) => {
                let cached = self
                    .tokens
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&digest(b))
                    .map(|(_, exp, key)| (*exp, key.as_ref().map(|(_, fp)| *fp)));
                // Just verified, so cached, unless the cache started over meanwhile; then the
                // stream lives no longer than now (it is judged again at its first sweep).
                let (exp, key) = cached.unwrap_or_else(|| (jwt::now_secs(), None));
                Proof::Jwt {
                    token: b.into(),
                    exp,
                    key,
                }
            }
            Credential::Bearer(b) => Proof::Key(digest(b)),
        };
        self.streams.acquire(client, proof, right, self.gen)
    }

    /// The streams whose access this identity (a reloaded config's, with `registry`'s agents)
    /// no longer grants: each is told why and ends. Streams whose access did not change are
    /// untouched.
    pub fn revoke_withdrawn(self: &Arc<Self>, registry: &Arc<Registry>) {
        let open = self
            .streams
            .judged_by(self.gen, Arc::downgrade(self), Arc::downgrade(registry));
        for g in open {
            if let Some(why) = self.judge(&g, registry) {
                g.revoke(why);
            }
        }
    }

    /// The counts of open streams, for the `exp` sweep ([`StreamCounts::expire_forever`]).
    pub fn stream_counts(&self) -> std::sync::Weak<StreamCounts> {
        Arc::downgrade(&self.streams)
    }

    /// Whether `g` still holds under this identity, and why not.
    fn judge(&self, g: &Grant, registry: &Registry) -> Option<Revoked> {
        let gone = || {
            if self.by_name.contains_key(&*g.client.name) {
                Revoked::KeyRotated
            } else {
                Revoked::ClientRemoved
            }
        };
        let now = match &g.proof {
            Proof::Key(d) => match self.keys.get(d) {
                Some(c) if c.name == g.client.name => c.clone(),
                _ => return Some(gone()),
            },
            Proof::Cert(subject) => match self.subjects.get(&**subject) {
                Some(c) if c.name == g.client.name => c.clone(),
                _ => return Some(gone()),
            },
            Proof::Jwt { token, exp, .. } => {
                if *exp <= jwt::now_secs() {
                    return Some(Revoked::TokenExpired);
                }
                match self.verify_token(token, false) {
                    Err(Failure::Expired) => return Some(Revoked::TokenExpired),
                    // Its identity provider out of reach since start: nothing withdrawn.
                    Err(Failure::Unavailable(_)) => return None,
                    Err(_) => return Some(Revoked::KeyRotated),
                    Ok((claims, key)) => match self.claims_client(claims, key.map(|(at, _)| at)) {
                        Ok(c) if c.name == g.client.name => c,
                        // The token now names another identity: its entry's binding went.
                        Ok(_) => return Some(Revoked::ClientRemoved),
                        Err(_) => return Some(Revoked::RightRemoved),
                    },
                }
            }
        };
        if !now.can(g.right) {
            return Some(Revoked::RightRemoved);
        }
        let relies = g.relies.lock().unwrap_or_else(|p| p.into_inner());
        if relies.all_tasks && !now.can(Right::AllTasks) {
            return Some(Revoked::RightRemoved);
        }
        if relies.method.is_some_and(|m| !now.may_call(m)) {
            return Some(Revoked::RightRemoved);
        }
        let allowed = match &relies.agents {
            // An agent still configured, for a client whose list did not change, stays
            // allowed even while its card is missing (a list may name it by the card's
            // agent_id, which a failing card cannot confirm): its access did not change.
            Some(list) => list.iter().all(|a| {
                registry.by_name(a).is_some_and(|agent| {
                    now.agents.allows(agent)
                        || (now.agents == g.client.agents && agent.card().is_err())
                })
            }),
            // Every agent the client may use: still every one.
            None => matches!(now.agents, Agents::All) || !matches!(g.client.agents, Agents::All),
        };
        (!allowed).then_some(Revoked::AgentRemoved)
    }
}

/// What a stream's request proved its client with: a bearer credential (a key or a JWT), or
/// the subject of the connection's verified client certificate.
#[derive(Debug, Clone, Copy)]
pub enum Credential<'a> {
    /// `Authorization: Bearer` or `?access_token=`.
    Bearer(&'a [u8]),
    /// The client certificate's RFC 4514 subject.
    Cert(&'a str),
}

fn parse_right(s: &str) -> Option<Right> {
    Right::ALL.into_iter().find(|r| r.as_str() == s)
}

/// Three base64url segments, the first a JSON object (`eyJ`): a JWT, not a key.
fn looks_like_jwt(b: &[u8]) -> bool {
    b.starts_with(b"eyJ") && b.iter().filter(|&&c| c == b'.').count() == 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::a2a::Method;

    fn auth(toml: &str) -> Auth {
        let cfg = Config::parse(&format!(
            "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n{toml}"
        ))
        .expect("config");
        Auth::from_config(&cfg).expect("auth")
    }

    fn sha(key: &str) -> String {
        Sha256::digest(key.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn a_key_names_its_client_and_nothing_else_does() {
        let a = auth(&format!(
            "[[clients]]\nname = \"one\"\nkey_sha256 = \"{}\"\n[[clients]]\nname = \"two\"\nkey_sha256 = \"{}\"\ncan = [\"metrics\"]\n",
            sha("key-one-0123456789"),
            sha("key-two-0123456789").to_uppercase()
        ));
        assert!(a.enabled());
        let one = a.authenticate(b"key-one-0123456789").expect("one");
        assert_eq!(&*one.name, "one");
        assert!(one.can(Right::Tasks) && one.can(Right::Streams) && !one.can(Right::Metrics));
        let two = a.authenticate(b"key-two-0123456789").expect("two");
        assert!(two.can(Right::Metrics) && !two.can(Right::Tasks));
        assert_eq!(
            a.authenticate(b"key-one-012345678").err(),
            Some(Failure::Invalid("unknown key"))
        );
        assert_eq!(a.authenticate(b"").err(), Some(Failure::Missing));
    }

    #[test]
    fn stream_permits_are_counted_per_client_and_released_on_drop() {
        let a = auth(&format!(
            "[[clients]]\nname = \"one\"\nkey_sha256 = \"{}\"\nmax_streams = 2\n",
            sha("k")
        ));
        let c = a.authenticate(b"k").expect("client");
        let open = || a.open_stream(&c, Credential::Bearer(b"k"), Right::Streams);
        let p1 = open().expect("1");
        let _p2 = open().expect("2");
        assert!(open().is_none(), "a third is over max_streams");
        drop(p1);
        let _p3 = open().expect("a slot came free");
        assert!(open().is_none());
    }

    #[test]
    fn methods_are_the_configured_ones_and_every_one_by_default() {
        // The config's names are the protocol's, in its order.
        let names: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(ClientConfig::default().methods, names);
        let a = auth(&format!(
            "[[clients]]\nname = \"reader\"\nkey_sha256 = \"{}\"\nmethods = [\"GetTask\", \"ListTasks\"]\n[[clients]]\nname = \"all\"\nkey_sha256 = \"{}\"\n[[clients]]\nname = \"none\"\nkey_sha256 = \"{}\"\nmethods = []\n",
            sha("reader-0123456789"),
            sha("all-0123456789"),
            sha("none-0123456789")
        ));
        let reader = a.authenticate(b"reader-0123456789").expect("reader");
        let allowed: Vec<Method> = Method::ALL
            .into_iter()
            .filter(|m| reader.may_call(*m))
            .collect();
        assert_eq!(allowed, [Method::GetTask, Method::ListTasks]);
        // `methods` is beside `can`, which it leaves as it was.
        assert!(reader.can(Right::Tasks) && reader.can(Right::Streams));
        let all = a.authenticate(b"all-0123456789").expect("all");
        assert_eq!(all.methods, Methods::ALL);
        assert!(Method::ALL.into_iter().all(|m| all.may_call(m)));
        let none = a.authenticate(b"none-0123456789").expect("none");
        assert!(!Method::ALL.into_iter().any(|m| none.may_call(m)));
        assert!(Caller::Open.may_call(Method::SendMessage));
        assert!(!Caller::Public.may_call(Method::GetTask));
        assert!(!Caller::Client(reader).may_call(Method::SendMessage));
    }

    #[test]
    fn without_clients_auth_is_off() {
        assert!(!auth("").enabled());
    }
}
