//! Idempotency keys of creates (`Idempotency-Key`), kept beside the tasks so that every replica
//! sharing the ledger sees the same keys.
//!
//! A key lives in a scope (the agent's route name) and goes through two states: in flight (a
//! request holds it, under a random token, for a lease that ends on its own if the holder dies)
//! and done (the answer to replay, kept for `idempotency_ttl_secs`). The holder either completes
//! it with the answer or releases it when the answer is one a retry should not get again.
//! Both states remember the request's [`Fingerprint`], so a key reused for another request is
//! recognised.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::grow::{GrowTable, Placed};

/// The SHA-256 of a request body: what makes two requests under one key the same request.
pub type Fingerprint = [u8; 32];

/// The fingerprint of a request body.
pub fn fingerprint(body: &[u8]) -> Fingerprint {
    Sha256::digest(body).into()
}

/// A fingerprint written to as JSON is serialized into it (`serde_json::to_writer`): the
/// digest of the bytes [`fingerprint`] would be given, without building them.
#[derive(Default)]
pub struct Fingerprinting {
    digest: Sha256,
    len: usize,
}

impl Fingerprinting {
    /// How many bytes were written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The fingerprint of everything written.
    pub fn finish(self) -> Fingerprint {
        self.digest.finalize().into()
    }
}

impl std::io::Write for Fingerprinting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.digest.update(buf);
        self.len += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A holder's token for a claim: a random UUID, written without the formatting machinery
/// (`to_string`): every official A2A message takes one (its messageId's), and one more for each
/// context it claims.
pub fn new_token() -> String {
    uuid::Uuid::new_v4()
        .hyphenated()
        .encode_lower(&mut uuid::Uuid::encode_buffer())
        .to_owned()
}

/// An answer kept for replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The Content-Type sent with it (empty for none).
    pub content_type: String,
    /// The body.
    pub body: Bytes,
}

/// What [`crate::ledger::TaskLedger::claim_key`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key was free: it is now the caller's, in flight under its token.
    Claimed,
    /// Another request holds the key and has not finished.
    InFlight {
        /// The fingerprint of the request that holds it.
        fingerprint: Fingerprint,
    },
    /// The store holds as many keys as it may and gives none up for a new one (a store made
    /// without eviction): nothing was claimed.
    Full,
    /// A request with this key has finished: its answer.
    Done {
        /// The fingerprint of the request that was answered.
        fingerprint: Fingerprint,
        /// What it was answered.
        answer: Answer,
    },
}

enum State {
    InFlight { token: String },
    Done(Answer),
}

struct Slot {
    seq: u64,
    expires: Instant,
    fingerprint: Fingerprint,
    state: State,
}

/// What a key costs the store besides its answer: the map's slot (with the key's name) and its
/// control byte, the order's item (with its expiry); a unit test holds it to their sizes.
const SLOT_BYTES: usize = 177;

impl Slot {
    fn size(&self) -> usize {
        let answer = match &self.state {
            State::InFlight { token } => token.len(),
            State::Done(a) => a.body.len() + a.content_type.len(),
        };
        answer + SLOT_BYTES
    }
}

/// A key as the store knows it: two 64-bit hashes of its scope and its text, each under
/// random keys of this process's own, kept in place of the text.
///
/// Why: every official A2A message claims and completes its `messageId` here, and a key kept
/// as text was two allocations per message (the joined name, then its `Arc`) and a cache miss
/// at each lookup (reading the text behind the slot to compare it). A name is compared inside
/// the slot. Two keys share a name only if both hashes agree. For keys nobody picked to
/// collide that is about 2^-128 per pair. aHash is not a cryptographic hash: inputs can be
/// crafted to collide more often than chance, under any keys. What a crafted pair can do is
/// bounded: an idempotency key's scope names its client, so the pair collides only with the
/// client's own keys, and the second message is then refused as another message under a used
/// key unless the two are alike byte for byte (fingerprints are SHA-256); a context claim's
/// scope is the agent, and a context id crafted to collide with another client's context is
/// refused as that context, which naming that context's id would be as well. No client sees a
/// hash, and the keys are random per process (`runtime-rng`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Name {
    /// The table's hash.
    lo: u64,
    /// The shard's; with `lo`, the name.
    hi: u64,
}

