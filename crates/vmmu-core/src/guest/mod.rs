//! The guest OS model (DESIGN.md "The guest OS model"): processes with address spaces, virtual
//! memory areas, demand paging, copy-on-write fork, exec, exit, mmap / munmap / mprotect /
//! mremap / brk, and the page-size policy.
//!
//! The guest kernel knows nothing of paging modes. It edits its page tables (real bytes in
//! guest physical memory), charges its own work in cycles ([`KernelCosts`], the same in every
//! mode), and reports what the hardware and the hypervisor must see as [`OsEffects`]:
//! page-table writes, frames it allocated (the hypervisor backs them), pages whose translations
//! must be invalidated, CR3 writes. The simulator hands those on.
//!
//! Large pages as Linux gives them — transparent huge pages, hugetlbfs, khugepaged, the
//! `madvise` advice — are in `thp.rs`.
//!
//! Simplifications (documented in docs/model.md): no swapping or page cache; file-backed
//! mappings behave like anonymous ones (but get no transparent huge pages); `mremap` moves a
//! range by unmapping the old pages (the new range demand-faults); page tables are freed only
//! when a process exits or execs, or khugepaged collapses one; freed frames are not coalesced.

mod mm;
mod process;
mod thp;

pub use process::{Area, HugeAdvice, Hugetlb, Process, Vma};

use crate::addr::{Gpa, Gva, PageSize};
use crate::config::{CoreConfig, GuestConfig, GuestPageSize, KernelCosts, KhugepagedConfig, Thp};
use crate::event::Event;
use crate::event::{Madvise, Mmap, Mprotect, Mremap, Munmap};
use crate::mem::{FrameAllocator, PhysMem};
use crate::paging::{Geometry, PageTable, Pte, TableWrite};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// What an OS action requires of the hardware and the hypervisor.
#[derive(Default, Debug)]
pub struct OsEffects {
    /// Guest page-table entry writes, in order.
    pub writes: Vec<TableWrite<Gpa>>,
    /// Guest-physical blocks newly allocated (data or tables), to be backed by the host.
    pub new_frames: Vec<(Gpa, PageSize)>,
    /// Pages whose TLB entries must be invalidated (INVLPG), with the pid they belong to and
    /// the guest page size that mapped them.
    pub invalidate: Vec<(u32, Gva, PageSize)>,
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
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct OsStats {
    /// Demand-paging faults handled (a first touch of a page), on instruction fetches.
    pub page_faults_instr: u64,
    /// Demand-paging faults handled on loads and stores.
    pub page_faults_data: u64,
    /// Copy-on-write faults handled.
    pub cow_faults: u64,
    /// Pages mapped at mmap time (`MAP_POPULATE` / the `prefault` parameter).
    pub pages_populated: u64,
    /// Touches of addresses outside every mapping of a process that has mappings; they are
    /// mapped as anonymous memory, and counted so the number is never silent.
    pub unmapped_touches: u64,
    /// Pages mapped, by size (index [`PageSize::index`]).
    pub pages_mapped: [u64; 4],
    /// Page-table frames allocated.
    pub table_frames: u64,
    /// Processes created (by create or fork).
    pub processes: u64,
    /// The kernel's own cycles ([`KernelCosts`]).
    pub kernel_cycles: u64,
    /// Faults (and populated pages) mapped with a transparent huge page (Linux's
    /// `/proc/vmstat` `thp_fault_alloc`).
    pub thp_fault_alloc: u64,
    /// Faults that wanted a transparent huge page, found no free 2 MiB block and mapped
    /// 4 KiB (`thp_fault_fallback`).
    pub thp_fault_fallback: u64,
    /// Ranges collapsed into a huge page by khugepaged or `MADV_COLLAPSE`
    /// (`thp_collapse_alloc`).
    pub thp_collapse_alloc: u64,
    /// Collapses abandoned for want of a free 2 MiB block (`thp_collapse_alloc_failed`).
    pub thp_collapse_alloc_failed: u64,
    /// Huge page mappings split into 4 KiB entries (`thp_split_pmd`).
    pub thp_split_pmd: u64,
    /// `MAP_HUGETLB` mappings the hugetlbfs pool could not hold, mapped as ordinary memory.
    pub hugetlb_fallback: u64,
    /// Pages dropped by `MADV_DONTNEED` / `MADV_FREE`.
    pub pages_zapped: u64,
    /// khugepaged's wake-ups.
    pub khugepaged_wakeups: u64,
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
    thp: Thp,
    khugepaged: KhugepagedConfig,
    /// Instructions between khugepaged's wake-ups (`u64::MAX`: it never wakes).
    scan_every: u64,
    /// The instruction count at which khugepaged next wakes.
    next_scan: u64,
    /// Where khugepaged's next scan starts: a pid and an address in it.
    scan_at: (u32, u64),
    /// Huge pages reserved for hugetlbfs, and how many no mapping has reserved.
    hugetlb_pool: u64,
    hugetlb_free: u64,
    costs: KernelCosts,
    procs: FxHashMap<u32, Process>,
    current: Option<u32>,
    /// The running thread (a process's main thread is `tid = pid`).
    current_tid: Option<u32>,
    /// Threads beyond each process's main thread: tid → pid.
    threads: FxHashMap<u32, u32>,
    /// Reference counts of frames shared copy-on-write (absent = 1).
    shared: FxHashMap<u64, u32>,
    /// Counters.
    pub stats: OsStats,
}

impl GuestOs {
    /// A guest with no processes, on a core of `core` (khugepaged's clock), whose kernel
    /// work costs `costs`.
    pub fn new(cfg: &GuestConfig, core: &CoreConfig, costs: &KernelCosts, seed: u64) -> Self {
        let scan_every = match cfg.khugepaged.scan_sleep_millisecs {
            _ if cfg.thp == Thp::Never || cfg.page_size != GuestPageSize::Size4K => u64::MAX,
            0 => u64::MAX,
            // Guest time is retired instructions at the base CPI: ms × 10⁶ × GHz cycles.
            ms => (ms as f64 * 1e6 * core.freq_ghz / core.base_cpi)
                .round()
                .max(1.0) as u64,
        };
        GuestOs {
            geo: Geometry::of(cfg.format),
            mem: PhysMem::new(cfg.memory.0),
            alloc: FrameAllocator::new(cfg.memory.0, &cfg.allocator, seed),
            policy: cfg.page_size,
            thp: cfg.thp,
            khugepaged: cfg.khugepaged,
            scan_every,
            next_scan: scan_every,
            scan_at: (0, 0),
            hugetlb_pool: cfg.hugetlb_pages,
            hugetlb_free: cfg.hugetlb_pages,
            costs: *costs,
            procs: FxHashMap::default(),
            current: None,
            current_tid: None,
            threads: FxHashMap::default(),
            shared: FxHashMap::default(),
            stats: OsStats::default(),
        }
    }

