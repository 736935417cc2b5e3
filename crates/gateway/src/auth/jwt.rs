//! JWT bearer tokens (`[auth.jwt]`): verified against the keys of a JWKS file, with a fixed
//! allow-list of algorithms (RS256, ES256, EdDSA). A token's `alg` must be one of them *and*
//! the algorithm of the key that checks it: never `none`, and never HMAC with a public key (the
//! classic confusion, where a verifier that trusts the header checks an HS256 signature made
//! with the public key as the secret).

use std::path::Path;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::config::JwtConfig;

/// The algorithms accepted, whatever a token or a key says.
const ALLOWED: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// The longest `sub` accepted: it names the client in logs and records the owner of its tasks.
const MAX_SUB: usize = 256;

/// What a verified token says about its client.
#[derive(Debug, Deserialize)]
pub struct Claims {
    /// The client's name.
    pub sub: String,
    /// Expiry, Unix seconds (required and checked by the verifier).
    pub exp: u64,
    /// The agents it may use, when it has no `[[clients]]` entry.
    #[serde(default)]
    pub a2a_agents: Option<Vec<String>>,
    /// Its rights, when it has no `[[clients]]` entry.
    #[serde(default)]
    pub a2a_can: Option<Vec<String>>,
    /// The OAuth scopes granted (RFC 8693 / RFC 9068: one space-separated string).
    #[serde(default)]
    pub scope: Scopes,
    /// The scopes as Entra ID (a space-separated string) and Okta (an array) name them.
    #[serde(default)]
    pub scp: Scopes,
}

impl Claims {
    /// The token's scopes: [`scopes`] of its `scope` and `scp` claims.
    pub fn scopes(&self) -> Option<impl Iterator<Item = &str>> {
        scopes(&self.scope, &self.scp)
    }
}

/// A token's scopes: its `scope` claim's and its `scp` claim's, in that order (a scope in both
/// comes twice), or `None` when they hold more than [`MAX_SCOPES`] (an identity provider
/// issuing that many to one token is not one a table of scopes can speak for).
pub fn scopes<'a>(scope: &'a Scopes, scp: &'a Scopes) -> Option<impl Iterator<Item = &'a str>> {
    if scope.overflow || scp.overflow || scope.list.len() + scp.list.len() > MAX_SCOPES {
        return None;
    }
    Some(scope.list.iter().chain(&scp.list).map(String::as_str))
}

/// The most scopes one token may carry (`scope` and `scp` together) to be granted by them.
pub const MAX_SCOPES: usize = 256;

/// The longest scope kept (`[[auth.oidc]] scopes` names none longer: a longer one grants
/// nothing, and is dropped as it is read).
pub const MAX_SCOPE_LEN: usize = crate::config::MAX_SCOPE_LEN;

/// A `scope` or `scp` claim: a space-separated string or an array of strings, read leniently
/// (anything else, or an array's non-string item, is no scope: only `[[auth.oidc]]` issuers
/// read scopes, and a claim they cannot read must not refuse an `[auth.jwt]` token that never
/// needed it). At most [`MAX_SCOPES`] are kept; past them, `overflow`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scopes {
    list: Vec<String>,
    overflow: bool,
}

impl Scopes {
    fn push(&mut self, s: &str) {
        if s.is_empty() || s.len() > MAX_SCOPE_LEN {
            return;
        }
        if self.list.len() == MAX_SCOPES {
            self.overflow = true;
            return;
        }
        self.list.push(s.to_owned());
    }
}

