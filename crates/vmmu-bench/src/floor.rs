//! A floor for the `random-64m-native` row: the same model as vmmu's native paging on the
//! `bhargava08` machine, written as leanly as it can be, to measure what an implementation
//! with nothing but the model's essential work costs on this host (docs/performance.md, "A
//! floor for the native random row, measured"). It is not vmmu and shares none of its
//! structures' code: it is a separate, deliberately narrow implementation of one
//! configuration, checked against vmmu's counts by this module's tests.
//!
//! What it models, each rule the one vmmu applies (crates/vmmu-core/src/sim/mod.rs, mmu.rs,
//! walk/, paging/descent.rs, hw/*.rs):
//! - per reference: the L1 DTLB (64 entries, fully associative), on a miss the L2 TLB's 4 KiB
//!   array (512 entries, 4-way, set = page number mod 128; its 2 MiB array never holds an
//!   entry here and is not modelled); an L2 hit is copied into the L1 DTLB and costs the L2
//!   TLB latency (5 cycles); a store that finds a clean entry re-walks (the D-assist);
//! - the walk of the 4-level guest tables: each level's entry referenced once, levels 4–2
//!   through the page-walk cache (24 entries, fully associative, keyed by the entry's
//!   physical address; design 2d+nt with `cache_g_l1 = false`, so level 1 never uses it), a
//!   PWC miss (and level 1 always) served by the caches from L2 and then filled into the PWC;
//!   the PWC costs 2 cycles per lookup, a cache level its latency; the accessed bit set where
//!   clear at every level and the dirty bit at the leaf for a store, each such write one more
//!   cache access to the entry (counted as an A/D update, not as a walk reference); the
//!   translation filled into the L2 TLB and then the L1 DTLB (replacing an entry of the same
//!   page, else evicting the least recently used);
//! - the data reference through the caches from L1: L1 64 KiB 2-way, L2 512 KiB 16-way, L3
//!   2 MiB 32-way, 64-byte lines, set = line number mod sets; a level that misses is filled;
//!   no inclusion; its latency beyond an L1 hit is data cycles;
//! - exact LRU everywhere.
//!
//! How it is lean: every set is an array of tags with its recency order as a circular linked
//! list of ways beside it ([`Set`]: a miss moves the head one step back, a hit relinks one
//! way); a lookup compares four ways at a time with SSE2 into a bit mask (the module's one
//! `unsafe` block, in [`find`]), so a hit needs no second scan; tags are `u32`
//! (page numbers, line numbers, entry numbers: [`Floor::from_sim`] checks they fit); storage is
//! fixed-size arrays allocated once; the guest tables are copied out of vmmu after the set-up
//! phase into flat 512-entry arrays, each non-leaf entry with the index of its next table
//! beside it, so the walk reads no hash map; no statistics beyond the counters compared.
//!
//! The nested floor (floor_nested.rs) is built of the same sets, TLB and cache arrays, PWC and
//! table copies, made visible to it here.
//!
//! What it does not handle, and refuses rather than gets wrong: anything but native paging on
//! this machine, set-up that already used the TLBs or caches, large pages, read-only mappings,
//! instruction fetches, events other than references after the set-up, and references outside
//! the mapped region (vmmu would fault).

use vmmu_core::config::{self, Mode};
use vmmu_core::event::{Event, EventSource, BATCH_EVENTS};
use vmmu_core::mem::{PhysAddr, PhysMem};
use vmmu_core::paging::{Geometry, Pte};
use vmmu_core::sim::Simulator;
use vmmu_core::{Error, Result};

/// An empty way (no page, line or entry number reaches it: [`Floor::from_sim`] and
/// [`NestedFloor::from_sim`](crate::floor_nested::NestedFloor::from_sim) check).
pub(crate) const EMPTY: u32 = u32::MAX;

