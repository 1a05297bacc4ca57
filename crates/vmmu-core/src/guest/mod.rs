//! The guest OS model (DESIGN.md "The guest OS model"): processes with address spaces, virtual
//! memory areas, demand paging, copy-on-write fork, exec, exit, mmap / munmap / mprotect /
//! mremap / brk, and the page-size policy.
//!
//! The guest kernel knows nothing of paging modes. It edits its page tables (real bytes in
//! guest physical memory), and reports what the hardware and the hypervisor must see as
//! [`OsEffects`]: page-table writes, frames it allocated (the hypervisor backs them), pages
//! whose translations must be invalidated, CR3 writes. The simulator hands those on.
//!
//! Simplifications (documented in docs/model.md): no swapping or page cache; file-backed
//! mappings behave like anonymous ones; `mremap` moves a range by unmapping the old pages (the
//! new range demand-faults); page tables are freed only when a process exits or execs; freed
//! frames are not coalesced.

mod process;

pub use process::{Process, Vma};

use crate::addr::{Gpa, Gva, PageSize};
use crate::config::{GuestConfig, GuestPageSize, PagingFormat};
use crate::event::{MapFlags, Prot};
use crate::mem::{FrameAllocator, PhysMem};
use crate::paging::{Geometry, MapError, PageTable, Pte, TableWrite};
use rustc_hash::FxHashMap;

/// What an OS action requires of the hardware and the hypervisor.
#[derive(Default, Debug)]
pub struct OsEffects {
    /// Guest page-table entry writes, in order.
    pub writes: Vec<TableWrite>,
    /// Guest-physical blocks newly allocated (data or tables), to be backed by the host.
    pub new_frames: Vec<(Gpa, PageSize)>,
    /// Pages whose TLB entries must be invalidated (INVLPG), with the pid they belong to.
    pub invalidate: Vec<(u32, Gva)>,
    /// The TLB entries of these pids must be flushed entirely (too many pages for INVLPG, or
    /// an address space torn down).
    pub flush_pids: Vec<u32>,
    /// CR3 now points at this pid's tables.
    pub cr3_switch: Option<u32>,
    /// Page-table frames the guest freed (their shadows must go).
    pub freed_tables: Vec<Gpa>,
}

impl OsEffects {
    /// Empties every list, keeping their capacity.
    pub fn clear(&mut self) {
        self.writes.clear();
        self.new_frames.clear();
        self.invalidate.clear();
        self.flush_pids.clear();
        self.cr3_switch = None;
        self.freed_tables.clear();
    }
}

/// Counters of the guest kernel.
#[derive(Clone, Debug, Default)]
pub struct OsStats {
    /// Demand-paging faults handled (a first touch of a page).
    pub page_faults: u64,
    /// Copy-on-write faults handled.
    pub cow_faults: u64,
    /// Pages mapped at mmap time (`MAP_POPULATE` / the `prefault` parameter).
    pub pages_populated: u64,
    /// Touches of addresses outside every mapping of a process that has mappings; they are
    /// mapped as anonymous memory, and counted so the number is never silent.
    pub unmapped_touches: u64,
    /// Pages mapped, by size.
    pub pages_mapped: [u64; 4],
    /// Page-table frames allocated.
    pub table_frames: u64,
    /// Processes created (by create or fork).
    pub processes: u64,
}

/// Why the guest kernel could not resolve a fault or event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OsError {
    /// Guest physical memory is exhausted.
    OutOfMemory,
    /// The access violates the mapping's protection (the program would get SIGSEGV).
    Segv(String),
    /// The event cannot happen (unknown pid, range not mapped, ...).
    Impossible(String),
}

/// Linux's `tlb_single_page_flush_ceiling`: beyond this many pages, flush the whole TLB.
pub const FLUSH_CEILING: usize = 33;

/// The guest kernel.
pub struct GuestOs {
    /// Geometry of the guest's tables.
    pub geo: Geometry,
    /// Guest physical memory (page-table bytes).
    pub mem: PhysMem<Gpa>,
    alloc: FrameAllocator,
    policy: GuestPageSize,
    procs: FxHashMap<u32, Process>,
    current: Option<u32>,
    /// Reference counts of frames shared copy-on-write (absent = 1).
    shared: FxHashMap<u64, u32>,
    /// Counters.
    pub stats: OsStats,
}

fn size_index(s: PageSize) -> usize {
    match s {
        PageSize::Size4K => 0,
        PageSize::Size2M => 1,
        PageSize::Size4M => 2,
        PageSize::Size1G => 3,
    }
}

