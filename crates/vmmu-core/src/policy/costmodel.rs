//! vmmu's own policy: a cost model of both paging modes built from what a hypervisor can
//! measure, and a switch when the gain the other mode would have given has paid for the
//! measured cost of switching (docs/policies.md, "costmodel").
//!
//! **The model.** Per instruction, the part of the cost that depends on the mode is
//! - under shadow paging: the paging exits (cycles the hypervisor spends in them) plus the
//!   translation cycles of 1D walks;
//! - under nested paging: the translation cycles of 2D walks.
//!
//! The current mode's part is measured. The other mode's is predicted from the same window:
//! - nested, while under shadow paging: the L2 DTLB misses times the 2D walk latency measured
//!   in the last nested period, or before any, the 1D latency times the ratio of references
//!   per walk of the formats (`g·n + g + n` against `g` for a `g`-level guest over `n`-level
//!   nested tables);
//! - shadow, while under nested paging, where the hypervisor sees none of the guest's paging:
//!   the guest's kernel cycles (a PMU cycle counter with the OS bit) times the paging-exit
//!   cycles per kernel cycle measured in the last shadow period — the guest's page-table
//!   activity is kernel work in every mode — plus the misses times the 1D latency (measured,
//!   or the 2D latency over the ratio). Before any shadow period with kernel work the exit
//!   part is unknown: a window with kernel work then predicts nothing (the policy never
//!   switches on an unknown), while one without predicts no exits, so a TLB-bound start under
//!   nested paging still probes shadow paging.
//!
//! **The switch cost** is measured: the direct cycles of the switch (the `mode_switch` exit
//! with its per-page work) plus the transient, the mode-specific cycles of the windows after
//! the switch beyond what the model predicted the new mode would cost when it switched. The
//! transient lasts at least `settle` windows and goes on while the mode-specific cost per
//! instruction still falls by more than a tenth from one window to the next (a shadow cache
//! refilling through hidden faults can take several), at most [`MAX_SETTLE`]. Before a switch of a direction has been
//! measured, the profile's direct cost is the estimate.
//!
//! **The rule** is break-even (ski rental): the predicted gain of the other mode is
//! accumulated window by window while it stays ahead (a cumulative sum that restarts from
//! zero when the current mode is ahead), and the VM switches when the sum exceeds `(1 +
//! hysteresis)` times the switch's cost. The horizon over which a switch must pay is thus the
//! time the gain has already lasted: a phase shorter than its switch's cost is never chased,
//! and a long one is entered once its own past has paid for the switch — within twice the
//! best offline cost for that phase, the classic bound. Transient windows are never judged,
//! so the policy does not react to the transient its own switch caused.
//!
//! **Between windows**, under shadow paging, the policy asks to be woken after as many paging
//! exits as would, at their measured mean cost, pay for the switch even if nested paging cost
//! a whole window of its predicted rate (at the start, with nothing predicted yet, as soon as
//! they pay for the switch); woken, it switches at once (seed 001's DAV²M also reacts on the
//! exit). A burst of page-table churn thus costs at most about one switch's
//! worth of exits before the VM leaves shadow paging, not a whole window.

use super::{Action, Counters};
use crate::addr::PageSize;
use crate::config::{scaled, CostModelConfig, PagingFormat, SimConfig, VirtMode};
use crate::paging::Geometry;
use std::collections::VecDeque;

/// A window whose mode-specific cost per instruction is below this fraction of the previous
/// window's is still in a switch's transient.
const SETTLED: f64 = 0.9;

/// The most windows a transient lasts.
pub const MAX_SETTLE: u32 = 16;

/// Cost of switches of one direction: the mean of the measured ones, else the prior.
#[derive(Clone, Debug, Default, PartialEq)]
struct SwitchCost {
    prior: f64,
    sum: f64,
    n: u64,
}

impl SwitchCost {
    fn estimate(&self) -> f64 {
        if self.n == 0 {
            self.prior
        } else {
            self.sum / self.n as f64
        }
    }
}

/// A switch whose transient is still being measured.
#[derive(Clone, Debug, PartialEq)]
struct Pending {
    to: VirtMode,
    /// The new mode's predicted mode-specific cycles per instruction at the switch.
    expected: f64,
    direct: u64,
    /// VirtMode-specific cycles beyond the prediction so far.
    excess: f64,
}

