//! A topic's upstream loop: the one connection to the agent's `/tasks/{id}/stream` that every
//! subscriber of the task shares.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, StatusCode};

use super::topic::{Phase, Topic};
use super::{Hub, StreamError};
use crate::caller::OnBehalf;
use crate::config::Conformance;
use crate::ledger::Holder;
use crate::ledger::{apply_counted, Applied, Origin, TaskLedger};
use crate::metrics::Metrics;
use crate::protocol::sse::Parser;
use crate::protocol::task::{Refusal, Verdict};
use crate::registry::Agent;
use crate::upstream::Upstream;
use crate::upstream::MAX_AGENT_JSON;

/// An agent's stream that sends nothing (not even its pings, due every 15-20 s) for this long
/// is presumed dead and reconnected.
const UPSTREAM_IDLE: Duration = Duration::from_secs(60);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

fn request(
    agent: &Agent,
    holder: &Holder,
    path: &str,
    last_id: Option<&str>,
    sse: bool,
) -> Option<Request<Full<Bytes>>> {
    // The task's replica (none while it is gone: the call waits, it is not sent elsewhere).
    let replica = agent.replica_for(holder.replica.as_deref())?;
    let owner = holder.owner.as_deref();
    let mut req = Request::builder()
        .method(Method::GET)
        .uri(format!("{}{path}", replica.base))
        .header(
            header::USER_AGENT,
            concat!("a2a-gateway/", env!("CARGO_PKG_VERSION")),
        );
    if sse {
        req = req
            .header(header::ACCEPT, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache");
    } else {
        req = req.header(header::ACCEPT, "application/json");
    }
    if let Some(id) = last_id.and_then(|id| HeaderValue::from_str(id).ok()) {
        req = req.header("last-event-id", id);
    }
    if let Some(host) = &replica.host {
        req = req.header(header::HOST, host.clone());
    }
    let mut req = req.body(Full::new(Bytes::new())).ok()?;
    // The gateway's own call, on behalf of the task's owner (never a caller's own token).
    agent
        .authorize(req.headers_mut(), OnBehalf::Owner(owner))
        .ok()?;
    Some(req)
}

/// The owner and replica of Clawpedia task `task_id`, for the gateway's own calls to it
/// (`ledger::holder_of`).
async fn owner_of(
    ledger: &Arc<dyn TaskLedger>,
    agent: &Agent,
    task_id: &str,
) -> Result<Holder, ()> {
    crate::ledger::holder_of(ledger.as_ref(), task_id, agent.cfg.needs_holder()).await
}

/// Whether an answer's `Content-Type` is `text/event-stream`.
pub(crate) fn is_event_stream(h: &hyper::HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// How often the loop looks at the clock (pings, linger, idle upstream).
pub(super) fn tick_every(hub: &Hub) -> Duration {
    (hub.cfg.ping_interval / 4).clamp(Duration::from_millis(20), Duration::from_secs(1))
}

/// The clock's work, done on every tick whatever the loop is waiting for: the gateway's pings
/// on a quiet stream, cutting slow subscribers, and closing the topic once it has had no
/// subscriber for the linger time. Whether the topic goes on.
pub(super) fn on_tick(hub: &Hub, topic: &Arc<Topic>) -> bool {
    if hub.remove_if_abandoned(topic) {
        return false;
    }
    if topic.quiet_since().elapsed() >= hub.cfg.ping_interval {
        topic.ping();
    }
    topic.sweep();
    true
}

/// Await `work` while keeping the clock's work going; `None` if the topic ended meanwhile.
async fn tended<F: std::future::Future>(
    hub: &Hub,
    topic: &Arc<Topic>,
    tick: &mut tokio::time::Interval,
    work: F,
) -> Option<F::Output> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return Some(out),
            _ = tick.tick() => {
                if !on_tick(hub, topic) {
                    return None;
                }
            }
            _ = topic.closed.notified() => return None,
        }
    }
}

/// Closes and forgets the topic when the loop ends, however it ends (a panic included), so
/// its subscribers are never left waiting on a topic nobody feeds.
struct Guard {
    hub: Arc<Hub>,
    topic: Arc<Topic>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        // A failed first connection sets its phase before this; close keeps it.
        self.topic.close();
        self.hub.remove(&self.topic);
        self.hub.metrics.stream_upstreams.dec();
    }
}

/// A connection that stayed up this long (or carried an event) was a good one: the next
/// reconnect starts from the shortest wait again.
const HEALTHY: Duration = Duration::from_secs(5);

/// Connections in a row that break the event-stream rules (a line or an event over
/// `streams.max_event_bytes`, an answer that is not an event stream) before the gateway gives
/// up on the agent's stream and tells the subscribers why (`event: upstream_error`). Each retry
/// would get the same broken stream, and subscribers would only ever see pings. A connection
/// that carries an event and ends within the rules starts the count again; network failures
/// neither count nor start it again.
const MAX_PROTOCOL_FAILURES: u32 = 3;

