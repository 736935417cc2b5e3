//! Where the delivery worker finds the A2A push config a lane is for: a narrow trait, which
//! the ledger answers (wired in `lib.rs`), so the webhook module depends on no store. A lane
//! names its config only by id (`~push:{id}`) and its task by key: the secrets stay in the
//! ledger, never in a lane entry or a dead letter.

use std::sync::Arc;

use super::queue::QueueFuture;
use crate::protocol::a2a::push::PushConfig;

/// A push config found for a lane, with the client whose task it is.
#[derive(Debug)]
pub struct PushTarget {
    /// The config.
    pub config: PushConfig,
    /// The task's owner: the client whose share of the deliveries in flight the attempt takes
    /// (`webhook::share`); `None` for a task without one.
    pub owner: Option<Arc<str>>,
}

/// The configs of A2A tasks, as the worker needs them.
pub trait PushDirectory: Send + Sync + 'static {
    /// Config `id` of task `task_id` (the ledger key), if it is still there, with the task's
    /// owner (read with it: one look-up per attempt).
    fn config<'a>(&'a self, task_id: &'a str, id: &'a str) -> QueueFuture<'a, Option<PushTarget>>;
    /// Remove config `id` of task `task_id` (its receiver answered 410 Gone).
    fn remove<'a>(&'a self, task_id: &'a str, id: &'a str) -> QueueFuture<'a, ()>;
}

/// The agent of an A2A task's ledger key (`{agent}/{id}`); empty for another key.
pub fn agent_of(task_id: &str) -> &str {
    task_id.split_once('/').map_or("", |(a, _)| a)
}

/// A shared directory.
pub type Directory = Arc<dyn PushDirectory>;
