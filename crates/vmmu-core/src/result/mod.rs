//! The result of a run as a typed value, schema `vmmu.result/2` (docs/statistics.md defines
//! every field and its unit). The CLI, the Python API and JSON all read this one type; every
//! figure has one home (a page-walk cache's hits live in `walk_caches`, nowhere else). An
//! adaptive run adds its `timeline`; the oracle's result is stitched from two simulations
//! ([`stitch`]: counts add and subtract as typed values). This module is the schema and how
//! a result is made of a simulation's counters ([`Counts`], [`Shape`]); it knows nothing of
//! the simulation that produced them (the run driver, `crate::run`, sits above both).

pub(crate) mod counts;
mod schedule;
pub(crate) mod stitch;
mod timeline;
mod vcpus;

use crate::config::{CoreModel, SimConfig};
use crate::hw::HitMiss;
use crate::mmu::Mmu;
use crate::paging::Geometry;
use crate::shadow::ShadowStats;
use crate::timing::{whole, Stall};
use crate::vmm::exits::ExitCount;
use crate::vmm::AgileStats;
pub use crate::vmm::PagerLockCounts;
use crate::walk::step::{step_name, Grid, COL_G, GRID};
pub(crate) use counts::Counts;
pub use counts::{Counters, CyclesByCause, Warmup};
pub use schedule::{OracleSummary, Stretch};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::sync::Arc;
pub use timeline::WindowRecord;
pub use vcpus::{ShootdownCounts, VcpuCounts};

/// The schema identifier written into every result.
pub const SCHEMA: &str = "vmmu.result/2";

/// A count split by the side of the access.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BySide {
    /// Instruction fetches.
    pub instr: u64,
    /// Loads and stores.
    pub data: u64,
}

/// Hits and misses of the page-walk caching structures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkCaches {
    /// The AMD page-walk cache.
    pub pwc: HitMiss,
    /// The Nested TLB.
    pub ntlb: HitMiss,
    /// The paging-structure caches (both dimensions; one lookup per walk and dimension).
    pub psc: HitMiss,
}

/// The guest kernel's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestCounts {
    /// Pages mapped by `MAP_POPULATE`.
    pub pages_populated: u64,
    /// 4 KiB pages mapped.
    pub pages_mapped_4k: u64,
    /// 2 MiB pages mapped.
    pub pages_mapped_2m: u64,
    /// 4 MiB pages mapped.
    pub pages_mapped_4m: u64,
    /// 1 GiB pages mapped.
    pub pages_mapped_1g: u64,
    /// Guest page-table frames allocated.
    pub table_frames: u64,
    /// Processes created.
    pub processes: u64,
    /// Touches outside every mapping.
    pub unmapped_touches: u64,
    /// Transparent huge pages mapped at fault (or population) time.
    #[serde(default)]
    pub thp_fault_alloc: u64,
    /// Faults that wanted a transparent huge page and found no free 2 MiB block.
    #[serde(default)]
    pub thp_fault_fallback: u64,
    /// 2 MiB ranges collapsed into a huge page (khugepaged, `MADV_COLLAPSE`).
    #[serde(default)]
    pub thp_collapse_alloc: u64,
    /// Collapses abandoned for want of a free 2 MiB block.
    #[serde(default)]
    pub thp_collapse_alloc_failed: u64,
    /// Huge page mappings split into 4 KiB entries.
    #[serde(default)]
    pub thp_split_pmd: u64,
    /// `MAP_HUGETLB` mappings the hugetlbfs pool could not hold.
    #[serde(default)]
    pub hugetlb_fallback: u64,
    /// Mappings dropped by `MADV_DONTNEED` / `MADV_FREE` (a huge page counts one).
    #[serde(default)]
    pub pages_zapped: u64,
    /// khugepaged's wake-ups.
    #[serde(default)]
    pub khugepaged_wakeups: u64,
}

/// The nested tables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NestedCounts {
    /// 4 KiB nested pages.
    pub pages_4k: u64,
    /// 2 MiB nested pages.
    pub pages_2m: u64,
    /// 1 GiB nested pages.
    pub pages_1g: u64,
    /// Nested-table frames.
    pub table_frames: u64,
}

/// Operations the guest executed on the MMU, and flushes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsEvents {
    /// CR3 writes.
    pub cr3_writes: u64,
    /// INVLPGs.
    pub invlpgs: u64,
    /// Flushes of one address space.
    pub tlb_flushes: u64,
    /// Flushes of everything the VM caches (world switches without VPIDs, mode switches).
    pub vm_flushes: u64,
    /// Flushes of the paging-structure caches after shadow tables were removed.
    pub psc_flushes: u64,
    /// Accesses a TLB entry forbade (a fault without a walk).
    pub tlb_hit_faults: u64,
}

