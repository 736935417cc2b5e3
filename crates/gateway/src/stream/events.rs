//! `GET /events?agent=NAME&task=ID...`: one connection for many tasks. It carries every ledger
//! change matching the filters as `event: task.status.updated` (data: the spec's notification
//! payload), and, for each `task=` filter, that task's own stream events with their data tagged:
//! `{"task_id": ..., "data": <the event's data>}`. Filters are repeatable and all optional;
//! agents and tasks combine with AND. With Redis, changes from every replica arrive (the change
//! feed relays the Redis channel).
//!
//! Clients that see every task (`all_tasks`, or no clients configured) also get each update the
//! ledger refused, as `event: task.transition.refused` with data
//! `{task_id, agent, recorded, offered, reason, at}`: the operators' view of misbehaving agents.
//!
//! One task per connection feeds a bounded channel; a client that does not keep up is cut.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream::{SelectAll, StreamExt};
use tokio::sync::{broadcast, mpsc};

use super::topic::Subscription;
use crate::ledger::changes::{Change, News, Refused};
use crate::metrics::Metrics;
use crate::protocol::sse::{write_event, write_ping, Parser};

/// Task streams one `/events` connection may follow.
pub const MAX_TASKS: usize = 64;
/// Frames queued for one `/events` client.
const QUEUE: usize = 512;
/// A client that takes no frame for this long while its queue is full is too slow: it is cut
/// (the change feed would otherwise run past it anyway).
const STALL: Duration = Duration::from_secs(5);

/// The filters of one `/events` connection, from its query.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// `agent=` route names; empty: every agent.
    pub agents: Vec<String>,
    /// `task=` ids; empty: every task.
    pub tasks: Vec<String>,
    /// Only the tasks this client created (a client without `all_tasks`); `None`: every task.
    pub owner: Option<Arc<str>>,
    /// Only these agents (the client's `agents`); `None`: every agent.
    pub allowed: Option<Vec<String>>,
}

impl Filter {
    /// Whether a change passes the filters.
    pub fn matches(&self, c: &Change) -> bool {
        (self.agents.is_empty() || self.agents.iter().any(|a| **a == *c.agent))
            && (self.tasks.is_empty() || self.tasks.iter().any(|t| **t == *c.task_id))
            && self
                .owner
                .as_ref()
                .is_none_or(|o| c.owner.as_deref() == Some(&**o))
            && self
                .allowed
                .as_ref()
                .is_none_or(|l| l.iter().any(|a| **a == *c.agent))
    }

    /// Whether a refusal passes the filters: only for a client that sees every task (a refused
    /// update names no owner it could be checked against), and that may use both the agent
    /// that offered it and the one the task is recorded under (they differ for
    /// `foreign_agent`: the event would tell of another agent's task). An `agent=` filter
    /// takes either.
    pub fn matches_refusal(&self, r: &Refused) -> bool {
        let named = |a: &str| self.agents.iter().any(|f| f == a);
        let allowed = |a: &str| {
            self.allowed
                .as_ref()
                .is_none_or(|l| l.iter().any(|f| f == a))
        };
        self.owner.is_none()
            && (self.agents.is_empty() || named(&r.agent) || named(&r.recorded_agent))
            && (self.tasks.is_empty() || self.tasks.iter().any(|t| **t == *r.task_id))
            && allowed(&r.agent)
            && allowed(&r.recorded_agent)
    }
}

/// The data of `event: task.transition.refused`.
fn refusal_data(r: &Refused) -> String {
    // An official A2A task: its own id (the ledger key is `{agent}/{id}`) and its states as
    // the A2A protocol spells them.
    if let Some((_, id)) = crate::protocol::a2a::split_ledger_key(&r.task_id) {
        let spell = |s| crate::protocol::a2a::TaskState::of_status(s).as_str();
        return serde_json::json!({
            "protocol": "a2a",
            "task_id": id,
            "agent": &*r.agent,
            "recorded": spell(r.recorded),
            "offered": spell(r.offered),
            "reason": r.reason.as_str(),
            "at": &*r.at,
        })
        .to_string();
    }
    serde_json::json!({
        "task_id": &*r.task_id,
        "agent": &*r.agent,
        "recorded": r.recorded.as_str(),
        "offered": r.offered.as_str(),
        "reason": r.reason.as_str(),
        "at": &*r.at,
    })
    .to_string()
}

type Tagged = (Arc<str>, Result<Bytes, super::topic::SlowConsumer>);

