//! `[[auth.oidc]]`: identity providers whose signing keys the gateway fetches by URL and keeps
//! current. One [`Issuer`] per entry: its token checks (`iss`, `aud`, its algorithms) and its
//! [`KeyState`], the keys held now, refetched in the background every `jwks_refresh_secs`
//! (sooner when the answer's `Cache-Control: max-age` says so) and at once, at most once per
//! 10 s, when a token names a key it does not hold.
//!
//! The URLs fetched are the operator's configuration, not a caller's input: no webhook guard,
//! but `https` (or `http` to a loopback address, which `check-config` enforces), no redirect
//! followed, each answer bounded ([`MAX_DOCUMENT`], [`FETCH_TIMEOUT`]). A failed fetch keeps the
//! keys held; with none held yet (the identity provider was down since start), a token cannot
//! be checked and is answered 503 AUTH_UNAVAILABLE, not 401. A key gone from a refetched set
//! takes with it the verifications made with it: cached ones are not used again, and the
//! streams opened with it end (`key_rotated`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, CACHE_CONTROL};
use hyper::{Request, Uri};
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use super::jwt::{self, Claims, JwtError, Key};
use super::scopes::ScopeTable;
use super::{Failure, StreamCounts};
use crate::config::OidcConfig;
use crate::metrics::Metrics;

/// The largest discovery document or key set read.
pub const MAX_DOCUMENT: usize = 1 << 20;
/// The longest one fetch (its connection, its answer) may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The least time between two fetches asked for by tokens naming unknown keys.
pub const KICK_INTERVAL: Duration = Duration::from_secs(10);
/// How soon a fetch is tried again while no key is held.
const KEYLESS_RETRY: Duration = Duration::from_secs(2);
/// The `Retry-After` of a token that cannot be checked yet.
pub const RETRY_AFTER_SECS: u64 = 5;

type IssuerClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// One `[[auth.oidc]]` entry as tokens are checked against it.
pub struct Issuer {
    /// Its `name`: the metrics label, `jwt:{name}:{sub}`, what `jwt_issuer` names.
    pub name: Arc<str>,
    /// The `iss` its tokens carry.
    pub issuer: String,
    validations: Vec<(Algorithm, Validation)>,
    /// The keys held, shared with the next reload's issuer when its source is the same.
    pub keys: Arc<KeyState>,
    /// What each scope grants (`scopes`): an unbound token's only source of rights.
    pub scopes: ScopeTable,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer").field("name", &self.name).finish()
    }
}

/// Where an issuer's keys come from: a reload that keeps all of it keeps the keys held.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Source {
    name: Arc<str>,
    issuer: String,
    ca_file: Option<String>,
    refresh: Duration,
    algorithms: Vec<String>,
}

/// The keys of one issuer, and the state of their fetching.
pub struct KeyState {
    source: Source,
    /// `None` until a first fetch succeeds.
    held: RwLock<Option<Arc<Vec<Key>>>>,
    /// The last fetch failed (or none has succeeded yet): `/readyz` lists it as degraded.
    down: AtomicBool,
    started: AtomicBool,
    wake: Arc<tokio::sync::Notify>,
    last_kick: Mutex<Option<Instant>>,
    /// Fetches tokens' unknown `kid`s asked for, numbered from 1.
    asked: AtomicU64,
    /// The last of `asked` that a finished fetch covers (one that started after it was asked
    /// for): what a request held for its fetch waits on.
    fetches: tokio::sync::watch::Sender<u64>,
    client: IssuerClient,
    /// The open streams, whose grants made with a withdrawn key end.
    streams: Weak<StreamCounts>,
}

impl Drop for KeyState {
    fn drop(&mut self) {
        // Its fetcher wakes, finds it gone and ends.
        self.wake.notify_one();
    }
}

/// Why a fetch failed: the `outcome` label of `jwks_fetches_total`.
#[derive(Debug)]
enum FetchError {
    /// The identity provider could not be reached, did not answer in time, or answered an
    /// error status.
    Error(String),
    /// It answered, but not a usable discovery document or key set.
    Invalid(String),
}

