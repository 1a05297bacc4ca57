//! The interval core model: an out-of-order window over the references' latencies, after the
//! mechanistic interval model (Karkhanis & Smith, "A first-order superscalar processor
//! model", ISCA 2004; Eyerman, Eeckhout, Karkhanis & Smith, "A mechanistic performance model
//! for superscalar out-of-order processors", TOCS 2009; Genbrugge, Eyerman & Eeckhout,
//! "Interval simulation", HPCA 2010) in its reorder-buffer form (Carlson, Heirman, Eyerman,
//! Hur & Eeckhout, "An evaluation of high-level mechanistic core models", TACO 2014 — Sniper's
//! ROB timer), reduced to what a trace of memory references carries.
//!
//! **Dispatch.** Instructions dispatch in order at the base rate, one every `base_cpi` cycles,
//! so the `base` cause stays `instructions × base_CPI` and only the misses' share changes.
//! Instruction `i` dispatches no earlier than instruction `i − rob` retired. Retirement is in
//! order and unlimited in width: an instruction without a memory reference completes when it
//! dispatches, a memory operation when its data (a load) or its translation (a store)
//! arrives, and each retires at the later of its completion and its predecessor's
//! retirement. Only memory operations carry state (a ring of those in flight); the
//! instructions between them advance dispatch in one step.
//!
//! **A reference.** It issues at the later of its dispatch and the completion of the load its
//! address depends on ([`crate::event::MemRef::dep`]; none when the source does not track
//! dependences). Its translation takes the L2-TLB latency on an L1-TLB miss that hits there
//! and the walk's cycles on a walk (or a D-assist's re-walk), which needs one of `walkers`
//! page walkers: a walk that finds them all busy waits for the first to finish. A load's data
//! then takes its latency beyond an L1 hit; a miss needs one of `mshrs` miss-status
//! registers, likewise. A load occupies a load-queue entry from dispatch to retirement; a
//! store a store-queue entry from dispatch until its data is written, which starts at its
//! retirement (a store retires once translated; its write blocks nothing but its entry, and
//! entries free in order, as x86 commits stores). A full queue stalls dispatch. A
//! read-modify-write is a load whose store entry frees at its retirement (its line is there).
//!
//! **The L1 hit's latency** is part of the base CPI for retirement (a load that hits L1 is
//! complete for retirement when translated, as the additive model charges it nothing) and is
//! on the dependence path: a load whose address depends on another issues the L1 load-to-use
//! latency after that load's data arrives, so a chase of L1 hits is latency-bound, as on real
//! cores. Without dependences the interval model is therefore never slower than the additive
//! one (each operation completes no later than it would if every latency before it had been
//! paid in full, which is the additive model's schedule).
//!
//! **Instruction fetches** translate in the front end: an L1-ITLB miss stalls dispatch for its
//! lookup and walk (the I-cache is assumed to hit), while the operations already in the window
//! go on.
//!
//! **Drains.** What cannot overlap — every hypervisor operation, faults, the guest kernel's
//! work, CR3 writes and INVLPG, mode switches, shootdowns, a thread switch — first waits for
//! every operation in flight to retire and every store to be written; its own cycles are then
//! charged as under the additive model, outside this window. A faulting reference's attempt
//! translates (overlapping the older operations), then the window drains behind it, and the
//! retried instruction runs again from an empty window.
//!
//! **Attribution.** Every cycle dispatch stalls is charged to the operation it waits for:
//! translation while that operation translates, data after (Eyerman et al.'s CPI stack); a
//! front-end stall to translation. The stalls and the base cycles are the core's whole time,
//! so the run's causes still sum to its cycles.
//!
//! **Resources** are allocated in program order from pools of "free at" times (the earliest
//! free walker or register): a younger operation never takes a resource an older one holds
//! in the future, which is slightly pessimistic when a later operation issues first.
//!
//! **The queues as counts.** Loads and stores are numbered in dispatch order, and each
//! operation in the window carries the numbers of loads and stores dispatched before its
//! instruction. The load `lq` loads back (number `loads − lq`) is at or after an operation in
//! the window exactly when that operation's count of earlier loads is at most `loads − lq`, so
//! a load finds its queue entry held by the window's oldest operation or a younger one when
//! `loads ≥ front.loads + lq`: one compare, and nothing kept per load. A store's entry frees at
//! the running maximum of the stores' release times, kept per store number in a ring.
//!
//! **Short references.** An L1-TLB hit whose data hit L1 (or a fetch that hit the L1 ITLB)
//! costs nothing beyond the base CPI; when nothing holds it back — the reorder buffer, its
//! queue, the load its address depends on — it completes as it dispatches, retires with its
//! predecessor or at once, and never enters the window. [`Interval::hit`] times it in those
//! few steps and takes the whole path only for the rest (a property test runs random
//! sequences both ways and compares the state).
//!
//! Not modelled: branch mispredictions, I-cache misses, execution-port contention and
//! instruction latencies other than loads', register dependences other than load-to-address,
//! memory disambiguation and store-to-load forwarding, prefetchers, memory bandwidth and
//! DRAM queueing, retirement width.

use super::{fixed, CoreStalls, RefCost, Stall};
use crate::config::CoreConfig;
use crate::event::AccessKind;

/// Data references a dependence may count back (`MemRef::dep` is a byte).
const DEP_SPAN: usize = 256;

