//! MemoryMotion (seed 000 §3: "executes a large number of processes sequentially, which
//! allocate large amounts of memory, writes to it and then frees it"; 33 s native vs 125 s
//! under Xen HVM shadow paging on Debian, about 1:4).

use super::aim9::{exec_child, exec_child_events, parent_resumes, place, setup, setup_events};
use super::script::{count_in, instrs, mmap, store, Image, Layout, Placed, Script, PAGE, SHELL};
use super::{p, PaperDef};
use crate::addr::Gva;
use crate::error::Result;
use crate::event::{Event, MapFlags, Prot};
use crate::workload::spec::Values;

/// The MemoryMotion program itself: small, dynamically linked.
pub(crate) const PROGRAM: Image = Image {
    text: 4,
    data: 2,
    heap: 2,
    lib_text: 32,
    lib_data: 4,
    stack: 2,
};

/// `memorymotion`.
pub(crate) const MEMORYMOTION: PaperDef = PaperDef {
    name: "memorymotion",
    description: "MemoryMotion (seed 000: about 4x slower under Xen HVM shadow paging than native): `processes` processes run one after another; the shell forks each, it execs a small program that mmaps `size` bytes of anonymous memory, writes every page `writes` times (a demand-paging fault per page), munmaps it and exits; the shell waits and starts the next",
    own: &[
        p("processes", "20", "processes run one after another"),
        p("size", "32M", "bytes each process allocates, writes and frees (binary multiples; rounded up to 4 KiB)"),
        p("writes", "1", "stores to each page of the allocation (the first one faults), spread over the page"),
        p("ipr", "16", "instructions retired per store (the writing loop)"),
        p("instrs", "20000", "user instructions of the shell per process started (fork, wait, its loop)"),
    ],
    build: build_memorymotion,
};

struct MemoryMotion {
    shell: Placed,
    prog: Placed,
    region: u64,
    pages: u64,
    writes: u64,
    ipr: u32,
    instrs: u64,
    processes: u64,
    i: u64,
    started: bool,
}

fn build_memorymotion(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let processes = count_in(v, "processes", 0, u32::MAX as u64 - 2)?;
    let size = v.bytes("size")?;
    if size == 0 || size > l.anon_room() {
        return Err(v.error(
            "size",
            format!(
                "expected from 1 byte to {} bytes (the {}-bit layout's room for anonymous memory), found `{}`",
                l.anon_room(),
                v.raw("bits"),
                v.raw("size")
            ),
        ));
    }
    let writes = count_in(v, "writes", 1, PAGE / 8)?;
    Ok(Box::new(MemoryMotion {
        shell: place(v, SHELL, l, "bits")?,
        prog: place(v, PROGRAM, l, "bits")?,
        region: l.anon(),
        pages: size.div_ceil(PAGE),
        writes,
        ipr: instrs(v, "ipr")?,
        instrs: v.count("instrs")?,
        processes,
        i: 0,
        started: false,
    }))
}

impl Script for MemoryMotion {
    fn total(&self) -> u64 {
        let per = 2 + exec_child_events(&PROGRAM) + 2 + self.pages * self.writes + 2 + 2 + 1;
        setup_events(&SHELL) + self.processes * per
    }

    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            setup(&self.shell, out);
            return true;
        }
        if self.i == self.processes {
            return false;
        }
        self.i += 1;
        let child = 1 + self.i as u32;
        out.push(Event::Fork { parent: 1, child });
        out.push(Event::Switch { pid: child });
        exec_child(&self.shell, &self.prog, child, out);
        let len = self.pages * PAGE;
        out.push(mmap(self.region, len, Prot::RW, MapFlags(0)));
        let gap = PAGE / self.writes / 8 * 8;
        for pg in 0..self.pages {
            let base = self.region + pg * PAGE;
            for w in 0..self.writes {
                out.push(store(base + w * gap, self.ipr));
            }
        }
        out.push(Event::munmap(Gva::new(self.region), len));
        out.push(Event::Exit { pid: child });
        out.push(Event::Switch { pid: 1 });
        parent_resumes(&self.shell, out, 2, self.instrs);
        true
    }
}
