//! A page table as real bytes in a [`PhysMem`]: map, unmap, protect and look up at any page
//! size, allocating zeroed table frames on demand.
//!
//! Upper-level entries are made permissive (`P|RW|US`, or only `P` for PAE PDPT entries, whose
//! other bits are reserved — Intel SDM Vol. 3A §4.4.1) so that leaves alone decide permissions;
//! this is what Linux and hypervisors do. Every entry write can be logged as a [`TableWrite`]:
//! the shadow pager of a later issue sees guest page-table writes through this log.

use super::format::Geometry;
use super::pte::Pte;
use crate::addr::PageSize;
use crate::mem::{PhysAddr, PhysMem};

/// One write to a page entry: where, the old value and the new.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TableWrite {
    /// Physical address of the entry, in the table's address space.
    pub addr: u64,
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

/// A page-table tree rooted at `root` in memory of address space `A`. The tree itself lives in
/// the memory passed to each call, so every operation takes `&self`.
#[derive(Clone, Copy, Debug)]
pub struct PageTable<A: PhysAddr> {
    /// The format.
    pub geo: Geometry,
    /// Physical address of the root table (what CR3 / nCR3 / the EPTP holds).
    pub root: A,
}

impl<A: PhysAddr> PageTable<A> {
    /// A new, empty tree; `new_frame` hands out a frame for the root.
    pub fn new(
        geo: Geometry,
        mem: &mut PhysMem<A>,
        new_frame: &mut dyn FnMut() -> Option<A>,
    ) -> Option<Self> {
        let root = new_frame()?;
        mem.zero_frame(root);
        Some(PageTable { geo, root })
    }

    #[inline]
    fn read(&self, mem: &PhysMem<A>, addr: u64) -> Pte {
        self.geo.read_entry(mem, A::from_raw(addr))
    }

    fn write(&self, mem: &mut PhysMem<A>, addr: u64, level: u8, v: Pte, log: &mut Vec<TableWrite>) {
        let old = self.read(mem, addr);
        self.geo.write_entry(mem, A::from_raw(addr), v);
        log.push(TableWrite {
            addr,
            level,
            old: old.0,
            new: v.0,
        });
    }

    fn table_entry_flags(&self, level: u8) -> u64 {
        if self.geo.format == crate::config::PagingFormat::Pae && level == self.geo.levels {
            Pte::P
        } else {
            Pte::P | Pte::RW | Pte::US
        }
    }

    /// Maps the page of `size` at `va` to the frame at `pa` with leaf `flags` (any of `RW`,
    /// `US`, `G`, `NX`; `P` and, for large pages, `PS` are added). Replaces an existing leaf of
    /// the same size. NX is dropped in 32-bit paging, which has no such bit.
    #[allow(clippy::too_many_arguments)]
    pub fn map(
        &self,
        mem: &mut PhysMem<A>,
        new_frame: &mut dyn FnMut() -> Option<A>,
        va: u64,
        pa: u64,
        size: PageSize,
        flags: u64,
        log: &mut Vec<TableWrite>,
    ) -> Result<(), MapError> {
        let leaf_level = self
            .geo
            .level_of(size)
            .ok_or(MapError::UnsupportedSize(size))?;
        let mut table = self.root.raw();
        let mut level = self.geo.levels;
        while level > leaf_level {
            let ea = table + self.geo.entry_offset(va, level);
            let e = self.read(mem, ea);
            if e.present() {
                if e.large() {
                    return Err(MapError::Conflict { level });
                }
                table = e.frame(self.geo.frame_mask());
            } else {
                let f = new_frame().ok_or(MapError::OutOfMemory)?;
                mem.zero_frame(f);
                let ne = Pte(f.raw() | self.table_entry_flags(level));
                self.write(mem, ea, level, ne, log);
                table = f.raw();
            }
            level -= 1;
        }
        let ea = table + self.geo.entry_offset(va, leaf_level);
        let old = self.read(mem, ea);
        if leaf_level > 1 && old.present() && !old.large() {
            return Err(MapError::Conflict { level: leaf_level });
        }
        let mut f = flags & (Pte::RW | Pte::US | Pte::G | Pte::NX | Pte::A | Pte::D);
        if self.geo.entry_bytes == 4 {
            f &= !Pte::NX;
        }
        let mut v = (pa & !size.offset_mask() & self.geo.frame_mask()) | f | Pte::P;
        if leaf_level > 1 {
            v |= Pte::PS;
        }
        self.write(mem, ea, leaf_level, Pte(v), log);
        Ok(())
    }

