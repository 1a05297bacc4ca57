//! The policy's hooks into the loop (docs/policies.md): a PMU window ends at the first event
//! boundary at or after each multiple of the window (`window_inst` × `time_scale`
//! instructions); a sampling policy pays a PMU-overflow exit there, reads the window's
//! counters and answers. Between windows the policy may ask to be woken at a paging-exit
//! count (DAV²M reacts on the exit that crosses its threshold): the loop compares the
//! hypervisor's paging-exit count with it between events, as it compares instruction counts
//! with the window's end. A switch the policy asks for is carried out by the hypervisor's one
//! mechanism. Each window becomes a record of the run's timeline.
//!
//! The policy starts when counting starts (after a warm-up, which runs in its start mode).

use super::Simulator;
use crate::error::{Error, Result};
use crate::policy::{self, Action, Policy};
use crate::result::WindowRecord;
use crate::vmm::exits::ExitReason;

/// The timeline's name of a decision.
pub(crate) fn decision_name(a: Action) -> &'static str {
    match a {
        Action::Stay => "stay",
        Action::Switch(m) => m.name(),
    }
}

/// Cumulative counters at a window boundary.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Snapshot {
    instructions: u64,
    cycles: u64,
    l1_dtlb_misses: u64,
    l2_dtlb_misses: u64,
    paging_exits: u64,
    paging_exit_cycles: u64,
    walk_cycles: u64,
    kernel_cycles: u64,
    switch_cycles: u64,
    switches: u64,
}

impl Snapshot {
    fn since(&self, o: &Snapshot) -> policy::Counters {
        policy::Counters {
            instructions: self.instructions - o.instructions,
            cycles: self.cycles - o.cycles,
            l1_dtlb_misses: self.l1_dtlb_misses - o.l1_dtlb_misses,
            l2_dtlb_misses: self.l2_dtlb_misses - o.l2_dtlb_misses,
            paging_exits: self.paging_exits - o.paging_exits,
            paging_exit_cycles: self.paging_exit_cycles - o.paging_exit_cycles,
            walk_cycles: self.walk_cycles - o.walk_cycles,
            kernel_cycles: self.kernel_cycles - o.kernel_cycles,
            switch_cycles: self.switch_cycles - o.switch_cycles,
        }
    }
}

/// What holds during the current window, for its record.
#[derive(Clone, Copy, Debug)]
struct InForce {
    state: &'static str,
    mode: &'static str,
    thresholds: (Option<f64>, Option<f64>),
}

/// A running policy, its windows and its timeline.
pub(super) struct Adaptive {
    policy: Policy,
    window: u64,
    samples: bool,
    /// Counted instructions at which the current window ends.
    pub(super) next: u64,
    last: Snapshot,
    now: InForce,
    timeline: Vec<WindowRecord>,
}

impl Adaptive {
    /// The adaptive part of simulator `sim` (configured in adaptive mode with a run-time
    /// policy), if any.
    pub(super) fn of(sim: &Simulator) -> Option<Box<Adaptive>> {
        let cfg = &sim.cfg;
        let p = cfg.policy.as_ref()?;
        let policy = Policy::new(cfg)?;
        let now = InForce {
            state: policy.state(),
            mode: sim.vmm.describe().paging.name(),
            thresholds: policy.thresholds(),
        };
        Some(Box::new(Adaptive {
            window: p.window(),
            samples: p.samples(),
            next: p.window(),
            last: Snapshot::default(),
            now,
            timeline: Vec::new(),
            policy,
        }))
    }

    /// The paging-exit count at which the policy wants to be woken.
    pub(super) fn exit_wake(&self) -> u64 {
        self.policy.exit_wake()
    }

    /// The timeline so far.
    pub(super) fn timeline(&self) -> &[WindowRecord] {
        &self.timeline
    }

    fn record(&mut self, c: &policy::Counters, cumulative: u64) {
        let per_k = |n: u64| {
            if c.instructions == 0 {
                0.0
            } else {
                1000.0 * n as f64 / c.instructions as f64
            }
        };
        self.timeline.push(WindowRecord {
            window: self.timeline.len() as u64,
            instructions: c.instructions,
            instructions_end: cumulative,
            cycles: c.cycles,
            l1_dtlb_misses: c.l1_dtlb_misses,
            l2_dtlb_misses: c.l2_dtlb_misses,
            paging_exits: c.paging_exits,
            cpi: c.cpi(),
            tlb_misses_per_kinstr: per_k(c.l2_dtlb_misses),
            paging_exits_per_kinstr: per_k(c.paging_exits),
            threshold_vexit: self.now.thresholds.0,
            threshold_tmiss: self.now.thresholds.1,
            state: self.now.state.to_string(),
            mode: self.now.mode.to_string(),
            switches: 0,
            decision: "end".to_string(),
        });
    }
}

