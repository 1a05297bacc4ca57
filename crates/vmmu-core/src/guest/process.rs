//! A guest process: its page tables, PCID and virtual memory areas.

use crate::addr::Gpa;
use crate::event::{MapFlags, Prot};
use crate::paging::PageTable;

/// A virtual memory area: `[start, end)` with one protection and backing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Protection.
    pub prot: Prot,
    /// Backing flags.
    pub flags: MapFlags,
}

/// One guest process.
#[derive(Clone, Debug)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// PCID its TLB entries are tagged with when PCIDs are on (12 bits).
    pub pcid: u16,
    /// Its page tables (the root is its CR3).
    pub pt: PageTable<Gpa>,
    /// Areas, sorted by start, non-overlapping.
    pub vmas: Vec<Vma>,
    /// The heap: (start, current break), once a `brk` has been seen.
    pub heap: Option<(u64, u64)>,
    /// No mapping event has been seen: every touched page is anonymous memory mapped on first
    /// touch (traces without address-space events, such as lackey's or ChampSim's).
    pub implicit: bool,
}

impl Process {
    /// A process with an empty address space.
    pub fn new(pid: u32, pt: PageTable<Gpa>) -> Self {
        Process {
            pid,
            pcid: (pid % 4095 + 1) as u16,
            pt,
            vmas: Vec::new(),
            heap: None,
            implicit: true,
        }
    }

    /// The area holding `va`.
    pub fn vma_at(&self, va: u64) -> Option<&Vma> {
        let i = self.vmas.partition_point(|v| v.end <= va);
        self.vmas.get(i).filter(|v| v.start <= va)
    }

    /// Inserts an area (the range must be free).
    pub fn insert_vma(&mut self, v: Vma) {
        let i = self.vmas.partition_point(|x| x.start < v.start);
        self.vmas.insert(i, v);
    }

    /// Merges adjacent areas with equal protection and flags.
    pub fn merge_vmas(&mut self) {
        self.vmas.dedup_by(|b, a| {
            if a.end == b.start && a.prot == b.prot && a.flags == b.flags {
                a.end = b.end;
                true
            } else {
                false
            }
        });
    }

    /// Removes `[start, end)` from the areas, splitting those that straddle it.
    pub fn remove_vmas(&mut self, start: u64, end: u64) {
        let mut out = Vec::with_capacity(self.vmas.len() + 1);
        for v in self.vmas.drain(..) {
            if v.end <= start || v.start >= end {
                out.push(v);
                continue;
            }
            if v.start < start {
                out.push(Vma { end: start, ..v });
            }
            if v.end > end {
                out.push(Vma { start: end, ..v });
            }
        }
        self.vmas = out;
    }

    /// Sets the protection of `[start, end)`, splitting areas; false when no area overlaps.
    pub fn protect_vmas(&mut self, start: u64, end: u64, prot: Prot) -> bool {
        let mut any = false;
        let mut out = Vec::with_capacity(self.vmas.len() + 2);
        for v in self.vmas.drain(..) {
            if v.end <= start || v.start >= end {
                out.push(v);
                continue;
            }
            any = true;
            if v.start < start {
                out.push(Vma { end: start, ..v });
            }
            out.push(Vma {
                start: v.start.max(start),
                end: v.end.min(end),
                prot,
                flags: v.flags,
            });
            if v.end > end {
                out.push(Vma { start: end, ..v });
            }
        }
        self.vmas = out;
        any
    }
}
