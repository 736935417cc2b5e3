//! The in-process ledger's outbox: a change's deliveries queued under the shard lock that
//! records it, for the configured subscribers of its agent and the A2A push configs of its task.

use bytes::Bytes;

use super::{push, MemoryLedger, Shard};
use crate::ledger::LedgerError;
use crate::protocol::task::Head;
use crate::webhook::queue::{self, Message};

impl MemoryLedger {
    /// Queue change number `changes` of `task_id` (its document `task`) for every subscriber
    /// and push config; the number of push deliveries left out for want of room. The
    /// subscribers' not fitting is `QueueFull`: the change is then not recorded.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn queue_change(
        &self,
        s: &Shard,
        agent: &str,
        task_id: &str,
        head: Head,
        changes: u64,
        task: &Bytes,
        trace: Option<&str>,
    ) -> Result<usize, LedgerError> {
        let Some((outbox, q)) = self.outbox.as_ref() else {
            return Ok(0);
        };
        let subs = outbox.subscribers(agent);
        let pushes = s
            .tasks
            .get(task_id)
            .map(|e| push::lanes(e.push.as_deref()))
            .unwrap_or_default();
        if subs.is_empty() && pushes.is_empty() {
            return Ok(0);
        }
        let trace = queue::storable(trace);
        // One id per change, for every subscriber and config alike.
        let msg_id = format!("{}_{changes}", queue::message_id_prefix(task_id, head));
        let message = |payload: Vec<u8>| Message {
            msg_id: msg_id.clone(),
            enqueued_ms: crate::protocol::time::now_ms(),
            payload: payload.into(),
            version: if trace.is_some() { 2 } else { 1 },
            trace: trace.map(Box::from),
        };
        let to_subscribers = (!subs.is_empty()).then(|| {
            let now = crate::protocol::time::now();
            (
                &subs[..],
                message(queue::payload(&now, agent, task_id, task)),
            )
        });
        let to_configs = (!pushes.is_empty()).then(|| {
            let body = crate::protocol::a2a::push::task_body(task);
            (&pushes[..], message(body))
        });
        q.offer_change(task_id, to_subscribers, to_configs)
            .ok_or(LedgerError::QueueFull)
    }
}
