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
//! The levels' storage is one concrete list chosen for the hierarchy's shape when the machine
//! is built (`LevelStores`: the shapes of the presets' hierarchies, the general list of
//! [`Store`]s for any other), matched once per reference, so that within a reference the
//! number of levels and each level's representation are constants and each level's lookup and
//! fill is one pass over its set ([`LruStore::lookup_fill`]); the model is the same whatever
//! the choice (tests/hw_model.rs compares them). A line beyond [`Narrow`]'s 32-bit tags turns
//! the storage into the general list with the same lines and recency orders.
//!
//! Simplifications: a reference costs the latency of the level that serves it (or the DRAM
//! latency), not a sum along the way; levels are neither inclusive nor exclusive (an eviction
//! at one level leaves the others alone, no back-invalidation); loads and stores are treated
//! alike (write-allocate, no write-back traffic); no MSHRs, prefetchers or bandwidth limits;
//! set index = line number modulo the set count; exact LRU.

use super::assoc::LruStore;
use super::narrow::Narrow;
use super::small::Small;
use super::store::{Concrete, Store};
pub use super::HitMiss;
use crate::addr::Hpa;
use crate::config::CacheConfig;

/// Runs `$body` with `$l` bound to the [`Levels`] of the [`LevelStores`] `$stores` (an
/// expression of type `&LevelStores` or `&mut LevelStores`): `$body` is compiled once per
/// variant.
macro_rules! with_levels {
    ($stores:expr, $l:ident => $body:expr) => {
        match $stores {
            LevelStores::Small2Narrow16Narrow32($l) => $body,
            LevelStores::Narrow8Narrow8Narrow16($l) => $body,
            LevelStores::Narrow8Narrow16Narrow32($l) => $body,
            LevelStores::Narrow16Narrow16Narrow16($l) => $body,
            LevelStores::Narrow8Narrow8($l) => $body,
            LevelStores::General($l) => $body,
        }
    };
}

/// The most cache levels a machine may have ([`CacheConfig::MAX_LEVELS`]).
pub const MAX_LEVELS: usize = CacheConfig::MAX_LEVELS;

/// What a level is besides its storage and counters.
#[derive(Clone, Debug)]
struct Level {
    name: String,
    shared: bool,
}

/// The cache levels and DRAM of one core.
#[derive(Clone, Debug)]
pub struct MemoryHierarchy {
    stores: LevelStores,
    /// Each level's hits and misses, in level order (zero beyond the last level).
    stats: [HitMiss; MAX_LEVELS],
    /// Each level's hit latency, in level order, then the DRAM latency.
    latency: [u32; MAX_LEVELS + 1],
    levels: Vec<Level>,
    line_shift: u32,
    /// The line of the last reference from level 0 (`u64::MAX`: none, or no levels).
    last_l1: u64,
}

impl MemoryHierarchy {
    /// Builds the levels from their (validated) config: each holds `size / line` lines in sets
    /// of `ways`, their storage in the representation chosen for the hierarchy's shape.
    pub fn new(cfg: &CacheConfig) -> Self {
        let mut m = Self::general(cfg);
        m.stores = LevelStores::specialise(std::mem::replace(
            &mut m.stores,
            LevelStores::General(vec![]),
        ));
        m
    }

    /// [`new`](Self::new) with the levels' storage in the general list whatever the shape:
    /// the same model (for tests that compare the two).
    pub fn general(cfg: &CacheConfig) -> Self {
        assert!(
            cfg.levels.len() <= MAX_LEVELS,
            "{} cache levels, at most {MAX_LEVELS}",
            cfg.levels.len()
        );
        let line = cfg.line.max(1) as u64;
        let mut latency = [0; MAX_LEVELS + 1];
        for (lat, l) in latency.iter_mut().zip(&cfg.levels) {
            *lat = l.latency;
        }
        latency[cfg.levels.len()] = cfg.dram_latency;
        MemoryHierarchy {
            stores: LevelStores::General(
                cfg.levels
                    .iter()
                    .map(|l| Store::new((l.size.0 / line) as usize, l.ways as usize, ()))
                    .collect(),
            ),
            stats: [HitMiss::default(); MAX_LEVELS],
            latency,
            levels: cfg
                .levels
                .iter()
                .map(|l| Level {
                    name: l.name.clone(),
                    shared: l.shared,
                })
                .collect(),
            line_shift: line.trailing_zeros(),
            last_l1: u64::MAX,
        }
    }

