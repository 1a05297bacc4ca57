//! The operations of a paging mode — what KVM keeps in `struct kvm_mmu` — and the enum of the
//! modes that dispatches each of them once.
//!
//! A mode implements [`PagingOps`] in a file of its own (`native.rs`, `nested.rs`, `shadow.rs`,
//! `direct.rs`). What a mode does not override it does not intercept: the provided methods do
//! nothing, as KVM's non-paging and two-dimensional modes leave the shadow pager's hooks empty.
//! [`Active`] holds the running mode; [`Active::build`] is the one place a [`Paging`] becomes
//! its implementation.

use super::direct::Direct;
use super::native::Native;
use super::nested::Nested;
use super::shadow::Shadow;
use super::{Fault, Paging, Resolution, Role, Shared};
use crate::addr::{Gpa, Gva, Hpa};
use crate::error::Result;
use crate::guest::{GuestOs, OsEffects};
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::PageTable;
use crate::shadow::ShadowStats;
use crate::walk::Tables;

/// What a vCPU's root from its last turn becomes when the vCPU resumes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Resume {
    /// The mode keeps no per-vCPU root (the hardware walks the guest's tables or the nested
    /// tables, which every vCPU shares).
    Rootless,
    /// The root is still loaded.
    Kept,
    /// The root was dropped meanwhile: the vCPU's process's root is built again, as a CR3
    /// write (KVM reloads an invalid root before entry, `kvm_mmu_reload`).
    Reload,
}

/// The operations of one paging mode, each with the member of KVM's `struct kvm_mmu` it
/// stands for. `hv` is what every mode shares and what outlives a switch ([`Shared`]); the
/// hardware's part of an operation (the TLB invalidation of an INVLPG, the flush of a CR3
/// write) is done around these by [`super::Vmm`], the same in every mode.
pub(super) trait PagingOps {
    /// What the mode is (`root_role` and `cpu_role`).
    fn role(&self) -> Role;

    /// The tables the hardware walks for a process whose guest tables are `pt` (`root` and
    /// `get_guest_pgd`). Called on every TLB miss.
    fn tables<'a>(
        &'a self,
        hv: &'a Shared,
        mem: &'a mut PhysMem<Gpa>,
        pt: PageTable<Gva, Gpa>,
    ) -> Tables<'a>;

    /// A fault the hypervisor sees first: resolved here, or the guest's (`page_fault`).
    fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        os: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution>;

    /// An OS action's guest page-table writes and freed tables, as they reach the hypervisor:
    /// by write protection (`kvm_mmu_track_write`) or by hypercall (Xen PV `mmu_update`).
    fn writes(&mut self, _hv: &mut Shared, _mmu: &mut Mmu, _fx: &OsEffects) {}

    /// The guest's INVLPG of `va` in process `pid`, intercepted (`invlpg`).
    fn invlpg(&mut self, _hv: &mut Shared, _mmu: &mut Mmu, _os: &GuestOs, _pid: u32, _va: Gva) {}

    /// The guest's full flush of process `pid`'s translations (a CR3 reload), intercepted
    /// (`sync_roots`).
    fn flush(&mut self, _hv: &mut Shared, _mmu: &mut Mmu, _os: &GuestOs, _pid: u32) {}

    /// The guest's CR3 write to process `pid`'s tables, intercepted (`kvm_mmu_new_pgd`).
    fn cr3_write(
        &mut self,
        _hv: &mut Shared,
        _mmu: &mut Mmu,
        _os: &GuestOs,
        _pid: u32,
    ) -> Result<()> {
        Ok(())
    }

    /// Whether tables the hardware may cache entries of were removed since the last call
    /// (the processor then flushes its paging-structure caches, and the other vCPUs theirs:
    /// `kvm_flush_remote_tlbs`); clears the flag.
    fn unlinked(&mut self) -> bool {
        false
    }

    /// The mode begins at an exit, the guest running `os`: the handler's cycles beyond the
    /// switch's own (`kvm_mmu_reset_context`, initialising the new role).
    fn switch_in(&mut self, _hv: &mut Shared, _os: &GuestOs) -> Result<u64> {
        Ok(0)
    }

    /// The mode ends at an exit: the handler's cycles beyond the switch's own (unloading the
    /// old role).
    fn switch_out(self, _hv: &mut Shared) -> u64
    where
        Self: Sized,
    {
        0
    }

    /// A vCPU whose root was `root` at its last turn resumes (`kvm_mmu_reload`).
    fn resume(&mut self, _root: Option<(Gpa, Hpa)>) -> Resume {
        Resume::Rootless
    }

    /// The root the running vCPU has loaded: (guest root, shadow root).
    fn current_root(&self) -> Option<(Gpa, Hpa)> {
        None
    }

    /// The counters of the mode's shadow pager, if it has one.
    fn pager_stats(&self) -> Option<ShadowStats> {
        None
    }

    /// Zeroes the mode's own counters (the end of a warm-up).
    fn reset_stats(&mut self) {}
}

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
}

/// `$e` with `$m` bound to the running mode's implementation.
macro_rules! each {
    ($active:expr, $m:ident => $e:expr) => {
        match $active {
            Active::Native($m) => $e,
            Active::Nested($m) => $e,
            Active::Shadow($m) => $e,
            Active::Direct($m) => $e,
        }
    };
}

impl Active {
    /// The implementation of `paging`: the one place a mode is built.
    pub(super) fn build(paging: Paging, hv: &Shared) -> Active {
        match paging {
            Paging::Native => Active::Native(Native),
            Paging::Nested => Active::Nested(Nested),
            Paging::Shadow => Active::Shadow(Shadow::new(hv)),
            Paging::Direct(t) => Active::Direct(Direct::new(t)),
        }
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
    pub(super) fn resume(&mut self, root: Option<(Gpa, Hpa)>) -> Resume {
        each!(self, m => m.resume(root))
    }

    /// [`PagingOps::current_root`].
    pub(super) fn current_root(&self) -> Option<(Gpa, Hpa)> {
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
}
