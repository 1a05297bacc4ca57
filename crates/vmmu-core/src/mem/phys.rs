//! Sparse physical memory holding page-table frames as real bytes.
//!
//! Every page-entry reference of every walk reads through here, so the way from a frame number
//! to its bytes is short and, above all, small: an open-addressing table (Fibonacci hash of the
//! frame number, linear probing, at most half full, backward-shift deletion) of
//! `(frame, slot)` pairs, 16 bytes per table frame. A walk over a 4 GiB footprint touches a few
//! thousand table frames; their index is a few tens of KiB and stays in the host's caches,
//! where a direct frame-number-indexed array (4 bytes per frame of the whole memory: 64 MiB for
//! 64 GiB, each table frame's word on its own host page) missed the host's caches and TLB on
//! nearly every read (docs/performance.md). Nothing is allocated on the read path; the index
//! grows (doubling) only when a frame becomes a table frame.
//!
//! **Indexing.** The read path indexes without bounds checks (a read is a few instructions,
//! and the checks were a fifth of them), on two invariants kept by construction: the bucket
//! count is a power of two and `shift` is 64 minus its log2, so a home bucket (the product's
//! top bits) and every probe (masked by the count less one) are in bounds; and a slot in the
//! index is an index of `slots`, which only grows (a released slot is reused, never removed).
//! Debug builds, which the tests use, check both.

use crate::addr::{Gpa, Hpa, L1pa, Space};
use std::marker::PhantomData;

/// A physical address space that memory can be indexed by (`Gpa`, `Hpa`, or `L1pa` under
/// nested virtualization).
pub trait PhysAddr: Space {}

impl PhysAddr for Gpa {}

impl PhysAddr for Hpa {}

impl PhysAddr for L1pa {}

/// Physical memory of one address space (guest physical or host physical).
///
/// Frames become *table frames* with [`PhysMem::zero_frame`] and stop being so with
/// [`PhysMem::release_frame`]; reads of any other frame return zero (memory the model never
/// needs the contents of).
pub struct PhysMem<A: PhysAddr> {
    size: u64,
    index: FrameIndex,
    slots: Vec<[u64; 512]>,
    free_slots: Vec<u32>,
    _space: PhantomData<A>,
}

/// Frame number → slot of the table frames: open addressing with linear probing.
#[derive(Clone, Debug)]
struct FrameIndex {
    /// `(frame + 1, slot)`; a first field of 0 is an empty bucket.
    buckets: Vec<(u64, u32)>,
    /// `64 - log2(buckets.len())`: the bucket is the top bits of a Fibonacci product.
    shift: u32,
    len: usize,
}

/// Buckets of a new index (a power of two).
const INITIAL_BUCKETS: usize = 64;

impl FrameIndex {
    fn new() -> Self {
        FrameIndex {
            buckets: vec![(0, 0); INITIAL_BUCKETS],
            shift: 64 - INITIAL_BUCKETS.trailing_zeros(),
            len: 0,
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The slot of `frame`, if it is a table frame.
    #[inline(always)]
    fn get(&self, frame: u64) -> Option<u32> {
        let key = frame + 1;
        let mask = self.buckets.len() - 1;
        let mut b = self.home(key);
        loop {
            debug_assert!(b < self.buckets.len());
            // SAFETY: `b` is a bucket index ("Indexing" in the module documentation): a home
            // bucket is the top `64 - shift` bits of a product, below `buckets.len()`, and
            // every later probe is masked by `buckets.len() - 1`.
            let (k, slot) = unsafe { *self.buckets.get_unchecked(b) };
            if k == key {
                return Some(slot);
            }
            if k == 0 {
                return None;
            }
            b = (b + 1) & mask;
        }
    }

    /// Records `frame → slot` (`frame` must not be present).
    fn insert(&mut self, frame: u64, slot: u32) {
        if 2 * (self.len + 1) > self.buckets.len() {
            self.grow();
        }
        self.place(frame + 1, slot);
        self.len += 1;
    }

    fn place(&mut self, key: u64, slot: u32) {
        let mask = self.buckets.len() - 1;
        let mut b = self.home(key);
        while self.buckets[b].0 != 0 {
            b = (b + 1) & mask;
        }
        self.buckets[b] = (key, slot);
    }

    fn grow(&mut self) {
        let n = 2 * self.buckets.len();
        let old = std::mem::replace(&mut self.buckets, vec![(0, 0); n]);
        self.shift -= 1;
        for (k, slot) in old {
            if k != 0 {
                self.place(k, slot);
            }
        }
    }

    /// Removes `frame`; returns its slot.
    fn remove(&mut self, frame: u64) -> Option<u32> {
        let key = frame + 1;
        let mask = self.buckets.len() - 1;
        let mut i = self.home(key);
        loop {
            match self.buckets[i].0 {
                0 => return None,
                k if k == key => break,
                _ => i = (i + 1) & mask,
            }
        }
        let slot = self.buckets[i].1;
        // Backward-shift deletion keeps every probe chain unbroken without tombstones.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = self.buckets[j].0;
            if k == 0 {
                break;
            }
            let home = self.home(k);
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.buckets[i] = self.buckets[j];
                i = j;
            }
        }
        self.buckets[i] = (0, 0);
        self.len -= 1;
        Some(slot)
    }
}

