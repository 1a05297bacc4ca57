//! Large pages as Linux gives them to a program whose kernel maps 4 KiB base pages
//! (Documentation/admin-guide/mm/transhuge.rst; docs/model.md, "Page sizes"):
//! - transparent huge pages at fault time, by `guest.thp` and the program's `madvise` advice;
//! - hugetlbfs (`MAP_HUGETLB`) from a pool reserved at mmap, whatever `guest.thp` says;
//! - khugepaged, which wakes every `scan_sleep_millisecs` of guest time and collapses
//!   4 KiB-mapped 2 MiB ranges into huge pages, and `MADV_COLLAPSE`, which does it at once;
//! - `MADV_DONTNEED` / `MADV_FREE`, which drop a range's pages, splitting a huge page the range
//!   covers only in part.
//!
//! Every page-table write, freed table and invalidation goes out through [`OsEffects`], so
//! the hypervisor sees a collapse or a zap as it sees a fault.

use super::{Area, GuestOs, HugeAdvice, Hugetlb, OsEffects, OsError, FLUSH_CEILING};
use crate::addr::{Gpa, Gva, PageSize};
use crate::config::{GuestPageSize, PagingFormat, Thp};
use crate::event::{Advice, MapFlags};
use crate::interval::RangeMap;
use crate::paging::Pte;

/// Why a 2 MiB range did not collapse (Linux's `SCAN_*` results that the model has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scan {
    /// Collapsed into one huge page.
    Collapsed,
    /// No 4 KiB table there: nothing mapped, or a huge page already.
    NoTable,
    /// Too many absent entries (`max_ptes_none`), too many shared pages (`max_ptes_shared`),
    /// no writable entry, or (khugepaged) no recently used one.
    Refused,
    /// No free 2 MiB block.
    AllocFailed,
}

impl GuestOs {
    /// The transparent huge page size of the guest's format: 2 MiB, or none in 32-bit paging
    /// (Linux's THP needs PAE or long mode).
    pub(super) fn thp_size(&self) -> Option<PageSize> {
        (self.policy == GuestPageSize::Size4K && self.geo.format != PagingFormat::X86_32)
            .then_some(PageSize::Size2M)
    }

    /// The hugetlbfs page size: 2 MiB, or 4 MiB in 32-bit paging.
    pub(super) fn hugetlb_size(&self) -> PageSize {
        if self.geo.format == PagingFormat::X86_32 {
            PageSize::Size4M
        } else {
            PageSize::Size2M
        }
    }

    /// Whether Linux gives `a` transparent huge pages (`hugepage_vma_check`): base pages are
    /// 4 KiB, the area is anonymous private memory, neither hugetlbfs nor a `MAP_STACK` stack
    /// (which Linux marks `VM_NOHUGEPAGE`) nor advised `MADV_NOHUGEPAGE`, and `guest.thp`
    /// allows it: `always`, or `madvise` with `MADV_HUGEPAGE`. `MADV_COLLAPSE` (`sync`)
    /// ignores `guest.thp`, as Linux's does.
    pub(super) fn thp_eligible(&self, a: &Area, sync: bool) -> bool {
        self.thp_size().is_some()
            && a.anonymous_private()
            && a.hugetlb == Hugetlb::No
            && a.flags.0 & MapFlags::STACK == 0
            && a.advice != HugeAdvice::NoHuge
            && (sync
                || match self.thp {
                    Thp::Never => false,
                    Thp::Madvise => a.advice == HugeAdvice::Huge,
                    Thp::Always => true,
                })
    }

    /// A `MAP_HUGETLB` mapping of `[start, end)`: hugetlbfs pages if the pool holds them
    /// (Linux reserves them at mmap, `hugetlb_reserve_pages`), else an ordinary mapping, as a
    /// program does when the mmap fails with `ENOMEM` (PostgreSQL's `huge_pages = try`, the
    /// JVM's large pages), counted in `hugetlb_fallback`.
    pub(super) fn hugetlb_reserve(&mut self, start: u64, end: u64) -> Hugetlb {
        let huge = self.hugetlb_size();
        let need = (end - start).div_ceil(huge.bytes());
        if self.policy != GuestPageSize::Size4K {
            return Hugetlb::No;
        }
        if start & huge.offset_mask() == 0 && need <= self.hugetlb_free {
            self.hugetlb_free -= need;
            Hugetlb::Reserved
        } else {
            self.stats.hugetlb_fallback += 1;
            Hugetlb::No
        }
    }

