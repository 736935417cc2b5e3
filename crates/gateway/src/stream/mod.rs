//! Event streams: one upstream connection per task shared by every subscriber of that task
//! (per replica), and `/events`, one connection carrying many tasks and every ledger change.
//!
//! [`Hub`] holds the live [`topic::Topic`]s. The first subscriber of a task opens its topic and
//! its upstream loop (`source::run`); later ones only add a cursor. The upstream loop
//! re-numbers the agent's events (`id: EPOCH-SEQ`), drops the agent's pings and sends the
//! gateway's own, reconnects with `Last-Event-ID` when the agent drops the stream while the task
//! is live, and closes the topic with a final `event: status` when the task ends (learned from
//! the ledger's change feed, or by asking the agent when its stream ends). A topic with no
//! subscriber lingers briefly, then closes its upstream. An agent whose stream keeps breaking
//! the event-stream rules is given up on: subscribers get a final `event: upstream_error`, and
//! for a cool-off so does every new subscriber, at once and without a new upstream connection.

pub mod events;
pub mod framing;
pub(crate) mod source;

pub(crate) use source::is_event_stream;
pub mod topic;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::ledger::changes::{self, ChangeFeed};
use crate::ledger::TaskLedger;
use crate::metrics::Metrics;
use crate::registry::Agent;
use crate::upstream::{AgentError, Upstream};
use topic::{Dialect, Framing, Key, Limits, Phase, Subscription, Topic};

/// Why a subscription could not be served.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StreamError {
    /// The gateway is stopping and opens no new stream.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The agent was replaced by a config reload while the request was on its way: a retry
    /// finds the new config.
    #[error("agent {0:?} was just reloaded; retry")]
    Reloaded(String),
    /// The replica holds as many task streams as `streams.max_topics` allows.
    #[error("{0} task streams are open on this replica (streams.max_topics)")]
    TooManyTopics(usize),
    /// The agent does not know the task.
    #[error("agent {agent:?} has no task {task}")]
    NoSuchTask {
        /// The agent's route name.
        agent: String,
        /// The task asked for.
        task: String,
    },
    /// The agent answered the stream request with something else than an event stream.
    #[error("agent {agent:?} answered the stream request with {status}, not an event stream")]
    NotAnEventStream {
        /// The agent's route name.
        agent: String,
        /// The status it answered.
        status: hyper::StatusCode,
    },
    /// The agent did not open the stream within its timeout.
    #[error("agent {agent:?} did not open the task's stream in time")]
    OpenTimeout {
        /// The agent's route name.
        agent: String,
    },
    /// The exchange with the agent failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// An A2A agent answered the stream request with an error of its own (or one the gateway
    /// read in its answer), relayed as it is.
    #[error("{}", .0.message)]
    A2a(Arc<crate::protocol::a2a::A2aError>),
}

/// `[streams]` in the config: plain sizes and durations, used as they are.
pub use crate::config::StreamsConfig as StreamConfig;

/// After a task ends, its stream stays open this long for the agent's last events (the ledger
/// often hears of the end before the agent's stream says its last word).
const END_GRACE: Duration = Duration::from_millis(500);

/// The last event of a stream the gateway gave up on, with data `{"reason": "..."}`. Not
/// `error`: a browser's EventSource reports its own connection errors as `error` events, and a
/// page could not tell the two apart.
pub const UPSTREAM_ERROR: &str = "upstream_error";

/// How long a stream given up on stays given up: within it, a new subscriber gets the same
/// `upstream_error` at once, and the agent is not asked again (an EventSource reconnects every
/// few seconds, and each reconnect would otherwise cost the agent a broken stream again).
pub const GIVE_UP_COOL_OFF: Duration = Duration::from_secs(30);

/// Streams remembered as given up, at most (the oldest goes first past it): a misbehaving
/// agent with many tasks must not grow the map without bound.
const MAX_GIVEN_UP: usize = 4096;

/// The streams given up on, and why, each until its cool-off ends. Bounded by [`MAX_GIVEN_UP`].
#[derive(Default)]
struct GivenUp {
    streams: HashMap<Key, (Instant, Arc<str>)>,
}

