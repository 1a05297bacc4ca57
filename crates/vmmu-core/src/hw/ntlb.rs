//! The Nested TLB (NTLB) of seed 002 §4.2 (2D_PWC+NT): a dedicated guest-physical →
//! host-physical translation buffer for the pages that hold guest page entries. It caches the
//! `{nL1, ·}` entry of a nested walk, so a hit skips the nested references of a row of the 2D
//! walk, and one entry serves every page entry in the same page.
//!
//! An entry maps the guest-physical page of the nested leaf's size (4 KiB, 2 MiB or 1 GiB) to
//! its host-physical base, tagged by VPID/ASID. Seed 002 Table 2: 16 entries, fully associative,
//! LRU, never flushed during guest execution (the hypervisor flushes it when it changes nested
//! tables). A set-associative configuration probes, for each nested page size present, the set
//! of the gPA's page number at that size (as the TLB arrays do).
//!
//! Simplifications: exact LRU; no permission bits are kept (nested permissions are checked by
//! the walk that fills the entry).
//!
//! Storage, chosen when the machine is built (the model is one whatever the choice): a shape of
//! 9 to 32 ways in a power-of-two number of sets — every preset's, 16 or 32 entries fully
//! associative — keeps each entry's VPID folded into its key, one `u32` tag per way of
//! [`Narrow`] storage (`vpid << 28 | page number << 2 | size code`), so that a probe is one
//! SIMD compare of the set's tags and a match is the entry, VPID included; any other shape,
//! and any of these once a guest-physical address of 256 GiB or more or a VPID above 14 comes
//! by, is the general [`PagedArray`] with the VPID in each entry's tag (the folded entries are
//! handed over with the same ways and recency order, so results never depend on the
//! addresses or the VPIDs, only the speed does). Both take the ways the general store takes
//! (an insertion takes the set's oldest way, as [`Narrow`] does), probe the sizes smallest
//! first and skip a size of which no entry was filled; tests/hw_model.rs runs the folded
//! storage against the general one on random sequences of lookups, fills and flushes.

use super::narrow::Narrow;
use super::paged::{first_size, size_code, PagedArray, Tagged, ANY_SIZE, ONLY_4K, SHIFT};
use super::store::{Concrete, LruStore};
pub use super::HitMiss;
use crate::addr::{Gpa, Hpa, PageSize};

/// The bits of a folded tag below its VPID: the page key (page number << 2 | size code).
const KEY_BITS: u32 = 28;
/// The page key of a folded tag.
const KEY_MASK: u64 = (1 << KEY_BITS) - 1;
/// Guest-physical addresses whose page key folds at every size (the 4 KiB key is the largest):
/// below 256 GiB.
const GPA_LIMIT: u64 = 1 << (KEY_BITS - 2 + 12);
/// VPIDs that fold: below 15, so that no tag is [`NO_TAG`](super::narrow::NO_TAG).
const VPID_LIMIT: u16 = (1 << (32 - KEY_BITS)) - 1;

/// Whether the entries of `gpa` for `vpid`, at every page size, fold into `u32` tags.
#[inline(always)]
fn folds(gpa: Gpa, vpid: u16) -> bool {
    gpa.raw() < GPA_LIMIT && vpid < VPID_LIMIT
}

/// The folded tag of page key `key` for `vpid` (both fold).
#[inline(always)]
fn fold(key: u64, vpid: u16) -> u64 {
    ((vpid as u64) << KEY_BITS) | key
}

/// An NTLB's entries with the VPID folded into each key: sets of up to `L` ways of [`Narrow`]
/// storage, each entry's value its host-physical page. Only entries that [fold](folds) are
/// filled in (each maps a page wholly below 256 GiB, for a VPID below 15), so an address or a
/// VPID that does not fold misses.
#[derive(Clone, Debug)]
struct Folded<const L: usize> {
    arr: Narrow<Hpa, L>,
    /// The size codes filled since the array was last emptied (one bit each; every size held
    /// is among them): a probe visits these sizes only.
    filled: u8,
}

impl<const L: usize> Folded<L> {
    fn new(sets: usize, ways: usize) -> Self {
        Folded {
            arr: Narrow::new(sets, ways, Hpa::new(0)),
            filled: 0,
        }
    }

    /// The set and folded tag of the page of size code `code` holding `gpa`, for `vpid` (both
    /// fold): where a probe of that size looks and what it compares, and where a fill of that
    /// size goes.
    #[inline(always)]
    fn slot(&self, gpa: Gpa, vpid: u16, code: usize) -> (usize, u64) {
        let page = gpa.raw() >> SHIFT[code];
        (self.arr.set_of(page), fold((page << 2) | code as u64, vpid))
    }

