//! Seed 004's MMU-intensive kernel microbenchmarks (VMware, run on 32- and 64-bit RHEL 5;
//! EPT up to 600% faster than shadow paging on them): `segv`, `pcd`, `nps`, `fw`.
//!
//! The seed gives one sentence for each; the loops below are the smallest programs that do
//! what the sentence says, on a driver process with a small Linux image.

use super::aim9::{child_runs, parent_resumes, place, setup, setup_events, DRIVER};
use super::script::{compute, count_in, instrs, mmap, store, Layout, Placed, Script, PAGE};
use super::{p, PaperDef};
use crate::addr::Gva;
use crate::error::Result;
use crate::event::{Event, MapFlags, Prot};
use crate::workload::spec::Values;

const ITER_DOC: &str = "loop iterations";

// ---------------------------------------------------------------------------------------------

/// `segv`.
pub(crate) const SEGV: PaperDef = PaperDef {
    name: "segv",
    description: "seed 004 segv, \"measures the processor fault-handling overhead in Linux by repeatedly generating and handling page faults\": the driver maps `pages` pages of anonymous memory, takes a page fault on each (a store to an unmapped page, resolved by the guest kernel) and unmaps them to re-arm, `iterations` times. The model has no signals, so the faults are demand-paging faults rather than SIGSEGVs delivered to a handler",
    own: &[
        p("iterations", "5K", "rounds of map, fault on every page, unmap"),
        p("pages", "64", "pages faulted per round"),
        p("instrs", "200", "user instructions per fault (the faulting loop)"),
    ],
    build: build_segv,
};

struct Segv {
    pl: Placed,
    region: u64,
    pages: u64,
    instrs: u32,
    iterations: u64,
    i: u64,
    started: bool,
}

fn build_segv(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let pages = count_in(v, "pages", 1, l.anon_room() / PAGE)?;
    Ok(Box::new(Segv {
        pl: place(v, DRIVER, l, "bits")?,
        region: l.anon(),
        pages,
        instrs: instrs(v, "instrs")?,
        iterations: count_in(v, "iterations", 0, u32::MAX as u64)?,
        i: 0,
        started: false,
    }))
}

impl Script for Segv {
    fn total(&self) -> u64 {
        setup_events(&DRIVER) + self.iterations * (self.pages + 2)
    }
    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            setup(&self.pl, out);
            return true;
        }
        if self.i == self.iterations {
            return false;
        }
        self.i += 1;
        let len = self.pages * PAGE;
        out.push(mmap(self.region, len, Prot::RW, MapFlags(0)));
        for k in 0..self.pages {
            out.push(store(self.region + k * PAGE, self.instrs));
        }
        out.push(Event::munmap(Gva::new(self.region), len));
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// `pcd`.
pub(crate) const PCD: PaperDef = PaperDef {
    name: "pcd",
    description: "seed 004 pcd, \"measures Linux process creation and destruction time under a pre-defined number of executing processes\": `procs` processes forked from the driver keep running; each iteration the driver forks a child that dirties `child_pages` pages and exits, one running process gets a time slice (it writes `bg_pages` of its pages), and the driver resumes",
    own: &[
        p("iterations", "6K", ITER_DOC),
        p("procs", "8", "processes running besides the driver, scheduled round-robin (one slice per iteration)"),
        p("child_pages", "2", "pages each created child writes before it exits"),
        p("bg_pages", "4", "pages a running process writes in its slice"),
        p("parent_pages", "2", "pages the driver writes between forks"),
        p("instrs", "2000", "user instructions of the driver and of each slice"),
    ],
    build: build_pcd,
};

struct Pcd {
    pl: Placed,
    procs: u32,
    child_pages: u64,
    bg_pages: u64,
    parent_pages: u64,
    instrs: u64,
    iterations: u64,
    i: u64,
    started: bool,
}

fn build_pcd(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let procs = count_in(v, "procs", 1, 1 << 16)? as u32;
    Ok(Box::new(Pcd {
        pl: place(v, DRIVER, l, "bits")?,
        procs,
        child_pages: count_in(v, "child_pages", 0, 1 << 16)?,
        bg_pages: count_in(v, "bg_pages", 0, 1 << 16)?,
        parent_pages: count_in(v, "parent_pages", 0, 1 << 16)?,
        instrs: v.count("instrs")?,
        iterations: count_in(v, "iterations", 0, u32::MAX as u64 - (1 << 17))?,
        i: 0,
        started: false,
    }))
}

/// Forks `n` processes (pids 2..=n+1) from the driver; each writes `pages` of its pages (its
/// own copies) and yields back to the driver. `n × (3 + pages)` events.
fn spawn_running(pl: &Placed, out: &mut Vec<Event>, n: u32, pages: u64) {
    for b in 2..n + 2 {
        out.push(Event::Fork {
            parent: 1,
            child: b,
        });
        out.push(Event::Switch { pid: b });
        for k in 0..pages {
            out.push(store(pl.writable_page(k) + 24, 30));
        }
        out.push(Event::Switch { pid: 1 });
    }
}

