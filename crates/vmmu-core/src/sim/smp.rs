//! A guest with several vCPUs (docs/model.md, "vCPUs"): each vCPU has its own MMU (TLBs,
//! walk caches, private cache levels) and clock, and the shared cache levels are shared; the
//! guest scheduler places threads on vCPUs; a change to a mapping that other vCPUs may cache
//! is a TLB shootdown.
//!
//! **Interleaving.** The event stream is one sequence (a trace records its threads one after
//! another, a generator writes `Switch` / `Thread` markers); it is split into one queue per
//! thread. The vCPU with the smallest clock runs next, for a quantum of simulated time, so the
//! run is deterministic (law 7). Different processes run independently; within a process,
//! references of different threads between two OS events may run in any order, but an OS
//! event (mmap, munmap, fork, exit, ...) is a barrier for the processes whose address space it
//! changes (a fork: parent and child): it runs after every earlier event of theirs in the
//! stream, and none of their later events runs before it — so a thread never touches memory
//! that, in the stream's order, was not yet (or no longer) mapped.
//!
//! **Scheduling.** A new thread goes to the vCPU with the fewest threads (the lowest index on
//! a tie). Each vCPU runs its queue round robin, a thread for at most `guest.time_slice`
//! cycles while others are runnable there; a vCPU with nothing runnable takes a runnable
//! thread from another vCPU's queue (a migration), else idles. The stream's own `Switch` and
//! `Thread` markers only say whose events follow; context switches are the scheduler's.
//!
//! **One home for the hardware.** The running vCPU's MMU is the simulator's `mmu`, so the
//! single-vCPU code runs unchanged; the others are parked here, and the shared cache levels
//! move to whichever MMU runs. Each vCPU's core timing (its out-of-order window under the
//! interval model) is parked with its MMU; an IPI or a forced exit drains a parked vCPU's
//! window, and the time that takes is added to its clock.