impl GuestOs {
    /// A guest with no processes.
    pub fn new(cfg: &GuestConfig, seed: u64) -> Self {
        GuestOs {
            geo: Geometry::of(cfg.format),
            mem: PhysMem::new(cfg.memory.0),
            alloc: FrameAllocator::new(cfg.memory.0, &cfg.allocator, seed),
            policy: cfg.page_size,
            procs: FxHashMap::default(),
            current: None,
            shared: FxHashMap::default(),
            stats: OsStats::default(),
        }
    }

    /// The running process.
    #[inline]
    pub fn current(&self) -> Option<&Process> {
        self.current.and_then(|p| self.procs.get(&p))
    }

    /// The running process's pid.
    #[inline]
    pub fn current_pid(&self) -> Option<u32> {
        self.current
    }

    /// A process by pid.
    pub fn process(&self, pid: u32) -> Option<&Process> {
        self.procs.get(&pid)
    }

    /// Number of live processes.
    pub fn process_count(&self) -> usize {
        self.procs.len()
    }

    fn new_table_frame(
        alloc: &mut FrameAllocator,
        new_frames: &mut Vec<(Gpa, PageSize)>,
        stats: &mut OsStats,
    ) -> Option<Gpa> {
        let f = alloc.alloc(PageSize::Size4K)?;
        new_frames.push((Gpa(f), PageSize::Size4K));
        stats.table_frames += 1;
        Some(Gpa(f))
    }

    /// Creates process `pid` with an empty address space; it runs if nothing else does.
    pub fn create(&mut self, pid: u32, fx: &mut OsEffects) -> Result<(), OsError> {
        if self.procs.contains_key(&pid) {
            return Err(OsError::Impossible(format!("process {pid} already exists")));
        }
        let pt = self.new_tables(fx)?;
        self.procs.insert(pid, Process::new(pid, pt));
        self.stats.processes += 1;
        if self.current.is_none() {
            self.current = Some(pid);
            fx.cr3_switch = Some(pid);
        }
        Ok(())
    }

    fn new_tables(&mut self, fx: &mut OsEffects) -> Result<PageTable<Gpa>, OsError> {
        let (alloc, stats) = (&mut self.alloc, &mut self.stats);
        PageTable::new(self.geo, &mut self.mem, &mut || {
            Self::new_table_frame(alloc, &mut fx.new_frames, stats)
        })
        .ok_or(OsError::OutOfMemory)
    }

    /// Creates pid 1 if the trace names no process before its first reference.
    pub fn ensure_implicit_process(&mut self, fx: &mut OsEffects) -> Result<u32, OsError> {
        if let Some(p) = self.current {
            return Ok(p);
        }
        if !self.procs.is_empty() {
            return Err(OsError::Impossible(
                "a reference with no running process (switch to one first)".into(),
            ));
        }
        self.create(1, fx)?;
        Ok(1)
    }

    /// Switches to `pid` (a CR3 write).
    pub fn switch(&mut self, pid: u32, fx: &mut OsEffects) -> Result<(), OsError> {
        if !self.procs.contains_key(&pid) {
            return Err(OsError::Impossible(format!(
                "switch to unknown or dead process {pid}"
            )));
        }
        self.current = Some(pid);
        fx.cr3_switch = Some(pid);
        Ok(())
    }

    /// Ends `pid`: frees its frames and tables.
    pub fn exit(&mut self, pid: u32, fx: &mut OsEffects) -> Result<(), OsError> {
        let p = self
            .procs
            .remove(&pid)
            .ok_or_else(|| OsError::Impossible(format!("exit of unknown process {pid}")))?;
        self.teardown(&p, fx);
        fx.flush_pids.push(pid);
        if self.current == Some(pid) {
            self.current = None;
        }
        Ok(())
    }

    /// `pid` execs: a new, empty address space (CR3 write).
    pub fn exec(&mut self, pid: u32, fx: &mut OsEffects) -> Result<(), OsError> {
        let pt = self.new_tables(fx)?;
        let p = self
            .procs
            .get_mut(&pid)
            .ok_or_else(|| OsError::Impossible(format!("exec of unknown process {pid}")))?;
        let old = std::mem::replace(p, Process::new(pid, pt));
        self.teardown(&old, fx);
        fx.flush_pids.push(pid);
        if self.current == Some(pid) {
            fx.cr3_switch = Some(pid);
        }
        Ok(())
    }

