//! # vmmu-core — the engine of vmmu
//!
//! A simulator of virtualized address translation (DESIGN.md): x86 page tables stored as real
//! bytes in simulated physical memory, TLB hierarchies, AMD page-walk caches (seed 002's 1D_PWC,
//! 2D_PWC, 2D_PWC+NT), Intel paging-structure caches, a cache hierarchy for page-entry and data
//! references, the native 1D walk and the 2D walk composed from a guest walker and a nested
//! walker, and first-order timing that attributes every cycle to a cause.
//!
//! Layers, each knowing only the next: [`event`]s (from [`workload`] generators or [`trace`]
//! files) drive [`sim`], which owns the guest's memory and page tables ([`mem`], [`paging`]),
//! the hardware structures ([`hw`]) and the walkers ([`walk`]), and fills [`stats`].
#![warn(missing_docs)]
#![recursion_limit = "256"]

pub mod addr;
pub mod config;
pub mod error;
pub mod event;
pub mod exits;
pub mod guest;
pub mod hw;
pub mod import;
pub mod mem;
pub mod paging;
pub mod shadow;
pub mod sim;
pub mod stats;
pub mod trace;
pub mod vmm;
pub mod walk;
pub mod workload;

pub use addr::{Gpa, Gva, Hpa, PageSize};
pub use config::{Mode, SimConfig};
pub use error::{Error, Result};
pub use event::{AccessKind, Event, EventSource, MemRef};
