//! Native paging: no hypervisor. The hardware walks the guest's tables and their output is
//! machine memory; nothing is intercepted, and every fault is the guest's.

use super::ops::{no_nested, Fault, Ipis, Paging, PagingOps, Resolution, Role};
use super::shared::Shared;
use crate::error::Result;
use crate::guest::GuestOs;
use crate::mmu::Mmu;
use crate::walk::WalkFault;

/// No hypervisor below the guest.
pub(super) struct Native;

impl PagingOps for Native {
    fn role(&self) -> Role {
        Role {
            paging: Paging::Native,
            nested_tables: false,
            virt: None,
            ipis: Ipis::Native,
        }
    }

    fn fault(
        &mut self,
        _: &mut Shared,
        _: &mut Mmu,
        _: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution> {
        match f.cause {
            WalkFault::Nested { gpa } => Err(no_nested(gpa, f.va)),
            WalkFault::NotPresent { .. } | WalkFault::Protection => Ok(Resolution::Guest),
        }
    }
}
