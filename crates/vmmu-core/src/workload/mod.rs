//! Seeded synthetic workload generators, written `NAME:k=v,...`.

use crate::error::Result;
use crate::event::EventSource;

/// Opens a generator from a specification such as `random:footprint=1G,refs=1M`.
pub fn open(spec: &str) -> Result<Box<dyn EventSource>> {
    let _ = spec;
    todo!("being written")
}