pub async fn run(hub: Arc<Hub>, topic: Arc<Topic>, agent: Arc<Agent>, client: Upstream) {
    let _guard = Guard {
        hub: hub.clone(),
        topic: topic.clone(),
    };
    let task_id = topic.key.1.clone();
    // The agent's protocol says where its streams are (a subscriber only gets here through an
    // agent with a card).
    let Ok(card) = agent.card() else {
        return;
    };
    let path = card.stream_path(&task_id);
    drop(card);
    // The agent's id of the last event it dispatched: where a reconnect resumes.
    let mut last_id: Option<String> = None;
    let mut backoff = FIRST_BACKOFF;
    let mut opened = false;
    // Connections in a row that broke the event-stream rules, and how the last one did.
    let mut failures = 0u32;
    let mut broken = String::new();
    let Ok(owner) = owner_of(&hub.ledger, &agent, &task_id).await else {
        tracing::warn!(agent = %agent.cfg.name, %task_id, "the ledger cannot say whose task this is; the agent's stream is not opened");
        return;
    };
    let mut tick = tokio::time::interval(tick_every(&hub));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if topic.is_closed() {
            return;
        }
        let Some(req) = request(&agent, &owner, &path, last_id.as_deref(), true) else {
            return;
        };
        let Some(sent) = tended(&hub, &topic, &mut tick, client.send(req, agent.cfg.timeout)).await
        else {
            return;
        };
        match sent {
            Ok(res) if res.status() == StatusCode::OK && is_event_stream(res.headers()) => {
                if !opened {
                    opened = true;
                    topic.set_phase(Phase::Open);
                }
                let connected = Instant::now();
                let mut carried = false;
                let mut body = res.into_body();
                let mut parser = Parser::new(hub.cfg.max_event_bytes);
                let mut events = Vec::new();
                let mut heard = Instant::now();
                let mut refused = None;
                loop {
                    tokio::select! {
                        frame = body.frame() => match frame {
                            Some(Ok(frame)) => {
                                let Ok(data) = frame.into_data() else { continue };
                                heard = Instant::now();
                                if let Err(e) = parser.feed(&data, &mut events) {
                                    tracing::warn!(agent = %agent.cfg.name, %task_id, error = %e, "agent stream refused; reconnecting");
                                    refused = Some(e.to_string());
                                    break;
                                }
                                for e in events.drain(..) {
                                    // Only a dispatched event moves the resume point, and an
                                    // empty id clears it (the standard's last event ID).
                                    last_id = e.id.clone().filter(|id| !id.is_empty());
                                    // The gateway sends its own pings, on its own schedule.
                                    if e.event == "ping" {
                                        continue;
                                    }
                                    carried = true;
                                    let name = (e.event != "message").then_some(e.event.as_str());
                                    topic.publish(name, &e.data);
                                }
                            }
                            Some(Err(_)) | None => break,
                        },
                        _ = tick.tick() => {
                            if !on_tick(&hub, &topic) {
                                return;
                            }
                            if heard.elapsed() >= UPSTREAM_IDLE.max(hub.cfg.ping_interval * 4) {
                                tracing::info!(agent = %agent.cfg.name, %task_id, "agent stream silent; reconnecting");
                                break;
                            }
                        }
                        _ = topic.closed.notified() => return,
                    }
                }
                if carried || connected.elapsed() >= HEALTHY {
                    backoff = FIRST_BACKOFF;
                }
                match refused {
                    Some(why) => {
                        failures += 1;
                        broken = why;
                    }
                    None if carried => failures = 0,
                    None => {}
                }
            }
            Ok(res) if !opened => {
                // The agent will not stream this task: tell the waiting requests why.
                let status = res.status();
                let ended = tended(
                    &hub,
                    &topic,
                    &mut tick,
                    learn_end(&hub, &topic, &agent, &client),
                )
                .await;
                if ended == Some(true) {
                    topic.set_phase(Phase::Ended);
                } else if status == StatusCode::NOT_FOUND {
                    topic.set_phase(Phase::Failed(StreamError::NoSuchTask {
                        agent: agent.cfg.name.clone(),
                        task: task_id.to_string(),
                    }));
                } else {
                    topic.set_phase(Phase::Failed(StreamError::NotAnEventStream {
                        agent: agent.cfg.name.clone(),
                        status,
                    }));
                }
                return;
            }
            Err(e) if !opened => {
                topic.set_phase(Phase::Failed(e.at(&agent.cfg.name).into()));
                return;
            }
            Ok(res) if matches!(res.status(), StatusCode::NOT_FOUND | StatusCode::GONE) => {
                // The agent no longer has the task: nothing more will come. Subscribers'
                // streams end; a reconnect gets the agent's answer.
                tracing::info!(agent = %agent.cfg.name, %task_id, "agent no longer has the task; closing its stream");
                let _ = tended(
                    &hub,
                    &topic,
                    &mut tick,
                    learn_end(&hub, &topic, &agent, &client),
                )
                .await;
                return;
            }
            Ok(res) if res.status() == StatusCode::OK => {
                // A stream that was an event stream is one no longer.
                let kind = res.headers().get(header::CONTENT_TYPE).map(|v| {
                    String::from_utf8_lossy(v.as_bytes())
                        .chars()
                        .take(100)
                        .collect::<String>()
                });
                tracing::warn!(agent = %agent.cfg.name, %task_id, content_type = ?kind, "agent answered a stream reconnect with something else than an event stream");
                failures += 1;
                broken = format!(
                    "answered the stream request with Content-Type {}, not text/event-stream",
                    kind.as_deref().unwrap_or("(none)")
                );
            }
            Ok(_) | Err(_) => {}
        }
        // The upstream ended. A finished task ends the topic; a live one is reconnected.
        match tended(
            &hub,
            &topic,
            &mut tick,
            learn_end(&hub, &topic, &agent, &client),
        )
        .await
        {
            Some(false) => {}
            _ => return,
        }
        if failures >= MAX_PROTOCOL_FAILURES {
            tracing::warn!(agent = %agent.cfg.name, %task_id, failures, reason = %broken, "agent stream keeps breaking the event-stream rules; giving up");
            hub.give_up(
                &topic,
                &format!(
                    "agent {:?} broke the event-stream rules {failures} times in a row: {broken}",
                    agent.cfg.name
                ),
            );
            return;
        }
        hub.metrics.stream_upstream_reconnects.inc();
        let sleep = tokio::time::sleep(backoff);
        if tended(&hub, &topic, &mut tick, sleep).await.is_none() {
            return;
        }
        backoff = (backoff * 2).min(hub.cfg.reconnect_max);
    }
}

