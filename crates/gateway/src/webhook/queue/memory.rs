//! The in-process delivery queue: the embedded default. Same lanes and tokens as the Redis one,
//! in one mutex-guarded structure (never held across an await). Durable only while the process
//! lives: a restart loses what was queued.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use super::{
    payload_value, Bounds, DeadLetter, DeliveryQueue, Finish, Finished, Job, Message, QueueFuture,
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
    /// The client whose push delivery it was: redriven, it counts against that client again.
    client: Option<Arc<str>>,
}

/// What one client's push deliveries hold of the queue.
#[derive(Default, Clone, Copy)]
struct Share {
    queued: usize,
    bytes: usize,
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
    /// The bytes of the queued messages' bodies.
    bytes: usize,
    /// Each client's share of what is queued (clients with none are not kept).
    clients: HashMap<Arc<str>, Share>,
    /// The client of each push lane (a task's configs are its owner's), while it holds messages.
    lane_client: HashMap<Lane, Arc<str>>,
}

/// The in-process delivery queue (see the module doc).
pub struct MemoryQueue {
    inner: Mutex<Inner>,
    ready: Notify,
    bounds: Bounds,
    max_dead: usize,
}

impl MemoryQueue {
    /// An empty queue holding at most what `bounds` allow and `max_dead` dead letters.
    pub fn new(bounds: Bounds, max_dead: usize) -> MemoryQueue {
        MemoryQueue {
            inner: Mutex::new(Inner::default()),
            ready: Notify::new(),
            bounds,
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
    /// StreamResponse, of the task's owner `client` (`""` for a task without one), left out
    /// when there is no room for it in the queue or in that client's share (`Some(how many
    /// were left out)`): clients' configs never make a change unrecordable, and never take
    /// another client's room.
    pub fn offer_change(
        &self,
        task_id: &str,
        subscribers: Option<(&[Arc<str>], Message)>,
        pushes: Option<(&[Arc<str>], Message, &str)>,
    ) -> Option<usize> {
        let b = self.bounds;
        let mut q = self.lock();
        let task: Arc<str> = Arc::from(task_id);
        if let Some((subs, message)) = subscribers {
            let n = subs.len();
            if q.queued + n > b.queued || q.bytes + n * message.payload.len() > b.bytes {
                return None;
            }
            q.offer_locked(subs, &task, message, None, self.max_dead);
        }
        let mut dropped = 0;
        if let Some((configs, message, client)) = pushes {
            let (n, size) = (configs.len(), configs.len() * message.payload.len());
            let share = q.clients.get(client).copied().unwrap_or_default();
            if q.queued + n > b.queued
                || q.bytes + size > b.bytes
                || share.queued + n > b.per_client
                || share.bytes + size > b.per_client_bytes
            {
                dropped = n;
            } else {
                let client = Arc::from(client);
                q.offer_locked(configs, &task, message, Some(&client), self.max_dead);
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
        client: Option<&Arc<str>>,
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
                    client: client.cloned(),
                });
                q.dead.truncate(max_dead);
                continue;
            }
            q.append((s.clone(), task.clone()), message.clone(), client.cloned());
        }
    }
}

impl Inner {
    /// Queue `message` at the end of `lane`, counted (and against `client`'s share, for a
    /// push config's lane).
    fn append(&mut self, lane: Lane, message: Message, client: Option<Arc<str>>) {
        self.queued += 1;
        self.bytes += message.payload.len();
        if let Some(c) = client {
            let share = self.clients.entry(c.clone()).or_default();
            share.queued += 1;
            share.bytes += message.payload.len();
            self.lane_client.insert(lane.clone(), c);
        }
        let list = self.lanes.entry(lane.clone()).or_default();
        list.push_back(message);
        if list.len() == 1 {
            self.ready.push_back(Token { lane, attempts: 0 });
        }
    }

    /// A message of `lane` left the queue (delivered, or dead): uncounted.
    fn uncount(&mut self, lane: &Lane, message: &Message) {
        self.queued = self.queued.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(message.payload.len());
        let Some(c) = self.lane_client.get(lane) else {
            return;
        };
        if let Some(share) = self.clients.get_mut(c) {
            share.queued = share.queued.saturating_sub(1);
            share.bytes = share.bytes.saturating_sub(message.payload.len());
            if share.queued == 0 {
                let c = c.clone();
                self.clients.remove(&c);
            }
        }
    }

