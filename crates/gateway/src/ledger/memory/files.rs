//! The in-process ledger's file bindings (`TaskLedger::bind_files`): bounded in count (as the
//! artifact index, `max_tasks`) and in bytes (a sixteenth of `max_ledger_bytes`), the oldest
//! binding given up first; a final task's expiring after the retention. A binding outliving its
//! task is harmless (the file route asks the task's record too), so eviction is the only sweep.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::ledger::files::{file_id, new_key, FileRef, FileScope};
use crate::ledger::KeyMap;

/// One binding and when it expires (`None`: with its live task, by eviction only).
struct Held {
    file: FileRef,
    expires: Option<Instant>,
}

#[derive(Default)]
struct Bound {
    by_id: KeyMap<Arc<str>, Held>,
    /// Ids in the order they were first bound: the eviction order. Each held id is here once.
    order: VecDeque<Arc<str>>,
    bytes: usize,
}

/// The bindings (see the module doc).
pub(super) struct Files {
    key: [u8; 32],
    bound: Mutex<Bound>,
    max: usize,
    /// Set by `MemoryLedger::with_byte_budget`.
    pub(super) max_bytes: usize,
}

/// What one binding costs, about: its URL, names and the map's and queue's entries.
fn size_of(id: &str, f: &FileRef) -> usize {
    id.len() * 2
        + f.agent.len()
        + f.task.as_deref().map_or(0, str::len)
        + f.owner.as_deref().map_or(0, str::len)
        + f.url.len()
        + 128
}

impl Files {
    /// At most `max` bindings, of about `max_bytes` in all.
    pub(super) fn new(max: usize, max_bytes: usize) -> Files {
        Files {
            key: new_key(),
            bound: Mutex::new(Bound::default()),
            max: max.max(1),
            max_bytes: max_bytes.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bound> {
        self.bound.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bind `urls` under `scope`; a final task's (and a message's outside a task) expire after
    /// `retention`.
    pub(super) fn bind(
        &self,
        scope: &FileScope<'_>,
        urls: &[String],
        retention: Duration,
    ) -> Vec<String> {
        let expires = (!scope.live || scope.task.is_none()).then(|| Instant::now() + retention);
        let mut ids = Vec::with_capacity(urls.len());
        let mut b = self.lock();
        for url in urls {
            let file = FileRef::of(scope, url);
            let id = file_id(&self.key, &file);
            if let Some(held) = b.by_id.get_mut(id.as_str()) {
                // Bound again (its task read again): it lives as long as the newest says.
                held.expires = match (held.expires, expires) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                ids.push(id);
                continue;
            }
            let size = size_of(&id, &file);
            while b.by_id.len() >= self.max || b.bytes + size > self.max_bytes {
                let Some(old) = b.order.pop_front() else {
                    break;
                };
                if let Some(gone) = b.by_id.remove(&old) {
                    b.bytes = b.bytes.saturating_sub(size_of(&old, &gone.file));
                }
            }
            let key: Arc<str> = id.as_str().into();
            b.order.push_back(key.clone());
            b.bytes += size;
            b.by_id.insert(key, Held { file, expires });
            ids.push(id);
        }
        ids
    }

    /// What `id` is bound to, unless it expired.
    pub(super) fn get(&self, id: &str) -> Option<FileRef> {
        let now = Instant::now();
        self.lock()
            .by_id
            .get(id)
            .filter(|h| h.expires.is_none_or(|at| at > now))
            .map(|h| h.file.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(task: &str, live: bool) -> FileScope<'_> {
        FileScope {
            agent: "a",
            task: Some(task),
            owner: None,
            live,
        }
    }

    #[test]
    fn bindings_are_bounded_oldest_first_and_a_final_tasks_expire() {
        let f = Files::new(3, usize::MAX);
        let urls: Vec<String> = (0..5).map(|i| format!("/files/{i}")).collect();
        let ids = f.bind(&scope("a/t1", true), &urls, Duration::from_secs(60));
        assert_eq!(ids.len(), 5);
        let held: Vec<bool> = ids.iter().map(|id| f.get(id).is_some()).collect();
        assert_eq!(
            held,
            [false, false, true, true, true],
            "the oldest given up"
        );
        let got = f.get(&ids[4]).expect("held");
        assert_eq!((&*got.url, got.task.as_deref()), ("/files/4", Some("a/t1")));
        // The same URL of the same task again: the same id, nothing new held.
        assert_eq!(
            f.bind(&scope("a/t1", true), &urls[4..], Duration::from_secs(60)),
            ids[4..]
        );
        assert!(f.get(&ids[2]).is_some());
        // A final task's binding expires with its retention.
        let done = f.bind(&scope("a/t2", false), &urls[..1], Duration::ZERO);
        assert_ne!(done[0], ids[0], "another task, another id");
        assert!(f.get(&done[0]).is_none(), "expired");
        // Bounded in bytes too.
        let small = Files::new(100, 600);
        let long = vec!["x".repeat(200); 1];
        let first = small.bind(&scope("a/t1", true), &long, Duration::from_secs(60));
        let second = small.bind(&scope("a/t2", true), &long, Duration::from_secs(60));
        assert!(small.get(&first[0]).is_none() && small.get(&second[0]).is_some());
    }
}