    /// The set, way and size code of the entry mapping `gpa` for `vpid`, the sizes filled
    /// (bounded by `H`) probed smallest first.
    #[inline(always)]
    fn find<const H: u8>(&self, gpa: Gpa, vpid: u16) -> Option<((usize, usize), usize)> {
        if !folds(gpa, vpid) {
            return None;
        }
        first_size::<_, H>(self.filled, |code| {
            let (set, key) = self.slot(gpa, vpid, code);
            Some((set, self.arr.find(set, key, |_| true)?))
        })
    }

    /// [`Ntlb::lookup`] over the sizes of `H`, uncounted: the hit made the most recently used
    /// of its set.
    #[inline(always)]
    fn hit<const H: u8>(&mut self, gpa: Gpa, vpid: u16) -> Option<(Hpa, PageSize)> {
        let ((set, way), code) = self.find::<H>(gpa, vpid)?;
        let page = *self.arr.touch(set, way);
        let offset = gpa.raw() & ((1 << SHIFT[code]) - 1);
        Some((page.add(offset), PageSize::ALL[code]))
    }

    /// [`Ntlb::lookup`], uncounted. Where only 4 KiB entries were filled (the common case) the
    /// probe is that size's alone, its shift a constant; any other mix of sizes is probed out
    /// of line.
    #[inline(always)]
    fn lookup(&mut self, gpa: Gpa, vpid: u16) -> Option<(Hpa, PageSize)> {
        if self.filled == ONLY_4K {
            self.hit::<ONLY_4K>(gpa, vpid)
        } else {
            self.lookup_sizes(gpa, vpid)
        }
    }

    /// [`lookup`](Self::lookup) probing every size filled.
    #[inline(never)]
    fn lookup_sizes(&mut self, gpa: Gpa, vpid: u16) -> Option<(Hpa, PageSize)> {
        self.hit::<ANY_SIZE>(gpa, vpid)
    }

    /// Inserts the entry, known absent, as the most recently used of its set.
    #[inline(always)]
    fn insert(&mut self, gpa: Gpa, vpid: u16, page: Hpa, size: PageSize) {
        let code = size_code(size);
        let (set, key) = self.slot(gpa, vpid, code);
        self.insert_at(set, key, code, page);
    }

    /// Inserts `page` under `key` in `set` (the slot of a page of size code `code`), known
    /// absent, as the most recently used of the set.
    #[inline(always)]
    fn insert_at(&mut self, set: usize, key: u64, code: usize, page: Hpa) {
        self.arr.insert(set, key, page);
        self.filled |= 1 << code;
    }

    /// [`Ntlb::fill`] where `gpa` and `vpid` fold: the page's entry for `vpid`, if any, is
    /// replaced (removed, then the insertion takes the set's oldest way, as the general
    /// array's fill does).
    #[inline(always)]
    fn fill(&mut self, gpa: Gpa, vpid: u16, page: Hpa, size: PageSize) {
        let code = size_code(size);
        let (set, key) = self.slot(gpa, vpid, code);
        if let Some(way) = self.arr.find(set, key, |_| true) {
            self.arr.remove(set, way);
        }
        self.insert_at(set, key, code, page);
    }

    /// Drops the entries of `vpid`.
    fn flush_vpid(&mut self, vpid: u16) {
        self.arr.retain(|k, _| k >> KEY_BITS != vpid as u64);
        self.filled = self
            .entries()
            .fold(0, |m, (_, key, _, _)| m | 1 << (key & 3));
    }

    /// Drops everything.
    fn clear(&mut self) {
        self.arr.clear();
        self.filled = 0;
    }

    /// Every entry as `(set, page key, VPID, host-physical page)`, each set most recently used
    /// first.
    fn entries(&self) -> impl Iterator<Item = (usize, u64, u16, Hpa)> + '_ {
        (0..self.arr.sets()).flat_map(move |set| {
            self.arr
                .iter_set(set)
                .map(move |(k, &v)| (set, k & KEY_MASK, (k >> KEY_BITS) as u16, v))
        })
    }

    /// The same entries, ways and recency order in the general array, the VPID in each
    /// entry's tag.
    fn general(&self) -> PagedArray<Hpa>
    where
        Narrow<Tagged<Hpa>, L>: Concrete<Tagged<Hpa>>,
    {
        let filler = Tagged {
            tag: 0,
            tmask: 0,
            val: Hpa::new(0),
        };
        let arr = self.arr.map(filler, |k, val| {
            let tag = (k >> KEY_BITS) as u32;
            (
                k & KEY_MASK,
                Tagged {
                    tag,
                    tmask: !0,
                    val,
                },
            )
        });
        PagedArray::from_store(arr.into_store(), &PageSize::ALL)
    }
}

