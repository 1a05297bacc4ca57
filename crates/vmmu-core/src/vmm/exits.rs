//! Exits and other hypervisor operations, counted by reason with their cycles (the `exits`
//! table of a result).
//!
//! A VM exit costs the profile's `exit_round_trip` (exit plus the entry that resumes the guest)
//! plus its handler; a hypercall or a PV fault bounce is a world switch too. Calls into a
//! pre-virtualization in-place VMM are listed here as well, but they are function calls inside
//! the guest, not world switches ([`ExitReason::is_world_switch`]). Without VPIDs every world
//! switch flushes the TLB, and the simulation pays for the refills — that indirect cost is
//! simulated, never folded into these constants. [`Account`] is the one place every mode
//! charges through.

use super::pager_lock::PagerLock;
use super::Ipis;
use crate::mmu::Mmu;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why the hypervisor ran.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ExitReason {
    /// A shadow-page-table miss the hypervisor filled (a hidden page fault).
    HiddenFault,
    /// A page fault that was the guest's own, reflected into it.
    GuestFault,
    /// A guest write to a write-protected page-table page, emulated.
    PtWrite,
    /// A guest CR3 write (or a full TLB flush by CR3 reload), intercepted.
    Cr3Write,
    /// A guest INVLPG, intercepted.
    Invlpg,
    /// A nested page fault (EPT violation) that backed guest memory.
    NestedFault,
    /// A para-virtual hypercall (batched page-table updates, CR3 write, INVLPG, flushes).
    Hypercall,
    /// A guest page fault that trapped to the hypervisor and was bounced to the guest (PV).
    FaultBounce,
    /// A call into the in-place VMM (pre-virtualization): not a world switch.
    InPlaceCall,
    /// An exit taken to change the paging mode (seed 001 §5).
    ModeSwitch,
    /// A guest IPI (its interrupt-command-register write), intercepted.
    IpiSend,
    /// An interrupt delivered to a running vCPU: forced out by a host IPI, injected at entry.
    IpiDeliver,
    /// The guest's end-of-interrupt write, intercepted.
    Eoi,
    /// A vCPU forced out so its TLB is flushed after the hypervisor removed shadow tables
    /// another vCPU may cache translations or paging-structure entries from.
    RemoteFlush,
    /// A PMU-overflow interrupt that exits so a sampling policy can read the counters
    /// (seed 001 §4–§6: every `window_inst` instructions).
    PmuOverflow,
    /// Nested virtualization: an exit of the L2 guest that the L1 hypervisor handles — L2 to
    /// L0, reflected into L1, L1's handler, L1's VMRESUME to L0, the entry into L2 (Turtles
    /// §3.2's exit multiplication).
    L1Exit,
    /// Nested virtualization, EPT on EPT: L1's write to an EPT12 table L0 write-protects,
    /// emulated by L0.
    Ept12Write,
    /// Nested virtualization, EPT on EPT: an EPT violation of L2 that L0 resolves alone,
    /// building the shadow EPT02 entry from EPT12 and EPT01.
    Ept02Fill,
    /// Nested virtualization, PVM: the L2 kernel's return to its user side through L1's
    /// switcher (both run at user privilege, each on its own shadow tables), a world switch no
    /// hardware-virtualized guest takes.
    UserReturn,
    /// Agile paging: the hypervisor's periodic scan of the nested dirty bits of the guest
    /// tables in nested mode, which moves the unwritten ones back to shadow mode.
    AgileScan,
}

impl ExitReason {
    /// Every reason, in report order.
    pub const ALL: [ExitReason; 20] = [
        ExitReason::HiddenFault,
        ExitReason::GuestFault,
        ExitReason::PtWrite,
        ExitReason::Cr3Write,
        ExitReason::Invlpg,
        ExitReason::NestedFault,
        ExitReason::Hypercall,
        ExitReason::FaultBounce,
        ExitReason::InPlaceCall,
        ExitReason::ModeSwitch,
        ExitReason::IpiSend,
        ExitReason::IpiDeliver,
        ExitReason::Eoi,
        ExitReason::RemoteFlush,
        ExitReason::PmuOverflow,
        ExitReason::L1Exit,
        ExitReason::Ept12Write,
        ExitReason::Ept02Fill,
        ExitReason::UserReturn,
        ExitReason::AgileScan,
    ];

