//! The operations of a paging mode — what KVM keeps in `struct kvm_mmu` — and the types they
//! speak: what a mode is ([`Role`], [`Paging`]), a fault it sees ([`Fault`]) and what follows
//! it ([`Resolution`]).
//!
//! A mode implements [`PagingOps`] in a file of its own (`native.rs`, `nested.rs`, `shadow.rs`,
//! `direct.rs`). What a mode does not override it does not intercept: the provided methods do
//! nothing, as KVM's non-paging and two-dimensional modes leave the shadow pager's hooks empty.

use super::shared::Shared;
use crate::addr::{Gpa, Gva, Hpa, Space};
use crate::config::{L1Kind, VirtMode};
use crate::error::{Error, Result};
use crate::guest::{GuestOs, OsEffects};
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::PageTable;
use crate::shadow::ShadowStats;
use crate::walk::{Access, Tables, WalkFault};
use serde::{Deserialize, Serialize};

/// The hypervisor's paging mode: what the hardware walks and what exits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Paging {
    /// No hypervisor: the hardware walks the guest's tables and their output is machine
    /// memory.
    Native,
    /// Nested paging: the 2D walk over the guest's tables and the nested tables.
    Nested,
    /// Shadow paging by trap-and-emulate: the hardware walks the shadow pager's tables.
    Shadow,
    /// Direct paging (Xen PV style): the hardware walks the guest's validated tables, which
    /// hold machine frames; MMU operations reach the hypervisor by hypercalls or through an
    /// in-place VMM (seed 003).
    Direct(DirectTechnique),
    /// Nested virtualization: the guest is an L2 guest of an L1 hypervisor of this kind on the
    /// host.
    NestedVirt(L1Kind),
    /// Agile paging: shadow tables whose walk continues in nested mode below a switching
    /// entry.
    Agile,
}

impl Paging {
    /// The name results use: `native`, `nested`, `shadow`, `nested-virt` — direct paging is
    /// the configuration's shadow mode with technique `pv` or `previrt`, and is named so.
    pub const fn name(self) -> &'static str {
        match self {
            Paging::Native => "native",
            Paging::Nested => "nested",
            Paging::Shadow | Paging::Direct(_) => "shadow",
            Paging::NestedVirt(_) => "nested-virt",
            Paging::Agile => "agile",
        }
    }
}

impl From<VirtMode> for Paging {
    fn from(v: VirtMode) -> Paging {
        match v {
            VirtMode::Shadow => Paging::Shadow,
            VirtMode::Nested => Paging::Nested,
        }
    }
}

/// Counters of agile paging's policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgileStats {
    /// Subtrees moved from shadow to nested mode.
    pub to_nested: u64,
    /// Subtrees moved from nested back to shadow mode by a scan.
    pub to_shadow: u64,
    /// Guest page-table writes to tables in nested mode, counted at each scan: writes that
    /// shadow paging would have write-protected (an exit each, or an out-of-sync page).
    pub exits_avoided: u64,
    /// Dirty-bit scans.
    pub scans: u64,
    /// Guest tables in nested mode at the end.
    pub nested_tables: u64,
}

/// How a guest's inter-processor interrupts reach another vCPU (what a TLB shootdown costs).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Ipis {
    /// No hypervisor: the APIC delivers them.
    Native,
    /// Hardware virtualization: the sender's ICR write exits; without posted interrupts so do
    /// the delivery and the EOI on the target.
    Exits,
    /// A para-virtual guest sends them by hypercall.
    Hypercall,
    /// An L2 guest's: each of its APIC accesses is an L2 exit that its L1 hypervisor handles,
    /// at `round_trip` per world switch (L2 → L0 → L1 → L0 → L2, or PVM's switcher), and L1
    /// reaches the target's L1 vCPU with an IPI of its own, an exit to L0. `vmx`: L1 runs its
    /// guest with hardware virtualization (a VM exit flushes the TLBs without VPIDs, and the
    /// virtual APIC can take the guest's EOIs).
    L1 {
        /// Cycles of one world switch L2 → L1 → L2.
        round_trip: u64,
        /// L1 runs L2 under VMX (not PVM's switcher).
        vmx: bool,
    },
}

/// A vCPU's shadow root, kept across its turns: the guest root it shadows, and the shadow
/// root's address in the memory that holds the shadow tables (host memory, or L1's under
/// nested virtualization).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct VcpuRoot {
    /// The guest root (guest-physical).
    pub guest: Gpa,
    /// The shadow root, raw: a host-physical or an L1-physical address.
    pub shadow: u64,
}

impl VcpuRoot {
    /// The root a pager reports as loaded.
    pub fn of<A: Space>((guest, shadow): (Gpa, A)) -> VcpuRoot {
        VcpuRoot {
            guest,
            shadow: shadow.raw(),
        }
    }

