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
//! **The stitched result** is the sum of the chosen windows' changes of every integer field
//! ([`super::stitch`]), taken a stretch of one mode at a time: the windows' changes
//! telescope, so a result (a JSON tree) is built only of the counters at the stretches' ends,
//! while at every window boundary each simulation's counters are copied as plain values
//! (`result::counts`), which is all the schedule and the timeline read. The switches are
//! added to `cycles`, `cycles_by_cause.mode_switch`, the `mode_switch` exit,
//! `world_switches`, `mode_switches` and `os_events.vm_flushes`, and the ratios recomputed.
//! Levels rather than counts are taken at the end: `nested` from the simulation of the last
//! window's mode, `shadow.pages_live` from the shadow simulation when the schedule ends in
//! shadow paging, else 0 (a switch to nested paging drops the cache).

use super::counts::Counts;
use super::stitch::{add, delta, rename_keys, tree};
use super::RunResult;
use crate::config::{SimConfig, VirtMode};
use crate::error::{Error, Result};
use crate::event::{Event, EventSource};
use crate::hw::tlb::{COUNT_L1D, COUNT_L2};
use crate::policy::hindsight::{schedule, SwitchCost, WindowCost};
use crate::sim::{Progress, Simulator, WindowRecord};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// A stretch of the oracle's schedule in one mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stretch {
    /// Its first window.
    pub window: u64,
    /// Instructions retired before it.
    pub instructions: u64,
    /// Its paging mode.
    pub mode: String,
    /// The estimated cost of the switch that starts it (0 for the first).
    pub switch_cycles: u64,
}

/// The oracle's figures beside its stitched result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OracleSummary {
    /// The schedule's estimated cycles: chosen windows plus switches (= the result's `cycles`).
    pub estimate_cycles: u64,
    /// Static shadow paging's cycles on the same events.
    pub static_shadow_cycles: u64,
    /// Static nested paging's cycles on the same events.
    pub static_nested_cycles: u64,
    /// Instructions per window.
    pub window: u64,
    /// The schedule, one entry per stretch in one mode.
    pub schedule: Vec<Stretch>,
    /// Each window's cycles under static shadow paging.
    pub shadow_cycles: Vec<u64>,
    /// Each window's cycles under static nested paging.
    pub nested_cycles: Vec<u64>,
}

const BATCH: usize = 65_536;
const PROGRESS_EVERY: u64 = 1 << 20;

/// Runs the oracle of adaptive config `cfg` on `source`.
pub fn run(
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
    let mut snaps: [Vec<Counts>; 2] = [Vec::new(), Vec::new()];
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    let total = source.len_hint();
    let mut events = 0u64;
    let mut next_report = PROGRESS_EVERY;
    loop {
        buf.clear();
        if source.next_batch(&mut buf, BATCH)? == 0 {
            break;
        }
        for (sim, out) in sims.iter_mut().zip(&mut snaps) {
            sim.run_observed(&buf, &mut |s: &Simulator| out.push(Counts::of(s)))?;
        }
        events += buf.len() as u64;
        if events >= next_report {
            next_report = events + PROGRESS_EVERY;
            if !progress(&Progress { events, total }) {
                return Err(Error::Interrupted { events });
            }
        }
    }
    for (i, sim) in sims.iter_mut().enumerate() {
        sim.finish()?;
        if snaps[i].is_empty() {
            snaps[i].push(Counts::of(sim));
        }
        snaps[i].push(Counts::of(sim));
    }
    progress(&Progress { events, total });
    let seconds = start.elapsed().as_secs_f64();
    let runs: [Run; 2] = std::array::from_fn(|i| Run {
        sim: &sims[i],
        config: &configs[i],
        snaps: &snaps[i],
    });
    stitch(cfg, &source.describe(), window, &runs, seconds)
}

fn u(v: &Value, path: &[&str]) -> u64 {
    let mut x = v;
    for k in path {
        x = &x[*k];
    }
    x.as_u64().unwrap_or(0)
}

/// Adds `n` to the integer at `path` of `v`, creating it.
fn bump(v: &mut Value, path: &[&str], n: u64) {
    let mut x = v;
    for k in path {
        if !x.is_object() {
            *x = Value::Object(Map::new());
        }
        x = x
            .as_object_mut()
            .expect("made an object")
            .entry(*k)
            .or_insert(json!(0));
    }
    *x = json!(x.as_u64().unwrap_or(0) + n);
}

