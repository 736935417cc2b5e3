//! One fetch of an agent's card: the request (with its ETag), the answer's size and freshness
//! (`Cache-Control`), the card compiled on the blocking pool within [`COMPILE_PERMITS`], and
//! why a card could not be had ([`CardError`], [`NoCard`]).

use super::shape::Shape;
use super::*;

/// What the registry says of a new card: a warning its protocol raises (an agent whose pushes
/// would bypass this gateway, say).
pub(super) fn warn_about(name: &str, card: &Card) {
    if let Some(warning) = card.warning(name) {
        tracing::warn!(agent = name, "{warning}");
    }
}

pub(super) enum Fetched {
    New {
        card: Box<Card>,
        /// The raw card's shape, which every replica's card is compared with.
        shape: Shape,
        etag: Option<HeaderValue>,
        max_age: Option<Duration>,
    },
    NotModified {
        max_age: Option<Duration>,
    },
}

/// Why an agent's card could not be had: typed where the fetch fails, shown on `/agents`.
#[derive(Debug, Clone)]
pub enum CardError {
    /// The fetch itself failed.
    Upstream(UpstreamError),
    /// The agent answered the fetch with another status than 200 (or 304).
    Status(StatusCode),
    /// The card is not JSON, or not a valid A2A 1.0 card.
    Invalid(String),
    /// The card's schemas are over the gateway's compile budget.
    OverBudget(String),
    /// An official A2A card naming no interface the gateway speaks.
    NoInterface(String),
}

impl std::error::Error for CardError {}

/// An agent without a serving card: it cannot be proxied (AGENT_UNAVAILABLE). Its text reaches
/// any client that may use the agent, so it says only the kind of failure
/// ([`CardError::public`]); operators read the whole error on `GET /agents`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("agent {agent:?} has no valid card: {reason}")]
pub struct NoCard {
    /// The agent's route name.
    pub agent: String,
    /// The kind of the last fetch's failure, or that none has finished yet.
    pub reason: String,
}

impl std::fmt::Display for CardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CardError::Upstream(UpstreamError::Timeout(_)) => f.write_str("card fetch timed out"),
            CardError::Upstream(UpstreamError::TooLarge(n)) => {
                write!(f, "card larger than {n} bytes")
            }
            CardError::Upstream(UpstreamError::Unreachable(e)) => {
                write!(f, "card fetch failed: {e}")
            }
            CardError::Status(s) => write!(f, "card fetch answered {s}"),
            CardError::Invalid(e) => write!(f, "invalid card: {e}"),
            CardError::OverBudget(e) => write!(f, "card refused: {e}"),
            CardError::NoInterface(e) => write!(f, "card refused: {e}"),
        }
    }
}

impl CardError {
    /// What any client may read of it: the kind of failure, never a text of the fetch's own
    /// (a TLS error names the agent's host, an invalid card's errors quote the agent's card).
    /// The whole of it is `last_error`, for operators (`GET /agents`).
    pub fn public(&self) -> String {
        match self {
            CardError::Upstream(UpstreamError::Timeout(_)) => "card fetch timed out".into(),
            CardError::Upstream(UpstreamError::TooLarge(_)) => "card too large".into(),
            CardError::Upstream(UpstreamError::Unreachable(_)) => {
                "card fetch failed: the agent could not be reached".into()
            }
            CardError::Status(s) => format!("card fetch answered {s}"),
            CardError::Invalid(_) => "invalid card".into(),
            CardError::OverBudget(_) | CardError::NoInterface(_) => "card refused".into(),
        }
    }
}

pub(super) async fn fetch(
    agent: &Agent,
    up: &Upstream,
    compiles: &Arc<Semaphore>,
) -> Result<Fetched, CardError> {
    let (url, host) = source(agent);
    let mut req = Request::get(url)
        .header(header::ACCEPT, "application/json")
        .header(header::ACCEPT_ENCODING, "identity")
        .body(Full::new(Bytes::new()))
        .map_err(|e| CardError::Invalid(format!("card URL: {e}")))?;
    if let Some(host) = host {
        req.headers_mut().insert(header::HOST, host);
    }
    // A card is asked for no one: no `A2A-Caller`, so nothing can be refused.
    let _ = agent.authorize(req.headers_mut(), crate::caller::OnBehalf::Nobody);
    // A card compiled for another binding than the configured one (a reload changed it) is
    // fetched whole and compiled again, never revalidated with a 304.
    let have_card = agent.slot().card.is_some_and(|c| agent.fits_binding(&c));
    if let Some(etag) = agent.slot().etag.filter(|_| have_card) {
        req.headers_mut().insert(header::IF_NONE_MATCH, etag);
    }
    let (parts, body) = up
        .exchange(req, agent.cfg.timeout, MAX_CARD_BYTES)
        .await
        .map_err(CardError::Upstream)?;
    let max_age = max_age(&parts.headers);
    if parts.status == StatusCode::NOT_MODIFIED && have_card {
        return Ok(Fetched::NotModified { max_age });
    }
    if parts.status != StatusCode::OK {
        return Err(CardError::Status(parts.status));
    }
    let doc = crate::protocol::json::parse(&body).map_err(|e| match e {
        crate::protocol::json::JsonError::Syntax(_) => CardError::Invalid(format!("not JSON: {e}")),
        _ => CardError::Invalid(e.to_string()),
    })?;
    let shape = Shape::of(agent.cfg.protocol, &doc);
    let prefer = crate::protocol::a2a::card::Prefer::of(&agent.cfg);
    let card = compile(agent.cfg.protocol, prefer, doc, compiles).await?;
    Ok(Fetched::New {
        card: Box::new(card),
        shape,
        etag: parts.headers.get(header::ETAG).cloned(),
        max_age,
    })
}

