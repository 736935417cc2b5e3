//! The agents the gateway fronts, by route name and by card `agent_id`, each with its card.
//!
//! Cards are fetched at start (every agent concurrently, none of them holding up the listener)
//! and refreshed on the card's `Cache-Control: max-age` or the agent's `refresh_secs`, with
//! `If-None-Match`. A failed fetch or an invalid card never replaces a good one: the last good
//! card keeps serving, marked stale, while the fetch is retried with backoff.
//!
//! A card is compiled off the runtime's worker threads (`spawn_blocking`), at most
//! [`COMPILE_PERMITS`] at once for the whole registry, within the schema budget of
//! [`Budget`](crate::protocol::clawpedia::budget::Budget): one agent's expensive card can
//! neither stall a runtime thread nor take every core from the others' refreshes.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

pub mod dns;
mod fetch;
mod refresh;
pub mod replicas;
mod shape;

use fetch::{backoff, fetch, warn_about, Fetched};
pub use fetch::{CardError, NoCard};

use arc_swap::{ArcSwap, ArcSwapOption};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};
use tokio::sync::{watch, Semaphore};

use crate::caller::{OnBehalf, Refused, Signer};
use crate::config::{AgentConfig, Identity};
use crate::metrics::Metrics;
use crate::protocol::card::{Card, Refusal};
use crate::upstream::{Upstream, UpstreamError};
use replicas::Replicas;

/// An answer naming another `agent_id` than the card refetches the card at most this often.
pub const REFETCH_EVERY: Duration = Duration::from_secs(5);
/// Largest card accepted.
const MAX_CARD_BYTES: usize = 1 << 20;
/// Retry backoff after a failed fetch starts here and doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Cards compiled at once, across all agents. Two: a card within budget compiles in
/// milliseconds, so two keep refreshes moving on a machine of any size, while the memory a
/// compile may take (the budget's worst case) is counted at most twice.
pub const COMPILE_PERMITS: usize = 2;

/// How the last card attempt went, as `/agents` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardState {
    /// Fetched or revalidated by the last attempt.
    Fresh,
    /// The last attempt failed; the last good card is serving.
    Stale,
    /// No good card yet.
    Unavailable,
}

impl CardState {
    /// The state as `/agents` spells it (`fresh`, `stale`, `unavailable`).
    pub fn as_str(self) -> &'static str {
        match self {
            CardState::Fresh => "fresh",
            CardState::Stale => "stale",
            CardState::Unavailable => "unavailable",
        }
    }
}

/// The card of one agent and what is known about fetching it.
#[derive(Clone)]
pub struct CardSlot {
    /// The serving card: the last good one, `None` until one is fetched.
    pub card: Option<Arc<Card>>,
    /// How the last attempt went.
    pub state: CardState,
    /// When the serving card was fetched or last revalidated (wall clock, for `/agents`).
    pub fetched_at: Option<DateTime<Utc>>,
    /// The same moment on the monotonic clock, for the card age metric.
    pub fetched_instant: Option<Instant>,
    /// Why the last attempt failed, if it did: the whole error, for operators.
    pub last_error: Option<String>,
    /// The same, as any client may read it ([`CardError::public`]).
    pub public_error: Option<String>,
    /// Why the last fetched card was refused, if it was: a reason code (`invalid`, `budget`,
    /// `no_supported_interface`), which unlike `last_error` names nothing of the agent's.
    pub refusal: Option<Refusal>,
    /// The serving card's `ETag`, sent back as `If-None-Match`.
    pub etag: Option<HeaderValue>,
    /// At least one fetch has finished (successfully or not): `/readyz` waits for this.
    pub attempted: bool,
    /// The serving card's shape, which each replica's card is compared with (`shape`).
    shape: Option<Arc<shape::Shape>>,
}

/// One configured agent and its card.
pub struct Agent {
    /// The agent as configured.
    pub cfg: AgentConfig,
    /// Shared with the agent's successor when a reload changes only settings that do not make
    /// it another agent (see [`Registry::reload`]): the card carries over.
    slot: Arc<RwLock<CardSlot>>,
    /// Set when a reload replaced this agent: its card refreshes end, and no new stream opens
    /// with it (`stream::Hub::subscribe`).
    retired: std::sync::atomic::AtomicBool,
    /// Wakes its refresh loop to end it, rather than at its next turn.
    retire: tokio::sync::Notify,
    /// Wakes its refresh loop to fetch the card now ([`Agent::ask_refetch`]).
    refetch: tokio::sync::Notify,
    /// When a refetch was last asked for, so that a flood of answers asks at most once per
    /// [`REFETCH_EVERY`].
    refetch_asked: std::sync::Mutex<Option<Instant>>,
    /// `upstream_auth_header`, built once, marked sensitive (so no debug output shows it).
    auth: Option<(header::HeaderName, HeaderValue)>,
    /// The gateway's assertion keys (`[auth.assertion]`), one cell shared by every agent of
    /// every generation: a reload that changes the keys changes them for kept agents too.
    caller: Arc<ArcSwapOption<Signer>>,
    /// Its replicas, each with its requests in flight and its circuit (`limits::agent`): an
    /// `Arc`, so that an agent kept across a config reload keeps them.
    pub replicas: Arc<Replicas>,
}

