//! The descent over the levels of a page table, written once (Intel SDM Vol. 3A §4.4–4.5; AMD
//! APM Vol. 2 §5.3): from a table at some level, index it with the address, stop at a
//! not-present entry, narrow the permissions by every entry that restricts them, end at a leaf
//! (level 1, or a PS entry where the format allows a large page), else go down to the next
//! table.
//!
//! What differs between the descents of vmmu — the hardware walk of guest or shadow tables,
//! each dimension of the 2D walk, the shadow pager's software walk, the checker's functional
//! translation — is *where an entry is read from and what reading it costs*: a [`Levels`]
//! implementation supplies that, and may stop the descent (a nested fault while locating a
//! guest table). The format's rules (leaf detection, the PAE top level) come from
//! [`Geometry`]; nothing here knows about modes, caches or costs (STYLE.md: KVM's
//! `FNAME(walk_addr_generic)` is the model).
//!
//! Addresses keep their space: the descent translates an address of some space `V` through
//! tables that live in, and point into, one physical space, [`Levels::Table`] — guest tables
//! `Gva → Gpa` in guest memory, nested tables `Gpa → Hpa` and shadow tables `Gva → Hpa` in
//! host memory — so one descent serves all three, typed.

use super::format::Geometry;
use super::pte::Pte;
use crate::addr::{PageSize, Space};
use crate::mem::{PhysAddr, PhysMem};
use std::convert::Infallible;

/// The access rights a path of entries grants (every level's R/W, U/S and NX combined).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Perms {
    /// Stores allowed.
    pub writable: bool,
    /// User-mode accesses allowed.
    pub user: bool,
    /// Instruction fetches allowed.
    pub exec: bool,
}

impl Perms {
    /// No restriction yet (the start of a descent, or below a paging-structure-cache hit, whose
    /// upper entries vmmu always makes permissive).
    pub const ALL: Perms = Perms {
        writable: true,
        user: true,
        exec: true,
    };

    /// Narrows the rights by entry `e`.
    #[inline]
    pub fn narrow(&mut self, e: Pte) {
        self.writable &= e.writable();
        self.user &= e.user();
        self.exec &= e.executable();
    }

    /// Whether a store (`write`) or an instruction fetch (`fetch`) is allowed.
    #[inline]
    pub const fn allow(&self, write: bool, fetch: bool) -> bool {
        (!write || self.writable) && (!fetch || self.exec)
    }
}

/// Where a descent reads its entries, and what reading one does besides.
pub trait Levels {
    /// The physical space the tables live in and point into (their output space too: x86
    /// tables and the pages they map share one).
    type Table: PhysAddr;
    /// Why a descent can stop before reading an entry.
    type Stop;

    /// Reads the entry at byte `off` of the table at `table` (level `level`).
    fn read(&mut self, table: Self::Table, off: u64, level: u8) -> Result<Pte, Self::Stop>;

    /// The descent used the non-leaf entry `e` (at `table + off`, level `level`) to reach its
    /// next table.
    #[inline]
    fn pass(&mut self, _table: Self::Table, _off: u64, _level: u8, _e: Pte) {}
}

/// The leaf a descent ended at, in tables of space `P`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Leaf<P> {
    /// Its level (1 for a 4 KiB page).
    pub level: u8,
    /// The address of the entry.
    pub entry: P,
    /// Its value.
    pub pte: Pte,
    /// The page size it maps.
    pub size: PageSize,
    /// The rights of the whole path.
    pub perms: Perms,
}

impl<P: PhysAddr> Leaf<P> {
    /// The base of the page it maps, in the tables' space.
    #[inline]
    pub fn page(&self, geo: &Geometry) -> P {
        P::from_raw(self.pte.frame(geo.frame_mask()) & !self.size.offset_mask())
    }
}

/// How a descent through tables of space `P` ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Descent<P, S> {
    /// At a leaf.
    Leaf(Leaf<P>),
    /// At a not-present entry of `level`, at address `entry`.
    NotPresent {
        /// The level of the missing entry.
        level: u8,
        /// Its address.
        entry: P,
    },
    /// The [`Levels`] stopped it.
    Stopped(S),
}

/// Descends from the table at `table` of level `level` for `va` (the address the tables
/// translate, of whatever space they translate), reading entries through `levels`.
///
/// The levels are unrolled: each is one copy of [`step`] with its level a constant, so that a
/// level's entry offset, leaf rule and the per-level indices of whatever `levels` counts are
/// computed at compile time. Always inlined, so that a walk over a format known where it is
/// called (`fixed_format!` in walk/mod.rs) is compiled for that format too, and the levels
/// above its root vanish.
#[inline(always)]
pub fn descend<L: Levels, V: Space>(
    geo: &Geometry,
    levels: &mut L,
    mut table: L::Table,
    level: u8,
    va: V,
) -> Descent<L::Table, L::Stop> {
    let va = va.raw();
    let mut perms = Perms::ALL;
    debug_assert!((1..=geo.levels).contains(&level) && geo.levels <= 5);
    macro_rules! at {
        ($l:literal) => {
            if geo.levels >= $l && level >= $l {
                if let Some(end) = step(geo, levels, &mut table, $l, va, &mut perms) {
                    return end;
                }
            }
        };
    }
    at!(5);
    at!(4);
    at!(3);
    at!(2);
    at!(1);
    unreachable!("a descent ends at level 1 at the latest (its entries are leaves)")
}

