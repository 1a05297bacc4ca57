//! The shadow pager's lock across vCPUs (docs/model.md, "vCPUs"): the handlers that change or
//! read the shared shadow tables (`ExitReason::takes_pager_lock`) hold it for their handler
//! time, the exit's round trip being outside it; a vCPU that arrives while another holds it
//! waits. KVM serialises its shadow MMU under `kvm->mmu_lock` the same way. The hypervisor
//! counts the holds as its handlers run; the multi-vCPU scheduler, which knows each vCPU's
//! clock, says when the event that ran them began ([`super::Vmm::pager_lock_wait`]).

use serde::{Deserialize, Serialize};

/// The shadow pager's lock across vCPUs (docs/model.md, "vCPUs"): handlers that change or
/// read the shared shadow tables hold it for their handler time (the exit's round trip is
/// outside it); a vCPU that arrives while another holds it waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PagerLockCounts {
    /// Handlers that took the lock.
    pub holds: u64,
    /// Of them, those that found it held and waited.
    pub contended: u64,
    /// Cycles vCPUs waited for it (part of `cycles`, cause `pager_lock_wait`).
    pub wait_cycles: u64,
    /// Cycles it was held.
    pub held_cycles: u64,
}

/// The lock-taking handlers one event ran: how many, and their cycles (world switches
/// included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockHolds {
    /// Handlers that took the lock.
    pub holds: u64,
    /// Their cycles, world switches included.
    pub cycles: u64,
    /// Of them, the world switches' (outside the lock).
    pub trips: u64,
    /// The world switch of the first: how long after the event began it reaches the lock.
    pub first_trip: u64,
}

impl LockHolds {
    /// These holds, then `later`'s.
    pub fn then(self, later: LockHolds) -> LockHolds {
        LockHolds {
            holds: self.holds + later.holds,
            cycles: self.cycles + later.cycles,
            trips: self.trips + later.trips,
            first_trip: if self.holds > 0 {
                self.first_trip
            } else {
                later.first_trip
            },
        }
    }
}

/// The lock's state on the vCPU clocks and its counts.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PagerLock {
    /// The holds since the current event began.
    pending: LockHolds,
    /// When the lock is next free, on the vCPU clocks.
    free_at: u64,
    /// The counts (restarted at the end of a warm-up).
    pub(super) counts: PagerLockCounts,
}

impl PagerLock {
    /// A handler of `handler` cycles ran after a world switch of `round_trip`; `takes_lock`:
    /// its reason takes the lock.
    #[inline]
    pub(super) fn charged(&mut self, takes_lock: bool, round_trip: u64, handler: u64) {
        if takes_lock {
            let p = &mut self.pending;
            if p.holds == 0 {
                p.first_trip = round_trip;
            }
            p.holds += 1;
            p.cycles += round_trip + handler;
            p.trips += round_trip;
        }
    }

    /// An event begins: the holds it makes are counted from here.
    pub(super) fn begin(&mut self) {
        self.pending = LockHolds::default();
    }

    /// The holds since the event began (and none after).
    pub(super) fn take(&mut self) -> LockHolds {
        std::mem::take(&mut self.pending)
    }

    /// The event that began at time `at` (on the clock of the vCPU that ran it) made `held`:
    /// it held the lock for their handler time, after waiting for it if another vCPU held it
    /// when its first exit arrived (its world switch after `at`).
    pub(super) fn hold(&mut self, held: LockHolds, at: u64) {
        if held.holds == 0 {
            return;
        }
        let time = held.cycles - held.trips;
        let arrive = at + held.first_trip;
        let wait = self.free_at.saturating_sub(arrive);
        self.free_at = arrive + wait + time;
        let l = &mut self.counts;
        l.holds += held.holds;
        l.held_cycles += time;
        if wait > 0 {
            l.contended += 1;
            l.wait_cycles += wait;
        }
    }
}
