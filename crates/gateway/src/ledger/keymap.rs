//! The in-process ledger's maps: keys that clients and agents choose (task ids, owners, contexts,
//! artifact ids), each kept with its hash in its slot, in a table that grows a little at a time
//! ([`GrowTable`]).
//!
//! Why: every such map holds about one entry per task, message or client, and is changed under a
//! lock that requests wait on. A std map that is full moves every entry into a table twice the
//! size before the insert returns, rehashing every key on the way: reading its bytes through its
//! `Arc`, a cache miss per key (perf showed the SendMessage stalls of the load runs made of
//! `<Arc<str> as Hash>::hash` and fresh pages). With the hash in the slot, moving an entry reads
//! only the table; with [`GrowTable`], no operation moves more than a few entries.
//!
//! The hash is aHash's under random per-process keys (HashDoS), one seed per map, so that a map
//! inside a shard chosen by another hash of the same key still spreads over all its buckets.

use std::hash::Hash;
use std::sync::Arc;

use hashbrown::Equivalent;

use super::grow::{GrowTable, Placed};

/// A key, its hash and its value: one slot of a [`KeyMap`].
struct Slot<K, V> {
    hash: u64,
    key: K,
    value: V,
}

impl<K, V> Placed for Slot<K, V> {
    fn placed(&self) -> u64 {
        self.hash
    }
}

/// A map from `K` to `V` (see the module doc). Looked up by anything that hashes as `K` does and
/// compares with it (hashbrown's [`Equivalent`]: a `&str` for an `Arc<str>` key).
pub(crate) struct KeyMap<K, V> {
    seed: ahash::RandomState,
    table: GrowTable<Slot<K, V>>,
}

/// The map of task ids (and other single ids) to `V`.
pub(crate) type StrMap<V> = KeyMap<Arc<str>, V>;

impl<K, V> Default for KeyMap<K, V> {
    fn default() -> Self {
        KeyMap {
            seed: ahash::RandomState::new(),
            table: GrowTable::default(),
        }
    }
}

impl<K: Hash + Eq, V> KeyMap<K, V> {
    fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.seed.hash_one(key)
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    fn slot<Q>(&self, key: &Q) -> Option<&Slot<K, V>>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        let hash = self.hash(key);
        self.table
            .find(hash, |s| s.hash == hash && key.equivalent(&s.key))
    }

    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        self.slot(key).map(|s| &s.value)
    }

    pub(crate) fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        let hash = self.hash(key);
        self.table
            .find_mut(hash, |s| s.hash == hash && key.equivalent(&s.key))
            .map(|s| &mut s.value)
    }

    pub(crate) fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        self.slot(key).map(|s| (&s.key, &s.value))
    }

    pub(crate) fn contains_key<Q>(&self, key: &Q) -> bool
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        self.slot(key).is_some()
    }

    /// Insert `value` under `key`; the value it replaces, if any (the key held stays).
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        let hash = self.hash(&key);
        if let Some(held) = self
            .table
            .find_mut(hash, |s| s.hash == hash && s.key == key)
        {
            return Some(std::mem::replace(&mut held.value, value));
        }
        self.table.insert_unique(Slot { hash, key, value });
        None
    }

    /// The value under `key`, inserted by `make` if there is none.
    pub(crate) fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let hash = self.hash(&key);
        // Looked up twice when found (the borrow checker cannot yet return a borrow from one
        // branch and take another in the other); a hit in a table just probed is cheap.
        if self
            .table
            .find(hash, |s| s.hash == hash && s.key == key)
            .is_some()
        {
            return self
                .table
                .find_mut(hash, |s| s.hash == hash && s.key == key)
                .map(|s| &mut s.value)
                .unwrap_or_else(|| unreachable!("found just above"));
        }
        let value = make();
        &mut self.table.insert_unique(Slot { hash, key, value }).value
    }

    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        let hash = self.hash(key);
        self.table
            .remove(hash, |s| s.hash == hash && key.equivalent(&s.key))
            .map(|s| s.value)
    }

    /// The bytes of one slot of the table: what a growth moves per key.
    #[cfg(test)]
    pub(crate) fn slot_bytes(&self) -> usize {
        std::mem::size_of::<Slot<K, V>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_by_their_text_and_a_growth_keeps_them_all() {
        let mut m = StrMap::default();
        for i in 0..10_000u32 {
            assert_eq!(m.insert(Arc::from(format!("task-{i}")), i), None);
        }
        assert_eq!(m.len(), 10_000);
        for i in 0..10_000u32 {
            let k = format!("task-{i}");
            assert_eq!(m.get(k.as_str()), Some(&i));
            assert!(m.contains_key(k.as_str()));
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
        // An `Arc<str>` finds what its text finds.
        assert_eq!(m.get(&Arc::<str>::from("task-10")), Some(&10));
    }

    #[test]
    fn a_replaced_value_keeps_the_key_held() {
        let mut m = StrMap::default();
        let first: Arc<str> = Arc::from("k");
        m.insert(first.clone(), 1);
        m.insert(Arc::from("k"), 2);
        let (k, v) = m.get_key_value("k").expect("held");
        assert!(Arc::ptr_eq(k, &first));
        assert_eq!(*v, 2);
    }

    /// (agent, owner), as the listing index's sets are keyed.
    type Pair = (Arc<str>, Option<Arc<str>>);

    #[test]
    fn tuple_keys_and_get_or_insert_with() {
        let mut m: KeyMap<Pair, Vec<u32>> = KeyMap::default();
        for i in 0..5_000u32 {
            let owner = (i % 3 != 0).then(|| Arc::from(format!("o{}", i % 7)));
            m.get_or_insert_with((Arc::from(format!("a{}", i % 11)), owner), Vec::new)
                .push(i);
        }
        // 11 agents x (7 owners + none), less the pairs that never meet.
        let total: usize = (0..11)
            .flat_map(|a| {
                let o = (0..7).map(|o| Some(Arc::from(format!("o{o}"))));
                o.chain([None])
                    .map(move |o| (Arc::from(format!("a{a}")), o))
            })
            .filter_map(|k| m.get(&k).map(Vec::len))
            .sum();
        assert_eq!(total, 5_000);
        assert!(m.len() <= 11 * 8);
    }

    #[test]
    fn two_maps_hash_one_key_apart() {
        // One seed per map, so that a map inside a shard chosen by another seed's hash of the
        // same keys does not see them agree in their low bits.
        let (a, b) = (StrMap::<()>::default(), StrMap::<()>::default());
        let differ = (0..64)
            .filter(|i| {
                let k = format!("k{i}");
                a.hash(k.as_str()) != b.hash(k.as_str())
            })
            .count();
        assert!(differ > 60, "{differ} of 64 hashes differ");
    }
}
