//! The hypervisor (DESIGN.md "The hypervisor model"): one object that owns the VM's paging mode
//! and everything that mode needs, behind the few operations the event loop calls — hand the
//! MMU the tables to walk, handle a fault, take the guest's page-table writes, CR3 writes,
//! INVLPGs and flushes, change mode at an exit.
//!
//! The mode is the state of one enum, [`Paging`]: none (native), nested tables, a shadow pager,
//! or direct paging with a technique. Nothing outside this module asks which mode is active,
//! and every decision that depends on it is an exhaustive `match` here (STYLE.md 6; KVM's
//! `struct kvm_mmu` is the model). Switching between shadow and nested paging replaces that
//! state at an exit ([`Vmm::switch_mode`], seed 001 §5): the nested tables are the VM's
//! guest-physical map in both modes and are kept; the shadow cache is dropped, or kept and
//! revalidated in full on return (`hypervisor.switch.keep_shadow`); the VM's TLBs, page-walk
//! caches and Nested TLB are flushed, because no cached translation or table pointer of one
//! mode may be used by the other.
//!
//! Every hypervisor cycle is an entry of the cost profile, charged through one place
//! ([`Account::charge`]) and counted by exit reason; without VPIDs a world switch flushes the
//! VM's TLBs and the refill is simulated, never folded into a constant.

pub mod exits;

use crate::addr::{Gpa, Gva, Hpa, PageSize};
use crate::config::{CostProfile, Mode, ShadowConfig, SimConfig, Technique};
use crate::error::{Error, Result};
use crate::guest::{GuestOs, OsEffects};
use crate::host::Host;
use crate::mmu::{Mmu, Tables};
use crate::paging::{Geometry, PageTable};
use crate::shadow::{FaultKind, ShadowPager, ShadowStats, WriteKind};
use crate::walk::{Access, WalkFault};
use exits::{ExitReason, ExitStats};

/// The VM's paging mode and its state.
pub enum Paging {
    /// No hypervisor: the hardware walks the guest's tables and their output is machine
    /// memory.
    Native,
    /// Nested paging: the 2D walk over the guest's tables and the nested tables.
    Nested,
    /// Shadow paging by trap-and-emulate: the hardware walks the shadow pager's tables.
    Shadow(Box<ShadowPager>),
    /// Direct paging (Xen PV style): the hardware walks the guest's validated tables, which hold
    /// machine frames; MMU operations reach the hypervisor by hypercalls (`pv`) or through an
    /// in-place VMM (`previrt`, seed 003).
    Direct(Technique),
}

/// What follows a fault the hypervisor saw.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Resolution {
    /// The hypervisor resolved it: retry the access.
    Retry,
    /// The fault is the guest's: its kernel handles it, then the access is retried.
    Guest,
}

/// Counters of the hypervisor beyond its exits.
#[derive(Clone, Debug, Default)]
pub struct VmmStats {
    /// Changes of paging mode.
    pub mode_switches: u64,
    /// Instructions retired in each mode (index [`mode_index`]).
    pub instructions_in_mode: [u64; 3],
}

/// The position of `mode` in [`VmmStats::instructions_in_mode`].
pub const fn mode_index(mode: Mode) -> usize {
    match mode {
        Mode::Native => 0,
        Mode::Nested => 1,
        Mode::Shadow => 2,
        Mode::Adaptive => {
            panic!("adaptive is a policy over nested and shadow paging, never the paging state")
        }
    }
}

/// The hypervisor's bill: exits by reason with their cycles.
struct Account {
    /// A VM exit and the entry that resumes the guest (the profile's `exit_round_trip`).
    round_trip: u64,
    /// TLB entries are tagged by VPID/ASID, so world switches keep them.
    tagged: bool,
    exits: ExitStats,
    /// Paging-related exits ([`ExitReason::is_paging`]) and their cycles: what a policy
    /// watches under shadow paging.
    paging_exits: u64,
    paging_exit_cycles: u64,
}