impl GivenUp {
    /// Remember `key` as given up until `now` + the cool-off, with the event data to repeat.
    fn remember(&mut self, key: Key, data: Arc<str>, now: Instant) {
        self.streams.retain(|_, (until, _)| *until > now);
        if self.streams.len() >= MAX_GIVEN_UP && !self.streams.contains_key(&key) {
            let oldest = self
                .streams
                .iter()
                .min_by_key(|(_, (until, _))| *until)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.streams.remove(&k);
            }
        }
        self.streams.insert(key, (now + GIVE_UP_COOL_OFF, data));
    }

    /// The `upstream_error` data of `key`, if it is given up on at `now`.
    fn get(&mut self, key: &Key, now: Instant) -> Option<Arc<str>> {
        match self.streams.get(key) {
            Some((until, data)) if *until > now => Some(data.clone()),
            Some(_) => {
                self.streams.remove(key);
                None
            }
            None => None,
        }
    }
}

/// The `retry:` a stream ends with when it should be reconnected (drain, changed agent).
pub const RECONNECT_HINT_MS: u64 = 1000;

/// The live task streams of this replica, one [`Topic`] per (agent, task), and the change feed.
pub struct Hub {
    topics: Mutex<HashMap<Key, Arc<Topic>>>,
    /// Streams given up on (see [`UPSTREAM_ERROR`]). Held with `topics`, it is taken second.
    given_up: Mutex<GivenUp>,
    /// Bytes buffered by all topics together (see `topic::Limits`).
    buffered: Arc<std::sync::atomic::AtomicU64>,
    /// The gateway is stopping: no new subscriptions, open streams end.
    stop: watch::Receiver<bool>,
    cfg: StreamConfig,
    metrics: Arc<Metrics>,
    ledger: Arc<dyn TaskLedger>,
    /// The change feed: terminal changes close topics, `/events` listens to every change.
    pub feed: Arc<ChangeFeed>,
}

impl Hub {
    /// A hub with no topic; it stops taking subscriptions once `stop` turns true.
    pub fn new(
        cfg: StreamConfig,
        metrics: Arc<Metrics>,
        ledger: Arc<dyn TaskLedger>,
        feed: Arc<ChangeFeed>,
        stop: watch::Receiver<bool>,
    ) -> Hub {
        Hub {
            topics: Mutex::new(HashMap::new()),
            given_up: Mutex::new(GivenUp::default()),
            buffered: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            stop,
            cfg,
            metrics,
            ledger,
            feed,
        }
    }

    /// The `[streams]` settings.
    pub fn config(&self) -> &StreamConfig {
        &self.cfg
    }

    /// Turns true when the gateway is stopping.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stop.clone()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<Topic>>> {
        self.topics.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn given_up(&self) -> std::sync::MutexGuard<'_, GivenUp> {
        self.given_up.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give up on a topic whose agent keeps breaking the event-stream rules: its subscribers get
    /// a final `event: upstream_error` with `reason`, the topic closes, and new subscribers get
    /// the same for [`GIVE_UP_COOL_OFF`]. Remembered before the topic closes, so a subscriber
    /// that finds it closed finds the reason too.
    fn give_up(&self, topic: &Topic, reason: &str) {
        let data: Arc<str> = Arc::from(serde_json::json!({ "reason": reason }).to_string());
        self.metrics
            .stream_upstream_errors
            .with_label_values(&[&*topic.key.0])
            .inc();
        self.given_up()
            .remember(topic.key.clone(), data.clone(), Instant::now());
        topic.finish(UPSTREAM_ERROR, &data);
    }

    /// Subscribe to a task's stream, opening its upstream if this is the first subscriber.
    /// Waits for the first connection's outcome, so an agent that refuses the stream answers the
    /// request (404, 502...) rather than an empty 200. `Ok(None)`: the task has ended (204).
    /// A stream given up on within its cool-off is a stream of one `upstream_error` event.
    pub async fn subscribe(
        self: &Arc<Self>,
        agent: &Arc<Agent>,
        client: &Upstream,
        task_id: &str,
        last_event_id: Option<&str>,
        kill: Option<Arc<tokio::sync::Notify>>,
    ) -> Result<Option<Subscription>, StreamError> {
        let key: Key = (Arc::from(agent.cfg.name.as_str()), Arc::from(task_id));
        let (topic, fresh, sub) = self.enter(agent, key, Dialect::Clawpedia, |t| {
            t.subscribe(last_event_id, kill)
        })?;
        if fresh {
            self.metrics.stream_upstreams.inc();
            tokio::spawn(source::run(
                self.clone(),
                topic.clone(),
                agent.clone(),
                client.clone(),
            ));
        }
        Ok(self.opened(agent, &topic).await?.then_some(sub))
    }

