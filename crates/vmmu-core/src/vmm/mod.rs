//! The hypervisor (DESIGN.md "The hypervisor model"): one object, [`Vmm`], that owns the VM's
//! paging mode and everything that mode needs, behind the few operations the event loop calls —
//! hand the MMU the tables to walk, handle a fault, take an OS action's page-table writes, CR3
//! writes, INVLPGs and flushes, change mode at an exit.
//!
//! **One set of operations, one implementation per mode**, as in KVM's MMU: there the mode is
//! `struct kvm_mmu` — a root role and a few operations — filled by one initialiser per mode
//! (`init_kvm_tdp_mmu`, `init_kvm_softmmu`, `kvm_init_shadow_ept_mmu`), and the rest of KVM
//! never asks which mode it is in. Here a mode is one implementation of the operations of
//! `ops.rs` (`PagingOps`), in a file of its own:
//!
//! | file | mode ([`Paging`]) | KVM |
//! |---|---|---|
//! | `native.rs` | no hypervisor: the guest's tables, their output machine memory | bare metal |
//! | `nested.rs` | nested paging: the 2D walk over guest and nested tables | `init_kvm_tdp_mmu` |
//! | `shadow.rs` | shadow paging by trap-and-emulate: the shadow pager's tables | `init_kvm_softmmu` |
//! | `direct.rs` | direct paging (PV, pre-virtualized): guest tables of machine frames | Xen's PV MMU |
//! | `nested_virt/ept.rs` | nested virtualization, EPT on EPT: L0's shadow EPT02 | `kvm_init_shadow_ept_mmu` |
//! | `nested_virt/three_d.rs` | nested virtualization, a 3D walk of EPT12 over EPT01 | none (no such hardware) |
//! | `agile.rs` | agile paging: shadow tables, nested mode below a switching entry | none (ISCA 2016 proposal) |
//!
//! The operations, and the member of `struct kvm_mmu` each stands for:
//! - **describe** (`role`; `root_role`, `cpu_role`): the paging mode, whether nested tables
//!   map guest memory, which mode the VM can switch to, how its IPIs travel ([`Role`]);
//! - **tables** (`root`, `get_guest_pgd`): the tables the hardware walks, on every TLB miss;
//! - **fault** (`page_fault`): a walk's fault, resolved by the hypervisor or the guest's;
//! - **effects** — an OS action's page-table writes (`writes`: write protection,
//!   `kvm_mmu_track_write`, or PV `mmu_update`), INVLPGs (`invlpg`), full flushes
//!   (`flush`: `sync_roots`) and CR3 writes (`cr3_write`: `kvm_mmu_new_pgd`), as the mode
//!   intercepts them;
//! - **switch in**, **switch out** (`kvm_mmu_reset_context`): a change of mode at an exit;
//! - for several vCPUs: **resume** (`kvm_mmu_reload`), the **current root**, and whether shadow
//!   tables were removed so the others must flush (`unlinked`; `kvm_flush_remote_tlbs`).
//!
//! The modes are the variants of one enum (`active.rs`), dispatched by one `match` per
//! operation: `tables` stays inlined into the event loop, where a trait object would add an
//! indirect call to every TLB miss (docs/performance.md, "The hypervisor's modes"). Adding a
//! mode is a file that implements the operations, its variant, and one arm where a [`Paging`]
//! is built (`Active::build`). What every mode uses and what outlives a switch — host memory,
//! the bill, the shadow cache kept across switches — is `shared.rs`.
//!
//! Around the operations [`Vmm`] does what every mode shares: the order of an OS action's
//! effects and the hardware's part of each (the TLB invalidation of an INVLPG, the flush of a
//! CR3 write), the backing of new guest frames wherever nested tables map guest memory, host
//! memory and the nested tables ([`Host`]), and the bill: every hypervisor cycle is an entry of
//! the cost profile, charged through one place (`Account::charge`, [`exits`]) and counted by
//! exit reason; without VPIDs a world switch flushes the VM's TLBs and the refill is simulated,
//! never folded into a constant. Nothing outside this module asks which mode is active: what
//! those above need is in [`Vmm::describe`].
//!
//! Switching between shadow and nested paging replaces the mode at an exit
//! ([`Vmm::switch_mode`], seed 001 §5): the nested tables are the VM's guest-physical map in
//! both modes and are kept; the shadow cache is dropped, or kept and revalidated in full on
//! return (`hypervisor.switch.keep_shadow`); the VM's TLBs, page-walk caches and Nested TLB
//! are flushed, because no cached translation or table pointer of one mode may be used by the
//! other.