    /// The name used in results.
    pub const fn name(self) -> &'static str {
        match self {
            ExitReason::HiddenFault => "hidden_fault",
            ExitReason::GuestFault => "guest_fault",
            ExitReason::PtWrite => "pt_write",
            ExitReason::Cr3Write => "cr3_write",
            ExitReason::Invlpg => "invlpg",
            ExitReason::NestedFault => "nested_fault",
            ExitReason::Hypercall => "hypercall",
            ExitReason::FaultBounce => "fault_bounce",
            ExitReason::InPlaceCall => "inplace_vmm_call",
            ExitReason::ModeSwitch => "mode_switch",
            ExitReason::IpiSend => "ipi_send",
            ExitReason::IpiDeliver => "ipi_deliver",
            ExitReason::Eoi => "eoi",
            ExitReason::RemoteFlush => "remote_flush",
            ExitReason::PmuOverflow => "pmu_overflow",
            ExitReason::L1Exit => "l1_exit",
            ExitReason::Ept12Write => "ept12_write",
            ExitReason::Ept02Fill => "ept02_fill",
            ExitReason::UserReturn => "user_return",
            ExitReason::AgileScan => "agile_scan",
        }
    }

    /// Whether the exit is paging-related in seed 001's sense (the exits a shadow pager takes
    /// for the guest's paging: the count a policy watches under shadow paging).
    pub const fn is_paging(self) -> bool {
        match self {
            ExitReason::HiddenFault
            | ExitReason::GuestFault
            | ExitReason::PtWrite
            | ExitReason::Cr3Write
            | ExitReason::Invlpg
            | ExitReason::L1Exit
            | ExitReason::Ept12Write
            | ExitReason::Ept02Fill => true,
            ExitReason::NestedFault
            | ExitReason::Hypercall
            | ExitReason::FaultBounce
            | ExitReason::InPlaceCall
            | ExitReason::ModeSwitch
            | ExitReason::IpiSend
            | ExitReason::IpiDeliver
            | ExitReason::Eoi
            | ExitReason::RemoteFlush
            | ExitReason::PmuOverflow
            | ExitReason::UserReturn
            | ExitReason::AgileScan => false,
        }
    }

    /// Whether the handler runs under the VM's shadow-pager lock (KVM's `mmu_lock` in its
    /// page-fault, PTE-write, INVLPG and root-load paths; Xen's per-domain paging lock), which
    /// serializes it against the same handlers on other vCPUs. Under nested virtualization the
    /// lock is the software pager's that handles the exit: L1's shadow MMU (shadow on EPT,
    /// PVM), or L0's shadow EPT MMU building EPT02 and emulating writes to the EPT12 tables it
    /// shadows (`ept02_fill`, `ept12_write`). L1's own EPT-violation handler (`l1_exit`) is
    /// KVM's TDP MMU, which faults under the lock held for read and does not serialise.
    pub const fn takes_pager_lock(self) -> bool {
        matches!(
            self,
            ExitReason::HiddenFault
                | ExitReason::GuestFault
                | ExitReason::PtWrite
                | ExitReason::Cr3Write
                | ExitReason::Invlpg
                | ExitReason::Ept02Fill
                | ExitReason::Ept12Write
        )
    }

    /// Whether the operation switches from the guest to the hypervisor and back.
    pub const fn is_world_switch(self) -> bool {
        !matches!(self, ExitReason::InPlaceCall)
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// Counts and cycles per reason.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExitStats {
    count: [u64; ExitReason::ALL.len()],
    cycles: [u64; ExitReason::ALL.len()],
}

impl ExitStats {
    /// Records one operation of `reason` costing `cycles`.
    #[inline]
    pub fn record(&mut self, reason: ExitReason, cycles: u64) {
        self.count[reason.index()] += 1;
        self.cycles[reason.index()] += cycles;
    }

    /// Operations of `reason`.
    pub fn count(&self, reason: ExitReason) -> u64 {
        self.count[reason.index()]
    }

    /// Cycles and count of the operations that take the shadow-pager lock.
    #[inline]
    pub fn pager_locked(&self) -> (u64, u64) {
        ExitReason::ALL
            .iter()
            .filter(|r| r.takes_pager_lock())
            .fold((0, 0), |(c, n), &r| (c + self.cycles(r), n + self.count(r)))
    }

    /// World switches of every reason.
    pub fn world_switches(&self) -> u64 {
        ExitReason::ALL
            .iter()
            .filter(|r| r.is_world_switch())
            .map(|&r| self.count(r))
            .sum()
    }

    /// Cycles of `reason`.
    pub fn cycles(&self, reason: ExitReason) -> u64 {
        self.cycles[reason.index()]
    }

    /// Cycles of every reason.
    pub fn total_cycles(&self) -> u64 {
        self.cycles.iter().sum()
    }

