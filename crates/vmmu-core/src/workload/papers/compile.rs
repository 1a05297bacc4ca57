//! A compile job: seed 004's Apache compile ("comprised of many small files. As a result many
//! short-lived processes are created as each file is compiled"; EPT up to 48% faster than
//! shadow paging) and seed 000's Linux kernel compile (22.79% loss under Xen HVM shadow
//! paging).

use super::aim9::{exec_child, exec_child_events, parent_resumes, place, setup, setup_events};
use super::script::{
    compute, count_in, rng, threshold, Image, Layout, Mix, Placed, Script, Span, SHELL,
};
use super::{p, PaperDef};
use crate::error::Result;
use crate::event::Event;
use crate::workload::spec::Values;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The `gcc` driver: parses options, forks the compiler proper and the assembler.
const DRIVER: Image = Image {
    text: 30,
    data: 4,
    heap: 8,
    lib_text: 48,
    lib_data: 6,
    stack: 3,
};

/// `compile`.
pub(crate) const COMPILE: PaperDef = PaperDef {
    name: "compile",
    description: "a parallel-make build of many small files (seed 004's Apache compile, seed 000's kernel compile): for each of `jobs` files, make forks the gcc driver, which execs and forks cc1 (a large text, a heap of `heap` pages, `blocks` blocks of references with locality plus cache-resident compute) and then as (an eighth of cc1's size and work); every process is exec'd, faults its image in, runs and exits",
    own: &[
        p("jobs", "100", "source files compiled"),
        p("parallel", "1", "jobs make runs at once (`make -jN`): make forks a wave of this many drivers, whose lives are interleaved in the stream in slices of 4,096 events (on one vCPU, context switches between them; on several, they run side by side)"),
        p("text", "400", "cc1 text pages executed (of its ~10 MiB of code)"),
        p("heap", "600", "cc1 heap pages written (its trees, RTL and obstacks)"),
        p("blocks", "1500", "cc1 reference blocks per file (one instruction fetch, `refs` data references and `instrs` instructions of cache-resident work each)"),
        p("refs", "8", "data references per block"),
        p("instrs", "20000", "instructions per block that hit in the caches and TLBs (a Compute event)"),
        p("hot_prob", "0.9", "probability a reference goes to the hot set (32 code pages, 48 data pages) rather than anywhere in the image"),
        p("write_ratio", "0.3", "fraction of data references that are stores"),
    ],
    build: build_compile,
};

struct Job {
    img: Placed,
    mix: Mix,
    blocks: u64,
}

struct Compile {
    make: Placed,
    driver: Placed,
    cc1: Job,
    asm: Job,
    instrs: u64,
    jobs: u64,
    parallel: u64,
    i: u64,
    next_pid: u32,
    started: bool,
    rng: Xoshiro256PlusPlus,
}

fn job(v: &Values, img: Image, l: Layout, blocks: u64, key: &str) -> Result<Job> {
    let pl = place(v, img, l, key)?;
    let mix = Mix {
        code: Span {
            base: pl.text,
            pages: img.text,
        },
        hot_code: 32,
        data: vec![
            Span {
                base: pl.heap,
                pages: img.heap,
            },
            Span {
                base: pl.data,
                pages: img.data,
            },
            Span {
                base: pl.stack_page(img.stack - 1),
                pages: img.stack,
            },
        ],
        hot_data: 48,
        hot_threshold: threshold(v.ratio("hot_prob")?),
        write_threshold: threshold(v.ratio("write_ratio")?),
        refs: count_in(v, "refs", 0, 1 << 16)? as u32,
        ipr: 3,
        compute: v.count("instrs")?,
    };
    Ok(Job {
        img: pl,
        mix,
        blocks,
    })
}

fn build_compile(v: &Values) -> Result<Box<dyn Script>> {
    let l = Layout::of(v)?;
    let max = 1 << 18;
    let text = count_in(v, "text", 8, max)?;
    let heap = count_in(v, "heap", 8, max)?;
    let blocks = count_in(v, "blocks", 0, 1 << 32)?;
    let cc1 = Image {
        text,
        data: 40,
        heap,
        lib_text: 60,
        lib_data: 6,
        stack: 8,
    };
    let asm = Image {
        text: (text / 8).max(8),
        data: 8,
        heap: (heap / 8).max(8),
        lib_text: 50,
        lib_data: 6,
        stack: 3,
    };
    let jobs = count_in(v, "jobs", 0, (u32::MAX as u64 - 2) / 3)?;
    let parallel = count_in(v, "parallel", 1, 1024)?;
    Ok(Box::new(Compile {
        make: place(v, SHELL, l, "bits")?,
        driver: place(v, DRIVER, l, "bits")?,
        cc1: job(v, cc1, l, blocks, "heap")?,
        asm: job(v, asm, l, blocks / 8, "heap")?,
        instrs: 50_000,
        jobs,
        parallel,
        i: 0,
        next_pid: 2,
        started: false,
        rng: rng(v)?,
    }))
}

