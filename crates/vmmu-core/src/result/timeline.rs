//! An adaptive run's timeline: one record per PMU window (docs/statistics.md, `timeline`).

use serde::{Deserialize, Serialize};

/// One window of an adaptive run's timeline (docs/statistics.md, `timeline`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowRecord {
    /// The window's number, from 0.
    pub window: u64,
    /// Instructions retired in the window (the PMU's retired-instruction counter).
    pub instructions: u64,
    /// Instructions retired from the start of counting to the window's end.
    pub instructions_end: u64,
    /// Cycles of the window, everything included.
    pub cycles: u64,
    /// L1 DTLB misses in the window (the PMU's counter).
    pub l1_dtlb_misses: u64,
    /// L2 DTLB misses in the window: lookups that walked (the PMU's counter).
    pub l2_dtlb_misses: u64,
    /// Paging-related exits in the window (the hypervisor's own count).
    pub paging_exits: u64,
    /// `cycles / instructions of the window`.
    pub cpi: f64,
    /// L2 DTLB misses (lookups that walked) per 1,000 instructions of the window.
    pub tlb_misses_per_kinstr: f64,
    /// Paging-related exits per 1,000 instructions of the window.
    pub paging_exits_per_kinstr: f64,
    /// DAV²M's `threshold_vexit` during the window (scaled); null for other policies.
    pub threshold_vexit: Option<f64>,
    /// DAV²M's `threshold_tmiss` during the window (scaled); null for other policies.
    pub threshold_tmiss: Option<f64>,
    /// The policy's state at the window's start.
    pub state: String,
    /// The paging mode at the window's start.
    pub mode: String,
    /// Mode switches carried out during the window (a switch at a window's end belongs to
    /// the next window, which pays for it).
    pub switches: u64,
    /// What the policy decided at the window's end: `stay`, `nested` or `shadow` (the mode
    /// it switched to); `end` for the last, partial window, which no policy sees.
    pub decision: String,
}
