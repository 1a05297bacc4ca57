//! DAV²M, the dynamically adaptive virtualized virtual memory policy of seed 001 §6: five
//! states (Shadow, PreNested, Prepaging, Nested, PreShadow), thresholds on the paging-exit
//! count (under shadow paging) and the TLB-miss count (under nested paging) that adapt,
//! probes of the other mode judged by a 10-step moving average of the CPI with a margin
//! `pFactor`, and damping when switches of one direction come closer than `window_trans`.
//!
//! The transition function is pure ([`Dav2m::step`]: state and input → state and action); it
//! is the paper's `determineState` followed by `transState`, run on the two events the paper
//! names: a PMU overflow every `window_inst` instructions ([`Input::Window`]) and a paging
//! exit ([`Input::Exits`]; the loop delivers the exit that crosses `threshold_vexit`, the only
//! exit on which the paper's code can change anything, see below).
//!
//! **Reading the pseudo-code** (docs/policies.md has the table). The published code cannot be
//! run literally; where it is silent or contradicts the prose, vmmu reads it so:
//! - R1 — Nested → PreShadow restarts `count_punit`: the PreShadow probe lasts `window_tmiss`
//!   from the switch (literally `count_punit` would already equal `window_tmiss`, and the
//!   probe would never end).
//! - R2 — "count_punit mod count_vexit" is read as `count_punit mod window_vexit`, applied at
//!   PMU overflows: PreShadow restarts `count_vexit` every `window_vexit`, as Shadow does.
//! - R3 — PreShadow whose probe finds shadow paging no worse goes to Shadow (the prose: "Like
//!   PreNested, PreShadow holds for a limited duration"; "no state analogous to PrePaging is
//!   needed" after it). The code has no such edge.
//! - R4 — the paging mode follows the state (Shadow and PreShadow run shadow paging, the others
//!   nested), so PreShadow → PreNested switches too; `transState` lists only four switching
//!   edges. A switch into shadow paging restarts `count_vexit`: it counts the current shadow
//!   period's exits (otherwise the count that triggered the last probe fires again at once).
//! - R5 — the transition counters start at `window_trans` (no earlier switch), and restart as
//!   `trans_reset` says.
//! - R6 — window tests are "at least", not "equal": they run at PMU overflows, and an overflow
//!   always comes.
//! - R7 — `window_prepaging` (not given) is counted, as the code counts it, from the shadow →
//!   nested switch.
//! - R8 — "increase" and "increment" multiply a threshold by `threshold_step` (not given).
//! - R10 — a probe that finds the other mode better (PreNested → Prepaging, PreShadow →
//!   Shadow) divides the threshold that started it by `threshold_step`, as the prose says
//!   ("If performance increases due to the switch, the threshold is adjusted so that switch
//!   will occur at a lower threshold"); the pseudo-code only raises (`lower_on_success`).
//! - R9 — a probe entered on an exit, between PMU overflows, does not count the partial window
//!   it starts in: PreNested "expires when at least window_vexit instructions have been
//!   retired" (the prose), not at the next overflow.

use super::{Action, Counters};
use crate::config::{scaled, Dav2mConfig, TransReset, VirtMode};

/// DAV²M's states (seed 001 Figure 7).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum State {
    /// Shadow paging; paging exits counted against `threshold_vexit`.
    Shadow,
    /// Nested paging on probation for `window_vexit` after a shadow → nested switch.
    PreNested,
    /// Nested paging while the TLB settles after the switch, before Nested.
    Prepaging,
    /// Nested paging; TLB misses counted against `threshold_tmiss` over `window_tmiss`.
    Nested,
    /// Shadow paging on probation for `window_tmiss` after a nested → shadow switch.
    PreShadow,
}

impl State {
    /// The paging mode the state runs (R4).
    pub const fn mode(self) -> VirtMode {
        match self {
            State::Shadow | State::PreShadow => VirtMode::Shadow,
            State::PreNested | State::Prepaging | State::Nested => VirtMode::Nested,
        }
    }

    /// The name in results.
    pub const fn name(self) -> &'static str {
        match self {
            State::Shadow => "Shadow",
            State::PreNested => "PreNested",
            State::Prepaging => "Prepaging",
            State::Nested => "Nested",
            State::PreShadow => "PreShadow",
        }
    }
}

/// What wakes the policy.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// A PMU overflow: the window's counters and the paging exits since the start.
    Window(&'a Counters, u64),
    /// Paging exits since the start reached [`Dav2m::exit_wake`].
    Exits(u64),
}