/// How the interval core model timed the run (docs/statistics.md, "The core"): present only
/// under `machine.core.model = "interval"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoreResult {
    /// The core model: `interval`.
    pub model: String,
    /// Whether the source tracked its references' dependences: `tracked`, or `unknown
    /// (assumed independent)`.
    pub dependences: String,
    /// The cycles the additive model gives the same counts (no overlap).
    pub cycles_additive: u64,
    /// Those cycles by cause: `translation` and `data` are the latency totals of which
    /// `cycles_by_cause` holds the exposed part.
    pub cycles_by_cause_additive: CyclesByCause,
    /// The exposed translation and data cycles by why dispatch stalled: `rob`,
    /// `load_queue`, `store_queue`, `fetch`, `drain` (each rounded).
    pub stall_by_reason: BTreeMap<String, u64>,
    /// Cycles walks waited for a free page walker, exposed or not.
    pub walker_wait_cycles: u64,
    /// Cycles data misses waited for a free miss-status register, exposed or not.
    pub mshr_wait_cycles: u64,
}

/// How the simulation itself went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SimInfo {
    /// Events simulated (warm-up included).
    pub events: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Events per wall-clock second.
    pub events_per_second: f64,
}

/// Everything a run reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// The paging mode the run started in (`adaptive` for a policy's run).
    pub mode: String,
    /// The policy of an adaptive run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The machine preset.
    pub machine: String,
    /// The workload, as its source describes itself.
    pub workload: String,
    /// The page-walk caching design.
    pub pwc_design: String,
    /// The seed.
    pub seed: u64,
    /// How sensitive operations reach the hypervisor (shadow and adaptive modes).
    pub technique: Option<String>,
    /// The cost profile (virtualized modes only).
    pub profile: Option<String>,
    /// Instructions retired.
    pub instructions: u64,
    /// Loads, stores and read-modify-writes.
    pub memory_refs: u64,
    /// Instruction fetches.
    pub fetches: u64,
    /// Total cycles.
    pub cycles: u64,
    /// Cycles per instruction.
    pub cpi: f64,
    /// Hits and misses per TLB.
    pub tlb: BTreeMap<String, HitMiss>,
    /// Page walks (faulting walks and D-assists included).
    pub walks: u64,
    /// Walks that ended in a fault.
    pub walk_faults: u64,
    /// Faulting walks by side.
    pub walk_faults_by_side: BySide,
    /// Stores that re-walked to set a dirty bit.
    pub d_assists: u64,
    /// Accessed/dirty-bit writes by the walker.
    pub ad_updates: u64,
    /// Page-entry references.
    pub walk_refs: u64,
    /// References per walk.
    pub walk_refs_per_walk: f64,
    /// References by `{column,row}` cell.
    pub walk_refs_by_step: BTreeMap<String, u64>,
    /// References the page-walk cache served, by `{column,row}` cell (seed 002 Figure 8).
    pub pwc_hits_by_step: BTreeMap<String, u64>,
    /// References by the structure that served them.
    pub walk_refs_served_by: BTreeMap<String, u64>,
    /// Hits and misses of the page-walk caching structures.
    pub walk_caches: WalkCaches,
    /// Hits and misses per cache level.
    pub caches: BTreeMap<String, HitMiss>,
    /// Hypervisor operations by reason.
    pub exits: BTreeMap<String, ExitCount>,
    /// World switches of every reason.
    pub world_switches: u64,
    /// The shadow pager's counters (runs that used shadow paging).
    pub shadow: Option<ShadowStats>,
    /// Agile paging's policy and walks (agile runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agile: Option<AgileResult>,
    /// Cycles by cause.
    pub cycles_by_cause: CyclesByCause,
    /// The interval core model's figures (absent under the additive model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<CoreResult>,
    /// Changes of paging mode.
    pub mode_switches: u64,
    /// Instructions retired per mode.
    pub instructions_in_mode: BTreeMap<String, u64>,
    /// Guest demand-paging faults.
    pub page_faults: u64,
    /// Guest demand-paging faults by side.
    pub page_faults_by_side: BySide,
    /// Copy-on-write faults.
    pub cow_faults: u64,
    /// The guest kernel's counters.
    pub guest: GuestCounts,
    /// The nested tables (virtualized modes).
    pub nested: Option<NestedCounts>,
    /// MMU operations and flushes.
    pub os_events: OsEvents,
    /// Translations verified by the checked mode.
    pub checked_translations: u64,
    /// What the warm-up left out.
    pub warmup: Warmup,
    /// The configuration (shared: the results the oracle builds of one simulation's counters
    /// hold one copy); under the additive core model without the interval model's fields.
    #[serde(serialize_with = "config_of_run")]
    pub config: Arc<SimConfig>,
    /// The simulation's own figures.
    pub sim: SimInfo,
    /// Multi-vCPU runs: the time the run took, the largest vCPU clock (`cycles` sums every
    /// vCPU's time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_cycles: Option<u64>,
    /// Multi-vCPU runs: each vCPU's counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vcpus: Vec<VcpuCounts>,
    /// Multi-vCPU runs: TLB shootdowns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shootdowns: Option<ShootdownCounts>,
    /// Multi-vCPU runs: the shadow pager's lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pager_lock: Option<PagerLockCounts>,
    /// An adaptive run's windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Vec<WindowRecord>>,
    /// The oracle's estimate and schedule (policy `oracle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<OracleSummary>,
    /// A sizing study's probes (`config.sizing`): the L2 TLB's hits and misses at each size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizing: Option<SizingCounts>,
}

