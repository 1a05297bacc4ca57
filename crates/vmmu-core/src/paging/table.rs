//! A page table as real bytes in a [`PhysMem`]: map, unmap, protect and look up at any page
//! size, allocating zeroed table frames on demand.
//!
//! A table maps one address space to another — guest tables `Gva` → `Gpa`, nested tables
//! `Gpa` → `Hpa`, shadow tables `Gva` → `Hpa` — and its type says which. Upper-level entries
//! are made permissive ([`Geometry::table_entry_flags`]) so that leaves alone decide
//! permissions, as Linux and hypervisors do. Every entry write can be logged as a
//! [`TableWrite`]: the shadow pager sees guest page-table writes through this log. Lookups use
//! the one descent of [`super::descent`].

use super::descent::{descend, Descent, Leaf, Read};
use super::format::Geometry;
use super::pte::Pte;
use crate::addr::{PageSize, Space};
use crate::mem::{PhysAddr, PhysMem};
use std::marker::PhantomData;

/// One write to a page entry: where, the old value and the new.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TableWrite<P> {
    /// Address of the entry, in the table's memory.
    pub addr: P,
    /// Level of the table written (1 = leaf table).
    pub level: u8,
    /// Previous value.
    pub old: u64,
    /// New value.
    pub new: u64,
}

/// Why a mapping could not be made.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MapError {
    /// No frame for a new table.
    OutOfMemory,
    /// The format has no leaves of this size.
    UnsupportedSize(PageSize),
    /// A leaf already covers the range at a different level, or a table sits where a large
    /// leaf was asked for.
    Conflict {
        /// Level where the conflict was found.
        level: u8,
    },
}

/// A page-table tree rooted at `root`, translating addresses of space `V` into space `P`, in
/// memory of space `P`. The tree itself lives in the memory passed to each call, so every
/// operation takes `&self`.
#[derive(Debug)]
pub struct PageTable<V: Space, P: PhysAddr> {
    /// The format.
    pub geo: Geometry,
    /// Physical address of the root table (what CR3 / nCR3 / the EPTP holds).
    pub root: P,
    _input: PhantomData<V>,
}

impl<V: Space, P: PhysAddr> Clone for PageTable<V, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V: Space, P: PhysAddr> Copy for PageTable<V, P> {}

impl<V: Space, P: PhysAddr> PageTable<V, P> {
    /// A new, empty tree; `new_frame` hands out a frame for the root.
    pub fn new(
        geo: Geometry,
        mem: &mut PhysMem<P>,
        new_frame: &mut dyn FnMut() -> Option<P>,
    ) -> Option<Self> {
        let root = new_frame()?;
        mem.zero_frame(root);
        Some(Self::at(geo, root))
    }

    /// The tree whose root table is at `root` (already in memory).
    pub const fn at(geo: Geometry, root: P) -> Self {
        PageTable {
            geo,
            root,
            _input: PhantomData,
        }
    }

    #[inline]
    fn read(&self, mem: &PhysMem<P>, addr: u64) -> Pte {
        self.geo.read_entry(mem, P::from_raw(addr))
    }

    fn write(
        &self,
        mem: &mut PhysMem<P>,
        addr: u64,
        level: u8,
        v: Pte,
        log: &mut Vec<TableWrite<P>>,
    ) {
        let old = self.read(mem, addr);
        self.geo.write_entry(mem, P::from_raw(addr), v);
        log.push(TableWrite {
            addr: P::from_raw(addr),
            level,
            old: old.0,
            new: v.0,
        });
    }

