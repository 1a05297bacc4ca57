//! The figures `make bench` measures: what each runs, its unit and its target.
//!
//! Every figure is measured in a process of its own (see `main.rs`), so its peak memory is its
//! own and no figure warms the allocator or the page cache for the next. Simulation figures
//! time only the reference phase: the set-up events before the first reference (process
//! creation, a populated mmap) are simulated first, untimed, and reported apart as `setup_s`.

use crate::floor::{Floor, Model};
use crate::floor_nested::NestedFloor;
use std::path::{Path, PathBuf};
use std::time::Instant;
use vmmu_core::config;
use vmmu_core::event::{Event, EventSource};
use vmmu_core::sim::Simulator;
use vmmu_core::{trace, workload, Result};

/// What a figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Millions of memory references (loads, stores, fetches) per second of wall clock.
    MRefsPerSec,
    /// Millions of events per second of wall clock.
    MEventsPerSec,
    /// Seconds of wall clock.
    Seconds,
    /// Peak resident memory of the measuring process, MiB.
    MiB,
    /// A time over another time.
    Ratio,
}

impl Unit {
    /// The unit as printed.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::MRefsPerSec => "M refs/s",
            Unit::MEventsPerSec => "M events/s",
            Unit::Seconds => "s",
            Unit::MiB => "MiB",
            Unit::Ratio => "x",
        }
    }

    /// Whether a larger value is better (rates) or worse (time, memory).
    pub fn higher_is_better(self) -> bool {
        matches!(self, Unit::MRefsPerSec | Unit::MEventsPerSec)
    }
}

/// What a figure is held to.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// No target: the figure is reported for comparison between commits.
    None,
    /// A fixed value (at least it for rates, at most it for time and memory).
    Fixed(f64),
    /// A value the measurement itself produces (for replay: the simulator's own rate in the
    /// same run, time waiting for the trace reader excluded).
    Measured,
    /// `factor` times another figure of the same bench run.
    Figure(&'static str, f64),
    /// The interval core model's rate on the workload of the named row, which runs it under
    /// the additive model: at least [`INTERVAL_RATE`] of that row's value in the same bench
    /// run (the report prints the ratio beside it).
    Interval(&'static str),
}

/// How a figure is measured.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Simulates a workload; counts references of the reference phase.
    Refs {
        spec: &'static str,
        overrides: &'static [(&'static str, &'static str)],
    },
    /// Runs a floor model on a workload after vmmu's set-up of it under `overrides`; counts
    /// references of the reference phase. `of` names the row (vmmu's, same workload and
    /// configuration) whose floor it is: the report sets that row's value and target beside it.
    Floor {
        spec: &'static str,
        overrides: &'static [(&'static str, &'static str)],
        model: FloorModel,
        of: &'static str,
    },
    /// Simulates a workload whole; counts events.
    Events {
        spec: &'static str,
        overrides: &'static [(&'static str, &'static str)],
    },
    /// Decodes a `.vtrace` of `stride:footprint=1G,stride=64` into batches, simulating nothing.
    Decode,
    /// Writes the events of `stride:footprint=1G,stride=64` to a `.vtrace` at zstd `level`
    /// with the writer's other defaults, timing the writer alone; the bytes per reference beside
    /// the rate.
    Encode { level: i32 },
    /// Draws the events of generator `spec` in batches of 4096, simulating nothing.
    Generate { spec: &'static str },
    /// Decodes the recorded `gzip` trace (recording it first, untimed, if this bench run has
    /// not) into batches, simulating nothing.
    DecodeRecorded,
    /// Records `gzip` of 512 KiB with Valgrind, end to end.
    Record,
    /// Replays the recorded `gzip` trace under `overrides`.
    Replay {
        overrides: &'static [(&'static str, &'static str)],
    },
    /// Replays a `stride:footprint=16M` trace of `refs` references natively; the figure is the
    /// process's peak memory.
    ReplayMemory { refs: u64 },
    /// Wall time of `vmmu repro all` (needs the `vmmu` command).
    ReproAll,
    /// Simulation time of an adaptive run of `workload` under `policy` over the static
    /// modes' (docs/policies.md): over the slower static mode's, or over both static runs'
    /// together for the oracle, which runs both.
    Adaptive {
        policy: &'static str,
        workload: &'static str,
    },
    /// Simulation time of a `database` run on `vcpus` vCPUs over the same run on one
    /// (docs/model.md, "vCPUs"): the same references, so the ratio of time per reference.
    Vcpus { vcpus: u32 },
}

/// Which floor a [`Kind::Floor`] row runs.
#[derive(Clone, Copy, Debug)]
pub enum FloorModel {
    /// Native paging (floor.rs).
    Native,
    /// Nested paging 2d+nt (floor_nested.rs).
    Nested,
}

/// One figure of the bench.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// Stable name (the key in `results/bench.json`).
    pub name: &'static str,
    /// What is measured, as printed.
    pub label: &'static str,
    /// Unit of the value.
    pub unit: Unit,
    /// What the value is held to.
    pub target: Target,
    /// How it is measured.
    pub kind: Kind,
}

impl Row {
    /// The row this one is set against in the same bench run — a floor's vmmu row, an
    /// interval row's additive row — and measured in alternation with, round by round.
    pub fn set_against(&self) -> Option<&'static str> {
        match (self.kind, self.target) {
            (Kind::Floor { of, .. }, _) | (_, Target::Interval(of)) => Some(of),
            _ => None,
        }
    }
}

const NESTED_2D_NT: &[(&str, &str)] = &[("mode", "nested"), ("machine.pwc.design", "2d+nt")];
/// The interval core model (docs/model.md, "Timing"); its rows are held to [`INTERVAL_RATE`]
/// of the additive model's rate on the same workload.
const INTERVAL: (&str, &str) = ("machine.core.model", "interval");

