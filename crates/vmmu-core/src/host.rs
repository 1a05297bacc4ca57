//! The hypervisor's memory side: host physical memory, the nested page tables that map guest
//! physical memory, and how guest memory is backed (DESIGN.md "The hypervisor model").
//!
//! The nested tables are the VM's guest-physical → host-physical map in every virtualized mode:
//! the hardware walks them under nested paging, and the shadow pager reads them to build
//! shadow entries, so they survive a switch between the two (seed 001 §5: "the nested page
//! tables can simply be kept cached").
//!
//! Backing policy: each guest-physical block is backed at the configured nested page size
//! wherever the host allocator has a contiguous block of that size (and the nested tables
//! have no smaller mappings there), else at the next smaller size. Nested tables are long-mode
//! 4- or 5-level.

use crate::addr::{Gpa, Hpa, PageSize};
use crate::config::HostConfig;
use crate::error::{Error, Result};
use crate::mem::{FrameAllocator, PhysAddr, PhysMem};
use crate::paging::{Geometry, MapError, PageTable, Pte, TableWrite};

/// Counters of the hypervisor's memory side.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostStats {
    /// Nested pages mapped, by size (index [`PageSize::index`]; 4M is never used).
    pub nested_pages: [u64; 4],
    /// Nested-table frames allocated.
    pub nested_table_frames: u64,
}

/// Host memory and the nested tables of one VM: the L0 host's (`A` = [`Hpa`]), or, under
/// nested virtualization with a shadow-paging L1, the L1 hypervisor's side of its guest (`A` =
/// [`crate::addr::L1pa`]: L1 memory, and L1's map of its guest's memory in place of nested
/// tables, which the hardware never walks).
pub struct Host<A: PhysAddr = Hpa> {
    /// Host physical memory (nested-table bytes).
    pub hmem: PhysMem<A>,
    alloc: FrameAllocator,
    /// The nested page table (nCR3 / EPTP).
    pub npt: PageTable<Gpa, A>,
    nested_size: PageSize,
    guest_memory: u64,
    scratch: Vec<TableWrite<A>>,
    /// The frames allocated since the last [`Host::take_fresh`], when recorded.
    fresh: Option<Vec<A>>,
    /// What out-of-memory errors name.
    names: MemNames,
    /// Counters.
    pub stats: HostStats,
}

impl Host<Hpa> {
    /// A VM's host side with empty nested tables.
    pub fn new(host: &HostConfig, guest_memory: u64, seed: u64) -> Result<Self> {
        Host::build(host, guest_memory, seed, HOST_NAMES)
    }
}

impl<A: PhysAddr> Host<A> {
    /// A host side of memory and page sizes `host` for a guest of `guest_memory` bytes, its
    /// frames placed with `seed`; `names` is the space and the setting its out-of-memory
    /// errors name.
    pub fn build(host: &HostConfig, guest_memory: u64, seed: u64, names: MemNames) -> Result<Self> {
        let mut hmem = PhysMem::new(host.memory.0);
        let mut alloc = FrameAllocator::new(host.memory.0, &host.allocator, seed ^ 0x5bd1_e995);
        let mut tables = 0;
        let npt = PageTable::new(Geometry::nested(host.nested_levels), &mut hmem, &mut || {
            tables += 1;
            alloc.alloc(PageSize::Size4K).map(A::from_raw)
        })
        .ok_or_else(|| oom(names, "no frame for the nested root table"))?;
        Ok(Host {
            hmem,
            alloc,
            npt,
            nested_size: host.nested_page_size,
            guest_memory,
            scratch: Vec::new(),
            fresh: None,
            names,
            stats: HostStats {
                nested_table_frames: tables,
                ..HostStats::default()
            },
        })
    }

    /// Records every frame allocated from now on, for [`Host::take_fresh`] (a hypervisor
    /// that runs as a VM itself, whose host must back what it allocates).
    pub fn record_fresh(&mut self) {
        self.fresh = Some(Vec::new());
    }

    /// The 4 KiB frames allocated since the last call (none unless recorded), the blocks of
    /// larger pages by their first frame each.
    pub fn take_fresh(&mut self, out: &mut Vec<A>) {
        out.clear();
        if let Some(f) = &mut self.fresh {
            out.append(f);
        }
    }