/// An NTLB's storage, chosen for its shape when the machine is built (module doc). Its
/// discriminant is an explicit byte, so that matching it is one load and a compare.
#[derive(Clone, Debug)]
#[repr(u8)]
enum NtlbArray {
    /// 9 to 16 ways per set, the VPID folded into the tags.
    Folded16(Folded<16>),
    /// 17 to 32 ways per set, the VPID folded into the tags.
    Folded32(Folded<32>),
    /// Any shape: the general paged array, the VPID in each entry's tag.
    General(PagedArray<Hpa>),
}

/// Runs `$folded` with `$f` bound to a folded storage, or `$general` with `$g` bound to the
/// general array, whichever `$arr` (an `NtlbArray`, by reference) holds: `$folded` is
/// compiled once per way count.
///
/// With a condition (`$f if $cond => $folded, _ => $other`), `$folded` runs only where the
/// storage is folded and `$cond` holds, `$other` everywhere else.
macro_rules! with_ntlb {
    ($arr:expr, $f:ident => $folded:expr, $g:ident => $general:expr) => {
        match $arr {
            NtlbArray::Folded16($f) => $folded,
            NtlbArray::Folded32($f) => $folded,
            NtlbArray::General($g) => $general,
        }
    };
    ($arr:expr, $f:ident if $cond:expr => $folded:expr, _ => $other:expr) => {
        match $arr {
            NtlbArray::Folded16($f) if $cond => $folded,
            NtlbArray::Folded32($f) if $cond => $folded,
            _ => $other,
        }
    };
}

/// A Nested TLB: gPA page → hPA page, at the nested leaf's page size.
#[derive(Clone, Debug)]
pub struct Ntlb {
    arr: NtlbArray,
    stats: HitMiss,
}

impl Ntlb {
    /// `entries` entries in sets of `ways` (seed 002 Table 2: 16, fully associative), in the
    /// storage chosen for that shape (module doc).
    pub fn new(entries: u32, ways: u32) -> Self {
        let (sets, w) = ((entries / ways) as usize, ways as usize);
        let arr = match w {
            _ if !sets.is_power_of_two() || !(entries as usize).is_multiple_of(w) => {
                return Ntlb::general(entries, ways)
            }
            9..=16 => NtlbArray::Folded16(Folded::new(sets, w)),
            17..=32 => NtlbArray::Folded32(Folded::new(sets, w)),
            _ => return Ntlb::general(entries, ways),
        };
        Ntlb {
            arr,
            stats: HitMiss::default(),
        }
    }

    /// The same NTLB in the general array, whatever its shape (for tests that compare the
    /// storages).
    pub fn general(entries: u32, ways: u32) -> Self {
        Ntlb {
            arr: NtlbArray::General(PagedArray::new(entries, ways, &PageSize::ALL, Hpa::new(0))),
            stats: HitMiss::default(),
        }
    }

