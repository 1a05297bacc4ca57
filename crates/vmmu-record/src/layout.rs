//! `--native-layout`: moving a recorded program's regions to where native x86-64 Linux puts
//! them (docs/recording.md, "Native layout").
//!
//! Valgrind loads a program at addresses unlike a native run: a PIE executable at 0x108000, the
//! loader at 0x4000000, libraries and anonymous mappings upwards from just above the loader,
//! the main stack ending near 0x1fff001000. Which page-table pages exist, and how many entries
//! share an upper-level table, depend on that placement. This transformation gives every
//! region a native-like address, as Linux does with address-space randomization turned off:
//!
//! - the main stack (the `STACK` mapping made before the program starts) ends at
//!   0x7ffffffff000;
//! - a PIE executable (its first file mapping below 0x400000, where non-PIE executables are
//!   never linked) starts at 0x555555554000; a non-PIE executable stays where it is linked;
//! - the heap (`brk`) starts at the page after the executable's last mapping;
//! - every other mapping (loader, libraries, anonymous memory, thread stacks) is placed top-down
//!   from 0x7ffff7fff000 (Linux's `mmap_base` below a 128 MiB stack gap), first fit, mappings
//!   of 2 MiB or more keeping their offset within 2 MiB (as Linux aligns large anonymous
//!   mappings for transparent huge pages). A mapping made inside an existing region
//!   (`MAP_FIXED`, as the loader maps a library's segments into the span it reserved) moves
//!   with that region.
//!
//! The translation is region-wise and applied to events and references alike: an event whose
//! range spans several regions becomes one event per region. A fork copies the parent's
//! translation; an exec starts a new one. References to addresses no region covers are left
//! as they are and counted.

use rustc_hash::FxHashMap;
use vmmu_core::addr::Gva;
use vmmu_core::error::Result;
use vmmu_core::event::{Event, EventSource, MapFlags};
use vmmu_core::event::{Madvise, Mmap, Mprotect, Mremap, Munmap};

/// Where the main stack ends (exclusive): the top of x86-64 user space with 4-level paging.
pub const STACK_TOP: u64 = 0x7fff_ffff_f000;
/// Where top-down mmap allocation starts (exclusive): `STACK_TOP` minus Linux's minimum gap
/// of 128 MiB.
pub const MMAP_TOP: u64 = 0x7fff_f7ff_f000;
/// Where a PIE executable is loaded without randomization.
pub const PIE_BASE: u64 = 0x5555_5555_4000;
/// Executables whose first mapping is below this are position independent.
const NON_PIE_MIN: u64 = 0x40_0000;
/// The lowest address top-down allocation may reach.
const MMAP_FLOOR: u64 = 0x1_0000_0000;
const HUGE: u64 = 2 << 20;

/// One translated region: `[vstart, vend)` of the recording is at `nstart..` natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Region {
    vstart: u64,
    vend: u64,
    nstart: u64,
}

impl Region {
    #[inline(always)]
    fn translate(&self, va: u64) -> u64 {
        va.wrapping_sub(self.vstart).wrapping_add(self.nstart)
    }
}

/// One address space's translation.
#[derive(Clone, Debug, Default)]
struct Space {
    /// Sorted by `vstart`, non-overlapping.
    regions: Vec<Region>,
    /// The most recently used region index, for data (0) and for fetches (1): code and data
    /// each stay in a region for long, but they alternate.
    hint: [usize; 2],
    /// The heap: recorded base, native base and current recorded end.
    heap: Option<(u64, u64, u64)>,
    /// The native end of the executable (where the heap starts).
    exe_end: Option<u64>,
    /// The image's initial mappings, held until the first other event.
    startup: Option<Vec<Event>>,
    /// A direct-mapped cache of page translations: `(page number + 1, offset to add)`, empty
    /// when the tag is 0. Cleared whenever the regions change.
    pages: Vec<(u64, u64)>,
}

/// Entries of the page-translation cache.
const PAGE_CACHE: usize = 512;

impl Space {
    fn fresh_image() -> Space {
        Space {
            startup: Some(Vec::new()),
            ..Space::default()
        }
    }