use super::Simulator;
use crate::addr::{Gpa, Hpa};
use crate::error::{Error, Result};
use crate::event::{Event, EventSource};
use crate::guest::OsEffects;
use crate::mmu::Mmu;
use crate::result::{ShootdownCounts, VcpuCounts};
use crate::timing::Core;
use crate::vmm::Vmm;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Events read ahead of the simulation at most (the stream is split into per-thread queues;
/// a thread that has no events within this window waits).
const LOOKAHEAD: usize = 1 << 20;
/// Events read from the source at a time into the threads' queues. The scheduler picks among
/// the events read so far, so this size is part of the schedule: it stays 64 Ki whatever batch
/// the single-vCPU loop reads.
const FILL: usize = 1 << 16;
/// Simulated time a vCPU runs before the scheduler looks for a vCPU that is behind it, in
/// cycles: the skew allowed between vCPU clocks.
const QUANTUM: u64 = 20_000;

/// One guest thread's part of the stream.
struct Thread {
    pid: u32,
    /// Events not yet simulated, with their position in the stream.
    queue: VecDeque<(u64, Event)>,
    /// The vCPU whose run queue holds it.
    vcpu: usize,
    /// Its process (and the thread) has been created.
    born: bool,
}

/// One vCPU's state while another runs.
struct Vcpu {
    /// Its MMU while parked; the simulator's while it runs (then this holds a spare).
    mmu: Mmu,
    /// Its core timing, parked and swapped like `mmu`.
    core: Core,
    clock: u64,
    /// Threads placed on it, in round-robin order.
    queue: VecDeque<u32>,
    /// The thread it runs (its guest context: process, CR3).
    current: Option<u32>,
    /// Its shadow root (shadow paging).
    root: Option<(Gpa, Hpa)>,
    /// Cycles the current thread has run in its slice.
    slice: u64,
    /// Processes whose PCID-tagged entries it may hold (it ran them since its last flush).
    lazy: BTreeSet<u32>,
    /// It had nothing to run when last asked.
    idle: bool,
    counts: VcpuCounts,
}

/// The vCPUs of a multi-vCPU run: the scheduler and the split stream. The run driver
/// (`crate::run`) advances it a turn at a time.
pub(crate) struct Vcpus {
    vcpus: Vec<Vcpu>,
    threads: BTreeMap<u32, Thread>,
    /// Stream positions of OS events read but not yet simulated, in stream order, by the
    /// process whose address space they change.
    pending_os: BTreeMap<u32, VecDeque<u64>>,
    /// Position of the next event read.
    seq: u64,
    /// The thread whose events the stream is giving now.
    stream_tid: Option<u32>,
    buffered: usize,
    ended: bool,
    running: usize,
    buf: Vec<Event>,
    /// The guest kernel acted since the last shootdown: its last action's invalidations are
    /// still to be sent.
    unsent: bool,
    /// Cycles charged on other vCPUs during the running vCPU's turn (not its time).
    moved: u64,
    /// Threads pinned to a vCPU (`guest.affinity`).
    pinned: BTreeMap<u32, usize>,
    pcid: bool,
}

/// Whether `e` changes the guest's state beyond the thread that issues it (runs in stream
/// order).
fn is_os(e: &Event) -> bool {
    !matches!(
        e,
        Event::Ref(_) | Event::Compute { .. } | Event::Phase { .. }
    )
}

/// The processes whose address space OS event `e`, issued by a thread of `owner`, changes
/// (a fork both the parent's and the child's; a creation the new process's).
fn os_pids(e: &Event, owner: u32) -> [Option<u32>; 2] {
    match *e {
        Event::Fork { parent, child } => [Some(parent), Some(child)],
        Event::ProcessCreate { pid }
        | Event::Exec { pid }
        | Event::Exit { pid }
        | Event::ThreadCreate { pid, .. }
        | Event::ThreadExit { pid, .. } => [Some(pid), None],
        _ => [Some(owner), None],
    }
}

impl Vcpus {
    /// The vCPUs of `sim`'s guest (`guest.vcpus`), none of them running a thread yet.
    pub(crate) fn new(sim: &Simulator) -> Vcpus {
        let n = sim.cfg.guest.vcpus as usize;
        let vpid = Vmm::vpid(&sim.cfg);
        let vcpus = (0..n)
            .map(|i| Vcpu {
                mmu: Mmu::new(&sim.cfg.machine, vpid),
                core: {
                    let mut core = Core::new(&sim.cfg.machine.core, sim.mmu.l1_latency());
                    core.set_dependences(sim.dependences);
                    core
                },
                clock: 0,
                queue: VecDeque::new(),
                current: None,
                root: None,
                slice: 0,
                lazy: BTreeSet::new(),
                idle: false,
                counts: VcpuCounts {
                    vcpu: i as u32,
                    ..VcpuCounts::default()
                },
            })
            .collect();
        Vcpus {
            vcpus,
            threads: BTreeMap::new(),
            pending_os: BTreeMap::new(),
            seq: 0,
            stream_tid: None,
            buffered: 0,
            ended: false,
            running: 0,
            buf: Vec::with_capacity(FILL),
            unsent: false,
            moved: 0,
            pinned: sim
                .cfg
                .guest
                .affinity
                .iter()
                .filter_map(|(t, &v)| Some((t.parse().ok()?, v as usize)))
                .collect(),
            pcid: sim.mmu.pcid(),
        }
    }

    /// Runs the next vCPU's turn (reading the stream further when no thread can run);
    /// `false` once every event has been simulated.
    pub(crate) fn advance(
        &mut self,
        sim: &mut Simulator,
        source: &mut dyn EventSource,
    ) -> Result<bool> {
        self.schedule(sim, source)
    }

    /// The run ended: the running vCPU's window drains at the end of its last turn, the
    /// simulation ends, and the per-vCPU counters are gathered ([`collect`](Self::collect)).
    pub(crate) fn finish(&mut self, sim: &mut Simulator) -> Result<()> {
        let drained = sim.core.drain();
        self.vcpus[self.running].clock += drained;
        sim.finish()?;
        self.collect(sim);
        Ok(())
    }

    /// Reads one batch of the stream into the threads' queues.
    fn fill(&mut self, source: &mut dyn EventSource) -> Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        if source.next_batch(&mut buf, FILL)? == 0 {
            self.ended = true;
        }
        for e in buf.drain(..) {
            self.demux(e)?;
        }
        self.buf = buf;
        Ok(())
    }

    /// Puts one stream event in its thread's queue.
    fn demux(&mut self, e: Event) -> Result<()> {
        let seq = self.seq;
        self.seq += 1;
        let fail = |reason: String| Error::Event {
            event: seq,
            what: format!("{e:?}"),
            reason,
        };
        match e {
            Event::Switch { pid } => {
                self.stream_tid = Some(pid);
                return self.exists(pid).map_err(fail);
            }
            Event::Thread { tid, .. } => {
                self.stream_tid = Some(tid);
                return self.exists(tid).map_err(fail);
            }
            _ => {}
        }
        let owner = match (self.stream_tid, &e) {
            (Some(t), _) => t,
            // The stream starts (or resumes after its running process ended) with a process
            // that creates itself, or with pid 1 created implicitly.
            (None, Event::ProcessCreate { pid }) => self.spawn(*pid, *pid),
            (None, _) if self.threads.is_empty() => self.spawn(1, 1),
            (None, _) => {
                return Err(fail(
                    "no process runs (the running one exited and no switch followed)".into(),
                ))
            }
        };
        self.stream_tid = Some(owner);
        match e {
            Event::ProcessCreate { pid } if pid != owner => {
                self.spawn(pid, pid);
            }
            Event::Fork { child, .. } => {
                self.spawn(child, child);
            }
            Event::ThreadCreate { pid, tid } => {
                self.spawn(pid, tid);
            }
            _ => {}
        }
        let owner_pid = self.threads[&owner].pid;
        match e {
            Event::Exit { pid } if pid == owner_pid => self.stream_tid = None,
            Event::ThreadExit { pid, tid } if tid == owner => self.stream_tid = Some(pid),
            _ => {}
        }
        if is_os(&e) {
            for pid in os_pids(&e, owner_pid).into_iter().flatten() {
                self.pending_os.entry(pid).or_default().push_back(seq);
            }
        }
        self.threads
            .get_mut(&owner)
            .expect("the owner was found or spawned above")
            .queue
            .push_back((seq, e));
        self.buffered += 1;
        Ok(())
    }

    fn exists(&self, tid: u32) -> std::result::Result<(), String> {
        if self.threads.contains_key(&tid) {
            Ok(())
        } else {
            Err(format!("thread {tid} was never created in the stream"))
        }
    }

    /// A new thread, placed on its pinned vCPU or the vCPU with the fewest live threads.
    fn spawn(&mut self, pid: u32, tid: u32) -> u32 {
        let v = self.pinned.get(&tid).copied().unwrap_or_else(|| {
            (0..self.vcpus.len())
                .min_by_key(|&v| (self.vcpus[v].queue.len(), v))
                .unwrap_or(0)
        });
        self.vcpus[v].queue.push_back(tid);
        self.threads.insert(
            tid,
            Thread {
                pid,
                queue: VecDeque::new(),
                vcpu: v,
                born: false,
            },
        );
        tid
    }

    /// Whether thread `tid` can simulate its next event now.
    fn runnable(&self, tid: u32) -> bool {
        let Some(t) = self.threads.get(&tid) else {
            return false;
        };
        let first_os = |pid: u32| self.pending_os.get(&pid).and_then(|q| q.front().copied());
        match t.queue.front() {
            // An OS event waits for every earlier event of the processes it changes.
            Some((seq, e)) if is_os(e) => {
                let pids = os_pids(e, t.pid);
                pids.iter()
                    .flatten()
                    .all(|&p| first_os(p).is_none_or(|os| os >= *seq))
                    && self.threads.values().all(|o| {
                        !pids.contains(&Some(o.pid)) || o.queue.front().is_none_or(|f| f.0 >= *seq)
                    })
            }
            // A reference waits for its process's OS events before it.
            Some(&(seq, _)) => first_os(t.pid).is_none_or(|os| seq <= os),
            None => false,
        }
    }

    /// The thread vCPU `v` runs next: its current one while its slice lasts, the next
    /// runnable one of its queue, or one taken from another vCPU.
    fn pick(&mut self, v: usize, slice: u64) -> Option<u32> {
        let vc = &self.vcpus[v];
        if let Some(cur) = vc.current.filter(|&t| self.runnable(t)) {
            let others = vc.queue.iter().any(|&t| t != cur && self.runnable(t));
            if vc.slice < slice || !others {
                return Some(cur);
            }
        }
        // Round robin: the first runnable thread after the current one.
        let q = &vc.queue;
        let start = vc
            .current
            .and_then(|c| q.iter().position(|&t| t == c))
            .map_or(0, |i| i + 1);
        let len = q.len();
        if let Some(t) = (0..len)
            .map(|k| q[(start + k) % len])
            .find(|&t| Some(t) != vc.current && self.runnable(t))
        {
            return Some(t);
        }
        if vc.current.is_some_and(|t| self.runnable(t)) {
            return vc.current;
        }
        // Steal: a runnable thread no vCPU is running, from the vCPU with the most threads.
        let mut from: Vec<usize> = (0..self.vcpus.len()).filter(|&w| w != v).collect();
        from.sort_by_key(|&w| (std::cmp::Reverse(self.vcpus[w].queue.len()), w));
        for w in from {
            let cur = self.vcpus[w].current;
            if let Some(i) = self.vcpus[w]
                .queue
                .iter()
                .position(|&t| Some(t) != cur && !self.pinned.contains_key(&t) && self.runnable(t))
            {
                let t = self.vcpus[w].queue.remove(i).expect("position found");
                self.vcpus[v].queue.push_back(t);
                self.threads.get_mut(&t).expect("queued threads exist").vcpu = v;
                self.vcpus[v].counts.migrations += 1;
                return Some(t);
            }
        }
        None
    }

    /// One scheduling decision: runs the vCPU with the smallest clock that has work for a
    /// quantum. Returns false when everything has run.
    fn schedule(&mut self, sim: &mut Simulator, source: &mut dyn EventSource) -> Result<bool> {
        let slice = sim.cfg.guest.time_slice;
        let mut order: Vec<usize> = (0..self.vcpus.len()).collect();
        order.sort_by_key(|&v| (self.vcpus[v].clock, v));
        for (k, &v) in order.iter().enumerate() {
            if let Some(tid) = self.pick(v, slice) {
                let horizon = order
                    .iter()
                    .skip(k + 1)
                    .filter(|&&w| !self.vcpus[w].idle)
                    .map(|&w| self.vcpus[w].clock)
                    .min()
                    .unwrap_or(self.vcpus[v].clock)
                    .saturating_add(QUANTUM);
                // vCPUs before `v` had nothing to run: they idle until `v`'s time.
                let now = self.vcpus[v].clock;
                for &w in &order[..k] {
                    let vc = &mut self.vcpus[w];
                    vc.idle = true;
                    if vc.clock < now {
                        vc.counts.idle_cycles += now - vc.clock;
                        vc.clock = now;
                    }
                }
                self.vcpus[v].idle = false;
                self.turn(sim, v, tid, horizon)?;
                return Ok(true);
            }
        }
        if !self.ended && self.buffered < LOOKAHEAD {
            self.fill(source)?;
            return Ok(true);
        }
        if !self.ended {
            // Every queued event waits for an OS event of a thread whose events lie beyond
            // the look-ahead window: read further.
            self.fill(source)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Loads vCPU `v` into the simulator (its MMU, its guest context, its shadow root).
    fn load(&mut self, sim: &mut Simulator, v: usize) -> Result<()> {
        let cur = self.running;
        if cur == v {
            return Ok(());
        }
        self.vcpus[cur].root = sim.vmm.current_root();
        std::mem::swap(&mut sim.mmu, &mut self.vcpus[cur].mmu);
        std::mem::swap(&mut sim.mmu, &mut self.vcpus[v].mmu);
        std::mem::swap(&mut sim.core, &mut self.vcpus[cur].core);
        std::mem::swap(&mut sim.core, &mut self.vcpus[v].core);
        sim.mmu.swap_shared(&mut self.vcpus[cur].mmu);
        self.running = v;
        let running = self.vcpus[v]
            .current
            .and_then(|t| self.threads.get(&t).map(|th| (th.pid, t)))
            .filter(|&(pid, _)| sim.os.process(pid).is_some());
        sim.os.resume(running);
        let root = self.vcpus[v].root;
        self.vcpus[v].root = sim
            .vmm
            .resume(&mut sim.mmu, &sim.os, running.map(|r| r.0), root)?;
        sim.tag = sim.mmu.tag(sim.os.pcid(running.map_or(0, |r| r.0)));
        Ok(())
    }

    /// The running vCPU's own cycles so far: everything that accrues while it runs (the
    /// other vCPUs' MMUs are parked, so the running MMU's cycles are its own).
    fn local_now(sim: &Simulator) -> u64 {
        sim.cycles_by_cause().total()
    }

    /// vCPU `v` runs thread `tid` until its clock passes `horizon`, the thread blocks, or its
    /// slice ends with other threads waiting.
    fn turn(&mut self, sim: &mut Simulator, v: usize, tid: u32, horizon: u64) -> Result<()> {
        self.load(sim, v)?;
        let start = Self::local_now(sim);
        let before = sim.counters;
        self.moved = 0;
        if self.vcpus[v].current != Some(tid) {
            self.context_switch(sim, v, tid)?;
        }
        let slice = sim.cfg.guest.time_slice;
        while let Some(&(seq, _)) = self.threads[&tid].queue.front() {
            if !self.runnable(tid) {
                break;
            }
            let (_, e) = self
                .threads
                .get_mut(&tid)
                .expect("runs")
                .queue
                .pop_front()
                .expect("front seen");
            self.buffered -= 1;
            let at = self.vcpus[v].clock + (Self::local_now(sim) - start - self.moved);
            let before = sim.step_boundary()?;
            self.unsent |= before.invalidations;
            if before.boundary && self.unsent {
                // Before the event, so that the invalidations of the guest kernel's background
                // work (khugepaged) are shot down before the event's own effects.
                self.unsent = false;
                self.shootdown(sim, v)?;
            }
            let after = sim.step_event(&e, seq)?;
            sim.vmm.pager_lock_wait(after.pager_lock, at);
            if is_os(&e) {
                let pid = self.threads[&tid].pid;
                for p in os_pids(&e, pid).into_iter().flatten() {
                    if let Some(q) = self.pending_os.get_mut(&p) {
                        q.pop_front();
                        if q.is_empty() {
                            self.pending_os.remove(&p);
                        }
                    }
                }
            }
            self.born(sim, tid, &e);
            let step = before.then(after);
            if step.warmup_ended {
                self.end_warmup(sim);
            }
            if step.mode_switched {
                // The whole VM changes mode: every vCPU exits and flushes.
                for (w, vc) in self.vcpus.iter_mut().enumerate() {
                    if w != v {
                        vc.clock += vc.core.drain();
                        vc.mmu.flush_vm();
                    }
                }
            }
            self.unsent |= after.invalidations;
            if self.unsent {
                self.unsent = false;
                self.shootdown(sim, v)?;
            }
            if after.remote_flush {
                self.remote_flush(sim, v);
            }
            if matches!(e, Event::Exit { .. } | Event::ThreadExit { .. }) {
                self.reap(sim)?;
                if self.vcpus[v].current.is_none() {
                    break;
                }
            }
            let ran = Self::local_now(sim) - start - self.moved;
            if self.vcpus[v].clock + ran >= horizon || self.vcpus[v].slice + ran >= slice {
                break;
            }
        }
        let ran = Self::local_now(sim) - start - self.moved;
        let vc = &mut self.vcpus[v];
        vc.clock += ran;
        vc.slice += ran;
        let c = &sim.counters;
        vc.counts.instructions += c.instructions.saturating_sub(before.instructions);
        vc.counts.refs +=
            (c.memory_refs + c.fetches).saturating_sub(before.memory_refs + before.fetches);
        Ok(())
    }

    /// The warm-up ended during vCPU `running`'s turn: every vCPU's counters restart.
    fn end_warmup(&mut self, sim: &mut Simulator) {
        for vc in &mut self.vcpus {
            vc.mmu.reset_stats();
            vc.core.reset_stalls();
            vc.counts = VcpuCounts {
                vcpu: vc.counts.vcpu,
                ..VcpuCounts::default()
            };
        }
        sim.shootdowns = ShootdownCounts::default();
        sim.vmm.restart_pager_lock();
    }

    /// vCPU `v` switches to thread `tid` (a CR3 write when the process changes).
    fn context_switch(&mut self, sim: &mut Simulator, v: usize, tid: u32) -> Result<()> {
        let pid = self.threads[&tid].pid;
        self.vcpus[v].current = Some(tid);
        self.vcpus[v].slice = 0;
        if !self.threads[&tid].born {
            // Not created yet: its first event creates it.
            sim.os.resume(None);
            return Ok(());
        }
        self.vcpus[v].counts.context_switches += 1;
        let seq = self.threads[&tid].queue.front().map_or(self.seq, |e| e.0);
        self.unsent |= sim.context_switch(pid, tid, seq)?.invalidations;
        if self.pcid {
            self.vcpus[v].lazy.insert(pid);
        }
        Ok(())
    }

    /// Marks the threads that event `e` of thread `tid` brought to life.
    fn born(&mut self, sim: &Simulator, tid: u32, e: &Event) {
        let new = match *e {
            Event::ProcessCreate { pid } | Event::Fork { child: pid, .. } => Some(pid),
            Event::ThreadCreate { tid, .. } => Some(tid),
            _ => None,
        };
        for t in [Some(tid), new].into_iter().flatten() {
            if let Some(th) = self.threads.get_mut(&t) {
                th.born |= sim.os.process(th.pid).is_some();
            }
        }
    }

    /// Drops the threads whose process (or themselves) ended; a thread with events left is an
    /// error.
    fn reap(&mut self, sim: &Simulator) -> Result<()> {
        let dead: Vec<u32> = self
            .threads
            .iter()
            .filter(|(&tid, t)| {
                t.born
                    && (sim.os.process(t.pid).is_none()
                        || tid != t.pid && sim.os.thread_pid(tid) != Some(t.pid))
            })
            .map(|(&tid, _)| tid)
            .collect();
        for tid in dead {
            let t = self.threads.remove(&tid).expect("listed above");
            if let Some((seq, e)) = t.queue.front() {
                return Err(Error::Event {
                    event: *seq,
                    what: format!("{e:?}"),
                    reason: format!("thread {tid} of process {} has ended", t.pid),
                });
            }
            for vc in &mut self.vcpus {
                vc.queue.retain(|&q| q != tid);
                if vc.current == Some(tid) {
                    vc.current = None;
                }
            }
        }
        Ok(())
    }

    /// The OS action just simulated on vCPU `v` invalidated translations: every other vCPU
    /// that may cache them gets an IPI and runs the flush handler; `v` waits for the slowest.
    fn shootdown(&mut self, sim: &mut Simulator, v: usize) -> Result<()> {
        let fx = &sim.fx;
        if fx.invalidate.is_empty() && fx.flush_pids.is_empty() {
            return Ok(());
        }
        let mut pids: BTreeSet<u32> = fx.invalidate.iter().map(|i| i.0).collect();
        pids.extend(fx.flush_pids.iter().copied());
        let fx = std::mem::take(&mut sim.fx);
        let mut wait = 0;
        let mut sent = 0;
        for w in 0..self.vcpus.len() {
            if w == v {
                continue;
            }
            let cur_pid = self.vcpus[w]
                .current
                .and_then(|t| self.threads.get(&t))
                .map(|t| t.pid);
            let live: Vec<u32> = pids
                .iter()
                .copied()
                .filter(|p| Some(*p) == cur_pid || self.vcpus[w].lazy.contains(p))
                .collect();
            if live.is_empty() {
                continue;
            }
            // The IPI interrupts the receiver: its window drains before the handler.
            let drained = self.vcpus[w].core.drain();
            self.vcpus[w].clock += drained;
            let mut part = OsEffects::default();
            part.invalidate
                .extend(fx.invalidate.iter().filter(|i| live.contains(&i.0)));
            part.flush_pids
                .extend(fx.flush_pids.iter().filter(|p| live.contains(p)));
            let k = *sim.os.costs();
            sim.os.charge(k.ipi_send);
            let kernel = k.ipi_receive + k.per_page * part.invalidate.len() as u64;
            sim.os.charge(kernel);
            let hyp = sim
                .vmm
                .shootdown(&mut sim.mmu, &mut self.vcpus[w].mmu, &sim.os, &part);
            for p in &part.flush_pids {
                if Some(*p) != cur_pid {
                    self.vcpus[w].lazy.remove(p);
                }
            }
            let handler = kernel + hyp;
            self.moved += handler;
            let vc = &mut self.vcpus[w];
            vc.clock += handler;
            vc.counts.ipis_received += 1;
            vc.counts.shootdown_handler_cycles += handler;
            let s = &mut sim.shootdowns;
            s.ipis += 1;
            s.remote_invlpgs += part.invalidate.len() as u64;
            s.remote_context_flushes += part.flush_pids.len() as u64;
            s.handler_cycles += handler;
            wait = wait.max(handler);
            sent += 1;
        }
        sim.fx = fx;
        if sent > 0 {
            sim.shootdowns.shootdowns += 1;
            sim.shootdowns.wait_cycles += wait;
            let c = &mut self.vcpus[v].counts;
            c.shootdowns += 1;
            c.ipis_sent += sent;
            c.shootdown_wait_cycles += wait;
        }
        Ok(())
    }

    /// The hypervisor removed shadow tables while vCPU `v` ran: every other vCPU is forced
    /// out and flushes.
    fn remote_flush(&mut self, sim: &mut Simulator, v: usize) {
        for w in 0..self.vcpus.len() {
            if w == v {
                continue;
            }
            let cyc = sim.vmm.remote_flush(&mut self.vcpus[w].mmu);
            self.moved += cyc;
            let vc = &mut self.vcpus[w];
            vc.clock += vc.core.drain() + cyc;
            vc.counts.remote_flushes += 1;
            vc.lazy.clear();
            sim.shootdowns.remote_flushes += 1;
            sim.shootdowns.remote_flush_cycles += cyc;
        }
    }

    /// The run ended: every parked vCPU's window drains, the per-vCPU counters go to the
    /// simulator, and every MMU's and core's counters are added to the running one's (the
    /// totals of the result).
    fn collect(&mut self, sim: &mut Simulator) {
        let running = self.running;
        for (w, vc) in self.vcpus.iter_mut().enumerate() {
            if w != running {
                vc.clock += vc.core.drain();
            }
        }
        for (w, vc) in self.vcpus.iter_mut().enumerate() {
            let mmu = if w == running { &sim.mmu } else { &vc.mmu };
            vc.counts.walks = mmu.hw.stats.walks;
            vc.counts.cycles = vc.clock;
        }
        for (w, vc) in self.vcpus.iter().enumerate() {
            if w != running {
                sim.mmu.absorb_stats(&vc.mmu);
                sim.core.absorb(&vc.core);
            }
        }
        sim.vcpus = self.vcpus.iter().map(|vc| vc.counts.clone()).collect();
    }
}
