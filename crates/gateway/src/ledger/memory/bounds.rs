//! The in-process ledger's bounds: terminal tasks expire after their retention, and room is
//! made for a new task by evicting the oldest final task first, then a live task unchanged for
//! the retention (stale); a fresh live task is never evicted.

use std::time::Instant;

use super::*;

/// The eviction counters, by reason (`a2a_gateway_ledger_evictions_total{reason}`).
#[derive(Clone)]
pub struct Evictions {
    /// A final task, the oldest first.
    pub final_: prometheus::IntCounter,
    /// A live task unchanged for the retention.
    pub stale: prometheus::IntCounter,
}

impl Evictions {
    /// The two series of `vec` (labelled `reason`).
    pub fn of(vec: &prometheus::IntCounterVec) -> Evictions {
        Evictions {
            final_: vec.with_label_values(&["final"]),
            stale: vec.with_label_values(&["stale"]),
        }
    }

    /// Counters registered nowhere (tests, benches, tools).
    pub fn unregistered() -> Evictions {
        let unnamed = || {
            prometheus::IntCounter::new("evictions", "unregistered")
                .unwrap_or_else(|_| unreachable!("a valid name and help"))
        };
        Evictions {
            final_: unnamed(),
            stale: unnamed(),
        }
    }
}

impl MemoryLedger {
    /// Drop terminal tasks past their retention (cheap: the queue is in expiry order).
    pub(super) fn expire(&self, s: &mut Shard, now: Instant) {
        while let Some((at, seq, _)) = s.expiry.front() {
            if *at > now {
                break;
            }
            let (seq, key) = (*seq, s.expiry.pop_front().map(|x| x.2));
            if let Some(key) = key {
                if s.tasks.get(&key).is_some_and(|e| e.seq == seq) {
                    self.remove(s, &key);
                }
            }
        }
        // Artifact entries are never refreshed, so insertion order is expiry order.
        while let Some(k) = s.artifact_order.front() {
            if s.artifacts.get(k).is_some_and(|(_, at)| *at > now) {
                break;
            }
            if let Some(k) = s.artifact_order.pop_front() {
                s.artifacts.remove(&k);
            }
        }
    }

    /// Whether a task of `size` bytes fits, after evicting final then stale tasks as needed.
    pub(super) fn make_room(&self, size: usize, now: Instant, now_ms: i64) -> bool {
        self.room_for(1, size, now, now_ms)
    }

    /// Whether a held task's document may grow by `grown` bytes, after evicting final then
    /// stale tasks as needed (as [`MemoryLedger::make_room`], the count aside): a task that
    /// grows (up to `max_task_document_bytes` + `max_artifact_bytes_per_task`, by streamed
    /// artifacts) must not take the ledger past `max_ledger_bytes` where room can be made.
    pub(super) fn make_room_to_grow(&self, grown: usize, now: Instant, now_ms: i64) -> bool {
        self.room_for(0, grown, now, now_ms)
    }

    /// Whether `tasks` more tasks and `size` more bytes fit, evicting as needed.
    fn room_for(&self, tasks: usize, size: usize, now: Instant, now_ms: i64) -> bool {
        for _ in 0..MAX_EVICTIONS_PER_TASK {
            let full = (tasks > 0 && self.held.load(Ordering::Relaxed) + tasks > self.max_tasks)
                || self.bytes.load(Ordering::Relaxed).saturating_add(size) > self.max_bytes;
            if !full {
                return true;
            }
            if !self.evict_one(now, now_ms) {
                return false;
            }
        }
        false
    }

    /// Evict the ledger's oldest final task, or failing that its stalest live task unchanged
    /// for the retention; false if there is neither. Each shard is locked alone, in turn.
    pub(super) fn evict_one(&self, now: Instant, now_ms: i64) -> bool {
        let stale_before = now_ms.saturating_sub(millis(self.retention));
        if self.evict_by(
            now,
            |s| s.final_front(),
            |s| {
                s.final_front()
                    .and_then(|_| s.expiry.pop_front())
                    .map(|x| x.2)
            },
        ) {
            self.evictions.final_.inc();
            return true;
        }
        if self.evict_by(
            now,
            |s| s.stale_front(stale_before),
            |s| {
                s.stale_front(stale_before)
                    .and_then(|_| s.changed.pop_front())
                    .map(|x| x.2)
            },
        ) {
            self.evictions.stale.inc();
            return true;
        }
        false
    }

    /// Remove the task whose `front` is least over all shards (`pop` takes it off its queue).
    pub(super) fn evict_by<K: Ord>(
        &self,
        now: Instant,
        front: impl Fn(&mut Shard) -> Option<K>,
        pop: impl Fn(&mut Shard) -> Option<Arc<str>>,
    ) -> bool {
        // A few tries: another thread may take the front between the scan and the removal.
        for _ in 0..4 {
            let mut best: Option<(K, usize)> = None;
            for (i, shard) in self.shards.iter().enumerate() {
                let mut s = lock(shard);
                self.expire(&mut s, now);
                if let Some(at) = front(&mut s) {
                    if best.as_ref().is_none_or(|(b, _)| at < *b) {
                        best = Some((at, i));
                    }
                }
            }
            let Some((_, i)) = best else { return false };
            let mut s = lock(&self.shards[i]);
            if let Some(key) = pop(&mut s) {
                self.remove(&mut s, &key);
                return true;
            }
        }
        false
    }
}

impl Shard {
    /// When the oldest final task expires (the order they became final), dropping queue items
    /// of removed tasks on the way.
    pub(super) fn final_front(&mut self) -> Option<Instant> {
        while let Some((at, seq, key)) = self.expiry.front() {
            if self.tasks.get(key).is_some_and(|e| e.seq == *seq) {
                return Some(*at);
            }
            self.expiry.pop_front();
        }
        None
    }

    /// When the stalest live task last changed, if before `before_ms`, dropping queue items
    /// of removed, changed or final tasks on the way.
    pub(super) fn stale_front(&mut self, before_ms: i64) -> Option<i64> {
        while let Some((at, seq, key)) = self.changed.front() {
            let current = self.tasks.get(key).is_some_and(|e| {
                e.seq == *seq && e.changed_ms == *at && !e.record.head.status.is_terminal()
            });
            if current {
                return (*at < before_ms).then_some(*at);
            }
            self.changed.pop_front();
        }
        None
    }

    /// Queue items of removed or changed tasks linger until popped; keep the queues within a
    /// constant factor of the tasks held so churn cannot grow them without bound.
    pub(super) fn compact(&mut self, cap: usize) {
        let limit = 2 * self.tasks.len().min(cap) + 16;
        if self.changed.len() > limit {
            let tasks = &self.tasks;
            self.changed.retain(|(at, seq, k)| {
                tasks.get(k).is_some_and(|e| {
                    e.seq == *seq && e.changed_ms == *at && !e.record.head.status.is_terminal()
                })
            });
        }
        if self.expiry.len() > limit {
            let tasks = &self.tasks;
            self.expiry
                .retain(|(_, seq, k)| tasks.get(k).is_some_and(|e| e.seq == *seq));
        }
    }
}