impl Issuer {
    /// The issuer of `cfg`, its keys taken over from `old` when they come from the same
    /// place (a reload), else a fresh state that holds none until its fetcher runs.
    pub fn new(
        cfg: &OidcConfig,
        old: &[Issuer],
        streams: &Arc<StreamCounts>,
    ) -> Result<Issuer, jwt::JwksError> {
        let algs: Vec<Algorithm> = cfg
            .algorithms
            .iter()
            .filter_map(|a| jwt::allowed_alg(a))
            .collect();
        let source = Source {
            name: cfg.name.as_str().into(),
            issuer: cfg.issuer.clone(),
            ca_file: cfg.ca_file.clone(),
            refresh: cfg.jwks_refresh,
            algorithms: cfg.algorithms.clone(),
        };
        let keys = match old.iter().find(|o| o.keys.source == source) {
            Some(o) => o.keys.clone(),
            None => {
                let client = crate::upstream::issuer_client(
                    FETCH_TIMEOUT,
                    cfg.ca_file.as_deref().map(std::path::Path::new),
                )
                .map_err(|why| jwt::JwksError::Oidc {
                    name: cfg.name.clone(),
                    why,
                })?;
                Arc::new(KeyState {
                    source,
                    held: RwLock::new(None),
                    down: AtomicBool::new(true),
                    started: AtomicBool::new(false),
                    wake: Arc::default(),
                    last_kick: Mutex::new(None),
                    asked: AtomicU64::new(0),
                    fetches: tokio::sync::watch::Sender::new(0),
                    client,
                    streams: Arc::downgrade(streams),
                })
            }
        };
        Ok(Issuer {
            name: cfg.name.as_str().into(),
            issuer: cfg.issuer.clone(),
            validations: jwt::validations(&cfg.issuer, &cfg.audience, cfg.leeway.as_secs(), &algs),
            keys,
            scopes: ScopeTable::new(&cfg.scopes),
        })
    }

    /// The claims of a valid token of this issuer and the key that verified it. A token that
    /// names a key not held asks for a fetch (at most one per [`KICK_INTERVAL`]); with no key
    /// held at all, it cannot be checked: [`Failure::Unavailable`].
    pub fn verify(&self, token: &str, kick: bool) -> Result<(Claims, [u8; 32]), Failure> {
        let Some(keys) = self.keys.held() else {
            if kick {
                self.keys.kick();
            }
            return Err(Failure::Unavailable(RETRY_AFTER_SECS));
        };
        match jwt::verify_with(&keys, &self.validations, token) {
            Ok(ok) => Ok(ok),
            Err(JwtError::Expired) => Err(Failure::Expired),
            Err(JwtError::Invalid(why)) => {
                let unknown_kid = jsonwebtoken::decode_header(token)
                    .ok()
                    .and_then(|h| h.kid)
                    .is_some_and(|kid| !keys.iter().any(|k| k.kid.as_deref() == Some(&kid)));
                // Held, rather than refused, while the fetch it asked for runs: a client's
                // first token after a rotation is served, not answered 401.
                if kick && unknown_kid && self.keys.kick() {
                    return Err(Failure::KeyPending);
                }
                Err(Failure::Invalid(why))
            }
        }
    }
}

