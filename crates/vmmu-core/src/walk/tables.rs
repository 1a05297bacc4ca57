//! What a hardware walk descends: the guest's own tables (natively, under direct paging, and as
//! the guest dimension of the 2D walk) or shadow tables in host memory — as the hypervisor hands
//! them over ([`Tables`]) and as the walk reads them ([`TableSource`]).

use super::step::ROW_GPA;
use super::{NestedDim, WalkHw};
use crate::addr::{Gpa, Gva, Hpa, L1pa, PageSize};
use crate::mem::{PhysAddr, PhysMem};
use crate::paging::{Geometry, PageTable, Pte};

/// The tables the hardware walks now, as the hypervisor hands them over.
pub enum Tables<'a> {
    /// The guest's tables, their output used as machine addresses (native paging, and direct
    /// paging whose guest tables hold machine frames).
    Guest {
        /// Guest memory (the walker sets A/D bits in it).
        mem: &'a mut PhysMem<Gpa>,
        /// The tables CR3 points to.
        pt: PageTable<Gva, Gpa>,
    },
    /// The 2D walk: the guest's tables over the nested tables.
    Nested {
        /// Guest memory.
        mem: &'a mut PhysMem<Gpa>,
        /// The guest tables CR3 points to.
        pt: PageTable<Gva, Gpa>,
        /// Host memory holding the nested tables.
        hmem: &'a PhysMem<Hpa>,
        /// The nested tables nCR3 / the EPTP points to.
        npt: PageTable<Gpa, Hpa>,
    },
    /// The 3D walk of nested virtualization: an L2 guest's tables over its L1 hypervisor's
    /// EPT12 over the host's EPT01.
    ThreeD {
        /// L2 guest memory.
        mem: &'a mut PhysMem<Gpa>,
        /// The L2 guest tables CR3 points to.
        pt: PageTable<Gva, Gpa>,
        /// L1 memory holding EPT12.
        l1mem: &'a PhysMem<L1pa>,
        /// EPT12 (L2 physical → L1 physical).
        ept12: PageTable<Gpa, L1pa>,
        /// Host memory holding EPT01.
        hmem: &'a PhysMem<Hpa>,
        /// EPT01 (L1 physical, as L0's guest-physical, → host physical).
        ept01: PageTable<Gpa, Hpa>,
    },
    /// Shadow tables of an L1 hypervisor in L1 memory (nested virtualization with a
    /// shadow-paging L1), walked in 2D over L0's EPT01; `None` before L1 loads a root.
    L1Shadow {
        /// L1 memory holding the shadow tables.
        l1mem: &'a PhysMem<L1pa>,
        /// The shadow tables (L2 virtual → L1 physical) CR3 points to.
        pt: Option<PageTable<Gva, L1pa>>,
        /// Host memory holding EPT01.
        hmem: &'a PhysMem<Hpa>,
        /// EPT01 (L1 physical, as L0's guest-physical, → host physical).
        ept01: PageTable<Gpa, Hpa>,
    },
    /// Agile paging: the shadow tables, switching to the 2D walk of the guest's tables at an
    /// entry with the switching bit.
    Agile(super::AgileTables<'a>),
    /// Shadow tables in host memory; `None` before the hypervisor loads a root (every walk
    /// faults).
    Shadow {
        /// Host memory.
        hmem: &'a PhysMem<Hpa>,
        /// The shadow tables CR3 points to.
        pt: Option<PageTable<Gva, Hpa>>,
    },
}

/// Where walked tables live and what the walk does besides reading them. The tables translate
/// guest-virtual addresses and live in one physical space, [`TableSource::Table`].
pub trait TableSource {
    /// The space the tables live in and point into: guest physical for the guest's tables,
    /// host physical for shadow tables.
    type Table: PhysAddr;

    /// The host address of the table at `table`, whose entries are references of row `level`
    /// of the 2D walk; `Err` names the guest-physical address of a nested fault.
    fn locate(
        &mut self,
        hw: &mut WalkHw,
        table: Self::Table,
        level: u8,
        cycles: &mut u64,
    ) -> Result<Hpa, Gpa>;