    /// Maps the page of `size` at `va` to the frame at `pa` with leaf `flags` (any of `RW`,
    /// `US`, `G`, `NX`, `A`, `D`; `P` and, for large pages, `PS` are added). Replaces an
    /// existing leaf of the same size. NX is dropped in 32-bit paging, which has no such bit.
    #[allow(clippy::too_many_arguments)]
    pub fn map(
        &self,
        mem: &mut PhysMem<P>,
        new_frame: &mut dyn FnMut() -> Option<P>,
        va: V,
        pa: P,
        size: PageSize,
        flags: u64,
        log: &mut Vec<TableWrite<P>>,
    ) -> Result<(), MapError> {
        let geo = self.geo;
        let leaf_level = geo.level_of(size).ok_or(MapError::UnsupportedSize(size))?;
        let va = va.raw();
        let mut table = self.root.raw();
        let mut level = geo.levels;
        while level > leaf_level {
            let ea = table + geo.entry_offset(va, level);
            let e = self.read(mem, ea);
            if e.present() {
                if geo.leaf_at(level, e).is_some() {
                    return Err(MapError::Conflict { level });
                }
                table = e.frame(geo.frame_mask());
            } else {
                let f = new_frame().ok_or(MapError::OutOfMemory)?;
                mem.zero_frame(f);
                let ne = Pte(f.raw() | geo.table_entry_flags(level));
                self.write(mem, ea, level, ne, log);
                table = f.raw();
            }
            level -= 1;
        }
        let ea = table + geo.entry_offset(va, leaf_level);
        let old = self.read(mem, ea);
        if leaf_level > 1 && old.present() && !old.large() {
            return Err(MapError::Conflict { level: leaf_level });
        }
        let mut f = flags & (Pte::RW | Pte::US | Pte::G | Pte::NX | Pte::A | Pte::D);
        if geo.entry_bytes == 4 {
            f &= !Pte::NX;
        }
        let mut v = (pa.raw() & !size.offset_mask() & geo.frame_mask()) | f | Pte::P;
        if leaf_level > 1 {
            v |= Pte::PS;
        }
        self.write(mem, ea, leaf_level, Pte(v), log);
        Ok(())
    }

    /// Replaces the table that the entry of `size`'s level covering `va` points to by a leaf
    /// of `size` mapping `pa` with `flags` (as [`PageTable::map`]): the entry is cleared, then
    /// written, two logged writes (Linux's collapse: `pmdp_collapse_flush`, then
    /// `set_pmd_at`). Returns the frame of the table it unlinked, which the caller frees.
    #[allow(clippy::too_many_arguments)]
    pub fn replace_table(
        &self,
        mem: &mut PhysMem<P>,
        va: V,
        pa: P,
        size: PageSize,
        flags: u64,
        log: &mut Vec<TableWrite<P>>,
    ) -> Result<P, MapError> {
        let geo = self.geo;
        let leaf_level = geo.level_of(size).ok_or(MapError::UnsupportedSize(size))?;
        let va = va.raw();
        let mut table = self.root.raw();
        let mut level = geo.levels;
        loop {
            let ea = table + geo.entry_offset(va, level);
            let e = self.read(mem, ea);
            if !e.present() || geo.leaf_at(level, e).is_some() {
                return Err(MapError::Conflict { level });
            }
            if level == leaf_level {
                let mut f = flags & (Pte::RW | Pte::US | Pte::G | Pte::NX | Pte::A | Pte::D);
                if geo.entry_bytes == 4 {
                    f &= !Pte::NX;
                }
                let v = (pa.raw() & !size.offset_mask() & geo.frame_mask()) | f | Pte::P | Pte::PS;
                self.write(mem, ea, level, Pte(0), log);
                self.write(mem, ea, level, Pte(v), log);
                return Ok(P::from_raw(e.frame(geo.frame_mask())));
            }
            table = e.frame(geo.frame_mask());
            level -= 1;
        }
    }

    /// The leaf that maps `va`, found by the one descent.
    #[inline]
    pub fn leaf_of(&self, mem: &PhysMem<P>, va: V) -> Option<Leaf<P>> {
        let geo = self.geo;
        match descend(&geo, &mut Read { mem, geo }, self.root, geo.levels, va) {
            Descent::Leaf(l) => Some(l),
            Descent::NotPresent { .. } => None,
            Descent::Stopped(never) => match never {},
        }
    }

    /// Walks to the leaf mapping `va`: its entry address, level and value.
    pub fn leaf(&self, mem: &PhysMem<P>, va: V) -> Option<(P, u8, Pte)> {
        self.leaf_of(mem, va).map(|l| (l.entry, l.level, l.pte))
    }