    fn limits(&self) -> Limits {
        Limits {
            replay_events: self.cfg.replay_events.max(1),
            replay_bytes: self.cfg.replay_bytes,
            lag_bytes: self.cfg.lag_bytes,
            hub_bytes: self.buffered.clone(),
            hub_budget: self.cfg.max_buffer_bytes,
        }
    }

    /// The open topic of `key` with a new subscriber (`subscribe`), or a new topic registered
    /// for it (`true`: the caller starts its upstream). Subscribed under the map lock: a topic
    /// found here cannot be closed as abandoned before it counts this subscriber (see
    /// `remove_if_abandoned`). A stream given up on within its cool-off is a topic of its own,
    /// never registered nor connected, that ends at once.
    fn enter(
        &self,
        agent: &Agent,
        key: Key,
        dialect: Dialect,
        subscribe: impl FnOnce(&Arc<Topic>) -> Subscription,
    ) -> Result<(Arc<Topic>, bool, Subscription), StreamError> {
        if *self.stop.borrow() {
            return Err(StreamError::ShuttingDown);
        }
        let mut map = self.map();
        let (topic, fresh) = match map.get(&key) {
            Some(t) if !t.is_closed() => (t.clone(), false),
            _ => {
                let given_up = self.given_up().get(&key, Instant::now());
                if let Some(data) = given_up {
                    let t = Arc::new(Topic::speaking(
                        dialect,
                        key,
                        self.limits(),
                        self.metrics.clone(),
                    ));
                    t.finish(UPSTREAM_ERROR, &data);
                    (t, false)
                } else {
                    (self.register(&mut map, agent, key, dialect)?, true)
                }
            }
        };
        let sub = subscribe(&topic);
        Ok((topic, fresh, sub))
    }

    /// A new topic registered under `key`, within `streams.max_topics`.
    fn register(
        &self,
        map: &mut HashMap<Key, Arc<Topic>>,
        agent: &Agent,
        key: Key,
        dialect: Dialect,
    ) -> Result<Arc<Topic>, StreamError> {
        if agent.is_retired() {
            // The request resolved the agent before a reload replaced it: the next try finds
            // the new config.
            return Err(StreamError::Reloaded(agent.cfg.name.clone()));
        }
        if map.len() >= self.cfg.max_topics {
            return Err(StreamError::TooManyTopics(map.len()));
        }
        let t = Arc::new(Topic::speaking(
            dialect,
            key.clone(),
            self.limits(),
            self.metrics.clone(),
        ));
        map.insert(key, t.clone());
        Ok(t)
    }

    /// Wait for the first connection's outcome of `topic`: `true` once it streams (or has
    /// closed), `false` if the task turned out to be over; the failure otherwise.
    async fn opened(&self, agent: &Agent, topic: &Topic) -> Result<bool, StreamError> {
        let mut phase = topic.phase();
        let deadline = tokio::time::Instant::now() + agent.cfg.timeout + Duration::from_secs(1);
        loop {
            let now = phase.borrow_and_update().clone();
            match now {
                Phase::Open | Phase::Closed => return Ok(true),
                Phase::Ended => return Ok(false),
                Phase::Failed(e) => return Err(e),
                Phase::Connecting => {}
            }
            match tokio::time::timeout_at(deadline, phase.changed()).await {
                Ok(Ok(())) => {}
                _ => {
                    return Err(StreamError::OpenTimeout {
                        agent: agent.cfg.name.clone(),
                    })
                }
            }
        }
    }