    /// The relocated address of a reference, through the page cache.
    #[inline(always)]
    fn translate_ref(&mut self, va: u64, class: usize) -> Option<u64> {
        let page = va >> 12;
        let slot = (page as usize) % PAGE_CACHE;
        if let Some(&(tag, off)) = self.pages.get(slot) {
            if tag == page + 1 {
                return Some(va.wrapping_add(off));
            }
        }
        let r = self.lookup_class(va, class)?;
        let off = r.nstart.wrapping_sub(r.vstart);
        if self.pages.is_empty() {
            self.pages = vec![(0, 0); PAGE_CACHE];
        }
        self.pages[slot] = (page + 1, off);
        Some(va.wrapping_add(off))
    }

    #[inline(always)]
    fn lookup(&mut self, va: u64) -> Option<Region> {
        self.lookup_class(va, 0)
    }

    /// [`lookup`](Space::lookup) with the hint of class `c` (0 data, 1 fetch).
    #[inline(always)]
    fn lookup_class(&mut self, va: u64, c: usize) -> Option<Region> {
        if let Some(r) = self.regions.get(self.hint[c]) {
            if r.vstart <= va && va < r.vend {
                return Some(*r);
            }
        }
        let i = self.regions.partition_point(|r| r.vend <= va);
        let r = self.regions.get(i)?;
        if r.vstart <= va {
            self.hint[c] = i;
            Some(*r)
        } else {
            None
        }
    }

    /// The pieces of `[lo, hi)`: `(vlo, vhi, Some(region))` where covered, `None` where not.
    fn pieces(&self, lo: u64, hi: u64) -> Vec<(u64, u64, Option<Region>)> {
        let mut out = Vec::new();
        let mut at = lo;
        let mut i = self.regions.partition_point(|r| r.vend <= lo);
        while at < hi {
            match self.regions.get(i) {
                Some(r) if r.vstart < hi => {
                    if r.vstart > at {
                        out.push((at, r.vstart, None));
                        at = r.vstart;
                    }
                    let end = r.vend.min(hi);
                    out.push((at, end, Some(*r)));
                    at = end;
                    i += 1;
                }
                _ => {
                    out.push((at, hi, None));
                    at = hi;
                }
            }
        }
        out
    }

    /// Removes the translation of `[lo, hi)`, splitting regions that straddle it.
    fn remove(&mut self, lo: u64, hi: u64) {
        let mut kept = Vec::with_capacity(self.regions.len() + 1);
        for r in &self.regions {
            if r.vend <= lo || r.vstart >= hi {
                kept.push(*r);
                continue;
            }
            if r.vstart < lo {
                kept.push(Region { vend: lo, ..*r });
            }
            if r.vend > hi {
                kept.push(Region {
                    vstart: hi,
                    vend: r.vend,
                    nstart: r.translate(hi),
                });
            }
        }
        self.regions = kept;
        self.hint = [0; 2];
        self.pages.clear();
    }

    fn insert(&mut self, r: Region) {
        self.remove(r.vstart, r.vend);
        let i = self.regions.partition_point(|x| x.vstart < r.vstart);
        self.regions.insert(i, r);
        self.hint = [i; 2];
        self.pages.clear();
    }

    fn native_free(&self, lo: u64, hi: u64) -> bool {
        self.regions.iter().all(|r| {
            let (nlo, nhi) = (r.nstart, r.nstart + (r.vend - r.vstart));
            nhi <= lo || nlo >= hi
        })
    }

    /// A native home for `len` bytes recorded at `vstart`: the highest free range below
    /// [`MMAP_TOP`], keeping the offset within 2 MiB for mappings of 2 MiB or more.
    fn allocate(&self, vstart: u64, len: u64) -> u64 {
        let mut used: Vec<(u64, u64)> = self
            .regions
            .iter()
            .map(|r| (r.nstart, r.nstart + (r.vend - r.vstart)))
            .filter(|&(lo, _)| lo < MMAP_TOP)
            .collect();
        used.sort_unstable();
        let place = |hi: u64| -> u64 {
            let a = hi - len;
            if len >= HUGE {
                let want = vstart % HUGE;
                let base = a - a % HUGE + want;
                if base <= a {
                    base
                } else {
                    base - HUGE
                }
            } else {
                a
            }
        };
        let mut hi = MMAP_TOP;
        for &(lo, end) in used.iter().rev() {
            if end < hi && hi - end >= len {
                let a = place(hi);
                if a >= end {
                    return a;
                }
            }
            hi = hi.min(lo);
            if hi < MMAP_FLOOR + len {
                break;
            }
        }
        let a = place(hi);
        if a >= MMAP_FLOOR {
            a
        } else {
            vstart // nowhere to go: keep the recorded address
        }
    }
}