/// The parameters in PMU windows (time) and scaled counts (thresholds).
#[derive(Clone, Debug, PartialEq)]
struct Params {
    vexit: u64,
    tmiss: u64,
    trans: u64,
    prepaging: u64,
    p_factor: f64,
    average: usize,
    step: f64,
    cpi_reset: bool,
    trans_reset: TransReset,
    lower: bool,
}

/// The last `n` window CPIs.
#[derive(Clone, Debug, PartialEq)]
struct Average {
    values: Vec<f64>,
    next: usize,
}

impl Average {
    fn push(&mut self, v: f64, n: usize) {
        if self.values.len() < n {
            self.values.push(v);
        } else {
            self.values[self.next] = v;
        }
        self.next = (self.next + 1) % n;
    }

    fn mean(&self) -> f64 {
        if self.values.is_empty() {
            0.0
        } else {
            self.values.iter().sum::<f64>() / self.values.len() as f64
        }
    }

    fn clear(&mut self) {
        self.values.clear();
        self.next = 0;
    }
}

/// DAV²M's state and parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Dav2m {
    p: Params,
    state: State,
    /// PMU overflows since the last restart.
    count_punit: u64,
    /// `count_punit` restarted between overflows: the next overflow ends a partial window
    /// (R9).
    partial: bool,
    /// `count_vexit` = paging exits since the start − this.
    vexit_base: u64,
    count_tmiss: u64,
    count_s2n: u64,
    count_n2s: u64,
    threshold_vexit: f64,
    threshold_tmiss: f64,
    cpi: Average,
    cpi_shadow: f64,
    cpi_nested: f64,
}

/// Windows as a whole number of PMU windows (validated).
fn units(window: f64, window_inst: f64) -> u64 {
    (window / window_inst).round().max(1.0) as u64
}

impl Dav2m {
    /// DAV²M with parameters `c` (validated), in its start state.
    pub fn new(c: &Dav2mConfig) -> Dav2m {
        let trans = units(c.window_trans, c.window_inst);
        Dav2m {
            p: Params {
                vexit: units(c.window_vexit, c.window_inst),
                tmiss: units(c.window_tmiss, c.window_inst),
                trans,
                prepaging: units(c.window_prepaging, c.window_inst),
                p_factor: c.p_factor,
                average: c.cpi_average as usize,
                step: c.threshold_step,
                cpi_reset: c.cpi_reset_at_switch,
                trans_reset: c.trans_reset,
                lower: c.lower_on_success,
            },
            state: match c.start {
                VirtMode::Nested => State::Nested,
                VirtMode::Shadow => State::Shadow,
            },
            count_punit: 0,
            partial: false,
            vexit_base: 0,
            count_tmiss: 0,
            count_s2n: trans,
            count_n2s: trans,
            threshold_vexit: c.threshold_vexit * c.time_scale,
            threshold_tmiss: c.threshold_tmiss * c.time_scale,
            cpi: Average {
                values: Vec::with_capacity(c.cpi_average as usize),
                next: 0,
            },
            cpi_shadow: 0.0,
            cpi_nested: 0.0,
        }
    }

    /// The PMU window in instructions.
    pub fn window(c: &Dav2mConfig) -> u64 {
        scaled(c.window_inst, c.time_scale)
    }

    /// The state.
    pub fn state(&self) -> State {
        self.state
    }

    /// `threshold_vexit` now (scaled).
    pub fn threshold_vexit(&self) -> f64 {
        self.threshold_vexit
    }

    /// `threshold_tmiss` now (scaled).
    pub fn threshold_tmiss(&self) -> f64 {
        self.threshold_tmiss
    }

    /// `count_punit` now.
    pub fn count_punit(&self) -> u64 {
        self.count_punit
    }

    /// `count_tmiss` now.
    pub fn count_tmiss(&self) -> u64 {
        self.count_tmiss
    }

    /// `count_vexit` when `exits` paging exits have happened since the start.
    pub fn count_vexit(&self, exits: u64) -> u64 {
        exits.saturating_sub(self.vexit_base)
    }

    /// The stored CPIs `(cpi_shadow, cpi_nested)`.
    pub fn cpis(&self) -> (f64, f64) {
        (self.cpi_shadow, self.cpi_nested)
    }

    /// The transition counters `(count_s2n, count_n2s)`.
    pub fn trans_counts(&self) -> (u64, u64) {
        (self.count_s2n, self.count_n2s)
    }

