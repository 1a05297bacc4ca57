//! `vmmu trace info` and `vmmu trace convert`: one streaming pass over a trace that counts
//! what it holds (and, for convert, writes it again in another format).

use super::lackey::{LackeyReader, LackeyWriter};
use super::reader::VtraceReader;
use super::writer::TraceWriter;
use super::{Format, TraceMeta};
use crate::error::{Error, Result};
use crate::event::{AccessKind, Event, EventSource};
use crate::import::{ChampSimReader, ChampSimWriter};
use rustc_hash::FxHashSet;
use serde::Serialize;
use std::collections::BTreeMap;

/// References of a trace by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RefCounts {
    /// Instruction fetches (lackey `I`).
    pub fetch: u64,
    /// Loads (`L`).
    pub load: u64,
    /// Stores (`S`).
    pub store: u64,
    /// Read-modify-writes (`M`).
    pub modify: u64,
}

/// What a trace holds (`vmmu trace info`).
#[derive(Clone, Debug, Serialize)]
pub struct TraceInfo {
    /// `vtrace`, `lackey` or `champsim`.
    pub format: &'static str,
    /// The binary format version (`None` for text and ChampSim).
    pub version: Option<u16>,
    /// `zstd` (vtrace chunks), or the whole file's `none` / `gzip` / `zstd` / `xz`.
    pub compression: &'static str,
    /// The file.
    pub path: String,
    /// Size of the file in bytes.
    pub compressed_bytes: u64,
    /// Events of every kind.
    pub events: u64,
    /// Memory references (every kind).
    pub refs: u64,
    /// Memory references by kind.
    pub refs_by_kind: RefCounts,
    /// Instructions retired: the references' `instrs` plus `Compute` events.
    pub instructions: u64,
    /// Every non-reference event by its text name (`proc`, `fork`, `mmap`, `phase`, `compute`...).
    pub os_events: BTreeMap<&'static str, u64>,
    /// Distinct process ids (`proc`, `fork` children, `exec`, `switch`); 1 for a trace of
    /// references with no process events (the implicit pid 1).
    pub processes: u64,
    /// Distinct 4 KiB virtual pages referenced, over all processes (a page number counts once
    /// even if several address spaces use it).
    pub pages_4k: u64,
    /// The trace ends early: no footer (the writer was killed) or a footer saying the
    /// recorded program did not finish.
    pub truncated: bool,
    /// The binary header's metadata (`None` for text).
    pub meta: Option<TraceMeta>,
    /// `compressed_bytes / refs` (0 without references).
    pub bytes_per_ref: f64,
    /// Convert only: source events the destination format cannot hold, left out (process and
    /// address-space events written as ChampSim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_events: Option<u64>,
}

/// Counts events as they stream by.
struct Tally {
    events: u64,
    refs: RefCounts,
    instructions: u64,
    os: BTreeMap<&'static str, u64>,
    pids: FxHashSet<u32>,
    pages: FxHashSet<u64>,
    /// Pages inserted lately, direct-mapped by their low bits: a page found here is in
    /// `pages` already, so code and data pages that alternate cost no hash lookup each.
    recent: [u64; RECENT],
}

/// Entries of [`Tally::recent`] (a power of two).
const RECENT: usize = 256;

impl Default for Tally {
    fn default() -> Self {
        Tally {
            events: 0,
            refs: RefCounts::default(),
            instructions: 0,
            os: BTreeMap::new(),
            pids: FxHashSet::default(),
            pages: FxHashSet::default(),
            // No page number is u64::MAX (addresses are 64 bits, pages 52).
            recent: [u64::MAX; RECENT],
        }
    }
}

