//! Who is calling, told to an agent (`[[agents]] identity`): the `A2A-Caller` header, a JWT the
//! gateway signs with `[auth.assertion]`'s first key (ES256 or EdDSA), or, with `identity =
//! "token"`, a token client's own bearer token. An agent behind the gateway otherwise sees only
//! the gateway, and cannot do the per-user authorization A2A asks of it.
//!
//! The assertion names the client as the ledger does (`sub`: a configured client's name, or
//! `jwt:{issuer}:{sub}`), how it proved it (`client_kind`), and for a token its identity
//! provider's `iss` and `sub` and the claims the agent's `forward_claims` name. It lives 60 s
//! (never past the caller's token) and one is reused for one (client, kind, agent) for up to
//! 30 s, so a busy client costs one signature per agent per half minute, not one per request.
//! The public keys are served at `/.well-known/jwks.json`, each named by its RFC 7638
//! thumbprint, so every replica given the same files publishes the same set.
//!
//! A leaf: it knows the config and nothing else of the crate.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivatePkcs8KeyDer;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::config::{AgentConfig, Config, Identity};

/// The header an agent is told the caller in. A client's own is removed on the way
/// (`upstream::upstream_headers`): only the gateway says who is calling.
pub const HEADER: HeaderName = HeaderName::from_static("a2a-caller");

/// How long an assertion is valid at most.
const LIFETIME_SECS: u64 = 60;

/// How long one assertion is reused for one (client, kind, agent).
const REUSE_SECS: u64 = 30;

/// Assertions kept for reuse at most; past it the table starts over (each costs one signature
/// to make again).
const MAX_KEPT: usize = 10_000;

/// How the caller proved who it is (`client_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A bearer key of a `[[clients]]` entry.
    Key,
    /// A client certificate.
    Certificate,
    /// A JWT (`[auth.jwt]` or `[[auth.oidc]]`).
    Token,
    /// The gateway's own call for a task (a poll, the reconciler, a stream it follows), on
    /// behalf of the task's owner.
    Gateway,
    /// No one: a gateway without clients.
    Anonymous,
}

impl Kind {
    /// The claim's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Key => "key",
            Kind::Certificate => "certificate",
            Kind::Token => "token",
            Kind::Gateway => "gateway",
            Kind::Anonymous => "anonymous",
        }
    }
}

/// On whose behalf a request goes to an agent.
#[derive(Debug, Clone, Copy)]
pub enum OnBehalf<'a> {
    /// A client's request: its name as the ledger records it, how it proved it, and the token
    /// it presented when that is how.
    Client {
        /// The client as the ledger names it.
        sub: &'a str,
        /// How it proved it.
        kind: Kind,
        /// Its bearer token, when `kind` is [`Kind::Token`] (verified at admission).
        token: Option<&'a str>,
    },
    /// A client's request on a gateway without clients.
    Anonymous,
    /// The gateway's own call for a task whose owner is this (none on a gateway without
    /// clients).
    Owner(Option<&'a str>),
    /// A call for no one: the card.
    Nobody,
}

/// Why a request cannot go to an agent with `identity = "token"`: the caller's token is not
/// meant for it (403 FORBIDDEN, naming the audience).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The audience the token lacks.
    pub audience: String,
}

/// Why `[auth.assertion]`'s keys cannot be used (start, reload and `check-config` say which
/// file).
#[derive(Debug, thiserror::Error)]
#[error("[auth.assertion] key_files: {path}: {why}")]
pub struct KeyError {
    /// The file.
    pub path: String,
    /// Why.
    pub why: String,
}

enum Pair {
    Es256(EcdsaKeyPair),
    EdDsa(Ed25519KeyPair),
}

struct SigningKey {
    kid: String,
    pair: Pair,
}

