//! The running mode: the enum of the implementations of [`PagingOps`], which dispatches each
//! operation once, and [`Active::build`], the one place a [`Paging`] becomes its
//! implementation.

use super::agile::Agile;
use super::direct::Direct;
use super::native::Native;
use super::nested::Nested;
use super::nested_virt::ept::EptOnEpt;
use super::nested_virt::l1::L1Setup;
use super::nested_virt::shadow::ShadowL1;
use super::nested_virt::three_d::ThreeD;
use super::ops::{AgileStats, Fault, Paging, PagingOps, Resolution, Resume, Role, VcpuRoot};
use super::shadow::Shadow;
use super::shared::Shared;
use crate::addr::{Gpa, Gva, Hpa};
use crate::config::L1Kind;
use crate::error::{Error, Result};
use crate::guest::{GuestOs, OsEffects};
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::PageTable;
use crate::shadow::ShadowStats;
use crate::walk::Tables;

/// The running mode: one variant per implementation of [`PagingOps`].
pub(super) enum Active {
    /// No hypervisor.
    Native(Native),
    /// Nested paging.
    Nested(Nested),
    /// Shadow paging by trap-and-emulate.
    Shadow(Shadow),
    /// Direct paging.
    Direct(Direct),
    /// Nested virtualization, EPT on EPT.
    EptOnEpt(EptOnEpt),
    /// Nested virtualization, a shadow-paging L1 (shadow on EPT, PVM).
    ShadowL1(ShadowL1),
    /// Nested virtualization, the 3D walk.
    ThreeD(ThreeD),
    /// Agile paging.
    Agile(Agile),
}

/// `$e` with `$m` bound to the running mode's implementation.
macro_rules! each {
    ($active:expr, $m:ident => $e:expr) => {
        match $active {
            Active::Native($m) => $e,
            Active::Nested($m) => $e,
            Active::Shadow($m) => $e,
            Active::Direct($m) => $e,
            Active::EptOnEpt($m) => $e,
            Active::ShadowL1($m) => $e,
            Active::ThreeD($m) => $e,
            Active::Agile($m) => $e,
        }
    };
}

impl Active {
    /// The implementation of `paging`: the one place a mode is built. A nested-virt mode
    /// needs the L1 hypervisor's setup `l1`.
    pub(super) fn build(paging: Paging, hv: &mut Shared, l1: Option<&L1Setup>) -> Result<Active> {
        let l1 = || {
            l1.ok_or_else(|| {
                Error::config(
                    "nested_virt",
                    "a nested-virt run needs its [nested_virt] section",
                )
            })
        };
        Ok(match paging {
            Paging::Native => Active::Native(Native),
            Paging::Nested => Active::Nested(Nested),
            Paging::Shadow => Active::Shadow(Shadow::new(hv)),
            Paging::Direct(t) => Active::Direct(Direct::new(t)),
            Paging::NestedVirt(L1Kind::Ept) => Active::EptOnEpt(EptOnEpt::new(l1()?, hv)?),
            Paging::NestedVirt(k @ (L1Kind::Shadow | L1Kind::Pvm)) => {
                Active::ShadowL1(ShadowL1::new(k, l1()?, hv)?)
            }
            Paging::NestedVirt(L1Kind::ThreeD) => Active::ThreeD(ThreeD::new(l1()?, hv)?),
            Paging::Agile => Active::Agile(Agile::new(hv)),
        })
    }

    /// [`PagingOps::back`].
    pub(super) fn back(&mut self, hv: &mut Shared, fx: &OsEffects) -> Result<()> {
        each!(self, m => m.back(hv, fx))
    }

    /// [`PagingOps::p2m`].
    pub(super) fn p2m(&self, hv: &Shared, gpa: Gpa) -> Option<Hpa> {
        each!(self, m => m.p2m(hv, gpa))
    }

    /// [`PagingOps::role`].
    #[inline]
    pub(super) fn role(&self) -> Role {
        each!(self, m => m.role())
    }

    /// [`PagingOps::tables`].
    #[inline(always)]
    pub(super) fn tables<'a>(
        &'a self,
        hv: &'a Shared,
        mem: &'a mut PhysMem<Gpa>,
        pt: PageTable<Gva, Gpa>,
    ) -> Tables<'a> {
        each!(self, m => m.tables(hv, mem, pt))
    }

    /// [`PagingOps::fault`].
    pub(super) fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        os: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution> {
        each!(self, m => m.fault(hv, mmu, os, f))
    }

    /// [`PagingOps::writes`].
    pub(super) fn writes(&mut self, hv: &mut Shared, mmu: &mut Mmu, fx: &OsEffects) {
        each!(self, m => m.writes(hv, mmu, fx))
    }

    /// [`PagingOps::invlpg`].
    pub(super) fn invlpg(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        os: &GuestOs,
        pid: u32,
        va: Gva,
    ) {
        each!(self, m => m.invlpg(hv, mmu, os, pid, va))
    }

    /// [`PagingOps::flush`].
    pub(super) fn flush(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32) {
        each!(self, m => m.flush(hv, mmu, os, pid))
    }

    /// [`PagingOps::cr3_write`].
    pub(super) fn cr3_write(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        os: &GuestOs,
        pid: u32,
    ) -> Result<()> {
        each!(self, m => m.cr3_write(hv, mmu, os, pid))
    }

    /// [`PagingOps::unlinked`].
    pub(super) fn unlinked(&mut self) -> bool {
        each!(self, m => m.unlinked())
    }

    /// [`PagingOps::switch_in`].
    pub(super) fn switch_in(&mut self, hv: &mut Shared, os: &GuestOs) -> Result<u64> {
        each!(self, m => m.switch_in(hv, os))
    }

    /// [`PagingOps::switch_out`].
    pub(super) fn switch_out(self, hv: &mut Shared) -> u64 {
        each!(self, m => m.switch_out(hv))
    }

    /// [`PagingOps::resume`].
    pub(super) fn resume(&mut self, root: Option<VcpuRoot>) -> Resume {
        each!(self, m => m.resume(root))
    }

    /// [`PagingOps::current_root`].
    pub(super) fn current_root(&self) -> Option<VcpuRoot> {
        each!(self, m => m.current_root())
    }

    /// [`PagingOps::pager_stats`].
    pub(super) fn pager_stats(&self) -> Option<ShadowStats> {
        each!(self, m => m.pager_stats())
    }

    /// [`PagingOps::reset_stats`].
    pub(super) fn reset_stats(&mut self) {
        each!(self, m => m.reset_stats())
    }

    /// [`PagingOps::next_tick`].
    pub(super) fn next_tick(&self) -> u64 {
        each!(self, m => m.next_tick())
    }

    /// [`PagingOps::tick`].
    pub(super) fn tick(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, instructions: u64) {
        each!(self, m => m.tick(hv, mmu, os, instructions))
    }

    /// [`PagingOps::agile_stats`].
    pub(super) fn agile_stats(&self) -> Option<AgileStats> {
        each!(self, m => m.agile_stats())
    }
}
