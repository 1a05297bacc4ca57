//! The paging-mode policy of an adaptive run (`mode = "adaptive"`, `[policy]`): which policy
//! switches the VM between shadow and nested paging, with its parameters (docs/policies.md).
//!
//! Windows are counts of retired instructions at the paper's scale (seed 001 §6–§7: a PMU
//! window of 10⁹ instructions); `time_scale` shrinks every window together, and the thresholds
//! with them, since a threshold is a count per window: the rates a policy compares stay the
//! same, so traces of millions of instructions can be studied with the published parameters.

use super::VirtMode;
use serde::{Deserialize, Serialize};

/// When DAV²M's transition counters `count_s2n` / `count_n2s` restart (seed 001 §6). The prose
/// measures "the intervals between transitions", so each switch restarts its direction's
/// counter; the pseudo-code restarts it only inside the branch that damps.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransReset {
    /// Every switch of a direction restarts that direction's counter (the prose).
    #[default]
    EverySwitch,
    /// Only a switch that damped restarts it (the pseudo-code's placement).
    WhenDamped,
}

/// DAV²M exactly as seed 001 §6 publishes it, with the paper's values as defaults (seed 001
/// §7, `bae11_dav2m_params.csv`). Where the paper is silent the choice is marked in
/// docs/policies.md ("Reading the pseudo-code") and is a parameter here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dav2mConfig {
    /// The mode the VM starts in.
    #[serde(default)]
    pub start: VirtMode,
    /// Factor applied to every window and threshold (1 = the paper's scale).
    #[serde(default = "one")]
    pub time_scale: f64,
    /// The PMU sampling period: a PMU-overflow exit every `window_inst` instructions.
    #[serde(default = "giga")]
    pub window_inst: f64,
    /// Shadow: `count_vexit` restarts every `window_vexit` instructions; the length of the
    /// PreNested probe.
    #[serde(default = "giga")]
    pub window_vexit: f64,
    /// Nested: TLB misses are counted over `window_tmiss` instructions; the length of the
    /// PreShadow probe.
    #[serde(default = "window_tmiss")]
    pub window_tmiss: f64,
    /// Two switches of one direction closer than this raise both thresholds (damping).
    #[serde(default = "window_trans")]
    pub window_trans: f64,
    /// Instructions from the shadow → nested switch to the end of Prepaging (PreNested plus
    /// Prepaging). The paper does not give it (assumption: one more `window_vexit`).
    #[serde(default = "window_prepaging")]
    pub window_prepaging: f64,
    /// Paging-related exits per `window_vexit` above which Shadow probes nested paging
    /// (initial value; it adapts).
    #[serde(default = "threshold_vexit")]
    pub threshold_vexit: f64,
    /// TLB misses per `window_tmiss` above which Nested probes shadow paging (initial value;
    /// it adapts).
    #[serde(default = "threshold_tmiss")]
    pub threshold_tmiss: f64,
    /// A probed mode is rejected when its CPI exceeds the other's by this factor.
    #[serde(default = "p_factor")]
    pub p_factor: f64,
    /// Windows in the CPI moving average.
    #[serde(default = "cpi_average")]
    pub cpi_average: u32,
    /// Factor by which a threshold is raised ("increase", "increment": the paper gives no
    /// amount; assumption: doubling).
    #[serde(default = "threshold_step")]
    pub threshold_step: f64,
    /// Restart the CPI moving average at every switch (the paper does not say; off: the
    /// average runs over wall-clock windows whatever the mode).
    #[serde(default)]
    pub cpi_reset_at_switch: bool,
    /// When the transition counters restart.
    #[serde(default)]
    pub trans_reset: TransReset,
    /// A probe that finds the other mode better lowers the threshold that started it (the
    /// prose: "If performance increases due to the switch, the threshold is adjusted so that
    /// switch will occur at a lower threshold"); the pseudo-code only raises thresholds.
    #[serde(default = "yes")]
    pub lower_on_success: bool,
}

/// vmmu's own policy: a cost model of both modes from what a hypervisor can measure
/// (docs/policies.md, "costmodel").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostModelConfig {
    /// The mode the VM starts in (as DAV²M's, so the two start on equal terms).
    #[serde(default)]
    pub start: VirtMode,
    /// Factor applied to `window_inst`.
    #[serde(default = "one")]
    pub time_scale: f64,
    /// The PMU sampling period (as DAV²M's, so both pay the same sampling cost).
    #[serde(default = "giga")]
    pub window_inst: f64,
    /// A switch is made when the gain the other mode would have given, accumulated while it
    /// stays ahead, exceeds `(1 + hysteresis)` times the switch's measured cost (0: as soon
    /// as it pays for the switch, the break-even rule).
    #[serde(default)]
    pub hysteresis: f64,
    /// Windows after a switch (at least) whose costs count as the switch's transient, not as
    /// the new mode's steady state.
    #[serde(default = "one_u32")]
    pub settle: u32,
    /// Settled windows the walk latencies and the exit cycles per kernel cycle are learned
    /// from.
    #[serde(default = "average")]
    pub average: u32,
}

/// Parameters of the policies that only set the window of the timeline (static baselines,
/// oracle).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowConfig {
    /// Factor applied to `window_inst`.
    #[serde(default = "one")]
    pub time_scale: f64,
    /// The window of the timeline (and of the oracle's decisions).
    #[serde(default = "giga")]
    pub window_inst: f64,
}

