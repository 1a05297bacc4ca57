//! Nested paging (AMD NPT, Intel EPT; seed 002): the hardware's 2D walk over the guest's
//! tables and the nested tables, which map the VM's guest-physical memory. The guest's
//! page-table writes, CR3 writes and INVLPGs are its own; only a nested fault (EPT violation)
//! exits, where guest memory is backed lazily (KVM's two-dimensional paging,
//! `init_kvm_tdp_mmu`).

use super::exits::ExitReason;
use super::ops::{Fault, Ipis, Paging, PagingOps, Resolution, Role};
use super::shared::Shared;
use crate::addr::{Gpa, Gva, PageSize};
use crate::config::VirtMode;
use crate::error::{Error, Result};
use crate::guest::GuestOs;
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::PageTable;
use crate::walk::Tables;
use crate::walk::WalkFault;

/// Nested paging: no state beyond the nested tables, which every mode shares ([`Shared`]).
pub(super) struct Nested;

impl PagingOps for Nested {
    fn role(&self) -> Role {
        Role {
            paging: Paging::Nested,
            nested_tables: true,
            virt: Some(VirtMode::Nested),
            ipis: Ipis::Exits,
        }
    }

    #[inline(always)]
    fn tables<'a>(
        &'a self,
        hv: &'a Shared,
        mem: &'a mut PhysMem<Gpa>,
        pt: PageTable<Gva, Gpa>,
    ) -> Tables<'a> {
        Tables::Nested {
            mem,
            pt,
            hmem: &hv.host.hmem,
            npt: hv.host.npt,
        }
    }

    /// A nested fault backs the 4 KiB page where memory is backed lazily; with pre-backed
    /// memory it is a broken invariant. Any other fault is the guest's.
    fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        _: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution> {
        match f.cause {
            WalkFault::Nested { gpa } => nested_fault(hv, mmu, gpa, f.va),
            WalkFault::NotPresent { .. } | WalkFault::Protection => Ok(Resolution::Guest),
        }
    }
}

/// A nested fault at `gpa` on the way to `va`: the 4 KiB page is backed where memory is
/// backed lazily (an exit, `nested_fault`); with pre-backed memory it is a broken invariant.
pub(super) fn nested_fault(
    hv: &mut Shared,
    mmu: &mut Mmu,
    gpa: Gpa,
    va: Gva,
) -> Result<Resolution> {
    if !hv.lazy {
        return Err(Error::Check {
            event: 0,
            detail: format!(
                "nested fault at {gpa} for {va}: guest memory is pre-backed, so every \
                 allocated guest frame must have a nested mapping"
            ),
        });
    }
    hv.host
        .back(gpa.page_base(PageSize::Size4K), PageSize::Size4K)?;
    hv.acct
        .charge(mmu, ExitReason::NestedFault, hv.costs.nested_fault);
    Ok(Resolution::Retry)
}
