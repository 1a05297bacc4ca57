//! The agile-paging walk (Gandhi, Hill & Swift, "Agile Paging: Exceeding the Best of Nested and
//! Shadow Paging", ISCA 2016): a walk starts in the shadow tables (the shadow root register,
//! sCR3) and, at an entry whose switching bit is set, continues in nested mode — the guest's
//! lower tables walked in 2D against the nested tables (the host root register, nCR3). The
//! switching entry holds the host address of the guest table below it, so that table is read
//! without a nested walk; each guest table after it is located by one, and so is the data.
//! A guest root marked nested (the guest root register, gCR3) makes the whole walk 2D.
//!
//! References at `n` = 4 levels with no cache hit, `i` the shadow levels walked before the
//! switch (DESIGN.md law 11):
//! - `i = n` (no switch): `n` = 4, a shadow walk's;
//! - `1 ≤ i < n`: `i` shadow entries, the guest table the switching entry names (1), then
//!   `n − i − 1` guest tables located by a nested walk each (`n + 1` references with their
//!   entry) and the data's nested walk (`n`): `i + 1 + (n+1)(n−i−1) + n` = 20 − 4i at
//!   n = 4 (16, 12, 8 for i = 1, 2, 3);
//! - `i = 0` (gCR3 nested): the 2D walk, `(n+1)² − 1` = 24.
//!
//! Both parts are the one descent of [`crate::paging::descent`]: the shadow part through
//! [`Switching`], which stops it at a switching entry, the nested part from the table the entry
//! names. The nested part — and the whole walk from a nested gCR3 — does not use the
//! paging-structure caches of the linear dimension (their entries would mix shadow tables'
//! host addresses with guest tables' guest-physical ones, as Intel keeps "linear" and
//! "combined" mappings apart, SDM Vol. 3A §28.3.1; assumption: the linear caches serve the
//! shadow part only).

use super::nested::NestedWalker;
use super::tables::{GuestTables, ShadowTables, TableSource};
use super::{NestedDim, WalkFault, WalkHw, Walker};
use crate::addr::{Gpa, Gva, Hpa, PageSize};
use crate::hw::tlb::Translation;
use crate::mem::PhysMem;
use crate::paging::descent::{descend, Descent, Levels};
use crate::paging::{PageTable, Pte};
use rustc_hash::FxHashMap;

/// What an agile walk reads: the three root registers and the memories they point into.
pub struct AgileTables<'a> {
    /// Guest memory.
    pub mem: &'a mut PhysMem<Gpa>,
    /// The guest's tables (gCR3).
    pub pt: PageTable<Gva, Gpa>,
    /// Host memory, holding the nested and the shadow tables.
    pub hmem: &'a PhysMem<Hpa>,
    /// The nested tables (nCR3).
    pub npt: PageTable<Gpa, Hpa>,
    /// The shadow tables (sCR3); `None` before the hypervisor loads a root (the walk faults).
    pub spt: Option<PageTable<Gva, Hpa>>,
    /// The guest's root table is in nested mode: the walk is 2D from gCR3.
    pub nested_root: bool,
    /// The guest-physical frame of each guest table a switching entry names, by its host
    /// frame (the model reads guest tables in guest memory; the hardware reads them at the
    /// host address the entry holds).
    pub guest_of: &'a FxHashMap<u64, Gpa>,
}

/// Why a descent through [`Switching`] stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SwitchStop<S> {
    /// The wrapped levels stopped it.
    Inner(S),
    /// At a present entry with the switching bit: the walk goes on in nested mode below it.
    At {
        /// The entry's level.
        level: u8,
        /// The entry.
        entry: Pte,
    },
}

/// A descent's levels `L` that stop at a switching entry ([`Pte::SWITCH`]) once it is read:
/// the shadow part of an agile walk, in hardware or in the hypervisor's software walk.
pub struct Switching<'l, L>(pub &'l mut L);

impl<L: Levels> Levels for Switching<'_, L> {
    type Table = L::Table;
    type Stop = SwitchStop<L::Stop>;

    #[inline]
    fn read(&mut self, table: L::Table, off: u64, level: u8) -> Result<Pte, Self::Stop> {
        let e = self.0.read(table, off, level).map_err(SwitchStop::Inner)?;
        if e.present() && e.0 & Pte::SWITCH != 0 {
            return Err(SwitchStop::At { level, entry: e });
        }
        Ok(e)
    }

    #[inline]
    fn pass(&mut self, table: L::Table, off: u64, level: u8, e: Pte) {
        self.0.pass(table, off, level, e);
    }
}