/// The policy of an adaptive run, chosen by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PolicyConfig {
    /// DAV²M (seed 001 §6).
    Dav2m(Dav2mConfig),
    /// vmmu's cost model.
    Costmodel(CostModelConfig),
    /// The best mode per window with hindsight, stitched from the static runs' windows (an
    /// estimate, not a bound: docs/policies.md).
    Oracle(WindowConfig),
    /// Shadow paging throughout (a baseline with a timeline).
    StaticShadow(WindowConfig),
    /// Nested paging throughout (a baseline with a timeline).
    StaticNested(WindowConfig),
}

/// The policy kinds, in catalog order.
pub const POLICY_KINDS: [&str; 5] = [
    "dav2m",
    "costmodel",
    "oracle",
    "static-shadow",
    "static-nested",
];

impl PolicyConfig {
    /// The policy `kind` with every parameter at its default.
    pub fn default_of(kind: &str) -> Option<PolicyConfig> {
        Some(match kind {
            "dav2m" => PolicyConfig::Dav2m(Dav2mConfig::default()),
            "costmodel" => PolicyConfig::Costmodel(CostModelConfig::default()),
            "oracle" => PolicyConfig::Oracle(WindowConfig::default()),
            "static-shadow" => PolicyConfig::StaticShadow(WindowConfig::default()),
            "static-nested" => PolicyConfig::StaticNested(WindowConfig::default()),
            _ => return None,
        })
    }

    /// The kind's name.
    pub const fn kind(&self) -> &'static str {
        match self {
            PolicyConfig::Dav2m(_) => "dav2m",
            PolicyConfig::Costmodel(_) => "costmodel",
            PolicyConfig::Oracle(_) => "oracle",
            PolicyConfig::StaticShadow(_) => "static-shadow",
            PolicyConfig::StaticNested(_) => "static-nested",
        }
    }

    /// The mode the VM starts in (the oracle chooses its own; its simulations start in both).
    pub const fn start(&self) -> VirtMode {
        match self {
            PolicyConfig::Dav2m(c) => c.start,
            PolicyConfig::Costmodel(c) => c.start,
            PolicyConfig::StaticShadow(_) | PolicyConfig::Oracle(_) => VirtMode::Shadow,
            PolicyConfig::StaticNested(_) => VirtMode::Nested,
        }
    }

    /// `(time_scale, window_inst)`.
    const fn scale_and_window(&self) -> (f64, f64) {
        match self {
            PolicyConfig::Dav2m(c) => (c.time_scale, c.window_inst),
            PolicyConfig::Costmodel(c) => (c.time_scale, c.window_inst),
            PolicyConfig::Oracle(c)
            | PolicyConfig::StaticShadow(c)
            | PolicyConfig::StaticNested(c) => (c.time_scale, c.window_inst),
        }
    }

    /// The window in instructions at this time scale (at least 1).
    pub fn window(&self) -> u64 {
        let (s, w) = self.scale_and_window();
        scaled(w, s)
    }

    /// Whether the policy samples the PMU, paying a PMU-overflow exit per window (the static
    /// baselines and the oracle read no counter while the VM runs).
    pub const fn samples(&self) -> bool {
        match self {
            PolicyConfig::Dav2m(_) | PolicyConfig::Costmodel(_) => true,
            PolicyConfig::Oracle(_)
            | PolicyConfig::StaticShadow(_)
            | PolicyConfig::StaticNested(_) => false,
        }
    }
}

/// `window × scale` instructions, rounded, at least 1.
pub fn scaled(window: f64, scale: f64) -> u64 {
    (window * scale).round().max(1.0) as u64
}

fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}

fn one_u32() -> u32 {
    1
}
fn giga() -> f64 {
    1e9
}
fn window_tmiss() -> f64 {
    1e10
}
fn window_trans() -> f64 {
    1e11
}
fn window_prepaging() -> f64 {
    2e9
}
fn threshold_vexit() -> f64 {
    1e4
}
fn threshold_tmiss() -> f64 {
    1e5
}
fn p_factor() -> f64 {
    1.1
}
fn cpi_average() -> u32 {
    10
}
fn threshold_step() -> f64 {
    2.0
}
fn average() -> u32 {
    3
}

impl Default for Dav2mConfig {
    fn default() -> Self {
        Dav2mConfig {
            start: VirtMode::default(),
            time_scale: one(),
            window_inst: giga(),
            window_vexit: giga(),
            window_tmiss: window_tmiss(),
            window_trans: window_trans(),
            window_prepaging: window_prepaging(),
            threshold_vexit: threshold_vexit(),
            threshold_tmiss: threshold_tmiss(),
            p_factor: p_factor(),
            cpi_average: cpi_average(),
            threshold_step: threshold_step(),
            cpi_reset_at_switch: false,
            trans_reset: TransReset::default(),
            lower_on_success: true,
        }
    }
}

impl Default for CostModelConfig {
    fn default() -> Self {
        CostModelConfig {
            start: VirtMode::default(),
            time_scale: one(),
            window_inst: giga(),
            hysteresis: 0.0,
            settle: one_u32(),
            average: average(),
        }
    }
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            time_scale: one(),
            window_inst: giga(),
        }
    }
}