/// What the transformation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayoutStats {
    /// Regions placed (startup groups, mappings, the heap).
    pub regions_placed: u64,
    /// References no region covered (left at their recorded address).
    pub untranslated_refs: u64,
    /// Events split because their range spanned several regions.
    pub events_split: u64,
}

/// An [`EventSource`] that relocates another one to a native-like layout.
pub struct NativeLayout<S: EventSource> {
    inner: S,
    /// The current process's space (taken out of `spaces` while current).
    cur: Option<(u32, Space)>,
    spaces: FxHashMap<u32, Space>,
    inbuf: Vec<Event>,
    out: Vec<Event>,
    out_pos: usize,
    ended: bool,
    stats: LayoutStats,
}

impl<S: EventSource> NativeLayout<S> {
    /// Relocates `inner`.
    pub fn new(inner: S) -> Self {
        NativeLayout {
            inner,
            cur: None,
            spaces: FxHashMap::default(),
            inbuf: Vec::with_capacity(STEP),
            out: Vec::with_capacity(STEP + 64),
            out_pos: 0,
            ended: false,
            stats: LayoutStats::default(),
        }
    }

    /// What the transformation did so far.
    pub fn stats(&self) -> &LayoutStats {
        &self.stats
    }

    /// The wrapped source.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn switch_to(&mut self, pid: u32) {
        if matches!(self.cur, Some((p, _)) if p == pid) {
            return;
        }
        if let Some((p, s)) = self.cur.take() {
            self.spaces.insert(p, s);
        }
        let s = self.spaces.remove(&pid).unwrap_or_default();
        self.cur = Some((pid, s));
    }

    fn space(&mut self) -> &mut Space {
        if self.cur.is_none() {
            // A trace with no process events: an implicit process.
            self.cur = Some((1, Space::fresh_image()));
        }
        &mut self.cur.as_mut().expect("current").1
    }

    fn process(&mut self, e: Event) {
        match e {
            Event::Ref(mut r) => {
                let s = self.space();
                if s.startup.is_some() {
                    self.place_startup();
                }
                match self.space().lookup(r.va.raw()) {
                    Some(reg) => r.va = Gva::new(reg.translate(r.va.raw())),
                    None => self.stats.untranslated_refs += 1,
                }
                self.out.push(Event::Ref(r));
            }
            Event::ProcessCreate { pid } => {
                self.flush_startup();
                self.spaces.insert(pid, Space::fresh_image());
                if self.cur.is_none() {
                    self.switch_to(pid);
                }
                self.out.push(e);
            }
            Event::Fork { parent, child } => {
                self.flush_startup();
                let copy = match &self.cur {
                    Some((p, s)) if *p == parent => s.clone(),
                    _ => self.spaces.get(&parent).cloned().unwrap_or_default(),
                };
                self.spaces.insert(child, copy);
                self.out.push(e);
            }
            Event::Switch { pid } => {
                self.flush_startup();
                self.switch_to(pid);
                self.out.push(e);
            }
            Event::Exec { pid } => {
                self.flush_startup();
                self.switch_to(pid);
                *self.space() = Space::fresh_image();
                self.out.push(e);
            }
            Event::Exit { pid } => {
                self.flush_startup();
                if matches!(self.cur, Some((p, _)) if p == pid) {
                    self.cur = None;
                }
                self.spaces.remove(&pid);
                self.out.push(e);
            }
            Event::Mmap(_) if self.space().startup.is_some() => {
                self.space().startup.as_mut().expect("collecting").push(e);
            }
            _ => {
                if self.space().startup.is_some() {
                    self.place_startup();
                }
                self.os_event(e);
            }
        }
    }

    fn flush_startup(&mut self) {
        if matches!(&self.cur, Some((_, s)) if s.startup.is_some()) {
            self.place_startup();
        }
    }

    /// Places the image's initial mappings (stack, executable, the rest) and emits them.
    fn place_startup(&mut self) {
        let maps = self.space().startup.take().unwrap_or_default();
        let mut ranges: Vec<(u64, u64, u8)> = maps
            .iter()
            .filter_map(|e| match *e {
                Event::Mmap(ref w) => {
                    let Mmap {
                        start, len, flags, ..
                    } = **w;
                    Some((start.raw(), start.raw() + len, flags.0))
                }
                _ => None,
            })
            .collect();
        ranges.sort_unstable();
        // Contiguous runs keep their internal layout.
        let mut groups: Vec<(u64, u64, u8)> = Vec::new();
        for (lo, hi, fl) in ranges {
            match groups.last_mut() {
                Some(g) if g.1 == lo && (g.2 | fl) & MapFlags::STACK == 0 => {
                    g.1 = g.1.max(hi);
                    g.2 |= fl;
                }
                Some(g) if lo < g.1 => g.1 = g.1.max(hi),
                _ => groups.push((lo, hi, fl)),
            }
        }
        let exe = groups
            .iter()
            .position(|g| g.2 & MapFlags::FILE != 0 && g.2 & MapFlags::STACK == 0);
        let mut placed = Vec::new();
        for (i, &(lo, hi, fl)) in groups.iter().enumerate() {
            let nstart = if fl & MapFlags::STACK != 0 {
                STACK_TOP - (hi - lo)
            } else if Some(i) == exe {
                let n = if lo < NON_PIE_MIN { PIE_BASE } else { lo };
                self.space().exe_end = Some(n + (hi - lo));
                n
            } else {
                continue;
            };
            placed.push(Region {
                vstart: lo,
                vend: hi,
                nstart,
            });
        }
        for r in placed {
            self.space().insert(r);
            self.stats.regions_placed += 1;
        }
        for &(lo, hi, _) in &groups {
            if self.space().lookup(lo).is_none() {
                let n = self.space().allocate(lo, hi - lo);
                self.space().insert(Region {
                    vstart: lo,
                    vend: hi,
                    nstart: n,
                });
                self.stats.regions_placed += 1;
            }
        }
        for e in maps {
            self.os_event(e);
        }
    }

    /// Emits `e` once per covered piece of `[lo, hi)`; uncovered pieces stay where they are.
    fn split(&mut self, lo: u64, hi: u64, make: impl Fn(u64, u64) -> Event) {
        let pieces = self.space().pieces(lo, hi);
        if pieces.len() > 1 {
            self.stats.events_split += 1;
        }
        for (a, b, r) in pieces {
            let n = r.map_or(a, |r| r.translate(a));
            self.out.push(make(n, b - a));
        }
    }

    fn os_event(&mut self, e: Event) {
        match e {
            Event::Mmap(ref w) => {
                let Mmap {
                    start,
                    len,
                    prot,
                    flags,
                } = **w;
                let (lo, hi) = (start.raw(), start.raw() + len);
                // Uncovered pieces get a native home first; then every piece is covered.
                for (a, b, r) in self.space().pieces(lo, hi) {
                    if r.is_none() {
                        let n = self.space().allocate(a, b - a);
                        self.space().insert(Region {
                            vstart: a,
                            vend: b,
                            nstart: n,
                        });
                        self.stats.regions_placed += 1;
                    }
                }
                self.split(lo, hi, |n, l| Event::mmap(Gva::new(n), l, prot, flags));
            }
            Event::Munmap(ref w) => {
                let Munmap { start, len } = **w;
                let (lo, hi) = (start.raw(), start.raw() + len);
                self.split(lo, hi, |n, l| Event::munmap(Gva::new(n), l));
                self.space().remove(lo, hi);
            }
            Event::Mprotect(ref w) => {
                let Mprotect { start, len, prot } = **w;
                self.split(start.raw(), start.raw() + len, |n, l| {
                    Event::mprotect(Gva::new(n), l, prot)
                });
            }
            Event::Madvise(ref w) => {
                let Madvise { start, len, advice } = **w;
                self.split(start.raw(), start.raw() + len, |n, l| {
                    Event::madvise(Gva::new(n), l, advice)
                });
            }
            Event::Mremap(ref w) => {
                let Mremap {
                    old,
                    old_len,
                    new,
                    new_len,
                } = **w;
                self.mremap(old.raw(), old_len, new.raw(), new_len)
            }
            Event::Brk { end } => self.brk(end.raw()),
            other => self.out.push(other),
        }
    }

    fn mremap(&mut self, old: u64, old_len: u64, new: u64, new_len: u64) {
        let s = self.space();
        let nold = s.lookup(old).map_or(old, |r| r.translate(old));
        s.remove(old, old + old_len);
        let covered = s.lookup(new);
        let nnew = if let Some(r) = covered {
            r.translate(new)
        } else if new == old && s.native_free(nold, nold + new_len) {
            nold
        } else {
            s.allocate(new, new_len)
        };
        s.insert(Region {
            vstart: new,
            vend: new + new_len,
            nstart: nnew,
        });
        self.stats.regions_placed += 1;
        self.out.push(Event::mremap(
            Gva::new(nold),
            old_len,
            Gva::new(nnew),
            new_len,
        ));
    }

    fn brk(&mut self, end: u64) {
        let s = self.space();
        let first = s.heap.is_none();
        let (vbase, nbase, old_vend) = s.heap.unwrap_or_else(|| {
            // The first brk of an image is its initial break: the heap starts there.
            let nbase = s.exe_end.map_or(end, |e| (e + 0xfff) & !0xfff);
            (end, nbase, end)
        });
        let vend = (end.max(vbase) + 0xfff) & !0xfff;
        if old_vend > vbase {
            s.remove(vbase, old_vend);
        }
        if vend > vbase {
            s.insert(Region {
                vstart: vbase,
                vend,
                nstart: nbase,
            });
        }
        s.heap = Some((vbase, nbase, vend));
        if first {
            self.stats.regions_placed += 1;
        }
        let n = end.wrapping_sub(vbase).wrapping_add(nbase);
        self.out.push(Event::Brk { end: Gva::new(n) });
    }
}