    /// Returns to the pool the reservations of the areas of `vmas` in `[start, end)`, which
    /// are going.
    pub(super) fn hugetlb_unreserve(&mut self, vmas: &RangeMap<Area>, start: u64, end: u64) {
        let huge = self.hugetlb_size().bytes();
        let back: u64 = vmas
            .ranges()
            .iter()
            .filter(|r| r.value.hugetlb == Hugetlb::Reserved && r.start < end && start < r.end)
            .map(|r| (r.end.min(end) - r.start.max(start)).div_ceil(huge))
            .sum();
        self.hugetlb_free = (self.hugetlb_free + back).min(self.hugetlb_pool);
    }

    /// `madvise` in the current process.
    pub(super) fn madvise(
        &mut self,
        start: Gva,
        len: u64,
        advice: Advice,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        if start.raw() & 0xfff != 0 {
            return Err(OsError::Impossible(format!(
                "madvise of {start}: the start must be page aligned"
            )));
        }
        let end = start.raw().saturating_add(len.next_multiple_of(4096));
        let pid = self.current_pid_or_err()?;
        if !self.procs[&pid].vmas.overlaps(start.raw(), end) {
            return Err(OsError::Impossible(format!(
                "madvise of {start} length {len:#x}: nothing is mapped there"
            )));
        }
        match advice.0 {
            Advice::HUGEPAGE | Advice::NOHUGEPAGE => {
                let to = if advice.0 == Advice::HUGEPAGE {
                    HugeAdvice::Huge
                } else {
                    HugeAdvice::NoHuge
                };
                // Linux sets VM_HUGEPAGE / VM_NOHUGEPAGE on the range, splitting the areas at
                // its ends and merging equal neighbours (`madvise_update_vma`).
                let vmas = &mut self.procs.get_mut(&pid).expect("live").vmas;
                vmas.modify(start.raw(), end, |a| Area { advice: to, ..a });
                vmas.merge();
            }
            // MADV_FREE frees lazily, when memory is short; the model frees at once.
            Advice::DONTNEED | Advice::FREE => self.zap(pid, start.raw(), end, true, fx),
            Advice::COLLAPSE => self.collapse_range(pid, start.raw(), end, fx)?,
            // Other advice (WILLNEED, SEQUENTIAL, DONTFORK, ...) changes no mapping here.
            _ => {}
        }
        Ok(())
    }

    /// Drops `pid`'s pages in `[start, end)`: the entries are cleared, the frames freed, the
    /// TLB entries invalidated (INVLPG each, or a flush beyond [`FLUSH_CEILING`]). A 2 MiB page
    /// the range covers in part is split first when `split` (`MADV_DONTNEED`, as Linux's
    /// `__split_huge_pmd`) and its pages outside the range stay; otherwise — `munmap`, a
    /// hugetlbfs or 1 GiB page, a page shared copy-on-write — it is dropped whole.
    pub(super) fn zap(&mut self, pid: u32, start: u64, end: u64, split: bool, fx: &mut OsEffects) {
        let pt = self.procs[&pid].pt;
        let mut victims = Vec::new();
        pt.for_each_leaf_in(
            &self.mem,
            Gva::new(start),
            Gva::new(end),
            &mut |va, _, level, e| victims.push((va, level, e)),
        );
        let mask = self.geo.frame_mask();
        let n = victims.len();
        for (va, level, e) in victims {
            let size = self.geo.leaf_size(level).expect("leaf");
            let frame = e.frame(mask) & !size.offset_mask();
            let (b, b_end) = (va.raw(), va.raw() + size.bytes());
            let partial = b < start || b_end > end;
            let hugetlb = self.procs[&pid]
                .vma_at(b.max(start))
                .is_some_and(|v| v.value.hugetlb != Hugetlb::No);
            pt.unmap(&mut self.mem, va, &mut fx.writes);
            if split
                && partial
                && size == PageSize::Size2M
                && !hugetlb
                && !self.shared.contains_key(&frame)
            {
                self.stats.thp_split_pmd += 1;
                self.split_keep(pid, b, b_end, frame, e, (start, end), fx);
            } else {
                self.release(frame, size);
            }
            self.stats.pages_zapped += split as u64;
            if n <= FLUSH_CEILING {
                fx.invalidate.push((pid, va, size));
            }
        }
        if n > FLUSH_CEILING {
            fx.flush_pids.push(pid);
        }
    }

