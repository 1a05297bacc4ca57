//! A shadow-paging L1 hypervisor, L0 keeping only EPT01: L1's shadow tables, in L1 memory, map
//! L2 virtual to L1 physical, and the hardware walks them in 2D over EPT01, as it walks any
//! guest's tables under nested paging (the shadow entries' A/D state is L1's). Two kinds:
//! - shadow on EPT (`shadow`): KVM's software MMU running in L1 (`init_kvm_softmmu` with EPT
//!   disabled for L2); every event L1's shadow pager intercepts is an L2 exit that L1 handles
//!   — the nested round trip L2 → L0 → L1 → L0 → L2 before L1's handler, the exit
//!   multiplication of Turtles §3.2 — charged the nested profile's `nested_round_trip`;
//! - PVM (`pvm`; Huang et al., SOSP 2023): L2 runs at user privilege in L1, and the same events
//!   reach L1 through its switcher, without L0 (`switcher_round_trip`). L2's kernel and user
//!   sides both run at user privilege, so L1 keeps two shadow tables per guest table: the
//!   kernel side's and the user side's, which maps no kernel page; each side's translations
//!   carry PCIDs of its own range, so the switches between them flush no TLB (assumption:
//!   PCIDs reserved per side, as the paper's design). The simulated accesses are the user
//!   side's; the kernel side is built at each CR3 write and kept coherent by the same
//!   write protection, and a fault L1 reflects into L2's kernel adds the kernel's return to
//!   user through the switcher (`user_return`).
//!
//! Each exit is counted by its cause (`hidden_fault`, `guest_fault`, `pt_write`, `cr3_write`,
//! `invlpg`) with the handler the run's cost profile gives KVM (assumption: L1's shadow pager
//! costs what L0's would). L1 backs its guest's memory on first use (`l1_fault` per page it
//! faults in); each frame L1 allocates — a shadow table, a table of its map of L2's memory,
//! an L2 page — L0 backs as `hypervisor.backing` says, lazily by a nested fault of L1 at its
//! first touch.

use super::super::exits::ExitReason;
use super::super::ops::{Fault, Ipis, Paging, PagingOps, Resolution, Resume, Role, VcpuRoot};
use super::super::shared::Shared;
use super::l1::{l0_touches, unexplained, L1Setup};
use crate::addr::{Gpa, Gva, Hpa, L1pa};
use crate::config::L1Kind;
use crate::error::{Error, Result};
use crate::guest::{GuestOs, OsEffects};
use crate::host::Host;
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::PageTable;
use crate::shadow::{FaultKind, ShadowPager, ShadowStats, WriteKind};
use crate::walk::{Tables, WalkFault};

/// A shadow-paging L1: its side of its guest and its shadow pagers.
pub(in crate::vmm) struct ShadowL1 {
    /// `shadow` or `pvm`.
    kind: L1Kind,
    /// L1 memory and L1's map of L2's memory.
    l1: Host<L1pa>,
    /// L1's shadow pager, its tables in L1 memory: the one the hardware walks (PVM's user
    /// side).
    sp: Box<ShadowPager<L1pa>>,
    /// PVM's kernel side.
    kernel: Option<Box<ShadowPager<L1pa>>>,
    /// A world switch L2 → L1 → L2.
    round_trip: u64,
    /// L1's cost of faulting in a page for its guest.
    l1_fault: u64,
    /// The frames L1 allocated in the last operation.
    fresh: Vec<L1pa>,
}

impl ShadowL1 {
    /// L1 of `kind` with no shadow table yet; its pagers are built like L0's (`[shadow]`, the
    /// guest's format).
    pub(in crate::vmm) fn new(kind: L1Kind, s: &L1Setup, hv: &mut Shared) -> Result<Self> {
        let pager = || Box::new(ShadowPager::new(&hv.shadow.cfg, hv.shadow.geo));
        let pvm = kind == L1Kind::Pvm;
        let c = s.costs();
        Ok(ShadowL1 {
            kind,
            sp: pager(),
            kernel: pvm.then(pager),
            round_trip: if pvm {
                c.switcher_round_trip
            } else {
                c.nested_round_trip
            },
            l1_fault: c.l1_fault,
            l1: s.guest_side(hv)?,
            fresh: Vec::new(),
        })
    }

    /// Charges an L2 exit of `reason` that L1 handles with `handler` cycles.
    fn charge(&self, hv: &mut Shared, mmu: &mut Mmu, reason: ExitReason, handler: u64) {
        hv.acct
            .charge_trip(mmu, reason, self.round_trip, handler, self.vmx());
    }

