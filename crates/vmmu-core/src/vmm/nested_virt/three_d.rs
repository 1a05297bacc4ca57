//! A 3D hardware walk (no x86 part implements one; the bound the software schemes of nested
//! virtualization are measured against): the processor walks L2's tables, translating each
//! L2-physical address through EPT12, each of whose table addresses and outputs it translates
//! through EPT01 — (n+1)³ − 1 references at n levels in every stage, 124 at four
//! (`crate::walk::three_d`).
//!
//! Nothing is shadowed, so nothing is write-protected: L1 writes EPT12 freely. An EPT
//! violation of L2 is L1's and is reflected to it through L0 (assumption: the hardware has no
//! path to deliver it to L1 directly, so it costs the nested round trip and L1's handler,
//! `l1_exit`); L1's first touches of frames L0 has not backed are nested faults of L1
//! (`nested_fault`, lazy backing).

use super::super::ops::{Fault, Ipis, Paging, PagingOps, Resolution, Role};
use super::super::shared::Shared;
use super::l1::{l1_ops, p2m, reflect, unexplained, L1Setup, L1};
use crate::addr::{Gpa, Gva, Hpa};
use crate::config::L1Kind;
use crate::error::Result;
use crate::guest::{GuestOs, OsEffects};
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::PageTable;
use crate::walk::{Tables, WalkFault};

/// The 3D walk: L1 and its EPT12, which the hardware walks.
pub(in crate::vmm) struct ThreeD {
    l1: L1,
}

impl ThreeD {
    /// L1 with empty EPT12.
    pub(in crate::vmm) fn new(s: &L1Setup, hv: &mut Shared) -> Result<Self> {
        Ok(ThreeD {
            l1: L1::new(s, hv)?,
        })
    }
}

impl PagingOps for ThreeD {
    fn role(&self) -> Role {
        Role {
            paging: Paging::NestedVirt(L1Kind::ThreeD),
            nested_tables: true,
            virt: None,
            ipis: Ipis::L1 {
                round_trip: self.l1.costs.nested_round_trip,
                vmx: true,
            },
        }
    }

    #[inline(always)]
    fn tables<'a>(
        &'a self,
        hv: &'a Shared,
        mem: &'a mut PhysMem<Gpa>,
        pt: PageTable<Gva, Gpa>,
    ) -> Tables<'a> {
        Tables::ThreeD {
            mem,
            pt,
            l1mem: &self.l1.mem,
            ept12: self.l1.ept12,
            hmem: &hv.host.hmem,
            ept01: hv.host.npt,
        }
    }

    /// An EPT violation: EPT12 lacks the page, and L1 maps it; every frame L1 allocates L0
    /// backs, so EPT01 never lacks one EPT12 reaches.
    fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        _: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution> {
        match f.cause {
            WalkFault::Nested { gpa } => {
                if self.l1.translate(gpa).is_some() {
                    return Err(unexplained(
                        gpa,
                        "EPT12 maps it, and every frame of L1 is backed by EPT01",
                    ));
                }
                reflect(&mut self.l1, hv, mmu, gpa)?;
                Ok(Resolution::Retry)
            }
            WalkFault::NotPresent { .. } | WalkFault::Protection => Ok(Resolution::Guest),
        }
    }

    l1_ops!();
}