/// Whether the task has ended: the ledger's word, or else the agent's (its Task, checked and
/// recorded like any answer). When it has, the topic is finished with `event: status`.
async fn learn_end(hub: &Hub, topic: &Topic, agent: &Agent, client: &Upstream) -> bool {
    let task_id = topic.key.1.as_ref();
    if let Ok(Some(r)) = hub.ledger.get(task_id).await {
        if r.head.status.is_terminal() {
            topic.finish("status", &String::from_utf8_lossy(&r.task));
            return true;
        }
    }
    let Some(applied) = ask_and_apply(&hub.ledger, &hub.metrics, agent, client, task_id).await
    else {
        return false;
    };
    // A record of another agent's task says nothing about this agent's stream.
    if applied.verdict == Verdict::Refused(Refusal::ForeignAgent) {
        return false;
    }
    if applied.record.head.status.is_terminal() {
        topic.finish("status", &String::from_utf8_lossy(&applied.record.task));
        return true;
    }
    false
}

/// Ask the agent for a task's current state (where the card says, `Card::task_path`, read with
/// `Card::read_task`) and apply what it says to the ledger, as any news (learn_end, and the
/// reconciler). `None`: no usable answer (no card, no answer in time, not 200, not the task,
/// outside the protocol in `enforce` mode, or the ledger failed). An answer that names another
/// `agent_id` than the card asks for the card to be fetched again.
pub(crate) async fn ask_and_apply(
    ledger: &Arc<dyn TaskLedger>,
    metrics: &Metrics,
    agent: &Agent,
    client: &Upstream,
    task_id: &str,
) -> Option<Applied> {
    let card = agent.card().ok()?;
    let owner = owner_of(ledger, agent, task_id).await.ok()?;
    // Not called while its replica is ejected (a reconciler read passes no admission).
    let ejected = owner
        .replica
        .as_deref()
        .filter(|_| agent.cfg.pins())
        .and_then(|a| agent.replicas.find(a))
        .is_some_and(|r| !matches!(r.limits.health(), crate::limits::Health::Ok));
    if ejected {
        return None;
    }
    let req = request(agent, &owner, &card.task_path(task_id), None, false)?;
    let (parts, body) = client
        .exchange(req, agent.cfg.timeout, MAX_AGENT_JSON)
        .await
        .ok()?;
    if parts.status != StatusCode::OK {
        return None;
    }
    let doc = crate::protocol::json::parse(&body).ok()?;
    if card.names_other_agent(&doc) && agent.ask_refetch() {
        tracing::info!(agent = %agent.cfg.name, "an answer names another agent_id than the card's; fetching the card again");
    }
    let (task, found) = card.read_task(&doc, Some(task_id), crate::protocol::time::now_ms());
    if !found.is_empty() && agent.cfg.conformance == Conformance::Enforce {
        return None;
    }
    let task = task.filter(|t| t.task_id == task_id)?;
    apply_counted(
        ledger.as_ref(),
        metrics,
        &agent.cfg.name,
        &task,
        // The agent's body, read into a buffer of the exchange's: copied to its own.
        crate::ledger::Doc::copied(&body),
        None,
        Origin::default(),
    )
    .await
    .ok()
}
