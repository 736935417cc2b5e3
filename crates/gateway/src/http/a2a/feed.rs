//! The upstream of an A2A task's shared stream: the one connection to the agent (the creator's
//! `message:stream`, or the gateway's `SubscribeToTask`) whose events every subscriber of the
//! task reads.
//!
//! Each event is read in the agent's binding, checked as a StreamResponse of this task, folded
//! into the task as it is now (`protocol::a2a::stream::fold`), and, when it moves the task's
//! state, applied to the ledger through its one rule before it is published: an event the
//! ledger refuses (it would move a final task) is dropped and counted, and shows on `/events`
//! as a refusal. An event that is not a valid StreamResponse of the task is never relayed: it
//! is counted (`a2a_gateway_stream_upstream_errors_total`) and the stream ends with
//! `event: error` UPSTREAM_ERROR. The stream closes after a final or an interrupted state
//! (§11.7); for a short grace after it the agent's stream is still read, so that what it sends
//! past the end is judged (and refused, and counted) rather than unseen. An agent's stream that
//! ends while the task is live, or whose connection is cut (the agent killed or restarted), is
//! opened again with `SubscribeToTask`: [`MAX_RECONNECTS`] tries in a row, [`FIRST_BACKOFF`]
//! doubling, a try that cannot reach the agent counting as one, so an agent back within them
//! is picked up; then UPSTREAM_ERROR, or the ledger's final Task if the task ended meanwhile.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::Request;
use serde_json::Value;

use super::agent_stream::{read_event, stream_or_answer, subscribe_call, ReadError, Reader};
use super::ledger as a2a_ledger;
use super::to_agent;
use super::wire::Sent;
use crate::caller::OnBehalf;
use crate::ledger::{apply_counted, Origin};
use crate::protocol::a2a::answer::{check_answer, payload, task_of};
use crate::protocol::a2a::held::HeldCard;
use crate::protocol::a2a::stream::{changes, fold};
use crate::protocol::a2a::{Method, TaskState};
use crate::protocol::sse::Event;
use crate::protocol::task::Verdict;
use crate::registry::Agent;
use crate::state::State;
use crate::stream::topic::{Ending, Phase, Topic};
use crate::stream::StreamError;

/// After the task's last state, how long the agent's stream is still read (and judged).
const AFTER_END: Duration = Duration::from_millis(500);
/// Reconnects in a row that bring no event before the gateway gives up on the agent's stream.
const MAX_RECONNECTS: u32 = 3;
/// The wait before the first of them; it doubles for each next one (250, 500, 1000 ms).
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// What a resubscription got.
enum Resubscribed {
    /// The agent's stream again.
    Stream(Incoming, Reader),
    /// The agent could not be reached (refused, reset, timed out): worth another try.
    Unreachable(String),
    /// The agent answered, but not with a stream: the topic was ended (the ledger's final Task,
    /// or UPSTREAM_ERROR).
    Over,
}

/// Where a feed starts.
pub enum Upstream {
    /// The gateway's `SubscribeToTask`, to be sent (its first Task is every joiner's first
    /// event, not published again).
    Subscribe {
        /// The request, built in the agent's form.
        request: Request<Full<Bytes>>,
        /// What it is sent as.
        sent: Sent,
    },
    /// The creator's `message:stream`, its first event already read and published.
    Reading {
        /// The rest of the agent's stream.
        body: Incoming,
        /// Its reader, as the first event left it.
        reader: Reader,
        /// What the stream's request was sent as.
        sent: Sent,
    },
}

fn state_of(task: &Value) -> Option<TaskState> {
    task_of(task).map(|h| h.state)
}

/// Whether the stream closes at this state: a final one, or an interrupted one (§11.7).
fn closes_at(task: &Value) -> bool {
    state_of(task).is_some_and(|s| s.is_final() || s.is_interrupted())
}

/// What to do after an event.
enum Next {
    On,
    /// The stream is over for subscribers (closed, or ended with the reason).
    Over,
}

