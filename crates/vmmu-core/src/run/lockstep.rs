//! The oracle's run (docs/policies.md, "oracle"): static shadow paging and static nested
//! paging simulated in lockstep on the same events (one pass over the source, two
//! simulators, each observed at the same window boundaries), the best schedule of modes by
//! dynamic programming over the windows' cycles with the switches' costs
//! ([`crate::policy::hindsight`]), and a complete result stitched from the chosen windows.
//!
//! **Switch costs** are the mechanism's direct costs, priced from the profile as
//! `Vmm::switch_mode` charges them and estimated from the runs: nested → shadow is an exit
//! round trip, the `mode_switch` handler and one `make_shadow` (the current process's root);
//! shadow → nested is the round trip, the handler and one `unshadow` per shadow page the
//! static shadow simulation holds at that boundary (the whole cache is dropped, as Palacios
//! does). The transient after a switch (the TLB and walk caches refill; under shadow paging
//! the cache refills through hidden faults) is not charged: each window costs what it costs
//! in its mode's static run, warm. So the oracle is the best schedule of switches at window
//! boundaries by the windows' own costs in the static runs: an estimate, not a bound — a
//! policy that switches inside a window, or whose switch leaves a cheaper state than the
//! static run's, can do better (docs/policies.md, "The oracle").
//!
//! **The stitched result** is the sum of the chosen windows' changes of every count
//! (`result::stitch`, typed), taken a stretch of one mode at a time: the windows' changes
//! telescope, so a result is built only of the counters at the stretches' ends,
//! while at every window boundary each simulation's counters are copied as plain values
//! (`result::counts`), which is all the schedule and the timeline read. The switches are
//! added to `cycles`, `cycles_by_cause.mode_switch`, the `mode_switch` exit,
//! `world_switches`, `mode_switches` and `os_events.vm_flushes`, and the ratios recomputed.
//! Levels rather than counts are taken at the end: `nested` from the simulation of the last
//! window's mode, `shadow.pages_live` from the shadow simulation when the schedule ends in
//! shadow paging, else 0 (a switch to nested paging drops the cache).

use super::{drive, next_batch, Advance, Progress};
use crate::config::{SimConfig, VirtMode};
use crate::error::{Error, Result};
use crate::event::{Event, EventSource};
use crate::hw::tlb::{COUNT_L1D, COUNT_L2};
use crate::policy::hindsight::{schedule, SwitchCost, WindowCost};
use crate::result::stitch::Tally;
use crate::result::{Counts, OracleSummary, RunResult, SimInfo, Stretch, WindowRecord};
use crate::sim::Simulator;
use crate::vmm::exits::ExitCount;
use std::sync::Arc;

/// Events read from the source at a time (each batch goes to both simulations).
const BATCH: usize = 65_536;

/// The two static simulations, observed at every window boundary, on the same events.
struct Pair {
    sims: Vec<Simulator>,
    /// Each simulation's counters at every window boundary so far.
    snaps: [Vec<Counts>; 2],
    buf: Vec<Event>,
    /// Events read so far.
    events: u64,
}

impl Advance for Pair {
    fn advance(&mut self, source: &mut dyn EventSource) -> Result<bool> {
        if !next_batch(source, &mut self.buf, BATCH)? {
            return Ok(false);
        }
        for (sim, out) in self.sims.iter_mut().zip(&mut self.snaps) {
            sim.step_batch(&self.buf, &mut |s: &Simulator| out.push(s.counts()))?;
        }
        self.events += self.buf.len() as u64;
        Ok(true)
    }
    fn events(&self) -> u64 {
        self.events
    }
    fn finish(&mut self) -> Result<()> {
        for (sim, snaps) in self.sims.iter_mut().zip(&mut self.snaps) {
            sim.finish()?;
            if snaps.is_empty() {
                snaps.push(sim.counts());
            }
            snaps.push(sim.counts());
        }
        Ok(())
    }
}