    /// The paging-exit count (since the start) whose exit makes `count_vexit` exceed
    /// `threshold_vexit`, in the states that watch it; `u64::MAX` in the others.
    pub fn exit_wake(&self) -> u64 {
        match self.state {
            State::Shadow | State::PreShadow => {
                self.vexit_base + self.threshold_vexit.floor() as u64 + 1
            }
            State::PreNested | State::Prepaging | State::Nested => u64::MAX,
        }
    }

    /// A PMU overflow.
    pub fn on_window(&mut self, c: &Counters, exits: u64) -> Action {
        let (next, action) = self.step(Input::Window(c, exits));
        *self = next;
        action
    }

    /// The exit that reached [`Dav2m::exit_wake`].
    pub fn on_exits(&mut self, exits: u64) -> Action {
        let (next, action) = self.step(Input::Exits(exits));
        *self = next;
        action
    }

    /// The transition function: the paper's two event handlers (seed 001 §6, "Algorithm
    /// specifics"), `determineState` then `transState`.
    pub fn step(&self, input: Input<'_>) -> (Dav2m, Action) {
        let mut n = self.clone();
        let (exits, at_window) = match input {
            Input::Window(c, exits) => {
                n.cpi.push(c.cpi(), n.p.average);
                if n.state == State::Nested {
                    n.count_tmiss += c.l2_dtlb_misses;
                }
                if n.partial {
                    n.partial = false;
                } else {
                    n.count_punit += 1;
                }
                n.count_s2n += 1;
                n.count_n2s += 1;
                (exits, true)
            }
            Input::Exits(exits) => (exits, false),
        };
        let next = n.determine(exits, at_window);
        let action = n.trans(next, exits);
        (n, action)
    }

    /// `determineState`: the next state, updating the counters and stored CPIs on the way.
    /// Between PMU overflows only the threshold test can fire (R6).
    fn determine(&mut self, exits: u64, at_window: bool) -> State {
        let p = &self.p;
        match self.state {
            State::Shadow | State::PreShadow => {
                if self.count_vexit(exits) as f64 > self.threshold_vexit {
                    self.cpi_shadow = self.cpi.mean();
                    self.count_punit = 0;
                    self.partial = !at_window; // R9
                    return State::PreNested;
                }
                if !at_window {
                    return self.state;
                }
                if self.state == State::PreShadow {
                    if self.count_punit >= p.tmiss {
                        self.cpi_shadow = self.cpi.mean();
                        self.count_punit = 0;
                        if self.cpi_shadow > self.cpi_nested * p.p_factor {
                            self.count_tmiss = 0;
                            self.threshold_tmiss *= p.step;
                            return State::Nested;
                        }
                        self.vexit_base = exits;
                        if p.lower {
                            self.threshold_tmiss /= p.step; // R10
                        }
                        return State::Shadow; // R3
                    }
                    if self.count_punit.is_multiple_of(p.vexit) {
                        self.vexit_base = exits; // R2
                    }
                } else if self.count_punit >= p.vexit {
                    self.vexit_base = exits;
                    self.count_punit = 0;
                }
                self.state
            }
            State::PreNested | State::Prepaging | State::Nested => {
                if !at_window {
                    return self.state;
                }
                match self.state {
                    State::PreNested if self.count_punit >= p.vexit => {
                        self.cpi_nested = self.cpi.mean();
                        if self.cpi_nested > self.cpi_shadow * p.p_factor {
                            self.threshold_vexit *= p.step;
                            return State::Shadow;
                        }
                        if p.lower {
                            self.threshold_vexit /= p.step; // R10
                        }
                        State::Prepaging
                    }
                    State::Nested if self.count_punit >= p.tmiss => {
                        if self.count_tmiss as f64 > self.threshold_tmiss {
                            self.cpi_nested = self.cpi.mean();
                            self.count_punit = 0; // R1
                            return State::PreShadow;
                        }
                        self.count_punit = 0;
                        self.count_tmiss = 0;
                        State::Nested
                    }
                    State::Prepaging if self.count_punit >= p.prepaging => {
                        self.count_punit = 0;
                        self.count_tmiss = 0;
                        State::Nested
                    }
                    other => other,
                }
            }
        }
    }