    /// The running process's pid.
    #[inline]
    pub fn current_pid(&self) -> Option<u32> {
        self.current
    }

    /// The running thread's tid.
    #[inline]
    pub fn current_tid(&self) -> Option<u32> {
        self.current_tid.or(self.current)
    }

    /// The process thread `tid` belongs to, if it lives (a main thread's tid is its pid).
    pub fn thread_pid(&self, tid: u32) -> Option<u32> {
        match self.threads.get(&tid) {
            Some(&pid) => Some(pid),
            None => self.procs.contains_key(&tid).then_some(tid),
        }
    }

    /// Puts thread `tid` of `pid` on the processor without a context switch: the scheduler of
    /// a multi-vCPU guest loads the state of the vCPU it simulates next (each vCPU keeps its
    /// own running thread and CR3; nothing is written or charged).
    pub fn resume(&mut self, running: Option<(u32, u32)>) {
        self.current = running.map(|(pid, _)| pid);
        self.current_tid = running.map(|(_, tid)| tid);
    }

    /// Charges kernel work done outside an event (a TLB-shootdown IPI's handler).
    pub fn charge(&mut self, cycles: u64) {
        self.stats.kernel_cycles += cycles;
    }

    /// The kernel's costs.
    pub fn costs(&self) -> &KernelCosts {
        &self.costs
    }

    /// A process by pid.
    #[inline]
    pub fn process(&self, pid: u32) -> Option<&Process> {
        self.procs.get(&pid)
    }

    /// The PCID of `pid` (0 for a process that is gone).
    #[inline]
    pub fn pcid(&self, pid: u32) -> u16 {
        self.procs.get(&pid).map_or(0, |p| p.pcid)
    }

    /// The page tables of `pid`.
    #[inline]
    pub fn tables(&self, pid: u32) -> Option<PageTable<Gva, Gpa>> {
        self.procs.get(&pid).map(|p| p.pt)
    }

    /// Zeroes the counters (the end of a warm-up).
    pub fn reset_stats(&mut self) {
        self.stats = OsStats::default();
    }

