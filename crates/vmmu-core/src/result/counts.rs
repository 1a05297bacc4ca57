//! A running simulation's counters copied as plain values at one moment (no map, no string,
//! no allocation): what the oracle keeps of each of its simulations at every window boundary.
//! A [`RunResult`](super::RunResult) is made of such a copy and the simulation's fixed parts
//! (configuration, structure names) only where it is read.

use crate::guest::OsStats;
use crate::host::HostStats;
use crate::hw::cache::MAX_LEVELS;
use crate::hw::HitMiss;
use crate::mmu::MmuStats;
use crate::shadow::ShadowStats;
use crate::sim::{Counters, CyclesByCause, PagerLockCounts, ShootdownCounts, Simulator, Warmup};
use crate::timing::CoreStalls;
use crate::vmm::exits::{ExitReason, ExitStats};
use crate::vmm::{AgileStats, InMode};
use crate::walk::WalkStats;

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
    /// `sim`'s counters now.
    pub fn of(sim: &Simulator) -> Counts {
        let m = &sim.mmu;
        let vmm = &sim.vmm;
        let (pg, pn) = (m.hw.psc_guest.stats(), m.hw.psc_nested.stats());
        Counts {
            counters: sim.counters,
            warmed: sim.warmed,
            walk: m.hw.stats,
            mmu: m.stats,
            core: sim.core.stalls(),
            tlb: m.tlb.counts(),
            caches: m.hw.caches.counts(),
            pwc: m.hw.pwc.stats(),
            ntlb: m.hw.ntlb.stats(),
            psc: HitMiss {
                hits: pg.hits + pn.hits,
                misses: pg.misses + pn.misses,
            },
            exits: *vmm.exits(),
            shadow: vmm.shadow_stats(),
            agile: vmm.agile_stats(),
            mode_switches: vmm.stats.mode_switches,
            in_mode: vmm.instructions_in_mode(sim.counters.instructions),
            os: sim.os.stats,
            host: vmm.host().stats,
            shootdowns: sim.shootdowns,
            pager_lock: sim.pager_lock,
        }
    }

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
