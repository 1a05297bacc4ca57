//! Multi-threaded and multi-process workloads shaped like seed 004's multi-vCPU benchmarks:
//! Database Hammer (a database server whose worker threads share a buffer pool and allocate
//! and free per-query memory) and Citrix XenApp (a desktop session: many short-lived
//! processes). Each says which behaviour of its benchmark it imitates.

use super::aim9::{exec_child, exec_child_events, place, setup, setup_events};
use super::script::{
    compute, count_in, load, mmap, rng, store, threshold, Image, Layout, Placed, Script, PAGE,
    SHELL,
};
use super::{p, PaperDef};
use crate::addr::Gva;
use crate::error::Result;
use crate::event::{Event, MapFlags, Prot};
use crate::workload::spec::Values;
use rand::{Rng, RngCore};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The database server's image (a large program: its code and catalog).
const SERVER: Image = Image {
    text: 200,
    data: 40,
    heap: 64,
    lib_text: 80,
    lib_data: 8,
    stack: 8,
};

/// `database`.
pub(crate) const DATABASE: PaperDef = PaperDef {
    name: "database",
    description: "a database server under a client load (seed 004's Database Hammer, where nested paging's advantage grows with vCPUs): `threads` worker threads of one process share a buffer pool of `pool` bytes (populated at start); each of their `queries` queries mmaps a work area of `temp` bytes, writes it (demand faults), reads and updates `rows` rows of the pool (a hot set of 1/16 of it takes `hot_prob` of them), computes, and munmaps the area — an unmap of memory the other threads' TLBs may cache; the threads run their queries side by side: in each round every thread maps its area, then every thread does its query's work, then every thread unmaps (mmap and munmap serialize on the process's memory-map lock, the work does not)",
    own: &[
        p("threads", "8", "worker threads"),
        p("queries", "200", "queries per thread"),
        p("pool", "256M", "buffer pool bytes shared by every thread (binary multiples)"),
        p("rows", "64", "buffer-pool references per query"),
        p("hot_prob", "0.8", "probability a row is in the hot 1/16 of the pool"),
        p("write_ratio", "0.2", "fraction of row references that are updates (stores)"),
        p("temp", "256K", "bytes of the per-query work area (mmap / munmap; binary multiples)"),
        p("instrs", "50000", "instructions of cache-resident work per query (a Compute event)"),
    ],
    build: build_database,
};

struct Database {
    server: Placed,
    pool: u64,
    pool_pages: u64,
    temp_pages: u64,
    threads: u64,
    queries: u64,
    rows: u64,
    hot: u64,
    write: u64,
    instrs: u64,
    q: u64,
    started: bool,
    rng: Xoshiro256PlusPlus,
}

fn bytes_in(v: &Values, key: &str, max: u64) -> Result<u64> {
    let b = v.bytes(key)?;
    if b == 0 || b > max {
        return Err(v.error(
            key,
            format!(
                "expected from 1 byte to {max} bytes (the layout's room), found `{}`",
                v.raw(key)
            ),
        ));
    }
    Ok(b.div_ceil(PAGE))
}

fn build_database(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let threads = count_in(v, "threads", 1, 4096)?;
    let room = l.anon_room() / 2;
    let pool_pages = bytes_in(v, "pool", room)?;
    let temp_pages = bytes_in(v, "temp", room / (2 * threads))?;
    Ok(Box::new(Database {
        server: place(v, SERVER, l, "bits")?,
        pool: l.anon(),
        pool_pages,
        temp_pages,
        threads,
        queries: count_in(v, "queries", 0, 1 << 32)?,
        rows: count_in(v, "rows", 0, 1 << 20)?,
        hot: threshold(v.ratio("hot_prob")?),
        write: threshold(v.ratio("write_ratio")?),
        instrs: v.count("instrs")?,
        q: 0,
        started: false,
        rng: rng(v)?,
    }))
}

impl Database {
    fn tid(k: u64) -> u32 {
        2 + k as u32
    }

    /// Where thread `k`'s work area goes: above the pool, one slot per thread.
    fn temp(&self, k: u64) -> u64 {
        self.pool + (self.pool_pages + k * 2 * self.temp_pages) * PAGE
    }

    fn query_events(&self) -> u64 {
        6 + self.temp_pages + self.rows
    }
}

