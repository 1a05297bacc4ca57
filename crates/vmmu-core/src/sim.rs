//! The simulator: drives a workload's events through the guest OS model, the hypervisor's
//! memory side and the MMU, and accounts every cycle to a cause (DESIGN.md "Timing").
//!
//! `cycles = instructions × base_CPI + translation + data + guest_kernel + hypervisor`, where
//! - *translation* is the latency of L2-TLB hits, page walks (every page-entry reference's
//!   latency, PWC / NTLB / PSC lookups) and A/D-bit updates;
//! - *data* is the latency of each data reference beyond an L1 hit (an L1 hit is in base CPI);
//!   instruction fetches are assumed to hit the L1 I-cache and do not go through the caches;
//! - *guest_kernel* is the guest's own fault handling, paid in every mode;
//! - *hypervisor* is exits and handlers (zero until the shadow-paging issue).
//!
//! The engine streams events in batches and allocates nothing per reference on the hot path.

use crate::addr::{Gpa, Gva, Hpa};
use crate::config::{Backing, CostProfile, Mode, SimConfig, Technique};
use crate::error::{Error, Result};
use crate::event::{Event, EventSource, MemRef};
use crate::exits::{ExitReason, ExitStats};
use crate::guest::{GuestOs, OsEffects, OsError};
use crate::hw::tlb::{Tag, TlbHierarchy, TlbLevel, TlbSide};
use crate::paging::{Geometry, TableWrite};
use crate::shadow::{FaultKind, ShadowPager, WriteKind};
use crate::vmm::Vmm;
use crate::walk::guest::{self as gwalk, Access, WalkFault, WalkOutcome};
use crate::walk::nested::NestedWalker;
use crate::walk::{host as hwalk, IdentityDim, WalkHw};

/// Progress of a running simulation, reported to the caller's callback.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Events simulated so far.
    pub events: u64,
    /// Total events if the source knows it.
    pub total: Option<u64>,
}

/// Cycles by cause.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cycles {
    /// L2-TLB hits, walks, A/D updates.
    pub translation: u64,
    /// Data references beyond an L1 hit.
    pub data: u64,
    /// The guest kernel's fault handling.
    pub guest_kernel: u64,
    /// Exits and hypervisor handlers.
    pub hypervisor: u64,
}

/// Counters kept by the simulator itself.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Events consumed.
    pub events: u64,
    /// Instructions retired.
    pub instructions: u64,
    /// Data references (load, store, modify: one each).
    pub memory_refs: u64,
    /// Instruction fetches.
    pub fetches: u64,
    /// CR3 writes (context switches, exec).
    pub cr3_writes: u64,
    /// INVLPGs executed by the guest.
    pub invlpgs: u64,
    /// Full TLB flushes.
    pub tlb_flushes: u64,
    /// Stores that hit a TLB entry whose dirty bit was clear.
    pub dirty_updates: u64,
    /// Faults taken on a TLB hit (a write to a read-only entry: copy-on-write).
    pub tlb_hit_faults: u64,
    /// Translations verified by the checked mode.
    pub checked: u64,
    /// Cycles by cause.
    pub cycles: Cycles,
}

/// How translation works in this run: the mode, with the technique resolved.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Paging {
    /// No hypervisor.
    Native,
    /// Nested paging: the 2D walk.
    Nested,
    /// Shadow paging by trap-and-emulate (HVM).
    Shadow,
    /// Direct paging with para-virtual hypercalls or a pre-virtualized in-place VMM: the
    /// hardware walks the guest's (validated) tables; MMU operations call the hypervisor.
    Direct(Technique),
}

const VPID: u16 = 1;
const BATCH: usize = 65_536;
const PROGRESS_EVERY: u64 = 1 << 20;

