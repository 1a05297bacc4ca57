//! The TLB hierarchy: L1 data and instruction TLBs, an L2 TLB (unified, like Intel's STLB, or
//! with separate instruction arrays, like AMD's L2 I-TLB), each level a list of arrays looked
//! up in parallel, sets × ways, LRU (seed 002 Table 2; DESIGN.md "Hardware").
//!
//! Entries are tagged with the PCID and the VPID/ASID (Intel SDM Vol. 3A §4.10.1, §28.1; AMD
//! APM Vol. 2 §15.16). Global entries (leaf G bit with CR4.PGE) match any PCID of their VPID
//! (SDM §4.10.2.4). The flush operations are the x86 ones the simulator needs: INVLPG drops
//! the entries that map a page, global ones included (SDM §4.10.4.1); a CR3 write without PCID
//! drops the non-global entries of the current VPID; INVPCID single-context drops one tag's
//! non-global entries; a VM exit or entry without VPIDs flushes everything.
//!
//! Simplifications: a lookup probes the L1 arrays of its side in config order, then the L2
//! arrays (the first array that hits answers); an L2 hit is copied into the L1 arrays that
//! hold its size; a fill replaces entries of the same page and size whose tags overlap it (a
//! global entry overlaps every PCID of its VPID); a walk fills both levels (non-inclusive,
//! non-exclusive: an eviction at one level leaves the other alone). Set indices are the page
//! number modulo the set count. Replacement is exact LRU.
//!
//! Speed: each level's arrays are one concrete type chosen for the level's shape when the
//! machine is built (`LevelArrays`: the shapes of the presets' levels, the general list for
//! any other), matched once per operation, so that within a lookup or a fill the number of
//! arrays, their sizes and their storage are constants; the model is the same whatever the
//! choice (tests/hw_model.rs compares them). The last L1 hit of each side is remembered (keyed by the 4 KiB page number and the
//! exact tag) and answered without a lookup until anything changes the L1 arrays of that side.
//! The remembered entry is already the most recently used of its set and the same 4 KiB page
//! and tag make the same probes, so skipping them changes nothing. Likewise the last lookup
//! that missed at every level is remembered until anything changes the TLB: the walk's fill of
//! an ordinary (non-global) entry for that page and tag then inserts without searching for
//! entries to replace, since the lookup has just shown there are none (and an L2 hit's copy
//! into L1 does the same after the L1 miss).

use super::narrow::Narrow;
use super::paged::{Arrays, PagedArray, Tagged, ANY_SIZE, ONLY_2M, ONLY_4K};
use super::small::Small;
pub use super::HitMiss;
use crate::addr::{Gva, Hpa, PageSize};
use crate::config::{SizingSize, TlbArrayConfig, TlbConfig};

/// What a TLB entry holds: a translation at the entry's page size (already the splintered size:
/// the smaller of the guest and nested page sizes, seed 002 §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// Host-physical base of the page (aligned to `size`).
    pub page: Hpa,
    /// Page size of the entry.
    pub size: PageSize,
    /// Stores allowed (R/W set at every level).
    pub writable: bool,
    /// User-mode accesses allowed (U/S set at every level).
    pub user: bool,
    /// Instruction fetches allowed (no NX at any level).
    pub executable: bool,
    /// Leaf D bit(s) already set, so a store needs no A/D update.
    pub dirty: bool,
    /// Global (G bit): survives CR3 writes and matches any PCID.
    pub global: bool,
}

impl Translation {
    /// Whether the entry denies an access (a store to a read-only page, a fetch from a
    /// non-executable one): a TLB hit then faults instead of translating (SDM Vol. 3A §4.6).
    #[inline]
    pub fn denies(&self, write: bool, fetch: bool) -> bool {
        (write && !self.writable) || (fetch && !self.executable)
    }
}

/// The address-space tag of an entry: PCID (0 when PCIDs are off) and VPID/ASID (0 when VPIDs
/// are off, or for the host).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Tag {
    /// Process-context identifier (Intel SDM Vol. 3A §4.10.1).
    pub pcid: u16,
    /// Virtual-processor identifier / AMD ASID (SDM §28.1).
    pub vpid: u16,
}

impl Tag {
    /// The tag packed as the arrays store it: VPID in the high half, PCID in the low half.
    #[inline]
    pub const fn raw(self) -> u32 {
        ((self.vpid as u32) << 16) | self.pcid as u32
    }
}

/// Tag mask of a global entry: the VPID must match, the PCID is ignored.
const GLOBAL_MASK: u32 = 0xffff_0000;

#[inline]
fn tmask(t: &Translation) -> u32 {
    if t.global {
        GLOBAL_MASK
    } else {
        !0
    }
}

/// Which TLBs a lookup uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbSide {
    /// Loads and stores.
    Data,
    /// Instruction fetches.
    Instr,
}

/// The level where a lookup hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbLevel {
    /// An L1 TLB.
    L1,
    /// The L2 TLB (or STLB).
    L2,
}

/// A level's arrays as [`Arrays`] of translations (a call through it never resolves to
/// `Vec`'s own methods of the same names).
macro_rules! ops {
    ($method:ident($a:expr $(, $arg:expr)*)) => {
        <_ as Arrays<Translation>>::$method($a $(, $arg)*)
    };
}

/// A TLB array in concrete storage `S`, holding the sizes `H` may name.
type Fixed<S, const H: u8> = PagedArray<Translation, S, H>;
/// What a TLB array stores per entry.
type Entry = Tagged<Translation>;

