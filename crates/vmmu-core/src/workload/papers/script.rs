//! What every workload of the family shares: the event source that drains a script step by
//! step, the process address-space layout (text, data, heap, shared libraries, stack), and small
//! emitters for references and reference mixes.

use super::super::dist::below;
use super::super::spec::Values;
use crate::addr::Gva;
use crate::error::Result;
use crate::event::{AccessKind, Event, EventSource, MapFlags, MemRef, Prot};
use rand::RngCore;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Bytes per base page.
pub(crate) const PAGE: u64 = 4096;
/// Size of a data reference.
const DATA_SIZE: u8 = 8;
/// Size of an instruction fetch (one fetch block).
const FETCH_SIZE: u8 = 16;

/// A workload as a program: it emits its events one step (a loop iteration, a bounded run of
/// references) at a time.
pub(crate) trait Script: Send {
    /// The exact number of events the workload emits.
    fn total(&self) -> u64;
    /// Appends the next step's events to `out`; returns `false`, appending nothing, when the
    /// workload has ended.
    fn step(&mut self, out: &mut Vec<Event>) -> bool;
}

/// A [`Script`] as an [`EventSource`]: steps go into a reused buffer and batches are copied
/// out of it.
pub(crate) struct ScriptSource {
    spec: String,
    script: Box<dyn Script>,
    pending: Vec<Event>,
    pos: usize,
    done: bool,
    total: u64,
}

impl ScriptSource {
    pub fn new(spec: &str, script: Box<dyn Script>) -> ScriptSource {
        ScriptSource {
            spec: spec.trim().to_string(),
            total: script.total(),
            script,
            pending: Vec::with_capacity(1 << 14),
            pos: 0,
            done: false,
        }
    }
}

impl EventSource for ScriptSource {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        let start = buf.len();
        while buf.len() - start < max {
            if self.pos == self.pending.len() {
                if self.done {
                    break;
                }
                self.pending.clear();
                self.pos = 0;
                if !self.script.step(&mut self.pending) {
                    self.done = true;
                }
                continue;
            }
            let n = (max - (buf.len() - start)).min(self.pending.len() - self.pos);
            buf.extend_from_slice(&self.pending[self.pos..self.pos + n]);
            self.pos += n;
        }
        Ok(buf.len() - start)
    }

    fn len_hint(&self) -> Option<u64> {
        Some(self.total)
    }

    fn describe(&self) -> String {
        self.spec.clone()
    }

    /// A generator says what its references depend on: each is independent unless its
    /// generator declares a chase.
    fn tracks_dependences(&self) -> bool {
        true
    }
}

/// The seeded random numbers of a workload.
pub(crate) fn rng(v: &Values) -> Result<Xoshiro256PlusPlus> {
    Ok(Xoshiro256PlusPlus::seed_from_u64(v.integer("seed")?))
}

/// A count parameter within `[min, max]`.
pub(crate) fn count_in(v: &Values, key: &str, min: u64, max: u64) -> Result<u64> {
    let n = v.count(key)?;
    if n < min || n > max {
        return Err(v.error(
            key,
            format!(
                "expected a count from {min} to {max}, found `{}`",
                v.raw(key)
            ),
        ));
    }
    Ok(n)
}

/// A count parameter that fits an event's 32-bit instruction field.
pub(crate) fn instrs(v: &Values, key: &str) -> Result<u32> {
    v.count_u32(key)
}

/// Where a process's regions go: x86-64 or i386 Linux.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    bits32: bool,
}

impl Layout {
    /// The `bits` parameter.
    pub fn of(v: &Values) -> Result<Layout> {
        match v.raw("bits") {
            "64" => Ok(Layout { bits32: false }),
            "32" => Ok(Layout { bits32: true }),
            other => Err(v.error("bits", format!("expected 64 or 32, found `{other}`"))),
        }
    }
    /// Program text (the non-PIE link address).
    pub fn text(&self) -> u64 {
        if self.bits32 {
            0x0804_8000
        } else {
            0x40_0000
        }
    }
    /// Anonymous mmap regions (arenas, large buffers) start here and grow up.
    pub fn anon(&self) -> u64 {
        if self.bits32 {
            0x4000_0000
        } else {
            0x7e00_0000_0000
        }
    }
    /// Shared libraries (ld.so, libc); anonymous regions end below.
    pub fn lib(&self) -> u64 {
        if self.bits32 {
            0xb700_0000
        } else {
            0x7f00_0000_0000
        }
    }
    /// The top of the stack (it grows down).
    pub fn stack_top(&self) -> u64 {
        if self.bits32 {
            0xbfff_f000
        } else {
            0x7fff_ffff_f000
        }
    }
    /// Bytes available for anonymous regions.
    pub fn anon_room(&self) -> u64 {
        self.lib() - self.anon()
    }
}

