//! Page walkers: the hardware walk of a 1D table tree (native, direct paging, shadow tables, the
//! guest dimension of the 2D walk) and the nested dimension of the 2D walk.
//!
//! Both are the one descent of [`crate::paging::descent`]; what differs is supplied as data:
//! - a [`TableSource`] says where the walked tables live and what the walk does besides reading
//!   them — the guest's tables in guest memory, each table's address first translated by a
//!   [`NestedDim`] (identity natively, the nested walker of [`nested`] under nested paging), the
//!   walker keeping their A/D bits; or shadow tables in host memory whose A/D state the
//!   hypervisor keeps;
//! - the `{column,row}` cell of each reference (seed 002 Figure 1(b)) and which caches a cell
//!   uses come from [`WalkHw`] and the design.
//!
//! The processor walks a shadow table exactly as it walks a native one — the same
//! paging-structure caches, page-walk cache and memory hierarchy (DESIGN.md law 8). Every
//! page-entry reference goes through [`WalkHw::pe_ref`], which applies the design's page-walk
//! cache rules (seed 002 §4.2) and the memory hierarchy, and counts the reference by cell and by
//! the structure that served it.

mod agile;
pub mod nested;
pub mod step;
mod tables;
pub mod three_d;

pub use agile::{AgileTables, SwitchStop, Switching};
pub use tables::{GuestTables, L1ShadowTables, ShadowTables, TableSource, Tables};

use crate::addr::{Gpa, Gva, Hpa, PageSize, Space};
use crate::config::{MachineConfig, PwcDesign};
use crate::event::AccessKind;
use crate::hw::cache::{MemoryHierarchy, MAX_LEVELS};
use crate::hw::ntlb::Ntlb;
use crate::hw::psc::Psc;
use crate::hw::pwc::Pwc;
use crate::hw::tlb::Translation;
use crate::paging::descent::{descend, Descent, Levels};
use crate::paging::{Geometry, Pte};
use nested::NestedWalker;
use step::{Grid, COL_G, GRID, ROW_GPA};

/// Counters of the walkers.
#[derive(Clone, Copy, Debug, Default)]
pub struct WalkStats {
    /// Page walks started (faulting ones and D-assists included).
    pub walks: u64,
    /// Walks that ended in a fault of any kind.
    pub walk_faults: u64,
    /// Accessed/dirty-bit updates written by the walker (memory writes, not walk references).
    pub ad_updates: u64,
    /// Page-entry references by `{column,row}` cell.
    pub refs: Grid,
    /// References served by the page-walk cache.
    pub served_pwc: u64,
    /// References served by the page-walk cache, by `{column,row}` cell.
    pub pwc_hits: Grid,
    /// References served per cache level; index `levels` is DRAM.
    pub served_level: [u64; MAX_LEVELS + 1],
    /// Agile paging's walks by the shadow levels they walked before switching to nested
    /// mode: index 0 a walk nested from the root, index `levels` one that never switched.
    pub agile: [u64; 6],
}

impl WalkStats {
    /// Total page-entry references.
    pub fn total_refs(&self) -> u64 {
        self.refs.iter().flatten().sum()
    }
}

/// Why a walk did not produce a translation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WalkFault {
    /// An entry of the walked tables was not present (a guest page fault natively, a hidden
    /// fault under shadow paging).
    NotPresent {
        /// Level of the missing entry.
        level: u8,
    },
    /// The leaf forbids the access (write to read-only, fetch from NX).
    Protection,
    /// A nested entry was missing for this guest-physical address (EPT violation / NPF).
    Nested {
        /// The guest-physical address that could not be translated.
        gpa: Gpa,
    },
}

/// What the walk is for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Access {
    /// A store or read-modify-write.
    pub write: bool,
    /// An instruction fetch.
    pub fetch: bool,
}

