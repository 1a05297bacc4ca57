//! Geometry of the x86 paging formats (Intel SDM Vol. 3A §4.3 32-bit, §4.4 PAE, §4.5 4- and
//! 5-level; AMD APM Vol. 2 §5.2–5.3).

use crate::addr::PageSize;
use crate::config::PagingFormat;
use crate::mem::{PhysAddr, PhysMem};
use crate::paging::Pte;

/// The shape of one paging format, precomputed for the walkers' hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// The format.
    pub format: PagingFormat,
    /// Number of levels; level 1 maps 4 KiB pages, the root is level `levels`.
    pub levels: u8,
    /// Bytes per entry (4 in 32-bit paging, else 8).
    pub entry_bytes: u8,
    /// Index bits per level below the root (10 in 32-bit paging, else 9).
    pub index_bits: u8,
    /// Index bits of the root level (2 for the PAE PDPT, else `index_bits`).
    pub root_bits: u8,
    /// Implemented virtual-address bits (32, 48 or 57).
    pub va_bits: u8,
    /// Per level (index `level`, 1..=`levels`): the right shift that leaves an address's index
    /// bits of that level at the entry's byte offset, and the mask of those bits there (so a
    /// walk's [`entry_offset`](Self::entry_offset) is a shift and a mask).
    off_shift: [u8; 8],
    off_mask: [u16; 8],
}

impl Geometry {
    /// The 4-level long-mode geometry, the format of nearly every walk (guest tables, nested
    /// tables, shadow tables): a walk over tables of this format uses this constant, so that
    /// the compiler folds its shifts, masks, entry size and leaf rules into the descent
    /// (`fixed_format!` in walk/mod.rs).
    pub const LONG4: Geometry = Geometry::of(PagingFormat::Long4);

    /// The geometry of `format`.
    pub const fn of(format: PagingFormat) -> Geometry {
        let (levels, entry_bytes, index_bits, root_bits, va_bits) = match format {
            PagingFormat::X86_32 => (2, 4, 10, 10, 32),
            PagingFormat::Pae => (3, 8, 9, 2, 32),
            PagingFormat::Long4 => (4, 8, 9, 9, 48),
            PagingFormat::Long5 => (5, 8, 9, 9, 57),
        };
        let mut g = Geometry {
            format,
            levels,
            entry_bytes,
            index_bits,
            root_bits,
            va_bits,
            off_shift: [0; 8],
            off_mask: [0; 8],
        };
        let byte_bits = (entry_bytes as u32).trailing_zeros();
        let mut level = 1;
        while level <= levels {
            let bits = if level == levels {
                root_bits
            } else {
                index_bits
            };
            g.off_shift[level as usize] = (g.level_shift(level) - byte_bits) as u8;
            g.off_mask[level as usize] = (((1u32 << bits) - 1) << byte_bits) as u16;
            level += 1;
        }
        g
    }

    /// The nested-table geometry for `levels` (4 or 5).
    pub const fn nested(levels: u8) -> Geometry {
        if levels == 5 {
            Geometry::of(PagingFormat::Long5)
        } else {
            Geometry::of(PagingFormat::Long4)
        }
    }

    /// The lowest address bit translated by an entry of `level`.
    #[inline]
    pub const fn level_shift(&self, level: u8) -> u32 {
        12 + self.index_bits as u32 * (level as u32 - 1)
    }

    /// The index of `addr` in the table of `level`.
    #[inline]
    pub const fn index(&self, addr: u64, level: u8) -> u64 {
        let bits = if level == self.levels {
            self.root_bits
        } else {
            self.index_bits
        };
        (addr >> self.level_shift(level)) & ((1u64 << bits) - 1)
    }

    /// The byte offset of `addr`'s entry in the table of `level`.
    #[inline]
    pub const fn entry_offset(&self, addr: u64, level: u8) -> u64 {
        let l = (level & 7) as usize;
        (addr >> self.off_shift[l]) & self.off_mask[l] as u64
    }

    /// The page size a leaf at `level` maps, if a leaf may sit there.
    #[inline]
    pub const fn leaf_size(&self, level: u8) -> Option<PageSize> {
        match (self.format, level) {
            (_, 1) => Some(PageSize::Size4K),
            (PagingFormat::X86_32, 2) => Some(PageSize::Size4M),
            (PagingFormat::X86_32, _) => None,
            (_, 2) => Some(PageSize::Size2M),
            (PagingFormat::Long4 | PagingFormat::Long5, 3) => Some(PageSize::Size1G),
            _ => None,
        }
    }

    /// The page size `e` maps when it is a leaf at `level`, or `None` when it points to a
    /// next-level table: level 1 entries are always leaves; above, the PS bit makes a leaf
    /// where the format allows one (a PS bit where no leaf may sit is ignored).
    #[inline]
    pub const fn leaf_at(&self, level: u8, e: Pte) -> Option<PageSize> {
        if level == 1 {
            Some(PageSize::Size4K)
        } else if e.large() {
            self.leaf_size(level)
        } else {
            None
        }
    }

    /// Whether the entries of `level` restrict access and carry an accessed bit. The PAE
    /// PDPTEs (the 4 entries of the top level, loaded from CR3) have neither R/W, U/S and XD nor
    /// A: those bits are reserved (Intel SDM Vol. 3A §4.4.1, Table 4-8). This is the only
    /// place the PAE quirk is written.
    #[inline]
    pub const fn restricts(&self, level: u8) -> bool {
        !(matches!(self.format, PagingFormat::Pae) && level == self.levels)
    }