/// The outcome of a one-pass sizing study of the L2 TLB (docs/performance.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizingCounts {
    /// The index of the resized array of `machine.tlb.l2`.
    pub array: usize,
    /// One row per size, in the order configured.
    pub sizes: Vec<SizingRow>,
}

/// The L2 TLB level's counts with its array at one size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizingRow {
    /// Entries of the resized array.
    pub entries: u32,
    /// Its associativity.
    pub ways: u32,
    /// L2 lookups that hit (in any of the level's arrays).
    pub hits: u64,
    /// L2 lookups that missed every array of the level (each one a walk).
    pub misses: u64,
}

/// What a result reads of a simulation besides its counters: the configuration, the
/// structures' names, and what is a description rather than a count.
#[derive(Clone, Copy)]
pub struct Shape<'a> {
    /// The simulation's configuration.
    pub cfg: &'a SimConfig,
    /// Its (running vCPU's) MMU: the names of its TLBs and cache levels, the sizing probes.
    pub mmu: &'a Mmu,
    /// Whether the source tracked its references' dependences.
    pub dependences: bool,
    /// Whether the hypervisor keeps nested tables (`Vmm::describe`).
    pub nested_tables: bool,
    /// Each vCPU's counters of a multi-vCPU run (empty with one vCPU).
    pub vcpus: &'a [VcpuCounts],
    /// An adaptive run's timeline.
    pub timeline: Option<&'a [WindowRecord]>,
}

/// Agile paging's figures in a result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgileResult {
    /// The policy's counters.
    pub policy: AgileStats,
    /// Walks by the number of shadow levels walked before switching to nested mode: `"0"` a
    /// walk nested from the guest root (24 references at four levels), the guest's level
    /// count a walk that never switched (a shadow walk).
    pub walks_by_shadow_levels: BTreeMap<String, u64>,
}

impl RunResult {
    /// The result of a finished simulation whose counters are `counts` and whose fixed parts
    /// are `shape`, of `workload`, which took `seconds`.
    pub(crate) fn of(counts: &Counts, shape: &Shape, workload: &str, seconds: f64) -> RunResult {
        let config = Arc::new(shape.cfg.clone());
        let (mut r, steps) = Self::of_counts(counts, shape, workload, seconds, config);
        steps.fill(&mut r);
        r
    }