/// The guest's tables below a switching entry: the first one at the host address the entry
/// holds (no nested walk), each later one located by the nested dimension.
struct BelowSwitch<'a, N: NestedDim> {
    first: Option<Hpa>,
    guest: GuestTables<'a, N>,
}

impl<N: NestedDim> TableSource for BelowSwitch<'_, N> {
    type Table = Gpa;

    #[inline]
    fn locate(
        &mut self,
        hw: &mut WalkHw,
        table: Gpa,
        level: u8,
        cycles: &mut u64,
    ) -> Result<Hpa, Gpa> {
        match self.first.take() {
            Some(h) => Ok(h),
            None => self.guest.locate(hw, table, level, cycles),
        }
    }

    #[inline]
    fn read(&self, addr: Gpa) -> Pte {
        self.guest.read(addr)
    }

    #[inline]
    fn set_bits(&mut self, addr: Gpa, bits: u64) -> bool {
        self.guest.set_bits(addr, bits)
    }

    #[inline]
    fn data(
        &mut self,
        hw: &mut WalkHw,
        addr: Gpa,
        cycles: &mut u64,
    ) -> Result<(Hpa, PageSize), Gpa> {
        self.guest.data(hw, addr, cycles)
    }
}

impl Walker<'_> {
    /// The agile walk of `t`: shadow levels down to a switching entry, then the guest's
    /// levels in 2D; counted by the shadow levels walked ([`super::WalkStats::agile`]).
    pub(super) fn walk_agile(
        mut self,
        t: AgileTables<'_>,
        cycles: &mut u64,
    ) -> Result<Translation, WalkFault> {
        let geo = t.pt.geo;
        let (va, access, vpid) = (self.va, self.access, self.vpid);
        if t.nested_root {
            self.hw.stats.agile[0] += 1;
            let nested = NestedWalker::new(self.hw, t.hmem, t.npt, vpid);
            let mut src = GuestTables {
                mem: t.mem,
                geo,
                nested,
            };
            self.hw.stats.walks += 1;
            let mut lv = self.levels(&mut src, cycles, geo, false);
            let d = descend(&geo, &mut lv, t.pt.root, geo.levels, va);
            return lv.end(d, access);
        }
        let Some(spt) = t.spt else {
            self.hw.stats.agile[geo.levels as usize] += 1;
            self.hw.stats.walks += 1;
            self.hw.stats.walk_faults += 1;
            return Err(WalkFault::NotPresent { level: 0 });
        };
        let mut shadow = ShadowTables {
            mem: t.hmem,
            geo: spt.geo,
        };
        let (table, level, use_psc) = self.start::<ShadowTables>(geo, spt.root, cycles);
        let (level, entry) = {
            let mut lv = self.levels(&mut shadow, cycles, geo, use_psc);
            let d = descend(&geo, &mut Switching(&mut lv), table, level, va);
            let d = match d {
                Descent::Stopped(SwitchStop::At { level, entry }) => Ok((level, entry)),
                Descent::Stopped(SwitchStop::Inner(g)) => Err(Descent::Stopped(g)),
                Descent::Leaf(l) => Err(Descent::Leaf(l)),
                Descent::NotPresent { level, entry } => Err(Descent::NotPresent { level, entry }),
            };
            match d {
                Ok(at) => at,
                Err(d) => {
                    lv.hw.stats.agile[geo.levels as usize] += 1;
                    return lv.end(d, access);
                }
            }
        };
        let shadow_levels = geo.levels - level + 1;
        self.hw.stats.agile[shadow_levels as usize] += 1;
        let host = Hpa::new(entry.frame(geo.frame_mask()));
        let Some(&gpa) = t.guest_of.get(&host.raw()) else {
            // A switching entry the hypervisor did not record: a hidden fault rewrites it.
            self.hw.stats.walk_faults += 1;
            return Err(WalkFault::NotPresent { level });
        };
        let nested = NestedWalker::new(self.hw, t.hmem, t.npt, vpid);
        let mut src = BelowSwitch {
            first: Some(host),
            guest: GuestTables {
                mem: t.mem,
                geo,
                nested,
            },
        };
        let mut lv = self.levels(&mut src, cycles, geo, false);
        let d = match descend(&geo, &mut lv, gpa, level - 1, va) {
            // The switching entry's rights are the guest path's above it.
            Descent::Leaf(mut l) => {
                l.perms.narrow(entry);
                Descent::Leaf(l)
            }
            other => other,
        };
        lv.end(d, access)
    }
}
