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
//! Simplifications: a lookup probes the L1 arrays of its side, then the L2 arrays; an L2 hit is
//! copied into the L1 arrays that hold its size; a walk fills both levels (non-inclusive,
//! non-exclusive: an eviction at one level leaves the other alone). Set indices are the page
//! number modulo the set count. Replacement is exact LRU.
//!
//! Speed: the last L1 hit of each side is remembered (keyed by the 4 KiB page number and the
//! exact tag) and answered without a scan until anything changes the L1 arrays of that side.
//! The remembered entry is the MRU entry of its set, so skipping the scan changes nothing.

use super::paged::PagedArray;
pub use super::HitMiss;
use crate::addr::{Gva, Hpa, PageSize};
use crate::config::{TlbArrayConfig, TlbConfig};

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

/// One level: arrays looked up in parallel, with the level's counters.
#[derive(Clone, Debug)]
struct Level {
    arrays: Vec<PagedArray<Translation>>,
    stats: HitMiss,
}

const FILLER: Translation = Translation {
    page: Hpa(0),
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
            arrays: cfg
                .iter()
                .map(|a| PagedArray::new(a.entries, a.ways, &a.sizes, FILLER))
                .collect(),
            stats: HitMiss::default(),
        }
    }

    #[inline]
    fn lookup(&mut self, va: u64, tag: u32) -> Option<Translation> {
        self.arrays
            .iter_mut()
            .find_map(|a| a.lookup(va, tag).map(|(_, t)| t))
    }

    fn fill(&mut self, va: u64, tag: u32, t: Translation) {
        for a in &mut self.arrays {
            a.fill(va, t.size, tag, tmask(&t), t);
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(u32, u32) -> bool) {
        for a in &mut self.arrays {
            a.retain(&mut keep);
        }
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

/// The TLB hierarchy of one core.
#[derive(Clone, Debug)]
pub struct TlbHierarchy {
    l1d: Level,
    l1i: Level,
    l2: Level,
    l2i: Level,
    memo: [Memo; 2],
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
        }
    }

    /// The L1 and L2 levels `side` uses.
    #[inline]
    fn levels(&mut self, side: TlbSide) -> (&mut Level, &mut Level) {
        match side {
            TlbSide::Data => (&mut self.l1d, &mut self.l2),
            TlbSide::Instr => {
                if self.l2i.arrays.is_empty() {
                    (&mut self.l1i, &mut self.l2)
                } else {
                    (&mut self.l1i, &mut self.l2i)
                }
            }
        }
    }

    /// Looks `va` up on `side` with `tag`: L1 (l1d or l1i) first, then L2 (`l2`; for Instr the
    /// `l2i` arrays when configured, else `l2`). An L2 hit fills L1. Counts one hit or miss at
    /// each level that has arrays and is reached.
    #[inline]
    pub fn lookup(&mut self, va: Gva, side: TlbSide, tag: Tag) -> Option<(TlbLevel, Translation)> {
        let (a, raw, s) = (va.raw(), tag.raw(), side as usize);
        let m = self.memo[s];
        let (l1, l2) = self.levels(side);
        if m.vpn == a >> 12 && m.tag == raw {
            l1.stats.hits += 1;
            return Some((TlbLevel::L1, m.t));
        }
        if !l1.arrays.is_empty() {
            if let Some(t) = l1.lookup(a, raw) {
                l1.stats.hits += 1;
                self.memo[s] = Memo {
                    vpn: a >> 12,
                    tag: raw,
                    t,
                };
                return Some((TlbLevel::L1, t));
            }
            l1.stats.misses += 1;
        }
        if l2.arrays.is_empty() {
            return None;
        }
        match l2.lookup(a, raw) {
            Some(t) => {
                l2.stats.hits += 1;
                l1.fill(a, raw, t);
                self.memo[s] = NO_MEMO;
                Some((TlbLevel::L2, t))
            }
            None => {
                l2.stats.misses += 1;
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
        l.arrays
            .iter()
            .find_map(|a| a.peek(va.raw(), tag.raw()).map(|(_, t)| t))
    }

    /// After a walk: inserts `t` into the L2 arrays of `side` that hold `t.size` (if any) and
    /// the L1 arrays that hold it (if any).
    pub fn fill(&mut self, va: Gva, side: TlbSide, tag: Tag, t: Translation) {
        debug_assert_eq!(t.page.page_offset(t.size), 0, "unaligned {t:?}");
        let (a, raw) = (va.raw(), tag.raw());
        self.memo[side as usize] = NO_MEMO;
        let (l1, l2) = self.levels(side);
        l2.fill(a, raw, t);
        l1.fill(a, raw, t);
    }

    /// After an A/D update: marks the cached translation of `va` dirty at every level of `side`.
    pub fn set_dirty(&mut self, va: Gva, side: TlbSide, tag: Tag) {
        let (a, raw) = (va.raw(), tag.raw());
        self.memo[side as usize] = NO_MEMO;
        let (l1, l2) = self.levels(side);
        for arr in l1.arrays.iter_mut().chain(l2.arrays.iter_mut()) {
            arr.update(a, raw, |t| t.dirty = true);
        }
    }

    fn all_levels(&mut self) -> [&mut Level; 4] {
        self.memo = [NO_MEMO; 2];
        [&mut self.l1d, &mut self.l1i, &mut self.l2, &mut self.l2i]
    }

    /// INVLPG: drops every entry (any size, any level, both sides) that maps `va` with `tag`,
    /// global ones included (Intel SDM Vol. 3A §4.10.4.1).
    pub fn invalidate_page(&mut self, va: Gva, tag: Tag) {
        let (a, raw) = (va.raw(), tag.raw());
        for l in self.all_levels() {
            for arr in &mut l.arrays {
                arr.invalidate(a, raw);
            }
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
            for arr in &mut l.arrays {
                arr.clear();
            }
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
        l.arrays.iter().map(|a| a.len()).sum()
    }

    /// Counters per structure: `l1d`, `l1i`, `l2`, and `l2i` only when l2i arrays exist.
    pub fn stats(&self) -> Vec<(&'static str, HitMiss)> {
        let mut v = vec![
            ("l1d", self.l1d.stats),
            ("l1i", self.l1i.stats),
            ("l2", self.l2.stats),
        ];
        if !self.l2i.arrays.is_empty() {
            v.push(("l2i", self.l2i.stats));
        }
        v
    }
}