/// The way of `tags` holding `t`, if any: SSE2 compares of four ways each, sixteen ways'
/// results packed into one 16-bit mask, the way the mask's lowest bit, so a hit needs no
/// second scan.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn find<const W: usize>(tags: &[u32; W], t: u32) -> Option<usize> {
    use std::arch::x86_64::*;
    let mut m = 0u64;
    let mut i = 0;
    // SAFETY: the intrinsics need SSE2, which this function is compiled only with (the cfg
    // above; x86-64 always has it); each unaligned load reads four ways from `i`, inside
    // `tags` by its loop's condition. Safe code compiles this to a scan, or to a reduction
    // that says whether but not where; the mask pays (docs/performance.md, "A floor for the
    // native random row, measured").
    unsafe {
        let k = _mm_set1_epi32(t as i32);
        let p = tags.as_ptr();
        let eq = |j: usize| _mm_cmpeq_epi32(_mm_loadu_si128(p.add(j).cast()), k);
        while i + 16 <= W {
            let lo = _mm_packs_epi32(eq(i), eq(i + 4));
            let hi = _mm_packs_epi32(eq(i + 8), eq(i + 12));
            m |= (_mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u64) << i;
            i += 16;
        }
        while i + 4 <= W {
            m |= (_mm_movemask_ps(_mm_castsi128_ps(eq(i))) as u64) << i;
            i += 4;
        }
    }
    while i < W {
        m |= ((tags[i] == t) as u64) << i;
        i += 1;
    }
    (m != 0).then(|| m.trailing_zeros() as usize)
}

/// The way of `tags` holding `t`, if any (a scan, where SSE2 is not known to be there).
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline(always)]
fn find<const W: usize>(tags: &[u32; W], t: u32) -> Option<usize> {
    tags.iter().position(|&x| x == t)
}

/// One set of `W` ways: their tags by way, and their recency order as a circular doubly linked
/// list of ways (`head` the most recently used, `prev[head]` the least). A miss replaces the
/// least recently used way and makes it the head — one step back around the circle, no links
/// changed; a hit relinks its way in front of the head. Empty ways start as the oldest and are
/// taken first, so the order is exact LRU. Nothing moves in memory: the tags and values stay in
/// their ways.
#[derive(Clone, Copy)]
struct Set<const W: usize> {
    tags: [u32; W],
    next: [u8; W],
    prev: [u8; W],
    head: u8,
}

impl<const W: usize> Set<W> {
    /// An empty set.
    fn new() -> Self {
        let mut s = Set {
            tags: [EMPTY; W],
            next: [0; W],
            prev: [0; W],
            head: 0,
        };
        for w in 0..W {
            s.next[w] = ((w + 1) % W) as u8;
            s.prev[w] = ((w + W - 1) % W) as u8;
        }
        s
    }

    /// Makes way `w` the most recently used.
    #[inline(always)]
    fn touch(&mut self, w: usize) {
        let h = self.head as usize;
        if w == h {
            return;
        }
        let (p, n) = (self.prev[w], self.next[w]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
        let t = self.prev[h];
        self.next[w] = h as u8;
        self.prev[w] = t;
        self.next[t as usize] = w as u8;
        self.prev[h] = w as u8;
        self.head = w as u8;
    }

    /// Puts `tag` in the least recently used way, now the most recently used; returns the way.
    #[inline(always)]
    fn replace(&mut self, tag: u32) -> usize {
        let w = self.prev[self.head as usize] as usize;
        self.tags[w] = tag;
        self.head = w as u8;
        w
    }
}

/// `S` sets of `W` ways, allocated once.
fn sets<const W: usize, const S: usize>() -> Box<[Set<W>; S]> {
    vec![Set::new(); S]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| unreachable!("S sets"))
}

/// One cache level: `S` sets (a power of two) of `W` line numbers.
pub(crate) struct Cache<const W: usize, const S: usize> {
    sets: Box<[Set<W>; S]>,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
}

impl<const W: usize, const S: usize> Cache<W, S> {
    pub(crate) fn new() -> Self {
        Cache {
            sets: sets(),
            hits: 0,
            misses: 0,
        }
    }

    /// Looks `line` up; a hit becomes most recently used, a miss is filled (evicting the least
    /// recently used line of its set). Returns whether it hit.
    #[inline(always)]
    pub(crate) fn access(&mut self, line: u32) -> bool {
        let set = &mut self.sets[line as usize & (S - 1)];
        match find(&set.tags, line) {
            Some(w) => {
                set.touch(w);
                self.hits += 1;
                true
            }
            None => {
                set.replace(line);
                self.misses += 1;
                false
            }
        }
    }
}

/// One TLB array: `S` sets (a power of two) of `W` entries, each a 4 KiB page number and its
/// value (in a TLB the frame number shifted left by one, the dirty bit in bit 0; in the nested
/// floor's NTLB a guest-physical page number and its host frame number).
pub(crate) struct Tlb<const W: usize, const S: usize> {
    sets: Box<[Set<W>; S]>,
    vals: Box<[[u32; W]; S]>,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
}