/// The cost model's state.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    window: u64,
    hysteresis: f64,
    settle: u32,
    average: usize,
    /// 2D over 1D references per walk of the formats.
    ratio: f64,
    lat_1d: Option<f64>,
    lat_2d: Option<f64>,
    /// Paging-exit cycles per guest-kernel cycle under shadow paging.
    beta: Option<f64>,
    to_nested: SwitchCost,
    to_shadow: SwitchCost,
    since_switch: u32,
    /// The mode-specific cycles per instruction of the last window.
    prev_rate: Option<f64>,
    /// The last window was part of a transient.
    transient: bool,
    pending: Option<Pending>,
    /// Settled windows of the current period, the latest last.
    recent: VecDeque<Counters>,
    /// The gain the other mode would have given, accumulated while it stays ahead.
    regret: f64,
    /// The last window's `(current, other)` mode-specific cycles per instruction.
    last: (f64, f64),
    /// Paging exits since the start at the end of the last window.
    exits_at_window: u64,
    /// Mean cycles of a paging exit: measured, and before any, the cheapest paging exit of
    /// the profile (so a wake-up never comes early).
    exit_cost: f64,
    /// The paging-exit count at which to be woken (`u64::MAX`: never).
    wake: u64,
}

/// The mode-specific cycles of a window.
fn mode_cycles(c: &Counters, mode: VirtMode) -> u64 {
    match mode {
        VirtMode::Shadow => c.paging_exit_cycles + c.walk_cycles,
        VirtMode::Nested => c.walk_cycles,
    }
}

/// Levels a nested walk descends at the nested page size.
fn nested_levels(cfg: &SimConfig) -> f64 {
    let skipped = match cfg.host.nested_page_size {
        PageSize::Size4K => 0,
        PageSize::Size2M | PageSize::Size4M => 1,
        PageSize::Size1G => 2,
    };
    f64::from(cfg.host.nested_levels.saturating_sub(skipped))
}

/// References of a 2D walk over those of a 1D walk, without walk caches (seed 002: `nm + n +
/// m` against `m`).
fn walk_ratio(format: PagingFormat, nested: f64) -> f64 {
    let g = f64::from(Geometry::of(format).levels);
    (g * nested + g + nested) / g
}

impl CostModel {
    /// The cost model with parameters `c` for the VM `cfg` (its profile gives the prior switch
    /// costs, its formats the walk ratio).
    pub fn new(c: &CostModelConfig, cfg: &SimConfig) -> CostModel {
        let p = &cfg.hypervisor.costs;
        let direct = (p.exit_round_trip + p.mode_switch) as f64;
        let mut m = CostModel {
            window: scaled(c.window_inst, c.time_scale),
            hysteresis: c.hysteresis,
            settle: c.settle,
            average: c.average as usize,
            ratio: walk_ratio(cfg.guest.format, nested_levels(cfg)),
            lat_1d: None,
            lat_2d: None,
            beta: None,
            to_nested: SwitchCost {
                prior: direct,
                ..SwitchCost::default()
            },
            to_shadow: SwitchCost {
                prior: direct + p.make_shadow as f64,
                ..SwitchCost::default()
            },
            since_switch: 0,
            prev_rate: None,
            transient: true,
            pending: None,
            recent: VecDeque::with_capacity(c.average as usize),
            regret: 0.0,
            last: (0.0, 0.0),
            exits_at_window: 0,
            exit_cost: 0.0,
            wake: u64::MAX,
        };
        m.exit_cost = (p.exit_round_trip
            + [
                p.hidden_fault,
                p.reflect_fault,
                p.emulate_write,
                p.cr3_write,
                p.invlpg,
            ]
            .into_iter()
            .min()
            .unwrap_or(0)) as f64;
        if c.start == VirtMode::Shadow {
            m.wake = m.exits_needed(0.0, 0);
        }
        m
    }

    /// The paging-exit count (since the start) whose cost, with the gain already accumulated,
    /// pays for a switch to nested paging even if nested paging cost `nested` cycles over the
    /// window; `exits` the count at the window's start.
    fn exits_needed(&self, nested: f64, exits: u64) -> u64 {
        let budget =
            (1.0 + self.hysteresis) * self.switch_cost(VirtMode::Nested) - self.regret + nested;
        exits + (budget / self.exit_cost.max(1.0)).ceil().max(1.0) as u64
    }

