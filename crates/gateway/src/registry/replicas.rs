//! One agent's replicas: the processes that serve it, each at its own `host:port`, with its
//! own limits (requests in flight, circuit) and its own card check.
//!
//! **Why pinned.** The official SDKs keep tasks in memory by default: a task lives on the
//! replica that made it, and every later call of it must go there. The ledger keeps, with each
//! task, the `host:port` of the replica that answered its first message (never an index: an
//! index shifts on reload and differs between gateways); a call naming a task (or a context)
//! goes to that replica. New work is balanced: the less loaded of two replicas picked at
//! random (power of two choices), skipping those ejected, busy or serving another card.
//!
//! **Membership.** The set changes by reload (`urls`) or discovery (`discover = "dns"`). A
//! replica that stays keeps its limits; one that leaves is kept aside as *gone* with the time
//! it left, so its pinned calls are answered REPLICA_UNAVAILABLE (not sent elsewhere, where the
//! task is unknown) until `replica_grace_ms` has passed, when its live tasks are failed in the
//! ledger (`http::replicas`). A gone replica that comes back is the same replica again.
//!
//! The hot path of an agent with one replica is unchanged: [`Replicas::at`] and
//! [`Replicas::pick`] return it without a lock or a random draw.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use hyper::header::HeaderValue;

use crate::config::AgentConfig;
use crate::limits::{AgentLimits, AgentPolicy, Health};
use crate::metrics::Metrics;

/// A base URL's replica address: `host:port` as the URL names it (host in lower case, the
/// scheme's port when none is written). `None` for a URL without a scheme or a host.
pub fn address_of(url: &str) -> Option<String> {
    let uri: hyper::Uri = url.parse().ok()?;
    uri.scheme_str()?;
    let host = uri.host()?.to_ascii_lowercase();
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    Some(format!("{host}:{port}"))
}

/// One replica of an agent.
pub struct Replica {
    /// `host:port`: how the ledger, `/agents` and the metrics name it.
    pub address: Arc<str>,
    /// Its base URL: where its requests go (the agent's path under it).
    pub base: Arc<str>,
    /// The `Host` a discovered replica is called with: the configured name, not its address.
    pub host: Option<HeaderValue>,
    /// Its requests in flight and its circuit.
    pub limits: Arc<AgentLimits>,
    /// Its card differs from the agent's in skills, capabilities or interfaces: no new work.
    mismatch: AtomicBool,
    /// Whether its card has been checked at least once.
    checked: AtomicBool,
    /// Tasks pinned to it by this gateway since it joined (a gauge of what it holds).
    held: AtomicU64,
}

impl Replica {
    fn new(address: Arc<str>, base: Arc<str>, host: Option<HeaderValue>) -> Replica {
        Replica {
            limits: Arc::new(AgentLimits::of_replica(address.clone())),
            address,
            base,
            host,
            mismatch: AtomicBool::new(false),
            checked: AtomicBool::new(false),
            held: AtomicU64::new(0),
        }
    }

    /// Whether its card was found to differ from the agent's.
    pub fn card_mismatch(&self) -> bool {
        self.mismatch.load(Ordering::Acquire)
    }

    /// Record how its card compares with the agent's.
    pub fn set_card_mismatch(&self, differs: bool) {
        self.checked.store(true, Ordering::Release);
        self.mismatch.store(differs, Ordering::Release);
    }

    /// Count one more task pinned to it.
    pub fn held_one(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
    }

    /// Tasks pinned to it through this gateway.
    pub fn tasks_held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// Whether it may be given new work now: not ejected or being probed, not past
    /// `max_in_flight`, and serving the agent's card.
    ///
    /// An ejected replica whose cool-off is over takes new work again: the request it is
    /// picked for is its probe, which brings it back or ejects it again.
    ///
    /// A replica whose card has not been checked yet takes none while another's has: a
    /// replica that just joined (a rolling upgrade's new pod) may serve another card.
    fn takes_new_work(&self, max_in_flight: usize, any_checked: bool) -> bool {
        let up = match self.limits.health() {
            Health::Ok => true,
            Health::Ejected { until, .. } => until <= chrono::Utc::now(),
            Health::Probing { .. } => false,
        };
        up && !self.card_mismatch()
            && (!any_checked || self.checked())
            && self.limits.in_flight() < max_in_flight
    }

    /// Whether its card has been compared with the agent's at least once.
    pub fn checked(&self) -> bool {
        self.checked.load(Ordering::Acquire)
    }

