//! Open streams: counted per client (`max_streams`), and each one's grant kept, so that when
//! the credentials that opened it are withdrawn the stream ends within a second. A reload may
//! remove a client, rotate its key or its JWKS, or take away a right or an agent a stream
//! needs; a JWT's `exp` may pass. Checking only new requests would leave an open `/events`
//! carrying task data to a caller the operator has shut out.
//!
//! A stream learns of it through its [`StreamPermit`]: the permit's grant is marked revoked
//! with a [`Revoked`] reason and its waker woken; the stream then sends its last event
//! (`event: access_revoked`, `data: {"reason": R}`) and ends, with no reconnect hint.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;

use super::{Client, Digest32};
use crate::config::Right;
use crate::protocol::a2a::Method;

/// Why an open stream was ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Revoked {
    /// The client is no longer configured.
    ClientRemoved = 1,
    /// The key (or certificate subject, or the JWKS key) that opened the stream no longer
    /// names its client.
    KeyRotated,
    /// The client lost a right the stream needs (`streams`, `events`, `all_tasks`), or the
    /// official A2A method it was opened with (`methods`).
    RightRemoved,
    /// The agent the stream reads was removed, or the client may no longer use it.
    AgentRemoved,
    /// The JWT that opened the stream reached its `exp`.
    TokenExpired,
}

impl Revoked {
    /// The `reason` of the `access_revoked` event.
    pub fn reason(self) -> &'static str {
        match self {
            Revoked::ClientRemoved => "client_removed",
            Revoked::KeyRotated => "key_rotated",
            Revoked::RightRemoved => "right_removed",
            Revoked::AgentRemoved => "agent_removed",
            Revoked::TokenExpired => "token_expired",
        }
    }

    fn of(b: u8) -> Option<Revoked> {
        [
            Revoked::ClientRemoved,
            Revoked::KeyRotated,
            Revoked::RightRemoved,
            Revoked::AgentRemoved,
            Revoked::TokenExpired,
        ]
        .into_iter()
        .find(|r| *r as u8 == b)
    }

    /// The stream's last event: `event: access_revoked` with `{"reason": R}`, and no `retry:`
    /// (an EventSource that reconnects meets the refusal a new request gets).
    pub fn event(self) -> bytes::Bytes {
        bytes::Bytes::from(format!(
            "event: access_revoked\ndata: {{\"reason\":\"{}\"}}\n\n",
            self.reason()
        ))
    }
}

/// How the request that opened a stream proved who it was.
#[derive(Debug)]
pub(super) enum Proof {
    /// A bearer key, by its SHA-256.
    Key(Digest32),
    /// A client certificate's subject.
    Cert(Box<str>),
    /// A verified JWT (kept to verify again when the JWKS changes), its `exp`, and the
    /// fingerprint of the `[[auth.oidc]]` key that verified it (its stream ends when the
    /// identity provider withdraws that key).
    Jwt {
        token: Box<[u8]>,
        exp: u64,
        key: Option<[u8; 32]>,
    },
}

/// What a stream relies on besides its client's identity, set by the handler that opens it.
#[derive(Debug, Default)]
pub(super) struct Relies {
    /// The agents it reads, by route name; `None`: every agent the client may use.
    pub agents: Option<Vec<Arc<str>>>,
    /// It reads tasks of other clients (`all_tasks`).
    pub all_tasks: bool,
    /// The official A2A method that opened it (SendStreamingMessage, SubscribeToTask): the
    /// client's `methods` must keep it.
    pub method: Option<Method>,
}

/// One open stream's grant: what was proved, what it needs, and whether it was revoked.
#[derive(Debug)]
pub(super) struct Grant {
    id: u64,
    /// The generation of the identity that admitted it (see [`StreamPermit::settle`]).
    gen: u64,
    pub client: Arc<Client>,
    pub proof: Proof,
    pub right: Right,
    pub relies: Mutex<Relies>,
    revoked: AtomicU8,
    waker: AtomicWaker,
}

impl Grant {
    /// Mark it revoked (the first reason stays) and wake its stream.
    pub fn revoke(&self, why: Revoked) {
        if self
            .revoked
            .compare_exchange(0, why as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.waker.wake();
        }
    }
}

/// Open streams per client on this replica, and their grants. Entries leave when their streams
/// end, so the maps hold one entry per open stream (and per client that has one).
#[derive(Debug, Default)]
pub struct StreamCounts {
    open: Mutex<Open>,
    next_id: AtomicU64,
    /// The identity and agents of the last reload's judgement, and its generation: a stream
    /// admitted by an older identity, or judged before its handler said what it stands on, is
    /// judged again by this one when it settles.
    latest: Mutex<Option<Latest>>,
}

#[derive(Debug)]
struct Latest {
    gen: u64,
    auth: Weak<super::Auth>,
    registry: Weak<crate::registry::Registry>,
}

#[derive(Debug, Default)]
struct Open {
    per_client: HashMap<Arc<str>, usize>,
    grants: HashMap<u64, Arc<Grant>>,
    /// JWT grants by `exp`, for [`StreamCounts::expire`].
    expiring: BTreeSet<(u64, u64)>,
}

