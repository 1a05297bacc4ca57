//! The middle dimension of a 3D walk (nested virtualization with hardware that walks all three
//! stages; no x86 part does): an L2-physical address is translated through EPT12, in L1's
//! memory, each of whose table addresses — and the output — is translated through EPT01 by
//! the nested walker of [`super::nested`].
//!
//! At n levels in every stage a translation of one L2-physical address costs n EPT12
//! references, each after an EPT01 walk of its table (n references), and a last EPT01 walk of
//! the output: (n+1)·n + n = (n+1)² − 1 references, as a 2D walk's; L2's walk makes n + 1
//! such translations and n references of its own, (n+1)³ − 1 in all (124 at four levels).
//! EPT12 references are counted at `{nLk,row}` of the guest row they serve, as are the EPT01
//! references within them, and use the page-walk cache under the design's rule for that cell;
//! the Nested TLB and nested paging-structure caches serve the EPT01 dimension
//! (assumption: the EPT12 dimension has no TLB of its own).

use super::nested::NestedWalker;
use super::{NestedDim, WalkHw};
use crate::addr::{Gpa, Hpa, L1pa, PageSize};
use crate::mem::PhysMem;
use crate::paging::descent::{descend, Descent, Levels};
use crate::paging::{Geometry, PageTable, Pte};

/// The EPT12 dimension of a 3D walk, over the EPT01 dimension `ept01`.
pub struct ThreeDWalker<'a> {
    /// L1 physical memory, holding EPT12.
    pub l1mem: &'a PhysMem<L1pa>,
    /// EPT12.
    pub ept12: PageTable<Gpa, L1pa>,
    /// The EPT01 dimension.
    pub ept01: NestedWalker<'a>,
}

/// The hardware side of an EPT12 descent: each table located through EPT01, each entry a
/// reference at `{nLlevel,row}`.
struct Ept12Levels<'a, 'b> {
    hw: &'a mut WalkHw,
    l1mem: &'a PhysMem<L1pa>,
    ept01: &'a mut NestedWalker<'b>,
    geo: Geometry,
    row: usize,
    cycles: &'a mut u64,
}

impl Levels for Ept12Levels<'_, '_> {
    type Table = L1pa;
    type Stop = ();

    #[inline]
    fn read(&mut self, table: L1pa, off: u64, level: u8) -> Result<Pte, ()> {
        let (base, _) = self
            .ept01
            .translate(self.hw, table.as_l0_gpa(), self.row, self.cycles)
            .ok_or(())?;
        *self.cycles += self.hw.pe_ref(base.add(off), level as usize, self.row);
        Ok(self.geo.read_entry(self.l1mem, table.add(off)))
    }
}

impl NestedDim for ThreeDWalker<'_> {
    fn translate(
        &mut self,
        hw: &mut WalkHw,
        gpa: Gpa,
        row: usize,
        cycles: &mut u64,
    ) -> Option<(Hpa, PageSize)> {
        let geo = self.ept12.geo;
        let mut lv = Ept12Levels {
            hw,
            l1mem: self.l1mem,
            ept01: &mut self.ept01,
            geo,
            row,
            cycles,
        };
        let leaf = match descend(&geo, &mut lv, self.ept12.root, geo.levels, gpa) {
            Descent::Leaf(l) => l,
            Descent::NotPresent { .. } | Descent::Stopped(()) => return None,
        };
        let out = leaf.page(&geo).add(gpa.page_offset(leaf.size));
        let (h, size) = lv.ept01.translate(lv.hw, out.as_l0_gpa(), row, lv.cycles)?;
        Some((h, size.min(leaf.size)))
    }
}