mod active;
mod agile;
mod direct;
pub mod exits;
mod native;
mod nested;
mod nested_virt;
mod ops;
mod pager_lock;
mod shadow;
mod shared;

pub use ops::{AgileStats, DirectTechnique, Fault, Ipis, Paging, Resolution, Role, VcpuRoot};
pub use pager_lock::{LockHolds, PagerLockCounts};

use crate::addr::{Gpa, Gva, Hpa};
use crate::config::{CostProfile, Mode, SimConfig, Technique, VirtMode};
use crate::error::{Error, Result};
use crate::guest::{GuestOs, OsEffects};
use crate::host::Host;
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::{Geometry, PageTable};
use crate::shadow::ShadowStats;
use crate::walk::Tables;
use active::Active;
use exits::{Account, ExitReason, ExitStats};
use nested_virt::l1::L1Setup;
use ops::Resume;
use shared::{ShadowCache, Shared};

/// The paging mode `cfg` (validated) starts in: an adaptive run in its policy's.
fn start_paging(cfg: &SimConfig) -> Result<Paging> {
    Ok(match (cfg.mode, &cfg.policy) {
        (Mode::Native, _) => Paging::Native,
        (Mode::Nested, _) => Paging::Nested,
        (Mode::Shadow, _) => match cfg.hypervisor.technique {
            Technique::Hvm => Paging::Shadow,
            Technique::Pv => Paging::Direct(DirectTechnique::Pv),
            Technique::Previrt => Paging::Direct(DirectTechnique::Previrt),
        },
        (Mode::Adaptive, Some(p)) => p.start().into(),
        (Mode::Adaptive, None) => {
            return Err(Error::config("policy", "an adaptive run needs a policy"))
        }
        (Mode::Agile, _) => Paging::Agile,
        (Mode::NestedVirt, _) => {
            Paging::NestedVirt(cfg.nested_virt.as_ref().map(|n| n.l1).unwrap_or_default())
        }
    })
}

/// Instructions retired in each paging mode, as [`Paging::name`] names them (direct paging
/// counts as shadow, nested virtualization as nested: the hardware walks nested tables).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InMode {
    /// Natively.
    pub native: u64,
    /// Under nested paging.
    pub nested: u64,
    /// Under shadow (or direct) paging.
    pub shadow: u64,
}

impl InMode {
    /// The count of `paging`.
    fn of(&mut self, paging: Paging) -> &mut u64 {
        match paging {
            Paging::Native => &mut self.native,
            Paging::Nested | Paging::NestedVirt(_) => &mut self.nested,
            Paging::Shadow | Paging::Direct(_) | Paging::Agile => &mut self.shadow,
        }
    }