/// The share of the additive model's rate the interval model is held to on every row.
pub const INTERVAL_RATE: f64 = 0.7;
/// Nested 2d+nt with guest memory for a 4 GiB footprint.
const NESTED_4G: &[(&str, &str)] = &[
    ("mode", "nested"),
    ("machine.pwc.design", "2d+nt"),
    ("guest.memory", "\"8G\""),
];

/// Every figure, in the order printed: the rows of the speed targets first, with the
/// floors and replays beside them, then those kept to compare commits (docs/performance.md,
/// "The figures and their targets", says what each exercises).
pub const ROWS: &[Row] = &[
    Row {
        name: "stream-16m-native",
        label: "TLB-hit stream 16 MiB, 20 M refs, native",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(100.0),
        kind: Kind::Refs {
            spec: "stream:footprint=16M,refs=20M,prefault=1",
            overrides: &[("mode", "native")],
        },
    },
    Row {
        name: "stream-16m-nested",
        label: "TLB-hit stream 16 MiB, 20 M refs, nested 2d+nt",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(100.0),
        kind: Kind::Refs {
            spec: "stream:footprint=16M,refs=20M,prefault=1",
            overrides: NESTED_2D_NT,
        },
    },
    Row {
        name: "stream-16m-shadow",
        label: "TLB-hit stream 16 MiB, 20 M refs, shadow",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(100.0),
        kind: Kind::Refs {
            spec: "stream:footprint=16M,refs=20M,prefault=1",
            overrides: &[("mode", "shadow")],
        },
    },
    Row {
        name: "stream-16m-native-interval",
        label: "TLB-hit stream 16 MiB, 20 M refs, native, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("stream-16m-native"),
        kind: Kind::Refs {
            spec: "stream:footprint=16M,refs=20M,prefault=1",
            overrides: &[("mode", "native"), INTERVAL],
        },
    },
    Row {
        name: "stream-16m-nested-interval",
        label: "TLB-hit stream 16 MiB, 20 M refs, nested 2d+nt, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("stream-16m-nested"),
        kind: Kind::Refs {
            spec: "stream:footprint=16M,refs=20M,prefault=1",
            overrides: &[
                ("mode", "nested"),
                ("machine.pwc.design", "2d+nt"),
                INTERVAL,
            ],
        },
    },
    Row {
        name: "stream-16m-shadow-interval",
        label: "TLB-hit stream 16 MiB, 20 M refs, shadow, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("stream-16m-shadow"),
        kind: Kind::Refs {
            spec: "stream:footprint=16M,refs=20M,prefault=1",
            overrides: &[("mode", "shadow"), INTERVAL],
        },
    },
    Row {
        name: "random-64m-native",
        label: "random 64 MiB prefaulted, 10 M refs, native",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(15.0),
        kind: Kind::Refs {
            spec: "random:footprint=64M,refs=10M,prefault=1",
            overrides: &[("mode", "native")],
        },
    },
    Row {
        name: "random-64m-nested",
        label: "random 64 MiB prefaulted, 10 M refs, nested 2d+nt",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(15.0),
        kind: Kind::Refs {
            spec: "random:footprint=64M,refs=10M,prefault=1",
            overrides: NESTED_2D_NT,
        },
    },
    Row {
        name: "random-64m-native-interval",
        label: "random 64 MiB prefaulted, 10 M refs, native, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("random-64m-native"),
        kind: Kind::Refs {
            spec: "random:footprint=64M,refs=10M,prefault=1",
            overrides: &[("mode", "native"), INTERVAL],
        },
    },
    Row {
        name: "random-64m-nested-interval",
        label: "random 64 MiB prefaulted, 10 M refs, nested 2d+nt, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("random-64m-nested"),
        kind: Kind::Refs {
            spec: "random:footprint=64M,refs=10M,prefault=1",
            overrides: &[
                ("mode", "nested"),
                ("machine.pwc.design", "2d+nt"),
                INTERVAL,
            ],
        },
    },
    Row {
        name: "random-4g-nested",
        label: "random 4 GiB prefaulted, 2 M refs, nested 2d+nt",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(15.0),
        kind: Kind::Refs {
            spec: "random:footprint=4G,refs=2M,prefault=1",
            overrides: NESTED_4G,
        },
    },
    Row {
        name: "random-4g-nested-interval",
        label: "random 4 GiB prefaulted, 2 M refs, nested 2d+nt, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("random-4g-nested"),
        kind: Kind::Refs {
            spec: "random:footprint=4G,refs=2M,prefault=1",
            overrides: &[
                ("mode", "nested"),
                ("machine.pwc.design", "2d+nt"),
                ("guest.memory", "\"8G\""),
                INTERVAL,
            ],
        },
    },
    Row {
        name: "decode",
        label: "vtrace decoding alone (stride, 50 M refs)",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(200.0),
        kind: Kind::Decode,
    },
    Row {
        name: "encode",
        label: "vtrace writing alone (stride, 50 M refs, zstd level 3)",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Encode { level: 3 },
    },
    Row {
        name: "encode-level1",
        label: "vtrace writing alone, zstd level 1",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Encode { level: 1 },
    },
    Row {
        name: "encode-level9",
        label: "vtrace writing alone, zstd level 9",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Encode { level: 9 },
    },
    Row {
        name: "generate-stream",
        label: "stream generator alone, 50 M refs",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Generate {
            spec: "stream:refs=50M",
        },
    },
    Row {
        name: "generate-random",
        label: "random generator alone, 4 GiB, 50 M refs",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Generate {
            spec: "random:footprint=4G,refs=50M",
        },
    },
    Row {
        name: "decode-gzip",
        label: "vtrace decoding alone (recorded gzip)",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(200.0),
        kind: Kind::DecodeRecorded,
    },
    Row {
        name: "random-64m-native-floor",
        label: "the same model, lean structures: a floor, not vmmu",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Floor {
            spec: "random:footprint=64M,refs=10M,prefault=1",
            overrides: &[("mode", "native")],
            model: FloorModel::Native,
            of: "random-64m-native",
        },
    },
    Row {
        name: "random-64m-nested-floor",
        label: "the same model, nested 2d+nt, lean structures: a floor, not vmmu",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Floor {
            spec: "random:footprint=64M,refs=10M,prefault=1",
            overrides: NESTED_2D_NT,
            model: FloorModel::Nested,
            of: "random-64m-nested",
        },
    },
    Row {
        name: "random-4g-nested-floor",
        label: "the same model, 4 GiB nested 2d+nt, lean structures: a floor, not vmmu",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Floor {
            spec: "random:footprint=4G,refs=2M,prefault=1",
            overrides: NESTED_4G,
            model: FloorModel::Nested,
            of: "random-4g-nested",
        },
    },
    Row {
        name: "replay-native",
        label: "vtrace replay of recorded gzip, native",
        unit: Unit::MRefsPerSec,
        target: Target::Measured,
        kind: Kind::Replay {
            overrides: &[("mode", "native")],
        },
    },
    Row {
        name: "replay-nested",
        label: "vtrace replay of recorded gzip, nested 2d+nt",
        unit: Unit::MRefsPerSec,
        target: Target::Measured,
        kind: Kind::Replay {
            overrides: NESTED_2D_NT,
        },
    },
    Row {
        name: "replay-native-interval",
        label: "vtrace replay of recorded gzip, native, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("replay-native"),
        kind: Kind::Replay {
            overrides: &[("mode", "native"), INTERVAL],
        },
    },
    Row {
        name: "replay-nested-interval",
        label: "vtrace replay of recorded gzip, nested 2d+nt, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("replay-nested"),
        kind: Kind::Replay {
            overrides: &[
                ("mode", "nested"),
                ("machine.pwc.design", "2d+nt"),
                INTERVAL,
            ],
        },
    },
    Row {
        name: "stream-16m-native-nodata",
        label: "TLB-hit stream 16 MiB, native, data caches off",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(100.0),
        kind: Kind::Refs {
            spec: "stream:footprint=16M,refs=20M,prefault=1",
            overrides: &[("mode", "native"), ("machine.caches.data", "false")],
        },
    },
    Row {
        name: "stream-16m-native-nodata-interval",
        label: "TLB-hit stream 16 MiB, native, data caches off, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("stream-16m-native-nodata"),
        kind: Kind::Refs {
            spec: "stream:footprint=16M,refs=20M,prefault=1",
            overrides: &[
                ("mode", "native"),
                ("machine.caches.data", "false"),
                INTERVAL,
            ],
        },
    },
    Row {
        name: "swim-native",
        label: "swim, native",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Refs {
            spec: "swim",
            overrides: &[("mode", "native")],
        },
    },
    Row {
        name: "swim-nested",
        label: "swim, nested 2d+nt",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Refs {
            spec: "swim",
            overrides: NESTED_2D_NT,
        },
    },
    Row {
        name: "swim-shadow",
        label: "swim, shadow",
        unit: Unit::MRefsPerSec,
        target: Target::None,
        kind: Kind::Refs {
            spec: "swim",
            overrides: &[("mode", "shadow")],
        },
    },
    Row {
        name: "swim-native-interval",
        label: "swim, native, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("swim-native"),
        kind: Kind::Refs {
            spec: "swim",
            overrides: &[("mode", "native"), INTERVAL],
        },
    },
    Row {
        name: "swim-nested-interval",
        label: "swim, nested 2d+nt, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("swim-nested"),
        kind: Kind::Refs {
            spec: "swim",
            overrides: &[
                ("mode", "nested"),
                ("machine.pwc.design", "2d+nt"),
                INTERVAL,
            ],
        },
    },
    Row {
        name: "swim-shadow-interval",
        label: "swim, shadow, interval core",
        unit: Unit::MRefsPerSec,
        target: Target::Interval("swim-shadow"),
        kind: Kind::Refs {
            spec: "swim",
            overrides: &[("mode", "shadow"), INTERVAL],
        },
    },
    Row {
        name: "aim9-fork_test-shadow",
        label: "aim9-fork_test, shadow (events)",
        unit: Unit::MEventsPerSec,
        target: Target::None,
        kind: Kind::Events {
            spec: "aim9-fork_test",
            overrides: &[("mode", "shadow")],
        },
    },
    Row {
        name: "memorymotion-shadow",
        label: "memorymotion, shadow (events)",
        unit: Unit::MEventsPerSec,
        target: Target::None,
        kind: Kind::Events {
            spec: "memorymotion",
            overrides: &[("mode", "shadow")],
        },
    },
    Row {
        name: "aim9-fork_test-shadow-interval",
        label: "aim9-fork_test, shadow (events), interval core",
        unit: Unit::MEventsPerSec,
        target: Target::Interval("aim9-fork_test-shadow"),
        kind: Kind::Events {
            spec: "aim9-fork_test",
            overrides: &[("mode", "shadow"), INTERVAL],
        },
    },
    Row {
        name: "memorymotion-shadow-interval",
        label: "memorymotion, shadow (events), interval core",
        unit: Unit::MEventsPerSec,
        target: Target::Interval("memorymotion-shadow"),
        kind: Kind::Events {
            spec: "memorymotion",
            overrides: &[("mode", "shadow"), INTERVAL],
        },
    },
    Row {
        name: "record-gzip",
        label: "recording gzip of 512 KiB, end to end",
        unit: Unit::MRefsPerSec,
        target: Target::Fixed(50.0),
        kind: Kind::Record,
    },
    Row {
        name: "replay-memory-5m",
        label: "peak memory, replay of 5 M refs",
        unit: Unit::MiB,
        target: Target::None,
        kind: Kind::ReplayMemory { refs: 5_000_000 },
    },
    Row {
        name: "replay-memory-50m",
        label: "peak memory, replay of 50 M refs (same footprint)",
        unit: Unit::MiB,
        target: Target::Figure("replay-memory-5m", 1.1),
        kind: Kind::ReplayMemory { refs: 50_000_000 },
    },
    Row {
        name: "adaptive-dav2m",
        label: "mixed-phases adaptive dav2m / slower static mode",
        unit: Unit::Ratio,
        target: Target::Fixed(1.3),
        kind: Kind::Adaptive {
            policy: "dav2m",
            workload: "mixed-phases",
        },
    },
    Row {
        name: "adaptive-costmodel",
        label: "mixed-phases adaptive costmodel / slower static",
        unit: Unit::Ratio,
        target: Target::Fixed(1.3),
        kind: Kind::Adaptive {
            policy: "costmodel",
            workload: "mixed-phases",
        },
    },
    Row {
        name: "adaptive-oracle",
        label: "mixed-phases adaptive oracle / both static runs",
        unit: Unit::Ratio,
        target: Target::Fixed(1.1),
        kind: Kind::Adaptive {
            policy: "oracle",
            workload: "mixed-phases",
        },
    },
    Row {
        name: "adaptive-oracle-gcc",
        label: "gcc-phases adaptive oracle / both static runs",
        unit: Unit::Ratio,
        target: Target::Fixed(1.1),
        kind: Kind::Adaptive {
            policy: "oracle",
            workload: "gcc-phases",
        },
    },
    Row {
        name: "vcpus-4",
        label: "database, 4 vCPUs / 1 vCPU, time per reference (nested)",
        unit: Unit::Ratio,
        target: Target::Fixed(4.0 * 1.1),
        kind: Kind::Vcpus { vcpus: 4 },
    },
    Row {
        name: "repro-all",
        label: "`vmmu repro all`, wall time",
        unit: Unit::Seconds,
        target: Target::None,
        kind: Kind::ReproAll,
    },
];

