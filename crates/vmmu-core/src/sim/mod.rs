//! The simulator: the event loop (DESIGN.md "Architecture"). Each event goes to the guest OS,
//! whose effects go to the hypervisor, which drives the MMU; the counters are read into a
//! [`crate::result::RunResult`] afterwards. The loop only delivers events — it never asks which paging mode is active:
//! the mode lives in [`Vmm`], the hardware in [`Mmu`], the guest kernel in [`GuestOs`]. The
//! loop over a source's batches is the run driver's (`crate::run`).
//!
//! `cycles = instructions × base_CPI + translation + data + guest_kernel + hypervisor +
//! mode_switch` (docs/statistics.md). Under the additive core model `translation` and `data`
//! are the MMU's latency sums; under the interval model they are what the core's window
//! ([`crate::timing`]) exposes of them: the loop hands it each reference's latencies, as the
//! MMU returns them, and drains it before every operation that cannot overlap (a fault, an
//! OS event, a mode switch). The loop streams events in batches and allocates nothing per
//! reference; a mode switch or the end of the warm-up happens between two events, at the
//! first boundary at or after its point.

mod adaptive;
mod boundary;
mod check;
mod outcome;
mod smp;

pub use outcome::Outcome;
pub(crate) use smp::Vcpus;

use crate::config::SimConfig;
use crate::error::{Error, Result};
use crate::event::{Event, MemRef};
use crate::guest::{GuestOs, OsEffects, OsError};
use crate::hw::tlb::{Tag, TlbHierarchy};
use crate::hw::HitMiss;
use crate::mmu::{Lookup, Mmu};
use crate::paging::Geometry;
use crate::result::{
    Counters, Counts, CyclesByCause, RunResult, Shape, ShootdownCounts, VcpuCounts, Warmup,
    WindowRecord,
};
use crate::timing::{Core, RefCost};
use crate::vmm::{Fault, LockHolds, Resolution, VcpuRoot, Vmm};
use crate::walk::{Access, WalkFault};
use adaptive::Adaptive;

/// Faults one access may take before the run stops as stuck (a demand fault under shadow
/// paging takes two; a copy-on-write store through a clean entry, three; under EPT on EPT
/// each L2 page the walk meets first takes two — L1's EPT violation, then L0's EPT02 fill —
/// and a walk can meet five, its four tables and the data page, after the guest's own fault).
const MAX_FAULTS: u32 = 16;

/// One simulation: the guest, its hypervisor, the MMU and the counters.
pub struct Simulator {
    /// The configuration (validated).
    cfg: SimConfig,
    /// The guest kernel and its memory.
    os: GuestOs,
    /// The hypervisor, owner of the paging mode.
    vmm: Vmm,
    /// The MMU hardware.
    mmu: Mmu,
    /// The core's timing (the running vCPU's).
    core: Core,
    /// The source tracks its references' dependences ([`EventSource::tracks_dependences`]).
    dependences: bool,
    /// Counters.
    counters: Counters,
    /// What the warm-up left out (zero while it lasts, or without one).
    warmed: Warmup,
    /// Per-vCPU counters of a multi-vCPU run (empty with one vCPU).
    vcpus: Vec<VcpuCounts>,
    /// TLB shootdowns of a multi-vCPU run.
    shootdowns: ShootdownCounts,
    fx: OsEffects,
    /// What the current step did beyond its vCPU, gathered as it happens.
    happened: Outcome,
    geo: Geometry,
    /// The current address space's TLB tag.
    tag: Tag,
    /// Mode switches still to come, as total instruction counts (warm-up included).
    switches: Vec<u64>,
    /// The warm-up is still running.
    warming: bool,
    /// The run reached its stop (`stop.phase`): no further event is simulated.
    stopped: bool,
    /// The next boundary, in total instructions and in total references.
    next_instr: u64,
    next_refs: u64,
    /// The paging-exit count at which the policy wants to be woken (`u64::MAX`: never).
    next_exits: u64,
    /// The paging-mode policy of an adaptive run, its windows and timeline.
    adaptive: Option<Box<Adaptive>>,
    /// The windows at whose ends the run loop calls its observer ([`Simulator::observe_windows`]).
    observed: Option<Observed>,
}