/// One simulation: a guest, its VM's host side (nested mode), the MMU hardware and counters.
pub struct Simulator {
    /// The configuration (validated).
    pub cfg: SimConfig,
    /// The guest kernel and its memory.
    pub os: GuestOs,
    /// The hypervisor's memory side (every mode but native).
    pub vmm: Option<Vmm>,
    /// The shadow pager (shadow mode with `hvm`).
    pub shadow: Option<ShadowPager>,
    /// Hypervisor operations by reason.
    pub exits: ExitStats,
    /// How translation works.
    pub paging: Paging,
    /// The TLBs.
    pub tlb: TlbHierarchy,
    /// The walkers' hardware.
    pub hw: WalkHw,
    /// Counters.
    pub counters: Counters,
    geo: Geometry,
    fx: OsEffects,
    log: Vec<TableWrite>,
    vpid: u16,
    l1_latency: u32,
    l2_tlb_latency: u64,
    data_on: bool,
    gcost: crate::config::GuestCosts,
    costs: CostProfile,
}

fn os_err(e: OsError, event: u64, what: &Event) -> Error {
    match e {
        OsError::OutOfMemory => Error::OutOfMemory {
            space: "guest physical",
            reason: format!("at event {event} ({what:?}): raise guest.memory"),
        },
        OsError::Segv(reason) | OsError::Impossible(reason) => Error::Event {
            event,
            what: format!("{what:?}"),
            reason,
        },
    }
}

impl Simulator {
    /// Builds a simulator for `cfg` (validated again here).
    pub fn new(cfg: &SimConfig) -> Result<Self> {
        cfg.validate()?;
        let paging = match (cfg.mode, cfg.hypervisor.technique) {
            (Mode::Native, _) => Paging::Native,
            (Mode::Nested, _) => Paging::Nested,
            (Mode::Shadow, Technique::Hvm) => Paging::Shadow,
            (Mode::Shadow, t) => Paging::Direct(t),
        };
        let vmm = match cfg.mode {
            Mode::Native => None,
            Mode::Nested | Mode::Shadow => Some(Vmm::new(&cfg.host, cfg.guest.memory.0, cfg.seed)?),
        };
        let geo = Geometry::of(cfg.guest.format);
        let shadow =
            (paging == Paging::Shadow).then(|| ShadowPager::new(&cfg.hypervisor.shadow, geo));
        let m = &cfg.machine;
        let vpid = if cfg.mode == Mode::Native || !m.tlb.vpid {
            0
        } else {
            VPID
        };
        Ok(Simulator {
            os: GuestOs::new(&cfg.guest, cfg.seed),
            vmm,
            shadow,
            exits: ExitStats::default(),
            paging,
            tlb: TlbHierarchy::new(&m.tlb),
            hw: WalkHw::new(m),
            counters: Counters::default(),
            geo: Geometry::of(cfg.guest.format),
            fx: OsEffects::default(),
            log: Vec::new(),
            vpid,
            l1_latency: m.caches.levels.first().map_or(0, |l| l.latency),
            l2_tlb_latency: m.tlb.l2_latency as u64,
            data_on: m.caches.data && !m.caches.levels.is_empty(),
            gcost: cfg.guest.costs.clone(),
            costs: cfg.hypervisor.costs.clone(),
            cfg: cfg.clone(),
        })
    }

    /// Runs `source` to its end.
    pub fn run(
        &mut self,
        source: &mut dyn EventSource,
        progress: &mut dyn FnMut(&Progress) -> bool,
    ) -> Result<()> {
        let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
        let total = source.len_hint();
        let mut next_report = PROGRESS_EVERY;
        loop {
            buf.clear();
            let n = source.next_batch(&mut buf, BATCH)?;
            if n == 0 {
                break;
            }
            for e in &buf {
                self.step(e)?;
            }
            if self.counters.events >= next_report {
                next_report = self.counters.events + PROGRESS_EVERY;
                let p = Progress {
                    events: self.counters.events,
                    total,
                };
                if !progress(&p) {
                    return Err(Error::Interrupted {
                        events: self.counters.events,
                    });
                }
            }
        }
        progress(&Progress {
            events: self.counters.events,
            total,
        });
        Ok(())
    }