    /// Reads the entry at `addr`.
    fn read(&self, addr: Self::Table) -> Pte;

    /// Sets `bits` (A, D) in the entry at `addr` if the walker keeps these tables' A/D bits;
    /// returns whether it wrote.
    fn set_bits(&mut self, addr: Self::Table, bits: u64) -> bool;

    /// The host address of the data at `addr` (the leaf's output) and the page size that maps
    /// it in the host (the `gPA` row); `Err` names the guest-physical address of a nested
    /// fault.
    fn data(
        &mut self,
        hw: &mut WalkHw,
        addr: Self::Table,
        cycles: &mut u64,
    ) -> Result<(Hpa, PageSize), Gpa>;
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
    type Table = Gpa;

    #[inline(always)]
    fn locate(
        &mut self,
        hw: &mut WalkHw,
        table: Gpa,
        level: u8,
        cycles: &mut u64,
    ) -> Result<Hpa, Gpa> {
        match self.nested.translate(hw, table, level as usize, cycles) {
            Some((h, _)) => Ok(h),
            None => Err(table),
        }
    }

    #[inline(always)]
    fn read(&self, addr: Gpa) -> Pte {
        self.geo.read_entry(self.mem, addr)
    }

    #[inline(always)]
    fn set_bits(&mut self, addr: Gpa, bits: u64) -> bool {
        let e = self.read(addr);
        self.geo.write_entry(self.mem, addr, Pte(e.0 | bits));
        true
    }

    #[inline(always)]
    fn data(
        &mut self,
        hw: &mut WalkHw,
        addr: Gpa,
        cycles: &mut u64,
    ) -> Result<(Hpa, PageSize), Gpa> {
        self.nested.translate(hw, addr, ROW_GPA, cycles).ok_or(addr)
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
    type Table = Hpa;

    #[inline(always)]
    fn locate(&mut self, _: &mut WalkHw, table: Hpa, _: u8, _: &mut u64) -> Result<Hpa, Gpa> {
        Ok(table)
    }

    #[inline(always)]
    fn read(&self, addr: Hpa) -> Pte {
        self.geo.read_entry(self.mem, addr)
    }

    #[inline(always)]
    fn set_bits(&mut self, _: Hpa, _: u64) -> bool {
        false
    }

    #[inline(always)]
    fn data(&mut self, _: &mut WalkHw, addr: Hpa, _: &mut u64) -> Result<(Hpa, PageSize), Gpa> {
        Ok((addr, PageSize::Size1G))
    }
}

/// An L1 hypervisor's shadow tables in L1 memory, each L1-physical address — of a table and of
/// the data — translated by `nested` (EPT01: L1 is L0's guest). L1 keeps their accessed and
/// dirty state, as any shadow pager does.
pub struct L1ShadowTables<'a, N: NestedDim> {
    /// L1 physical memory.
    pub mem: &'a PhysMem<L1pa>,
    /// The shadow tables' format (the L2 guest's).
    pub geo: Geometry,
    /// The nested dimension (EPT01).
    pub nested: N,
}

impl<N: NestedDim> TableSource for L1ShadowTables<'_, N> {
    type Table = L1pa;

    #[inline]
    fn locate(
        &mut self,
        hw: &mut WalkHw,
        table: L1pa,
        level: u8,
        cycles: &mut u64,
    ) -> Result<Hpa, Gpa> {
        let gpa = table.as_l0_gpa();
        match self.nested.translate(hw, gpa, level as usize, cycles) {
            Some((h, _)) => Ok(h),
            None => Err(gpa),
        }
    }

    #[inline]
    fn read(&self, addr: L1pa) -> Pte {
        self.geo.read_entry(self.mem, addr)
    }

    #[inline]
    fn set_bits(&mut self, _: L1pa, _: u64) -> bool {
        false
    }

    #[inline]
    fn data(
        &mut self,
        hw: &mut WalkHw,
        addr: L1pa,
        cycles: &mut u64,
    ) -> Result<(Hpa, PageSize), Gpa> {
        let gpa = addr.as_l0_gpa();
        self.nested.translate(hw, gpa, ROW_GPA, cycles).ok_or(gpa)
    }
}
