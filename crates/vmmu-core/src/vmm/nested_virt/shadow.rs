//! Shadow on EPT: the L1 hypervisor shadow-pages its guest (KVM's software MMU running in L1,
//! `init_kvm_softmmu` with EPT disabled for L2), and L0 keeps only EPT01. L1's shadow tables,
//! in L1 memory, map L2 virtual to L1 physical; the hardware walks them in 2D over EPT01, as
//! it walks any guest's tables under nested paging (the shadow entries' A/D state is L1's).
//!
//! Every event L1's shadow pager intercepts is an L2 exit that L1 handles — the nested round
//! trip L2 → L0 → L1 → L0 → L2 before L1's handler, the exit multiplication of Turtles §3.2 —
//! counted by its cause (`hidden_fault`, `guest_fault`, `pt_write`, `cr3_write`, `invlpg`) and
//! charged the nested profile's `nested_round_trip` in place of `exit_round_trip`, plus the
//! handler the run's cost profile gives KVM (assumption: L1 is the same KVM as L0). L1 backs
//! its guest's memory on first use (`l1_fault` per page it faults in); each frame L1 allocates
//! — a shadow table, a table of its map of L2's memory, an L2 page — L0 backs as
//! `hypervisor.backing` says, lazily by a nested fault of L1 at its first touch.

use super::super::exits::ExitReason;
use super::super::ops::{Fault, Ipis, Paging, PagingOps, Resolution, Role};
use super::super::shared::Shared;
use super::l1::{l0_touches, unexplained, L1Setup};
use crate::addr::{Gpa, Gva, Hpa, L1pa};
use crate::config::{L1Costs, L1Kind};
use crate::error::{Error, Result};
use crate::guest::{GuestOs, OsEffects};
use crate::host::Host;
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::PageTable;
use crate::shadow::{FaultKind, ShadowPager, ShadowStats, WriteKind};
use crate::walk::{Tables, WalkFault};

/// Shadow on EPT: L1's side of its guest and its shadow pager.
pub(in crate::vmm) struct ShadowOnEpt {
    /// L1 memory and L1's map of L2's memory.
    l1: Host<L1pa>,
    /// L1's shadow pager, its tables in L1 memory.
    sp: Box<ShadowPager<L1pa>>,
    /// The costs beyond the cost profile.
    costs: L1Costs,
    /// The frames L1 allocated in the last operation.
    fresh: Vec<L1pa>,
}

impl ShadowOnEpt {
    /// L1 with no shadow table yet; its pager is built like L0's (`[shadow]`, the guest's
    /// format).
    pub(in crate::vmm) fn new(s: &L1Setup, hv: &mut Shared) -> Result<Self> {
        Ok(ShadowOnEpt {
            l1: s.guest_side(hv)?,
            sp: Box::new(ShadowPager::new(&hv.shadow.cfg, hv.shadow.geo)),
            costs: s.costs().clone(),
            fresh: Vec::new(),
        })
    }

    /// Charges an L2 exit of `reason` that L1 handles with `handler` cycles, then L0's side of
    /// the frames L1 allocated in it.
    fn l1_exit(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        reason: ExitReason,
        handler: u64,
    ) -> Result<()> {
        hv.acct
            .charge_trip(mmu, reason, self.costs.nested_round_trip, handler);
        self.l1.take_fresh(&mut self.fresh);
        l0_touches(hv, mmu, &self.fresh)
    }
}

/// The error of an operation on a process that is gone.
fn gone(what: &str, pid: u32) -> Error {
    Error::Check {
        event: 0,
        detail: format!("{what} of process {pid}, which is gone"),
    }
}

impl PagingOps for ShadowOnEpt {
    fn role(&self) -> Role {
        Role {
            paging: Paging::NestedVirt(L1Kind::Shadow),
            nested_tables: true,
            virt: None,
            ipis: Ipis::Exits,
        }
    }