    /// The storage's name: `folded16`, `folded32` or `general` (for tests and reports).
    pub fn storage(&self) -> &'static str {
        match self.arr {
            NtlbArray::Folded16(_) => "folded16",
            NtlbArray::Folded32(_) => "folded32",
            NtlbArray::General(_) => "general",
        }
    }

    /// Hands folded entries over to the general array, with the same ways and recency order:
    /// for the fill of an address or a VPID that does not fold.
    #[cold]
    #[inline(never)]
    fn generalise(&mut self) {
        let general = with_ntlb!(&self.arr, f => f.general(), _g => return);
        self.arr = NtlbArray::General(general);
    }

    /// Returns the translated host-physical *address* of `gpa` and the nested page size; a hit
    /// becomes most recently used. Counts one hit or miss.
    #[inline]
    pub fn lookup(&mut self, gpa: Gpa, vpid: u16) -> Option<(Hpa, PageSize)> {
        let r = with_ntlb!(&mut self.arr, f => f.lookup(gpa, vpid), g => {
            Self::lookup_general(g, gpa, vpid)
        });
        self.stats.count(r.is_some());
        r
    }

    /// [`lookup`](Self::lookup) in the general array, uncounted. Out of line, so that the
    /// folded storage's lookup keeps few registers.
    #[inline(never)]
    fn lookup_general(g: &mut PagedArray<Hpa>, gpa: Gpa, vpid: u16) -> Option<(Hpa, PageSize)> {
        g.lookup(gpa.raw(), vpid as u32)
            .map(|(size, page)| (page.add(gpa.page_offset(size)), size))
    }

    /// Caches the translation of the nested page of `size` holding `gpa`; `page` is its
    /// host-physical base.
    #[inline]
    pub fn fill(&mut self, gpa: Gpa, vpid: u16, page: Hpa, size: PageSize) {
        debug_assert_eq!(page.page_offset(size), 0, "unaligned {page:?} for {size}");
        with_ntlb!(&mut self.arr, f if folds(gpa, vpid) => f.fill(gpa, vpid, page, size),
            _ => self.fill_general(gpa, vpid, page, size, false))
    }

    /// [`fill`](Self::fill) right after a [`lookup`](Self::lookup) of `gpa` with `vpid` missed,
    /// with nothing changing the NTLB in between (the nested walk that follows a miss): the
    /// lookup has just shown that no entry maps `gpa` for `vpid`, so the insertion does not
    /// search for one to replace (every NTLB entry is tagged by one VPID exactly, so the
    /// entries a fill replaces are those the lookup would have found).
    #[inline]
    pub fn fill_absent(&mut self, gpa: Gpa, vpid: u16, page: Hpa, size: PageSize) {
        debug_assert_eq!(page.page_offset(size), 0, "unaligned {page:?} for {size}");
        debug_assert!(
            !self.contains(gpa, vpid),
            "fill_absent of a page that is present"
        );
        with_ntlb!(&mut self.arr, f if folds(gpa, vpid) => f.insert(gpa, vpid, page, size),
            _ => self.fill_general(gpa, vpid, page, size, true))
    }

    /// [`fill`](Self::fill), or with `absent` [`fill_absent`](Self::fill_absent), in the
    /// general array, where the entries are handed over first if they were folded. Out of
    /// line, so that the folded storage's fill is small enough to inline into the walk.
    #[inline(never)]
    fn fill_general(&mut self, gpa: Gpa, vpid: u16, page: Hpa, size: PageSize, absent: bool) {
        let g = match &mut self.arr {
            NtlbArray::General(g) => g,
            _ => {
                self.generalise();
                let NtlbArray::General(g) = &mut self.arr else {
                    unreachable!("generalised")
                };
                g
            }
        };
        if absent {
            g.fill_absent(gpa.raw(), size, vpid as u32, page);
        } else {
            g.fill(gpa.raw(), size, vpid as u32, !0, page);
        }
    }

    /// Whether `gpa` would hit (no LRU update, not counted).
    pub fn contains(&self, gpa: Gpa, vpid: u16) -> bool {
        with_ntlb!(&self.arr, f => f.find::<ANY_SIZE>(gpa, vpid).is_some(), g => g
            .peek(gpa.raw(), vpid as u32)
            .is_some())
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        with_ntlb!(&self.arr, f => f.arr.len(), g => g.len())
    }

    /// Bytes of storage.
    pub fn bytes(&self) -> usize {
        with_ntlb!(&self.arr, f => f.arr.bytes(), g => g.bytes())
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every entry.
    pub fn flush(&mut self) {
        with_ntlb!(&mut self.arr, f => f.clear(), g => g.clear())
    }

    /// Drops the entries of one VPID/ASID.
    pub fn flush_vpid(&mut self, vpid: u16) {
        with_ntlb!(&mut self.arr, f => f.flush_vpid(vpid), g => {
            g.retain(|t, _| t != vpid as u32);
        })
    }

    /// Every entry as `(set, page key, VPID, host-physical page)`, each set most recently
    /// used first; the page key is [`page_key`](super::paged::page_key) of the entry's
    /// guest-physical page (for tests that compare the storages, and reports).
    pub fn entries(&self) -> Vec<(usize, u64, u16, Hpa)> {
        with_ntlb!(&self.arr, f => f.entries().collect(), g => g
            .entries()
            .map(|(set, key, e)| (set, key, e.tag as u16, e.val))
            .collect())
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
    fn one_entry_translates_every_address_of_its_nested_page() {
        let mut n = Ntlb::new(16, 16);
        assert_eq!(n.lookup(Gpa::new(0x20_1234), 1), None);
        n.fill(
            Gpa::new(0x20_1234),
            1,
            Hpa::new(0x8040_0000),
            PageSize::Size2M,
        );
        assert_eq!(
            n.lookup(Gpa::new(0x3f_fff8), 1),
            Some((Hpa::new(0x805f_fff8), PageSize::Size2M))
        );
        assert_eq!(n.lookup(Gpa::new(0x20_0000), 2), None);
        assert_eq!(n.stats(), HitMiss { hits: 1, misses: 2 });
    }

    #[test]
    fn flush_vpid_keeps_other_vms() {
        let mut n = Ntlb::new(4, 4);
        n.fill(Gpa::new(0x1000), 1, Hpa::new(0x9000), PageSize::Size4K);
        n.fill(Gpa::new(0x1000), 2, Hpa::new(0xa000), PageSize::Size4K);
        n.flush_vpid(1);
        assert!(!n.contains(Gpa::new(0x1000), 1));
        assert_eq!(
            n.lookup(Gpa::new(0x1008), 2),
            Some((Hpa::new(0xa008), PageSize::Size4K))
        );
        n.flush();
        assert!(n.is_empty());
    }
}