impl<S: EventSource> NativeLayout<S> {
    /// Relocates one event into `self.out`.
    #[inline]
    fn step(&mut self, e: Event) {
        if let (&Event::Ref(mut r), Some((_, space))) = (&e, self.cur.as_mut()) {
            if space.startup.is_none() {
                match space.translate_ref(r.va.raw(), r.kind.is_fetch() as usize) {
                    Some(va) => r.va = Gva::new(va),
                    None => self.stats.untranslated_refs += 1,
                }
                self.out.push(Event::Ref(r));
                return;
            }
        }
        self.process(e);
    }
}

/// Events read from the inner source per step: few enough to stay in cache.
const STEP: usize = 2048;

impl<S: EventSource> EventSource for NativeLayout<S> {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        let start = buf.len();
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
            if self.ended {
                return Ok(0);
            }
            // Read straight into the caller's buffer and relocate references in place; from
            // the first event that needs more (an OS event, a process's first reference),
            // the rest of the batch goes the slow way through `out`.
            if self.inner.next_batch(buf, max)? == 0 {
                self.ended = true;
                self.flush_startup();
            }
            let mut i = start;
            while i < buf.len() {
                let (Event::Ref(r), Some((_, space))) = (&mut buf[i], self.cur.as_mut()) else {
                    break;
                };
                if space.startup.is_some() {
                    break;
                }
                match space.translate_ref(r.va.raw(), r.kind.is_fetch() as usize) {
                    Some(va) => r.va = Gva::new(va),
                    None => self.stats.untranslated_refs += 1,
                }
                i += 1;
            }
            if i < buf.len() {
                let mut rest = std::mem::take(&mut self.inbuf);
                rest.clear();
                rest.extend_from_slice(&buf[i..]);
                buf.truncate(i);
                for e in rest.drain(..) {
                    self.step(e);
                }
                self.inbuf = rest;
            }
        }
        let take = (max - (buf.len() - start)).min(self.out.len() - self.out_pos);
        buf.extend_from_slice(&self.out[self.out_pos..self.out_pos + take]);
        self.out_pos += take;
        Ok(buf.len() - start)
    }

    fn len_hint(&self) -> Option<u64> {
        None
    }

    fn describe(&self) -> String {
        format!("{} (native layout)", self.inner.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmmu_core::event::{AccessKind, MemRef, Prot, VecSource};

    fn mmap(start: u64, len: u64, flags: u8) -> Event {
        Event::mmap(Gva::new(start), len, Prot::RW, MapFlags(flags))
    }
    fn load(va: u64) -> Event {
        Event::Ref(MemRef {
            va: Gva::new(va),
            kind: AccessKind::Load,
            size: 8,
            instrs: 0,
            dep: 0,
        })
    }
    fn run(events: Vec<Event>) -> Vec<Event> {
        let mut l = NativeLayout::new(VecSource::new("t", events));
        let mut out = Vec::new();
        while l.next_batch(&mut out, 5).unwrap() > 0 {}
        out
    }

    /// A Valgrind-like start: PIE executable at 0x108000, loader at 0x4000000, stack.
    fn startup() -> Vec<Event> {
        vec![
            Event::ProcessCreate { pid: 5 },
            mmap(0x108000, 0x2000, MapFlags::FILE),
            mmap(0x10a000, 0x1000, MapFlags::FILE),
            mmap(0x4000000, 0x30000, MapFlags::FILE),
            mmap(0x1ffe801000, 0x800000, MapFlags::STACK),
            Event::Brk {
                end: Gva::new(0x4035000),
            },
        ]
    }

    #[test]
    fn startup_regions_land_where_native_linux_puts_them() {
        let mut ev = startup();
        ev.extend([load(0x108010), load(0x4000008), load(0x1fff000ff8)]);
        let out = run(ev);
        assert_eq!(out[1], mmap(PIE_BASE, 0x2000, MapFlags::FILE));
        assert_eq!(out[2], mmap(PIE_BASE + 0x2000, 0x1000, MapFlags::FILE));
        assert_eq!(out[3], mmap(MMAP_TOP - 0x30000, 0x30000, MapFlags::FILE));
        assert_eq!(
            out[4],
            mmap(STACK_TOP - 0x800000, 0x800000, MapFlags::STACK)
        );
        assert_eq!(
            out[5],
            Event::Brk {
                end: Gva::new(PIE_BASE + 0x3000)
            }
        );
        assert_eq!(out[6], load(PIE_BASE + 0x10));
        assert_eq!(out[7], load(MMAP_TOP - 0x30000 + 8));
        assert_eq!(out[8], load(STACK_TOP - 8));
    }

    #[test]
    fn the_heap_grows_from_the_executable_and_mmaps_go_top_down() {
        let mut ev = startup();
        ev.extend([
            Event::Brk {
                end: Gva::new(0x4035000 + 0x21000),
            },
            load(0x4035000 + 0x20ff8),
            mmap(0x4835000, 0x3000, 0),
            load(0x4835000),
            Event::munmap(Gva::new(0x4835000), 0x3000),
        ]);
        let out = run(ev);
        assert_eq!(
            out[6],
            Event::Brk {
                end: Gva::new(PIE_BASE + 0x3000 + 0x21000)
            }
        );
        assert_eq!(out[7], load(PIE_BASE + 0x3000 + 0x20ff8));
        let anon = MMAP_TOP - 0x30000 - 0x3000;
        assert_eq!(out[8], mmap(anon, 0x3000, 0));
        assert_eq!(out[9], load(anon));
        assert_eq!(out[10], Event::munmap(Gva::new(anon), 0x3000));
    }

    #[test]
    fn an_event_spanning_two_regions_is_split() {
        let mut ev = startup();
        ev.extend([
            mmap(0x4835000, 0x1000, 0),
            mmap(0x4836000, 0x1000, 0),
            Event::munmap(Gva::new(0x4835000), 0x2000),
        ]);
        let out = run(ev);
        let a = MMAP_TOP - 0x30000 - 0x1000;
        let b = a - 0x1000;
        assert_eq!(&out[6..8], &[mmap(a, 0x1000, 0), mmap(b, 0x1000, 0)]);
        assert_eq!(
            &out[8..10],
            &[
                Event::munmap(Gva::new(a), 0x1000),
                Event::munmap(Gva::new(b), 0x1000)
            ]
        );
    }

    #[test]
    fn a_fork_child_keeps_its_parents_translation() {
        let mut ev = startup();
        ev.extend([
            Event::Fork {
                parent: 5,
                child: 6,
            },
            Event::Switch { pid: 6 },
            load(0x108010),
        ]);
        let out = run(ev);
        assert_eq!(*out.last().unwrap(), load(PIE_BASE + 0x10));
    }

    #[test]
    fn large_mappings_keep_their_offset_within_2mib() {
        let mut ev = startup();
        ev.push(mmap(0x4835000, 0x400000, 0));
        let out = run(ev);
        let Event::Mmap(m) = &out[6] else { panic!() };
        let start = m.start;
        assert_eq!(start.raw() % HUGE, 0x4835000 % HUGE);
        assert!(start.raw() + 0x400000 <= MMAP_TOP - 0x30000);
    }
}