/// The row called `name`.
pub fn find(name: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| r.name == name)
}

/// What one measurement produced.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// The figure, in the row's unit.
    pub value: f64,
    /// Items counted (references, events), 0 for time and memory figures.
    pub count: u64,
    /// Seconds timed.
    pub secs: f64,
    /// A target measured with the value ([`Target::Measured`]).
    pub target: Option<f64>,
    /// Further figures of the same measurement, by name.
    pub extra: Vec<(&'static str, f64)>,
}

/// Where figures keep their inputs between processes, and how large they are.
#[derive(Clone, Debug)]
pub struct Env {
    /// A directory for traces, shared by the rows of one bench run.
    pub dir: PathBuf,
    /// Scale of every count (1 for the real bench; tests use less).
    pub scale: f64,
    /// The `vmmu` command, for `repro-all`.
    pub vmmu: Option<PathBuf>,
}

impl Env {
    /// `n` scaled, at least 1000.
    fn scaled(&self, n: u64) -> u64 {
        ((n as f64 * self.scale) as u64).max(1000)
    }

    /// `spec` with its `refs` parameter scaled (specs without one are left alone).
    fn spec(&self, spec: &str) -> String {
        if self.scale == 1.0 {
            return spec.to_string();
        }
        let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
        let params: Vec<String> = params
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some(("refs", v)) => format!("refs={}", self.scaled(parse_count(v))),
                _ => p.to_string(),
            })
            .collect();
        if params.is_empty() {
            name.to_string()
        } else {
            format!("{name}:{}", params.join(","))
        }
    }
}