    /// [`RunResult::of`] counters `counts` (taken at any moment of a run), with
    /// `walk_refs_by_step` and `pwc_hits_by_step` left empty and the grids they are made of
    /// beside it (the oracle names the steps only of the copies it reads). The fixed parts
    /// (configuration, structure names) and what [`Counts`] leaves out are read from `shape`.
    pub(crate) fn of_counts(
        counts: &Counts,
        shape: &Shape,
        workload: &str,
        seconds: f64,
        config: Arc<SimConfig>,
    ) -> (RunResult, StepGrids) {
        let cfg = shape.cfg;
        let k = counts;
        let c = &k.counters;
        let m = shape.mmu;
        let w = &k.walk;
        let os = &k.os;
        let exits = &k.exits;
        let by_cause = k.cycles_by_cause(cfg.machine.core.base_cpi);
        let cycles = by_cause.total();
        let in_mode = k.in_mode;
        let steps = StepGrids {
            refs: w.refs,
            pwc_hits: w.pwc_hits,
            two_d: in_mode.nested > 0 || (1..GRID).any(|col| w.refs[col].iter().any(|&n| n > 0)),
        };
        let cache_stats = m.hw.caches.named(&k.caches);
        let mut served = BTreeMap::new();
        served.insert("pwc".to_string(), w.served_pwc);
        for (i, (name, _)) in cache_stats.iter().enumerate() {
            served.insert(name.clone(), w.served_level[i]);
        }
        served.insert("dram".to_string(), w.served_level[cache_stats.len()]);
        let host = &k.host;
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let virtualized = cfg.mode.virtualized();
        let has_nested_tables = shape.nested_tables;
        let shadow_technique = cfg.mode.uses_technique();
        let r = RunResult {
            schema: SCHEMA.to_string(),
            mode: cfg.mode.name().to_string(),
            policy: cfg.policy.as_ref().map(|p| p.kind().to_string()),
            machine: cfg.machine.name.clone(),
            workload: workload.to_string(),
            pwc_design: cfg.machine.pwc.design.name().to_string(),
            seed: cfg.seed,
            technique: shadow_technique.then(|| cfg.hypervisor.technique.name().to_string()),
            profile: virtualized.then(|| cfg.hypervisor.profile.clone()),
            instructions: c.instructions,
            memory_refs: c.memory_refs,
            fetches: c.fetches,
            cycles,
            cpi: ratio(cycles, c.instructions),
            tlb: m
                .tlb
                .named(&k.tlb)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            walks: w.walks,
            walk_faults: w.walk_faults,
            walk_faults_by_side: BySide {
                instr: k.mmu.walk_faults_instr,
                data: k.mmu.walk_faults_data,
            },
            d_assists: k.mmu.d_assists,
            ad_updates: w.ad_updates,
            walk_refs: w.total_refs(),
            walk_refs_per_walk: ratio(w.total_refs(), w.walks),
            walk_refs_by_step: BTreeMap::new(),
            pwc_hits_by_step: BTreeMap::new(),
            walk_refs_served_by: served,
            walk_caches: WalkCaches {
                pwc: k.pwc,
                ntlb: k.ntlb,
                psc: k.psc,
            },
            caches: cache_stats.into_iter().collect(),
            exits: exits.table(),
            world_switches: exits.world_switches(),
            shadow: k.shadow,
            agile: k.agile.map(|policy| AgileResult {
                policy,
                walks_by_shadow_levels: (0..=Geometry::of(cfg.guest.format).levels)
                    .map(|i| (i.to_string(), w.agile[i as usize]))
                    .collect(),
            }),
            cycles_by_cause: by_cause,
            core: k.core.map(|stalls| {
                let additive = k.cycles_by_cause_additive(cfg.machine.core.base_cpi);
                CoreResult {
                    model: CoreModel::Interval.name().to_string(),
                    dependences: if shape.dependences {
                        "tracked"
                    } else {
                        "unknown (assumed independent)"
                    }
                    .to_string(),
                    cycles_additive: additive.total(),
                    cycles_by_cause_additive: additive,
                    stall_by_reason: Stall::ALL
                        .iter()
                        .map(|&r| (r.name().to_string(), whole(stalls.by_reason[r as usize])))
                        .collect(),
                    walker_wait_cycles: whole(stalls.walker_wait),
                    mshr_wait_cycles: whole(stalls.mshr_wait),
                }
            }),
            mode_switches: k.mode_switches,
            instructions_in_mode: in_mode
                .named()
                .into_iter()
                .filter(|&(name, n)| n > 0 || name == cfg.mode.name())
                .map(|(name, n)| (name.to_string(), n))
                .collect(),
            page_faults: os.page_faults_instr + os.page_faults_data,
            page_faults_by_side: BySide {
                instr: os.page_faults_instr,
                data: os.page_faults_data,
            },
            cow_faults: os.cow_faults,
            guest: GuestCounts {
                pages_populated: os.pages_populated,
                pages_mapped_4k: os.pages_mapped[0],
                pages_mapped_2m: os.pages_mapped[1],
                pages_mapped_4m: os.pages_mapped[2],
                pages_mapped_1g: os.pages_mapped[3],
                table_frames: os.table_frames,
                processes: os.processes,
                unmapped_touches: os.unmapped_touches,
                thp_fault_alloc: os.thp_fault_alloc,
                thp_fault_fallback: os.thp_fault_fallback,
                thp_collapse_alloc: os.thp_collapse_alloc,
                thp_collapse_alloc_failed: os.thp_collapse_alloc_failed,
                thp_split_pmd: os.thp_split_pmd,
                hugetlb_fallback: os.hugetlb_fallback,
                pages_zapped: os.pages_zapped,
                khugepaged_wakeups: os.khugepaged_wakeups,
            },
            nested: has_nested_tables.then(|| NestedCounts {
                pages_4k: host.nested_pages[0],
                pages_2m: host.nested_pages[1],
                pages_1g: host.nested_pages[3],
                table_frames: host.nested_table_frames,
            }),
            os_events: OsEvents {
                cr3_writes: k.mmu.cr3_writes,
                invlpgs: k.mmu.invlpgs,
                tlb_flushes: k.mmu.context_flushes,
                vm_flushes: k.mmu.vm_flushes,
                psc_flushes: k.mmu.psc_flushes,
                tlb_hit_faults: k.mmu.tlb_hit_faults,
            },
            checked_translations: c.checked,
            warmup: k.warmed,
            config,
            elapsed_cycles: shape.vcpus.iter().map(|v| v.cycles).max(),
            vcpus: shape.vcpus.to_vec(),
            shootdowns: (!shape.vcpus.is_empty()).then_some(k.shootdowns),
            pager_lock: (!shape.vcpus.is_empty()).then_some(k.pager_lock),
            sim: SimInfo {
                events: c.events + k.warmed.events,
                seconds,
                events_per_second: if seconds > 0.0 {
                    (c.events + k.warmed.events) as f64 / seconds
                } else {
                    0.0
                },
            },
            timeline: shape.timeline.map(<[WindowRecord]>::to_vec),
            oracle: None,
            sizing: cfg.sizing.as_ref().map(|z| SizingCounts {
                array: z.array,
                sizes: z
                    .sizes
                    .iter()
                    .zip(m.tlb.probe_stats())
                    .map(|(size, hm)| SizingRow {
                        entries: size.entries,
                        ways: size.ways,
                        hits: hm.hits,
                        misses: hm.misses,
                    })
                    .collect(),
            }),
        };
        (r, steps)
    }

