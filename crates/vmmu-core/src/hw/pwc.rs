//! The AMD page-walk cache (PWC) of seed 002 §4.1: "a small, fast, fully-associative,
//! physically-tagged page entry cache". A hit keeps a page-entry reference from reaching the
//! memory hierarchy. The walker decides which references may use it (the 1D_PWC, 2D_PWC and
//! 2D_PWC+NT designs of §4.2, and whether `{G,gL1}` / `{nL1,gPA}` are cacheable, §6.2, §6.4)
//! and when it is flushed (Table 2: on each TLB flush).
//!
//! An entry is keyed by the host-physical address of the page entry itself (8-byte entries;
//! 32-bit paging's 4-byte entries are keyed by the address as given), so two entries of one
//! 64-byte line are two PWC entries; the storage holds the address in 4-byte units
//! (`address >> 2`, one-to-one on entry addresses, which are aligned to their 4 or 8 bytes),
//! so entries below 16 GiB fit its 32-bit tags. Seed 002's PWC is fully associative; a
//! set-associative configuration indexes sets by the entry number (`address >> 3`).
//!
//! Speed: a fill almost always follows a lookup of the same entry that missed (the walker looks
//! up, reads memory, fills); the PWC remembers that miss, so such a fill inserts without
//! searching again. Anything else in between forgets it.
//!
//! Simplifications: exact LRU (Table 2 says "LRU"); no entry contents are stored — the walker
//! reads the entry from simulated memory, the PWC only decides where the reference was served.
//! Entry addresses are 4-byte aligned (every format's entries are).

use super::store::{with_store, LruStore, Store};
pub use super::HitMiss;
use crate::addr::Hpa;

/// A page-walk cache of page entries, tagged by their host-physical address.
#[derive(Clone, Debug)]
pub struct Pwc {
    arr: Store<()>,
    stats: HitMiss,
    /// The entry of the last lookup, when it missed and nothing has changed since
    /// ([`NONE`] otherwise): known absent.
    missed: u64,
}

/// No remembered miss (no entry's key: keys are addresses shifted right by 2).
const NONE: u64 = u64::MAX;

/// The storage key of the entry at `entry` (module doc), and its set hash: the entry number.
#[inline(always)]
fn key_of(entry: Hpa) -> (u64, u64) {
    debug_assert_eq!(entry.raw() & 3, 0, "unaligned page entry {entry:?}");
    (entry.raw() >> 2, entry.raw() >> 3)
}

impl Pwc {
    /// `entries` entries in sets of `ways` (seed 002 Table 2: 24 entries, fully associative).
    pub fn new(entries: u32, ways: u32) -> Self {
        Pwc {
            arr: Store::new(entries as usize, ways as usize, ()),
            stats: HitMiss::default(),
            missed: NONE,
        }
    }

    /// Looks up the page entry at `entry`; a hit becomes most recently used. Counts one hit or
    /// miss.
    #[inline(always)]
    pub fn lookup(&mut self, entry: Hpa) -> bool {
        let (key, h) = key_of(entry);
        let hit = with_store!(&mut self.arr, s => {
            let set = s.set_of(h);
            s.lookup(set, key, |_| true).is_some()
        });
        self.stats.count(hit);
        self.missed = if hit { NONE } else { key };
        hit
    }

    /// Caches the page entry at `entry` as most recently used (evicting the LRU entry of its
    /// set when full).
    #[inline(always)]
    pub fn fill(&mut self, entry: Hpa) {
        let (key, h) = key_of(entry);
        let absent = std::mem::replace(&mut self.missed, NONE) == key;
        let done = with_store!(&mut self.arr, s => {
            let set = s.set_of(h);
            if !absent && s.lookup(set, key, |_| true).is_some() {
                true
            } else if s.takes(key) {
                s.insert(set, key, ());
                true
            } else {
                false
            }
        });
        // A key the representation does not take: through the `Store`, which widens.
        if !done {
            self.arr.insert(self.arr.set_of(h), key, ());
        }
    }

    /// Whether `entry` is cached (no LRU update, not counted).
    pub fn contains(&self, entry: Hpa) -> bool {
        let (key, h) = key_of(entry);
        self.arr.find(self.arr.set_of(h), key, |_| true).is_some()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.arr.len()
    }

    /// Bytes of storage.
    pub fn bytes(&self) -> usize {
        self.arr.bytes()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.arr.is_empty()
    }

    /// Drops every entry.
    pub fn flush(&mut self) {
        self.arr.clear();
        self.missed = NONE;
    }

    /// Zeroes the counters (the end of a warm-up); the contents stay.
    pub fn reset_stats(&mut self) {
        self.stats = HitMiss::default();
    }

    /// Adds `o`'s counters to these (the totals of several cores).
    pub fn absorb_stats(&mut self, o: &Self) {
        self.stats += o.stats;
    }

    /// Hits and misses of [`lookup`](Self::lookup).
    pub fn stats(&self) -> HitMiss {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_one_line_are_separate_and_lru_evicts_the_oldest() {
        let mut p = Pwc::new(2, 2);
        assert!(!p.lookup(Hpa::new(0x1000)));
        p.fill(Hpa::new(0x1000));
        p.fill(Hpa::new(0x1008));
        assert!(p.lookup(Hpa::new(0x1000)));
        assert!(!p.lookup(Hpa::new(0x1010)));
        p.fill(Hpa::new(0x1010)); // evicts 0x1008, the least recently used
        assert!(p.contains(Hpa::new(0x1000)));
        assert!(!p.contains(Hpa::new(0x1008)));
        assert_eq!(p.stats(), HitMiss { hits: 1, misses: 2 });
        p.flush();
        assert!(p.is_empty());
    }

    #[test]
    fn a_fill_after_a_missed_lookup_of_another_entry_still_searches() {
        let mut p = Pwc::new(4, 4);
        p.fill(Hpa::new(0x1000));
        assert!(!p.lookup(Hpa::new(0x2000)));
        // The remembered miss is 0x2000; 0x1000 is present and must not be inserted twice.
        p.fill(Hpa::new(0x1000));
        p.fill(Hpa::new(0x2000));
        assert_eq!(p.len(), 2);
        // A flush between a miss and its fill forgets the miss.
        assert!(!p.lookup(Hpa::new(0x3000)));
        p.flush();
        p.fill(Hpa::new(0x3000));
        p.fill(Hpa::new(0x3000));
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn refill_of_a_cached_entry_does_not_duplicate_it() {
        let mut p = Pwc::new(24, 24);
        p.fill(Hpa::new(0x2000));
        p.fill(Hpa::new(0x2000));
        assert_eq!(p.len(), 1);
    }
}
