//! The cache hierarchy that page-entry references (and, by default, data references) go
//! through: set-associative, LRU, write-allocate levels with a hit latency each, and DRAM below
//! (seed 002 Table 2; DESIGN.md "Hardware").
//!
//! Seed 002 §4.1: page entries "are initially brought into the L2 cache and treated like any
//! other data"; they are not cached in L1. So a reference is looked up from a starting level
//! (page entries: the `page_entry_fill` level; data: level 0) downward, and the line is filled
//! into every level from the starting one down to the one above the level that served it.
//! Levels above the starting one never see the line.
//!
//! Speed: the line of the last reference looked up from level 0 is remembered: it is then the
//! most recently used line of its set there, and only references from level 0 change level 0,
//! so a reference to the same line from level 0 is an L1 hit that changes no order — counted
//! without a search. Streams make about seven such references in eight.
//!
//! Simplifications: a reference costs the latency of the level that serves it (or the DRAM
//! latency), not a sum along the way; levels are neither inclusive nor exclusive (an eviction
//! at one level leaves the others alone, no back-invalidation); loads and stores are treated
//! alike (write-allocate, no write-back traffic); no MSHRs, prefetchers or bandwidth limits;
//! set index = line number modulo the set count; exact LRU.

use super::store::{with_store, LruStore, Store};
pub use super::HitMiss;
use crate::addr::Hpa;
use crate::config::CacheConfig;

/// The most cache levels a machine may have ([`CacheConfig::MAX_LEVELS`]).
pub const MAX_LEVELS: usize = CacheConfig::MAX_LEVELS;

/// One cache level.
#[derive(Clone, Debug)]
struct Level {
    name: String,
    arr: Store<()>,
    latency: u32,
    shared: bool,
    stats: HitMiss,
}

/// The cache levels and DRAM of one core.
#[derive(Clone, Debug)]
pub struct MemoryHierarchy {
    levels: Vec<Level>,
    line_shift: u32,
    dram_latency: u32,
    /// The line of the last reference from level 0 (`u64::MAX`: none, or no levels).
    last_l1: u64,
}

impl MemoryHierarchy {
    /// Builds the levels from their (validated) config: each holds `size / line` lines in sets
    /// of `ways`.
    pub fn new(cfg: &CacheConfig) -> Self {
        let line = cfg.line.max(1) as u64;
        MemoryHierarchy {
            levels: cfg
                .levels
                .iter()
                .map(|l| Level {
                    name: l.name.clone(),
                    arr: Store::new((l.size.0 / line) as usize, l.ways as usize, ()),
                    latency: l.latency,
                    shared: l.shared,
                    stats: HitMiss::default(),
                })
                .collect(),
            line_shift: line.trailing_zeros(),
            dram_latency: cfg.dram_latency,
            last_l1: u64::MAX,
        }
    }

    /// Index of the level called `name` (`"l1"`, `"l2"`, ...).
    pub fn level_index(&self, name: &str) -> Option<usize> {
        self.levels.iter().position(|l| l.name == name)
    }

    /// Number of cache levels; as a level index it means DRAM.
    #[inline]
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// One reference to `addr` looked up from level `from` downward (page entries start at the
    /// `page_entry_fill` level, data at 0). Returns the index of the level that served it
    /// (`levels()` means DRAM) and its latency in cycles (that level's `latency`, or the DRAM
    /// latency). Fills the line into every level from `from` down to the one above the server,
    /// so page entries never enter levels above `from`. Counts a hit or miss at each level
    /// looked up.
    #[inline(always)]
    pub fn access(&mut self, addr: Hpa, from: usize) -> (usize, u32) {
        let line = addr.raw() >> self.line_shift;
        // `last_l1` is `u64::MAX` without levels, which no line number equals.
        if from == 0 && line == self.last_l1 {
            let l = &mut self.levels[0];
            l.stats.hits += 1;
            return (0, l.latency);
        }
        self.access_levels(line, from)
    }

