//! The delivery worker: one per gateway process, on its own thread and runtime so deliveries
//! never compete with client requests for a worker thread's attention.
//!
//! A reader takes ready jobs while there are free delivery slots (`webhooks.concurrency`); each
//! job is one attempt at its lane's first message, then one atomic `finish`. An attempt also
//! takes a place in its client's share (`webhooks.max_in_flight_per_client`, [`super::share`]):
//! a job whose share is full gives its slot back and waits, spending no attempt. The same loop
//! reclaims the jobs of workers presumed dead (held past the visibility timeout) every quarter
//! of that timeout. Housekeeping runs beside it: due retries move back to the ready queue, and
//! the set of disabled subscribers is refreshed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::push::PushTarget;
use super::queue::{DeliveryQueue, Finish, Finished, Job};
use super::retry::{classify, Outcome, Schedule, MAX_DELAY};
use super::send::{Attempt, Sender};
use super::share::{Share, Shares};
use crate::config::WebhookConfig;
use crate::metrics::Metrics;
use crate::telemetry::{self, semconv, Telemetry};
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;

/// How long a delivery for a subscriber this replica does not know waits before another look.
const UNCONFIGURED_WAIT: Duration = Duration::from_secs(60);

/// How long a message of a newer format waits before a worker looks at it again.
const NEWER_FORMAT_WAIT: Duration = Duration::from_secs(5);

/// Wait for one free delivery slot, then take as many more as are free (up to 256).
async fn held_slots(slots: &Arc<Semaphore>) -> Option<Vec<OwnedSemaphorePermit>> {
    let first = slots.clone().acquire_owned().await.ok()?;
    let mut held = vec![first];
    while held.len() < 256 {
        match slots.clone().try_acquire_owned() {
            Ok(p) => held.push(p),
            Err(_) => break,
        }
    }
    Some(held)
}

/// Longest a throttling subscriber pauses the other lanes of this worker towards it.
const MAX_PAUSE: Duration = Duration::from_secs(300);

/// At most one "webhook delivery failed" warning per subscriber per this long; the lines left
/// out meanwhile are counted in the next one's `suppressed`. Shorter than the shortest wait a
/// schedule can have (1 s, less 20 % jitter), so one lane's attempts are each logged, and a
/// subscriber with thousands of failing lanes still writes at most two lines a second.
pub const FAILURE_LOG_EVERY: Duration = Duration::from_millis(500);

/// Subscribers the failure log remembers at once: a config names them, but reloads can add
/// and remove any number; past this the oldest memories are forgotten.
const FAILURE_LOG_MAX: usize = 1024;

/// When each subscriber's last failure line was written, and how many were left out since.
#[derive(Default)]
struct FailureLog {
    last: HashMap<Arc<str>, (Instant, u64)>,
}

impl FailureLog {
    /// Whether a line for `sub` may be written now: `Some(left out since the last one)`.
    fn allow(&mut self, sub: &Arc<str>, now: Instant) -> Option<u64> {
        if let Some((at, suppressed)) = self.last.get_mut(sub) {
            if now.duration_since(*at) < FAILURE_LOG_EVERY {
                *suppressed += 1;
                return None;
            }
            let left_out = std::mem::take(suppressed);
            *at = now;
            return Some(left_out);
        }
        if self.last.len() >= FAILURE_LOG_MAX {
            self.last
                .retain(|_, (at, _)| now.duration_since(*at) < FAILURE_LOG_EVERY);
            if self.last.len() >= FAILURE_LOG_MAX {
                self.last.clear();
            }
        }
        self.last.insert(sub.clone(), (now, 0));
        Some(0)
    }
}

/// The delivery worker (see the module doc).
pub struct Worker {
    queue: Arc<dyn DeliveryQueue>,
    /// Swapped whole by a config reload (subscribers added, removed, keys rotated): a delivery
    /// in flight finishes with the sender it started with.
    sender: Arc<ArcSwap<Sender>>,
    schedule: Schedule,
    concurrency: usize,
    visibility: Duration,
    timeout: Duration,
    metrics: Arc<Metrics>,
    /// One span per attempt, parented by the trace context queued with the message.
    telemetry: Option<Arc<Telemetry>>,
    consumer: String,
    disabled: RwLock<HashSet<String>>,
    /// Subscribers that asked to be left alone (429, 503…), until when.
    paused: Mutex<HashMap<Arc<str>, Instant>>,
    /// The rate limit of the failed-attempt warnings (see [`FAILURE_LOG_EVERY`]).
    failures: Mutex<FailureLog>,
    /// Where A2A push configs are found (the ledger), when the gateway fronts A2A agents.
    push: Option<super::push::Directory>,
    /// Each client's (and subscriber's) attempts in flight, against `max_in_flight_per_client`.
    shares: Arc<Shares>,
}