    /// Simulates one event.
    #[inline]
    pub fn step(&mut self, e: &Event) -> Result<()> {
        let idx = self.counters.events;
        self.counters.events += 1;
        match e {
            Event::Ref(r) => self.reference(r, idx),
            Event::Compute { instrs } => {
                self.counters.instructions += instrs;
                Ok(())
            }
            other => self.os_event(other, idx),
        }
    }

    #[inline]
    fn tag(&self, pid: u32) -> Tag {
        let pcid = if self.cfg.machine.tlb.pcid {
            self.os.process(pid).map_or(0, |p| p.pcid)
        } else {
            0
        };
        Tag {
            pcid,
            vpid: self.vpid,
        }
    }

    #[inline]
    fn reference(&mut self, r: &MemRef, idx: u64) -> Result<()> {
        let c = &mut self.counters;
        c.instructions += r.instrs as u64;
        let fetch = r.kind.is_fetch();
        let write = r.kind.is_write();
        if fetch {
            c.fetches += 1;
        } else {
            c.memory_refs += 1;
        }
        if !self.geo.is_canonical(r.va.raw()) {
            return Err(Error::Address {
                addr: r.va.raw(),
                event: idx,
                reason: format!(
                    "not a canonical {}-bit address for {:?} paging",
                    self.geo.va_bits, self.geo.format
                ),
            });
        }
        let pid = match self.os.current_pid() {
            Some(p) => p,
            None => {
                let ev = Event::Ref(*r);
                let mut fx = std::mem::take(&mut self.fx);
                fx.clear();
                let pid = self
                    .os
                    .ensure_implicit_process(&mut fx)
                    .map_err(|e| os_err(e, idx, &ev))?;
                self.apply(&mut fx)?;
                self.fx = fx;
                pid
            }
        };
        let tag = self.tag(pid);
        let side = if fetch { TlbSide::Instr } else { TlbSide::Data };
        let access = Access { write, fetch };
        let mut faults = 0;
        let hpa = loop {
            if let Some((level, t)) = self.tlb.lookup(r.va, side, tag) {
                if level == TlbLevel::L2 {
                    self.counters.cycles.translation += self.l2_tlb_latency;
                }
                if (!write || t.writable) && (!fetch || t.executable) {
                    if write && !t.dirty {
                        self.dirty_update(pid, r.va, side, tag);
                    }
                    break t.page.add(r.va.page_offset(t.size));
                }
                // A write to a read-only entry faults without a walk (copy-on-write).
                self.counters.tlb_hit_faults += 1;
                self.fault(r, idx, WalkFault::Protection, &mut faults)?;
                self.tlb.invalidate_page(r.va, tag);
                continue;
            }
            match self.walk(pid, r.va, access, tag) {
                WalkOutcome::Done(t, _) => {
                    self.tlb.fill(r.va, side, tag, t);
                    break t.page.add(r.va.page_offset(t.size));
                }
                WalkOutcome::Fault(f) => self.fault(r, idx, f, &mut faults)?,
            }
        };
        if self.cfg.check {
            self.check(pid, r.va, hpa, idx)?;
        }
        if self.data_on && !fetch {
            let (_, lat) = self.hw.caches.access(hpa, 0);
            self.counters.cycles.data += lat.saturating_sub(self.l1_latency) as u64;
        }
        Ok(())
    }