    /// `(name, instructions)` of each mode: native, nested, shadow.
    pub fn named(&self) -> [(&'static str, u64); 3] {
        [
            (Paging::Native.name(), self.native),
            (Paging::Nested.name(), self.nested),
            (Paging::Shadow.name(), self.shadow),
        ]
    }
}

/// Counters of the hypervisor beyond its exits.
#[derive(Clone, Debug, Default)]
pub struct VmmStats {
    /// Changes of paging mode.
    pub mode_switches: u64,
    /// Instructions retired in each mode.
    pub instructions_in_mode: InMode,
}

/// The hypervisor of one VM.
pub struct Vmm {
    mode: Active,
    hv: Shared,
    /// The L1 hypervisor's setup, under nested virtualization.
    l1: Option<L1Setup>,
    /// Instructions retired when the current mode began.
    since: u64,
    /// Counters.
    pub stats: VmmStats,
}

impl Vmm {
    /// The hypervisor of `cfg` (validated), in the configured starting mode.
    pub fn new(cfg: &SimConfig) -> Result<Self> {
        let h = &cfg.hypervisor;
        let paging = start_paging(cfg)?;
        let l1 = L1Setup::of(cfg);
        let backed = l1.as_ref().map_or(cfg.guest.memory.0, L1Setup::bytes);
        let mut hv = Shared {
            host: Host::new(&cfg.host, backed, cfg.seed)?,
            acct: Account::new(h.costs.exit_round_trip, cfg.machine.tlb.vpid),
            costs: h.costs.clone(),
            lazy: h.backing == crate::config::Backing::Lazy,
            remote_flush: false,
            shadow: ShadowCache::new(
                &h.shadow,
                Geometry::of(cfg.guest.format),
                h.switch.keep_shadow,
            ),
            agile: cfg.agile.unwrap_or_default(),
        };
        Ok(Vmm {
            mode: Active::build(paging, &mut hv, l1.as_ref())?,
            hv,
            l1,
            since: 0,
            stats: VmmStats::default(),
        })
    }

    /// The VPID/ASID the VM's TLB entries carry: none natively or without VPIDs.
    pub fn vpid(cfg: &SimConfig) -> u16 {
        if cfg.mode == Mode::Native || !cfg.machine.tlb.vpid {
            0
        } else {
            1
        }
    }

    /// What the hypervisor is now.
    #[inline]
    pub fn describe(&self) -> Role {
        self.mode.role()
    }

    /// The mode the VM is in, of the two it can switch between (what a policy reads); `None`
    /// natively and under direct paging.
    #[inline]
    pub fn virt_mode(&self) -> Option<VirtMode> {
        self.describe().virt
    }

    /// The tables the hardware walks for a process whose guest tables are `pt`.
    #[inline]
    pub fn tables<'a>(&'a self, gmem: &'a mut PhysMem<Gpa>, pt: PageTable<Gva, Gpa>) -> Tables<'a> {
        self.mode.tables(&self.hv, gmem, pt)
    }

    /// The guest-physical → host-physical map the hardware's translations must agree with:
    /// the nested tables where they map guest memory, else the identity (native memory is
    /// machine memory; direct paging's guest frames are machine frames); under nested
    /// virtualization EPT12 composed with EPT01.
    pub fn p2m(&self, gpa: Gpa) -> Option<Hpa> {
        self.mode.p2m(&self.hv, gpa)
    }

    /// A fault `f` on the way to a translation: what the hypervisor does, and whether the
    /// guest must handle it.
    pub fn fault(&mut self, mmu: &mut Mmu, os: &mut GuestOs, f: Fault) -> Result<Resolution> {
        let res = self.mode.fault(&mut self.hv, mmu, os, f)?;
        self.take_unlinked(mmu);
        Ok(res)
    }

    /// Hands an OS action's effects to the hypervisor and the hardware: new guest frames are
    /// backed, guest page-table writes reach the hypervisor as the mode has them, INVLPGs,
    /// flushes and the CR3 write are executed (and intercepted where the mode intercepts
    /// them).
    pub fn effects(&mut self, mmu: &mut Mmu, os: &GuestOs, fx: &OsEffects) -> Result<()> {
        self.back(fx)?;
        self.mode.writes(&mut self.hv, mmu, fx);
        self.invalidate(mmu, os, fx);
        if let Some(pid) = fx.cr3_switch {
            self.cr3_write(mmu, os, pid)?;
        }
        self.take_unlinked(mmu);
        Ok(())
    }

    /// The INVLPGs and full flushes of `fx`, executed by the processor of `mmu` (the one that
    /// changed the tables, or another one in its TLB-shootdown handler), and intercepted
    /// where the mode intercepts them.
    fn invalidate(&mut self, mmu: &mut Mmu, os: &GuestOs, fx: &OsEffects) {
        for &(pid, va, size) in &fx.invalidate {
            let tag = mmu.tag(os.pcid(pid));
            self.mode.invlpg(&mut self.hv, mmu, os, pid, va);
            mmu.invlpg(va, size, tag);
        }
        for &pid in &fx.flush_pids {
            self.mode.flush(&mut self.hv, mmu, os, pid);
            mmu.flush_context(mmu.tag(os.pcid(pid)));
        }
    }