impl Worker {
    /// A worker on `queue`, with its own consumer name (host, pid and a random part).
    pub fn new(
        queue: Arc<dyn DeliveryQueue>,
        sender: Sender,
        cfg: &WebhookConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Worker, crate::webhook::retry::ScheduleError> {
        let schedule = Schedule::from_config(cfg)?;
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "gw".into());
        Ok(Worker {
            queue,
            sender: Arc::new(ArcSwap::from_pointee(sender)),
            schedule,
            concurrency: cfg.concurrency.max(1),
            visibility: cfg.visibility_timeout,
            timeout: cfg.timeout,
            metrics,
            telemetry: None,
            consumer: format!(
                "{host}-{}-{}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
            disabled: RwLock::new(HashSet::new()),
            paused: Mutex::new(HashMap::new()),
            failures: Mutex::new(FailureLog::default()),
            push: None,
            shares: Shares::new(cfg.per_client()),
        })
    }

    /// Deliver to A2A push configs too, found in `directory`.
    pub fn with_push(mut self, directory: Option<super::push::Directory>) -> Worker {
        self.push = directory;
        self
    }

    /// Trace every attempt (when telemetry is on).
    pub fn with_telemetry(mut self, telemetry: Option<Arc<Telemetry>>) -> Worker {
        self.telemetry = telemetry;
        self
    }

    /// Where a reload puts the sender for the new subscribers.
    pub fn sender_handle(&self) -> Arc<ArcSwap<Sender>> {
        self.sender.clone()
    }

    /// Start the worker on its own thread; it stops when `stop` turns true, after letting the
    /// deliveries in flight finish (bounded by the attempt timeout).
    pub fn spawn(
        self,
        stop: watch::Receiver<bool>,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("a2a-gw-webhooks".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => return tracing::error!(error = %e, "webhook runtime failed to start"),
                };
                rt.block_on(Arc::new(self).run(stop));
            })
    }

    async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let chores = tokio::spawn(self.clone().housekeeping());
        let reclaim_every = (self.visibility / 4).max(Duration::from_secs(1));
        let mut last_reclaim = Instant::now();
        loop {
            // Slots first, then jobs: a job taken is sent at once, never kept waiting for a
            // slot while its visibility timeout runs.
            let permits = tokio::select! {
                p = held_slots(&slots) => match p { Some(p) => p, None => break },
                _ = stop.changed() => break,
            };
            if last_reclaim.elapsed() >= reclaim_every {
                last_reclaim = Instant::now();
                match self
                    .queue
                    .reclaim(&self.consumer, self.visibility, permits.len())
                    .await
                {
                    Ok(jobs) if !jobs.is_empty() => {
                        tracing::info!(
                            count = jobs.len(),
                            "reclaimed webhook deliveries of a worker presumed dead"
                        );
                        self.metrics.webhook_reclaimed.inc_by(jobs.len() as u64);
                        self.start_all(jobs, permits);
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "reclaiming failed"),
                }
            }
            let taken = tokio::select! {
                r = self.queue.take(&self.consumer, permits.len(), Duration::from_secs(1)) => r,
                _ = stop.changed() => break,
            };
            match taken {
                Ok(jobs) => self.start_all(jobs, permits),
                Err(e) => {
                    tracing::warn!(error = %e, "webhook queue unavailable; retrying");
                    drop(permits);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        chores.abort();
        // Let deliveries in flight finish: an unfinished one would be sent again later.
        let all = u32::try_from(self.concurrency).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(
            self.timeout + Duration::from_secs(1),
            slots.acquire_many(all),
        )
        .await;
    }

    /// Start one delivery per job, each with one of `permits`; unused permits are released.
    fn start_all(self: &Arc<Self>, jobs: Vec<Job>, permits: Vec<OwnedSemaphorePermit>) {
        let taken = Instant::now();
        for (job, permit) in jobs.into_iter().zip(permits) {
            let me = self.clone();
            tokio::spawn(async move {
                me.deliver(job, taken).await;
                drop(permit);
            });
        }
    }

    /// Beside the delivery loop: due retries back to the ready queue, and the disabled set.
    async fn housekeeping(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_disabled = None::<Instant>;
        loop {
            tick.tick().await;
            let now = crate::protocol::time::now_ms();
            if let Err(e) = self.queue.promote_due(now, 1000).await {
                tracing::debug!(error = %e, "promoting due retries failed");
            }
            if last_disabled.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                last_disabled = Some(Instant::now());
                if let Ok(list) = self.queue.disabled().await {
                    let set: HashSet<String> = list.into_iter().map(|(s, _)| s).collect();
                    self.metrics.webhook_disabled.set(set.len() as i64);
                    *self.disabled.write().unwrap_or_else(|p| p.into_inner()) = set;
                }
            }
        }
    }

    fn is_disabled(&self, sub: &str) -> bool {
        self.disabled
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(sub)
    }

    fn paused_until(&self, sub: &Arc<str>) -> Option<Instant> {
        let mut p = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        match p.get(sub) {
            Some(&until) if until > Instant::now() => Some(until),
            Some(_) => {
                p.remove(sub);
                None
            }
            None => None,
        }
    }

    fn pause(&self, sub: &Arc<str>, d: Duration) {
        let until = Instant::now() + d.min(MAX_PAUSE);
        let mut p = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        let e = p.entry(sub.clone()).or_insert(until);
        *e = (*e).max(until);
    }

    async fn finish(&self, job: &Job, how: Finish) -> Option<Finished> {
        match self.queue.finish(job, how).await {
            Ok(f) => Some(f),
            Err(e) => {
                // The job stays pending and is reclaimed after the visibility timeout.
                tracing::warn!(error = %e, subscriber = %job.subscriber, task_id = %job.task_id, "could not finish a webhook delivery; it will be retried");
                None
            }
        }
    }

    /// Put the job's lane in the retry set for `wait`, with `attempts` made so far.
    async fn retry_in(&self, job: &Job, wait: Duration, attempts: u32) {
        let due_ms = crate::protocol::time::now_ms() + wait.as_millis() as i64;
        self.finish(job, Finish::Retry { due_ms, attempts }).await;
    }

    /// The warning for a failed attempt that will be retried, rate-limited per subscriber:
    /// who, which task, which attempt, the status or the error, and when the next try is.
    /// Never the subscriber's URL, secret or auth header, never the payload.
    fn log_failure(&self, job: &Job, attempt_no: u32, attempt: &Attempt, wait: Duration) {
        let allowed = self
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .allow(&job.subscriber, Instant::now());
        let Some(suppressed) = allowed else { return };
        let next = chrono::Utc::now()
            + chrono::Duration::milliseconds(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX));
        let error = attempt.status.is_none().then_some(attempt.summary.as_str());
        tracing::warn!(
            subscriber = %job.subscriber,
            task_id = %job.task_id,
            attempt = attempt_no,
            status = attempt.status,
            error,
            retry_in_ms = wait.as_millis() as u64,
            next_attempt_at = %crate::protocol::time::format(next),
            suppressed,
            "webhook delivery failed; will retry"
        );
    }

    fn count(&self, (sub, agent): (&str, &str), outcome: &str) {
        self.metrics
            .webhook_deliveries
            .with_label_values(&[sub, agent, outcome])
            .inc();
    }

    /// Where a job goes: a configured subscriber, or an A2A push config (looked up in the
    /// ledger now, so a deleted config gets nothing more). `Err`: the job was finished here.
    async fn target(&self, job: &Job, sender: &Sender) -> Result<Target, ()> {
        let labels = labels(job);
        let Some(id) = crate::protocol::a2a::push::lane_config(&job.subscriber) else {
            return match sender.subscriber(&job.subscriber).cloned() {
                Some(sub) => Ok(Target::Subscriber(sub)),
                None => {
                    // Queued for a subscriber this process has no config for: a replica of
                    // another config version (a rolling deploy) or a subscriber removed since.
                    // Not an attempt, and not this replica's call to disable it: look again
                    // in a minute.
                    self.count(labels, "unconfigured");
                    self.retry_in(job, UNCONFIGURED_WAIT, job.attempts).await;
                    Err(())
                }
            };
        };
        let Some(directory) = &self.push else {
            self.count(labels, "unconfigured");
            self.retry_in(job, UNCONFIGURED_WAIT, job.attempts).await;
            return Err(());
        };
        match directory.config(&job.task_id, id).await {
            Ok(Some(found)) => Ok(Target::Push(Box::new(found))),
            Ok(None) => {
                // Deleted by its client, or gone with its task: nothing more is sent to it.
                self.finish(job, Finish::Delivered).await;
                self.count(labels, "config_gone");
                Err(())
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading a push config failed; retrying");
                self.retry_in(job, NEWER_FORMAT_WAIT, job.attempts).await;
                Err(())
            }
        }
    }

    /// One attempt at a job's first message, and its one atomic finish.
    async fn deliver(&self, job: Job, taken: Instant) {
        let labels = labels(&job);
        if job.unreadable {
            tracing::error!(subscriber = %job.subscriber, task_id = %job.task_id, "unreadable webhook lane entry moved to the dead letters");
            self.count(labels, "dead");
            let error = "unreadable lane entry".to_owned();
            self.finish(
                &job,
                Finish::Dead {
                    attempts: job.attempts,
                    error,
                },
            )
            .await;
            return;
        }
        let Some(msg) = job.message.as_ref() else {
            // The lane is empty (its messages were delivered by a worker that was presumed
            // dead, or it was lost with a Redis restart): retire the token.
            self.finish(&job, Finish::Delivered).await;
            return;
        };
        let sub_name = job.subscriber.as_ref();
        if msg.version > super::queue::FORMAT {
            // Written by a newer version (a rolling upgrade under way): its format may mean
            // more than this version reads. Not an attempt: left for a replica that knows it.
            self.count(labels, "newer_format");
            self.retry_in(&job, NEWER_FORMAT_WAIT, job.attempts).await;
            return;
        }
        let sender = self.sender.load_full();
        let Ok(target) = self.target(&job, &sender).await else {
            return;
        };
        if matches!(target, Target::Subscriber(_)) && self.is_disabled(sub_name) {
            self.finish(&job, Finish::Park { reason: None }).await;
            self.count(labels, "parked");
            return;
        }
        if let Some(until) = self.paused_until(&job.subscriber) {
            // Not an attempt: the lane waits with the rest of the subscriber's.
            let wait = until.saturating_duration_since(Instant::now());
            self.retry_in(&job, wait, job.attempts).await;
            return;
        }
        let share = match &target {
            Target::Subscriber(_) => Share::Subscriber(job.subscriber.clone()),
            Target::Push(t) => t.owner.clone().map_or(Share::Anonymous, Share::Client),
        };
        // Held until the attempt is finished: its client's place among the attempts in flight.
        let _place = match self.shares.take(share, Instant::now()) {
            Ok(place) => place,
            Err(full) => {
                // Not an attempt: the job waits for its own client's share, and its slot
                // serves someone else's delivery now.
                self.retry_in(&job, full.retry_in, job.attempts).await;
                self.count(labels, "deferred");
                return;
            }
        };
        if taken.elapsed() + self.timeout + Duration::from_secs(1) > self.visibility {
            // Too late to send within the visibility timeout: another worker may be taking the
            // job over now. Leave it to whoever holds it then.
            return;
        }
        let span = self.telemetry.as_ref().map(|t| {
            t.span_from_stored(
                msg.trace.as_deref(),
                "webhook delivery",
                SpanKind::Client,
                vec![
                    KeyValue::new(semconv::HTTP_REQUEST_METHOD, "POST"),
                    KeyValue::new(telemetry::SUBSCRIBER, labels.0.to_owned()),
                    KeyValue::new(telemetry::TASK_ID, job.task_id.to_string()),
                    KeyValue::new(telemetry::ATTEMPT, i64::from(job.attempts) + 1),
                    KeyValue::new(telemetry::MESSAGE_ID, msg.msg_id.clone()),
                ],
            )
        });
        let attempt = match &target {
            Target::Subscriber(sub) => sender.send(sub, msg, span.as_deref()).await,
            Target::Push(t) => sender.send_push(&t.config, msg, span.as_deref()).await,
        };
        if let Some(span) = span {
            match attempt.status {
                Some(status) => telemetry::answered(&span, status, false),
                None => span.fail(attempt.summary.clone()),
            }
        }
        self.metrics
            .webhook_attempts
            .with_label_values(&[labels.0, labels.1, attempt.class])
            .inc();
        let attempts = job.attempts.saturating_add(1);
        match classify(attempt.status) {
            Outcome::Delivered => {
                let done = self.finish(&job, Finish::Delivered).await;
                if done == Some(Finished::Stale) {
                    // Another worker took this job over and has sent or will send it too.
                    self.count(labels, "duplicate");
                } else {
                    self.count(labels, "delivered");
                }
                let waited = crate::protocol::time::now_ms() - msg.enqueued_ms;
                self.metrics
                    .webhook_latency
                    .with_label_values(&[labels.0, labels.1])
                    .observe(waited.max(0) as f64 / 1000.0);
            }
            Outcome::Disable => match (&target, &self.push) {
                (Target::Push(t), Some(directory)) => {
                    let cfg = &t.config;
                    // A push config whose receiver is gone is removed from its task: the
                    // message goes to the dead letters, and nothing more is queued for it.
                    tracing::warn!(agent = labels.1, task_id = %job.task_id, config_id = %cfg.id, "push config receiver answered 410 Gone: config removed");
                    if let Err(e) = directory.remove(&job.task_id, &cfg.id).await {
                        tracing::warn!(error = %e, "could not remove a push config after a 410");
                    }
                    let error = "HTTP 410: push config removed".to_owned();
                    self.finish(&job, Finish::Dead { attempts, error }).await;
                    self.count(labels, "disabled");
                }
                _ => {
                    tracing::warn!(subscriber = sub_name, "subscriber answered 410 Gone: disabled until re-enabled (POST /admin/subscribers/{sub_name}/enable)");
                    self.disabled
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(sub_name.to_owned());
                    let reason = format!("410 Gone at {}", crate::protocol::time::now());
                    self.finish(
                        &job,
                        Finish::Park {
                            reason: Some(reason),
                        },
                    )
                    .await;
                    // Counted once it took effect, so the counter never runs ahead of the queue.
                    self.count(labels, "disabled");
                }
            },
            outcome @ (Outcome::Retry { .. } | Outcome::Failed) => {
                let rand = uuid::Uuid::new_v4().as_u64_pair().0;
                match self
                    .schedule
                    .next_delay(attempts, attempt.retry_after, rand)
                {
                    Some(wait) => {
                        // A throttling subscriber pauses its other lanes; a push config's lane
                        // is its own (ids are the clients', shared by unrelated configs).
                        let push = matches!(target, Target::Push(_));
                        if !push && matches!(outcome, Outcome::Retry { throttle: true }) {
                            let first = self.schedule.delays().first().copied();
                            let pause = attempt.retry_after.or(first).unwrap_or(wait);
                            self.pause(&job.subscriber, pause.min(MAX_DELAY));
                        }
                        self.log_failure(&job, attempts, &attempt, wait);
                        self.retry_in(&job, wait, attempts).await;
                        self.count(labels, "retry");
                    }
                    None => {
                        tracing::warn!(subscriber = labels.0, agent = labels.1, task_id = %job.task_id, msg_id = %msg.msg_id, attempts, error = %attempt.summary, "webhook delivery exhausted its attempts: dead letter");
                        self.finish(
                            &job,
                            Finish::Dead {
                                attempts,
                                error: attempt.summary,
                            },
                        )
                        .await;
                        self.count(labels, "dead");
                    }
                }
            }
        }
    }
}

