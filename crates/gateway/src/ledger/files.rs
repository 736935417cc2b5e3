//! File bindings: an opaque id for one URL an agent named as a file, bound to the one task it
//! was named in (or, for a message outside any task, to the client it was answered to).
//!
//! An agent's file URL on its own origin never reaches a client: the gateway writes
//! `{public_url}/agents/{name}/files/{id}` in its place, and the file route fetches the URL the
//! id is bound to, for a caller that may read the task. The id is a keyed digest of what it is
//! bound to (agent, task, owner, URL) under a key of the ledger's own, so that
//!
//! - the same URL of the same task is one id however often the task is read (a task read again
//!   does not look changed to its push configs, and each binding is stored once), on every
//!   replica (the Redis ledger keeps the key in Redis);
//! - an id tells nothing of the URL (no one can try guesses of the agent's address against it),
//!   and cannot be made up for another task or URL.
//!
//! Each store keeps the bindings bounded like its other maps and expiring with their task (see
//! [`super::TaskLedger::bind_files`]); the route asks the task's record besides, so a binding
//! outliving its task serves nothing.

use std::sync::Arc;

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What URLs are bound to, for [`super::TaskLedger::bind_files`].
#[derive(Debug, Clone, Copy)]
pub struct FileScope<'a> {
    /// The agent's route name.
    pub agent: &'a str,
    /// The ledger key of the task the URLs were named in.
    pub task: Option<&'a str>,
    /// The client a message outside any task was answered to (with no task only).
    pub owner: Option<&'a str>,
    /// Whether the task is live (a final task's bindings expire with its retention).
    pub live: bool,
}

/// One binding, as [`super::TaskLedger::file`] reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRef {
    /// The agent's route name.
    pub agent: Arc<str>,
    /// The ledger key of the task, if the URL was named in one.
    pub task: Option<Arc<str>>,
    /// The client a message outside any task was answered to.
    pub owner: Option<Arc<str>>,
    /// The URL as the agent wrote it.
    pub url: Arc<str>,
}

impl FileRef {
    /// The binding of `url` under `scope`.
    pub fn of(scope: &FileScope<'_>, url: &str) -> FileRef {
        FileRef {
            agent: scope.agent.into(),
            task: scope.task.map(Into::into),
            owner: scope.owner.filter(|_| scope.task.is_none()).map(Into::into),
            url: url.into(),
        }
    }

    /// As a store keeps it: a JSON list (an agent's URL may hold any character).
    pub fn encode(&self) -> String {
        serde_json::json!([
            &*self.agent,
            self.task.as_deref(),
            self.owner.as_deref(),
            &*self.url
        ])
        .to_string()
    }

    /// Read back from [`FileRef::encode`].
    pub fn decode(s: &str) -> Option<FileRef> {
        let v: Vec<Option<String>> = serde_json::from_str(s).ok()?;
        let [Some(agent), task, owner, Some(url)] = <[Option<String>; 4]>::try_from(v).ok()? else {
            return None;
        };
        Some(FileRef {
            agent: agent.into(),
            task: task.map(Into::into),
            owner: owner.map(Into::into),
            url: url.into(),
        })
    }
}

/// Bytes of digest an id keeps: 128 bits, 22 characters of base64url.
const ID_BYTES: usize = 16;

/// The id of `r` under the ledger's `key`: HMAC-SHA256 of its parts (each length-prefixed, so
/// no two bindings write the same input), cut to [`ID_BYTES`], in base64url. Only
/// `[A-Za-z0-9_-]`: a valid id for a path segment.
pub fn file_id(key: &[u8], r: &FileRef) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        unreachable!("HMAC takes a key of any length")
    };
    for part in [
        Some(&*r.agent),
        r.task.as_deref(),
        r.owner.as_deref(),
        Some(&*r.url),
    ] {
        match part {
            Some(p) => {
                mac.update(&(p.len() as u64 + 1).to_be_bytes());
                mac.update(p.as_bytes());
            }
            None => mac.update(&0u64.to_be_bytes()),
        }
    }
    let digest = mac.finalize().into_bytes();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..ID_BYTES])
}

/// A fresh random key for the ids of a ledger.
pub fn new_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_opaque_and_bound_to_everything_they_name() {
        let key = new_key();
        let scope = FileScope {
            agent: "a",
            task: Some("a/t1"),
            owner: Some("alice"),
            live: true,
        };
        let r = FileRef::of(&scope, "http://127.0.0.1:18103/files/x");
        assert_eq!(
            r.owner, None,
            "a task's file is bound to the task, not a client"
        );
        let id = file_id(&key, &r);
        assert_eq!(
            id,
            file_id(&key, &r.clone()),
            "one URL of one task is one id"
        );
        assert_eq!(id.len(), 22);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "a path segment as it is: {id}"
        );
        assert!(!id.contains("18103"));
        let other_task = FileRef::of(
            &FileScope {
                task: Some("a/t2"),
                ..scope
            },
            &r.url,
        );
        let other_url = FileRef::of(&scope, "http://127.0.0.1:18103/files/y");
        let other_key = file_id(&new_key(), &r);
        for other in [
            file_id(&key, &other_task),
            file_id(&key, &other_url),
            other_key,
        ] {
            assert_ne!(id, other);
        }
        // Parts never run into each other: ("ab", "c") is not ("a", "bc").
        let split = |agent: &str, url: &str| FileRef {
            agent: agent.into(),
            task: None,
            owner: None,
            url: url.into(),
        };
        assert_ne!(
            file_id(&key, &split("ab", "c")),
            file_id(&key, &split("a", "bc"))
        );
        let taskless = FileRef::of(
            &FileScope {
                task: None,
                ..scope
            },
            "/f",
        );
        assert_eq!(taskless.owner.as_deref(), Some("alice"));
        for r in [r, taskless, split("a", "x\n\"y\"")] {
            assert_eq!(FileRef::decode(&r.encode()), Some(r));
        }
        assert_eq!(FileRef::decode("[\"a\"]"), None);
    }
}
