//! A task's A2A push configs in the in-process ledger: kept in the task's own entry, so they
//! live, expire and are evicted with it, and are read under the same shard lock that records
//! a change (the outbox queues each change for them in that step). Their bytes count in the
//! ledger's byte budget.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::{lock, MemoryLedger};
use crate::ledger::{PushAudience, PushPut};

/// What a task holds for push: the clients' configs, and the agent's token.
#[derive(Debug, Default)]
pub struct TaskPush {
    /// `(id, stored config)`, oldest first.
    configs: Vec<(Arc<str>, Bytes)>,
    /// The token the agent sends with its own pushes of the task (`X-A2A-Notification-Token`).
    token: Option<Box<str>>,
}

impl TaskPush {
    pub(super) fn bytes(&self) -> usize {
        self.configs
            .iter()
            .map(|(id, c)| id.len() + c.len() + 32)
            .sum::<usize>()
            + self.token.as_ref().map_or(0, |t| t.len())
    }
}

/// The lane subscriber names of a task's configs (empty for none).
pub(super) fn lanes(push: Option<&TaskPush>) -> Vec<Arc<str>> {
    push.map(|p| {
        p.configs
            .iter()
            .map(|(id, _)| Arc::from(crate::protocol::a2a::push::lane(id)))
            .collect()
    })
    .unwrap_or_default()
}

impl MemoryLedger {
    /// Change a recorded task's push state with `f` under its shard's lock, keeping the byte
    /// count true; `None` when the task is not held.
    fn with_push<T>(&self, task_id: &str, f: impl FnOnce(&mut TaskPush) -> T) -> Option<T> {
        let mut s = lock(&self.shards[self.shard_of(task_id)]);
        let e = s.tasks.get_mut(task_id)?;
        let push = e.push.get_or_insert_with(Box::default);
        let before = push.bytes();
        let out = f(push);
        let after = push.bytes();
        if push.configs.is_empty() && push.token.is_none() {
            e.push = None;
        }
        if after >= before {
            self.bytes.fetch_add(after - before, Ordering::Relaxed);
        } else {
            self.bytes.fetch_sub(before - after, Ordering::Relaxed);
        }
        Some(out)
    }

    /// The configs and the owner of a task, under one lock.
    pub(super) fn push_audience_now(&self, task_id: &str) -> PushAudience {
        let s = lock(&self.shards[self.shard_of(task_id)]);
        let Some(e) = s.tasks.get(task_id) else {
            return PushAudience::default();
        };
        PushAudience {
            configs: e
                .push
                .as_ref()
                .map(|p| p.configs.iter().map(|(_, c)| c.clone()).collect())
                .unwrap_or_default(),
            owner: e.record.owner.clone(),
        }
    }

    pub(super) fn push_configs_now(&self, task_id: &str) -> Vec<Bytes> {
        let s = lock(&self.shards[self.shard_of(task_id)]);
        s.tasks
            .get(task_id)
            .and_then(|e| e.push.as_ref())
            .map(|p| p.configs.iter().map(|(_, c)| c.clone()).collect())
            .unwrap_or_default()
    }

    pub(super) fn put_push_now(
        &self,
        task_id: &str,
        id: &str,
        config: Bytes,
        max: usize,
    ) -> PushPut {
        // Not a slice of a request buffer: held as long as the task.
        let config = Bytes::copy_from_slice(&config);
        self.with_push(task_id, |p| {
            if let Some(slot) = p.configs.iter_mut().find(|(i, _)| &**i == id) {
                slot.1 = config;
                return PushPut::Stored { created: false };
            }
            if p.configs.len() >= max {
                return PushPut::Full;
            }
            p.configs.push((Arc::from(id), config));
            PushPut::Stored { created: true }
        })
        .unwrap_or(PushPut::NoTask)
    }

    pub(super) fn push_current_now(&self, task_id: &str, id: &str) -> bool {
        let Some((_, q)) = self.outbox.as_ref() else {
            return false;
        };
        let s = lock(&self.shards[self.shard_of(task_id)]);
        let Some(e) = s.tasks.get(task_id) else {
            return false;
        };
        if !e
            .push
            .as_ref()
            .is_some_and(|p| p.configs.iter().any(|(i, _)| &**i == id))
        {
            return false;
        }
        let message = crate::webhook::queue::Message {
            msg_id: format!("msg_{}", uuid::Uuid::new_v4().simple()),
            enqueued_ms: crate::protocol::time::now_ms(),
            payload: crate::protocol::a2a::push::task_body(&e.record.task).into(),
            version: 1,
            trace: None,
        };
        let lane: Arc<str> = Arc::from(crate::protocol::a2a::push::lane(id));
        // Under the shard lock, as every change's deliveries are queued: in order with them.
        let client = e.record.owner.as_deref().unwrap_or("");
        q.offer_change(task_id, None, Some((&[lane][..], message, client))) == Some(0)
    }

    pub(super) fn delete_push_now(&self, task_id: &str, id: &str) -> bool {
        self.with_push(task_id, |p| {
            let before = p.configs.len();
            p.configs.retain(|(i, _)| &**i != id);
            p.configs.len() != before
        })
        .unwrap_or(false)
    }

    pub(super) fn push_token_now(&self, task_id: &str, fresh: Option<&str>) -> Option<String> {
        let standing = {
            let s = lock(&self.shards[self.shard_of(task_id)]);
            let e = s.tasks.get(task_id)?;
            e.push
                .as_ref()
                .and_then(|p| p.token.as_deref().map(str::to_owned))
        };
        match (standing, fresh) {
            (Some(t), _) => Some(t),
            (None, None) => None,
            (None, Some(f)) => self.with_push(task_id, |p| {
                p.token.get_or_insert_with(|| f.into()).to_string()
            }),
        }
    }
}