    #[inline]
    fn walk(&mut self, pid: u32, va: Gva, access: Access, tag: Tag) -> WalkOutcome {
        let gpt = self.os.process(pid).expect("current process is live").pt;
        let tag = tag.raw();
        let mut cycles = 0u64;
        let out = match (&self.vmm, self.paging) {
            (Some(v), Paging::Shadow) => {
                let sp = self.shadow.as_ref().expect("shadow pager in shadow mode");
                match sp.root() {
                    Some(root) => hwalk::walk(
                        &mut self.hw,
                        &v.hmem,
                        sp.geometry(),
                        root,
                        va,
                        access,
                        &mut cycles,
                    ),
                    None => {
                        self.hw.stats.walks += 1;
                        self.hw.stats.walk_faults += 1;
                        WalkOutcome::Fault(WalkFault::NotPresent {
                            level: self.geo.levels,
                        })
                    }
                }
            }
            (Some(v), Paging::Nested) => gwalk::walk(
                &mut self.hw,
                &mut NestedWalker {
                    hmem: &v.hmem,
                    npt: &v.npt,
                    vpid: self.vpid,
                },
                &mut self.os.mem,
                &gpt,
                va,
                access,
                tag,
                &mut cycles,
                &mut self.log,
            ),
            _ => gwalk::walk(
                &mut self.hw,
                &mut IdentityDim,
                &mut self.os.mem,
                &gpt,
                va,
                access,
                tag,
                &mut cycles,
                &mut self.log,
            ),
        };
        self.log.clear();
        self.counters.cycles.translation += cycles;
        out
    }

    /// A store through a TLB entry whose dirty bit is clear: the processor sets the leaf's D
    /// bit (an A/D update, Intel SDM Vol. 3A §4.8) and the entry becomes dirty.
    fn dirty_update(&mut self, pid: u32, va: Gva, side: TlbSide, tag: Tag) {
        self.counters.dirty_updates += 1;
        let gpt = self.os.process(pid).expect("live").pt;
        if let Some((ea, level, _)) = gpt.leaf(&self.os.mem, va.raw()) {
            gpt.set_bits(
                &mut self.os.mem,
                ea,
                level,
                crate::paging::Pte::D,
                &mut self.log,
            );
            self.log.clear();
            let ea_hpa = match (&self.vmm, self.paging) {
                (Some(v), Paging::Nested | Paging::Shadow) => {
                    v.translate(Gpa(ea)).map_or(Hpa(ea), |(h, _)| h)
                }
                _ => Gpa(ea).identity_hpa(),
            };
            self.counters.cycles.translation += self.hw.ad_update(ea_hpa);
        }
        self.tlb.set_dirty(va, side, tag);
    }

    /// Charges one hypervisor operation; a world switch without VPIDs flushes the TLB and
    /// the page-walk caches.
    fn hyp(&mut self, reason: ExitReason, handler: u64) {
        let round_trip = match reason {
            ExitReason::Hypercall | ExitReason::FaultBounce | ExitReason::InPlaceCall => 0,
            _ => self.costs.exit_round_trip,
        };
        let cycles = round_trip + handler;
        self.exits.record(reason, cycles);
        self.counters.cycles.hypervisor += cycles;
        if reason.is_world_switch() && self.vpid == 0 && self.paging != Paging::Native {
            self.tlb.flush_all();
            self.hw.pwc.flush();
            self.hw.psc_guest.flush();
            self.hw.psc_nested.flush();
        }
    }