impl Tally {
    fn add(&mut self, events: &[Event]) {
        self.events += events.len() as u64;
        for e in events {
            let name = match *e {
                Event::Ref(r) => {
                    match r.kind {
                        AccessKind::Fetch => self.refs.fetch += 1,
                        AccessKind::Load => self.refs.load += 1,
                        AccessKind::Store => self.refs.store += 1,
                        AccessKind::Modify => self.refs.modify += 1,
                    }
                    self.instructions = self.instructions.saturating_add(r.instrs as u64);
                    let page = r.va.raw() >> 12;
                    let slot = &mut self.recent[page as usize % RECENT];
                    if *slot != page {
                        self.pages.insert(page);
                        *slot = page;
                    }
                    continue;
                }
                Event::Compute { instrs } => {
                    self.instructions = self.instructions.saturating_add(instrs);
                    "compute"
                }
                Event::ProcessCreate { pid } => {
                    self.pids.insert(pid);
                    "proc"
                }
                Event::Fork { parent, child } => {
                    self.pids.extend([parent, child]);
                    "fork"
                }
                Event::Exec { pid } => {
                    self.pids.insert(pid);
                    "exec"
                }
                Event::Exit { .. } => "exit",
                Event::Switch { pid } => {
                    self.pids.insert(pid);
                    "switch"
                }
                Event::ThreadCreate { pid, .. } => {
                    self.pids.insert(pid);
                    "thread_create"
                }
                Event::ThreadExit { .. } => "thread_exit",
                Event::Thread { .. } => "thread",
                Event::Mmap(_) => "mmap",
                Event::Munmap(_) => "munmap",
                Event::Mprotect(_) => "mprotect",
                Event::Mremap(_) => "mremap",
                Event::Madvise(_) => "madvise",
                Event::Brk { .. } => "brk",
                Event::Phase { .. } => "phase",
            };
            *self.os.entry(name).or_insert(0) += 1;
        }
    }

    fn refs(&self) -> u64 {
        let r = &self.refs;
        r.fetch + r.load + r.store + r.modify
    }

    fn into_info(self, path: &str, src: &Opened) -> TraceInfo {
        let compressed_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let refs = self.refs();
        let processes = if self.pids.is_empty() && refs > 0 {
            1
        } else {
            self.pids.len() as u64
        };
        TraceInfo {
            format: src.format().name(),
            version: src.version(),
            compression: src.compression(),
            path: path.to_string(),
            compressed_bytes,
            events: self.events,
            refs,
            refs_by_kind: self.refs,
            instructions: self.instructions,
            os_events: self.os,
            processes,
            pages_4k: self.pages.len() as u64,
            truncated: src.truncated(),
            meta: src.meta(),
            bytes_per_ref: if refs > 0 {
                compressed_bytes as f64 / refs as f64
            } else {
                0.0
            },
            dropped_events: None,
        }
    }
}

/// A trace opened by its format, keeping what `info` reports beyond the events.
pub(crate) enum Opened {
    Vtrace(Box<VtraceReader>),
    Lackey(Box<LackeyReader>),
    ChampSim(Box<ChampSimReader>),
}

impl Opened {
    pub fn open(path: &str) -> Result<Opened> {
        Ok(match super::detect(path)? {
            Format::Vtrace => Opened::Vtrace(Box::new(VtraceReader::open(path)?)),
            Format::Lackey => Opened::Lackey(Box::new(LackeyReader::open(path)?)),
            Format::ChampSim => Opened::ChampSim(Box::new(ChampSimReader::open(path)?)),
        })
    }

    pub fn into_source(self) -> Box<dyn EventSource> {
        match self {
            Opened::Vtrace(r) => r,
            Opened::Lackey(r) => r,
            Opened::ChampSim(r) => r,
        }
    }

    fn source(&mut self) -> &mut dyn EventSource {
        match self {
            Opened::Vtrace(r) => r.as_mut(),
            Opened::Lackey(r) => r.as_mut(),
            Opened::ChampSim(r) => r.as_mut(),
        }
    }

    fn format(&self) -> Format {
        match self {
            Opened::Vtrace(_) => Format::Vtrace,
            Opened::Lackey(_) => Format::Lackey,
            Opened::ChampSim(_) => Format::ChampSim,
        }
    }

    fn version(&self) -> Option<u16> {
        match self {
            Opened::Vtrace(r) => Some(r.version()),
            Opened::Lackey(_) | Opened::ChampSim(_) => None,
        }
    }

    fn compression(&self) -> &'static str {
        match self {
            Opened::Vtrace(_) => "zstd",
            Opened::Lackey(r) => r.compression().name(),
            Opened::ChampSim(r) => r.compression().name(),
        }
    }

    fn truncated(&self) -> bool {
        match self {
            Opened::Vtrace(r) => r.is_truncated(),
            Opened::Lackey(_) | Opened::ChampSim(_) => false,
        }
    }

    fn meta(&self) -> Option<TraceMeta> {
        match self {
            Opened::Vtrace(r) => Some(r.meta().clone()),
            Opened::Lackey(_) => None,
            Opened::ChampSim(r) => Some(TraceMeta {
                description: "imported ChampSim trace: no process or address-space events".into(),
                source: r.describe(),
                has_os_events: false,
                dependences: r.tracks_dependences(),
            }),
        }
    }
}