impl StreamCounts {
    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn acquire(
        self: &Arc<Self>,
        client: &Arc<Client>,
        proof: Proof,
        right: Right,
        gen: u64,
    ) -> Option<StreamPermit> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let exp = match &proof {
            Proof::Jwt { exp, .. } => Some(*exp),
            _ => None,
        };
        let grant = Arc::new(Grant {
            id,
            gen,
            client: client.clone(),
            proof,
            right,
            relies: Mutex::default(),
            revoked: AtomicU8::new(0),
            waker: AtomicWaker::new(),
        });
        let mut open = self.lock();
        let n = open.per_client.entry(client.name.clone()).or_insert(0);
        if *n >= client.max_streams {
            if *n == 0 {
                open.per_client.remove(&client.name);
            }
            return None;
        }
        *n += 1;
        open.grants.insert(id, grant.clone());
        if let Some(exp) = exp {
            open.expiring.insert((exp, id));
        }
        drop(open);
        Some(StreamPermit {
            counts: self.clone(),
            grant,
        })
    }

    fn release(&self, g: &Grant) {
        let mut open = self.lock();
        if let Some(n) = open.per_client.get_mut(&g.client.name) {
            *n -= 1;
            if *n == 0 {
                open.per_client.remove(&g.client.name);
            }
        }
        open.grants.remove(&g.id);
        if let Proof::Jwt { exp, .. } = g.proof {
            open.expiring.remove(&(exp, g.id));
        }
    }

    /// Every open grant, to judge after a reload (outside the lock), once the reload's identity
    /// is recorded as the latest: a grant added after this snapshot settles against it.
    pub(super) fn judged_by(
        &self,
        gen: u64,
        auth: Weak<super::Auth>,
        registry: Weak<crate::registry::Registry>,
    ) -> Vec<Arc<Grant>> {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some(Latest {
            gen,
            auth,
            registry,
        });
        self.lock().grants.values().cloned().collect()
    }

    /// Revoke every grant of a token verified with one of these keys (their identity provider
    /// withdrew them): `key_rotated`.
    pub fn revoke_keys(&self, gone: &[[u8; 32]]) {
        let due: Vec<Arc<Grant>> = self
            .lock()
            .grants
            .values()
            .filter(|g| matches!(&g.proof, Proof::Jwt { key: Some(k), .. } if gone.contains(k)))
            .cloned()
            .collect();
        for g in due {
            g.revoke(Revoked::KeyRotated);
        }
    }

    /// Revoke every JWT grant whose `exp` is at or before `now` (Unix seconds).
    pub fn expire(&self, now: u64) {
        let mut due = Vec::new();
        {
            let mut open = self.lock();
            while let Some(&(exp, id)) = open.expiring.first() {
                if exp > now {
                    break;
                }
                open.expiring.pop_first();
                if let Some(g) = open.grants.get(&id) {
                    due.push(g.clone());
                }
            }
        }
        for g in due {
            g.revoke(Revoked::TokenExpired);
        }
    }

    /// Run [`StreamCounts::expire`] four times a second until the counts are dropped (the
    /// gateway stopped): a token's streams end within a second of its `exp`.
    pub async fn expire_forever(counts: Weak<StreamCounts>) {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(c) = counts.upgrade() else { return };
            c.expire(super::jwt::now_secs());
        }
    }
}

/// One open stream of a client: counted until dropped (when the stream ends), and told when
/// the credentials that opened it are withdrawn.
#[derive(Debug)]
pub struct StreamPermit {
    counts: Arc<StreamCounts>,
    grant: Arc<Grant>,
}

impl StreamPermit {
    /// Whether the stream's access was withdrawn, and why.
    pub fn revoked(&self) -> Option<Revoked> {
        Revoked::of(self.grant.revoked.load(Ordering::Acquire))
    }

    /// Ready with the reason once the stream's access is withdrawn; until then `cx` is woken
    /// when it is.
    pub fn poll_revoked(&self, cx: &mut Context<'_>) -> Poll<Revoked> {
        if let Some(r) = self.revoked() {
            return Poll::Ready(r);
        }
        self.grant.waker.register(cx.waker());
        match self.revoked() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }

    /// The stream reads these agents (`None`: every agent its client may use).
    pub fn relies_on_agents(&self, agents: Option<Vec<Arc<str>>>) {
        self.grant
            .relies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .agents = agents;
    }

    /// The stream reads tasks of other clients: it needs `all_tasks`.
    pub fn relies_on_all_tasks(&self) {
        self.grant
            .relies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .all_tasks = true;
    }

    /// The stream was opened by the official A2A method `m`: it needs the client's `methods`
    /// to keep it.
    pub fn relies_on_method(&self, m: Method) {
        self.grant
            .relies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .method = Some(m);
    }

    /// Called once the handler has said what the stream stands on: if a reload came between
    /// admission and now (the request was admitted by the identity before it, or judged before
    /// its agents were known), judge it again by the latest identity.
    pub fn settle(&self) {
        let latest = {
            let l = self.counts.latest.lock().unwrap_or_else(|p| p.into_inner());
            match &*l {
                Some(l) if l.gen != self.grant.gen => (l.auth.upgrade(), l.registry.upgrade()),
                _ => return,
            }
        };
        if let (Some(auth), Some(registry)) = latest {
            if let Some(why) = auth.judge(&self.grant, &registry) {
                self.grant.revoke(why);
            }
        }
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        self.counts.release(&self.grant);
    }
}