impl Agent {
    fn new(cfg: AgentConfig, caller: Arc<ArcSwapOption<Signer>>) -> Agent {
        let auth = cfg.upstream_auth_header.as_ref().and_then(|(name, value)| {
            let mut v = HeaderValue::from_str(value.expose()).ok()?;
            v.set_sensitive(true);
            Some((name.clone(), v))
        });
        Agent {
            auth,
            caller,
            replicas: Arc::new(Replicas::of(&cfg)),
            cfg,
            retired: std::sync::atomic::AtomicBool::new(false),
            retire: tokio::sync::Notify::new(),
            refetch: tokio::sync::Notify::new(),
            refetch_asked: std::sync::Mutex::new(None),
            slot: Arc::new(RwLock::new(CardSlot {
                card: None,
                state: CardState::Unavailable,
                fetched_at: None,
                fetched_instant: None,
                last_error: None,
                public_error: None,
                refusal: None,
                etag: None,
                attempted: false,
                shape: None,
            })),
        }
    }

    /// The agent under a changed entry that is still the same agent (same URL, card path,
    /// credential and CA): its card and its limits' state carry over.
    fn successor(&self, cfg: AgentConfig) -> Agent {
        // Another A2A binding is the same agent over another of its card's interfaces: the
        // successor's first fetch (at once) compiles the card again for it, not a 304.
        if self.cfg.binding != cfg.binding || self.cfg.a2a_version != cfg.a2a_version {
            self.slot.write().unwrap_or_else(|p| p.into_inner()).etag = None;
        }
        let mut next = Agent::new(cfg, self.caller.clone());
        next.slot = self.slot.clone();
        next.replicas = self.replicas.clone();
        // A change of `urls` keeps the agent and its tasks: replicas that stay keep their
        // limits, those that leave are gone (their tasks wait out `replica_grace_ms`).
        if next.cfg.discover.is_none() {
            next.replicas
                .set(&next.cfg, replicas::configured(&next.cfg), None);
        }
        next
    }

    /// Whether `cfg` is another agent than this one's entry, not the same agent with other
    /// settings: where it is, how its card is found, and what it is sent with (its credential,
    /// and what it is told of who is calling).
    fn same_agent(&self, cfg: &AgentConfig) -> bool {
        let a = &self.cfg;
        // Replicas listed in `urls` may change and it is the same agent; so does a `url` that
        // becomes the first of `urls` (scaling out), or `urls` that shrink to it.
        let place = a.url == cfg.url || (!a.urls.is_empty() && !cfg.urls.is_empty());
        place
            && a.discover == cfg.discover
            && a.protocol == cfg.protocol
            && a.card_path() == cfg.card_path()
            && a.upstream_auth_header == cfg.upstream_auth_header
            && a.ca_file == cfg.ca_file
            // What it is told of callers: the streams it serves were opened telling it (or
            // not), and reconnect with their agent's settings.
            && a.identity == cfg.identity
            && a.token_audience == cfg.token_audience
            && a.forward_claims == cfg.forward_claims
    }

    /// Mark it replaced by a reload (see [`Agent::is_retired`]).
    pub fn retire(&self) {
        self.retired
            .store(true, std::sync::atomic::Ordering::Release);
        self.retire.notify_waiters();
    }