/// A memory operation in the window, not yet known to have retired.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    /// The index of its instruction.
    idx: u64,
    /// When it retires (fixed point).
    retire: u64,
    /// When its translation ended: a stall on it is translation before, data after.
    translated: u64,
    /// Loads dispatched before its instruction.
    loads: u64,
    /// Stores dispatched before its instruction.
    stores: u64,
}

/// The window's front index when it is empty: beyond every instruction, and small enough that
/// adding a reorder-buffer size cannot overflow.
const EMPTY: u64 = u64::MAX >> 1;

/// What the window's oldest operation bounds: the first instruction the reorder buffer holds
/// back behind it is `idx + rob`, the first load the load queue holds back `loads + lq`, the
/// first store `stores + sq` ([`EMPTY`] each when the window is empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Front {
    /// Its instruction index.
    idx: u64,
    /// The loads dispatched before its instruction.
    loads: u64,
    /// The stores dispatched before its instruction.
    stores: u64,
}

impl Front {
    const NONE: Front = Front {
        idx: EMPTY,
        loads: EMPTY,
        stores: EMPTY,
    };

    fn of(e: &InFlight) -> Front {
        Front {
            idx: e.idx,
            loads: e.loads,
            stores: e.stores,
        }
    }
}

/// The memory operations in flight, oldest first: a ring of a power-of-two capacity that holds
/// the reorder buffer (an entry is a distinct instruction among the last `rob` dispatched, so
/// it never grows once made), with what its front bounds kept beside it, so that the common
/// tests — does the oldest operation block this instruction, this load, this store — read one
/// field each.
struct Window {
    slots: Box<[InFlight]>,
    /// The slot of the oldest entry.
    head: usize,
    /// Entries held.
    len: usize,
    /// What the oldest entry bounds ([`Front::NONE`] when there is none).
    front: Front,
}

impl Window {
    fn new(rob: usize) -> Self {
        let idle = InFlight {
            idx: EMPTY,
            retire: 0,
            translated: 0,
            loads: EMPTY,
            stores: EMPTY,
        };
        Window {
            slots: vec![idle; rob.next_power_of_two()].into_boxed_slice(),
            head: 0,
            len: 0,
            front: Front::NONE,
        }
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline(always)]
    fn front(&self) -> Option<InFlight> {
        (self.len > 0).then(|| self.slots[self.head])
    }

    #[inline(always)]
    fn pop_front(&mut self) -> Option<InFlight> {
        let h = self.front()?;
        self.head = (self.head + 1) & self.mask();
        self.len -= 1;
        self.front = if self.len > 0 {
            Front::of(&self.slots[self.head])
        } else {
            Front::NONE
        };
        Some(h)
    }

    #[inline(always)]
    fn back_mut(&mut self) -> Option<&mut InFlight> {
        let m = self.mask();
        (self.len > 0).then(|| &mut self.slots[(self.head + self.len - 1) & m])
    }

    fn push_back(&mut self, e: InFlight) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let at = (self.head + self.len) & self.mask();
        self.slots[at] = e;
        if self.len == 0 {
            self.front = Front::of(&e);
        }
        self.len += 1;
    }

    /// Doubles the ring (the window holds at most the reorder buffer, so this is never
    /// reached; it keeps the ring correct whatever the sizes).
    #[cold]
    fn grow(&mut self) {
        let mut slots = vec![self.slots[0]; self.slots.len() * 2].into_boxed_slice();
        for (i, s) in slots.iter_mut().take(self.len).enumerate() {
            *s = self.slots[(self.head + i) & self.mask()];
        }
        self.slots = slots;
        self.head = 0;
    }
}

/// When each store's queue entry frees, by store number: a ring of a power-of-two capacity
/// larger than the store queue, so that the entry a new store takes — that of the store `sq`
/// stores back — is still held, and before `sq` stores it reads a slot never written (0, no
/// later than any time).
struct Released {
    slots: Box<[u64]>,
}

impl Released {
    fn new(sq: usize) -> Self {
        Released {
            slots: vec![0; (sq + 1).next_power_of_two()].into_boxed_slice(),
        }
    }

    #[inline(always)]
    fn slot(&self, store: u64) -> usize {
        store as usize & (self.slots.len() - 1)
    }

    /// When store number `store`'s entry frees (0 for a number before the first store).
    #[inline(always)]
    fn at(&self, store: u64) -> u64 {
        self.slots[self.slot(store)]
    }

    /// Store number `store`'s entry frees at `t`.
    #[inline(always)]
    fn set(&mut self, store: u64, t: u64) {
        let at = self.slot(store);
        self.slots[at] = t;
    }
}

/// One core's out-of-order window (see the module documentation). All times are fixed point
/// ([`super::FRAC_BITS`]); nothing is allocated per reference.
pub struct Interval {
    /// Dispatch interval of one instruction.
    cpi: u64,
    /// Reorder-buffer entries.
    rob: u64,
    /// Load-queue entries.
    lq: u64,
    /// Store-queue entries.
    sq: u64,
    /// The L1 load-to-use latency on a dependence.
    l1: u64,
    /// References' dependences are known.
    deps: bool,
    /// When the last dispatched instruction dispatched.
    now: u64,
    /// Instructions dispatched (the last one's index).
    n: u64,
    /// Loads (and read-modify-writes) dispatched.
    loads: u64,
    /// Stores (and read-modify-writes) dispatched.
    stores: u64,
    /// Loads dispatched before the last dispatched instruction.
    loads_at_n: u64,
    /// Stores dispatched before the last dispatched instruction.
    stores_at_n: u64,
    /// Memory operations in flight, oldest first: at most one per instruction, all within
    /// `rob` instructions of the last dispatched one.
    window: Window,
    /// When the youngest memory operation retires.
    last_retire: u64,
    /// When the youngest store's entry frees.
    last_release: u64,
    /// When each store-queue entry frees, by the number of the store that holds it.
    released: Released,
    /// When each miss-status register frees.
    mshr: Pool,
    /// When each page walker frees.
    walkers: Pool,
    /// When the last data references' values were available to dependent addresses, by data
    /// reference number modulo [`DEP_SPAN`].
    completions: [u64; DEP_SPAN],
    /// Data references seen.
    data_refs: u64,
    stalls: CoreStalls,
}

