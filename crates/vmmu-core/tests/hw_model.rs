//! The fast hardware structures of `vmmu_core::hw` checked against simple reference models on
//! random operation sequences (STYLE.md rule 10), and DESIGN.md law 6: for fully-associative
//! LRU structures, more entries never give more misses.
//!
//! The reference models keep every entry in one `Vec` with its set number and a last-use time;
//! LRU is "the smallest time in the set", and lookups scan everything. The fast structures keep
//! linked recency lists and a hash index, remember the last L1 hit, and skip absent page sizes
//! — none of which may change a single answer or counter.

use proptest::prelude::*;
use vmmu_core::config::{Bytes, CacheConfig, CacheLevelConfig, TlbArrayConfig, TlbConfig};
use vmmu_core::hw::cache::MemoryHierarchy;
use vmmu_core::hw::lru::SetAssoc;
use vmmu_core::hw::ntlb::Ntlb;
use vmmu_core::hw::pwc::Pwc;
use vmmu_core::hw::store::{LruStore, Repr, Store};
use vmmu_core::hw::tlb::{HitMiss, Tag, TlbHierarchy, TlbLevel, TlbSide, Translation};
use vmmu_core::{Gpa, Gva, Hpa, PageSize};
use PageSize::*;

// ---------------------------------------------------------------------------------------------
// Reference TLB.

#[derive(Clone, Debug)]
struct RefEntry {
    set: usize,
    vpn: u64,
    size: PageSize,
    vpid: u16,
    pcid: u16,
    global: bool,
    t: Translation,
    used: u64,
}

impl RefEntry {
    fn maps(&self, va: u64, tag: Tag) -> bool {
        self.vpn == va >> self.size.shift()
            && self.vpid == tag.vpid
            && (self.global || self.pcid == tag.pcid)
    }
}

#[derive(Clone, Debug)]
struct RefArray {
    sets: usize,
    ways: usize,
    sizes: Vec<PageSize>,
    e: Vec<RefEntry>,
}

impl RefArray {
    fn new(c: &TlbArrayConfig) -> Self {
        let mut sizes = c.sizes.clone();
        sizes.sort();
        sizes.dedup();
        RefArray {
            sets: (c.entries / c.ways) as usize,
            ways: c.ways as usize,
            sizes,
            e: vec![],
        }
    }

    fn set_of(&self, va: u64, size: PageSize) -> usize {
        ((va >> size.shift()) % self.sets as u64) as usize
    }

    /// Per held size, smallest first: the entry of that size in that size's set that maps
    /// `va` with `tag` (the most recently used, were there several).
    fn lookup(&mut self, va: u64, tag: Tag, now: u64) -> Option<Translation> {
        for &s in &self.sizes.clone() {
            let set = self.set_of(va, s);
            let best = self
                .e
                .iter_mut()
                .filter(|e| e.set == set && e.size == s && e.maps(va, tag))
                .max_by_key(|e| e.used);
            if let Some(e) = best {
                e.used = now;
                return Some(e.t);
            }
        }
        None
    }

    fn fill(&mut self, va: u64, tag: Tag, t: Translation, now: u64) {
        if !self.sizes.contains(&t.size) {
            return;
        }
        let set = self.set_of(va, t.size);
        // Replace every entry of this page and size that some lookup would find together
        // with the new one: same VPID, and same PCID unless either is global.
        let vpn = va >> t.size.shift();
        self.e.retain(|e| {
            !(e.set == set
                && e.size == t.size
                && e.vpn == vpn
                && e.vpid == tag.vpid
                && (e.global || t.global || e.pcid == tag.pcid))
        });
        if self.e.iter().filter(|e| e.set == set).count() == self.ways {
            let lru = (0..self.e.len())
                .filter(|&i| self.e[i].set == set)
                .min_by_key(|&i| self.e[i].used)
                .unwrap();
            self.e.remove(lru);
        }
        self.e.push(RefEntry {
            set,
            vpn: va >> t.size.shift(),
            size: t.size,
            vpid: tag.vpid,
            pcid: tag.pcid,
            global: t.global,
            t,
            used: now,
        });
    }
}

#[derive(Clone, Debug)]
struct RefLevel {
    arrays: Vec<RefArray>,
    stats: HitMiss,
}

impl RefLevel {
    fn new(c: &[TlbArrayConfig]) -> Self {
        RefLevel {
            arrays: c.iter().map(RefArray::new).collect(),
            stats: HitMiss::default(),
        }
    }
}

#[derive(Clone, Debug)]
struct RefTlb {
    /// l1d, l1i, l2, l2i.
    levels: [RefLevel; 4],
    now: u64,
}

impl RefTlb {
    fn new(c: &TlbConfig) -> Self {
        RefTlb {
            levels: [
                RefLevel::new(&c.l1d),
                RefLevel::new(&c.l1i),
                RefLevel::new(&c.l2),
                RefLevel::new(&c.l2i),
            ],
            now: 0,
        }
    }

    fn idx(&self, side: TlbSide) -> (usize, usize) {
        match side {
            TlbSide::Data => (0, 2),
            TlbSide::Instr if self.levels[3].arrays.is_empty() => (1, 2),
            TlbSide::Instr => (1, 3),
        }
    }

    fn lookup(&mut self, va: u64, side: TlbSide, tag: Tag) -> Option<(TlbLevel, Translation)> {
        self.now += 1;
        let now = self.now;
        let (i1, i2) = self.idx(side);
        let l1 = &mut self.levels[i1];
        if !l1.arrays.is_empty() {
            let hit = l1.arrays.iter_mut().find_map(|a| a.lookup(va, tag, now));
            if let Some(t) = hit {
                l1.stats.hits += 1;
                return Some((TlbLevel::L1, t));
            }
            l1.stats.misses += 1;
        }
        let l2 = &mut self.levels[i2];
        if l2.arrays.is_empty() {
            return None;
        }
        let hit = l2.arrays.iter_mut().find_map(|a| a.lookup(va, tag, now));
        match hit {
            Some(t) => {
                l2.stats.hits += 1;
                for a in &mut self.levels[i1].arrays {
                    a.fill(va, tag, t, now);
                }
                Some((TlbLevel::L2, t))
            }
            None => {
                l2.stats.misses += 1;
                None
            }
        }
    }

    fn fill(&mut self, va: u64, side: TlbSide, tag: Tag, t: Translation) {
        self.now += 1;
        let now = self.now;
        let (i1, i2) = self.idx(side);
        for i in [i2, i1] {
            for a in &mut self.levels[i].arrays {
                a.fill(va, tag, t, now);
            }
        }
    }

