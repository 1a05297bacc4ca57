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

mod sched;
mod shootdown;
mod stream;

use super::Simulator;
use crate::error::Result;
use crate::event::{Event, EventSource};
use crate::mmu::Mmu;
use crate::result::VcpuCounts;
use crate::timing::Core;
use crate::vmm::VcpuRoot;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use stream::{is_os, os_pids, FILL};

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
    root: Option<VcpuRoot>,
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

impl Vcpus {
    /// The vCPUs of `sim`'s guest (`guest.vcpus`), none of them running a thread yet.
    pub(crate) fn new(sim: &Simulator) -> Vcpus {
        let cfg = sim.config();
        let n = cfg.guest.vcpus as usize;
        let vcpus = (0..n)
            .map(|i| {
                let (mmu, core) = sim.new_vcpu_hardware();
                Vcpu {
                    mmu,
                    core,
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
                }
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
            pinned: cfg
                .guest
                .affinity
                .iter()
                .filter_map(|(t, &v)| Some((t.parse().ok()?, v as usize)))
                .collect(),
            pcid: sim.mmu().pcid(),
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
        let drained = sim.drain_core();
        self.vcpus[self.running].clock += drained;
        sim.finish()?;
        self.collect(sim);
        Ok(())
    }

    /// Loads vCPU `v` into the simulator (its MMU, its guest context, its shadow root).
    pub(super) fn load(&mut self, sim: &mut Simulator, v: usize) -> Result<()> {
        let cur = self.running;
        if cur == v {
            return Ok(());
        }
        self.vcpus[cur].root = sim.vmm().current_root();
        let (parked, next) = if cur < v {
            let (l, r) = self.vcpus.split_at_mut(v);
            (&mut l[cur], &mut r[0])
        } else {
            let (l, r) = self.vcpus.split_at_mut(cur);
            (&mut r[0], &mut l[v])
        };
        sim.switch_vcpu(
            (&mut parked.mmu, &mut parked.core),
            (&mut next.mmu, &mut next.core),
        );
        self.running = v;
        let running = self.vcpus[v]
            .current
            .and_then(|t| self.threads.get(&t).map(|th| (th.pid, t)))
            .filter(|&(pid, _)| sim.os().process(pid).is_some());
        let root = self.vcpus[v].root;
        self.vcpus[v].root = sim.resume_vcpu(running, root)?;
        Ok(())
    }

    /// The running vCPU's own cycles so far: everything that accrues while it runs (the
    /// other vCPUs' MMUs are parked, so the running MMU's cycles are its own).
    pub(super) fn local_now(sim: &Simulator) -> u64 {
        sim.cycles_by_cause().total()
    }

    /// vCPU `v` runs thread `tid` until its clock passes `horizon`, the thread blocks, or its
    /// slice ends with other threads waiting.
    pub(super) fn turn(
        &mut self,
        sim: &mut Simulator,
        v: usize,
        tid: u32,
        horizon: u64,
    ) -> Result<()> {
        self.load(sim, v)?;
        let start = Self::local_now(sim);
        let before = *sim.counters();
        self.moved = 0;
        if self.vcpus[v].current != Some(tid) {
            self.context_switch(sim, v, tid)?;
        }
        let slice = sim.config().guest.time_slice;
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
            sim.wait_pager_lock(after.pager_lock, at);
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
        let c = sim.counters();
        vc.counts.instructions += c.instructions.saturating_sub(before.instructions);
        vc.counts.refs +=
            (c.memory_refs + c.fetches).saturating_sub(before.memory_refs + before.fetches);
        Ok(())
    }

    /// The warm-up ended during vCPU `running`'s turn: every vCPU's counters restart.
    pub(super) fn end_warmup(&mut self, sim: &mut Simulator) {
        for vc in &mut self.vcpus {
            vc.mmu.reset_stats();
            vc.core.reset_stalls();
            vc.counts = VcpuCounts {
                vcpu: vc.counts.vcpu,
                ..VcpuCounts::default()
            };
        }
        sim.restart_shared_counts();
    }

    /// The run ended: every parked vCPU's window drains, the per-vCPU counters go to the
    /// simulator, and every MMU's and core's counters are added to the running one's (the
    /// totals of the result).
    pub(super) fn collect(&mut self, sim: &mut Simulator) {
        let running = self.running;
        for (w, vc) in self.vcpus.iter_mut().enumerate() {
            if w != running {
                vc.clock += vc.core.drain();
            }
        }
        for (w, vc) in self.vcpus.iter_mut().enumerate() {
            let mmu = if w == running { sim.mmu() } else { &vc.mmu };
            vc.counts.walks = mmu.hw.stats.walks;
            vc.counts.cycles = vc.clock;
        }
        for (w, vc) in self.vcpus.iter().enumerate() {
            if w != running {
                sim.absorb_vcpu(&vc.mmu, &vc.core);
            }
        }
        sim.set_vcpu_counts(self.vcpus.iter().map(|vc| vc.counts.clone()).collect());
    }
}
