//! Physical frame allocators with placement policies (DESIGN.md "Memory and page tables are real
//! bytes").
//!
//! Free memory is kept as free lists of aligned blocks of 1 GiB, 4 MiB, 2 MiB and 4 KiB. A
//! request takes a block of its size, splitting a larger one when its own list is empty.
//! Policies decide *which* block:
//! - `sequential`: the lowest address (lists are kept so the lowest block is popped first);
//! - `random`: a uniformly random block of the list, seeded;
//! - `buddy`: like `sequential`, but a request for a 2 MiB / 4 MiB / 1 GiB block finds none
//!   with probability `fragmentation`, the knob that models a fragmented host or guest.
//!
//! Simplifications: freed blocks return to their own list and are not coalesced into larger
//! ones (a fragmented free list stays fragmented, which is also what long-running kernels see).

use crate::addr::PageSize;
use crate::config::{AllocPolicy, AllocatorConfig};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Block sizes, smallest first; each splits into blocks of the previous one.
const SIZES: [PageSize; 4] = [
    PageSize::Size4K,
    PageSize::Size2M,
    PageSize::Size4M,
    PageSize::Size1G,
];

fn idx(size: PageSize) -> usize {
    match size {
        PageSize::Size4K => 0,
        PageSize::Size2M => 1,
        PageSize::Size4M => 2,
        PageSize::Size1G => 3,
    }
}

/// A frame allocator over `[0, size)` of one physical address space.
pub struct FrameAllocator {
    policy: AllocPolicy,
    fragmentation: f64,
    rng: Xoshiro256PlusPlus,
    /// Free blocks per size; for `sequential`/`buddy` each list is kept descending so `pop`
    /// yields the lowest address.
    free: [Vec<u64>; 4],
    size: u64,
    allocated: u64,
}