    /// How it stands, as `/agents` says it: `ok`, `ejected`, `probing` (its circuit's probe,
    /// or its card not checked yet while others' are: `others_checked`), `card_mismatch`.
    pub fn health(&self, others_checked: bool) -> &'static str {
        match self.limits.health() {
            Health::Ok if self.card_mismatch() => "card_mismatch",
            Health::Ok if others_checked && !self.checked() => "probing",
            h => h.as_str(),
        }
    }
}

/// Where a pinned call goes ([`Replicas::pinned`]).
pub enum Pinned {
    /// To this replica.
    At(Arc<Replica>),
    /// Its replica is gone, since this long ago.
    Gone(Duration),
    /// Its replica is unknown to this gateway (named by another gateway's config, or before
    /// discovery found it): treated as gone from the start.
    Unknown,
}

/// The replicas of one agent: shared by the agent's successors across reloads.
pub struct Replicas {
    /// The current members, in the order configured or resolved.
    live: ArcSwap<Vec<Arc<Replica>>>,
    /// Replicas that left, and when: pinned calls of theirs are refused, not rerouted.
    gone: Mutex<Vec<(Arc<Replica>, Instant)>>,
    /// A counter for the cheap random draws of [`Replicas::pick`].
    draw: AtomicU64,
    /// A call named a replica this gateway does not know (one that left before a restart,
    /// or one another gateway's config names): the keeper looks for such tasks.
    unknown_seen: AtomicBool,
}

impl Replicas {
    /// The replicas `cfg` configures (`url` or `urls`; none yet for `discover = "dns"`, whose
    /// first resolution comes at start).
    pub fn of(cfg: &AgentConfig) -> Replicas {
        let r = Replicas {
            live: ArcSwap::from_pointee(Vec::new()),
            gone: Mutex::new(Vec::new()),
            draw: AtomicU64::new(seed()),
            unknown_seen: AtomicBool::new(false),
        };
        // A discovered agent has none until its name first resolves (at once, at start).
        if cfg.discover.is_none() {
            r.set(cfg, configured(cfg), None);
        }
        r
    }

    /// The current members.
    pub fn live(&self) -> Arc<Vec<Arc<Replica>>> {
        self.live.load_full()
    }

    /// The gone replicas still within their grace, with how long ago each left.
    pub fn gone(&self) -> Vec<(Arc<Replica>, Duration)> {
        let now = Instant::now();
        self.lock_gone()
            .iter()
            .map(|(r, t)| (r.clone(), now.duration_since(*t)))
            .collect()
    }

