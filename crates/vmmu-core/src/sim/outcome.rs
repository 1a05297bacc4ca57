//! What one step of the simulation did that concerns more than the vCPU that ran it: the
//! values the multi-vCPU layer acts on (a TLB shootdown, every vCPU's flush at a mode
//! switch, the other vCPUs' flush after shadow tables were removed, the wait for the shadow
//! pager's lock, the counters restarting at the end of the warm-up). A step of one vCPU
//! returns them too; nothing needs them there.

use crate::vmm::LockHolds;

/// What a step did beyond its own vCPU ([`super::Simulator::step`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// A boundary was taken before the event (warm-up end, mode switch, policy window,
    /// background work).
    pub boundary: bool,
    /// The warm-up ended: every counter restarted.
    pub warmup_ended: bool,
    /// The VM changed paging mode: every vCPU exits and flushes what it caches.
    pub mode_switched: bool,
    /// The guest kernel acted (an OS event, a fault it handled, its background work): the
    /// translations its last action invalidated ([`super::Simulator::effects`]) are to be
    /// shot down on the other vCPUs that may cache them.
    pub invalidations: bool,
    /// The hypervisor removed shadow tables: every other vCPU is forced out to flush.
    pub remote_flush: bool,
    /// The shadow pager's lock holds of the step's handlers.
    pub pager_lock: LockHolds,
}

impl Outcome {
    /// What `self` and then `later` did together.
    pub fn then(self, later: Outcome) -> Outcome {
        Outcome {
            boundary: self.boundary || later.boundary,
            warmup_ended: self.warmup_ended || later.warmup_ended,
            mode_switched: self.mode_switched || later.mode_switched,
            invalidations: self.invalidations || later.invalidations,
            remote_flush: self.remote_flush || later.remote_flush,
            pager_lock: self.pager_lock.then(later.pager_lock),
        }
    }
}