impl<A: PhysAddr> PhysMem<A> {
    /// Memory of `size` bytes (a multiple of 2 MiB).
    pub fn new(size: u64) -> Self {
        PhysMem {
            size,
            index: FrameIndex::new(),
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
        let s = self.index.get(addr >> 12)? as usize;
        debug_assert!(s < self.slots.len());
        // SAFETY: the index holds only slots of `slots`, which never shrinks ("Indexing" in
        // the module documentation).
        Some(unsafe { self.slots.get_unchecked(s) })
    }

    #[inline]
    fn slot_mut(&mut self, addr: u64) -> Option<&mut [u64; 512]> {
        let s = self.index.get(addr >> 12)?;
        Some(&mut self.slots[s as usize])
    }

    /// Makes the frame at `frame` (4 KiB aligned) a zeroed table frame.
    pub fn zero_frame(&mut self, frame: A) {
        let addr = frame.raw();
        debug_assert_eq!(addr & 0xfff, 0);
        assert!(addr < self.size, "frame {addr:#x} beyond memory");
        if let Some(s) = self.slot_mut(addr) {
            s.fill(0);
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
        self.index.insert(addr >> 12, s);
    }

    /// The frame at `frame` stops holding a table; its bytes are forgotten.
    pub fn release_frame(&mut self, frame: A) {
        if let Some(s) = self.index.remove(frame.raw() >> 12) {
            self.free_slots.push(s);
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
    fn index_survives_growth_and_deletions_of_colliding_frames() {
        let mut m: PhysMem<Hpa> = PhysMem::new(1 << 40);
        // Frames 512 apart (one table per 2 MiB, as a sequential allocator places them), more
        // than the initial index holds, then every other one released.
        let frames: Vec<u64> = (0..300u64).map(|i| i << 21).collect();
        for (i, &f) in frames.iter().enumerate() {
            m.zero_frame(Hpa::new(f));
            m.write_u64(Hpa::new(f + 8 * (i as u64 % 512)), i as u64 + 1);
        }
        for &f in frames.iter().step_by(2) {
            m.release_frame(Hpa::new(f));
        }
        assert_eq!(m.table_frames(), 150);
        for (i, &f) in frames.iter().enumerate() {
            let want = if i % 2 == 0 { 0 } else { i as u64 + 1 };
            assert_eq!(
                m.read_u64(Hpa::new(f + 8 * (i as u64 % 512))),
                want,
                "frame {i}"
            );
            assert_eq!(m.is_table(Hpa::new(f)), i % 2 == 1);
        }
    }

    #[test]
    fn table_frames_hold_bytes_and_others_read_zero() {
        let mut m: PhysMem<Gpa> = PhysMem::new(8 << 20);
        assert_eq!(m.read_u64(Gpa::new(0x3000)), 0);
        m.zero_frame(Gpa::new(0x3000));
        m.write_u64(Gpa::new(0x3008), 0xdead_beef);
        assert_eq!(m.read_u64(Gpa::new(0x3008)), 0xdead_beef);
        assert_eq!(m.read_u64(Gpa::new(0x4008)), 0);
        m.write_u32(Gpa::new(0x300c), 7);
        assert_eq!(m.read_u32(Gpa::new(0x3008)), 0xdead_beef);
        assert_eq!(m.read_u32(Gpa::new(0x300c)), 7);
        assert_eq!(m.table_frames(), 1);
        m.release_frame(Gpa::new(0x3000));
        assert_eq!(m.read_u64(Gpa::new(0x3008)), 0);
        m.zero_frame(Gpa::new(0x5000));
        assert_eq!(
            m.read_u64(Gpa::new(0x5008)),
            0,
            "a reused slot comes back zeroed"
        );
    }
}