/// A level's arrays, in the representation chosen for their shapes when the machine is built:
/// for each shape the machine presets give their data-side levels, one concrete type — the
/// number of arrays, the sizes of each and its storage fixed, so that within an operation's
/// arm they are constants — and the general list of arrays for any other shape. An operation
/// matches the variant once ([`with_arrays!`]) and runs the one body, written over
/// [`Arrays`], on it.
#[derive(Clone, Debug)]
enum LevelArrays {
    /// No array (an L2 I-TLB not configured).
    Empty(()),
    /// One array of 33 to 64 ways per set with 32-bit tags, any page sizes: the fully
    /// associative L1 TLBs of bhargava08, opteron2350 and zen3.
    Narrow64(Fixed<Narrow<Entry, 64>, ANY_SIZE>),
    /// One 4-way array of 4 KiB pages: nehalem-x5560's STLB, the L2 I-TLBs of bhargava08 and
    /// opteron2350.
    Ways4(Fixed<Small<Entry, 4>, ONLY_4K>),
    /// A 4-way array of 4 KiB pages beside a direct-mapped one of 2 MiB pages: bhargava08's L2
    /// TLB (seed 002 Table 2).
    Ways4Direct2M(
        (
            Fixed<Small<Entry, 4>, ONLY_4K>,
            Fixed<Small<Entry, 1>, ONLY_2M>,
        ),
    ),
    /// Any other shape: the arrays in the general [`Store`](super::store::Store), looked up in
    /// config order.
    General(Vec<PagedArray<Translation>>),
}

/// Runs `$body` with `$a` bound to the arrays of the [`LevelArrays`] `$arrays` (an expression
/// of type `&LevelArrays` or `&mut LevelArrays`): `$body` is compiled once per variant.
macro_rules! with_arrays {
    ($arrays:expr, $a:ident => $body:expr) => {
        match $arrays {
            LevelArrays::Empty($a) => $body,
            LevelArrays::Narrow64($a) => $body,
            LevelArrays::Ways4($a) => $body,
            LevelArrays::Ways4Direct2M($a) => $body,
            LevelArrays::General($a) => $body,
        }
    };
}

impl LevelArrays {
    /// The arrays of `cfg` in the variant of their shape (the general list for any shape
    /// without one).
    fn new(cfg: &[TlbArrayConfig]) -> Self {
        let general: Vec<PagedArray<Translation>> = cfg
            .iter()
            .map(|a| PagedArray::new(a.entries, a.ways, &a.sizes, FILLER))
            .collect();
        LevelArrays::specialise(general)
    }

    /// The arrays of `cfg` in the general list, whatever their shape.
    fn general(cfg: &[TlbArrayConfig]) -> Self {
        LevelArrays::General(
            cfg.iter()
                .map(|a| PagedArray::new(a.entries, a.ways, &a.sizes, FILLER))
                .collect(),
        )
    }

    /// `arrays` in the variant of their shape, where one fits.
    fn specialise(mut arrays: Vec<PagedArray<Translation>>) -> Self {
        match arrays.len() {
            0 => return LevelArrays::Empty(()),
            1 => {
                let a = arrays.pop().expect("one array");
                let a = match a.specialise() {
                    Ok(n) => return LevelArrays::Narrow64(n),
                    Err(a) => a,
                };
                let a = match a.specialise() {
                    Ok(s) => return LevelArrays::Ways4(s),
                    Err(a) => a,
                };
                arrays.push(a);
            }
            2 => {
                let b = arrays.pop().expect("two arrays");
                let a = arrays.pop().expect("two arrays");
                match (a.specialise(), b.specialise()) {
                    (Ok(a), Ok(b)) => return LevelArrays::Ways4Direct2M((a, b)),
                    (a, b) => {
                        arrays.push(a.map_or_else(|a| a, |a| a.general()));
                        arrays.push(b.map_or_else(|b| b, |b| b.general()));
                    }
                }
            }
            _ => {}
        }
        LevelArrays::General(arrays)
    }

    /// The same arrays, entries and recency orders in the general list (for a page a concrete
    /// representation does not take: a key beyond [`Narrow`]'s 32-bit tags).
    #[cold]
    #[inline(never)]
    fn generalise(&mut self) {
        *self = LevelArrays::General(match std::mem::replace(self, LevelArrays::Empty(())) {
            LevelArrays::Empty(()) => vec![],
            LevelArrays::Narrow64(a) => vec![a.general()],
            LevelArrays::Ways4(a) => vec![a.general()],
            LevelArrays::Ways4Direct2M((a, b)) => vec![a.general(), b.general()],
            LevelArrays::General(v) => v,
        });
    }

    /// Whether the level has no array.
    #[inline(always)]
    fn is_empty(&self) -> bool {
        matches!(self, LevelArrays::Empty(()))
    }

    /// The variant's name (for tests and reports).
    fn name(&self) -> &'static str {
        match self {
            LevelArrays::Empty(()) => "empty",
            LevelArrays::Narrow64(_) => "narrow64",
            LevelArrays::Ways4(_) => "ways4-4k",
            LevelArrays::Ways4Direct2M(_) => "ways4-4k+direct-2m",
            LevelArrays::General(_) => "general",
        }
    }
}

/// One level: arrays looked up in parallel, with the level's counters.
#[derive(Clone, Debug)]
struct Level {
    arrays: LevelArrays,
    stats: HitMiss,
}