/// Where the agent's card is fetched: an agent with one configured replica, at `url`; one with
/// several (or found by DNS),
/// from the first replica that is not ejected and serves the agent's card (else the first
/// that is not ejected, else `url`), so that the agent keeps its card while any healthy
/// replica serves it. With the `Host` a discovered replica is called with.
fn source(agent: &Agent) -> (String, Option<HeaderValue>) {
    let live = agent.replicas.live();
    // A discovered agent's one replica too: its name may resolve only at `[discovery]`'s
    // nameserver, never through the system resolver `url` would go through.
    if live.is_empty() || (live.len() == 1 && agent.cfg.discover.is_none()) {
        return (agent.cfg.card_fetch_url(), None);
    }
    let healthy = || {
        live.iter()
            .filter(|r| matches!(r.limits.health(), crate::limits::Health::Ok))
    };
    match healthy()
        .find(|r| !r.card_mismatch())
        .or_else(|| healthy().next())
    {
        Some(r) => (
            format!("{}{}", r.base, agent.cfg.card_path()),
            r.host.clone(),
        ),
        None => (agent.cfg.card_fetch_url(), None),
    }
}

/// [`Card::compile`] on the blocking pool, once a permit of `compiles` is free. The permit goes
/// with the compile, so it is held until the compile ends even if this future is dropped.
pub(super) async fn compile(
    protocol: crate::config::Protocol,
    prefer: crate::protocol::a2a::card::Prefer,
    doc: serde_json::Value,
    compiles: &Arc<Semaphore>,
) -> Result<Card, CardError> {
    let permit = compiles
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| CardError::Invalid("card compiles are closed".into()))?;
    let compiled = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        Card::compile(protocol, prefer, doc)
    })
    .await
    .map_err(|e| CardError::Invalid(format!("card compile did not finish: {e}")))?;
    compiled.map_err(|e| {
        let mut msg = e.message;
        // The budget's message already names where and which limit.
        if e.kind == Refusal::Invalid {
            for d in e.details.iter().take(5) {
                msg.push_str(&format!("; {} {}", d.instance_path, d.message));
            }
        }
        match e.kind {
            Refusal::Invalid => CardError::Invalid(msg),
            Refusal::Budget => CardError::OverBudget(msg),
            Refusal::NoSupportedInterface => CardError::NoInterface(msg),
        }
    })
}

/// `max-age` of a Cache-Control header, clamped to [1 s, 24 h]; `no-cache`/`no-store` give none.
pub(super) fn max_age(h: &hyper::HeaderMap) -> Option<Duration> {
    let mut age = None;
    for v in h
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
    {
        for d in v.split(',').map(str::trim) {
            if d.eq_ignore_ascii_case("no-cache") || d.eq_ignore_ascii_case("no-store") {
                return None;
            }
            if let Some(n) = d
                .strip_prefix("max-age=")
                .and_then(|n| n.trim_matches('"').parse::<u64>().ok())
            {
                age = Some(Duration::from_secs(n.clamp(1, 86_400)));
            }
        }
    }
    age
}

/// 1 s, 2 s, 4 s … capped at min(refresh, 60 s), with ±20% jitter so a fleet of gateways
/// restarted together does not fetch in lockstep.
pub(super) fn backoff(failures: u32, refresh: Duration) -> Duration {
    let cap = refresh.min(MAX_BACKOFF).max(FIRST_BACKOFF);
    let base = FIRST_BACKOFF
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(cap);
    let r = RandomState::new().hash_one(failures) % 401; // 0..=400
    base.mul_f64(0.8 + r as f64 / 1000.0)
}
