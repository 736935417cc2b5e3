//! A hash table that grows a little at a time: the in-process ledger's maps, which hold one
//! entry per task or message and are changed under a shard's lock.
//!
//! Why: a hash table that is full allocates one twice the size and moves every entry into it
//! before the insert that found it full returns. In the ledger that insert holds a shard's lock,
//! and the shards of every per-task map fill alike, so all of them double within the same second:
//! at the default `max_tasks` a load run's p99 went from 5–8 ms to 100–200 ms in the rounds that
//! crossed about 0.46M and 0.92M tasks (issue 42). Presizing for `max_tasks` would touch megabytes
//! at start. So [`GrowTable`] grows incrementally: when its table is full it allocates the next
//! one, inserts go there, and each later insert or removal moves the entries of at most [`STEP`]
//! buckets of the old table into the new one, by a cursor over the old table's bucket indices.
//! Lookups ask both tables until the old one is empty, and it is freed then.
//!
//! The next table is made large enough that the old one is always empty before the new one fills
//! (see [`GrowTable::grow`]), so hashbrown never grows a table itself: no operation moves more than
//! [`STEP`] buckets' entries. The cost is that both tables live while the old one drains (as they
//! do during one hashbrown resize), for a few thousand operations instead of one.

use hashbrown::HashTable;

/// An entry that carries the hash it is placed by, so that moving it reads no key.
pub(crate) trait Placed {
    /// The entry's hash (made under random keys by whoever made the entry: HashDoS).
    fn placed(&self) -> u64;
}

/// Buckets of the old table that one insert or removal moves into the new one, at most: the
/// bound on the extra work of one operation while a table grows. Sixteen buckets hold at most
/// sixteen entries (fourteen on average in a full table), a few microseconds of cache misses.
pub(crate) const STEP: usize = 16;

/// The smallest table allocated (hashbrown's own first allocation for small entries).
const MIN_CAPACITY: usize = 3;

/// A hash table of `T`s that grows by moving at most [`STEP`] buckets' entries per operation
/// (see the module doc). Entries are found by their hash and an equality test, as in
/// [`hashbrown::HashTable`].
pub(crate) struct GrowTable<T> {
    /// Where new entries go.
    new: HashTable<T>,
    /// The table being emptied into `new`; unallocated when no growth is under way.
    old: HashTable<T>,
    /// The next bucket index of `old` to empty.
    cursor: usize,
    /// What the last operation did, for the tests that bound it.
    #[cfg(test)]
    work: Work,
}

/// The work of one operation, counted by the tests.
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Work {
    /// Buckets of the old table looked at by the last operation.
    pub(crate) scanned: usize,
    /// Entries moved by the last operation.
    pub(crate) moved: usize,
    /// Growths started since the table was made.
    pub(crate) growths: usize,
}

impl<T> Default for GrowTable<T> {
    fn default() -> Self {
        GrowTable {
            new: HashTable::new(),
            old: HashTable::new(),
            cursor: 0,
            #[cfg(test)]
            work: Work::default(),
        }
    }
}

