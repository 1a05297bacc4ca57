//! Agile paging (`mode = "agile"`, Gandhi, Hill & Swift, ISCA 2016): the hypervisor's policy
//! for moving guest-table subtrees between shadow and nested mode (`[agile]`).

use serde::{Deserialize, Serialize};

/// The agile-paging policy's parameters (`[agile]`, only with `mode = "agile"`). The paper
/// describes the mechanism — a subtree moves to nested mode when its guest table is written,
/// and back to shadow mode when a periodic scan of dirty bits finds it unwritten — but the
/// values below are vmmu's estimates, not the paper's.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgileConfig {
    /// Emulated guest writes to one shadowed guest table within one scan interval that move
    /// the table's subtree to nested mode. Estimate: 2 (one write is the common case of a
    /// table filled once; a second says the table keeps changing).
    #[serde(default = "default_threshold")]
    pub write_threshold: u32,
    /// Instructions between the hypervisor's scans of the nested dirty bits of the root
    /// tables of the subtrees in nested mode; a subtree whose root table was not written since
    /// the last scan moves back to shadow mode. Estimate: 10 M instructions (a few milliseconds of guest time at the
    /// speeds of the cost profiles, a host timer tick's order).
    #[serde(default = "default_interval")]
    pub scan_interval: u64,
    /// Handler cycles per subtree in nested mode whose root table's nested dirty bit the scan
    /// reads. Estimate: 100 cycles (one nested-table entry read and cleared, with its
    /// bookkeeping).
    #[serde(default = "default_scan_cost")]
    pub scan_table: u64,
}

fn default_threshold() -> u32 {
    2
}

fn default_interval() -> u64 {
    10_000_000
}

fn default_scan_cost() -> u64 {
    100
}

impl Default for AgileConfig {
    fn default() -> Self {
        AgileConfig {
            write_threshold: default_threshold(),
            scan_interval: default_interval(),
            scan_table: default_scan_cost(),
        }
    }
}