/// `20M` → 20 000 000 (decimal multiples, as workload specs write counts).
fn parse_count(v: &str) -> u64 {
    let (num, mult) = match v.as_bytes().last() {
        Some(b'K') => (&v[..v.len() - 1], 1e3),
        Some(b'M') => (&v[..v.len() - 1], 1e6),
        Some(b'G') => (&v[..v.len() - 1], 1e9),
        _ => (v, 1.0),
    };
    (num.parse::<f64>().expect("a count in a bench spec") * mult) as u64
}

/// Measures `row` in this process.
pub fn measure(row: &Row, env: &Env) -> Result<Measured> {
    match row.kind {
        Kind::Refs { spec, overrides } => sim_refs(&env.spec(spec), overrides),
        Kind::Floor {
            spec,
            overrides,
            model: FloorModel::Native,
            ..
        } => floor_refs(&env.spec(spec), overrides, Floor::from_sim),
        Kind::Floor {
            spec,
            overrides,
            model: FloorModel::Nested,
            ..
        } => floor_refs(&env.spec(spec), overrides, NestedFloor::from_sim),
        Kind::Events { spec, overrides } => sim_events(spec, overrides),
        Kind::Decode => decode(env),
        Kind::Encode { level } => encode(env, level),
        Kind::Generate { spec } => generate(&env.spec(spec)),
        Kind::DecodeRecorded => decode_recorded(env),
        Kind::Record => record(env).map(|(m, _)| m),
        Kind::Replay { overrides } => replay(env, overrides),
        Kind::ReplayMemory { refs } => replay_memory(env, refs),
        Kind::ReproAll => repro_all(env),
        Kind::Adaptive { policy, workload } => adaptive(policy, workload),
        Kind::Vcpus { vcpus } => vcpus_ratio(vcpus),
    }
}