impl Account {
    /// Charges one hypervisor operation of `reason` with handler cost `handler`: the exit
    /// round trip where the operation is an exit, and, without VPIDs, a flush of the VM's
    /// TLBs at every world switch.
    fn charge(&mut self, mmu: &mut Mmu, reason: ExitReason, handler: u64) {
        let round_trip = match reason {
            ExitReason::Hypercall | ExitReason::FaultBounce | ExitReason::InPlaceCall => 0,
            ExitReason::HiddenFault
            | ExitReason::GuestFault
            | ExitReason::PtWrite
            | ExitReason::Cr3Write
            | ExitReason::Invlpg
            | ExitReason::NestedFault
            | ExitReason::ModeSwitch
            | ExitReason::IpiSend
            | ExitReason::IpiDeliver
            | ExitReason::Eoi
            | ExitReason::RemoteFlush
            | ExitReason::PmuOverflow => self.round_trip,
        };
        self.exits.record(reason, round_trip + handler);
        if reason.is_paging() {
            self.paging_exits += 1;
            self.paging_exit_cycles += round_trip + handler;
        }
        if reason.is_world_switch() && !self.tagged {
            mmu.flush_vm();
        }
    }
}

/// The hypervisor of one VM.
pub struct Vmm {
    paging: Paging,
    host: Host,
    /// A shadow cache kept while the VM runs under nested paging.
    parked: Option<Box<ShadowPager>>,
    /// Counters of shadow pagers dropped at mode switches.
    retired: ShadowStats,
    shadow_cfg: ShadowConfig,
    geo: Geometry,
    lazy: bool,
    keep_shadow: bool,
    costs: CostProfile,
    acct: Account,
    /// Instructions retired when the current mode began.
    since: u64,
    /// Shadow tables were removed: every other vCPU must flush.
    remote_flush: bool,
    /// Counters.
    pub stats: VmmStats,
}

