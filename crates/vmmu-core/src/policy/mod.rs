//! Paging-mode policies (DESIGN.md "Policies", docs/policies.md): what decides, while the VM
//! runs, whether it should be under shadow or nested paging.
//!
//! A policy sees what a hypervisor sees — the PMU's counters for each window of `window_inst`
//! retired instructions and its own exit accounting ([`Counters`]) — never the simulator's
//! internals, and answers with an [`Action`]. It is woken at the end of each PMU window (a
//! PMU-overflow exit, paid by the policies that sample) and, when it asks, after a number of
//! paging-related exits ([`Policy::exit_wake`]: DAV²M reacts on the exit that crosses its
//! threshold). The event loop carries the action out through the hypervisor's one switch
//! mechanism. The oracle is not a run-time policy: it is computed from two simulations with
//! hindsight ([`hindsight`]).
//!
//! Every policy is a variant of [`Policy`], dispatched by `match` (STYLE.md 3); each
//! transition function is deterministic.

pub mod costmodel;
pub mod dav2m;
pub mod hindsight;

use crate::config::{PolicyConfig, SimConfig, VirtMode};
use costmodel::CostModel;
use dav2m::Dav2m;

/// What the counters showed over one PMU window, as a hypervisor can read them: the PMU's
/// counters (cycles in guest and hypervisor, retired instructions, L1 and L2 DTLB misses,
/// cycles with the walker busy, cycles in the guest's kernel) and the hypervisor's own
/// accounting of its exits.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    /// Instructions retired in the window.
    pub instructions: u64,
    /// Cycles of the window, everything included: the guest's work, translation, data,
    /// its kernel, the hypervisor and mode switches ("wall clock", seed 001 §4).
    pub cycles: u64,
    /// L1 DTLB misses (data lookups that missed the L1 data TLB).
    pub l1_dtlb_misses: u64,
    /// L2 DTLB misses (lookups that missed the L2 TLB too and walked).
    pub l2_dtlb_misses: u64,
    /// Paging-related exits (hidden and guest faults, page-table writes, CR3 writes, INVLPG).
    pub paging_exits: u64,
    /// Cycles of those exits (the hypervisor times its handlers).
    pub paging_exit_cycles: u64,
    /// Translation cycles: L2-TLB hits, page walks, A/D updates.
    pub walk_cycles: u64,
    /// Cycles the guest spent in its kernel (a PMU cycle counter with only the OS bit set).
    pub kernel_cycles: u64,
    /// Cycles of mode switches carried out in the window.
    pub switch_cycles: u64,
}

impl Counters {
    /// Cycles per instruction of the window (0 for an empty window).
    pub fn cpi(&self) -> f64 {
        if self.instructions == 0 {
            0.0
        } else {
            self.cycles as f64 / self.instructions as f64
        }
    }
}

/// What a policy asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Keep the current mode.
    Stay,
    /// Switch to this paging mode (nested or shadow) at this exit.
    Switch(VirtMode),
}

/// A run-time paging-mode policy.
#[derive(Clone, Debug)]
pub enum Policy {
    /// DAV²M (seed 001 §6).
    Dav2m(Dav2m),
    /// vmmu's cost model.
    CostModel(CostModel),
    /// One mode throughout: the static baselines (and each of the oracle's simulations).
    Static(VirtMode),
}

impl Policy {
    /// The policy of the adaptive run `cfg`; `None` without one, and for the oracle, which is
    /// no run-time policy.
    pub fn new(cfg: &SimConfig) -> Option<Policy> {
        match cfg.policy.as_ref()? {
            PolicyConfig::Dav2m(c) => Some(Policy::Dav2m(Dav2m::new(c))),
            PolicyConfig::Costmodel(c) => Some(Policy::CostModel(CostModel::new(c, cfg))),
            PolicyConfig::StaticShadow(_) => Some(Policy::Static(VirtMode::Shadow)),
            PolicyConfig::StaticNested(_) => Some(Policy::Static(VirtMode::Nested)),
            PolicyConfig::Oracle(_) => None,
        }
    }

    /// The end of a PMU window: `c` the window's counters, `exits` the paging-related exits
    /// since the start, `mode` the mode the VM is in.
    pub fn on_window(&mut self, c: &Counters, exits: u64, mode: VirtMode) -> Action {
        match self {
            Policy::Dav2m(d) => d.on_window(c, exits),
            Policy::CostModel(m) => m.on_window(c, exits, mode),
            Policy::Static(_) => Action::Stay,
        }
    }

    /// The paging-related exit count reached [`Policy::exit_wake`]: `exits` since the start.
    pub fn on_exits(&mut self, exits: u64) -> Action {
        match self {
            Policy::Dav2m(d) => d.on_exits(exits),
            Policy::CostModel(m) => m.on_exits(exits),
            Policy::Static(_) => Action::Stay,
        }
    }

    /// The paging-related exit count (since the start) at which the policy wants to be woken
    /// between windows; `u64::MAX`: never.
    pub fn exit_wake(&self) -> u64 {
        match self {
            Policy::Dav2m(d) => d.exit_wake(),
            Policy::CostModel(m) => m.exit_wake(),
            Policy::Static(_) => u64::MAX,
        }
    }

    /// The policy's state, for the timeline.
    pub fn state(&self) -> &'static str {
        match self {
            Policy::Dav2m(d) => d.state().name(),
            Policy::CostModel(m) => m.state(),
            Policy::Static(m) => m.name(),
        }
    }

    /// DAV²M's thresholds now, `(threshold_vexit, threshold_tmiss)`, for the timeline.
    pub fn thresholds(&self) -> (Option<f64>, Option<f64>) {
        match self {
            Policy::Dav2m(d) => (Some(d.threshold_vexit()), Some(d.threshold_tmiss())),
            Policy::CostModel(_) | Policy::Static(_) => (None, None),
        }
    }
}