/// Wall-clock and CPU seconds to run `spec` whole, result included, under `overrides`.
fn whole_run(spec: &str, overrides: &[(&str, &str)]) -> Result<(f64, f64)> {
    let cfg = config::build("bhargava08", &overrides_of(overrides))?;
    let mut src = workload::open(spec)?;
    let (t, cpu0) = (Instant::now(), thread_cpu_seconds());
    vmmu_core::run::run(&cfg, src.as_mut(), &mut |_| true)?;
    Ok((t.elapsed().as_secs_f64(), thread_cpu_seconds() - cpu0))
}

/// A run's time over a base time, each as (wall clock, CPU seconds): the figure by wall
/// clock, and by CPU seconds as `per_cpu_s` (time spent waiting for a core is in neither of
/// those), with `extra` beside.
fn time_ratio(run: (f64, f64), base: (f64, f64), mut extra: Vec<(&'static str, f64)>) -> Measured {
    extra.push(("per_cpu_s", if base.1 > 0.0 { run.1 / base.1 } else { 0.0 }));
    Measured {
        value: run.0 / base.0,
        count: 0,
        secs: run.0,
        target: None,
        extra,
    }
}

/// An adaptive run's simulation time over the static modes' (see [`Kind::Adaptive`]).
fn adaptive(policy: &str, spec: &str) -> Result<Measured> {
    let shadow = whole_run(spec, &[("mode", "shadow")])?;
    let nested = whole_run(spec, &[("mode", "nested")])?;
    let run = whole_run(
        spec,
        &[
            ("mode", "adaptive"),
            ("policy.kind", policy),
            ("policy.time_scale", "1e-4"),
        ],
    )?;
    let base = if policy == "oracle" {
        (shadow.0 + nested.0, shadow.1 + nested.1)
    } else {
        (shadow.0.max(nested.0), shadow.1.max(nested.1))
    };
    let extra = vec![("shadow_s", shadow.0), ("nested_s", nested.0)];
    Ok(time_ratio(run, base, extra))
}

/// A multi-vCPU run's simulation time over the single-vCPU run's (see [`Kind::Vcpus`]).
fn vcpus_ratio(vcpus: u32) -> Result<Measured> {
    let spec = "database:threads=8,queries=100,rows=2000,pool=64M,temp=64K";
    let one = whole_run(spec, &[("mode", "nested")])?;
    let n = vcpus.to_string();
    let run = whole_run(spec, &[("mode", "nested"), ("guest.vcpus", &n)])?;
    Ok(time_ratio(run, one, vec![("one_vcpu_s", one.0)]))
}

fn overrides_of(overrides: &[(&str, &str)]) -> Vec<(String, String)> {
    overrides
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn simulator(overrides: &[(&str, &str)]) -> Result<Simulator> {
    Simulator::new(&config::build("bhargava08", &overrides_of(overrides))?)
}

fn refs_of(sim: &Simulator) -> u64 {
    sim.counters().memory_refs + sim.counters().fetches
}

/// Simulates the set-up events of `src` (those before its first reference); returns the first
/// reference, taken from `src`, if any.
pub fn setup(sim: &mut Simulator, src: &mut dyn EventSource) -> Result<Option<Event>> {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if src.next_batch(&mut buf, 1)? == 0 {
            return Ok(None);
        }
        if matches!(buf[0], Event::Ref(_)) {
            return Ok(buf.pop());
        }
        sim.step(&buf[0])?;
    }
}

/// Simulates `spec`: set-up events untimed, then the reference phase timed.
fn sim_refs(spec: &str, overrides: &[(&str, &str)]) -> Result<Measured> {
    let t0 = Instant::now();
    let mut src = workload::open(spec)?;
    let mut sim = simulator(overrides)?;
    let first = setup(&mut sim, src.as_mut())?;
    let setup = t0.elapsed().as_secs_f64();
    let refs0 = refs_of(&sim);
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    if let Some(e) = first {
        sim.step(&e)?;
    }
    vmmu_core::run::simulate(&mut sim, src.as_mut(), &mut |_| true)?;
    let secs = t.elapsed().as_secs_f64();
    Ok(reference_phase(refs_of(&sim) - refs0, secs, setup, cpu0))
}

/// The figure of a timed reference phase: `n` references in `secs` of wall clock, from CPU
/// time `cpu0`, after `setup` seconds of untimed set-up.
fn reference_phase(n: u64, secs: f64, setup: f64, cpu0: f64) -> Measured {
    rate(n, secs, cpu0, vec![("setup_s", setup)])
}

/// The figure of `n` items in `secs` of wall clock (millions a second), from CPU time `cpu0`:
/// `extra`, then the rate per CPU second (`per_cpu_s`), beside it.
fn rate(n: u64, secs: f64, cpu0: f64, mut extra: Vec<(&'static str, f64)>) -> Measured {
    extra.push(("per_cpu_s", per_cpu_s(n, cpu0)));
    Measured {
        value: n as f64 / secs / 1e6,
        count: n,
        secs,
        target: None,
        extra,
    }
}

/// Runs the floor `build` makes on `spec` under `overrides`: vmmu simulates the set-up
/// events, untimed, the floor copies its tables, then the floor's reference phase is timed.
fn floor_refs<M: Model>(
    spec: &str,
    overrides: &[(&str, &str)],
    build: fn(&Simulator) -> Result<M>,
) -> Result<Measured> {
    let t0 = Instant::now();
    let mut src = workload::open(spec)?;
    let mut sim = simulator(overrides)?;
    let first = setup(&mut sim, src.as_mut())?;
    let mut floor = build(&sim)?;
    let setup = t0.elapsed().as_secs_f64();
    let refs0 = floor.memory_refs();
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    if let Some(e) = first {
        floor.step_batch(&[e])?;
    }
    floor.run(src.as_mut())?;
    let secs = t.elapsed().as_secs_f64();
    let n = floor.memory_refs() - refs0;
    Ok(reference_phase(n, secs, setup, cpu0))
}

/// Simulates `spec` whole, counting events.
fn sim_events(spec: &str, overrides: &[(&str, &str)]) -> Result<Measured> {
    let mut src = workload::open(spec)?;
    let mut sim = simulator(overrides)?;
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    vmmu_core::run::simulate(&mut sim, src.as_mut(), &mut |_| true)?;
    let secs = t.elapsed().as_secs_f64();
    Ok(rate(sim.counters().events, secs, cpu0, Vec::new()))
}

/// Writing alone: the stride stream of [`decode`], written to a `.vtrace` at zstd `level`;
/// only the writer's calls are timed (the generator fills each batch untimed). References per
/// second of wall clock and per CPU second of every thread (compression runs on a thread of
/// its own, generation included in that figure), bytes per reference beside.
fn encode(env: &Env, level: i32) -> Result<Measured> {
    let refs = env.scaled(50_000_000);
    let mut src = workload::open(&format!("stride:footprint=1G,refs={refs},stride=64"))?;
    let path = env.dir.join(format!("encode-{level}.vtrace"));
    let p = path.to_str().expect("utf-8 path");
    let opts = trace::WriterOptions {
        level,
        ..trace::WriterOptions::default()
    };
    let cpu0 = cpu_seconds();
    let mut secs = 0.0;
    let t = Instant::now();
    let mut w = trace::TraceWriter::create_with(p, trace::TraceMeta::default(), opts)?;
    secs += t.elapsed().as_secs_f64();
    let mut buf = Vec::with_capacity(65536);
    loop {
        buf.clear();
        if src.next_batch(&mut buf, 65536)? == 0 {
            break;
        }
        let t = Instant::now();
        w.write_batch(&buf)?;
        secs += t.elapsed().as_secs_f64();
    }
    let t = Instant::now();
    let summary = w.finish()?;
    secs += t.elapsed().as_secs_f64();
    let n = summary.refs;
    std::fs::remove_file(&path).map_err(|e| vmmu_core::Error::io(p, e))?;
    let bytes_per_ref = summary.bytes as f64 / n.max(1) as f64;
    Ok(rate(n, secs, cpu0, vec![("bytes_per_ref", bytes_per_ref)]))
}

/// A generator alone: its events drawn in batches of 4096 (as the simulator draws them) and
/// dropped; references per second of wall clock and per CPU second.
fn generate(spec: &str) -> Result<Measured> {
    let mut src = workload::open(spec)?;
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let n = count_refs(src.as_mut(), 4096)?;
    Ok(rate(n, t.elapsed().as_secs_f64(), cpu0, Vec::new()))
}

/// Writes the events of `spec` to a `.vtrace` at `path` unless it exists.
fn write_trace(spec: &str, path: &Path) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    let tmp = path.with_extension("partial");
    let p = tmp.to_str().expect("utf-8 temp path");
    let mut src = workload::open(spec)?;
    let mut w = trace::TraceWriter::create(p, trace::TraceMeta::default())?;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if src.next_batch(&mut buf, 65536)? == 0 {
            break;
        }
        w.write_batch(&buf)?;
    }
    w.finish()?;
    std::fs::rename(&tmp, path).map_err(|e| vmmu_core::Error::io(p, e))
}

