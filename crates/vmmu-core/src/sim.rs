//! The simulator: drives events through the guest memory model and the MMU.

use crate::config::SimConfig;
use crate::error::Result;
use crate::event::EventSource;

/// Progress of a running simulation, reported to the caller's callback.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Events simulated so far.
    pub events: u64,
    /// Total events if the source knows it.
    pub total: Option<u64>,
}

/// Runs `source` under `cfg` to the end and returns the result as a JSON value
/// (schema `vmmu.result/1`). `progress` is called every so often; returning `false` stops the
/// run with [`crate::Error::Interrupted`].
pub fn run(
    cfg: &SimConfig,
    source: &mut dyn EventSource,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<serde_json::Value> {
    let _ = (cfg, source, progress);
    todo!("being written")
}