/// One level of [`descend`]: reads the entry of `va` in the table at `*table` of `level`, and
/// ends the descent there (not present, a leaf, or stopped by `levels`) or moves `*table` to
/// the next table.
#[inline(always)]
fn step<L: Levels>(
    geo: &Geometry,
    levels: &mut L,
    table: &mut L::Table,
    level: u8,
    va: u64,
    perms: &mut Perms,
) -> Option<Descent<L::Table, L::Stop>> {
    let t = *table;
    let off = geo.entry_offset(va, level);
    let e = match levels.read(t, off, level) {
        Ok(e) => e,
        Err(s) => return Some(Descent::Stopped(s)),
    };
    if !e.present() {
        return Some(Descent::NotPresent {
            level,
            entry: t.add(off),
        });
    }
    if geo.restricts(level) {
        perms.narrow(e);
    }
    if let Some(size) = geo.leaf_at(level, e) {
        return Some(Descent::Leaf(Leaf {
            level,
            entry: t.add(off),
            pte: e,
            size,
            perms: *perms,
        }));
    }
    levels.pass(t, off, level, e);
    *table = L::Table::from_raw(e.frame(geo.frame_mask()));
    None
}

/// Reads entries from memory with no side effects: the functional descent of the shadow
/// pager's software walks and the checker.
pub struct Read<'a, A: PhysAddr> {
    /// The memory holding the tables.
    pub mem: &'a PhysMem<A>,
    /// Their format.
    pub geo: Geometry,
}

impl<A: PhysAddr> Levels for Read<'_, A> {
    type Table = A;
    type Stop = Infallible;

    #[inline]
    fn read(&mut self, table: A, off: u64, _level: u8) -> Result<Pte, Infallible> {
        Ok(self.geo.read_entry(self.mem, table.add(off)))
    }
}

/// A functional descent that also records, per level, the table read and the entry found
/// there: what the shadow pager needs to build the shadow path.
pub struct Trace<'a, A: PhysAddr> {
    /// Where the entries are read.
    pub read: Read<'a, A>,
    /// `(table, entry)` per level (index = level); levels not reached are left as they were.
    pub path: [(A, Pte); 6],
}

impl<'a, A: PhysAddr> Trace<'a, A> {
    /// A recorder over `mem` with tables of format `geo`.
    pub fn new(mem: &'a PhysMem<A>, geo: Geometry) -> Self {
        Trace {
            read: Read { mem, geo },
            path: [(A::from_raw(0), Pte(0)); 6],
        }
    }
}

