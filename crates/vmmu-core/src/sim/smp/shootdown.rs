//! TLB shootdowns across vCPUs: the guest kernel's invalidations sent by IPI to the vCPUs
//! that may cache them, each running the flush handler (and the hypervisor's part of it);
//! and the flush every other vCPU is forced into after the hypervisor removed shadow tables.

use super::Vcpus;
use crate::error::Result;
use crate::guest::OsEffects;
use crate::sim::Simulator;
use std::collections::BTreeSet;

impl Vcpus {
    /// The OS action just simulated on vCPU `v` invalidated translations: every other vCPU
    /// that may cache them gets an IPI and runs the flush handler; `v` waits for the slowest.
    pub(super) fn shootdown(&mut self, sim: &mut Simulator, v: usize) -> Result<()> {
        let fx = sim.effects();
        if fx.invalidate.is_empty() && fx.flush_pids.is_empty() {
            return Ok(());
        }
        let mut pids: BTreeSet<u32> = fx.invalidate.iter().map(|i| i.0).collect();
        pids.extend(fx.flush_pids.iter().copied());
        let fx = sim.take_effects();
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
            let k = *sim.os().costs();
            sim.charge_kernel(k.ipi_send);
            let kernel = k.ipi_receive + k.per_page * part.invalidate.len() as u64;
            sim.charge_kernel(kernel);
            let hyp = sim.shootdown_remote(&mut self.vcpus[w].mmu, &part);
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
            let s = sim.shootdowns_mut();
            s.ipis += 1;
            s.remote_invlpgs += part.invalidate.len() as u64;
            s.remote_context_flushes += part.flush_pids.len() as u64;
            s.handler_cycles += handler;
            wait = wait.max(handler);
            sent += 1;
        }
        sim.put_effects(fx);
        if sent > 0 {
            let s = sim.shootdowns_mut();
            s.shootdowns += 1;
            s.wait_cycles += wait;
            let c = &mut self.vcpus[v].counts;
            c.shootdowns += 1;
            c.ipis_sent += sent;
            c.shootdown_wait_cycles += wait;
        }
        Ok(())
    }

    /// The hypervisor removed shadow tables while vCPU `v` ran: every other vCPU is forced
    /// out and flushes.
    pub(super) fn remote_flush(&mut self, sim: &mut Simulator, v: usize) {
        for w in 0..self.vcpus.len() {
            if w == v {
                continue;
            }
            let cyc = sim.flush_remote(&mut self.vcpus[w].mmu);
            self.moved += cyc;
            let vc = &mut self.vcpus[w];
            vc.clock += vc.core.drain() + cyc;
            vc.counts.remote_flushes += 1;
            vc.lazy.clear();
            let s = sim.shootdowns_mut();
            s.remote_flushes += 1;
            s.remote_flush_cycles += cyc;
        }
    }
}