    /// [`access`](Self::access) of `line` past the remembered line: the level search.
    #[inline(never)]
    fn access_levels(&mut self, line: u64, from: usize) -> (usize, u32) {
        let n = self.levels.len();
        debug_assert!(from <= n, "level {from} of {n}");
        if from == 0 && n > 0 {
            self.last_l1 = line;
        }
        // A level that misses is filled at once: the levels are independent, so this is the
        // same as filling every level above the server afterwards, without finding the set
        // twice.
        for i in from..n {
            let l = &mut self.levels[i];
            let hit = match with_store!(&mut l.arr, s => lookup_fill(s, line)) {
                Some(hit) => hit,
                None => {
                    l.arr.insert(l.arr.set_of(line), line, ());
                    false
                }
            };
            if hit {
                l.stats.hits += 1;
                return (i, l.latency);
            }
            l.stats.misses += 1;
        }
        (n, self.dram_latency)
    }

    /// `log2` of the line size: an address's line number is the address shifted right by it.
    #[inline]
    pub fn line_shift(&self) -> u32 {
        self.line_shift
    }

    /// The line number [`access`](Self::access) from level 0 answers as an L1 hit without a
    /// search (`u64::MAX`: none): the line of the last reference from level 0.
    #[inline]
    pub fn remembered_line(&self) -> u64 {
        self.last_l1
    }

    /// Counts `n` references from level 0 to the [`remembered_line`](Self::remembered_line):
    /// what `n` calls of [`access`](Self::access) for it would have counted.
    #[inline]
    pub fn count_remembered(&mut self, n: u64) {
        if n > 0 {
            self.levels[0].stats.hits += n;
        }
    }

    /// Whether level `level` holds the line of `addr` (no LRU update, not counted).
    pub fn contains(&self, level: usize, addr: Hpa) -> bool {
        let line = addr.raw() >> self.line_shift;
        self.levels
            .get(level)
            .is_some_and(|l| l.arr.find(l.arr.set_of(line), line, |_| true).is_some())
    }

    /// Bytes of storage of each level, in level order.
    pub fn bytes(&self) -> Vec<usize> {
        self.levels.iter().map(|l| l.arr.bytes()).collect()
    }

    /// Drops every line of every level.
    pub fn flush(&mut self) {
        for l in &mut self.levels {
            l.arr.clear();
        }
        self.last_l1 = u64::MAX;
    }

    /// Zeroes every level's counters (the end of a warm-up); the contents stay.
    pub fn reset_stats(&mut self) {
        for l in &mut self.levels {
            l.stats = HitMiss::default();
        }
    }

    /// Adds `o`'s per-level counters to these (the totals of several cores).
    pub fn absorb_stats(&mut self, o: &MemoryHierarchy) {
        for (l, ol) in self.levels.iter_mut().zip(&o.levels) {
            l.stats += ol.stats;
        }
    }

    /// Exchanges the levels shared by every core with `o`'s: one core's hierarchy holds the
    /// shared levels while it runs, so the cores of a multi-vCPU run share one copy.
    pub fn swap_shared(&mut self, o: &mut MemoryHierarchy) {
        for (l, ol) in self.levels.iter_mut().zip(o.levels.iter_mut()) {
            if l.shared {
                std::mem::swap(l, ol);
            }
        }
    }

    /// Per-level counters: `("l1", HitMiss)`, ... in level order.
    pub fn stats(&self) -> Vec<(String, HitMiss)> {
        self.named(&self.counts())
    }

    /// Per-level counters as plain values, in level order (zero beyond the last level): what a
    /// copy of a running simulation's counters holds.
    pub fn counts(&self) -> [HitMiss; MAX_LEVELS] {
        let mut c = [HitMiss::default(); MAX_LEVELS];
        for (c, l) in c.iter_mut().zip(&self.levels) {
            *c = l.stats;
        }
        c
    }

    /// `counts` (of [`counts`](Self::counts), at any moment of this hierarchy's run) named
    /// as [`stats`](Self::stats) names them.
    pub fn named(&self, counts: &[HitMiss; MAX_LEVELS]) -> Vec<(String, HitMiss)> {
        self.levels
            .iter()
            .zip(counts)
            .map(|(l, &c)| (l.name.clone(), c))
            .collect()
    }
}

