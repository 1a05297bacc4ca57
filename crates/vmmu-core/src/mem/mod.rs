//! Simulated physical memory and frame allocators (DESIGN.md "Memory and page tables are real
//! bytes").
//!
//! Only frames that hold page tables have contents: a data frame is never read by the
//! translation model, so it exists as an allocation only. Page-table frames are 4 KiB of real
//! bytes, so eight 8-byte page entries share a 64-byte line and cache locality emerges by itself.

mod alloc;
mod phys;

pub use alloc::FrameAllocator;
pub use phys::{PhysAddr, PhysMem};