    /// The root as a pager whose tables live in the memory of `A` keeps it.
    pub fn at<A: Space>(self) -> (Gpa, A) {
        (self.guest, A::from_raw(self.shadow))
    }
}

/// What the hypervisor is now: everything those above it may know of its mode (the event loop,
/// the results, the policies).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Role {
    /// The paging mode.
    pub paging: Paging,
    /// Nested tables map the VM's guest-physical memory to host memory (nested paging, and
    /// shadow paging by trap-and-emulate, which builds its entries from them); natively and
    /// under direct paging guest frames are machine frames.
    pub nested_tables: bool,
    /// The mode the VM is in, of the two it can switch between at an exit; `None` when it
    /// cannot switch (native and direct paging).
    pub virt: Option<VirtMode>,
    /// How the guest's IPIs travel.
    pub ipis: Ipis,
}

/// A fault the hypervisor sees first: a walk of process `pid`'s tables for `va` ended in
/// `cause`, or a TLB entry forbade the access.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Fault {
    /// The process that made the access.
    pub pid: u32,
    /// The address.
    pub va: Gva,
    /// The access.
    pub access: Access,
    /// Why there is no translation.
    pub cause: WalkFault,
}

/// What follows a fault the hypervisor saw.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Resolution {
    /// The hypervisor resolved it: retry the access.
    Retry,
    /// The fault is the guest's: its kernel handles it, then the access is retried.
    Guest,
}

/// How a direct-paging guest's MMU operations reach the hypervisor (`hypervisor.technique`
/// other than `hvm`: trap-and-emulate shadows the guest's tables instead).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum DirectTechnique {
    /// Para-virtual: hypercalls (Xen PV).
    Pv,
    /// Pre-virtualized: calls into an in-place VMM, which makes the hypercalls (seed 003).
    Previrt,
}

/// The error of a nested fault in a mode without nested paging.
pub(super) fn no_nested(gpa: Gpa, va: Gva) -> Error {
    Error::Check {
        event: 0,
        detail: format!("a nested fault at {gpa} for {va} without nested paging"),
    }
}

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
    /// `get_guest_pgd`). Called on every TLB miss. By default the guest's own tables, what
    /// native and direct paging walk.
    #[inline(always)]
    fn tables<'a>(
        &'a self,
        _hv: &'a Shared,
        mem: &'a mut PhysMem<Gpa>,
        pt: PageTable<Gva, Gpa>,
    ) -> Tables<'a> {
        Tables::Guest { mem, pt }
    }

    /// A fault the hypervisor sees first: resolved here, or the guest's (`page_fault`).
    fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        os: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution>;

    /// Backs the frames the guest just allocated (`fx.new_frames`), where the mode's nested
    /// tables map guest memory and back it when the guest allocates it (eager backing).
    fn back(&mut self, hv: &mut Shared, fx: &OsEffects) -> Result<()> {
        if self.role().nested_tables && !hv.lazy {
            for &(gpa, size) in &fx.new_frames {
                hv.host.back(gpa, size)?;
            }
        }
        Ok(())
    }

    /// The guest-physical → host-physical map the hardware's translations must agree with:
    /// the nested tables where they map guest memory, else the identity (native memory is
    /// machine memory; direct paging's guest frames are machine frames).
    fn p2m(&self, hv: &Shared, gpa: Gpa) -> Option<Hpa> {
        if self.role().nested_tables {
            hv.host.translate(gpa).map(|(h, _)| h)
        } else {
            Some(gpa.identity_hpa())
        }
    }

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
    fn resume(&mut self, _root: Option<VcpuRoot>) -> Resume {
        Resume::Rootless
    }

    /// The root the running vCPU has loaded: (guest root, shadow root).
    fn current_root(&self) -> Option<VcpuRoot> {
        None
    }

    /// The counters of the mode's shadow pager, if it has one.
    fn pager_stats(&self) -> Option<ShadowStats> {
        None
    }

    /// Zeroes the mode's own counters (the end of a warm-up).
    fn reset_stats(&mut self) {}

    /// The instruction count of the mode's next timed work (agile paging's dirty-bit scan);
    /// `u64::MAX` for none.
    fn next_tick(&self) -> u64 {
        u64::MAX
    }

    /// The mode's timed work, due at `instructions` ([`PagingOps::next_tick`]).
    fn tick(&mut self, _hv: &mut Shared, _mmu: &mut Mmu, _os: &GuestOs, _instructions: u64) {}

    /// The counters of agile paging's policy, in agile mode.
    fn agile_stats(&self) -> Option<AgileStats> {
        None
    }
}