const FILLER: Translation = Translation {
    page: Hpa::new(0),
    size: PageSize::Size4K,
    writable: false,
    user: false,
    executable: false,
    dirty: false,
    global: false,
};

impl Level {
    fn new(cfg: &[TlbArrayConfig]) -> Self {
        Level {
            arrays: LevelArrays::new(cfg),
            stats: HitMiss::default(),
        }
    }

    /// The hit of the first array that hits, if any, where it is stored (the hit becomes most
    /// recently used).
    #[inline(always)]
    fn lookup(arrays: &mut LevelArrays, va: u64, tag: u32) -> Option<&Translation> {
        with_arrays!(arrays, a => ops!(lookup_ref(a, va, tag)))
    }

    /// Inserts `t` into the arrays that hold its size (see [`PagedArray::fill`]); `absent`:
    /// a lookup of `va` with `tag` has just missed at this level, nothing has changed it
    /// since, and `t` is not global (see [`PagedArray::fill_absent`]).
    #[inline(always)]
    fn fill_as(&mut self, va: u64, tag: u32, t: Translation, absent: bool) {
        debug_assert!(!(absent && t.global));
        with_arrays!(&mut self.arrays, a => {
            if ops!(takes(&*a, va, t.size)) {
                if absent {
                    ops!(fill_absent(a, va, t.size, tag, t));
                } else {
                    ops!(fill(a, va, t.size, tag, tmask(&t), t));
                }
                return;
            }
        });
        self.arrays.generalise();
        self.fill_as(va, tag, t, absent);
    }

    fn fill(&mut self, va: u64, tag: u32, t: Translation) {
        self.fill_as(va, tag, t, false);
    }

    /// [`fill`](Self::fill) of a non-global `t` just after a lookup of `va` with `tag` missed
    /// at this level (see [`PagedArray::fill_absent`]).
    #[inline(always)]
    fn fill_absent(&mut self, va: u64, tag: u32, t: Translation) {
        self.fill_as(va, tag, t, true);
    }

    /// A probe's share of an L2 lookup for a store (`write`) or a fetch: the same lookup,
    /// counted. Where it misses and the real L2 level hit with `real`, it makes the fill a
    /// walk would have made. Where it hits an entry that denies the access, it drops the
    /// entry, as a run with this level would after the fault that follows (the fault
    /// invalidates the page's entries, SDM §4.10.4.1); the run's retry then misses here as it
    /// would there.
    #[inline]
    fn probe(&mut self, va: u64, tag: u32, real: Option<&Translation>, write: bool, fetch: bool) {
        if let Some(hit) = Level::lookup(&mut self.arrays, va, tag) {
            let denies = hit.denies(write, fetch);
            self.stats.hits += 1;
            if denies {
                with_arrays!(&mut self.arrays, a => ops!(invalidate(a, va, tag)));
            }
        } else {
            self.stats.misses += 1;
            if let Some(t) = real {
                self.fill(va, tag, *t);
            }
        }
    }

    /// Marks the entries that map `va` with `tag` dirty.
    fn set_dirty(&mut self, va: u64, tag: u32) {
        with_arrays!(&mut self.arrays, a => ops!(update(a, va, tag, &mut |t: &mut Translation| t.dirty = true)));
    }

    /// Drops the entries that map `va` with `tag`.
    fn invalidate(&mut self, va: u64, tag: u32) {
        with_arrays!(&mut self.arrays, a => ops!(invalidate(a, va, tag)));
    }

    fn retain(&mut self, mut keep: impl FnMut(u32, u32) -> bool) {
        with_arrays!(&mut self.arrays, a => ops!(retain(a, &mut keep)));
    }

    fn clear(&mut self) {
        with_arrays!(&mut self.arrays, a => ops!(clear(a)));
    }

    fn peek(&self, va: u64, tag: u32) -> Option<Translation> {
        with_arrays!(&self.arrays, a => ops!(peek(a, va, tag))).map(|(_, t)| t)
    }

    fn len(&self) -> usize {
        with_arrays!(&self.arrays, a => ops!(len(a)))
    }

    fn bytes(&self) -> usize {
        with_arrays!(&self.arrays, a => ops!(bytes(a)))
    }
}

/// The last L1 hit of one side: 4 KiB page number (`u64::MAX` = nothing remembered), tag, entry.
#[derive(Clone, Copy, Debug)]
struct Memo {
    vpn: u64,
    tag: u32,
    t: Translation,
}

const NO_MEMO: Memo = Memo {
    vpn: u64::MAX,
    tag: 0,
    t: FILLER,
};

/// The last lookup that missed at every level it reached, while nothing has changed since:
/// its side, 4 KiB page number (`u64::MAX` = none) and tag.
#[derive(Clone, Copy, Debug)]
struct Missed {
    side: TlbSide,
    vpn: u64,
    tag: u32,
}

const NO_MISS: Missed = Missed {
    side: TlbSide::Data,
    vpn: u64::MAX,
    tag: 0,
};

