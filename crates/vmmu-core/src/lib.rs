//! # vmmu-core — the engine of vmmu
//!
//! A simulator of virtualized address translation (DESIGN.md): x86 page tables stored as real
//! bytes in simulated physical memory, TLB hierarchies, AMD page-walk caches (seed 002's 1D_PWC,
//! 2D_PWC, 2D_PWC+NT), Intel paging-structure caches, a cache hierarchy for page-entry and data
//! references, the native 1D walk and the 2D walk composed from a guest walker and a nested
//! walker, and first-order timing that attributes every cycle to a cause.
//!
//! Layers, each knowing only the next (docs/architecture.md): the run driver ([`run`]) feeds
//! [`event`]s (from [`workload`] generators or [`trace`] files) to the event loop of [`sim`];
//! the guest OS ([`guest`])
//! turns them into page-table writes and CR3 writes; the hypervisor ([`vmm`]), owner of the
//! paging mode, hands them to the [`mmu`] (TLBs, walkers of [`walk`] over the one descent of
//! [`paging`], the structures of [`hw`]); counters end in a typed [`result`].
#![warn(missing_docs)]
#![recursion_limit = "256"]

pub mod addr;
pub mod compress;
pub mod config;
pub mod error;
pub mod event;
pub mod guest;
pub mod host;
pub mod hw;
pub mod import;
pub mod interval;
pub mod mem;
pub mod mmu;
pub mod paging;
pub mod policy;
pub mod result;
pub mod run;
pub mod shadow;
pub mod sim;
pub mod timing;
pub mod trace;
pub mod vmm;
pub mod walk;
pub mod workload;

pub use addr::{Gpa, Gva, Hpa, PageSize};
pub use config::{Mode, SimConfig};
pub use error::{Error, Result};
pub use event::{AccessKind, Event, EventSource, MemRef};
