//! The core's timing: how the counts become time (DESIGN.md "Timing: two core models, the
//! same counts"; docs/model.md "Timing").
//!
//! The MMU counts and reports what each reference cost it this time ([`RefCost`]: the L2-TLB
//! lookup, the walk, the data reference beyond an L1 hit); it knows nothing of this module.
//! Under the **additive** model those latencies simply add up (the MMU's own sums,
//! `MmuStats::translation_cycles` and `data_cycles`), and the [`Core`] does nothing. Under
//! the **interval** model ([`Interval`]) they feed an out-of-order window that decides how
//! much of each latency the core exposes: independent misses and walks overlap, dependent
//! ones serialise, and what cannot overlap (exits, faults, the guest kernel, serialising
//! instructions) drains the window first. Either way every TLB, page-walk-cache, cache and
//! walk count is the same (DESIGN.md law 10): the core model changes time, never counts.
//!
//! Time inside the interval model is fixed point, [`FRAC_BITS`] bits below the cycle, and
//! integer throughout, so results are bit-identical on every machine (DESIGN.md law 7).

mod interval;

pub use interval::Interval;

use crate::config::{CoreConfig, CoreModel};
use crate::event::AccessKind;

/// Bits of the interval model's fixed-point time below one cycle (1/1024 cycle).
pub const FRAC_BITS: u32 = 10;

/// `cycles` in fixed point.
#[inline(always)]
pub const fn fixed(cycles: u64) -> u64 {
    cycles << FRAC_BITS
}

/// A fixed-point time in whole cycles, rounded to the nearest.
#[inline(always)]
pub const fn whole(t: u64) -> u64 {
    (t + (1 << (FRAC_BITS - 1))) >> FRAC_BITS
}

/// What one reference cost the MMU this time, as values: the core model's input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefCost {
    /// Cycles of the L2-TLB lookup that answered it (the L2 TLB's latency on an L1 miss that
    /// hit there, or that found a clean entry; 0 on an L1 hit or a miss of every level).
    pub lookup: u64,
    /// Whether it walked (after a TLB miss, or a D-assist's re-walk): it needs a page walker.
    pub walked: bool,
    /// Cycles of that walk (page-entry references, PWC / NTLB / PSC lookups, A/D writes).
    pub walk: u64,
    /// Cycles of the data reference beyond an L1 hit (0: an L1 hit, an instruction fetch,
    /// or no data caches); a miss needs a miss-status register.
    pub data: u64,
}

/// Why dispatch stalled, for the breakdown of the exposed cycles (`core.stall_by_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Stall {
    /// The reorder buffer was full: its oldest instruction had not retired.
    Rob = 0,
    /// Every load-queue entry was held by a load not yet retired.
    LoadQueue = 1,
    /// Every store-queue entry was held by a store not yet written.
    StoreQueue = 2,
    /// An instruction fetch waited for its translation (front-end stall).
    Fetch = 3,
    /// The window drained before an operation that cannot overlap (an exit, a fault, the
    /// guest kernel, a serialising instruction) or at the end of the run.
    Drain = 4,
}

impl Stall {
    /// Every reason, in index order.
    pub const ALL: [Stall; 5] = [
        Stall::Rob,
        Stall::LoadQueue,
        Stall::StoreQueue,
        Stall::Fetch,
        Stall::Drain,
    ];

    /// The name in results.
    pub const fn name(self) -> &'static str {
        match self {
            Stall::Rob => "rob",
            Stall::LoadQueue => "load_queue",
            Stall::StoreQueue => "store_queue",
            Stall::Fetch => "fetch",
            Stall::Drain => "drain",
        }
    }
}

/// The interval model's counters, in fixed point: the cycles dispatch stalled, attributed to
/// the translation or the data of the operation it waited for (the CPI-stack convention of
/// interval models: while the operation translates, translation; after, data), by reason,
/// and the time operations queued for a walker or a miss-status register.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreStalls {
    /// Stalled on an operation still translating.
    pub translation: u64,
    /// Stalled on an operation's data (a load's, or a store's write).
    pub data: u64,
    /// The same stalls by [`Stall`] reason.
    pub by_reason: [u64; 5],
    /// Time walks waited for a free page walker (exposed or not).
    pub walker_wait: u64,
    /// Time misses waited for a free miss-status register (exposed or not).
    pub mshr_wait: u64,
}

