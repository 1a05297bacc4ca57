//! A running simulation's counters copied as plain values at one moment (no map, no string,
//! no allocation): what the oracle keeps of each of its simulations at every window boundary.
//! A [`RunResult`](super::RunResult) is made of such a copy and the simulation's fixed parts
//! (configuration, structure names, [`super::Shape`]) only where it is read. The event loop's
//! own counters and the cycles by cause, which such a copy is timed by, are defined here too.

use super::vcpus::ShootdownCounts;
use crate::guest::OsStats;
use crate::host::HostStats;
use crate::hw::cache::MAX_LEVELS;
use crate::hw::HitMiss;
use crate::mmu::MmuStats;
use crate::shadow::ShadowStats;
use crate::timing::CoreStalls;
use crate::vmm::exits::{ExitReason, ExitStats};
use crate::vmm::PagerLockCounts;
use crate::vmm::{AgileStats, InMode};
use crate::walk::WalkStats;
use serde::{Deserialize, Serialize};

/// The part of a run a warm-up left out of every count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warmup {
    /// Events of the warm-up.
    pub events: u64,
    /// Memory references of the warm-up.
    pub refs: u64,
    /// Instructions of the warm-up.
    pub instructions: u64,
}

/// Cycles by cause (DESIGN.md "Timing"); they sum to the run's cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CyclesByCause {
    /// Instructions × base CPI.
    pub base: u64,
    /// L2-TLB hits, walks, A/D updates.
    pub translation: u64,
    /// Data references beyond an L1 hit.
    pub data: u64,
    /// The guest kernel's own work.
    pub guest_kernel: u64,
    /// Exits and hypervisor handlers (mode switches apart).
    pub hypervisor: u64,
    /// The exits that changed the paging mode, with their handlers.
    pub mode_switch: u64,
    /// Time vCPUs waited for other vCPUs to handle their TLB shootdowns (0 with one vCPU).
    #[serde(default)]
    pub shootdown_wait: u64,
    /// Time vCPUs waited for the shadow pager's lock (0 with one vCPU).
    #[serde(default)]
    pub pager_lock_wait: u64,
}

impl CyclesByCause {
    /// The cycles of a run whose counters are these, on a core of `base_cpi`; the waits of
    /// a multi-vCPU run (zero with one vCPU) given apart. `core` is the interval model's
    /// counters (its exposed translation and data cycles replace the MMU's latency sums), or
    /// `None` for the additive model.
    #[allow(clippy::too_many_arguments)]
    pub fn of(
        base_cpi: f64,
        counters: &Counters,
        mmu: &MmuStats,
        core: Option<&CoreStalls>,
        os: &OsStats,
        exits: &ExitStats,
        shootdown_wait: u64,
        pager_lock_wait: u64,
    ) -> CyclesByCause {
        let mode_switch = exits.cycles(ExitReason::ModeSwitch);
        CyclesByCause {
            base: (counters.instructions as f64 * base_cpi).round() as u64,
            translation: core.map_or(mmu.translation_cycles, CoreStalls::translation_cycles),
            data: core.map_or(mmu.data_cycles, CoreStalls::data_cycles),
            guest_kernel: os.kernel_cycles,
            hypervisor: exits.total_cycles() - mode_switch,
            mode_switch,
            shootdown_wait,
            pager_lock_wait,
        }
    }

    /// Their sum: the cycles of the run.
    pub fn total(&self) -> u64 {
        self.base
            + self.translation
            + self.data
            + self.guest_kernel
            + self.hypervisor
            + self.mode_switch
            + self.shootdown_wait
            + self.pager_lock_wait
    }
}

/// Counters kept by the event loop itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    /// Events consumed (after the warm-up).
    pub events: u64,
    /// Instructions retired.
    pub instructions: u64,
    /// Data references (load, store, modify: one each).
    pub memory_refs: u64,
    /// Instruction fetches.
    pub fetches: u64,
    /// Translations verified by the checked mode.
    pub checked: u64,
}

/// Every counter a [`RunResult`](super::RunResult) reports of one vCPU's simulation, at one
/// moment. The per-vCPU counters of a multi-vCPU run, the sizing probes and an adaptive
/// run's timeline are not copied: a result built of a copy reads them from the simulation
/// (the oracle's simulations have one vCPU, no probes and no policy).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counts {
    /// The event loop's counters.
    pub counters: Counters,
    /// What the warm-up left out.
    pub warmed: Warmup,
    /// The walkers' counters.
    pub walk: WalkStats,
    /// The MMU's own counters.
    pub mmu: MmuStats,
    /// The interval core model's counters (`None` under the additive model).
    pub core: Option<CoreStalls>,
    /// The TLBs', in the order of [`crate::hw::tlb::TlbHierarchy::counts`].
    pub tlb: [HitMiss; 4],
    /// The cache levels', in level order.
    pub caches: [HitMiss; MAX_LEVELS],
    /// The page-walk cache's.
    pub pwc: HitMiss,
    /// The Nested TLB's.
    pub ntlb: HitMiss,
    /// The paging-structure caches', both dimensions together.
    pub psc: HitMiss,
    /// Exits by reason.
    pub exits: ExitStats,
    /// The shadow pagers', when the VM ran under shadow paging at all.
    pub shadow: Option<ShadowStats>,
    /// Agile paging's policy's, in agile mode.
    pub agile: Option<AgileStats>,
    /// Changes of paging mode.
    pub mode_switches: u64,
    /// Instructions retired per mode.
    pub in_mode: InMode,
    /// The guest kernel's counters.
    pub os: OsStats,
    /// The nested tables' counters.
    pub host: HostStats,
    /// TLB shootdowns (multi-vCPU runs).
    pub shootdowns: ShootdownCounts,
    /// The shadow pager's lock (multi-vCPU runs).
    pub pager_lock: PagerLockCounts,
}

impl Counts {
    /// Cycles by cause, on a core of `base_cpi` (the simulation's), as its core model times
    /// them.
    pub fn cycles_by_cause(&self, base_cpi: f64) -> CyclesByCause {
        self.cycles_by_cause_of(base_cpi, self.core.as_ref())
    }

    /// Cycles by cause as the additive model times the same counts.
    pub fn cycles_by_cause_additive(&self, base_cpi: f64) -> CyclesByCause {
        self.cycles_by_cause_of(base_cpi, None)
    }

    fn cycles_by_cause_of(&self, base_cpi: f64, core: Option<&CoreStalls>) -> CyclesByCause {
        CyclesByCause::of(
            base_cpi,
            &self.counters,
            &self.mmu,
            core,
            &self.os,
            &self.exits,
            self.shootdowns.wait_cycles,
            self.pager_lock.wait_cycles,
        )
    }

    /// Paging-related exits ([`ExitReason::is_paging`]).
    pub fn paging_exits(&self) -> u64 {
        ExitReason::ALL
            .iter()
            .filter(|r| r.is_paging())
            .map(|&r| self.exits.count(r))
            .sum()
    }
}