    /// After the mode removed or unlinked tables the hardware may cache entries of, the
    /// processor flushes its paging-structure caches; the other vCPUs must flush theirs before
    /// they next walk ([`Vmm::take_remote_flush`]).
    fn take_unlinked(&mut self, mmu: &mut Mmu) {
        if self.mode.unlinked() {
            mmu.flush_paging_structures();
            self.hv.remote_flush = true;
        }
    }

    /// An event begins: the shadow pager's lock holds of its handlers are counted from here
    /// ([`Vmm::take_lock_holds`]).
    pub fn begin_event(&mut self) {
        self.hv.acct.lock.begin();
    }

    /// The shadow pager's lock holds since the event began ([`Vmm::begin_event`]).
    pub fn take_lock_holds(&mut self) -> LockHolds {
        self.hv.acct.lock.take()
    }

    /// An event that began at time `at` on its vCPU's clock made the lock holds `held`: it
    /// waits for the lock where another vCPU held it then (multi-vCPU runs).
    pub fn pager_lock_wait(&mut self, held: LockHolds, at: u64) {
        self.hv.acct.lock.hold(held, at);
    }

    /// The shadow pager's lock's counts.
    pub fn pager_lock(&self) -> PagerLockCounts {
        self.hv.acct.lock.counts
    }

    /// Restarts the lock's counts (the end of a warm-up); when it is next free stays.
    pub fn restart_pager_lock(&mut self) {
        self.hv.acct.lock.counts = PagerLockCounts::default();
    }

    /// Whether shadow tables were removed since the last call, so every other vCPU must
    /// flush (KVM's `kvm_flush_remote_tlbs`); clears the flag.
    pub fn take_remote_flush(&mut self) -> bool {
        std::mem::take(&mut self.hv.remote_flush)
    }

    /// Another vCPU, `remote`, is forced out and flushes its TLBs and paging-structure caches
    /// after shadow tables were removed (a host IPI, priced as `ipi_deliver`; under nested
    /// virtualization L1's IPI interrupts the L2 vCPU, an L2 exit L1 handles). Returns the
    /// cycles charged.
    pub fn remote_flush(&mut self, remote: &mut Mmu) -> u64 {
        let deliver = self.hv.costs.ipi_deliver;
        let ipis = self.describe().ipis;
        let acct = &mut self.hv.acct;
        let before = acct.exits.total_cycles();
        acct.charge_interrupt(remote, ipis, ExitReason::RemoteFlush, deliver);
        remote.flush_vm();
        acct.exits.total_cycles() - before
    }