/// The pages a process image touches, by region (each mapped region is at least one page).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Image {
    /// Program text pages executed.
    pub text: u64,
    /// Initialised data and bss pages written.
    pub data: u64,
    /// Heap pages (brk) written.
    pub heap: u64,
    /// Shared-library text pages executed (ld.so and libc).
    pub lib_text: u64,
    /// Shared-library data pages written (relocations, GOT, libc state).
    pub lib_data: u64,
    /// Stack pages written.
    pub stack: u64,
}

/// Events [`Image::map`] emits.
pub(crate) const MAP_EVENTS: u64 = 7;
/// Stack area mapped for a process: Linux's initial 132 KiB, or more if more is touched.
const STACK_VMA_PAGES: u64 = 33;

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// The shell that starts each process (bash-like: more text and heap than a small program).
pub(crate) const SHELL: Image = Image {
    text: 40,
    data: 8,
    heap: 16,
    lib_text: 48,
    lib_data: 6,
    stack: 3,
};

/// The addresses of an image's regions under a layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placed {
    pub img: Image,
    pub text: u64,
    pub data: u64,
    pub heap: u64,
    pub lib_text: u64,
    pub lib_data: u64,
    /// The stack area's lowest address.
    pub stack_vma: u64,
    pub stack_top: u64,
}

impl Image {
    /// Pages the image touches when it starts ([`Placed::warm`] emits one reference each).
    pub fn pages(&self) -> u64 {
        self.text + self.data + self.heap + self.lib_text + self.lib_data + self.stack
    }

    /// Where its regions go; `None` when they do not fit the layout.
    pub fn place(&self, l: Layout) -> Option<Placed> {
        let m = |n: u64| n.max(1) * PAGE;
        let text = l.text();
        let data = align_up(text + m(self.text), 2 << 20);
        let heap = data + m(self.data);
        if heap + self.heap * PAGE > l.anon() {
            return None;
        }
        let lib_text = l.lib();
        let lib_data = align_up(lib_text + m(self.lib_text), 2 << 20);
        let stack_vma = l.stack_top() - self.stack.max(STACK_VMA_PAGES) * PAGE;
        if lib_data + m(self.lib_data) > stack_vma {
            return None;
        }
        Some(Placed {
            img: *self,
            text,
            data,
            heap,
            lib_text,
            lib_data,
            stack_vma,
            stack_top: l.stack_top(),
        })
    }
}

impl Placed {
    /// The end of the initial heap (the program break after [`Placed::map`]).
    pub fn heap_end(&self) -> u64 {
        self.heap + self.img.heap * PAGE
    }

    /// The address of stack page `i` counted from the top (0 is the topmost page).
    pub fn stack_page(&self, i: u64) -> u64 {
        self.stack_top - (i + 1) * PAGE
    }

    /// Maps the image as exec and the dynamic loader do: text and data of the program, the
    /// heap (the first brk sets its start, the second grows it), library text and data, the
    /// stack. [`MAP_EVENTS`] events.
    pub fn map(&self, out: &mut Vec<Event>) {
        let m = |n: u64| n.max(1) * PAGE;
        let rx = Prot(Prot::READ | Prot::EXEC);
        let file = MapFlags(MapFlags::FILE);
        out.push(mmap(self.text, m(self.img.text), rx, file));
        out.push(mmap(self.data, m(self.img.data), Prot::RW, file));
        out.push(Event::Brk {
            end: Gva::new(self.heap),
        });
        out.push(Event::Brk {
            end: Gva::new(self.heap_end()),
        });
        out.push(mmap(self.lib_text, m(self.img.lib_text), rx, file));
        out.push(mmap(self.lib_data, m(self.img.lib_data), Prot::RW, file));
        out.push(mmap(
            self.stack_vma,
            self.stack_top - self.stack_vma,
            Prot::RW,
            MapFlags(MapFlags::STACK),
        ));
    }

    /// Touches every page of the image once, in the order a starting program does: the
    /// loader's text and the library data it relocates, then the program's text, data, heap
    /// and stack. Fetches carry 1 instruction, stores `instrs`. [`Image::pages`] events.
    pub fn warm(&self, out: &mut Vec<Event>, instrs: u32) {
        let i = &self.img;
        for p in 0..i.lib_text {
            out.push(fetch(self.lib_text + p * PAGE));
        }
        for p in 0..i.lib_data {
            out.push(store(self.lib_data + p * PAGE, instrs));
        }
        for p in 0..i.text {
            out.push(fetch(self.text + p * PAGE));
        }
        for p in 0..i.data {
            out.push(store(self.data + p * PAGE, instrs));
        }
        for p in 0..i.heap {
            out.push(store(self.heap + p * PAGE, instrs));
        }
        for p in 0..i.stack {
            out.push(store(self.stack_page(p), instrs));
        }
    }

    /// The address of the `k`-th writable page of the image, cycling through stack, data,
    /// library data and heap pages (the pages a process dirties first after a fork: its
    /// stack frame, its globals, libc's state, its heap).
    pub fn writable_page(&self, k: u64) -> u64 {
        let i = &self.img;
        let total = i.stack + i.data + i.lib_data + i.heap;
        let mut k = k % total.max(1);
        if k < i.stack {
            return self.stack_page(k);
        }
        k -= i.stack;
        if k < i.data {
            return self.data + k * PAGE;
        }
        k -= i.data;
        if k < i.lib_data {
            return self.lib_data + k * PAGE;
        }
        k -= i.lib_data;
        if k < i.heap {
            return self.heap + k * PAGE;
        }
        self.stack_page(0)
    }
}