impl<const W: usize, const S: usize> Tlb<W, S> {
    pub(crate) fn new() -> Self {
        Tlb {
            sets: sets(),
            vals: vec![[0; W]; S]
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| unreachable!("S sets")),
            hits: 0,
            misses: 0,
        }
    }

    /// Looks page `vpn` up, counted; a hit becomes most recently used and returns its value.
    #[inline(always)]
    pub(crate) fn lookup(&mut self, vpn: u32) -> Option<u32> {
        let s = vpn as usize & (S - 1);
        match find(&self.sets[s].tags, vpn) {
            Some(w) => {
                self.hits += 1;
                self.sets[s].touch(w);
                Some(self.vals[s][w])
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Inserts page `vpn` as most recently used, known absent (a lookup has just missed it).
    #[inline(always)]
    pub(crate) fn insert(&mut self, vpn: u32, val: u32) {
        let s = vpn as usize & (S - 1);
        let w = self.sets[s].replace(vpn);
        self.vals[s][w] = val;
    }

    /// Fills page `vpn` as most recently used, replacing its entry if it has one.
    #[inline(always)]
    pub(crate) fn fill(&mut self, vpn: u32, val: u32) {
        let s = vpn as usize & (S - 1);
        match find(&self.sets[s].tags, vpn) {
            Some(w) => {
                self.sets[s].touch(w);
                self.vals[s][w] = val;
            }
            None => self.insert(vpn, val),
        }
    }
}

/// The page-walk cache: one set of `W` entry numbers (physical address / 8).
pub(crate) struct Pwc<const W: usize> {
    set: Set<W>,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    /// Its latency in cycles, from the machine's config.
    lat: u64,
}

impl<const W: usize> Pwc<W> {
    /// An empty PWC of latency `lat`.
    pub(crate) fn new(lat: u64) -> Self {
        Pwc {
            set: Set::new(),
            hits: 0,
            misses: 0,
            lat,
        }
    }

    /// A page-entry reference with PWC tag `tag` to the entry at host address `entry`: a hit
    /// becomes most recently used; a miss is served by the caches from L2 and then filled.
    /// Adds the cycles to `cyc`; returns the cache level that served a miss (3: DRAM), `None`
    /// on a hit.
    #[inline(always)]
    pub(crate) fn reference(
        &mut self,
        tag: u32,
        entry: u64,
        front: &mut Front,
        cyc: &mut u64,
    ) -> Option<usize> {
        match find(&self.set.tags, tag) {
            Some(w) => {
                self.set.touch(w);
                self.hits += 1;
                *cyc += self.lat;
                None
            }
            None => {
                self.misses += 1;
                let l = front.pe_mem(entry);
                self.set.replace(tag);
                *cyc += self.lat + front.lat[l];
                Some(l)
            }
        }
    }
}

/// The counters the floor keeps, each the same figure vmmu counts
/// ([`FloorCounts::of_sim`] reads vmmu's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FloorCounts {
    /// The counters of the references around the walk.
    pub front: FrontCounts,
    /// Page walks (D-assists included).
    pub walks: u64,
    /// Accessed/dirty-bit writes by the walker.
    pub ad_updates: u64,
    /// Walk references by level (index 1..=4).
    pub walk_refs: [u64; 5],
    /// Walk references served by the PWC, by level.
    pub pwc_served: [u64; 5],
    /// PWC lookups: hits and misses.
    pub pwc: [u64; 2],
    /// Walk references served by the caches L1, L2, L3 and DRAM (index 3).
    pub served_level: [u64; 4],
}

impl FloorCounts {
    /// vmmu's values of the same counters.
    pub fn of_sim(sim: &Simulator) -> FloorCounts {
        let hw = &sim.mmu().hw;
        let pwc = hw.pwc.stats();
        let mut c = FloorCounts {
            front: FrontCounts::of_sim(sim),
            walks: hw.stats.walks,
            ad_updates: hw.stats.ad_updates,
            pwc: [pwc.hits, pwc.misses],
            ..FloorCounts::default()
        };
        for level in 1..=4 {
            c.walk_refs[level] = hw.stats.refs[0][level];
            c.pwc_served[level] = hw.stats.pwc_hits[0][level];
        }
        c.served_level.copy_from_slice(&hw.stats.served_level[..4]);
        c
    }
}

/// The counters of the references around the walk, the same in both floors, each the same
/// figure vmmu counts ([`FrontCounts::of_sim`] reads vmmu's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrontCounts {
    /// Instructions retired (the references' `instrs`).
    pub instructions: u64,
    /// Data references.
    pub memory_refs: u64,
    /// L1 DTLB hits and misses.
    pub l1d: [u64; 2],
    /// L2 TLB hits and misses.
    pub l2tlb: [u64; 2],
    /// Stores that re-walked to set D.
    pub d_assists: u64,
    /// Hits and misses of cache levels L1, L2, L3 (walk references, A/D updates and data).
    pub caches: [[u64; 2]; 3],
    /// Cycles of L2 TLB hits, walks (their PWC and NTLB lookups included) and A/D updates.
    pub translation_cycles: u64,
    /// Cycles of data references beyond an L1 hit.
    pub data_cycles: u64,
}

