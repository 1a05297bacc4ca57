//! Shadow paging by trap-and-emulate (KVM's software MMU, `init_kvm_softmmu`): the hardware
//! walks the shadow pager's tables ([`crate::shadow`]); hidden faults fill them, guest
//! page-table writes to write-protected pages are emulated (or the page goes out of sync), and
//! CR3 writes, INVLPGs and full flushes exit so the pager can switch roots and resync.
//!
//! The shadow cache's life across mode switches is [`ShadowCache`]: dropped at a switch to
//! nested paging (its counters retired), or kept — parked — and revalidated in full on return
//! (`hypervisor.switch.keep_shadow`).

use super::exits::ExitReason;
use super::ops::{no_nested, Fault, Ipis, Paging, PagingOps, Resolution, Resume, Role, VcpuRoot};
use super::shared::Shared;
use crate::addr::{Gpa, Gva};
use crate::config::VirtMode;
use crate::error::{Error, Result};
use crate::guest::{GuestOs, OsEffects};
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::{PageTable, TableWrite};
use crate::shadow::{FaultKind, ShadowPager, ShadowStats, WriteKind};
use crate::walk::Tables;
use crate::walk::WalkFault;

/// Shadow paging: the running shadow pager.
pub(super) struct Shadow {
    sp: Box<ShadowPager>,
}

impl Shadow {
    /// An empty shadow cache.
    pub(super) fn new(hv: &Shared) -> Self {
        Shadow {
            sp: Box::new(ShadowPager::new(&hv.shadow.cfg, hv.shadow.geo)),
        }
    }
}

impl Shadow {
    /// One guest page-table write as the pager takes it, and the handler cycles of its exit
    /// when it exits (an emulated write, and the unshadowing write-flood detection adds).
    pub(super) fn write(
        &mut self,
        hv: &mut Shared,
        w: &TableWrite<Gpa>,
    ) -> (WriteKind, Option<u64>) {
        let c = &hv.costs;
        let kind = self.sp.guest_write(&mut hv.host, w);
        let h = match kind {
            WriteKind::Emulated { unshadowed } => {
                Some(c.emulate_write + if unshadowed { c.unshadow } else { 0 })
            }
            WriteKind::Unshadowed | WriteKind::OutOfSync => None,
        };
        (kind, h)
    }

    /// The running shadow pager.
    pub(super) fn pager(&self) -> &ShadowPager {
        &self.sp
    }

    /// The running shadow pager, to change.
    pub(super) fn pager_mut(&mut self) -> &mut ShadowPager {
        &mut self.sp
    }
}