/// A pool of identical units (miss-status registers, page walkers) as the times each frees,
/// kept in ascending order in a ring. Only the times matter, not which unit has which: an
/// operation takes the unit that frees first and holds it until it ends, so the pool is the
/// multiset of free times with its least replaced by the operation's end. Kept sorted, that
/// least is the ring's front, and an end no earlier than every other (operations of one
/// latency taken in issue order) goes in where the front was, without moving any; a
/// scan for the least took a compare and two conditional moves per unit on every miss or
/// walk.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pool {
    /// The free times, ascending from `head` around the ring.
    free: Box<[u64]>,
    /// The slot of the earliest.
    head: usize,
}

impl Pool {
    /// `units` units, all free at time 0.
    fn new(units: usize) -> Pool {
        Pool {
            free: vec![0; units.max(1)].into_boxed_slice(),
            head: 0,
        }
    }

    /// An operation ready at `t` takes the unit that frees first and holds it for `hold`:
    /// returns when it starts (the later of `t` and that unit's free time) and ends.
    #[inline(always)]
    fn take(&mut self, t: u64, hold: u64) -> (u64, u64) {
        let n = self.free.len();
        let start = t.max(self.free[self.head]);
        let end = start + hold;
        // The front's slot becomes the back: the others stay in order from the next slot.
        let mut at = self.head;
        self.head = if self.head + 1 == n { 0 } else { self.head + 1 };
        // Move the later ones up one slot until `end` fits.
        while at != self.head {
            let before = if at == 0 { n - 1 } else { at - 1 };
            if self.free[before] <= end {
                break;
            }
            self.free[at] = self.free[before];
            at = before;
        }
        self.free[at] = end;
        (start, end)
    }

    /// The free times in ascending order.
    #[cfg(test)]
    fn times(&self) -> Vec<u64> {
        let n = self.free.len();
        (0..n).map(|i| self.free[(self.head + i) % n]).collect()
    }
}

impl Interval {
    /// The window `core` describes (its sizes validated present and positive), with an L1
    /// load-to-use latency of `l1_latency` cycles on the dependence path.
    pub fn new(core: &CoreConfig, l1_latency: u32) -> Interval {
        let size = |v: Option<u32>| v.unwrap_or(1).max(1) as usize;
        Interval {
            cpi: (core.base_cpi * (1u64 << super::FRAC_BITS) as f64).round() as u64,
            rob: size(core.rob) as u64,
            lq: size(core.load_queue) as u64,
            sq: size(core.store_queue) as u64,
            l1: fixed(l1_latency as u64),
            deps: false,
            now: 0,
            n: 0,
            loads: 0,
            stores: 0,
            loads_at_n: 0,
            stores_at_n: 0,
            window: Window::new(size(core.rob)),
            last_retire: 0,
            last_release: 0,
            released: Released::new(size(core.store_queue)),
            mshr: Pool::new(size(core.mshrs)),
            walkers: Pool::new(size(core.walkers)),
            completions: [0; DEP_SPAN],
            data_refs: 0,
            stalls: CoreStalls::default(),
        }
    }

    /// Whether references' dependences are known; unknown, every reference is independent.
    pub fn set_dependences(&mut self, known: bool) {
        self.deps = known;
    }

    /// The counters so far.
    pub fn stalls(&self) -> &CoreStalls {
        &self.stalls
    }

    /// Zeroes the counters; operations in flight stay.
    pub fn reset_stalls(&mut self) {
        self.stalls = CoreStalls::default();
    }

    /// Adds another core's counters to these.
    pub fn absorb(&mut self, o: &CoreStalls) {
        self.stalls.absorb(o);
    }

    /// The time the core has reached: when the last instruction dispatched, or the end of the
    /// last drain (fixed point).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// `instrs` instructions without a memory reference dispatch.
    #[inline(always)]
    pub fn compute(&mut self, instrs: u64) {
        self.advance(instrs);
    }

    /// A reference of `kind` after `instrs` instructions (its own included), its address
    /// depending on the `dep`-th data reference before it, completed at `cost`.
    ///
    /// Inlined where it is called: what a short operation (a TLB hit, an L1 hit, nothing in
    /// the window that blocks it) does is a few additions and two ring writes, and every step
    /// that waits, queues or scans a pool is a call of its own, taken only when its test says
    /// it is needed.
    #[inline(always)]
    pub fn reference(&mut self, instrs: u32, kind: AccessKind, dep: u8, cost: RefCost) {
        self.advance(instrs as u64);
        if kind == AccessKind::Fetch {
            self.fetch(cost);
            return;
        }
        let load = kind != AccessKind::Store;
        let store = kind.is_write();
        if load {
            self.retire_loads();
        }
        if store {
            self.retire_stores();
            self.wait_data(self.store_entry_free(), Stall::StoreQueue);
        }
        let before = self.last_retire;
        let translated = self.translate(self.issue(dep), cost);
        let (retire, completion, release) = if load {
            let done = if cost.data > 0 {
                self.miss(translated, cost.data)
            } else {
                translated
            };
            let retire = self.last_retire.max(done);
            (retire, done + self.l1, retire)
        } else {
            let retire = self.last_retire.max(translated);
            let written = if cost.data > 0 {
                self.miss(retire, cost.data)
            } else {
                retire
            };
            (retire, translated, written)
        };
        self.record(load, store, retire, release, completion);
        // An operation that retires with its predecessor never blocks dispatch on its own:
        // the instructions it would block are behind those its predecessor blocks, which
        // wait for the same moment. It needs no place in the window, nor does one that has
        // retired already.
        if retire > before && retire > self.now {
            self.enter(retire, translated);
        }
    }