impl Vmm {
    /// The hypervisor of `cfg` (validated), in the configured starting mode.
    pub fn new(cfg: &SimConfig) -> Result<Self> {
        let h = &cfg.hypervisor;
        let geo = Geometry::of(cfg.guest.format);
        // An adaptive run starts in its policy's mode (validated: with technique hvm).
        let start = match (cfg.mode, &cfg.policy) {
            (Mode::Adaptive, Some(p)) => p.start(),
            (Mode::Adaptive, None) => {
                return Err(Error::config("policy", "an adaptive run needs a policy"))
            }
            (m @ (Mode::Native | Mode::Nested | Mode::Shadow), _) => m,
        };
        let paging = match (start, h.technique) {
            (Mode::Native, _) => Paging::Native,
            (Mode::Nested, _) => Paging::Nested,
            (Mode::Shadow, Technique::Hvm) => {
                Paging::Shadow(Box::new(ShadowPager::new(&h.shadow, geo)))
            }
            (Mode::Shadow, t @ (Technique::Pv | Technique::Previrt)) => Paging::Direct(t),
            (Mode::Adaptive, _) => {
                return Err(Error::config(
                    "policy",
                    "a policy starts in nested or shadow paging",
                ))
            }
        };
        Ok(Vmm {
            paging,
            host: Host::new(&cfg.host, cfg.guest.memory.0, cfg.seed)?,
            parked: None,
            retired: ShadowStats::default(),
            shadow_cfg: h.shadow.clone(),
            geo,
            lazy: h.backing == crate::config::Backing::Lazy,
            keep_shadow: h.switch.keep_shadow,
            costs: h.costs.clone(),
            acct: Account {
                round_trip: h.costs.exit_round_trip,
                tagged: cfg.machine.tlb.vpid,
                exits: ExitStats::default(),
                paging_exits: 0,
                paging_exit_cycles: 0,
            },
            since: 0,
            remote_flush: false,
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

    /// The paging mode now.
    pub fn mode(&self) -> Mode {
        match self.paging {
            Paging::Native => Mode::Native,
            Paging::Nested => Mode::Nested,
            Paging::Shadow(_) | Paging::Direct(_) => Mode::Shadow,
        }
    }

    /// The tables the hardware walks for a process whose guest tables are `pt`.
    #[inline]
    pub fn tables<'a>(
        &'a self,
        gmem: &'a mut crate::mem::PhysMem<Gpa>,
        pt: PageTable<Gva, Gpa>,
    ) -> Tables<'a> {
        match &self.paging {
            Paging::Native | Paging::Direct(_) => Tables::Guest { mem: gmem, pt },
            Paging::Nested => Tables::Nested {
                mem: gmem,
                pt,
                hmem: &self.host.hmem,
                npt: self.host.npt,
            },
            Paging::Shadow(sp) => Tables::Shadow {
                hmem: &self.host.hmem,
                pt: sp.tables(),
            },
        }
    }

    /// The guest-physical → host-physical map the hardware's translations must agree with.
    pub fn p2m(&self, gpa: Gpa) -> Option<Hpa> {
        match self.paging {
            // Native memory is machine memory; direct paging's guest frames are machine frames.
            Paging::Native | Paging::Direct(_) => Some(gpa.identity_hpa()),
            Paging::Nested | Paging::Shadow(_) => self.host.translate(gpa).map(|(h, _)| h),
        }
    }

    /// A walk of process `pid` for `va` ended in fault `f` (or a TLB entry forbade the access):
    /// what the hypervisor does, and whether the guest must handle it.
    #[allow(clippy::too_many_arguments)]
    pub fn fault(
        &mut self,
        mmu: &mut Mmu,
        os: &mut GuestOs,
        pid: u32,
        va: Gva,
        access: Access,
        f: WalkFault,
    ) -> Result<Resolution> {
        let Vmm {
            paging,
            host,
            acct,
            costs: c,
            lazy,
            remote_flush,
            ..
        } = self;
        match (paging, f) {
            (Paging::Nested, WalkFault::Nested { gpa }) if *lazy => {
                host.back(gpa.page_base(PageSize::Size4K), PageSize::Size4K)?;
                acct.charge(mmu, ExitReason::NestedFault, c.nested_fault);
                Ok(Resolution::Retry)
            }
            (Paging::Nested, WalkFault::Nested { gpa }) => Err(Error::Check {
                event: 0,
                detail: format!(
                    "nested fault at {gpa} for {va}: guest memory is pre-backed, so every \
                     allocated guest frame must have a nested mapping"
                ),
            }),
            (Paging::Native | Paging::Shadow(_) | Paging::Direct(_), WalkFault::Nested { gpa }) => {
                Err(Error::Check {
                    event: 0,
                    detail: format!("a nested fault at {gpa} for {va} without nested paging"),
                })
            }
            (Paging::Shadow(sp), WalkFault::NotPresent { .. } | WalkFault::Protection) => {
                let gpt = os.tables(pid).ok_or_else(|| Error::Check {
                    event: 0,
                    detail: format!("a fault at {va} of process {pid}, which is gone"),
                })?;
                let kind = sp.hidden_fault(
                    &mut os.mem,
                    &gpt,
                    host,
                    va,
                    access.write,
                    access.fetch,
                    *lazy,
                )?;
                let res = match kind {
                    FaultKind::Filled { built, backed } => {
                        let h = c.hidden_fault
                            + built as u64 * c.make_shadow
                            + backed as u64 * c.nested_fault;
                        acct.charge(mmu, ExitReason::HiddenFault, h);
                        Resolution::Retry
                    }
                    FaultKind::Guest => {
                        acct.charge(mmu, ExitReason::GuestFault, c.reflect_fault);
                        Resolution::Guest
                    }
                };
                if sp.take_unlinked() {
                    mmu.flush_paging_structures();
                    *remote_flush = true;
                }
                Ok(res)
            }
            (Paging::Direct(_), WalkFault::NotPresent { .. } | WalkFault::Protection) => {
                acct.charge(mmu, ExitReason::FaultBounce, c.pv_fault_bounce);
                Ok(Resolution::Guest)
            }
            (
                Paging::Native | Paging::Nested,
                WalkFault::NotPresent { .. } | WalkFault::Protection,
            ) => Ok(Resolution::Guest),
        }
    }

    /// Hands an OS action's effects to the hypervisor and the hardware: new guest frames are
    /// backed, guest page-table writes reach the hypervisor by mode, INVLPGs, flushes and the
    /// CR3 write are executed (and intercepted where the mode intercepts them).
    pub fn effects(&mut self, mmu: &mut Mmu, os: &GuestOs, fx: &OsEffects) -> Result<()> {
        self.back(fx)?;
        let Vmm {
            paging,
            host,
            acct,
            costs: c,
            ..
        } = self;
        match paging {
            Paging::Native | Paging::Nested => {}
            Paging::Shadow(sp) => {
                for w in &fx.writes {
                    match sp.guest_write(host, w) {
                        WriteKind::Emulated { unshadowed } => {
                            let h = c.emulate_write + if unshadowed { c.unshadow } else { 0 };
                            acct.charge(mmu, ExitReason::PtWrite, h);
                        }
                        WriteKind::Unshadowed | WriteKind::OutOfSync => {}
                    }
                }
                for &t in &fx.freed_tables {
                    sp.table_freed(host, t);
                }
            }
            Paging::Direct(t) => {
                let n = fx.writes.len() as u64;
                let invl = fx.invalidate.len() as u64;
                let per = match t {
                    Technique::Previrt => {
                        for _ in 0..(n + invl) {
                            acct.charge(mmu, ExitReason::InPlaceCall, c.previrt_call);
                        }
                        c.previrt_update
                    }
                    Technique::Pv | Technique::Hvm => c.pv_update,
                };
                if n + invl > 0 {
                    acct.charge(mmu, ExitReason::Hypercall, c.hypercall + n * per);
                }
            }
        }
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
        let Vmm {
            paging,
            host,
            acct,
            costs: c,
            ..
        } = self;
        for &(pid, va, size) in &fx.invalidate {
            let tag = mmu.tag(os.pcid(pid));
            if let (Paging::Shadow(sp), Some(gpt)) = (&mut *paging, os.tables(pid)) {
                let resynced = sp.invlpg(&os.mem, &gpt, host, va);
                let h = c.invlpg + resynced as u64 * c.resync_page;
                acct.charge(mmu, ExitReason::Invlpg, h);
            }
            mmu.invlpg(va, size, tag);
        }
        for &pid in &fx.flush_pids {
            if let (Paging::Shadow(sp), true) = (&mut *paging, os.process(pid).is_some()) {
                // A full flush is a CR3 reload: it exits, and out-of-sync pages are resynced,
                // so no stale shadow entry survives it.
                let resynced = sp.resync_all(&os.mem, host);
                let h = c.cr3_write + resynced as u64 * c.resync_page;
                acct.charge(mmu, ExitReason::Cr3Write, h);
            }
            mmu.flush_context(mmu.tag(os.pcid(pid)));
        }
    }

    /// After the shadow pager removed or unlinked a shadow table, the processor flushes its
    /// paging-structure caches; the other vCPUs must flush theirs before they next walk
    /// ([`Vmm::take_remote_flush`]).
    fn take_unlinked(&mut self, mmu: &mut Mmu) {
        if let Paging::Shadow(sp) = &mut self.paging {
            if sp.take_unlinked() {
                mmu.flush_paging_structures();
                self.remote_flush = true;
            }
        }
    }

    /// Whether shadow tables were removed since the last call, so every other vCPU must
    /// flush (KVM's `kvm_flush_remote_tlbs`); clears the flag.
    pub fn take_remote_flush(&mut self) -> bool {
        std::mem::take(&mut self.remote_flush)
    }

    /// Another vCPU, `remote`, is forced out and flushes its TLBs and paging-structure caches
    /// after shadow tables were removed (a host IPI, priced as `ipi_deliver`). Returns the
    /// cycles charged.
    pub fn remote_flush(&mut self, remote: &mut Mmu) -> u64 {
        let before = self.acct.exits.total_cycles();
        let c = self.costs.ipi_deliver;
        self.acct.charge(remote, ExitReason::RemoteFlush, c);
        remote.flush_vm();
        self.acct.exits.total_cycles() - before
    }

    /// A TLB-shootdown IPI from the running vCPU (`local`) to `remote`, and the handler on
    /// `remote` that executes `fx`'s invalidations (docs/model.md, "TLB shootdowns").
    /// Natively neither exits; with hardware virtualization the sender's ICR write exits, and
    /// without posted interrupts so do the delivery and the EOI on `remote`; under shadow
    /// paging the handler's INVLPGs exit too. Para-virtual guests send it by hypercall.
    /// Returns the hypervisor cycles charged on `remote`.
    pub fn shootdown(
        &mut self,
        local: &mut Mmu,
        remote: &mut Mmu,
        os: &GuestOs,
        fx: &OsEffects,
    ) -> u64 {
        let c = &self.costs;
        let (send, deliver, eoi) = (c.ipi_send, c.ipi_deliver, c.eoi);
        let posted = c.posted_interrupts;
        let hypercall = c.hypercall;
        match self.paging {
            Paging::Native => {}
            Paging::Nested | Paging::Shadow(_) => {
                self.acct.charge(local, ExitReason::IpiSend, send);
            }
            Paging::Direct(_) => self.acct.charge(local, ExitReason::Hypercall, hypercall),
        }
        let before = self.acct.exits.total_cycles();
        if matches!(self.paging, Paging::Nested | Paging::Shadow(_)) && !posted {
            self.acct.charge(remote, ExitReason::IpiDeliver, deliver);
        }
        self.invalidate(remote, os, fx);
        if matches!(self.paging, Paging::Nested | Paging::Shadow(_)) && !posted {
            self.acct.charge(remote, ExitReason::Eoi, eoi);
        }
        self.acct.exits.total_cycles() - before
    }

    /// The running vCPU changes: `mmu` is the MMU of the vCPU that resumes, running `pid`
    /// whose shadow root was `root` when it last ran. Under shadow paging the root it had
    /// may have been dropped meanwhile (by another vCPU's CR3 write or the shadow cache's
    /// capacity): it is rebuilt, as KVM reloads an invalid root before entry, priced as a
    /// CR3 write. Returns the root now loaded, to keep for the vCPU's next turn.
    pub fn resume(
        &mut self,
        mmu: &mut Mmu,
        os: &GuestOs,
        pid: Option<u32>,
        root: Option<(Gpa, Hpa)>,
    ) -> Result<Option<(Gpa, Hpa)>> {
        let Paging::Shadow(sp) = &mut self.paging else {
            return Ok(None);
        };
        if sp.resume(root) {
            return Ok(root);
        }
        if let Some(pid) = pid {
            self.cr3_write(mmu, os, pid)?;
            self.take_unlinked(mmu);
        }
        Ok(self.current_root())
    }

    /// The shadow root the running vCPU has loaded.
    pub fn current_root(&self) -> Option<(Gpa, Hpa)> {
        match &self.paging {
            Paging::Shadow(sp) => sp.current(),
            _ => None,
        }
    }

    /// Backs the frames the guest just allocated, unless memory is backed lazily.
    fn back(&mut self, fx: &OsEffects) -> Result<()> {
        match self.paging {
            // Native memory is the machine's; direct paging hands out machine frames.
            Paging::Native | Paging::Direct(_) => Ok(()),
            Paging::Nested | Paging::Shadow(_) if self.lazy => Ok(()),
            Paging::Nested | Paging::Shadow(_) => {
                for &(gpa, size) in &fx.new_frames {
                    self.host.back(gpa, size)?;
                }
                Ok(())
            }
        }
    }

    /// A guest CR3 write to `pid`'s tables, as the mode handles it; the hardware then drops the
    /// old address space's entries unless they are PCID-tagged.
    fn cr3_write(&mut self, mmu: &mut Mmu, os: &GuestOs, pid: u32) -> Result<()> {
        let Vmm {
            paging,
            host,
            acct,
            costs: c,
            ..
        } = self;
        match paging {
            Paging::Shadow(sp) => {
                let root = os.tables(pid).ok_or_else(|| Error::Check {
                    event: 0,
                    detail: format!("CR3 write to process {pid}, which is gone"),
                })?;
                let (built, resynced) = sp.switch_root(&os.mem, host, root.root)?;
                let h =
                    c.cr3_write + built as u64 * c.make_shadow + resynced as u64 * c.resync_page;
                acct.charge(mmu, ExitReason::Cr3Write, h);
            }
            Paging::Direct(Technique::Previrt) => {
                acct.charge(mmu, ExitReason::InPlaceCall, c.previrt_call);
                acct.charge(mmu, ExitReason::Hypercall, c.hypercall);
            }
            Paging::Direct(Technique::Pv | Technique::Hvm) => {
                acct.charge(mmu, ExitReason::Hypercall, c.hypercall)
            }
            Paging::Native | Paging::Nested => {}
        }
        mmu.stats.cr3_writes += 1;
        if !mmu.pcid() {
            mmu.flush_context(mmu.tag(os.pcid(pid)));
        }
        Ok(())
    }

    /// Changes the paging mode at an exit, `instructions` into the run: shadow → nested
    /// keeps the nested tables and drops (or parks) the shadow cache; nested → shadow starts
    /// from an empty shadow cache (or revalidates the parked one) and builds the current
    /// process's root, the rest filling through hidden faults. The VM's TLBs and walk caches
    /// are flushed. Native and direct paging cannot switch (the configuration is rejected
    /// before the run).
    pub fn switch_mode(&mut self, mmu: &mut Mmu, os: &GuestOs, instructions: u64) -> Result<()> {
        let from = self.mode();
        self.stats.instructions_in_mode[mode_index(from)] += instructions - self.since;
        self.since = instructions;
        let c = &self.costs;
        let mut handler = c.mode_switch;
        let next = match std::mem::replace(&mut self.paging, Paging::Nested) {
            Paging::Shadow(mut sp) => {
                if self.keep_shadow {
                    self.parked = Some(sp);
                } else {
                    handler += sp.zap_all(&mut self.host) * c.unshadow;
                    self.retired.absorb(&sp.stats());
                }
                Paging::Nested
            }
            Paging::Nested => {
                let mut sp = match self.parked.take() {
                    Some(mut sp) => {
                        handler += sp.revalidate_all(&os.mem, &mut self.host) * c.resync_page;
                        sp
                    }
                    None => Box::new(ShadowPager::new(&self.shadow_cfg, self.geo)),
                };
                if let Some(pt) = os.current_pid().and_then(|p| os.tables(p)) {
                    let (built, resynced) = sp.switch_root(&os.mem, &mut self.host, pt.root)?;
                    handler += built as u64 * c.make_shadow + resynced as u64 * c.resync_page;
                }
                Paging::Shadow(sp)
            }
            p @ (Paging::Native | Paging::Direct(_)) => {
                self.paging = p;
                return Err(Error::config(
                    "hypervisor.switch.at",
                    format!("a VM in {} paging cannot switch modes", self.mode().name()),
                ));
            }
        };
        self.paging = next;
        self.acct.charge(mmu, ExitReason::ModeSwitch, handler);
        mmu.flush_vm();
        self.stats.mode_switches += 1;
        Ok(())
    }

    /// A PMU-overflow interrupt exits so that a sampling policy reads the counters.
    pub fn pmu_exit(&mut self, mmu: &mut Mmu) {
        self.acct
            .charge(mmu, ExitReason::PmuOverflow, self.costs.pmu_exit);
    }

    /// Paging-related exits so far ([`ExitReason::is_paging`]).
    #[inline]
    pub fn paging_exits(&self) -> u64 {
        self.acct.paging_exits
    }

    /// Cycles of the paging-related exits so far (round trips and handlers).
    pub fn paging_exit_cycles(&self) -> u64 {
        self.acct.paging_exit_cycles
    }

    /// Instructions retired in each mode (index [`mode_index`]) when `instructions` have
    /// retired in all, the current mode's open period included.
    pub fn instructions_in_mode(&self, instructions: u64) -> [u64; 3] {
        let mut in_mode = self.stats.instructions_in_mode;
        in_mode[mode_index(self.mode())] += instructions.saturating_sub(self.since);
        in_mode
    }

    /// Closes the books at the end of the run (`instructions` retired in all).
    pub fn finish(&mut self, instructions: u64) {
        let m = mode_index(self.mode());
        self.stats.instructions_in_mode[m] += instructions.saturating_sub(self.since);
        self.since = instructions;
    }

    /// Zeroes the counters at the end of a warm-up, `instructions` into the run; the state
    /// (tables, shadow cache, backing) stays.
    pub fn reset_stats(&mut self, instructions: u64) {
        self.acct.exits = ExitStats::default();
        self.acct.paging_exits = 0;
        self.acct.paging_exit_cycles = 0;
        self.stats = VmmStats::default();
        self.since = instructions;
        self.retired = ShadowStats::default();
        for sp in self.pagers_mut() {
            sp.reset_stats();
        }
    }

    fn pagers_mut(&mut self) -> impl Iterator<Item = &mut Box<ShadowPager>> {
        let active = match &mut self.paging {
            Paging::Shadow(sp) => Some(sp),
            Paging::Native | Paging::Nested | Paging::Direct(_) => None,
        };
        active.into_iter().chain(self.parked.as_mut())
    }

    /// Exits by reason.
    pub fn exits(&self) -> &ExitStats {
        &self.acct.exits
    }

    /// The cost profile.
    pub fn costs(&self) -> &CostProfile {
        &self.costs
    }

    /// The host side (nested tables and their counters).
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The shadow pagers' counters over the run, when the VM ran under shadow paging at all.
    pub fn shadow_stats(&self) -> Option<ShadowStats> {
        let active = match &self.paging {
            Paging::Shadow(sp) => Some(sp),
            Paging::Native | Paging::Nested | Paging::Direct(_) => None,
        };
        let mut pagers = active.into_iter().chain(self.parked.as_ref()).peekable();
        let ran =
            pagers.peek().is_some() || self.retired.pages_built > 0 || self.stats.mode_switches > 0;
        ran.then(|| {
            let mut total = self.retired;
            for sp in pagers {
                total.absorb(&sp.stats());
            }
            total
        })
    }
}