/// Reads the trace at `path` to its end; returns its references (events of other kinds are
/// decoded and not counted).
fn drain(path: &Path) -> Result<u64> {
    let mut r = trace::open(path.to_str().expect("utf-8 path"))?;
    count_refs(r.as_mut(), 65536)
}

/// Draws `src` to its end in batches of `batch` events; returns its references.
fn count_refs(src: &mut dyn EventSource, batch: usize) -> Result<u64> {
    let mut buf = Vec::with_capacity(batch);
    let mut n = 0u64;
    loop {
        buf.clear();
        if src.next_batch(&mut buf, batch)? == 0 {
            return Ok(n);
        }
        n += buf.iter().filter(|e| matches!(e, Event::Ref(_))).count() as u64;
    }
}

fn decode(env: &Env) -> Result<Measured> {
    let refs = env.scaled(50_000_000);
    let path = env.dir.join(format!("stride-{refs}.vtrace"));
    write_trace(&format!("stride:footprint=1G,refs={refs},stride=64"), &path)?;
    decode_file(&path)
}

fn decode_recorded(env: &Env) -> Result<Measured> {
    let path = recorded(env)?;
    decode_file(&path)
}

/// Decoding alone of the trace at `path`: references per second of wall clock and per CPU
/// second of every thread.
fn decode_file(path: &Path) -> Result<Measured> {
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let n = drain(path)?;
    let secs = t.elapsed().as_secs_f64();
    Ok(rate(
        n,
        secs,
        cpu0,
        vec![("bytes_per_ref", bytes as f64 / n.max(1) as f64)],
    ))
}

