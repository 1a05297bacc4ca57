//! The guest kernel's memory management: the address-space system calls, page faults
//! (demand paging and copy-on-write) and the page-size policy.

use super::{Area, GuestOs, Hugetlb, OsEffects, OsError, Vma, FLUSH_CEILING};
use crate::addr::{Gpa, Gva, PageSize};
use crate::config::{GuestPageSize, PagingFormat};
use crate::event::{MapFlags, Prot};
use crate::paging::{MapError, Pte};

impl GuestOs {
    pub(super) fn current_pid_or_err(&self) -> Result<u32, OsError> {
        self.current
            .ok_or_else(|| OsError::Impossible("no running process".into()))
    }

    /// `mmap` in the current process; `POPULATE` maps every page now.
    pub(super) fn mmap(
        &mut self,
        start: Gva,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        if start.raw() & 0xfff != 0 || len == 0 {
            return Err(OsError::Impossible(format!(
                "mmap of {start} length {len:#x}: start must be page aligned and length non-zero"
            )));
        }
        let end = start
            .raw()
            .checked_add(len.next_multiple_of(4096))
            .ok_or_else(|| {
                OsError::Impossible(format!("mmap of {start} length {len:#x} wraps around"))
            })?;
        if !self.geo.is_canonical(start.raw()) || !self.geo.is_canonical(end - 1) {
            return Err(OsError::Impossible(format!(
                "mmap range {start}..{end:#x} is not canonical for {:?} paging",
                self.geo.format
            )));
        }
        // MAP_FIXED semantics: whatever was there goes.
        self.unmap_range(start.raw(), end, fx)?;
        let pid = self.current_pid_or_err()?;
        let mut area = Area::new(prot, flags);
        if flags.0 & MapFlags::HUGE != 0 {
            area.hugetlb = self.hugetlb_reserve(start.raw(), end);
        }
        let p = self.procs.get_mut(&pid).expect("current is live");
        p.implicit = false;
        p.vmas.insert(start.raw(), end, area);
        if flags.0 & MapFlags::POPULATE != 0 {
            let mut va = start.raw();
            while va < end {
                // Populating writes every page, as Linux's MAP_POPULATE faults them in:
                // the entries start accessed, and dirty where writable.
                let size = self.map_page(va, fx, Pte::A | Pte::D)?;
                self.stats.pages_populated += 1;
                self.stats.kernel_cycles += self.costs.populate_page + self.zeroing_beyond(size);
                va = (va & !size.offset_mask()) + size.bytes();
            }
        }
        Ok(())
    }

    /// `munmap` in the current process. Unmapping a range with no area is an error (the
    /// model's event stream must be consistent).
    pub(super) fn munmap(
        &mut self,
        start: Gva,
        len: u64,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        let end = start.raw().saturating_add(len.next_multiple_of(4096));
        let pid = self.current_pid_or_err()?;
        if !self.procs[&pid].vmas.overlaps(start.raw(), end) {
            return Err(OsError::Impossible(format!(
                "munmap of {start} length {len:#x}: nothing is mapped there"
            )));
        }
        self.unmap_range(start.raw(), end, fx)
    }

    /// Removes `[start, end)` from the current process: its areas (and their hugetlbfs
    /// reservations) and its pages, a large page partly inside the range dropped whole.
    fn unmap_range(&mut self, start: u64, end: u64, fx: &mut OsEffects) -> Result<(), OsError> {
        let pid = self.current_pid_or_err()?;
        let mut vmas = std::mem::take(&mut self.procs.get_mut(&pid).expect("live").vmas);
        self.hugetlb_unreserve(&vmas, start, end);
        vmas.remove(start, end);
        self.procs.get_mut(&pid).expect("live").vmas = vmas;
        self.zap(pid, start, end, false, fx);
        Ok(())
    }