    fn teardown(&mut self, p: &Process, fx: &mut OsEffects) {
        let mut leaves = Vec::new();
        p.pt.for_each_leaf(&self.mem, &mut |_, _, level, e| {
            leaves.push((e.frame(self.geo.frame_mask()), level))
        });
        for (frame, level) in leaves {
            let size = self.geo.leaf_size(level).expect("leaf level");
            self.release(frame & !size.offset_mask(), size);
        }
        for t in p.pt.table_frames(&self.mem) {
            fx.freed_tables.push(t);
            self.mem.release_frame(t);
            self.alloc.free(t.raw(), PageSize::Size4K);
        }
    }

    fn release(&mut self, frame: u64, size: PageSize) {
        match self.shared.get_mut(&frame) {
            Some(n) if *n > 2 => *n -= 1,
            Some(_) => {
                self.shared.remove(&frame);
            }
            None => self.alloc.free(frame, size),
        }
    }

    /// `fork`: `child` gets the parent's areas and mappings, writable pages shared
    /// copy-on-write (write-protected in both).
    pub fn fork(&mut self, parent: u32, child: u32, fx: &mut OsEffects) -> Result<(), OsError> {
        if self.procs.contains_key(&child) {
            return Err(OsError::Impossible(format!(
                "fork child {child} already exists"
            )));
        }
        let pt = self.new_tables(fx)?;
        let par = self
            .procs
            .get(&parent)
            .ok_or_else(|| OsError::Impossible(format!("fork of unknown process {parent}")))?;
        let mut leaves = Vec::new();
        par.pt.for_each_leaf(&self.mem, &mut |va, ea, level, e| {
            leaves.push((va, ea, level, e))
        });
        let mut child_p = Process::new(child, pt);
        child_p.vmas = par.vmas.clone();
        child_p.heap = par.heap;
        child_p.implicit = par.implicit;
        let par_pt = par.pt;
        let mask = self.geo.frame_mask();
        for (va, _ea, level, e) in leaves {
            let va = self.canonical(va);
            let size = self.geo.leaf_size(level).expect("leaf");
            let frame = e.frame(mask) & !size.offset_mask();
            if e.writable() {
                par_pt
                    .clone()
                    .protect(&mut self.mem, va, 0, Pte::RW, &mut fx.writes);
            }
            let flags = e.0 & (Pte::US | Pte::G | Pte::NX | Pte::A | Pte::D);
            let (alloc, stats) = (&mut self.alloc, &mut self.stats);
            let nf = &mut fx.new_frames;
            child_p
                .pt
                .map(
                    &mut self.mem,
                    &mut || Self::new_table_frame(alloc, nf, stats),
                    va,
                    frame,
                    size,
                    flags,
                    &mut fx.writes,
                )
                .map_err(|_| OsError::OutOfMemory)?;
            *self.shared.entry(frame).or_insert(1) += 1;
        }
        fx.flush_pids.push(parent);
        self.procs.insert(child, child_p);
        self.stats.processes += 1;
        Ok(())
    }

    fn canonical(&self, va: u64) -> u64 {
        match self.geo.format {
            PagingFormat::Long4 | PagingFormat::Long5 => {
                let sh = 64 - self.geo.va_bits as u32;
                (((va << sh) as i64) >> sh) as u64
            }
            _ => va,
        }
    }

    fn current_mut(&mut self) -> Result<&mut Process, OsError> {
        let pid = self
            .current
            .ok_or_else(|| OsError::Impossible("no running process".into()))?;
        Ok(self.procs.get_mut(&pid).expect("current is live"))
    }

    /// `mmap` in the current process; `POPULATE` maps every page now.
    pub fn mmap(
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
        let p = self.current_mut()?;
        p.implicit = false;
        p.insert_vma(Vma {
            start: start.raw(),
            end,
            prot,
            flags,
        });
        if flags.0 & MapFlags::POPULATE != 0 {
            let mut va = start.raw();
            while va < end {
                // Populating writes every page, as Linux's MAP_POPULATE faults them in:
                // the entries start accessed, and dirty where writable.
                let size = self.map_page(va, fx, Pte::A | Pte::D)?;
                self.stats.pages_populated += 1;
                va = (va & !size.offset_mask()) + size.bytes();
            }
        }
        Ok(())
    }