    /// The paging-exit count (since the start) at which the policy wants to be woken.
    pub fn exit_wake(&self) -> u64 {
        self.wake
    }

    /// Switches to `to`, predicted to cost `expected` mode-specific cycles per instruction;
    /// the switch's transient is measured next.
    fn switch(&mut self, to: VirtMode, expected: f64) -> Action {
        self.since_switch = 0;
        self.prev_rate = None;
        self.transient = true;
        self.regret = 0.0;
        self.recent.clear();
        self.wake = u64::MAX;
        self.pending = Some(Pending {
            to,
            expected,
            direct: 0,
            excess: 0.0,
        });
        Action::Switch(to)
    }

    /// Exits since the start reached [`Self::exit_wake`] (under shadow paging): their cost
    /// alone pays for the switch to nested paging.
    pub fn on_exits(&mut self, exits: u64) -> Action {
        let cycles = (exits - self.exits_at_window) as f64 * self.exit_cost;
        let nested = self.last.1 * self.window as f64;
        if self.regret + cycles - nested
            > (1.0 + self.hysteresis) * self.switch_cost(VirtMode::Nested)
        {
            return self.switch(VirtMode::Nested, self.last.1);
        }
        self.wake = u64::MAX;
        Action::Stay
    }

    /// The PMU window in instructions.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The state for the timeline: in a switch's (or the start's) transient, or judging.
    pub fn state(&self) -> &'static str {
        if self.transient {
            "settle"
        } else {
            "judge"
        }
    }

    /// The last settled window's `(current, other)` mode-specific cycles per instruction.
    pub fn prediction(&self) -> (f64, f64) {
        self.last
    }

    /// The accumulated gain of the other mode, in cycles.
    pub fn regret(&self) -> f64 {
        self.regret
    }

    /// The estimated cost of a switch to `to`, in cycles.
    pub fn switch_cost(&self, to: VirtMode) -> f64 {
        match to {
            VirtMode::Shadow => self.to_shadow.estimate(),
            VirtMode::Nested => self.to_nested.estimate(),
        }
    }

    /// Whether a window whose rate is `rate` still belongs to the transient of the last switch
    /// (or of the start).
    fn settling(&self, rate: f64) -> bool {
        let falling = self.prev_rate.is_some_and(|p| rate < SETTLED * p);
        self.since_switch <= self.settle
            || (self.transient && falling && self.since_switch <= MAX_SETTLE)
    }

    /// The end of a PMU window spent in `mode`, `exits` paging exits since the start.
    pub fn on_window(&mut self, c: &Counters, exits: u64, mode: VirtMode) -> Action {
        self.exits_at_window = exits;
        self.wake = u64::MAX;
        self.since_switch = self.since_switch.saturating_add(1);
        let rate = mode_cycles(c, mode) as f64 / c.instructions.max(1) as f64;
        let settling = self.settling(rate);
        self.prev_rate = Some(rate);
        self.transient = settling;
        if settling {
            if let Some(p) = &mut self.pending {
                p.direct += c.switch_cycles;
                p.excess += mode_cycles(c, mode) as f64 - p.expected * c.instructions as f64;
            }
            return Action::Stay;
        }
        if let Some(p) = self.pending.take() {
            let cost = match p.to {
                VirtMode::Shadow => &mut self.to_shadow,
                VirtMode::Nested => &mut self.to_nested,
            };
            cost.sum += p.direct as f64 + p.excess.max(0.0);
            cost.n += 1;
        }
        if self.recent.len() == self.average {
            self.recent.pop_front();
        }
        self.recent.push_back(*c);
        self.learn(mode);
        let (current, other) = self.predict(c, mode);
        self.last = (current, other);
        let unknown = mode != VirtMode::Shadow && self.beta.is_none() && c.kernel_cycles > 0;
        let gain = if unknown { 0.0 } else { current - other };
        self.regret = (self.regret + gain * c.instructions as f64).max(0.0);
        let to = match mode {
            VirtMode::Shadow => VirtMode::Nested,
            VirtMode::Nested => VirtMode::Shadow,
        };
        if self.regret > (1.0 + self.hysteresis) * self.switch_cost(to) {
            return self.switch(to, other);
        }
        if mode == VirtMode::Shadow {
            self.wake = self.exits_needed(other * self.window as f64, exits);
        }
        Action::Stay
    }

    /// Learns, from the recent settled windows, the walk latency of `mode` and, under shadow
    /// paging, the exit cycles per kernel cycle.
    fn learn(&mut self, mode: VirtMode) {
        let (mut misses, mut walk, mut exits, mut kernel, mut count) = (0u64, 0, 0, 0, 0);
        for c in &self.recent {
            misses += c.l2_dtlb_misses;
            walk += c.walk_cycles;
            exits += c.paging_exit_cycles;
            kernel += c.kernel_cycles;
            count += c.paging_exits;
        }
        let lat = (misses > 0).then(|| walk as f64 / misses as f64);
        match mode {
            VirtMode::Shadow => {
                self.lat_1d = lat.or(self.lat_1d);
                if kernel > 0 {
                    self.beta = Some(exits as f64 / kernel as f64);
                }
                if count > 0 {
                    self.exit_cost = exits as f64 / count as f64;
                }
            }
            VirtMode::Nested => self.lat_2d = lat.or(self.lat_2d),
        }
    }

    /// `(current, other)`: the mode-specific cycles per instruction of window `c` in `mode`,
    /// measured, and in the other mode, predicted.
    fn predict(&self, c: &Counters, mode: VirtMode) -> (f64, f64) {
        let n = c.instructions.max(1) as f64;
        let misses = c.l2_dtlb_misses as f64;
        match mode {
            VirtMode::Shadow => {
                let lat_2d = self
                    .lat_2d
                    .unwrap_or_else(|| self.lat_1d.unwrap_or(0.0) * self.ratio);
                (mode_cycles(c, mode) as f64 / n, misses * lat_2d / n)
            }
            VirtMode::Nested => {
                let lat_1d = self
                    .lat_1d
                    .unwrap_or_else(|| self.lat_2d.unwrap_or(0.0) / self.ratio);
                let exits = self.beta.unwrap_or(0.0) * c.kernel_cycles as f64;
                (c.walk_cycles as f64 / n, (exits + misses * lat_1d) / n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_machine;

    /// bhargava08 under kvm-modern: a switch to nested paging costs 1,750 cycles before one is
    /// measured.
    fn model(average: u32) -> CostModel {
        let mut cfg = SimConfig::new(load_machine("bhargava08").unwrap());
        cfg.host.nested_page_size = PageSize::Size4K;
        let c = CostModelConfig {
            start: VirtMode::Shadow,
            time_scale: 1.0,
            window_inst: 1000.0,
            hysteresis: 0.0,
            settle: 1,
            average,
        };
        CostModel::new(&c, &cfg)
    }

    fn w(misses: u64, walk: u64, exit_cycles: u64, kernel: u64) -> Counters {
        Counters {
            instructions: 1000,
            cycles: 2000 + walk + exit_cycles + kernel,
            l2_dtlb_misses: misses,
            walk_cycles: walk,
            paging_exit_cycles: exit_cycles,
            kernel_cycles: kernel,
            ..Counters::default()
        }
    }

    #[test]
    fn the_walk_ratio_is_that_of_seed_002() {
        // 4-level guest over 4-level nested tables: 24 references against 4.
        assert_eq!(walk_ratio(PagingFormat::Long4, 4.0), 6.0);
        // 32-bit guest over 3-level (2 MiB) nested tables: 11 against 2.
        assert_eq!(walk_ratio(PagingFormat::X86_32, 3.0), 5.5);
    }

    #[test]
    fn a_tlb_bound_shadow_phase_stays_and_exits_that_outweigh_the_switch_go_nested() {
        let mut m = model(2);
        assert_eq!(m.switch_cost(VirtMode::Nested), 1750.0);
        // The start settles; then 100 misses × 20 cycles and no exits: nested would cost
        // 100 × 20 × 6 = 12 cycles per instruction against 2.
        for _ in 0..3 {
            assert_eq!(
                m.on_window(&w(100, 2000, 0, 0), 0, VirtMode::Shadow),
                Action::Stay
            );
        }
        assert_eq!(m.prediction(), (2.0, 12.0));
        assert_eq!(m.regret(), 0.0);
        // 11,000 exit cycles: shadow costs 13 against 12, a gain of 1,000 per window.
        assert_eq!(
            m.on_window(&w(100, 2000, 11_000, 0), 0, VirtMode::Shadow),
            Action::Stay
        );
        assert_eq!(m.regret(), 1000.0);
        // The sum passes the 1,750-cycle switch in the second such window.
        assert_eq!(
            m.on_window(&w(100, 2000, 11_000, 0), 0, VirtMode::Shadow),
            Action::Switch(VirtMode::Nested)
        );
        assert_eq!(m.regret(), 0.0);
        assert_eq!(m.state(), "settle");
    }

    #[test]
    fn a_window_where_the_current_mode_is_ahead_restarts_the_sum() {
        let mut m = model(2);
        m.on_window(&w(100, 2000, 0, 0), 0, VirtMode::Shadow);
        m.on_window(&w(100, 2000, 11_000, 0), 0, VirtMode::Shadow);
        assert_eq!(m.regret(), 1000.0);
        m.on_window(&w(100, 2000, 0, 0), 0, VirtMode::Shadow);
        assert_eq!(m.regret(), 0.0);
    }

    #[test]
    fn under_nested_paging_kernel_work_predicts_the_exits_and_the_transient_is_measured() {
        let mut m = model(1);
        m.on_window(&w(100, 2000, 0, 0), 0, VirtMode::Shadow);
        // 30,000 exit cycles over 3,000 kernel cycles: 10 per kernel cycle.
        assert_eq!(
            m.on_window(&w(100, 2000, 30_000, 3000), 0, VirtMode::Shadow),
            Action::Switch(VirtMode::Nested)
        );
        // Nested was predicted at 12 cycles per instruction when the VM switched (100 misses ×
        // 20 × 6). The first window carries the switch (1,200 cycles) and 9,000 walk cycles;
        // the second, 5,000, still falls by more than a tenth, so it belongs to the transient
        // too; the third is the first settled window. The transient: 14,000 cycles against
        // the 24,000 predicted — nothing beyond the prediction.
        let mut first = w(100, 9000, 0, 3000);
        first.switch_cycles = 1200;
        assert_eq!(m.on_window(&first, 0, VirtMode::Nested), Action::Stay);
        assert_eq!(m.state(), "settle");
        assert_eq!(
            m.on_window(&w(100, 5000, 0, 3000), 0, VirtMode::Nested),
            Action::Stay
        );
        assert_eq!(m.switch_cost(VirtMode::Nested), 1750.0, "still the prior");
        assert_eq!(
            m.on_window(&w(100, 5000, 0, 3000), 0, VirtMode::Nested),
            Action::Stay
        );
        assert_eq!(m.switch_cost(VirtMode::Nested), 1200.0);
        // Shadow predicted from the kernel cycles: 10 × 3,000 exit cycles plus 100 misses ×
        // 20 cycles, 32 per instruction against nested's 5.
        assert_eq!(m.prediction(), (5.0, 32.0));
        // The kernel goes quiet and the misses grow: nested costs 50 per instruction, shadow
        // is predicted at 200 × 20 / 1000 = 4; the 46,000-cycle gain pays for the switch.
        assert_eq!(
            m.on_window(&w(200, 50_000, 0, 0), 0, VirtMode::Nested),
            Action::Switch(VirtMode::Shadow)
        );
        assert_eq!(m.prediction(), (50.0, 4.0));
    }

    #[test]
    fn a_costly_switch_waits_until_the_gain_has_paid_for_it() {
        let mut m = model(1);
        m.on_window(&w(0, 0, 0, 0), 0, VirtMode::Nested);
        // A switch to shadow paging costs (kvm-modern) its round trip, handler and a root.
        // Nested walks cost 40 cycles per miss, so shadow walks are predicted at 40 / 6: the
        // gain per window is 4,000 − 100 × 40 / 6 cycles, and pays for the switch after a few.
        let cost = m.switch_cost(VirtMode::Shadow);
        let gain = 4000.0 - 100.0 * (40.0 / 6.0);
        let windows = (cost / gain).floor() as usize + 1;
        assert!(windows > 1);
        for _ in 1..windows {
            assert_eq!(
                m.on_window(&w(100, 4000, 0, 0), 0, VirtMode::Nested),
                Action::Stay
            );
        }
        assert_eq!(
            m.on_window(&w(100, 4000, 0, 0), 0, VirtMode::Nested),
            Action::Switch(VirtMode::Shadow)
        );
    }
}