/// The input `gzip` compresses: 512 KiB of generated text (the same bytes every run).
fn gzip_input(dir: &Path, scale: f64) -> Result<PathBuf> {
    let input = dir.join("input.txt");
    let size = ((512u64 << 10) as f64 * scale.min(1.0)).max(4096.0) as usize;
    let mut text = String::with_capacity(size + 64);
    let mut x = 7u64;
    while text.len() < size {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        text.push_str(&format!(
            "{:x} line {} of the bench input\n",
            x >> 20,
            x % 977
        ));
    }
    std::fs::write(&input, text).map_err(|e| vmmu_core::Error::io("bench input", e))?;
    Ok(input)
}

/// The recorded `gzip` trace of the bench directory, recorded first (untimed) if this bench
/// run has not yet.
fn recorded(env: &Env) -> Result<PathBuf> {
    let path = env.dir.join("gzip.vtrace");
    if path.exists() {
        Ok(path)
    } else {
        record(env).map(|(_, p)| p)
    }
}

/// Records `gzip` into `gzip.vtrace` of the bench directory; returns the figure and the path.
fn record(env: &Env) -> Result<(Measured, PathBuf)> {
    let input = gzip_input(&env.dir, env.scale)?;
    let out = env.dir.join("gzip.vtrace");
    let tmp = env.dir.join("gzip.partial");
    let cmd = vec![
        "gzip".to_string(),
        "-f".to_string(),
        "-k".to_string(),
        input.to_str().expect("utf-8 path").to_string(),
    ];
    let opts = vmmu_record::RecordOptions::new(tmp.to_str().expect("utf-8 path"));
    let sum = vmmu_record::record(&cmd, &opts, &mut |_| true)?;
    std::fs::rename(&tmp, &out).map_err(|e| vmmu_core::Error::io("gzip.vtrace", e))?;
    let bytes = std::fs::metadata(&out).map_or(0, |m| m.len());
    let m = Measured {
        value: sum.refs as f64 / sum.elapsed_s / 1e6,
        count: sum.refs,
        secs: sum.elapsed_s,
        target: None,
        extra: vec![("bytes_per_ref", bytes as f64 / sum.refs.max(1) as f64)],
    };
    Ok((m, out))
}

/// An event source that adds up the time its inner source takes to fill batches.
struct Timed<'a> {
    inner: &'a mut dyn EventSource,
    secs: f64,
}

impl EventSource for Timed<'_> {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        let t = Instant::now();
        let n = self.inner.next_batch(buf, max);
        self.secs += t.elapsed().as_secs_f64();
        n
    }

    fn len_hint(&self) -> Option<u64> {
        self.inner.len_hint()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// Replays the recorded `gzip` trace (recording it first, untimed, if this bench run has not).
/// The target is the simulator's own rate in the same run: references over the time not spent
/// waiting for the reader.
fn replay(env: &Env, overrides: &[(&str, &str)]) -> Result<Measured> {
    let path = recorded(env)?;
    let mut sim = simulator(overrides)?;
    let mut src = trace::open(path.to_str().expect("utf-8 path"))?;
    let mut timed = Timed {
        inner: src.as_mut(),
        secs: 0.0,
    };
    let t = Instant::now();
    vmmu_core::run::simulate(&mut sim, &mut timed, &mut |_| true)?;
    let secs = t.elapsed().as_secs_f64();
    let n = refs_of(&sim);
    let sim_secs = (secs - timed.secs).max(1e-9);
    Ok(Measured {
        value: n as f64 / secs / 1e6,
        count: n,
        secs,
        target: Some(n as f64 / sim_secs / 1e6),
        extra: vec![("reader_wait_s", timed.secs)],
    })
}

/// CPU seconds (user + system, every thread) of this process so far, at the kernel's 100 Hz
/// accounting resolution.
pub fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at `) `.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 after the name; 100 Hz.
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds the calling thread has run, in nanoseconds' resolution (the first field of
/// `/proc/thread-self/schedstat`); [`cpu_seconds`], in ticks of 10 ms, where that is missing.
/// For figures simulated on the calling thread alone: a run of half a second is 50 ticks.
pub fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or_else(cpu_seconds, |ns| ns / 1e9)
}

/// The rate of `count` items over the CPU seconds since `cpu0` (millions per CPU second), the
/// figure a loaded machine disturbs least: time spent waiting for a core is not in it.
fn per_cpu_s(count: u64, cpu0: f64) -> f64 {
    let cpu = cpu_seconds() - cpu0;
    if cpu > 0.0 {
        count as f64 / cpu / 1e6
    } else {
        0.0
    }
}

/// Peak resident memory of this process in MiB (`VmHWM`).
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// How long a replay's consumer waits after its first batch for the trace reader to fill
/// its queues (a few milliseconds of decoding; the rest is margin for a loaded machine).
const FILL_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// A trace source whose consumer waits [`FILL_WAIT`] after the first batch, which starts the
/// reader's threads: the reader's queues and buffers are then all in use before the
/// simulator draws on them, in a short replay as in a long one. Without the wait, how many
/// of them a replay ever touches depends on whether the simulator falls behind the reader
/// for a while, which a long replay does more often than a short one (50 M references gave
/// 19.7 or 23.5 MiB from run to run, 5 M 19.6–20.1), and the peak would measure that
/// chance rather than what grows with the trace.
struct FilledFirst {
    inner: Box<dyn EventSource>,
    waited: bool,
}

impl EventSource for FilledFirst {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        let n = self.inner.next_batch(buf, max)?;
        if !self.waited {
            self.waited = true;
            std::thread::sleep(FILL_WAIT);
        }
        Ok(n)
    }
    fn len_hint(&self) -> Option<u64> {
        self.inner.len_hint()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn tracks_dependences(&self) -> bool {
        self.inner.tracks_dependences()
    }
}