    /// The second half of a split: the huge page `[b, b_end)` of `frame` is unmapped; its
    /// 4 KiB pieces outside `zapped` are mapped again with the huge entry's bits (a new leaf
    /// table), and the pieces inside are freed.
    #[allow(clippy::too_many_arguments)]
    fn split_keep(
        &mut self,
        pid: u32,
        b: u64,
        b_end: u64,
        frame: u64,
        e: Pte,
        zapped: (u64, u64),
        fx: &mut OsEffects,
    ) {
        let pt = self.procs[&pid].pt;
        let flags = e.0 & (Pte::RW | Pte::US | Pte::G | Pte::NX | Pte::A | Pte::D);
        let mut va = b;
        while va < b_end {
            let piece = frame + (va - b);
            if va >= zapped.0 && va < zapped.1 {
                self.alloc.free(piece, PageSize::Size4K);
            } else {
                let (alloc, stats) = (&mut self.alloc, &mut self.stats);
                let nf = &mut fx.new_frames;
                // The table frame comes from the allocator like any table; it cannot be
                // missing while the huge page's own pieces are being freed back.
                let r = pt.map(
                    &mut self.mem,
                    &mut || Self::new_table_frame(alloc, nf, stats),
                    Gva::new(va),
                    Gpa::new(piece),
                    PageSize::Size4K,
                    flags,
                    &mut fx.writes,
                );
                if r.is_err() {
                    self.alloc.free(piece, PageSize::Size4K);
                }
            }
            va += PageSize::Size4K.bytes();
        }
    }

    /// `MADV_COLLAPSE`: every 2 MiB range of `[start, end)` inside an area that may have
    /// transparent huge pages (whatever `guest.thp` says) collapses now, without khugepaged's
    /// limits on absent and shared entries.
    fn collapse_range(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        let Some(huge) = self.thp_size() else {
            return Ok(());
        };
        let mut b = start.next_multiple_of(huge.bytes());
        while b + huge.bytes() <= end {
            let ok = self.procs[&pid]
                .vma_at(b)
                .is_some_and(|v| v.end >= b + huge.bytes() && self.thp_eligible(&v.value, true));
            if ok {
                self.collapse(pid, b, false, fx)?;
            }
            b += huge.bytes();
        }
        Ok(())
    }