struct Feed {
    state: Arc<State>,
    agent: Arc<Agent>,
    topic: Arc<Topic>,
    n: u64,
    id: String,
    method: Method,
    /// What the agent's stream was asked as: its events are read back through it.
    sent: Sent,
    /// The task as it is now.
    task: Value,
    /// Whether an event went out (a subscription's first Task is not published).
    published: bool,
    /// The status time last recorded for the task (ms): an event later on the one stream is
    /// newer by the stream's order, whatever its own clock says (a first Task without a
    /// timestamp is recorded at the gateway's time of recording, which a busy gateway reaches
    /// after the agent stamped its next status).
    last_ms: i64,
    /// The task's owner: a resubscription is the gateway's call on its behalf.
    owner: Option<Arc<str>>,
    /// The replica that holds the task: a resubscription goes there.
    replica: Option<Arc<str>>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.state.hub.feed_ended(&self.topic, self.n);
    }
}

/// What a feed starts from: the task's topic and feed number, the task as known.
pub struct Start {
    /// The gateway's state.
    pub state: Arc<State>,
    /// The task's agent.
    pub agent: Arc<Agent>,
    /// Its card, for the requests the feed makes (a resubscription).
    pub held: Arc<HeldCard>,
    /// The task's topic.
    pub topic: Arc<Topic>,
    /// This feed's number on the topic.
    pub n: u64,
    /// The task's id (the agent's).
    pub id: String,
    /// The task as it is known.
    pub task: Value,
    /// Its status time as recorded (ms).
    pub last_ms: i64,
    /// Its owner.
    pub owner: Option<Arc<str>>,
    /// The replica that holds it, for an agent whose calls are pinned.
    pub replica: Option<Arc<str>>,
}

/// Join the shared stream of task `id` (recorded as `record`): when nobody streams it on this
/// replica yet, `out` (the gateway's SubscribeToTask) opens its one upstream, fed by
/// `feed::run`. `Ok(None)`: the task turned out to be over.
#[allow(clippy::too_many_arguments)]
pub async fn join(
    state: &Arc<State>,
    agent: &Arc<Agent>,
    held: Arc<HeldCard>,
    id: &str,
    record: &crate::ledger::Record,
    out: to_agent::Outgoing,
    framing: crate::stream::topic::Framing,
    kill: Option<Arc<tokio::sync::Notify>>,
) -> Result<Option<crate::stream::topic::Subscription>, StreamError> {
    let key = a2a_ledger::key(&agent.cfg.name, id);
    let task = crate::protocol::json::parse(&record.task)
        .unwrap_or_else(|_| Value::Object(serde_json::Map::new()));
    let last_ms = record.head.updated_ms;
    state
        .hub
        .join_a2a(agent, &key, framing, kill, |topic, n| {
            let up = Upstream::Subscribe {
                request: out.request,
                sent: out.sent,
            };
            let start = Start {
                state: state.clone(),
                agent: agent.clone(),
                held,
                topic,
                n,
                id: id.to_owned(),
                task,
                last_ms,
                owner: record.owner.clone(),
                replica: record.replica.clone(),
            };
            tokio::spawn(run(start, up));
        })
        .await
}

