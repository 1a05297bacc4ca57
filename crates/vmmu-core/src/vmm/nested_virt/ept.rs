//! EPT on EPT (KVM nVMX and nSVM; Turtles' multi-dimensional paging, Ben-Yehuda et al., OSDI
//! 2010 §3.3): L1 keeps EPT12 for its guest; L0 composes it with EPT01 into a shadow table,
//! EPT02 (L2 physical → host physical), which the hardware walks under L2's tables in an
//! ordinary 2D walk.
//!
//! EPT02 is built lazily, one 4 KiB entry per EPT violation of L2 (KVM's shadow EPT MMU,
//! `kvm_init_shadow_ept_mmu`, on `FNAME(page_fault)` with the EPT format), and kept coherent
//! with EPT12 by write protection: every EPT12 table L0 has read to build an EPT02 entry is
//! write-protected, so each later write of L1 to it exits to L0 and is emulated. An EPT
//! violation of L2 is therefore one of two things:
//! - EPT12 maps the page: L0 alone builds the EPT02 entry (`ept02_fill`: an exit and a
//!   shadow fill);
//! - EPT12 does not: the violation is L1's, and costs the exit multiplication Turtles and PVM
//!   measure — L0 reflects it into L1 (an emulated VM exit), L1's handler runs, L1's
//!   VMRESUME exits to L0, which emulates the entry into L2 (`l1_exit`, the nested round
//!   trip and L1's handler), and inside the handler each write to a write-protected EPT12
//!   table exits (`ept12_write`) and each first touch of a frame L0 has not backed is a
//!   nested fault (`nested_fault`, lazy backing). L2 then retries, and the EPT02 fill
//!   follows.
//!
//! EPT12 only grows (L1 never takes memory back from its guest here), so no EPT02 entry is
//! ever stale and none is zapped.

use super::super::exits::ExitReason;
use super::super::ops::{Fault, Ipis, Paging, PagingOps, Resolution, Role};
use super::super::shared::Shared;
use super::l1::{l1_ops, p2m, reflect, unexplained, L1Setup, L1};
use crate::addr::{Gpa, Gva, Hpa, L1pa, PageSize};
use crate::config::L1Kind;
use crate::error::Result;
use crate::guest::{GuestOs, OsEffects};
use crate::mem::PhysMem;
use crate::mmu::Mmu;
use crate::paging::PageTable;
use crate::walk::{Tables, WalkFault};
use std::collections::HashSet;

/// EPT on EPT: L1 and L0's shadow of its EPT12.
pub(in crate::vmm) struct EptOnEpt {
    l1: L1,
    /// EPT02, in host memory.
    ept02: PageTable<Gpa, Hpa>,
    /// The EPT12 tables L0 write-protects (those it has built EPT02 entries from).
    protected: HashSet<L1pa>,
    path: Vec<L1pa>,
}

impl EptOnEpt {
    /// L1 with empty EPT12, and an empty EPT02 whose root L0 builds at L2's first entry
    /// (write-protecting EPT12's root).
    pub(in crate::vmm) fn new(s: &L1Setup, hv: &mut Shared) -> Result<Self> {
        let l1 = L1::new(s, hv)?;
        let root = hv.host.alloc_table_frame()?;
        let ept02 = PageTable::at(hv.host.npt.geo, root);
        let protected = HashSet::from([l1.ept12.root]);
        Ok(EptOnEpt {
            l1,
            ept02,
            protected,
            path: Vec::new(),
        })
    }

    /// L0 builds the EPT02 entry of `gpa`'s 4 KiB page from EPT12 (which maps it at `a`) and
    /// EPT01, write-protecting the EPT12 tables it read.
    fn fill_ept02(&mut self, hv: &mut Shared, mmu: &mut Mmu, gpa: Gpa, a: L1pa) -> Result<()> {
        let Some((h, _)) = hv.host.translate(a.as_l0_gpa()) else {
            return Err(unexplained(
                gpa,
                "EPT12 maps it to memory EPT01 does not map",
            ));
        };
        self.l1.path(gpa, &mut self.path);
        self.protected.extend(self.path.iter().copied());
        let page = PageSize::Size4K;
        let built = hv
            .host
            .map_table(&self.ept02, gpa.page_base(page), h.page_base(page), page)?;
        let c = &hv.costs;
        let handler = c.hidden_fault + c.shadow_work(built, 0);
        hv.acct.charge(mmu, ExitReason::Ept02Fill, handler);
        Ok(())
    }

    /// L1's EPT violation at `gpa`, reflected into L1 ([`reflect`]), whose writes to
    /// write-protected EPT12 tables exit to L0.
    fn l1_violation(&mut self, hv: &mut Shared, mmu: &mut Mmu, gpa: Gpa) -> Result<()> {
        let fill = reflect(&mut self.l1, hv, mmu, gpa)?;
        let trapped = fill
            .writes
            .iter()
            .filter(|w| self.protected.contains(&w.addr.page_base(PageSize::Size4K)))
            .count();
        for _ in 0..trapped {
            hv.acct
                .charge(mmu, ExitReason::Ept12Write, hv.costs.emulate_write);
        }
        Ok(())
    }
}

impl PagingOps for EptOnEpt {
    fn role(&self) -> Role {
        Role {
            paging: Paging::NestedVirt(L1Kind::Ept),
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
        Tables::Nested {
            mem,
            pt,
            hmem: &hv.host.hmem,
            npt: self.ept02,
        }
    }

    fn fault(
        &mut self,
        hv: &mut Shared,
        mmu: &mut Mmu,
        _: &mut GuestOs,
        f: Fault,
    ) -> Result<Resolution> {
        match f.cause {
            WalkFault::Nested { gpa } => {
                match self.l1.translate(gpa) {
                    Some(a) => self.fill_ept02(hv, mmu, gpa, a)?,
                    None => self.l1_violation(hv, mmu, gpa)?,
                }
                Ok(Resolution::Retry)
            }
            WalkFault::NotPresent { .. } | WalkFault::Protection => Ok(Resolution::Guest),
        }
    }

    l1_ops!();
}
