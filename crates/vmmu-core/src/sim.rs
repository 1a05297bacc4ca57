//! The simulator: the event loop (DESIGN.md "Architecture"). Each event goes to the guest OS,
//! whose effects go to the hypervisor, which drives the MMU; counters end in a
//! [`RunResult`]. The loop only delivers events — it never asks which paging mode is active:
//! the mode lives in [`Vmm`], the hardware in [`Mmu`], the guest kernel in [`GuestOs`].
//!
//! `cycles = instructions × base_CPI + translation + data + guest_kernel + hypervisor +
//! mode_switch` (docs/statistics.md). The loop streams events in batches and allocates nothing
//! per reference; a mode switch or the end of the warm-up happens between two events, at the
//! first boundary at or after its point.

use crate::config::SimConfig;
use crate::error::{Error, Result};
use crate::event::{Event, EventSource, MemRef};
use crate::guest::{GuestOs, OsEffects, OsError};
use crate::hw::tlb::Tag;
use crate::mmu::{Lookup, Mmu};
use crate::paging::Geometry;
use crate::result::{RunResult, Warmup};
use crate::vmm::{Resolution, Vmm};
use crate::walk::{Access, WalkFault};

/// Progress of a running simulation, reported to the caller's callback.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Events simulated so far.
    pub events: u64,
    /// Total events if the source knows it.
    pub total: Option<u64>,
}

/// Counters kept by the event loop itself.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Events consumed (after the warm-up).
    pub events: u64,
    /// Instructions retired.
    pub instructions: u64,
    /// Data references (load, store, modify: one each).
    pub memory_refs: u64,
    /// Instruction fetches.
    pub fetches: u64,
    /// Translations verified by the checked mode.
    pub checked: u64,
}

const BATCH: usize = 65_536;
const PROGRESS_EVERY: u64 = 1 << 20;
/// Faults one access may take before the run stops as stuck (a demand fault under shadow
/// paging takes two; a copy-on-write store through a clean entry, three).
const MAX_FAULTS: u32 = 6;

