//! x86 page tables stored as real bytes in simulated physical memory (DESIGN.md "Memory and
//! page tables are real bytes").
//!
//! [`descent`] is the one descent over the levels that every walk and lookup uses; [`format`]
//! gives each paging format's geometry (levels, index bits, entry size, where large
//! pages may be leaves); [`pte`] the entry bits; [`table::PageTable`] maps, unmaps, protects
//! and looks up at any page size, allocating table frames as it goes.

pub mod descent;
pub mod format;
pub mod pte;
pub mod table;

pub use format::Geometry;
pub use pte::Pte;
pub use table::{MapError, PageTable, TableWrite};