    /// A reference that hit the L1 TLB, its data `data` cycles beyond an L1 hit: timed as
    /// [`reference`](Self::reference) times it, through [`short`](Self::short) when it waits
    /// for nothing.
    #[inline(always)]
    pub fn hit(&mut self, instrs: u32, kind: AccessKind, dep: u8, data: u64) {
        if data != 0 || !self.short(instrs, kind, dep) {
            self.reference_out_of_line(
                instrs,
                kind,
                dep,
                RefCost {
                    data,
                    ..RefCost::default()
                },
            );
        }
    }

    #[inline(never)]
    fn reference_out_of_line(&mut self, instrs: u32, kind: AccessKind, dep: u8, cost: RefCost) {
        self.reference(instrs, kind, dep, cost);
    }

    /// Times a reference that costs nothing beyond the base CPI (an L1-TLB hit and an L1 hit,
    /// or a fetch that hit the L1 ITLB), the first of its instruction, when nothing holds it
    /// back — the reorder buffer, the load or store queue, the load its address depends on —
    /// and says whether it did;
    /// otherwise it changes nothing. Such a reference completes when it dispatches, so it
    /// retires with its predecessor or at once and never enters the window: this is what
    /// [`reference`](Self::reference) does for it, without the steps that cannot apply.
    #[inline(always)]
    fn short(&mut self, instrs: u32, kind: AccessKind, dep: u8) -> bool {
        let k = instrs as u64;
        // A reference of its own instruction (`instrs` > 0, nearly all of them): the loads and
        // stores before its instruction are those counted so far.
        if k == 0 || self.rob_blocks(self.n + k) {
            return false;
        }
        let t = self.now + k * self.cpi;
        let fetch = kind == AccessKind::Fetch;
        let load = !fetch && kind != AccessKind::Store;
        let store = kind.is_write();
        if (load && self.load_queue_held())
            || (store && (self.store_queue_held() || self.store_entry_free() > t))
            || (!fetch && self.ready(dep) > t)
        {
            return false;
        }
        self.advance(k);
        if fetch {
            return true;
        }
        let retire = self.last_retire.max(t);
        self.record(
            load,
            store,
            retire,
            retire,
            if load { t + self.l1 } else { t },
        );
        true
    }

    /// A data operation dispatched: it retires at `retire`, a store's entry frees at
    /// `release` (or a later one's before it), and its value is available to dependent
    /// addresses at `completion`.
    #[inline(always)]
    fn record(&mut self, load: bool, store: bool, retire: u64, release: u64, completion: u64) {
        self.last_retire = retire;
        self.loads += load as u64;
        if store {
            self.last_release = self.last_release.max(release);
            self.released.set(self.stores, self.last_release);
            self.stores += 1;
        }
        self.completions[(self.data_refs % DEP_SPAN as u64) as usize] = completion;
        self.data_refs += 1;
    }

    /// An instruction fetch translated at `cost`: the front end waits for its translation.
    #[inline(never)]
    fn fetch(&mut self, cost: RefCost) {
        let t = self.translate(self.now, cost);
        self.front_end(t);
    }

    /// A reference's translation attempt faulted: its instruction dispatches after `instrs`
    /// instructions, its attempt at `cost` (lookup and walk) runs beside the older operations,
    /// and the window drains behind it before the fault is handled. The retried access is a
    /// [`reference`](Self::reference) of 0 instructions.
    pub fn fault(&mut self, instrs: u32, dep: u8, cost: RefCost) {
        self.advance(instrs as u64);
        let translated = self.translate(self.issue(dep), cost);
        self.drain();
        self.front_end_drain(translated);
    }

    /// Every operation in flight retires and every store is written.
    pub fn drain(&mut self) {
        while let Some(h) = self.window.pop_front() {
            self.wait(h, Stall::Drain);
        }
        self.wait_data(self.last_release, Stall::Drain);
    }

    /// Dispatches the next `k` instructions, each blocked until the instruction `rob` before
    /// it has retired. When the oldest operation in flight blocks none of them (the common
    /// case), that is one addition.
    #[inline(always)]
    fn advance(&mut self, k: u64) {
        if k > 0 {
            self.loads_at_n = self.loads;
            self.stores_at_n = self.stores;
        }
        let target = self.n + k;
        if !self.rob_blocks(target) {
            self.now += k * self.cpi;
            self.n = target;
        } else {
            self.advance_blocked(target);
        }
    }

    /// [`advance`](Self::advance) to instruction `target` past operations that block it.
    #[inline(never)]
    fn advance_blocked(&mut self, target: u64) {
        while let Some(h) = self.window.front() {
            // The first instruction `h` blocks; past the last dispatched one, since every
            // operation that blocked an instruction already dispatched has left the window.
            let blocked = h.idx + self.rob;
            if blocked > target {
                break;
            }
            self.window.pop_front();
            self.now += (blocked - self.n) * self.cpi;
            self.n = blocked;
            self.wait(h, Stall::Rob);
        }
        self.now += (target - self.n) * self.cpi;
        self.n = target;
    }