    /// Carries out an OS event (every event but references and compute) and charges the
    /// kernel's work for it.
    pub fn event(&mut self, e: &Event, fx: &mut OsEffects) -> Result<(), OsError> {
        let c = self.costs;
        let (r, fixed) = match *e {
            Event::Mmap(ref w) => {
                let Mmap {
                    start,
                    len,
                    prot,
                    flags,
                } = **w;
                (
                    self.ensure_implicit_process(fx)
                        .and_then(|_| self.mmap(start, len, prot, flags, fx)),
                    c.syscall,
                )
            }
            Event::Brk { end } => (
                self.ensure_implicit_process(fx)
                    .and_then(|_| self.brk(end, fx)),
                c.syscall,
            ),
            Event::ProcessCreate { pid } => (self.create(pid, fx), c.fork),
            Event::Fork { parent, child } => (
                match self.current {
                    Some(cur) if cur != parent => Err(OsError::Impossible(format!(
                        "fork by process {parent}, but process {cur} is running"
                    ))),
                    _ => self.fork(parent, child, fx),
                },
                c.fork,
            ),
            Event::Exec { pid } => (self.exec(pid, fx), c.exec),
            Event::Exit { pid } => (self.exit(pid, fx), c.exit),
            Event::Switch { pid } => (self.switch(pid, pid, true, fx), c.context_switch),
            Event::Thread { pid, tid } => {
                let cost = if self.current_tid() == Some(tid) {
                    0
                } else {
                    c.context_switch
                };
                (self.switch(pid, tid, false, fx), cost)
            }
            Event::ThreadCreate { pid, tid } => (self.thread_create(pid, tid), c.thread_create),
            Event::ThreadExit { pid, tid } => (self.thread_exit(pid, tid), c.exit),
            Event::Munmap(ref w) => {
                let Munmap { start, len } = **w;
                (self.munmap(start, len, fx), c.syscall)
            }
            Event::Madvise(ref w) => {
                let Madvise { start, len, advice } = **w;
                (self.madvise(start, len, advice, fx), c.syscall)
            }
            Event::Mprotect(ref w) => {
                let Mprotect { start, len, prot } = **w;
                (self.mprotect(start, len, prot, fx), c.syscall)
            }
            Event::Mremap(ref w) => {
                let Mremap {
                    old,
                    old_len,
                    new,
                    new_len,
                } = **w;
                (self.mremap(old, old_len, new, new_len, fx), c.syscall)
            }
            Event::Phase { .. } | Event::Ref(_) | Event::Compute { .. } => (Ok(()), 0),
        };
        // Per page-table entry written (a fork's copies included) or page invalidated.
        let per_entry = match e {
            Event::Fork { .. } => self.costs.fork_per_pte,
            _ => self.costs.per_page,
        };
        self.stats.kernel_cycles +=
            fixed + per_entry * (fx.writes.len() + fx.invalidate.len()) as u64;
        r
    }

    fn new_table_frame(
        alloc: &mut FrameAllocator,
        new_frames: &mut Vec<(Gpa, PageSize)>,
        stats: &mut OsStats,
    ) -> Option<Gpa> {
        let f = alloc.alloc(PageSize::Size4K)?;
        new_frames.push((Gpa::new(f), PageSize::Size4K));
        stats.table_frames += 1;
        Some(Gpa::new(f))
    }

    /// Creates process `pid` with an empty address space; it runs if nothing else does.
    fn create(&mut self, pid: u32, fx: &mut OsEffects) -> Result<(), OsError> {
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

    fn new_tables(&mut self, fx: &mut OsEffects) -> Result<PageTable<Gva, Gpa>, OsError> {
        let (alloc, stats) = (&mut self.alloc, &mut self.stats);
        PageTable::new(self.geo, &mut self.mem, &mut || {
            Self::new_table_frame(alloc, &mut fx.new_frames, stats)
        })
        .ok_or(OsError::OutOfMemory)
    }

    /// Creates pid 1 if the trace names no process before its first reference (charged as a
    /// process creation).
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
        self.stats.kernel_cycles += self.costs.fork;
        Ok(1)
    }

    /// Switches to thread `tid` of `pid`: a CR3 write when the process changes, or always
    /// (`reload`, a process switch by `Switch`).
    fn switch(
        &mut self,
        pid: u32,
        tid: u32,
        reload: bool,
        fx: &mut OsEffects,
    ) -> Result<(), OsError> {
        if !self.procs.contains_key(&pid) {
            return Err(OsError::Impossible(format!(
                "switch to unknown or dead process {pid}"
            )));
        }
        if self.thread_pid(tid) != Some(pid) {
            return Err(OsError::Impossible(format!(
                "switch to thread {tid}, which is not a live thread of process {pid}"
            )));
        }
        if reload || self.current != Some(pid) {
            fx.cr3_switch = Some(pid);
        }
        self.current = Some(pid);
        self.current_tid = Some(tid);
        Ok(())
    }