    /// The name of the representation of the levels' storage (`"general"`, or the shape's:
    /// `"small2-narrow16-narrow32"`, ...), for tests and reports.
    pub fn representation(&self) -> &'static str {
        self.stores.name()
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
            self.stats[0].hits += 1;
            return (0, self.latency[0]);
        }
        self.access_levels(line, from)
    }

    /// [`access`](Self::access) of `line` past the remembered line: the level search, the
    /// storage's shape matched once. The general list is searched out of line
    /// ([`access_general`](Self::access_general), a tail call), so that the concrete lists'
    /// search makes no call, and saves one register where a caller of the list's search saves
    /// six.
    #[inline(never)]
    fn access_levels(&mut self, line: u64, from: usize) -> (usize, u32) {
        debug_assert!(from <= self.levels(), "level {from} of {}", self.levels());
        let served = match &mut self.stores {
            LevelStores::General(_) => None,
            stores => {
                // A concrete list has levels.
                if from == 0 {
                    self.last_l1 = line;
                }
                let stats = &mut self.stats;
                with_levels!(stores, l => {
                    if l.takes(line) {
                        l.access(line, from, 0, stats)
                    } else {
                        None
                    }
                })
            }
        };
        match served {
            Some(i) => (i, self.latency[i]),
            None => self.access_general(line, from),
        }
    }

    /// [`access_levels`](Self::access_levels) in the general list of stores, where the
    /// storage is that list or a concrete one does not take `line` (which turns it into the
    /// list first).
    #[inline(never)]
    fn access_general(&mut self, line: u64, from: usize) -> (usize, u32) {
        if from == 0 && !self.levels.is_empty() {
            self.last_l1 = line;
        }
        if !matches!(self.stores, LevelStores::General(_)) {
            self.stores.generalise();
        }
        let served = match &mut self.stores {
            LevelStores::General(l) => l.access(line, from, 0, &mut self.stats),
            _ => None,
        }
        .expect("the general list takes every line");
        (served, self.latency[served])
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
            self.stats[0].hits += n;
        }
    }

    /// Whether level `level` holds the line of `addr` (no LRU update, not counted).
    pub fn contains(&self, level: usize, addr: Hpa) -> bool {
        let line = addr.raw() >> self.line_shift;
        with_levels!(&self.stores, l => Levels::contains(l, level, line))
    }

    /// Bytes of storage of each level, in level order.
    pub fn bytes(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.levels.len());
        with_levels!(&self.stores, l => Levels::bytes(l, &mut out));
        out
    }

    /// Drops every line of every level.
    pub fn flush(&mut self) {
        with_levels!(&mut self.stores, l => Levels::flush(l));
        self.last_l1 = u64::MAX;
    }

    /// Zeroes every level's counters (the end of a warm-up); the contents stay.
    pub fn reset_stats(&mut self) {
        self.stats = [HitMiss::default(); MAX_LEVELS];
    }

    /// Adds `o`'s per-level counters to these (the totals of several cores).
    pub fn absorb_stats(&mut self, o: &MemoryHierarchy) {
        for (s, os) in self.stats.iter_mut().zip(&o.stats) {
            *s += *os;
        }
    }

    /// Exchanges the levels shared by every core with `o`'s (their lines and counters): one
    /// core's hierarchy holds the shared levels while it runs, so the cores of a multi-vCPU
    /// run share one copy. `o` has the same config.
    pub fn swap_shared(&mut self, o: &mut MemoryHierarchy) {
        for (i, l) in self.levels.iter().enumerate() {
            if l.shared {
                std::mem::swap(&mut self.stats[i], &mut o.stats[i]);
                self.stores.swap_level(&mut o.stores, i);
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
        self.stats
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

/// The levels' storage, in the representation chosen for the hierarchy's shape when the
/// machine is built: for each shape the machine presets give their caches, one concrete list
/// — the number of levels and each level's representation fixed, so that within an access's
/// arm they are constants — and the general list of [`Store`]s for any other shape. An
/// operation matches the variant once ([`with_levels!`]) and runs the one body, written over
/// [`Levels`], on it.
#[derive(Clone, Debug)]
enum LevelStores {
    /// 2, 9–16 and 17–32 ways: bhargava08 and opteron2350 (seed 002 Table 2).
    Small2Narrow16Narrow32(Three<Small<(), 2>, Narrow<(), 16>, Narrow<(), 32>>),
    /// 5–8, 5–8 and 9–16 ways: nehalem-x5560, zen3, zen4.
    Narrow8Narrow8Narrow16(Three<Narrow<(), 8>, Narrow<(), 8>, Narrow<(), 16>>),
    /// 5–8, 9–16 and 17–32 ways: cascadelake.
    Narrow8Narrow16Narrow32(Three<Narrow<(), 8>, Narrow<(), 16>, Narrow<(), 32>>),
    /// 9–16 ways at each of three levels: golden-cove.
    Narrow16Narrow16Narrow16(Three<Narrow<(), 16>, Narrow<(), 16>, Narrow<(), 16>>),
    /// 5–8 ways at each of two levels: core2-e6300.
    Narrow8Narrow8((Narrow<(), 8>, (Narrow<(), 8>, End))),
    /// Any other shape (or a line beyond [`Narrow`]'s tags): the levels' [`Store`]s in level
    /// order.
    General(Vec<Store<()>>),
}

impl LevelStores {
    /// `stores` (in level order) in the variant of their shape, where one fits.
    fn specialise(stores: LevelStores) -> Self {
        let LevelStores::General(stores) = stores else {
            return stores;
        };
        macro_rules! try_variant {
            ($stores:ident, $($variant:ident),*) => {$(
                let $stores = match Levels::from_stores($stores) {
                    Ok(l) => return LevelStores::$variant(l),
                    Err(s) => s,
                };
            )*};
        }
        try_variant!(
            stores,
            Small2Narrow16Narrow32,
            Narrow8Narrow8Narrow16,
            Narrow8Narrow16Narrow32,
            Narrow16Narrow16Narrow16,
            Narrow8Narrow8
        );
        LevelStores::General(stores)
    }

    /// The same levels, lines and recency orders in the general list (for a line a concrete
    /// representation does not take: one beyond [`Narrow`]'s 32-bit tags).
    #[cold]
    #[inline(never)]
    fn generalise(&mut self) {
        let mut stores = Vec::with_capacity(MAX_LEVELS);
        let old = std::mem::replace(self, LevelStores::General(vec![]));
        with_levels!(old, l => l.into_stores(&mut stores));
        *self = LevelStores::General(stores);
    }

    /// Exchanges level `level`'s storage with `o`'s (the same config: the same variant, unless
    /// one has been generalised, when both are).
    fn swap_level(&mut self, o: &mut LevelStores, level: usize) {
        use LevelStores as L;
        match (&mut *self, &mut *o) {
            (L::Small2Narrow16Narrow32(a), L::Small2Narrow16Narrow32(b)) => a.swap_level(b, level),
            (L::Narrow8Narrow8Narrow16(a), L::Narrow8Narrow8Narrow16(b)) => a.swap_level(b, level),
            (L::Narrow8Narrow16Narrow32(a), L::Narrow8Narrow16Narrow32(b)) => {
                a.swap_level(b, level)
            }
            (L::Narrow16Narrow16Narrow16(a), L::Narrow16Narrow16Narrow16(b)) => {
                a.swap_level(b, level)
            }
            (L::Narrow8Narrow8(a), L::Narrow8Narrow8(b)) => a.swap_level(b, level),
            (L::General(a), L::General(b)) => a.swap_level(b, level),
            _ => {
                self.generalise();
                o.generalise();
                self.swap_level(o, level);
            }
        }
    }

    /// The variant's name (for tests and reports).
    fn name(&self) -> &'static str {
        match self {
            LevelStores::Small2Narrow16Narrow32(_) => "small2-narrow16-narrow32",
            LevelStores::Narrow8Narrow8Narrow16(_) => "narrow8-narrow8-narrow16",
            LevelStores::Narrow8Narrow16Narrow32(_) => "narrow8-narrow16-narrow32",
            LevelStores::Narrow16Narrow16Narrow16(_) => "narrow16-narrow16-narrow16",
            LevelStores::Narrow8Narrow8(_) => "narrow8-narrow8",
            LevelStores::General(_) => "general",
        }
    }
}

/// Each level's hits and misses, in level order.
type Counts = [HitMiss; MAX_LEVELS];

/// The end of a list of levels ([`Levels`] for `(S, R)`: a level's storage `S`, then the
/// levels below it `R`).
#[derive(Clone, Debug)]
struct End;

/// Three levels' storage, in level order.
type Three<A, B, C> = (A, (B, (C, End)));

/// The storage of the levels of a hierarchy, from some level down: a list of concrete
/// representations (`(S, R)` ... [`End`]), whose operations unroll into one body per shape
/// with each level's representation a constant, or the general list of [`Store`]s.
trait Levels: Sized {
    /// Whether every level's representation takes the line number `line` (only
    /// [`Narrow`]'s 32-bit tags refuse lines; the general list widens them).
    #[inline(always)]
    fn takes(&self, _line: u64) -> bool {
        true
    }

    /// One reference to `line` looked up from level `from` down, these levels being the
    /// hierarchy's from index `first`: at each level from `from` on, a hit becomes the most
    /// recently used line of its set and ends the search, a miss is filled; each counted in
    /// `st`. Returns the index of the level that served it (the level count: DRAM); `None`
    /// where a representation does not [take](Self::takes) `line` (never where `takes` says
    /// every level does).
    fn access(&mut self, line: u64, from: usize, first: usize, st: &mut Counts) -> Option<usize>;

    /// Whether level `level` (of these) holds `line`.
    fn contains(&self, level: usize, line: u64) -> bool;

    /// Appends each level's bytes of storage to `out`, in level order.
    fn bytes(&self, out: &mut Vec<usize>);

    /// Drops every line of every level.
    fn flush(&mut self);

    /// Exchanges level `level`'s storage with `o`'s.
    fn swap_level(&mut self, o: &mut Self, level: usize);

    /// These levels as [`Store`]s, appended to `out` in level order.
    fn into_stores(self, out: &mut Vec<Store<()>>);

    /// `stores` as these levels, where each is of this list's representation (else `stores`
    /// unchanged).
    fn from_stores(stores: Vec<Store<()>>) -> Result<Self, Vec<Store<()>>>;
}

/// One level's part of a reference to `line`: the lookup and the fill of a miss
/// ([`LruStore::lookup_fill`]), counted in `stats`. Returns whether it hit (`None` where the
/// representation does not take `line`).
#[inline(always)]
fn level_access<S: LruStore<()>>(s: &mut S, line: u64, stats: &mut HitMiss) -> Option<bool> {
    let hit = s.lookup_fill(s.set_of(line), line, ())?;
    stats.count(hit);
    Some(hit)
}

impl Levels for End {
    #[inline(always)]
    fn access(&mut self, _: u64, _: usize, first: usize, _: &mut Counts) -> Option<usize> {
        Some(first)
    }

    fn contains(&self, _level: usize, _line: u64) -> bool {
        false
    }

    fn bytes(&self, _out: &mut Vec<usize>) {}

    fn flush(&mut self) {}

    fn swap_level(&mut self, _o: &mut Self, _level: usize) {}

    fn into_stores(self, _out: &mut Vec<Store<()>>) {}

    fn from_stores(stores: Vec<Store<()>>) -> Result<Self, Vec<Store<()>>> {
        if stores.is_empty() {
            Ok(End)
        } else {
            Err(stores)
        }
    }
}

impl<S: Concrete<()>, R: Levels> Levels for (S, R) {
    #[inline(always)]
    fn takes(&self, line: u64) -> bool {
        self.0.takes(line) && self.1.takes(line)
    }

    #[inline(always)]
    fn access(&mut self, line: u64, from: usize, first: usize, st: &mut Counts) -> Option<usize> {
        if from <= first && level_access(&mut self.0, line, &mut st[first])? {
            return Some(first);
        }
        self.1.access(line, from, first + 1, st)
    }

    fn contains(&self, level: usize, line: u64) -> bool {
        if level == 0 {
            self.0.find(self.0.set_of(line), line, |_| true).is_some()
        } else {
            self.1.contains(level - 1, line)
        }
    }

    fn bytes(&self, out: &mut Vec<usize>) {
        out.push(self.0.bytes());
        self.1.bytes(out);
    }

    fn flush(&mut self) {
        self.0.clear();
        self.1.flush();
    }

    fn swap_level(&mut self, o: &mut Self, level: usize) {
        if level == 0 {
            std::mem::swap(&mut self.0, &mut o.0);
        } else {
            self.1.swap_level(&mut o.1, level - 1);
        }
    }

    fn into_stores(self, out: &mut Vec<Store<()>>) {
        out.push(self.0.into_store());
        self.1.into_stores(out);
    }

    fn from_stores(mut stores: Vec<Store<()>>) -> Result<Self, Vec<Store<()>>> {
        if stores.is_empty() {
            return Err(stores);
        }
        let head = match S::from_store(stores.remove(0)) {
            Ok(h) => h,
            Err(s) => {
                stores.insert(0, s);
                return Err(stores);
            }
        };
        match R::from_stores(stores) {
            Ok(rest) => Ok((head, rest)),
            Err(mut stores) => {
                stores.insert(0, head.into_store());
                Err(stores)
            }
        }
    }
}

impl Levels for Vec<Store<()>> {
    #[inline(always)]
    fn access(&mut self, line: u64, from: usize, first: usize, st: &mut Counts) -> Option<usize> {
        debug_assert_eq!(first, 0, "the general list holds every level");
        for (i, (s, c)) in self.iter_mut().zip(st.iter_mut()).enumerate().skip(from) {
            if level_access(s, line, c)? {
                return Some(i);
            }
        }
        Some(self.len())
    }

    fn contains(&self, level: usize, line: u64) -> bool {
        self.get(level)
            .is_some_and(|s| s.find(s.set_of(line), line, |_| true).is_some())
    }

    fn bytes(&self, out: &mut Vec<usize>) {
        out.extend(self.iter().map(|s| s.bytes()));
    }

    fn flush(&mut self) {
        self.iter_mut().for_each(|s| s.clear());
    }

    fn swap_level(&mut self, o: &mut Self, level: usize) {
        std::mem::swap(&mut self[level], &mut o[level]);
    }

    fn into_stores(self, out: &mut Vec<Store<()>>) {
        out.extend(self);
    }

    fn from_stores(stores: Vec<Store<()>>) -> Result<Self, Vec<Store<()>>> {
        Ok(stores)
    }
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
