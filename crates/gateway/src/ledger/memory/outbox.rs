//! The in-process ledger's outbox: a change's deliveries queued under the shard lock that
//! records it, for the configured subscribers of its agent (status changes only) and the A2A
//! push configs of its task (every change they would read: `ledger::news`).

use bytes::Bytes;

use super::{push, MemoryLedger, Shard};
use crate::ledger::LedgerError;
use crate::protocol::task::Head;
use crate::webhook::queue::{self, Message};

/// One accepted change of a task, as its deliveries are written.
pub(super) struct Change<'a> {
    pub agent: &'a str,
    pub task_id: &'a str,
    pub head: Head,
    /// The task's change number (numbers the message id).
    pub number: u64,
    /// The document recorded.
    pub task: &'a Bytes,
    /// The W3C trace context of the news, if traced.
    pub trace: Option<&'a str>,
    /// Whether the agent's subscribers hear of it (a status change); the task's push configs
    /// always do.
    pub to_subscribers: bool,
}

impl MemoryLedger {
    /// Queue `change` for the agent's subscribers (when it is theirs) and every push config of
    /// its task; the number of push deliveries left out for want of room. The subscribers'
    /// not fitting is `QueueFull`: the change is then not recorded.
    pub(super) fn queue_change(
        &self,
        s: &Shard,
        change: &Change<'_>,
    ) -> Result<usize, LedgerError> {
        let Some((outbox, q)) = self.outbox.as_ref() else {
            return Ok(0);
        };
        let subs = if change.to_subscribers {
            outbox.subscribers(change.agent)
        } else {
            Default::default()
        };
        // A task's configs are its owner's: their deliveries count against that client's share.
        let (pushes, client) = s
            .tasks
            .get(change.task_id)
            .map(|e| (push::lanes(e.push.as_deref()), e.record.owner.clone()))
            .unwrap_or_default();
        if subs.is_empty() && pushes.is_empty() {
            return Ok(0);
        }
        let trace = queue::storable(change.trace);
        // One id per change, for every subscriber and config alike.
        let msg_id = format!(
            "{}_{}",
            queue::message_id_prefix(change.task_id, change.head),
            change.number
        );
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
                message(queue::payload(
                    &now,
                    change.agent,
                    change.task_id,
                    change.task,
                )),
            )
        });
        let to_configs = (!pushes.is_empty()).then(|| {
            let body = crate::protocol::a2a::push::task_body(change.task);
            (&pushes[..], message(body), client.as_deref().unwrap_or(""))
        });
        q.offer_change(change.task_id, to_subscribers, to_configs)
            .ok_or(LedgerError::QueueFull)
    }
}