/// One simulation: the guest, its hypervisor, the MMU and the counters.
pub struct Simulator {
    /// The configuration (validated).
    pub cfg: SimConfig,
    /// The guest kernel and its memory.
    pub os: GuestOs,
    /// The hypervisor, owner of the paging mode.
    pub vmm: Vmm,
    /// The MMU hardware.
    pub mmu: Mmu,
    /// Counters.
    pub counters: Counters,
    /// What the warm-up left out (zero while it lasts, or without one).
    pub warmed: Warmup,
    fx: OsEffects,
    geo: Geometry,
    /// The current address space's TLB tag.
    tag: Tag,
    /// Mode switches still to come, as total instruction counts (warm-up included).
    switches: Vec<u64>,
    /// The warm-up is still running.
    warming: bool,
    /// The next boundary, in total instructions and in total references.
    next_instr: u64,
    next_refs: u64,
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
        let mmu = Mmu::new(&cfg.machine, Vmm::vpid(cfg));
        let mut switches = cfg.hypervisor.switch.at.clone();
        switches.reverse();
        let mut sim = Simulator {
            os: GuestOs::new(&cfg.guest, &cfg.machine.kernel, cfg.seed),
            vmm: Vmm::new(cfg)?,
            tag: mmu.tag(0),
            mmu,
            counters: Counters::default(),
            warmed: Warmup::default(),
            fx: OsEffects::default(),
            geo: Geometry::of(cfg.guest.format),
            switches,
            warming: cfg.warmup.refs > 0 || cfg.warmup.instructions > 0,
            next_instr: 0,
            next_refs: u64::MAX,
            cfg: cfg.clone(),
        };
        sim.plan();
        Ok(sim)
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
            if source.next_batch(&mut buf, BATCH)? == 0 {
                break;
            }
            for e in &buf {
                self.step(e)?;
            }
            let done = self.counters.events + self.warmed.events;
            if done >= next_report {
                next_report = done + PROGRESS_EVERY;
                if !progress(&Progress {
                    events: done,
                    total,
                }) {
                    return Err(Error::Interrupted { events: done });
                }
            }
        }
        if self.warming {
            let w = self.cfg.warmup;
            let (n, unit, had) = if w.refs > 0 {
                (
                    w.refs,
                    "references",
                    self.counters.memory_refs + self.counters.fetches,
                )
            } else {
                (w.instructions, "instructions", self.counters.instructions)
            };
            return Err(Error::config(
                if w.refs > 0 {
                    "warmup.refs"
                } else {
                    "warmup.instructions"
                },
                format!(
                    "a warm-up of {n} {unit} is longer than the workload ({had} {unit}): \
                     nothing would be counted"
                ),
            ));
        }
        self.vmm.finish(self.counters.instructions);
        progress(&Progress {
            events: self.counters.events + self.warmed.events,
            total,
        });
        Ok(())
    }

    /// Simulates one event.
    #[inline]
    pub fn step(&mut self, e: &Event) -> Result<()> {
        if self.warmed.instructions + self.counters.instructions >= self.next_instr
            || self.warmed.refs + self.counters.memory_refs + self.counters.fetches
                >= self.next_refs
        {
            self.boundary()?;
        }
        let idx = self.warmed.events + self.counters.events;
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

    /// The next boundary: the end of the warm-up, or the next mode switch.
    fn plan(&mut self) {
        let w = self.cfg.warmup;
        let warm = |n: u64| if self.warming && n > 0 { n } else { u64::MAX };
        let switch = self.switches.last().copied().unwrap_or(u64::MAX);
        self.next_instr = warm(w.instructions).min(switch);
        self.next_refs = warm(w.refs);
    }

    /// Ends the warm-up and carries out the mode switches that are due.
    fn boundary(&mut self) -> Result<()> {
        let instr = self.warmed.instructions + self.counters.instructions;
        let refs = self.warmed.refs + self.counters.memory_refs + self.counters.fetches;
        let w = self.cfg.warmup;
        if self.warming
            && ((w.instructions > 0 && instr >= w.instructions) || (w.refs > 0 && refs >= w.refs))
        {
            self.end_warmup();
        }
        while self.switches.last().is_some_and(|&at| instr >= at) {
            self.switches.pop();
            self.vmm
                .switch_mode(&mut self.mmu, &self.os, self.counters.instructions)?;
        }
        self.plan();
        Ok(())
    }

    /// Restarts every counter; the model's state (tables, TLBs, caches, shadow cache) stays.
    fn end_warmup(&mut self) {
        self.warming = false;
        let c = &self.counters;
        self.warmed = Warmup {
            events: c.events,
            refs: c.memory_refs + c.fetches,
            instructions: c.instructions,
        };
        self.counters = Counters::default();
        self.mmu.reset_stats();
        self.os.reset_stats();
        self.vmm.reset_stats(0);
    }

    #[inline]
    fn reference(&mut self, r: &MemRef, idx: u64) -> Result<()> {
        let c = &mut self.counters;
        c.instructions += r.instrs as u64;
        let access = Access {
            write: r.kind.is_write(),
            fetch: r.kind.is_fetch(),
        };
        if access.fetch {
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
            None => self.implicit_process(r, idx)?,
        };
        let tag = self.tag;
        let mut faults = 0;
        let hpa = loop {
            match self.mmu.lookup(r.va, access, tag) {
                Lookup::Hit(hpa) => break hpa,
                Lookup::Denied => {
                    self.fault(pid, r, idx, access, WalkFault::Protection, &mut faults)?;
                    self.mmu.fault_invalidate(r.va, tag);
                }
                Lookup::Miss | Lookup::Clean => {
                    let pt = self.os.tables(pid).ok_or_else(|| Error::Check {
                        event: idx,
                        detail: format!("process {pid} runs but has no tables"),
                    })?;
                    let tables = self.vmm.tables(&mut self.os.mem, pt);
                    match self.mmu.walk(r.va, access, tag, tables) {
                        Ok(hpa) => break hpa,
                        Err(f) => self.fault(pid, r, idx, access, f, &mut faults)?,
                    }
                }
            }
        };
        if self.cfg.check {
            self.check(pid, r, hpa, idx)?;
        }
        if !access.fetch {
            self.mmu.data(hpa);
        }
        Ok(())
    }

    /// A reference before any process exists: the guest creates pid 1.
    fn implicit_process(&mut self, r: &MemRef, idx: u64) -> Result<u32> {
        let mut fx = std::mem::take(&mut self.fx);
        fx.clear();
        let res = self
            .os
            .ensure_implicit_process(&mut fx)
            .map_err(|e| os_err(e, idx, &Event::Ref(*r)))
            .and_then(|pid| {
                self.vmm
                    .effects(&mut self.mmu, &self.os, &fx)
                    .map_err(|e| e.at(idx))?;
                Ok(pid)
            });
        self.fx = fx;
        self.tag = self
            .mmu
            .tag(self.os.pcid(self.os.current_pid().unwrap_or(0)));
        res
    }

    /// A fault on the way to a translation: the hypervisor sees it first, the guest kernel
    /// handles what is the guest's.
    fn fault(
        &mut self,
        pid: u32,
        r: &MemRef,
        idx: u64,
        access: Access,
        f: WalkFault,
        faults: &mut u32,
    ) -> Result<()> {
        *faults += 1;
        if *faults > MAX_FAULTS {
            return Err(Error::Check {
                event: idx,
                detail: format!(
                    "fault {f:?} at {} not resolved after {MAX_FAULTS} tries",
                    r.va
                ),
            });
        }
        let res = self
            .vmm
            .fault(&mut self.mmu, &mut self.os, pid, r.va, access, f)
            .map_err(|e| e.at(idx))?;
        match res {
            Resolution::Retry => Ok(()),
            Resolution::Guest => {
                let mut fx = std::mem::take(&mut self.fx);
                fx.clear();
                let res = self
                    .os
                    .fault(r.va, access.write, access.fetch, &mut fx)
                    .map_err(|e| os_err(e, idx, &Event::Ref(*r)))
                    .and_then(|_| {
                        self.vmm
                            .effects(&mut self.mmu, &self.os, &fx)
                            .map_err(|e| e.at(idx))
                    });
                self.fx = fx;
                res
            }
        }
    }

    fn os_event(&mut self, e: &Event, idx: u64) -> Result<()> {
        let mut fx = std::mem::take(&mut self.fx);
        fx.clear();
        let res = self
            .os
            .event(e, &mut fx)
            .map_err(|err| os_err(err, idx, e))
            .and_then(|_| {
                self.vmm
                    .effects(&mut self.mmu, &self.os, &fx)
                    .map_err(|err| err.at(idx))
            });
        self.fx = fx;
        if let Some(pid) = self.os.current_pid() {
            self.tag = self.mmu.tag(self.os.pcid(pid));
        }
        res
    }

    /// DESIGN.md law 3: the translation used equals the composition of the guest mapping and
    /// the guest-physical → host-physical mapping at this instant.
    fn check(&mut self, pid: u32, r: &MemRef, hpa: crate::addr::Hpa, idx: u64) -> Result<()> {
        self.counters.checked += 1;
        let va = r.va;
        let Some((gpa, _, _)) = self.os.translate(pid, va) else {
            return Err(Error::Check {
                event: idx,
                detail: format!("{va} translated to {hpa} but the guest tables do not map it"),
            });
        };
        let expect = self.vmm.p2m(gpa);
        if expect != Some(hpa) {
            return Err(Error::Check {
                event: idx,
                detail: format!(
                    "{va}: the MMU gave {hpa}, the mappings give {gpa} -> {expect:?} (process \
                     {pid}, {} paging)",
                    self.vmm.mode().name()
                ),
            });
        }
        Ok(())
    }
}

/// Runs `source` under `cfg` to the end and returns the result (schema `vmmu.result/2`, see
/// docs/statistics.md). `progress` is called about every million events; returning `false`
/// stops the run with [`Error::Interrupted`].
pub fn run(
    cfg: &SimConfig,
    source: &mut dyn EventSource,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunResult> {
    let start = std::time::Instant::now();
    let mut sim = Simulator::new(cfg)?;
    sim.run(source, progress)?;
    let secs = start.elapsed().as_secs_f64();
    Ok(RunResult::of(&sim, &source.describe(), secs))
}
