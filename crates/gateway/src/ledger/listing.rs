//! Listing tasks from the ledger: what A2A's ListTasks, `/a2a` and the gateway's `GET /tasks`
//! ask, answered the same way by every backend. No I/O here: the query, the order, the merge of
//! the backends' partial answers, and the page token.
//!
//! - **Order.** Status timestamp (`updated_ms`) descending, then agent, then ledger key
//!   ascending: a total order, so a page ends at one exact [`Position`].
//! - **Index.** Each backend keeps, per (scope, agent, status), the tasks ordered by status
//!   timestamp, where a scope is every task or one owner's: a page of any scope, agent set and
//!   status set reads at most `limit` entries of each index it merges, and counts without a scan.
//!   A `contextId` filter is checked per task (a context is one conversation: few tasks).
//! - **Keyset pages.** A token is the position of the page's last task, with a digest of the
//!   caller and the filters ([`Token`]): the next page starts strictly after it, so a task that
//!   does not change while a client pages is listed exactly once, on any replica. A task that
//!   changes while a client pages moves to the front of the order, and may be listed again or
//!   not at all by the pages still to come: the price of ordering by status time.

use std::cmp::Ordering;
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::Record;
use crate::protocol::task::Status;

/// The page size when the client names none.
pub const DEFAULT_PAGE: usize = 50;
/// The largest page a client may ask for.
pub const MAX_PAGE: usize = 100;

/// Whose tasks a listing holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every task (a caller with `all_tasks`, or no clients configured).
    All,
    /// The tasks this client created.
    Owner(Arc<str>),
}

/// A place in the listing order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The task's status timestamp, ms since the epoch.
    pub updated_ms: i64,
    /// Its agent's route name.
    pub agent: Arc<str>,
    /// Its ledger key.
    pub key: Arc<str>,
}

impl Ord for Position {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .updated_ms
            .cmp(&self.updated_ms)
            .then_with(|| self.agent.cmp(&other.agent))
            .then_with(|| self.key.cmp(&other.key))
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Where, in one index of `agent`, the tasks after `after` begin (the index holds one agent's
/// tasks, by status timestamp descending, then key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start<'a> {
    /// From the first task.
    First,
    /// From the first task older than this timestamp (the agent sorts before the cursor's).
    Older(i64),
    /// From the first task of this timestamp or older (the agent sorts after the cursor's).
    AtOrOlder(i64),
    /// From the first task after (timestamp, key) (the cursor's own agent).
    After(i64, &'a str),
}

impl<'a> Start<'a> {
    /// Where the index of `agent` resumes after `after`.
    pub fn of(agent: &str, after: Option<&'a Position>) -> Start<'a> {
        match after {
            None => Start::First,
            Some(p) => match agent.cmp(&p.agent) {
                Ordering::Less => Start::Older(p.updated_ms),
                Ordering::Greater => Start::AtOrOlder(p.updated_ms),
                Ordering::Equal => Start::After(p.updated_ms, &p.key),
            },
        }
    }
}

/// What to list.
#[derive(Debug, Clone)]
pub struct Query {
    /// Whose tasks.
    pub scope: Scope,
    /// The agents whose tasks are listed, each once.
    pub agents: Vec<Arc<str>>,
    /// The states listed (every state when the client names none).
    pub statuses: Vec<Status>,
    /// Only tasks whose status timestamp is at or after this (A2A's `statusTimestampAfter`).
    pub since_ms: Option<i64>,
    /// Only tasks of this A2A context.
    pub context: Option<Arc<str>>,
    /// Resume after this position (the page token's).
    pub after: Option<Position>,
    /// The page size, 1 to [`MAX_PAGE`].
    pub limit: usize,
}

impl Query {
    /// Whether a task of this status timestamp is within `since_ms`.
    pub fn within(&self, updated_ms: i64) -> bool {
        self.since_ms.is_none_or(|s| updated_ms >= s)
    }
}

/// One listed task.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its ledger key.
    pub key: Arc<str>,
    /// Its record, as read for this page.
    pub record: Record,
}

/// A page of a listing.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The tasks, in the listing order.
    pub tasks: Vec<Listed>,
    /// How many tasks the query matches, over every page.
    pub total: u64,
    /// Where the next page resumes; `None` on the last page.
    pub next: Option<Position>,
}

/// The first `limit` of several lists already in the listing order, and whether any is left
/// after them (each list holds at least `limit + 1` entries, or every entry it has).
pub fn merge<T>(parts: Vec<Vec<(Position, T)>>, limit: usize) -> (Vec<(Position, T)>, bool) {
    let mut all: Vec<(Position, T)> = parts.into_iter().flatten().collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let more = all.len() > limit;
    all.truncate(limit);
    (all, more)
}

/// The contextId of an official A2A task document (a ledger key holding `/`); `None` for a
/// Clawpedia task or a document without one.
pub fn context_of(key: &str, doc: &[u8]) -> Option<Arc<str>> {
    #[derive(serde::Deserialize)]
    struct Doc<'a> {
        #[serde(rename = "contextId", borrow, default)]
        context_id: Option<std::borrow::Cow<'a, str>>,
    }
    if !key.contains('/') {
        return None;
    }
    let doc: Doc<'_> = serde_json::from_slice(doc).ok()?;
    doc.context_id.filter(|c| !c.is_empty()).map(|c| c.into())
}

