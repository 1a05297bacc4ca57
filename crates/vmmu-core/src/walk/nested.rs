//! The nested-dimension walker: translates a guest-physical address through the hypervisor's
//! nested tables (AMD NPT / Intel EPT; seed 002 §2, the `nLk` columns of Figure 1(b)).
//!
//! Before walking it consults, by design, the Nested TLB (`2d+nt`: keyed by the guest-physical
//! page of the entry being fetched, never for the `gPA` row unless configured — seed 002 §4.2)
//! or the nested paging-structure caches (`psc`). References are counted at `{nLk,row}`.
//! Nested entries are read as host memory bytes; nested tables are 4- or 5-level long-mode
//! format, leaves at 4 KiB, 2 MiB or 1 GiB.

use super::{NestedDim, WalkHw};
use crate::addr::{Gpa, Hpa, PageSize};
use crate::mem::PhysMem;
use crate::paging::{PageTable, Pte};

/// The nested dimension over the tables `npt` in host memory `hmem`, for VM `vpid`.
pub struct NestedWalker<'a> {
    /// Host physical memory holding the nested tables.
    pub hmem: &'a PhysMem<Hpa>,
    /// The nested page table (its root is the nCR3 / EPTP).
    pub npt: &'a PageTable<Hpa>,
    /// The VM's VPID / ASID (tags NTLB and PSC entries).
    pub vpid: u16,
}

impl NestedDim for NestedWalker<'_> {
    #[inline]
    fn translate(
        &mut self,
        hw: &mut WalkHw,
        gpa: Gpa,
        row: usize,
        cycles: &mut u64,
    ) -> Option<(Hpa, PageSize)> {
        let use_ntlb = hw.uses_ntlb() && (row != super::step::ROW_GPA || hw.ntlb_gpa_row);
        if use_ntlb {
            *cycles += hw.ntlb_latency as u64;
            if let Some(hit) = hw.ntlb.lookup(gpa, self.vpid) {
                hw.stats.ntlb_hits += 1;
                return Some(hit);
            }
        }
        let geo = self.npt.geo;
        let g = gpa.raw();
        let mut table = self.npt.root.raw();
        let mut level = geo.levels;
        let use_psc = hw.uses_psc();
        let tag = self.vpid as u32;
        if use_psc {
            *cycles += hw.psc_latency as u64;
            if let Some((l, base)) = hw.psc_nested.lookup(g, tag, geo.levels) {
                hw.stats.psc_hits += 1;
                table = base;
                level = l - 1;
            }
        }
        let mask = geo.frame_mask();
        loop {
            let entry = Hpa(table + geo.entry_offset(g, level));
            *cycles += hw.pe_ref(entry, level as usize, row);
            let e = Pte(self.hmem.read_u64(entry));
            if !e.present() {
                return None;
            }
            if level == 1 || e.large() {
                let size = geo.leaf_size(level)?;
                let page = Hpa(e.frame(mask) & !size.offset_mask());
                if use_ntlb {
                    hw.ntlb.fill(gpa, self.vpid, page, size);
                }
                return Some((page.add(gpa.page_offset(size)), size));
            }
            let next = e.frame(mask);
            if use_psc && level >= 2 {
                hw.psc_nested.fill(g, tag, level, next);
            }
            table = next;
            level -= 1;
        }
    }
}