impl Script for Pcd {
    fn total(&self) -> u64 {
        setup_events(&DRIVER)
            + self.procs as u64 * (3 + self.bg_pages)
            + self.iterations * (7 + 2 * self.child_pages + self.bg_pages + self.parent_pages)
    }
    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            setup(&self.pl, out);
            spawn_running(&self.pl, out, self.procs, self.bg_pages);
            return true;
        }
        if self.i == self.iterations {
            return false;
        }
        let child = self.procs + 2 + self.i as u32;
        let slice = 2 + (self.i % self.procs as u64) as u32;
        self.i += 1;
        out.push(Event::Fork { parent: 1, child });
        out.push(Event::Switch { pid: child });
        child_runs(&self.pl, out, self.child_pages);
        out.push(Event::Exit { pid: child });
        out.push(Event::Switch { pid: slice });
        for k in 0..self.bg_pages {
            out.push(store(self.pl.writable_page(k) + 32, 30));
        }
        out.push(compute(self.instrs));
        out.push(Event::Switch { pid: 1 });
        parent_resumes(&self.pl, out, self.parent_pages, self.instrs);
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// `nps`.
pub(crate) const NPS: PaperDef = PaperDef {
    name: "nps",
    description: "seed 004 nps, \"measures the Linux process-switching overhead\": `procs` processes forked from the driver pass a token round a ring, as lmbench's lat_ctx does through pipes (VMware's nps is not public; lat_ctx is the documented process-switching benchmark, and the defaults are its standard 8-process, 16 KiB point, \"8p/16K\"); each switch runs the next process, which touches `pages` of its pages (its data, stack, pipe buffer) and retires `instrs` instructions, `iterations` switches in all",
    own: &[
        p("iterations", "100K", "context switches"),
        p("procs", "8", "processes in the ring (lat_ctx 8p)"),
        p("pages", "4", "pages each process touches in its slice (lat_ctx -s 16: 16 KiB of data)"),
        p("instrs", "5000", "user instructions per slice: lat_ctx sums its 16 KiB as 4,096 ints (a load and an add each, about 1.2 instructions per int in lmbench's unrolled loop) and calls the pipe read and write wrappers, about 5,000"),
    ],
    build: build_nps,
};

struct Nps {
    pl: Placed,
    procs: u32,
    pages: u64,
    instrs: u64,
    iterations: u64,
    i: u64,
    started: bool,
}

fn build_nps(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    Ok(Box::new(Nps {
        pl: place(v, DRIVER, l, "bits")?,
        procs: count_in(v, "procs", 1, 1 << 16)? as u32,
        pages: count_in(v, "pages", 0, 1 << 16)?,
        instrs: v.count("instrs")?,
        iterations: v.count("iterations")?,
        i: 0,
        started: false,
    }))
}

impl Script for Nps {
    fn total(&self) -> u64 {
        setup_events(&DRIVER)
            + self.procs as u64 * (3 + self.pages)
            + self.iterations * (2 + self.pages)
    }
    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            setup(&self.pl, out);
            spawn_running(&self.pl, out, self.procs, self.pages);
            return true;
        }
        if self.i == self.iterations {
            return false;
        }
        let n = (self.iterations - self.i).min(1024);
        for _ in 0..n {
            let pid = 2 + (self.i % self.procs as u64) as u32;
            self.i += 1;
            out.push(Event::Switch { pid });
            for k in 0..self.pages {
                out.push(store(self.pl.writable_page(k) + 40, 30));
            }
            out.push(compute(self.instrs));
        }
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// `fw`.
pub(crate) const FW: PaperDef = PaperDef {
    name: "fw",
    description: "seed 004 fw, \"measures Linux process-creation overhead by forking processes and waiting for them to complete\": each iteration the driver forks `batch` children, each runs in turn (dirtying `child_pages` pages) and exits, and the driver, having waited for all, dirties `parent_pages` pages and loops",
    own: &[
        p("iterations", "2500", ITER_DOC),
        p("batch", "4", "children forked before waiting for them"),
        p("child_pages", "2", "pages each child writes before it exits"),
        p("parent_pages", "2", "pages the driver writes between batches"),
        p("heap", "16", "heap pages of the driver (entries each fork copies and write-protects)"),
        p("instrs", "4000", "user instructions of the driver per batch"),
    ],
    build: build_fw,
};

struct Fw {
    pl: Placed,
    batch: u32,
    child_pages: u64,
    parent_pages: u64,
    instrs: u64,
    iterations: u64,
    i: u64,
    next_pid: u32,
    started: bool,
}

fn build_fw(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let batch = count_in(v, "batch", 1, 1 << 16)?;
    let iterations = count_in(v, "iterations", 0, (u32::MAX as u64 - 2) / batch)?;
    let mut img = DRIVER;
    img.heap = count_in(v, "heap", 0, 1 << 18)?;
    Ok(Box::new(Fw {
        pl: place(v, img, l, "heap")?,
        batch: batch as u32,
        child_pages: count_in(v, "child_pages", 0, 1 << 16)?,
        parent_pages: count_in(v, "parent_pages", 0, 1 << 16)?,
        instrs: v.count("instrs")?,
        iterations,
        i: 0,
        next_pid: 2,
        started: false,
    }))
}

impl Script for Fw {
    fn total(&self) -> u64 {
        setup_events(&self.pl.img)
            + self.iterations
                * (self.batch as u64 * (3 + 2 * self.child_pages) + 2 + self.parent_pages)
    }
    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            setup(&self.pl, out);
            return true;
        }
        if self.i == self.iterations {
            return false;
        }
        self.i += 1;
        let first = self.next_pid;
        self.next_pid += self.batch;
        for child in first..self.next_pid {
            out.push(Event::Fork { parent: 1, child });
        }
        for child in first..self.next_pid {
            out.push(Event::Switch { pid: child });
            child_runs(&self.pl, out, self.child_pages);
            out.push(Event::Exit { pid: child });
        }
        out.push(Event::Switch { pid: 1 });
        parent_resumes(&self.pl, out, self.parent_pages, self.instrs);
        true
    }
}