    /// Backs the guest-physical block `[gpa, gpa + size)`.
    pub fn back(&mut self, gpa: Gpa, size: PageSize) -> Result<()> {
        let end = gpa.raw() + size.bytes();
        let mut a = gpa.raw() & !0xfff;
        while a < end {
            if let Some((_, s, _)) = self.npt.lookup(&self.hmem, Gpa::new(a)) {
                a = (a & !s.offset_mask()) + s.bytes();
                continue;
            }
            let mut want = self.nested_size;
            loop {
                let base = a & !want.offset_mask();
                let fits = base + want.bytes() <= self.guest_memory.next_multiple_of(want.bytes());
                if want != PageSize::Size4K && !fits {
                    want = smaller(want);
                    continue;
                }
                let Some(h) = self.alloc.alloc(want) else {
                    if want == PageSize::Size4K {
                        return Err(oom(
                            self.names,
                            &format!("{} memory cannot back the guest", self.names.word),
                        ));
                    }
                    want = smaller(want);
                    continue;
                };
                let (alloc, stats, fresh) = (&mut self.alloc, &mut self.stats, &mut self.fresh);
                self.scratch.clear();
                let r = self.npt.map(
                    &mut self.hmem,
                    &mut || {
                        stats.nested_table_frames += 1;
                        let f = alloc.alloc(PageSize::Size4K).map(A::from_raw)?;
                        if let Some(v) = fresh.as_mut() {
                            v.push(f);
                        }
                        Some(f)
                    },
                    Gpa::new(base),
                    A::from_raw(h),
                    want,
                    Pte::RW | Pte::US | Pte::A | Pte::D,
                    &mut self.scratch,
                );
                match r {
                    Ok(()) => {
                        if let Some(v) = self.fresh.as_mut() {
                            let frames = want.bytes() >> 12;
                            v.extend((0..frames).map(|i| A::from_raw(h + (i << 12))));
                        }
                        self.stats.nested_pages[want.index()] += 1;
                        a = base + want.bytes();
                        break;
                    }
                    Err(MapError::Conflict { .. }) if want != PageSize::Size4K => {
                        self.alloc.free(h, want);
                        want = smaller(want);
                    }
                    Err(_) => {
                        return Err(oom(
                            self.names,
                            &format!("{} memory cannot hold the nested tables", self.names.word),
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    /// Maps the guest-physical page of `size` at `gpa` to `hpa` in `pt`, a hypervisor table
    /// of guest-physical addresses in host memory beside the nested tables (the shadow EPT02
    /// of nested virtualization); returns the table frames it allocated.
    pub fn map_table(
        &mut self,
        pt: &PageTable<Gpa, A>,
        gpa: Gpa,
        hpa: A,
        size: PageSize,
    ) -> Result<u64> {
        let mut built = 0;
        let alloc = &mut self.alloc;
        self.scratch.clear();
        pt.map(
            &mut self.hmem,
            &mut || {
                built += 1;
                alloc.alloc(PageSize::Size4K).map(A::from_raw)
            },
            gpa,
            hpa,
            size,
            Pte::RW | Pte::US | Pte::A | Pte::D,
            &mut self.scratch,
        )
        .map_err(|e| {
            oom(
                self.names,
                &format!(
                    "{} memory cannot hold a shadow nested table ({e:?})",
                    self.names.word
                ),
            )
        })?;
        Ok(built)
    }

    /// A zeroed 4 KiB host frame for a hypervisor table (shadow page tables).
    pub fn alloc_table_frame(&mut self) -> Result<A> {
        let f = self
            .alloc
            .alloc(PageSize::Size4K)
            .map(A::from_raw)
            .ok_or_else(|| {
                oom(
                    self.names,
                    &format!("no {} frame for a shadow page table", self.names.word),
                )
            })?;
        self.hmem.zero_frame(f);
        if let Some(v) = self.fresh.as_mut() {
            v.push(f);
        }
        Ok(f)
    }

    /// Returns a hypervisor table frame.
    pub fn free_table_frame(&mut self, f: A) {
        self.hmem.release_frame(f);
        self.alloc.free(f.raw(), PageSize::Size4K);
    }

    /// Functional translation of `gpa` by the nested tables.
    pub fn translate(&self, gpa: Gpa) -> Option<(A, PageSize)> {
        self.npt.lookup(&self.hmem, gpa).map(|(h, s, _)| (h, s))
    }
}

fn smaller(s: PageSize) -> PageSize {
    match s {
        PageSize::Size1G => PageSize::Size2M,
        _ => PageSize::Size4K,
    }
}

/// What a host side's out-of-memory errors name: the space, the word for its memory, and the
/// setting that sizes it.
#[derive(Clone, Copy, Debug)]
pub struct MemNames {
    /// The address space (`host physical`).
    pub space: &'static str,
    /// The word for its memory in a sentence (`host`).
    pub word: &'static str,
    /// The setting to raise (`host.memory`).
    pub knob: &'static str,
}

/// The L0 host's names.
const HOST_NAMES: MemNames = MemNames {
    space: "host physical",
    word: "host",
    knob: "host.memory",
};

fn oom(names: MemNames, reason: &str) -> Error {
    Error::OutOfMemory {
        space: names.space,
        reason: format!("{reason} (raise {})", names.knob),
    }
}