/// Events per batch of a pass.
const BATCH: usize = 1 << 14;
/// `progress` is called about this often (events).
const PROGRESS_EVERY: u64 = 1 << 20;

/// Streams `src` through `each`, calling `progress` about every million events and at the end.
fn pass(
    src: &mut Opened,
    progress: &mut dyn FnMut(u64) -> bool,
    mut each: impl FnMut(&[Event]) -> Result<()>,
) -> Result<()> {
    let mut buf = Vec::with_capacity(BATCH);
    let mut done = 0u64;
    let mut next_report = PROGRESS_EVERY;
    loop {
        buf.clear();
        let n = src.source().next_batch(&mut buf, BATCH)?;
        if n == 0 {
            break;
        }
        each(&buf)?;
        done += n as u64;
        if done >= next_report {
            next_report = done + PROGRESS_EVERY;
            if !progress(done) {
                return Err(Error::Interrupted { events: done });
            }
        }
    }
    if !progress(done) {
        return Err(Error::Interrupted { events: done });
    }
    Ok(())
}

/// Reads the whole trace at `path` (any format) and reports what it holds.
/// `progress(events so far)` returning false stops with [`Error::Interrupted`].
pub fn info(path: &str, progress: &mut dyn FnMut(u64) -> bool) -> Result<TraceInfo> {
    let mut src = Opened::open(path)?;
    let mut tally = Tally::default();
    pass(&mut src, progress, |es| {
        tally.add(es);
        Ok(())
    })?;
    Ok(tally.into_info(path, &src))
}

/// Rewrites the trace `src` (any readable format) as `dst`, in format `to` or, without it, the
/// format `dst`'s name says ([`super::output_format`]), and reports what `dst` holds. A text or
/// ChampSim `dst` is compressed as its name says (`.gz`, `.zst`, `.xz`); a binary one keeps
/// the source's metadata (a text source gets `source: "lackey text PATH"`). A truncated source
/// gives a destination marked truncated (a `# truncated` comment in text). A ChampSim `dst`
/// cannot hold process and address-space events: they are left out and counted in
/// `dropped_events`, and the report counts what a reader gets back from `dst`.
pub fn convert(
    src: &str,
    dst: &str,
    to: Option<Format>,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<TraceInfo> {
    let to = super::output_format(dst, to)?;
    if let (Ok(a), Ok(b)) = (std::fs::canonicalize(src), std::fs::canonicalize(dst)) {
        if a == b {
            return Err(Error::io(
                dst,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the destination is the source trace itself",
                ),
            ));
        }
    }
    let mut input = Opened::open(src)?;
    let mut tally = Tally::default();
    let mut dropped = None;
    match to {
        Format::Vtrace => {
            let meta = input.meta().unwrap_or_else(|| TraceMeta {
                description: String::new(),
                source: format!("lackey text {src}"),
                has_os_events: false,
                dependences: false,
            });
            let mut w = TraceWriter::create(dst, meta)?;
            pass(&mut input, progress, |es| {
                tally.add(es);
                w.write_batch(es)
            })?;
            if input.truncated() {
                w.finish_truncated()?;
            } else {
                w.finish()?;
            }
        }
        Format::ChampSim => {
            // The tally counts what the file holds, read back on the writing thread.
            let mut w = ChampSimWriter::create_reading_back(dst, Tally::default(), Tally::add)?;
            pass(&mut input, progress, |es| w.write_batch(es))?;
            dropped = Some(w.dropped());
            tally = w.finish()?.1;
        }
        Format::Lackey => {
            let mut w = LackeyWriter::create(dst)?;
            pass(&mut input, progress, |es| {
                tally.add(es);
                es.iter().try_for_each(|e| w.write(e))
            })?;
            if input.truncated() {
                w.comment("truncated: the source trace ends early")?;
            }
            w.finish()?;
        }
    }
    let out = Opened::open(dst)?;
    let mut info = tally.into_info(dst, &out);
    info.truncated = input.truncated();
    info.dropped_events = dropped;
    Ok(info)
}