impl<T: Placed> GrowTable<T> {
    pub(crate) fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }

    /// The entry of `hash` that `eq` accepts.
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Option<&T> {
        match self.new.find(hash, &mut eq) {
            Some(t) => Some(t),
            None if self.old.is_empty() => None,
            None => self.old.find(hash, eq),
        }
    }

    pub(crate) fn find_mut(&mut self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Option<&mut T> {
        match self.new.find_mut(hash, &mut eq) {
            Some(t) => Some(t),
            None if self.old.is_empty() => None,
            None => self.old.find_mut(hash, eq),
        }
    }

    /// Insert `value`, which no entry equals (the caller has looked); the entry as inserted.
    pub(crate) fn insert_unique(&mut self, value: T) -> &mut T {
        #[cfg(test)]
        self.begin();
        self.make_room();
        self.step();
        let hash = value.placed();
        // Never grows: `make_room` left room, and `grow` sized the table so that `step` empties
        // the old one before the new one fills.
        self.new.insert_unique(hash, value, T::placed).into_mut()
    }

    /// Remove the entry of `hash` that `eq` accepts.
    pub(crate) fn remove(&mut self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Option<T> {
        #[cfg(test)]
        self.begin();
        let removed = match self.new.find_entry(hash, &mut eq) {
            Ok(e) => Some(e.remove().0),
            Err(_) if self.old.is_empty() => None,
            Err(_) => self.old.find_entry(hash, eq).ok().map(|e| e.remove().0),
        };
        self.step();
        removed
    }

    /// Keep only the entries `f` accepts: a scan of both tables, for the callers that scan anyway.
    pub(crate) fn retain(&mut self, mut f: impl FnMut(&mut T) -> bool) {
        self.new.retain(&mut f);
        self.old.retain(f);
        if self.old.is_empty() {
            self.free_old();
        }
    }

    /// Start a growth if the new table has no room for one more entry.
    fn make_room(&mut self) {
        if self.new.len() < self.new.capacity() {
            return;
        }
        if !self.old.is_empty() {
            // Not reached: `grow` sizes the new table so that the old one is empty before it
            // fills. Kept correct rather than fast if it were: the rest is moved at once.
            debug_assert!(false, "a table filled before the one before it was emptied");
            self.new.reserve(self.old.len() + 1, T::placed);
            while !self.old.is_empty() {
                self.step();
            }
        }
        self.grow();
    }

    /// Make the full new table the old one, and allocate the next. Its capacity is twice the
    /// entries held (hashbrown's doubling), and at least the entries held plus one per [`STEP`]
    /// buckets of the old table: every insert steps first, so the old table is empty before
    /// that many inserts, and removals only step it further (a removal's tombstone costs the
    /// new table a place, and steps once too).
    fn grow(&mut self) {
        let held = self.new.len();
        let buckets = self.new.num_buckets();
        let capacity = (2 * held)
            .max(held + buckets.div_ceil(STEP) + 2)
            .max(MIN_CAPACITY);
        self.old = std::mem::replace(&mut self.new, HashTable::with_capacity(capacity));
        self.cursor = 0;
        if self.old.is_empty() {
            self.free_old();
        }
        #[cfg(test)]
        {
            self.work.growths += 1;
        }
    }

    /// Move the entries of the old table's next [`STEP`] buckets into the new one.
    fn step(&mut self) {
        if self.old.is_empty() {
            return;
        }
        let end = (self.cursor + STEP).min(self.old.num_buckets());
        while self.cursor < end {
            if let Ok(e) = self.old.get_bucket_entry(self.cursor) {
                let (value, _) = e.remove();
                self.new.insert_unique(value.placed(), value, T::placed);
                #[cfg(test)]
                {
                    self.work.moved += 1;
                }
            }
            self.cursor += 1;
            #[cfg(test)]
            {
                self.work.scanned += 1;
            }
        }
        // Entries are never inserted into the old table, so once the cursor has passed every
        // bucket it is empty.
        debug_assert!(self.cursor < self.old.num_buckets() || self.old.is_empty());
        if self.old.is_empty() {
            self.free_old();
        }
    }

    fn free_old(&mut self) {
        self.old = HashTable::new();
        self.cursor = 0;
    }
}

#[cfg(test)]
impl<T: Placed> GrowTable<T> {
    /// Bytes allocated by both tables.
    pub(crate) fn allocation_size(&self) -> usize {
        self.new.allocation_size() + self.old.allocation_size()
    }

    fn begin(&mut self) {
        self.work.scanned = 0;
        self.work.moved = 0;
    }

    /// What the last insert or removal did.
    pub(crate) fn work(&self) -> Work {
        self.work
    }

    /// Whether a growth is under way.
    pub(crate) fn growing(&self) -> bool {
        !self.old.is_empty()
    }

    /// The buckets of the new table (hashbrown grows it only if this changes between growths).
    fn new_buckets(&self) -> usize {
        self.new.num_buckets()
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.new.iter().chain(self.old.iter())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::HashMap;

    use super::*;

    thread_local! {
        /// Calls of `Placed::placed` on this thread: what hashbrown would call for every entry
        /// if it ever grew or rehashed a table itself.
        static PLACED: Cell<usize> = const { Cell::new(0) };
    }

    /// A key and a value, placed by a weak hash of the key (`bits` of it), so that lookups see
    /// collisions and long probe sequences.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Kv {
        key: u64,
        value: u64,
        bits: u32,
    }

    fn hash_of(key: u64, bits: u32) -> u64 {
        let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
        if bits >= 64 {
            h
        } else {
            h & ((1 << bits) - 1)
        }
    }

    impl Placed for Kv {
        fn placed(&self) -> u64 {
            PLACED.with(|c| c.set(c.get() + 1));
            hash_of(self.key, self.bits)
        }
    }

    fn placed_calls() -> usize {
        PLACED.with(Cell::get)
    }

    /// A map over the table, as the ledger's maps use it.
    struct Map {
        t: GrowTable<Kv>,
        bits: u32,
    }

    impl Map {
        fn new(bits: u32) -> Map {
            Map {
                t: GrowTable::default(),
                bits,
            }
        }

        fn get(&self, key: u64) -> Option<u64> {
            self.t
                .find(hash_of(key, self.bits), |e| e.key == key)
                .map(|e| e.value)
        }

        fn insert(&mut self, key: u64, value: u64) -> Option<u64> {
            let hash = hash_of(key, self.bits);
            if let Some(e) = self.t.find_mut(hash, |e| e.key == key) {
                return Some(std::mem::replace(&mut e.value, value));
            }
            let bits = self.bits;
            self.t.insert_unique(Kv { key, value, bits });
            None
        }

        fn remove(&mut self, key: u64) -> Option<u64> {
            self.t
                .remove(hash_of(key, self.bits), |e| e.key == key)
                .map(|e| e.value)
        }
    }

    /// xorshift64*: a reproducible sequence without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Every entry once, and exactly the model's.
    fn same_as(map: &Map, model: &HashMap<u64, u64>) {
        assert_eq!(map.t.len(), model.len());
        let mut seen = HashMap::new();
        for e in map.t.iter() {
            assert!(seen.insert(e.key, e.value).is_none(), "{} twice", e.key);
        }
        assert_eq!(&seen, model);
    }

    /// One operation's work is bounded: at most `STEP` buckets looked at and entries moved,
    /// and hashbrown never grew the new table itself (its buckets change only with a growth
    /// of ours, and `placed` is called for the moved entries and the inserted one only).
    fn bounded(map: &Map, before: (usize, usize, usize)) {
        let (buckets, growths, calls) = before;
        let w = map.t.work();
        assert!(w.scanned <= STEP, "{w:?}");
        assert!(w.moved <= w.scanned, "{w:?}");
        if w.growths == growths {
            assert_eq!(map.t.new_buckets(), buckets, "hashbrown grew a table");
        } else {
            assert_eq!(w.growths, growths + 1);
        }
        assert!(placed_calls() - calls <= w.moved + 1, "{w:?}");
    }

    fn state(map: &Map) -> (usize, usize, usize) {
        (map.t.new_buckets(), map.t.work().growths, placed_calls())
    }

    /// The table against std's HashMap under random inserts, replacements, removals and lookups,
    /// through many growths, with phases that fill, churn and empty it (removals leave
    /// tombstones, which end a table's room before it is full).
    fn model_run(seed: u64, bits: u32, ops: usize) {
        let mut rng = Rng(seed);
        let mut map = Map::new(bits);
        let mut model = HashMap::new();
        let mut keys = 64u64;
        for i in 0..ops {
            // Phases of 4096 operations: grow the key range, churn in it, or shrink the table.
            let phase = (i / 4096) % 5;
            let remove_share = match phase {
                0 | 1 => 10,
                2 => 45,
                3 => 90,
                _ => 30,
            };
            if phase <= 1 {
                keys += 3;
            }
            let key = rng.below(keys);
            let before = state(&map);
            let roll = rng.below(100);
            if roll < remove_share {
                assert_eq!(map.remove(key), model.remove(&key), "remove {key}");
                bounded(&map, before);
            } else if roll < 80 {
                let value = rng.next();
                assert_eq!(
                    map.insert(key, value),
                    model.insert(key, value),
                    "insert {key}"
                );
                bounded(&map, before);
            } else {
                assert_eq!(map.get(key), model.get(&key).copied(), "get {key}");
            }
            assert_eq!(map.t.len(), model.len());
            if i % 1999 == 0 {
                same_as(&map, &model);
            }
        }
        same_as(&map, &model);
        assert!(map.t.work().growths > 8, "{:?}", map.t.work());
        // Drain: every key found once, then none.
        let left: Vec<u64> = model.keys().copied().collect();
        for k in left {
            assert_eq!(map.remove(k), model.remove(&k));
        }
        assert_eq!(map.t.len(), 0);
        assert!(!map.t.growing(), "emptied by the removals' steps");
    }

    #[test]
    fn the_table_behaves_as_a_hash_map_through_many_growths() {
        for seed in 1..=3 {
            model_run(seed * 0x1234_5678_9abc_def1, 64, 50_000);
        }
    }

    #[test]
    fn colliding_hashes_are_told_apart_by_their_entries() {
        // Eight bits of hash for thousands of keys: every probe sequence is long, and entries
        // of one hash sit in both tables during a growth.
        model_run(99, 8, 30_000);
        model_run(7, 0, 3_000);
    }

    #[test]
    fn a_growth_ends_with_the_old_table_empty_freed_and_nothing_lost() {
        let mut map = Map::new(64);
        let mut grown_at = Vec::new();
        for k in 0..100_000u64 {
            let growths = map.t.work().growths;
            map.insert(k, k * 2);
            if map.t.work().growths > growths {
                grown_at.push(k);
            }
            if !map.t.growing() {
                assert_eq!(map.t.old.allocation_size(), 0, "freed at {k}");
            }
        }
        // Doublings: a table of capacity c starts a growth when it holds c entries.
        assert!(grown_at.len() >= 14, "{grown_at:?}");
        for w in grown_at.windows(2).skip(3) {
            let ratio = w[1] as f64 / w[0] as f64;
            assert!((1.9..=2.1).contains(&ratio), "{grown_at:?}");
        }
        // Every growth ended before the next began (a growth began at each of these keys with
        // the old table already empty: `make_room` would have asserted otherwise).
        let mut model = HashMap::new();
        for k in 0..100_000u64 {
            model.insert(k, k * 2);
        }
        same_as(&map, &model);
        for k in 0..100_000u64 {
            assert_eq!(map.get(k), Some(k * 2));
        }
        assert_eq!(map.get(100_000), None);
    }

    #[test]
    fn an_insert_moves_at_most_a_step_however_large_the_table() {
        // Every insert from empty to 300,000 entries (a shard of the ledger at 4.8M tasks):
        // the most any one did besides its own entry.
        let mut map = Map::new(64);
        let (mut most_moved, mut most_calls, mut growing_inserts) = (0, 0, 0);
        for k in 0..300_000u64 {
            let before = state(&map);
            map.insert(k, k);
            bounded(&map, before);
            most_moved = most_moved.max(map.t.work().moved);
            most_calls = most_calls.max(placed_calls() - before.2);
            growing_inserts += usize::from(map.t.growing());
        }
        assert!(most_moved <= STEP, "{most_moved}");
        assert!(most_moved > 0, "growths did move entries");
        // Its own entry's hash, and one per moved entry: never a table's worth.
        assert!(most_calls <= STEP + 1, "{most_calls}");
        assert!(growing_inserts > 0);
        // A growth of a table of n entries lasts about n / STEP operations, not n.
        assert!(growing_inserts < 300_000 / 8, "{growing_inserts}");
    }

    #[test]
    fn the_tables_take_what_hashbrown_would_at_rest_and_both_only_while_growing() {
        let mut map = Map::new(64);
        let mut plain = HashTable::new();
        let slot = std::mem::size_of::<Kv>() + 1;
        for k in 0..200_000u64 {
            map.insert(k, k);
            plain.insert_unique(
                hash_of(k, 64),
                Kv {
                    key: k,
                    value: k,
                    bits: 64,
                },
                |e: &Kv| hash_of(e.key, 64),
            );
            let ours = map.t.allocation_size();
            if map.t.growing() {
                // The old table and the new one, twice its size: three times the old at most.
                assert!(
                    ours <= 3 * plain.allocation_size() + 64 * slot,
                    "{k}: {ours}"
                );
            } else {
                // At rest, no more than hashbrown's own table of the same entries.
                assert!(ours <= plain.allocation_size(), "{k}: {ours}");
            }
        }
        // An empty table allocates nothing (an idle ledger's maps cost no memory).
        assert_eq!(GrowTable::<Kv>::default().allocation_size(), 0);
        // Emptied by removals, the table keeps its allocation, as hashbrown's does.
        for k in 0..200_000u64 {
            map.remove(k);
        }
        assert_eq!(map.t.len(), 0);
        assert!(map.t.allocation_size() <= plain.allocation_size());
    }

    #[test]
    fn a_full_table_that_churns_stays_bounded_in_work_and_memory() {
        // A full ledger: every new task evicts the oldest. In a table filled to its capacity,
        // removals leave tombstones, which end its room though it holds no more entries
        // (hashbrown would then rehash the whole table in place, or double it, in one insert).
        let mut map = Map::new(64);
        let mut k = 0u64;
        while k < 10_000 || map.t.len() < map.t.new.capacity() {
            map.insert(k, k);
            k += 1;
        }
        let (size, full) = (k, map.t.allocation_size());
        let growths = map.t.work().growths;
        let mut most = 0;
        for k in size..size * 30 {
            let before = state(&map);
            assert_eq!(map.remove(k - size), Some(k - size));
            bounded(&map, before);
            let before = state(&map);
            assert_eq!(map.insert(k, k), None);
            bounded(&map, before);
            assert_eq!(map.t.len() as u64, size);
            most = most.max(map.t.allocation_size());
        }
        // Room made once, by a growth like any other (the tombstones' doing: the table holds
        // no more than it did), and then the table is half full and removals leave none.
        assert_eq!(map.t.work().growths - growths, 1, "{:?}", map.t.work());
        assert!(most <= 3 * full, "{most} against {full}");
        let model: HashMap<u64, u64> = (size * 29..size * 30).map(|k| (k, k)).collect();
        same_as(&map, &model);
    }

    #[test]
    fn retain_keeps_what_it_is_told_in_both_tables() {
        let mut map = Map::new(64);
        let mut k = 0;
        // Stop in the middle of a growth.
        while !(map.t.growing() && k > 10_000) {
            map.insert(k, k);
            k += 1;
        }
        map.t.retain(|e| e.key % 3 == 0);
        let model: HashMap<u64, u64> = (0..k).filter(|k| k % 3 == 0).map(|k| (k, k)).collect();
        same_as(&map, &model);
        for i in 0..k {
            assert_eq!(map.get(i), model.get(&i).copied());
        }
        // The growth goes on and ends.
        for i in k..k + 5_000 {
            map.insert(i, i);
        }
        assert!(!map.t.growing());
    }
}