    /// `mprotect` in the current process.
    pub(super) fn mprotect(
        &mut self,
        start: Gva,
        len: u64,
        prot: Prot,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        let end = start.raw().saturating_add(len.next_multiple_of(4096));
        let pid = self.current_pid_or_err()?;
        let p = self.procs.get_mut(&pid).expect("live");
        let any = p.vmas.modify(start.raw(), end, |a| Area { prot, ..a });
        if !any {
            return Err(OsError::Impossible(format!(
                "mprotect of {start} length {len:#x}: nothing is mapped there"
            )));
        }
        let pt = p.pt;
        let mut pages = Vec::new();
        pt.for_each_leaf_in(&self.mem, start, Gva::new(end), &mut |va, _, level, e| {
            pages.push((va, level, e))
        });
        let n = pages.len();
        for (va, level, e) in pages {
            let mut set = 0;
            let mut clear = 0;
            // A COW-shared page stays read-only until its fault.
            let frame = e.frame(self.geo.frame_mask());
            if prot.write() && !self.shared.contains_key(&(frame & !0xfff)) {
                set |= Pte::RW;
            } else if !prot.write() {
                clear |= Pte::RW;
            }
            if self.geo.entry_bytes == 8 {
                if prot.exec() {
                    clear |= Pte::NX;
                } else {
                    set |= Pte::NX;
                }
            }
            pt.protect(&mut self.mem, va, set, clear, &mut fx.writes);
            if n <= FLUSH_CEILING {
                let size = self.geo.leaf_size(level).expect("leaf");
                fx.invalidate.push((pid, va, size));
            }
        }
        if n > FLUSH_CEILING {
            fx.flush_pids.push(pid);
        }
        Ok(())
    }

    /// `brk` in the current process: the heap area grows or shrinks to `end`. The first `brk`
    /// of a process sets where its heap starts.
    pub(super) fn brk(&mut self, end: Gva, fx: &mut OsEffects) -> Result<(), OsError> {
        let pid = self.current_pid_or_err()?;
        let p = self.procs.get_mut(&pid).expect("live");
        let (base, cur) = match p.heap {
            None => {
                p.heap = Some((end.raw(), end.raw()));
                return Ok(());
            }
            Some(h) => h,
        };
        let new_end = end.raw().next_multiple_of(4096);
        if new_end < base {
            return Err(OsError::Impossible(format!(
                "brk to {end} below the heap start {base:#x}"
            )));
        }
        p.heap = Some((base, new_end));
        p.implicit = false;
        let cur_pg = cur.next_multiple_of(4096);
        if new_end > cur_pg {
            let heap = Area::new(Prot::RW, MapFlags(0));
            p.vmas.insert(cur_pg, new_end, heap);
            p.vmas.merge();
        } else if new_end < cur_pg {
            self.unmap_range(new_end, cur_pg, fx)?;
        }
        Ok(())
    }

    /// `mremap`: the old range goes, the new range is an area with the old protection.
    pub(super) fn mremap(
        &mut self,
        old: Gva,
        old_len: u64,
        new: Gva,
        new_len: u64,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        let pid = self.current_pid_or_err()?;
        let v = *self.procs[&pid].vma_at(old.raw()).ok_or_else(|| {
            OsError::Impossible(format!("mremap of {old}: nothing is mapped there"))
        })?;
        let end = old.raw().saturating_add(old_len.next_multiple_of(4096));
        self.unmap_range(old.raw(), end, fx)?;
        let flags = MapFlags(v.value.flags.0 & !MapFlags::POPULATE);
        self.mmap(new, new_len, v.value.prot, flags, fx)?;
        // The moved area keeps its huge-page advice, as Linux's VMA flags move with it.
        let advice = v.value.advice;
        let end = new.raw().saturating_add(new_len.next_multiple_of(4096));
        let p = self.procs.get_mut(&pid).expect("live");
        p.vmas.modify(new.raw(), end, |a| Area { advice, ..a });
        Ok(())
    }