    fn lock_gone(&self) -> std::sync::MutexGuard<'_, Vec<(Arc<Replica>, Instant)>> {
        self.gone.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make `members` (address, base URL) the replicas, keeping those that stay (and their
    /// limits), bringing back gone ones that return, and setting aside those that leave. At
    /// most `cfg.max_replicas` are used. Returns the replicas that joined and those that left.
    pub fn set(
        &self,
        cfg: &AgentConfig,
        mut members: Vec<(String, String)>,
        host: Option<HeaderValue>,
    ) -> (Vec<Arc<Replica>>, Vec<Arc<Replica>>) {
        let old = self.live.load_full();
        let mut gone = self.lock_gone();
        let mut next: Vec<Arc<Replica>> = Vec::with_capacity(members.len());
        let mut joined = Vec::new();
        if members.len() > cfg.max_replicas {
            tracing::warn!(agent = %cfg.name, replicas = members.len(), max = cfg.max_replicas,
                "more replicas than max_replicas: the rest are not used");
            // Members that stay come first: a new address must not push out one that holds
            // tasks.
            members.sort_by_key(|(a, _)| !old.iter().any(|r| *r.address == **a));
        }
        for (address, base) in members.into_iter().take(cfg.max_replicas) {
            if next.iter().any(|r| *r.address == *address) {
                continue;
            }
            // A replica is its address: one whose base URL changed (a path added) is the same
            // process, and keeps its tasks and its limits.
            let same = |r: &Arc<Replica>| *r.address == *address && *r.base == *base;
            let kept = old.iter().find(|r| same(r)).cloned();
            let r = match kept {
                Some(r) => r,
                None => {
                    let back = gone
                        .iter()
                        .position(|(r, _)| same(r))
                        .map(|i| gone.swap_remove(i).0);
                    let r = back.unwrap_or_else(|| {
                        Arc::new(Replica::new(address.into(), base.into(), host.clone()))
                    });
                    joined.push(r.clone());
                    r
                }
            };
            next.push(r);
        }
        let now = Instant::now();
        let mut left = Vec::new();
        for r in old.iter() {
            if !next.iter().any(|n| Arc::ptr_eq(n, r)) {
                gone.push((r.clone(), now));
                left.push(r.clone());
            }
        }
        // A member's address is never gone at once (a base URL changed under it).
        gone.retain(|(g, _)| !next.iter().any(|n| n.address == g.address));
        // Stored under the lock: a replica coming back is in one list or the other, always.
        self.live.store(Arc::new(next));
        drop(gone);
        (joined, left)
    }

    /// Forget gone replicas that left longer than `grace` ago; returns them (their live tasks
    /// are to be failed, their series removed).
    pub fn expire(&self, grace: Duration) -> Vec<Arc<Replica>> {
        let now = Instant::now();
        let mut gone = self.lock_gone();
        let mut out = Vec::new();
        gone.retain(|(r, t)| {
            let keep = now.duration_since(*t) < grace;
            if !keep {
                out.push(r.clone());
            }
            keep
        });
        out
    }

    /// The replica a request to `uri` goes to (its authority), for its limits: the first
    /// replica when the agent has one (or none matches: a URL built before a reload).
    pub fn at(&self, uri: &hyper::Uri) -> Option<Arc<Replica>> {
        let live = self.live.load();
        if live.len() <= 1 {
            return live.first().cloned();
        }
        let host = uri.host().unwrap_or_default();
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        let hit = live.iter().find(|r| {
            r.address
                .rsplit_once(':')
                .is_some_and(|(h, p)| h.eq_ignore_ascii_case(host) && p.parse() == Ok(port))
        });
        hit.or(live.first()).cloned()
    }

    /// The replica named `address`, if it is a member.
    pub fn find(&self, address: &str) -> Option<Arc<Replica>> {
        self.live
            .load()
            .iter()
            .find(|r| *r.address == *address)
            .cloned()
    }

    /// Where a call of a task pinned to `address` goes.
    pub fn pinned(&self, address: &str) -> Pinned {
        if let Some(r) = self.find(address) {
            return Pinned::At(r);
        }
        let now = Instant::now();
        match self
            .lock_gone()
            .iter()
            .find(|(r, _)| *r.address == *address)
        {
            Some((_, t)) => Pinned::Gone(now.duration_since(*t)),
            None => {
                self.unknown_seen.store(true, Ordering::Relaxed);
                Pinned::Unknown
            }
        }
    }

    /// Whether a call named an unknown replica since the last time this was asked.
    pub fn take_unknown_seen(&self) -> bool {
        self.unknown_seen.swap(false, Ordering::Relaxed)
    }

    /// Whether `address` is a member or gone within its grace (its tasks wait for it).
    pub fn knows(&self, address: &str) -> bool {
        self.find(address).is_some() || self.lock_gone().iter().any(|(r, _)| *r.address == *address)
    }

    /// The replica for new work: of two members picked at random, the one with fewer requests
    /// in flight, among those that take new work; when none does, the least loaded of all
    /// (its limits then refuse with the reason: ejected or busy). `None` with no member.
    pub fn pick(&self, cfg: &AgentConfig) -> Option<Arc<Replica>> {
        let live = self.live.load();
        match live.len() {
            0 => return None,
            1 => return live.first().cloned(),
            _ => {}
        }
        let max = AgentPolicy::of(cfg).max_in_flight;
        let any_checked = live.iter().any(|r| r.checked());
        let n = live.len() as u64;
        let x = self.next_draw();
        let (i, mut j) = ((x % n) as usize, ((x >> 32) % (n - 1)) as usize);
        if j >= i {
            j += 1;
        }
        let (a, b) = (&live[i], &live[j]);
        let less = |a: &Arc<Replica>, b: &Arc<Replica>| {
            if b.limits.in_flight() < a.limits.in_flight() {
                b.clone()
            } else {
                a.clone()
            }
        };
        match (
            a.takes_new_work(max, any_checked),
            b.takes_new_work(max, any_checked),
        ) {
            (true, true) => return Some(less(a, b)),
            (true, false) => return Some(a.clone()),
            (false, true) => return Some(b.clone()),
            (false, false) => {}
        }
        // Both out: any that takes new work, the least loaded first; else the least loaded
        // that serves the agent's card (its limits refuse, with the reason), unless none does.
        let able = live
            .iter()
            .filter(|r| r.takes_new_work(max, any_checked))
            .min_by_key(|r| r.limits.in_flight());
        able.or_else(|| {
            live.iter()
                .filter(|r| !r.card_mismatch())
                .min_by_key(|r| r.limits.in_flight())
        })
        .or_else(|| live.iter().min_by_key(|r| r.limits.in_flight()))
        .cloned()
    }

    /// Whether any member's card has been checked.
    pub fn any_checked(&self) -> bool {
        self.live.load().iter().any(|r| r.checked())
    }

    /// Whether any member takes calls now (not ejected): the reconciler and polling wait
    /// while none does.
    pub fn any_ok(&self) -> bool {
        self.live
            .load()
            .iter()
            .any(|r| matches!(r.limits.health(), Health::Ok))
    }

    /// The agent's health: `ok` while any member is, else the first member's.
    pub fn health(&self) -> Health {
        let live = self.live.load();
        let mut first = None;
        for r in live.iter() {
            let h = r.limits.health();
            if matches!(h, Health::Ok) {
                return h;
            }
            first.get_or_insert(h);
        }
        first.unwrap_or(Health::Ok)
    }

    /// Requests in flight to every member.
    pub fn in_flight(&self) -> usize {
        self.live.load().iter().map(|r| r.limits.in_flight()).sum()
    }

    /// (exchanges, failed exchanges) over every member.
    pub fn totals(&self) -> (u64, u64) {
        self.live.load().iter().fold((0, 0), |(a, b), r| {
            let (x, y) = r.limits.totals();
            (a + x, b + y)
        })
    }

    /// Every member's limits bound to the agent's metric series (and gone ones' removed).
    pub fn bind(&self, m: &Metrics, agent: &str) {
        for r in self.live.load().iter() {
            r.limits.bind(m, agent);
        }
    }

    fn next_draw(&self) -> u64 {
        // SplitMix64 over a shared counter: uniform enough to pick two of a few replicas,
        // lock-free, and no RNG state per thread.
        let mut z = self
            .draw
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The configured members: each of `urls` (or `url`), by address.
pub fn configured(cfg: &AgentConfig) -> Vec<(String, String)> {
    cfg.base_urls()
        .iter()
        .filter_map(|u| Some((address_of(u)?, u.clone())))
        .collect()
}

fn seed() -> u64 {
    let u = uuid::Uuid::new_v4().as_u128();
    (u as u64) ^ ((u >> 64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(urls: &[&str]) -> AgentConfig {
        AgentConfig {
            urls: urls.iter().map(|u| u.to_string()).collect(),
            ..AgentConfig::new("a", urls[0])
        }
    }

    #[test]
    fn addresses_are_host_and_port() {
        assert_eq!(address_of("http://A-1:9000/x").as_deref(), Some("a-1:9000"));
        assert_eq!(address_of("https://a").as_deref(), Some("a:443"));
        assert_eq!(address_of("http://[::1]:80").as_deref(), Some("[::1]:80"));
        assert_eq!(address_of("nope"), None);
    }

    #[test]
    fn picks_spread_and_skip_the_ejected_and_mismatched() {
        let c = cfg(&["http://a:1", "http://b:1", "http://c:1"]);
        let r = Replicas::of(&c);
        let mut n = [0usize; 3];
        for _ in 0..3000 {
            let p = r.pick(&c).expect("a replica");
            let i = r
                .live()
                .iter()
                .position(|x| Arc::ptr_eq(x, &p))
                .expect("member");
            n[i] += 1;
        }
        assert!(n.iter().all(|&k| (800..=1200).contains(&k)), "{n:?}");
        r.live()[1].set_card_mismatch(true);
        for _ in 0..300 {
            assert_ne!(&*r.pick(&c).expect("a replica").address, "b:1");
        }
    }

    #[test]
    fn a_set_keeps_stayers_and_remembers_the_gone() {
        let c = cfg(&["http://a:1", "http://b:1"]);
        let r = Replicas::of(&c);
        let a = r.find("a:1").expect("a");
        let c2 = cfg(&["http://a:1", "http://c:1"]);
        let (joined, left) = r.set(&c2, configured(&c2), None);
        assert_eq!(joined.len(), 1);
        assert_eq!(&*left[0].address, "b:1");
        assert!(Arc::ptr_eq(&a, &r.find("a:1").expect("kept")));
        assert!(matches!(r.pinned("b:1"), Pinned::Gone(_)));
        assert!(matches!(r.pinned("z:1"), Pinned::Unknown));
        // It comes back as itself.
        r.set(&c, configured(&c), None);
        assert!(matches!(r.pinned("b:1"), Pinned::At(_)));
        r.set(&c2, configured(&c2), None);
        assert_eq!(r.expire(Duration::ZERO).len(), 1);
        assert!(matches!(r.pinned("b:1"), Pinned::Unknown));
        let uri: hyper::Uri = "http://C:1/x".parse().expect("uri");
        assert_eq!(&*r.at(&uri).expect("c").address, "c:1");
    }
}