/// Feed the topic of `start` with the agent's stream of the task, starting from `up`.
pub async fn run(start: Start, up: Upstream) {
    let Start {
        state,
        agent,
        held,
        topic,
        n,
        id,
        task,
        last_ms,
        owner,
        replica,
    } = start;
    let hub = state.hub.clone();
    let mut tick = hub.tick();
    let method = match up {
        Upstream::Reading { .. } => Method::SendStreamingMessage,
        Upstream::Subscribe { .. } => Method::SubscribeToTask,
    };
    let sent = match &up {
        Upstream::Reading { sent, .. } | Upstream::Subscribe { sent, .. } => sent.clone(),
    };
    let mut feed = Feed {
        state,
        agent,
        topic: topic.clone(),
        n,
        id,
        method,
        sent,
        published: method == Method::SendStreamingMessage,
        task,
        last_ms,
        owner,
        replica,
    };
    let (mut body, mut reader) = match up {
        Upstream::Reading {
            body,
            reader,
            sent: _,
        } => {
            if closes_at(&feed.task) {
                feed.after_end(body, reader).await;
                return;
            }
            (body, reader)
        }
        Upstream::Subscribe { request, sent: _ } => {
            let opened = tokio::select! {
                b = feed.open(request) => b,
                _ = topic.closed.notified() => None,
            };
            match opened {
                Some(b) => {
                    if !feed.sent.task_first() {
                        // The agent's form sends no Task first (0.3's resubscribe streams only
                        // what comes next): joiners start from the task as the ledger has it.
                        feed.open_with_ledgers_task();
                    }
                    (b, Reader::new(&feed.sent, hub.config().max_event_bytes))
                }
                None => return,
            }
        }
    };
    let mut reconnects = 0u32;
    // After a resubscription, its first event (the Task again) does not count as progress:
    // an agent whose SubscribeToTask sends the Task and closes is given up on.
    let mut fresh = false;
    // Why the last try failed, when the agent could not be reached: what a subscriber is told
    // if it was the last.
    let mut last_try: Option<String> = None;
    loop {
        let next = tokio::select! {
            ev = reader.next(&mut body) => ev,
            _ = tick.tick() => {
                if !hub.tend(&feed.topic) {
                    return;
                }
                continue;
            }
            _ = feed.topic.closed.notified() => return,
        };
        match next {
            Ok(Some(e)) => {
                if !std::mem::take(&mut fresh) {
                    reconnects = 0;
                }
                match feed.event(&e).await {
                    Next::On => {}
                    Next::Over => {
                        if feed.topic.is_closed() && closes_at(&feed.task) {
                            feed.after_end(body, reader).await;
                        }
                        return;
                    }
                }
            }
            Err(ReadError::Broken(why)) => {
                tracing::warn!(agent = %feed.agent.cfg.name, task_id = %feed.id, error = %why, "agent stream refused");
                feed.upstream_error(why);
                return;
            }
            Ok(None) | Err(ReadError::Cut(_)) => {
                // The agent's stream ended, or its connection was cut (killed, restarted), with
                // the task live: subscribe again, a bounded number of times.
                if let Err(ReadError::Cut(why)) = &next {
                    tracing::info!(agent = %feed.agent.cfg.name, task_id = %feed.id, error = %why, "agent stream cut; subscribing again");
                }
                if !feed.sent.task_first() {
                    if let Next::Over = feed.ask_for_the_task().await {
                        return;
                    }
                }
                let topic = feed.topic.clone();
                let again = loop {
                    reconnects += 1;
                    if reconnects > MAX_RECONNECTS {
                        feed.give_up(last_try.take().unwrap_or_else(|| {
                            "the agent's stream keeps ending before the task does".to_owned()
                        }))
                        .await;
                        return;
                    }
                    let wait = FIRST_BACKOFF * 2u32.pow(reconnects - 1);
                    let got = {
                        let attempt = async {
                            tokio::time::sleep(wait).await;
                            feed.resubscribe(&held).await
                        };
                        // The clock's work goes on meanwhile (pings, the sweep, the linger).
                        tokio::pin!(attempt);
                        loop {
                            tokio::select! {
                                r = &mut attempt => break r,
                                _ = tick.tick() => {
                                    if !hub.tend(&topic) {
                                        return;
                                    }
                                }
                                _ = topic.closed.notified() => return,
                            }
                        }
                    };
                    match got {
                        Resubscribed::Stream(b, r) => break (b, r),
                        Resubscribed::Unreachable(why) => {
                            tracing::info!(agent = %feed.agent.cfg.name, task_id = %feed.id, error = %why, tries = reconnects, "agent unreachable for a resubscription");
                            last_try = Some(format!(
                                "its stream ended before the task did, and it could not be reached again ({MAX_RECONNECTS} tries)"
                            ));
                        }
                        Resubscribed::Over => return,
                    }
                };
                (body, reader) = again;
                last_try = None;
                fresh = true;
            }
        }
    }
}

