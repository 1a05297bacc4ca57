//! The SPEC CPU programs of seed 001 §4: 171.swim (best under shadow paging: a large working
//! set with little locality, stable mappings) and 403.gcc (best under nested paging: phase
//! behaviour with page-table changes at the phase changes, several inputs run one after
//! another).

use super::super::dist::below;
use super::aim9::{exec_child, exec_child_events, parent_resumes, place, setup, setup_events};
use super::script::{
    count_in, fetch, load, mmap, rng, store, threshold, Image, Layout, Mix, Placed, Script, Span,
    PAGE, SHELL,
};
use super::{p, PaperDef};
use crate::addr::Gva;
use crate::error::Result;
use crate::event::{Event, MapFlags, Prot};
use crate::workload::spec::Values;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The swim binary: a small Fortran program.
pub(crate) const SWIM_IMAGE: Image = Image {
    text: 16,
    data: 4,
    heap: 4,
    lib_text: 24,
    lib_data: 4,
    stack: 2,
};

/// Points emitted per step.
const POINTS_PER_STEP: u64 = 16_384;
/// Pages first-touched per step.
const TOUCH_PER_STEP: u64 = 65_536;

/// `swim`.
pub(crate) const SWIM: PaperDef = PaperDef {
    name: "swim",
    description: "171.swim (seed 001: best under shadow paging; \"a very random memory access pattern with a large working set\"; seed 004's TLB-intensive case, where nested paging needs guest large pages): `arrays` grid arrays filling `footprint` bytes are mapped once (prefaulted, or written once page by page) and then updated point by point for `points` points: each point loads three arrays and stores a fourth at one grid index, chosen at random (`stride=0`) or `stride` bytes after the previous one (a column sweep of a row-major grid), after fetching the loop's code. Mappings never change after the start. Phase 0 marks the start-up (mapping and initialisation), phase 1 the time-step loop",
    own: &[
        p("footprint", "192M", "bytes of the grid arrays (binary multiples), one anonymous mapping; 171.swim's reference input has 14 arrays of 1335 × 1335 doubles, about 190 MiB"),
        p("arrays", "14", "grid arrays the footprint is split into (171.swim has 14)"),
        p("points", "1M", "grid points updated (5 events each: a fetch, three loads, a store)"),
        p("stride", "0", "bytes from one point's index to the next (a multiple of 8); 0: a uniformly random index"),
        p("ipr", "4", "instructions retired per data reference (the stencil's arithmetic)"),
        p("prefault", "0", "0: the program writes every page once before the time-step loop (a demand fault each), as 171.swim's initialisation does; 1: the mapping carries MAP_POPULATE instead (mapped at mmap time, no faults)"),
        p("huge", "0", "1: the mapping carries MAP_HUGETLB (MapFlags::HUGE; hugetlbfs pages where guest.hugetlb_pages holds them)"),
    ],
    build: build_swim,
};

/// `zeusmp`: the swim program with 434.zeusmp's access pattern.
pub(crate) const ZEUSMP: PaperDef = PaperDef {
    name: "zeusmp",
    description: "434.zeusmp (seed 001: best under shadow paging, yet static thresholds on the TLB miss rate 'would lead to a consistent selection of nested paging, ... 8% slower'): the swim program sweeping `arrays` 3-D grid arrays along their slowest dimension, each point a page further (`stride` = 4 KiB + 8 bytes): a TLB miss per array touched, but walks whose page entries neighbour the last ones (page-walk caches and data caches hit), so nested paging loses less than on swim's random points. Mappings never change after the start",
    own: &[
        p("footprint", "128M", "bytes of the grid arrays (binary multiples), one anonymous mapping"),
        p("arrays", "8", "grid arrays the footprint is split into"),
        p("points", "1M", "grid points updated (5 events each: a fetch, three loads, a store)"),
        p("stride", "4104", "bytes from one point's index to the next (a multiple of 8): a page and one element, a sweep along the slowest dimension"),
        p("ipr", "4", "instructions retired per data reference"),
        p("prefault", "0", "0: every page written once before the loop (a demand fault each); 1: MAP_POPULATE instead"),
        p("huge", "0", "1: the mapping carries MAP_HUGETLB (MapFlags::HUGE)"),
    ],
    build: build_swim,
};

// The insensitive benchmarks of seed 001 §7 ("301.apsi, 186.crafty and 191.fma3d perform
// similarly" under either mode; DAV²M "quickly chooses *an* approach and avoids switching"):
// the swim program with each benchmark's memory footprint as SPEC measured it (SPEC CPU2000
// Memory Footprint, open.spec.org/cpu2000/analysis/memory: resident size of the reference run
// on an AlphaServer 4100) and an access pattern of its kind. Nothing here is set from a
// result of seed 001.