impl FrontCounts {
    /// vmmu's values of the same counters.
    pub fn of_sim(sim: &Simulator) -> FrontCounts {
        use vmmu_core::hw::tlb::{COUNT_L1D, COUNT_L2};
        let tlb = sim.mmu().tlb.counts();
        let mut c = FrontCounts {
            instructions: sim.counters().instructions,
            memory_refs: sim.counters().memory_refs,
            l1d: [tlb[COUNT_L1D].hits, tlb[COUNT_L1D].misses],
            l2tlb: [tlb[COUNT_L2].hits, tlb[COUNT_L2].misses],
            d_assists: sim.mmu().stats.d_assists,
            translation_cycles: sim.mmu().stats.translation_cycles,
            data_cycles: sim.mmu().stats.data_cycles,
            ..FrontCounts::default()
        };
        for (c, h) in c.caches.iter_mut().zip(&sim.mmu().hw.caches.counts()) {
            *c = [h.hits, h.misses];
        }
        c
    }

    /// Whether a TLB or a cache level has been used (a floor starts cold).
    pub fn used(&self) -> bool {
        self.l1d != [0, 0] || self.l2tlb != [0, 0] || self.caches.iter().any(|l| *l != [0, 0])
    }
}

/// What both floors keep around the walk: the L1 DTLB, the L2 TLB's 4 KiB array, the cache
/// levels, their latencies and the reference's counters.
pub(crate) struct Front {
    l1d: Tlb<64, 1>,
    l2tlb: Tlb<4, 128>,
    l1: Cache<2, 512>,
    l2: Cache<16, 512>,
    l3: Cache<32, 1024>,
    /// The counters other than the structures' own hits and misses (gathered by
    /// [`counts`](Self::counts)), starting from vmmu's values at the end of the set-up.
    pub(crate) counts: FrontCounts,
    /// Latencies in cycles, from the machine's config: an L2 TLB hit's, and the cache
    /// levels' L1, L2, L3 and DRAM's.
    l2tlb_lat: u64,
    pub(crate) lat: [u64; 4],
}

impl Front {
    /// Empty TLBs and caches with `sim`'s latencies, the counters from `sim`'s.
    pub(crate) fn new(sim: &Simulator) -> Front {
        let machine = &sim.config().machine;
        let caches = &machine.caches;
        let mut lat = [0; 4];
        for (lat, level) in lat.iter_mut().zip(&caches.levels) {
            *lat = level.latency as u64;
        }
        lat[3] = caches.dram_latency as u64;
        Front {
            l1d: Tlb::new(),
            l2tlb: Tlb::new(),
            l1: Cache::new(),
            l2: Cache::new(),
            l3: Cache::new(),
            counts: FrontCounts::of_sim(sim),
            l2tlb_lat: machine.tlb.l2_latency as u64,
            lat,
        }
    }

    /// A page-entry or A/D reference to the entry at host address `entry` through the caches
    /// from L2 (page entries are not cached in L1): the index of the level that served it (3:
    /// DRAM).
    #[inline(always)]
    pub(crate) fn pe_mem(&mut self, entry: u64) -> usize {
        let line = (entry >> 6) as u32;
        if self.l2.access(line) {
            1
        } else if self.l3.access(line) {
            2
        } else {
            3
        }
    }

