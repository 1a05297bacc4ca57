//! The run driver: the one loop that feeds a source's events to a simulation and reports
//! progress — for one vCPU, for several ([`crate::sim`]'s scheduler), and for the oracle's
//! two simulations in lockstep ([`lockstep`]) — and the result it ends with. The simulation
//! takes its own boundaries (warm-up end, mode switches, policy windows, the stop phase)
//! between events; the driver only asks it to advance until the source or the run ends, and
//! checks after each advance whether the caller wants to stop. It sits above both the
//! simulation ([`crate::sim`]) and the result's schema ([`crate::result`]).

mod lockstep;

use crate::config::{PolicyConfig, SimConfig};
use crate::error::{Error, Result};
use crate::event::{Event, EventSource};
use crate::result::RunResult;
use crate::sim::{Simulator, Vcpus};

/// Progress of a running simulation, reported to the caller's callback.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Events simulated so far.
    pub events: u64,
    /// Total events if the source knows it.
    pub total: Option<u64>,
}

/// Events between two progress reports, at least.
const PROGRESS_EVERY: u64 = 1 << 20;

/// A simulation the driver advances.
trait Advance {
    /// Simulates what comes next of `source` (a batch, a scheduler's turn); `false` once the
    /// source is exhausted or the run has stopped.
    fn advance(&mut self, source: &mut dyn EventSource) -> Result<bool>;
    /// Events simulated so far (warm-up included).
    fn events(&self) -> u64;
    /// Ends the run after its last event.
    fn finish(&mut self) -> Result<()>;
}

/// Advances `sim` to the end of `source`, calling `progress` about every [`PROGRESS_EVERY`]
/// events and once at the end; `progress` returning `false` stops the run with
/// [`Error::Interrupted`].
fn drive(
    sim: &mut dyn Advance,
    source: &mut dyn EventSource,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<()> {
    let total = source.len_hint();
    let mut next_report = PROGRESS_EVERY;
    while sim.advance(source)? {
        let done = sim.events();
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
    sim.finish()?;
    progress(&Progress {
        events: sim.events(),
        total,
    });
    Ok(())
}

/// Reads the next batch of at most `max` events of `source` into `buf`; `false` at its end.
fn next_batch(source: &mut dyn EventSource, buf: &mut Vec<Event>, max: usize) -> Result<bool> {
    buf.clear();
    Ok(source.next_batch(buf, max)? > 0)
}

/// One vCPU: the source's batches, each simulated in order.
struct OneVcpu<'a> {
    sim: &'a mut Simulator,
    buf: Vec<Event>,
}

impl Advance for OneVcpu<'_> {
    fn advance(&mut self, source: &mut dyn EventSource) -> Result<bool> {
        if self.sim.stopped() || !next_batch(source, &mut self.buf, crate::event::BATCH_EVENTS)? {
            return Ok(false);
        }
        self.sim.step_batch(&self.buf, &mut |_| {})?;
        Ok(true)
    }
    fn events(&self) -> u64 {
        self.sim.events()
    }
    fn finish(&mut self) -> Result<()> {
        self.sim.finish()
    }
}

/// Several vCPUs: a scheduler's turn at a time ([`Vcpus`]).
struct SeveralVcpus<'a> {
    sim: &'a mut Simulator,
    vcpus: Vcpus,
}

impl Advance for SeveralVcpus<'_> {
    fn advance(&mut self, source: &mut dyn EventSource) -> Result<bool> {
        self.vcpus.advance(self.sim, source)
    }
    fn events(&self) -> u64 {
        self.sim.events()
    }
    fn finish(&mut self) -> Result<()> {
        self.vcpus.finish(self.sim)
    }
}

/// Runs `source` to its end on `sim` (on `sim`'s vCPUs).
pub fn simulate(
    sim: &mut Simulator,
    source: &mut dyn EventSource,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<()> {
    sim.set_dependences(source.tracks_dependences());
    if sim.config().guest.vcpus > 1 {
        let vcpus = Vcpus::new(sim);
        return drive(&mut SeveralVcpus { sim, vcpus }, source, progress);
    }
    let buf = Vec::with_capacity(crate::event::BATCH_EVENTS);
    drive(&mut OneVcpu { sim, buf }, source, progress)
}

/// Runs `source` under `cfg` to the end and returns the result (schema `vmmu.result/2`, see
/// docs/statistics.md). `progress` is called about every million events; returning `false`
/// stops the run with [`crate::Error::Interrupted`].
pub fn run(
    cfg: &SimConfig,
    source: &mut dyn EventSource,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<RunResult> {
    if let Some(PolicyConfig::Oracle(_)) = &cfg.policy {
        return lockstep::run(cfg, source, progress);
    }
    let start = std::time::Instant::now();
    let mut sim = Simulator::new(cfg)?;
    simulate(&mut sim, source, progress)?;
    let secs = start.elapsed().as_secs_f64();
    Ok(sim.result(&source.describe(), secs))
}