impl Placed for (Name, Slot) {
    /// The table's hash: `lo` (`hi` picks the shard).
    fn placed(&self) -> u64 {
        self.0.lo
    }
}

/// A shard's keys by name, in a table that grows a few entries per operation
/// ([`GrowTable`]): a shard of a full store holds tens of thousands of 144-byte slots, and
/// moving them all in one claim held the shard's lock for milliseconds.
#[derive(Default)]
struct Table(GrowTable<(Name, Slot)>);

impl Table {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn get(&self, name: &Name) -> Option<&Slot> {
        self.0.find(name.lo, |(n, _)| n == name).map(|(_, s)| s)
    }

    fn get_mut(&mut self, name: &Name) -> Option<&mut Slot> {
        self.0.find_mut(name.lo, |(n, _)| n == name).map(|(_, s)| s)
    }

    /// Insert `name`, which the table does not hold (the caller removed it).
    fn insert(&mut self, name: Name, slot: Slot) {
        debug_assert!(self.get(&name).is_none());
        self.0.insert_unique((name, slot));
    }

    fn remove(&mut self, name: &Name) -> Option<Slot> {
        self.0.remove(name.lo, |(n, _)| n == name).map(|(_, s)| s)
    }

    fn retain(&mut self, mut keep: impl FnMut(&Name, &mut Slot) -> bool) {
        self.0.retain(|(n, s)| keep(n, s));
    }
}

#[derive(Default)]
struct Keys {
    map: Table,
    /// Keys in insertion order, for eviction and expiry, each with its sequence number and the
    /// expiry it was inserted with, or the key's own once found alive past that (see
    /// [`Keys::expire`]); items of removed keys linger until popped or compacted.
    order: VecDeque<(u64, Instant, Name)>,
    bytes: usize,
    next_seq: u64,
}

/// The in-process key store of the memory ledger: bounded by a count and by bytes (the oldest
/// key goes first), expired lazily.
///
/// A large store is [`SHARDS`] stores by the key's name, each with its share of the bounds:
/// every official A2A message claims and completes its `messageId` here, and one map under one
/// lock made every message wait for every other, and for the map's doubling (a rehash of a
/// million keys under the lock, tens of ms: the SendMessage p99 of the load runs). A store of
/// fewer than [`SHARD_FROM`] keys is one shard, so that its oldest key goes first exactly.
pub(super) struct MemoryKeys {
    shards: Box<[Mutex<Keys>]>,
    /// The keys of a [`Name`]'s two hashes.
    names: [ahash::RandomState; 2],
    /// Each shard's bounds.
    max_entries: usize,
    max_bytes: usize,
    /// Whether a new key may push the oldest out (idempotency keys: a lost one costs a retry
    /// its replay); without, a full store refuses new keys ([`Claim::Full`]).
    evicts: bool,
}

/// Shards of a large key store (see [`MemoryKeys`]).
const SHARDS: usize = 16;
/// The smallest store that is sharded.
const SHARD_FROM: usize = 16 * 1024;

impl MemoryKeys {
    pub(super) fn new(max_entries: usize) -> Self {
        let max_entries = max_entries.max(1);
        let shards = if max_entries >= SHARD_FROM { SHARDS } else { 1 };
        MemoryKeys {
            shards: (0..shards).map(|_| Mutex::new(Keys::default())).collect(),
            names: [ahash::RandomState::new(), ahash::RandomState::new()],
            max_entries: max_entries.div_ceil(shards),
            max_bytes: usize::MAX,
            evicts: true,
        }
    }

    /// A store that refuses new keys when full rather than evict one.
    #[cfg(test)]
    pub(super) fn without_eviction(mut self) -> Self {
        self.evicts = false;
        self
    }

    pub(super) fn with_byte_budget(mut self, max_bytes: usize) -> Self {
        self.max_bytes = (max_bytes / self.shards.len()).max(1);
        self
    }

