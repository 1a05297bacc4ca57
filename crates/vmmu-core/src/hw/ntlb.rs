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

use super::paged::PagedArray;
pub use super::HitMiss;
use crate::addr::{Gpa, Hpa, PageSize};

/// A Nested TLB: gPA page → hPA page, at the nested leaf's page size.
#[derive(Clone, Debug)]
pub struct Ntlb {
    arr: PagedArray<Hpa>,
    stats: HitMiss,
}

impl Ntlb {
    /// `entries` entries in sets of `ways` (seed 002 Table 2: 16, fully associative).
    pub fn new(entries: u32, ways: u32) -> Self {
        Ntlb {
            arr: PagedArray::new(entries, ways, &PageSize::ALL, Hpa::new(0)),
            stats: HitMiss::default(),
        }
    }

    /// Returns the translated host-physical *address* of `gpa` and the nested page size; a hit
    /// becomes most recently used. Counts one hit or miss.
    #[inline]
    pub fn lookup(&mut self, gpa: Gpa, vpid: u16) -> Option<(Hpa, PageSize)> {
        let r = self.arr.lookup(gpa.raw(), vpid as u32);
        self.stats.count(r.is_some());
        r.map(|(size, page)| (page.add(gpa.page_offset(size)), size))
    }

    /// Caches the translation of the nested page of `size` holding `gpa`; `page` is its
    /// host-physical base.
    #[inline]
    pub fn fill(&mut self, gpa: Gpa, vpid: u16, page: Hpa, size: PageSize) {
        debug_assert_eq!(page.page_offset(size), 0, "unaligned {page:?} for {size}");
        self.arr.fill(gpa.raw(), size, vpid as u32, !0, page);
    }

    /// [`fill`](Self::fill) right after a [`lookup`](Self::lookup) of `gpa` with `vpid` missed,
    /// with nothing changing the NTLB in between (the nested walk that follows a miss): the
    /// lookup has just shown that no entry maps `gpa` for `vpid`, so the insertion does not
    /// search for one to replace (every NTLB entry is tagged by one VPID exactly, so the
    /// entries a fill replaces are those the lookup would have found).
    #[inline]
    pub fn fill_absent(&mut self, gpa: Gpa, vpid: u16, page: Hpa, size: PageSize) {
        debug_assert_eq!(page.page_offset(size), 0, "unaligned {page:?} for {size}");
        self.arr.fill_absent(gpa.raw(), size, vpid as u32, page);
    }

    /// Whether `gpa` would hit (no LRU update, not counted).
    pub fn contains(&self, gpa: Gpa, vpid: u16) -> bool {
        self.arr.peek(gpa.raw(), vpid as u32).is_some()
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
    }

    /// Drops the entries of one VPID/ASID.
    pub fn flush_vpid(&mut self, vpid: u16) {
        self.arr.retain(|t, _| t != vpid as u32);
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