impl KeyState {
    /// The keys held now, if any.
    fn held(&self) -> Option<Arc<Vec<Key>>> {
        self.held.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the key with fingerprint `fp` is still held.
    pub fn holds(&self, fp: &[u8; 32]) -> bool {
        self.held()
            .is_some_and(|keys| keys.iter().any(|k| k.fp == *fp))
    }

    /// Whether the identity provider is out of reach (the last fetch failed, or none has
    /// succeeded yet).
    pub fn degraded(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// Ask the fetcher for a fetch now, unless one was asked for within [`KICK_INTERVAL`];
    /// whether a fetch asked for is running now (this one or an earlier one).
    fn kick(&self) -> bool {
        let mut last = self.last_kick.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|t| t.elapsed() >= KICK_INTERVAL) {
            *last = Some(Instant::now());
            self.asked.fetch_add(1, Ordering::AcqRel);
            self.wake.notify_one();
            return true;
        }
        self.pending()
    }

    /// Whether a fetch asked for has not finished yet.
    fn pending(&self) -> bool {
        *self.fetches.borrow() < self.asked.load(Ordering::Acquire)
    }

    /// Resolves once every fetch asked for so far has finished (a fetch that was running when
    /// one was asked for does not count: it may have read the set before the rotation).
    pub async fn fetched(&self) {
        let want = self.asked.load(Ordering::Acquire);
        let mut rx = self.fetches.subscribe();
        while *rx.borrow_and_update() < want {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Start its fetcher on the current runtime, once.
    pub fn start(self: &Arc<Self>, metrics: &Arc<Metrics>) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        let wake = self.wake.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            loop {
                let Some(state) = weak.upgrade() else { return };
                let wait = state.refresh(&metrics).await;
                drop(state);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = wake.notified() => {}
                }
            }
        });
    }

    /// One fetch of the key set, its outcome logged and counted; how long until the next.
    async fn refresh(&self, metrics: &Metrics) -> Duration {
        // The fetches asked for until now are answered by this one.
        let covers = self.asked.load(Ordering::Acquire);
        let name = &*self.source.name;
        let refresh = self.source.refresh;
        let (outcome, wait) = match self.fetch().await {
            Ok((keys, max_age)) => {
                let n = keys.len();
                metrics.jwks_keys.with_label_values(&[name]).set(n as i64);
                let gone = self.install(keys);
                if self.down.swap(false, Ordering::AcqRel) {
                    tracing::info!(issuer = name, keys = n, "identity provider keys fetched");
                } else {
                    tracing::debug!(issuer = name, keys = n, "identity provider keys fetched");
                }
                if gone > 0 {
                    tracing::info!(
                        issuer = name,
                        withdrawn = gone,
                        "identity provider withdrew keys: their streams end"
                    );
                }
                // Never sooner than a second, whatever max-age says.
                let wait = max_age.map_or(refresh, |m| m.max(Duration::from_secs(1)).min(refresh));
                ("ok", wait)
            }
            Err(e) => {
                self.down.store(true, Ordering::Release);
                let (outcome, why) = match &e {
                    FetchError::Error(w) => ("error", w),
                    FetchError::Invalid(w) => ("invalid", w),
                };
                let keep = self.held().map_or(0, |k| k.len());
                tracing::warn!(
                    issuer = name,
                    error = %why,
                    keys_kept = keep,
                    "identity provider keys could not be fetched; the keys held are kept"
                );
                let wait = if keep == 0 {
                    KEYLESS_RETRY.min(refresh)
                } else {
                    refresh.min(Duration::from_secs(30))
                };
                (outcome, wait)
            }
        };
        metrics
            .jwks_fetches
            .with_label_values(&[name, outcome])
            .inc();
        // Whatever it found: the requests held for it authenticate again.
        self.fetches.send_modify(|done| *done = (*done).max(covers));
        wait
    }

    /// Hold `keys` from now on; the streams of tokens verified with a key held before and not
    /// now end (`key_rotated`), and the cached verifications made with it no longer count
    /// ([`KeyState::holds`]). How many keys went.
    fn install(&self, keys: Vec<Key>) -> usize {
        let before = self.held();
        let gone: Vec<[u8; 32]> = before
            .iter()
            .flat_map(|b| b.iter())
            .filter(|k| !keys.iter().any(|n| n.fp == k.fp))
            .map(|k| k.fp)
            .collect();
        *self.held.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(keys));
        if !gone.is_empty() {
            if let Some(streams) = self.streams.upgrade() {
                streams.revoke_keys(&gone);
            }
        }
        gone.len()
    }

    /// [`KeyState::install`] of a key set, as a fetch would (the unit tests' identity provider).
    #[cfg(test)]
    pub(super) fn install_set(&self, set: Vec<serde_json::Value>) -> usize {
        let (keys, _) = jwt::usable_keys(set);
        self.down.store(false, Ordering::Release);
        self.install(keys)
    }

    /// Discovery, then the key set it names: its usable keys (for the configured
    /// algorithms) and the key set answer's max-age.
    async fn fetch(&self) -> Result<(Vec<Key>, Option<Duration>), FetchError> {
        #[derive(Deserialize)]
        struct Discovery {
            issuer: String,
            jwks_uri: String,
        }
        let discovery_url = format!(
            "{}/.well-known/openid-configuration",
            self.source.issuer.trim_end_matches('/')
        );
        let (_, body) = self.get(&discovery_url).await?;
        let d: Discovery = serde_json::from_slice(&body).map_err(|e| {
            FetchError::Invalid(format!("{discovery_url}: not a discovery document: {e}"))
        })?;
        if d.issuer != self.source.issuer {
            return Err(FetchError::Invalid(format!(
                "{discovery_url}: names issuer {:?}, not {:?}",
                d.issuer, self.source.issuer
            )));
        }
        if !fetchable(&d.jwks_uri) {
            return Err(FetchError::Invalid(format!(
                "{discovery_url}: jwks_uri {:?} is not https (or http to a loopback address)",
                d.jwks_uri
            )));
        }
        let (max_age, body) = self.get(&d.jwks_uri).await?;
        #[derive(Deserialize)]
        struct Set {
            keys: Vec<serde_json::Value>,
        }
        let set: Set = serde_json::from_slice(&body).map_err(|e| {
            FetchError::Invalid(format!("{}: not a JWKS document: {e}", d.jwks_uri))
        })?;
        let (keys, skipped) = jwt::usable_keys(set.keys);
        let keys: Vec<Key> = keys
            .into_iter()
            .filter(|k| {
                self.source
                    .algorithms
                    .iter()
                    .any(|a| jwt::allowed_alg(a) == Some(k.alg()))
            })
            .collect();
        if keys.is_empty() {
            return Err(FetchError::Invalid(format!(
                "{}: no usable signing key ({})",
                d.jwks_uri,
                if skipped.is_empty() {
                    "none for the configured algorithms".to_owned()
                } else {
                    skipped.join("; ")
                }
            )));
        }
        Ok((keys, max_age))
    }

    /// GET `url`'s JSON: 200 only, at most [`MAX_DOCUMENT`] bytes, within [`FETCH_TIMEOUT`].
    async fn get(&self, url: &str) -> Result<(Option<Duration>, Bytes), FetchError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| FetchError::Invalid(format!("{url}: {e}")))?;
        let req = Request::get(uri)
            .header(ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| FetchError::Invalid(format!("{url}: {e}")))?;
        let exchange = async {
            let res = self.client.request(req).await.map_err(|e| {
                FetchError::Error(format!("{url}: {}", crate::upstream::describe(&e)))
            })?;
            let (parts, body) = res.into_parts();
            if parts.status != hyper::StatusCode::OK {
                return Err(FetchError::Error(format!(
                    "{url}: answered {}",
                    parts.status
                )));
            }
            let body = crate::upstream::read_limited(body, MAX_DOCUMENT)
                .await
                .map_err(|e| FetchError::Invalid(format!("{url}: {e}")))?;
            Ok((max_age(&parts.headers), body))
        };
        tokio::time::timeout(FETCH_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(FetchError::Error(format!(
                    "{url}: no answer within {} s",
                    FETCH_TIMEOUT.as_secs()
                )))
            })
    }
}

