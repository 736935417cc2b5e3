//! Event streams: one upstream connection per task shared by every subscriber of that task
//! (per replica), and `/events`, one connection carrying many tasks and every ledger change.
//!
//! [`Hub`] holds the live [`topic::Topic`]s. The first subscriber of a task opens its topic and
//! its upstream loop (`source::run`); later ones only add a cursor. The upstream loop
//! re-numbers the agent's events (`id: EPOCH-SEQ`), drops the agent's pings and sends the
//! gateway's own, reconnects with `Last-Event-ID` when the agent drops the stream while the task
//! is live, and closes the topic with a final `event: status` when the task ends (learned from
//! the ledger's change feed, or by asking the agent when its stream ends). A topic with no
//! subscriber lingers briefly, then closes its upstream.

pub mod changes;
pub mod events;
mod source;
pub mod topic;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::ledger::TaskLedger;
use crate::metrics::Metrics;
use crate::registry::Agent;
use crate::upstream::{AgentError, Upstream};
use changes::ChangeFeed;
use topic::{Key, Limits, Phase, Subscription, Topic};

/// Why a subscription could not be served.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StreamError {
    /// The gateway is stopping and opens no new stream.
    #[error("the gateway is shutting down")]
    ShuttingDown,
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
}

/// `[streams]` in the config: plain sizes and durations, used as they are.
pub use crate::config::StreamsConfig as StreamConfig;

/// After a task ends, its stream stays open this long for the agent's last events (the ledger
/// often hears of the end before the agent's stream says its last word).
const END_GRACE: Duration = Duration::from_millis(500);

/// The live task streams of this replica, one [`Topic`] per (agent, task), and the change feed.
pub struct Hub {
    topics: Mutex<HashMap<Key, Arc<Topic>>>,
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

    /// Subscribe to a task's stream, opening its upstream if this is the first subscriber.
    /// Waits for the first connection's outcome, so an agent that refuses the stream answers the
    /// request (404, 502...) rather than an empty 200. `Ok(None)`: the task has ended (204).
    pub async fn subscribe(
        self: &Arc<Self>,
        agent: &Arc<Agent>,
        client: &Upstream,
        task_id: &str,
        last_event_id: Option<&str>,
        kill: Option<Arc<tokio::sync::Notify>>,
    ) -> Result<Option<Subscription>, StreamError> {
        if *self.stop.borrow() {
            return Err(StreamError::ShuttingDown);
        }
        let key: Key = (Arc::from(agent.cfg.name.as_str()), Arc::from(task_id));
        // Subscribed under the map lock: a topic found here cannot be closed as abandoned
        // before it counts this subscriber (see `remove_if_abandoned`).
        let (topic, fresh, sub) = {
            let mut map = self.map();
            let (topic, fresh) = match map.get(&key) {
                Some(t) if !t.is_closed() => (t.clone(), false),
                _ => {
                    if map.len() >= self.cfg.max_topics {
                        return Err(StreamError::TooManyTopics(map.len()));
                    }
                    let limits = Limits {
                        replay_events: self.cfg.replay_events.max(1),
                        replay_bytes: self.cfg.replay_bytes,
                        lag_bytes: self.cfg.lag_bytes,
                        hub_bytes: self.buffered.clone(),
                        hub_budget: self.cfg.max_buffer_bytes,
                    };
                    let t = Arc::new(Topic::new(key.clone(), limits, self.metrics.clone()));
                    map.insert(key, t.clone());
                    (t, true)
                }
            };
            let sub = topic.subscribe(last_event_id, kill);
            (topic, fresh, sub)
        };
        if fresh {
            self.metrics.stream_upstreams.inc();
            tokio::spawn(source::run(
                self.clone(),
                topic.clone(),
                agent.clone(),
                client.clone(),
            ));
        }
        let mut phase = topic.phase();
        let deadline = tokio::time::Instant::now() + agent.cfg.timeout + Duration::from_secs(1);
        loop {
            let now = phase.borrow_and_update().clone();
            match now {
                Phase::Open | Phase::Closed => return Ok(Some(sub)),
                Phase::Ended => return Ok(None),
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
    pub fn close_all(&self) {
        let all: Vec<Arc<Topic>> = self.map().drain().map(|(_, t)| t).collect();
        for t in all {
            t.close();
        }
    }
}