/// What a page token binds: the listing it continues (the route's kind, the caller and the
/// filters, in a fixed order). Two listings differing in any of them cannot share a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token([u8; 16]);

impl Token {
    /// The digest of a listing's parts, each length-prefixed so that no two lists of parts
    /// collide.
    pub fn of(parts: &[&str]) -> Token {
        let mut h = Sha256::new();
        for p in parts {
            h.update((p.len() as u64).to_be_bytes());
            h.update(p.as_bytes());
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&h.finalize()[..16]);
        Token(out)
    }

    /// The opaque token of `position` in this listing: base64url of the digest, the timestamp,
    /// then the agent and the key, each length-prefixed.
    pub fn encode(&self, position: &Position) -> String {
        let mut raw = Vec::with_capacity(32 + position.agent.len() + position.key.len());
        raw.push(1u8);
        raw.extend_from_slice(&self.0);
        raw.extend_from_slice(&position.updated_ms.to_be_bytes());
        for s in [&*position.agent, &*position.key] {
            raw.extend_from_slice(&(s.len() as u16).to_be_bytes());
            raw.extend_from_slice(s.as_bytes());
        }
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// The position a token of this listing names; `None` for a token of another listing (other
    /// filters, another caller), of another version, or no token at all.
    pub fn decode(&self, token: &str) -> Option<Position> {
        if token.len() > 2048 {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(token).ok()?;
        let (version, rest) = raw.split_first()?;
        if *version != 1 || rest.len() < 24 {
            return None;
        }
        let (digest, rest) = rest.split_at(16);
        // Not a secret, but compared in constant time all the same: nothing to learn from timing.
        if !bool::from(subtle::ConstantTimeEq::ct_eq(digest, &self.0[..])) {
            return None;
        }
        let (ms, mut rest) = rest.split_at(8);
        let updated_ms = i64::from_be_bytes(ms.try_into().ok()?);
        let mut take = || -> Option<Arc<str>> {
            if rest.len() < 2 {
                return None;
            }
            let (n, tail) = rest.split_at(2);
            let n = usize::from(u16::from_be_bytes([n[0], n[1]]));
            if tail.len() < n {
                return None;
            }
            let (s, tail) = tail.split_at(n);
            rest = tail;
            std::str::from_utf8(s).ok().map(Arc::from)
        };
        let agent = take()?;
        let key = take()?;
        if !rest.is_empty() || agent.is_empty() || key.is_empty() {
            return None;
        }
        Some(Position {
            updated_ms,
            agent,
            key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(ms: i64, agent: &str, key: &str) -> Position {
        Position {
            updated_ms: ms,
            agent: agent.into(),
            key: key.into(),
        }
    }

    #[test]
    fn newest_first_then_agent_then_key() {
        let mut v = vec![
            p(1, "a", "x"),
            p(2, "b", "y"),
            p(2, "a", "z"),
            p(2, "a", "y"),
        ];
        v.sort();
        assert_eq!(
            v,
            vec![
                p(2, "a", "y"),
                p(2, "a", "z"),
                p(2, "b", "y"),
                p(1, "a", "x")
            ]
        );
    }

    #[test]
    fn an_index_resumes_strictly_after_the_cursor() {
        let at = p(5, "m", "k");
        assert_eq!(Start::of("a", Some(&at)), Start::Older(5));
        assert_eq!(Start::of("z", Some(&at)), Start::AtOrOlder(5));
        assert_eq!(Start::of("m", Some(&at)), Start::After(5, "k"));
        assert_eq!(Start::of("m", None), Start::First);
    }

    #[test]
    fn merging_keeps_the_order_and_says_whether_more_are_left() {
        let a = vec![(p(9, "a", "1"), ()), (p(3, "a", "2"), ())];
        let b = vec![(p(5, "b", "3"), ())];
        let (page, more) = merge(vec![a.clone(), b.clone()], 2);
        let keys: Vec<_> = page.iter().map(|(p, _)| &*p.key).collect();
        assert_eq!(keys, ["1", "3"]);
        assert!(more);
        assert!(!merge(vec![a, b], 3).1);
    }

    #[test]
    fn a_token_names_its_position_only_in_its_own_listing() {
        let mine = Token::of(&["tasks", "alice", "COMPLETED"]);
        let at = p(1_733_000_000_123, "echo", "echo/t-1");
        let t = mine.encode(&at);
        assert_eq!(mine.decode(&t), Some(at));
        assert_eq!(Token::of(&["tasks", "bob", "COMPLETED"]).decode(&t), None);
        assert_eq!(Token::of(&["tasks", "alice", ""]).decode(&t), None);
        // Parts are length-prefixed: moving a boundary is another listing.
        assert_ne!(Token::of(&["ab", "c"]), Token::of(&["a", "bc"]));
        for bad in ["", "x", "!!!!", &t[..t.len() - 2]] {
            assert_eq!(mine.decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_a2a_documents_have_a_context() {
        let doc = br#"{"id":"t","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}"#;
        assert_eq!(context_of("echo/t", doc).as_deref(), Some("c-1"));
        assert_eq!(context_of("t", doc), None);
        assert_eq!(context_of("echo/t", b"not json"), None);
    }
}
