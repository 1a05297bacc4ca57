//! The counts of a run on several vCPUs (docs/model.md, "vCPUs"; docs/statistics.md): each
//! vCPU's and the TLB shootdowns' (the shadow pager's lock's are the hypervisor's,
//! [`crate::vmm::PagerLockCounts`]).

use serde::{Deserialize, Serialize};

/// Counters of one vCPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VcpuCounts {
    /// Index.
    pub vcpu: u32,
    /// The vCPU's clock at the end: the cycles it ran, waited and idled.
    pub cycles: u64,
    /// Cycles it had nothing to run.
    pub idle_cycles: u64,
    /// Instructions it retired.
    pub instructions: u64,
    /// Data references and instruction fetches it made.
    pub refs: u64,
    /// Page walks of its MMU.
    pub walks: u64,
    /// Context switches its scheduler made.
    pub context_switches: u64,
    /// Threads it took from another vCPU's queue.
    pub migrations: u64,
    /// TLB shootdowns it started.
    pub shootdowns: u64,
    /// IPIs it sent.
    pub ipis_sent: u64,
    /// Shootdown IPIs it handled.
    pub ipis_received: u64,
    /// Cycles it spent handling other vCPUs' shootdowns (its guest kernel handler and the
    /// hypervisor's work on it).
    pub shootdown_handler_cycles: u64,
    /// Cycles it waited for other vCPUs to acknowledge its shootdowns.
    pub shootdown_wait_cycles: u64,
    /// Times it was forced out to flush after the hypervisor removed shadow tables.
    pub remote_flushes: u64,
}

/// TLB shootdowns of a multi-vCPU run (docs/statistics.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShootdownCounts {
    /// Shootdowns: mapping changes that other vCPUs may cache.
    pub shootdowns: u64,
    /// IPIs sent (one per other vCPU that may cache the address space).
    pub ipis: u64,
    /// Pages invalidated by INVLPG on receiving vCPUs.
    pub remote_invlpgs: u64,
    /// Whole address-space flushes on receiving vCPUs.
    pub remote_context_flushes: u64,
    /// Cycles the receivers spent (guest handler and hypervisor).
    pub handler_cycles: u64,
    /// Cycles the initiators waited for acknowledgements (part of `cycles`, cause
    /// `shootdown_wait`).
    pub wait_cycles: u64,
    /// vCPUs forced out to flush after the hypervisor removed shadow tables.
    pub remote_flushes: u64,
    /// Their cycles.
    pub remote_flush_cycles: u64,
}