impl<'de> Deserialize<'de> for Scopes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Scopes, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};

        /// One item of an array: a string, or nothing.
        struct Item(Option<String>);

        impl<'de> Deserialize<'de> for Item {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Item, D::Error> {
                d.deserialize_any(ItemVisitor)
            }
        }

        struct ItemVisitor;

        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = Item;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a scope")
            }
            fn visit_str<E>(self, s: &str) -> Result<Item, E> {
                // An array's item is one scope: one with a space in it names no scope.
                Ok(Item((!s.contains(' ')).then(|| s.to_owned())))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_unit<E>(self) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Item(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Item(None))
            }
        }

        struct ClaimVisitor;

        impl<'de> Visitor<'de> for ClaimVisitor {
            type Value = Scopes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a space-separated string or an array of strings")
            }
            fn visit_str<E>(self, s: &str) -> Result<Scopes, E> {
                let mut out = Scopes::default();
                // RFC 6749 3.3: scope-tokens separated by spaces (%x20).
                for one in s.split(' ') {
                    out.push(one);
                }
                Ok(out)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scopes, A::Error> {
                let mut out = Scopes::default();
                while let Some(Item(one)) = seq.next_element::<Item>()? {
                    if let Some(one) = one {
                        out.push(&one);
                    }
                }
                Ok(out)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Scopes, E> {
                Ok(Scopes::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Scopes, E> {
                Ok(Scopes::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Scopes, E> {
                Ok(Scopes::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Scopes, E> {
                Ok(Scopes::default())
            }
            fn visit_unit<E>(self) -> Result<Scopes, E> {
                Ok(Scopes::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scopes, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scopes::default())
            }
        }

        d.deserialize_any(ClaimVisitor)
    }
}

/// Now, in Unix seconds (what `exp` is compared with).
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why a token was refused: the reason label of `a2a_gateway_auth_failures_total`, and a
/// message for the 401 that names no key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtError {
    /// Past `exp` (with the leeway).
    Expired,
    /// Anything else: malformed, wrong algorithm, bad signature, wrong `iss` or `aud`, not yet
    /// valid, no usable `sub`.
    Invalid(&'static str),
}

/// Why a JWKS file cannot be used (`check-config` and start say which file, and why).
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// An `[[auth.oidc]]` issuer's client cannot be built (its `ca_file`).
    #[error("[[auth.oidc]] {name:?}: {why}")]
    Oidc {
        /// The issuer's name.
        name: String,
        /// Why.
        why: String,
    },
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The file is not a JWKS document (`{"keys": [...]}`).
    #[error("{path} is not a JWKS document: {source}")]
    NotJwks {
        /// The file.
        path: String,
        /// What the JSON reader said.
        source: serde_json::Error,
    },
    /// No key of the set can verify tokens: each one's reason.
    #[error("{path} has no usable signing key: {}", if .skipped.is_empty() { "no keys".to_owned() } else { .skipped.join("; ") })]
    NoUsableKey {
        /// The file.
        path: String,
        /// Why each key was skipped (`key "kid" ...`).
        skipped: Vec<String>,
    },
    /// `check-config`: keys that would never verify a token (too weak, for encryption, for no
    /// allowed algorithm), each named by its key id.
    #[error("{path} has keys the gateway would never use: {}; remove them from the file", .refused.join("; "))]
    Refused {
        /// The file.
        path: String,
        /// Each key's reason (`key "kid" ...`).
        refused: Vec<String>,
    },
}

/// Why one key of a set is not used (the set may still have others).
#[derive(Debug, thiserror::Error)]
enum KeyProblem {
    #[error("is a symmetric (oct) key; only RS256, ES256 and EdDSA keys are used")]
    Symmetric,
    #[error("has a curve other than P-256 or Ed25519")]
    Curve,
    #[error("is for {0}; only RS256, ES256 and EdDSA are accepted")]
    Algorithm(String),
    #[error("says alg {said:?} but is a key for {implied:?}")]
    Mismatch { said: Algorithm, implied: Algorithm },
    #[error("is an RSA key of {0} bits; at least {MIN_RSA_BITS} are required")]
    Weak(usize),
    #[error("{0}")]
    Unreadable(jsonwebtoken::errors::Error),
}

/// The shortest RSA modulus accepted (NIST SP 800-131A: 2048 bits and up since 2014).
const MIN_RSA_BITS: usize = 2048;

/// The length in bits of an RSA JWK's modulus (`n`, base64url), leading zero bits not counted.
fn rsa_bits(n: &str) -> Option<usize> {
    use base64::Engine;
    let b = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(n.trim_end_matches('='))
        .ok()?;
    let first = b.iter().position(|&x| x != 0)?;
    Some((b.len() - first) * 8 - b[first].leading_zeros() as usize)
}

/// One usable key of a set.
pub(super) struct Key {
    pub(super) kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
    /// The SHA-256 of the JWK as published: the same key in two fetches of a set, another
    /// key under a reused `kid` (a verification made with it is dropped when it goes).
    pub(super) fp: [u8; 32],
}

impl Key {
    /// The algorithm it verifies.
    pub(super) fn alg(&self) -> Algorithm {
        self.alg
    }
}

/// Verifies tokens against the keys read from `jwks_file`.
pub struct Verifier {
    keys: Vec<Key>,
    /// One per allowed algorithm (a [`Validation`] names the algorithms it accepts).
    validations: Vec<(Algorithm, Validation)>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("keys", &self.keys.len())
            .finish()
    }
}

/// The algorithm a JWK is for: its `alg` if it says one, else what its key type implies. Keys
/// for any other algorithm are not used.
fn key_alg(jwk: &Jwk) -> Result<Algorithm, KeyProblem> {
    let implied = match &jwk.algorithm {
        AlgorithmParameters::RSA(p) => match rsa_bits(&p.n) {
            Some(bits) if bits >= MIN_RSA_BITS => Algorithm::RS256,
            bits => return Err(KeyProblem::Weak(bits.unwrap_or(0))),
        },
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        AlgorithmParameters::OctetKey(_) => return Err(KeyProblem::Symmetric),
        _ => return Err(KeyProblem::Curve),
    };
    let said = match jwk.common.key_algorithm {
        None => return Ok(implied),
        Some(KeyAlgorithm::RS256) => Algorithm::RS256,
        Some(KeyAlgorithm::ES256) => Algorithm::ES256,
        Some(KeyAlgorithm::EdDSA) => Algorithm::EdDSA,
        Some(other) => return Err(KeyProblem::Algorithm(format!("{other:?}"))),
    };
    if said != implied {
        return Err(KeyProblem::Mismatch { said, implied });
    }
    Ok(said)
}

impl Verifier {
    /// Read and check the key set (see [`read_keys`]).
    pub fn load(cfg: &JwtConfig) -> Result<Verifier, JwksError> {
        let keys = read_keys(Path::new(&cfg.jwks_file))?;
        let validations = validations(&cfg.issuer, &cfg.audience, cfg.leeway.as_secs(), &ALLOWED);
        Ok(Verifier { keys, validations })
    }

    /// The claims of a valid token.
    pub fn verify(&self, token: &str) -> Result<Claims, JwtError> {
        verify_with(&self.keys, &self.validations, token).map(|(claims, _)| claims)
    }
}

/// The [`Validation`]s of a token of `issuer` for `audience`: one per algorithm of `algs`.
pub(super) fn validations(
    issuer: &str,
    audience: &str,
    leeway: u64,
    algs: &[Algorithm],
) -> Vec<(Algorithm, Validation)> {
    algs.iter()
        .map(|&alg| {
            let mut v = Validation::new(alg);
            v.set_issuer(&[issuer]);
            v.set_audience(&[audience]);
            v.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
            v.validate_nbf = true;
            v.leeway = leeway;
            (alg, v)
        })
        .collect()
}

/// The algorithm a name of `[[auth.oidc]] algorithms` stands for (only the allowed ones).
pub(super) fn allowed_alg(name: &str) -> Option<Algorithm> {
    ALLOWED
        .into_iter()
        .find(|a| format!("{a:?}").eq_ignore_ascii_case(name))
}

/// The claims of a token valid under one of `validations` and signed by one of `keys`, and
/// the fingerprint of the key that verified it.
pub(super) fn verify_with(
    keys: &[Key],
    validations: &[(Algorithm, Validation)],
    token: &str,
) -> Result<(Claims, [u8; 32]), JwtError> {
    let header =
        jsonwebtoken::decode_header(token).map_err(|_| JwtError::Invalid("malformed token"))?;
    let Some((_, validation)) = validations.iter().find(|(a, _)| *a == header.alg) else {
        return Err(JwtError::Invalid("token algorithm is not accepted"));
    };
    let mut candidates = keys.iter().filter(|k| {
        k.alg == header.alg
            && match (&header.kid, &k.kid) {
                (Some(want), Some(have)) => want == have,
                // A token without a kid is tried on every key of its algorithm.
                (None, _) => true,
                (Some(_), None) => true,
            }
    });
    let mut outcome = Err(JwtError::Invalid("no key for this token"));
    for key in &mut candidates {
        match jsonwebtoken::decode::<Claims>(token, &key.key, validation) {
            Ok(data) => {
                outcome = Ok((data.claims, key.fp));
                break;
            }
            Err(e) => {
                use jsonwebtoken::errors::ErrorKind as K;
                let err = match e.kind() {
                    K::InvalidSignature => JwtError::Invalid("bad signature"),
                    K::ExpiredSignature => JwtError::Expired,
                    K::ImmatureSignature => JwtError::Invalid("token not yet valid (nbf)"),
                    K::InvalidIssuer => JwtError::Invalid("wrong issuer"),
                    K::InvalidAudience => JwtError::Invalid("wrong audience"),
                    K::MissingRequiredClaim(_) => JwtError::Invalid("a required claim is missing"),
                    _ => JwtError::Invalid("malformed token"),
                };
                // Only a bad signature may mean another key of the set is the right one.
                let again = err == JwtError::Invalid("bad signature");
                outcome = Err(err);
                if !again {
                    break;
                }
            }
        }
    }
    let (claims, fp) = outcome?;
    let sub_ok = !claims.sub.is_empty()
        && claims.sub.len() <= MAX_SUB
        && !claims.sub.chars().any(char::is_control);
    if !sub_ok {
        return Err(JwtError::Invalid(
            "sub must be 1-256 characters without control characters",
        ));
    }
    Ok((claims, fp))
}

/// The usable keys of a JWKS file, or why it cannot be used. Keys for encryption (`use: enc`)
/// or for an algorithm outside the allow-list are skipped with a warning (identity providers
/// publish such keys beside their signing keys); a set with no usable key is refused.
fn read_keys(path: &Path) -> Result<Vec<Key>, JwksError> {
    let (keys, skipped) = read_set(path)?;
    for s in &skipped {
        tracing::warn!(jwks = %path.display(), "skipping a JWKS key: {s}");
    }
    Ok(keys)
}

/// The usable keys of a JWKS file and why each other key is not used.
fn read_set(path: &Path) -> Result<(Vec<Key>, Vec<String>), JwksError> {
    let shown = || path.display().to_string();
    let text = std::fs::read(path).map_err(|source| JwksError::Read {
        path: shown(),
        source,
    })?;
    // Each key on its own: one of a kind this library does not know (ES512, say) is skipped,
    // not a reason to refuse the set.
    #[derive(Deserialize)]
    struct Set {
        keys: Vec<serde_json::Value>,
    }
    let set: Set = serde_json::from_slice(&text).map_err(|source| JwksError::NotJwks {
        path: shown(),
        source,
    })?;
    let (keys, skipped) = usable_keys(set.keys);
    if keys.is_empty() {
        return Err(JwksError::NoUsableKey {
            path: shown(),
            skipped,
        });
    }
    Ok((keys, skipped))
}

/// The usable keys of a set's `keys`, and why each other key is not used.
pub(super) fn usable_keys(raw_keys: Vec<serde_json::Value>) -> (Vec<Key>, Vec<String>) {
    let set = RawSet { keys: raw_keys };
    let mut keys = Vec::with_capacity(set.keys.len());
    let mut skipped = Vec::new();
    for (i, raw) in set.keys.into_iter().enumerate() {
        let name = raw
            .get("kid")
            .and_then(|k| k.as_str())
            .map_or_else(|| format!("keys[{i}]"), str::to_owned);
        let fp = {
            use sha2::Digest;
            sha2::Sha256::digest(serde_json::to_vec(&raw).unwrap_or_default())
        };
        let jwk = match serde_json::from_value::<Jwk>(raw) {
            Ok(jwk) => jwk,
            Err(e) => {
                skipped.push(format!("key {name:?} is not a key this gateway reads: {e}"));
                continue;
            }
        };
        let jwk = &jwk;
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            skipped.push(format!("key {name:?} is for encryption (use: enc)"));
            continue;
        }
        let usable = key_alg(jwk).and_then(|alg| {
            DecodingKey::from_jwk(jwk)
                .map(|key| (alg, key))
                .map_err(KeyProblem::Unreadable)
        });
        match usable {
            Ok((alg, key)) => keys.push(Key {
                kid: jwk.common.key_id.clone(),
                alg,
                key,
                fp: fp.into(),
            }),
            Err(e) => skipped.push(format!("key {name:?} {e}")),
        }
    }
    (keys, skipped)
}

struct RawSet {
    keys: Vec<serde_json::Value>,
}

/// The check of `check-config` (and of start and reload, which check the same way): the file
/// holds a usable key set, and no key the gateway would never use. A weak RSA key or one for
/// another algorithm is an operator's mistake to fix, not a key to ignore quietly: it may be
/// the one the identity provider signs with tomorrow.
pub fn check_jwks(path: &Path) -> Result<(), JwksError> {
    let (_, refused) = read_set(path)?;
    if refused.is_empty() {
        return Ok(());
    }
    Err(JwksError::Refused {
        path: path.display().to_string(),
        refused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(json: &str) -> tempfile::NamedTempFile {
        use std::io::Write;
        let mut f = tempfile::NamedTempFile::new().expect("temp");
        f.write_all(json.as_bytes()).expect("write");
        f
    }

    const ED: &str = r#"{"kty":"OKP","crv":"Ed25519","kid":"ed","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#;

    #[test]
    fn keys_for_encryption_or_other_algorithms_are_skipped_not_fatal() {
        let f = write(&format!(
            r#"{{"keys":[
            {{"kty":"RSA","kid":"enc","use":"enc","alg":"RSA-OAEP","n":"sXch","e":"AQAB"}},
            {{"kty":"EC","kid":"p521","crv":"P-521","alg":"ES512","x":"AQ","y":"AQ"}},
            {{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}},
            {ED}]}}"#
        ));
        let keys = read_keys(f.path()).expect("one usable key");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("ed"));
        assert_eq!(keys[0].alg, Algorithm::EdDSA);
    }

    #[test]
    fn a_set_without_a_usable_key_is_refused_with_the_reasons() {
        let f = write(r#"{"keys":[{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}]}"#);
        let e = read_keys(f.path()).err().expect("refused");
        assert!(
            e.to_string().contains("no usable signing key") && e.to_string().contains("symmetric"),
            "{e}"
        );
        let f = write(r#"{"keys":[]}"#);
        assert!(read_keys(f.path()).is_err());
        let f = write("not json");
        assert!(read_keys(f.path())
            .err()
            .expect("refused")
            .to_string()
            .contains("JWKS"));
        assert!(read_keys(Path::new("/nonexistent/jwks.json")).is_err());
    }

    #[test]
    fn check_config_refuses_every_key_it_would_skip_naming_each() {
        // A 1024-bit modulus: 128 bytes, the first with its top bit set.
        use base64::Engine;
        let n = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xc1u8; 128]);
        let f = write(&format!(
            r#"{{"keys":[
            {{"kty":"RSA","kid":"rsa-1024","n":"{n}","e":"AQAB"}},
            {{"kty":"EC","kid":"p521","crv":"P-521","alg":"ES512","x":"AQ","y":"AQ"}},
            {{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}},
            {ED}]}}"#
        ));
        let e = check_jwks(f.path()).expect_err("refused").to_string();
        for kid in ["rsa-1024", "p521", "hmac"] {
            assert!(e.contains(&format!("key \"{kid}\"")), "{kid}: {e}");
        }
        assert!(e.contains("1024 bits"), "{e}");
        assert!(!e.contains("\"ed\""), "the good key is not named: {e}");
        // The loader still uses the good key (the set was checked when the config was).
        assert_eq!(read_keys(f.path()).expect("usable").len(), 1);
        let good = write(&format!(r#"{{"keys":[{ED}]}}"#));
        assert!(check_jwks(good.path()).is_ok());
    }

    #[test]
    fn rsa_moduli_are_measured_in_bits() {
        use base64::Engine;
        let enc = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let mut m = vec![0u8, 0x80];
        m.extend([0u8; 255]);
        assert_eq!(
            rsa_bits(&enc(&m)),
            Some(2048),
            "a leading zero byte is not counted"
        );
        assert_eq!(rsa_bits(&enc(&[0x01; 256])), Some(2041));
        assert_eq!(rsa_bits("!!"), None);
    }

    fn scopes_of(claims: serde_json::Value) -> Option<Vec<String>> {
        let mut c = serde_json::json!({"sub": "s", "exp": 1});
        if let (Some(c), serde_json::Value::Object(x)) = (c.as_object_mut(), claims) {
            c.extend(x);
        }
        let claims: Claims = serde_json::from_value(c).expect("claims");
        claims.scopes().map(|s| s.map(str::to_owned).collect())
    }

    #[test]
    fn scopes_are_read_from_scope_and_scp_as_a_string_or_an_array() {
        use serde_json::json;
        let of = |v| scopes_of(v).expect("read");
        // RFC 9068's `scope`, and Entra's `scp`: one space-separated string.
        assert_eq!(
            of(json!({"scope": "a2a.read  a2a.send "})),
            ["a2a.read", "a2a.send"]
        );
        assert_eq!(of(json!({"scp": "User.Read a2a"})), ["User.Read", "a2a"]);
        // Okta's `scp`: an array; an item that is not one scope is none.
        assert_eq!(
            of(json!({"scp": ["a2a.read", 5, null, "two words", ["x"], {"y": 1}, "a2a"]})),
            ["a2a.read", "a2a"]
        );
        // Both claims: both read, `scope` first.
        assert_eq!(of(json!({"scope": "a", "scp": ["b"]})), ["a", "b"]);
        // Neither, or a claim of another shape: no scope, and the token is not refused for it.
        assert!(of(json!({})).is_empty());
        assert!(of(json!({"scope": 7, "scp": {"a": "b"}})).is_empty());
        assert!(of(json!({"scope": null, "scp": true})).is_empty());
        // A scope no config could name is dropped as it is read.
        let long = "s".repeat(MAX_SCOPE_LEN + 1);
        assert_eq!(of(json!({ "scope": format!("{long} ok") })), ["ok"]);
        // Past MAX_SCOPES, in one claim or both together: the token's scopes speak for nothing.
        let many: Vec<String> = (0..=MAX_SCOPES).map(|i| format!("s{i}")).collect();
        assert_eq!(scopes_of(json!({ "scp": many })), None);
        assert_eq!(scopes_of(json!({ "scope": many.join(" ") })), None);
        let half: Vec<String> = many[..MAX_SCOPES / 2 + 1].to_vec();
        assert_eq!(
            scopes_of(json!({ "scope": half.join(" "), "scp": half })),
            None
        );
        assert_eq!(
            of(json!({ "scp": many[..MAX_SCOPES].to_vec() })).len(),
            MAX_SCOPES
        );
    }

    #[test]
    fn a_key_whose_alg_contradicts_its_type_is_skipped() {
        let f = write(&format!(
            r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","kid":"liar","alg":"RS256","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}},{ED}]}}"#
        ));
        let keys = read_keys(f.path()).expect("usable");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("ed"));
    }
}
