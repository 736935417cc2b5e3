//! Standard Webhooks signing: what lets a subscriber prove that a delivery came from us and was
//! not replayed later.
//!
//! The scheme (<https://www.standardwebhooks.com>): three headers, `webhook-id`,
//! `webhook-timestamp` (unix seconds) and `webhook-signature`, a space-separated list of
//! `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`. A list, so that a subscriber can
//! accept the old and the new secret while one is rotated. The timestamp is signed so that a
//! captured delivery cannot be replayed outside the receiver's tolerance (±5 min by convention).
//! Following the standard exactly (rather than a scheme of our own) means subscribers can verify
//! with any of the published libraries.

use std::fmt;
use std::str::FromStr;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use hmac::{Hmac, Mac};
use hyper::header::{HeaderName, HeaderValue};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// The prefix every Standard Webhooks secret carries. Required, so that a secret pasted in some
/// other encoding (hex, raw text) is refused instead of silently used as different key bytes.
pub const SECRET_PREFIX: &str = "whsec_";

/// The signature version this module writes and reads; other versions in a header (e.g. the
/// asymmetric `v1a`) are skipped, not errors, as the standard asks.
const VERSION: &str = "v1";

/// Key length bounds of the standard: shorter keys are weak, longer ones gain nothing for
/// HMAC-SHA256 (its block is 64 bytes).
pub const MIN_KEY_LEN: usize = 24;
/// The upper bound (see [`MIN_KEY_LEN`]).
pub const MAX_KEY_LEN: usize = 64;

// Header names, lower-case as the standard writes them.

/// The message id, the same on every retry: receivers deduplicate on it.
pub const HEADER_ID: &str = "webhook-id";
/// The send time, in unix seconds; part of the signed string.
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// The signatures, `v1,<base64>`, space-separated.
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// Standard base64, padding optional on input: secrets are often written without the trailing
/// `=`, and a receiver should not fail on a signature because of it either.
const B64_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
/// Standard base64 with padding on output, as the reference implementations write it.
const B64: GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A subscriber's signing key. `Debug` and errors never show the key bytes, so a secret can sit
/// in a config struct that gets logged.
#[derive(Clone, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct SigningKey {
    key: Vec<u8>,
}

/// Why a configured webhook secret was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// It does not start with `whsec_`.
    #[error("a webhook secret must start with `{SECRET_PREFIX}`")]
    MissingPrefix,
    /// What follows `whsec_` is not base64.
    #[error("a webhook secret must be `{SECRET_PREFIX}` followed by standard base64")]
    Base64,
    /// The key is shorter or longer than the standard allows.
    #[error("a webhook secret must decode to {MIN_KEY_LEN} to {MAX_KEY_LEN} bytes, not {0}")]
    Length(usize),
}

impl SigningKey {
    /// Parse `whsec_<base64>`. Surrounding whitespace (a secret read from a file with its
    /// newline) is ignored; anything else that is not exactly the standard form is refused.
    pub fn parse(s: &str) -> Result<SigningKey, SecretError> {
        let encoded = s
            .trim()
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SecretError::MissingPrefix)?;
        let key = B64_LENIENT
            .decode(encoded)
            .map_err(|_| SecretError::Base64)?;
        if !(MIN_KEY_LEN..=MAX_KEY_LEN).contains(&key.len()) {
            return Err(SecretError::Length(key.len()));
        }
        Ok(SigningKey { key })
    }

    fn mac(&self, msg_id: &str, timestamp_secs: i64, body: &[u8]) -> [u8; 32] {
        // HMAC accepts keys of any length, so this cannot fail; the match keeps the module free
        // of panics all the same (an empty-key MAC would simply never verify).
        let mut mac = match HmacSha256::new_from_slice(&self.key) {
            Ok(mac) => mac,
            Err(_) => return [0; 32],
        };
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp_secs.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.finalize().into_bytes().into()
    }
}

impl FromStr for SigningKey {
    type Err = SecretError;
    fn from_str(s: &str) -> Result<SigningKey, SecretError> {
        SigningKey::parse(s)
    }
}

