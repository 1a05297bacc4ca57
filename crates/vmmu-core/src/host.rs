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
use crate::mem::{FrameAllocator, PhysMem};
use crate::paging::{Geometry, MapError, PageTable, Pte, TableWrite};

/// Counters of the hypervisor's memory side.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostStats {
    /// Nested pages mapped, by size (index [`PageSize::index`]; 4M is never used).
    pub nested_pages: [u64; 4],
    /// Nested-table frames allocated.
    pub nested_table_frames: u64,
}

/// Host memory and the nested tables of one VM.
pub struct Host {
    /// Host physical memory (nested-table bytes).
    pub hmem: PhysMem<Hpa>,
    alloc: FrameAllocator,
    /// The nested page table (nCR3 / EPTP).
    pub npt: PageTable<Gpa, Hpa>,
    nested_size: PageSize,
    guest_memory: u64,
    scratch: Vec<TableWrite<Hpa>>,
    /// Counters.
    pub stats: HostStats,
}

impl Host {
    /// A VM's host side with empty nested tables.
    pub fn new(host: &HostConfig, guest_memory: u64, seed: u64) -> Result<Self> {
        let mut hmem = PhysMem::new(host.memory.0);
        let mut alloc = FrameAllocator::new(host.memory.0, &host.allocator, seed ^ 0x5bd1_e995);
        let mut tables = 0;
        let npt = PageTable::new(Geometry::nested(host.nested_levels), &mut hmem, &mut || {
            tables += 1;
            alloc.alloc(PageSize::Size4K).map(Hpa::new)
        })
        .ok_or_else(|| oom("no frame for the nested root table"))?;
        Ok(Host {
            hmem,
            alloc,
            npt,
            nested_size: host.nested_page_size,
            guest_memory,
            scratch: Vec::new(),
            stats: HostStats {
                nested_table_frames: tables,
                ..HostStats::default()
            },
        })
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
                        return Err(oom("host memory cannot back the guest"));
                    }
                    want = smaller(want);
                    continue;
                };
                let (alloc, stats) = (&mut self.alloc, &mut self.stats);
                self.scratch.clear();
                let r = self.npt.map(
                    &mut self.hmem,
                    &mut || {
                        stats.nested_table_frames += 1;
                        alloc.alloc(PageSize::Size4K).map(Hpa::new)
                    },
                    Gpa::new(base),
                    Hpa::new(h),
                    want,
                    Pte::RW | Pte::US | Pte::A | Pte::D,
                    &mut self.scratch,
                );
                match r {
                    Ok(()) => {
                        self.stats.nested_pages[want.index()] += 1;
                        a = base + want.bytes();
                        break;
                    }
                    Err(MapError::Conflict { .. }) if want != PageSize::Size4K => {
                        self.alloc.free(h, want);
                        want = smaller(want);
                    }
                    Err(_) => return Err(oom("host memory cannot hold the nested tables")),
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
        pt: &PageTable<Gpa, Hpa>,
        gpa: Gpa,
        hpa: Hpa,
        size: PageSize,
    ) -> Result<u64> {
        let mut built = 0;
        let alloc = &mut self.alloc;
        self.scratch.clear();
        pt.map(
            &mut self.hmem,
            &mut || {
                built += 1;
                alloc.alloc(PageSize::Size4K).map(Hpa::new)
            },
            gpa,
            hpa,
            size,
            Pte::RW | Pte::US | Pte::A | Pte::D,
            &mut self.scratch,
        )
        .map_err(|e| {
            oom(&format!(
                "host memory cannot hold a shadow nested table ({e:?})"
            ))
        })?;
        Ok(built)
    }

    /// A zeroed 4 KiB host frame for a hypervisor table (shadow page tables).
    pub fn alloc_table_frame(&mut self) -> Result<Hpa> {
        let f = self
            .alloc
            .alloc(PageSize::Size4K)
            .ok_or_else(|| oom("no host frame for a shadow page table"))?;
        self.hmem.zero_frame(Hpa::new(f));
        Ok(Hpa::new(f))
    }

    /// Returns a hypervisor table frame.
    pub fn free_table_frame(&mut self, f: Hpa) {
        self.hmem.release_frame(f);
        self.alloc.free(f.raw(), PageSize::Size4K);
    }

    /// Functional translation of `gpa` by the nested tables.
    pub fn translate(&self, gpa: Gpa) -> Option<(Hpa, PageSize)> {
        self.npt.lookup(&self.hmem, gpa).map(|(h, s, _)| (h, s))
    }
}

fn smaller(s: PageSize) -> PageSize {
    match s {
        PageSize::Size1G => PageSize::Size2M,
        _ => PageSize::Size4K,
    }
}

fn oom(reason: &str) -> Error {
    Error::OutOfMemory {
        space: "host physical",
        reason: format!("{reason} (raise host.memory)"),
    }
}