impl Access {
    /// The access a reference of `kind` makes.
    #[inline(always)]
    pub fn of(kind: AccessKind) -> Access {
        Access {
            write: kind.is_write(),
            fetch: kind.is_fetch(),
        }
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
    /// Paging-structure caches of the linear dimension (gVA prefix → next table: a guest table's
    /// gPA in the 2D walk, a guest or shadow table's machine address in a 1D walk).
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
    #[inline(always)]
    pub fn pe_ref(&mut self, entry: Hpa, col: usize, row: usize) -> u64 {
        self.stats.refs[col][row] += 1;
        if !self.pwc_on[col][row] {
            return self.pe_mem(entry);
        }
        if self.pwc.lookup(entry) {
            self.stats.served_pwc += 1;
            self.stats.pwc_hits[col][row] += 1;
            return self.pwc_latency as u64;
        }
        let lat = self.pe_mem(entry);
        self.pwc.fill(entry);
        self.pwc_latency as u64 + lat
    }

    /// The memory hierarchy's part of a page-entry reference: its latency in cycles. Always
    /// inlined: left to the compiler, it stays out of line beside the structures' inlined
    /// lookups, and the call costs more than its three lines.
    #[inline(always)]
    fn pe_mem(&mut self, entry: Hpa) -> u64 {
        let (lvl, lat) = self.caches.access(entry, self.pe_from);
        self.stats.served_level[lvl] += 1;
        lat as u64
    }

    /// An accessed/dirty-bit write to the entry at `entry`: counted apart from walk
    /// references; costs one access to the entry's line.
    #[inline]
    pub fn ad_update(&mut self, entry: Hpa) -> u64 {
        self.stats.ad_updates += 1;
        self.caches.access(entry, self.pe_from).1 as u64
    }

    /// Adds `o`'s counters to these (the totals of several cores).
    pub fn absorb_stats(&mut self, o: &WalkHw) {
        let (s, t) = (&mut self.stats, &o.stats);
        s.walks += t.walks;
        s.walk_faults += t.walk_faults;
        s.ad_updates += t.ad_updates;
        s.served_pwc += t.served_pwc;
        for (a, b) in s.refs.iter_mut().flatten().zip(t.refs.iter().flatten()) {
            *a += b;
        }
        for (a, b) in s
            .pwc_hits
            .iter_mut()
            .flatten()
            .zip(t.pwc_hits.iter().flatten())
        {
            *a += b;
        }
        for (a, b) in s.served_level.iter_mut().zip(&t.served_level) {
            *a += b;
        }
        for (a, b) in s.agile.iter_mut().zip(&t.agile) {
            *a += b;
        }
        self.pwc.absorb_stats(&o.pwc);
        self.ntlb.absorb_stats(&o.ntlb);
        self.psc_guest.absorb_stats(&o.psc_guest);
        self.psc_nested.absorb_stats(&o.psc_nested);
        self.caches.absorb_stats(&o.caches);
    }

    /// Zeroes every counter (the end of a warm-up); the contents stay.
    pub fn reset_stats(&mut self) {
        self.stats = WalkStats::default();
        self.pwc.reset_stats();
        self.ntlb.reset_stats();
        self.psc_guest.reset_stats();
        self.psc_nested.reset_stats();
        self.caches.reset_stats();
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

/// No nested dimension: with nested paging off the walker's output is a machine address
/// (native paging, and direct paging whose guest tables hold machine frames); no references.
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

/// Evaluates `$body` with `$g` bound to the geometry `$geo`: to the constant
/// [`Geometry::LONG4`] when `$geo` is that format, so that the descent inlined into that copy
/// of `$body` is compiled for 4-level long mode alone (its entry offsets constant shifts, its
/// entry size, frame mask and leaf rules folded), else to `$geo` itself. A geometry is
/// determined by its format, so both copies compute the same; the format is asked once per
/// walk.
macro_rules! fixed_format {
    ($geo:expr, $g:ident => $body:expr) => {{
        let geo: Geometry = $geo;
        if matches!(geo.format, crate::config::PagingFormat::Long4) {
            let $g = Geometry::LONG4;
            $body
        } else {
            let $g = geo;
            $body
        }
    }};
}
pub(crate) use fixed_format;

/// One hardware walk of `va` for `access`, built once per TLB miss by the MMU: in the address
/// space tagged `psc_tag` (VPID and PCID) in the paging-structure caches, of the VM `vpid`
/// (which tags its NTLB and nested PSC entries).
pub struct Walker<'a> {
    hw: &'a mut WalkHw,
    va: Gva,
    access: Access,
    psc_tag: u32,
    vpid: u16,
}

impl<'a> Walker<'a> {
    /// A walk of `va` for `access` with the hardware `hw`.
    #[inline(always)]
    pub fn new(hw: &'a mut WalkHw, va: Gva, access: Access, psc_tag: u32, vpid: u16) -> Self {
        Walker {
            hw,
            va,
            access,
            psc_tag,
            vpid,
        }
    }

    /// Walks `tables`: the guest's tables natively, over the nested tables in the 2D walk,
    /// over two stages of nested tables in the 3D walk, or the shadow tables (an L1
    /// hypervisor's over EPT01 in 2D). Adds the walk's latency to `cycles`; returns the translation to fill
    /// into the TLB (at the splintered size) or the fault.
    #[inline(always)]
    pub fn walk(mut self, tables: Tables<'_>, cycles: &mut u64) -> Result<Translation, WalkFault> {
        match tables {
            Tables::Guest { mem, pt } => fixed_format!(pt.geo, geo => {
                let mut src = GuestTables {
                    mem,
                    geo,
                    nested: IdentityDim,
                };
                self.descend(&mut src, geo, pt.root, cycles)
            }),
            Tables::Nested { mem, pt, hmem, npt } => fixed_format!(pt.geo, geo => {
                let nested = NestedWalker::new(self.hw, hmem, npt, self.vpid);
                let mut src = GuestTables {
                    mem,
                    geo,
                    nested,
                };
                self.descend(&mut src, geo, pt.root, cycles)
            }),
            Tables::ThreeD {
                mem,
                pt,
                l1mem,
                ept12,
                hmem,
                ept01,
            } => {
                let nested = three_d::ThreeDWalker {
                    l1mem,
                    ept12,
                    ept01: NestedWalker::new(self.hw, hmem, ept01, self.vpid),
                };
                let mut src = GuestTables {
                    mem,
                    geo: pt.geo,
                    nested,
                };
                self.descend(&mut src, pt.geo, pt.root, cycles)
            }
            Tables::L1Shadow {
                l1mem,
                pt: Some(pt),
                hmem,
                ept01,
            } => {
                let nested = NestedWalker::new(self.hw, hmem, ept01, self.vpid);
                let mut src = L1ShadowTables {
                    mem: l1mem,
                    geo: pt.geo,
                    nested,
                };
                self.descend(&mut src, pt.geo, pt.root, cycles)
            }
            Tables::Shadow { hmem, pt: Some(pt) } => fixed_format!(pt.geo, geo => {
                let mut src = ShadowTables { mem: hmem, geo };
                self.descend(&mut src, geo, pt.root, cycles)
            }),
            Tables::Agile(t) => self.walk_agile(t, cycles),
            Tables::Shadow { pt: None, .. } | Tables::L1Shadow { pt: None, .. } => {
                self.hw.stats.walks += 1;
                self.hw.stats.walk_faults += 1;
                Err(WalkFault::NotPresent { level: 0 })
            }
        }
    }

    /// The walk of the 1D table tree of `src` in format `geo` whose root table is at `root`.
    ///
    /// It consults the paging-structure caches first (Intel SDM Vol. 3A §4.10.3: a hit lets
    /// the walk start below the root), references each entry at `{G,level}`, fills the PSC
    /// with every non-leaf entry it uses, sets accessed bits (and the leaf's dirty bit for a
    /// store) where the tables keep them, and translates the data's address through the source
    /// (the `gPA` row of the 2D walk).
    #[inline(always)]
    fn descend<S: TableSource>(
        &mut self,
        src: &mut S,
        geo: Geometry,
        root: S::Table,
        cycles: &mut u64,
    ) -> Result<Translation, WalkFault> {
        let (table, level, use_psc) = self.start::<S>(geo, root, cycles);
        let (va, access) = (self.va, self.access);
        let mut lv = self.levels(src, cycles, geo, use_psc);
        let d = descend(&geo, &mut lv, table, level, va);
        lv.end(d, access)
    }

    /// A walk begins: it is counted, and the paging-structure caches, where the design has
    /// them, may let it start below the root. Returns the table and level it starts at and
    /// whether it uses the PSC.
    #[inline(always)]
    pub(super) fn start<S: TableSource>(
        &mut self,
        geo: Geometry,
        root: S::Table,
        cycles: &mut u64,
    ) -> (S::Table, u8, bool) {
        let hw = &mut *self.hw;
        hw.stats.walks += 1;
        let use_psc = hw.uses_psc() && geo.levels >= 4;
        let (mut table, mut level) = (root, geo.levels);
        if use_psc {
            *cycles += hw.psc_latency as u64;
            if let Some((l, base)) = hw.psc_guest.lookup(self.va.raw(), self.psc_tag, geo.levels) {
                table = S::Table::from_raw(base);
                level = l - 1;
            }
        }
        (table, level, use_psc)
    }

    /// The hardware side of a descent of `src`'s tables by this walk.
    #[inline(always)]
    pub(super) fn levels<'b, S: TableSource>(
        &'b mut self,
        src: &'b mut S,
        cycles: &'b mut u64,
        geo: Geometry,
        use_psc: bool,
    ) -> HwLevels<'b, S> {
        HwLevels {
            hw: &mut *self.hw,
            src,
            cycles,
            geo,
            va: self.va,
            psc_tag: self.psc_tag,
            use_psc,
            entry: Hpa::new(0),
        }
    }
}