impl Feed {
    /// Count an event the gateway will not relay, and end every subscriber's stream with
    /// UPSTREAM_ERROR.
    fn upstream_error(&self, why: String) {
        self.state
            .metrics
            .stream_upstream_errors
            .with_label_values(&[&self.agent.cfg.name])
            .inc();
        self.end(Ending::Upstream(Arc::from(format!(
            "agent {:?}: {why}",
            self.agent.cfg.name
        ))));
    }

    /// Whether this feed still feeds its topic: a superseded one (a newer `message:stream` of
    /// the task took the topic over) ends nothing and publishes nothing.
    fn owns(&self) -> bool {
        self.topic.fed_by(self.n)
    }

    /// End the topic's streams with `ending`, if this feed still feeds it.
    fn end(&self, ending: Ending) {
        if self.owns() {
            self.topic.end(ending);
        }
    }

    /// Close the topic (its last state went out), if this feed still feeds it.
    fn close(&self) {
        if self.owns() {
            self.topic.close();
        }
    }

    /// Judge, record and publish one event of the agent's stream.
    async fn event(&mut self, e: &Event) -> Next {
        if !self.owns() {
            return Next::Over;
        }
        let from = (&*self.state, &*self.agent, None);
        let v = match read_event(from, e, self.method, &self.sent).await {
            Ok(v) => v,
            // The agent's own error ends the stream, relayed as the agent's (an error in the
            // gateway's domain is the agent's too, `wire::the_agents`).
            Err(err)
                if !matches!(
                    err.kind,
                    crate::protocol::a2a::ErrorKind::InvalidAgentResponse
                ) =>
            {
                self.end(Ending::Agent(Arc::new(err)));
                return Next::Over;
            }
            Err(err) => {
                let at = err.details.first().map_or("", |v| v.instance_path.as_str());
                self.upstream_error(format!("it sent an event that is not a response ({at:?})"));
                return Next::Over;
            }
        };
        self.apply(v).await
    }

    /// A StreamResponse of the agent's, read back: judged, applied to the ledger and published.
    async fn apply(&mut self, v: Value) -> Next {
        let found = check_answer(self.method, &v, Some(&self.id));
        if let Some(first) = found.first() {
            // Named by where and which rule: the agent's own words are not relayed.
            self.upstream_error(format!(
                "it sent an event that is not a StreamResponse of this task ({} at {:?})",
                first.schema_path, first.instance_path
            ));
            return Next::Over;
        }
        let Some(p) = payload(&v) else {
            self.upstream_error("it sent an event with no payload".to_owned());
            return Next::Over;
        };
        if state_of(&self.task).is_some_and(TaskState::is_final) {
            // Past the end: never relayed, counted as the ledger counts its refusals.
            self.refused_past_end();
            return Next::On;
        }
        let mut next = self.task.clone();
        let folded = fold(&mut next, p);
        // Written once: the ledger's document and the topic's snapshot are the same bytes,
        // bounded as the ledger bounds a document (history goes first; artifacts to their own
        // bound, a cut one marked).
        let (snapshot, cut) = a2a_ledger::bounded_whole(&self.state, &self.agent.cfg.name, &next);
        if folded.records() && !self.record(&next, snapshot.clone()).await {
            if !self.published {
                // A subscription's first Task the ledger refused (the task ended meanwhile):
                // its joiners get the ledger's task, and the end.
                let key = a2a_ledger::key(&self.agent.cfg.name, &self.id);
                if let Ok(Some(r)) = self.state.ledger.get(&key).await {
                    self.topic.set_phase(Phase::Open);
                    self.topic
                        .finish("status", &String::from_utf8_lossy(&r.task));
                }
                return Next::Over;
            }
            return Next::On;
        }
        if let Some(kept) = cut {
            // The next event folds into what the ledger holds (a cut artifact's appends are
            // then counted as cut, never added after the gap).
            next = kept;
        }
        let whole_task = folded == crate::protocol::a2a::stream::Folded::Task;
        let told = if whole_task && self.published {
            // A whole Task again (a resubscription's first event): subscribers are told what
            // changed, as updates; a Task comes only first (§3.1.2).
            changes(&self.task, &next)
        } else {
            Vec::new()
        };
        self.task = next;
        if !self.published && whole_task {
            // A subscription's first Task: every joiner's first event already.
            self.published = true;
            self.topic.set_snapshot(self.n, snapshot);
            self.topic.set_phase(Phase::Open);
        } else if whole_task {
            self.topic.set_phase(Phase::Open);
            if told.is_empty() {
                self.topic.set_snapshot(self.n, snapshot.clone());
            }
            for e in &told {
                let json = serde_json::to_vec(e).unwrap_or_default();
                if !self
                    .topic
                    .publish_a2a(self.n, &json, Some(snapshot.clone()))
                {
                    return Next::Over;
                }
            }
        } else {
            self.published = true;
            self.topic.set_phase(Phase::Open);
            let json = serde_json::to_vec(&v).unwrap_or_default();
            if !self.topic.publish_a2a(self.n, &json, Some(snapshot)) {
                // Superseded by a newer upstream, or closed.
                return Next::Over;
            }
        }
        if closes_at(&self.task) {
            self.close();
            return Next::Over;
        }
        Next::On
    }