impl<A: PhysAddr> Levels for Trace<'_, A> {
    type Table = A;
    type Stop = Infallible;

    #[inline]
    fn read(&mut self, table: A, off: u64, level: u8) -> Result<Pte, Infallible> {
        let e = self.read.read(table, off, level)?;
        self.path[level as usize] = (table, e);
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{Gpa, Gva};
    use crate::config::PagingFormat;
    use crate::paging::PageTable;

    fn table(format: PagingFormat) -> (PhysMem<Gpa>, PageTable<Gva, Gpa>) {
        let mut mem = PhysMem::new(64 << 20);
        let mut next = 0x10_0000u64;
        let pt = PageTable::new(Geometry::of(format), &mut mem, &mut || {
            next += 0x1000;
            Some(Gpa::new(next))
        })
        .unwrap();
        (mem, pt)
    }

    /// The descent as a plain loop over the levels: what the unrolled [`descend`] must equal.
    fn descend_loop<L: Levels>(
        geo: &Geometry,
        levels: &mut L,
        mut table: L::Table,
        mut level: u8,
        va: u64,
    ) -> Descent<L::Table, L::Stop> {
        let mut perms = Perms::ALL;
        loop {
            let off = geo.entry_offset(va, level);
            let e = match levels.read(table, off, level) {
                Ok(e) => e,
                Err(s) => return Descent::Stopped(s),
            };
            if !e.present() {
                let entry = table.add(off);
                return Descent::NotPresent { level, entry };
            }
            if geo.restricts(level) {
                perms.narrow(e);
            }
            if let Some(size) = geo.leaf_at(level, e) {
                let (entry, pte) = (table.add(off), e);
                return Descent::Leaf(Leaf {
                    level,
                    entry,
                    pte,
                    size,
                    perms,
                });
            }
            levels.pass(table, off, level, e);
            table = L::Table::from_raw(e.frame(geo.frame_mask()));
            level -= 1;
        }
    }

    proptest::proptest! {
        /// In every format, from every level a walk may start at (the root, or below a
        /// paging-structure-cache hit: the table the path passes there), the unrolled descent
        /// ends where the loop ends, with the same entry, size and rights, over tables with
        /// pages of every size the format has, read-only, supervisor and no-execute ones
        /// among them.
        #[test]
        fn the_unrolled_descent_is_the_loop(
            fmt in 0usize..4,
            maps in proptest::collection::vec((0u64..64, 0usize..3, 0u64..8), 1..24),
            probes in proptest::collection::vec(0u64..64, 1..24),
        ) {
            let format = [
                PagingFormat::X86_32,
                PagingFormat::Pae,
                PagingFormat::Long4,
                PagingFormat::Long5,
            ][fmt];
            let (mut mem, pt) = table(format);
            let geo = pt.geo;
            let sizes: Vec<PageSize> = PageSize::ALL.into_iter().filter(|&s| geo.supports(s)).collect();
            let mut next = 0x200_0000u64;
            let mut log = Vec::new();
            // Slot `i` of 64: its top three bits pick an eighth of the address space (so the
            // root has several entries in every format), its low three a 2 MiB and a 4 KiB
            // step inside it (so paths share upper tables and part below them).
            let at = |i: u64| {
                let va = ((i >> 3) << (geo.va_bits - 3)) + (i & 7) * 0x20_1000;
                Gva::new(geo.canonical(va))
            };
            for (i, size, flags) in maps {
                let size = sizes[size % sizes.len()];
                let rw_us = Pte::RW | Pte::US;
                let flags = [0, Pte::RW, Pte::US, Pte::NX, rw_us, rw_us | Pte::NX, Pte::US | Pte::NX, Pte::RW | Pte::NX][flags as usize];
                let va = Gva::new(at(i).raw() & !size.offset_mask());
                let new_frame = &mut || {
                    next += 0x1000;
                    Some(Gpa::new(next))
                };
                let _ = pt.map(&mut mem, new_frame, va, Gpa::new(0x4000_0000), size, flags, &mut log);
            }
            for i in probes {
                let va = at(i).raw() | 0x123;
                let whole = descend_loop(&geo, &mut Read { mem: &mem, geo }, pt.root, geo.levels, va);
                proptest::prop_assert_eq!(descend(&geo, &mut Read { mem: &mem, geo }, pt.root, geo.levels, Gva::new(va)), whole);
                // From each lower level, starting at the table the path passes there.
                let mut t = Trace::new(&mem, geo);
                descend(&geo, &mut t, pt.root, geo.levels, Gva::new(va));
                for start in 1..geo.levels {
                    let above = t.path[start as usize + 1];
                    if !above.1.present() || geo.leaf_at(start + 1, above.1).is_some() {
                        break;
                    }
                    let table = Gpa::new(above.1.frame(geo.frame_mask()));
                    let want = descend_loop(&geo, &mut Read { mem: &mem, geo }, table, start, va);
                    proptest::prop_assert_eq!(descend(&geo, &mut Read { mem: &mem, geo }, table, start, Gva::new(va)), want);
                }
            }
        }
    }

    #[test]
    fn the_pae_top_level_restricts_nothing() {
        let (mut mem, pt) = table(PagingFormat::Pae);
        let mut next = 0x80_0000u64;
        let mut log = Vec::new();
        pt.map(
            &mut mem,
            &mut || {
                next += 0x1000;
                Some(Gpa::new(next))
            },
            Gva::new(0x4000_1000),
            Gpa::new(0x7000),
            PageSize::Size4K,
            Pte::RW | Pte::US,
            &mut log,
        )
        .unwrap();
        // The PDPTE written by `map` has only P: were it read as a restricting entry, the page
        // would be read-only and supervisor-only.
        assert_eq!(log[0].new & (Pte::RW | Pte::US), 0);
        let geo = pt.geo;
        let d = descend(
            &geo,
            &mut Read { mem: &mem, geo },
            pt.root,
            3,
            Gva::new(0x4000_1234),
        );
        let Descent::Leaf(leaf) = d else {
            panic!("{d:?}")
        };
        assert_eq!(leaf.perms, Perms::ALL);
        assert_eq!((leaf.level, leaf.page(&geo)), (1, Gpa::new(0x7000)));
    }

    #[test]
    fn a_descent_stops_at_the_first_missing_level_and_records_its_path() {
        let (mem, pt) = table(PagingFormat::Long4);
        let geo = pt.geo;
        let mut t = Trace::new(&mem, geo);
        let d = descend(&geo, &mut t, pt.root, 4, Gva::new(0x7000_0000));
        assert!(matches!(d, Descent::NotPresent { level: 4, .. }), "{d:?}");
        assert_eq!(t.path[4].0, pt.root);
    }
}