    /// Resolves a fault of the current process at `va`: demand paging (map a new frame),
    /// copy-on-write (copy or reuse the frame), or a protection error. Charges the kernel's
    /// work.
    pub fn fault(
        &mut self,
        va: Gva,
        write: bool,
        fetch: bool,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        let pid = self.current_pid_or_err()?;
        let p = self.procs.get(&pid).expect("live");
        let vma = p.vma_at(va.raw()).copied();
        let pt = p.pt;
        if let Some(v) = vma {
            if write && !v.value.prot.write() {
                return Err(OsError::Segv(format!(
                    "write to {va} in a read-only mapping {:#x}..{:#x}",
                    v.start, v.end
                )));
            }
        } else if !p.implicit {
            self.stats.unmapped_touches += 1;
        }
        if let Some((_, size, e)) = pt.lookup(&self.mem, va) {
            if write && !e.writable() {
                self.stats.kernel_cycles += self.costs.cow_fault;
                return self.cow(pid, va, size, e, fx);
            }
            // Present and allowed: a stale TLB entry; the fault is spurious.
            self.stats.kernel_cycles += self.costs.page_fault;
            return Ok(());
        }
        if fetch {
            self.stats.page_faults_instr += 1;
        } else {
            self.stats.page_faults_data += 1;
        }
        self.stats.kernel_cycles += self.costs.page_fault;
        // A write fault maps the page dirty (Linux: pte_mkdirty on a write fault).
        let size = self.map_page(va.raw(), fx, if write { Pte::D } else { 0 })?;
        self.stats.kernel_cycles += self.zeroing_beyond(size);
        Ok(())
    }

    /// Zeroing a page of `size` beyond the 4 KiB that `page_fault` and `populate_page`
    /// include: `zero_page` for each further 4 KiB (511 for 2 MiB).
    fn zeroing_beyond(&self, size: PageSize) -> u64 {
        self.costs.zero_page * (size.bytes() / PageSize::Size4K.bytes() - 1)
    }

    fn cow(
        &mut self,
        pid: u32,
        va: Gva,
        size: PageSize,
        e: Pte,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        self.stats.cow_faults += 1;
        let frame = e.frame(self.geo.frame_mask()) & !size.offset_mask();
        let pt = self.procs[&pid].pt;
        let base = va.page_base(size);
        if self.shared.contains_key(&frame) {
            // Copying a large page costs `copy_page` for each 4 KiB beyond the one
            // `cow_fault` includes.
            self.stats.kernel_cycles +=
                self.costs.copy_page * (size.bytes() / PageSize::Size4K.bytes() - 1);
            let new = self.alloc.alloc(size).ok_or(OsError::OutOfMemory)?;
            fx.new_frames.push((Gpa::new(new), size));
            self.release(frame, size);
            let flags = (e.0 & (Pte::US | Pte::G | Pte::NX)) | Pte::RW;
            let (alloc, stats) = (&mut self.alloc, &mut self.stats);
            let nf = &mut fx.new_frames;
            pt.map(
                &mut self.mem,
                &mut || Self::new_table_frame(alloc, nf, stats),
                base,
                Gpa::new(new),
                size,
                flags,
                &mut fx.writes,
            )
            .map_err(|_| OsError::OutOfMemory)?;
        } else {
            pt.protect(&mut self.mem, base, Pte::RW, 0, &mut fx.writes);
        }
        fx.invalidate.push((pid, base, size));
        Ok(())
    }