    /// Drop the lane's first message if it is `msg_id`, and send its token on if more wait.
    fn advance(&mut self, lane: Lane, msg_id: Option<&str>) -> Option<Message> {
        let list = self.lanes.get_mut(&lane)?;
        let popped = match (list.front(), msg_id) {
            (Some(m), Some(id)) if m.msg_id == id => list.pop_front(),
            _ => None,
        };
        let empty = list.is_empty();
        if let Some(m) = &popped {
            self.uncount(&lane, m);
        }
        if empty {
            self.lanes.remove(&lane);
            self.lane_client.remove(&lane);
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
                    let client = q.lane_client.get(&lane).cloned();
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
                            client,
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
                let lane = (
                    Arc::from(d.letter.subscriber.as_str()),
                    Arc::from(d.letter.task_id.as_str()),
                );
                q.append(lane, d.message, d.client);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: &str, bytes: usize) -> Message {
        Message {
            msg_id: id.into(),
            enqueued_ms: 0,
            payload: vec![b'x'; bytes].into(),
            version: 1,
            trace: None,
        }
    }

    fn queue() -> MemoryQueue {
        MemoryQueue::new(
            Bounds {
                queued: 10,
                bytes: 1000,
                per_client: 2,
                per_client_bytes: 250,
            },
            10,
        )
    }

    fn lanes(names: &[&str]) -> Vec<Arc<str>> {
        names.iter().map(|n| Arc::from(*n)).collect()
    }

    async fn deliver_one(q: &MemoryQueue) -> Job {
        let job = q
            .take("w", 1, Duration::from_millis(10))
            .await
            .expect("take")
            .pop()
            .expect("a job");
        q.finish(&job, Finish::Delivered).await.expect("finish");
        job
    }

    #[tokio::test]
    async fn a_clients_share_is_its_own_and_comes_back_as_its_deliveries_leave() {
        let q = queue();
        let a = lanes(&["~push:a"]);
        assert_eq!(
            q.offer_change("t1", None, Some((&a, msg("1", 10), "alice"))),
            Some(0)
        );
        assert_eq!(
            q.offer_change("t1", None, Some((&a, msg("2", 10), "alice"))),
            Some(0)
        );
        // Alice's share is full; Bob's is untouched, and so is the subscribers' room.
        assert_eq!(
            q.offer_change("t1", None, Some((&a, msg("3", 10), "alice"))),
            Some(1)
        );
        let b = lanes(&["~push:b"]);
        assert_eq!(
            q.offer_change("t2", None, Some((&b, msg("1", 10), "bob"))),
            Some(0)
        );
        assert!(q.offer(&lanes(&["sub"]), "t3", msg("1", 10)));
        // One of Alice's delivered: room for one more of hers.
        let mut left = 3;
        while left > 0 {
            let job = deliver_one(&q).await;
            left -= 1;
            if &*job.subscriber == "~push:a" {
                break;
            }
        }
        assert_eq!(
            q.offer_change("t1", None, Some((&a, msg("4", 10), "alice"))),
            Some(0)
        );
        assert_eq!(
            q.offer_change("t1", None, Some((&a, msg("5", 10), "alice"))),
            Some(1)
        );
    }

    #[tokio::test]
    async fn bytes_are_bounded_in_all_and_per_client() {
        let q = queue();
        let a = lanes(&["~push:a"]);
        // 300 bytes: past Alice's 250 though one message.
        assert_eq!(
            q.offer_change("t1", None, Some((&a, msg("1", 300), "alice"))),
            Some(1)
        );
        assert_eq!(
            q.offer_change("t1", None, Some((&a, msg("2", 200), "alice"))),
            Some(0)
        );
        // The subscribers' change, all or none, within the queue's 1000 bytes.
        let subs = lanes(&["s1", "s2", "s3", "s4"]);
        assert!(
            !q.offer(&subs, "t2", msg("1", 250)),
            "1200 bytes do not fit"
        );
        assert!(q.offer(&subs, "t2", msg("1", 200)), "1000 do");
        // Now the queue is full: Bob's 10 bytes are left out, with his share empty.
        let b = lanes(&["~push:b"]);
        assert_eq!(
            q.offer_change("t3", None, Some((&b, msg("1", 10), "bob"))),
            Some(1)
        );
        // A delivery frees its bytes.
        deliver_one(&q).await;
        assert_eq!(
            q.offer_change("t3", None, Some((&b, msg("2", 10), "bob"))),
            Some(0)
        );
        let stats = q.stats().await.expect("stats");
        assert_eq!(stats.queued, 5);
    }
}
