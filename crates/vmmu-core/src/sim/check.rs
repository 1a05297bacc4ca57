//! The checked mode (DESIGN.md law 3): every translation the MMU produces, from a TLB hit or a
//! walk, must equal the composition of the guest mapping and the VM's guest-physical map at
//! that instant, in every mode.

use super::Simulator;
use crate::addr::Hpa;
use crate::error::{Error, Result};
use crate::event::MemRef;

impl Simulator {
    /// DESIGN.md law 3: the translation used equals the composition of the guest mapping and
    /// the guest-physical → host-physical mapping at this instant.
    pub(super) fn check(&mut self, pid: u32, r: &MemRef, hpa: Hpa, idx: u64) -> Result<()> {
        self.counters.checked += 1;
        let va = r.va;
        let Some((gpa, _, _)) = self.os.translate(pid, va) else {
            return Err(Error::Check {
                event: idx,
                detail: format!("{va} translated to {hpa} but the guest tables do not map it"),
            });
        };
        let expect = self.vmm.p2m(gpa);
        if expect != Some(hpa) {
            return Err(Error::Check {
                event: idx,
                detail: format!(
                    "{va}: the MMU gave {hpa}, the mappings give {gpa} -> {expect:?} (process \
                     {pid}, {} paging)",
                    self.vmm.describe().paging.name()
                ),
            });
        }
        Ok(())
    }
}