/// Index of the L1 DTLB in [`TlbHierarchy::counts`].
pub const COUNT_L1D: usize = 0;
/// Index of the L1 ITLB in [`TlbHierarchy::counts`].
pub const COUNT_L1I: usize = 1;
/// Index of the L2 TLB (the data side's, and the instruction side's without `l2i`) in
/// [`TlbHierarchy::counts`].
pub const COUNT_L2: usize = 2;
/// Index of the instruction-side L2 TLB `l2i` in [`TlbHierarchy::counts`].
pub const COUNT_L2I: usize = 3;
/// The names of [`TlbHierarchy::counts`]' entries in results.
const COUNT_NAMES: [&str; 4] = ["l1d", "l1i", "l2", "l2i"];

/// The TLB hierarchy of one core.
#[derive(Clone, Debug)]
pub struct TlbHierarchy {
    l1d: Level,
    l1i: Level,
    l2: Level,
    l2i: Level,
    memo: [Memo; 2],
    missed: Missed,
    /// Probe copies of `l2` at other sizes (a sizing study, [`TlbHierarchy::with_probes`]):
    /// they receive every operation `l2` receives and count, but never answer.
    probes: Vec<Level>,
}

impl TlbHierarchy {
    /// Builds the hierarchy from its (validated) config.
    pub fn new(cfg: &TlbConfig) -> Self {
        TlbHierarchy {
            l1d: Level::new(&cfg.l1d),
            l1i: Level::new(&cfg.l1i),
            l2: Level::new(&cfg.l2),
            l2i: Level::new(&cfg.l2i),
            memo: [NO_MEMO; 2],
            missed: NO_MISS,
            probes: Vec::new(),
        }
    }

    /// The hierarchy with every level's arrays in the general list, whatever their shapes: the
    /// same model as [`new`](Self::new)'s, which tests compare it with.
    pub fn general(cfg: &TlbConfig) -> Self {
        let level = |c: &[TlbArrayConfig]| Level {
            arrays: LevelArrays::general(c),
            stats: HitMiss::default(),
        };
        TlbHierarchy {
            l1d: level(&cfg.l1d),
            l1i: level(&cfg.l1i),
            l2: level(&cfg.l2),
            l2i: level(&cfg.l2i),
            ..TlbHierarchy::new(cfg)
        }
    }

    /// The storage each level's arrays were given for their shape, indexed as
    /// [`counts`](Self::counts) is: `"narrow64"` (one array of up to 64 ways per set, 32-bit
    /// tags), `"ways4-4k"` (one 4-way array of 4 KiB pages), `"ways4-4k+direct-2m"` (and a
    /// direct-mapped array of 2 MiB pages), `"empty"`, or `"general"` (the general list).
    pub fn representations(&self) -> [&'static str; 4] {
        [&self.l1d, &self.l1i, &self.l2, &self.l2i].map(|l| l.arrays.name())
    }

    /// The hierarchy with probe copies of the L2 level for a sizing study
    /// ([`SizingConfig`](crate::config::SizingConfig)): each probe is the L2 level with array
    /// `array` of `cfg.l2` built at one of `sizes`. A probe receives each L2 lookup (the L1 misses of the sides `l2`
    /// serves), each fill, dirty-bit update, invalidation and flush the L2 level receives;
    /// where it misses and the L2 level hits, it is filled with the L2's translation.
    pub fn with_probes(cfg: &TlbConfig, array: usize, sizes: &[SizingSize]) -> Self {
        let mut t = TlbHierarchy::new(cfg);
        t.probes = sizes
            .iter()
            .map(|z| {
                let mut arrays = cfg.l2.clone();
                arrays[array].entries = z.entries;
                arrays[array].ways = z.ways;
                Level::new(&arrays)
            })
            .collect();
        t
    }

    /// The hits and misses of each probe, in the order of the sizes given to
    /// [`with_probes`](Self::with_probes).
    pub fn probe_stats(&self) -> Vec<HitMiss> {
        self.probes.iter().map(|p| p.stats).collect()
    }

    /// The L1 and L2 levels `side` uses, its remembered hit, the last miss, and the probes
    /// of the L2 level (none when `side` uses `l2i`).
    #[inline]
    #[allow(clippy::type_complexity)]
    fn levels(
        &mut self,
        side: TlbSide,
    ) -> (&mut Level, &mut Level, &mut Memo, &mut Missed, &mut [Level]) {
        let TlbHierarchy {
            l1d,
            l1i,
            l2,
            l2i,
            memo,
            missed,
            probes,
        } = self;
        let [md, mi] = memo;
        match side {
            TlbSide::Data => (l1d, l2, md, missed, probes),
            TlbSide::Instr if l2i.arrays.is_empty() => (l1i, l2, mi, missed, probes),
            TlbSide::Instr => (l1i, l2i, mi, missed, &mut []),
        }
    }

    /// Looks `va` up on `side` with `tag`: L1 (l1d or l1i) first, then L2 (`l2`; for Instr the
    /// `l2i` arrays when configured, else `l2`). An L2 hit fills L1. Counts one hit or miss at
    /// each level that has arrays and is reached.
    #[inline(always)]
    pub fn lookup(&mut self, va: Gva, side: TlbSide, tag: Tag) -> Option<(TlbLevel, Translation)> {
        self.lookup_for(va, side, tag, false)
    }

    /// [`lookup`](Self::lookup) for a store (`write`) or not: only probes look at it (a probe
    /// that hits an entry denying the access drops it, as the fault that follows would).
    #[inline(always)]
    pub fn lookup_for(
        &mut self,
        va: Gva,
        side: TlbSide,
        tag: Tag,
        write: bool,
    ) -> Option<(TlbLevel, Translation)> {
        let m = &self.memo[side as usize];
        if m.vpn == va.raw() >> 12 && m.tag == tag.raw() {
            let t = m.t;
            match side {
                TlbSide::Data => self.l1d.stats.hits += 1,
                TlbSide::Instr => self.l1i.stats.hits += 1,
            }
            return Some((TlbLevel::L1, t));
        }
        self.lookup_arrays(va, side, tag, write)
            .map(|(l, t)| (l, *t))
    }