/// Where one job is sent.
enum Target {
    /// A configured subscriber.
    Subscriber(Arc<super::send::Subscriber>),
    /// An A2A push config of the job's task, with the task's owner.
    Push(Box<PushTarget>),
}

/// The metric labels of a job: its subscriber (`a2a_push` for every A2A push config: one
/// series, never one per config) and the agent of an official A2A task (empty otherwise).
fn labels(job: &Job) -> (&str, &str) {
    let sub = if crate::protocol::a2a::push::lane_config(&job.subscriber).is_some() {
        crate::protocol::a2a::push::SUBSCRIBER
    } else {
        &job.subscriber
    };
    (sub, super::push::agent_of(&job.task_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_lines_are_limited_per_subscriber_and_count_what_they_left_out() {
        let mut log = FailureLog::default();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let t0 = Instant::now();
        assert_eq!(log.allow(&a, t0), Some(0));
        // Within the window: left out, counted; another subscriber is not held back.
        assert_eq!(log.allow(&a, t0 + Duration::from_millis(100)), None);
        assert_eq!(log.allow(&a, t0 + Duration::from_millis(400)), None);
        assert_eq!(log.allow(&b, t0 + Duration::from_millis(400)), Some(0));
        // Past it: written, with the two left out.
        assert_eq!(log.allow(&a, t0 + FAILURE_LOG_EVERY), Some(2));
        assert_eq!(log.allow(&a, t0 + FAILURE_LOG_EVERY * 2), Some(0));
        // One lane retried on the shortest schedule (1 s less 20 % jitter) is never held back.
        assert!(FAILURE_LOG_EVERY < Duration::from_millis(800));
    }

    #[test]
    fn the_failure_log_stays_bounded() {
        let mut log = FailureLog::default();
        let t0 = Instant::now();
        for i in 0..FAILURE_LOG_MAX * 3 {
            let sub: Arc<str> = Arc::from(format!("sub-{i}"));
            assert_eq!(log.allow(&sub, t0), Some(0));
            assert!(log.last.len() <= FAILURE_LOG_MAX);
        }
    }
}