    /// The name of `key` in `scope` (hashed as a pair: each `str` ends in a marker byte, so no
    /// scope and key run into another's).
    fn name(&self, scope: &str, key: &str) -> Name {
        let [a, b] = &self.names;
        Name {
            lo: a.hash_one((scope, key)),
            hi: b.hash_one((scope, key)),
        }
    }

    /// The shard of `name`, locked.
    fn lock(&self, name: Name) -> std::sync::MutexGuard<'_, Keys> {
        let i = match self.shards.len() {
            1 => 0,
            n => (name.hi as usize) % n,
        };
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn claim(
        &self,
        scope: &str,
        key: &str,
        fingerprint: Fingerprint,
        token: &str,
        lease: Duration,
    ) -> Claim {
        let now = Instant::now();
        let name = self.name(scope, key);
        let mut s = self.lock(name);
        s.expire(now);
        if let Some(slot) = s.map.get(&name).filter(|e| e.expires > now) {
            return match &slot.state {
                State::InFlight { .. } => Claim::InFlight {
                    fingerprint: slot.fingerprint,
                },
                State::Done(answer) => Claim::Done {
                    fingerprint: slot.fingerprint,
                    answer: answer.clone(),
                },
            };
        }
        let state = State::InFlight {
            token: token.to_owned(),
        };
        if !self.insert(&mut s, name, now + lease, fingerprint, state) {
            return Claim::Full;
        }
        Claim::Claimed
    }

    /// Store `answer` if the key is still the holder's (or nobody's: the lease ended without
    /// another claim). False if another request holds the key now.
    pub(super) fn complete(
        &self,
        scope: &str,
        key: &str,
        token: &str,
        fingerprint: Fingerprint,
        answer: Answer,
        ttl: Duration,
    ) -> bool {
        let now = Instant::now();
        let name = self.name(scope, key);
        let mut guard = self.lock(name);
        let s = &mut *guard;
        s.expire(now);
        let done = answer.body.len() + answer.content_type.len() + SLOT_BYTES;
        // One lookup: the holder's claim becomes the answer where it stands (its place in the
        // order is the claim's), no second map operation, no second item in the order.
        let held = match s.map.get_mut(&name) {
            Some(slot) if slot.expires > now => match &slot.state {
                State::InFlight { token: held } if held == token => {
                    let held = slot.size();
                    if s.bytes - held + done <= self.max_bytes {
                        slot.expires = now + ttl;
                        slot.fingerprint = fingerprint;
                        slot.state = State::Done(answer);
                        s.bytes = s.bytes - held + done;
                        return true;
                    }
                    held
                }
                _ => return false,
            },
            // Lapsed, and nobody claimed it since: the answer is still this holder's.
            Some(slot) => slot.size(),
            None => 0,
        };
        if !self.evicts && s.bytes - held + done > self.max_bytes {
            // Keys that expired out of the order's sequence still count: dropped before the
            // answer is refused, as `insert` drops them before it refuses a key.
            s.drop_expired(now);
            let held = s.map.get(&name).map_or(0, Slot::size);
            if s.bytes - held + done > self.max_bytes {
                // Not removed before it is known to fit: the claim in flight (under its own
                // lease) stands rather than vanish.
                return false;
            }
        }
        s.remove(name);
        self.insert(s, name, now + ttl, fingerprint, State::Done(answer))
    }

    /// Forget the key if the holder still holds it.
    pub(super) fn release(&self, scope: &str, key: &str, token: &str) {
        let name = self.name(scope, key);
        let mut s = self.lock(name);
        if matches!(s.map.get(&name), Some(Slot { state: State::InFlight { token: held }, .. }) if held == token)
        {
            s.remove(name);
        }
    }