    /// When a reference's address is known: its dispatch, or the completion of the load it
    /// depends on, whichever is later.
    #[inline(always)]
    fn issue(&self, dep: u8) -> u64 {
        self.now.max(self.ready(dep))
    }

    /// When the value a reference's address depends on (the `dep`-th data reference before
    /// it) was available; 0 when it depends on none or its dependences are unknown.
    #[inline(always)]
    fn ready(&self, dep: u8) -> u64 {
        let d = dep as u64;
        if self.deps && d > 0 && d <= self.data_refs {
            self.completions[((self.data_refs - d) % DEP_SPAN as u64) as usize]
        } else {
            0
        }
    }

    /// When a translation that starts at `t` ends: after the L2-TLB lookup, and a walk
    /// waiting for a walker.
    #[inline(always)]
    fn translate(&mut self, t: u64, cost: RefCost) -> u64 {
        let t = t + fixed(cost.lookup);
        if cost.walked {
            self.walk(t, cost.walk)
        } else {
            t
        }
    }

    /// When a walk of `latency` cycles that is ready at `t` ends, waiting for a page walker.
    #[inline(never)]
    fn walk(&mut self, t: u64, latency: u64) -> u64 {
        let (start, end) = self.walkers.take(t, fixed(latency));
        self.stalls.walker_wait += start - t;
        end
    }

    /// When a miss of `latency` cycles beyond L1 that starts at `t` returns, waiting for a
    /// miss-status register.
    #[inline(never)]
    fn miss(&mut self, t: u64, latency: u64) -> u64 {
        let (start, end) = self.mshr.take(t, fixed(latency));
        self.stalls.mshr_wait += start - t;
        end
    }

    /// The operation of the last dispatched instruction, retiring at `retire` (after the
    /// current time), joins the window — merged with an earlier reference of the same
    /// instruction.
    #[inline(never)]
    fn enter(&mut self, retire: u64, translated: u64) {
        if let Some(last) = self.window.back_mut() {
            if last.idx == self.n {
                last.retire = retire;
                last.translated = last.translated.max(translated);
                return;
            }
        }
        self.window.push_back(InFlight {
            idx: self.n,
            retire,
            translated,
            loads: self.loads_at_n,
            stores: self.stores_at_n,
        });
    }

    /// Whether instruction `target` waits for the window's oldest operation (it is `rob` or
    /// more instructions younger).
    #[inline(always)]
    fn rob_blocks(&self, target: u64) -> bool {
        target >= self.window.front.idx + self.rob
    }

    /// Whether the next load's queue entry is held by the window's oldest operation or a
    /// younger one (see [`retire_loads`](Self::retire_loads)).
    #[inline(always)]
    fn load_queue_held(&self) -> bool {
        self.loads >= self.window.front.loads + self.lq
    }

    /// Whether the next store's queue entry is held by the window's oldest operation or a
    /// younger one.
    #[inline(always)]
    fn store_queue_held(&self) -> bool {
        self.stores >= self.window.front.stores + self.sq
    }

    /// When the entry the next store takes — that of the store `sq` stores back — frees.
    #[inline(always)]
    fn store_entry_free(&self) -> u64 {
        self.released.at(self.stores.wrapping_sub(self.sq))
    }

    /// A load dispatches: it waits for the load `lq` loads back to retire, and with it every
    /// operation in the window no younger than that load — those before whose instruction at
    /// most `loads − lq` loads were dispatched. When the window's oldest operation is younger
    /// (the common case), that is one compare.
    #[inline(always)]
    fn retire_loads(&mut self) {
        if self.load_queue_held() {
            self.retire_blocked(self.loads - self.lq, |e| e.loads, Stall::LoadQueue);
        }
    }

    /// A store dispatches: it waits for the store `sq` stores back to retire, as
    /// [`retire_loads`](Self::retire_loads) for loads.
    #[inline(always)]
    fn retire_stores(&mut self) {
        if self.store_queue_held() {
            self.retire_blocked(self.stores - self.sq, |e| e.stores, Stall::StoreQueue);
        }
    }

    /// Dispatch waits for the operations in the window whose `count` (the loads or stores
    /// dispatched before their instruction) is at most `through`.
    #[inline(never)]
    fn retire_blocked(&mut self, through: u64, count: impl Fn(&InFlight) -> u64, why: Stall) {
        while let Some(h) = self.window.front() {
            if count(&h) > through {
                break;
            }
            self.window.pop_front();
            self.wait(h, why);
        }
    }

    /// Dispatch waits for `h` to retire.
    #[inline]
    fn wait(&mut self, h: InFlight, why: Stall) {
        if h.retire > self.now {
            let split = h.translated.clamp(self.now, h.retire);
            self.stalls.translation += split - self.now;
            self.stalls.data += h.retire - split;
            self.stalls.by_reason[why as usize] += h.retire - self.now;
            self.now = h.retire;
        }
    }

    /// Dispatch waits until `t` for a store's data.
    #[inline(always)]
    fn wait_data(&mut self, t: u64, why: Stall) {
        if t > self.now {
            self.stall_data(t, why);
        }
    }

    #[inline(never)]
    fn stall_data(&mut self, t: u64, why: Stall) {
        self.stalls.data += t - self.now;
        self.stalls.by_reason[why as usize] += t - self.now;
        self.now = t;
    }

