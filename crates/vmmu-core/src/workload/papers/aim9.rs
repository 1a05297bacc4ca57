//! The Aim9 memory tests of seed 000 Table 8: `page_test`, `brk_test`, `fork_test`,
//! `exec_test`.
//!
//! Aim9 runs each test in one process (the `singleuser` driver) for a fixed time and reports
//! operations per second. Here each test is that driver process with a small Linux image
//! (program text, data, heap, libc, stack), created and warmed up first, then `iterations`
//! repetitions of the test's loop body.

use super::script::{
    compute, count_in, fetch, instrs, store, Image, Layout, Placed, Script, MAP_EVENTS, PAGE,
};
use super::{p, PaperDef};
use crate::addr::Gva;
use crate::error::Result;
use crate::event::Event;
use crate::workload::spec::Values;

/// The Aim9 driver process: a small statically sized program using libc.
pub(crate) const DRIVER: Image = Image {
    text: 24,
    data: 6,
    heap: 8,
    lib_text: 40,
    lib_data: 4,
    stack: 3,
};

/// Instructions each warm-up store retires (the code that first writes the page).
pub(crate) const WARM_IPR: u32 = 20;

/// The first events of every single-driver workload: create pid 1, map and warm its image.
/// [`setup_events`] of them.
pub(crate) fn setup(pl: &Placed, out: &mut Vec<Event>) {
    out.push(Event::ProcessCreate { pid: 1 });
    pl.map(out);
    pl.warm(out, WARM_IPR);
}

/// Number of events [`setup`] emits.
pub(crate) fn setup_events(img: &Image) -> u64 {
    1 + MAP_EVENTS + img.pages()
}

/// Places `img`, or fails naming `key` (the parameter that made it too large).
pub(crate) fn place(v: &Values, img: Image, l: Layout, key: &str) -> Result<Placed> {
    img.place(l).ok_or_else(|| {
        v.error(
            key,
            format!(
                "the process image does not fit the {}-bit layout",
                v.raw("bits")
            ),
        )
    })
}

/// The driver after a fork: it dirties `pages` of its writable pages (stack frame, globals:
/// copy-on-write faults while a child shares them, write-enable faults once it has gone) and
/// runs its loop (`instrs` instructions). `pages + 1` events.
pub(crate) fn parent_resumes(pl: &Placed, out: &mut Vec<Event>, pages: u64, instrs: u64) {
    for k in 0..pages {
        out.push(store(pl.writable_page(k) + 8 * k, 30));
    }
    out.push(compute(instrs));
}

/// A forked child that runs briefly and exits: it dirties `pages` writable pages (copy-on-write
/// faults), each after fetching the libc code that writes it (the exit path: atexit handlers,
/// stdio flush). `2 × pages` events.
pub(crate) fn child_runs(pl: &Placed, out: &mut Vec<Event>, pages: u64) {
    for k in 0..pages {
        out.push(fetch(
            pl.lib_text + (k % pl.img.lib_text.max(1)) * PAGE + 0x40,
        ));
        out.push(store(pl.writable_page(k) + 16, 40));
    }
}

const ITER_DOC: &str =
    "loop iterations (Aim9 repeats the test body for a fixed time; this fixes the count)";

// ---------------------------------------------------------------------------------------------

/// `aim9-page_test`.
pub(crate) const PAGE_TEST: PaperDef = PaperDef {
    name: "aim9-page_test",
    description: "Aim9 page_test (seed 000 Table 8, shadow paging loses 84%): the driver grows its heap with brk by `pages` pages, writes each new page once (a demand-paging fault each), and shrinks the heap back (the pages are unmapped), `iterations` times",
    own: &[
        p("iterations", "5K", ITER_DOC),
        p("pages", "32", "pages the break grows by and shrinks back per iteration, each written once"),
        p("ipr", "20", "instructions retired per page written (the touching loop)"),
    ],
    build: build_page_test,
};

struct PageTest {
    pl: Placed,
    pages: u64,
    ipr: u32,
    iterations: u64,
    i: u64,
    started: bool,
}

fn build_page_test(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let iterations = count_in(v, "iterations", 0, u32::MAX as u64)?;
    let pages = count_in(v, "pages", 1, 1 << 18)?;
    let ipr = instrs(v, "ipr")?;
    let pl = place_with_room(v, l, pages)?;
    Ok(Box::new(PageTest {
        pl,
        pages,
        ipr,
        iterations,
        i: 0,
        started: false,
    }))
}