    /// `munmap` in the current process. Unmapping a range with no area is an error (the
    /// model's event stream must be consistent).
    pub fn munmap(&mut self, start: Gva, len: u64, fx: &mut OsEffects) -> Result<(), OsError> {
        let end = start.raw().saturating_add(len.next_multiple_of(4096));
        let p = self.current_mut()?;
        if !p.vmas.iter().any(|v| v.start < end && v.end > start.raw()) {
            return Err(OsError::Impossible(format!(
                "munmap of {start} length {len:#x}: nothing is mapped there"
            )));
        }
        self.unmap_range(start.raw(), end, fx)
    }

    fn unmap_range(&mut self, start: u64, end: u64, fx: &mut OsEffects) -> Result<(), OsError> {
        let pid = self
            .current
            .ok_or_else(|| OsError::Impossible("no running process".into()))?;
        let p = self.procs.get_mut(&pid).expect("live");
        p.remove_vmas(start, end);
        let pt = p.pt;
        let mut victims = Vec::new();
        pt.for_each_leaf_in(&self.mem, start, end, &mut |va, _, level, e| {
            victims.push((va, level, e))
        });
        let mask = self.geo.frame_mask();
        let n = victims.len();
        for (va, level, e) in victims {
            let size = self.geo.leaf_size(level).expect("leaf");
            let va = self.canonical(va);
            // A large page partly inside the range is dropped whole (no splitting).
            pt.unmap(&mut self.mem, va, &mut fx.writes);
            self.release(e.frame(mask) & !size.offset_mask(), size);
            if n <= FLUSH_CEILING {
                fx.invalidate.push((pid, Gva(va)));
            }
        }
        if n > FLUSH_CEILING {
            fx.flush_pids.push(pid);
        }
        Ok(())
    }

