//! The boundaries between events where the run changes course: the end of the warm-up, after
//! which every counter restarts, the mode switches of `hypervisor.switch.at`, and a policy's
//! PMU windows and paging-exit wake-ups (`adaptive.rs`), and the ends of the windows an
//! observer outside the simulation watches (the oracle's), the guest kernel's background
//! work (khugepaged's wake-ups), and the hypervisor's timed work (agile paging's scans). Each is taken at the first event boundary at or after its
//! point. Phase markers end a warm-up (`warmup.phase`) or the run (`stop.phase`) right after
//! the marker.

use super::{Counters, Simulator, Warmup};
use crate::error::{Error, Result};

impl Simulator {
    /// The next boundary: the end of the warm-up, the next mode switch, the end of the
    /// policy's window or of an observed window, or the paging-exit count the policy waits
    /// for.
    pub(super) fn plan(&mut self) {
        let w = self.cfg.warmup;
        let warm = |n: u64| if self.warming && n > 0 { n } else { u64::MAX };
        let switch = self.switches.last().copied().unwrap_or(u64::MAX);
        let (window, exits) = match &self.adaptive {
            Some(a) if !self.warming => (self.warmed.instructions + a.next, a.exit_wake()),
            Some(_) | None => (u64::MAX, u64::MAX),
        };
        let observed = match self.observed {
            Some(o) if !self.warming => self.warmed.instructions + o.next,
            Some(_) | None => u64::MAX,
        };
        self.next_instr = warm(w.instructions)
            .min(switch)
            .min(window)
            .min(observed)
            .min(self.os.next_background())
            .min(self.vmm.next_tick());
        self.next_refs = warm(w.refs);
        self.next_exits = exits;
    }

    /// Ends the warm-up and carries out the mode switches that are due.
    pub(super) fn boundary(&mut self) -> Result<()> {
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
            self.core.drain();
            self.vmm
                .switch_mode(&mut self.mmu, &self.os, self.counters.instructions)?;
            self.happened.mode_switched = true;
        }
        if !self.warming {
            self.adapt()?;
        }
        self.vmm.tick(&mut self.mmu, &self.os, instr);
        self.background()?;
        self.plan();
        Ok(())
    }

    /// Restarts every counter; the model's state (tables, TLBs, caches, shadow cache) stays.
    fn end_warmup(&mut self) {
        self.warming = false;
        self.happened.warmup_ended = true;
        let c = &self.counters;
        self.warmed = Warmup {
            events: c.events,
            refs: c.memory_refs + c.fetches,
            instructions: c.instructions,
        };
        self.counters = Counters::default();
        self.mmu.reset_stats();
        self.core.reset_stalls();
        self.os.reset_stats();
        self.vmm.reset_stats(0);
        self.start_windows();
    }

    /// A phase marker `id` was simulated: the first `warmup.phase` marker ends the warm-up,
    /// the first `stop.phase` marker after the warm-up ends the run.
    pub(super) fn phase_marker(&mut self, id: u32) {
        if self.warming {
            if self.cfg.warmup.phase == Some(id) {
                self.end_warmup();
                self.plan();
            }
        } else if self.cfg.stop.phase == Some(id) {
            self.stopped = true;
        }
    }

    /// The run ended: a stop asked for must have been reached.
    pub(super) fn check_stopped(&self) -> Result<()> {
        match self.cfg.stop.phase {
            Some(id) if !self.stopped => Err(Error::config(
                "stop.phase",
                format!(
                    "the workload ended without a phase marker {id} after the warm-up: the \
                     run was to stop there"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The run ended: a warm-up that never finished left nothing to count.
    pub(super) fn check_warmup_ended(&self) -> Result<()> {
        if !self.warming {
            return Ok(());
        }
        let w = self.cfg.warmup;
        if let Some(id) = w.phase {
            return Err(Error::config(
                "warmup.phase",
                format!(
                    "the workload has no phase marker {id} (it ended after {} events): the \
                     warm-up never ended and nothing would be counted",
                    self.counters.events
                ),
            ));
        }
        let (n, unit, had, field) = if w.refs > 0 {
            (
                w.refs,
                "references",
                self.counters.memory_refs + self.counters.fetches,
                "warmup.refs",
            )
        } else {
            (
                w.instructions,
                "instructions",
                self.counters.instructions,
                "warmup.instructions",
            )
        };
        Err(Error::config(
            field,
            format!(
                "a warm-up of {n} {unit} is longer than the workload ({had} {unit}): nothing \
                 would be counted"
            ),
        ))
    }
}