impl Simulator {
    /// The counters a policy reads, cumulative.
    pub(super) fn snapshot(&self) -> Snapshot {
        let tlb = self.mmu.tlb.stats();
        let misses = |name: &str| {
            tlb.iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |(_, s)| s.misses)
        };
        let exits = self.vmm.exits();
        Snapshot {
            instructions: self.counters.instructions,
            cycles: self.cycles_by_cause().total(),
            l1_dtlb_misses: misses("l1d"),
            l2_dtlb_misses: misses("l2"),
            paging_exits: self.vmm.paging_exits(),
            paging_exit_cycles: self.vmm.paging_exit_cycles(),
            walk_cycles: self.mmu.stats.translation_cycles,
            kernel_cycles: self.os.stats.kernel_cycles,
            switch_cycles: exits.cycles(ExitReason::ModeSwitch),
            switches: self.vmm.stats.mode_switches,
        }
    }

    /// Wakes the policy where it asked: at the paging-exit count it named, and at the end of
    /// a PMU window.
    pub(super) fn adapt(&mut self) -> Result<()> {
        let Some(mut a) = self.adaptive.take() else {
            return Ok(());
        };
        let res = self.adapt_with(&mut a);
        self.adaptive = Some(a);
        res
    }

    fn adapt_with(&mut self, a: &mut Adaptive) -> Result<()> {
        let exits = self.vmm.paging_exits();
        if exits >= a.policy.exit_wake() {
            let act = a.policy.on_exits(exits);
            self.act(act)?;
        }
        let instr = self.counters.instructions;
        if instr < a.next {
            return Ok(());
        }
        if a.samples {
            self.core.drain();
            self.vmm.pmu_exit(&mut self.mmu);
        }
        let now = self.snapshot();
        let c = now.since(&a.last);
        self.close_window(a, &now);
        a.next = (instr / a.window + 1) * a.window;
        let mode = self.vmm.virt_mode().ok_or_else(|| Error::Check {
            event: 0,
            detail: "an adaptive run's VM is in neither shadow nor nested paging".into(),
        })?;
        let act = a.policy.on_window(&c, self.vmm.paging_exits(), mode);
        let effective = match act {
            Action::Switch(to) if to == mode => Action::Stay,
            other => other,
        };
        if let Some(r) = a.timeline.last_mut() {
            r.decision = decision_name(effective).to_string();
        }
        self.act(act)?;
        a.now = InForce {
            state: a.policy.state(),
            mode: self.vmm.describe().paging.name(),
            thresholds: a.policy.thresholds(),
        };
        Ok(())
    }

    /// Appends the window that ends at `now` to the timeline.
    fn close_window(&self, a: &mut Adaptive, now: &Snapshot) {
        let c = now.since(&a.last);
        a.record(&c, now.instructions);
        if let Some(r) = a.timeline.last_mut() {
            r.switches = now.switches - a.last.switches;
        }
        a.last = *now;
    }

    /// Carries out a policy's action.
    fn act(&mut self, action: Action) -> Result<()> {
        match action {
            Action::Switch(to) if Some(to) != self.vmm.virt_mode() => {
                self.core.drain();
                self.vmm
                    .switch_mode(&mut self.mmu, &self.os, self.counters.instructions)?;
                self.happened.mode_switched = true;
                Ok(())
            }
            Action::Switch(_) | Action::Stay => Ok(()),
        }
    }

    /// Counting starts (after a warm-up): the first window begins now.
    pub(super) fn start_windows(&mut self) {
        let now = self.snapshot();
        let mode = self.vmm.describe().paging.name();
        if let Some(a) = &mut self.adaptive {
            a.last = now;
            a.next = a.window;
            a.now.mode = mode;
        }
    }

    /// The run ended: the last, partial window joins the timeline (the policy sees none).
    pub(super) fn close_timeline(&mut self) {
        let Some(mut a) = self.adaptive.take() else {
            return;
        };
        let now = self.snapshot();
        if now.instructions > a.last.instructions || now.cycles > a.last.cycles {
            self.close_window(&mut a, &now);
        }
        self.adaptive = Some(a);
    }
}
