//! Who a caller is once authenticated, and what it may do: a configured client or a token's
//! subject ([`Client`]: its agents, its rights, its A2A methods, its rate), or nobody at all on a
//! gateway without clients ([`Caller`]). How a credential names one is `auth`'s.

use std::sync::Arc;

use crate::config::{ClientConfig, Right};
use crate::limits::Rate;
use crate::protocol::a2a::Method;
use crate::registry::Agent;

/// A set of [`Right`]s, as bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rights(u8);

impl Rights {
    fn bit(r: Right) -> u8 {
        1 << (r as u8)
    }

    /// The rights listed.
    pub fn of(list: &[Right]) -> Rights {
        Rights(list.iter().fold(0, |acc, r| acc | Rights::bit(*r)))
    }

    /// Whether `r` is among them.
    pub fn has(self, r: Right) -> bool {
        self.0 & Rights::bit(r) != 0
    }

    /// These and `other`'s.
    pub fn union(self, other: Rights) -> Rights {
        Rights(self.0 | other.0)
    }
}

/// The official A2A methods a client may call (`[[clients]] methods`), as bits of
/// [`Method::ALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Methods(u16);

impl Methods {
    /// Every method: a client without `methods`, an unbound token subject, no clients at all.
    pub const ALL: Methods = Methods((1 << Method::ALL.len()) - 1);

    /// No method: a token of an `[[auth.oidc]]` issuer without a mapped scope.
    pub const NONE: Methods = Methods(0);

    fn bit(m: Method) -> u16 {
        // Declared in `Method::ALL`'s order: 0 to 10.
        1 << (m as u16)
    }

    /// The methods named (the checked config's names; a name of no method adds nothing).
    pub fn of(names: &[String]) -> Methods {
        Methods(
            names
                .iter()
                .filter_map(|n| Method::parse(n))
                .fold(0, |acc, m| acc | Methods::bit(m)),
        )
    }

    /// Whether `m` is among them.
    pub fn has(self, m: Method) -> bool {
        self.0 & Methods::bit(m) != 0
    }

    /// These and `other`'s.
    pub fn union(self, other: Methods) -> Methods {
        Methods(self.0 | other.0)
    }
}

/// The agents a client may use: every one, or these route names and card `agent_id`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agents {
    /// `["*"]`.
    All,
    /// Route names or agent_ids.
    Only(Vec<String>),
}

impl Agents {
    pub(super) fn of(list: &[String]) -> Agents {
        // An empty list allows nothing (`Only` of nothing).
        if list.iter().any(|a| a == "*") {
            Agents::All
        } else {
            Agents::Only(list.to_vec())
        }
    }

    /// These and `other`'s: every agent if either is, else both lists.
    pub fn union(&mut self, other: &Agents) {
        match (&mut *self, other) {
            (Agents::All, _) => {}
            (_, Agents::All) => *self = Agents::All,
            (Agents::Only(mine), Agents::Only(theirs)) => {
                for a in theirs {
                    if !mine.contains(a) {
                        mine.push(a.clone());
                    }
                }
            }
        }
    }

    /// Whether `agent` is one of them, by route name or by its card's `agent_id`.
    pub fn allows(&self, agent: &Agent) -> bool {
        match self {
            Agents::All => true,
            Agents::Only(list) => {
                list.contains(&agent.cfg.name)
                    || agent
                        .card()
                        .is_ok_and(|c| c.agent_id().is_some_and(|id| list.iter().any(|a| a == id)))
            }
        }
    }
}

/// A client the gateway knows: configured, or named by a verified JWT.
#[derive(Debug)]
pub struct Client {
    /// Its name: in logs, and the owner recorded on the tasks it creates.
    pub name: Arc<str>,
    /// Its `client` metrics label: its name if configured, `jwt` otherwise (a bounded label
    /// set, whatever subjects an identity provider issues).
    pub label: Arc<str>,
    /// The agents it may use.
    pub agents: Agents,
    /// What it may do.
    pub rights: Rights,
    /// The official A2A methods it may call, beside its rights.
    pub methods: Methods,
    /// Streams it may hold open at once on this replica.
    pub max_streams: usize,
    /// Its token bucket's rate on each replica (`rate_per_sec`, `burst`); `None`: unlimited.
    /// Read on every request: the bucket itself lives in `State::buckets`, by name.
    pub rate: Option<Rate>,
    /// Its tasks not yet final, across every replica (`max_live_tasks`); `None`: no cap.
    pub max_live_tasks: Option<u64>,
    /// Its official A2A contexts, across every replica (`max_contexts`).
    pub max_contexts: u64,
    /// Bytes of the in-process ledger its tasks may hold (`max_ledger_bytes`); `None`: a tenth
    /// of the ledger's.
    pub max_ledger_bytes: Option<usize>,
}

