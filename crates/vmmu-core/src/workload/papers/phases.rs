//! Workloads with phases for adaptive paging (seed 001 §4, Figure 5): `mixed-phases`, which
//! alternates a phase that favours shadow paging with one that favours nested paging, and
//! `gzip`, 164.gzip's inputs compressed one after another, each starting with a burst of
//! page-table churn.

use super::super::dist::below;
use super::aim9::{exec_child, exec_child_events, parent_resumes, place, setup, setup_events};
use super::cpu::SWIM_IMAGE;
use super::memorymotion::PROGRAM;
use super::script::SHELL;
use super::script::{
    compute, count_in, fetch, instrs, load, mmap, rng, store, Image, Layout, Placed, Script, PAGE,
};
use super::{p, PaperDef};
use crate::addr::Gva;
use crate::error::Result;
use crate::event::{Event, MapFlags, Prot};
use crate::workload::spec::Values;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Points emitted per step of a solver phase.
const POINTS_PER_STEP: u64 = 16_384;

/// Checks a byte-size parameter against the layout's room for anonymous memory.
fn region_bytes(v: &Values, key: &str, l: Layout, min: u64) -> Result<u64> {
    let b = v.bytes(key)?;
    if b < min || b > l.anon_room() {
        return Err(v.error(
            key,
            format!(
                "expected from {min} bytes to {} bytes (the {}-bit layout's room for anonymous memory), found `{}`",
                l.anon_room(),
                v.raw("bits"),
                v.raw(key)
            ),
        ));
    }
    Ok(b)
}

// ---------------------------------------------------------------------------------------------