/// Windows observed from outside the simulation (the oracle's), in counted instructions.
#[derive(Clone, Copy, Debug)]
struct Observed {
    /// Instructions per window.
    window: u64,
    /// Where the current window ends.
    next: u64,
}

fn os_err(e: OsError, event: u64, what: &Event) -> Error {
    guest_err(e, event, format!("{what:?}"))
}

/// A guest kernel error at event `event`, while doing `what`.
fn guest_err(e: OsError, event: u64, what: String) -> Error {
    match e {
        OsError::OutOfMemory => Error::OutOfMemory {
            space: "guest physical",
            reason: format!("at event {event} ({what}): raise guest.memory"),
        },
        OsError::Segv(reason) | OsError::Impossible(reason) => Error::Event {
            event,
            what,
            reason,
        },
    }
}

impl Simulator {
    /// Builds a simulator for `cfg` (validated again here).
    pub fn new(cfg: &SimConfig) -> Result<Self> {
        cfg.validate()?;
        let mut mmu = Mmu::new(&cfg.machine, Vmm::vpid(cfg));
        if let Some(z) = &cfg.sizing {
            mmu.tlb = TlbHierarchy::with_probes(&cfg.machine.tlb, z.array, &z.sizes);
        }
        let mut switches = cfg.hypervisor.switch.at.clone();
        switches.reverse();
        let mut sim = Simulator {
            os: GuestOs::new(&cfg.guest, &cfg.machine.core, &cfg.machine.kernel, cfg.seed),
            vmm: Vmm::new(cfg)?,
            tag: mmu.tag(0),
            core: Core::new(&cfg.machine.core, mmu.l1_latency()),
            dependences: false,
            mmu,
            counters: Counters::default(),
            warmed: Warmup::default(),
            vcpus: Vec::new(),
            shootdowns: ShootdownCounts::default(),
            fx: OsEffects::default(),
            happened: Outcome::default(),
            geo: Geometry::of(cfg.guest.format),
            switches,
            warming: cfg.warmup.is_set(),
            stopped: false,
            next_instr: 0,
            next_refs: u64::MAX,
            next_exits: u64::MAX,
            adaptive: None,
            observed: None,
            cfg: cfg.clone(),
        };
        sim.adaptive = Adaptive::of(&sim);
        sim.plan();
        Ok(sim)
    }

    /// Whether the references' [`MemRef::dep`] are known (a source's
    /// [`EventSource::tracks_dependences`]; the run driver sets it): unknown, the interval
    /// core model treats every reference as independent.
    pub fn set_dependences(&mut self, known: bool) {
        self.dependences = known;
        self.core.set_dependences(known);
    }

    /// Ends the run after the last event: the core's window drains, a warm-up must have
    /// ended and a stop been reached, the last window joins the timeline, the hypervisor
    /// closes its books.
    pub fn finish(&mut self) -> Result<()> {
        self.core.drain();
        self.check_warmup_ended()?;
        self.check_stopped()?;
        self.close_timeline();
        self.vmm.finish(self.counters.instructions);
        Ok(())
    }

    /// Whether the warm-up is still running (nothing is counted yet).
    pub fn warming(&self) -> bool {
        self.warming
    }

    /// The timeline of an adaptive run's windows (`None` without a run-time policy).
    pub fn timeline(&self) -> Option<&[WindowRecord]> {
        self.adaptive.as_ref().map(|a| a.timeline())
    }

    /// Cycles by cause so far (docs/statistics.md).
    pub fn cycles_by_cause(&self) -> CyclesByCause {
        CyclesByCause::of(
            self.cfg.machine.core.base_cpi,
            &self.counters,
            &self.mmu.stats,
            self.core.stalls().as_ref(),
            &self.os.stats,
            self.vmm.exits(),
            self.shootdowns.wait_cycles,
            self.vmm.pager_lock().wait_cycles,
        )
    }