    /// The reasons that occurred, in report order, with their counts and cycles.
    pub fn table(&self) -> BTreeMap<String, ExitCount> {
        ExitReason::ALL
            .iter()
            .filter(|r| self.count(**r) > 0)
            .map(|&r| {
                (
                    r.name().to_string(),
                    ExitCount {
                        count: self.count(r),
                        cycles: self.cycles(r),
                        world_switch: r.is_world_switch(),
                    },
                )
            })
            .collect()
    }
}

/// One row of the exits table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitCount {
    /// Operations of this reason.
    pub count: u64,
    /// Their cycles (round trips and handlers).
    pub cycles: u64,
    /// Whether they switch from the guest to the hypervisor and back.
    pub world_switch: bool,
}

/// The hypervisor's bill: exits by reason with their cycles, and the paging-related ones a
/// policy watches.
pub(super) struct Account {
    /// A VM exit and the entry that resumes the guest (the profile's `exit_round_trip`).
    round_trip: u64,
    /// TLB entries are tagged by VPID/ASID, so world switches keep them.
    tagged: bool,
    /// Exits by reason.
    pub(super) exits: ExitStats,
    /// Paging-related exits ([`ExitReason::is_paging`]) and their cycles: what a policy
    /// watches under shadow paging.
    pub(super) paging_exits: u64,
    pub(super) paging_exit_cycles: u64,
    /// The shadow pager's lock, which some of the handlers take.
    pub(super) lock: PagerLock,
}

impl Account {
    /// An empty bill, with exits of `round_trip` cycles; `tagged`: the VM's TLB entries carry
    /// a VPID.
    pub(super) fn new(round_trip: u64, tagged: bool) -> Self {
        Account {
            round_trip,
            tagged,
            exits: ExitStats::default(),
            paging_exits: 0,
            paging_exit_cycles: 0,
            lock: PagerLock::default(),
        }
    }

    /// Charges one hypervisor operation of `reason` with handler cost `handler`: the exit
    /// round trip where the operation is an exit, and, without VPIDs, a flush of the VM's
    /// TLBs (`mmu`'s) at every world switch.
    pub(super) fn charge(&mut self, mmu: &mut Mmu, reason: ExitReason, handler: u64) {
        let round_trip = match reason {
            ExitReason::Hypercall
            | ExitReason::FaultBounce
            | ExitReason::InPlaceCall
            | ExitReason::L1Exit
            | ExitReason::UserReturn => 0,
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
            | ExitReason::PmuOverflow
            | ExitReason::Ept12Write
            | ExitReason::Ept02Fill
            | ExitReason::AgileScan => self.round_trip,
        };
        self.charge_trip(mmu, reason, round_trip, handler, true);
    }

    /// Charges one operation of `reason` whose world switches cost `round_trip` in place of
    /// the profile's exit round trip: an exit of an L2 guest that its L1 hypervisor handles
    /// (the nested round trip L2 → L0 → L1 → L0 → L2, or PVM's switcher), counted by its
    /// cause. `vmx`: the switch is a VM exit, which flushes the TLBs without VPIDs.
    pub(super) fn charge_trip(
        &mut self,
        mmu: &mut Mmu,
        reason: ExitReason,
        round_trip: u64,
        handler: u64,
        vmx: bool,
    ) {
        self.exits.record(reason, round_trip + handler);
        self.lock
            .charged(reason.takes_pager_lock(), round_trip, handler);
        if reason.is_paging() {
            self.paging_exits += 1;
            self.paging_exit_cycles += round_trip + handler;
        }
        if vmx && reason.is_world_switch() && !self.tagged {
            mmu.flush_vm();
        }
    }

    /// Charges an interrupt's operation of `reason` (a delivery, an EOI, a forced flush) on
    /// `mmu`'s vCPU as the guest's interrupts travel ([`Ipis`]): under [`Ipis::L1`] an L2 exit
    /// its L1 hypervisor handles, otherwise one exit to the hypervisor.
    pub(super) fn charge_interrupt(
        &mut self,
        mmu: &mut Mmu,
        ipis: Ipis,
        reason: ExitReason,
        handler: u64,
    ) {
        match ipis {
            Ipis::L1 { round_trip, vmx } => self.charge_trip(mmu, reason, round_trip, handler, vmx),
            Ipis::Native | Ipis::Exits | Ipis::Hypercall => self.charge(mmu, reason, handler),
        }
    }

    /// Zeroes the counts (the end of a warm-up).
    pub(super) fn reset_stats(&mut self) {
        self.exits = ExitStats::default();
        self.paging_exits = 0;
        self.paging_exit_cycles = 0;
    }
}