impl TryFrom<String> for SigningKey {
    type Error = SecretError;
    fn try_from(s: String) -> Result<SigningKey, SecretError> {
        SigningKey::parse(&s)
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

/// The `webhook-signature` value for one delivery: `v1,<base64 HMAC-SHA256>` over
/// `"{msg_id}.{timestamp_secs}.{body}"`, the body as the exact bytes sent.
pub fn sign(secret: &SigningKey, msg_id: &str, timestamp_secs: i64, body: &[u8]) -> String {
    format!(
        "{VERSION},{}",
        B64.encode(secret.mac(msg_id, timestamp_secs, body))
    )
}

/// Why [`verify`] refused a delivery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Older than the tolerance: possibly a replay of a captured delivery.
    #[error("webhook timestamp is too old")]
    TooOld,
    /// Newer than the tolerance: a clock far off, or a message crafted for a later replay.
    #[error("webhook timestamp is too far in the future")]
    TooNew,
    /// The header held no `v1` signature at all.
    #[error("no v1 signature in the webhook-signature header")]
    NoSignature,
    /// `v1` signatures were present but none matched.
    #[error("no webhook signature matches")]
    Mismatch,
}

/// Check a delivery as a receiver would: the timestamp within `±tolerance_secs` of `now_secs`
/// (checked first, so a stale message is refused even when correctly signed), then any `v1`
/// entry of the space-separated `signature_header` matching. Comparison is constant-time so the
/// time taken does not tell an attacker how many leading bytes of a forged signature were right.
/// Entries of other versions or malformed entries are skipped, as the standard asks.
#[allow(clippy::too_many_arguments)]
pub fn verify(
    secret: &SigningKey,
    msg_id: &str,
    timestamp_secs: i64,
    body: &[u8],
    signature_header: &str,
    now_secs: i64,
    tolerance_secs: u64,
) -> Result<(), VerifyError> {
    // i128: no overflow whatever the (attacker-supplied) timestamp.
    let skew = i128::from(now_secs) - i128::from(timestamp_secs);
    if skew > i128::from(tolerance_secs) {
        return Err(VerifyError::TooOld);
    }
    if -skew > i128::from(tolerance_secs) {
        return Err(VerifyError::TooNew);
    }
    let expected = secret.mac(msg_id, timestamp_secs, body);
    let mut seen_v1 = false;
    for entry in signature_header.split(' ').filter(|e| !e.is_empty()) {
        let Some((version, encoded)) = entry.split_once(',') else {
            continue;
        };
        if version != VERSION {
            continue;
        }
        seen_v1 = true;
        let Ok(candidate) = B64_LENIENT.decode(encoded) else {
            continue;
        };
        if bool::from(candidate.as_slice().ct_eq(&expected)) {
            return Ok(());
        }
    }
    Err(if seen_v1 {
        VerifyError::Mismatch
    } else {
        VerifyError::NoSignature
    })
}

/// A message id [`headers`] refuses: it would not be a safe header value or signed string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("webhook message id must be 1 to {MAX_MSG_ID_LEN} characters of [A-Za-z0-9_-]")]
pub struct InvalidMsgId;

/// The longest message id [`headers`] accepts.
pub const MAX_MSG_ID_LEN: usize = 256;

/// The Standard Webhooks headers for one delivery: `webhook-id`, `webhook-timestamp` and, when
/// the subscriber has a secret, `webhook-signature`.
///
/// The id must be a plain token (`[A-Za-z0-9_-]`, as our `msg_…` ids are). Beyond being a valid
/// header value this matters for the signature: the signed string is `id.timestamp.body`, so an
/// id containing `.` would let one signature stand for a different (id, timestamp, body) split.
/// The id is also what receivers deduplicate on, so it must be the same on every retry.
pub fn headers(
    keys: &[SigningKey],
    msg_id: &str,
    timestamp_secs: i64,
    body: &[u8],
) -> Result<Vec<(HeaderName, HeaderValue)>, InvalidMsgId> {
    let valid = !msg_id.is_empty()
        && msg_id.len() <= MAX_MSG_ID_LEN
        && msg_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid {
        return Err(InvalidMsgId);
    }
    let id = HeaderValue::from_str(msg_id).map_err(|_| InvalidMsgId)?;
    let mut out = vec![
        (HeaderName::from_static(HEADER_ID), id),
        (
            HeaderName::from_static(HEADER_TIMESTAMP),
            HeaderValue::from(timestamp_secs),
        ),
    ];
    if !keys.is_empty() {
        // One `v1,<sig>` per key, space-separated (Standard Webhooks: a receiver accepts the
        // delivery if any signature verifies, so a key can be rotated without a gap).
        let sigs: Vec<String> = keys
            .iter()
            .map(|k| sign(k, msg_id, timestamp_secs, body))
            .collect();
        // Base64 and a decimal number: always a valid header value.
        if let Ok(sig) = HeaderValue::from_str(&sigs.join(" ")) {
            out.push((HeaderName::from_static(HEADER_SIGNATURE), sig));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The official Standard Webhooks test vector.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const EXPECTED: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    const TOL: u64 = 300;

    fn secret() -> SigningKey {
        SigningKey::parse(SECRET).unwrap()
    }

    #[test]
    fn signs_the_official_test_vector() {
        assert_eq!(sign(&secret(), MSG_ID, TS, BODY), EXPECTED);
    }

    #[test]
    fn verifies_the_official_test_vector() {
        assert_eq!(
            verify(&secret(), MSG_ID, TS, BODY, EXPECTED, TS, TOL),
            Ok(())
        );
    }

    #[test]
    fn signature_covers_id_timestamp_and_body() {
        let s = secret();
        assert_eq!(
            verify(&s, "msg_other", TS, BODY, EXPECTED, TS, TOL),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify(&s, MSG_ID, TS + 1, BODY, EXPECTED, TS, TOL),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify(
                &s,
                MSG_ID,
                TS,
                br#"{"test": 2432232315}"#,
                EXPECTED,
                TS,
                TOL
            ),
            Err(VerifyError::Mismatch)
        );
        let other = SigningKey::parse("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").unwrap();
        assert_eq!(
            verify(&other, MSG_ID, TS, BODY, EXPECTED, TS, TOL),
            Err(VerifyError::Mismatch)
        );
    }

    #[test]
    fn accepts_any_matching_entry_of_a_list() {
        let header = format!("v1,Zm9vYmFy v1a,c29tZXRoaW5n   {EXPECTED} v2,abc");
        assert_eq!(
            verify(&secret(), MSG_ID, TS, BODY, &header, TS, TOL),
            Ok(())
        );
        // The matching entry first works too.
        let header = format!("{EXPECTED} v1,Zm9vYmFy");
        assert_eq!(
            verify(&secret(), MSG_ID, TS, BODY, &header, TS, TOL),
            Ok(())
        );
    }

    #[test]
    fn tells_missing_from_wrong_signatures() {
        let s = secret();
        for header in ["", "   ", "v1a,abc v2,def", "garbage"] {
            assert_eq!(
                verify(&s, MSG_ID, TS, BODY, header, TS, TOL),
                Err(VerifyError::NoSignature),
                "{header:?}"
            );
        }
        for header in ["v1,", "v1,!!notbase64!!", "v1,Zm9vYmFy"] {
            assert_eq!(
                verify(&s, MSG_ID, TS, BODY, header, TS, TOL),
                Err(VerifyError::Mismatch),
                "{header:?}"
            );
        }
    }

    #[test]
    fn a_truncated_signature_does_not_verify() {
        // Comparing only the common prefix would accept this.
        let raw = B64.decode(&EXPECTED[3..]).unwrap();
        let truncated = format!("v1,{}", B64.encode(&raw[..16]));
        assert_eq!(
            verify(&secret(), MSG_ID, TS, BODY, &truncated, TS, TOL),
            Err(VerifyError::Mismatch)
        );
    }

    #[test]
    fn unpadded_signature_verifies() {
        let unpadded = EXPECTED.trim_end_matches('=');
        assert_eq!(
            verify(&secret(), MSG_ID, TS, BODY, unpadded, TS, TOL),
            Ok(())
        );
    }

    #[test]
    fn timestamp_tolerance_is_inclusive_both_ways() {
        let s = secret();
        let tol = TOL as i64;
        assert_eq!(
            verify(&s, MSG_ID, TS, BODY, EXPECTED, TS + tol, TOL),
            Ok(())
        );
        assert_eq!(
            verify(&s, MSG_ID, TS, BODY, EXPECTED, TS - tol, TOL),
            Ok(())
        );
        assert_eq!(
            verify(&s, MSG_ID, TS, BODY, EXPECTED, TS + tol + 1, TOL),
            Err(VerifyError::TooOld)
        );
        assert_eq!(
            verify(&s, MSG_ID, TS, BODY, EXPECTED, TS - tol - 1, TOL),
            Err(VerifyError::TooNew)
        );
    }

    #[test]
    fn stale_timestamp_is_refused_even_when_signed_correctly() {
        // A replay: valid signature, old message.
        assert_eq!(
            verify(&secret(), MSG_ID, TS, BODY, EXPECTED, TS + 3600, TOL),
            Err(VerifyError::TooOld)
        );
    }

    #[test]
    fn extreme_timestamps_do_not_overflow() {
        let s = secret();
        assert_eq!(
            verify(&s, MSG_ID, i64::MIN, BODY, EXPECTED, i64::MAX, u64::MAX / 4),
            Err(VerifyError::TooOld)
        );
        assert_eq!(
            verify(&s, MSG_ID, i64::MAX, BODY, EXPECTED, i64::MIN, TOL),
            Err(VerifyError::TooNew)
        );
    }

    #[test]
    fn secret_requires_prefix_base64_and_length() {
        assert_eq!(
            SigningKey::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap_err(),
            SecretError::MissingPrefix
        );
        assert_eq!(
            SigningKey::parse("WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap_err(),
            SecretError::MissingPrefix
        );
        assert_eq!(
            SigningKey::parse("whsec_not base64!").unwrap_err(),
            SecretError::Base64
        );
        // URL-safe alphabet is not the standard's.
        assert_eq!(
            SigningKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS_").unwrap_err(),
            SecretError::Base64
        );
        assert_eq!(
            SigningKey::parse("whsec_").unwrap_err(),
            SecretError::Length(0)
        );
        // 23 bytes: too short; 24 and 64: the bounds; 65: too long.
        let enc = |n: usize| format!("whsec_{}", B64.encode(vec![7u8; n]));
        assert_eq!(
            SigningKey::parse(&enc(23)).unwrap_err(),
            SecretError::Length(23)
        );
        assert!(SigningKey::parse(&enc(24)).is_ok());
        assert!(SigningKey::parse(&enc(64)).is_ok());
        assert_eq!(
            SigningKey::parse(&enc(65)).unwrap_err(),
            SecretError::Length(65)
        );
    }

    #[test]
    fn secret_accepts_padding_either_way_and_surrounding_whitespace() {
        // 32 bytes encode to 43 characters plus one `=`.
        let padded = format!("whsec_{}", B64.encode([9u8; 32]));
        assert!(padded.ends_with('='));
        let unpadded = padded.trim_end_matches('=').to_string();
        let a = sign(&SigningKey::parse(&padded).unwrap(), MSG_ID, TS, BODY);
        let b = sign(&SigningKey::parse(&unpadded).unwrap(), MSG_ID, TS, BODY);
        assert_eq!(a, b);
        let c = sign(
            &SigningKey::parse(&format!("  {SECRET}\n")).unwrap(),
            MSG_ID,
            TS,
            BODY,
        );
        assert_eq!(c, EXPECTED);
    }

    #[test]
    fn secret_deserializes_from_config_and_never_prints_its_key() {
        let s: SigningKey = serde_json::from_str(&format!("\"{SECRET}\"")).unwrap();
        assert_eq!(sign(&s, MSG_ID, TS, BODY), EXPECTED);
        let printed = format!("{s:?} {:?}", Some(&s));
        assert!(!printed.contains("MfKQ9r8G"), "{printed}");
        assert!(!printed.contains("49, 242"), "{printed}"); // nor the key bytes
        assert!(printed.contains("redacted"));
        let bad: Result<SigningKey, _> = serde_json::from_str("\"nope\"");
        assert!(bad.is_err());
    }

    #[test]
    fn headers_with_a_secret_are_id_timestamp_signature() {
        let h = headers(&[secret()], MSG_ID, TS, BODY).unwrap();
        let pairs: Vec<(&str, &str)> = h
            .iter()
            .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("webhook-id", MSG_ID),
                ("webhook-timestamp", "1614265330"),
                ("webhook-signature", EXPECTED),
            ]
        );
    }

    #[test]
    fn headers_without_a_secret_carry_no_signature() {
        let h = headers(&[], MSG_ID, TS, BODY).unwrap();
        let names: Vec<&str> = h.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["webhook-id", "webhook-timestamp"]);
    }

    #[test]
    fn headers_round_trip_through_verify() {
        let s = secret();
        let h = headers(std::slice::from_ref(&s), "msg_2", 1_700_000_000, b"{}").unwrap();
        let get = |name: &str| {
            h.iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.to_str().unwrap().to_string())
                .unwrap()
        };
        let ts: i64 = get("webhook-timestamp").parse().unwrap();
        assert_eq!(
            verify(
                &s,
                &get("webhook-id"),
                ts,
                b"{}",
                &get("webhook-signature"),
                ts + 10,
                TOL
            ),
            Ok(())
        );
    }

    #[test]
    fn headers_refuse_ids_that_are_not_plain_tokens() {
        let long = "a".repeat(MAX_MSG_ID_LEN + 1);
        for id in ["", "msg.1", "msg 1", "msg\n1", "msg\u{e9}", long.as_str()] {
            assert_eq!(headers(&[], id, TS, BODY), Err(InvalidMsgId), "{id:?}");
        }
        assert!(headers(&[], &"a".repeat(MAX_MSG_ID_LEN), TS, BODY).is_ok());
        assert!(headers(&[], "msg_AZaz09-_", TS, BODY).is_ok());
    }

    #[test]
    fn negative_timestamps_sign_as_their_decimal_form() {
        // Not useful in practice, but the signed string must match what the header carries.
        let s = secret();
        let h = headers(std::slice::from_ref(&s), MSG_ID, -5, BODY).unwrap();
        assert_eq!(h[1].1.to_str().unwrap(), "-5");
        assert_eq!(h[2].1.to_str().unwrap(), sign(&s, MSG_ID, -5, BODY));
    }
}