    /// The front end waits until `t` for an instruction's translation.
    fn front_end(&mut self, t: u64) {
        self.translation_stall(t, Stall::Fetch);
    }

    /// The drained window waits until `t` for the faulting attempt's translation.
    fn front_end_drain(&mut self, t: u64) {
        self.translation_stall(t, Stall::Drain);
    }

    fn translation_stall(&mut self, t: u64, why: Stall) {
        if t > self.now {
            self.stalls.translation += t - self.now;
            self.stalls.by_reason[why as usize] += t - self.now;
            self.now = t;
        }
    }
}

#[cfg(test)]
mod tests {
    //! Exact timings where the model is exact, each written by hand from the module's
    //! definition (not by running the code): base CPI 1, so instruction `j` dispatches at
    //! cycle `j` unless it stalls; L1 load-to-use latency 0 unless said.

    use super::*;
    use crate::config::CoreModel;
    use crate::timing::whole;
    use proptest::prelude::*;

    fn core(rob: u32, lq: u32, sq: u32, mshrs: u32, walkers: u32) -> Interval {
        let c = CoreConfig {
            base_cpi: 1.0,
            freq_ghz: 1.0,
            cores: 1,
            model: CoreModel::Interval,
            rob: Some(rob),
            load_queue: Some(lq),
            store_queue: Some(sq),
            mshrs: Some(mshrs),
            walkers: Some(walkers),
        };
        let mut i = Interval::new(&c, 0);
        i.set_dependences(true);
        i
    }

    fn miss(l: u64) -> RefCost {
        RefCost {
            data: l,
            ..RefCost::default()
        }
    }

    fn walk(w: u64) -> RefCost {
        RefCost {
            walked: true,
            walk: w,
            ..RefCost::default()
        }
    }

    /// `k` references of `kind`, one instruction each, each depending on the `dep`-th before.
    fn refs(i: &mut Interval, k: u64, kind: AccessKind, dep: u8, cost: RefCost) {
        for _ in 0..k {
            i.reference(1, kind, dep, cost);
        }
    }

    /// The time after a final drain, in cycles.
    fn end(mut i: Interval) -> (u64, CoreStalls) {
        i.drain();
        (whole(i.now()), *i.stalls())
    }

    #[test]
    fn a_chain_of_dependent_misses_serialises() {
        // Load j (j = 1..k) dispatches at j, issues when load j-1's data is back:
        // done_1 = 1 + L, done_j = done_{j-1} + L, so done_k = 1 + kL.
        let (k, l) = (10u64, 200u64);
        let mut i = core(256, 64, 64, 16, 4);
        refs(&mut i, k, AccessKind::Load, 1, miss(l));
        let (t, s) = end(i);
        assert_eq!(t, 1 + k * l);
        // Of it, k cycles are base: the stall is k·L less the k-1 dispatch cycles it hid.
        assert_eq!(whole(s.data), k * l - (k - 1));
        assert_eq!(s.translation, 0);
    }

    #[test]
    fn a_chain_of_l1_hits_is_latency_bound() {
        // Each load's address is the previous load's value, 4 cycles after it issued:
        // issue_j = 1 + 4(j-1); the last retires at its issue.
        let (k, lat) = (50u64, 4u32);
        let mut c = core(256, 64, 64, 16, 4);
        c.l1 = fixed(lat as u64);
        refs(&mut c, k, AccessKind::Load, 1, RefCost::default());
        let (t, _) = end(c);
        assert_eq!(t, 1 + 4 * (k - 1));
    }

    #[test]
    fn independent_misses_within_the_window_overlap() {
        // k <= mshrs loads dispatch at 1..k and each returns L later: the last at k + L.
        let (k, l) = (8u64, 300u64);
        let mut i = core(256, 64, 64, 8, 4);
        refs(&mut i, k, AccessKind::Load, 0, miss(l));
        let (t, s) = end(i);
        assert_eq!(t, k + l);
        assert_eq!(whole(s.data), l);
    }

    #[test]
    fn misses_beyond_the_mshrs_take_turns() {
        // m registers, k = c·m misses: miss q·m + r (r = 1..m) starts when miss (q-1)·m + r
        // frees it, so it returns at r + (q+1)·L; the last (q = c-1, r = m) at m + c·L.
        let (m, c, l) = (4u64, 5u64, 100u64);
        let k = m * c;
        let mut i = core(256, 64, 64, m as u32, 4);
        refs(&mut i, k, AccessKind::Load, 0, miss(l));
        let (t, s) = end(i);
        assert_eq!(t, m + k.div_ceil(m) * l);
        // Miss q·m + r dispatched at q·m + r and waited until r + q·L: q·(L - m) cycles,
        // summed over r = 1..m and q = 1..c-1.
        assert_eq!(whole(s.mshr_wait), m * (l - m) * c * (c - 1) / 2);
    }

    #[test]
    fn walks_beyond_the_walkers_queue() {
        // w walkers, k = c·w walks of W cycles, data hitting L1: walk q·w + r (r = 1..w)
        // ends at r + (q+1)·W; the last at w + c·W.
        let (w, c, wl) = (2u64, 6u64, 150u64);
        let k = w * c;
        let mut i = core(256, 64, 64, 16, w as u32);
        refs(&mut i, k, AccessKind::Load, 0, walk(wl));
        let (t, s) = end(i);
        assert_eq!(t, w + k.div_ceil(w) * wl);
        assert_eq!(whole(s.translation), t - k);
        assert_eq!(s.data, 0);
    }