    /// `transState`: moves to `next`, switching the paging mode when the state's mode changes
    /// (R4) and damping switches of one direction closer than `window_trans`.
    fn trans(&mut self, next: State, exits: u64) -> Action {
        let from = self.state.mode();
        self.state = next;
        let to = next.mode();
        if from == to {
            return Action::Stay;
        }
        let p = &self.p;
        let count = match to {
            VirtMode::Shadow => &mut self.count_n2s,
            VirtMode::Nested => &mut self.count_s2n,
        };
        let damped = *count < p.trans;
        if damped {
            self.threshold_tmiss *= p.step;
            self.threshold_vexit *= p.step;
        }
        if damped || p.trans_reset == TransReset::EverySwitch {
            *count = 0;
        }
        if to == VirtMode::Shadow {
            self.vexit_base = exits; // R4
        }
        if p.cpi_reset {
            self.cpi.clear();
        }
        Action::Switch(to)
    }
}

#[cfg(test)]
mod tests {
    //! Hand-made counter sequences that walk every edge of seed 001 Figure 7 (with the
    //! readings above), checking the exact state, action and thresholds after each step.
    //! Parameters: PMU window 1,000 instructions; window_vexit 1 window, window_tmiss 3,
    //! window_prepaging 2, window_trans 10; thresholds 5 exits and 50 misses; pFactor 1.1;
    //! a 2-window CPI average; thresholds double.

    use super::*;

    fn cfg(start: VirtMode) -> Dav2mConfig {
        Dav2mConfig {
            start,
            time_scale: 1.0,
            window_inst: 1000.0,
            window_vexit: 1000.0,
            window_tmiss: 3000.0,
            window_trans: 10_000.0,
            window_prepaging: 2000.0,
            threshold_vexit: 5.0,
            threshold_tmiss: 50.0,
            p_factor: 1.1,
            cpi_average: 2,
            threshold_step: 2.0,
            cpi_reset_at_switch: false,
            trans_reset: TransReset::EverySwitch,
            lower_on_success: true,
        }
    }

    /// A window of 1,000 instructions at `cpi` with `misses` L2 DTLB misses.
    fn w(cpi: f64, misses: u64) -> Counters {
        Counters {
            instructions: 1000,
            cycles: (cpi * 1000.0) as u64,
            l2_dtlb_misses: misses,
            ..Counters::default()
        }
    }

    struct Run {
        d: Dav2m,
        exits: u64,
    }

    impl Run {
        fn new(start: VirtMode) -> Run {
            Run {
                d: Dav2m::new(&cfg(start)),
                exits: 0,
            }
        }
        /// A window with `exits` more paging exits.
        fn window(&mut self, cpi: f64, misses: u64, exits: u64) -> Action {
            self.exits += exits;
            self.d.on_window(&w(cpi, misses), self.exits)
        }
        /// `n` more exits between windows, delivered when they reach the wake point.
        fn exits(&mut self, n: u64) -> Action {
            self.exits += n;
            if self.exits >= self.d.exit_wake() {
                self.d.on_exits(self.exits)
            } else {
                Action::Stay
            }
        }
        fn at(&self, s: State, vexit: f64, tmiss: f64) {
            assert_eq!(self.d.state(), s);
            assert_eq!(self.d.threshold_vexit(), vexit, "threshold_vexit");
            assert_eq!(self.d.threshold_tmiss(), tmiss, "threshold_tmiss");
        }
    }

    const NESTED: Action = Action::Switch(VirtMode::Nested);
    const SHADOW: Action = Action::Switch(VirtMode::Shadow);

    #[test]
    fn shadow_stays_below_the_exit_threshold_and_restarts_the_count_every_window_vexit() {
        let mut r = Run::new(VirtMode::Shadow);
        assert_eq!(r.d.exit_wake(), 6, "the sixth exit exceeds 5");
        assert_eq!(r.window(2.0, 0, 5), Action::Stay);
        r.at(State::Shadow, 5.0, 50.0);
        assert_eq!(r.d.count_vexit(r.exits), 0, "restarted at window_vexit");
        assert_eq!(r.d.count_punit(), 0);
        assert_eq!(r.d.exit_wake(), 11);
        assert_eq!(r.exits(5), Action::Stay);
        r.at(State::Shadow, 5.0, 50.0);
    }

    #[test]
    fn shadow_to_prenested_on_the_exit_that_exceeds_the_threshold() {
        let mut r = Run::new(VirtMode::Shadow);
        r.window(2.0, 0, 0);
        r.window(3.0, 0, 0);
        assert_eq!(r.exits(5), Action::Stay);
        assert_eq!(r.exits(1), NESTED, "exit 6 > threshold 5");
        r.at(State::PreNested, 5.0, 50.0);
        assert_eq!(
            r.d.cpis().0,
            2.5,
            "cpi_shadow is the moving average at the switch"
        );
        assert_eq!(r.d.count_punit(), 0);
        assert_eq!(
            r.d.exit_wake(),
            u64::MAX,
            "nested states do not watch exits"
        );
        // Both transition counters started at window_trans (R5): no damping.
        assert_eq!(r.d.trans_counts(), (0, 12));
    }

