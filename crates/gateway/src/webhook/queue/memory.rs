//! The in-process delivery queue: the embedded default. Same lanes and tokens as the Redis one,
//! in one mutex-guarded structure (never held across an await). Durable only while the process
//! lives: a restart loses what was queued.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use super::{
    payload_value, DeadLetter, DeliveryQueue, Finish, Finished, Job, Message, QueueFuture,
    QueueStats,
};

type Lane = (Arc<str>, Arc<str>);

struct Token {
    lane: Lane,
    attempts: u32,
}

struct Dead {
    letter: DeadLetter,
    message: Message,
}

#[derive(Default)]
struct Inner {
    lanes: HashMap<Lane, VecDeque<Message>>,
    ready: VecDeque<Token>,
    held: HashMap<u64, Lane>,
    next_token: u64,
    retry: BTreeMap<(i64, u64), Token>,
    parked: HashMap<Arc<str>, Vec<Arc<str>>>,
    disabled: HashMap<Arc<str>, String>,
    dead: VecDeque<Dead>,
    queued: usize,
}

/// The in-process delivery queue (see the module doc).
pub struct MemoryQueue {
    inner: Mutex<Inner>,
    ready: Notify,
    max_queued: usize,
    max_dead: usize,
}

impl MemoryQueue {
    /// An empty queue holding at most `max_queued` messages and `max_dead` dead letters.
    pub fn new(max_queued: usize, max_dead: usize) -> MemoryQueue {
        MemoryQueue {
            inner: Mutex::new(Inner::default()),
            ready: Notify::new(),
            max_queued,
            max_dead,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Append one message to the lane of each subscriber, or none if they do not all fit under
    /// the bound. The ledger calls this under its own lock, so the lanes of one task get its
    /// changes in the order it accepted them. A disabled subscriber's go straight to the dead
    /// letters (as in Redis: its lanes cannot fill the queue every subscriber shares).
    pub fn offer(&self, subscribers: &[Arc<str>], task_id: &str, message: Message) -> bool {
        self.offer_change(task_id, Some((subscribers, message)), None)
            .is_some()
    }

    /// The messages of one change: the configured subscribers' notification, all or none
    /// (`None`: no room, the change is not to be recorded); then the A2A push configs'
    /// StreamResponse, left out when there is no room for it (`Some(how many were left out)`):
    /// clients' configs never make a change unrecordable.
    pub fn offer_change(
        &self,
        task_id: &str,
        subscribers: Option<(&[Arc<str>], Message)>,
        pushes: Option<(&[Arc<str>], Message)>,
    ) -> Option<usize> {
        let mut q = self.lock();
        let task: Arc<str> = Arc::from(task_id);
        if let Some((subs, message)) = subscribers {
            if q.queued + subs.len() > self.max_queued {
                return None;
            }
            q.offer_locked(subs, &task, message, self.max_dead);
        }
        let mut dropped = 0;
        if let Some((configs, message)) = pushes {
            if q.queued + configs.len() > self.max_queued {
                dropped = configs.len();
            } else {
                q.offer_locked(configs, &task, message, self.max_dead);
            }
        }
        drop(q);
        self.ready.notify_one();
        Some(dropped)
    }
}

impl Inner {
    fn offer_locked(
        &mut self,
        subscribers: &[Arc<str>],
        task: &Arc<str>,
        message: Message,
        max_dead: usize,
    ) {
        let q = self;
        let task_id: &str = task;
        for s in subscribers {
            if q.disabled.contains_key(s) {
                let letter = DeadLetter {
                    msg_id: message.msg_id.clone(),
                    subscriber: s.to_string(),
                    task_id: task_id.to_owned(),
                    attempts: 0,
                    last_error: "subscriber disabled".into(),
                    failed_at: crate::protocol::time::now(),
                    payload: payload_value(&message.payload),
                };
                q.dead.push_front(Dead {
                    letter,
                    message: message.clone(),
                });
                q.dead.truncate(max_dead);
                continue;
            }
            q.queued += 1;
            q.append((s.clone(), task.clone()), message.clone());
        }
    }
}

impl Inner {
    fn append(&mut self, lane: Lane, message: Message) {
        let list = self.lanes.entry(lane.clone()).or_default();
        list.push_back(message);
        if list.len() == 1 {
            self.ready.push_back(Token { lane, attempts: 0 });
        }
    }

    /// Drop the lane's first message if it is `msg_id`, and send its token on if more wait.
    fn advance(&mut self, lane: Lane, msg_id: Option<&str>) -> Option<Message> {
        let list = self.lanes.get_mut(&lane)?;
        let popped = match (list.front(), msg_id) {
            (Some(m), Some(id)) if m.msg_id == id => list.pop_front(),
            _ => None,
        };
        if popped.is_some() {
            self.queued = self.queued.saturating_sub(1);
        }
        if list.is_empty() {
            self.lanes.remove(&lane);
        } else {
            self.ready.push_back(Token { lane, attempts: 0 });
        }
        popped
    }

    fn job(&mut self, t: Token) -> Job {
        let token = self.next_token;
        self.next_token += 1;
        let message = self.lanes.get(&t.lane).and_then(|l| l.front().cloned());
        self.held.insert(token, t.lane.clone());
        Job {
            token: token.to_string(),
            subscriber: t.lane.0,
            task_id: t.lane.1,
            attempts: t.attempts,
            message,
            unreadable: false,
            consumer: Arc::from(""),
        }
    }
}

impl DeliveryQueue for MemoryQueue {
    fn take<'a>(
        &'a self,
        _consumer: &'a str,
        max: usize,
        wait: Duration,
    ) -> QueueFuture<'a, Vec<Job>> {
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                {
                    let mut q = self.lock();
                    let n = max.min(q.ready.len());
                    if n > 0 {
                        let mut jobs = Vec::with_capacity(n);
                        for _ in 0..n {
                            if let Some(t) = q.ready.pop_front() {
                                jobs.push(q.job(t));
                            }
                        }
                        return Ok(jobs);
                    }
                }
                if tokio::time::timeout_at(deadline, self.ready.notified())
                    .await
                    .is_err()
                {
                    return Ok(Vec::new());
                }
            }
        })
    }

    fn reclaim<'a>(
        &'a self,
        _consumer: &'a str,
        _min_idle: Duration,
        _max: usize,
    ) -> QueueFuture<'a, Vec<Job>> {
        // In one process a worker that died took the queue with it.
        Box::pin(async { Ok(Vec::new()) })
    }

    fn finish<'a>(&'a self, job: &'a Job, how: Finish) -> QueueFuture<'a, Finished> {
        Box::pin(async move {
            let mut q = self.lock();
            let Some(lane) = job.token.parse().ok().and_then(|t: u64| q.held.remove(&t)) else {
                return Ok(Finished::Stale);
            };
            let msg_id = job.message.as_ref().map(|m| m.msg_id.as_str());
            match how {
                Finish::Delivered => {
                    q.advance(lane, msg_id);
                }
                Finish::Retry { due_ms, attempts } => {
                    let seq = q.next_token;
                    q.next_token += 1;
                    q.retry.insert((due_ms, seq), Token { lane, attempts });
                }
                Finish::Dead { attempts, error } => {
                    if let Some(message) = q.advance(lane.clone(), msg_id) {
                        q.dead.push_front(Dead {
                            letter: DeadLetter {
                                msg_id: message.msg_id.clone(),
                                subscriber: lane.0.to_string(),
                                task_id: lane.1.to_string(),
                                attempts,
                                last_error: error,
                                failed_at: crate::protocol::time::now(),
                                payload: payload_value(&message.payload),
                            },
                            message,
                        });
                        q.dead.truncate(self.max_dead);
                    }
                }
                Finish::Park { reason } => {
                    if let Some(r) = reason {
                        q.disabled.insert(lane.0.clone(), r);
                    }
                    if q.disabled.contains_key(&lane.0) {
                        q.parked.entry(lane.0.clone()).or_default().push(lane.1);
                    } else {
                        // Enabled again meanwhile: carry on.
                        q.ready.push_back(Token { lane, attempts: 0 });
                    }
                }
            }
            drop(q);
            self.ready.notify_one();
            Ok(Finished::Done)
        })
    }

    fn promote_due(&self, now_ms: i64, max: usize) -> QueueFuture<'_, usize> {
        Box::pin(async move {
            let mut q = self.lock();
            let mut moved = 0;
            while moved < max {
                match q.retry.first_key_value() {
                    Some((&(due, _), _)) if due <= now_ms => {}
                    _ => break,
                }
                if let Some((_, t)) = q.retry.pop_first() {
                    q.ready.push_back(t);
                    moved += 1;
                }
            }
            drop(q);
            if moved > 0 {
                self.ready.notify_one();
            }
            Ok(moved)
        })
    }

    fn stats(&self) -> QueueFuture<'_, QueueStats> {
        Box::pin(async move {
            let q = self.lock();
            Ok(QueueStats {
                queued: q.queued as u64,
                retrying: q.retry.len() as u64,
                dead: q.dead.len() as u64,
            })
        })
    }

    fn dead_letters(&self, limit: usize) -> QueueFuture<'_, Vec<DeadLetter>> {
        Box::pin(async move {
            let q = self.lock();
            Ok(q.dead
                .iter()
                .take(limit)
                .map(|d| d.letter.clone())
                .collect())
        })
    }

    fn redrive<'a>(&'a self, subscriber: Option<&'a str>, limit: usize) -> QueueFuture<'a, usize> {
        Box::pin(async move {
            let mut q = self.lock();
            let (mut keep, mut back) = (VecDeque::new(), Vec::new());
            while let Some(d) = q.dead.pop_front() {
                let wanted = subscriber.is_none_or(|s| s == d.letter.subscriber);
                if wanted && back.len() < limit {
                    back.push(d);
                } else {
                    keep.push_back(d);
                }
            }
            q.dead = keep;
            let n = back.len();
            // Oldest first, so a lane's redriven messages keep their order.
            for d in back.into_iter().rev() {
                q.queued += 1;
                let lane = (
                    Arc::from(d.letter.subscriber.as_str()),
                    Arc::from(d.letter.task_id.as_str()),
                );
                q.append(lane, d.message);
            }
            drop(q);
            self.ready.notify_one();
            Ok(n)
        })
    }

    fn disabled(&self) -> QueueFuture<'_, Vec<(String, String)>> {
        Box::pin(async move {
            let q = self.lock();
            let mut out: Vec<(String, String)> = q
                .disabled
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            out.sort();
            Ok(out)
        })
    }

    fn enable<'a>(&'a self, subscriber: &'a str) -> QueueFuture<'a, usize> {
        Box::pin(async move {
            let mut q = self.lock();
            q.disabled.remove(subscriber);
            let tasks = q.parked.remove(subscriber).unwrap_or_default();
            let n = tasks.len();
            let sub: Arc<str> = Arc::from(subscriber);
            for t in tasks {
                q.ready.push_back(Token {
                    lane: (sub.clone(), t),
                    attempts: 0,
                });
            }
            drop(q);
            self.ready.notify_one();
            Ok(n)
        })
    }
}