/// Events of one interleaved slice of a `make -jN` wave.
const SLICE: u64 = 4096;

impl Compile {
    fn job_events(j: &Job) -> u64 {
        2 + exec_child_events(&j.img.img) + j.blocks * j.mix.block_events() + 2
    }

    /// Events of one driver's life from its `Switch` to its `Exit`.
    fn life_events(&self) -> u64 {
        1 + exec_child_events(&DRIVER)
            + 1
            + Self::job_events(&self.cc1)
            + Self::job_events(&self.asm)
            + 1
    }

    /// Events of a wave of `n` parallel jobs.
    fn wave_events(&self, n: u64) -> u64 {
        let life = self.life_events();
        n + n * (life + life.div_ceil(SLICE) - 1) + 1 + 3 * n
    }

    /// Driver `driver` runs: execs gcc, which runs cc1 and as; it ends with its `Exit`.
    fn life(&mut self, driver: u32, out: &mut Vec<Event>) {
        out.push(Event::Switch { pid: driver });
        exec_child(&self.make, &self.driver, driver, out);
        out.push(compute(2_000_000));
        self.run(true, driver, out);
        self.run(false, driver, out);
        out.push(Event::Exit { pid: driver });
    }

    /// `make -jN`: make forks `n` drivers, whose lives are interleaved slice by slice (each
    /// slice after the first resumes its process with a `Switch`), then make reaps them.
    fn wave(&mut self, n: u64, out: &mut Vec<Event>) {
        let drivers: Vec<u32> = (0..n as u32).map(|k| self.next_pid + k).collect();
        self.next_pid += n as u32;
        for &d in &drivers {
            out.push(Event::Fork {
                parent: 1,
                child: d,
            });
        }
        let lives: Vec<Vec<Event>> = drivers
            .iter()
            .map(|&d| {
                let mut life = Vec::new();
                self.life(d, &mut life);
                life
            })
            .collect();
        let mut current: Vec<u32> = drivers.clone();
        let mut pos = vec![0usize; lives.len()];
        while pos.iter().zip(&lives).any(|(&p, l)| p < l.len()) {
            for (k, life) in lives.iter().enumerate() {
                if pos[k] >= life.len() {
                    continue;
                }
                if pos[k] > 0 {
                    out.push(Event::Switch { pid: current[k] });
                }
                let end = (pos[k] + SLICE as usize).min(life.len());
                for e in &life[pos[k]..end] {
                    if let Event::Switch { pid } = *e {
                        current[k] = pid;
                    }
                    out.push(e.clone());
                }
                pos[k] = end;
            }
        }
        out.push(Event::Switch { pid: 1 });
        for _ in 0..n {
            parent_resumes(&self.make, out, 2, self.instrs);
        }
    }

    /// The driver `parent` forks `child`, which execs `j` and runs it to its exit.
    fn run(&mut self, which: bool, parent: u32, out: &mut Vec<Event>) {
        let child = self.next_pid;
        self.next_pid += 1;
        let j = if which { &self.cc1 } else { &self.asm };
        out.push(Event::Fork { parent, child });
        out.push(Event::Switch { pid: child });
        exec_child(&self.driver, &j.img, child, out);
        j.mix.emit(&mut self.rng, out, j.blocks);
        out.push(Event::Exit { pid: child });
        out.push(Event::Switch { pid: parent });
    }
}

impl Script for Compile {
    fn total(&self) -> u64 {
        if self.parallel > 1 {
            let (full, rest) = (self.jobs / self.parallel, self.jobs % self.parallel);
            return setup_events(&SHELL)
                + full * self.wave_events(self.parallel)
                + if rest > 0 { self.wave_events(rest) } else { 0 };
        }
        let per = 2
            + exec_child_events(&DRIVER)
            + 1
            + Self::job_events(&self.cc1)
            + Self::job_events(&self.asm)
            + 2
            + 3;
        setup_events(&SHELL) + self.jobs * per
    }

    fn step(&mut self, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.started = true;
            setup(&self.make, out);
            return true;
        }
        if self.i == self.jobs {
            return false;
        }
        if self.parallel > 1 {
            let n = self.parallel.min(self.jobs - self.i);
            self.i += n;
            self.wave(n, out);
            return true;
        }
        self.i += 1;
        let driver = self.next_pid;
        self.next_pid += 1;
        out.push(Event::Fork {
            parent: 1,
            child: driver,
        });
        self.life(driver, out);
        out.push(Event::Switch { pid: 1 });
        parent_resumes(&self.make, out, 2, self.instrs);
        true
    }
}