/// Runs the oracle of adaptive config `cfg` on `source`.
pub(super) fn run(
    cfg: &SimConfig,
    source: &mut dyn EventSource,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunResult> {
    let start = std::time::Instant::now();
    let window = cfg
        .policy
        .as_ref()
        .map(|p| p.window())
        .ok_or_else(|| Error::config("policy", "the oracle needs a policy section"))?;
    cfg.validate()?;
    let mut sims = Vec::with_capacity(2);
    let mut configs = Vec::with_capacity(2);
    for v in VirtMode::BOTH {
        let mut c = cfg.clone();
        c.mode = v.mode();
        c.policy = None;
        let mut sim = Simulator::new(&c)?;
        sim.set_dependences(source.tracks_dependences());
        sim.observe_windows(window);
        sims.push(sim);
        configs.push(Arc::new(c));
    }
    let mut pair = Pair {
        sims,
        snaps: [Vec::new(), Vec::new()],
        buf: Vec::with_capacity(BATCH),
        events: 0,
    };
    drive(&mut pair, source, progress)?;
    let seconds = start.elapsed().as_secs_f64();
    let runs: [Run; 2] = std::array::from_fn(|i| Run {
        sim: &pair.sims[i],
        config: &configs[i],
        snaps: &pair.snaps[i],
    });
    stitch(cfg, &source.describe(), window, &runs, seconds)
}

/// One of the oracle's static simulations, finished, and its counters at every window
/// boundary (the first at the start of counting, the last at the end).
struct Run<'a> {
    sim: &'a Simulator,
    config: &'a Arc<SimConfig>,
    snaps: &'a [Counts],
}

impl Run<'_> {
    /// The result at boundary `k`, its steps named, without a timeline.
    fn at(&self, k: usize) -> RunResult {
        let shape = self.sim.shape();
        let (mut r, steps) =
            RunResult::of_counts(&self.snaps[k], &shape, "", 0.0, Arc::clone(self.config));
        steps.fill(&mut r);
        r.timeline = None;
        r
    }
}