    /// Ask its refresh loop to fetch the card now, rather than at its next turn: an answer
    /// named another `agent_id` than the card's (the agent restarted as another). At most once
    /// per [`REFETCH_EVERY`]; true if this call asked.
    pub fn ask_refetch(&self) -> bool {
        let now = Instant::now();
        {
            let mut last = self.refetch_asked.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|t| now.duration_since(t) < REFETCH_EVERY) {
                return false;
            }
            *last = Some(now);
        }
        self.refetch.notify_one();
        true
    }

    /// Fetch the card now, whatever was asked before: replicas joined (found by DNS), whose
    /// cards are checked with it before they take new work. Bounded by the discovery interval,
    /// unlike the answers [`Agent::ask_refetch`] guards against.
    pub fn refetch_now(&self) {
        self.refetch.notify_one();
    }

    /// Whether `card` was compiled for this agent's configured `binding` and `a2a_version`
    /// (any card, for an agent that configures neither or is not an A2A agent).
    pub fn fits_binding(&self, card: &Card) -> bool {
        match card.a2a() {
            Some(held) => crate::protocol::a2a::card::Prefer::of(&self.cfg).fits(&held.interface),
            None => true,
        }
    }

    /// Whether a reload replaced it.
    pub fn is_retired(&self) -> bool {
        self.retired.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The serving card, or why there is none.
    pub fn card(&self) -> Result<Arc<Card>, NoCard> {
        let s = self.slot.read().unwrap_or_else(|p| p.into_inner());
        match &s.card {
            Some(c) => Ok(c.clone()),
            None => Err(NoCard {
                agent: self.cfg.name.clone(),
                reason: s
                    .public_error
                    .clone()
                    .unwrap_or_else(|| "agent card not fetched yet".into()),
            }),
        }
    }

    /// Add the agent's own credential (`upstream_auth_header`) to a request for it: every call
    /// to the agent (tasks, streams, cards) carries it, and nothing else of the gateway's. With
    /// `identity`, also `A2A-Caller`, on behalf of `on` (`crate::caller`); refused when the
    /// agent takes a caller's own token and `on`'s is not meant for it.
    pub fn authorize(
        &self,
        headers: &mut hyper::HeaderMap,
        on: OnBehalf<'_>,
    ) -> Result<(), Refused> {
        if let Some((name, value)) = &self.auth {
            headers.insert(name.clone(), value.clone());
        }
        if self.cfg.identity == Identity::None {
            return Ok(());
        }
        match self.caller.load().as_deref() {
            Some(signer) => signer.stamp(&self.cfg, on, headers),
            // Checked at start and reload: an agent with `identity` has keys to sign with.
            None => Ok(()),
        }
    }

    /// The replica a call of the gateway's own goes to: the task's (`at`, for an agent whose
    /// calls are pinned; `None` while it is gone), else one picked for new work.
    pub fn replica_for(&self, at: Option<&str>) -> Option<Arc<replicas::Replica>> {
        match at {
            Some(address) if self.cfg.pins() => self.replicas.find(address),
            _ => self.replicas.pick(&self.cfg),
        }
    }

    /// A copy of the card slot, taken under its lock.
    pub fn slot(&self) -> CardSlot {
        self.slot.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn update(&self, f: impl FnOnce(&mut CardSlot)) {
        f(&mut self.slot.write().unwrap_or_else(|p| p.into_inner()));
    }
}

/// Every configured agent, by route name and by the `agent_id` of its serving card.
pub struct Registry {
    agents: Vec<Arc<Agent>>,
    /// See [`Agent::caller`]'s cell.
    caller: Arc<ArcSwapOption<Signer>>,
    by_name: HashMap<String, Arc<Agent>>,
    by_id: RwLock<HashMap<String, Arc<Agent>>>,
    /// Shared by every agent's refresh: see [`COMPILE_PERMITS`].
    compiles: Arc<Semaphore>,
}

impl Registry {
    /// The agents of the config, no card fetched yet.
    pub fn new(cfgs: &[AgentConfig]) -> Registry {
        let caller = Arc::new(ArcSwapOption::empty());
        let agents: Vec<Arc<Agent>> = cfgs
            .iter()
            .cloned()
            .map(|c| Arc::new(Agent::new(c, caller.clone())))
            .collect();
        let by_name = agents
            .iter()
            .map(|a| (a.cfg.name.clone(), a.clone()))
            .collect();
        Registry {
            agents,
            caller,
            by_name,
            by_id: RwLock::new(HashMap::new()),
            compiles: Arc::new(Semaphore::new(COMPILE_PERMITS)),
        }
    }

    /// Sign `A2A-Caller` assertions with `signer` from now on, for every agent of every
    /// generation (start and reload).
    pub fn set_signer(&self, signer: Option<Arc<Signer>>) {
        self.caller.store(signer);
    }

    /// The assertion keys, for `/.well-known/jwks.json`.
    pub fn signer(&self) -> Option<Arc<Signer>> {
        self.caller.load_full()
    }

    /// Every agent, in config order.
    pub fn agents(&self) -> &[Arc<Agent>] {
        &self.agents
    }

    /// By route name, then by the agent_id of a serving card. The id index is written by the
    /// card refreshes; one that lands in the generation a reload has just replaced misses the
    /// new index, so a miss looks at the agents' cards before saying no.
    pub fn resolve(&self, name_or_id: &str) -> Option<Arc<Agent>> {
        if let Some(a) = self.by_name.get(name_or_id) {
            return Some(a.clone());
        }
        let indexed = self
            .by_id
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name_or_id)
            .cloned();
        indexed.or_else(|| {
            self.agents
                .iter()
                .find(|a| a.card().is_ok_and(|c| c.agent_id() == Some(name_or_id)))
                .cloned()
        })
    }

    /// The registry of a reloaded config. An agent whose entry is unchanged is kept as it is (its
    /// card, its streams, its counters). One whose entry changed but is still the same agent
    /// ([`Agent::same_agent`]: limits, timeouts, tokens for pushes...) gets a successor sharing
    /// its card and its limits' state, and its streams go on. A new agent, or one that is now
    /// another agent, starts without a card. Returns the registry, the agents to start
    /// refreshing (new ones and successors), and the agents whose streams must end (removed, or
    /// now another agent). Every replaced agent is retired.
    pub fn reload(&self, cfgs: &[AgentConfig]) -> (Registry, Vec<Arc<Agent>>, Vec<Arc<Agent>>) {
        let mut fresh = Vec::new();
        let agents: Vec<Arc<Agent>> = cfgs
            .iter()
            .map(|c| match self.by_name.get(&c.name) {
                Some(kept) if kept.cfg == *c => kept.clone(),
                Some(old) if old.same_agent(c) => {
                    let a = Arc::new(old.successor(c.clone()));
                    fresh.push(a.clone());
                    a
                }
                _ => {
                    let a = Arc::new(Agent::new(c.clone(), self.caller.clone()));
                    fresh.push(a.clone());
                    a
                }
            })
            .collect();
        let mut ended = Vec::new();
        for old in &self.agents {
            if agents.iter().any(|a| Arc::ptr_eq(a, old)) {
                continue;
            }
            old.retire();
            let successor = agents
                .iter()
                .any(|a| a.cfg.name == old.cfg.name && Arc::ptr_eq(&a.slot, &old.slot));
            if !successor {
                ended.push(old.clone());
            }
        }
        let by_name = agents
            .iter()
            .map(|a| (a.cfg.name.clone(), a.clone()))
            .collect();
        let by_id = agents
            .iter()
            .filter_map(|a| {
                let id = a.card().ok()?.agent_id()?.to_owned();
                Some((id, a.clone()))
            })
            .collect();
        let next = Registry {
            agents,
            caller: self.caller.clone(),
            by_name,
            by_id: RwLock::new(by_id),
            compiles: self.compiles.clone(),
        };
        (next, fresh, ended)
    }

    /// Whether `agent` is one of this registry's (the same one, not only the same name).
    pub fn holds(&self, agent: &Arc<Agent>) -> bool {
        self.by_name
            .get(&agent.cfg.name)
            .is_some_and(|a| Arc::ptr_eq(a, agent))
    }

    /// By route name only.
    pub fn by_name(&self, name: &str) -> Option<&Arc<Agent>> {
        self.by_name.get(name)
    }

    /// Whether every path under `/agents/{name}/` is the named agent's own (an official A2A
    /// agent's: its routes and the Clawpedia routes share paths, so the path alone cannot say).
    pub fn owns_its_paths(&self, name: &str) -> bool {
        self.by_name(name)
            .is_some_and(|a| a.cfg.protocol == crate::config::Protocol::A2a)
    }

    /// A new card whose `agent_id` is another agent's route name (in any case) is refused like
    /// an invalid card: [`Registry::resolve`] tries route names first, so that route would
    /// quietly reach the other agent. Config validation refuses UUID-shaped route names; this
    /// guards configs built without it (and says which agent is in the way).
    fn not_shadowed(&self, name: &str, fetched: Fetched) -> Result<Fetched, CardError> {
        let Some(id) = (match &fetched {
            Fetched::New { card, .. } => card.agent_id(),
            Fetched::NotModified { .. } => None,
        }) else {
            return Ok(fetched);
        };
        let other = self
            .agents
            .iter()
            .find(|a| a.cfg.name != name && a.cfg.name.eq_ignore_ascii_case(id));
        match other {
            Some(other) => Err(CardError::Invalid(format!(
                "agent_id {id} is the route name of agent {:?}, which routes reach first; give one of them another name or id",
                other.cfg.name
            ))),
            None => Ok(fetched),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fetch::max_age;
    use super::*;

    #[test]
    fn max_age_is_read_and_clamped() {
        let mut h = hyper::HeaderMap::new();
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=30"),
        );
        assert_eq!(max_age(&h), Some(Duration::from_secs(30)));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=0"));
        assert_eq!(max_age(&h), Some(Duration::from_secs(1)));
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, max-age=30"),
        );
        assert_eq!(max_age(&h), None);
    }

    #[test]
    fn backoff_grows_to_its_cap() {
        let r = Duration::from_secs(300);
        assert!(backoff(1, r) <= Duration::from_millis(1200));
        assert!(backoff(3, r) >= Duration::from_millis(3200));
        assert!(backoff(30, r) <= Duration::from_secs(72));
        assert!(backoff(30, Duration::from_secs(5)) <= Duration::from_secs(6));
    }
}