/// The hardware side of a 1D descent: locate each table, reference its entry, keep A bits and
/// the PSC.
pub(super) struct HwLevels<'a, S> {
    hw: &'a mut WalkHw,
    src: &'a mut S,
    cycles: &'a mut u64,
    geo: Geometry,
    va: Gva,
    psc_tag: u32,
    use_psc: bool,
    /// Host address of the entry read last (where an A/D update goes).
    entry: Hpa,
}

impl<S: TableSource> HwLevels<'_, S> {
    /// The walk's end after descent `d` for `access`: a fault, or the translation — the
    /// leaf's rights checked, its accessed (and, for a store, dirty) bit set where the tables
    /// keep them, the data's address translated through the source (the `gPA` row).
    #[inline(always)]
    pub(super) fn end(
        self,
        d: Descent<S::Table, Gpa>,
        access: Access,
    ) -> Result<Translation, WalkFault> {
        let (geo, va) = (self.geo, self.va);
        let leaf = match d {
            Descent::Leaf(l) => l,
            Descent::NotPresent { level, .. } => {
                self.hw.stats.walk_faults += 1;
                return Err(WalkFault::NotPresent { level });
            }
            Descent::Stopped(gpa) => {
                self.hw.stats.walk_faults += 1;
                return Err(WalkFault::Nested { gpa });
            }
        };
        if !leaf.perms.allow(access.write, access.fetch) {
            self.hw.stats.walk_faults += 1;
            return Err(WalkFault::Protection);
        }
        let e = leaf.pte;
        let mut bits = 0;
        if !e.accessed() {
            bits |= Pte::A;
        }
        if access.write && !e.dirty() {
            bits |= Pte::D;
        }
        if bits != 0 && self.src.set_bits(leaf.entry, bits) {
            *self.cycles += self.hw.ad_update(self.entry);
        }
        let data = leaf.page(&geo).add(va.page_offset(leaf.size));
        let (data_hpa, nsize) = match self.src.data(self.hw, data, self.cycles) {
            Ok(d) => d,
            Err(gpa) => {
                self.hw.stats.walk_faults += 1;
                return Err(WalkFault::Nested { gpa });
            }
        };
        let size = leaf.size.min(nsize);
        Ok(Translation {
            page: data_hpa.page_base(size),
            size,
            writable: leaf.perms.writable,
            user: leaf.perms.user,
            executable: leaf.perms.exec,
            dirty: e.dirty() || access.write,
            global: e.global(),
        })
    }
}

impl<S: TableSource> Levels for HwLevels<'_, S> {
    type Table = S::Table;
    type Stop = Gpa;

    #[inline(always)]
    fn read(&mut self, table: S::Table, off: u64, level: u8) -> Result<Pte, Gpa> {
        let base = self.src.locate(self.hw, table, level, self.cycles)?;
        self.entry = base.add(off);
        *self.cycles += self.hw.pe_ref(self.entry, COL_G, level as usize);
        Ok(self.src.read(table.add(off)))
    }

    #[inline(always)]
    fn pass(&mut self, table: S::Table, off: u64, level: u8, e: Pte) {
        if self.geo.restricts(level) && !e.accessed() && self.src.set_bits(table.add(off), Pte::A) {
            *self.cycles += self.hw.ad_update(self.entry);
        }
        if self.use_psc && level >= 2 {
            let next = e.frame(self.geo.frame_mask());
            self.hw
                .psc_guest
                .fill(self.va.raw(), self.psc_tag, level, next);
        }
    }
}
