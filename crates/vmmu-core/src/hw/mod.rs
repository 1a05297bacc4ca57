//! Hardware structures: TLBs, page-walk caches, the Nested TLB, paging-structure caches and the
//! cache hierarchy. They know nothing of hypervisors or trace formats (DESIGN.md "Architecture").
//!
//! Every structure is built once from its validated config and then allocates nothing: its
//! storage is a set-associative LRU array ([`store::Store`]) whose representation is chosen for
//! its shape when the machine is built — [`small`] sets of up to four ways, [`narrow`] sets of
//! 32-bit tags up to 64 ways (or [`lanes`] of fingerprinted ways, for wider keys), the general
//! [`lru::SetAssoc`] beyond — one model whatever the choice. Each counts its own hits and misses as a [`HitMiss`].
//!
//! | module | models | source |
//! |---|---|---|
//! | [`tlb`] | L1 I/D and L2 TLBs, PCID/VPID tags, x86 flushes | Intel SDM Vol. 3A §4.10.2, §4.10.4; seed 002 Table 2 |
//! | [`pwc`] | AMD page-walk cache (physically tagged page entries) | seed 002 §4.1–4.2 |
//! | [`ntlb`] | Nested TLB (gPA page → hPA page) | seed 002 §4.2 |
//! | [`psc`] | Intel paging-structure caches | Intel SDM Vol. 3A §4.10.3 |
//! | [`cache`] | L1/L2/L3 caches and DRAM latency | seed 002 §4.1, Table 2 |

/// Element `i` of a storage vector, read without a bounds check (the "Indexing" note of the
/// module that uses it).
macro_rules! at {
    ($v:expr, $i:expr) => {{
        let i = $i;
        debug_assert!(i < $v.len(), "index {i} of {}", $v.len());
        // SAFETY: `i` is in bounds by the invariants of the calling module's "Indexing" note.
        unsafe { *$v.get_unchecked(i) }
    }};
}

/// Element `i` of a storage vector, for writing, without a bounds check (see `at!`).
macro_rules! at_mut {
    ($v:expr, $i:expr) => {{
        let i = $i;
        debug_assert!(i < $v.len(), "index {i} of {}", $v.len());
        // SAFETY: `i` is in bounds by the invariants of the calling module's "Indexing" note.
        unsafe { $v.get_unchecked_mut(i) }
    }};
}

pub mod assoc;
pub mod cache;
pub mod lanes;
pub mod lru;
pub mod narrow;
pub mod ntlb;
pub mod paged;
pub mod psc;
pub mod pwc;
pub(crate) mod recency;
pub mod small;
pub mod store;
pub mod tlb;

/// Hit and miss counts of one structure (a lookup counts exactly one of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HitMiss {
    /// Lookups that found their entry.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
}

impl HitMiss {
    /// Counts one lookup. A branch, not two branch-free adds: callers go on to branch on the
    /// same outcome, and the compiler folds the count into that branch (the branch-free form
    /// compiled to vector instructions on every lookup).
    #[inline]
    pub fn count(&mut self, hit: bool) {
        if hit {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
    }

    /// `hits + misses`.
    #[inline]
    pub fn lookups(&self) -> u64 {
        self.hits + self.misses
    }
}

impl std::ops::AddAssign for HitMiss {
    fn add_assign(&mut self, o: HitMiss) {
        self.hits += o.hits;
        self.misses += o.misses;
    }
}