/// `apsi`: 301.apsi.
pub(crate) const APSI: PaperDef = PaperDef {
    name: "apsi",
    description: "301.apsi (seed 001: 'performs similarly' under shadow and nested paging; a meteorology code over 3-D grids, insensitive to the page size): the swim program over `footprint` bytes, SPEC CPU2000's measured footprint of 301.apsi (191 MB), its grid arrays swept in storage order (`stride` = one element: Fortran loops along the fastest dimension, an assumption of the proxy), so a TLB miss comes once per page of each array. Mappings never change after the start; phase 0 marks the start-up (mapping and first writes), phase 1 the loop",
    own: &[
        p("footprint", "191M", "bytes of the grid arrays, one anonymous mapping (SPEC CPU2000's measured memory footprint of 301.apsi)"),
        p("arrays", "14", "arrays the footprint is split into: the swim program's 14 (four touched per point); a power of two would place every array's current page in one TLB set"),
        p("points", "1M", "grid points updated (5 events each: a fetch, three loads, a store)"),
        p("stride", "8", "bytes from one point's index to the next: one element, a sweep in storage order"),
        p("ipr", "4", "instructions retired per data reference (the swim program's)"),
        p("prefault", "0", "0: every page written once before the loop (a demand fault each); 1: MAP_POPULATE instead"),
        p("huge", "0", "1: the mapping carries MAP_HUGETLB (MapFlags::HUGE)"),
    ],
    build: build_swim,
};

/// `fma3d`: 191.fma3d.
pub(crate) const FMA3D: PaperDef = PaperDef {
    name: "fma3d",
    description: "191.fma3d (seed 001: 'much less TLB-intensive' than the benchmarks it studies, and 'performs similarly' under both modes; a finite-element crash simulation): the swim program over `footprint` bytes, SPEC CPU2000's measured footprint of 191.fma3d (103 MB), its element arrays swept in storage order (`stride` = one element: element loops in index order, an assumption of the proxy). Mappings never change after the start; phase 0 marks the start-up (mapping and first writes), phase 1 the loop",
    own: &[
        p("footprint", "103M", "bytes of the element arrays, one anonymous mapping (SPEC CPU2000's measured memory footprint of 191.fma3d)"),
        p("arrays", "14", "arrays the footprint is split into: the swim program's 14 (four touched per point); a power of two would place every array's current page in one TLB set"),
        p("points", "1M", "elements updated (5 events each: a fetch, three loads, a store)"),
        p("stride", "8", "bytes from one element's index to the next: one element, a sweep in storage order"),
        p("ipr", "4", "instructions retired per data reference (the swim program's)"),
        p("prefault", "0", "0: every page written once before the loop (a demand fault each); 1: MAP_POPULATE instead"),
        p("huge", "0", "1: the mapping carries MAP_HUGETLB (MapFlags::HUGE)"),
    ],
    build: build_swim,
};

/// `crafty`: 186.crafty.
pub(crate) const CRAFTY: PaperDef = PaperDef {
    name: "crafty",
    description: "186.crafty (seed 001: 'much less TLB-intensive' than the benchmarks it studies, and 'performs similarly' under both modes; a chess program): the swim program over `footprint` bytes, SPEC CPU2000's measured footprint of 186.crafty (2 MB: its hash and attack tables), probed at random (`stride=0`: hash-table lookups of a game-tree search). Mappings never change after the start; phase 0 marks the start-up (mapping and first writes), phase 1 the loop",
    own: &[
        p("footprint", "2M", "bytes of the tables, one anonymous mapping (SPEC CPU2000's measured memory footprint of 186.crafty)"),
        p("arrays", "14", "arrays the footprint is split into: the swim program's 14 (four touched per point); a power of two would place every array's current page in one TLB set"),
        p("points", "1M", "probes (5 events each: a fetch, three loads, a store)"),
        p("stride", "0", "0: a uniformly random index per probe (hash lookups)"),
        p("ipr", "4", "instructions retired per data reference (the swim program's)"),
        p("prefault", "0", "0: every page written once before the loop (a demand fault each); 1: MAP_POPULATE instead"),
        p("huge", "0", "1: the mapping carries MAP_HUGETLB (MapFlags::HUGE)"),
    ],
    build: build_swim,
};

struct Swim {
    pl: Placed,
    region: u64,
    len: u64,
    array_len: u64,
    arrays: u64,
    elems: u64,
    stride: u64,
    prefault: bool,
    huge: bool,
    ipr: u32,
    points: u64,
    done: u64,
    touched: u64,
    pos: u64,
    started: bool,
    in_loop: bool,
    rng: Xoshiro256PlusPlus,
}