    /// Insert `name`; false (nothing inserted) when the store is full and does not evict.
    fn insert(
        &self,
        s: &mut Keys,
        name: Name,
        expires: Instant,
        fingerprint: Fingerprint,
        state: State,
    ) -> bool {
        s.remove(name);
        let seq = s.next_seq;
        s.next_seq += 1;
        let slot = Slot {
            seq,
            expires,
            fingerprint,
            state,
        };
        let size = slot.size();
        let full = |s: &Keys| s.map.len() >= self.max_entries || s.bytes + size > self.max_bytes;
        if !self.evicts && full(s) {
            s.drop_expired(Instant::now());
            if full(s) {
                return false;
            }
        }
        while full(s) {
            if !s.evict_oldest() {
                break;
            }
        }
        s.bytes += size;
        s.order.push_back((seq, expires, name));
        s.map.insert(name, slot);
        let limit = 2 * self.max_entries + 16;
        if s.order.len() > limit {
            let map = &s.map;
            s.order
                .retain(|(seq, _, k)| map.get(k).is_some_and(|e| e.seq == *seq));
        }
        true
    }

    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(n, b), s| {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            (n + s.map.len(), b + s.bytes)
        })
    }
}

impl Keys {
    fn remove(&mut self, name: Name) {
        if let Some(slot) = self.map.remove(&name) {
            self.bytes = self.bytes.saturating_sub(slot.size());
        }
    }

    /// Drop expired keys from the front of the insertion order (a long-lived key there delays
    /// the expiry of those behind it; lookups check the expiry anyway, and the bounds hold).
    ///
    /// An item is not looked up before the expiry it holds: every claim and every completion
    /// begins here, and the oldest key's slot is cold memory. An item holds the expiry its key
    /// was inserted with; once a lookup finds the key alive past it (a completed claim: the
    /// answer's life is longer than the lease), the item is given the key's own, so that the
    /// calls after it do not look the same key up again. A key whose completion shortened its
    /// life below its claim's lease (an `idempotency_ttl_secs` shorter than the lease) is
    /// dropped at the lease's end instead; lookups never answer from it after its own expiry.
    fn expire(&mut self, now: Instant) {
        while let Some((seq, at, name)) = self.order.front_mut() {
            if *at > now {
                break;
            }
            match self.map.get(name) {
                Some(e) if e.seq == *seq && e.expires > now => {
                    *at = e.expires;
                    break;
                }
                Some(e) if e.seq == *seq => {
                    let name = *name;
                    self.remove(name);
                }
                _ => {}
            }
            self.order.pop_front();
        }
    }

    /// Drop every key that has expired, wherever it stands: keys whose completion
    /// shortened their life leave the order unsorted. A scan: only before a store
    /// that does not evict refuses something for want of room.
    fn drop_expired(&mut self, now: Instant) {
        let mut gone = 0;
        self.map.retain(|_, e| {
            let keep = e.expires > now;
            if !keep {
                gone += e.size();
            }
            keep
        });
        self.bytes = self.bytes.saturating_sub(gone);
    }