    /// Walks to the leaf mapping `va`: its entry address, level and value.
    pub fn leaf(&self, mem: &PhysMem<A>, va: u64) -> Option<(u64, u8, Pte)> {
        let mut table = self.root.raw();
        let mut level = self.geo.levels;
        loop {
            let ea = table + self.geo.entry_offset(va, level);
            let e = self.read(mem, ea);
            if !e.present() {
                return None;
            }
            if level == 1 || (e.large() && self.geo.leaf_size(level).is_some()) {
                return Some((ea, level, e));
            }
            table = e.frame(self.geo.frame_mask());
            level -= 1;
        }
    }

    /// Functional translation of `va`: the physical address, the page size and the leaf entry.
    pub fn lookup(&self, mem: &PhysMem<A>, va: u64) -> Option<(u64, PageSize, Pte)> {
        let (_, level, e) = self.leaf(mem, va)?;
        let size = self.geo.leaf_size(level)?;
        let pa = (e.frame(self.geo.frame_mask()) & !size.offset_mask()) | (va & size.offset_mask());
        Some((pa, size, e))
    }

    /// Removes the leaf mapping `va` (of whatever size); returns its frame and size. Tables are
    /// kept (Linux frees them lazily too).
    pub fn unmap(
        &self,
        mem: &mut PhysMem<A>,
        va: u64,
        log: &mut Vec<TableWrite>,
    ) -> Option<(u64, PageSize)> {
        let (ea, level, e) = self.leaf(mem, va)?;
        let size = self.geo.leaf_size(level)?;
        self.write(mem, ea, level, Pte(0), log);
        Some((e.frame(self.geo.frame_mask()) & !size.offset_mask(), size))
    }

    /// Sets and clears leaf bits of the mapping of `va`; false when nothing maps it.
    pub fn protect(
        &self,
        mem: &mut PhysMem<A>,
        va: u64,
        set: u64,
        clear: u64,
        log: &mut Vec<TableWrite>,
    ) -> bool {
        match self.leaf(mem, va) {
            Some((ea, level, e)) => {
                let v = Pte((e.0 | set) & !clear);
                if v != e {
                    self.write(mem, ea, level, v, log);
                }
                true
            }
            None => false,
        }
    }

    /// Sets bits in the entry at `addr` (A/D updates by the walker); logged like any write.
    pub fn set_bits(
        &self,
        mem: &mut PhysMem<A>,
        addr: u64,
        level: u8,
        bits: u64,
        log: &mut Vec<TableWrite>,
    ) {
        let e = self.read(mem, addr);
        if e.0 & bits != bits {
            self.write(mem, addr, level, Pte(e.0 | bits), log);
        }
    }

    /// Calls `f(va, entry_addr, level, pte)` for every present leaf of the tree, in address
    /// order (`va` is the first address the leaf maps, sign-extension not applied).
    pub fn for_each_leaf(&self, mem: &PhysMem<A>, f: &mut dyn FnMut(u64, u64, u8, Pte)) {
        self.leaves_of(mem, self.root.raw(), self.geo.levels, 0, f);
    }