fn build_swim(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let footprint = v.bytes("footprint")?;
    if footprint < 4 * 8 || footprint > l.anon_room() {
        return Err(v.error(
            "footprint",
            format!(
                "expected from 32 bytes to {} bytes (the {}-bit layout's room for anonymous memory), found `{}`",
                l.anon_room(),
                v.raw("bits"),
                v.raw("footprint")
            ),
        ));
    }
    let arrays = count_in(v, "arrays", 4, 1 << 16)?;
    let array_len = footprint / arrays / 8 * 8;
    if array_len == 0 {
        return Err(v.error(
            "arrays",
            format!(
                "{arrays} arrays leave less than 8 bytes each in a footprint of {footprint} bytes"
            ),
        ));
    }
    let stride = v.bytes("stride")?;
    if stride % 8 != 0 {
        return Err(v.error(
            "stride",
            format!(
                "expected a multiple of 8 bytes, found `{}`",
                v.raw("stride")
            ),
        ));
    }
    let elems = array_len / 8;
    Ok(Box::new(Swim {
        pl: place(v, SWIM_IMAGE, l, "bits")?,
        region: l.anon(),
        len: footprint.div_ceil(PAGE) * PAGE,
        array_len,
        arrays,
        elems,
        stride: (stride / 8) % elems,
        prefault: v.flag("prefault")?,
        huge: v.flag("huge")?,
        ipr: v.count_u32("ipr")?,
        points: v.count("points")?,
        done: 0,
        touched: 0,
        pos: 0,
        started: false,
        in_loop: false,
        rng: rng(v)?,
    }))
}

impl Swim {
    fn pages(&self) -> u64 {
        self.len / PAGE
    }
}

impl Script for Swim {
    fn total(&self) -> u64 {
        let touch = if self.prefault { 0 } else { self.pages() };
        setup_events(&SWIM_IMAGE) + 3 + touch + 5 * self.points
    }

    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            out.push(Event::Phase { id: 0 });
            setup(&self.pl, out);
            let mut flags = 0;
            if self.prefault {
                flags |= MapFlags::POPULATE;
            }
            if self.huge {
                flags |= MapFlags::HUGE;
            }
            out.push(mmap(self.region, self.len, Prot::RW, MapFlags(flags)));
            return true;
        }
        if !self.prefault && self.touched < self.pages() {
            let n = (self.pages() - self.touched).min(TOUCH_PER_STEP);
            for k in self.touched..self.touched + n {
                out.push(store(self.region + k * PAGE, self.ipr));
            }
            self.touched += n;
            return true;
        }
        if !self.in_loop {
            self.in_loop = true;
            out.push(Event::Phase { id: 1 });
            return true;
        }
        if self.done == self.points {
            return false;
        }
        let n = (self.points - self.done).min(POINTS_PER_STEP);
        out.reserve(5 * n as usize);
        let code = self.pl.text;
        for _ in 0..n {
            let t = self.done;
            self.done += 1;
            let i = if self.stride == 0 {
                below(&mut self.rng, self.elems)
            } else {
                let i = self.pos;
                self.pos += self.stride;
                if self.pos >= self.elems {
                    self.pos -= self.elems;
                }
                i
            };
            // Four consecutive arrays, starting one further along each point (the loops of
            // CALC1, CALC2 and CALC3 read and write different arrays).
            let k = t % self.arrays;
            let at = |a: u64| self.region + ((k + a) % self.arrays) * self.array_len + i * 8;
            out.push(fetch(code + (t & 3) * 64));
            out.push(load(at(0), self.ipr));
            out.push(load(at(1), self.ipr));
            out.push(load(at(2), self.ipr));
            out.push(store(at(3), self.ipr));
        }
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// `gcc-phases`: the 403.gcc proxy.
pub(crate) const GCC: PaperDef = PaperDef {
    name: "gcc-phases",
    description: "403.gcc (seed 001: best under nested paging; several inputs run one after another, with phase behaviour and page-table changes at phase changes): for each of `inputs` inputs the shell starts cc1 (fork, exec, a large text and a heap); each of its `phases` phases begins with a burst of page-table churn (the previous phase's `arena`-page arena is unmapped, a fresh one mapped and every page of it written, as gcc's garbage collector and obstacks do) and continues with `blocks` blocks of references with locality over code, arena, heap and stack; a Phase marker starts each phase",
    own: &[
        p("inputs", "9", "inputs compiled one after another, a new cc1 process each (403.gcc's reference run has 9)"),
        p("phases", "12", "phases per input"),
        p("arena", "512", "pages unmapped, mapped again and written at each phase change"),
        p("heap", "1024", "pages of cc1's long-lived heap"),
        p("text", "600", "cc1 text pages executed"),
        p("blocks", "3000", "reference blocks per phase (one instruction fetch, `refs` data references, `instrs` instructions of cache-resident work each)"),
        p("refs", "8", "data references per block"),
        p("instrs", "2300", "instructions per block that hit in the caches and TLBs (a Compute event; 0: none). The default gives the proxy SPECint2006's native TLB miss rate, 70.4 misses per 100K instructions (seed 002 Table 1, IntCpu, a property of the suite 403.gcc belongs to), on the opteron2350 preset with a 32-bit guest; `vmmu repro bae11` solves it again on its machine"),
        p("hot_prob", "0.8", "probability a reference goes to the hot set (48 code pages; the first 128 pages of the arena) rather than anywhere in code and data"),
        p("write_ratio", "0.3", "fraction of data references that are stores"),
    ],
    build: build_gcc,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Setup,
    Start,
    Phase(u64),
    End,
}