impl SigningKey {
    /// One PEM PKCS#8 private key: P-256 (ES256) or Ed25519 (EdDSA).
    fn load(path: &Path) -> Result<SigningKey, KeyError> {
        let err = |why: String| KeyError {
            path: path.display().to_string(),
            why,
        };
        let der = PrivatePkcs8KeyDer::from_pem_file(path)
            .map_err(|e| err(format!("not a PEM PKCS#8 private key: {e}")))?;
        let rng = SystemRandom::new();
        let der = der.secret_pkcs8_der();
        if let Ok(pair) =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
        {
            // An uncompressed point: 0x04, then x and y of 32 bytes each.
            let point = pair.public_key().as_ref();
            let (x, y) = point
                .get(1..33)
                .zip(point.get(33..65))
                .ok_or_else(|| err("an unexpected P-256 public key".into()))?;
            let kid = thumbprint(&format!(
                r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
                B64.encode(x),
                B64.encode(y)
            ));
            return Ok(SigningKey {
                kid,
                pair: Pair::Es256(pair),
            });
        }
        if let Ok(pair) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
            let x = B64.encode(pair.public_key().as_ref());
            let kid = thumbprint(&format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#));
            return Ok(SigningKey {
                kid,
                pair: Pair::EdDsa(pair),
            });
        }
        Err(err(
            "neither an ECDSA P-256 nor an Ed25519 key (ES256 and EdDSA only)".into(),
        ))
    }

    fn alg(&self) -> &'static str {
        match self.pair {
            Pair::Es256(_) => "ES256",
            Pair::EdDsa(_) => "EdDSA",
        }
    }

    /// The public key as a JWK.
    fn jwk(&self) -> Value {
        match &self.pair {
            Pair::Es256(p) => {
                let point = p.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "alg": "ES256", "use": "sig",
                    "x": B64.encode(point.get(1..33).unwrap_or_default()),
                    "y": B64.encode(point.get(33..65).unwrap_or_default())})
            }
            Pair::EdDsa(p) => {
                json!({"kty": "OKP", "crv": "Ed25519", "kid": self.kid, "alg": "EdDSA", "use": "sig",
                    "x": B64.encode(p.public_key().as_ref())})
            }
        }
    }

    /// The compact JWS of `claims`, or `None` should signing fail (it does not for these keys).
    fn sign(&self, claims: &Value) -> Option<String> {
        let header = json!({"alg": self.alg(), "typ": "JWT", "kid": self.kid});
        let mut out = B64.encode(serde_json::to_vec(&header).ok()?);
        out.push('.');
        out.push_str(&B64.encode(serde_json::to_vec(claims).ok()?));
        let sig = match &self.pair {
            Pair::Es256(p) => p.sign(&SystemRandom::new(), out.as_bytes()).ok()?,
            Pair::EdDsa(p) => p.sign(out.as_bytes()),
        };
        out.push('.');
        out.push_str(&B64.encode(sig.as_ref()));
        Some(out)
    }
}

/// RFC 7638: the base64url SHA-256 of the key's required members, in order.
fn thumbprint(canonical: &str) -> String {
    B64.encode(Sha256::digest(canonical.as_bytes()))
}

/// Whether `path` holds a key the gateway can sign with (`check-config`).
pub fn check_key(path: &Path) -> Result<(), String> {
    SigningKey::load(path)
        .map(drop)
        .map_err(|e| format!("{}: {}", e.path, e.why))
}

/// A kept assertion's key: the client, how it proved it, the agent, and for a token the
/// token's SHA-256 (each token's assertion carries that token's claims and lifetime).
type KeptKey = (Box<str>, Kind, Box<str>, [u8; 32]);

type Kept = HashMap<KeptKey, (HeaderValue, u64)>;

/// The signer `[auth.assertion]` configures, if it does: issuing as `public_url` (or, where no
/// agent is told who is calling and `public_url` is unset, the listen address).
pub fn of_config(c: &Config) -> Result<Option<std::sync::Arc<Signer>>, KeyError> {
    let Some(a) = &c.auth.assertion else {
        return Ok(None);
    };
    let iss = c
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", c.listen));
    Signer::load(&iss, &a.key_files).map(|s| Some(std::sync::Arc::new(s)))
}

/// The gateway's assertion keys and the assertions it reuses.
pub struct Signer {
    /// `iss`: `public_url`.
    iss: String,
    /// The first signs.
    keys: Vec<SigningKey>,
    /// `/.well-known/jwks.json`, written once.
    jwks: Bytes,
    kept: Mutex<Kept>,
}