    #[test]
    fn a_full_reorder_buffer_stalls_dispatch() {
        // A miss at instruction 1 returns at 1 + L; instruction 1 + R waits for it, so N more
        // instructions end at (1 + L) + (N - R) instead of 1 + N.
        let (r, l, n) = (32u64, 500u64, 1000u64);
        let mut i = core(r as u32, 64, 64, 16, 4);
        i.reference(1, AccessKind::Load, 0, miss(l));
        i.compute(n);
        assert_eq!(whole(i.now()), 1 + l + n - r);
        let s = *i.stalls();
        assert_eq!(whole(s.by_reason[Stall::Rob as usize]), l - r);
        assert_eq!(whole(s.data), l - r);
    }

    #[test]
    fn two_chases_overlap_while_both_loads_fit_in_the_window() {
        // The window probe of `vmmu validate host`: chases p and q alternate, each load
        // depending on the one two references back and preceded by `gap` other instructions.
        // While the two loads and the gap between them fit (gap + 2 <= rob) q's miss overlaps
        // p's and an iteration costs one latency (plus the dispatch the full window delays,
        // at most rob cycles); beyond, q waits for p to retire and an iteration costs two.
        let (rob, l) = (64u32, 1000u64);
        let period = |gap: u32| {
            let time = |n: u64| {
                let mut i = core(rob, 64, 64, 16, 4);
                for _ in 0..2 * n {
                    i.reference(gap + 1, AccessKind::Load, 2, miss(l));
                }
                end(i).0
            };
            (time(20) - time(10)) / 10
        };
        for gap in 1..2 * rob {
            let p = period(gap);
            if gap + 2 <= rob {
                assert!(
                    (l..=l + u64::from(rob)).contains(&p),
                    "gap {gap}: {p} cycles"
                );
            } else {
                assert!(p >= 2 * l, "gap {gap}: {p} cycles");
            }
        }
    }

    #[test]
    fn a_full_load_queue_stalls_dispatch() {
        // Two load-queue entries: the third load waits for the first to retire (1 + L).
        let l = 100u64;
        let mut i = core(256, 2, 64, 16, 4);
        refs(&mut i, 3, AccessKind::Load, 0, miss(l));
        // Load 3 dispatches at 1 + L and returns L later.
        let (t, s) = end(i);
        assert_eq!(t, 1 + 2 * l);
        assert_eq!(whole(s.by_reason[Stall::LoadQueue as usize]), l - 2);
    }

    #[test]
    fn stores_retire_when_translated_and_write_behind() {
        // Stores that miss retire at once; their writes overlap and only the final drain
        // waits for the last one: k stores at 1..k, the last written at k + L.
        let (k, l) = (6u64, 200u64);
        let mut i = core(256, 64, 64, 16, 4);
        refs(&mut i, k, AccessKind::Store, 0, miss(l));
        assert_eq!(whole(i.now()), k);
        let (t, _) = end(i);
        assert_eq!(t, k + l);
    }

    #[test]
    fn an_exit_drains_the_window() {
        // A miss at 1 (returns 1 + L), then M instructions: without a drain they hide under
        // the miss (M < L, M < R); with a drain after the miss they come after it.
        let (l, m) = (400u64, 100u64);
        let mut hidden = core(256, 64, 64, 16, 4);
        hidden.reference(1, AccessKind::Load, 0, miss(l));
        hidden.compute(m);
        let (t_hidden, _) = end(hidden);
        assert_eq!(t_hidden, 1 + l);
        let mut drained = core(256, 64, 64, 16, 4);
        drained.reference(1, AccessKind::Load, 0, miss(l));
        drained.drain();
        drained.compute(m);
        let (t_drained, s) = end(drained);
        assert_eq!(t_drained, 1 + l + m);
        assert_eq!(whole(s.by_reason[Stall::Drain as usize]), l);
    }

    #[test]
    fn a_faulting_walk_drains_and_the_retry_starts_empty() {
        // A miss at 1 (returns 1 + L); the next reference's walk of W faults: the window
        // drains (to 1 + L, after the walk ended at 2 + W < 1 + L), then the retry's walk of
        // W runs from an empty window: done at 1 + L + W.
        let (l, w) = (300u64, 100u64);
        let mut i = core(256, 64, 64, 16, 4);
        i.reference(1, AccessKind::Load, 0, miss(l));
        i.fault(1, 0, walk(w));
        assert_eq!(whole(i.now()), 1 + l);
        i.reference(0, AccessKind::Load, 0, walk(w));
        let (t, s) = end(i);
        assert_eq!(t, 1 + l + w);
        assert_eq!(whole(s.translation), w);
    }

    #[test]
    fn an_itlb_miss_stalls_the_front_end_only() {
        // A data miss at 1 (returns 1 + L); a fetch at 2 walks for W < L: dispatch resumes at
        // 2 + W while the miss is still out; the final drain waits for it.
        let (l, w) = (300u64, 50u64);
        let mut i = core(256, 64, 64, 16, 4);
        i.reference(1, AccessKind::Load, 0, miss(l));
        i.reference(1, AccessKind::Fetch, 0, walk(w));
        assert_eq!(whole(i.now()), 2 + w);
        let (t, s) = end(i);
        assert_eq!(t, 1 + l);
        assert_eq!(whole(s.by_reason[Stall::Fetch as usize]), w);
    }