    /// A2A: join the stream of the task under ledger key `key` of `agent` (the task as it is
    /// now, then its events). `Some(topic)`: nobody streams the task here yet, and the caller
    /// feeds the new topic (`feed` 1), opening the agent's stream; `Ok(None)`: the task turned
    /// out to be over.
    pub async fn join_a2a(
        &self,
        agent: &Agent,
        key: &str,
        framing: Framing,
        kill: Option<Arc<tokio::sync::Notify>>,
        feed: impl FnOnce(Arc<Topic>, u64),
    ) -> Result<Option<Subscription>, StreamError> {
        let key: Key = (Arc::from(agent.cfg.name.as_str()), Arc::from(key));
        let (topic, fresh, sub) =
            self.enter(agent, key, Dialect::A2a, |t| t.join(framing, kill))?;
        if fresh {
            self.metrics.stream_upstreams.inc();
            let n = topic.take_feed();
            feed(topic.clone(), n);
        }
        Ok(self.opened(agent, &topic).await?.then_some(sub))
    }

    /// A2A: the topic a new upstream of the task under ledger key `key` feeds (the creator's
    /// `message:stream`): the open one, whose feed it supersedes, or a new one; its feed
    /// number; and the creator's subscription, from the event the feed publishes next. Taken
    /// under the map lock, as [`Hub::enter`] does: a lingering topic cannot be closed as
    /// abandoned before it counts the creator.
    pub fn feed_a2a(
        &self,
        agent: &Agent,
        key: &str,
        framing: Framing,
        kill: Option<Arc<tokio::sync::Notify>>,
    ) -> Result<(Arc<Topic>, u64, Subscription), StreamError> {
        if *self.stop.borrow() {
            return Err(StreamError::ShuttingDown);
        }
        let key: Key = (Arc::from(agent.cfg.name.as_str()), Arc::from(key));
        let mut map = self.map();
        let topic = match map.get(&key) {
            Some(t) if !t.is_closed() => t.clone(),
            _ => self.register(&mut map, agent, key, Dialect::A2a)?,
        };
        // Each feed counts while it runs (`feed_ended`), a superseded one too.
        self.metrics.stream_upstreams.inc();
        let feed = topic.take_feed();
        let sub = topic.subscribe_from(topic.next_seq(), framing, kill);
        drop(map);
        Ok((topic, feed, sub))
    }

    /// The `[streams]` tick of a topic's upstream loop, for feeds outside this module (A2A).
    pub fn tick(&self) -> tokio::time::Interval {
        let mut tick = tokio::time::interval(source::tick_every(self));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick
    }

    /// The clock's work on `topic` (pings, slow consumers, the linger): whether it goes on.
    pub fn tend(&self, topic: &Arc<Topic>) -> bool {
        source::on_tick(self, topic)
    }

    /// Forget `topic` once its feed `feed` ends, if that feed still feeds it (a superseded
    /// feed leaves the topic to its successor): it closes, and the upstream is counted gone.
    pub fn feed_ended(&self, topic: &Arc<Topic>, feed: u64) {
        if topic.fed_by(feed) {
            topic.close();
            self.remove(topic);
        }
        self.metrics.stream_upstreams.dec();
    }

    /// Close and forget a topic that has had no subscriber for the linger time, in one step
    /// under the map lock, so a subscriber arriving meanwhile either finds it still open or a
    /// fresh one. Whether it was closed.
    fn remove_if_abandoned(&self, topic: &Arc<Topic>) -> bool {
        let mut map = self.map();
        let idle = topic
            .idle_since()
            .is_some_and(|t| t.elapsed() >= self.cfg.linger);
        if !idle {
            return false;
        }
        if map.get(&topic.key).is_some_and(|t| Arc::ptr_eq(t, topic)) {
            map.remove(&topic.key);
        }
        drop(map);
        topic.close();
        true
    }

    /// Forget a topic (if it is still the one registered under its key).
    fn remove(&self, topic: &Arc<Topic>) {
        let mut map = self.map();
        if map.get(&topic.key).is_some_and(|t| Arc::ptr_eq(t, topic)) {
            map.remove(&topic.key);
        }
    }