impl Signer {
    /// The keys of `files` (relative paths resolved by the config already), issuing as `iss`.
    pub fn load(iss: &str, files: &[String]) -> Result<Signer, KeyError> {
        let keys = files
            .iter()
            .map(|f| SigningKey::load(Path::new(f)))
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(KeyError {
                path: String::new(),
                why: "no key file".into(),
            });
        }
        let set = json!({"keys": keys.iter().map(SigningKey::jwk).collect::<Vec<_>>()});
        Ok(Signer {
            iss: iss.trim_end_matches('/').to_owned(),
            jwks: Bytes::from(set.to_string()),
            keys,
            kept: Mutex::new(HashMap::new()),
        })
    }

    /// The public keys, as `/.well-known/jwks.json` serves them.
    pub fn jwks(&self) -> Bytes {
        self.jwks.clone()
    }

    /// Put `A2A-Caller` for `agent` on `headers`, as its `identity` says, on behalf of `on`.
    pub fn stamp(
        &self,
        agent: &AgentConfig,
        on: OnBehalf<'_>,
        headers: &mut HeaderMap,
    ) -> Result<(), Refused> {
        let value = match (agent.identity, on) {
            (Identity::None, _) | (_, OnBehalf::Nobody) => return Ok(()),
            (
                Identity::Token,
                OnBehalf::Client {
                    kind: Kind::Token,
                    token: Some(token),
                    ..
                },
            ) => own_token(agent, token)?,
            _ => match self.assertion(agent, on, jwt::now()) {
                Some(v) => v,
                None => return Ok(()),
            },
        };
        headers.insert(HEADER, value);
        Ok(())
    }

    /// The assertion for `on` to `agent` at `now`: one kept for the same (client, kind, agent)
    /// if it was made in the last [`REUSE_SECS`] and is not about to expire, else a new one.
    fn assertion(&self, agent: &AgentConfig, on: OnBehalf<'_>, now: u64) -> Option<HeaderValue> {
        let (sub, kind, token) = match on {
            OnBehalf::Client { sub, kind, token } => (sub, kind, token),
            OnBehalf::Anonymous => ("anonymous", Kind::Anonymous, None),
            OnBehalf::Owner(owner) => (owner.unwrap_or("anonymous"), Kind::Gateway, None),
            OnBehalf::Nobody => return None,
        };
        let of = token.map_or([0; 32], |t| Sha256::digest(t.as_bytes()).into());
        let key = (Box::from(sub), kind, Box::from(agent.name.as_str()), of);
        {
            let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((v, made)) = kept.get(&key) {
                // Not one made "later" than now either (a clock stepped back).
                if *made <= now && now < made + REUSE_SECS {
                    return Some(v.clone());
                }
            }
        }
        let mut claims = json!({
            "iss": self.iss, "aud": agent.name, "sub": sub, "iat": now,
            "exp": now + LIFETIME_SECS, "jti": uuid::Uuid::new_v4().to_string(),
            "client_kind": kind.as_str(),
        });
        let mut reuse = true;
        // The token's claims: read once, at the assertion's making.
        if let (Some(token), Value::Object(out)) = (token, &mut claims) {
            let of_token = jwt::claims(token).unwrap_or_default();
            for (name, to) in [("iss", "idp_iss"), ("sub", "idp_sub")] {
                if let Some(v) = of_token.get(name) {
                    out.insert(to.into(), v.clone());
                }
            }
            for name in &agent.forward_claims {
                if let Some(v) = of_token.get(name) {
                    out.entry(name.clone()).or_insert_with(|| v.clone());
                }
            }
            // Never past the token it stands for: kept only while the token outlives the
            // reuse.
            if let Some(exp) = of_token.get("exp").and_then(Value::as_u64) {
                out.insert("exp".into(), Value::from(exp.min(now + LIFETIME_SECS)));
                reuse = exp >= now + LIFETIME_SECS;
            }
        }
        let signed = self.keys.first()?.sign(&claims)?;
        let mut value = HeaderValue::from_str(&signed).ok()?;
        value.set_sensitive(true);
        if reuse {
            let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
            if kept.len() >= MAX_KEPT {
                kept.retain(|_, (_, made)| now < *made + REUSE_SECS);
                if kept.len() >= MAX_KEPT {
                    kept.clear();
                }
            }
            kept.insert(key, (value.clone(), now));
        }
        Some(value)
    }
}