    /// Like [`PageTable::for_each_leaf`], restricted to leaves overlapping `[start, end)`
    /// (addresses compared without sign extension).
    pub fn for_each_leaf_in(
        &self,
        mem: &PhysMem<A>,
        start: u64,
        end: u64,
        f: &mut dyn FnMut(u64, u64, u8, Pte),
    ) {
        let mask = if self.geo.va_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.geo.va_bits) - 1
        };
        let (s, e) = (start & mask, ((end - 1) & mask) + 1);
        // Walk page by page at the largest granularity the leaves allow.
        let mut va = s;
        while va < e {
            match self.leaf(mem, va) {
                Some((ea, level, pte)) => {
                    let size = self.geo.leaf_size(level).expect("leaf level");
                    let base = va & !size.offset_mask();
                    f(base, ea, level, pte);
                    va = base + size.bytes();
                }
                None => {
                    // Skip the whole unmapped region at the level where the walk stopped.
                    va = self.next_mapped_candidate(mem, va);
                }
            }
        }
    }

    /// The next address after `va` that could be mapped: the end of the largest absent
    /// region containing `va`.
    fn next_mapped_candidate(&self, mem: &PhysMem<A>, va: u64) -> u64 {
        let mut table = self.root.raw();
        let mut level = self.geo.levels;
        loop {
            let ea = table + self.geo.entry_offset(va, level);
            let e = self.read(mem, ea);
            let span = 1u64 << self.geo.level_shift(level);
            if !e.present() || level == 1 {
                return (va & !(span - 1)) + span;
            }
            table = e.frame(self.geo.frame_mask());
            level -= 1;
        }
    }

    fn leaves_of(
        &self,
        mem: &PhysMem<A>,
        table: u64,
        level: u8,
        base: u64,
        f: &mut dyn FnMut(u64, u64, u8, Pte),
    ) {
        let n = if level == self.geo.levels {
            1u64 << self.geo.root_bits
        } else {
            1u64 << self.geo.index_bits
        };
        for i in 0..n {
            let ea = table + i * self.geo.entry_bytes as u64;
            let e = self.read(mem, ea);
            if !e.present() {
                continue;
            }
            let va = base | (i << self.geo.level_shift(level));
            if level == 1 || (e.large() && self.geo.leaf_size(level).is_some()) {
                f(va, ea, level, e);
            } else {
                self.leaves_of(mem, e.frame(self.geo.frame_mask()), level - 1, va, f);
            }
        }
    }

    /// Every table frame of the tree (root included), for teardown.
    pub fn table_frames(&self, mem: &PhysMem<A>) -> Vec<A> {
        let mut out = Vec::new();
        self.collect(mem, self.root.raw(), self.geo.levels, &mut out);
        out
    }

    fn collect(&self, mem: &PhysMem<A>, table: u64, level: u8, out: &mut Vec<A>) {
        out.push(A::from_raw(table));
        if level == 1 {
            return;
        }
        let n = if level == self.geo.levels {
            1u64 << self.geo.root_bits
        } else {
            1u64 << self.geo.index_bits
        };
        for i in 0..n {
            let e = self.read(mem, table + i * self.geo.entry_bytes as u64);
            if e.present() && !(e.large() && self.geo.leaf_size(level).is_some()) {
                self.collect(mem, e.frame(self.geo.frame_mask()), level - 1, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Gpa;
    use crate::config::PagingFormat;

    fn setup(format: PagingFormat) -> (PhysMem<Gpa>, PageTable<Gpa>, u64) {
        let mut mem = PhysMem::new(64 << 20);
        let mut next = 0x10_0000u64;
        let pt = PageTable::new(Geometry::of(format), &mut mem, &mut || {
            next += 0x1000;
            Some(Gpa(next))
        })
        .unwrap();
        (mem, pt, 0x20_0000)
    }

    fn frames(start: u64) -> impl FnMut() -> Option<Gpa> {
        let mut next = start;
        move || {
            next += 0x1000;
            Some(Gpa(next))
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
                pt.map(&mut mem, &mut nf, va, pa, s, Pte::RW, &mut log)
                    .unwrap();
                let (got, size, e) = pt.lookup(&mem, va + 0x123).unwrap();
                assert_eq!((got, size), (pa + 0x123, s), "{format:?} {s}");
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
            0x7000_1000,
            0x5000,
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
            0x7000_2000,
            0x6000,
            PageSize::Size4K,
            0,
            &mut log,
        )
        .unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(pt.table_frames(&mem).len(), 4);
    }

    #[test]
    fn unmap_and_protect_change_the_leaf() {
        let (mut mem, pt, _) = setup(PagingFormat::Long4);
        let mut log = Vec::new();
        let mut nf = frames(0x300_0000);
        pt.map(
            &mut mem,
            &mut nf,
            0x4000_0000,
            0x20_0000,
            PageSize::Size2M,
            Pte::RW,
            &mut log,
        )
        .unwrap();
        assert!(pt.protect(&mut mem, 0x4000_0000, 0, Pte::RW, &mut log));
        assert!(!pt.lookup(&mem, 0x4010_0000).unwrap().2.writable());
        assert_eq!(
            pt.unmap(&mut mem, 0x4010_0000, &mut log),
            Some((0x20_0000, PageSize::Size2M))
        );
        assert!(pt.lookup(&mem, 0x4000_0000).is_none());
        assert!(!pt.protect(&mut mem, 0x4000_0000, 0, Pte::RW, &mut log));
    }

    #[test]
    fn conflicting_sizes_are_refused() {
        let (mut mem, pt, _) = setup(PagingFormat::Long4);
        let mut log = Vec::new();
        let mut nf = frames(0x300_0000);
        pt.map(
            &mut mem,
            &mut nf,
            0x4000_0000,
            0,
            PageSize::Size2M,
            0,
            &mut log,
        )
        .unwrap();
        assert_eq!(
            pt.map(
                &mut mem,
                &mut nf,
                0x4000_1000,
                0,
                PageSize::Size4K,
                0,
                &mut log
            ),
            Err(MapError::Conflict { level: 2 })
        );
        assert_eq!(
            Err(MapError::UnsupportedSize(PageSize::Size4M)),
            pt.map(&mut mem, &mut nf, 0, 0, PageSize::Size4M, 0, &mut log)
        );
    }
}