    /// The remembered L1 hit of `side` when it is for `tag`: its 4 KiB page number and entry.
    /// [`lookup`](Self::lookup) answers every lookup of that page and tag with it, without a
    /// search, until something changes the L1 arrays of `side`.
    #[inline(always)]
    pub fn remembered(&self, side: TlbSide, tag: Tag) -> Option<(u64, &Translation)> {
        let m = &self.memo[side as usize];
        (m.vpn != NO_MEMO.vpn && m.tag == tag.raw()).then_some((m.vpn, &m.t))
    }

    /// Counts `n` L1 hits of `side` answered by its [`remembered`](Self::remembered) hit: what
    /// `n` lookups of its page would have counted.
    #[inline]
    pub fn count_remembered(&mut self, side: TlbSide, n: u64) {
        match side {
            TlbSide::Data => self.l1d.stats.hits += n,
            TlbSide::Instr => self.l1i.stats.hits += n,
        }
    }

    /// [`lookup`](Self::lookup) past the remembered hit. It returns a reference (two
    /// registers) rather than assembling the 17-byte result on its own stack, which costs a
    /// store-forwarding stall when it is copied out.
    #[inline(never)]
    fn lookup_arrays(
        &mut self,
        va: Gva,
        side: TlbSide,
        tag: Tag,
        write: bool,
    ) -> Option<(TlbLevel, &Translation)> {
        let fetch = side == TlbSide::Instr;
        let (a, raw) = (va.raw(), tag.raw());
        let (l1, l2, m, missed, probes) = self.levels(side);
        // Translations are copied once, from storage (a copy of a value just assembled in
        // pieces on the stack would stall store forwarding).
        if !l1.arrays.is_empty() {
            if let Some(hit) = Level::lookup(&mut l1.arrays, a, raw) {
                m.t = *hit;
                m.vpn = a >> 12;
                m.tag = raw;
                l1.stats.hits += 1;
                return Some((TlbLevel::L1, &m.t));
            }
            l1.stats.misses += 1;
        }
        if l2.arrays.is_empty() {
            return None;
        }
        let Level { arrays, stats } = l2;
        match Level::lookup(arrays, a, raw) {
            Some(t) => {
                stats.hits += 1;
                for p in probes.iter_mut() {
                    p.probe(a, raw, Some(t), write, fetch);
                }
                // L1 has just missed this page and tag.
                if t.global {
                    l1.fill(a, raw, *t);
                } else {
                    l1.fill_absent(a, raw, *t);
                }
                *m = NO_MEMO;
                *missed = NO_MISS;
                Some((TlbLevel::L2, t))
            }
            None => {
                stats.misses += 1;
                for p in probes.iter_mut() {
                    p.probe(a, raw, None, write, fetch);
                }
                *missed = Missed {
                    side,
                    vpn: a >> 12,
                    tag: raw,
                };
                None
            }
        }
    }

    /// Like [`lookup`](Self::lookup) at one level only, without counting, filling or touching
    /// the LRU order (for tests and checks).
    pub fn peek(&self, va: Gva, side: TlbSide, tag: Tag, level: TlbLevel) -> Option<Translation> {
        let l = match (side, level) {
            (TlbSide::Data, TlbLevel::L1) => &self.l1d,
            (TlbSide::Instr, TlbLevel::L1) => &self.l1i,
            (TlbSide::Instr, TlbLevel::L2) if !self.l2i.arrays.is_empty() => &self.l2i,
            (_, TlbLevel::L2) => &self.l2,
        };
        l.peek(va.raw(), tag.raw())
    }

    /// After a walk: inserts `t` into the L2 arrays of `side` that hold `t.size` (if any) and
    /// the L1 arrays that hold it (if any). Inlined into the walk's one caller, which saves
    /// a call's register saves and restores on every TLB miss.
    #[inline]
    pub fn fill(&mut self, va: Gva, side: TlbSide, tag: Tag, t: Translation) {
        debug_assert_eq!(t.page.page_offset(t.size), 0, "unaligned {t:?}");
        let (a, raw) = (va.raw(), tag.raw());
        let missed = std::mem::replace(&mut self.missed, NO_MISS);
        let absent = !t.global && missed.vpn == a >> 12 && missed.tag == raw && missed.side == side;
        let (l1, l2, m, _, probes) = self.levels(side);
        *m = NO_MEMO;
        for p in probes.iter_mut() {
            p.fill(a, raw, t);
        }
        if absent {
            l2.fill_absent(a, raw, t);
            l1.fill_absent(a, raw, t);
        } else {
            l2.fill(a, raw, t);
            l1.fill(a, raw, t);
        }
    }

    /// After an A/D update: marks the cached translation of `va` dirty at every level of `side`.
    pub fn set_dirty(&mut self, va: Gva, side: TlbSide, tag: Tag) {
        let (a, raw) = (va.raw(), tag.raw());
        let (l1, l2, m, missed, probes) = self.levels(side);
        *missed = NO_MISS;
        *m = NO_MEMO;
        for l in [l1, l2].into_iter().chain(probes.iter_mut()) {
            l.set_dirty(a, raw);
        }
    }