impl CoreStalls {
    /// Adds `o`'s counters to these (the totals of several vCPUs).
    pub fn absorb(&mut self, o: &CoreStalls) {
        self.translation += o.translation;
        self.data += o.data;
        for (a, b) in self.by_reason.iter_mut().zip(o.by_reason) {
            *a += b;
        }
        self.walker_wait += o.walker_wait;
        self.mshr_wait += o.mshr_wait;
    }

    /// Exposed translation cycles, rounded.
    pub fn translation_cycles(&self) -> u64 {
        whole(self.translation)
    }

    /// Exposed data cycles: the rounded sum of translation and data less the rounded
    /// translation, so that the two add up to their rounded sum (never more than the latency
    /// totals they are exposed from).
    pub fn data_cycles(&self) -> u64 {
        whole(self.translation + self.data) - whole(self.translation)
    }
}

/// One vCPU's core timing: nothing under the additive model, the window under the interval
/// model. Parked with its vCPU's MMU in a multi-vCPU run.
pub enum Core {
    /// The MMU's latency sums are the time.
    Additive,
    /// The out-of-order window.
    Interval(Box<Interval>),
}

impl Core {
    /// The core model `core` configures, with an L1 load-to-use latency of `l1_latency`
    /// cycles (0 when data references are not modelled). `core` is validated: the interval
    /// model's window is complete.
    pub fn new(core: &CoreConfig, l1_latency: u32) -> Core {
        match core.model {
            CoreModel::Additive => Core::Additive,
            CoreModel::Interval => Core::Interval(Box::new(Interval::new(core, l1_latency))),
        }
    }

    /// Whether the interval model times the run.
    #[inline(always)]
    pub fn is_interval(&self) -> bool {
        matches!(self, Core::Interval(_))
    }

    /// `instrs` instructions without a memory reference dispatch.
    #[inline(always)]
    pub fn compute(&mut self, instrs: u64) {
        if let Core::Interval(c) = self {
            c.compute(instrs);
        }
    }

    /// A reference completed its translation and data access at cost `cost`.
    #[inline(always)]
    pub fn reference(&mut self, instrs: u32, kind: AccessKind, dep: u8, cost: RefCost) {
        if let Core::Interval(c) = self {
            c.reference(instrs, kind, dep, cost);
        }
    }

    /// A reference that hit the L1 TLB completed its data access `data` cycles beyond an L1
    /// hit ([`Interval::hit`]).
    #[inline(always)]
    pub fn hit(&mut self, instrs: u32, kind: AccessKind, dep: u8, data: u64) {
        if let Core::Interval(c) = self {
            c.hit(instrs, kind, dep, data);
        }
    }

    /// A reference's translation attempt at cost `cost` faulted: the window drains behind it.
    #[inline(always)]
    pub fn fault(&mut self, instrs: u32, dep: u8, cost: RefCost) {
        if let Core::Interval(c) = self {
            c.fault(instrs, dep, cost);
        }
    }

    /// Every operation in flight retires before what comes next; returns the cycles that
    /// took (0 under the additive model).
    #[inline(always)]
    pub fn drain(&mut self) -> u64 {
        match self {
            Core::Additive => 0,
            Core::Interval(c) => {
                let before = c.now();
                c.drain();
                whole(c.now()) - whole(before)
            }
        }
    }

    /// Whether references' dependences are known (unknown: every reference is independent).
    pub fn set_dependences(&mut self, known: bool) {
        if let Core::Interval(c) = self {
            c.set_dependences(known);
        }
    }

    /// The interval model's counters (`None` under the additive model).
    pub fn stalls(&self) -> Option<CoreStalls> {
        match self {
            Core::Additive => None,
            Core::Interval(c) => Some(*c.stalls()),
        }
    }

    /// Zeroes the counters (the end of a warm-up); operations in flight stay.
    pub fn reset_stalls(&mut self) {
        if let Core::Interval(c) = self {
            c.reset_stalls();
        }
    }

    /// Adds `o`'s counters to these.
    pub fn absorb(&mut self, o: &Core) {
        if let (Core::Interval(a), Core::Interval(b)) = (self, o) {
            a.absorb(b.stalls());
        }
    }
}
