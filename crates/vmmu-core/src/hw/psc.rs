//! Intel paging-structure caches (Intel SDM Vol. 3A §4.10.3): for each upper paging level —
//! 5 (PML5E, LA57 only), 4 (PML4E), 3 (PDPTE), 2 (PDE) — a small cache of the entries that
//! reference a next-lower paging structure, tagged by the address bits that select the entry
//! (and by the PCID/VPID-style tag the caller passes). A walk looks all of them up, takes the
//! entry of the *lowest* level that hits, and starts by reading the table that entry points to,
//! skipping every reference above it (SDM §4.10.3.2).
//!
//! One `Psc` serves one dimension of translation: the walker owns one for the guest dimension
//! (gVA → gPA tables) and, in nested mode, one for the nested dimension (gPA → hPA tables). The
//! next-table base is a raw `u64` in whichever space that dimension's tables live.
//!
//! Simplifications: each level is a fully-associative LRU array (sizes from `PscConfig`, 0 =
//! absent; real sizes are implementation-specific, SDM §4.10.3.1); a lookup touches only the
//! entry it uses; permissions and A/D state of cached entries are not kept (the walker checks
//! them when it fills); entries that map a large page are never cached here (the SDM caches
//! only entries that reference a paging structure — the caller's rule to follow).

use super::store::{LruStore, Store};
pub use super::HitMiss;
use crate::config::PscConfig;

/// The lowest level with a paging-structure cache (PDE cache).
const LOWEST: u8 = 2;
/// The highest (PML5E cache).
const HIGHEST: u8 = 5;

/// The address bits that select the entry of `level`: `addr >> (12 + 9 * (level - 1))`.
#[inline]
pub fn prefix(addr: u64, level: u8) -> u64 {
    addr >> (12 + 9 * (level as u32 - 1))
}

/// Paging-structure caches for levels 2..=5 of one dimension.
#[derive(Clone, Debug)]
pub struct Psc {
    /// Index `level - 2`; `None` when the config gives 0 entries.
    levels: [Option<Store<(u32, u64)>>; 4],
    stats: HitMiss,
}

impl Psc {
    /// Builds the caches: `pde`, `pdpt`, `pml4`, `pml5` entries for levels 2, 3, 4, 5.
    pub fn new(cfg: &PscConfig) -> Self {
        let make = |n: u32| (n > 0).then(|| Store::new(n as usize, n as usize, (0u32, 0u64)));
        Psc {
            levels: [
                make(cfg.pde),
                make(cfg.pdpt),
                make(cfg.pml4),
                make(cfg.pml5),
            ],
            stats: HitMiss::default(),
        }
    }

    /// Longest-prefix lookup over levels 2..=`top_level` (4 or 5): returns the *lowest* level
    /// whose entry for `addr` with `tag` is cached, and that entry's next-table base, i.e. the
    /// walk may start by reading the table of level `level - 1`. The entry used becomes most
    /// recently used. Counts one hit (`Some`) or one miss (`None`).
    #[inline]
    pub fn lookup(&mut self, addr: u64, tag: u32, top_level: u8) -> Option<(u8, u64)> {
        for level in LOWEST..=top_level.min(HIGHEST) {
            if let Some(arr) = &mut self.levels[(level - LOWEST) as usize] {
                if let Some(w) = arr.find(0, prefix(addr, level), |e| e.0 == tag) {
                    self.stats.hits += 1;
                    return Some((level, arr.touch(0, w).1));
                }
            }
        }
        self.stats.misses += 1;
        None
    }

    /// Caches the entry of `level` (2..=5) for `addr` with `tag`, pointing to the next table at
    /// `next_table`, as the most recently used entry of that level. Levels without a cache (or
    /// out of range) are ignored.
    pub fn fill(&mut self, addr: u64, tag: u32, level: u8, next_table: u64) {
        if !(LOWEST..=HIGHEST).contains(&level) {
            return;
        }
        if let Some(arr) = &mut self.levels[(level - LOWEST) as usize] {
            let key = prefix(addr, level);
            match arr.find(0, key, |e| e.0 == tag) {
                Some(w) => arr.touch(0, w).1 = next_table,
                None => {
                    arr.insert(0, key, (tag, next_table));
                }
            }
        }
    }

