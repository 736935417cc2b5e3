//! A map keyed by strings that clients and agents choose (task ids, idempotency keys), with each
//! key's hash kept beside it in its slot.
//!
//! Why: every such map in the in-process ledger holds one entry per task or message, and the
//! shards of all of them grow alike, so they double at about the same total. A doubling rehashes
//! every key under its shard's lock, and rehashing a key meant reading its bytes through its
//! `Arc`, a cache miss per key: perf showed the SendMessage stalls of the load runs (a runtime
//! thread busy for tens of ms) made of `<Arc<str> as Hash>::hash` and fresh pages. With the hash
//! in the slot, a doubling reads only the table.
//!
//! The hash is aHash's under random per-process keys (HashDoS), one seed per map, so that a map
//! inside a shard chosen by another hash of the same key still spreads over all its buckets.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use hashbrown::Equivalent;

/// A key and its hash.
struct Hashed {
    hash: u64,
    key: Arc<str>,
}

impl Hash for Hashed {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

impl PartialEq for Hashed {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.key == other.key
    }
}

impl Eq for Hashed {}

/// A lookup: a borrowed key and its hash.
struct Probe<'a> {
    hash: u64,
    key: &'a str,
}

impl Hash for Probe<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

impl Equivalent<Hashed> for Probe<'_> {
    fn equivalent(&self, k: &Hashed) -> bool {
        self.hash == k.hash && *k.key == *self.key
    }
}

/// The table's hasher: the hash written by [`Hashed`] or [`Probe`] (or by any key that writes
/// one `u64` made under random keys, as the idempotency store's names do), as it is.
#[derive(Clone, Copy, Default)]
pub(crate) struct Written;

pub(crate) struct WrittenHasher(u64);

impl BuildHasher for Written {
    type Hasher = WrittenHasher;

    fn build_hasher(&self) -> WrittenHasher {
        WrittenHasher(0)
    }
}

impl Hasher for WrittenHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is called, by `Hashed` and `Probe` (and the idempotency store's
        // names), with a hash made under random keys. Anything else would be hashed here
        // without them (no HashDoS defence), so tests fail on it; a release build still hashes
        // it rather than lose it.
        debug_assert!(false, "a `Written` table hashes only precomputed u64s");
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map from string keys to `V` (see the module doc).
pub(crate) struct StrMap<V> {
    seed: ahash::RandomState,
    map: hashbrown::HashMap<Hashed, V, Written>,
}

impl<V> Default for StrMap<V> {
    fn default() -> Self {
        StrMap {
            seed: ahash::RandomState::new(),
            map: hashbrown::HashMap::with_hasher(Written),
        }
    }
}

impl<V> StrMap<V> {
    fn probe<'a>(&self, key: &'a str) -> Probe<'a> {
        Probe {
            hash: self.seed.hash_one(key),
            key,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn get(&self, key: &str) -> Option<&V> {
        self.map.get(&self.probe(key))
    }

    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        let probe = self.probe(key);
        self.map.get_mut(&probe)
    }

    pub(crate) fn get_key_value(&self, key: &str) -> Option<(&Arc<str>, &V)> {
        self.map
            .get_key_value(&self.probe(key))
            .map(|(k, v)| (&k.key, v))
    }

    #[cfg(test)]
    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.map.contains_key(&self.probe(key))
    }

    /// Insert `value` under `key`; the value it replaces, if any.
    pub(crate) fn insert(&mut self, key: Arc<str>, value: V) -> Option<V> {
        let hash = self.seed.hash_one(&*key);
        self.map.insert(Hashed { hash, key }, value)
    }

    pub(crate) fn remove(&mut self, key: &str) -> Option<V> {
        let probe = self.probe(key);
        self.map.remove(&probe)
    }

    /// The bytes of one slot of the table: what a doubling moves per key.
    #[cfg(test)]
    pub(crate) fn slot_bytes(&self) -> usize {
        std::mem::size_of::<(Hashed, V)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_by_their_text_and_a_doubling_keeps_them_all() {
        let mut m = StrMap::default();
        for i in 0..10_000u32 {
            assert_eq!(m.insert(Arc::from(format!("task-{i}")), i), None);
        }
        assert_eq!(m.len(), 10_000);
        for i in 0..10_000u32 {
            let k = format!("task-{i}");
            assert_eq!(m.get(&k), Some(&i));
            assert!(m.contains_key(&k));
        }
        assert_eq!(m.get("task-10000"), None);
        assert_eq!(m.insert(Arc::from("task-7"), 70), Some(7));
        if let Some(v) = m.get_mut("task-8") {
            *v = 80;
        }
        let (k, v) = m.get_key_value("task-8").expect("held");
        assert_eq!((&**k, *v), ("task-8", 80));
        assert_eq!(m.remove("task-9"), Some(9));
        assert_eq!(m.remove("task-9"), None);
        assert_eq!(m.len(), 9_999);
    }

    #[test]
    fn two_maps_hash_one_key_apart() {
        // One seed per map, so that a map inside a shard chosen by another seed's hash of the
        // same keys does not see them agree in their low bits.
        let (a, b) = (StrMap::<()>::default(), StrMap::<()>::default());
        let differ = (0..64)
            .filter(|i| {
                let k = format!("k{i}");
                a.probe(&k).hash != b.probe(&k).hash
            })
            .count();
        assert!(differ > 60, "{differ} of 64 hashes differ");
    }
}