/// Peak memory of a native replay of a `refs`-reference stride trace over 16 MiB, the
/// reader's pipeline full from the start ([`FilledFirst`]).
fn replay_memory(env: &Env, refs: u64) -> Result<Measured> {
    let refs = env.scaled(refs);
    let path = env.dir.join(format!("stride16m-{refs}.vtrace"));
    write_trace(
        &format!("stride:footprint=16M,refs={refs},stride=64"),
        &path,
    )?;
    let mut sim = simulator(&[("mode", "native")])?;
    let mut src = FilledFirst {
        inner: trace::open(path.to_str().expect("utf-8 path"))?,
        waited: false,
    };
    let t = Instant::now();
    vmmu_core::run::simulate(&mut sim, &mut src, &mut |_| true)?;
    Ok(Measured {
        value: peak_rss_mib(),
        count: refs_of(&sim),
        secs: t.elapsed().as_secs_f64() - FILL_WAIT.as_secs_f64(),
        target: None,
        extra: Vec::new(),
    })
}

fn repro_all(env: &Env) -> Result<Measured> {
    let Some(vmmu) = &env.vmmu else {
        return Err(vmmu_core::Error::config(
            "repro-all",
            "no `vmmu` command (give --vmmu PATH; `make bench` does)",
        ));
    };
    let mut cmd = std::process::Command::new(vmmu);
    cmd.args(["repro", "all"]);
    if env.scale < 1.0 {
        cmd.arg("--quick");
    }
    let t = Instant::now();
    let out = cmd
        .output()
        .map_err(|e| vmmu_core::Error::io(vmmu.display().to_string(), e))?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(vmmu_core::Error::config(
            "repro-all",
            format!(
                "`vmmu repro all` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        ));
    }
    Ok(Measured {
        value: secs,
        count: 0,
        secs,
        target: None,
        extra: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_rewrites_only_the_refs_parameter() {
        let env = Env {
            dir: PathBuf::new(),
            scale: 0.001,
            vmmu: None,
        };
        assert_eq!(
            env.spec("random:footprint=64M,refs=10M,prefault=1"),
            "random:footprint=64M,refs=10000,prefault=1"
        );
        assert_eq!(env.spec("swim"), "swim");
    }

    /// The Rust files under `dir`, recursively.
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }

    #[test]
    fn a_measurement_is_a_bench_row_not_an_ignored_test() {
        // A test that only prints figures asserts nothing; the figure belongs here, as a row.
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        rust_files(&crates, &mut files);
        let ignore = concat!("#[", "ignore");
        let ignored: Vec<_> = files
            .iter()
            .filter(|p| !p.components().any(|c| c.as_os_str() == "target"))
            .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(ignore)))
            .collect();
        assert!(ignored.is_empty(), "ignored tests in {ignored:?}");
    }

    /// A simulating row's workload and overrides, and whether it runs the interval model.
    fn simulates(r: &Row) -> Option<(&'static str, Vec<(&'static str, &'static str)>)> {
        let (spec, ov) = match r.kind {
            Kind::Refs { spec, overrides } | Kind::Events { spec, overrides } => (spec, overrides),
            Kind::Replay { overrides } => ("replay", overrides),
            _ => return None,
        };
        Some((spec, ov.to_vec()))
    }

    #[test]
    fn every_simulating_row_has_its_interval_row() {
        // Each row that simulates under the additive model has one row beside it running the
        // same workload and overrides under the interval model, held to its rate.
        let mut pairs = 0;
        for r in ROWS {
            let Some((spec, ov)) = simulates(r) else {
                continue;
            };
            if ov.contains(&INTERVAL) {
                let Target::Interval(of) = r.target else {
                    panic!("{} runs the interval model without an additive row", r.name);
                };
                let o = ROWS.iter().find(|o| o.name == of).expect("additive row");
                let (ospec, mut oov) = simulates(o).expect("a simulating row");
                oov.push(INTERVAL);
                assert_eq!((spec, ov), (ospec, oov), "{} and {of}", r.name);
                pairs += 1;
            } else {
                let interval: Vec<_> = ROWS
                    .iter()
                    .filter(|i| matches!(i.target, Target::Interval(of) if of == r.name))
                    .collect();
                assert_eq!(interval.len(), 1, "interval rows of {}", r.name);
            }
        }
        assert_eq!(pairs, 14);
    }

    #[test]
    fn row_names_are_unique() {
        for (i, r) in ROWS.iter().enumerate() {
            assert!(ROWS[i + 1..].iter().all(|o| o.name != r.name), "{}", r.name);
            if let Target::Figure(name, _) | Target::Interval(name) = r.target {
                // The target is read from the figures measured before this one.
                let j = ROWS.iter().position(|o| o.name == name);
                assert!(
                    j.is_some_and(|j| j < i),
                    "{} refers to {name}, not printed before it",
                    r.name
                );
            }
        }
    }

    #[test]
    fn a_floor_comes_after_the_row_it_floors_and_runs_its_workload() {
        let mut floors = 0;
        for (i, r) in ROWS.iter().enumerate() {
            let Kind::Floor {
                spec,
                overrides,
                of,
                ..
            } = r.kind
            else {
                continue;
            };
            floors += 1;
            let j = ROWS.iter().position(|o| o.name == of);
            assert!(
                j.is_some_and(|j| j < i),
                "{} floors {of}, not printed before it",
                r.name
            );
            let Kind::Refs {
                spec: s,
                overrides: o,
            } = ROWS[j.unwrap()].kind
            else {
                panic!("{} floors {of}, which simulates no references", r.name);
            };
            assert_eq!((spec, overrides), (s, o), "{} and {of}", r.name);
        }
        assert_eq!(floors, 3);
    }
}