fn tagged(task: Arc<str>, mut sub: Subscription) -> impl futures_util::Stream<Item = Tagged> {
    futures_util::stream::poll_fn(move |cx| sub.poll_next(cx).map(|o| o.map(|r| (task.clone(), r))))
}

/// Serve one `/events` connection into `tx` until the client leaves or falls behind.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    filter: Filter,
    mut changes: broadcast::Receiver<Arc<News>>,
    subs: Vec<(Arc<str>, Subscription)>,
    tx: mpsc::Sender<Bytes>,
    ping_every: Duration,
    metrics: Arc<Metrics>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    permit: Option<crate::auth::StreamPermit>,
) {
    // The client's stream slot, held for as long as the stream runs; its credentials
    // withdrawn, the stream's last event says so.
    let revoked = std::future::poll_fn(|cx| match &permit {
        Some(p) => p.poll_revoked(cx),
        None => std::task::Poll::Pending,
    });
    tokio::pin!(revoked);
    let mut streams: SelectAll<_> = subs
        .into_iter()
        .map(|(task, sub)| tagged(task, sub).boxed())
        .collect();
    let mut parser_events = Vec::new();
    // Frames of the task streams are the gateway's own complete events: one parser reads them
    // all back, to re-tag them.
    let mut parser = Parser::new(usize::MAX);
    let mut last_sent = Instant::now();
    let mut tick = tokio::time::interval(
        (ping_every / 4).clamp(Duration::from_millis(20), Duration::from_secs(1)),
    );
    loop {
        let mut out = Vec::new();
        tokio::select! {
            c = changes.recv() => match c.as_deref() {
                Ok(News::Changed(c)) => {
                    if !filter.matches(c) {
                        continue;
                    }
                    let payload = crate::webhook::queue::payload(&crate::protocol::time::now(), &c.agent, &c.task_id, &c.task);
                    write_event(&mut out, None, Some("task.status.updated"), &String::from_utf8_lossy(&payload));
                }
                Ok(News::Refused(r)) => {
                    if !filter.matches_refusal(r) {
                        continue;
                    }
                    write_event(&mut out, None, Some("task.transition.refused"), &refusal_data(r));
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    metrics.stream_slow_consumers.inc();
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            Some((task, frame)) = streams.next(), if !streams.is_empty() => {
                let Ok(bytes) = frame else {
                    // This task's stream cut us (we fell behind it): say so, and go on with
                    // the others and the status changes.
                    let data = serde_json::json!({"task_id": &*task, "data": {"error": "fell behind this task's stream; reopen it to resume"}});
                    write_event(&mut out, None, Some("stream.lagged"), &data.to_string());
                    metrics.stream_slow_consumers.inc();
                    match tokio::time::timeout(STALL, tx.send(Bytes::from(out))).await {
                        Ok(Ok(())) => continue,
                        _ => return,
                    }
                };
                if parser.feed(&bytes, &mut parser_events).is_err() {
                    continue;
                }
                for e in parser_events.drain(..) {
                    if e.event == "ping" {
                        continue;
                    }
                    let data = serde_json::from_str::<serde_json::Value>(&e.data)
                        .unwrap_or(serde_json::Value::String(e.data));
                    let body = serde_json::json!({"task_id": &*task, "data": data});
                    let name = (e.event != "message").then_some(e.event.as_str());
                    write_event(&mut out, None, name, &body.to_string());
                }
            },
            _ = tick.tick() => {
                if last_sent.elapsed() >= ping_every {
                    write_ping(&mut out, &crate::protocol::time::now());
                }
            },
            _ = tx.closed() => return,
            why = &mut revoked => {
                let _ = tokio::time::timeout(STALL, tx.send(why.event())).await;
                return;
            }
            _ = stop.changed() => {
                // A drain: tell the EventSource to come back (to another replica) soon.
                let hint = format!("retry: {}\n\n", super::RECONNECT_HINT_MS);
                let _ = tokio::time::timeout(STALL, tx.send(Bytes::from(hint))).await;
                return;
            }
        }
        if !out.is_empty() {
            match tokio::time::timeout(STALL, tx.send(Bytes::from(out))).await {
                Ok(Ok(())) => metrics.stream_events_out.inc(),
                Ok(Err(_)) => return,
                Err(_) => {
                    metrics.stream_slow_consumers.inc();
                    return;
                }
            }
            last_sent = Instant::now();
        }
    }
}

/// The channel an `/events` response body reads.
pub fn channel() -> (mpsc::Sender<Bytes>, mpsc::Receiver<Bytes>) {
    mpsc::channel(QUEUE)
}
