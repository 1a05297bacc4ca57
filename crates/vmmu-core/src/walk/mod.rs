//! Page walkers (issue 2 item 4): the native 1D walk and the 2D walk.
//!
//! The 2D walk is *composed*: one guest walker ([`guest::walk`]) reads the guest's tables level
//! by level, and before each guest-physical table address (and the final data address) can be
//! used it asks a [`NestedDim`] for the host-physical address. Native mode passes
//! [`IdentityDim`] (guest physical is machine physical, no references); nested mode passes
//! [`nested::NestedWalker`], which consults the Nested TLB or the nested paging-structure
//! caches and walks the nested tables, each reference counted at its `{nLk,row}` cell. No
//! `if nested` is spread through the guest walker (STYLE.md, "gem5 walkers").
//!
//! Every page-entry reference goes through [`WalkHw::pe_ref`], which applies the design's
//! page-walk-cache rules (seed 002 §4.2) and the memory hierarchy, and counts the reference by
//! cell and by the structure that served it.

pub mod guest;
pub mod host;
pub mod nested;
pub mod step;

use crate::addr::{Gpa, Hpa, PageSize};
use crate::config::{MachineConfig, PwcDesign};
use crate::hw::cache::MemoryHierarchy;
use crate::hw::ntlb::Ntlb;
use crate::hw::psc::Psc;
use crate::hw::pwc::Pwc;
use step::{Grid, COL_G, GRID, ROW_GPA};

/// Counters of the walkers.
#[derive(Clone, Debug, Default)]
pub struct WalkStats {
    /// Page walks started (faulting ones included).
    pub walks: u64,
    /// Walks that ended in a fault of any kind.
    pub walk_faults: u64,
    /// Accessed/dirty-bit updates written by the walker (memory writes, not walk references).
    pub ad_updates: u64,
    /// Page-entry references by `{column,row}` cell.
    pub refs: Grid,
    /// References served by the page-walk cache.
    pub served_pwc: u64,
    /// References served per cache level; index `levels` is DRAM.
    pub served_level: [u64; 8],
    /// Nested TLB hits (each skips a nested walk).
    pub ntlb_hits: u64,
    /// Paging-structure-cache hits (each lets a walk start below the root).
    pub psc_hits: u64,
}

impl WalkStats {
    /// Total page-entry references.
    pub fn total_refs(&self) -> u64 {
        self.refs.iter().flatten().sum()
    }
}

/// The hardware a walk uses, with the active design's rules precomputed.
pub struct WalkHw {
    /// The design.
    pub design: PwcDesign,
    /// The AMD page-walk cache.
    pub pwc: Pwc,
    /// The Nested TLB.
    pub ntlb: Ntlb,
    /// Paging-structure caches of the guest dimension (gVA prefix → next guest table, gPA).
    pub psc_guest: Psc,
    /// Paging-structure caches of the nested dimension (gPA prefix → next nested table, hPA).
    pub psc_nested: Psc,
    /// The cache hierarchy.
    pub caches: MemoryHierarchy,
    /// Level index page entries are looked up from.
    pub pe_from: usize,
    /// Whether the PWC is consulted and filled for a `{col,row}` cell.
    pwc_on: [[bool; GRID]; GRID],
    pwc_latency: u32,
    /// NTLB latency in cycles.
    pub ntlb_latency: u32,
    /// Whether the NTLB is used for the `gPA` row.
    pub ntlb_gpa_row: bool,
    /// PSC latency in cycles.
    pub psc_latency: u32,
    /// Counters.
    pub stats: WalkStats,
}

impl WalkHw {
    /// Builds the walk hardware of `m` (validated).
    pub fn new(m: &MachineConfig) -> Self {
        let design = m.pwc.design;
        let mut pwc_on = [[false; GRID]; GRID];
        for (col, row_flags) in pwc_on.iter_mut().enumerate() {
            for (row, on) in row_flags.iter_mut().enumerate() {
                let used = match design {
                    PwcDesign::None | PwcDesign::Psc => false,
                    PwcDesign::OneD => col == COL_G,
                    PwcDesign::TwoD | PwcDesign::TwoDNt => true,
                };
                let excluded = (col == COL_G && row == 1 && !m.pwc.cache_g_l1)
                    || (col == 1 && row == ROW_GPA && !m.pwc.cache_nl1_gpa);
                *on = used && !excluded;
            }
        }
        let caches = MemoryHierarchy::new(&m.caches);
        let pe_from = caches
            .level_index(&m.caches.page_entry_fill)
            .expect("validated: page_entry_fill names a level");
        WalkHw {
            design,
            pwc: Pwc::new(m.pwc.entries, m.pwc.ways),
            ntlb: Ntlb::new(m.ntlb.entries, m.ntlb.ways),
            psc_guest: Psc::new(&m.psc),
            psc_nested: Psc::new(&m.psc),
            caches,
            pe_from,
            pwc_on,
            pwc_latency: m.pwc.latency,
            ntlb_latency: m.ntlb.latency,
            ntlb_gpa_row: m.ntlb.cache_gpa_row,
            psc_latency: m.psc.latency,
            stats: WalkStats::default(),
        }
    }

    /// Whether the Nested TLB is part of the design.
    #[inline]
    pub fn uses_ntlb(&self) -> bool {
        self.design == PwcDesign::TwoDNt
    }

    /// Whether paging-structure caches are part of the design.
    #[inline]
    pub fn uses_psc(&self) -> bool {
        self.design == PwcDesign::Psc
    }

    /// One page-entry reference at cell `{col,row}` to the entry at `entry`: PWC first when the
    /// design caches this cell, else (or on a miss) the memory hierarchy from the page-entry
    /// level. Returns its latency in cycles.
    #[inline]
    pub fn pe_ref(&mut self, entry: Hpa, col: usize, row: usize) -> u64 {
        self.stats.refs[col][row] += 1;
        let mut cycles = 0u64;
        let cached = self.pwc_on[col][row];
        if cached {
            cycles += self.pwc_latency as u64;
            if self.pwc.lookup(entry) {
                self.stats.served_pwc += 1;
                return cycles;
            }
        }
        let (lvl, lat) = self.caches.access(entry, self.pe_from);
        self.stats.served_level[lvl] += 1;
        if cached {
            self.pwc.fill(entry);
        }
        cycles + lat as u64
    }

    /// An accessed/dirty-bit write to the entry at `entry`: counted apart from walk
    /// references; costs one access to the entry's line.
    #[inline]
    pub fn ad_update(&mut self, entry: Hpa) -> u64 {
        self.stats.ad_updates += 1;
        self.caches.access(entry, self.pe_from).1 as u64
    }
}

/// The nested dimension of a walk: turns a guest-physical address into a host-physical one,
/// counting its references in `row`.
pub trait NestedDim {
    /// The host-physical address of `gpa` and the page size that maps it, or `None` for a
    /// nested fault (EPT violation / NPF).
    fn translate(
        &mut self,
        hw: &mut WalkHw,
        gpa: Gpa,
        row: usize,
        cycles: &mut u64,
    ) -> Option<(Hpa, PageSize)>;
}

/// Native mode: guest physical is machine physical; no references.
pub struct IdentityDim;

impl NestedDim for IdentityDim {
    #[inline]
    fn translate(
        &mut self,
        _: &mut WalkHw,
        gpa: Gpa,
        _: usize,
        _: &mut u64,
    ) -> Option<(Hpa, PageSize)> {
        Some((gpa.identity_hpa(), PageSize::Size1G))
    }
}