    /// The result as a JSON value.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a result serializes")
    }
}

/// The walker's counts per step of the walk grid, behind a result's `walk_refs_by_step` and
/// `pwc_hits_by_step` (seed 002 Figure 1(b)), copied as arrays.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StepGrids {
    refs: Grid,
    pwc_hits: Grid,
    /// Whether the run walked two dimensions (cells named `G,gL4`, ...), else `L4`, ...
    two_d: bool,
}

impl StepGrids {
    /// The used cells of `grid`, by name.
    fn cells(&self, grid: &Grid) -> BTreeMap<String, u64> {
        let mut by_step = BTreeMap::new();
        for (col, rows) in grid.iter().enumerate() {
            for (row, &n) in rows.iter().enumerate() {
                if n > 0 && (self.two_d || col == COL_G) {
                    by_step.insert(step_name(col, row, !self.two_d), n);
                }
            }
        }
        by_step
    }

    /// `walk_refs_by_step`: walk references per step.
    pub(crate) fn walk_refs_by_step(&self) -> BTreeMap<String, u64> {
        self.cells(&self.refs)
    }

    /// `pwc_hits_by_step`: page-walk-cache hits per step.
    pub(crate) fn pwc_hits_by_step(&self) -> BTreeMap<String, u64> {
        self.cells(&self.pwc_hits)
    }

    /// Sets `r`'s step maps.
    pub(crate) fn fill(&self, r: &mut RunResult) {
        r.walk_refs_by_step = self.walk_refs_by_step();
        r.pwc_hits_by_step = self.pwc_hits_by_step();
    }
}

/// A result's configuration: under the additive core model, `machine.core` without the
/// interval model's fields (`model` and the window's sizes) and `machine.sources` without
/// theirs, which cannot have changed the run — so an additive result reads exactly as before
/// the interval model existed.
fn config_of_run<S: Serializer>(
    cfg: &Arc<SimConfig>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    if cfg.machine.core.model != CoreModel::Additive {
        return cfg.serialize(s);
    }
    let mut v = serde_json::to_value(&**cfg).map_err(serde::ser::Error::custom)?;
    let fields = cfg.machine.core.window_fields().map(|(name, _)| name);
    for name in std::iter::once("model").chain(fields) {
        if let Some(core) = v
            .pointer_mut("/machine/core")
            .and_then(|c| c.as_object_mut())
        {
            core.remove(name);
        }
        if let Some(src) = v
            .pointer_mut("/machine/sources")
            .and_then(|c| c.as_object_mut())
        {
            src.remove(&format!("core.{name}"));
        }
    }
    v.serialize(s)
}