    /// Functional translation of `va`: the physical address, the page size and the leaf entry.
    pub fn lookup(&self, mem: &PhysMem<P>, va: V) -> Option<(P, PageSize, Pte)> {
        let l = self.leaf_of(mem, va)?;
        Some((
            l.page(&self.geo).add(va.raw() & l.size.offset_mask()),
            l.size,
            l.pte,
        ))
    }

    /// Removes the leaf mapping `va` (of whatever size); returns its frame and size. Tables are
    /// kept (Linux frees them lazily too).
    pub fn unmap(
        &self,
        mem: &mut PhysMem<P>,
        va: V,
        log: &mut Vec<TableWrite<P>>,
    ) -> Option<(P, PageSize)> {
        let l = self.leaf_of(mem, va)?;
        self.write(mem, l.entry.raw(), l.level, Pte(0), log);
        Some((l.page(&self.geo), l.size))
    }

    /// Sets and clears leaf bits of the mapping of `va`; false when nothing maps it.
    pub fn protect(
        &self,
        mem: &mut PhysMem<P>,
        va: V,
        set: u64,
        clear: u64,
        log: &mut Vec<TableWrite<P>>,
    ) -> bool {
        match self.leaf_of(mem, va) {
            Some(l) => {
                let v = Pte((l.pte.0 | set) & !clear);
                if v != l.pte {
                    self.write(mem, l.entry.raw(), l.level, v, log);
                }
                true
            }
            None => false,
        }
    }

    /// Sets bits in the entry at `addr` of `level` (A/D updates); logged like any write.
    pub fn set_bits(
        &self,
        mem: &mut PhysMem<P>,
        addr: P,
        level: u8,
        bits: u64,
        log: &mut Vec<TableWrite<P>>,
    ) {
        let e = self.read(mem, addr.raw());
        if e.0 & bits != bits {
            self.write(mem, addr.raw(), level, Pte(e.0 | bits), log);
        }
    }

    /// Calls `f(va, entry_addr, level, pte)` for every present leaf of the tree, in address
    /// order (`va` is the first address the leaf maps, canonical).
    pub fn for_each_leaf(&self, mem: &PhysMem<P>, f: &mut dyn FnMut(V, P, u8, Pte)) {
        self.leaves_of(mem, self.root.raw(), self.geo.levels, 0, f);
    }