    /// A TLB-shootdown IPI from the running vCPU (`local`) to `remote`, and the handler on
    /// `remote` that executes `fx`'s invalidations (docs/model.md, "TLB shootdowns"), priced
    /// as the guest's IPIs travel ([`Ipis`]); under shadow paging (L0's or L1's) the
    /// handler's INVLPGs exit too. Returns the hypervisor cycles charged on `remote`.
    ///
    /// An L2 guest's IPI ([`Ipis::L1`]): its ICR write is an L2 exit L1 handles, whose
    /// handler sends L1's own IPI to the target's L1 vCPU (an exit to L0, priced as a
    /// single-level `ipi_send`); at the target the L2 vCPU is interrupted and L1 injects the
    /// interrupt (an L2 exit, always: L1 must run to inject), and the guest's EOI is an L2
    /// exit unless the virtual APIC takes it (posted interrupts, and L1 running L2 under VMX:
    /// PVM's L2 has no virtual APIC).
    pub fn shootdown(
        &mut self,
        local: &mut Mmu,
        remote: &mut Mmu,
        os: &GuestOs,
        fx: &OsEffects,
    ) -> u64 {
        let c = &self.hv.costs;
        let (send, deliver, eoi) = (c.ipi_send, c.ipi_deliver, c.eoi);
        let (hypercall, posted) = (c.hypercall, c.posted_interrupts);
        let ipis = self.describe().ipis;
        let acct = &mut self.hv.acct;
        match ipis {
            Ipis::Native => {}
            Ipis::Exits => acct.charge(local, ExitReason::IpiSend, send),
            Ipis::Hypercall => acct.charge(local, ExitReason::Hypercall, hypercall),
            Ipis::L1 { round_trip, vmx } => {
                acct.charge_trip(local, ExitReason::IpiSend, round_trip, send, vmx);
                acct.charge(local, ExitReason::IpiSend, send);
            }
        }
        // Which of the delivery and the EOI exit: under posted interrupts the virtual APIC
        // takes both, except that L1 must run to inject an L2 guest's interrupt, and PVM's L2
        // (no VMX) has no virtual APIC for its EOI.
        let (delivery_exits, eoi_exits) = match ipis {
            Ipis::Exits => (!posted, !posted),
            Ipis::L1 { vmx, .. } => (true, !posted || !vmx),
            Ipis::Native | Ipis::Hypercall => (false, false),
        };
        let before = acct.exits.total_cycles();
        if delivery_exits {
            acct.charge_interrupt(remote, ipis, ExitReason::IpiDeliver, deliver);
        }
        self.invalidate(remote, os, fx);
        let acct = &mut self.hv.acct;
        if eoi_exits {
            acct.charge_interrupt(remote, ipis, ExitReason::Eoi, eoi);
        }
        acct.exits.total_cycles() - before
    }

    /// The running vCPU changes: `mmu` is the MMU of the vCPU that resumes, running `pid`
    /// whose root was `root` when it last ran. Where the mode keeps per-vCPU roots (shadow
    /// paging) the root it had may have been dropped meanwhile (by another vCPU's CR3 write or
    /// the shadow cache's capacity): it is rebuilt, as KVM reloads an invalid root before
    /// entry, priced as a CR3 write. Returns the root now loaded, to keep for the vCPU's next
    /// turn.
    pub fn resume(
        &mut self,
        mmu: &mut Mmu,
        os: &GuestOs,
        pid: Option<u32>,
        root: Option<VcpuRoot>,
    ) -> Result<Option<VcpuRoot>> {
        match self.mode.resume(root) {
            Resume::Rootless => Ok(None),
            Resume::Kept => Ok(root),
            Resume::Reload => {
                if let Some(pid) = pid {
                    self.cr3_write(mmu, os, pid)?;
                    self.take_unlinked(mmu);
                }
                Ok(self.current_root())
            }
        }
    }

    /// The root the running vCPU has loaded, where the mode keeps per-vCPU roots.
    pub fn current_root(&self) -> Option<VcpuRoot> {
        self.mode.current_root()
    }

    /// Backs the frames the guest just allocated, as the mode backs guest memory.
    fn back(&mut self, fx: &OsEffects) -> Result<()> {
        self.mode.back(&mut self.hv, fx)
    }

    /// A guest CR3 write to `pid`'s tables, as the mode intercepts it; the hardware then drops
    /// the old address space's entries unless they are PCID-tagged.
    fn cr3_write(&mut self, mmu: &mut Mmu, os: &GuestOs, pid: u32) -> Result<()> {
        self.mode.cr3_write(&mut self.hv, mmu, os, pid)?;
        mmu.stats.cr3_writes += 1;
        if !mmu.pcid() {
            mmu.flush_context(mmu.tag(os.pcid(pid)));
        }
        Ok(())
    }