    /// `clone(CLONE_VM)`: process `pid` gains thread `tid`, sharing its address space.
    fn thread_create(&mut self, pid: u32, tid: u32) -> Result<(), OsError> {
        if !self.procs.contains_key(&pid) {
            return Err(OsError::Impossible(format!(
                "thread {tid} created in unknown process {pid}"
            )));
        }
        if self.thread_pid(tid).is_some() {
            return Err(OsError::Impossible(format!(
                "thread {tid} already exists (thread ids are unique in the guest)"
            )));
        }
        self.threads.insert(tid, pid);
        Ok(())
    }

    /// Thread `tid` of `pid` ends (a main thread ends with its process, by `exit`).
    fn thread_exit(&mut self, pid: u32, tid: u32) -> Result<(), OsError> {
        if self.threads.get(&tid) != Some(&pid) {
            return Err(OsError::Impossible(format!(
                "exit of thread {tid}, which is not a live secondary thread of process {pid}"
            )));
        }
        self.threads.remove(&tid);
        if self.current_tid == Some(tid) {
            self.current_tid = Some(pid);
        }
        Ok(())
    }

    /// Ends `pid`: frees its frames and tables.
    fn exit(&mut self, pid: u32, fx: &mut OsEffects) -> Result<(), OsError> {
        let p = self
            .procs
            .remove(&pid)
            .ok_or_else(|| OsError::Impossible(format!("exit of unknown process {pid}")))?;
        self.teardown(&p, fx);
        fx.flush_pids.push(pid);
        self.threads.retain(|_, p| *p != pid);
        if self.current == Some(pid) {
            self.current = None;
            self.current_tid = None;
        }
        Ok(())
    }

    /// `pid` execs: a new, empty address space (CR3 write).
    fn exec(&mut self, pid: u32, fx: &mut OsEffects) -> Result<(), OsError> {
        if !self.procs.contains_key(&pid) {
            return Err(OsError::Impossible(format!(
                "exec of unknown process {pid}"
            )));
        }
        let pt = self.new_tables(fx)?;
        let p = self.procs.get_mut(&pid).expect("checked above");
        let old = std::mem::replace(p, Process::new(pid, pt));
        self.teardown(&old, fx);
        fx.flush_pids.push(pid);
        if self.current == Some(pid) {
            fx.cr3_switch = Some(pid);
        }
        Ok(())
    }

    /// Frees a dead address space: its pages (`per_page` each), its table frames and its
    /// hugetlbfs reservations.
    fn teardown(&mut self, p: &Process, fx: &mut OsEffects) {
        self.hugetlb_unreserve(&p.vmas, 0, u64::MAX);
        let mut leaves = Vec::new();
        p.pt.for_each_leaf(&self.mem, &mut |_, _, level, e| leaves.push((e, level)));
        self.stats.kernel_cycles += self.costs.per_page * leaves.len() as u64;
        for (e, level) in leaves {
            let size = self.geo.leaf_size(level).expect("leaf level");
            self.release(e.frame(self.geo.frame_mask()) & !size.offset_mask(), size);
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
    fn fork(&mut self, parent: u32, child: u32, fx: &mut OsEffects) -> Result<(), OsError> {
        if self.procs.contains_key(&child) {
            return Err(OsError::Impossible(format!(
                "fork child {child} already exists"
            )));
        }
        if !self.procs.contains_key(&parent) {
            return Err(OsError::Impossible(format!(
                "fork of unknown process {parent}"
            )));
        }
        let pt = self.new_tables(fx)?;
        let par = self.procs.get(&parent).expect("checked above");
        let mut leaves = Vec::new();
        par.pt.for_each_leaf(&self.mem, &mut |va, _, level, e| {
            leaves.push((va, level, e))
        });
        let mut child_p = Process::new(child, pt);
        child_p.vmas = par.vmas.clone();
        // The parent keeps its hugetlbfs reservations (Linux's HPAGE_RESV_OWNER).
        child_p.vmas.modify(0, u64::MAX, |a| match a.hugetlb {
            Hugetlb::Reserved => Area {
                hugetlb: Hugetlb::Inherited,
                ..a
            },
            _ => a,
        });
        child_p.heap = par.heap;
        child_p.implicit = par.implicit;
        let par_pt = par.pt;
        let mask = self.geo.frame_mask();
        for (va, level, e) in leaves {
            let size = self.geo.leaf_size(level).expect("leaf");
            let frame = e.frame(mask) & !size.offset_mask();
            if e.writable() {
                par_pt.protect(&mut self.mem, va, 0, Pte::RW, &mut fx.writes);
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
                    Gpa::new(frame),
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

    /// Functional translation of `va` in process `pid` (for the checked mode).
    pub fn translate(&self, pid: u32, va: Gva) -> Option<(Gpa, PageSize, Pte)> {
        self.procs.get(&pid)?.pt.lookup(&self.mem, va)
    }
}
