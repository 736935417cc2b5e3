//! The ledger as the webhook worker's [`PushDirectory`]: a lane's A2A push config read from the
//! task's configs in the ledger (both stores), with the task's owner in the same read, and
//! removed when its receiver is gone.

use std::sync::Arc;

use super::{LedgerError, TaskLedger};
use crate::protocol::a2a::push::PushConfig;
use crate::webhook::push::{PushDirectory, PushTarget};
use crate::webhook::queue::{QueueError, QueueFuture};

/// A ledger failure as the worker's: a read or a removal can fail only in the store.
fn queue_error(e: LedgerError) -> QueueError {
    match e {
        LedgerError::Store(f) => QueueError::Store(f),
        _ => QueueError::Store(crate::store::Failure::Other),
    }
}

/// The push configs the ledger keeps, for the delivery worker.
pub struct Directory(pub Arc<dyn TaskLedger>);

impl PushDirectory for Directory {
    fn config<'a>(&'a self, task_id: &'a str, id: &'a str) -> QueueFuture<'a, Option<PushTarget>> {
        Box::pin(async move {
            let found = self
                .0
                .push_configs_and_owner(task_id)
                .await
                .map_err(queue_error)?;
            let owner = found.owner;
            Ok(found
                .configs
                .iter()
                .filter_map(|c| PushConfig::decode(c))
                .find(|c| c.id == id)
                .map(|config| PushTarget { config, owner }))
        })
    }

    fn remove<'a>(&'a self, task_id: &'a str, id: &'a str) -> QueueFuture<'a, ()> {
        Box::pin(async move {
            self.0
                .delete_push_config(task_id, id)
                .await
                .map(drop)
                .map_err(queue_error)
        })
    }
}