/// The schedule and the stitched result.
fn stitch(
    cfg: &SimConfig,
    workload: &str,
    window: u64,
    sims: &[Run; 2],
    seconds: f64,
) -> Result<RunResult> {
    let snaps = [sims[0].snaps, sims[1].snaps];
    if snaps[0].len() != snaps[1].len() {
        return Err(Error::Check {
            event: 0,
            detail: format!(
                "the oracle's simulations saw {} and {} windows on the same events",
                snaps[0].len() - 1,
                snaps[1].len() - 1
            ),
        });
    }
    let n = snaps[0].len() - 1;
    // Each boundary's cycles so far, per simulation.
    let base_cpi = cfg.machine.core.base_cpi;
    let at = snaps.map(|s| {
        s.iter()
            .map(|c| c.cycles_by_cause(base_cpi).total())
            .collect::<Vec<u64>>()
    });
    let cycles = |i: usize, k: usize| at[i][k + 1].saturating_sub(at[i][k]);
    let costs: Vec<WindowCost> = (0..n)
        .map(|k| WindowCost {
            shadow: cycles(0, k),
            nested: cycles(1, k),
        })
        .collect();
    let p = &cfg.hypervisor.costs;
    let direct = p.exit_round_trip + p.mode_switch;
    let live = |k: usize| snaps[0][k].shadow.map_or(0, |s| s.pages_live);
    let prices: Vec<SwitchCost> = (0..n)
        .map(|k| SwitchCost {
            to_shadow: direct + p.make_shadow,
            to_nested: direct + p.unshadow * live(k),
        })
        .collect();
    let (modes, estimate) = schedule(&costs, &prices);
    let side = |m: VirtMode| usize::from(m == VirtMode::Nested);
    // The schedule's stretches in one mode: (mode, first window, window after the last).
    let mut runs: Vec<(VirtMode, usize, usize)> = Vec::new();
    for (k, &m) in modes.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if r.0 == m => r.2 = k + 1,
            _ => runs.push((m, k, k + 1)),
        }
    }
    // A stretch's change is the sum of its windows' changes (counts telescope), so results
    // are made only of the counters at the stretches' ends, not of every window's.
    let any_nested = modes.contains(&VirtMode::Nested);
    let mut acc: Option<RunResult> = None;
    for &(m, a, b) in &runs {
        let run = &sims[side(m)];
        let mut d = run.at(b).since(&run.at(a));
        if m == VirtMode::Shadow && any_nested {
            // A run that used nested paging names the guest column of its 1D walks too.
            d.walk_refs_by_step = std::mem::take(&mut d.walk_refs_by_step)
                .into_iter()
                .map(|(s, n)| match s.starts_with('L') {
                    true => (format!("G,g{s}"), n),
                    false => (s, n),
                })
                .collect();
        }
        acc = Some(match acc {
            Some(sum) => sum.plus(&d),
            None => d,
        });
    }
    let mut timeline = Vec::with_capacity(n);
    let mut stretches: Vec<Stretch> = Vec::new();
    let (mut switches, mut switch_cycles, mut unshadowed) = (0u64, 0u64, 0u64);
    for (k, &m) in modes.iter().enumerate() {
        let i = side(m);
        let (before, after) = (&snaps[i][k], &snaps[i][k + 1]);
        let mut cost = 0;
        if k == 0 || modes[k - 1] != m {
            if k > 0 {
                cost = match m {
                    VirtMode::Shadow => prices[k].to_shadow,
                    VirtMode::Nested => {
                        unshadowed += live(k);
                        prices[k].to_nested
                    }
                };
                switches += 1;
                switch_cycles += cost;
            }
            stretches.push(Stretch {
                window: k as u64,
                instructions: snaps[0][k].counters.instructions,
                mode: m.name().to_string(),
                switch_cycles: cost,
            });
        }
        let change = |f: &dyn Fn(&Counts) -> u64| f(after) as i64 - f(before) as i64;
        let instr = change(&|c| c.counters.instructions).max(0) as u64;
        let cycles = cycles(i, k) + cost;
        let per_k = |x: i64| {
            if instr == 0 {
                0.0
            } else {
                1000.0 * x.max(0) as f64 / instr as f64
            }
        };
        let l2 = change(&|c| c.tlb[COUNT_L2].misses);
        let exits = change(&Counts::paging_exits);
        let decision = match modes.get(k + 1) {
            None => "end",
            Some(&next) if next == m => "stay",
            Some(&next) => next.name(),
        };
        timeline.push(WindowRecord {
            window: k as u64,
            instructions: instr,
            instructions_end: snaps[0][k + 1].counters.instructions,
            cycles,
            l1_dtlb_misses: change(&|c| c.tlb[COUNT_L1D].misses).max(0) as u64,
            l2_dtlb_misses: l2.max(0) as u64,
            paging_exits: exits.max(0) as u64,
            cpi: if instr == 0 {
                0.0
            } else {
                cycles as f64 / instr as f64
            },
            tlb_misses_per_kinstr: per_k(l2),
            paging_exits_per_kinstr: per_k(exits),
            threshold_vexit: None,
            threshold_tmiss: None,
            state: m.name().to_string(),
            mode: m.name().to_string(),
            switches: u64::from(k > 0 && modes[k - 1] != m),
            decision: decision.to_string(),
        });
    }
    let fins = [sims[0].at(n), sims[1].at(n)];
    let last = modes.last().copied().unwrap_or(VirtMode::Shadow);
    let fin = |m: VirtMode| &fins[side(m)];
    let mut result = acc.ok_or_else(|| Error::Check {
        event: 0,
        detail: "the oracle's schedule has no window".to_string(),
    })?;
    result.cycles += switch_cycles;
    result.cycles_by_cause.mode_switch += switch_cycles;
    if let Some(core) = &mut result.core {
        core.cycles_additive += switch_cycles;
        core.cycles_by_cause_additive.mode_switch += switch_cycles;
    }
    if switches > 0 {
        let e = result
            .exits
            .entry("mode_switch".to_string())
            .or_insert(ExitCount {
                count: 0,
                cycles: 0,
                world_switch: true,
            });
        e.count += switches;
        e.cycles += switch_cycles;
        e.world_switch = true;
    }
    result.world_switches += switches;
    result.mode_switches += switches;
    result.os_events.vm_flushes += switches;
    if let Some(shadow) = &mut result.shadow {
        shadow.pages_removed += unshadowed;
        shadow.pages_live = match last {
            VirtMode::Shadow => fin(VirtMode::Shadow).shadow.map_or(0, |s| s.pages_live),
            VirtMode::Nested => 0,
        };
    }
    result.nested = fin(last).nested.clone();
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    result.cpi = ratio(result.cycles, result.instructions);
    result.walk_refs_per_walk = ratio(result.walk_refs, result.walks);
    let id = fin(VirtMode::Shadow);
    result.schema = id.schema.clone();
    result.machine = id.machine.clone();
    result.pwc_design = id.pwc_design.clone();
    result.seed = id.seed;
    result.profile = id.profile.clone();
    result.warmup = id.warmup;
    result.mode = cfg.mode.name().to_string();
    result.policy = Some("oracle".to_string());
    result.technique = Some(cfg.hypervisor.technique.name().to_string());
    result.workload = workload.to_string();
    let sim_events = id.sim.events;
    result.sim = SimInfo {
        events: sim_events,
        seconds,
        events_per_second: if seconds > 0.0 {
            sim_events as f64 / seconds
        } else {
            0.0
        },
    };
    result.config = Arc::new(cfg.clone());
    let summary = OracleSummary {
        estimate_cycles: estimate,
        static_shadow_cycles: fin(VirtMode::Shadow).cycles,
        static_nested_cycles: fin(VirtMode::Nested).cycles,
        window,
        schedule: stretches,
        shadow_cycles: costs.iter().map(|c| c.shadow).collect(),
        nested_cycles: costs.iter().map(|c| c.nested).collect(),
    };
    result.timeline = Some(timeline);
    result.oracle = Some(summary);
    Ok(result)
}