    /// Bytes the task streams of this replica hold for replay.
    pub fn buffered(&self) -> u64 {
        self.buffered.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Open task streams on this replica.
    pub fn topics(&self) -> usize {
        self.map().len()
    }

    /// The change feed's terminal hook: close the stream of a task that just ended, with a
    /// final `event: status` carrying the task, after a short grace for the agent's last events
    /// (if its stream ends first, the upstream loop finishes the topic sooner; finishing is
    /// idempotent). Holds the hub weakly: the hub owns the feed.
    pub fn terminal_hook(self: &Arc<Self>) -> changes::TerminalHook {
        let hub = Arc::downgrade(self);
        Box::new(move |c: &changes::Change| {
            let Some(hub) = hub.upgrade() else { return };
            let topic = hub
                .map()
                .get(&(c.agent.clone(), c.task_id.clone()))
                .cloned();
            let Some(t) = topic else { return };
            let task = c.task.clone();
            let finish = move |hub: Arc<Hub>| {
                t.finish("status", &String::from_utf8_lossy(&task));
                hub.remove(&t);
            };
            // The ledger applies changes on a runtime; without one, finish at once.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move {
                        tokio::time::sleep(END_GRACE).await;
                        finish(hub);
                    });
                }
                Err(_) => finish(hub),
            }
        })
    }

    /// Close every topic (shutdown): subscribers get what is buffered, then their streams end.
    /// End the streams of agent `name` (removed or changed by a reload): `final_event` (an event
    /// name and its data) and the end, or, without one, a `retry:` hint so subscribers come
    /// back to the new config.
    pub fn close_agent(&self, name: &str, final_event: Option<(&str, &str)>) {
        let theirs: Vec<Arc<Topic>> = {
            let mut map = self.map();
            let keys: Vec<Key> = map.keys().filter(|k| &*k.0 == name).cloned().collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for t in theirs {
            match final_event {
                Some((event, data)) => t.finish(event, data),
                None => t.end_with_retry(RECONNECT_HINT_MS),
            }
        }
    }

    /// A drain: every stream ends with a `retry:` hint, so EventSources reconnect (to another
    /// replica, behind the load balancer) rather than give up.
    pub fn drain(&self) {
        let all: Vec<Arc<Topic>> = self.map().drain().map(|(_, t)| t).collect();
        for t in all {
            t.end_with_retry(RECONNECT_HINT_MS);
        }
    }

    /// Close every stream at once (the end of a shutdown).
    pub fn close_all(&self) {
        let all: Vec<Arc<Topic>> = self.map().drain().map(|(_, t)| t).collect();
        for t in all {
            t.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(task: &str) -> Key {
        (Arc::from("a"), Arc::from(task))
    }

    #[test]
    fn a_given_up_stream_is_remembered_for_the_cool_off_only() {
        let mut g = GivenUp::default();
        let t0 = Instant::now();
        g.remember(key("t"), Arc::from("{\"reason\":\"r\"}"), t0);
        assert_eq!(g.get(&key("t"), t0).as_deref(), Some("{\"reason\":\"r\"}"));
        assert!(g.get(&key("u"), t0).is_none());
        let later = t0 + GIVE_UP_COOL_OFF - Duration::from_millis(1);
        assert!(g.get(&key("t"), later).is_some());
        assert!(g.get(&key("t"), t0 + GIVE_UP_COOL_OFF).is_none());
        assert!(
            g.streams.is_empty(),
            "an expired entry is dropped when read"
        );
    }

    #[test]
    fn the_given_up_streams_are_bounded_and_the_oldest_goes_first() {
        let mut g = GivenUp::default();
        let t0 = Instant::now();
        for i in 0..MAX_GIVEN_UP + 10 {
            let at = t0 + Duration::from_millis(i as u64);
            g.remember(key(&i.to_string()), Arc::from("{}"), at);
        }
        assert_eq!(g.streams.len(), MAX_GIVEN_UP);
        let now = t0 + Duration::from_millis((MAX_GIVEN_UP + 10) as u64);
        assert!(g.get(&key("0"), now).is_none());
        assert!(g.get(&key("9"), now).is_none());
        assert!(g.get(&key("10"), now).is_some());
        // Expired entries go first, whatever the bound.
        g.remember(key("new"), Arc::from("{}"), now + GIVE_UP_COOL_OFF);
        assert_eq!(g.streams.len(), 1);
    }
}
