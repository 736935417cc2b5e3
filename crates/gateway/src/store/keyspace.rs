//! Where each key lives: the partitions of the Redis keyspace.
//!
//! A task, its webhook lanes and the delivery stream that carries their tokens belong to one
//! partition, `hash(task_id) mod P`. Each partition is one Redis Cluster hash tag (the first
//! `{...}` of a key is what Redis hashes), so every Lua script, which may only touch keys of one
//! slot, stays within one partition, and the partitions spread over the masters. P is fixed for
//! the life of the data: a task's keys are found by recomputing its partition.
//!
//! The tags are chosen so that partition `i`'s slot falls in the `i`-th of P equal ranges of the
//! 16384 slots: a cluster made by `redis-cli --cluster create` gives each master one contiguous
//! range, so the partitions spread over the masters as evenly as P allows (a plain `{0}`..`{15}`
//! lands wherever CRC16 puts it, three or four partitions to a master at best, seven at worst).

/// Slots in a Redis Cluster.
const SLOTS: u32 = 16_384;

/// The keys of one prefix, split into partitions (see the module doc).
#[derive(Debug, Clone)]
pub struct Keyspace {
    prefix: String,
    parts: Box<[Part]>,
}

/// One partition's key prefixes, made once: the apply script takes them on every create.
#[derive(Debug, Clone)]
pub struct Part {
    /// `{prefix}{tag}:`, what every key of the partition starts with.
    pub prefix: Box<str>,
    /// `{part}state:`, the per-state indexes.
    pub state: Box<str>,
    /// `{part}wh:`, the webhook keys.
    pub wh: Box<str>,
    /// The partition's change channel.
    pub changes: Box<str>,
}

/// The Redis channel of a partition's changes (`part` is the partition's key prefix, so the
/// channel has its hash tag: a script may publish on a shard channel of its own slot only).
/// Versioned with its message format (`ledger::changes::decode`): replicas of different
/// formats, side by side during a rolling upgrade, then do not hear each other's changes (their
/// `/events` clients miss the other side's until the upgrade is done) rather than misread them.
/// Version 2 added the owner; version 3 split the channel by partition.
fn change_channel(part: &str) -> String {
    format!("{part}changes:3")
}

/// The Redis Cluster slot of a key (CRC16/XMODEM of its hash tag, or of the whole key).
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    (crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) as u32 % SLOTS) as u16
}

/// A key in the same slot as `key`, for a replication fence (`Store::replicated`): `key:fence`
/// when `key` has a hash tag, `{key}:fence` otherwise; `None` if neither lands in its slot.
pub fn fence(key: &str) -> Option<String> {
    let want = slot(key.as_bytes());
    [format!("{key}:fence"), format!("{{{key}}}:fence")]
        .into_iter()
        .find(|f| slot(f.as_bytes()) == want)
}

/// FNV-1a: a task id's partition. Stable across versions and replicas by construction (it is
/// part of the data layout), and cheap.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Keyspace {
    /// The partitions of `prefix` (no braces: checked by the config), `partitions` of them (1
    /// or more).
    pub fn new(prefix: &str, partitions: u16) -> Keyspace {
        let n = u32::from(partitions.max(1));
        let parts = (0..n)
            .map(|i| {
                let (lo, hi) = (i * SLOTS / n, (i + 1) * SLOTS / n);
                // About n tries on average: the first suffix whose slot lands in range i.
                let tag = (0u32..)
                    .map(|k| format!("{i}.{k}"))
                    .find(|t| (lo..hi).contains(&u32::from(slot(t.as_bytes()))))
                    .unwrap_or_else(|| i.to_string());
                let part = format!("{prefix}{{{tag}}}:");
                Part {
                    state: format!("{part}state:").into(),
                    wh: format!("{part}wh:").into(),
                    changes: change_channel(&part).into(),
                    prefix: part.into(),
                }
            })
            .collect();
        Keyspace {
            prefix: prefix.to_owned(),
            parts,
        }
    }

    /// How many partitions.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Never: there is at least one partition.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The partition of a task.
    pub fn of(&self, task_id: &str) -> usize {
        (fnv1a(task_id.as_bytes()) % self.parts.len() as u64) as usize
    }

    /// The key prefix of partition `p`: `{prefix}{tag}:`.
    pub fn part(&self, p: usize) -> &str {
        &self.parts[p % self.parts.len()].prefix
    }

    /// Partition `p`'s prefixes.
    pub fn prefixes(&self, p: usize) -> &Part {
        &self.parts[p % self.parts.len()]
    }

    /// Every partition's key prefix, in order.
    pub fn parts(&self) -> impl Iterator<Item = &str> + '_ {
        self.parts.iter().map(|p| &*p.prefix)
    }

    /// Every partition's change channel, in order.
    pub fn change_channels(&self) -> impl Iterator<Item = &str> + '_ {
        self.parts.iter().map(|p| &*p.changes)
    }

    /// The prefix of keys that belong to no partition (idempotency keys, artifacts: one key
    /// each, touched alone).
    pub fn global(&self) -> &str {
        &self.prefix
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot(b"123456789"), 0x31c3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
    }

    #[test]
    fn fences_share_their_keys_slot() {
        for key in [
            "a2a:{3.1}:task:x",
            "a2a:idem:a:k",
            "a2a:artifact:z",
            "odd}key",
        ] {
            if let Some(f) = fence(key) {
                assert_eq!(slot(f.as_bytes()), slot(key.as_bytes()), "{key} -> {f}");
            }
        }
        assert!(fence("a2a:idem:a:k").is_some());
        assert_eq!(
            fence("a2a:{3.1}:task:x").as_deref(),
            Some("a2a:{3.1}:task:x:fence")
        );
    }

    #[test]
    fn partitions_spread_evenly_over_the_slots() {
        let k = Keyspace::new("a2a:", 16);
        assert_eq!(k.len(), 16);
        for (i, p) in k.parts().enumerate() {
            assert!(p.starts_with("a2a:{") && p.ends_with("}:"), "{p}");
            let s = u32::from(slot(format!("{p}task:x").as_bytes()));
            assert!(
                (i as u32 * 1024..(i as u32 + 1) * 1024).contains(&s),
                "{p} -> {s}"
            );
        }
        // Three masters of `redis-cli --cluster create` own 0-5460, 5461-10922, 10923-16383.
        let mut per = [0; 3];
        for p in k.parts() {
            per[match slot(p.as_bytes()) {
                0..=5460 => 0,
                5461..=10922 => 1,
                _ => 2,
            }] += 1;
        }
        assert!(per.iter().all(|&n| (5..=6).contains(&n)), "{per:?}");
    }

    #[test]
    fn a_task_has_one_partition_and_tasks_spread() {
        let k = Keyspace::new("x:", 16);
        assert_eq!(k.of("abc"), k.of("abc"));
        let mut seen = [0usize; 16];
        for i in 0..1600 {
            seen[k.of(&uuid::Uuid::from_u128(i).to_string())] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        let one = Keyspace::new("x:", 1);
        assert_eq!(one.of("anything"), 0);
    }
}