/// `Cache-Control: max-age=N`, if the answer says one.
fn max_age(h: &hyper::HeaderMap) -> Option<Duration> {
    h.get_all(CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|d| {
            let (k, v) = d.trim().split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("max-age")
                .then(|| v.trim().trim_matches('"').parse::<u64>().ok())
                .flatten()
        })
        .map(Duration::from_secs)
}

/// Whether the gateway fetches from `url`: https, or http to a loopback address.
fn fetchable(url: &str) -> bool {
    let Ok(u) = url::Url::parse(url) else {
        return false;
    };
    match (u.scheme(), u.host()) {
        ("https", Some(_)) => true,
        ("http", Some(url::Host::Ipv4(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Domain(d))) => d.eq_ignore_ascii_case("localhost"),
        _ => false,
    }
}

/// The `iss` of a token, read without verifying it: which issuer's keys to check it with.
pub fn unverified_iss(token: &str) -> Option<String> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    #[derive(Deserialize)]
    struct Iss {
        iss: Option<String>,
    }
    serde_json::from_slice::<Iss>(&bytes).ok()?.iss
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::auth::{Auth, Credential, Revoked};
    use crate::config::{Config, Right};
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    /// An Ed25519 signing key with id `kid`, and its public JWK.
    fn ed_key(kid: &str) -> (EncodingKey, serde_json::Value) {
        use base64::Engine;
        let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("key");
        let key = EncodingKey::from_ed_der(&kp.serialize_der());
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(kp.public_key_raw());
        (
            key,
            json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": x, "use": "sig"}),
        )
    }

    /// A token with the scope `a2a` (which both issuers map to tasks and streams).
    fn token(key: &EncodingKey, kid: &str, iss: &str, sub: &str) -> String {
        token_with(key, kid, iss, sub, json!({"scope": "a2a"}))
    }

    /// A token with `extra` claims; its claims grant every right, which no issuer reads.
    fn token_with(
        key: &EncodingKey,
        kid: &str,
        iss: &str,
        sub: &str,
        extra: serde_json::Value,
    ) -> String {
        let mut h = Header::new(Algorithm::EdDSA);
        h.kid = Some(kid.into());
        h.typ = Some("at+jwt".into());
        let now = jwt::now_secs();
        let mut claims = json!({"iss": iss, "sub": sub, "aud": "gw", "iat": now, "exp": now + 600,
            "a2a_agents": ["*"], "a2a_can": ["tasks", "streams", "metrics", "admin", "all_tasks"]});
        if let (Some(c), serde_json::Value::Object(x)) = (claims.as_object_mut(), extra) {
            c.extend(x);
        }
        jsonwebtoken::encode(&h, &claims, key).expect("signed")
    }

    const CORP: &str = "https://idp.example.com";
    const OTHER: &str = "https://other.example.com/";

    fn auth() -> Auth {
        let cfg = Config::parse(&format!(
            r#"listen = "127.0.0.1:0"
[[agents]]
name = "a"
url = "http://x"
[[auth.oidc]]
name = "corp"
issuer = "{CORP}"
audience = "gw"
scopes = {{ "a2a" = {{ can = ["tasks", "streams"] }}, "a2a.read" = {{ can = ["tasks"], methods = ["GetTask", "ListTasks"], agents = ["a"] }}, "a2a.ops" = {{ can = ["metrics"], methods = [] }} }}
[[auth.oidc]]
name = "other"
issuer = "{OTHER}"
audience = "gw"
scopes = {{ "a2a" = {{ can = ["tasks", "streams"] }} }}
[[clients]]
name = "carol"
jwt_subject = "carol"
jwt_issuer = "corp"
"#
        ))
        .expect("config");
        Auth::from_config(&cfg).expect("auth")
    }

    #[test]
    fn a_token_is_unavailable_until_its_issuer_has_keys_then_one_sub_is_an_owner_per_issuer() {
        let a = auth();
        let (key, jwk) = ed_key("k1");
        let dave = token(&key, "k1", CORP, "dave");
        assert_eq!(
            a.authenticate(dave.as_bytes()).err(),
            Some(Failure::Unavailable(RETRY_AFTER_SECS)),
            "no key held: not checkable, not refused"
        );
        assert_eq!(a.degraded(), ["oidc:corp", "oidc:other"]);
        a.oidc[0].keys.install_set(vec![jwk.clone()]);
        assert_eq!(a.degraded(), ["oidc:other"]);
        let c = a.authenticate(dave.as_bytes()).expect("dave");
        assert_eq!((&*c.name, &*c.label), ("jwt:corp:dave", "jwt"));
        assert!(c.can(Right::Tasks) && !c.can(Right::Metrics));
        // carol is bound at corp only: the same sub at the other issuer is another owner.
        let carol = token(&key, "k1", CORP, "carol");
        assert_eq!(
            &*a.authenticate(carol.as_bytes()).expect("carol").name,
            "carol"
        );
        a.oidc[1].keys.install_set(vec![jwk]);
        let carol_elsewhere = token(&key, "k1", OTHER, "carol");
        assert_eq!(
            &*a.authenticate(carol_elsewhere.as_bytes())
                .expect("other")
                .name,
            "jwt:other:carol"
        );
        // An issuer nobody configured, or a key not held, is refused.
        let stranger = token(&key, "k1", "https://evil.example.com", "dave");
        assert!(matches!(
            a.authenticate(stranger.as_bytes()),
            Err(Failure::Invalid(_))
        ));
        let (forged, _) = ed_key("k1");
        assert!(matches!(
            a.authenticate(token(&forged, "k1", CORP, "eve").as_bytes()),
            Err(Failure::Invalid(_))
        ));
    }

    #[test]
    fn an_unbound_tokens_rights_are_its_mapped_scopes_and_never_its_claims() {
        use crate::auth::{Agents, Methods};
        use crate::protocol::a2a::Method;
        let a = auth();
        let (key, jwk) = ed_key("k1");
        a.oidc[0].keys.install_set(vec![jwk]);
        let client = |extra| {
            a.authenticate(token_with(&key, "k1", CORP, "dave", extra).as_bytes())
                .expect("verified")
        };
        // Claims granting everything, no scope: nothing at all.
        let none = client(json!({}));
        assert_eq!(&*none.name, "jwt:corp:dave");
        assert!(!Right::ALL.into_iter().any(|r| none.can(r)));
        assert_eq!(none.methods, Methods::NONE);
        assert_eq!(none.agents, Agents::Only(Vec::new()));
        // Scopes the table does not name: nothing either.
        let unmapped = client(json!({"scope": "openid profile a2a.write"}));
        assert!(!Right::ALL.into_iter().any(|r| unmapped.can(r)));
        assert_eq!(unmapped.methods, Methods::NONE);
        // One scope: its grant, whatever the claims say.
        let read = client(json!({"scope": "openid a2a.read"}));
        assert!(read.can(Right::Tasks) && !read.can(Right::Streams) && !read.can(Right::Admin));
        assert!(read.may_call(Method::GetTask) && !read.may_call(Method::SendMessage));
        assert_eq!(read.agents, Agents::Only(vec!["a".into()]));
        // Several, from `scope` and Okta's array `scp` alike: the union.
        let both = client(json!({"scope": "a2a.read", "scp": ["a2a.ops", "a2a"]}));
        assert!(both.can(Right::Tasks) && both.can(Right::Streams) && both.can(Right::Metrics));
        assert!(!both.can(Right::Admin) && !both.can(Right::AllTasks));
        assert_eq!(both.methods, Methods::ALL);
        assert_eq!(both.agents, Agents::All);
        let scp = client(json!({"scp": "a2a.read a2a.ops"}));
        assert!(scp.can(Right::Metrics) && scp.can(Right::Tasks) && !scp.can(Right::Streams));
        assert!(scp.may_call(Method::ListTasks) && !scp.may_call(Method::CancelTask));
        // A claim the gateway does not read cannot refuse the token either.
        let odd = client(json!({"scope": "a2a", "a2a_can": ["root"]}));
        assert!(odd.can(Right::Streams));
        // Absurdly many scopes: the token is refused, not cut short.
        let many: Vec<String> = (0..=jwt::MAX_SCOPES).map(|i| format!("s{i}")).collect();
        let t = token_with(&key, "k1", CORP, "dave", json!({ "scp": many }));
        assert!(matches!(
            a.authenticate(t.as_bytes()),
            Err(Failure::Invalid(_))
        ));
        // A bound entry keeps precedence: carol is her entry, whatever her scopes.
        let carol = a
            .authenticate(
                token_with(&key, "k1", CORP, "carol", json!({"scope": "a2a.ops"})).as_bytes(),
            )
            .expect("carol");
        assert_eq!(&*carol.name, "carol");
        assert!(carol.can(Right::Tasks) && !carol.can(Right::Metrics));
    }

    #[test]
    fn an_auth_jwt_token_keeps_the_rights_of_its_claims() {
        let dir = tempfile::tempdir().expect("dir");
        let (key, jwk) = ed_key("k1");
        let jwks = dir.path().join("jwks.json");
        std::fs::write(&jwks, json!({ "keys": [jwk] }).to_string()).expect("jwks");
        let cfg = Config::parse(&format!(
            "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n\
             [auth.jwt]\njwks_file = \"{}\"\nissuer = \"https://file.example.com\"\naudience = \"gw\"\n",
            jwks.display()
        ))
        .expect("config");
        let a = Auth::from_config(&cfg).expect("auth");
        let t = token_with(
            &key,
            "k1",
            "https://file.example.com",
            "dave",
            json!({"scope": "a2a", "a2a_can": ["metrics"]}),
        );
        let c = a.authenticate(t.as_bytes()).expect("verified");
        assert_eq!(&*c.name, "jwt:dave");
        assert!(c.can(Right::Metrics) && !c.can(Right::Tasks));
        assert_eq!(c.methods, crate::auth::Methods::ALL);
    }

    #[test]
    fn a_reload_that_maps_a_scope_to_less_ends_the_streams_it_opened() {
        let a = Arc::new(auth());
        let (key, jwk) = ed_key("k1");
        a.oidc[0].keys.install_set(vec![jwk]);
        let t = token(&key, "k1", CORP, "dave");
        let c = a.authenticate(t.as_bytes()).expect("verified");
        let permit = a
            .open_stream(&c, Credential::Bearer(t.as_bytes()), Right::Streams)
            .expect("a stream");
        let cfg = Config::parse(&format!(
            "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n\
             [[auth.oidc]]\nname = \"corp\"\nissuer = \"{CORP}\"\naudience = \"gw\"\n\
             scopes = {{ \"a2a\" = {{ can = [\"tasks\"] }} }}\n"
        ))
        .expect("config");
        let next = Arc::new(a.reloaded(&cfg).expect("reloaded"));
        let registry = Arc::new(crate::registry::Registry::new(&cfg.agents));
        next.revoke_withdrawn(&registry);
        assert_eq!(permit.revoked(), Some(Revoked::RightRemoved));
        let again = next.authenticate(t.as_bytes()).expect("still verified");
        assert!(again.can(Right::Tasks) && !again.can(Right::Streams));
    }

    #[test]
    fn a_withdrawn_key_drops_its_cached_verifications_and_ends_its_streams() {
        let a = auth();
        let (old, old_jwk) = ed_key("old");
        let (new, new_jwk) = ed_key("new");
        a.oidc[0].keys.install_set(vec![old_jwk.clone()]);
        let t_old = token(&old, "old", CORP, "dave");
        let c = a
            .authenticate(t_old.as_bytes())
            .expect("verified and cached");
        let permit = a
            .open_stream(&c, Credential::Bearer(t_old.as_bytes()), Right::Streams)
            .expect("a stream");
        // Rotation with both keys published: nothing ends.
        assert_eq!(
            a.oidc[0].keys.install_set(vec![old_jwk, new_jwk.clone()]),
            0
        );
        assert_eq!(permit.revoked(), None);
        assert!(a.authenticate(t_old.as_bytes()).is_ok());
        // The old key withdrawn: its stream ends, its cached verification no longer counts.
        assert_eq!(a.oidc[0].keys.install_set(vec![new_jwk]), 1);
        assert_eq!(permit.revoked(), Some(Revoked::KeyRotated));
        assert_eq!(Revoked::KeyRotated.reason(), "key_rotated");
        // Its kid is no longer held: it asks for a fetch and may wait for it (admission does,
        // then judges it again); no fetcher runs here, so the fetch stays pending.
        assert_eq!(
            a.authenticate(t_old.as_bytes()).err(),
            Some(Failure::KeyPending)
        );
        let keys = &a.oidc[0].keys;
        assert!(keys.pending());
        // The fetch done, finding the key still gone: refused, with no new fetch for 10 s.
        let asked = keys.asked.load(Ordering::Acquire);
        keys.fetches.send_modify(|done| *done = asked);
        assert!(!keys.pending());
        assert!(matches!(
            a.authenticate(t_old.as_bytes()),
            Err(Failure::Invalid(_))
        ));
        let t_new = token(&new, "new", CORP, "dave");
        assert_eq!(
            &*a.authenticate(t_new.as_bytes()).expect("new").name,
            "jwt:corp:dave"
        );
    }

    #[test]
    fn a_reload_keeps_an_issuers_keys_unless_where_they_come_from_changed() {
        let a = auth();
        let (_, jwk) = ed_key("k1");
        a.oidc[0].keys.install_set(vec![jwk]);
        let same = Config::parse(&format!(
            "listen = \"127.0.0.1:0\"\n[[agents]]\nname = \"a\"\nurl = \"http://x\"\n\
             [[auth.oidc]]\nname = \"corp\"\nissuer = \"{CORP}\"\naudience = \"another\"\n\
             [[auth.oidc]]\nname = \"other\"\nissuer = \"https://moved.example.com\"\naudience = \"gw\"\n"
        ))
        .expect("config");
        let next = a.reloaded(&same).expect("reloaded");
        // corp's audience changed, not where its keys come from: the keys held stay held.
        assert!(Arc::ptr_eq(&next.oidc[0].keys, &a.oidc[0].keys));
        assert!(next.oidc[0].keys.held().is_some());
        // other's issuer moved: its keys are fetched again, from the new place.
        assert!(!Arc::ptr_eq(&next.oidc[1].keys, &a.oidc[1].keys));
        assert_eq!(next.degraded(), ["oidc:other"]);
    }

    #[test]
    fn max_age_is_read_from_cache_control() {
        let mut h = hyper::HeaderMap::new();
        assert_eq!(max_age(&h), None);
        h.insert(
            CACHE_CONTROL,
            "public, max-age=60, must-revalidate"
                .parse()
                .expect("value"),
        );
        assert_eq!(max_age(&h), Some(Duration::from_secs(60)));
    }

    #[test]
    fn only_https_or_loopback_http_is_fetched() {
        assert!(fetchable("https://idp.example.com/jwks"));
        assert!(fetchable("http://127.0.0.1:8080/jwks"));
        assert!(fetchable("http://[::1]:8080/jwks"));
        assert!(!fetchable("http://idp.example.com/jwks"));
        assert!(!fetchable("http://10.0.0.1/jwks"));
        assert!(!fetchable("file:///etc/passwd"));
    }

    #[test]
    fn the_iss_of_a_token_is_read_without_verifying() {
        use base64::Engine;
        let enc = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let t = format!(
            "{}.{}.sig",
            enc(r#"{"alg":"RS256"}"#),
            enc(r#"{"iss":"https://idp/","sub":"x"}"#)
        );
        assert_eq!(unverified_iss(&t).as_deref(), Some("https://idp/"));
        assert_eq!(unverified_iss("a.b.c"), None);
    }
}