    /// Every level, the probes included.
    fn each_level(&mut self) -> impl Iterator<Item = &mut Level> {
        [&mut self.l1d, &mut self.l1i, &mut self.l2, &mut self.l2i]
            .into_iter()
            .chain(self.probes.iter_mut())
    }

    /// Every level, the probes included, after forgetting the remembered hit and miss (for
    /// what changes the arrays' contents).
    fn all_levels(&mut self) -> impl Iterator<Item = &mut Level> {
        self.memo = [NO_MEMO; 2];
        self.missed = NO_MISS;
        self.each_level()
    }

    /// INVLPG: drops every entry (any size, any level, both sides) that maps `va` with `tag`,
    /// global ones included (Intel SDM Vol. 3A §4.10.4.1).
    pub fn invalidate_page(&mut self, va: Gva, tag: Tag) {
        let (a, raw) = (va.raw(), tag.raw());
        for l in self.all_levels() {
            l.invalidate(a, raw);
        }
    }

    /// CR3 write without PCID: drops the non-global entries of `vpid` (SDM §4.10.4.1).
    pub fn flush_nonglobal(&mut self, vpid: u16) {
        for l in self.all_levels() {
            l.retain(|t, m| !(m == !0 && t >> 16 == vpid as u32));
        }
    }

    /// INVPCID-style (single context): drops the non-global entries with exactly this tag.
    pub fn flush_tag(&mut self, tag: Tag) {
        let raw = tag.raw();
        for l in self.all_levels() {
            l.retain(|t, m| !(m == !0 && t == raw));
        }
    }

    /// Drops all entries of one VPID/ASID, global ones included (INVVPID single-context).
    pub fn flush_vpid(&mut self, vpid: u16) {
        for l in self.all_levels() {
            l.retain(|t, _| t >> 16 != vpid as u32);
        }
    }

    /// Drops everything (a VM exit or entry when VPIDs are off, a CR4.PGE toggle).
    pub fn flush_all(&mut self) {
        for l in self.all_levels() {
            l.clear();
        }
    }

    /// Entries held at `level` of `side` (for tests and reports).
    pub fn len(&self, side: TlbSide, level: TlbLevel) -> usize {
        let l = match (side, level) {
            (TlbSide::Data, TlbLevel::L1) => &self.l1d,
            (TlbSide::Instr, TlbLevel::L1) => &self.l1i,
            (TlbSide::Instr, TlbLevel::L2) if !self.l2i.arrays.is_empty() => &self.l2i,
            (_, TlbLevel::L2) => &self.l2,
        };
        l.len()
    }

    /// Bytes of storage of each level, indexed as [`counts`](Self::counts) is.
    pub fn bytes(&self) -> [usize; 4] {
        [&self.l1d, &self.l1i, &self.l2, &self.l2i].map(|l| l.bytes())
    }

    /// Zeroes every level's counters (the end of a warm-up); the contents stay.
    pub fn reset_stats(&mut self) {
        for l in self.each_level() {
            l.stats = HitMiss::default();
        }
    }

    /// Adds `o`'s counters to these (the totals of several cores).
    pub fn absorb_stats(&mut self, o: &TlbHierarchy) {
        self.l1d.stats += o.l1d.stats;
        self.l1i.stats += o.l1i.stats;
        self.l2.stats += o.l2.stats;
        self.l2i.stats += o.l2i.stats;
        for (p, q) in self.probes.iter_mut().zip(&o.probes) {
            p.stats += q.stats;
        }
    }

    /// Counters per structure: `l1d`, `l1i`, `l2`, and `l2i` only when l2i arrays exist.
    pub fn stats(&self) -> Vec<(&'static str, HitMiss)> {
        self.named(&self.counts())
    }

    /// Counters per structure as plain values, indexed by [`COUNT_L1D`], [`COUNT_L1I`],
    /// [`COUNT_L2`] and [`COUNT_L2I`] (the last zero when no l2i arrays exist): what a copy of
    /// a running simulation's counters holds.
    pub fn counts(&self) -> [HitMiss; 4] {
        let mut c = [HitMiss::default(); 4];
        c[COUNT_L1D] = self.l1d.stats;
        c[COUNT_L1I] = self.l1i.stats;
        c[COUNT_L2] = self.l2.stats;
        c[COUNT_L2I] = self.l2i.stats;
        c
    }