impl Client {
    pub(super) fn from_config(c: &ClientConfig) -> Client {
        let name: Arc<str> = c.name.as_str().into();
        Client {
            label: name.clone(),
            name,
            agents: Agents::of(&c.agents),
            rights: Rights::of(&c.can),
            methods: Methods::of(&c.methods),
            max_streams: c.max_streams,
            rate: c.rate_per_sec.map(|r| Rate::new(r, c.burst)),
            max_live_tasks: c.max_live_tasks,
            max_contexts: c.max_contexts,
            max_ledger_bytes: c.max_ledger_bytes,
        }
    }

    /// Whether it holds `r`.
    pub fn can(&self, r: Right) -> bool {
        self.rights.has(r)
    }

    /// Whether it is a verified token's own identity, without a `[[clients]]` entry: one of
    /// an open set of subjects, counted under a shared label (a configured client's label is
    /// its name). Its bucket is held apart, in a bounded table (`limits::Buckets`).
    pub fn is_token_subject(&self) -> bool {
        self.label != self.name
    }

    /// Whether it may call the official A2A method `m` (its `methods`; the right a call needs
    /// is checked apart).
    pub fn may_call(&self, m: Method) -> bool {
        self.methods.has(m)
    }
}

/// Who a request is from, as admission found it.
#[derive(Debug, Clone)]
pub enum Caller {
    /// No clients are configured: every caller may do everything (loopback, or
    /// `allow_anonymous`).
    Open,
    /// Clients are configured and this request brought no credentials: it reached a route that
    /// needs none (probes, a push with its ingest token). It may use no agent and own no task.
    Public,
    /// An authenticated client.
    Client(Arc<Client>),
}

impl Caller {
    /// The `client` metrics label: a configured name, `jwt`, or `anonymous`.
    pub fn label(&self) -> &str {
        match self {
            Caller::Client(c) => &c.label,
            Caller::Open | Caller::Public => "anonymous",
        }
    }

    /// The owner to record on a task this caller creates: none without clients.
    pub fn owner(&self) -> Option<&Arc<str>> {
        match self {
            Caller::Client(c) => Some(&c.name),
            Caller::Open | Caller::Public => None,
        }
    }

    /// Whether it may use `agent`.
    pub fn may_use(&self, agent: &Agent) -> bool {
        match self {
            Caller::Open => true,
            Caller::Public => false,
            Caller::Client(c) => c.agents.allows(agent),
        }
    }

    /// Whether it may see a task owned by `owner` (`None`: a task without an owner).
    pub fn sees(&self, owner: Option<&str>) -> bool {
        match self {
            Caller::Open => true,
            Caller::Public => false,
            Caller::Client(c) => c.can(Right::AllTasks) || owner == Some(&*c.name),
        }
    }

    /// Whether it holds `r` (everything when no clients are configured).
    pub fn can(&self, r: Right) -> bool {
        match self {
            Caller::Open => true,
            Caller::Public => false,
            Caller::Client(c) => c.can(r),
        }
    }

    /// Whether it may call the official A2A method `m` (every one when no clients are
    /// configured).
    pub fn may_call(&self, m: Method) -> bool {
        match self {
            Caller::Open => true,
            Caller::Public => false,
            Caller::Client(c) => c.may_call(m),
        }
    }

    /// Whether the caller reads agents' own texts (their error messages, a card's refusal):
    /// the one rule of every route and protocol, `metrics` or `admin` (every caller where no
    /// clients are configured). Others get an error's kind without the agent's words, which
    /// may name its address, its hosts, its stack (docs/security.md).
    pub fn reads_agents_texts(&self) -> bool {
        self.can(Right::Metrics) || self.can(Right::Admin)
    }
}