    #[test]
    fn a_probe_entered_between_overflows_lasts_window_vexit_full_windows() {
        let mut r = Run::new(VirtMode::Shadow);
        r.window(2.0, 0, 0);
        assert_eq!(r.exits(6), NESTED);
        // The overflow that ends the partial window does not end the probe (R9).
        assert_eq!(r.window(9.0, 0, 0), Action::Stay);
        r.at(State::PreNested, 5.0, 50.0);
        assert_eq!(r.d.count_punit(), 0);
        assert_eq!(r.window(9.0, 0, 0), SHADOW);
    }

    #[test]
    fn a_window_whose_exits_exceed_the_threshold_also_probes() {
        let mut r = Run::new(VirtMode::Shadow);
        assert_eq!(r.window(2.0, 0, 9), NESTED);
        r.at(State::PreNested, 5.0, 50.0);
    }

    #[test]
    fn prenested_back_to_shadow_when_nested_is_worse_raises_threshold_vexit() {
        let mut r = Run::new(VirtMode::Shadow);
        r.window(2.0, 0, 0);
        assert_eq!(r.window(2.0, 0, 6), NESTED);
        // One nested window at CPI 6: the 2-window average is (2 + 6) / 2 = 4 > 2 × 1.1.
        assert_eq!(r.window(6.0, 0, 0), SHADOW);
        r.at(State::Shadow, 10.0, 50.0);
        assert_eq!(r.d.cpis(), (2.0, 4.0));
        assert_eq!(
            r.d.count_vexit(r.exits),
            0,
            "a switch into shadow restarts count_vexit"
        );
        assert_eq!(r.d.exit_wake(), r.exits + 11);
    }

    #[test]
    fn prenested_to_prepaging_to_nested_when_nested_is_not_worse() {
        let mut r = Run::new(VirtMode::Shadow);
        r.window(2.0, 0, 0);
        assert_eq!(r.window(2.0, 0, 6), NESTED);
        // (2 + 2.2) / 2 = 2.1 is not above 2 × 1.1: the probe succeeded, threshold_vexit
        // halves (R10).
        assert_eq!(r.window(2.2, 0, 0), Action::Stay);
        r.at(State::Prepaging, 2.5, 50.0);
        assert_eq!(r.d.cpis().1, 2.1);
        // window_prepaging (2 windows) counts from the switch (R7).
        assert_eq!(r.window(2.0, 500, 0), Action::Stay);
        r.at(State::Nested, 2.5, 50.0);
        assert_eq!(r.d.count_punit(), 0);
        assert_eq!(r.d.count_tmiss(), 0, "Prepaging's misses are not counted");
    }

    fn to_nested(r: &mut Run) {
        r.window(2.0, 0, 0);
        r.window(2.0, 0, 0);
        assert_eq!(r.window(2.0, 0, 6), NESTED);
        r.window(2.0, 0, 0);
        r.window(2.0, 0, 0);
        r.at(State::Nested, 2.5, 50.0);
    }

    #[test]
    fn nested_stays_when_misses_stay_below_threshold_tmiss_and_restarts_the_count() {
        let mut r = Run::new(VirtMode::Nested);
        r.at(State::Nested, 5.0, 50.0);
        for _ in 0..3 {
            assert_eq!(r.window(2.0, 16, 0), Action::Stay);
        }
        // 48 misses over window_tmiss: not above 50.
        r.at(State::Nested, 5.0, 50.0);
        assert_eq!(r.d.count_tmiss(), 0);
        assert_eq!(r.d.count_punit(), 0);
    }

    #[test]
    fn nested_to_preshadow_when_misses_exceed_threshold_tmiss() {
        let mut r = Run::new(VirtMode::Nested);
        r.window(2.0, 20, 0);
        r.window(2.0, 20, 0);
        assert_eq!(r.window(3.0, 20, 0), SHADOW);
        r.at(State::PreShadow, 5.0, 50.0);
        assert_eq!(r.d.cpis().1, 2.5, "cpi_nested stored on leaving Nested");
        assert_eq!(
            r.d.count_punit(),
            0,
            "the probe lasts window_tmiss from the switch (R1)"
        );
        assert_eq!(r.d.exit_wake(), 6);
    }

