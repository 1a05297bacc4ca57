//! The nested dimension of the 2D walk: translates a guest-physical address through the
//! hypervisor's nested tables (AMD NPT / Intel EPT; seed 002 §2, the `nLk` columns of Figure
//! 1(b)).
//!
//! Before walking it consults, by design, the Nested TLB (`2d+nt`: keyed by the guest-physical
//! page of the entry being fetched, never for the `gPA` row unless configured — seed 002 §4.2)
//! or the nested paging-structure caches (`psc`). References are counted at `{nLk,row}`. The
//! walk is the one descent of [`crate::paging::descent`] over the nested tables (long-mode 4- or
//! 5-level format, leaves at 4 KiB, 2 MiB or 1 GiB).

use super::{NestedDim, WalkHw};
use crate::addr::{Gpa, Hpa, PageSize};
use crate::mem::PhysMem;
use crate::paging::descent::{descend, Descent, Levels};
use crate::paging::{Geometry, PageTable, Pte};
use std::convert::Infallible;

/// The nested dimension over the tables `npt` in host memory `hmem`, for VM `vpid`.
pub struct NestedWalker<'a> {
    /// Host physical memory holding the nested tables.
    pub hmem: &'a PhysMem<Hpa>,
    /// The nested page table (its root is the nCR3 / EPTP).
    pub npt: PageTable<Gpa, Hpa>,
    /// The VM's VPID / ASID (tags NTLB and PSC entries).
    pub vpid: u16,
}

/// The hardware side of a nested descent: each entry a reference at `{nLlevel,row}`, each
/// non-leaf entry filled into the nested PSC.
struct NestedLevels<'a> {
    hw: &'a mut WalkHw,
    hmem: &'a PhysMem<Hpa>,
    geo: Geometry,
    cycles: &'a mut u64,
    row: usize,
    gpa: u64,
    tag: u32,
    use_psc: bool,
}

impl Levels for NestedLevels<'_> {
    type Stop = Infallible;

    #[inline]
    fn read(&mut self, table: u64, off: u64, level: u8) -> Result<Pte, Infallible> {
        let entry = Hpa(table + off);
        *self.cycles += self.hw.pe_ref(entry, level as usize, self.row);
        Ok(self.geo.read_entry(self.hmem, entry))
    }

    #[inline]
    fn pass(&mut self, _: u64, _: u64, level: u8, e: Pte) {
        if self.use_psc && level >= 2 {
            let next = e.frame(self.geo.frame_mask());
            self.hw.psc_nested.fill(self.gpa, self.tag, level, next);
        }
    }
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
                return Some(hit);
            }
        }
        let geo = self.npt.geo;
        let g = gpa.raw();
        let (mut table, mut level) = (self.npt.root.raw(), geo.levels);
        let use_psc = hw.uses_psc();
        let tag = self.vpid as u32;
        if use_psc {
            *cycles += hw.psc_latency as u64;
            if let Some((l, base)) = hw.psc_nested.lookup(g, tag, geo.levels) {
                table = base;
                level = l - 1;
            }
        }
        let mut lv = NestedLevels {
            hw,
            hmem: self.hmem,
            geo,
            cycles,
            row,
            gpa: g,
            tag,
            use_psc,
        };
        match descend(&geo, &mut lv, table, level, g) {
            Descent::Leaf(leaf) => {
                let page = Hpa(leaf.page(&geo));
                if use_ntlb {
                    lv.hw.ntlb.fill(gpa, self.vpid, page, leaf.size);
                }
                Some((page.add(gpa.page_offset(leaf.size)), leaf.size))
            }
            Descent::NotPresent { .. } => None,
            Descent::Stopped(never) => match never {},
        }
    }
}