/// `mixed-phases`.
pub(crate) const MIXED_PHASES: PaperDef = PaperDef {
    name: "mixed-phases",
    description: "alternating phases for adaptive paging (seed 001 §1: 'an HPC application with multiple computation phases might have a preferred paging approach for each phase'): a solver process maps `footprint` bytes once (MAP_POPULATE) and, in the even phases, updates `points` random grid points over it (a fetch, three loads and a store each: many TLB misses, no page-table change: shadow paging's case); in the odd phases the shell runs `jobs` short programs one after another (fork, exec, an `pages`-page allocation written and freed, exit: frequent page-table changes, small working sets: nested paging's case). `phases` phases in all, starting with the solver; a Phase marker starts each",
    own: &[
        p("phases", "6", "phases, alternating solver (even) and shell (odd), solver first"),
        p("footprint", "8M", "bytes of the solver's grid (binary multiples): far more pages than the TLBs map, few enough that a phase touches each page many times"),
        p("points", "500K", "grid points the solver updates per solver phase (5 events each)"),
        p("ipr", "4", "instructions retired per data reference of the solver"),
        p("jobs", "40", "programs the shell runs per shell phase"),
        p("pages", "256", "pages each program allocates, writes once and frees"),
        p("instrs", "20000", "user instructions of the shell per program started"),
    ],
    build: build_mixed,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum MixedStage {
    Setup,
    Phase,
    End,
}

struct Mixed {
    shell: Placed,
    solver: Placed,
    prog: Placed,
    region: u64,
    footprint_pages: u64,
    array_len: u64,
    elems: u64,
    points: u64,
    ipr: u32,
    jobs: u64,
    pages: u64,
    instrs: u64,
    phases: u64,
    phase: u64,
    done: u64,
    child: u32,
    stage: MixedStage,
    rng: Xoshiro256PlusPlus,
}

/// The solver's pid (the shell is 1).
const SOLVER: u32 = 2;
/// Arrays a solver point touches.
const ARRAYS: u64 = 4;

fn build_mixed(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let footprint = region_bytes(v, "footprint", l, ARRAYS * PAGE)?;
    let pages = count_in(v, "pages", 1, 1 << 20)?;
    if pages * PAGE > l.anon_room() {
        return Err(v.error("pages", "the allocation does not fit the layout"));
    }
    let array_len = footprint / ARRAYS / 8 * 8;
    Ok(Box::new(Mixed {
        shell: place(v, SHELL, l, "bits")?,
        solver: place(v, SWIM_IMAGE, l, "bits")?,
        prog: place(v, PROGRAM, l, "bits")?,
        region: l.anon(),
        footprint_pages: footprint.div_ceil(PAGE),
        array_len,
        elems: array_len / 8,
        points: v.count("points")?,
        ipr: instrs(v, "ipr")?,
        jobs: count_in(v, "jobs", 0, u32::MAX as u64 / 4)?,
        pages,
        instrs: v.count("instrs")?,
        phases: count_in(v, "phases", 1, 1 << 16)?,
        phase: 0,
        done: 0,
        child: SOLVER,
        stage: MixedStage::Setup,
        rng: rng(v)?,
    }))
}

impl Mixed {
    fn job_events(&self) -> u64 {
        9 + exec_child_events(&PROGRAM) + self.pages
    }

    fn solver_phase(&self, k: u64) -> bool {
        k.is_multiple_of(2)
    }

    /// Up to [`POINTS_PER_STEP`] solver points.
    fn solve(&mut self, out: &mut Vec<Event>) {
        let n = (self.points - self.done).min(POINTS_PER_STEP);
        out.reserve(5 * n as usize);
        for _ in 0..n {
            let t = self.done;
            self.done += 1;
            let i = below(&mut self.rng, self.elems);
            let at = |a: u64| self.region + a * self.array_len + i * 8;
            out.push(fetch(self.solver.text + (t & 3) * 64));
            out.push(load(at(0), self.ipr));
            out.push(load(at(1), self.ipr));
            out.push(load(at(2), self.ipr));
            out.push(store(at(3), self.ipr));
        }
    }

    /// One program the shell runs.
    fn job(&mut self, out: &mut Vec<Event>) {
        self.done += 1;
        self.child += 1;
        let child = self.child;
        out.push(Event::Fork { parent: 1, child });
        out.push(Event::Switch { pid: child });
        exec_child(&self.shell, &self.prog, child, out);
        let len = self.pages * PAGE;
        out.push(mmap(self.region, len, Prot::RW, MapFlags(0)));
        for pg in 0..self.pages {
            out.push(store(self.region + pg * PAGE, 16));
        }
        out.push(Event::munmap(Gva::new(self.region), len));
        out.push(Event::Exit { pid: child });
        out.push(Event::Switch { pid: 1 });
        parent_resumes(&self.shell, out, 2, self.instrs);
    }
}

impl Script for Mixed {
    fn total(&self) -> u64 {
        let start = setup_events(&SHELL) + 2 + exec_child_events(&SWIM_IMAGE) + 1;
        let solver = self.phases.div_ceil(2);
        let shell = self.phases / 2;
        start + 2 * self.phases + solver * 5 * self.points + shell * self.jobs * self.job_events()
    }

    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        match self.stage {
            MixedStage::Setup => {
                setup(&self.shell, out);
                out.push(Event::Fork {
                    parent: 1,
                    child: SOLVER,
                });
                out.push(Event::Switch { pid: SOLVER });
                exec_child(&self.shell, &self.solver, SOLVER, out);
                out.push(mmap(
                    self.region,
                    self.footprint_pages * PAGE,
                    Prot::RW,
                    MapFlags(MapFlags::POPULATE),
                ));
                self.stage = MixedStage::Phase;
                self.done = u64::MAX;
            }
            MixedStage::Phase => {
                let solving = self.solver_phase(self.phase);
                let length = if solving { self.points } else { self.jobs };
                if self.done == u64::MAX {
                    out.push(Event::Phase {
                        id: self.phase as u32,
                    });
                    out.push(Event::Switch {
                        pid: if solving { SOLVER } else { 1 },
                    });
                    self.done = 0;
                } else if self.done == length {
                    self.phase += 1;
                    self.done = u64::MAX;
                    if self.phase == self.phases {
                        self.stage = MixedStage::End;
                    }
                } else if solving {
                    self.solve(out);
                } else {
                    self.job(out);
                }
            }
            MixedStage::End => return false,
        }
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// gzip's process: a small program whose heap holds the sliding window and hash chains.
const GZIP_IMAGE: Image = Image {
    text: 20,
    data: 4,
    heap: 96,
    lib_text: 24,
    lib_data: 4,
    stack: 2,
};

/// `gzip`.
pub(crate) const GZIP: PaperDef = PaperDef {
    name: "gzip",
    description: "164.gzip (seed 001: best under nested paging; 'the four bursts of low CPI are explained by the four bursts of high paging-related VM exit rate'): one process compresses `inputs` inputs one after another. Each input starts with a burst of page-table churn — the previous input's buffers are unmapped, a `buffer`-byte input buffer is mapped and every page of it written (reading the file), an output buffer a third its size is mapped — and continues with the compression: per input page, `reads` loads through the page in order, `hash` references to the window and hash chains in the heap (96 pages), a store to the output and `instrs` instructions that hit in the caches. A Phase marker starts each input",
    own: &[
        p("inputs", "5", "inputs compressed one after another (SPEC CPU2000 164.gzip's reference run has 5)"),
        p("buffer", "16M", "bytes of each input, read into a fresh buffer (binary multiples)"),
        p("reads", "64", "loads per input page, in order through the page"),
        p("hash", "16", "references per input page to the window and hash chains"),
        p("instrs", "20000", "instructions per input page that hit in the caches and TLBs (about 5 per input byte)"),
    ],
    build: build_gzip,
};

struct Gzip {
    shell: Placed,
    gz: Placed,
    inbuf: u64,
    outbuf: u64,
    pages: u64,
    out_pages: u64,
    reads: u64,
    hash: u64,
    instrs: u64,
    inputs: u64,
    input: u64,
    page: u64,
    started: bool,
    rng: Xoshiro256PlusPlus,
}

/// Pages of input compressed per step.
const PAGES_PER_STEP: u64 = 256;

fn build_gzip(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let buffer = region_bytes(v, "buffer", l, PAGE)?;
    let pages = buffer.div_ceil(PAGE);
    let out_pages = pages.div_ceil(3);
    if (pages + out_pages) * PAGE > l.anon_room() {
        return Err(v.error(
            "buffer",
            "the input and output buffers do not fit the layout",
        ));
    }
    Ok(Box::new(Gzip {
        shell: place(v, SHELL, l, "bits")?,
        gz: place(v, GZIP_IMAGE, l, "bits")?,
        inbuf: l.anon(),
        outbuf: l.anon() + pages * PAGE,
        pages,
        out_pages,
        reads: count_in(v, "reads", 0, PAGE / 8)?,
        hash: count_in(v, "hash", 0, 1 << 16)?,
        instrs: v.count("instrs")?,
        inputs: count_in(v, "inputs", 0, u32::MAX as u64)?,
        input: 0,
        page: 0,
        started: false,
        rng: rng(v)?,
    }))
}

impl Gzip {
    fn burst(&mut self, out: &mut Vec<Event>) {
        out.push(Event::Phase {
            id: self.input as u32,
        });
        if self.input > 0 {
            out.push(Event::munmap(Gva::new(self.inbuf), self.pages * PAGE));
            out.push(Event::munmap(Gva::new(self.outbuf), self.out_pages * PAGE));
        }
        out.push(mmap(self.inbuf, self.pages * PAGE, Prot::RW, MapFlags(0)));
        for pg in 0..self.pages {
            out.push(store(self.inbuf + pg * PAGE, 20));
        }
        out.push(mmap(
            self.outbuf,
            self.out_pages * PAGE,
            Prot::RW,
            MapFlags(0),
        ));
    }

    fn compress(&mut self, out: &mut Vec<Event>) {
        let n = (self.pages - self.page).min(PAGES_PER_STEP);
        let heap = self.gz.img.heap;
        for _ in 0..n {
            let pg = self.page;
            self.page += 1;
            out.push(fetch(self.gz.text + (pg & 7) * 64));
            let gap = PAGE.checked_div(self.reads).unwrap_or(0) / 8 * 8;
            for r in 0..self.reads {
                out.push(load(self.inbuf + pg * PAGE + r * gap, 4));
            }
            for _ in 0..self.hash {
                let at = self.gz.heap
                    + below(&mut self.rng, heap) * PAGE
                    + below(&mut self.rng, PAGE / 8) * 8;
                out.push(load(at, 4));
            }
            out.push(store(self.outbuf + pg / 3 * PAGE + (pg % 3) * 1024, 4));
            if self.instrs > 0 {
                out.push(compute(self.instrs));
            }
        }
    }
}

impl Script for Gzip {
    fn total(&self) -> u64 {
        let start = setup_events(&SHELL) + 2 + exec_child_events(&GZIP_IMAGE);
        let burst = |i: u64| 1 + if i > 0 { 2 } else { 0 } + 2 + self.pages;
        let per_page = 1 + self.reads + self.hash + 1 + u64::from(self.instrs > 0);
        start + (0..self.inputs).map(burst).sum::<u64>() + self.inputs * self.pages * per_page
    }

    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            setup(&self.shell, out);
            out.push(Event::Fork {
                parent: 1,
                child: 2,
            });
            out.push(Event::Switch { pid: 2 });
            exec_child(&self.shell, &self.gz, 2, out);
            return true;
        }
        if self.input == self.inputs {
            return false;
        }
        if self.page == 0 {
            self.burst(out);
        }
        self.compress(out);
        if self.page == self.pages {
            self.page = 0;
            self.input += 1;
        }
        true
    }
}