/// One of the oracle's static simulations, finished, and its counters at every window
/// boundary (the first at the start of counting, the last at the end).
struct Run<'a> {
    sim: &'a Simulator,
    config: &'a Arc<SimConfig>,
    snaps: &'a [Counts],
}

impl Run<'_> {
    /// The result at boundary `k` as a JSON tree.
    fn tree(&self, k: usize) -> Value {
        tree(self.sim, &self.snaps[k], self.config)
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
    // A stretch's change is the sum of its windows' changes (integers telescope), so JSON
    // trees are made only of the counters at the stretches' ends, not of every window's.
    let any_nested = modes.contains(&VirtMode::Nested);
    let mut acc = Value::Object(Map::new());
    for &(m, a, b) in &runs {
        let run = &sims[side(m)];
        let mut d = delta(&run.tree(a), &run.tree(b));
        if m == VirtMode::Shadow && any_nested {
            // A run that used nested paging names the guest column of its 1D walks too.
            rename_keys(&mut d, "walk_refs_by_step", |s| {
                if s.starts_with('L') {
                    format!("G,g{s}")
                } else {
                    s.to_string()
                }
            });
        }
        add(&mut acc, &d);
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
    let fins = [sims[0].tree(n), sims[1].tree(n)];
    let last = modes.last().copied().unwrap_or(VirtMode::Shadow);
    let fin = |m: VirtMode| &fins[side(m)];
    bump(&mut acc, &["cycles"], switch_cycles);
    bump(&mut acc, &["cycles_by_cause", "mode_switch"], switch_cycles);
    if acc.get("core").is_some_and(Value::is_object) {
        bump(&mut acc, &["core", "cycles_additive"], switch_cycles);
        bump(
            &mut acc,
            &["core", "cycles_by_cause_additive", "mode_switch"],
            switch_cycles,
        );
    }
    if switches > 0 {
        bump(&mut acc, &["exits", "mode_switch", "count"], switches);
        bump(&mut acc, &["exits", "mode_switch", "cycles"], switch_cycles);
        acc["exits"]["mode_switch"]["world_switch"] = json!(true);
    }
    bump(&mut acc, &["world_switches"], switches);
    bump(&mut acc, &["mode_switches"], switches);
    bump(&mut acc, &["os_events", "vm_flushes"], switches);
    if acc.get("shadow").is_some_and(Value::is_object) {
        bump(&mut acc, &["shadow", "pages_removed"], unshadowed);
        acc["shadow"]["pages_live"] = match last {
            VirtMode::Shadow => json!(u(fin(VirtMode::Shadow), &["shadow", "pages_live"])),
            VirtMode::Nested => json!(0),
        };
    }
    acc["nested"] = fin(last)["nested"].clone();
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let (cycles, instructions) = (u(&acc, &["cycles"]), u(&acc, &["instructions"]));
    acc["cpi"] = json!(ratio(cycles, instructions));
    acc["walk_refs_per_walk"] = json!(ratio(u(&acc, &["walk_refs"]), u(&acc, &["walks"])));
    let id = fin(VirtMode::Shadow);
    for key in [
        "schema",
        "machine",
        "pwc_design",
        "seed",
        "profile",
        "warmup",
    ] {
        acc[key] = id[key].clone();
    }
    acc["mode"] = json!(cfg.mode.name());
    acc["policy"] = json!("oracle");
    acc["technique"] = json!(cfg.hypervisor.technique.name());
    acc["workload"] = json!(workload);
    let sim_events = u(id, &["sim", "events"]);
    acc["sim"] = json!({
        "events": sim_events,
        "seconds": seconds,
        "events_per_second": if seconds > 0.0 { sim_events as f64 / seconds } else { 0.0 },
    });
    acc["config"] = serde_json::to_value(cfg).expect("a config serializes");
    let summary = OracleSummary {
        estimate_cycles: estimate,
        static_shadow_cycles: u(fin(VirtMode::Shadow), &["cycles"]),
        static_nested_cycles: u(fin(VirtMode::Nested), &["cycles"]),
        window,
        schedule: stretches,
        shadow_cycles: costs.iter().map(|c| c.shadow).collect(),
        nested_cycles: costs.iter().map(|c| c.nested).collect(),
    };
    let mut result: RunResult = serde_json::from_value(acc).map_err(|e| Error::Check {
        event: 0,
        detail: format!("the oracle's stitched result does not parse: {e}"),
    })?;
    // Typed parts are set typed: no trip through JSON for thousands of windows.
    result.timeline = Some(timeline);
    result.oracle = Some(summary);
    Ok(result)
}