impl Script for Database {
    fn total(&self) -> u64 {
        setup_events(&SERVER) + 1 + self.threads + self.queries * self.threads * self.query_events()
    }

    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            setup(&self.server, out);
            out.push(mmap(
                self.pool,
                self.pool_pages * PAGE,
                Prot::RW,
                MapFlags(MapFlags::POPULATE),
            ));
            for k in 0..self.threads {
                out.push(Event::ThreadCreate {
                    pid: 1,
                    tid: Self::tid(k),
                });
            }
            return true;
        }
        if self.q == self.queries {
            return false;
        }
        self.q += 1;
        let hot_pages = (self.pool_pages / 16).max(1);
        let switch = |k: u64| Event::Thread {
            pid: 1,
            tid: Self::tid(k),
        };
        for k in 0..self.threads {
            out.push(switch(k));
            out.push(mmap(
                self.temp(k),
                self.temp_pages * PAGE,
                Prot::RW,
                MapFlags(0),
            ));
        }
        for k in 0..self.threads {
            out.push(switch(k));
            let temp = self.temp(k);
            for p in 0..self.temp_pages {
                out.push(store(temp + p * PAGE + 8 * (p % 64), 10));
            }
            for _ in 0..self.rows {
                let page = if self.rng.next_u64() < self.hot {
                    self.rng.gen_range(0..hot_pages)
                } else {
                    self.rng.gen_range(0..self.pool_pages)
                };
                let va = self.pool + page * PAGE + 64 * self.rng.gen_range(0..64u64);
                out.push(if self.rng.next_u64() < self.write {
                    store(va, 40)
                } else {
                    load(va, 40)
                });
            }
            out.push(compute(self.instrs));
        }
        for k in 0..self.threads {
            out.push(switch(k));
            out.push(Event::munmap(
                Gva::new(self.temp(k)),
                self.temp_pages * PAGE,
            ));
        }
        true
    }
}

/// A session program of the desktop workload (an editor, a browser-like client).
const APP: Image = Image {
    text: 120,
    data: 16,
    heap: 96,
    lib_text: 160,
    lib_data: 16,
    stack: 4,
};

/// `xenapp`.
pub(crate) const XENAPP: PaperDef = PaperDef {
    name: "xenapp",
    description: "desktop sessions on a terminal server (seed 004's Citrix XenApp, where nested paging wins with several vCPUs): `sessions` session shells each start `apps` application processes one after another (fork, exec, fault in the image, run `work` references over a heap of `heap` pages, exit) — process churn, whose page-table creation and teardown shadow paging must track; the sessions take turns app by app",
    own: &[
        p("sessions", "8", "user sessions (one shell process each)"),
        p("apps", "20", "applications each session starts, one after another"),
        p("heap", "512", "heap pages each application writes"),
        p("work", "4000", "references each application makes over its image and heap"),
        p("instrs", "200000", "instructions of cache-resident work per application"),
    ],
    build: build_xenapp,
};

struct XenApp {
    shell: Placed,
    app: Placed,
    sessions: u64,
    apps: u64,
    work: u64,
    instrs: u64,
    round: u64,
    next_pid: u32,
    started: bool,
    rng: Xoshiro256PlusPlus,
}

fn build_xenapp(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let heap = count_in(v, "heap", 1, 1 << 18)?;
    Ok(Box::new(XenApp {
        shell: place(v, SHELL, l, "bits")?,
        app: place(v, Image { heap, ..APP }, l, "heap")?,
        sessions: count_in(v, "sessions", 1, 1 << 16)?,
        apps: count_in(v, "apps", 0, 1 << 16)?,
        work: count_in(v, "work", 0, 1 << 32)?,
        instrs: v.count("instrs")?,
        round: 0,
        next_pid: 2,
        started: false,
        rng: rng(v)?,
    }))
}

impl XenApp {
    fn session(k: u64) -> u32 {
        2 + k as u32
    }

    fn app_events(&self) -> u64 {
        // Switch to the session, fork, switch to the child, its exec and image, the heap
        // writes, the work, the compute, exit.
        3 + exec_child_events(&self.app.img) + self.app.img.heap + self.work + 2
    }
}

impl Script for XenApp {
    fn total(&self) -> u64 {
        setup_events(&SHELL) + self.sessions + self.sessions * self.apps * self.app_events()
    }

    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            setup(&self.shell, out);
            // The login manager (pid 1) forks a session shell per user.
            for k in 0..self.sessions {
                out.push(Event::Fork {
                    parent: 1,
                    child: Self::session(k),
                });
            }
            self.next_pid = Self::session(self.sessions);
            return true;
        }
        if self.round == self.apps {
            return false;
        }
        self.round += 1;
        for k in 0..self.sessions {
            let shell = Self::session(k);
            let child = self.next_pid;
            self.next_pid += 1;
            out.push(Event::Switch { pid: shell });
            out.push(Event::Fork {
                parent: shell,
                child,
            });
            out.push(Event::Switch { pid: child });
            exec_child(&self.shell, &self.app, child, out);
            let img = &self.app;
            for p in 0..img.img.heap {
                out.push(store(img.heap + p * PAGE, 20));
            }
            let pages = img.img.text + img.img.heap;
            for _ in 0..self.work {
                let p = self.rng.gen_range(0..pages);
                out.push(if p < img.img.text {
                    load(img.text + p * PAGE + 8 * self.rng.gen_range(0..512u64), 30)
                } else {
                    let q = p - img.img.text;
                    store(img.heap + q * PAGE + 8 * self.rng.gen_range(0..512u64), 30)
                });
            }
            out.push(compute(self.instrs));
            out.push(Event::Exit { pid: child });
        }
        true
    }
}