    /// L1 runs its guest under VMX (shadow on EPT), not through PVM's switcher.
    fn vmx(&self) -> bool {
        self.kind != L1Kind::Pvm
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
        self.charge(hv, mmu, reason, handler);
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

impl PagingOps for ShadowL1 {
    fn role(&self) -> Role {
        Role {
            paging: Paging::NestedVirt(self.kind),
            nested_tables: true,
            virt: None,
            ipis: Ipis::L1 {
                round_trip: self.round_trip,
                vmx: self.vmx(),
            },
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
                c.hidden_fault + c.shadow_work(built as u64, 0) + backed as u64 * self.l1_fault,
                Resolution::Retry,
            ),
            FaultKind::Guest => (ExitReason::GuestFault, c.reflect_fault, Resolution::Guest),
        };
        self.l1_exit(hv, mmu, reason, handler)?;
        if resolution == Resolution::Guest && self.kernel.is_some() {
            self.charge(hv, mmu, ExitReason::UserReturn, 0);
        }
        Ok(resolution)
    }

    /// Each L2 write to a table L1 shadows (on either side) exits to L1 and is emulated,
    /// unless the table is out of sync or was just unshadowed; freed L2 tables lose their
    /// shadows.
    fn writes(&mut self, hv: &mut Shared, mmu: &mut Mmu, fx: &OsEffects) {
        for w in &fx.writes {
            let (mut emulated, mut unshadowed) = (false, false);
            for sp in sides(&mut self.sp, &mut self.kernel) {
                if let WriteKind::Emulated { unshadowed: u } = sp.guest_write(&mut self.l1, w) {
                    emulated = true;
                    unshadowed |= u;
                }
            }
            if emulated {
                let c = &hv.costs;
                let h = c.emulate_write + if unshadowed { c.unshadow } else { 0 };
                self.charge(hv, mmu, ExitReason::PtWrite, h);
            }
        }
        for &t in &fx.freed_tables {
            for sp in sides(&mut self.sp, &mut self.kernel) {
                sp.table_freed(&mut self.l1, t);
            }
        }
    }

    /// An INVLPG exits to L1, which resyncs the page's out-of-sync shadow entries.
    fn invlpg(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32, va: Gva) {
        if let Some(gpt) = os.tables(pid) {
            let mut resynced = 0;
            for sp in sides(&mut self.sp, &mut self.kernel) {
                resynced += sp.invlpg(&os.mem, &gpt, &mut self.l1, va) as u64;
            }
            let h = hv.costs.invlpg + hv.costs.shadow_work(0, resynced);
            self.charge(hv, mmu, ExitReason::Invlpg, h);
        }
    }

    /// A full flush is a CR3 reload: it exits to L1, which resyncs out-of-sync pages.
    fn flush(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32) {
        if os.process(pid).is_some() {
            let mut resynced = 0;
            for sp in sides(&mut self.sp, &mut self.kernel) {
                resynced += sp.resync_all(&os.mem, &mut self.l1) as u64;
            }
            let h = hv.costs.cr3_write + hv.costs.shadow_work(0, resynced);
            self.charge(hv, mmu, ExitReason::Cr3Write, h);
        }
    }

    /// A CR3 write exits to L1, whose pagers switch to the process's shadow roots (cached, or
    /// built).
    fn cr3_write(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32) -> Result<()> {
        let root = os.tables(pid).ok_or_else(|| gone("CR3 write", pid))?;
        let (mut built, mut resynced) = (0, 0);
        for sp in sides(&mut self.sp, &mut self.kernel) {
            let (b, r) = sp.switch_root(&os.mem, &mut self.l1, root.root)?;
            built += b as u64;
            resynced += r as u64;
        }
        let c = &hv.costs;
        let h = c.cr3_write + c.shadow_work(built, resynced);
        self.l1_exit(hv, mmu, ExitReason::Cr3Write, h)
    }

    fn unlinked(&mut self) -> bool {
        // Both sides' flags are taken; only the walked side's tables are cached by hardware.
        let kernel = self.kernel.as_mut().is_some_and(|k| k.take_unlinked());
        self.sp.take_unlinked() || kernel
    }

    /// Each side's root for the vCPU's guest root is loaded again if L1's cache still holds
    /// it; otherwise both are rebuilt, as a CR3 write.
    fn resume(&mut self, root: Option<VcpuRoot>) -> Resume {
        let user = self.sp.resume(root.map(VcpuRoot::at));
        let kernel = self.kernel.as_mut().is_none_or(|k| {
            let cached = root.and_then(|r| k.cached_root(r.guest));
            k.resume(cached)
        });
        if user && kernel {
            Resume::Kept
        } else {
            Resume::Reload
        }
    }

    /// The walked side's root (PVM's kernel side follows the same guest root).
    fn current_root(&self) -> Option<VcpuRoot> {
        self.sp.current().map(VcpuRoot::of)
    }

    fn pager_stats(&self) -> Option<ShadowStats> {
        let mut s = self.sp.stats();
        if let Some(k) = &self.kernel {
            s.absorb(&k.stats());
        }
        Some(s)
    }

    fn reset_stats(&mut self) {
        self.sp.reset_stats();
        if let Some(k) = &mut self.kernel {
            k.reset_stats();
        }
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

/// Every pager a guest-table operation reaches: the walked side's, then PVM's kernel side.
fn sides<'a>(
    sp: &'a mut ShadowPager<L1pa>,
    kernel: &'a mut Option<Box<ShadowPager<L1pa>>>,
) -> impl Iterator<Item = &'a mut ShadowPager<L1pa>> {
    std::iter::once(sp).chain(kernel.as_deref_mut())
}