    fn fault(&mut self, r: &MemRef, idx: u64, f: WalkFault, faults: &mut u32) -> Result<()> {
        *faults += 1;
        if *faults > 6 {
            return Err(Error::Check {
                event: idx,
                detail: format!("fault {f:?} at {} not resolved after 6 tries", r.va),
            });
        }
        let write = r.kind.is_write();
        match (self.paging, f) {
            (Paging::Nested, WalkFault::Nested { gpa })
                if self.cfg.hypervisor.backing == Backing::Lazy =>
            {
                let v = self.vmm.as_mut().expect("vmm in nested mode");
                v.back(Gpa(gpa.raw() & !0xfff), crate::addr::PageSize::Size4K)?;
                self.hyp(ExitReason::NestedFault, self.costs.nested_fault);
                Ok(())
            }
            (_, WalkFault::Nested { gpa }) => Err(Error::Check {
                event: idx,
                detail: format!(
                    "nested fault at {gpa} for {}: guest memory is pre-backed, so every \
                     allocated guest frame must have a nested mapping",
                    r.va
                ),
            }),
            (Paging::Shadow, _) => {
                let pid = self
                    .os
                    .current_pid()
                    .expect("a reference runs in a process");
                let gpt = self.os.process(pid).expect("live").pt;
                let sp = self.shadow.as_mut().expect("shadow pager");
                let vmm = self.vmm.as_mut().expect("vmm");
                let kind =
                    sp.hidden_fault(&mut self.os.mem, &gpt, vmm, r.va, write, r.kind.is_fetch())?;
                match kind {
                    FaultKind::Filled { built } => {
                        let h = self.costs.hidden_fault + built as u64 * self.costs.make_shadow;
                        self.hyp(ExitReason::HiddenFault, h);
                        Ok(())
                    }
                    FaultKind::Guest => {
                        self.hyp(ExitReason::GuestFault, self.costs.reflect_fault);
                        self.guest_fault(r, idx)
                    }
                }
            }
            (Paging::Direct(_), _) => {
                self.hyp(ExitReason::FaultBounce, self.costs.pv_fault_bounce);
                self.guest_fault(r, idx)
            }
            (Paging::Native | Paging::Nested, _) => self.guest_fault(r, idx),
        }
    }

    /// The guest kernel handles a page fault (demand paging, copy-on-write).
    fn guest_fault(&mut self, r: &MemRef, idx: u64) -> Result<()> {
        let ev = Event::Ref(*r);
        let cow_before = self.os.stats.cow_faults;
        let mut fx = std::mem::take(&mut self.fx);
        fx.clear();
        let res = self.os.fault(r.va, r.kind.is_write(), &mut fx);
        self.counters.cycles.guest_kernel += if self.os.stats.cow_faults > cow_before {
            self.gcost.cow_fault
        } else {
            self.gcost.page_fault
        };
        let res = res
            .map_err(|e| os_err(e, idx, &ev))
            .and_then(|_| self.apply(&mut fx));
        self.fx = fx;
        res
    }

    fn os_event(&mut self, e: &Event, idx: u64) -> Result<()> {
        let mut fx = std::mem::take(&mut self.fx);
        fx.clear();
        let os = &mut self.os;
        let r = match *e {
            Event::Mmap {
                start,
                len,
                prot,
                flags,
            } => os
                .ensure_implicit_process(&mut fx)
                .and_then(|_| os.mmap(start, len, prot, flags, &mut fx)),
            Event::Brk { end } => os
                .ensure_implicit_process(&mut fx)
                .and_then(|_| os.brk(end, &mut fx)),
            Event::ProcessCreate { pid } => os.create(pid, &mut fx),
            Event::Fork { parent, child } => match os.current_pid() {
                Some(cur) if cur != parent => Err(OsError::Impossible(format!(
                    "fork by process {parent}, but process {cur} is running"
                ))),
                _ => os.fork(parent, child, &mut fx),
            },
            Event::Exec { pid } => os.exec(pid, &mut fx),
            Event::Exit { pid } => os.exit(pid, &mut fx),
            Event::Switch { pid } => os.switch(pid, &mut fx),
            Event::Munmap { start, len } => os.munmap(start, len, &mut fx),
            Event::Mprotect { start, len, prot } => os.mprotect(start, len, prot, &mut fx),
            Event::Mremap {
                old,
                old_len,
                new,
                new_len,
            } => os.mremap(old, old_len, new, new_len, &mut fx),
            Event::Phase { .. } => Ok(()),
            Event::Ref(_) | Event::Compute { .. } => unreachable!("handled by step"),
        };
        let res = r
            .map_err(|err| os_err(err, idx, e))
            .and_then(|_| self.apply(&mut fx));
        self.counters.cycles.guest_kernel += self.kernel_cost(e, &fx);
        self.fx = fx;
        res
    }

