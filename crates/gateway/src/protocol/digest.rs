//! A stable 64-bit digest of bytes: the same value on every replica and every build, so a
//! digest one replica stores in Redis is compared by another (a hasher with per-process keys
//! would not do, and std's is not promised to stay the same across releases).
//!
//! Not a defence against collisions made on purpose: a digest only tells the ledger whether
//! what a task says besides its state changed (`task::TaskRef::content`), so a crafted
//! collision can at most keep one push of the crafter's own task from being sent.

/// The digest being written: 8 bytes at a time, multiplied and folded (a wyhash-like mix).
#[derive(Debug, Clone)]
pub struct Digest {
    h: u64,
    tail: u64,
    tail_len: u32,
    len: u64,
}

const K0: u64 = 0x9E37_79B9_7F4A_7C15;
const K1: u64 = 0xBF58_476D_1CE4_E5B9;

fn mix(h: u64, w: u64) -> u64 {
    let x = (h ^ w).wrapping_mul(K1);
    x ^ (x >> 29)
}

impl Default for Digest {
    fn default() -> Self {
        Digest {
            h: K0,
            tail: 0,
            tail_len: 0,
            len: 0,
        }
    }
}

impl Digest {
    /// Add `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        self.len = self.len.wrapping_add(bytes.len() as u64);
        let mut rest = bytes;
        // Fill the pending word first.
        while self.tail_len > 0 && !rest.is_empty() {
            self.tail |= u64::from(rest[0]) << (8 * self.tail_len);
            self.tail_len += 1;
            rest = &rest[1..];
            if self.tail_len == 8 {
                self.h = mix(self.h, self.tail);
                self.tail = 0;
                self.tail_len = 0;
            }
        }
        let mut words = rest.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.h = mix(self.h, u64::from_le_bytes(b));
        }
        for &b in words.remainder() {
            self.tail |= u64::from(b) << (8 * self.tail_len);
            self.tail_len += 1;
        }
    }

    /// The digest of what was written (never 0: 0 means "none" to its readers).
    pub fn finish(&self) -> u64 {
        let mut h = self.h;
        if self.tail_len > 0 {
            h = mix(h, self.tail);
        }
        h = mix(h, self.len);
        let h = (h ^ (h >> 32)).wrapping_mul(K0);
        let h = h ^ (h >> 31);
        if h == 0 {
            1
        } else {
            h
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(parts: &[&[u8]]) -> u64 {
        let mut d = Digest::default();
        for p in parts {
            d.write(p);
        }
        d.finish()
    }

    #[test]
    fn the_same_bytes_however_split_give_the_same_digest() {
        let text: Vec<u8> = (0..100u8).collect();
        let whole = of(&[&text]);
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(of(&[a, b]), whole, "cut at {cut}");
            for cut2 in cut..text.len() {
                let (b1, c) = text[cut..].split_at(cut2 - cut);
                assert_eq!(of(&[a, b1, c]), whole, "cut at {cut}, {cut2}");
            }
        }
    }

    #[test]
    fn a_change_anywhere_changes_the_digest_and_none_is_zero() {
        let text: Vec<u8> = b"{\"artifacts\":[{\"parts\":[{\"text\":\"tick 1\"}]}]}".to_vec();
        let base = of(&[&text]);
        for i in 0..text.len() {
            let mut t = text.clone();
            t[i] ^= 1;
            assert_ne!(of(&[&t]), base, "byte {i}");
        }
        // Lengths count: trailing zero bytes are not nothing.
        assert_ne!(of(&[b"a"]), of(&[b"a\0"]));
        assert_ne!(of(&[]), 0);
        assert_ne!(of(&[b""]), 0);
    }

    #[test]
    fn the_digest_is_stable_across_builds() {
        // Fixed values: a replica of another build must compute the same digest for the same
        // bytes (they are compared in Redis). Changing the function changes these.
        assert_eq!(of(&[b""]), of(&[]));
        let known = of(&[b"tick 1"]);
        assert_eq!(known, of(&[b"tick", b" 1"]));
        assert_eq!(known, 0xfeff_c5f2_819c_eabc);
        assert_eq!(of(&[b""]), 0xb40a_18cc_22e8_1626);
        assert_eq!(of(&[&[7u8; 37]]), 0x89a0_ad33_9788_e0a4);
    }
}
