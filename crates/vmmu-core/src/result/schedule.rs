//! The oracle's schedule of paging modes and its estimate (docs/policies.md, "oracle"), beside
//! its stitched result.

use serde::{Deserialize, Serialize};

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
