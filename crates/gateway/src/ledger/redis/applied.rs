//! The apply script's reply read back into the ledger's answer: the verdict, the record after
//! the call, the push deliveries the queue had no room for (see `apply.lua`'s "Returns").

use std::sync::Arc;

use bytes::Bytes;
use redis::Value as RValue;

use crate::ledger::{Applied, LedgerError, Record};
use crate::protocol::task::{Head, Refusal, Status, Verdict};

/// `reply` of an apply of `task` (the document sent: on acceptance the script leaves it out).
pub(super) fn applied(reply: &[RValue], task: Bytes) -> Result<Applied, LedgerError> {
    let bad = || super::bad_reply("apply");
    let text = |v: &RValue| -> Option<String> { redis::from_redis_value_ref::<String>(v).ok() };
    let verdict_s = reply.first().and_then(text).ok_or_else(bad)?;
    let rec_agent = reply.get(1).and_then(text).ok_or_else(bad)?;
    let rec_status = reply
        .get(2)
        .and_then(text)
        .and_then(|s| Status::parse(&s))
        .ok_or_else(bad)?;
    let rec_updated = reply
        .get(3)
        .and_then(text)
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(bad)?;
    let rec_task = reply
        .get(4)
        .and_then(|v| redis::from_redis_value_ref::<Vec<u8>>(v).ok())
        .ok_or_else(bad)?;
    let verdict = match verdict_s.as_str() {
        "new" => Verdict::New,
        // The state the task left, which only the script saw.
        "transition" => Verdict::Transition {
            from: reply
                .get(5)
                .and_then(text)
                .and_then(|s| Status::parse(&s))
                .ok_or_else(bad)?,
        },
        "refresh" => Verdict::Refresh,
        "duplicate" => Verdict::Duplicate,
        "terminal" => Verdict::Refused(Refusal::Terminal),
        "backwards" => Verdict::Refused(Refusal::Backwards),
        "stale" => Verdict::Refused(Refusal::Stale),
        "foreign_agent" => Verdict::Refused(Refusal::ForeignAgent),
        "queue_full" => return Err(LedgerError::QueueFull),
        _ => return Err(bad()),
    };
    let rec_owner = reply
        .get(6)
        .and_then(text)
        .filter(|o| !o.is_empty())
        .map(Arc::<str>::from);
    let created_ms = reply
        .get(7)
        .and_then(text)
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or(rec_updated);
    // On acceptance the script leaves the document out: it is the one just sent.
    let rec_task = if verdict.is_accepted() {
        task
    } else {
        Bytes::from(rec_task)
    };
    let replica = reply
        .get(9)
        .and_then(text)
        .filter(|r| !r.is_empty())
        .map(Arc::<str>::from);
    // Push deliveries the queue had no room for (the change is recorded all the same).
    let push_dropped = reply
        .get(8)
        .and_then(|v| redis::from_redis_value_ref::<usize>(v).ok())
        .unwrap_or(0);
    Ok(Applied {
        push_dropped,
        verdict,
        record: Record {
            agent: rec_agent.into(),
            head: Head {
                status: rec_status,
                updated_ms: rec_updated,
            },
            task: rec_task,
            owner: rec_owner,
            created_ms,
            replica,
        },
    })
}