    /// The configuration (validated).
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// The guest kernel and its memory.
    pub fn os(&self) -> &GuestOs {
        &self.os
    }

    /// The guest kernel and its memory, to change by hand (tools that set up a model's
    /// state, such as the bench's floor models, which clear accessed bits).
    pub fn os_mut(&mut self) -> &mut GuestOs {
        &mut self.os
    }

    /// The hypervisor.
    pub fn vmm(&self) -> &Vmm {
        &self.vmm
    }

    /// The running vCPU's MMU.
    pub fn mmu(&self) -> &Mmu {
        &self.mmu
    }

    /// The event loop's counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Events simulated so far, warm-up included.
    pub fn events(&self) -> u64 {
        self.counters.events + self.warmed.events
    }

    /// Whether the run has reached its stop (`stop.phase`): nothing more is simulated.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Every counter a result reports, copied now.
    pub(crate) fn counts(&self) -> Counts {
        let m = &self.mmu;
        let vmm = &self.vmm;
        let (pg, pn) = (m.hw.psc_guest.stats(), m.hw.psc_nested.stats());
        Counts {
            counters: self.counters,
            warmed: self.warmed,
            walk: m.hw.stats,
            mmu: m.stats,
            core: self.core.stalls(),
            tlb: m.tlb.counts(),
            caches: m.hw.caches.counts(),
            pwc: m.hw.pwc.stats(),
            ntlb: m.hw.ntlb.stats(),
            psc: HitMiss {
                hits: pg.hits + pn.hits,
                misses: pg.misses + pn.misses,
            },
            exits: *vmm.exits(),
            shadow: vmm.shadow_stats(),
            agile: vmm.agile_stats(),
            mode_switches: vmm.stats.mode_switches,
            in_mode: vmm.instructions_in_mode(self.counters.instructions),
            os: self.os.stats,
            host: vmm.host().stats,
            shootdowns: self.shootdowns,
            pager_lock: vmm.pager_lock(),
        }
    }

