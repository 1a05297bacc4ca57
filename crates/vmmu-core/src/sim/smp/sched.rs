//! The guest scheduler: which vCPU runs next (the one with the smallest clock), which of its
//! threads (round robin within a time slice; a migration when it has none runnable), and the
//! context switch that loads a thread.

use super::stream::{is_os, os_pids, LOOKAHEAD};
use super::{Vcpus, QUANTUM};
use crate::error::Result;
use crate::event::EventSource;
use crate::sim::Simulator;

impl Vcpus {
    /// Whether thread `tid` can simulate its next event now.
    pub(super) fn runnable(&self, tid: u32) -> bool {
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
    pub(super) fn pick(&mut self, v: usize, slice: u64) -> Option<u32> {
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
    pub(super) fn schedule(
        &mut self,
        sim: &mut Simulator,
        source: &mut dyn EventSource,
    ) -> Result<bool> {
        let slice = sim.config().guest.time_slice;
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

    /// vCPU `v` switches to thread `tid` (a CR3 write when the process changes).
    pub(super) fn context_switch(&mut self, sim: &mut Simulator, v: usize, tid: u32) -> Result<()> {
        let pid = self.threads[&tid].pid;
        self.vcpus[v].current = Some(tid);
        self.vcpus[v].slice = 0;
        if !self.threads[&tid].born {
            // Not created yet: its first event creates it.
            sim.resume_guest(None);
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
}