    /// `mprotect` in the current process.
    pub fn mprotect(
        &mut self,
        start: Gva,
        len: u64,
        prot: Prot,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        let end = start.raw().saturating_add(len.next_multiple_of(4096));
        let pid = self
            .current
            .ok_or_else(|| OsError::Impossible("no running process".into()))?;
        let p = self.procs.get_mut(&pid).expect("live");
        if !p.protect_vmas(start.raw(), end, prot) {
            return Err(OsError::Impossible(format!(
                "mprotect of {start} length {len:#x}: nothing is mapped there"
            )));
        }
        let pt = p.pt;
        let mut pages = Vec::new();
        pt.for_each_leaf_in(&self.mem, start.raw(), end, &mut |va, _, _, e| {
            pages.push((va, e))
        });
        let n = pages.len();
        for (va, e) in pages {
            let va = self.canonical(va);
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
                fx.invalidate.push((pid, Gva(va)));
            }
        }
        if n > FLUSH_CEILING {
            fx.flush_pids.push(pid);
        }
        Ok(())
    }

    /// `brk` in the current process: the heap area grows or shrinks to `end`. The first `brk`
    /// of a process sets where its heap starts.
    pub fn brk(&mut self, end: Gva, fx: &mut OsEffects) -> Result<(), OsError> {
        let p = self.current_mut()?;
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
            p.insert_vma(Vma {
                start: cur_pg,
                end: new_end,
                prot: Prot::RW,
                flags: MapFlags(0),
            });
            p.merge_vmas();
        } else if new_end < cur_pg {
            self.unmap_range(new_end, cur_pg, fx)?;
        }
        Ok(())
    }

    /// `mremap`: the old range goes, the new range is an area with the old protection.
    pub fn mremap(
        &mut self,
        old: Gva,
        old_len: u64,
        new: Gva,
        new_len: u64,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        let p = self.current_mut()?;
        let v = p.vma_at(old.raw()).ok_or_else(|| {
            OsError::Impossible(format!("mremap of {old}: nothing is mapped there"))
        })?;
        let (prot, flags) = (v.prot, v.flags);
        let end = old.raw().saturating_add(old_len.next_multiple_of(4096));
        self.unmap_range(old.raw(), end, fx)?;
        self.mmap(
            new,
            new_len,
            prot,
            MapFlags(flags.0 & !MapFlags::POPULATE),
            fx,
        )
    }

    /// Resolves a fault of the current process at `va`: demand paging (map a new frame),
    /// copy-on-write (copy or reuse the frame), or a protection error.
    pub fn fault(&mut self, va: Gva, write: bool, fx: &mut OsEffects) -> Result<(), OsError> {
        let pid = self
            .current
            .ok_or_else(|| OsError::Impossible("no running process".into()))?;
        let p = self.procs.get(&pid).expect("live");
        let vma = p.vma_at(va.raw()).copied();
        let pt = p.pt;
        if let Some(v) = vma {
            if write && !v.prot.write() {
                return Err(OsError::Segv(format!(
                    "write to {va} in a read-only mapping {:#x}..{:#x}",
                    v.start, v.end
                )));
            }
        } else if !p.implicit {
            self.stats.unmapped_touches += 1;
        }
        if let Some((_, size, e)) = pt.lookup(&self.mem, va.raw()) {
            if write && !e.writable() {
                return self.cow(pid, va, size, e, fx);
            }
            // Present and allowed: a stale TLB entry; nothing to do.
            return Ok(());
        }
        self.stats.page_faults += 1;
        // A write fault maps the page dirty (Linux: pte_mkdirty on a write fault).
        self.map_page(va.raw(), fx, if write { Pte::D } else { 0 })?;
        Ok(())
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
        let pt = self.procs.get(&pid).expect("live").pt;
        let base = va.raw() & !size.offset_mask();
        if self.shared.contains_key(&frame) {
            let new = self.alloc.alloc(size).ok_or(OsError::OutOfMemory)?;
            fx.new_frames.push((Gpa(new), size));
            self.release(frame, size);
            let flags = (e.0 & (Pte::US | Pte::G | Pte::NX)) | Pte::RW;
            let (alloc, stats) = (&mut self.alloc, &mut self.stats);
            let nf = &mut fx.new_frames;
            pt.map(
                &mut self.mem,
                &mut || Self::new_table_frame(alloc, nf, stats),
                base,
                new,
                size,
                flags,
                &mut fx.writes,
            )
            .map_err(|_| OsError::OutOfMemory)?;
        } else {
            pt.protect(&mut self.mem, base, Pte::RW, 0, &mut fx.writes);
        }
        fx.invalidate.push((pid, Gva(base)));
        Ok(())
    }

    /// The page size the policy wants for `va` in area `vma`.
    fn wanted_size(&self, va: u64, vma: Option<&Vma>) -> PageSize {
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
        let want = match self.policy {
            GuestPageSize::Size4K => PageSize::Size4K,
            GuestPageSize::Size2M => large,
            GuestPageSize::Size1G if self.geo.supports(PageSize::Size1G) => PageSize::Size1G,
            GuestPageSize::Size1G => large,
            GuestPageSize::Mixed => match vma {
                Some(v) if v.flags.0 & MapFlags::HUGE != 0 || v.end - v.start >= large.bytes() => {
                    large
                }
                _ => PageSize::Size4K,
            },
        };
        let mut s = want;
        loop {
            if s == PageSize::Size4K || fits(s) {
                return s;
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
        let pid = self
            .current
            .ok_or_else(|| OsError::Impossible("no running process".into()))?;
        let p = self.procs.get(&pid).expect("live");
        let vma = p.vma_at(va).copied();
        let pt = p.pt;
        let (prot, flags_user) = match vma {
            Some(v) => (v.prot, Pte::US),
            None => (Prot::RWX, Pte::US),
        };
        let mut flags = flags_user | (ad & Pte::A);
        if prot.write() {
            flags |= Pte::RW | (ad & Pte::D);
        }
        if !prot.exec() {
            flags |= Pte::NX;
        }
        let mut size = self.wanted_size(va, vma.as_ref());
        loop {
            let frame = match self.alloc.alloc(size) {
                Some(f) => f,
                None if size != PageSize::Size4K => {
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
                    Some(Gpa(f))
                },
                base,
                frame,
                size,
                flags,
                &mut fx.writes,
            );
            for t in new_tables {
                fx.new_frames.push((Gpa(t), PageSize::Size4K));
            }
            match r {
                Ok(()) => {
                    fx.new_frames.push((Gpa(frame), size));
                    self.stats.pages_mapped[size_index(size)] += 1;
                    return Ok(size);
                }
                Err(MapError::Conflict { .. }) | Err(MapError::UnsupportedSize(_))
                    if size != PageSize::Size4K =>
                {
                    self.alloc.free(frame, size);
                    size = self.smaller(size);
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

    /// Functional translation of `va` in process `pid` (for the checked mode).
    pub fn translate(&self, pid: u32, va: Gva) -> Option<(Gpa, PageSize, Pte)> {
        let p = self.procs.get(&pid)?;
        p.pt.lookup(&self.mem, va.raw())
            .map(|(pa, s, e)| (Gpa(pa), s, e))
    }
}