    fn evict_oldest(&mut self) -> bool {
        while let Some((seq, _, name)) = self.order.pop_front() {
            if self.map.get(&name).is_some_and(|e| e.seq == seq) {
                self.remove(name);
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: &'static str) -> Answer {
        Answer {
            status: 202,
            content_type: "application/json".into(),
            body: Bytes::from_static(body.as_bytes()),
        }
    }

    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn a_keys_fixed_cost_covers_its_slot_and_its_order_item() {
        let item = std::mem::size_of::<(u64, Instant, Name)>();
        let slot = std::mem::size_of::<(Name, Slot)>();
        // With the table's control byte: about the fixed cost, not far above it.
        assert!(SLOT_BYTES > slot + item, "{SLOT_BYTES} <= {slot} + {item}");
        assert!(
            SLOT_BYTES <= slot + item + 16,
            "{SLOT_BYTES} > {slot} + {item} + 16"
        );
    }

    #[test]
    fn a_scope_and_a_key_never_run_into_another_pair() {
        let k = MemoryKeys::new(100);
        let fp = fingerprint(b"m");
        for (scope, key) in [
            ("ab", "c"),
            ("a", "bc"),
            ("a\nb", "c"),
            ("a", "b\nc"),
            ("", "abc"),
        ] {
            assert_eq!(
                k.claim(scope, key, fp, "t", LONG),
                Claim::Claimed,
                "{scope:?} {key:?}"
            );
        }
        assert_eq!(k.held().0, 5);
        let (a, b) = (MemoryKeys::new(1), MemoryKeys::new(1));
        assert_ne!(
            a.name("s", "k"),
            b.name("s", "k"),
            "each store hashes under keys of its own"
        );
        assert_eq!(a.name("s", "k"), a.name("s", "k"));
    }

    #[test]
    fn a_key_found_alive_past_its_items_expiry_is_not_looked_up_again() {
        let k = MemoryKeys::new(8);
        let fp = fingerprint(b"m");
        assert_eq!(
            k.claim("msg:a", "m1", fp, "t1", Duration::from_millis(20)),
            Claim::Claimed
        );
        assert!(k.complete("msg:a", "m1", "t1", fp, answer("{}"), LONG));
        std::thread::sleep(Duration::from_millis(40));
        // The item still holds the lease's end, which has passed.
        let front = |k: &MemoryKeys| k.shards[0].lock().expect("lock").order.front().map(|i| i.1);
        assert!(front(&k).is_some_and(|at| at <= Instant::now()));
        assert_eq!(k.claim("msg:a", "m2", fp, "t2", LONG), Claim::Claimed);
        // Found alive, the item holds the key's own expiry now: no lookup until then.
        assert!(front(&k).is_some_and(|at| at > Instant::now() + LONG / 2));
        assert!(matches!(
            k.claim("msg:a", "m1", fp, "t3", LONG),
            Claim::Done { .. }
        ));
        assert_eq!(k.held().0, 2);
    }

    #[test]
    fn tokens_are_fresh_hyphenated_uuids() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        for t in [&a, &b] {
            let parsed = uuid::Uuid::parse_str(t).expect("a UUID");
            assert_eq!(parsed.get_version_num(), 4);
            assert_eq!(*t, parsed.to_string());
        }
    }

    /// `key` claimed for `lease` (token `t1`), completed with a life of 10 ms, shorter than
    /// the lease, then left to expire: it is past its own expiry while its order item still
    /// holds the lease's end.
    fn completed_short(scope: &str, key: &str, k: &MemoryKeys, fp: Fingerprint, lease: Duration) {
        assert_eq!(k.claim(scope, key, fp, "t1", lease), Claim::Claimed);
        assert!(k.complete(
            scope,
            key,
            "t1",
            fp,
            answer("{}"),
            Duration::from_millis(10)
        ));
        std::thread::sleep(Duration::from_millis(40));
    }

    #[test]
    fn a_key_that_its_completion_shortened_is_never_answered_past_its_expiry_and_goes_by_its_lease()
    {
        let k = MemoryKeys::new(8);
        let fp = fingerprint(b"m");
        completed_short("msg:a", "m1", &k, fp, Duration::from_millis(300));
        // Past its own expiry: another key's claim does not drop it yet (its order item holds
        // the lease's end), but it answers nothing.
        assert_eq!(k.claim("msg:a", "m2", fp, "t2", LONG), Claim::Claimed);
        assert_eq!(k.held().0, 2);
        assert_eq!(k.claim("msg:a", "m1", fp, "t3", LONG), Claim::Claimed);
        // Claimed anew, it is a key in flight like any other; past the first lease, the first
        // claim's item goes without taking the new claim with it.
        std::thread::sleep(Duration::from_millis(320));
        assert_eq!(k.claim("msg:a", "m3", fp, "t4", LONG), Claim::Claimed);
        assert_eq!(k.held().0, 3);
        assert_eq!(
            k.claim("msg:a", "m1", fingerprint(b"other"), "t5", LONG),
            Claim::InFlight { fingerprint: fp }
        );
    }

    #[test]
    fn a_store_without_eviction_drops_expired_keys_before_it_refuses_an_answer() {
        let k = MemoryKeys::new(8).without_eviction().with_byte_budget(500);
        let fp = fingerprint(b"c");
        completed_short("ctx:x", "A", &k, fp, LONG);
        assert_eq!(k.claim("ctx:x", "B", fp, "t", LONG), Claim::Claimed);
        // B's answer fits only without A's expired bytes.
        let big = Answer {
            status: 200,
            content_type: "application/json".into(),
            body: Bytes::from(vec![b'x'; 150]),
        };
        assert!(k.held().1 + 150 > 500);
        assert!(k.complete("ctx:x", "B", "t", fp, big.clone(), LONG));
        assert_eq!(k.held().0, 1);
        assert!(matches!(
            k.claim("ctx:x", "B", fp, "t2", LONG),
            Claim::Done { answer, .. } if answer == big
        ));
    }

    #[test]
    fn a_key_dropped_at_its_lease_end_frees_its_room() {
        let k = MemoryKeys::new(8);
        let fp = fingerprint(b"m");
        assert_eq!(
            k.claim("msg:a", "m1", fp, "t1", Duration::from_millis(20)),
            Claim::Claimed
        );
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(k.claim("msg:a", "m2", fp, "t2", LONG), Claim::Claimed);
        assert_eq!(
            k.held().0,
            1,
            "the lapsed claim went when the next call came"
        );
    }

    #[test]
    fn a_completed_key_is_answered_where_its_claim_stood() {
        let k = MemoryKeys::new(8);
        let fp = fingerprint(b"m");
        assert_eq!(k.claim("msg:a", "m1", fp, "tok", LONG), Claim::Claimed);
        assert!(k.complete("msg:a", "m1", "tok", fp, answer("{}"), LONG));
        let (n, bytes) = k.held();
        assert_eq!(n, 1);
        assert_eq!(bytes, 2 + "application/json".len() + SLOT_BYTES);
        let order = k.shards[0].lock().expect("lock").order.len();
        assert_eq!(order, 1, "no second item in the order");
        assert_eq!(
            k.claim("msg:a", "m1", fp, "tok2", LONG),
            Claim::Done {
                fingerprint: fp,
                answer: answer("{}")
            }
        );
        // Another holder's token does not complete it.
        assert_eq!(k.claim("msg:a", "m2", fp, "tok", LONG), Claim::Claimed);
        assert!(!k.complete("msg:a", "m2", "other", fp, answer("{}"), LONG));
        assert_eq!(k.held().0, 2);
    }

    #[test]
    fn a_store_without_eviction_refuses_when_full_and_keeps_what_it_holds() {
        let k = MemoryKeys::new(2).without_eviction();
        let fp = fingerprint(b"alice");
        for key in ["c1", "c2"] {
            assert_eq!(k.claim("ctx:a", key, fp, "t", LONG), Claim::Claimed);
            assert!(k.complete("ctx:a", key, "t", fp, answer("alice"), LONG));
        }
        assert_eq!(k.claim("ctx:a", "c3", fp, "t", LONG), Claim::Full);
        // The first claims stand, not pushed out by the refused one.
        assert!(matches!(
            k.claim("ctx:a", "c1", fingerprint(b"bob"), "t2", LONG),
            Claim::Done { fingerprint: f, .. } if f == fp
        ));
        // An evicting store makes room instead.
        let e = MemoryKeys::new(2);
        for key in ["c1", "c2", "c3"] {
            assert_eq!(e.claim("s", key, fp, "t", LONG), Claim::Claimed);
        }
    }

    #[test]
    fn fingerprinting_a_document_is_the_fingerprint_of_its_bytes() {
        let doc = serde_json::json!({"message": {"messageId": "m-1", "parts": [{"text": "hé"}]}});
        let bytes = serde_json::to_vec(&doc).expect("json");
        let mut f = Fingerprinting::default();
        serde_json::to_writer(&mut f, &doc).expect("json");
        assert_eq!(f.len(), bytes.len());
        assert_eq!(f.finish(), fingerprint(&bytes));
        let mut other = Fingerprinting::default();
        serde_json::to_writer(&mut other, &serde_json::json!({"message": {}})).expect("json");
        assert_ne!(other.finish(), fingerprint(&bytes));
    }

    #[test]
    fn claim_complete_replay() {
        let k = MemoryKeys::new(100);
        let fp = fingerprint(b"one");
        assert_eq!(k.claim("a", "k", fp, "t1", LONG), Claim::Claimed);
        assert_eq!(
            k.claim("a", "k", fingerprint(b"two"), "t2", LONG),
            Claim::InFlight { fingerprint: fp }
        );
        // Another scope is another key.
        assert_eq!(k.claim("b", "k", fp, "t3", LONG), Claim::Claimed);
        assert!(
            !k.complete("a", "k", "t2", fp, answer("x"), LONG),
            "not t2's"
        );
        assert!(k.complete("a", "k", "t1", fp, answer("{}"), LONG));
        assert_eq!(
            k.claim("a", "k", fp, "t4", LONG),
            Claim::Done {
                fingerprint: fp,
                answer: answer("{}")
            }
        );
        // Done is final: a release by anyone does not remove it.
        k.release("a", "k", "t1");
        assert!(matches!(
            k.claim("a", "k", fp, "t5", LONG),
            Claim::Done { .. }
        ));
    }

    #[test]
    fn release_frees_and_leases_end() {
        let k = MemoryKeys::new(100);
        let fp = fingerprint(b"one");
        assert_eq!(k.claim("a", "k", fp, "t1", LONG), Claim::Claimed);
        k.release("a", "k", "other");
        assert!(matches!(
            k.claim("a", "k", fp, "t2", LONG),
            Claim::InFlight { .. }
        ));
        k.release("a", "k", "t1");
        assert_eq!(
            k.claim("a", "k", fp, "t2", Duration::from_millis(10)),
            Claim::Claimed
        );
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(k.claim("a", "k", fp, "t3", LONG), Claim::Claimed);
        // The first holder, whose lease ended, cannot overwrite the new holder's claim.
        assert!(!k.complete("a", "k", "t2", fp, answer("{}"), LONG));
    }

    #[test]
    fn a_large_store_is_sharded_and_bounded_as_a_whole() {
        let max = SHARD_FROM * 2;
        let k = MemoryKeys::new(max);
        assert_eq!(k.shards.len(), SHARDS);
        let fp = fingerprint(b"");
        for i in 0..max * 3 {
            let key = format!("m{i}");
            assert_eq!(k.claim("msg:a", &key, fp, "t", LONG), Claim::Claimed);
            assert!(k.complete("msg:a", &key, "t", fp, answer("{}"), LONG));
        }
        let (n, _) = k.held();
        assert!(n <= max && n > max * 9 / 10, "held {n} of {max}");
        // The newest keys replay whichever shard they are in.
        for i in max * 3 - 100..max * 3 {
            assert!(matches!(
                k.claim("msg:a", &format!("m{i}"), fp, "t2", LONG),
                Claim::Done { .. }
            ));
        }
        let k = MemoryKeys::new(max).with_byte_budget(SHARDS * 4096);
        for i in 0..2000 {
            let key = format!("b{i}");
            k.claim("a", &key, fp, "t", LONG);
            k.complete("a", &key, "t", fp, answer("{}"), LONG);
        }
        assert!(k.held().1 <= SHARDS * 4096, "{:?}", k.held());
        assert_eq!(
            MemoryKeys::new(SHARD_FROM - 1).shards.len(),
            1,
            "small stores are exact"
        );
    }

    #[test]
    fn the_store_is_bounded_by_count_and_bytes() {
        let k = MemoryKeys::new(10);
        let fp = fingerprint(b"");
        for i in 0..1000 {
            let key = format!("k{i}");
            assert_eq!(k.claim("a", &key, fp, "t", LONG), Claim::Claimed);
            assert!(k.complete("a", &key, "t", fp, answer("{}"), LONG));
        }
        assert_eq!(k.held().0, 10);
        assert!(matches!(
            k.claim("a", "k999", fp, "t", LONG),
            Claim::Done { .. }
        ));
        let k = MemoryKeys::new(1000).with_byte_budget(4096);
        let big = Answer {
            status: 202,
            content_type: String::new(),
            body: Bytes::from(vec![b'x'; 1000]),
        };
        for i in 0..100 {
            let key = format!("k{i}");
            k.claim("a", &key, fp, "t", LONG);
            k.complete("a", &key, "t", fp, big.clone(), LONG);
        }
        assert!(k.held().1 <= 4096, "{:?}", k.held());
    }
}