    /// Opens the topic with the task as the ledger has it now as every joiner's first event
    /// (for an agent whose resubscription sends no Task first).
    fn open_with_ledgers_task(&mut self) {
        let (snapshot, _) =
            a2a_ledger::bounded_whole(&self.state, &self.agent.cfg.name, &self.task);
        self.published = true;
        self.topic.set_snapshot(self.n, snapshot);
        self.topic.set_phase(Phase::Open);
    }

    fn refused_past_end(&self) {
        self.state
            .metrics
            .refused
            .with_label_values(&[&self.agent.cfg.name, "terminal"])
            .inc();
    }

    /// Apply the task as an event left it (`raw`: its bounded document); whether the ledger took it (refused: the event is
    /// dropped). A ledger that cannot be reached does not stop the stream: the reconciler
    /// learns the state later.
    async fn record(&mut self, task: &Value, raw: Bytes) -> bool {
        let name = self.agent.cfg.name.as_str();
        let Some(head) = task_of(task) else {
            return true;
        };
        let mut task_ref = a2a_ledger::task_ref(name, &head, task);
        task_ref.head.updated_ms = task_ref.head.updated_ms.max(self.last_ms);
        match apply_counted(
            self.state.ledger.as_ref(),
            &self.state.metrics,
            name,
            &task_ref,
            crate::ledger::Doc::written(raw),
            None,
            Origin::default(),
        )
        .await
        {
            Ok(a) if matches!(a.verdict, Verdict::Refused(_)) => false,
            Ok(a) => {
                self.last_ms = a.record.head.updated_ms;
                true
            }
            Err(e) => {
                tracing::warn!(agent = %name, task_id = %self.id, error = %e, "a streamed event was relayed unrecorded: the ledger is unavailable");
                true
            }
        }
    }

    /// After the task's last state: read what the agent still sends for a short grace, and
    /// judge it (a state past a final one is refused by the ledger, and counted).
    async fn after_end(&mut self, mut body: Incoming, mut reader: Reader) {
        self.close();
        let _ = tokio::time::timeout(AFTER_END, async {
            while let Ok(Some(e)) = reader.next(&mut body).await {
                let from = (&*self.state, &*self.agent, None);
                let Ok(v) = read_event(from, &e, self.method, &self.sent).await else {
                    continue;
                };
                let Some(p) = payload(&v) else { continue };
                let mut next = self.task.clone();
                if fold(&mut next, p).moves_state() {
                    if state_of(&self.task) == state_of(&next) {
                        continue;
                    }
                    let raw = a2a_ledger::bounded(&self.state, &self.agent.cfg.name, &next);
                    self.record(&next, raw).await;
                } else {
                    self.refused_past_end();
                }
            }
        })
        .await;
    }

