//! The nested dimension of the 2D walk: translates a guest-physical address through the
//! hypervisor's nested tables (AMD NPT / Intel EPT; seed 002 §2, the `nLk` columns of Figure
//! 1(b)).
//!
//! Before walking it consults, by design, the Nested TLB (`2d+nt`: keyed by the guest-physical
//! page of the entry being fetched, never for the `gPA` row unless configured — seed 002 §4.2)
//! or the nested paging-structure caches (`psc`). References are counted at `{nLk,row}`. The
//! walk is the one descent of [`crate::paging::descent`] over the nested tables (long-mode 4- or
//! 5-level format, leaves at 4 KiB, 2 MiB or 1 GiB).

use super::{fixed_format, NestedDim, WalkHw};
use crate::addr::{Gpa, Hpa, PageSize};
use crate::mem::PhysMem;
use crate::paging::descent::{descend, Descent, Levels};
use crate::paging::{Geometry, PageTable, Pte};
use std::convert::Infallible;

/// The nested dimension over the tables `npt` in host memory `hmem`, for VM `vpid`, with the
/// design's choices for it decided once per walk.
pub struct NestedWalker<'a> {
    /// Host physical memory holding the nested tables.
    hmem: &'a PhysMem<Hpa>,
    /// The nested page table (its root is the nCR3 / EPTP).
    npt: PageTable<Gpa, Hpa>,
    /// The VM's VPID / ASID (tags NTLB and PSC entries).
    vpid: u16,
    /// The NTLB is consulted for the guest rows.
    ntlb_rows: bool,
    /// The NTLB is consulted for the `gPA` row.
    ntlb_gpa: bool,
    /// The nested paging-structure caches are consulted.
    use_psc: bool,
}

impl<'a> NestedWalker<'a> {
    /// The nested dimension of a walk with `hw`'s design.
    #[inline]
    pub fn new(hw: &WalkHw, hmem: &'a PhysMem<Hpa>, npt: PageTable<Gpa, Hpa>, vpid: u16) -> Self {
        let ntlb = hw.uses_ntlb();
        NestedWalker {
            hmem,
            npt,
            vpid,
            ntlb_rows: ntlb,
            ntlb_gpa: ntlb && hw.ntlb_gpa_row,
            use_psc: hw.uses_psc(),
        }
    }

    /// The nested walk of `gpa` after the NTLB did not answer (`use_ntlb`: it was consulted,
    /// and the walk fills it). Out of line, so that an NTLB hit, inlined into the guest
    /// dimension's descent, does not pay for this descent's registers.
    #[inline(never)]
    fn walk_tables(
        &mut self,
        hw: &mut WalkHw,
        gpa: Gpa,
        row: usize,
        use_ntlb: bool,
        cycles: &mut u64,
    ) -> Option<(Hpa, PageSize)> {
        fixed_format!(self.npt.geo, geo => self.walk_format(hw, geo, gpa, row, use_ntlb, cycles))
    }

    /// [`walk_tables`](Self::walk_tables) over nested tables of format `geo`.
    #[inline(always)]
    fn walk_format(
        &mut self,
        hw: &mut WalkHw,
        geo: Geometry,
        gpa: Gpa,
        row: usize,
        use_ntlb: bool,
        cycles: &mut u64,
    ) -> Option<(Hpa, PageSize)> {
        let (mut table, mut level) = (self.npt.root, geo.levels);
        let use_psc = self.use_psc;
        let tag = self.vpid as u32;
        if use_psc {
            *cycles += hw.psc_latency as u64;
            if let Some((l, base)) = hw.psc_nested.lookup(gpa.raw(), tag, geo.levels) {
                table = Hpa::new(base);
                level = l - 1;
            }
        }
        let mut lv = NestedLevels {
            hw,
            hmem: self.hmem,
            geo,
            cycles: 0,
            row,
            gpa,
            tag,
            use_psc,
        };
        let out = match descend(&geo, &mut lv, table, level, gpa) {
            Descent::Leaf(leaf) => {
                let page = leaf.page(&geo);
                if use_ntlb {
                    // `translate` has just looked `gpa` up and missed.
                    lv.hw.ntlb.fill_absent(gpa, self.vpid, page, leaf.size);
                }
                Some((page.add(gpa.page_offset(leaf.size)), leaf.size))
            }
            Descent::NotPresent { .. } => None,
            Descent::Stopped(never) => match never {},
        };
        *cycles += lv.cycles;
        out
    }
}

/// The hardware side of a nested descent: each entry a reference at `{nLlevel,row}`, each
/// non-leaf entry filled into the nested PSC.
struct NestedLevels<'a> {
    hw: &'a mut WalkHw,
    hmem: &'a PhysMem<Hpa>,
    geo: Geometry,
    /// The descent's cycles so far.
    cycles: u64,
    row: usize,
    gpa: Gpa,
    tag: u32,
    use_psc: bool,
}

impl Levels for NestedLevels<'_> {
    type Table = Hpa;
    type Stop = Infallible;

    #[inline(always)]
    fn read(&mut self, table: Hpa, off: u64, level: u8) -> Result<Pte, Infallible> {
        let entry = table.add(off);
        self.cycles += self.hw.pe_ref(entry, level as usize, self.row);
        Ok(self.geo.read_entry(self.hmem, entry))
    }

    #[inline(always)]
    fn pass(&mut self, _: Hpa, _: u64, level: u8, e: Pte) {
        if self.use_psc && level >= 2 {
            let next = e.frame(self.geo.frame_mask());
            self.hw
                .psc_nested
                .fill(self.gpa.raw(), self.tag, level, next);
        }
    }
}

impl NestedDim for NestedWalker<'_> {
    #[inline(always)]
    fn translate(
        &mut self,
        hw: &mut WalkHw,
        gpa: Gpa,
        row: usize,
        cycles: &mut u64,
    ) -> Option<(Hpa, PageSize)> {
        let use_ntlb = if row == super::step::ROW_GPA {
            self.ntlb_gpa
        } else {
            self.ntlb_rows
        };
        if use_ntlb {
            *cycles += hw.ntlb_latency as u64;
            if let Some(hit) = hw.ntlb.lookup(gpa, self.vpid) {
                return Some(hit);
            }
        }
        self.walk_tables(hw, gpa, row, use_ntlb, cycles)
    }
}