    /// Entry `i` of the guest table `table` as a walk of `va` finds it: refused if not
    /// present; its A bit set where clear, and its D bit too where `set_d` (a store at the
    /// leaf), each such update one write to the entry at host address `entry` through the
    /// caches from L2, its latency added to `cyc`, counted in `ad_updates`. Returns the entry
    /// as read.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn visit(
        &mut self,
        table: &mut Table,
        i: usize,
        entry: u64,
        va: u64,
        set_d: bool,
        ad_updates: &mut u64,
        cyc: &mut u64,
    ) -> std::result::Result<u64, Outside> {
        let e = table.ent[i];
        if e & Pte::P == 0 {
            return Err(Outside("a reference to an unmapped page", va));
        }
        let mut bits = if e & Pte::A == 0 { Pte::A } else { 0 };
        if set_d && e & Pte::D == 0 {
            bits |= Pte::D;
        }
        if bits != 0 {
            table.ent[i] = e | bits;
            *ad_updates += 1;
            let l = self.pe_mem(entry);
            *cyc += self.lat[l];
        }
        Ok(e)
    }

    /// The counters, with the structures' own gathered in (for the tests, which compare them
    /// with vmmu's).
    #[cfg(test)]
    pub(crate) fn counts(&self) -> FrontCounts {
        let mut c = self.counts;
        c.l1d = [self.l1d.hits, self.l1d.misses];
        c.l2tlb = [self.l2tlb.hits, self.l2tlb.misses];
        c.caches = [
            [self.l1.hits, self.l1.misses],
            [self.l2.hits, self.l2.misses],
            [self.l3.hits, self.l3.misses],
        ];
        c
    }
}

/// A floor: a walk behind the [`Front`] that both floors share. The reference, the batch and
/// the run are written once, here.
pub(crate) trait Model {
    /// The TLBs, caches and reference counters.
    fn front(&mut self) -> &mut Front;

    /// The walk for `va` (a store when `write`): the TLB value (host frame << 1 | dirty); adds
    /// its cycles.
    fn walk(&mut self, va: u64, write: bool) -> std::result::Result<u32, Outside>;

    /// One data reference (a load, or a store when `write`) to `va`, retiring `instrs`.
    #[inline(always)]
    fn reference(&mut self, va: u64, write: bool, instrs: u32) -> std::result::Result<(), Outside> {
        let f = self.front();
        f.counts.instructions += instrs as u64;
        f.counts.memory_refs += 1;
        // Page numbers are u32 tags (below EMPTY).
        if va >> 44 != 0 {
            return Err(Outside("an address beyond the floor's 16 TiB", va));
        }
        let vpn = (va >> 12) as u32;
        let val = match f.l1d.lookup(vpn) {
            Some(v) => Some(v),
            None => match f.l2tlb.lookup(vpn) {
                Some(v) => {
                    f.l1d.insert(vpn, v);
                    f.counts.translation_cycles += f.l2tlb_lat;
                    Some(v)
                }
                None => None,
            },
        };
        let val = match val {
            Some(v) if !write || v & 1 != 0 => v,
            Some(_) => {
                // A store through a clean entry: the D-assist walks and refills.
                f.counts.d_assists += 1;
                let v = self.walk(va, write)?;
                let f = self.front();
                f.l2tlb.fill(vpn, v);
                f.l1d.fill(vpn, v);
                v
            }
            None => {
                let v = self.walk(va, write)?;
                let f = self.front();
                f.l2tlb.insert(vpn, v);
                f.l1d.insert(vpn, v);
                v
            }
        };
        let f = self.front();
        let line = ((((val >> 1) as u64) << 12 | (va & 0xfff)) >> 6) as u32;
        let lat = if f.l1.access(line) {
            f.lat[0]
        } else if f.l2.access(line) {
            f.lat[1]
        } else if f.l3.access(line) {
            f.lat[2]
        } else {
            f.lat[3]
        };
        f.counts.data_cycles += lat - f.lat[0];
        Ok(())
    }

    /// Simulates `events`, references only.
    fn step_batch(&mut self, events: &[Event]) -> Result<()> {
        for e in events {
            let Event::Ref(r) = e else {
                return Err(Error::config("floor", "an event other than a reference"));
            };
            if r.kind.is_fetch() {
                return Err(Error::config("floor", "an instruction fetch"));
            }
            if let Err(Outside(why, va)) = self.reference(r.va.raw(), r.kind.is_write(), r.instrs) {
                return Err(Error::config("floor", format!("{why}: {va:#x}")));
            }
        }
        Ok(())
    }

