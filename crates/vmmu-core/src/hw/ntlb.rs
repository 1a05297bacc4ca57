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

use super::narrow::Narrow;
use super::paged::{PagedArray, Tagged};
pub use super::HitMiss;
use crate::addr::{Gpa, Hpa, PageSize};

/// The NTLB's array in the concrete storage chosen for its shape when the machine is built:
/// [`Narrow`] sets of 9 to 16 or 17 to 32 ways (seed 002 Table 2's 16 entries, the zen3 and
/// zen4 presets' 32), or the general [`Store`](super::store::Store) for any other shape. An
/// operation matches the variant once ([`with_ntlb!`]) and runs one body on it.
#[derive(Clone, Debug)]
enum NtlbArray {
    /// 9 to 16 ways per set, 32-bit tags.
    Narrow16(PagedArray<Hpa, Narrow<Tagged<Hpa>, 16>>),
    /// 17 to 32 ways per set, 32-bit tags.
    Narrow32(PagedArray<Hpa, Narrow<Tagged<Hpa>, 32>>),
    /// Any other shape, or a key beyond 32-bit tags.
    General(PagedArray<Hpa>),
}

/// Runs `$body` with `$a` bound to the array of the [`NtlbArray`] `$arr`: `$body` is
/// compiled once per variant.
macro_rules! with_ntlb {
    ($arr:expr, $a:ident => $body:expr) => {
        match $arr {
            NtlbArray::Narrow16($a) => $body,
            NtlbArray::Narrow32($a) => $body,
            NtlbArray::General($a) => $body,
        }
    };
}

impl NtlbArray {
    /// `general` in the variant of its shape, where one fits.
    fn specialise(general: PagedArray<Hpa>) -> Self {
        let a = match general.specialise() {
            Ok(a) => return NtlbArray::Narrow16(a),
            Err(a) => a,
        };
        match a.specialise() {
            Ok(a) => NtlbArray::Narrow32(a),
            Err(a) => NtlbArray::General(a),
        }
    }

    /// The same array, entries and recency order in the general store (for a page whose key
    /// does not fit [`Narrow`]'s 32-bit tags).
    #[cold]
    #[inline(never)]
    fn generalise(&mut self) {
        let filler = NtlbArray::General(PagedArray::new(1, 1, &[], Hpa::new(0)));
        *self = NtlbArray::General(match std::mem::replace(self, filler) {
            NtlbArray::Narrow16(a) => a.general(),
            NtlbArray::Narrow32(a) => a.general(),
            NtlbArray::General(a) => a,
        });
    }

    /// Inserts as [`PagedArray::fill`] (`absent`: as [`PagedArray::fill_absent`]), in the
    /// general store where this representation does not take the page.
    #[inline(always)]
    fn fill_as(&mut self, gpa: u64, size: PageSize, vpid: u32, page: Hpa, absent: bool) {
        with_ntlb!(self, a => {
            if a.takes(gpa, size) {
                if absent {
                    a.fill_absent(gpa, size, vpid, page);
                } else {
                    a.fill(gpa, size, vpid, !0, page);
                }
                return;
            }
        });
        self.generalise();
        self.fill_as(gpa, size, vpid, page, absent);
    }
}

/// A Nested TLB: gPA page → hPA page, at the nested leaf's page size.
#[derive(Clone, Debug)]
pub struct Ntlb {
    arr: NtlbArray,
    stats: HitMiss,
}

impl Ntlb {
    /// `entries` entries in sets of `ways` (seed 002 Table 2: 16, fully associative).
    pub fn new(entries: u32, ways: u32) -> Self {
        let general = PagedArray::new(entries, ways, &PageSize::ALL, Hpa::new(0));
        Ntlb {
            arr: NtlbArray::specialise(general),
            stats: HitMiss::default(),
        }
    }

    /// The same NTLB in the general store, whatever its shape: the same model as
    /// [`new`](Self::new)'s, which tests compare it with.
    pub fn general(entries: u32, ways: u32) -> Self {
        Ntlb {
            arr: NtlbArray::General(PagedArray::new(entries, ways, &PageSize::ALL, Hpa::new(0))),
            stats: HitMiss::default(),
        }
    }

    /// Whether the array is in the general store (for tests and reports).
    pub fn is_general(&self) -> bool {
        matches!(self.arr, NtlbArray::General(_))
    }

    /// Returns the translated host-physical *address* of `gpa` and the nested page size; a hit
    /// becomes most recently used. Counts one hit or miss.
    #[inline]
    pub fn lookup(&mut self, gpa: Gpa, vpid: u16) -> Option<(Hpa, PageSize)> {
        let r = with_ntlb!(&mut self.arr, a => a.lookup(gpa.raw(), vpid as u32));
        self.stats.count(r.is_some());
        r.map(|(size, page)| (page.add(gpa.page_offset(size)), size))
    }

    /// Caches the translation of the nested page of `size` holding `gpa`; `page` is its
    /// host-physical base.
    #[inline]
    pub fn fill(&mut self, gpa: Gpa, vpid: u16, page: Hpa, size: PageSize) {
        debug_assert_eq!(page.page_offset(size), 0, "unaligned {page:?} for {size}");
        self.arr.fill_as(gpa.raw(), size, vpid as u32, page, false);
    }

    /// [`fill`](Self::fill) right after a [`lookup`](Self::lookup) of `gpa` with `vpid` missed,
    /// with nothing changing the NTLB in between (the nested walk that follows a miss): the
    /// lookup has just shown that no entry maps `gpa` for `vpid`, so the insertion does not
    /// search for one to replace (every NTLB entry is tagged by one VPID exactly, so the
    /// entries a fill replaces are those the lookup would have found).
    #[inline]
    pub fn fill_absent(&mut self, gpa: Gpa, vpid: u16, page: Hpa, size: PageSize) {
        debug_assert_eq!(page.page_offset(size), 0, "unaligned {page:?} for {size}");
        self.arr.fill_as(gpa.raw(), size, vpid as u32, page, true);
    }

    /// Whether `gpa` would hit (no LRU update, not counted).
    pub fn contains(&self, gpa: Gpa, vpid: u16) -> bool {
        with_ntlb!(&self.arr, a => a.peek(gpa.raw(), vpid as u32)).is_some()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        with_ntlb!(&self.arr, a => a.len())
    }

    /// Bytes of storage.
    pub fn bytes(&self) -> usize {
        with_ntlb!(&self.arr, a => a.bytes())
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        with_ntlb!(&self.arr, a => a.is_empty())
    }

    /// Drops every entry.
    pub fn flush(&mut self) {
        with_ntlb!(&mut self.arr, a => a.clear());
    }

    /// Drops the entries of one VPID/ASID.
    pub fn flush_vpid(&mut self, vpid: u16) {
        with_ntlb!(&mut self.arr, a => a.retain(|t, _| t != vpid as u32));
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
