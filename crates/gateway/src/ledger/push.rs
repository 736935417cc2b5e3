//! The ledger as the webhook worker's [`PushDirectory`]: a lane's A2A push config read from the
//! task's configs in the ledger (both stores), and removed when its receiver is gone.

use std::sync::Arc;

use super::{LedgerError, TaskLedger};
use crate::protocol::a2a::push::PushConfig;
use crate::webhook::push::PushDirectory;
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
    fn config<'a>(&'a self, task_id: &'a str, id: &'a str) -> QueueFuture<'a, Option<PushConfig>> {
        Box::pin(async move {
            let all = self.0.push_configs(task_id).await.map_err(queue_error)?;
            Ok(all
                .iter()
                .filter_map(|c| PushConfig::decode(c))
                .find(|c| c.id == id))
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