    /// The page size the policy wants for `va` in area `vma`, and whether it is a transparent
    /// huge page (counted in `thp_fault_*`).
    fn wanted_size(&self, va: u64, vma: Option<&Vma>) -> (PageSize, bool) {
        let large = if self.geo.format == PagingFormat::X86_32 {
            PageSize::Size4M
        } else {
            PageSize::Size2M
        };
        let fits = |s: PageSize| match vma {
            Some(v) => {
                let b = va & !s.offset_mask();
                b >= v.start && b + s.bytes() <= v.end
            }
            None => false,
        };
        let mut thp = false;
        let want = match self.policy {
            GuestPageSize::Size4K => match vma {
                Some(v) if v.value.hugetlb != Hugetlb::No => self.hugetlb_size(),
                Some(v) if self.thp_eligible(&v.value, false) => {
                    thp = true;
                    PageSize::Size2M
                }
                _ => PageSize::Size4K,
            },
            GuestPageSize::Size2M => large,
            GuestPageSize::Size1G if self.geo.supports(PageSize::Size1G) => PageSize::Size1G,
            GuestPageSize::Size1G => large,
            GuestPageSize::Mixed => match vma {
                Some(v)
                    if v.value.flags.0 & MapFlags::HUGE != 0
                        || v.end - v.start >= large.bytes() =>
                {
                    large
                }
                _ => PageSize::Size4K,
            },
        };
        let mut s = want;
        loop {
            if s == PageSize::Size4K || fits(s) {
                return (s, thp && s != PageSize::Size4K);
            }
            s = match s {
                PageSize::Size1G => large,
                _ => PageSize::Size4K,
            };
        }
    }

    /// Maps a new frame for `va` in the current process at the largest size the policy, the
    /// area, the existing tables and the allocator allow. Returns the size mapped.
    /// `ad` are accessed/dirty bits the kernel sets in the new entry (dirty only where the
    /// mapping is writable).
    fn map_page(&mut self, va: u64, fx: &mut OsEffects, ad: u64) -> Result<PageSize, OsError> {
        let pid = self.current_pid_or_err()?;
        let p = self.procs.get(&pid).expect("live");
        let vma = p.vma_at(va).copied();
        let pt = p.pt;
        let prot = vma.map_or(Prot::RWX, |v| v.value.prot);
        let mut flags = Pte::US | (ad & Pte::A);
        if prot.write() {
            flags |= Pte::RW | (ad & Pte::D);
        }
        if !prot.exec() {
            flags |= Pte::NX;
        }
        let (mut size, mut thp) = self.wanted_size(va, vma.as_ref());
        loop {
            let frame = match self.alloc.alloc(size) {
                Some(f) => f,
                None if size != PageSize::Size4K => {
                    if thp {
                        self.stats.thp_fault_fallback += 1;
                        thp = false;
                    }
                    size = self.smaller(size);
                    continue;
                }
                None => return Err(OsError::OutOfMemory),
            };
            let base = va & !size.offset_mask();
            let (alloc, stats) = (&mut self.alloc, &mut self.stats);
            let mut new_tables = Vec::new();
            let r = pt.map(
                &mut self.mem,
                &mut || {
                    let f = alloc.alloc(PageSize::Size4K)?;
                    stats.table_frames += 1;
                    new_tables.push(f);
                    Some(Gpa::new(f))
                },
                Gva::new(base),
                Gpa::new(frame),
                size,
                flags,
                &mut fx.writes,
            );
            for t in new_tables {
                fx.new_frames.push((Gpa::new(t), PageSize::Size4K));
            }
            match r {
                Ok(()) => {
                    fx.new_frames.push((Gpa::new(frame), size));
                    self.stats.pages_mapped[size.index()] += 1;
                    self.stats.thp_fault_alloc += thp as u64;
                    return Ok(size);
                }
                Err(MapError::Conflict { .. }) | Err(MapError::UnsupportedSize(_))
                    if size != PageSize::Size4K =>
                {
                    // A 4 KiB table is there already: Linux faults a huge page only where
                    // the middle directory entry is empty.
                    self.alloc.free(frame, size);
                    size = self.smaller(size);
                    thp = false;
                }
                Err(MapError::OutOfMemory) => return Err(OsError::OutOfMemory),
                Err(e) => return Err(OsError::Impossible(format!("cannot map {va:#x}: {e:?}"))),
            }
        }
    }

    fn smaller(&self, s: PageSize) -> PageSize {
        match s {
            PageSize::Size1G if self.geo.format == PagingFormat::X86_32 => PageSize::Size4M,
            PageSize::Size1G => PageSize::Size2M,
            _ => PageSize::Size4K,
        }
    }
}