    #[inline(always)]
    fn tables<'a>(
        &'a self,
        hv: &'a Shared,
        _: &'a mut PhysMem<Gpa>,
        _: PageTable<Gva, Gpa>,
    ) -> Tables<'a> {
        Tables::L1Shadow {
            l1mem: &self.l1.hmem,
            pt: self.sp.tables(),
            hmem: &hv.host.hmem,
            ept01: hv.host.npt,
        }
    }

    /// A not-present or protection fault of L1's shadow tables is a hidden fault L1 fills
    /// (or reflects into L2); L0 backs every frame L1 allocates when L1 first touches it, so
    /// EPT01 never lacks one the walk reaches.
    fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        os: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution> {
        if let WalkFault::Nested { gpa } = f.cause {
            return Err(unexplained(
                gpa,
                "every frame L1 allocates is backed by EPT01 when L1 first touches it",
            ));
        }
        let gpt = os
            .tables(f.pid)
            .ok_or_else(|| gone(&format!("a fault at {}", f.va), f.pid))?;
        let kind = self.sp.hidden_fault(
            &mut os.mem,
            &gpt,
            &mut self.l1,
            f.va,
            f.access.write,
            f.access.fetch,
            true,
        )?;
        let c = &hv.costs;
        let (reason, handler, resolution) = match kind {
            FaultKind::Filled { built, backed } => (
                ExitReason::HiddenFault,
                c.hidden_fault + built as u64 * c.make_shadow + backed as u64 * self.costs.l1_fault,
                Resolution::Retry,
            ),
            FaultKind::Guest => (ExitReason::GuestFault, c.reflect_fault, Resolution::Guest),
        };
        self.l1_exit(hv, mmu, reason, handler)?;
        Ok(resolution)
    }

    /// Each L2 write to a table L1 shadows exits to L1 and is emulated, unless the table is out
    /// of sync or was just unshadowed; freed L2 tables lose their shadows.
    fn writes(&mut self, hv: &mut Shared, mmu: &mut Mmu, fx: &OsEffects) {
        for w in &fx.writes {
            match self.sp.guest_write(&mut self.l1, w) {
                WriteKind::Emulated { unshadowed } => {
                    let c = &hv.costs;
                    let h = c.emulate_write + if unshadowed { c.unshadow } else { 0 };
                    hv.acct
                        .charge_trip(mmu, ExitReason::PtWrite, self.costs.nested_round_trip, h);
                }
                WriteKind::Unshadowed | WriteKind::OutOfSync => {}
            }
        }
        for &t in &fx.freed_tables {
            self.sp.table_freed(&mut self.l1, t);
        }
    }

    /// An INVLPG exits to L1, which resyncs the page's out-of-sync shadow entries.
    fn invlpg(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32, va: Gva) {
        if let Some(gpt) = os.tables(pid) {
            let resynced = self.sp.invlpg(&os.mem, &gpt, &mut self.l1, va);
            let h = hv.costs.invlpg + resynced as u64 * hv.costs.resync_page;
            hv.acct
                .charge_trip(mmu, ExitReason::Invlpg, self.costs.nested_round_trip, h);
        }
    }

    /// A full flush is a CR3 reload: it exits to L1, which resyncs out-of-sync pages.
    fn flush(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32) {
        if os.process(pid).is_some() {
            let resynced = self.sp.resync_all(&os.mem, &mut self.l1);
            let h = hv.costs.cr3_write + resynced as u64 * hv.costs.resync_page;
            hv.acct
                .charge_trip(mmu, ExitReason::Cr3Write, self.costs.nested_round_trip, h);
        }
    }

    /// A CR3 write exits to L1, whose pager switches to the process's shadow root (cached, or
    /// built).
    fn cr3_write(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32) -> Result<()> {
        let root = os.tables(pid).ok_or_else(|| gone("CR3 write", pid))?;
        let (built, resynced) = self.sp.switch_root(&os.mem, &mut self.l1, root.root)?;
        let c = &hv.costs;
        let h = c.cr3_write + built as u64 * c.make_shadow + resynced as u64 * c.resync_page;
        self.l1_exit(hv, mmu, ExitReason::Cr3Write, h)
    }

    fn unlinked(&mut self) -> bool {
        self.sp.take_unlinked()
    }

    fn pager_stats(&self) -> Option<ShadowStats> {
        Some(self.sp.stats())
    }

    fn reset_stats(&mut self) {
        self.sp.reset_stats();
    }

    fn back(&mut self, _: &mut Shared, _: &OsEffects) -> Result<()> {
        Ok(())
    }

    /// L2 physical → L1 physical (L1's map) → host physical (EPT01).
    fn p2m(&self, hv: &Shared, gpa: Gpa) -> Option<Hpa> {
        let (a, _) = self.l1.translate(gpa)?;
        hv.host.translate(a.as_l0_gpa()).map(|(h, _)| h)
    }
}
