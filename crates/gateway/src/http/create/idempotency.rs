//! `Idempotency-Key` on creates (IETF httpapi draft "The Idempotency-Key HTTP Header Field"):
//! the key read from the request, claimed in the ledger before the agent is called, and what a
//! key already claimed answers: the stored answer replayed, 409 while the first request is in
//! flight, 422 for a key reused with another body.
//!
//! Keys are scoped per agent (the route name: the route name and the card's `agent_id` are one
//! scope) and per client: two clients that pick the same key never see each other's answers.

use std::time::Duration;

use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};

use crate::http::body::Body;
use crate::http::error::{ApiError, Code};
use crate::http::exchange::AgentError;
use crate::ledger::{Answer, Claim, Fingerprint};
use crate::state::State;

/// The request header.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Set on a replayed answer.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The longest key accepted.
pub const MAX_KEY_LEN: usize = 255;

/// How long a claim outlives the agent's timeout and the late-answer wait before it lapses by
/// itself (the holder died): room for the ledger calls that follow the answer.
const LEASE_SLACK: Duration = Duration::from_secs(30);

/// The request's key, if it sent one: 1 to 255 visible ASCII characters, bare or as a quoted
/// structured-field string (`"abc"` and `abc` are the same key). Anything else, or more than one
/// `Idempotency-Key` header, is 400 INVALID_REQUEST (the key is not repeated in the message).
pub fn key_of(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut all = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = all.next() else {
        return Ok(None);
    };
    let bad = |why: &str| {
        ApiError::new(
            Code::InvalidRequest,
            format!(
                "Idempotency-Key {why}: it must be 1 to {MAX_KEY_LEN} visible ASCII characters"
            ),
        )
    };
    if all.next().is_some() {
        return Err(bad("is sent more than once"));
    }
    let raw = value.as_bytes();
    let (inner, quoted) = match raw {
        [b'"', inner @ .., b'"'] => (inner, true),
        _ => (raw, false),
    };
    if inner.is_empty() {
        return Err(bad("is empty"));
    }
    if inner.len() > MAX_KEY_LEN {
        return Err(bad("is too long"));
    }
    let visible = |b: &u8| (0x21..=0x7e).contains(b) && !(quoted && (*b == b'"' || *b == b'\\'));
    if !inner.iter().all(visible) {
        return Err(bad("has characters that are not visible ASCII"));
    }
    // Visible ASCII only: always valid UTF-8.
    Ok(Some(String::from_utf8_lossy(inner).into_owned()))
}

/// The scope of a key: the agent's route name, and the client's name when there is one, with
/// its length, so that no client name (a JWT subject may hold `:` or `/`) and key can run into
/// another's: `scripts/5:alice`.
pub fn scope(agent: &str, caller: &crate::auth::Caller) -> String {
    match caller.owner() {
        Some(client) => format!("{agent}/{}:{client}", client.len()),
        None => agent.to_owned(),
    }
}