    #[test]
    fn preshadow_back_to_nested_when_shadow_is_worse_raises_threshold_tmiss() {
        let mut r = Run::new(VirtMode::Nested);
        for _ in 0..3 {
            r.window(2.0, 20, 0);
        }
        assert_eq!(r.window(3.0, 0, 2), Action::Stay);
        assert_eq!(r.window(3.0, 0, 2), Action::Stay);
        assert_eq!(r.window(3.0, 0, 2), NESTED);
        r.at(State::Nested, 5.0, 100.0);
        assert_eq!(r.d.cpis(), (3.0, 2.0));
        assert_eq!(r.d.count_tmiss(), 0);
    }

    #[test]
    fn preshadow_to_shadow_when_shadow_is_not_worse() {
        let mut r = Run::new(VirtMode::Nested);
        for _ in 0..3 {
            r.window(2.0, 20, 0);
        }
        for _ in 0..3 {
            r.window(2.1, 0, 1);
        }
        r.at(State::Shadow, 5.0, 25.0);
        assert_eq!(r.d.count_vexit(r.exits), 0);
        assert_eq!(r.d.count_punit(), 0);
    }

    #[test]
    fn preshadow_restarts_count_vexit_every_window_vexit_and_probes_nested_on_exits() {
        let mut r = Run::new(VirtMode::Nested);
        for _ in 0..3 {
            r.window(2.0, 20, 0);
        }
        assert_eq!(r.window(2.0, 0, 4), Action::Stay);
        assert_eq!(
            r.d.count_vexit(r.exits),
            0,
            "R2: restarted at a multiple of window_vexit"
        );
        assert_eq!(r.exits(6), NESTED);
        r.at(State::PreNested, 5.0, 50.0);
    }

    #[test]
    fn switches_of_one_direction_closer_than_window_trans_raise_both_thresholds() {
        let mut r = Run::new(VirtMode::Shadow);
        to_nested(&mut r);
        // Nested → PreShadow 3 windows later: the first n2s switch, not damped.
        for _ in 0..3 {
            r.window(2.0, 20, 0);
        }
        r.at(State::PreShadow, 2.5, 50.0);
        // PreShadow → PreNested: the second s2n switch, 5 windows after the first (< 10).
        assert_eq!(r.exits(3), NESTED);
        r.at(State::PreNested, 5.0, 100.0);
        assert_eq!(r.d.trans_counts().0, 0);
    }

    #[test]
    fn the_pseudo_code_alone_never_lowers_a_threshold() {
        let mut c = cfg(VirtMode::Shadow);
        c.lower_on_success = false;
        let mut r = Run {
            d: Dav2m::new(&c),
            exits: 0,
        };
        to_nested_unlowered(&mut r);
    }

    fn to_nested_unlowered(r: &mut Run) {
        r.window(2.0, 0, 0);
        r.window(2.0, 0, 0);
        assert_eq!(r.window(2.0, 0, 6), NESTED);
        r.window(2.0, 0, 0);
        r.window(2.0, 0, 0);
        r.at(State::Nested, 5.0, 50.0);
    }

    #[test]
    fn the_pseudo_code_placement_keeps_counting_from_the_last_damped_switch() {
        let mut c = cfg(VirtMode::Shadow);
        c.trans_reset = TransReset::WhenDamped;
        let mut r = Run {
            d: Dav2m::new(&c),
            exits: 0,
        };
        assert_eq!(r.exits(6), NESTED);
        assert_eq!(r.d.trans_counts(), (10, 10), "not damped, not restarted");
    }

    #[test]
    fn the_time_scale_scales_the_thresholds_and_not_the_counts_of_windows() {
        let mut c = cfg(VirtMode::Shadow);
        c.time_scale = 0.5;
        let d = Dav2m::new(&c);
        assert_eq!(d.threshold_vexit(), 2.5);
        assert_eq!(d.threshold_tmiss(), 25.0);
        assert_eq!(d.exit_wake(), 3);
        assert_eq!(Dav2m::window(&c), 500);
    }

    #[test]
    fn the_step_is_pure() {
        let d = Dav2m::new(&cfg(VirtMode::Shadow));
        let (a, x) = d.step(Input::Exits(6));
        let (b, y) = d.step(Input::Exits(6));
        assert_eq!((a, x), (b, y));
        assert_eq!(d.state(), State::Shadow);
    }
}