    /// Entries held at `level` (0 for a level without a cache).
    pub fn len(&self, level: u8) -> usize {
        if !(LOWEST..=HIGHEST).contains(&level) {
            return 0;
        }
        self.levels[(level - LOWEST) as usize]
            .as_ref()
            .map_or(0, |a| a.len())
    }

    /// Bytes of storage of every level.
    pub fn bytes(&self) -> usize {
        self.levels.iter().flatten().map(|a| a.bytes()).sum()
    }

    /// Drops every entry of every level.
    pub fn flush(&mut self) {
        for a in self.levels.iter_mut().flatten() {
            a.clear();
        }
    }

    /// Drops the entries with `tag` at every level.
    pub fn flush_tag(&mut self, tag: u32) {
        for a in self.levels.iter_mut().flatten() {
            a.retain(|_, e| e.0 != tag);
        }
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

    fn cfg(pml5: u32, pml4: u32, pdpt: u32, pde: u32) -> PscConfig {
        PscConfig {
            pml5,
            pml4,
            pdpt,
            pde,
            latency: 2,
        }
    }

    #[test]
    fn lookup_returns_the_lowest_cached_level() {
        let mut p = Psc::new(&cfg(0, 2, 4, 32));
        let va = 0x7f12_3456_7000u64;
        assert_eq!(p.lookup(va, 0, 4), None);
        p.fill(va, 0, 4, 0x1000);
        p.fill(va, 0, 3, 0x2000);
        assert_eq!(p.lookup(va, 0, 4), Some((3, 0x2000)));
        p.fill(va, 0, 2, 0x3000);
        assert_eq!(p.lookup(va, 0, 4), Some((2, 0x3000)));
        // Another 2 MiB region under the same PDPTE: the PDE cache misses, the PDPTE hits.
        assert_eq!(p.lookup(va + (2 << 20), 0, 4), Some((3, 0x2000)));
        // Another 1 GiB region under the same PML4E.
        assert_eq!(p.lookup(va + (1 << 30), 0, 4), Some((4, 0x1000)));
        // Another tag hits nothing.
        assert_eq!(p.lookup(va, 1, 4), None);
        assert_eq!(p.stats(), HitMiss { hits: 4, misses: 2 });
    }

    #[test]
    fn absent_levels_and_top_level_limit_the_search() {
        let mut p = Psc::new(&cfg(1, 0, 0, 0));
        let va = 0x00ab_cdef_0000_0000u64;
        p.fill(va, 0, 4, 0x1000); // no PML4E cache: ignored
        p.fill(va, 0, 5, 0x5000);
        assert_eq!(p.len(4), 0);
        assert_eq!(p.lookup(va, 0, 4), None);
        assert_eq!(p.lookup(va, 0, 5), Some((5, 0x5000)));
        p.flush_tag(1);
        assert_eq!(p.len(5), 1);
        p.flush_tag(0);
        assert_eq!(p.len(5), 0);
    }

    #[test]
    fn pde_cache_evicts_its_least_recently_used_entry() {
        let mut p = Psc::new(&cfg(0, 0, 0, 2));
        let mb2 = 2u64 << 20;
        p.fill(0, 0, 2, 0xa000);
        p.fill(mb2, 0, 2, 0xb000);
        assert_eq!(p.lookup(0, 0, 4), Some((2, 0xa000)));
        p.fill(2 * mb2, 0, 2, 0xc000); // evicts the entry for mb2
        assert_eq!(p.lookup(mb2, 0, 4), None);
        assert_eq!(p.lookup(0, 0, 4), Some((2, 0xa000)));
        assert_eq!(p.lookup(2 * mb2, 0, 4), Some((2, 0xc000)));
    }
}