    /// Open the agent's stream of the task again (`SubscribeToTask`). An agent that cannot be
    /// reached is worth another try; one that answers with something else than a stream is not
    /// (the topic is ended here, see [`Feed::give_up`]).
    async fn resubscribe(&mut self, held: &HeldCard) -> Resubscribed {
        self.state.metrics.stream_upstream_reconnects.inc();
        self.method = Method::SubscribeToTask;
        let call = subscribe_call(&self.id);
        let on = OnBehalf::Owner(self.owner.as_deref());
        let at = (None, self.replica.as_deref());
        let Ok(out) = to_agent::stream_request(&self.agent, held, at, on, &HeaderMap::new(), &call)
        else {
            self.give_up("its card no longer says how to stream the task".to_owned())
                .await;
            return Resubscribed::Over;
        };
        self.sent = out.sent.clone();
        let sent = self
            .state
            .upstream
            .send(out.request, self.agent.cfg.timeout)
            .await;
        let res = match sent {
            Ok(res) => res,
            Err(e) => return Resubscribed::Unreachable(e.to_string()),
        };
        match stream_or_answer(res, &call, &out.sent, self.agent.cfg.timeout).await {
            Ok(b) => Resubscribed::Stream(
                b,
                Reader::new(&out.sent, self.state.hub.config().max_event_bytes),
            ),
            Err(_) => {
                self.give_up(
                    "its stream ended before the task did, and it would not stream the task again"
                        .to_owned(),
                )
                .await;
                Resubscribed::Over
            }
        }
    }

    /// For an agent whose resubscription sends no Task first (0.3), which would say nothing of a
    /// task that changed or ended while its stream was down: the task asked for (GetTask) and
    /// taken as a resubscription's first Task is (subscribers told what changed, as updates;
    /// the feed over if it ended). No answer: nothing known, the feed goes on.
    async fn ask_for_the_task(&mut self) -> Next {
        match super::poll::get(&self.state, &self.state.upstream, &self.agent, &self.id).await {
            Some(task) => self.apply(serde_json::json!({ "task": task })).await,
            None => Next::On,
        }
    }

    /// The agent's stream is over for good with the task live as far as this feed knows: the
    /// ledger's final Task if the task ended meanwhile (from another source), else
    /// UPSTREAM_ERROR with `why`.
    async fn give_up(&self, why: String) {
        let key = a2a_ledger::key(&self.agent.cfg.name, &self.id);
        match self.state.ledger.get(&key).await {
            Ok(Some(r)) if r.head.status.is_terminal() && self.owns() => {
                self.topic
                    .finish("status", &String::from_utf8_lossy(&r.task));
            }
            _ => self.upstream_error(why),
        }
    }

    /// Send the gateway's `SubscribeToTask`: the agent's stream, or the phase that tells the
    /// waiting subscribers why not.
    async fn open(&mut self, request: Request<Full<Bytes>>) -> Option<Incoming> {
        let call = subscribe_call(&self.id);
        let sent = self
            .state
            .upstream
            .send(request, self.agent.cfg.timeout)
            .await;
        let failed = match sent {
            Ok(res) => {
                match stream_or_answer(res, &call, &self.sent, self.agent.cfg.timeout).await {
                    Ok(body) => return Some(body),
                    Err(e) => StreamError::A2a(Arc::new(e)),
                }
            }
            Err(e) => StreamError::Agent(e.at(&self.agent.cfg.name)),
        };
        self.topic.set_phase(Phase::Failed(failed));
        None
    }
}
