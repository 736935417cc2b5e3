//! What the pipeline knows of a request besides the request itself: the connection it came on
//! and the request's context. Its own module, so that the pipeline and the handlers both use it
//! without the handlers importing the pipeline that calls them.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::header::HeaderValue;
use tokio::sync::Notify;

use crate::auth::{Caller, StreamPermit};
use crate::caller::{Kind, OnBehalf};
use crate::limits::Quota;
use crate::registry::Agent;
use crate::telemetry::Trace;

/// The connection a request came on, as the pipeline needs it.
#[derive(Clone)]
pub struct Conn {
    /// The client's address.
    pub peer: SocketAddr,
    /// The client's IP as `X-Forwarded-For` carries it: formatted once per connection, not per
    /// request.
    pub peer_ip: HeaderValue,
    /// Ends the connection from outside its task (a slow event-stream consumer whose socket is
    /// full is never polled, so it cannot end itself).
    pub kill: Arc<Notify>,
    /// Whether the connection is TLS (what `X-Forwarded-Proto` tells an agent).
    pub https: bool,
    /// The subject (RFC 4514, see `tls::subject`) of the client certificate verified on this
    /// TLS connection, if one was presented: admission's credential when there is no bearer.
    pub cert_subject: Option<Arc<str>>,
}

impl Conn {
    /// A plaintext connection from `peer`.
    pub fn new(peer: SocketAddr) -> Conn {
        Conn {
            peer,
            peer_ip: HeaderValue::try_from(peer.ip().to_string())
                .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
            kill: Arc::new(Notify::new()),
            https: false,
            cert_subject: None,
        }
    }
}

/// How a caller proved who it is (set by admission). Its `Debug` never shows a token.
#[derive(Clone, Default)]
pub enum Proof {
    /// Nothing yet, or nothing asked (a public route, a gateway without clients).
    #[default]
    None,
    /// A bearer key.
    Key,
    /// The connection's client certificate.
    Certificate,
    /// A JWT, kept for `identity = "token"` agents and the assertion's `idp_*` claims.
    Token(Arc<str>),
}

impl std::fmt::Debug for Proof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Proof::None => "None",
            Proof::Key => "Key",
            Proof::Certificate => "Certificate",
            Proof::Token(_) => "Token(..)",
        })
    }
}

/// What a handler knows of the request besides the request itself.
pub struct Ctx {
    /// The request id (stage 1), sent on to the agent and set on the answer.
    pub request_id: HeaderValue,
    /// See [`Conn::peer_ip`].
    pub peer_ip: HeaderValue,
    /// The agent the request is about, once a handler has resolved it (the metrics' label).
    pub agent: Option<Arc<Agent>>,
    /// See [`Conn::kill`].
    pub kill: Arc<Notify>,
    /// Who the request is from (stage 3, admission).
    pub caller: Caller,
    /// How it proved it (stage 3): what an agent with `identity` is told (`client_kind`).
    pub proof: Proof,
    /// A stream route's slot among its client's `max_streams` (stage 3), for the handler to
    /// hand to the stream it opens: the slot is free again when the stream ends.
    pub permit: Option<StreamPermit>,
    /// A rate-limited client's bucket after this request (stage 3), for the `RateLimit` and
    /// `RateLimit-Policy` headers on the answer (stage 5).
    pub quota: Option<Quota>,
    /// See [`Conn::https`].
    pub https: bool,
    /// See [`Conn::cert_subject`].
    pub cert_subject: Option<Arc<str>>,
    /// The request's span, when telemetry is on: the parent of the handler's spans.
    pub trace: Option<Trace>,
    /// When the pipeline took the request: a lower bound of the time of anything an agent
    /// answered to it (`Ctx::started_ms`).
    pub started: std::time::Instant,
    /// The official A2A version the client speaks on an A2A call (`1.0`, `0.3`; set by the
    /// A2A call path once its wire form is known): what the configs it makes are delivered in.
    pub speaks: Option<&'static str>,
    /// The A2A method of an A2A call, once read: its `method` label, should the call's
    /// deadline cut it before it is counted.
    pub a2a_method: Option<crate::protocol::a2a::Method>,
    /// Which of the agent's replicas the request goes to, once known: pinned by the task or
    /// context it names (`exchange::replica::pin`), or picked for new work when its request is
    /// built; what the ledger then records as the task's replica.
    pub replica: crate::http::exchange::replica::Slot,
}

impl Ctx {
    /// What of the request outlives it, for work that goes on after the answer (a create's
    /// late answer, a task recorded once the ledger is back): the ids, the agent and the
    /// caller (the task's owner); no stream slot, quota or certificate.
    pub fn detached(&self) -> Ctx {
        Ctx {
            request_id: self.request_id.clone(),
            peer_ip: self.peer_ip.clone(),
            agent: self.agent.clone(),
            kill: self.kill.clone(),
            caller: self.caller.clone(),
            proof: self.proof.clone(),
            permit: None,
            quota: None,
            https: self.https,
            cert_subject: None,
            trace: self.trace.clone(),
            started: self.started,
            speaks: self.speaks,
            a2a_method: self.a2a_method,
            replica: self.replica.clone(),
        }
    }

    /// On whose behalf the request goes to an agent: its client, as admission knew it.
    pub fn on_behalf(&self) -> OnBehalf<'_> {
        match (&self.caller, &self.proof) {
            (Caller::Client(c), proof) => OnBehalf::Client {
                sub: &c.name,
                kind: match proof {
                    Proof::Certificate => Kind::Certificate,
                    Proof::Token(_) => Kind::Token,
                    Proof::Key | Proof::None => Kind::Key,
                },
                token: match proof {
                    Proof::Token(t) => Some(t),
                    _ => None,
                },
            },
            (Caller::Open, _) => OnBehalf::Anonymous,
            (Caller::Public, _) => OnBehalf::Nobody,
        }
    }

    /// [`Ctx::started`] on the wall clock, in ms since the epoch.
    pub fn started_ms(&self) -> i64 {
        let ago = i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX / 4);
        crate::protocol::time::now_ms().saturating_sub(ago)
    }
}