/// The `Idempotency-Key` an agent is sent for `client`'s `key`: hex SHA-256 of both, so equal
/// keys of two clients differ at the agent, and a client's retries send the same one.
pub fn agent_key(client: &str, key: &str) -> HeaderValue {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(client.as_bytes());
    h.update(b"\n");
    h.update(key.as_bytes());
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    HeaderValue::from_str(&hex).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// A key this request holds in the ledger, until it completes or releases it.
#[derive(Debug, Clone)]
pub struct Held {
    /// The agent's route name.
    pub scope: String,
    /// The key.
    pub key: String,
    /// The fingerprint of this request's body.
    pub fingerprint: Fingerprint,
    /// This request's token, which the ledger checks on complete and release.
    pub token: String,
}

/// What claiming a key gave.
pub enum Claimed {
    /// The key is this request's: call the agent.
    Held(Held),
    /// The key was claimed before: this is the answer (a replay, 409 or 422).
    Answered(Response<Body>),
}

/// Claim `key` in `scope` (see [`scope`]) for the request with this body `fingerprint`, on
/// `agent` (its route name, the metrics label), held
/// at most `timeout` + `late_answer_secs` + slack. A ledger that cannot be asked is 503: a
/// create without its key's protection could be made twice.
pub async fn claim(
    state: &State,
    agent: &str,
    scope: String,
    key: String,
    fingerprint: Fingerprint,
    timeout: Duration,
) -> Result<Claimed, ApiError> {
    let token = crate::ledger::idempotency::new_token();
    let lease = timeout + state.config.late_answer + LEASE_SLACK;
    let claim = state
        .ledger
        .claim_key(&scope, &key, fingerprint, &token, lease)
        .await?;
    let outcome = match &claim {
        Claim::Claimed => "claimed",
        Claim::InFlight { fingerprint: f } | Claim::Done { fingerprint: f, .. }
            if *f != fingerprint =>
        {
            "reused"
        }
        Claim::InFlight { .. } => "in_progress",
        Claim::Done { .. } => "replayed",
        Claim::Full => "full",
    };
    state
        .metrics
        .idempotency_keys
        .with_label_values(&[agent, outcome])
        .inc();
    match claim {
        Claim::Claimed => Ok(Claimed::Held(Held {
            scope,
            key,
            fingerprint,
            token,
        })),
        Claim::InFlight { fingerprint: f } | Claim::Done { fingerprint: f, .. }
            if f != fingerprint =>
        {
            Err(ApiError::new(
                Code::IdempotencyKeyReused,
                "this Idempotency-Key was used for a create with another body; use a new key for a new request",
            ))
        }
        Claim::InFlight { .. } => Err(ApiError::new(
            Code::IdempotencyInProgress,
            "a create with this Idempotency-Key is in flight; retry later for its answer",
        )
        .with_header(RETRY_AFTER, HeaderValue::from_static("1"))),
        Claim::Done { answer, .. } => Ok(Claimed::Answered(replay(answer))),
        // Only the context store refuses; an idempotency key is never this.
        Claim::Full => Err(crate::ledger::LedgerError::Full.into()),
    }
}

/// The stored answer, marked `idempotent-replayed: true`.
fn replay(answer: Answer) -> Response<Body> {
    let mut res = Response::new(Body::full(answer.body));
    *res.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    if let Ok(ct) = HeaderValue::from_str(&answer.content_type) {
        if !answer.content_type.is_empty() {
            res.headers_mut().insert(CONTENT_TYPE, ct);
        }
    }
    res.headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    res
}

/// The answer to keep for replay: status, Content-Type and body of an answer the gateway built
/// whole (every answer to a create is). An agent's error answer (`agent`'s) is kept with its
/// text withheld: a replay is a fresh answer the pipeline cannot tell from the gateway's own.
pub fn snapshot(res: &Response<Body>, agent: &str) -> Option<Answer> {
    let Body::Full(body) = res.body() else {
        return None;
    };
    if let Some(super::ReplayAs(kept)) = res.extensions().get::<super::ReplayAs>() {
        return Some(Answer {
            status: res.status().as_u16(),
            content_type: "application/json".to_owned(),
            body: kept.clone(),
        });
    }
    if let Some(e) = res.extensions().get::<AgentError>() {
        return Some(Answer {
            status: res.status().as_u16(),
            content_type: "application/json".to_owned(),
            body: e.withheld_body(res.status(), agent),
        });
    }
    Some(Answer {
        status: res.status().as_u16(),
        content_type: res
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned(),
        body: body.clone().unwrap_or_default(),
    })
}

/// Store `res` as the key's answer, or free the key when `keep` is false (no answer worth
/// replaying). Failures are logged: the key then lapses with its lease.
pub async fn settle(state: &State, held: &Held, res: &Response<Body>, keep: bool) {
    let stored = match snapshot(res, &held.scope).filter(|_| keep) {
        Some(answer) => state
            .ledger
            .complete_key(
                &held.scope,
                &held.key,
                &held.token,
                held.fingerprint,
                answer,
                state.config.idempotency_ttl,
            )
            .await
            .map(|stored| {
                if !stored {
                    tracing::warn!(agent = %held.scope, "idempotency key claimed by another request after its lease ended; answer not stored");
                }
            }),
        None => {
            state
                .ledger
                .release_key(&held.scope, &held.key, &held.token)
                .await
        }
    };
    if let Err(e) = stored {
        tracing::error!(agent = %held.scope, error = %e, "idempotency key not settled; it lapses with its lease");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(v: &[u8]) -> Result<Option<String>, Code> {
        let mut h = HeaderMap::new();
        h.insert(
            IDEMPOTENCY_KEY,
            HeaderValue::from_bytes(v).expect("header value"),
        );
        key_of(&h).map_err(|e| e.code)
    }

    #[test]
    fn keys_are_visible_ascii_up_to_255() {
        assert_eq!(key_of(&HeaderMap::new()).map_err(|e| e.code), Ok(None));
        assert_eq!(key(b"abc-123"), Ok(Some("abc-123".into())));
        assert_eq!(key(b"\"abc-123\""), Ok(Some("abc-123".into())));
        let longest = vec![b'k'; 255];
        assert_eq!(key(&longest), Ok(Some("k".repeat(255))));
        for bad in [
            &b"\"\""[..],
            &[b'k'; 256][..],
            b"has space",
            b"tab\there",
            "caf\u{e9}".as_bytes(),
            b"\"in\"side\"",
        ] {
            assert_eq!(
                key(bad),
                Err(Code::InvalidRequest),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut two = HeaderMap::new();
        two.append(IDEMPOTENCY_KEY, HeaderValue::from_static("a"));
        two.append(IDEMPOTENCY_KEY, HeaderValue::from_static("b"));
        assert_eq!(key_of(&two).map_err(|e| e.code), Err(Code::InvalidRequest));
    }
}