    /// The flags of an entry that points to a next-level table at `level`: permissive
    /// (`P|RW|US`), so that leaves alone decide permissions as Linux and hypervisors do; only
    /// `P` where the format reserves the other bits (PAE PDPTEs).
    #[inline]
    pub const fn table_entry_flags(&self, level: u8) -> u64 {
        if self.restricts(level) {
            Pte::P | Pte::RW | Pte::US
        } else {
            Pte::P
        }
    }

    /// Entries in a table of `level` (4 in the PAE PDPT).
    #[inline]
    pub const fn entries(&self, level: u8) -> u64 {
        if level == self.levels {
            1 << self.root_bits
        } else {
            1 << self.index_bits
        }
    }

    /// The level whose leaves map `size`, if the format supports it.
    pub fn level_of(&self, size: PageSize) -> Option<u8> {
        (1..=self.levels).find(|&l| self.leaf_size(l) == Some(size))
    }

    /// Whether `size` is a page size of this format.
    pub fn supports(&self, size: PageSize) -> bool {
        self.level_of(size).is_some()
    }

    /// Whether `va` is canonical: bits above `va_bits` are copies of bit `va_bits - 1` in long
    /// mode, and zero in 32-bit and PAE paging.
    #[inline]
    pub const fn is_canonical(&self, va: u64) -> bool {
        match self.format {
            PagingFormat::X86_32 | PagingFormat::Pae => va >> 32 == 0,
            _ => {
                let sh = 64 - self.va_bits as u32;
                (((va << sh) as i64) >> sh) as u64 == va
            }
        }
    }

    /// `va` as a canonical address: sign-extended from bit `va_bits - 1` in long mode,
    /// unchanged in 32-bit and PAE paging.
    #[inline]
    pub const fn canonical(&self, va: u64) -> u64 {
        match self.format {
            PagingFormat::X86_32 | PagingFormat::Pae => va,
            _ => {
                let sh = 64 - self.va_bits as u32;
                (((va << sh) as i64) >> sh) as u64
            }
        }
    }

    /// Reads the page entry at `addr` (4 bytes in 32-bit paging, else 8).
    #[inline(always)]
    pub fn read_entry<A: PhysAddr>(&self, mem: &PhysMem<A>, addr: A) -> Pte {
        if self.entry_bytes == 4 {
            Pte(mem.read_u32(addr) as u64)
        } else {
            Pte(mem.read_u64(addr))
        }
    }

    /// Writes the page entry at `addr` in a table frame.
    #[inline]
    pub fn write_entry<A: PhysAddr>(&self, mem: &mut PhysMem<A>, addr: A, v: Pte) {
        if self.entry_bytes == 4 {
            mem.write_u32(addr, v.0 as u32);
        } else {
            mem.write_u64(addr, v.0);
        }
    }

    /// The address bits an entry's frame field holds (bits 12..52 in PAE and long mode, 12..32
    /// in 32-bit paging).
    #[inline]
    pub const fn frame_mask(&self) -> u64 {
        if self.entry_bytes == 4 {
            0xffff_f000
        } else {
            0x000f_ffff_ffff_f000
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_mode_indexes_nine_bits_per_level() {
        let g = Geometry::of(PagingFormat::Long4);
        let va = (3u64 << 39) | (5 << 30) | (7 << 21) | (9 << 12) | 0x123;
        assert_eq!(
            [
                g.index(va, 4),
                g.index(va, 3),
                g.index(va, 2),
                g.index(va, 1)
            ],
            [3, 5, 7, 9]
        );
        assert_eq!(g.entry_offset(va, 1), 72);
        assert_eq!(g.leaf_size(3), Some(PageSize::Size1G));
        assert_eq!(g.leaf_size(4), None);
    }

    #[test]
    fn pae_root_has_four_entries_and_32_bit_has_4m_leaves() {
        let p = Geometry::of(PagingFormat::Pae);
        assert_eq!(p.index(0xffff_ffff, 3), 3);
        assert_eq!(p.leaf_size(3), None);
        let b = Geometry::of(PagingFormat::X86_32);
        assert_eq!(b.index(0xffc0_0000, 2), 1023);
        assert_eq!(b.entry_offset(0x0040_1000, 1), 4);
        assert_eq!(b.leaf_size(2), Some(PageSize::Size4M));
    }

    #[test]
    fn entry_offsets_are_index_times_entry_size_at_every_level() {
        let fmts = [
            PagingFormat::X86_32,
            PagingFormat::Pae,
            PagingFormat::Long4,
            PagingFormat::Long5,
        ];
        for g in fmts.map(Geometry::of) {
            for va in [0, 0x1234_5678_9abc, u64::MAX, 0xffff_8000_0020_1000] {
                for level in 1..=g.levels {
                    let want = g.index(va, level) * g.entry_bytes as u64;
                    assert_eq!(g.entry_offset(va, level), want, "{:?} L{level}", g.format);
                }
            }
        }
    }

    #[test]
    fn canonical_addresses_follow_va_bits() {
        let g4 = Geometry::of(PagingFormat::Long4);
        assert!(g4.is_canonical(0x0000_7fff_ffff_f000));
        assert!(g4.is_canonical(0xffff_8000_0000_0000));
        assert!(!g4.is_canonical(0x0000_8000_0000_0000));
        let g5 = Geometry::of(PagingFormat::Long5);
        assert!(g5.is_canonical(0x0000_8000_0000_0000));
        assert!(!g5.is_canonical(0x0100_0000_0000_0000));
        assert!(!Geometry::of(PagingFormat::Pae).is_canonical(1 << 32));
    }
}