    /// Tries to collapse `pid`'s 2 MiB range at `b` into one huge page, as Linux's
    /// `hpage_collapse_scan_pmd` then `collapse_huge_page`: the range must hold a 4 KiB
    /// table with a writable entry (and, for khugepaged, a recently used one, no more than
    /// `max_ptes_none` absent entries and `max_ptes_shared` shared pages). A 2 MiB frame is
    /// allocated, the present pages copied and the absent zeroed, the table entry cleared
    /// and rewritten as a huge leaf (dirty, and writable where the area is), the address
    /// space's TLB entries flushed (Linux flushes the 2 MiB range, 512 pages, beyond the
    /// single-page ceiling), the small frames and the table freed. Charges the scan
    /// (`per_page` per entry examined) and the collapse.
    fn collapse(
        &mut self,
        pid: u32,
        b: u64,
        khugepaged: bool,
        fx: &mut OsEffects,
    ) -> Result<Scan, OsError> {
        let huge = PageSize::Size2M;
        let slots = huge.bytes() / PageSize::Size4K.bytes();
        let p = &self.procs[&pid];
        let pt = p.pt;
        let writable_area = p.vma_at(b).is_some_and(|v| v.value.prot.write());
        let mut small = Vec::new();
        let mut table_there = true;
        pt.for_each_leaf_in(
            &self.mem,
            Gva::new(b),
            Gva::new(b + huge.bytes()),
            &mut |_, _, level, e| {
                if level == 1 {
                    small.push(e);
                } else {
                    table_there = false;
                }
            },
        );
        if !table_there || small.is_empty() {
            return Ok(Scan::NoTable);
        }
        self.stats.kernel_cycles += self.costs.per_page * slots;
        let mask = self.geo.frame_mask();
        let none = slots - small.len() as u64;
        let shared = small
            .iter()
            .filter(|e| self.shared.contains_key(&(e.frame(mask) & !0xfff)))
            .count() as u64;
        let k = self.khugepaged;
        if !small.iter().any(|e| e.writable())
            || (khugepaged
                && (none > k.max_ptes_none as u64
                    || shared > k.max_ptes_shared as u64
                    || !small.iter().any(|e| e.accessed())))
        {
            return Ok(Scan::Refused);
        }
        let Some(frame) = self.alloc.alloc(huge) else {
            self.stats.thp_collapse_alloc_failed += 1;
            return Ok(Scan::AllocFailed);
        };
        fx.new_frames.push((Gpa::new(frame), huge));
        let flags = Pte::US
            | Pte::A
            | Pte::D
            | if writable_area { Pte::RW } else { 0 }
            | (small[0].0 & Pte::NX);
        let table = pt
            .replace_table(
                &mut self.mem,
                Gva::new(b),
                Gpa::new(frame),
                huge,
                flags,
                &mut fx.writes,
            )
            .map_err(|e| OsError::Impossible(format!("collapse at {b:#x}: {e:?}")))?;
        for e in &small {
            self.release(e.frame(mask) & !0xfff, PageSize::Size4K);
        }
        fx.freed_tables.push(table);
        self.mem.release_frame(table);
        self.alloc.free(table.raw(), PageSize::Size4K);
        if !fx.flush_pids.contains(&pid) {
            fx.flush_pids.push(pid);
        }
        let present = small.len() as u64;
        self.stats.kernel_cycles +=
            self.costs.collapse + self.costs.copy_page * present + self.costs.zero_page * none;
        self.stats.thp_collapse_alloc += 1;
        self.stats.pages_mapped[huge.index()] += 1;
        Ok(Scan::Collapsed)
    }

    /// The instruction count (warm-up included) at which khugepaged next wakes; `u64::MAX`
    /// when it never does (`guest.thp = "never"`, a page size other than `4K`, 32-bit paging,
    /// or `scan_sleep_millisecs = 0`).
    pub fn next_background(&self) -> u64 {
        self.next_scan
    }

    /// khugepaged's wake-up at instruction count `now` (due by [`GuestOs::next_background`]):
    /// it examines up to `pages_to_scan` pages (512 for each 2 MiB range of an eligible area,
    /// 1 for each area it skips), resuming where the last wake-up stopped, at most once
    /// around every process, collapsing each range that qualifies; then it sleeps until the
    /// next interval.
    pub fn background(&mut self, now: u64, fx: &mut OsEffects) -> Result<(), OsError> {
        if now < self.next_scan {
            return Ok(());
        }
        self.next_scan = now.saturating_add(self.scan_every);
        self.stats.khugepaged_wakeups += 1;
        let Some(huge) = self.thp_size() else {
            return Ok(());
        };
        let mut pids: Vec<u32> = self.procs.keys().copied().collect();
        pids.sort_unstable();
        let (at_pid, at_va) = self.scan_at;
        let first = pids.partition_point(|&p| p < at_pid);
        let order: Vec<u32> = pids[first..]
            .iter()
            .chain(&pids[..first])
            .copied()
            .collect();
        let budget = self.khugepaged.pages_to_scan;
        let slots = huge.bytes() / PageSize::Size4K.bytes();
        let mut progress = 0u64;
        for (i, pid) in order.into_iter().enumerate() {
            let from = if i == 0 && pid == at_pid { at_va } else { 0 };
            let areas: Vec<(u64, u64, Area)> = self.procs[&pid]
                .vmas
                .ranges()
                .iter()
                .filter(|r| r.end > from)
                .map(|r| (r.start.max(from), r.end, r.value))
                .collect();
            for (s, e, a) in areas {
                if !self.thp_eligible(&a, false) {
                    progress += 1;
                    continue;
                }
                let mut b = s.next_multiple_of(huge.bytes());
                while b + huge.bytes() <= e {
                    if progress >= budget {
                        self.scan_at = (pid, b);
                        return Ok(());
                    }
                    progress += slots;
                    self.collapse(pid, b, true, fx)?;
                    b += huge.bytes();
                }
            }
        }
        self.scan_at = (0, 0);
        Ok(())
    }
}