    /// The guest kernel's cycles for an OS event (docs/model.md, "Guest kernel costs").
    fn kernel_cost(&self, e: &Event, fx: &OsEffects) -> u64 {
        let c = &self.gcost;
        let pages = (fx.writes.len() + fx.invalidate.len()) as u64;
        match e {
            Event::ProcessCreate { .. } => c.fork,
            Event::Fork { .. } => c.fork + c.fork_per_pte * fx.writes.len() as u64,
            Event::Exec { .. } => c.exec,
            Event::Exit { .. } => c.exit + c.per_page * fx.freed_tables.len() as u64 * 8,
            Event::Switch { .. } => c.context_switch,
            Event::Mmap { .. }
            | Event::Munmap { .. }
            | Event::Mprotect { .. }
            | Event::Mremap { .. }
            | Event::Brk { .. } => c.syscall + c.per_page * pages,
            Event::Phase { .. } | Event::Ref(_) | Event::Compute { .. } => 0,
        }
    }

    /// Hands an OS action's effects to the hypervisor and the hardware.
    fn apply(&mut self, fx: &mut OsEffects) -> Result<()> {
        if let Some(v) = &mut self.vmm {
            let lazy =
                self.paging == Paging::Nested && self.cfg.hypervisor.backing == Backing::Lazy;
            if !lazy {
                for &(gpa, size) in &fx.new_frames {
                    v.back(gpa, size)?;
                }
            }
        }
        // Page-table writes reach the hypervisor according to the technique.
        match self.paging {
            Paging::Shadow => {
                for w in &fx.writes {
                    let sp = self.shadow.as_mut().expect("shadow pager");
                    let vmm = self.vmm.as_mut().expect("vmm");
                    if let WriteKind::Emulated { unshadowed } = sp.guest_write(vmm, w) {
                        let mut h = self.costs.emulate_write;
                        if unshadowed {
                            h += self.costs.unshadow;
                        }
                        self.hyp(ExitReason::PtWrite, h);
                    }
                }
                for &t in &fx.freed_tables {
                    let sp = self.shadow.as_mut().expect("shadow pager");
                    sp.table_freed(self.vmm.as_mut().expect("vmm"), t.raw() >> 12);
                }
            }
            Paging::Direct(t) => {
                let n = fx.writes.len() as u64;
                let invl = fx.invalidate.len() as u64;
                if t == Technique::Previrt {
                    for _ in 0..(n + invl) {
                        self.hyp(ExitReason::InPlaceCall, self.costs.previrt_call);
                    }
                }
                if n + invl > 0 {
                    let per = match t {
                        Technique::Previrt => self.costs.previrt_update,
                        _ => self.costs.pv_update,
                    };
                    self.hyp(ExitReason::Hypercall, self.costs.hypercall + n * per);
                }
            }
            Paging::Native | Paging::Nested => {}
        }
        let pcid = self.cfg.machine.tlb.pcid;
        for &(pid, va) in &fx.invalidate {
            self.counters.invlpgs += 1;
            let tag = self.tag(pid);
            if self.paging == Paging::Shadow {
                let gpt = self.os.process(pid).map(|p| p.pt);
                let mut resynced = 0;
                if let (Some(gpt), Some(sp)) = (gpt, self.shadow.as_mut()) {
                    let vmm = self.vmm.as_mut().expect("vmm");
                    resynced = sp.invlpg(&self.os.mem, &gpt, vmm, va);
                }
                let h = self.costs.invlpg + resynced as u64 * self.costs.resync_page;
                self.hyp(ExitReason::Invlpg, h);
            }
            self.tlb.invalidate_page(va, tag);
            // INVLPG also drops paging-structure-cache entries (Intel SDM Vol. 3A §4.10.4.1).
            self.hw.psc_guest.flush_tag(tag.raw());
        }
        for &pid in &fx.flush_pids {
            if self.paging == Paging::Shadow && self.os.process(pid).is_some() {
                // A full flush is a CR3 reload: it exits, and out-of-sync pages are resynced,
                // so no stale shadow entry survives it.
                let sp = self.shadow.as_mut().expect("shadow pager");
                let vmm = self.vmm.as_mut().expect("vmm");
                let resynced = sp.resync_all(&self.os.mem, vmm);
                let h = self.costs.cr3_write + resynced as u64 * self.costs.resync_page;
                self.hyp(ExitReason::Cr3Write, h);
            }
            self.flush_context(pid);
        }
        if let Some(pid) = fx.cr3_switch {
            self.counters.cr3_writes += 1;
            self.cr3_write(pid)?;
            if !pcid {
                self.flush_context(pid);
            }
        }
        Ok(())
    }

