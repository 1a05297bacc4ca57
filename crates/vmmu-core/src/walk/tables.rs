//! What a hardware walk descends: the guest's own tables (natively, under direct paging, and as
//! the guest dimension of the 2D walk) or shadow tables in host memory.

use super::step::ROW_GPA;
use super::{NestedDim, WalkHw};
use crate::addr::{Gpa, Hpa, PageSize};
use crate::mem::PhysMem;
use crate::paging::{Geometry, Pte};

/// Where walked tables live and what the walk does besides reading them. Addresses are raw
/// values of the tables' own space (guest physical or host physical).
pub trait TableSource {
    /// The host address of the table at `table`, whose entries are references of row `level`
    /// of the 2D walk; `None` for a nested fault.
    fn locate(&mut self, hw: &mut WalkHw, table: u64, level: u8, cycles: &mut u64) -> Option<Hpa>;

    /// Reads the entry at `addr`.
    fn read(&self, addr: u64) -> Pte;

    /// Sets `bits` (A, D) in the entry at `addr` if the walker keeps these tables' A/D bits;
    /// returns whether it wrote.
    fn set_bits(&mut self, addr: u64, bits: u64) -> bool;

    /// The host address of the data at `addr` (the leaf's output) and the page size that maps
    /// it in the host (the `gPA` row); `None` for a nested fault.
    fn data(&mut self, hw: &mut WalkHw, addr: u64, cycles: &mut u64) -> Option<(Hpa, PageSize)>;
}

/// The guest's tables in guest memory, each guest-physical address translated by `nested`. The
/// walker sets their A and D bits (Intel SDM Vol. 3A §4.8); nested-table A/D bits (an optional
/// EPT feature) are not modelled.
pub struct GuestTables<'a, N: NestedDim> {
    /// Guest physical memory.
    pub mem: &'a mut PhysMem<Gpa>,
    /// The guest's paging format.
    pub geo: Geometry,
    /// The nested dimension.
    pub nested: N,
}

impl<N: NestedDim> TableSource for GuestTables<'_, N> {
    #[inline]
    fn locate(&mut self, hw: &mut WalkHw, table: u64, level: u8, cycles: &mut u64) -> Option<Hpa> {
        self.nested
            .translate(hw, Gpa(table), level as usize, cycles)
            .map(|(h, _)| h)
    }

    #[inline]
    fn read(&self, addr: u64) -> Pte {
        self.geo.read_entry(self.mem, Gpa(addr))
    }

    #[inline]
    fn set_bits(&mut self, addr: u64, bits: u64) -> bool {
        let e = self.read(addr);
        self.geo.write_entry(self.mem, Gpa(addr), Pte(e.0 | bits));
        true
    }

    #[inline]
    fn data(&mut self, hw: &mut WalkHw, addr: u64, cycles: &mut u64) -> Option<(Hpa, PageSize)> {
        self.nested.translate(hw, Gpa(addr), ROW_GPA, cycles)
    }
}

/// Shadow tables in host memory: they map gVA → hPA directly, and the hypervisor, not the
/// walker, keeps their accessed and dirty state (shadow entries are made with A set, and D
/// with R/W).
pub struct ShadowTables<'a> {
    /// Host physical memory.
    pub mem: &'a PhysMem<Hpa>,
    /// The shadow tables' format (the guest's).
    pub geo: Geometry,
}

impl TableSource for ShadowTables<'_> {
    #[inline]
    fn locate(&mut self, _: &mut WalkHw, table: u64, _: u8, _: &mut u64) -> Option<Hpa> {
        Some(Hpa(table))
    }

    #[inline]
    fn read(&self, addr: u64) -> Pte {
        self.geo.read_entry(self.mem, Hpa(addr))
    }

    #[inline]
    fn set_bits(&mut self, _: u64, _: u64) -> bool {
        false
    }

    #[inline]
    fn data(&mut self, _: &mut WalkHw, addr: u64, _: &mut u64) -> Option<(Hpa, PageSize)> {
        Some((Hpa(addr), PageSize::Size1G))
    }
}