impl PagingOps for Shadow {
    fn role(&self) -> Role {
        Role {
            paging: Paging::Shadow,
            nested_tables: true,
            virt: Some(VirtMode::Shadow),
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
        Tables::Shadow {
            hmem: &hv.host.hmem,
            pt: self.sp.tables(),
        }
    }

    /// A not-present or protection fault of the shadow tables is a hidden fault: filled from
    /// the guest's tables, or, where those refuse the access too, reflected into the guest.
    fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        os: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution> {
        let (pid, va, access) = (f.pid, f.va, f.access);
        if let WalkFault::Nested { gpa } = f.cause {
            return Err(no_nested(gpa, va));
        }
        let gpt = os.tables(pid).ok_or_else(|| Error::Check {
            event: 0,
            detail: format!("a fault at {va} of process {pid}, which is gone"),
        })?;
        let kind = self.sp.hidden_fault(
            &mut os.mem,
            &gpt,
            &mut hv.host,
            va,
            access.write,
            access.fetch,
            hv.lazy,
        )?;
        let c = &hv.costs;
        Ok(match kind {
            FaultKind::Filled { built, backed } => {
                let h = c.hidden_fault
                    + c.shadow_work(built as u64, 0)
                    + backed as u64 * c.nested_fault;
                hv.acct.charge(mmu, ExitReason::HiddenFault, h);
                Resolution::Retry
            }
            FaultKind::Guest => {
                hv.acct.charge(mmu, ExitReason::GuestFault, c.reflect_fault);
                Resolution::Guest
            }
        })
    }

    /// Each guest page-table write to a shadowed page exits and is emulated, unless the page
    /// is out of sync or was just unshadowed; freed guest tables lose their shadows.
    fn writes(&mut self, hv: &mut Shared, mmu: &mut Mmu, fx: &OsEffects) {
        for w in &fx.writes {
            if let (_, Some(h)) = self.write(hv, w) {
                hv.acct.charge(mmu, ExitReason::PtWrite, h);
            }
        }
        for &t in &fx.freed_tables {
            self.sp.table_freed(&mut hv.host, t);
        }
    }

    /// An INVLPG exits and resyncs the page's out-of-sync shadow entries.
    fn invlpg(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32, va: Gva) {
        if let Some(gpt) = os.tables(pid) {
            let resynced = self.sp.invlpg(&os.mem, &gpt, &mut hv.host, va);
            let h = hv.costs.invlpg + hv.costs.shadow_work(0, resynced as u64);
            hv.acct.charge(mmu, ExitReason::Invlpg, h);
        }
    }

    /// A full flush is a CR3 reload: it exits, and out-of-sync pages are resynced, so no stale
    /// shadow entry survives it.
    fn flush(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32) {
        if os.process(pid).is_some() {
            let resynced = self.sp.resync_all(&os.mem, &mut hv.host);
            let h = hv.costs.cr3_write + hv.costs.shadow_work(0, resynced as u64);
            hv.acct.charge(mmu, ExitReason::Cr3Write, h);
        }
    }

    /// A CR3 write exits; the pager switches to the process's shadow root (cached, or built).
    fn cr3_write(&mut self, hv: &mut Shared, mmu: &mut Mmu, os: &GuestOs, pid: u32) -> Result<()> {
        let root = os.tables(pid).ok_or_else(|| Error::Check {
            event: 0,
            detail: format!("CR3 write to process {pid}, which is gone"),
        })?;
        let (built, resynced) = self.sp.switch_root(&os.mem, &mut hv.host, root.root)?;
        let c = &hv.costs;
        let h = c.cr3_write + c.shadow_work(built as u64, resynced as u64);
        hv.acct.charge(mmu, ExitReason::Cr3Write, h);
        Ok(())
    }

    fn unlinked(&mut self) -> bool {
        self.sp.take_unlinked()
    }

    /// From nested paging: the parked cache revalidated in full, or an empty one, and the
    /// current process's root built; the rest fills through hidden faults.
    fn switch_in(&mut self, hv: &mut Shared, os: &GuestOs) -> Result<u64> {
        let mut handler = 0;
        if let Some(mut sp) = hv.shadow.parked.take() {
            handler += hv
                .costs
                .shadow_work(0, sp.revalidate_all(&os.mem, &mut hv.host));
            self.sp = sp;
        }
        if let Some(pt) = os.current_pid().and_then(|p| os.tables(p)) {
            let (built, resynced) = self.sp.switch_root(&os.mem, &mut hv.host, pt.root)?;
            handler += hv.costs.shadow_work(built as u64, resynced as u64);
        }
        Ok(handler)
    }

    /// To nested paging: the cache is parked, or dropped (each shadow page unshadowed) with
    /// its counters retired.
    fn switch_out(mut self, hv: &mut Shared) -> u64 {
        if hv.shadow.keep {
            hv.shadow.parked = Some(self.sp);
            return 0;
        }
        let handler = self.sp.zap_all(&mut hv.host) * hv.costs.unshadow;
        hv.shadow.retired.absorb(&self.sp.stats());
        handler
    }

    fn resume(&mut self, root: Option<VcpuRoot>) -> Resume {
        if self.sp.resume(root.map(VcpuRoot::at)) {
            Resume::Kept
        } else {
            Resume::Reload
        }
    }

    fn current_root(&self) -> Option<VcpuRoot> {
        self.sp.current().map(VcpuRoot::of)
    }

    fn pager_stats(&self) -> Option<ShadowStats> {
        Some(self.sp.stats())
    }

    fn reset_stats(&mut self) {
        self.sp.reset_stats();
    }
}