    /// Changes the paging mode at an exit, `instructions` into the run, to the other of the
    /// two the VM can switch between: the old mode switches out (shadow → nested keeps the
    /// nested tables and drops or parks the shadow cache), the new one switches in (nested →
    /// shadow starts from an empty or the parked cache and builds the current process's root,
    /// the rest filling through hidden faults). The VM's TLBs and walk caches are flushed.
    /// Native and direct paging cannot switch (the configuration is rejected before the run).
    pub fn switch_mode(&mut self, mmu: &mut Mmu, os: &GuestOs, instructions: u64) -> Result<()> {
        let role = self.describe();
        let Some(from) = role.virt else {
            return Err(Error::config(
                "hypervisor.switch.at",
                format!("a VM in {} paging cannot switch modes", role.paging.name()),
            ));
        };
        *self.stats.instructions_in_mode.of(role.paging) += instructions - self.since;
        self.since = instructions;
        let mut handler = self.hv.costs.mode_switch;
        let new = Active::build(from.other().into(), &mut self.hv, self.l1.as_ref())?;
        let old = std::mem::replace(&mut self.mode, new);
        handler += old.switch_out(&mut self.hv);
        handler += self.mode.switch_in(&mut self.hv, os)?;
        self.hv.acct.charge(mmu, ExitReason::ModeSwitch, handler);
        mmu.flush_vm();
        self.stats.mode_switches += 1;
        Ok(())
    }

    /// The instruction count of the mode's next timed work (agile paging's dirty-bit scan);
    /// `u64::MAX` for none.
    #[inline]
    pub fn next_tick(&self) -> u64 {
        self.mode.next_tick()
    }

    /// The mode's timed work due at `instructions` (the run's, warm-up included), on the
    /// processor of `mmu`, the guest running `os`.
    pub fn tick(&mut self, mmu: &mut Mmu, os: &GuestOs, instructions: u64) {
        if instructions >= self.mode.next_tick() {
            self.mode.tick(&mut self.hv, mmu, os, instructions);
            self.take_unlinked(mmu);
        }
    }

    /// Agile paging's policy counters and walks by switching level, in agile mode.
    pub fn agile_stats(&self) -> Option<AgileStats> {
        self.mode.agile_stats()
    }

    /// A PMU-overflow interrupt exits so that a sampling policy reads the counters.
    pub fn pmu_exit(&mut self, mmu: &mut Mmu) {
        self.hv
            .acct
            .charge(mmu, ExitReason::PmuOverflow, self.hv.costs.pmu_exit);
    }

    /// Paging-related exits so far ([`ExitReason::is_paging`]).
    #[inline]
    pub fn paging_exits(&self) -> u64 {
        self.hv.acct.paging_exits
    }

    /// Cycles of the paging-related exits so far (round trips and handlers).
    pub fn paging_exit_cycles(&self) -> u64 {
        self.hv.acct.paging_exit_cycles
    }

    /// Instructions retired in each mode when `instructions` have retired in all, the current
    /// mode's open period included.
    pub fn instructions_in_mode(&self, instructions: u64) -> InMode {
        let mut in_mode = self.stats.instructions_in_mode;
        *in_mode.of(self.describe().paging) += instructions.saturating_sub(self.since);
        in_mode
    }

    /// Closes the books at the end of the run (`instructions` retired in all).
    pub fn finish(&mut self, instructions: u64) {
        let paging = self.describe().paging;
        *self.stats.instructions_in_mode.of(paging) += instructions.saturating_sub(self.since);
        self.since = instructions;
    }

    /// Zeroes the counters at the end of a warm-up, `instructions` into the run; the state
    /// (tables, shadow cache, backing) stays.
    pub fn reset_stats(&mut self, instructions: u64) {
        self.hv.acct.reset_stats();
        self.stats = VmmStats::default();
        self.since = instructions;
        self.hv.shadow.reset_stats();
        self.mode.reset_stats();
    }

    /// Exits by reason.
    pub fn exits(&self) -> &ExitStats {
        &self.hv.acct.exits
    }

    /// The cost profile.
    pub fn costs(&self) -> &CostProfile {
        &self.hv.costs
    }

    /// The host side (nested tables and their counters).
    pub fn host(&self) -> &Host {
        &self.hv.host
    }

    /// The shadow pagers' counters over the run, when the VM ran under shadow paging at all.
    pub fn shadow_stats(&self) -> Option<ShadowStats> {
        self.hv
            .shadow
            .stats(self.mode.pager_stats(), self.stats.mode_switches > 0)
    }
}
