//! The in-process ledger's sends (`TaskLedger::put_send`): a blocking message's inline push
//! config, held until the agent's first push names the task, bounded in count and expiring
//! with the send.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::ledger::KeyMap;

/// One send: its entry, the task it is bound to (once a push named one), when it expires.
struct Send {
    entry: Bytes,
    task: Option<Arc<str>>,
    expires: Instant,
}

/// The sends held, by id, and their ids in the order they expire (every send lives at most
/// its ttl; an id ended early leaves its place in the order, skipped when reached).
#[derive(Default)]
struct Held {
    by_id: KeyMap<Arc<str>, Send>,
    order: VecDeque<(Instant, Arc<str>)>,
}

/// The sends (see the module doc).
pub(super) struct Sends {
    held: Mutex<Held>,
    max: usize,
}

impl Sends {
    /// At most `max` sends at once.
    pub(super) fn new(max: usize) -> Sends {
        Sends {
            held: Mutex::new(Held::default()),
            max: max.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drop what expired by `now` (and the order's places of sends ended early).
    fn expire(h: &mut Held, now: Instant) {
        while let Some((at, id)) = h.order.front() {
            let gone = match h.by_id.get(id) {
                None => true,
                Some(s) if s.expires <= now => {
                    h.by_id.remove(id);
                    true
                }
                // Kept past this place: a send of the same id put again later.
                Some(_) => *at <= now,
            };
            if !gone {
                break;
            }
            h.order.pop_front();
        }
    }

    pub(super) fn put(&self, id: &str, entry: Bytes, ttl: Duration) -> bool {
        let now = Instant::now();
        let mut h = self.lock();
        Self::expire(&mut h, now);
        if h.order.len() >= self.max.saturating_mul(2) {
            // Places of sends ended early, behind a live one: dropped all at once, after at
            // least `max` ends (so at most one place's work per send, over time).
            let Held { by_id, order } = &mut *h;
            order.retain(|(at, id)| by_id.get(id).is_some_and(|s| s.expires == *at));
        }
        if h.by_id.len() >= self.max {
            return false;
        }
        let id: Arc<str> = id.into();
        let expires = now + ttl;
        h.order.push_back((expires, id.clone()));
        h.by_id.insert(
            id,
            Send {
                entry: Bytes::copy_from_slice(&entry),
                task: None,
                expires,
            },
        );
        true
    }

    pub(super) fn bind(&self, id: &str, task_id: &str) -> Option<(Bytes, String)> {
        let now = Instant::now();
        let mut h = self.lock();
        Self::expire(&mut h, now);
        let s = h.by_id.get_mut(id).filter(|s| s.expires > now)?;
        let bound = s.task.get_or_insert_with(|| task_id.into());
        Some((s.entry.clone(), bound.to_string()))
    }

    pub(super) fn end(&self, id: &str) {
        let mut h = self.lock();
        h.by_id.remove(id);
        Self::expire(&mut h, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_binding_wins_and_an_ended_send_binds_nothing() {
        let s = Sends::new(8);
        assert!(s.put("s1", Bytes::from_static(b"e"), Duration::from_secs(60)));
        assert_eq!(
            s.bind("s1", "t1"),
            Some((Bytes::from_static(b"e"), "t1".into()))
        );
        // Another task cannot take it; the same task again is told it is its own.
        assert_eq!(s.bind("s1", "t2").map(|b| b.1), Some("t1".into()));
        assert_eq!(s.bind("s1", "t1").map(|b| b.1), Some("t1".into()));
        s.end("s1");
        assert_eq!(s.bind("s1", "t1"), None);
        assert_eq!(s.bind("never", "t1"), None);
    }

    #[test]
    fn sends_expire_and_are_bounded() {
        let s = Sends::new(2);
        assert!(s.put("a", Bytes::new(), Duration::from_millis(0)));
        assert!(s.put("b", Bytes::new(), Duration::from_secs(60)));
        // "a" expired: its room is free again.
        assert!(s.put("c", Bytes::new(), Duration::from_secs(60)));
        assert_eq!(s.bind("a", "t"), None);
        assert!(!s.put("d", Bytes::new(), Duration::from_secs(60)), "full");
        s.end("b");
        assert!(s.put("d", Bytes::new(), Duration::from_secs(60)));
        // Ending and putting again many times never refuses for want of room, nor grows the
        // order past its bound.
        s.end("d");
        for i in 0..100 {
            let id = format!("x{i}");
            assert!(s.put(&id, Bytes::new(), Duration::from_secs(60)), "put {i}");
            s.end(&id);
            assert!(s.lock().order.len() <= 4);
        }
    }
}