    /// Like [`PageTable::for_each_leaf`], restricted to leaves overlapping `[start, end)`.
    pub fn for_each_leaf_in(
        &self,
        mem: &PhysMem<P>,
        start: V,
        end: V,
        f: &mut dyn FnMut(V, P, u8, Pte),
    ) {
        let geo = self.geo;
        let mask = if geo.va_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << geo.va_bits) - 1
        };
        let (s, e) = (start.raw() & mask, ((end.raw() - 1) & mask) + 1);
        // Walk page by page at the largest granularity the leaves allow; skip each absent
        // region whole, at the level where the descent stopped.
        let mut va = s;
        while va < e {
            match descend(
                &geo,
                &mut Read { mem, geo },
                self.root,
                geo.levels,
                V::from_raw(va),
            ) {
                Descent::Leaf(l) => {
                    let base = va & !l.size.offset_mask();
                    f(V::from_raw(geo.canonical(base)), l.entry, l.level, l.pte);
                    va = base + l.size.bytes();
                }
                Descent::NotPresent { level, .. } => {
                    let span = 1u64 << geo.level_shift(level);
                    va = (va & !(span - 1)) + span;
                }
                Descent::Stopped(never) => match never {},
            }
        }
    }

    fn leaves_of(
        &self,
        mem: &PhysMem<P>,
        table: u64,
        level: u8,
        base: u64,
        f: &mut dyn FnMut(V, P, u8, Pte),
    ) {
        let geo = self.geo;
        for i in 0..geo.entries(level) {
            let ea = table + i * geo.entry_bytes as u64;
            let e = self.read(mem, ea);
            if !e.present() {
                continue;
            }
            let va = base | (i << geo.level_shift(level));
            if geo.leaf_at(level, e).is_some() {
                f(V::from_raw(geo.canonical(va)), P::from_raw(ea), level, e);
            } else {
                self.leaves_of(mem, e.frame(geo.frame_mask()), level - 1, va, f);
            }
        }
    }

    /// Every table frame of the tree (root included), for teardown.
    pub fn table_frames(&self, mem: &PhysMem<P>) -> Vec<P> {
        let mut out = Vec::new();
        self.collect(mem, self.root.raw(), self.geo.levels, &mut out);
        out
    }

    fn collect(&self, mem: &PhysMem<P>, table: u64, level: u8, out: &mut Vec<P>) {
        out.push(P::from_raw(table));
        if level == 1 {
            return;
        }
        let geo = self.geo;
        for i in 0..geo.entries(level) {
            let e = self.read(mem, table + i * geo.entry_bytes as u64);
            if e.present() && geo.leaf_at(level, e).is_none() {
                self.collect(mem, e.frame(geo.frame_mask()), level - 1, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{Gpa, Gva};
    use crate::config::PagingFormat;

    fn setup(format: PagingFormat) -> (PhysMem<Gpa>, PageTable<Gva, Gpa>, u64) {
        let mut mem = PhysMem::new(64 << 20);
        let mut next = 0x10_0000u64;
        let pt = PageTable::new(Geometry::of(format), &mut mem, &mut || {
            next += 0x1000;
            Some(Gpa::new(next))
        })
        .unwrap();
        (mem, pt, 0x20_0000)
    }

    fn frames(start: u64) -> impl FnMut() -> Option<Gpa> {
        let mut next = start;
        move || {
            next += 0x1000;
            Some(Gpa::new(next))
        }
    }

    #[test]
    fn map_then_lookup_in_every_format_and_size() {
        for (format, sizes) in [
            (
                PagingFormat::X86_32,
                &[PageSize::Size4K, PageSize::Size4M][..],
            ),
            (PagingFormat::Pae, &[PageSize::Size4K, PageSize::Size2M][..]),
            (
                PagingFormat::Long4,
                &[PageSize::Size4K, PageSize::Size2M, PageSize::Size1G][..],
            ),
            (
                PagingFormat::Long5,
                &[PageSize::Size4K, PageSize::Size2M, PageSize::Size1G][..],
            ),
        ] {
            let (mut mem, pt, _) = setup(format);
            let mut nf = frames(0x200_0000);
            let mut log = Vec::new();
            for (i, &s) in sizes.iter().enumerate() {
                let va = (i as u64 + 1) << 30
                    >> if format == PagingFormat::Long4 || format == PagingFormat::Long5 {
                        0
                    } else {
                        2
                    };
                let va = va & !s.offset_mask();
                let pa = (1u64 << 31) & !s.offset_mask();
                pt.map(
                    &mut mem,
                    &mut nf,
                    Gva::new(va),
                    Gpa::new(pa),
                    s,
                    Pte::RW,
                    &mut log,
                )
                .unwrap();
                let (got, size, e) = pt.lookup(&mem, Gva::new(va + 0x123)).unwrap();
                assert_eq!((got, size), (Gpa::new(pa + 0x123), s), "{format:?} {s}");
                assert!(e.writable());
            }
        }
    }

    #[test]
    fn a_4k_map_in_long_mode_writes_four_entries() {
        let (mut mem, pt, _) = setup(PagingFormat::Long4);
        let mut log = Vec::new();
        pt.map(
            &mut mem,
            &mut frames(0x300_0000),
            Gva::new(0x7000_1000),
            Gpa::new(0x5000),
            PageSize::Size4K,
            0,
            &mut log,
        )
        .unwrap();
        assert_eq!(log.len(), 4);
        assert_eq!(
            log.iter().map(|w| w.level).collect::<Vec<_>>(),
            vec![4, 3, 2, 1]
        );
        log.clear();
        // A neighbour in the same leaf table writes only its own entry.
        pt.map(
            &mut mem,
            &mut frames(0x400_0000),
            Gva::new(0x7000_2000),
            Gpa::new(0x6000),
            PageSize::Size4K,
            0,
            &mut log,
        )
        .unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(pt.table_frames(&mem).len(), 4);
    }

    #[test]
    fn replacing_a_leaf_table_by_a_large_leaf_writes_the_entry_twice() {
        let (mut mem, pt, _) = setup(PagingFormat::Long4);
        let mut log = Vec::new();
        let mut nf = frames(0x300_0000);
        pt.map(
            &mut mem,
            &mut nf,
            Gva::new(0x4000_3000),
            Gpa::new(0x5000),
            PageSize::Size4K,
            Pte::RW,
            &mut log,
        )
        .unwrap();
        let (pte_addr, _, _) = pt.leaf(&mem, Gva::new(0x4000_3000)).unwrap();
        log.clear();
        let table = pt
            .replace_table(
                &mut mem,
                Gva::new(0x4010_0000),
                Gpa::new(0x60_0000),
                PageSize::Size2M,
                Pte::RW | Pte::A | Pte::D,
                &mut log,
            )
            .unwrap();
        assert_eq!(
            table.raw(),
            pte_addr.raw() & !0xfff,
            "the leaf table is unlinked"
        );
        assert_eq!(log.len(), 2);
        assert_eq!((log[0].level, log[0].new), (2, 0), "cleared first");
        let (pa, size, e) = pt.lookup(&mem, Gva::new(0x4000_3123)).unwrap();
        assert_eq!((pa, size), (Gpa::new(0x60_3123), PageSize::Size2M));
        assert!(e.writable() && e.dirty());
        // A large leaf or an absent table is not a table to replace.
        let err = pt.replace_table(
            &mut mem,
            Gva::new(0x4000_0000),
            Gpa::new(0x80_0000),
            PageSize::Size2M,
            0,
            &mut log,
        );
        assert_eq!(err, Err(MapError::Conflict { level: 2 }));
        let err = pt.replace_table(
            &mut mem,
            Gva::new(0x8000_0000),
            Gpa::new(0x80_0000),
            PageSize::Size2M,
            0,
            &mut log,
        );
        assert!(err.is_err());
    }

    #[test]
    fn unmap_and_protect_change_the_leaf() {
        let (mut mem, pt, _) = setup(PagingFormat::Long4);
        let mut log = Vec::new();
        let mut nf = frames(0x300_0000);
        pt.map(
            &mut mem,
            &mut nf,
            Gva::new(0x4000_0000),
            Gpa::new(0x20_0000),
            PageSize::Size2M,
            Pte::RW,
            &mut log,
        )
        .unwrap();
        assert!(pt.protect(&mut mem, Gva::new(0x4000_0000), 0, Pte::RW, &mut log));
        assert!(!pt.lookup(&mem, Gva::new(0x4010_0000)).unwrap().2.writable());
        assert_eq!(
            pt.unmap(&mut mem, Gva::new(0x4010_0000), &mut log),
            Some((Gpa::new(0x20_0000), PageSize::Size2M))
        );
        assert!(pt.lookup(&mem, Gva::new(0x4000_0000)).is_none());
        assert!(!pt.protect(&mut mem, Gva::new(0x4000_0000), 0, Pte::RW, &mut log));
    }

    #[test]
    fn conflicting_sizes_are_refused() {
        let (mut mem, pt, _) = setup(PagingFormat::Long4);
        let mut log = Vec::new();
        let mut nf = frames(0x300_0000);
        pt.map(
            &mut mem,
            &mut nf,
            Gva::new(0x4000_0000),
            Gpa::new(0),
            PageSize::Size2M,
            0,
            &mut log,
        )
        .unwrap();
        assert_eq!(
            pt.map(
                &mut mem,
                &mut nf,
                Gva::new(0x4000_1000),
                Gpa::new(0),
                PageSize::Size4K,
                0,
                &mut log
            ),
            Err(MapError::Conflict { level: 2 })
        );
        assert_eq!(
            Err(MapError::UnsupportedSize(PageSize::Size4M)),
            pt.map(
                &mut mem,
                &mut nf,
                Gva::new(0),
                Gpa::new(0),
                PageSize::Size4M,
                0,
                &mut log
            )
        );
    }
}