struct Gcc {
    shell: Placed,
    cc1: Placed,
    arena: u64,
    arena_pages: u64,
    mix: Mix,
    blocks: u64,
    inputs: u64,
    phases: u64,
    input: u64,
    phase_id: u32,
    stage: Stage,
    rng: Xoshiro256PlusPlus,
}

fn build_gcc(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let max = 1 << 18;
    let img = Image {
        text: count_in(v, "text", 1, max)?,
        data: 64,
        heap: count_in(v, "heap", 1, max)?,
        lib_text: 60,
        lib_data: 6,
        stack: 8,
    };
    let cc1 = place(v, img, l, "heap")?;
    let arena_pages = count_in(v, "arena", 1, l.anon_room() / PAGE)?;
    let inputs = count_in(v, "inputs", 0, u32::MAX as u64 - 2)?;
    let phases = count_in(v, "phases", 1, 1 << 20)?;
    if inputs * phases > u32::MAX as u64 {
        return Err(v.error(
            "phases",
            "too many: inputs × phases must fit phase ids (32 bits)",
        ));
    }
    let arena = l.anon();
    let mix = Mix {
        code: Span {
            base: cc1.text,
            pages: img.text,
        },
        hot_code: 48,
        data: vec![
            Span {
                base: arena,
                pages: arena_pages,
            },
            Span {
                base: cc1.heap,
                pages: img.heap,
            },
            Span {
                base: cc1.stack_page(img.stack - 1),
                pages: img.stack,
            },
        ],
        hot_data: 128,
        hot_threshold: threshold(v.ratio("hot_prob")?),
        write_threshold: threshold(v.ratio("write_ratio")?),
        refs: count_in(v, "refs", 0, 1 << 16)? as u32,
        ipr: 3,
        compute: v.count("instrs")?,
    };
    Ok(Box::new(Gcc {
        shell: place(v, SHELL, l, "bits")?,
        cc1,
        arena,
        arena_pages,
        mix,
        blocks: v.count("blocks")?,
        inputs,
        phases,
        input: 0,
        phase_id: 0,
        stage: Stage::Setup,
        rng: rng(v)?,
    }))
}

impl Script for Gcc {
    fn total(&self) -> u64 {
        let phase = 2 + self.arena_pages + self.blocks * self.mix.block_events();
        let per_input = 2
            + exec_child_events(&self.cc1.img)
            + self.phases * phase
            + (self.phases - 1)
            + 1
            + 2
            + 3;
        setup_events(&SHELL) + self.inputs * per_input
    }

    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        let child = 1 + self.input as u32;
        match self.stage {
            Stage::Setup => {
                setup(&self.shell, out);
                self.stage = Stage::Start;
            }
            Stage::Start => {
                if self.input == self.inputs {
                    return false;
                }
                self.input += 1;
                let child = 1 + self.input as u32;
                out.push(Event::Fork { parent: 1, child });
                out.push(Event::Switch { pid: child });
                exec_child(&self.shell, &self.cc1, child, out);
                self.stage = Stage::Phase(0);
            }
            Stage::Phase(k) => {
                out.push(Event::Phase { id: self.phase_id });
                self.phase_id += 1;
                let len = self.arena_pages * PAGE;
                if k > 0 {
                    out.push(Event::munmap(Gva::new(self.arena), len));
                }
                out.push(mmap(self.arena, len, Prot::RW, MapFlags(0)));
                for pg in 0..self.arena_pages {
                    out.push(store(self.arena + pg * PAGE + 8 * (pg & 7), 20));
                }
                self.mix.emit(&mut self.rng, out, self.blocks);
                self.stage = if k + 1 == self.phases {
                    Stage::End
                } else {
                    Stage::Phase(k + 1)
                };
            }
            Stage::End => {
                out.push(Event::munmap(Gva::new(self.arena), self.arena_pages * PAGE));
                out.push(Event::Exit { pid: child });
                out.push(Event::Switch { pid: 1 });
                parent_resumes(&self.shell, out, 2, 50_000);
                self.stage = Stage::Start;
            }
        }
        true
    }
}
