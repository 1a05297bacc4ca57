//! Sparse physical memory holding page-table frames as real bytes.
//!
//! Lookup is one array indexing (frame number → slot number + 1, in a zero-initialised array
//! whose untouched pages the OS never materialises), not a hash: every page-entry reference of
//! every walk reads through here.

use crate::addr::{Gpa, Hpa, Space};
use std::marker::PhantomData;

/// A physical address space that memory can be indexed by (`Gpa` or `Hpa`).
pub trait PhysAddr: Space {}

impl PhysAddr for Gpa {}

impl PhysAddr for Hpa {}

/// Physical memory of one address space (guest physical or host physical).
///
/// Frames become *table frames* with [`PhysMem::zero_frame`] and stop being so with
/// [`PhysMem::release_frame`]; reads of any other frame return zero (memory the model never
/// needs the contents of).
pub struct PhysMem<A: PhysAddr> {
    size: u64,
    /// Frame number → slot index + 1 (0: not a table frame). `vec![0; n]` is calloc'd, so only
    /// the pages of this array around table frames ever become resident.
    dir: Vec<u32>,
    slots: Vec<[u64; 512]>,
    free_slots: Vec<u32>,
    _space: PhantomData<A>,
}

impl<A: PhysAddr> PhysMem<A> {
    /// Memory of `size` bytes (a multiple of 2 MiB).
    pub fn new(size: u64) -> Self {
        PhysMem {
            size,
            dir: vec![0; size.div_ceil(4096) as usize],
            slots: Vec::new(),
            free_slots: Vec::new(),
            _space: PhantomData,
        }
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Number of frames currently holding tables.
    pub fn table_frames(&self) -> usize {
        self.slots.len() - self.free_slots.len()
    }

    #[inline]
    fn slot(&self, addr: u64) -> Option<&[u64; 512]> {
        let s = *self.dir.get((addr >> 12) as usize)?;
        if s == 0 {
            None
        } else {
            Some(&self.slots[s as usize - 1])
        }
    }

    #[inline]
    fn slot_mut(&mut self, addr: u64) -> Option<&mut [u64; 512]> {
        let s = *self.dir.get((addr >> 12) as usize)?;
        if s == 0 {
            None
        } else {
            Some(&mut self.slots[s as usize - 1])
        }
    }

    /// Makes the frame at `frame` (4 KiB aligned) a zeroed table frame.
    pub fn zero_frame(&mut self, frame: A) {
        let addr = frame.raw();
        debug_assert_eq!(addr & 0xfff, 0);
        let f = (addr >> 12) as usize;
        assert!(f < self.dir.len(), "frame {addr:#x} beyond memory");
        let cur = self.dir[f];
        if cur != 0 {
            self.slots[cur as usize - 1].fill(0);
            return;
        }
        let s = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize].fill(0);
                s
            }
            None => {
                self.slots.push([0; 512]);
                (self.slots.len() - 1) as u32
            }
        };
        self.dir[f] = s + 1;
    }

    /// The frame at `frame` stops holding a table; its bytes are forgotten.
    pub fn release_frame(&mut self, frame: A) {
        let f = (frame.raw() >> 12) as usize;
        if let Some(d) = self.dir.get_mut(f) {
            let s = std::mem::replace(d, 0);
            if s != 0 {
                self.free_slots.push(s - 1);
            }
        }
    }

    /// Whether the frame holding `addr` is a table frame.
    pub fn is_table(&self, addr: A) -> bool {
        self.slot(addr.raw()).is_some()
    }

    /// Reads the 8-byte word at `addr` (8-byte aligned); zero outside table frames.
    #[inline]
    pub fn read_u64(&self, addr: A) -> u64 {
        let a = addr.raw();
        self.slot(a).map_or(0, |s| s[((a >> 3) & 511) as usize])
    }

    /// Writes the 8-byte word at `addr` in a table frame. Writes elsewhere are a model bug.
    #[inline]
    pub fn write_u64(&mut self, addr: A, v: u64) {
        let a = addr.raw();
        let s = self
            .slot_mut(a)
            .unwrap_or_else(|| panic!("write of {a:#x} outside a table frame (model bug)"));
        s[((a >> 3) & 511) as usize] = v;
    }

    /// Reads the 4-byte word at `addr` (4-byte aligned; 32-bit paging entries).
    #[inline]
    pub fn read_u32(&self, addr: A) -> u32 {
        let a = addr.raw();
        let w = self.read_u64(A::from_raw(a & !7));
        (w >> ((a & 4) * 8)) as u32
    }

    /// Writes the 4-byte word at `addr` in a table frame.
    #[inline]
    pub fn write_u32(&mut self, addr: A, v: u32) {
        let a = addr.raw();
        let base = A::from_raw(a & !7);
        let w = self.read_u64(base);
        let sh = (a & 4) * 8;
        let w = (w & !(0xffff_ffffu64 << sh)) | ((v as u64) << sh);
        self.write_u64(base, w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_frames_hold_bytes_and_others_read_zero() {
        let mut m: PhysMem<Gpa> = PhysMem::new(8 << 20);
        assert_eq!(m.read_u64(Gpa(0x3000)), 0);
        m.zero_frame(Gpa(0x3000));
        m.write_u64(Gpa(0x3008), 0xdead_beef);
        assert_eq!(m.read_u64(Gpa(0x3008)), 0xdead_beef);
        assert_eq!(m.read_u64(Gpa(0x4008)), 0);
        m.write_u32(Gpa(0x300c), 7);
        assert_eq!(m.read_u32(Gpa(0x3008)), 0xdead_beef);
        assert_eq!(m.read_u32(Gpa(0x300c)), 7);
        assert_eq!(m.table_frames(), 1);
        m.release_frame(Gpa(0x3000));
        assert_eq!(m.read_u64(Gpa(0x3008)), 0);
        m.zero_frame(Gpa(0x5000));
        assert_eq!(
            m.read_u64(Gpa(0x5008)),
            0,
            "a reused slot comes back zeroed"
        );
    }
}
