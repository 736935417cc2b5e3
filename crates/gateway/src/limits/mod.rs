//! Limits: how much one client may ask of this replica, and how much this replica may ask of
//! one agent. Decided in memory, without I/O, and without a lock held across an await:
//!
//! - [`rate`]: a token bucket per client with a `rate_per_sec`, and per token subject without
//!   a `[[clients]]` entry (`[auth] token_rate_per_sec`, in a table of its own bounded by
//!   `max_token_subjects`) ([`Buckets`]), taken at admission once the client is known; past
//!   it, 429 RATE_LIMITED.
//! - [`agent`]: per agent, its requests in flight against `max_in_flight` (503 AGENT_BUSY past
//!   it) and its circuit: ejected after `eject_after` consecutive failures, answered 503
//!   AGENT_UNAVAILABLE without a call until one half-open probe after `eject_secs` succeeds
//!   ([`AgentLimits`]).
//!
//! Both are per replica on purpose: they protect this process and the agents from it, need no
//! round trip to be decided, and a client's share across N replicas is N buckets (the load
//! balancer spreads it). Both survive a config reload: the buckets are keyed by client name and
//! held by `State`, not by the clients; an agent's [`AgentLimits`] is an `Arc` its
//! `registry::Agent` can hand on. Their parameters are read from the current config on every
//! request.
//!
//! Refusals are typed here ([`RateLimited`], [`AgentRefused`]); `http::error` turns them into
//! answers.

pub mod agent;
pub mod rate;

pub use agent::{AgentLimits, AgentPolicy, AgentRefused, Health, Pass, Refusal};
pub use rate::{Buckets, Quota, Rate, RateLimited};