    /// `counts` (of [`counts`](Self::counts), at any moment of this hierarchy's run) named
    /// as [`stats`](Self::stats) names them.
    pub fn named(&self, counts: &[HitMiss; 4]) -> Vec<(&'static str, HitMiss)> {
        let used = if self.l2i.arrays.is_empty() { 3 } else { 4 };
        COUNT_NAMES
            .into_iter()
            .zip(counts.iter().copied())
            .take(used)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PageSize::*;

    fn arr(entries: u32, ways: u32, sizes: &[PageSize]) -> TlbArrayConfig {
        TlbArrayConfig {
            entries,
            ways,
            sizes: sizes.to_vec(),
        }
    }

    /// Seed 002 Table 2's TLBs (the bhargava08 preset).
    fn bhargava() -> TlbHierarchy {
        TlbHierarchy::new(&TlbConfig {
            l1d: vec![arr(64, 64, &[Size4K, Size2M, Size1G])],
            l1i: vec![arr(32, 32, &[Size4K]), arr(16, 16, &[Size2M])],
            l2: vec![arr(512, 4, &[Size4K]), arr(128, 1, &[Size2M])],
            l2i: vec![arr(512, 4, &[Size4K])],
            l2_latency: 5,
            pcid: true,
            vpid: true,
        })
    }

    fn small(l1: u32) -> TlbHierarchy {
        TlbHierarchy::new(&TlbConfig {
            l1d: vec![arr(l1, l1, &[Size4K])],
            l1i: vec![],
            l2: vec![],
            l2i: vec![],
            l2_latency: 5,
            pcid: true,
            vpid: true,
        })
    }

    fn tr(page: u64, size: PageSize) -> Translation {
        Translation {
            page: Hpa::new(page),
            size,
            writable: true,
            user: true,
            executable: false,
            dirty: false,
            global: false,
        }
    }

    const D: TlbSide = TlbSide::Data;
    const I: TlbSide = TlbSide::Instr;
    const T0: Tag = Tag { pcid: 0, vpid: 1 };

    fn stat(t: &TlbHierarchy, name: &str) -> HitMiss {
        t.stats().into_iter().find(|(n, _)| *n == name).unwrap().1
    }

    /// Lookup, and on a miss, the walk's fill: how the simulator drives the TLB.
    fn touch(t: &mut TlbHierarchy, va: Gva, size: PageSize) -> bool {
        let hit = t.lookup(va, D, T0).is_some();
        if !hit {
            t.fill(va, D, T0, tr(va.page_base(size).raw() + (1 << 32), size));
        }
        hit
    }

    #[test]
    fn direct_mapped_2m_array_misses_on_every_conflicting_lookup() {
        // Seed 002 Table 2's 128-entry direct-mapped L2 D-TLB for 2 MiB pages, alone.
        let mut t = TlbHierarchy::new(&TlbConfig {
            l1d: vec![],
            l1i: vec![],
            l2: vec![arr(128, 1, &[Size2M])],
            l2i: vec![],
            l2_latency: 5,
            pcid: false,
            vpid: false,
        });
        let mb2 = 2u64 << 20;
        // 2 MiB pages 1 and 129 share set 1: alternating between them always misses.
        let hits: Vec<bool> = (0..6)
            .map(|i| {
                touch(
                    &mut t,
                    Gva::new(if i % 2 == 0 { mb2 } else { 129 * mb2 }),
                    Size2M,
                )
            })
            .collect();
        assert_eq!(hits, [false; 6]);
        // Pages 1 and 2 use sets 1 and 2: page 129 holds set 1 and page 2 is cold, so two
        // misses, then hits.
        let hits: Vec<bool> = (0..6)
            .map(|i| touch(&mut t, Gva::new((1 + i % 2) * mb2 + 0x1000), Size2M))
            .collect();
        assert_eq!(hits, [false, false, true, true, true, true]);
        assert_eq!(stat(&t, "l2"), HitMiss { hits: 4, misses: 8 });
        assert_eq!(stat(&t, "l1d"), HitMiss::default());
        assert_eq!(t.len(D, TlbLevel::L2), 2);
    }

    #[test]
    fn fully_associative_l1_evicts_in_lru_order() {
        let mut t = small(4);
        let page = |i: u64| Gva::new(i << 12);
        for i in 0..4 {
            t.fill(page(i), D, T0, tr(i << 12, Size4K));
        }
        // Touch 0, so 1 is the least recently used.
        assert!(t.lookup(page(0), D, T0).is_some());
        t.fill(page(4), D, T0, tr(4 << 12, Size4K));
        let hits: Vec<bool> = (0..5)
            .map(|i| t.peek(page(i), D, T0, TlbLevel::L1).is_some())
            .collect();
        assert_eq!(hits, [true, false, true, true, true]);
        // Now 2 is the LRU entry.
        t.fill(page(5), D, T0, tr(5 << 12, Size4K));
        assert!(t.peek(page(2), D, T0, TlbLevel::L1).is_none());
        assert_eq!(t.len(D, TlbLevel::L1), 4);
        assert_eq!(stat(&t, "l1d"), HitMiss { hits: 1, misses: 0 });
    }

    #[test]
    fn l2_hit_fills_l1_and_counts_both_levels() {
        let mut t = bhargava();
        let va = Gva::new(0x7000_1234);
        assert_eq!(t.lookup(va, D, T0), None);
        t.fill(va, D, T0, tr(0x9000, Size4K));
        t.l1d.clear(); // as if evicted from L1 only
        let got = t.lookup(va, D, T0).unwrap();
        assert_eq!(got, (TlbLevel::L2, tr(0x9000, Size4K)));
        assert_eq!(t.lookup(va, D, T0).unwrap().0, TlbLevel::L1);
        assert_eq!(stat(&t, "l1d"), HitMiss { hits: 1, misses: 2 });
        assert_eq!(stat(&t, "l2"), HitMiss { hits: 1, misses: 1 });
        assert_eq!(stat(&t, "l2i"), HitMiss::default());
        // Fetches use l1i then l2i: the data fill is not visible to them.
        assert_eq!(t.lookup(va, I, T0), None);
        assert_eq!(stat(&t, "l1i"), HitMiss { hits: 0, misses: 1 });
        assert_eq!(stat(&t, "l2i"), HitMiss { hits: 0, misses: 1 });
    }

    #[test]
    fn one_gig_page_lives_in_the_any_size_l1_but_no_l2_array() {
        let mut t = bhargava();
        let gb = 1u64 << 30;
        t.fill(Gva::new(3 * gb + 5), D, T0, tr(7 * gb, Size1G));
        assert_eq!(t.len(D, TlbLevel::L1), 1);
        assert_eq!(t.len(D, TlbLevel::L2), 0);
        let (lvl, got) = t.lookup(Gva::new(4 * gb - 1), D, T0).unwrap();
        assert_eq!(
            (lvl, got.page, got.size),
            (TlbLevel::L1, Hpa::new(7 * gb), Size1G)
        );
        assert_eq!(t.lookup(Gva::new(4 * gb), D, T0), None);
        // The I-side has no 1 GiB array: a fill leaves it empty.
        t.fill(Gva::new(3 * gb), I, T0, tr(7 * gb, Size1G));
        assert_eq!(t.len(I, TlbLevel::L1) + t.len(I, TlbLevel::L2), 0);
    }

    #[test]
    fn global_entries_survive_a_cr3_write() {
        let mut t = bhargava();
        let g = Translation {
            global: true,
            ..tr(0x10_0000, Size4K)
        };
        t.fill(Gva::new(0xffff_8000_0000_0000), D, T0, g);
        t.fill(Gva::new(0x40_0000), D, T0, tr(0x20_0000, Size4K));
        t.flush_nonglobal(T0.vpid);
        assert_eq!(t.lookup(Gva::new(0x40_0000), D, T0), None);
        let other_pcid = Tag { pcid: 3, vpid: 1 };
        assert_eq!(
            t.lookup(Gva::new(0xffff_8000_0000_0008), D, other_pcid),
            Some((TlbLevel::L1, g))
        );
        // Another VM's lookup does not see it; flushing that VM's VPID keeps it.
        assert_eq!(
            t.lookup(Gva::new(0xffff_8000_0000_0000), D, Tag { pcid: 0, vpid: 2 }),
            None
        );
        t.flush_vpid(2);
        assert!(t
            .peek(Gva::new(0xffff_8000_0000_0000), D, T0, TlbLevel::L2)
            .is_some());
        t.flush_vpid(1);
        assert_eq!(t.len(D, TlbLevel::L1) + t.len(D, TlbLevel::L2), 0);
    }

    #[test]
    fn pcid_tagged_entries_survive_another_pcids_flush() {
        let mut t = bhargava();
        let (a, b) = (Tag { pcid: 1, vpid: 1 }, Tag { pcid: 2, vpid: 1 });
        let va = Gva::new(0x5000);
        t.fill(va, D, a, tr(0xa000, Size4K));
        t.fill(va, D, b, tr(0xb000, Size4K));
        assert_eq!(t.lookup(va, D, a).unwrap().1.page, Hpa::new(0xa000));
        assert_eq!(t.lookup(va, D, b).unwrap().1.page, Hpa::new(0xb000));
        t.flush_tag(b);
        assert_eq!(t.lookup(va, D, b), None);
        assert_eq!(t.lookup(va, D, a).unwrap().1.page, Hpa::new(0xa000));
        assert_eq!(stat(&t, "l1d"), HitMiss { hits: 3, misses: 1 });
    }

    #[test]
    fn invlpg_removes_a_2m_entry_that_covers_the_address() {
        let mut t = bhargava();
        let va = Gva::new(0x60_0000);
        t.fill(va, D, T0, tr(0x4000_0000, Size2M));
        t.fill(va, I, T0, tr(0x4000_0000, Size2M));
        t.fill(Gva::new(0x80_0000), D, T0, tr(0x4020_0000, Size2M));
        assert!(t.lookup(Gva::new(0x7f_f000), D, T0).is_some());
        t.invalidate_page(Gva::new(0x7a_b123), T0);
        assert_eq!(t.lookup(Gva::new(0x7f_f000), D, T0), None);
        assert_eq!(t.lookup(va, I, T0), None);
        assert!(t.lookup(Gva::new(0x80_0000), D, T0).is_some());
    }

    #[test]
    fn set_dirty_marks_every_level_and_the_remembered_hit() {
        let mut t = bhargava();
        let va = Gva::new(0x3000);
        t.fill(va, D, T0, tr(0x9000, Size4K));
        assert!(!t.lookup(va, D, T0).unwrap().1.dirty);
        t.set_dirty(va, D, T0);
        assert!(t.lookup(va, D, T0).unwrap().1.dirty);
        assert!(t.peek(va, D, T0, TlbLevel::L2).unwrap().dirty);
    }

    #[test]
    fn remembered_hit_is_forgotten_when_l1_changes() {
        let mut t = bhargava();
        let va = Gva::new(0x3000);
        t.fill(va, D, T0, tr(0x9000, Size4K));
        assert!(t.lookup(va, D, T0).is_some());
        t.invalidate_page(va, T0);
        assert_eq!(t.lookup(va, D, T0), None);
        t.fill(va, D, T0, tr(0xa000, Size4K));
        assert_eq!(t.lookup(va, D, T0).unwrap().1.page, Hpa::new(0xa000));
        t.fill(va, D, T0, tr(0xb000, Size4K));
        assert_eq!(t.lookup(va, D, T0).unwrap().1.page, Hpa::new(0xb000));
        assert_eq!(t.len(D, TlbLevel::L1), 1);
    }
}
