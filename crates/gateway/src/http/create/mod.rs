//! The create path, in one module: a request that makes a task on an agent.
//!
//! A protocol's create handler (`http::clawpedia::create`) checks the request (route, rights,
//! body, the agent's card), builds the agent request and claims the request's
//! `Idempotency-Key` ([`idempotency`]), then hands over to [`drive`] ([`driver`]), which
//! admits and calls the agent and lets the exchange outlive a timed-out request. The agent's
//! answer comes back through the protocol's [`Finish`] step (judge, record, relay), in time or
//! late, and [`idempotency::settle`] stores it as the key's answer. A task the ledger could not
//! take yet is recorded once it answers ([`pending`]).
//!
//! The walk goes one way: handler → [`drive`] → `Finish::finish` → `http::exchange` →
//! `ledger`; the driver knows no protocol, only the step it was given.

mod driver;
pub mod idempotency;
pub mod pending;

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use hyper::http::response::Parts;
use tokio::sync::OwnedSemaphorePermit;

use super::context::Ctx;
use super::error::ApiResult;
use crate::registry::Agent;
use crate::state::State;

pub use driver::{drain_late_answers, drive, LATE_DRAIN, MAX_LATE_ANSWERS};

/// A protocol's step from the agent's answer to a create to the client's answer: judge it,
/// record the task it names (the caller is its owner), and relay it. Called by [`drive`] once,
/// within the agent's timeout or with the late answer.
pub trait Finish: Send + Sync + 'static {
    /// The client's answer to `res` and `body`, the agent's.
    fn finish(
        &self,
        state: &Arc<State>,
        agent: &Arc<Agent>,
        ctx: &Ctx,
        res: Parts,
        body: Bytes,
    ) -> impl Future<Output = ApiResult> + Send;

    /// The client's answer to the driver's own refusal of the create (the agent busy or
    /// ejected, no connection, no answer in time), in the protocol's error shape: the
    /// gateway's `{"error": ...}` unless the protocol says otherwise.
    fn refused(&self, e: super::error::ApiError) -> hyper::Response<super::body::Body> {
        e.into_response()
    }
}

/// The mark of a create's answer its idempotency key must not keep: the gateway's own failure
/// after the agent answered (its ledger could not be asked). A retry tries again rather than
/// being answered the failure for as long as the key lives.
#[derive(Debug, Clone, Copy)]
pub struct Unsettled;

/// The body a create's idempotency key keeps in place of its answer's: the answer as every
/// caller may read it, when the one given holds what only some may (an agent's own error
/// text, docs/security.md). A replay is a fresh answer, whoever asks again.
#[derive(Debug, Clone)]
pub struct ReplayAs(pub bytes::Bytes);

/// A place among the work that goes on after its request ended (a late answer awaited, a
/// created task recorded once the ledger answers): at most [`MAX_LATE_ANSWERS`] across the
/// workers, and none while `late_answer_secs` is 0.
pub fn late_permit(state: &State) -> Option<OwnedSemaphorePermit> {
    if state.config.late_answer.is_zero() {
        return None;
    }
    state.late_answers.clone().try_acquire_owned().ok()
}

/// Whether the ledger takes one more task from this caller, asked before the agent is called
/// (so no agent ever holds a task the gateway refused): the client's `max_live_tasks` (429
/// TOO_MANY_TASKS) and room for a task about `input_bytes` long, the task's document echoing
/// its input (503 LEDGER_FULL). Both with `Retry-After`.
pub async fn admit_task(
    state: &State,
    caller: &crate::auth::Caller,
    input_bytes: usize,
) -> Result<(), super::error::ApiError> {
    let bounds = match caller {
        crate::auth::Caller::Client(c) => crate::ledger::Bounds {
            max_live: c.max_live_tasks,
            max_bytes: Some(
                c.max_ledger_bytes
                    .unwrap_or(state.config.max_ledger_bytes / 10),
            ),
        },
        _ => crate::ledger::Bounds::default(),
    };
    let owner = caller.owner().map(|o| o.as_ref());
    state.ledger.admit(owner, bounds, input_bytes).await?;
    Ok(())
}