/// The driver placed with room for its break to grow by `pages` pages.
fn place_with_room(v: &Values, l: Layout, pages: u64) -> Result<Placed> {
    let mut img = DRIVER;
    img.heap += pages;
    let mut pl = place(v, img, l, "pages")?;
    pl.img.heap = DRIVER.heap;
    Ok(pl)
}

impl Script for PageTest {
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
        let base = self.pl.heap_end();
        out.push(Event::Brk {
            end: Gva::new(base + self.pages * PAGE),
        });
        for k in 0..self.pages {
            out.push(store(base + k * PAGE, self.ipr));
        }
        out.push(Event::Brk {
            end: Gva::new(base),
        });
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// `aim9-brk_test`.
pub(crate) const BRK_TEST: PaperDef = PaperDef {
    name: "aim9-brk_test",
    description: "Aim9 brk_test (seed 000 Table 8, shadow paging loses 0.86%): the driver moves its break up by `pages` pages and back down, never touching the memory, `iterations` times: only the size of the address space changes, no page-table entry is written",
    own: &[
        p("iterations", "200K", ITER_DOC),
        p("pages", "32", "pages the break moves up and back down per iteration"),
        p("instrs", "400", "user instructions around each brk call (the loop and libc's wrapper)"),
    ],
    build: build_brk_test,
};

struct BrkTest {
    pl: Placed,
    pages: u64,
    instrs: u64,
    iterations: u64,
    i: u64,
    started: bool,
}

fn build_brk_test(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let iterations = count_in(v, "iterations", 0, u32::MAX as u64)?;
    let pages = count_in(v, "pages", 1, 1 << 18)?;
    let instrs = v.count("instrs")?;
    let pl = place_with_room(v, l, pages)?;
    Ok(Box::new(BrkTest {
        pl,
        pages,
        instrs,
        iterations,
        i: 0,
        started: false,
    }))
}

impl Script for BrkTest {
    fn total(&self) -> u64 {
        setup_events(&DRIVER) + self.iterations * 4
    }
    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        let base = self.pl.heap_end();
        if !self.started {
            self.started = true;
            setup(&self.pl, out);
            return true;
        }
        if self.i == self.iterations {
            return false;
        }
        // Many iterations per step: each is only four events.
        let n = (self.iterations - self.i).min(4096);
        for _ in 0..n {
            out.push(compute(self.instrs));
            out.push(Event::Brk {
                end: Gva::new(base + self.pages * PAGE),
            });
            out.push(compute(self.instrs));
            out.push(Event::Brk {
                end: Gva::new(base),
            });
        }
        self.i += n;
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// `aim9-fork_test`.
pub(crate) const FORK_TEST: PaperDef = PaperDef {
    name: "aim9-fork_test",
    description: "Aim9 fork_test (seed 000 Table 8, shadow paging loses 91%): the driver forks; the child dirties `child_pages` pages (copy-on-write) and exits; the driver waits (a switch back), dirties `parent_pages` pages of its own and loops, `iterations` times. Every fork write-protects the driver's writable pages and copies its page tables; every exit tears the child's down",
    own: &[
        p("iterations", "8K", ITER_DOC),
        p("child_pages", "2", "pages each child writes before exiting (its stack frame, libc's exit state)"),
        p("parent_pages", "2", "pages the driver writes between forks (its stack frame and loop state)"),
        p("heap", "8", "heap pages of the driver (more pages: more entries for each fork to copy and write-protect)"),
        p("instrs", "2000", "user instructions of the driver's loop body per iteration (fork and wait wrappers, bookkeeping)"),
    ],
    build: build_fork_test,
};

struct ForkTest {
    pl: Placed,
    child_pages: u64,
    parent_pages: u64,
    instrs: u64,
    iterations: u64,
    i: u64,
    started: bool,
}

fn build_fork_test(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let iterations = count_in(v, "iterations", 0, u32::MAX as u64 - 2)?;
    let child_pages = count_in(v, "child_pages", 0, 1 << 16)?;
    let parent_pages = count_in(v, "parent_pages", 0, 1 << 16)?;
    let mut img = DRIVER;
    img.heap = count_in(v, "heap", 0, 1 << 18)?;
    let pl = place(v, img, l, "heap")?;
    Ok(Box::new(ForkTest {
        pl,
        child_pages,
        parent_pages,
        instrs: v.count("instrs")?,
        iterations,
        i: 0,
        started: false,
    }))
}

impl Script for ForkTest {
    fn total(&self) -> u64 {
        setup_events(&self.pl.img)
            + self.iterations * (4 + 2 * self.child_pages + self.parent_pages + 1)
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
        let child = 1 + self.i as u32;
        out.push(Event::Fork { parent: 1, child });
        out.push(Event::Switch { pid: child });
        child_runs(&self.pl, out, self.child_pages);
        out.push(Event::Exit { pid: child });
        out.push(Event::Switch { pid: 1 });
        parent_resumes(&self.pl, out, self.parent_pages, self.instrs);
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// `aim9-exec_test`.
pub(crate) const EXEC_TEST: PaperDef = PaperDef {
    name: "aim9-exec_test",
    description: "Aim9 exec_test (seed 000 Table 8, shadow paging loses 81%): the driver forks; the child execs a small dynamically linked program, which maps its text, data, heap, ld.so and libc and stack, touches them (the loader's relocations, the program's start-up) and exits; the driver waits and loops, `iterations` times",
    own: &[
        p("iterations", "1200", ITER_DOC),
        p("text", "2", "text pages of the exec'd program executed"),
        p("lib_text", "48", "shared-library text pages executed (ld.so resolving symbols, libc start-up and exit)"),
        p("lib_data", "6", "shared-library data pages written (relocations, GOT, libc state)"),
        p("data", "2", "data and bss pages of the program written"),
        p("stack", "2", "stack pages of the program written"),
        p("parent_pages", "2", "pages the driver writes between forks"),
        p("instrs", "2000", "user instructions of the driver's loop body per iteration"),
    ],
    build: build_exec_test,
};

struct ExecTest {
    pl: Placed,
    prog: Placed,
    parent_pages: u64,
    instrs: u64,
    iterations: u64,
    i: u64,
    started: bool,
}

fn build_exec_test(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let iterations = count_in(v, "iterations", 0, u32::MAX as u64 - 2)?;
    let max = 1 << 18;
    let prog = Image {
        text: count_in(v, "text", 1, max)?,
        data: count_in(v, "data", 1, max)?,
        heap: 0,
        lib_text: count_in(v, "lib_text", 1, max)?,
        lib_data: count_in(v, "lib_data", 1, max)?,
        stack: count_in(v, "stack", 1, max)?,
    };
    Ok(Box::new(ExecTest {
        pl: place(v, DRIVER, l, "bits")?,
        prog: place(v, prog, l, "text")?,
        parent_pages: count_in(v, "parent_pages", 0, 1 << 16)?,
        instrs: v.count("instrs")?,
        iterations,
        i: 0,
        started: false,
    }))
}

/// A forked child that execs `prog`: it writes its stack once (the return from fork, a
/// copy-on-write fault), execs, maps and starts the program, which exits.
/// `exec_child_events(prog)` events.
pub(crate) fn exec_child(parent: &Placed, prog: &Placed, child: u32, out: &mut Vec<Event>) {
    out.push(store(parent.stack_page(0) + 64, 40));
    out.push(Event::Exec { pid: child });
    prog.map(out);
    prog.warm(out, WARM_IPR);
}

/// Events of [`exec_child`].
pub(crate) fn exec_child_events(prog: &Image) -> u64 {
    2 + MAP_EVENTS + prog.pages()
}

impl Script for ExecTest {
    fn total(&self) -> u64 {
        setup_events(&self.pl.img)
            + self.iterations * (2 + exec_child_events(&self.prog.img) + 2 + self.parent_pages + 1)
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
        let child = 1 + self.i as u32;
        out.push(Event::Fork { parent: 1, child });
        out.push(Event::Switch { pid: child });
        exec_child(&self.pl, &self.prog, child, out);
        out.push(Event::Exit { pid: child });
        out.push(Event::Switch { pid: 1 });
        parent_resumes(&self.pl, out, self.parent_pages, self.instrs);
        true
    }
}

// ---------------------------------------------------------------------------------------------

/// The small dynamically linked program exec_test runs, and the commands of shell_rtns'
/// script: 2 text pages, 2 data, ld.so and libc (48 text, 6 data), 2 stack pages.
const SMALL_PROGRAM: Image = Image {
    text: 2,
    data: 2,
    heap: 0,
    lib_text: 48,
    lib_data: 6,
    stack: 2,
};

/// `aim9-shell_rtns`.
pub(crate) const SHELL_RTNS: PaperDef = PaperDef {
    name: "aim9-shell_rtns",
    description: "Aim9 shell_rtns_1/2/3 (seed 000 Table 8, shadow paging loses 77%): as Aim9's aim_system(), the driver forks a child that calls system(\"aim_N.sh\"): system() forks a shell, which execs /bin/sh -c and then the script's interpreter (/bin/sh again, two execs of a shell image); the script runs `commands` small dynamically linked programs one after another (fork, exec, exit, the shell waits and reads its next line); the shell exits, the child exits, the driver waits and loops, `iterations` times",
    own: &[
        p("iterations", "300", ITER_DOC),
        p("commands", "3", "programs the script runs (aim_N.sh is site-customisable; 3 makes a script about 4.7 exec_test iterations of process work, the ratio of Table 8's native rates, 1144 vs 242 per second)"),
        p("parent_pages", "2", "pages the driver and the shell write when they resume after a wait"),
        p("instrs", "2000", "user instructions of the driver per iteration, and of the shell per command (reading and parsing the next line, the fork and wait wrappers)"),
    ],
    build: build_shell_rtns,
};

struct ShellRtns {
    pl: Placed,
    shell: Placed,
    prog: Placed,
    commands: u64,
    parent_pages: u64,
    instrs: u64,
    iterations: u64,
    i: u64,
    next_pid: u32,
    started: bool,
}

fn build_shell_rtns(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let commands = count_in(v, "commands", 0, 1 << 10)?;
    let per = 2 + commands;
    let iterations = count_in(v, "iterations", 0, (u32::MAX as u64 - 2) / per)?;
    Ok(Box::new(ShellRtns {
        pl: place(v, DRIVER, l, "bits")?,
        shell: place(v, super::script::SHELL, l, "bits")?,
        prog: place(v, SMALL_PROGRAM, l, "bits")?,
        commands,
        parent_pages: count_in(v, "parent_pages", 0, 1 << 16)?,
        instrs: v.count("instrs")?,
        iterations,
        i: 0,
        next_pid: 2,
        started: false,
    }))
}

impl Script for ShellRtns {
    fn total(&self) -> u64 {
        let shell = exec_child_events(&self.shell.img);
        let command = 2 + exec_child_events(&self.prog.img) + 2 + self.parent_pages + 1;
        setup_events(&self.pl.img)
            + self.iterations
                * (4 + 2 * shell + self.commands * command + 4 + self.parent_pages + 1)
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
        let (child, sh) = (self.next_pid, self.next_pid + 1);
        self.next_pid += 2;
        // aim_system(): fork; the child's system() forks the shell.
        out.push(Event::Fork { parent: 1, child });
        out.push(Event::Switch { pid: child });
        out.push(Event::Fork {
            parent: child,
            child: sh,
        });
        out.push(Event::Switch { pid: sh });
        // execl("/bin/sh", "sh", "-c", "aim_1.sh N"), then the script's #! interpreter.
        exec_child(&self.pl, &self.shell, sh, out);
        exec_child(&self.shell, &self.shell, sh, out);
        for _ in 0..self.commands {
            let cmd = self.next_pid;
            self.next_pid += 1;
            out.push(Event::Fork {
                parent: sh,
                child: cmd,
            });
            out.push(Event::Switch { pid: cmd });
            exec_child(&self.shell, &self.prog, cmd, out);
            out.push(Event::Exit { pid: cmd });
            out.push(Event::Switch { pid: sh });
            parent_resumes(&self.shell, out, self.parent_pages, self.instrs);
        }
        out.push(Event::Exit { pid: sh });
        out.push(Event::Switch { pid: child });
        out.push(Event::Exit { pid: child });
        out.push(Event::Switch { pid: 1 });
        parent_resumes(&self.pl, out, self.parent_pages, self.instrs);
        true
    }
}
