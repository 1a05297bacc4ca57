//! A guest process: its page tables, PCID and virtual memory areas.

use crate::addr::{Gpa, Gva};
use crate::event::{MapFlags, Prot};
use crate::interval::{Range, RangeMap};
use crate::paging::PageTable;

/// What a virtual memory area is: its protection, backing flags, huge-page advice and
/// hugetlbfs reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area {
    /// Protection.
    pub prot: Prot,
    /// Backing flags.
    pub flags: MapFlags,
    /// The program's transparent-huge-page advice (Linux's `VM_HUGEPAGE` / `VM_NOHUGEPAGE`).
    pub advice: HugeAdvice,
    /// Whether the area is hugetlbfs memory (a `MAP_HUGETLB` mapping the pool could hold).
    pub hugetlb: Hugetlb,
}

impl Area {
    /// An area of `prot` and `flags` with no advice and no hugetlbfs pages.
    pub const fn new(prot: Prot, flags: MapFlags) -> Self {
        Area {
            prot,
            flags,
            advice: HugeAdvice::None,
            hugetlb: Hugetlb::No,
        }
    }

    /// Anonymous private memory, the only kind Linux backs with transparent huge pages
    /// (shared anonymous memory is shmem, whose `shmem_enabled` defaults to `never`).
    pub const fn anonymous_private(&self) -> bool {
        self.flags.0 & (MapFlags::FILE | MapFlags::SHARED) == 0
    }
}

/// The transparent-huge-page advice on an area (`madvise`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HugeAdvice {
    /// None given.
    #[default]
    None,
    /// `MADV_HUGEPAGE`: eligible under `thp = "madvise"` too.
    Huge,
    /// `MADV_NOHUGEPAGE`: never a transparent huge page.
    NoHuge,
}

/// Whether an area holds hugetlbfs pages, and whose reservation they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Hugetlb {
    /// Ordinary memory.
    #[default]
    No,
    /// Hugetlbfs memory whose pool pages this process reserved at mmap (returned when the
    /// area goes).
    Reserved,
    /// Hugetlbfs memory inherited by fork: Linux leaves the reservation with the parent.
    Inherited,
}

/// A virtual memory area: `[start, end)` of one [`Area`].
pub type Vma = Range<Area>;

/// One guest process.
#[derive(Clone, Debug)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// PCID its TLB entries are tagged with when PCIDs are on (12 bits).
    pub pcid: u16,
    /// Its page tables (the root is its CR3).
    pub pt: PageTable<Gva, Gpa>,
    /// Its areas.
    pub vmas: RangeMap<Area>,
    /// The heap: (start, current break), once a `brk` has been seen.
    pub heap: Option<(u64, u64)>,
    /// No mapping event has been seen: every touched page is anonymous memory mapped on first
    /// touch (traces without address-space events, such as lackey's or ChampSim's).
    pub implicit: bool,
}

impl Process {
    /// A process with an empty address space.
    pub fn new(pid: u32, pt: PageTable<Gva, Gpa>) -> Self {
        Process {
            pid,
            pcid: (pid % 4095 + 1) as u16,
            pt,
            vmas: RangeMap::new(),
            heap: None,
            implicit: true,
        }
    }

    /// The area holding `va`.
    #[inline]
    pub fn vma_at(&self, va: u64) -> Option<&Vma> {
        self.vmas.get(va)
    }
}