/// An anonymous or file mapping.
pub(crate) fn mmap(start: u64, len: u64, prot: Prot, flags: MapFlags) -> Event {
    Event::mmap(Gva::new(start), len, prot, flags)
}

#[inline(always)]
fn mref(va: u64, kind: AccessKind, size: u8, instrs: u32) -> Event {
    Event::Ref(MemRef::new(Gva::new(va), kind, size, instrs))
}

/// An 8-byte load retiring `instrs` instructions.
#[inline(always)]
pub(crate) fn load(va: u64, instrs: u32) -> Event {
    mref(va, AccessKind::Load, DATA_SIZE, instrs)
}

/// An 8-byte store retiring `instrs` instructions.
#[inline(always)]
pub(crate) fn store(va: u64, instrs: u32) -> Event {
    mref(va, AccessKind::Store, DATA_SIZE, instrs)
}

/// An instruction fetch of one 16-byte block (one instruction).
#[inline(always)]
pub(crate) fn fetch(va: u64) -> Event {
    mref(va, AccessKind::Fetch, FETCH_SIZE, 1)
}

/// Instructions retired without a memory reference.
#[inline(always)]
pub(crate) fn compute(instrs: u64) -> Event {
    Event::Compute { instrs }
}

/// Contiguous pages of one region.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub base: u64,
    pub pages: u64,
}

/// A program's steady-state reference mix, emitted in *blocks*: one instruction fetch, then
/// `refs` data references, then (if `compute` > 0) a `Compute` event for the work that hits
/// in the caches and TLBs and needs no modelled reference.
///
/// A reference goes to the hot set (the first `hot` pages of the code, or of the data spans
/// taken in order) with probability `hot_prob`, otherwise to a uniformly drawn page of all of
/// them; its offset is a random 8-byte word (a 16-byte block for a fetch).
#[derive(Clone, Debug)]
pub(crate) struct Mix {
    pub code: Span,
    pub hot_code: u64,
    pub data: Vec<Span>,
    pub hot_data: u64,
    /// A draw below this goes to the hot set (`u64::MAX`: always).
    pub hot_threshold: u64,
    /// A draw below this makes a data reference a store.
    pub write_threshold: u64,
    /// Data references per block.
    pub refs: u32,
    /// Instructions each data reference retires.
    pub ipr: u32,
    /// Instructions of the block's `Compute` event (0: no event).
    pub compute: u64,
}

/// `p` ∈ [0, 1] as a threshold on a 64-bit draw.
pub(crate) fn threshold(p: f64) -> u64 {
    if p >= 1.0 {
        u64::MAX
    } else {
        (p * 18_446_744_073_709_551_616.0) as u64
    }
}

impl Mix {
    /// Events per block.
    pub fn block_events(&self) -> u64 {
        1 + self.refs as u64 + u64::from(self.compute > 0)
    }

    fn data_pages(&self) -> u64 {
        self.data.iter().map(|s| s.pages).sum()
    }

    #[inline]
    fn data_page(&self, mut k: u64) -> u64 {
        for s in &self.data {
            if k < s.pages {
                return s.base + k * PAGE;
            }
            k -= s.pages;
        }
        self.data[0].base
    }

    #[inline]
    fn hot(&self, rng: &mut Xoshiro256PlusPlus) -> bool {
        self.hot_threshold == u64::MAX || rng.next_u64() < self.hot_threshold
    }

    /// Appends `blocks` blocks to `out`.
    pub fn emit(&self, rng: &mut Xoshiro256PlusPlus, out: &mut Vec<Event>, blocks: u64) {
        let all = self.data_pages().max(1);
        let hot_data = self.hot_data.clamp(1, all);
        let hot_code = self.hot_code.clamp(1, self.code.pages.max(1));
        out.reserve((blocks * self.block_events()) as usize);
        for _ in 0..blocks {
            let n = if self.hot(rng) {
                below(rng, hot_code)
            } else {
                below(rng, self.code.pages.max(1))
            };
            out.push(fetch(
                self.code.base + n * PAGE + below(rng, PAGE / 16) * 16,
            ));
            for _ in 0..self.refs {
                let k = if self.hot(rng) {
                    below(rng, hot_data)
                } else {
                    below(rng, all)
                };
                let va = self.data_page(k) + below(rng, PAGE / 8) * 8;
                let write = match self.write_threshold {
                    0 => false,
                    u64::MAX => true,
                    t => rng.next_u64() < t,
                };
                out.push(if write {
                    store(va, self.ipr)
                } else {
                    load(va, self.ipr)
                });
            }
            if self.compute > 0 {
                out.push(compute(self.compute));
            }
        }
    }
}