    /// What a result reads of the simulation besides its counters.
    pub fn shape(&self) -> Shape<'_> {
        Shape {
            cfg: &self.cfg,
            mmu: &self.mmu,
            dependences: self.dependences,
            nested_tables: self.vmm.describe().nested_tables,
            vcpus: &self.vcpus,
            timeline: self.timeline(),
        }
    }

    /// The result of the finished simulation of `workload`, which took `seconds`.
    pub fn result(&self, workload: &str, seconds: f64) -> RunResult {
        RunResult::of(&self.counts(), &self.shape(), workload, seconds)
    }

    /// Marks the end of every window of `window` counted instructions as a boundary, for
    /// [`step_batch`](Self::step_batch): the windows end where an adaptive run's PMU
    /// windows end, at the first event boundary at or after each multiple (the first window
    /// starts when counting starts).
    pub fn observe_windows(&mut self, window: u64) {
        self.observed = Some(Observed { window, next: 0 });
        self.plan();
    }

    /// Calls `observe` when a window of [`observe_windows`](Self::observe_windows) has
    /// ended, and plans the next boundary.
    fn observe_due(&mut self, observe: &mut dyn FnMut(&Simulator)) {
        let instr = self.counters.instructions;
        let Some(o) = self.observed else {
            return;
        };
        if !self.warming && instr >= o.next {
            observe(self);
            self.observed = Some(Observed {
                next: (instr / o.window + 1) * o.window,
                ..o
            });
            self.plan();
        }
    }

    /// Whether a boundary (warm-up end, mode switch, policy wake-up) is due before the next
    /// event.
    #[inline(always)]
    fn boundary_due(&self) -> bool {
        self.warmed.instructions + self.counters.instructions >= self.next_instr
            || self.warmed.refs + self.counters.memory_refs + self.counters.fetches
                >= self.next_refs
            || self.vmm.paging_exits() >= self.next_exits
    }

    /// Simulates `events` in order: runs of references the TLBs answer from their remembered
    /// hits in [`remembered_hits`](Self::remembered_hits), every other event one at a time
    /// after the boundary due before it, calling `observe` at the boundaries that end an
    /// observed window ([`observe_windows`](Self::observe_windows); none without it: the
    /// first call, once counting has started, observes the start). The observations are
    /// boundaries like the others, so the events between them are simulated alike. Once the
    /// run has stopped (`stop.phase`) it simulates nothing more.
    #[inline(always)]
    pub fn step_batch(
        &mut self,
        events: &[Event],
        observe: &mut dyn FnMut(&Simulator),
    ) -> Result<()> {
        let mut i = 0;
        let timed = self.core.is_interval();
        while i < events.len() && !self.stopped {
            i += if timed {
                self.remembered_hits::<true>(&events[i..])
            } else {
                self.remembered_hits::<false>(&events[i..])
            };
            let Some(e) = events.get(i) else { break };
            let idx = self.warmed.events + self.counters.events;
            if self.boundary_due() {
                self.boundary()?;
                self.observe_due(observe);
            }
            self.simulate(e, idx)?;
            i += 1;
        }
        Ok(())
    }

    /// Simulates the references at the start of `events` that [`Mmu::lookup`] answers with a
    /// hit from the TLBs' remembered L1 hits, and returns how many: the same counts, TLB and
    /// cache updates in the same order as [`step`](Self::step) makes for each, kept in locals
    /// and added once. It stops before any other event (or a reference the remembered hits do
    /// not answer), and after the reference at which a boundary becomes due, so that `step`
    /// takes it; it takes nothing in the checked mode, before the first process exists, or
    /// where a boundary is already due. Such a run changes no TLB state, so the remembered
    /// hits hold throughout. Its addresses are canonical: a remembered page was looked up by
    /// [`reference`](Self::reference), after its canonical check, and canonicity depends on
    /// bits above the page offset only. `TIMED`: the interval core model times each
    /// reference (the additive model needs nothing per reference beyond the MMU's sums).
    #[inline(always)]
    fn remembered_hits<const TIMED: bool>(&mut self, events: &[Event]) -> usize {
        // The cheapest test first: on a stream of TLB misses, the first reference's page is
        // not the remembered one.
        let Some(Event::Ref(first)) = events.first() else {
            return 0;
        };
        let access = Access::of(first.kind);
        if !self.mmu.may_remember(first.va, access, self.tag)
            || self.cfg.check
            || self.os.current_pid().is_none()
            || self.boundary_due()
        {
            return 0;
        }
        let c = &self.counters;
        // Not due: both are positive.
        let instr_room = self.next_instr - (self.warmed.instructions + c.instructions);
        let refs_room = self.next_refs - (self.warmed.refs + c.memory_refs + c.fetches);
        let mut hits = self.mmu.remembered(self.tag);
        let (mut n, mut instrs, mut fetches) = (0u64, 0u64, 0u64);
        let events = &events[..events.len().min(refs_room.try_into().unwrap_or(usize::MAX))];
        for e in events {
            let Event::Ref(r) = e else { break };
            let access = Access::of(r.kind);
            let Some(hpa) = hits.translate(r.va, access) else {
                break;
            };
            n += 1;
            instrs += r.instrs as u64;
            fetches += access.fetch as u64;
            let data = if access.fetch {
                0
            } else {
                self.mmu.data_remembered(&mut hits, hpa)
            };
            if TIMED {
                self.core.hit(r.instrs, r.kind, r.dep, data);
            }
            if instrs >= instr_room {
                break;
            }
        }
        self.mmu.count_remembered(&hits, n - fetches, fetches);
        let c = &mut self.counters;
        c.events += n;
        c.instructions += instrs;
        c.fetches += fetches;
        c.memory_refs += n - fetches;
        n as usize
    }

    /// Simulates one event (after the boundary due before it) and returns what it did beyond
    /// its vCPU.
    pub fn step(&mut self, e: &Event) -> Result<Outcome> {
        let before = self.step_boundary()?;
        let idx = self.events();
        Ok(before.then(self.step_event(e, idx)?))
    }

    /// Begins a step: takes the boundary due before the next event, if one is, and returns
    /// what it did (the guest kernel's background work is a boundary's, so its invalidations
    /// can be shot down before the event's own).
    pub(crate) fn step_boundary(&mut self) -> Result<Outcome> {
        self.happened = Outcome::default();
        self.vmm.begin_event();
        if self.boundary_due() {
            self.boundary()?;
            self.happened.boundary = true;
        }
        Ok(std::mem::take(&mut self.happened))
    }

    /// Ends a step begun by [`step_boundary`](Self::step_boundary): simulates event `e`, the
    /// `idx`-th of its stream, and returns what it did, the shadow pager's lock holds of the
    /// whole step included.
    pub(crate) fn step_event(&mut self, e: &Event, idx: u64) -> Result<Outcome> {
        self.step_at(e, idx)?;
        let mut o = std::mem::take(&mut self.happened);
        o.remote_flush = self.vmm.take_remote_flush();
        o.pager_lock = self.vmm.take_lock_holds();
        Ok(o)
    }

    /// The guest scheduler switches the running vCPU to thread `tid` of process `pid` (its
    /// first event is the `idx`-th of the stream); returns what the switch did.
    pub(crate) fn context_switch(&mut self, pid: u32, tid: u32, idx: u64) -> Result<Outcome> {
        self.happened = Outcome::default();
        self.os_event(&Event::Thread { pid, tid }, idx)?;
        Ok(std::mem::take(&mut self.happened))
    }

    /// What the guest kernel's last action asks the MMUs to invalidate.
    pub fn effects(&self) -> &OsEffects {
        &self.fx
    }

    // The multi-vCPU layer's interface (`smp`): it parks the vCPUs that do not run and
    // loads the next into the simulator, so the single-vCPU loop runs unchanged.

    /// A new vCPU's hardware: an MMU for the machine and a core timed like the running one
    /// (same L1 latency, same knowledge of dependences).
    pub(crate) fn new_vcpu_hardware(&self) -> (Mmu, Core) {
        let mmu = Mmu::new(&self.cfg.machine, Vmm::vpid(&self.cfg));
        let mut core = Core::new(&self.cfg.machine.core, self.mmu.l1_latency());
        core.set_dependences(self.dependences);
        (mmu, core)
    }

    /// The running vCPU's MMU and core are parked in `parked` (whose spare comes in), then
    /// swapped with `next`'s (which keeps the spare); the shared cache levels move from the
    /// parked MMU to the running one.
    #[inline]
    pub(crate) fn switch_vcpu(
        &mut self,
        parked: (&mut Mmu, &mut Core),
        next: (&mut Mmu, &mut Core),
    ) {
        std::mem::swap(&mut self.mmu, parked.0);
        std::mem::swap(&mut self.mmu, next.0);
        std::mem::swap(&mut self.core, parked.1);
        std::mem::swap(&mut self.core, next.1);
        self.mmu.swap_shared(parked.0);
    }

    /// The running vCPU's guest context runs thread `running` (process, thread), or none.
    #[inline]
    pub(crate) fn resume_guest(&mut self, running: Option<(u32, u32)>) {
        self.os.resume(running);
    }

    /// The vCPU just loaded resumes `running` (process, thread) or nothing: the guest
    /// context, the hypervisor's `root` (shadow paging) and the TLB tag follow. Returns the
    /// root the hypervisor loaded.
    #[inline]
    pub(crate) fn resume_vcpu(
        &mut self,
        running: Option<(u32, u32)>,
        root: Option<VcpuRoot>,
    ) -> Result<Option<VcpuRoot>> {
        self.resume_guest(running);
        let pid = running.map(|r| r.0);
        let root = self.vmm.resume(&mut self.mmu, &self.os, pid, root)?;
        self.tag = self.mmu.tag(self.os.pcid(pid.unwrap_or(0)));
        Ok(root)
    }

    /// Drains the running vCPU's core window; returns the cycles that took.
    #[inline]
    pub(crate) fn drain_core(&mut self) -> u64 {
        self.core.drain()
    }

    /// Takes the guest kernel's last effects out (to send them to other vCPUs); give them
    /// back with [`put_effects`](Self::put_effects).
    #[inline]
    pub(crate) fn take_effects(&mut self) -> OsEffects {
        std::mem::take(&mut self.fx)
    }

    /// Puts back the effects taken by [`take_effects`](Self::take_effects).
    #[inline]
    pub(crate) fn put_effects(&mut self, fx: OsEffects) {
        self.fx = fx;
    }

    /// Charges `cycles` of guest kernel work (an IPI sent or handled).
    #[inline]
    pub(crate) fn charge_kernel(&mut self, cycles: u64) {
        self.os.charge(cycles);
    }

    /// The hypervisor's part of a shootdown of `part` on the parked MMU `remote`; returns
    /// its cycles.
    #[inline]
    pub(crate) fn shootdown_remote(&mut self, remote: &mut Mmu, part: &OsEffects) -> u64 {
        self.vmm.shootdown(&mut self.mmu, remote, &self.os, part)
    }

    /// The parked MMU `remote` is forced out and flushed after shadow tables were removed;
    /// returns the cycles.
    #[inline]
    pub(crate) fn flush_remote(&mut self, remote: &mut Mmu) -> u64 {
        self.vmm.remote_flush(remote)
    }

    /// The shadow pager's lock was held as `held` by a step that started at `at` on its
    /// vCPU's clock.
    #[inline]
    pub(crate) fn wait_pager_lock(&mut self, held: LockHolds, at: u64) {
        self.vmm.pager_lock_wait(held, at);
    }

    /// The TLB shootdown counters, to count a shootdown.
    #[inline]
    pub(crate) fn shootdowns_mut(&mut self) -> &mut ShootdownCounts {
        &mut self.shootdowns
    }

    /// The warm-up ended: the counters shared by the vCPUs (shootdowns, the pager's lock)
    /// restart.
    pub(crate) fn restart_shared_counts(&mut self) {
        self.shootdowns = ShootdownCounts::default();
        self.vmm.restart_pager_lock();
    }

    /// Adds a parked vCPU's MMU and core counters to the running one's (the result's totals).
    pub(crate) fn absorb_vcpu(&mut self, mmu: &Mmu, core: &Core) {
        self.mmu.absorb_stats(mmu);
        self.core.absorb(core);
    }

    /// The per-vCPU counters of the result.
    pub(crate) fn set_vcpu_counts(&mut self, counts: Vec<VcpuCounts>) {
        self.vcpus = counts;
    }

    /// Simulates one event, the `idx`-th of its stream (for error messages).
    #[inline(always)]
    fn step_at(&mut self, e: &Event, idx: u64) -> Result<()> {
        if self.boundary_due() {
            self.boundary()?;
        }
        self.simulate(e, idx)
    }

    /// Simulates one event, the `idx`-th of its stream, once the boundaries due before it
    /// have been taken.
    #[inline(always)]
    fn simulate(&mut self, e: &Event, idx: u64) -> Result<()> {
        self.counters.events += 1;
        match e {
            Event::Ref(r) if self.core.is_interval() => self.reference::<true>(r, idx),
            Event::Ref(r) => self.reference::<false>(r, idx),
            Event::Compute { instrs } => {
                self.counters.instructions += instrs;
                self.core.compute(*instrs);
                Ok(())
            }
            Event::Phase { id } => {
                let res = self.os_event(e, idx);
                self.phase_marker(*id);
                res
            }
            other => self.os_event(other, idx),
        }
    }

    /// One reference: translated (faults handled on the way) and its data accessed. `TIMED`:
    /// the interval core model times it from the latencies the MMU returns; the additive
    /// model's sums are the MMU's own, so its path carries nothing more.
    #[inline(always)]
    fn reference<const TIMED: bool>(&mut self, r: &MemRef, idx: u64) -> Result<()> {
        let c = &mut self.counters;
        c.instructions += r.instrs as u64;
        let access = Access::of(r.kind);
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
        // What this attempt cost, and the instructions not yet dispatched (a retried access
        // is the same instruction).
        let mut cost = RefCost::default();
        let mut instrs = r.instrs;
        let hpa = loop {
            let (found, lookup) = self.mmu.lookup(r.va, access, tag);
            cost.lookup = lookup;
            let fault = match found {
                Lookup::Hit(hpa) => break hpa,
                Lookup::Denied => WalkFault::Protection,
                Lookup::Miss | Lookup::Clean => {
                    let pt = self.os.tables(pid).ok_or_else(|| Error::Check {
                        event: idx,
                        detail: format!("process {pid} runs but has no tables"),
                    })?;
                    let tables = self.vmm.tables(&mut self.os.mem, pt);
                    let (out, walk) = self.mmu.walk(r.va, access, tag, tables);
                    cost.walked = true;
                    cost.walk = walk;
                    match out {
                        Ok(hpa) => break hpa,
                        Err(f) => f,
                    }
                }
            };
            if TIMED {
                self.core.fault(instrs, r.dep, cost);
                (cost, instrs) = (RefCost::default(), 0);
            }
            // A page fault (or EPT violation) drops the TLB entries of the faulting address at
            // every level and on both sides, whether a TLB hit that denies the access or a
            // walk raised it (SDM Vol. 3A §4.10.4.1, §28.3.3.1).
            self.fault(pid, r, idx, access, fault, &mut faults)?;
            self.mmu.fault_invalidate(r.va, tag);
        };
        if self.cfg.check {
            self.check(pid, r, hpa, idx)?;
        }
        if !access.fetch {
            cost.data = self.mmu.data(hpa);
        }
        if TIMED {
            self.core.reference(instrs, r.kind, r.dep, cost);
        }
        Ok(())
    }

    /// A reference before any process exists: the guest creates pid 1.
    fn implicit_process(&mut self, r: &MemRef, idx: u64) -> Result<u32> {
        self.core.drain();
        let mut fx = std::mem::take(&mut self.fx);
        fx.clear();
        self.happened.invalidations = true;
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
            .fault(
                &mut self.mmu,
                &mut self.os,
                Fault {
                    pid,
                    va: r.va,
                    access,
                    cause: f,
                },
            )
            .map_err(|e| e.at(idx))?;
        match res {
            Resolution::Retry => Ok(()),
            Resolution::Guest => {
                let mut fx = std::mem::take(&mut self.fx);
                fx.clear();
                self.happened.invalidations = true;
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

    /// The guest kernel's background work due at the current instruction count (khugepaged),
    /// its effects handed to the hypervisor like an event's.
    fn background(&mut self) -> Result<()> {
        let now = self.warmed.instructions + self.counters.instructions;
        if now < self.os.next_background() {
            return Ok(());
        }
        self.core.drain();
        let mut fx = std::mem::take(&mut self.fx);
        fx.clear();
        self.happened.invalidations = true;
        let idx = self.warmed.events + self.counters.events;
        let res = self
            .os
            .background(now, &mut fx)
            .map_err(|err| guest_err(err, idx, "khugepaged".into()))
            .and_then(|_| {
                self.vmm
                    .effects(&mut self.mmu, &self.os, &fx)
                    .map_err(|err| err.at(idx))
            });
        self.fx = fx;
        res
    }

    /// An OS event: the guest kernel's work (and the hypervisor's, where the mode intercepts
    /// it) cannot overlap the instructions before it, so the core's window drains first; a
    /// phase marker is no instruction and drains nothing.
    fn os_event(&mut self, e: &Event, idx: u64) -> Result<()> {
        if !matches!(e, Event::Phase { .. }) {
            self.core.drain();
        }
        let mut fx = std::mem::take(&mut self.fx);
        fx.clear();
        self.happened.invalidations = true;
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
}