    fn entries_mut(&mut self) -> impl Iterator<Item = &mut RefArray> {
        self.levels.iter_mut().flat_map(|l| l.arrays.iter_mut())
    }

    fn set_dirty(&mut self, va: u64, side: TlbSide, tag: Tag) {
        let (i1, i2) = self.idx(side);
        for i in [i1, i2] {
            for a in &mut self.levels[i].arrays {
                a.e.iter_mut()
                    .filter(|e| e.maps(va, tag))
                    .for_each(|e| e.t.dirty = true);
            }
        }
    }

    fn retain(&mut self, keep: impl Fn(&RefEntry) -> bool) {
        for a in self.entries_mut() {
            a.e.retain(&keep);
        }
    }

    fn stats(&self) -> Vec<(&'static str, HitMiss)> {
        let mut v = vec![
            ("l1d", self.levels[0].stats),
            ("l1i", self.levels[1].stats),
            ("l2", self.levels[2].stats),
        ];
        if !self.levels[3].arrays.is_empty() {
            v.push(("l2i", self.levels[3].stats));
        }
        v
    }
}

fn arr(entries: u32, ways: u32, sizes: &[PageSize]) -> TlbArrayConfig {
    TlbArrayConfig {
        entries,
        ways,
        sizes: sizes.to_vec(),
    }
}

fn tlb_config(which: u8) -> TlbConfig {
    let (l1d, l1i, l2, l2i) = match which {
        // Seed 002 Table 2's shape, scaled down: any-size FA L1 D (hash-indexed: more than
        // 4 ways), split L1 I, direct-mapped 2M L2, separate multi-size L2 I.
        0 => (
            vec![arr(8, 8, &[Size4K, Size2M, Size1G])],
            vec![arr(4, 4, &[Size4K]), arr(2, 2, &[Size2M])],
            vec![arr(8, 2, &[Size4K]), arr(4, 1, &[Size2M])],
            vec![arr(4, 2, &[Size4K, Size2M])],
        ),
        // A non-power-of-two, multi-size set-associative unified L2 (3 sets of 8 ways,
        // hash-indexed).
        1 => (
            vec![arr(2, 1, &[Size4K]), arr(2, 2, &[Size2M, Size1G])],
            vec![],
            vec![arr(24, 8, &[Size4K, Size2M, Size1G])],
            vec![],
        ),
        // Set-associative multi-size L1 only; overlapping arrays in L1 I.
        2 => (
            vec![arr(6, 3, &[Size4K, Size2M])],
            vec![arr(3, 3, &[Size4K]), arr(2, 2, &[Size4K, Size2M])],
            vec![],
            vec![],
        ),
        // The shapes of the levels' specialised storage, scaled down: an any-size L1 D of
        // more than 32 ways in one set, seed 002's L2 (4-way 4 KiB beside direct-mapped 2 MiB),
        // a 4-way 4 KiB L2 I.
        _ => (
            vec![arr(40, 40, &[Size4K, Size2M, Size1G])],
            vec![arr(4, 4, &[Size4K]), arr(2, 2, &[Size2M])],
            vec![arr(16, 4, &[Size4K]), arr(4, 1, &[Size2M])],
            vec![arr(8, 4, &[Size4K])],
        ),
    };
    TlbConfig {
        l1d,
        l1i,
        l2,
        l2i,
        l2_latency: 5,
        pcid: true,
        vpid: true,
    }
}

#[derive(Clone, Debug)]
enum TlbOp {
    Lookup(u64, TlbSide, Tag),
    Fill(u64, TlbSide, Tag, Translation),
    SetDirty(u64, TlbSide, Tag),
    Invlpg(u64, Tag),
    FlushNonGlobal(u16),
    FlushTag(Tag),
    FlushVpid(u16),
    FlushAll,
}

impl TlbOp {
    /// The (address, side, tag) the op is about, if any.
    fn target(&self) -> Option<(u64, TlbSide, Tag)> {
        match *self {
            TlbOp::Lookup(a, s, t) | TlbOp::Fill(a, s, t, _) | TlbOp::SetDirty(a, s, t) => {
                Some((a, s, t))
            }
            TlbOp::Invlpg(a, t) => Some((a, TlbSide::Data, t)),
            _ => None,
        }
    }

    /// The same op about `(a, s, t)` instead.
    fn with(&self, (a, s, t): (u64, TlbSide, Tag)) -> TlbOp {
        match *self {
            TlbOp::Lookup(..) => TlbOp::Lookup(a, s, t),
            TlbOp::Fill(_, _, _, x) => TlbOp::Fill(a, s, t, x),
            TlbOp::SetDirty(..) => TlbOp::SetDirty(a, s, t),
            TlbOp::Invlpg(..) => TlbOp::Invlpg(a, t),
            TlbOp::FlushTag(_) => TlbOp::FlushTag(t),
            ref other => other.clone(),
        }
    }
}

/// Addresses from a small universe (3 1 GiB regions × 4 2 MiB regions × 8 4 KiB pages) so
/// that entries of all sizes collide, hit and evict each other; the third region lies at
/// 32 TiB, where a page's key no longer fits the 32-bit tags of `Narrow` storage.
fn va() -> impl Strategy<Value = u64> {
    (
        prop_oneof![4 => 0u64..2, 1 => Just(1 << 15)],
        0u64..4,
        0u64..8,
        0u64..4096,
    )
        .prop_map(|(g, m, p, o)| (g << 30) | (m << 21) | (p << 12) | o)
}

fn tag() -> impl Strategy<Value = Tag> {
    (0u16..3, 0u16..2).prop_map(|(pcid, vpid)| Tag { pcid, vpid })
}

fn side() -> impl Strategy<Value = TlbSide> {
    prop_oneof![3 => Just(TlbSide::Data), 1 => Just(TlbSide::Instr)]
}

fn translation() -> impl Strategy<Value = Translation> {
    (
        prop_oneof![3 => Just(Size4K), 2 => Just(Size2M), 1 => Just(Size1G)],
        0u64..64,
        any::<[bool; 5]>(),
        0u8..4,
    )
        .prop_map(|(size, frame, b, g)| Translation {
            page: Hpa::new(frame << size.shift()),
            size,
            writable: b[0],
            user: b[1],
            executable: b[2],
            dirty: b[3],
            global: g == 0,
        })
}