/// `identity = "token"`: the caller's own token, when its audience includes the agent's
/// `token_audience`.
fn own_token(agent: &AgentConfig, token: &str) -> Result<HeaderValue, Refused> {
    let refused = || Refused {
        audience: agent.token_audience.clone().unwrap_or_default(),
    };
    let want = agent.token_audience.as_deref().ok_or_else(refused)?;
    let claims = jwt::claims(token).ok_or_else(refused)?;
    let meant = match claims.get("aud") {
        Some(Value::String(a)) => a == want,
        Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(want)),
        _ => false,
    };
    if !meant {
        return Err(refused());
    }
    let mut v = HeaderValue::from_str(token).map_err(|_| refused())?;
    v.set_sensitive(true);
    Ok(v)
}

/// What the gateway reads of a token it already verified.
mod jwt {
    use super::*;

    /// Now, in Unix seconds.
    pub fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// The claims of `token` (verified at admission: its signature is not checked again).
    pub fn claims(token: &str) -> Option<Map<String, Value>> {
        let payload = token.split('.').nth(1)?;
        serde_json::from_slice(&B64.decode(payload).ok()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_file(dir: &Path, name: &str, pem: &str) -> String {
        let p = dir.join(name);
        std::fs::write(&p, pem).expect("write");
        p.display().to_string()
    }

    fn keys() -> (tempfile::TempDir, String, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("ec");
        let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("ed");
        let ec = key_file(dir.path(), "ec.pem", &ec.serialize_pem());
        let ed = key_file(dir.path(), "ed.pem", &ed.serialize_pem());
        (dir, ec, ed)
    }

    fn agent(identity: Identity) -> AgentConfig {
        AgentConfig {
            identity,
            token_audience: Some("downstream".into()),
            forward_claims: vec!["email".into()],
            ..AgentConfig::new("echo", "http://127.0.0.1:1")
        }
    }

    /// The claims of `v`, verified with the published key named in its header.
    fn verified(signer: &Signer, v: &HeaderValue) -> Value {
        let token = v.to_str().expect("ascii");
        let header = jsonwebtoken::decode_header(token).expect("header");
        let set: jsonwebtoken::jwk::JwkSet = serde_json::from_slice(&signer.jwks()).expect("jwks");
        let jwk = set
            .find(header.kid.as_deref().expect("kid"))
            .expect("published");
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).expect("key");
        let mut check = jsonwebtoken::Validation::new(header.alg);
        check.set_audience(&["echo"]);
        check.set_issuer(&["https://gw.example"]);
        jsonwebtoken::decode::<Value>(token, &key, &check)
            .expect("verifies")
            .claims
    }

    fn stamped(signer: &Signer, a: &AgentConfig, on: OnBehalf<'_>) -> Option<HeaderValue> {
        let mut h = HeaderMap::new();
        signer.stamp(a, on, &mut h).expect("stamped");
        h.get(HEADER).cloned()
    }

    #[test]
    fn an_assertion_verifies_with_the_published_key_and_names_the_client() {
        let (_dir, ec, ed) = keys();
        for first in [&ec, &ed] {
            let signer =
                Signer::load("https://gw.example/", &[first.clone(), ec.clone()]).expect("keys");
            let a = agent(Identity::Assertion);
            let on = OnBehalf::Client {
                sub: "orchestrator",
                kind: Kind::Key,
                token: None,
            };
            let v = stamped(&signer, &a, on).expect("a header");
            let c = verified(&signer, &v);
            assert_eq!(c["sub"], "orchestrator");
            assert_eq!(c["client_kind"], "key");
            assert_eq!(c["aud"], "echo");
            let (iat, exp) = (c["iat"].as_u64().unwrap(), c["exp"].as_u64().unwrap());
            assert!(exp > iat && exp - iat <= 60, "{c}");
            assert!(c["jti"].as_str().is_some_and(|j| !j.is_empty()));
            // Reused for the same client, kind and agent; another kind gets its own.
            assert_eq!(stamped(&signer, &a, on), Some(v.clone()));
            let other = OnBehalf::Client {
                sub: "orchestrator",
                kind: Kind::Certificate,
                token: None,
            };
            assert_ne!(stamped(&signer, &a, other), Some(v));
        }
    }

    #[test]
    fn keys_are_published_without_their_private_part_and_named_by_thumbprint() {
        let (_dir, ec, ed) = keys();
        let a = Signer::load("https://gw.example", &[ec.clone(), ed.clone()]).expect("keys");
        let b = Signer::load("https://gw.example", &[ec, ed]).expect("keys");
        let set: Value = serde_json::from_slice(&a.jwks()).expect("json");
        let keys = set["keys"].as_array().expect("keys");
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0]["alg"], "ES256");
        assert_eq!(keys[1]["alg"], "EdDSA");
        assert!(keys.iter().all(|k| k.get("d").is_none()), "{set}");
        // The same files give the same set on every replica.
        assert_eq!(a.jwks(), b.jwks());
    }

    #[test]
    fn a_token_callers_assertion_carries_its_providers_identity_and_never_outlives_it() {
        let (_dir, ec, _) = keys();
        let signer = Signer::load("https://gw.example", &[ec]).expect("keys");
        let now = jwt::now();
        let payload = json!({"iss": "https://idp", "sub": "u-1", "aud": ["gw", "downstream"],
            "exp": now + 10, "email": "u@example.com", "groups": ["x"]});
        let token = format!("e30.{}.c2ln", B64.encode(payload.to_string()));
        let on = OnBehalf::Client {
            sub: "jwt:corp:u-1",
            kind: Kind::Token,
            token: Some(&token),
        };
        let v = stamped(&signer, &agent(Identity::Assertion), on).expect("a header");
        let c = verified(&signer, &v);
        assert_eq!(c["sub"], "jwt:corp:u-1");
        assert_eq!(
            (&c["idp_iss"], &c["idp_sub"]),
            (&json!("https://idp"), &json!("u-1"))
        );
        assert_eq!(c["email"], "u@example.com");
        assert!(c.get("groups").is_none(), "only the claims named: {c}");
        assert_eq!(c["exp"], now + 10);
        // Not kept: the next is made anew.
        assert_ne!(stamped(&signer, &agent(Identity::Assertion), on), Some(v));

        // identity = "token": the token itself, for its audience only.
        let v = stamped(&signer, &agent(Identity::Token), on).expect("a header");
        assert_eq!(v.to_str().unwrap(), token);
        let mut a = agent(Identity::Token);
        a.token_audience = Some("elsewhere".into());
        let mut h = HeaderMap::new();
        assert_eq!(
            signer.stamp(&a, on, &mut h),
            Err(Refused {
                audience: "elsewhere".into()
            })
        );
        // A key caller of a token agent gets an assertion.
        let key = OnBehalf::Client {
            sub: "k",
            kind: Kind::Key,
            token: None,
        };
        let v = stamped(&signer, &agent(Identity::Token), key).expect("a header");
        assert_eq!(verified(&signer, &v)["client_kind"], "key");
    }

    #[test]
    fn the_gateways_own_calls_name_the_owner_and_the_card_fetch_no_one() {
        let (_dir, _, ed) = keys();
        let signer = Signer::load("https://gw.example", &[ed]).expect("keys");
        let a = agent(Identity::Assertion);
        let v = stamped(&signer, &a, OnBehalf::Owner(Some("alice"))).expect("a header");
        let c = verified(&signer, &v);
        assert_eq!(
            (&c["sub"], &c["client_kind"]),
            (&json!("alice"), &json!("gateway"))
        );
        assert_eq!(stamped(&signer, &a, OnBehalf::Nobody), None);
        assert_eq!(
            stamped(&signer, &agent(Identity::None), OnBehalf::Owner(Some("a"))),
            None
        );
    }

    #[test]
    fn a_file_that_is_no_usable_key_is_refused_with_its_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rsa = key_file(dir.path(), "x.pem", "not a key");
        let e = Signer::load("https://gw", std::slice::from_ref(&rsa))
            .err()
            .expect("refused");
        assert_eq!(e.path, rsa);
        assert!(check_key(Path::new(&rsa)).is_err());
    }
}
