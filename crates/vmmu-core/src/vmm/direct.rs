//! Direct paging (Xen PV style; seed 003): the guest's tables hold machine frames, validated by
//! the hypervisor, and the hardware walks them as native tables. The guest's MMU operations
//! reach the hypervisor by hypercalls — page-table updates batched per operation
//! (`mmu_update`), CR3 writes, INVLPGs — or, pre-virtualized, through calls into an in-place VMM
//! inside the guest that makes the hypercalls; a page fault traps to the hypervisor and is
//! bounced to the guest.

use super::exits::ExitReason;
use super::ops::{no_nested, DirectTechnique, Fault, Ipis, Paging, PagingOps, Resolution, Role};
use super::shared::Shared;
use crate::error::Result;
use crate::guest::{GuestOs, OsEffects};
use crate::mmu::Mmu;
use crate::walk::WalkFault;

/// Direct paging with its technique.
pub(super) struct Direct {
    technique: DirectTechnique,
}

impl Direct {
    /// Direct paging by `technique`.
    pub(super) fn new(technique: DirectTechnique) -> Self {
        Direct { technique }
    }
}

impl PagingOps for Direct {
    fn role(&self) -> Role {
        Role {
            paging: Paging::Direct(self.technique),
            nested_tables: false,
            virt: None,
            ipis: Ipis::Hypercall,
        }
    }

    /// A page fault traps to the hypervisor, which bounces it to the guest.
    fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        _: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution> {
        match f.cause {
            WalkFault::Nested { gpa } => Err(no_nested(gpa, f.va)),
            WalkFault::NotPresent { .. } | WalkFault::Protection => {
                hv.acct
                    .charge(mmu, ExitReason::FaultBounce, hv.costs.pv_fault_bounce);
                Ok(Resolution::Guest)
            }
        }
    }

    /// One hypercall carries the action's page-table updates and INVLPGs; pre-virtualized,
    /// each is first a call into the in-place VMM.
    fn writes(&mut self, hv: &mut Shared, mmu: &mut Mmu, fx: &OsEffects) {
        let (c, acct) = (&hv.costs, &mut hv.acct);
        let n = fx.writes.len() as u64;
        let invl = fx.invalidate.len() as u64;
        let per = match self.technique {
            DirectTechnique::Previrt => {
                for _ in 0..(n + invl) {
                    acct.charge(mmu, ExitReason::InPlaceCall, c.previrt_call);
                }
                c.previrt_update
            }
            DirectTechnique::Pv => c.pv_update,
        };
        if n + invl > 0 {
            acct.charge(mmu, ExitReason::Hypercall, c.hypercall + n * per);
        }
    }

    /// A CR3 write is a hypercall (pre-virtualized, behind a call into the in-place VMM).
    fn cr3_write(&mut self, hv: &mut Shared, mmu: &mut Mmu, _: &GuestOs, _: u32) -> Result<()> {
        let (c, acct) = (&hv.costs, &mut hv.acct);
        match self.technique {
            DirectTechnique::Previrt => {
                acct.charge(mmu, ExitReason::InPlaceCall, c.previrt_call);
                acct.charge(mmu, ExitReason::Hypercall, c.hypercall);
            }
            DirectTechnique::Pv => acct.charge(mmu, ExitReason::Hypercall, c.hypercall),
        }
        Ok(())
    }
}