fn tlb_op() -> impl Strategy<Value = TlbOp> {
    prop_oneof![
        8 => (va(), side(), tag()).prop_map(|(a, s, t)| TlbOp::Lookup(a, s, t)),
        6 => (va(), side(), tag(), translation()).prop_map(|(a, s, t, x)| TlbOp::Fill(a, s, t, x)),
        1 => (va(), side(), tag()).prop_map(|(a, s, t)| TlbOp::SetDirty(a, s, t)),
        1 => (va(), tag()).prop_map(|(a, t)| TlbOp::Invlpg(a, t)),
        1 => (0u16..2).prop_map(TlbOp::FlushNonGlobal),
        1 => tag().prop_map(TlbOp::FlushTag),
        1 => (0u16..2).prop_map(TlbOp::FlushVpid),
        1 => Just(TlbOp::FlushAll),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Every lookup answer and every counter of the fast TLB hierarchy equals the model's.
    #[test]
    fn tlb_hierarchy_matches_reference_model(
        which in 0u8..4,
        ops in prop::collection::vec((tlb_op(), 0u8..3), 1..300),
    ) {
        let cfg = tlb_config(which);
        let mut fast = TlbHierarchy::new(&cfg);
        let mut slow = RefTlb::new(&cfg);
        let mut last = (0u64, TlbSide::Data, Tag::default());
        for (i, (op, again)) in ops.iter().enumerate() {
            // A third of the ops reuse the previous address, side and tag, so that repeated
            // hits (the remembered-hit path) meet fills, A/D updates and flushes of that page.
            let op = if *again == 0 { op.with(last) } else { op.clone() };
            last = op.target().unwrap_or(last);
            match op {
                TlbOp::Lookup(a, s, t) => {
                    let got = fast.lookup(Gva::new(a), s, t);
                    let want = slow.lookup(a, s, t);
                    prop_assert_eq!(got, want, "op {}: {:?}", i, op);
                }
                TlbOp::Fill(a, s, t, x) => {
                    fast.fill(Gva::new(a), s, t, x);
                    slow.fill(a, s, t, x);
                }
                TlbOp::SetDirty(a, s, t) => {
                    fast.set_dirty(Gva::new(a), s, t);
                    slow.set_dirty(a, s, t);
                }
                TlbOp::Invlpg(a, t) => {
                    fast.invalidate_page(Gva::new(a), t);
                    slow.retain(|e| !e.maps(a, t));
                }
                TlbOp::FlushNonGlobal(v) => {
                    fast.flush_nonglobal(v);
                    slow.retain(|e| e.global || e.vpid != v);
                }
                TlbOp::FlushTag(t) => {
                    fast.flush_tag(t);
                    slow.retain(|e| e.global || e.vpid != t.vpid || e.pcid != t.pcid);
                }
                TlbOp::FlushVpid(v) => {
                    fast.flush_vpid(v);
                    slow.retain(|e| e.vpid != v);
                }
                TlbOp::FlushAll => {
                    fast.flush_all();
                    slow.retain(|_| false);
                }
            }
            prop_assert_eq!(fast.stats(), slow.stats(), "op {}: {:?}", i, op);
        }
    }
}

/// Runs `op` on the TLB hierarchy `t`; returns what a lookup answers.
fn run_tlb_op(t: &mut TlbHierarchy, op: &TlbOp) -> Option<(TlbLevel, Translation)> {
    match *op {
        TlbOp::Lookup(a, s, tag) => return t.lookup(Gva::new(a), s, tag),
        TlbOp::Fill(a, s, tag, x) => t.fill(Gva::new(a), s, tag, x),
        TlbOp::SetDirty(a, s, tag) => t.set_dirty(Gva::new(a), s, tag),
        TlbOp::Invlpg(a, tag) => t.invalidate_page(Gva::new(a), tag),
        TlbOp::FlushNonGlobal(v) => t.flush_nonglobal(v),
        TlbOp::FlushTag(tag) => t.flush_tag(tag),
        TlbOp::FlushVpid(v) => t.flush_vpid(v),
        TlbOp::FlushAll => t.flush_all(),
    }
    None
}

/// Addresses below 4 TiB, where every 4 KiB page key fits 32-bit tags, so that a run keeps its
/// specialised storage throughout.
fn va_low() -> impl Strategy<Value = u64> {
    va().prop_map(|a| a & ((1 << 42) - 1))
}

fn tlb_op_low() -> impl Strategy<Value = TlbOp> {
    (tlb_op(), va_low()).prop_map(|(op, a)| match op.target() {
        Some((_, s, t)) => op.with((a, s, t)),
        None => op,
    })
}

/// Every level of [`tlb_config`]`(3)` in the storage specialised for its shape.
const SPECIALISED: [&str; 4] = ["narrow64", "general", "ways4-4k+direct-2m", "ways4-4k"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A TLB hierarchy whose levels are stored in the concrete types chosen for their shapes
    /// answers every lookup, counts every hit and miss and holds every entry (peeked at both
    /// levels after each operation) as the same hierarchy in the general arrays. `wide`: the
    /// addresses include pages whose keys do not fit 32-bit tags, which turn a level into the
    /// general list halfway.
    #[test]
    fn specialised_levels_behave_as_the_general_arrays(
        wide in any::<bool>(),
        ops in prop::collection::vec((tlb_op_low(), tlb_op(), 0u8..3), 1..300),
    ) {
        let cfg = tlb_config(3);
        let mut fast = TlbHierarchy::new(&cfg);
        let mut general = TlbHierarchy::general(&cfg);
        prop_assert_eq!(fast.representations(), SPECIALISED);
        prop_assert_eq!(general.representations(), ["general"; 4]);
        let mut last = (0u64, TlbSide::Data, Tag::default());
        for (i, (low, any, again)) in ops.iter().enumerate() {
            let op = if wide { any } else { low };
            let op = if *again == 0 { op.with(last) } else { op.clone() };
            last = op.target().unwrap_or(last);
            let got = run_tlb_op(&mut fast, &op);
            let want = run_tlb_op(&mut general, &op);
            prop_assert_eq!(got, want, "op {}: {:?}", i, op);
            prop_assert_eq!(fast.stats(), general.stats(), "op {}: {:?}", i, op);
            if let Some((a, s, t)) = op.target() {
                for level in [TlbLevel::L1, TlbLevel::L2] {
                    prop_assert_eq!(
                        fast.peek(Gva::new(a), s, t, level),
                        general.peek(Gva::new(a), s, t, level),
                        "op {}: {:?} at {:?}", i, op, level
                    );
                    prop_assert_eq!(fast.len(s, level), general.len(s, level));
                }
            }
        }
        if !wide {
            prop_assert_eq!(fast.representations(), SPECIALISED);
        }
    }
}

#[test]
fn presets_levels_take_their_specialised_storage() {
    let reprs = |name: &str| {
        let m = vmmu_core::config::load_machine(name).expect("preset");
        TlbHierarchy::new(&m.tlb).representations()
    };
    // Seed 002 Table 2: a 64-entry FA L1 D-TLB of every size, a split L1 I-TLB, a 4-way 4 KiB
    // L2 beside a direct-mapped 2 MiB one, a 4-way 4 KiB L2 I-TLB.
    assert_eq!(
        reprs("bhargava08"),
        ["narrow64", "general", "ways4-4k+direct-2m", "ways4-4k"]
    );
    assert_eq!(
        reprs("nehalem-x5560"),
        ["general", "general", "ways4-4k", "empty"]
    );
}

// ---------------------------------------------------------------------------------------------
// Reference cache hierarchy.

/// One reference cache level: (sets, ways, latency, lines as (line, last use)).
type CacheLevelModel = (u64, usize, u32, Vec<(u64, u64)>);

struct RefCache {
    /// Per level.
    levels: Vec<CacheLevelModel>,
    dram: u32,
    stats: Vec<HitMiss>,
    now: u64,
}

impl RefCache {
    fn access(&mut self, addr: u64, from: usize) -> (usize, u32) {
        self.now += 1;
        let line = addr >> 6;
        let n = self.levels.len();
        let mut served = n;
        for i in from..n {
            let hit = self.levels[i].3.iter_mut().find(|(l, _)| *l == line);
            self.stats[i].hits += hit.is_some() as u64;
            self.stats[i].misses += hit.is_none() as u64;
            if let Some(e) = hit {
                e.1 = self.now;
                served = i;
                break;
            }
        }
        for i in from..served {
            let (sets, ways, _, lines) = &mut self.levels[i];
            let set = line % *sets;
            if lines.iter().filter(|(l, _)| l % *sets == set).count() == *ways {
                let lru = (0..lines.len())
                    .filter(|&j| lines[j].0 % *sets == set)
                    .min_by_key(|&j| lines[j].1)
                    .unwrap();
                lines.remove(lru);
            }
            lines.push((line, self.now));
        }
        if served == n {
            (n, self.dram)
        } else {
            (served, self.levels[served].2)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Served level, latency and per-level counters of the fast cache hierarchy equal the
    /// model's, for references starting at any level, with flushes.
    #[test]
    fn cache_hierarchy_matches_reference_model(
        ops in prop::collection::vec((0u64..96, 0usize..4, 0u8..40), 1..400),
    ) {
        let level = |name: &str, size: u64, ways: u32, latency: u32| CacheLevelConfig {
            name: name.into(),
            size: Bytes(size),
            ways,
            latency,
            shared: false,
        };
        let cfg = CacheConfig {
            line: 64,
            levels: vec![level("l1", 256, 2, 3), level("l2", 1024, 4, 11), level("l3", 2048, 8, 40)],
            dram_latency: 120,
            page_entry_fill: "l2".into(),
            data: true,
        };
        let mut fast = MemoryHierarchy::new(&cfg);
        let mut slow = RefCache {
            levels: vec![(2, 2, 3, vec![]), (4, 4, 11, vec![]), (4, 8, 40, vec![])],
            dram: 120,
            stats: vec![HitMiss::default(); 3],
            now: 0,
        };
        for (line, from, flush) in ops {
            if flush == 0 {
                fast.flush();
                slow.levels.iter_mut().for_each(|l| l.3.clear());
                continue;
            }
            // Lines from 90 on lie beyond 64 TiB, where a line number no longer fits the 32-bit
            // tags of `Narrow` storage (the 8-way L3 here).
            let line = if line >= 90 { line | 1 << 40 } else { line };
            let addr = line * 64 + (flush as u64 % 8) * 8;
            prop_assert_eq!(fast.access(Hpa::new(addr), from), slow.access(addr, from));
        }
        let want: Vec<(String, HitMiss)> = ["l1", "l2", "l3"]
            .iter()
            .map(|s| s.to_string())
            .zip(slow.stats.iter().copied())
            .collect();
        prop_assert_eq!(fast.stats(), want);
    }
}

/// The machine presets whose cache hierarchies have a storage specialised for their shape,
/// and its name.
const CACHE_SHAPES: [(&str, &str); 5] = [
    ("bhargava08", "small2-narrow16-narrow32"),
    ("nehalem-x5560", "narrow8-narrow8-narrow16"),
    ("cascadelake", "narrow8-narrow16-narrow32"),
    ("golden-cove", "narrow16-narrow16-narrow16"),
    ("core2-e6300", "narrow8-narrow8"),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// A cache hierarchy whose levels are stored in the concrete list chosen for its preset's
    /// shape answers every reference (served level and latency), counts every hit and miss and
    /// holds every line (asked of each level after each operation) as the same hierarchy in
    /// the general list of stores — two cores of it, their shared levels exchanged as a
    /// multi-vCPU run exchanges them, with flushes. The lines crowd four sets of every level
    /// (48 tags each, more than any set's ways); `wide`: some lie beyond 32-bit tags, which
    /// turn the storage into the general list halfway.
    #[test]
    fn specialised_cache_hierarchy_behaves_as_the_general_one(
        preset in 0usize..CACHE_SHAPES.len(),
        wide in any::<bool>(),
        ops in prop::collection::vec((0u64..4, 0u64..48, 0usize..4, 0u8..64), 1..500),
    ) {
        let (name, repr) = CACHE_SHAPES[preset];
        let cfg = vmmu_core::config::load_machine(name).expect("preset").caches;
        let n = cfg.levels.len();
        let mut fast = [MemoryHierarchy::new(&cfg), MemoryHierarchy::new(&cfg)];
        let mut general = [MemoryHierarchy::general(&cfg), MemoryHierarchy::general(&cfg)];
        prop_assert_eq!(fast[0].representation(), repr);
        prop_assert_eq!(general[0].representation(), "general");
        for (i, &(set, tag, from, what)) in ops.iter().enumerate() {
            let core = (what >> 1) as usize & 1;
            // The tag above every preset's set bits (at most 2^15 sets).
            let line = set | (tag << 16);
            let line = if wide && what % 8 == 5 { line | 1 << 33 } else { line };
            let addr = Hpa::new((line << 6) | ((what as u64 & 7) * 8));
            match what {
                0 | 2 => {
                    fast[core].flush();
                    general[core].flush();
                }
                1 => {
                    let [a, b] = &mut fast;
                    a.swap_shared(b);
                    let [a, b] = &mut general;
                    a.swap_shared(b);
                }
                _ => {
                    let from = from % (n + 1);
                    let got = fast[core].access(addr, from);
                    prop_assert_eq!(got, general[core].access(addr, from), "op {}", i);
                }
            }
            for c in 0..2 {
                prop_assert_eq!(fast[c].stats(), general[c].stats(), "op {} core {}", i, c);
                for level in 0..n {
                    prop_assert_eq!(
                        fast[c].contains(level, addr),
                        general[c].contains(level, addr),
                        "op {} core {} level {}", i, c, level
                    );
                }
            }
        }
        for c in 0..2 {
            prop_assert_eq!(fast[c].bytes(), general[c].bytes());
            if !wide {
                prop_assert_eq!(fast[c].representation(), repr);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reference PWC and NTLB.

/// A keyed LRU model: entries (key, set, last use).
struct RefLru {
    sets: u64,
    ways: usize,
    e: Vec<(u64, u64, u64)>,
    now: u64,
}

impl RefLru {
    fn new(entries: u32, ways: u32) -> Self {
        RefLru {
            sets: (entries / ways) as u64,
            ways: ways as usize,
            e: vec![],
            now: 0,
        }
    }

    fn lookup(&mut self, key: u64, set: u64) -> bool {
        self.now += 1;
        match self.e.iter_mut().find(|e| e.0 == key) {
            Some(e) => {
                e.2 = self.now;
                true
            }
            None => {
                let _ = set;
                false
            }
        }
    }

    fn fill(&mut self, key: u64, set: u64) {
        self.now += 1;
        let set = set % self.sets;
        if let Some(e) = self.e.iter_mut().find(|e| e.0 == key) {
            e.2 = self.now;
            return;
        }
        if self.e.iter().filter(|e| e.1 == set).count() == self.ways {
            let lru = (0..self.e.len())
                .filter(|&i| self.e[i].1 == set)
                .min_by_key(|&i| self.e[i].2)
                .unwrap();
            self.e.remove(lru);
        }
        self.e.push((key, set, self.now));
    }
}

/// Small shapes of every sets × ways up to 5 × 6, and shapes of each wider representation
/// (fingerprint lanes of 16, 32 and 64, the general array beyond).
fn sets_and_ways() -> impl Strategy<Value = (u32, u32)> {
    prop_oneof![
        4 => (1u32..6, 1u32..7).prop_map(|(sets, ways)| (sets * ways, ways)),
        1 => prop_oneof![Just((24, 24)), Just((32, 16)), Just((36, 12)), Just((64, 64)), Just((96, 32)), Just((70, 70))],
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// PWC hits and counters equal a keyed LRU model's, for any sets × ways.
    #[test]
    fn pwc_matches_reference_model(
        (entries, ways) in sets_and_ways(),
        ops in prop::collection::vec((0u64..48, 0u8..3, 0u8..30), 1..300),
    ) {
        let mut fast = Pwc::new(entries, ways);
        let mut slow = RefLru::new(entries, ways);
        let mut stats = HitMiss::default();
        for (k, op, flush) in ops {
            // Entries from 40 on lie beyond 16 GiB, where an entry's key no longer fits the
            // 32-bit tags of `Narrow` storage.
            let addr = 0x7000 + k * 8 + if k >= 40 { 1 << 40 } else { 0 };
            if flush == 0 {
                fast.flush();
                slow.e.clear();
            } else if op == 0 {
                fast.fill(Hpa::new(addr));
                slow.fill(addr, addr >> 3);
            } else {
                let hit = slow.lookup(addr, addr >> 3);
                stats.count(hit);
                prop_assert_eq!(fast.lookup(Hpa::new(addr)), hit);
            }
        }
        prop_assert_eq!(fast.stats(), stats);
        prop_assert_eq!(fast.len(), slow.e.len());
    }

    /// NTLB translations and counters equal a model keyed by (gPA page at the entry's size,
    /// size, VPID), for pages of mixed nested sizes.
    #[test]
    fn ntlb_matches_reference_model(
        (entries, ways) in sets_and_ways(),
        ops in prop::collection::vec((0u64..4, 0u64..4, 0u64..8, 0u16..2, 0u8..4, 0u8..40), 1..300),
    ) {
        let mut fast = Ntlb::new(entries, ways);
        // (base gPA, size, vpid, hPA page, set, last use)
        let mut slow: Vec<(u64, PageSize, u16, u64, u64, u64)> = vec![];
        let sets = (entries / ways) as u64;
        let mut now = 0;
        let mut stats = HitMiss::default();
        for (g, m, p, vpid, op, x) in ops {
            // Region 3 lies at 8 TiB, where a page's key no longer fits the 32-bit tags of
            // `Narrow` storage.
            let region = if g == 3 { 1 << 43 } else { g << 30 };
            let gpa = region | (m << 21) | (p << 12) | (x as u64 * 8);
            now += 1;
            if x == 0 {
                fast.flush_vpid(vpid);
                slow.retain(|e| e.2 != vpid);
            } else if op == 0 {
                let size = [Size4K, Size2M, Size1G][(x % 3) as usize];
                let base = gpa & !size.offset_mask();
                let page = (x as u64) << size.shift();
                fast.fill(Gpa::new(gpa), vpid, Hpa::new(page), size);
                let set = (gpa >> size.shift()) % sets;
                slow.retain(|e| !(e.0 == base && e.1 == size && e.2 == vpid));
                if slow.iter().filter(|e| e.4 == set).count() == ways as usize {
                    let lru = (0..slow.len())
                        .filter(|&i| slow[i].4 == set)
                        .min_by_key(|&i| slow[i].5)
                        .unwrap();
                    slow.remove(lru);
                }
                slow.push((base, size, vpid, page, set, now));
            } else {
                let want = [Size4K, Size2M, Size1G].iter().find_map(|&s| {
                    let set = (gpa >> s.shift()) % sets;
                    slow.iter_mut()
                        .filter(|e| e.1 == s && e.4 == set && e.2 == vpid && e.0 == gpa & !s.offset_mask())
                        .max_by_key(|e| e.5)
                        .map(|e| {
                            e.5 = now;
                            (Hpa::new(e.3 + (gpa & s.offset_mask())), s)
                        })
                });
                stats.count(want.is_some());
                prop_assert_eq!(fast.lookup(Gpa::new(gpa), vpid), want);
            }
        }
        prop_assert_eq!(fast.stats(), stats);
        prop_assert_eq!(fast.len(), slow.len());
    }
}

/// The NTLB shapes whose storage folds the VPID into the tags: the presets' 16 and 32 entries
/// fully associative, and set-associative ones of 9 to 32 ways.
fn folded_ntlb_shapes() -> impl Strategy<Value = (u32, u32)> {
    prop_oneof![
        Just((16, 16)),
        Just((32, 32)),
        Just((32, 16)),
        Just((64, 32)),
        Just((48, 12)),
        Just((9, 9)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The NTLB with the VPID folded into its tags answers every lookup and `contains`, holds
    /// the same entries in the same recency order and counts the same as the general array,
    /// on random sequences of lookups, fills after a missed lookup (the nested walk's
    /// `fill_absent`), fills of any page, and flushes of one VPID or all, with nested pages of
    /// 4 KiB, 2 MiB and 1 GiB and several VPIDs. With `wide` the sequences also bring
    /// addresses beyond 256 GiB and a VPID above 14, which hand the entries over to the
    /// general array halfway.
    #[test]
    fn ntlb_folded_storage_matches_the_general_array(
        (entries, ways) in folded_ntlb_shapes(),
        ops in prop::collection::vec((0u8..40, 0u64..6, 0u64..48, 0u16..4, 0u64..512), 1..400),
        wide in any::<bool>(),
    ) {
        let mut fast = Ntlb::new(entries, ways);
        let mut general = Ntlb::general(entries, ways);
        prop_assert_ne!(fast.storage(), "general");
        prop_assert_eq!(general.storage(), "general");
        for (op, g, p, v, x) in ops {
            let region = match g {
                5 if wide => 1 << 40,
                _ => g << 30,
            };
            let vpid = if wide && v == 3 { 300 } else { v };
            let size = [Size4K, Size2M, Size1G][(x % 3) as usize];
            let gpa = Gpa::new(region | ((p % 6) << 21) | ((p / 6) << 12) | (x * 8));
            let page = Hpa::new(((x >> 2) + 1) << size.shift());
            match op {
                0..=19 => {
                    let hit = fast.lookup(gpa, vpid);
                    prop_assert_eq!(hit, general.lookup(gpa, vpid));
                    if hit.is_none() && op >= 10 {
                        fast.fill_absent(gpa, vpid, page, size);
                        general.fill_absent(gpa, vpid, page, size);
                    }
                }
                20..=33 => {
                    fast.fill(gpa, vpid, page, size);
                    general.fill(gpa, vpid, page, size);
                }
                34..=37 => prop_assert_eq!(fast.contains(gpa, vpid), general.contains(gpa, vpid)),
                38 => {
                    fast.flush_vpid(vpid);
                    general.flush_vpid(vpid);
                }
                _ => {
                    fast.flush();
                    general.flush();
                }
            }
            prop_assert_eq!(fast.entries(), general.entries());
            prop_assert_eq!(fast.len(), general.len());
            prop_assert_eq!(fast.stats(), general.stats());
        }
        if !wide {
            prop_assert_ne!(fast.storage(), "general");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// DESIGN.md law 6: more entries never give more misses (fully associative, LRU).

/// Misses of a fully-associative `n`-entry any-size TLB on a trace of accesses (lookup, fill on
/// miss) and flushes. Every address has one page size (1 GiB regions 1, 4, ... are 1 GiB pages;
/// elsewhere every fifth 2 MiB region is a 2 MiB page), as in a real mapping. (Were a 1 GiB
/// entry and a 2 MiB entry of other tags to cover one address, which one a lookup touches
/// would depend on the capacity, and the LRU inclusion behind law 6 would not hold.)
fn tlb_misses(n: u32, trace: &[(u64, u16, u8)]) -> u64 {
    let mut t = TlbHierarchy::new(&TlbConfig {
        l1d: vec![arr(n, n, &[Size4K, Size2M, Size1G])],
        l1i: vec![],
        l2: vec![],
        l2i: vec![],
        l2_latency: 0,
        pcid: true,
        vpid: true,
    });
    for &(a, pcid, op) in trace {
        let tag = Tag { pcid, vpid: 1 };
        match op {
            0 => t.invalidate_page(Gva::new(a), tag),
            1 => t.flush_tag(tag),
            _ => {
                if t.lookup(Gva::new(a), TlbSide::Data, tag).is_none() {
                    let size = if (a >> 30) % 3 == 1 {
                        Size1G
                    } else if (a >> 21) % 5 == 0 {
                        Size2M
                    } else {
                        Size4K
                    };
                    let x = Translation {
                        page: Hpa::new((a & !size.offset_mask()) + (1 << 40)),
                        size,
                        writable: true,
                        user: true,
                        executable: true,
                        dirty: false,
                        global: pcid == 0,
                    };
                    t.fill(Gva::new(a), TlbSide::Data, tag, x);
                }
            }
        }
    }
    t.stats()[0].1.misses
}

fn pwc_misses(n: u32, trace: &[u64]) -> u64 {
    let mut p = Pwc::new(n, n);
    for &k in trace {
        if !p.lookup(Hpa::new(k * 8)) {
            p.fill(Hpa::new(k * 8));
        }
    }
    p.stats().misses
}

fn ntlb_misses(n: u32, trace: &[(u64, u16)]) -> u64 {
    let mut t = Ntlb::new(n, n);
    for &(a, vpid) in trace {
        if t.lookup(Gpa::new(a), vpid).is_none() {
            let size = if (a >> 21) % 3 == 0 { Size2M } else { Size4K };
            t.fill(Gpa::new(a), vpid, Hpa::new(a & !size.offset_mask()), size);
        }
    }
    t.stats().misses
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn more_tlb_entries_never_give_more_misses(
        n in 1u32..24,
        extra in 1u32..24,
        trace in prop::collection::vec(
            ((0u64..3, 0u64..6, 0u64..12).prop_map(|(g, m, p)| (g << 30) | (m << 21) | (p << 12)), 0u16..3, 0u8..40),
            1..400,
        ),
    ) {
        prop_assert!(tlb_misses(n + extra, &trace) <= tlb_misses(n, &trace));
    }

    #[test]
    fn more_pwc_entries_never_give_more_misses(
        n in 1u32..32,
        extra in 1u32..32,
        trace in prop::collection::vec(0u64..64, 1..400),
    ) {
        prop_assert!(pwc_misses(n + extra, &trace) <= pwc_misses(n, &trace));
    }

    #[test]
    fn more_ntlb_entries_never_give_more_misses(
        n in 1u32..24,
        extra in 1u32..24,
        trace in prop::collection::vec(
            ((0u64..4, 0u64..16).prop_map(|(m, p)| (m << 21) | (p << 12)), 0u16..2),
            1..400,
        ),
    ) {
        prop_assert!(ntlb_misses(n + extra, &trace) <= ntlb_misses(n, &trace));
    }
}

/// The law on one crafted trace, with exact counts: a cyclic sweep over 5 pages thrashes a
/// 4-entry LRU TLB (every access misses) but fits a 5-entry one (only the 5 cold misses).
/// (2 MiB region 2 holds 4 KiB pages in `tlb_misses`.)
#[test]
fn cyclic_sweep_thrashes_lru_until_it_fits() {
    let trace: Vec<(u64, u16, u8)> = (0..50)
        .map(|i| ((2 << 21) + ((i % 5) << 12), 1, 2))
        .collect();
    assert_eq!(tlb_misses(4, &trace), 50);
    assert_eq!(tlb_misses(5, &trace), 5);
    let keys: Vec<u64> = (0..50).map(|i| i % 5).collect();
    assert_eq!(pwc_misses(4, &keys), 50);
    assert_eq!(pwc_misses(5, &keys), 5);
}

// ---------------------------------------------------------------------------------------------
// The LRU array every structure is built on, through its whole interface.

/// Shapes on both sides of each threshold of the storage representations: direct mapped and
/// the small sets of up to four ways (`Small`), fingerprint lanes of 8, 16, 32 and 64 with
/// padding lanes (`Lanes`), and the general array's key scan, fingerprints and hash index
/// (`SetAssoc`, which takes every shape); set counts that are powers of two and that are not.
fn lru_shape() -> impl Strategy<Value = (usize, usize)> {
    prop_oneof![
        Just((4, 1)),
        Just((4, 2)),
        Just((3, 3)),
        Just((8, 4)),
        Just((12, 4)),
        Just((10, 5)),
        Just((16, 8)),
        Just((36, 12)),
        Just((24, 24)),
        Just((40, 10)),
        Just((64, 32)),
        Just((66, 33)),
        Just((64, 64)),
        Just((70, 70)),
    ]
}

#[derive(Clone, Debug)]
enum LruOp {
    /// Find the key; touch it if held, insert it otherwise.
    Access(u64),
    /// Find the key and remove it if held.
    Remove(u64),
    /// Keep the keys whose remainder modulo 3 differs from this.
    Retain(u64),
    Clear,
}

fn lru_op() -> impl Strategy<Value = LruOp> {
    prop_oneof![
        12 => (0u64..160).prop_map(LruOp::Access),
        3 => (0u64..160).prop_map(LruOp::Remove),
        1 => (0u64..3).prop_map(LruOp::Retain),
        1 => Just(LruOp::Clear),
    ]
}

/// Every representation a `Store` of `ways` ways may take, the general one included.
fn reprs() -> [Repr; 4] {
    [Repr::Small, Repr::Narrow, Repr::Lanes, Repr::General]
}

/// The key of operation `i` drawn as `k`: `k` itself, except that with `wide` the keys from
/// 150 on in the second half of the operations do not fit 32 bits, so a `Narrow` store
/// changes representation halfway with entries in it.
fn key_at(k: u64, i: usize, n: usize, wide: bool) -> u64 {
    if wide && i >= n / 2 && k >= 150 {
        k | 1 << 40
    } else {
        k
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// In every representation, every set's entries, in recency order, and every eviction equal
    /// those of a model that keeps each set as a list, most recently used first; removals and
    /// `retain` free ways that later insertions reuse before evicting.
    #[test]
    fn lru_array_matches_reference_model(
        (entries, ways) in lru_shape(),
        ops in prop::collection::vec(lru_op(), 1..400),
        wide in any::<bool>(),
    ) {
        for repr in reprs() {
            let mut fast = Store::<u64>::with_repr(entries, ways, 0, repr);
            let sets = entries / ways;
            let mut slow: Vec<Vec<u64>> = vec![vec![]; sets];
            for (i, op) in ops.iter().enumerate() {
                match *op {
                    LruOp::Access(k) => {
                        let k = key_at(k, i, ops.len(), wide);
                        let set = fast.set_of(k.wrapping_mul(7));
                        let s = &mut slow[set];
                        match fast.find(set, k, |&v| v == k * 10) {
                            Some(w) => {
                                prop_assert_eq!(*fast.touch(set, w), k * 10);
                                let i = s.iter().position(|&x| x == k).expect("model holds it");
                                s.remove(i);
                            }
                            None => {
                                prop_assert!(!s.contains(&k));
                                let evicted = fast.insert(set, k, k * 10);
                                let expect = (s.len() == ways).then(|| s.pop().unwrap());
                                prop_assert_eq!(evicted, expect.map(|x| (x, x * 10)));
                            }
                        }
                        s.insert(0, k);
                    }
                    LruOp::Remove(k) => {
                        let k = key_at(k, i, ops.len(), wide);
                        let set = fast.set_of(k.wrapping_mul(7));
                        if let Some(w) = fast.find(set, k, |_| true) {
                            prop_assert_eq!(fast.remove(set, w), (k, k * 10));
                            slow[set].retain(|&x| x != k);
                        } else {
                            prop_assert!(!slow[set].contains(&k));
                        }
                    }
                    LruOp::Retain(r) => {
                        let held: usize = slow.iter().map(Vec::len).sum();
                        for s in &mut slow {
                            s.retain(|&x| x % 3 != r);
                        }
                        let kept: usize = slow.iter().map(Vec::len).sum();
                        prop_assert_eq!(fast.retain(|k, _| k % 3 != r), held - kept);
                    }
                    LruOp::Clear => {
                        fast.clear();
                        slow.iter_mut().for_each(Vec::clear);
                    }
                }
                for (set, s) in slow.iter().enumerate() {
                    let order: Vec<u64> = fast.iter_set(set).map(|(k, _)| k).collect();
                    prop_assert_eq!(&order, s, "{:?}, set {}", fast.repr(), set);
                    prop_assert_eq!(fast.set_len(set), s.len());
                }
                prop_assert_eq!(fast.len(), slow.iter().map(Vec::len).sum::<usize>());
            }
        }
    }

    /// Every representation behaves exactly as the general array on the same operations: the
    /// same way found, touched, filled and evicted at every step (so way numbers, not only
    /// contents, agree), the same values, the same recency order in every set. Keys here are
    /// drawn so that some share a byte fingerprint and values tell duplicates of a key apart.
    #[test]
    fn every_representation_behaves_as_the_general_array(
        (entries, ways) in lru_shape(),
        ops in prop::collection::vec((lru_op(), 0u64..3), 1..400),
        wide in any::<bool>(),
    ) {
        let mut general = SetAssoc::<u64>::new(entries, ways, 0);
        let mut stores: Vec<Store<u64>> = reprs()
            .into_iter()
            .map(|r| Store::with_repr(entries, ways, 0, r))
            .collect();
        let n = ops.len();
        for (i, (op, v)) in ops.into_iter().enumerate() {
            match op {
                LruOp::Access(k) => {
                    let k = key_at(k, i, n, wide);
                    // Key k with value tag v: several entries of one key may live in a set.
                    let set = general.set_of(k);
                    let want = general.find(set, k, |&x| x == v);
                    let res = match want {
                        Some(w) => {
                            general.touch(set, w);
                            None
                        }
                        None => general.insert(set, k, v),
                    };
                    for st in &mut stores {
                        prop_assert_eq!(st.set_of(k), set);
                        prop_assert_eq!(st.find(set, k, |&x| x == v), want, "{:?}", st.repr());
                        let got = match want {
                            Some(w) => {
                                prop_assert_eq!(*st.touch(set, w), v);
                                None
                            }
                            None => st.insert(set, k, v),
                        };
                        prop_assert_eq!(got, res, "{:?}", st.repr());
                    }
                }
                LruOp::Remove(k) => {
                    let k = key_at(k, i, n, wide);
                    let set = general.set_of(k);
                    let want = general.find(set, k, |&x| x == v);
                    for st in &mut stores {
                        prop_assert_eq!(st.find(set, k, |&x| x == v), want, "{:?}", st.repr());
                    }
                    if let Some(w) = want {
                        let out = general.remove(set, w);
                        for st in &mut stores {
                            prop_assert_eq!(st.remove(set, w), out);
                        }
                    }
                }
                LruOp::Retain(r) => {
                    let n = general.retain(|k, &x| (k + x) % 3 != r);
                    for st in &mut stores {
                        prop_assert_eq!(st.retain(|k, &x| (k + x) % 3 != r), n);
                    }
                }
                LruOp::Clear => {
                    general.clear();
                    stores.iter_mut().for_each(|s| s.clear());
                }
            }
            for st in &stores {
                prop_assert_eq!(st.len(), general.len());
                for set in 0..general.sets() {
                    let want: Vec<(u64, u64)> = general.iter_set(set).map(|(k, &x)| (k, x)).collect();
                    let got: Vec<(u64, u64)> = st.iter_set(set).map(|(k, &x)| (k, x)).collect();
                    prop_assert_eq!(got, want, "{:?}, set {}", st.repr(), set);
                    for (k, x) in general.iter_set(set) {
                        let w = general.find(set, k, |y| y == x).expect("held");
                        prop_assert_eq!(st.get(set, w), (k, x), "{:?}, set {}", st.repr(), set);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Memory: the representation chosen for each structure of each machine preset is no larger than
// the general array of the same shape.

/// `(structure, bytes in the representation chosen, bytes as the general array)` for every
/// structure of machine preset `name`.
fn storage_of(name: &str) -> Vec<(String, usize, usize)> {
    use vmmu_core::config::load_machine;
    use vmmu_core::hw::paged::Tagged;
    use vmmu_core::hw::psc::Psc;
    fn general<V: Copy>(entries: usize, ways: usize, filler: V) -> usize {
        SetAssoc::new(entries, ways, filler).bytes()
    }
    let m = load_machine(name).expect("preset");
    let tr = Tagged {
        tag: 0,
        tmask: 0,
        val: Translation {
            page: Hpa::new(0),
            size: Size4K,
            writable: false,
            user: false,
            executable: false,
            dirty: false,
            global: false,
        },
    };
    let mut out = Vec::new();
    let tlb = TlbHierarchy::new(&m.tlb);
    let levels = [&m.tlb.l1d, &m.tlb.l1i, &m.tlb.l2, &m.tlb.l2i];
    for ((lname, arrays), bytes) in ["l1d", "l1i", "l2", "l2i"]
        .iter()
        .zip(levels)
        .zip(tlb.bytes())
    {
        if arrays.is_empty() {
            continue;
        }
        let g = arrays
            .iter()
            .map(|a| general(a.entries as usize, a.ways as usize, tr))
            .sum();
        out.push((format!("tlb.{lname}"), bytes, g));
    }
    let (e, w) = (m.pwc.entries as usize, m.pwc.ways as usize);
    out.push((
        "pwc".into(),
        Pwc::new(m.pwc.entries, m.pwc.ways).bytes(),
        general(e, w, ()),
    ));
    let (e, w) = (m.ntlb.entries as usize, m.ntlb.ways as usize);
    let nt = Tagged {
        tag: 0,
        tmask: 0,
        val: Hpa::new(0),
    };
    out.push((
        "ntlb".into(),
        Ntlb::new(m.ntlb.entries, m.ntlb.ways).bytes(),
        general(e, w, nt),
    ));
    let psc_general = [m.psc.pde, m.psc.pdpt, m.psc.pml4, m.psc.pml5]
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| general(n as usize, n as usize, (0u32, 0u64)))
        .sum();
    out.push(("psc".into(), Psc::new(&m.psc).bytes(), psc_general));
    let caches = MemoryHierarchy::new(&m.caches);
    for (l, bytes) in m.caches.levels.iter().zip(caches.bytes()) {
        let lines = (l.size.0 / m.caches.line as u64) as usize;
        out.push((
            format!("cache.{}", l.name),
            bytes,
            general(lines, l.ways as usize, ()),
        ));
    }
    out
}

/// Every structure of every machine preset takes no more memory in the representation chosen
/// for it than in the general array (`cargo test --test hw_model storage -- --nocapture`
/// prints the table).
#[test]
fn storage_is_no_larger_than_the_general_arrays_on_every_preset() {
    for (name, _) in vmmu_core::config::PRESETS {
        for (s, chosen, general) in storage_of(name) {
            println!("{name:14} {s:10} {general:>10} {chosen:>10}");
            assert!(
                chosen <= general,
                "{name}: {s} takes {chosen} bytes, {general} as the general array"
            );
        }
    }
}