    #[test]
    fn unknown_dependences_are_independent() {
        // The same chain as a_chain_of_dependent_misses_serialises, dependences unknown:
        // the k misses overlap (k <= mshrs) and end at k + L.
        let (k, l) = (10u64, 200u64);
        let mut i = core(256, 64, 64, 16, 4);
        i.set_dependences(false);
        refs(&mut i, k, AccessKind::Load, 1, miss(l));
        let (t, _) = end(i);
        assert_eq!(t, k + l);
    }

    /// Everything a reference changes, to compare two cores.
    fn state(i: &Interval) -> impl PartialEq + std::fmt::Debug {
        let window: Vec<_> = (0..i.window.len)
            .map(|k| {
                let e = i.window.slots[(i.window.head + k) & i.window.mask()];
                (e.idx, e.retire, e.translated, e.loads, e.stores)
            })
            .collect();
        (
            (i.now, i.n, i.loads, i.stores, i.loads_at_n, i.stores_at_n),
            (i.last_retire, i.last_release, i.data_refs, i.window.front),
            window,
            i.released.slots.to_vec(),
            i.completions.to_vec(),
            (i.mshr.times(), i.walkers.times(), i.stalls),
        )
    }

    proptest! {
        /// [`Interval::hit`] leaves exactly the state [`Interval::reference`] leaves, over random
        /// sequences of L1-TLB hits that hit or miss L1, with dependences, small queues and a
        /// small reorder buffer (so that every limit of a short reference is reached), walks
        /// and drains between them.
        #[test]
        fn a_short_reference_is_timed_as_the_whole_path_times_it(
            sizes in (2u32..12, 1u32..5, 1u32..5, 1u32..4),
            ops in proptest::collection::vec(
                (0u8..12, 0u32..4, 0u8..4, 0u8..4, prop_oneof![3 => Just(0u64), 1 => 1u64..80]),
                1..300,
            ),
        ) {
            let (rob, lq, sq, mshrs) = sizes;
            let mut a = core(rob, lq, sq, mshrs, 2);
            let mut b = core(rob, lq, sq, mshrs, 2);
            a.l1 = fixed(3);
            b.l1 = fixed(3);
            for (op, instrs, kind, dep, data) in ops {
                let kind = [AccessKind::Load, AccessKind::Store, AccessKind::Modify, AccessKind::Fetch]
                    [kind as usize];
                let data = if kind == AccessKind::Fetch { 0 } else { data };
                match op {
                    0 => {
                        a.drain();
                        b.drain();
                    }
                    1 => {
                        a.reference(instrs, kind, dep, walk(40));
                        b.reference(instrs, kind, dep, walk(40));
                    }
                    _ => {
                        a.hit(instrs, kind, dep, data);
                        b.reference(instrs, kind, dep, miss(data));
                    }
                }
                prop_assert_eq!(state(&a), state(&b));
            }
        }

        /// A pool is the multiset of its units' free times with the least replaced by each
        /// operation's end: against a plain list scanned for its least (the first of equals),
        /// every operation starts and ends at the same times and the two hold the same times,
        /// whatever the units, readiness and holding times (equal ends, ends earlier than
        /// others, one unit).
        #[test]
        fn a_pool_is_its_free_times_with_the_least_replaced(
            units in 1usize..12,
            ops in proptest::collection::vec((0u64..400, 0u64..120), 0..200),
        ) {
            let mut pool = Pool::new(units);
            let mut model = vec![0u64; units];
            for (t, hold) in ops {
                let least = (0..units).min_by_key(|&i| model[i]).unwrap();
                let start = t.max(model[least]);
                model[least] = start + hold;
                prop_assert_eq!(pool.take(t, hold), (start, start + hold));
                let mut sorted = model.clone();
                sorted.sort_unstable();
                prop_assert_eq!(pool.times(), sorted);
            }
        }

        /// The window's ring is a double-ended queue of its entries: whatever the sequence
        /// of pushes, front pops and changes to the back entry (growing past its capacity
        /// included), its front, back and front index are a `VecDeque`'s.
        #[test]
        fn the_window_ring_is_a_deque(
            rob in 1usize..10,
            ops in proptest::collection::vec((0u8..3, 0u64..1000), 0..200),
        ) {
            let mut ring = Window::new(rob);
            let mut model = std::collections::VecDeque::new();
            for (k, (op, v)) in ops.into_iter().enumerate() {
                let e = InFlight {
                    idx: k as u64,
                    retire: v,
                    translated: v / 2,
                    loads: k as u64 / 2,
                    stores: k as u64 / 3,
                };
                match op {
                    0 => {
                        ring.push_back(e);
                        model.push_back(e);
                    }
                    1 => {
                        let (a, b) = (ring.pop_front(), model.pop_front());
                        prop_assert_eq!(a.map(|e| (e.idx, e.retire)), b.map(|e| (e.idx, e.retire)));
                    }
                    _ => {
                        if let (Some(a), Some(b)) = (ring.back_mut(), model.back_mut()) {
                            a.retire = v;
                            b.retire = v;
                        }
                    }
                }
                prop_assert_eq!(ring.len, model.len());
                let front = model.front().map(|e| (e.idx, e.retire, e.translated));
                prop_assert_eq!(ring.front().map(|e| (e.idx, e.retire, e.translated)), front);
                prop_assert_eq!(ring.front, model.front().map_or(Front::NONE, Front::of));
                let back = model.back().map(|e| (e.idx, e.retire));
                prop_assert_eq!(ring.back_mut().map(|e| (e.idx, e.retire)), back);
            }
        }
    }
}