impl FrameAllocator {
    /// An allocator over `size` bytes (a multiple of 2 MiB) with `cfg`'s policy, seeded.
    pub fn new(size: u64, cfg: &AllocatorConfig, seed: u64) -> Self {
        let mut free: [Vec<u64>; 4] = Default::default();
        let g = PageSize::Size1G.bytes();
        let full_g = size / g;
        for i in (0..full_g).rev() {
            free[3].push(i * g);
        }
        // The tail below a whole GiB becomes 4 MiB and 2 MiB blocks.
        let mut tail = full_g * g;
        let mut tail_blocks4 = Vec::new();
        let mut tail_blocks2 = Vec::new();
        while tail + PageSize::Size4M.bytes() <= size {
            tail_blocks4.push(tail);
            tail += PageSize::Size4M.bytes();
        }
        while tail + PageSize::Size2M.bytes() <= size {
            tail_blocks2.push(tail);
            tail += PageSize::Size2M.bytes();
        }
        free[2].extend(tail_blocks4.into_iter().rev());
        free[1].extend(tail_blocks2.into_iter().rev());
        FrameAllocator {
            policy: cfg.policy,
            fragmentation: cfg.fragmentation,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x6a09_e667_f3bc_c908),
            free,
            size,
            allocated: 0,
        }
    }

    /// Bytes managed.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes currently allocated.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Allocates an aligned block of `size`; `None` when no such block is available (memory
    /// exhausted, or — for large blocks under `buddy` — fragmentation said no).
    pub fn alloc(&mut self, size: PageSize) -> Option<u64> {
        if size != PageSize::Size4K
            && self.policy == AllocPolicy::Buddy
            && self.fragmentation > 0.0
            && self.rng.gen::<f64>() < self.fragmentation
        {
            return None;
        }
        let b = self.take(idx(size))?;
        self.allocated += size.bytes();
        Some(b)
    }

    /// Allocates the largest block not larger than `want` that is available, trying smaller
    /// sizes in turn; returns the block and its size.
    pub fn alloc_at_most(&mut self, want: PageSize) -> Option<(u64, PageSize)> {
        let mut i = idx(want) as isize;
        while i >= 0 {
            let s = SIZES[i as usize];
            if let Some(b) = self.alloc(s) {
                return Some((b, s));
            }
            i -= 1;
        }
        None
    }

    /// Returns a block to the allocator.
    pub fn free(&mut self, base: u64, size: PageSize) {
        debug_assert_eq!(base & size.offset_mask(), 0);
        self.allocated -= size.bytes();
        let list = &mut self.free[idx(size)];
        match self.policy {
            AllocPolicy::Random => list.push(base),
            // Keep descending order so the lowest block is reused first.
            AllocPolicy::Sequential | AllocPolicy::Buddy => {
                let pos = list.partition_point(|&b| b > base);
                list.insert(pos, base);
            }
        }
    }

    fn pick(&mut self, i: usize) -> Option<u64> {
        let len = self.free[i].len();
        if len == 0 {
            return None;
        }
        match self.policy {
            AllocPolicy::Random => {
                let k = self.rng.gen_range(0..len);
                Some(self.free[i].swap_remove(k))
            }
            AllocPolicy::Sequential | AllocPolicy::Buddy => self.free[i].pop(),
        }
    }

    fn take(&mut self, i: usize) -> Option<u64> {
        if let Some(b) = self.pick(i) {
            return Some(b);
        }
        // Split the nearest larger block that exists.
        let mut j = i + 1;
        while j < SIZES.len() && self.free[j].is_empty() {
            j += 1;
        }
        if j == SIZES.len() {
            return None;
        }
        let block = self.pick(j)?;
        while j > i {
            let child = SIZES[j - 1].bytes();
            let n = SIZES[j].bytes() / child;
            // Keep the first child, push the rest (highest first, so the lowest pops next).
            let list = &mut self.free[j - 1];
            let insert_at = match self.policy {
                AllocPolicy::Random => list.len(),
                _ => list.partition_point(|&b| b > block),
            };
            let rest: Vec<u64> = (1..n).rev().map(|k| block + k * child).collect();
            list.splice(insert_at..insert_at, rest);
            j -= 1;
        }
        Some(block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(policy: AllocPolicy, fragmentation: f64) -> AllocatorConfig {
        AllocatorConfig {
            policy,
            fragmentation,
        }
    }

    #[test]
    fn sequential_hands_out_ascending_frames() {
        let mut a = FrameAllocator::new(2 << 30, &cfg(AllocPolicy::Sequential, 0.0), 1);
        let f: Vec<u64> = (0..4).map(|_| a.alloc(PageSize::Size4K).unwrap()).collect();
        assert_eq!(f, vec![0, 0x1000, 0x2000, 0x3000]);
        // The next 2 MiB block skips the partly used first one.
        assert_eq!(a.alloc(PageSize::Size2M), Some(2 << 20));
        assert_eq!(a.alloc(PageSize::Size1G), Some(1 << 30));
        assert_eq!(
            a.alloc(PageSize::Size1G),
            None,
            "only one whole GiB left was taken"
        );
        assert_eq!(a.allocated(), 4 * 4096 + (2 << 20) + (1 << 30));
    }

    #[test]
    fn exhaustion_returns_none_and_free_recycles() {
        let mut a = FrameAllocator::new(4 << 20, &cfg(AllocPolicy::Sequential, 0.0), 1);
        let n = (4 << 20) / 4096;
        let frames: Vec<u64> = (0..n).map(|_| a.alloc(PageSize::Size4K).unwrap()).collect();
        assert_eq!(a.alloc(PageSize::Size4K), None);
        a.free(frames[7], PageSize::Size4K);
        assert_eq!(a.alloc(PageSize::Size4K), Some(frames[7]));
    }

    #[test]
    fn random_is_seeded_and_not_sequential() {
        let run = |seed| {
            let mut a = FrameAllocator::new(1 << 30, &cfg(AllocPolicy::Random, 0.0), seed);
            (0..64)
                .map(|_| a.alloc(PageSize::Size4K).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
        let v = run(5);
        assert!(v.windows(2).any(|w| w[1] != w[0] + 4096));
        let mut s = v.clone();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), v.len(), "no frame handed out twice");
    }

    #[test]
    fn fragmentation_denies_large_blocks_at_the_set_rate() {
        let mut a = FrameAllocator::new(64 << 30, &cfg(AllocPolicy::Buddy, 0.25), 3);
        let mut denied = 0;
        for _ in 0..4000 {
            match a.alloc(PageSize::Size2M) {
                Some(b) => a.free(b, PageSize::Size2M),
                None => denied += 1,
            }
        }
        assert!((800..1200).contains(&denied), "denied {denied} of 4000");
        assert!(
            a.alloc(PageSize::Size4K).is_some(),
            "4 KiB frames are never denied"
        );
        let full = FrameAllocator::new(64 << 30, &cfg(AllocPolicy::Buddy, 1.0), 3)
            .alloc_at_most(PageSize::Size1G)
            .unwrap();
        assert_eq!(
            full.1,
            PageSize::Size4K,
            "fully fragmented memory falls back to 4K"
        );
    }

    #[test]
    fn tail_smaller_than_a_gib_is_usable() {
        let mut a =
            FrameAllocator::new((1 << 30) + (6 << 20), &cfg(AllocPolicy::Sequential, 0.0), 0);
        assert_eq!(a.alloc(PageSize::Size1G), Some(0));
        assert_eq!(a.alloc(PageSize::Size4M), Some(1 << 30));
        assert_eq!(a.alloc(PageSize::Size2M), Some((1 << 30) + (4 << 20)));
        assert_eq!(a.alloc(PageSize::Size2M), None);
    }
}
