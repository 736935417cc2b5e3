//! The data a store must not be used with: the previous layout, or another partition count.
//!
//! Before partitions, every key was `{prefix}{gw}:...` (one hash tag: the default prefix was
//! `a2a:{gw}:`). This version does not read that layout. Queued webhook deliveries there would
//! never be sent, so a store holding any is refused, with what to do; task records there are
//! only warned about (they expire by themselves, and a task recorded again is recorded anew).
//!
//! The partition count is written once (`{prefix}layout`) and compared at every start: a task's
//! keys are found by its partition, so another count would lose every record and lane.

use redis::RedisError;

use super::{Conn, Refusal, Store};
use crate::protocol::task::Status;

/// The layout this version writes (the value of `{prefix}layout`, with the partition count).
const LAYOUT: &str = "partitions-v1";

fn later(e: RedisError) -> Refusal {
    Refusal::Later(e.to_string())
}

pub(super) async fn check(store: &Store, mut conn: Conn) -> Result<(), Refusal> {
    let global = store.keys.global();
    let old = format!("{global}{{gw}}:");
    let mut pipe = redis::pipe();
    pipe.cmd("XLEN").arg(format!("{old}wh:stream"));
    pipe.cmd("GET").arg(format!("{old}wh:queued"));
    pipe.cmd("ZCARD").arg(format!("{old}wh:retry"));
    pipe.cmd("LLEN").arg(format!("{old}wh:dead"));
    for s in Status::ALL {
        pipe.cmd("ZCARD").arg(format!("{old}state:{}", s.as_str()));
    }
    let counts: Vec<Option<i64>> = pipe.query_async(&mut conn).await.map_err(later)?;
    let n = |i: usize| counts.get(i).copied().flatten().unwrap_or(0).max(0);
    let (tokens, queued, retrying, dead) = (n(0), n(1), n(2), n(3));
    if tokens + queued + retrying + dead > 0 {
        return Err(Refusal::Never(format!(
            "this Redis holds webhook deliveries of the previous layout under {old}* \
             ({queued} queued, {retrying} waiting to retry, {dead} dead letters), which this \
             version would never send. Run the previous version until they are delivered \
             (a2a_gateway_webhook_queue_depth 0; redrive or drop its dead letters), stop it, \
             then start this one; or delete them knowingly: \
             redis-cli --scan --pattern '{old}wh:*' | xargs redis-cli del"
        )));
    }
    let tasks: i64 = (4..4 + Status::ALL.len()).map(n).sum();
    if tasks > 0 {
        tracing::warn!(
            tasks,
            "this Redis holds task records of the previous layout under {old}*, which this version does not read: \
             those tasks are unknown to it until their agents report them again; they expire by themselves"
        );
    }
    let want = format!("{LAYOUT}:{}", store.keys.len());
    let layout = format!("{global}layout");
    let (found,): (String,) = redis::pipe()
        .cmd("SET")
        .arg(&layout)
        .arg(&want)
        .arg("NX")
        .ignore()
        .cmd("GET")
        .arg(&layout)
        .query_async(&mut conn)
        .await
        .map_err(later)?;
    if found != want {
        return Err(Refusal::Never(format!(
            "this Redis's data under {global}* was written with layout {found:?}, and this gateway is \
             configured for {want:?}: [redis] partitions is fixed for the life of the data. Set \
             partitions back, or use another prefix for a fresh keyspace"
        )));
    }
    Ok(())
}