    /// Simulates `src` to its end, in batches as vmmu's run loop asks for them.
    fn run(&mut self, src: &mut dyn EventSource) -> Result<()> {
        let mut buf = Vec::with_capacity(BATCH_EVENTS);
        loop {
            buf.clear();
            if src.next_batch(&mut buf, BATCH_EVENTS)? == 0 {
                return Ok(());
            }
            self.step_batch(&buf)?;
        }
    }

    /// Data references so far.
    fn memory_refs(&mut self) -> u64 {
        self.front().counts.memory_refs
    }
}

/// A reference the floor does not model (vmmu would fault, or the event is not a reference).
#[derive(Debug)]
pub(crate) struct Outside(pub(crate) &'static str, pub(crate) u64);

/// Entries per table (4-level long mode).
pub(crate) const ENTRIES: usize = 512;

/// The floor model: TLBs, PWC, caches and a copy of the guest's tables.
pub struct Floor {
    front: Front,
    pwc: Pwc<24>,
    /// The guest's tables, the root first.
    tables: Vec<Table>,
    /// The walk's counters other than the PWC's own hits and misses (gathered by
    /// [`counts`](Self::counts), with the front's), starting from vmmu's values at the end of
    /// the set-up.
    counts: FloorCounts,
    /// The frame bits of a page entry (the tables' format).
    frame_mask: u64,
}

/// One guest table as the floor walks it.
pub(crate) struct Table {
    /// Its physical address (in the tables' own space).
    pub(crate) base: u64,
    /// Its entries (the walk sets their A and D bits).
    pub(crate) ent: [u64; ENTRIES],
    /// Per present non-leaf entry: the index of the table it points to.
    pub(crate) next: [u32; ENTRIES],
}

/// Copies the 4-level table at `table` of `level` in `mem`, and those below it, into `tables`
/// (a table before the tables it points to); returns its index. Refuses what the floors do not
/// model: large pages, read-only entries, and leaf frame numbers beyond `u31` (a TLB value
/// holds the frame number shifted left by one).
pub(crate) fn copy_tables<A: PhysAddr>(
    mem: &PhysMem<A>,
    geo: &Geometry,
    table: u64,
    level: u8,
    tables: &mut Vec<Table>,
) -> Result<u32> {
    let refuse = |why: &str| Err(Error::config("floor", why.to_string()));
    let idx = tables.len();
    if idx >= (EMPTY >> 9) as usize {
        return refuse("more tables than the floor numbers");
    }
    tables.push(Table {
        base: table,
        ent: [0; ENTRIES],
        next: [0; ENTRIES],
    });
    for i in 0..ENTRIES {
        let e = geo.read_entry(mem, A::from_raw(table + 8 * i as u64));
        tables[idx].ent[i] = e.0;
        if !e.present() {
            continue;
        }
        if !e.writable() {
            return refuse("a read-only mapping: the floor models writable pages alone");
        }
        if level > 1 {
            if e.large() {
                return refuse("a large page: the floor models 4 KiB pages alone");
            }
            let t = copy_tables(mem, geo, e.frame(geo.frame_mask()), level - 1, tables)?;
            tables[idx].next[i] = t;
        } else if e.frame(geo.frame_mask()) >> 12 >= (EMPTY >> 1) as u64 {
            return refuse("a frame beyond the floor's u31 frame numbers");
        }
    }
    Ok(idx as u32)
}

impl Floor {
    /// The floor for `sim` at the end of its set-up phase: checks that `sim` is native paging
    /// on the unmodified `bhargava08` machine with one vCPU and no warm-up, check or sizing,
    /// that the set-up used no TLB, PWC or cache, and that its guest tables are 4-level with
    /// 4 KiB writable pages only; copies the current process's tables.
    pub fn from_sim(sim: &Simulator) -> Result<Floor> {
        let refuse = |why: &str| Err(Error::config("floor", why.to_string()));
        let cfg = sim.config();
        let want = config::build("bhargava08", &[])?;
        if cfg.machine != want.machine
            || cfg.mode != Mode::Native
            || cfg.guest.vcpus != 1
            || cfg.check
            || cfg.warmup.refs + cfg.warmup.instructions != 0
            || cfg.sizing.is_some()
            || !cfg.hypervisor.switch.at.is_empty()
        {
            return refuse("the floor models native paging on bhargava08 alone");
        }
        let c = FloorCounts::of_sim(sim);
        if c.front.used() || c.walks != 0 || c.pwc != [0, 0] {
            return refuse("the set-up used the TLBs or caches; the floor starts cold");
        }
        let geo = Geometry::of(cfg.guest.format);
        if geo.levels != 4 || geo.entry_bytes != 8 {
            return refuse("the floor walks 4-level tables");
        }
        let Some(pt) = sim.os().current_pid().and_then(|p| sim.os().tables(p)) else {
            return refuse("no process after the set-up");
        };
        let mut f = Floor {
            front: Front::new(sim),
            pwc: Pwc::new(cfg.machine.pwc.latency as u64),
            tables: Vec::new(),
            counts: c,
            frame_mask: geo.frame_mask(),
        };
        copy_tables(&sim.os().mem, &geo, pt.root.raw(), 4, &mut f.tables)?;
        // Entry numbers (address / 8) are the PWC's u32 tags, line numbers the caches'.
        if f.tables
            .iter()
            .any(|t| (t.base + 4096) >> 3 >= EMPTY as u64)
        {
            return refuse("a table beyond the floor's 32 GiB of entry numbers");
        }
        Ok(f)
    }

    /// The walk's step at level `L` (4, 3 or 2) in table `t`: the entry referenced through
    /// the PWC (on a miss, through the caches, then filled into the PWC), its A bit set where
    /// clear (one more cache access). Returns the next table's index.
    #[inline(always)]
    fn upper<const L: usize>(
        &mut self,
        t: usize,
        va: u64,
        cyc: &mut u64,
    ) -> std::result::Result<usize, Outside> {
        let i = (va >> (3 + 9 * L)) as usize & (ENTRIES - 1);
        let entry = self.tables[t].base + 8 * i as u64;
        self.counts.walk_refs[L] += 1;
        match self
            .pwc
            .reference((entry >> 3) as u32, entry, &mut self.front, cyc)
        {
            None => self.counts.pwc_served[L] += 1,
            Some(l) => self.counts.served_level[l] += 1,
        }
        let (table, ad) = (&mut self.tables[t], &mut self.counts.ad_updates);
        self.front.visit(table, i, entry, va, false, ad, cyc)?;
        Ok(table.next[i] as usize)
    }

    /// The counters, with the structures' own gathered in (for the tests, which compare them
    /// with vmmu's).
    #[cfg(test)]
    pub fn counts(&self) -> FloorCounts {
        let mut c = self.counts;
        c.front = self.front.counts();
        c.pwc = [self.pwc.hits, self.pwc.misses];
        c
    }
}

impl Model for Floor {
    #[inline(always)]
    fn front(&mut self) -> &mut Front {
        &mut self.front
    }

    #[inline(always)]
    fn walk(&mut self, va: u64, write: bool) -> std::result::Result<u32, Outside> {
        self.counts.walks += 1;
        let mut cyc = 0u64;
        let t = self.upper::<4>(0, va, &mut cyc)?;
        let t = self.upper::<3>(t, va, &mut cyc)?;
        let t = self.upper::<2>(t, va, &mut cyc)?;
        // The leaf (level 1): not cached in the PWC (`cache_g_l1 = false`).
        let i = (va >> 12) as usize & (ENTRIES - 1);
        let entry = self.tables[t].base + 8 * i as u64;
        self.counts.walk_refs[1] += 1;
        let l = self.front.pe_mem(entry);
        self.counts.served_level[l] += 1;
        cyc += self.front.lat[l];
        let (table, ad) = (&mut self.tables[t], &mut self.counts.ad_updates);
        let e = self.front.visit(table, i, entry, va, write, ad, &mut cyc)?;
        self.front.counts.translation_cycles += cyc;
        let frame = Pte(e).frame(self.frame_mask) >> 12;
        let dirty = (e & Pte::D != 0) || write;
        Ok(((frame as u32) << 1) | dirty as u32)
    }
}

/// What both floors' tests share.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use vmmu_core::event::VecSource;
    use vmmu_core::{workload, Gpa, SimConfig};

    /// Clears the A and D bits of every present entry of the guest table at `table` of
    /// `level` and below, in vmmu's guest memory.
    fn clear_ad(sim: &mut Simulator, geo: &Geometry, table: u64, level: u8) {
        for i in 0..ENTRIES as u64 {
            let a = Gpa::new(table + 8 * i);
            let e = geo.read_entry(&sim.os().mem, a);
            if e.present() {
                geo.write_entry(&mut sim.os_mut().mem, a, Pte(e.0 & !(Pte::A | Pte::D)));
                if level > 1 {
                    clear_ad(sim, geo, e.frame(geo.frame_mask()), level - 1);
                }
            }
        }
    }

    /// vmmu on `cfg` and the floor `build` makes of it after the set-up of `spec`, each run
    /// over the reference phase; with `clean`, every A and D bit of the guest's tables cleared
    /// after the set-up (for both).
    pub(crate) fn both<M: Model>(
        cfg: &SimConfig,
        spec: &str,
        clean: bool,
        build: fn(&Simulator) -> Result<M>,
    ) -> (Simulator, M) {
        let mut src = workload::open(spec).unwrap();
        let mut sim = Simulator::new(cfg).unwrap();
        let first = crate::rows::setup(&mut sim, src.as_mut()).unwrap();
        if clean {
            let pt = sim.os().tables(sim.os().current_pid().unwrap()).unwrap();
            clear_ad(&mut sim, &pt.geo, pt.root.raw(), 4);
        }
        let mut floor = build(&sim).unwrap();
        let mut events: Vec<Event> = first.into_iter().collect();
        while src.next_batch(&mut events, BATCH_EVENTS).unwrap() > 0 {}
        vmmu_core::run::simulate(
            &mut sim,
            &mut VecSource::new(spec, events.clone()),
            &mut |_| true,
        )
        .unwrap();
        floor.step_batch(&events).unwrap();
        (sim, floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmmu_core::workload;

    /// vmmu's counts and the floor's over the reference phase of `spec`, natively; with
    /// `clean`, every A and D bit of the tables cleared after the set-up (for both).
    fn both(spec: &str, clean: bool) -> (FloorCounts, FloorCounts) {
        let cfg = config::build("bhargava08", &[("mode".into(), "native".into())]).unwrap();
        let (sim, floor) = testing::both(&cfg, spec, clean, Floor::from_sim);
        (FloorCounts::of_sim(&sim), floor.counts())
    }

    /// The bench row's stream, 200 K references.
    const SPEC: &str = "random:footprint=64M,refs=200K,prefault=1";

    #[test]
    fn the_floor_counts_exactly_what_vmmu_counts() {
        let (vmmu, floor) = both(SPEC, false);
        assert_eq!(vmmu, floor);
        // Every path the row takes was taken: L1 and L2 TLB hits, PWC hits at each cached
        // level and misses, the upper levels' A bits, every cache level and DRAM. (The
        // prefaulted leaves are made accessed and dirty: no D-assist here.)
        assert_eq!(floor.front.memory_refs, 200_000);
        assert!(floor.front.l1d[0] > 0 && floor.front.l2tlb[0] > 0 && floor.ad_updates > 0);
        assert!((2..=4).all(|l| floor.pwc_served[l] > 0) && floor.pwc[1] > 0);
        assert!(floor.served_level[1..].iter().all(|&n| n > 0));
        assert!(floor.front.caches.iter().all(|l| l[0] > 0 && l[1] > 0));
    }

    #[test]
    fn the_floor_keeps_a_and_d_bits_as_vmmu_does() {
        // The same stream over tables whose A and D bits are clear: every first walk of a page
        // sets A (and D for a store), and a store through an entry a load filled re-walks.
        let (vmmu, floor) = both(SPEC, true);
        assert_eq!(vmmu, floor);
        assert!(floor.front.d_assists > 100 && floor.ad_updates > 16_384);
    }

    #[test]
    fn the_floor_refuses_what_it_does_not_model() {
        let cfg = config::build("bhargava08", &[("mode".into(), "nested".into())]).unwrap();
        let mut sim = Simulator::new(&cfg).unwrap();
        let mut src = workload::open("random:footprint=1M,refs=1K,prefault=1").unwrap();
        crate::rows::setup(&mut sim, src.as_mut()).unwrap();
        assert!(Floor::from_sim(&sim).is_err());
    }
}