    /// Flushes `pid`'s non-global translations: its PCID's TLB entries (or, without PCIDs, the
    /// VM's non-global entries), its paging-structure-cache entries, and the PWC when the
    /// machine flushes it with the TLB (seed 002 Table 2).
    fn flush_context(&mut self, pid: u32) {
        self.counters.tlb_flushes += 1;
        let tag = self.tag(pid);
        if self.cfg.machine.tlb.pcid {
            self.tlb.flush_tag(tag);
        } else {
            self.tlb.flush_nonglobal(self.vpid);
        }
        self.hw.psc_guest.flush_tag(tag.raw());
        if self.cfg.machine.pwc.flush_on_tlb_flush {
            self.hw.pwc.flush();
        }
    }

    /// A guest CR3 write reaching the hypervisor, by technique.
    fn cr3_write(&mut self, pid: u32) -> Result<()> {
        match self.paging {
            Paging::Shadow => {
                let root = self
                    .os
                    .process(pid)
                    .expect("switched-to process is live")
                    .pt
                    .root;
                let sp = self.shadow.as_mut().expect("shadow pager");
                let vmm = self.vmm.as_mut().expect("vmm");
                let (built, resynced) = sp.switch_root(&self.os.mem, vmm, root)?;
                let h = self.costs.cr3_write
                    + built as u64 * self.costs.make_shadow
                    + resynced as u64 * self.costs.resync_page;
                self.hyp(ExitReason::Cr3Write, h);
            }
            Paging::Direct(Technique::Previrt) => {
                self.hyp(ExitReason::InPlaceCall, self.costs.previrt_call);
                self.hyp(ExitReason::Hypercall, self.costs.hypercall);
            }
            Paging::Direct(_) => self.hyp(ExitReason::Hypercall, self.costs.hypercall),
            Paging::Native | Paging::Nested => {}
        }
        Ok(())
    }

    /// DESIGN.md law 3: the translation used equals the composition of the guest mapping and
    /// the guest-physical → host-physical mapping at this instant.
    fn check(&mut self, pid: u32, va: Gva, hpa: Hpa, idx: u64) -> Result<()> {
        self.counters.checked += 1;
        let Some((gpa, _, _)) = self.os.translate(pid, va) else {
            return Err(Error::Check {
                event: idx,
                detail: format!("{va} translated to {hpa} but the guest tables do not map it"),
            });
        };
        let expect = match (&self.vmm, self.paging) {
            (Some(v), Paging::Nested | Paging::Shadow) => v.translate(gpa).map(|(h, _)| h),
            _ => Some(gpa.identity_hpa()),
        };
        if expect != Some(hpa) {
            return Err(Error::Check {
                event: idx,
                detail: format!(
                    "{va}: the MMU gave {hpa}, the mappings give {gpa} -> {:?} (process {pid})",
                    expect
                ),
            });
        }
        Ok(())
    }
}

/// Runs `source` under `cfg` to the end and returns the result as a JSON value
/// (schema `vmmu.result/1`, see docs/statistics.md). `progress` is called about every million
/// events; returning `false` stops the run with [`Error::Interrupted`].
pub fn run(
    cfg: &SimConfig,
    source: &mut dyn EventSource,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<serde_json::Value> {
    let start = std::time::Instant::now();
    let mut sim = Simulator::new(cfg)?;
    sim.run(source, progress)?;
    let secs = start.elapsed().as_secs_f64();
    Ok(crate::stats::result_json(&sim, &source.describe(), secs))
}
