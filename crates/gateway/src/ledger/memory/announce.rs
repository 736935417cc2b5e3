//! What the in-process ledger tells the change feed, under the lock that judged the update
//! (as the Redis ledger's script publishes in its atomic step): accepted changes and refusals.

use super::MemoryLedger;
use crate::ledger::changes::{Change, Refused};
use crate::ledger::{notifies, Record};
use crate::protocol::task::{Head, Refusal, Verdict};

impl MemoryLedger {
    /// Tell the feed's listeners of an accepted change that notifies (a first sighting or a
    /// transition), under the lock that recorded it.
    pub(super) fn announce(&self, task_id: &str, record: &Record, verdict: Verdict) {
        let head = record.head;
        if let Some(feed) = self
            .changes
            .as_ref()
            .filter(|f| notifies(verdict) && f.wanted(head.status))
        {
            feed.publish(Change {
                agent: record.agent.clone(),
                task_id: task_id.into(),
                status: head.status,
                owner: record.owner.clone(),
                task: record.task.clone(),
            });
        }
    }

    /// Tell the feed's listeners of a refused update, under the lock that judged it (as the
    /// Redis ledger's script publishes it in its atomic step).
    pub(super) fn announce_refusal(
        &self,
        agent: &str,
        task_id: &str,
        recorded: &Record,
        offered: Head,
        reason: Refusal,
    ) {
        if let Some(feed) = self.changes.as_ref().filter(|f| f.wants_refusals()) {
            feed.publish_refused(Refused {
                agent: agent.into(),
                recorded_agent: recorded.agent.clone(),
                task_id: task_id.into(),
                recorded: recorded.head.status,
                offered: offered.status,
                reason,
                at: crate::protocol::time::now().into(),
            });
        }
    }
}