/// One level's part of a reference to `line`: a hit becomes the most recently used line of
/// its set, a miss is filled (evicting the least recently used line). Returns whether it hit;
/// `None` for a miss of a line the representation does not take, left unfilled (the caller
/// fills it through the `Store`, which changes representation).
#[inline(always)]
fn lookup_fill<S: LruStore<()>>(s: &mut S, line: u64) -> Option<bool> {
    let set = s.set_of(line);
    if s.lookup(set, line, |_| true).is_some() {
        return Some(true);
    }
    if !s.takes(line) {
        return None;
    }
    s.insert(set, line, ());
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Bytes, CacheLevelConfig};

    fn level(name: &str, size: u64, ways: u32, latency: u32) -> CacheLevelConfig {
        CacheLevelConfig {
            name: name.into(),
            size: Bytes(size),
            ways,
            latency,
            shared: false,
        }
    }

    /// Seed 002 Table 2's hierarchy as the bhargava08 preset sets it.
    fn bhargava() -> MemoryHierarchy {
        MemoryHierarchy::new(&CacheConfig {
            line: 64,
            levels: vec![
                level("l1", 64 << 10, 2, 3),
                level("l2", 512 << 10, 16, 11),
                level("l3", 2 << 20, 32, 40),
            ],
            dram_latency: 120,
            page_entry_fill: "l2".into(),
            data: true,
        })
    }

    #[test]
    fn cold_access_costs_dram_latency_then_hits_where_it_was_filled() {
        let mut m = bhargava();
        assert_eq!(m.levels(), 3);
        assert_eq!(m.access(Hpa::new(0x12_3440), 0), (3, 120));
        assert_eq!(m.access(Hpa::new(0x12_3478), 0), (0, 3)); // same 64-byte line
        assert_eq!(m.access(Hpa::new(0x12_3480), 0), (3, 120)); // next line
        let s = m.stats();
        assert_eq!(s[0], ("l1".to_string(), HitMiss { hits: 1, misses: 2 }));
        assert_eq!(s[1].1, HitMiss { hits: 0, misses: 2 });
        assert_eq!(s[2].1, HitMiss { hits: 0, misses: 2 });
    }

    #[test]
    fn page_entries_filled_into_l2_never_appear_in_l1() {
        let mut m = bhargava();
        let l2 = m.level_index("l2").unwrap();
        assert_eq!(l2, 1);
        assert_eq!(m.access(Hpa::new(0x4000), l2), (3, 120));
        assert!(!m.contains(0, Hpa::new(0x4000)));
        assert!(m.contains(1, Hpa::new(0x4000)) && m.contains(2, Hpa::new(0x4000)));
        assert_eq!(m.access(Hpa::new(0x4008), l2), (1, 11));
        assert!(!m.contains(0, Hpa::new(0x4000)));
        assert_eq!(m.stats()[0].1, HitMiss::default());
        // A data reference to the same line hits L2 and only then enters L1.
        assert_eq!(m.access(Hpa::new(0x4010), 0), (1, 11));
        assert!(m.contains(0, Hpa::new(0x4000)));
        assert_eq!(m.level_index("l4"), None);
    }

    #[test]
    fn lru_eviction_in_a_two_way_set() {
        let mut m = MemoryHierarchy::new(&CacheConfig {
            line: 64,
            levels: vec![level("l1", 256, 2, 1)], // 2 sets of 2 ways
            dram_latency: 100,
            page_entry_fill: "l1".into(),
            data: true,
        });
        // Lines 0, 2, 4 map to set 0.
        let (a, b, c) = (Hpa::new(0), Hpa::new(128), Hpa::new(256));
        m.access(a, 0);
        m.access(b, 0);
        assert_eq!(m.access(a, 0), (0, 1)); // a is now MRU
        assert_eq!(m.access(c, 0), (1, 100)); // evicts b
        assert_eq!(m.access(a, 0), (0, 1));
        assert_eq!(m.access(b, 0), (1, 100));
        m.flush();
        assert_eq!(m.access(a, 0), (1, 100));
    }
}
