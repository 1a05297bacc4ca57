//! The raw record stream of vg-memtrace (docs/recording.md, "The raw record stream") and its
//! decoder into [`Event`]s.
//!
//! One stream is one process image: a 64-byte header, then little-endian 64-bit words. The low
//! 16 bits of a word are its tag, the high 48 bits its value:
//!
//! ```text
//! bits 63..16  value: an address (kinds 0-3, 8-10), an instruction count (kind 4),
//!              an inline argument (kind 15)
//! bits 15..12  kind: 0 load, 1 store, 2 modify, 3 fetch, 4 instruction count,
//!              8 dependent load, 9 dependent store, 10 dependent modify, 15 event
//! bits 11..0   size in bytes (kinds 0-3); kinds 8-10: bits 11..8 log2 of the size,
//!              7..0 the dependence (1-255); kind 15: bits 11..8 payload words, 7..0 type
//! ```
//!
//! The constants mirror `tools/vg-memtrace/vgmt_format.h`.
//!
//! **Dependences.** The tool counts a dependence back among the data references of the
//! running thread, as [`MemRef::dep`] does, so interleaving threads and processes in the merged
//! trace leaves it meaningful. The decoder keeps it so where the trace and the raw stream
//! differ: a reference split into pieces ([`PIECE`]) adds references between a dependent one
//! and its load (the distance grows by the pieces in between and points at the last piece
//! of a split load; beyond 255 it becomes 0), and a distance that reaches back before the
//! thread's first reference in this stream (a forked child's registers still carry its
//! parent's tags) becomes 0.

use rustc_hash::FxHashMap;
use vmmu_core::addr::Gva;
use vmmu_core::error::{Error, Result};
use vmmu_core::event::{AccessKind, Advice, Event, MapFlags, MemRef, Prot};

/// The first 8 bytes of every stream.
pub const MAGIC: &[u8; 8] = b"VGMTRACE";
/// The stream format version this decoder reads (the tool's `VGMT_VERSION`).
pub const VERSION: u16 = 2;
/// Bytes of the stream header.
pub const HEADER_SIZE: usize = 64;

/// Header flag: the stream has no fetch records; kind-4 records carry instruction counts.
pub const HF_NO_INSTR: u32 = 0x1;
/// Header flag: the stream starts at a fork, in the child.
pub const HF_FORKED: u32 = 0x2;
/// Header flag: load dependences are tracked (kinds 8-10 carry them).
pub const HF_DEPS: u32 = 0x4;

const K_FETCH: u64 = 0x3;
const K_ICOUNT: u64 = 0x4;
/// Added to kinds 0-2: a dependent load, store or modify.
const K_DEP: u64 = 0x8;
const K_EVENT: u64 = 0xF;

const E_MMAP: u64 = 0x01;
const E_MUNMAP: u64 = 0x02;
const E_MPROTECT: u64 = 0x03;
const E_MREMAP: u64 = 0x04;
const E_BRK: u64 = 0x05;
const E_FORK: u64 = 0x06;
const E_EXEC: u64 = 0x07;
const E_EXEC_FAILED: u64 = 0x08;
const E_EXIT: u64 = 0x09;
const E_THREAD: u64 = 0x0A;
const E_THREAD_CREATE: u64 = 0x0B;
const E_THREAD_EXIT: u64 = 0x0C;
const E_STARTUP_DONE: u64 = 0x0D;
const E_EXE_NAME: u64 = 0x0E;
const E_PHASE: u64 = 0x0F;
const E_MADVISE: u64 = 0x10;

/// Data references wider than this are split into pieces of [`PIECE`] bytes (a `MemRef` size is
/// one byte; `fxsave`/`xsave` touch 512 bytes and more).
const MAX_REF: usize = 255;
/// Bytes per piece of a split reference: a cache line.
const PIECE: usize = 64;

/// Access kinds by raw record kind 0..=3.
const KINDS: [AccessKind; 4] = [
    AccessKind::Load,
    AccessKind::Store,
    AccessKind::Modify,
    AccessKind::Fetch,
];

/// The 64-byte header of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamHeader {
    /// Format version.
    pub version: u16,
    /// `HF_*` flags.
    pub flags: u32,
    /// The process id.
    pub pid: u32,
    /// Its parent's process id when the stream opened.
    pub ppid: u32,
    /// `CLOCK_MONOTONIC` nanoseconds when the stream opened (orders a pid's images).
    pub start_ns: u64,
}

impl StreamHeader {
    /// Parses a header; `name` names the stream in errors.
    pub fn parse(b: &[u8], name: &str) -> Result<StreamHeader> {
        let corrupt = |offset: u64, reason: String| Error::TraceCorrupt {
            path: name.to_string(),
            offset,
            reason,
        };
        if b.len() < HEADER_SIZE {
            return Err(corrupt(
                b.len() as u64,
                format!(
                    "the stream ends inside its {HEADER_SIZE}-byte header ({} bytes)",
                    b.len()
                ),
            ));
        }
        if &b[..8] != MAGIC {
            return Err(corrupt(0, "not a vg-memtrace stream (bad magic)".into()));
        }
        let w1 = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let w2 = u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
        let version = w1 as u16;
        let hsize = (w1 >> 16) as u16;
        if version != VERSION {
            return Err(corrupt(
                8,
                format!(
                    "stream version {version}, this vmmu reads version {VERSION}: the \
                     vg-memtrace tool and vmmu do not match (rebuild the tool with `make -C \
                     tools/vg-memtrace`)"
                ),
            ));
        }
        if hsize as usize != HEADER_SIZE {
            return Err(corrupt(
                10,
                format!("header size {hsize}, expected {HEADER_SIZE}"),
            ));
        }
        Ok(StreamHeader {
            version,
            flags: (w1 >> 32) as u32,
            pid: w2 as u32,
            ppid: (w2 >> 32) as u32,
            start_ns: u64::from_le_bytes(b[24..32].try_into().expect("8 bytes")),
        })
    }

    /// Whether the stream starts at a fork (in the child).
    pub fn forked(&self) -> bool {
        self.flags & HF_FORKED != 0
    }

    /// Whether the stream has no fetch records.
    pub fn no_instr(&self) -> bool {
        self.flags & HF_NO_INSTR != 0
    }

    /// Whether the tool tracked load dependences.
    pub fn deps(&self) -> bool {
        self.flags & HF_DEPS != 0
    }
}

/// A point in a stream where the merger must act.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// The process forked `child` (a real pid).
    Fork {
        /// The child's pid.
        child: u32,
    },
}

/// How a stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// The process exited (its exit record is there) with this status.
    Exit(i32),
    /// The image was replaced by `execve` (the next image of the pid continues).
    Exec,
    /// The stream stopped without an exit record: the process was killed (`SIGKILL`) or the
    /// recording stopped; its last buffered records are lost.
    Vanished,
}

/// What one stream contained, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamCounts {
    /// Instruction fetches.
    pub fetches: u64,
    /// Loads.
    pub loads: u64,
    /// Stores.
    pub stores: u64,
    /// Modifies.
    pub modifies: u64,
    /// Instructions retired (fetches, or the counts of a `--no-instr` stream).
    pub instrs: u64,
    /// Address-space events (mmap, munmap, mprotect, mremap, brk).
    pub os_events: u64,
    /// Threads created.
    pub threads_created: u64,
    /// Thread switches within the process.
    pub thread_switches: u64,
    /// Data references whose address depends on a load within 255 references
    /// ([`MemRef::dep`] not 0), pieces of a split reference counted each.
    pub dependent: u64,
    /// Phase markers (`VMMU_PHASE`).
    pub phases: u64,
}

/// What [`StreamDecoder::decode`] stopped at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// All complete records of the data were decoded; feed more.
    NeedMore,
    /// `out` holds at least the requested number of events; call again to continue.
    Full,
    /// A control point: the events before it are in `out`.
    Control(Control),
}

/// Decodes one stream's records (after its header) into events, incrementally: data may be
/// fed in chunks of any size; a record split across chunks is reassembled.
pub struct StreamDecoder {
    name: String,
    no_instr: bool,
    /// Byte offset in the stream of the next byte fed.
    offset: u64,
    carry: Vec<u8>,
    pending_instrs: u64,
    pending_exec: bool,
    exec_target: Option<String>,
    exit: Option<i32>,
    exe: Option<String>,
    counts: StreamCounts,
    /// References by raw kind (load, store, modify, fetch), folded into `counts` on demand.
    by_kind: [u64; 4],
    /// The running thread's dependence bookkeeping.
    thread: ThreadRefs,
    /// The running thread's Valgrind id, once a thread record named it.
    thread_id: Option<u32>,
    /// Data references of the stream when the running thread was switched in.
    switched_at: u64,
    /// The other threads' bookkeeping, by Valgrind thread id.
    threads: FxHashMap<u32, ThreadRefs>,
}

/// What the decoder keeps per thread to keep dependences counting back within the thread.
#[derive(Clone, Debug, Default)]
struct ThreadRefs {
    /// The thread's raw data references in this stream before it was last switched in.
    before: u64,
    /// References of the last 255 that were split: (raw index in the thread, pieces added).
    splits: Vec<(u64, u64)>,
}

impl StreamDecoder {
    /// A decoder for a stream with `header`, named `name` in errors; the header's bytes have
    /// already been consumed.
    pub fn new(header: &StreamHeader, name: impl Into<String>) -> Self {
        StreamDecoder {
            name: name.into(),
            no_instr: header.no_instr(),
            offset: HEADER_SIZE as u64,
            carry: Vec::with_capacity(16 * 8),
            pending_instrs: 0,
            pending_exec: false,
            exec_target: None,
            exit: None,
            exe: None,
            counts: StreamCounts::default(),
            by_kind: [0; 4],
            thread: ThreadRefs::default(),
            thread_id: None,
            switched_at: 0,
            threads: FxHashMap::default(),
        }
    }

    /// The executable's name from the stream, once seen.
    pub fn exe(&self) -> Option<&str> {
        self.exe.as_deref()
    }

    /// The program the last `execve` record named, if any.
    pub fn exec_target(&self) -> Option<&str> {
        self.exec_target.as_deref()
    }

    /// What the stream held so far.
    pub fn counts(&self) -> StreamCounts {
        let [loads, stores, modifies, fetches] = self.by_kind;
        StreamCounts {
            loads,
            stores,
            modifies,
            fetches,
            // Fetch records each retire one instruction; count records add the rest.
            instrs: self.counts.instrs + fetches,
            ..self.counts
        }
    }

    /// Decodes records of `data` from `*pos`, appending events to `out` until `out` holds
    /// `limit` events, a control point is reached, or the data runs out. `*pos` advances past
    /// what was consumed.
    pub fn decode(
        &mut self,
        data: &[u8],
        pos: &mut usize,
        out: &mut Vec<Event>,
        limit: usize,
    ) -> Result<Step> {
        // A record left incomplete by the previous chunk.
        if !self.carry.is_empty() {
            if self.carry.len() < 8 {
                let take = (8 - self.carry.len()).min(data.len() - *pos);
                self.carry.extend_from_slice(&data[*pos..*pos + take]);
                *pos += take;
                if self.carry.len() < 8 {
                    return Ok(Step::NeedMore);
                }
            }
            let need = self.record_len(&self.carry[..8]);
            let take = (need - self.carry.len()).min(data.len() - *pos);
            self.carry.extend_from_slice(&data[*pos..*pos + take]);
            *pos += take;
            if self.carry.len() < need {
                return Ok(Step::NeedMore);
            }
            let rec = std::mem::take(&mut self.carry);
            let ctl = self.record(&rec, out)?;
            self.offset += need as u64;
            self.carry = rec;
            self.carry.clear();
            if let Some(c) = ctl {
                return Ok(Step::Control(c));
            }
        }
        while out.len() < limit {
            let rest = &data[*pos..];
            if rest.len() < 8 {
                self.carry.extend_from_slice(rest);
                *pos = data.len();
                return Ok(Step::NeedMore);
            }
            // The hot path: a run of references, one word each.
            let n = (rest.len() / 8).min(limit - out.len());
            out.reserve(n);
            let mut i = 0;
            for word in rest[..n * 8].chunks_exact(8) {
                let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
                let kind = (w >> 12) & 0xF;
                if kind > K_FETCH {
                    if kind == K_ICOUNT && self.no_instr {
                        // The other hot record of a `--no-instr` stream.
                        self.pending_instrs += w >> 16;
                        self.counts.instrs += w >> 16;
                        i += 1;
                        continue;
                    }
                    if (K_DEP..K_DEP + 3).contains(&kind) {
                        self.dep_reference(w, kind - K_DEP, out);
                        i += 1;
                        continue;
                    }
                    break;
                }
                self.reference(w, kind, out);
                i += 1;
            }
            *pos += i * 8;
            self.offset += i as u64 * 8;
            if i == n {
                continue;
            }
            // Any other record.
            let rest = &data[*pos..];
            let len = self.record_len(&rest[..8]);
            if rest.len() < len {
                self.carry.extend_from_slice(rest);
                *pos = data.len();
                return Ok(Step::NeedMore);
            }
            let ctl = self.record(&rest[..len], out)?;
            *pos += len;
            self.offset += len as u64;
            if let Some(c) = ctl {
                return Ok(Step::Control(c));
            }
        }
        Ok(Step::Full)
    }

    /// Ends the stream: flushes pending instructions and says how it ended.
    pub fn finish(&mut self, out: &mut Vec<Event>) -> Result<StreamEnd> {
        if !self.carry.is_empty() {
            // A process killed mid-write leaves a partial record: drop it, as a killed
            // process's unflushed records are lost anyway.
            self.carry.clear();
            self.exit = None;
        }
        self.flush_instrs(out);
        Ok(if let Some(code) = self.exit {
            StreamEnd::Exit(code)
        } else if self.pending_exec {
            StreamEnd::Exec
        } else {
            StreamEnd::Vanished
        })
    }

    /// Bytes of the record starting with tag word `w` (header word plus payload).
    #[inline]
    fn record_len(&self, first: &[u8]) -> usize {
        let w = u64::from_le_bytes(first[..8].try_into().expect("8 bytes"));
        if (w >> 12) & 0xF == K_EVENT {
            8 * (1 + ((w >> 8) & 0xF) as usize)
        } else {
            8
        }
    }

    #[inline(always)]
    fn reference(&mut self, w: u64, kind: u64, out: &mut Vec<Event>) {
        let size = (w & 0xFFF) as usize;
        if size > MAX_REF || self.pending_instrs > u32::MAX as u64 {
            return self.reference_slow(w, kind, size, 0, out);
        }
        // Branch-free where it matters: the kinds interleave unpredictably. A fetch retires
        // its instruction; a data reference of a `--no-instr` stream carries the count so far
        // (always 0 in a stream with fetches).
        self.by_kind[kind as usize] += 1;
        let instrs = (kind == K_FETCH) as u32 | self.pending_instrs as u32;
        self.pending_instrs = 0;
        out.push(Event::Ref(MemRef::new(
            Gva::new(((w as i64) >> 16) as u64),
            KINDS[kind as usize],
            size.max(1) as u8,
            instrs,
        )));
    }

    /// A dependent data reference (kinds 8-10; `kind` is 0-2): its size is a power of two,
    /// its dependence counted back among the running thread's raw data references.
    #[inline]
    fn dep_reference(&mut self, w: u64, kind: u64, out: &mut Vec<Event>) {
        let size = 1usize << ((w >> 8) & 0xF);
        let dep = self.trace_dep(w & 0xFF);
        if size > MAX_REF || self.pending_instrs > u32::MAX as u64 {
            return self.reference_slow(w, kind, size, dep, out);
        }
        self.by_kind[kind as usize] += 1;
        self.counts.dependent += (dep != 0) as u64;
        let instrs = self.pending_instrs as u32;
        self.pending_instrs = 0;
        out.push(Event::Ref(MemRef {
            va: Gva::new(((w as i64) >> 16) as u64),
            kind: KINDS[kind as usize],
            size: size as u8,
            instrs,
            dep,
        }));
    }

    /// The running thread's raw data references so far in this stream.
    #[inline]
    fn thread_refs(&self) -> u64 {
        let [loads, stores, modifies, _] = self.by_kind;
        loads + stores + modifies - self.switched_at + self.thread.before
    }

    /// The trace's dependence for a raw one (the reference not yet counted): the pieces of
    /// split references in between are added; a distance before the thread's first
    /// reference of the stream, or beyond 255, is 0.
    fn trace_dep(&self, raw: u64) -> u8 {
        let r = self.thread_refs();
        if raw == 0 || raw > r {
            return 0;
        }
        let t = r - raw;
        let added: u64 = self
            .thread
            .splits
            .iter()
            .filter(|&&(i, _)| i > t)
            .map(|&(_, n)| n)
            .sum();
        u8::try_from(raw + added).unwrap_or(0)
    }

    /// A reference wider than a `MemRef` holds, or carrying an instruction count; `dep` is
    /// its dependence in the trace.
    #[cold]
    fn reference_slow(&mut self, w: u64, kind: u64, size: usize, dep: u8, out: &mut Vec<Event>) {
        // Sign-extend the 48-bit address (a canonical upper-half address stays canonical).
        let va = Gva::new(((w as i64) >> 16) as u64);
        let index = self.thread_refs();
        self.by_kind[kind as usize] += 1;
        let kind = KINDS[kind as usize];
        let instrs = if kind.is_fetch() {
            1
        } else {
            self.take_instrs(out)
        };
        if size <= MAX_REF {
            self.counts.dependent += (dep != 0) as u64;
            out.push(Event::Ref(MemRef {
                dep,
                ..MemRef::new(va, kind, size.max(1) as u8, instrs)
            }));
            return;
        }
        let pieces = size.div_ceil(PIECE) as u64;
        if !kind.is_fetch() {
            // Later dependences reaching back across this reference count its pieces.
            let splits = &mut self.thread.splits;
            splits.retain(|&(i, _)| i + 255 > index);
            splits.push((index, pieces - 1));
        }
        for p in 0..pieces {
            let off = p as usize * PIECE;
            // Each piece's address is computed from the same load, one reference further.
            let dep = if dep == 0 {
                0
            } else {
                u8::try_from(dep as u64 + p).unwrap_or(0)
            };
            self.counts.dependent += (dep != 0) as u64;
            out.push(Event::Ref(MemRef {
                dep,
                ..MemRef::new(
                    va.add(off as u64),
                    kind,
                    PIECE.min(size - off) as u8,
                    if p == 0 { instrs } else { 0 },
                )
            }));
        }
    }

    /// The running thread becomes `tid` (Valgrind's id).
    fn switch_thread(&mut self, tid: u32) {
        if self.thread_id == Some(tid) {
            return;
        }
        let refs = self.thread_refs();
        let [loads, stores, modifies, _] = self.by_kind;
        self.switched_at = loads + stores + modifies;
        match self.thread_id.replace(tid) {
            // The references before the first thread record are that thread's.
            None => self.thread.before = refs,
            Some(old) => {
                let mut prev = std::mem::take(&mut self.thread);
                prev.before = refs;
                self.threads.insert(old, prev);
                self.thread = self.threads.remove(&tid).unwrap_or_default();
            }
        }
    }

    /// The pending instruction count for a data reference (`--no-instr` streams); a count
    /// too large for a reference goes out as `Compute` first.
    #[inline(always)]
    fn take_instrs(&mut self, out: &mut Vec<Event>) -> u32 {
        if self.pending_instrs == 0 {
            return 0;
        }
        if self.pending_instrs > u32::MAX as u64 {
            self.flush_instrs(out);
            return 0;
        }
        let n = self.pending_instrs as u32;
        self.pending_instrs = 0;
        n
    }

    fn flush_instrs(&mut self, out: &mut Vec<Event>) {
        if self.pending_instrs > 0 {
            out.push(Event::Compute {
                instrs: self.pending_instrs,
            });
            self.pending_instrs = 0;
        }
    }

    fn corrupt(&self, reason: String) -> Error {
        Error::TraceCorrupt {
            path: self.name.clone(),
            offset: self.offset,
            reason,
        }
    }

    /// Decodes a non-reference record (`rec` holds it whole).
    fn record(&mut self, rec: &[u8], out: &mut Vec<Event>) -> Result<Option<Control>> {
        let w = u64::from_le_bytes(rec[..8].try_into().expect("8 bytes"));
        let kind = (w >> 12) & 0xF;
        let value = w >> 16;
        if kind <= K_FETCH {
            self.reference(w, kind, out);
            return Ok(None);
        }
        if (K_DEP..K_DEP + 3).contains(&kind) {
            self.dep_reference(w, kind - K_DEP, out);
            return Ok(None);
        }
        if kind == K_ICOUNT {
            if !self.no_instr {
                return Err(self
                    .corrupt("an instruction-count record in a stream with fetch records".into()));
            }
            self.pending_instrs += value;
            self.counts.instrs += value;
            return Ok(None);
        }
        if kind != K_EVENT {
            return Err(self.corrupt(format!("unknown record kind {kind} (word {w:#018x})")));
        }
        let ty = w & 0xFF;
        // A record after an exec attempt means the exec failed (EXEC_FAILED says so too).
        if ty != E_EXEC {
            self.pending_exec = false;
        }
        let p: Vec<u64> = rec[8..]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let need = |n: usize, what: &str| -> Result<()> {
            if p.len() == n {
                Ok(())
            } else {
                Err(self.corrupt(format!(
                    "{what} record with {} payload words, expected {n}",
                    p.len()
                )))
            }
        };
        let mut ctl = None;
        match ty {
            E_MMAP => {
                need(2, "mmap")?;
                let (start, len) = page_range(p[0], p[1]);
                if len > 0 {
                    self.os_event(
                        Event::mmap(
                            Gva::new(start),
                            len,
                            Prot((value & 7) as u8),
                            MapFlags(((value >> 4) & 0xF) as u8),
                        ),
                        out,
                    );
                }
            }
            E_MUNMAP => {
                need(2, "munmap")?;
                let (start, len) = page_range(p[0], p[1]);
                if len > 0 {
                    self.os_event(Event::munmap(Gva::new(start), len), out);
                }
            }
            E_MPROTECT => {
                need(2, "mprotect")?;
                let (start, len) = page_range(p[0], p[1]);
                if len > 0 {
                    self.os_event(
                        Event::mprotect(Gva::new(start), len, Prot((value & 7) as u8)),
                        out,
                    );
                }
            }
            E_MADVISE => {
                need(2, "madvise")?;
                let (start, len) = page_range(p[0], p[1]);
                if len > 0 {
                    self.os_event(
                        Event::madvise(Gva::new(start), len, Advice(value as u8)),
                        out,
                    );
                }
            }
            E_PHASE => {
                need(0, "phase")?;
                self.counts.phases += 1;
                self.flush_instrs(out);
                out.push(Event::Phase { id: value as u32 });
            }
            E_MREMAP => {
                need(4, "mremap")?;
                self.os_event(
                    Event::mremap(Gva::new(p[0]), page_up(p[1]), Gva::new(p[2]), page_up(p[3])),
                    out,
                );
            }
            E_BRK => {
                need(1, "brk")?;
                self.os_event(
                    Event::Brk {
                        end: Gva::new(p[0]),
                    },
                    out,
                );
            }
            E_FORK => {
                need(0, "fork")?;
                self.flush_instrs(out);
                ctl = Some(Control::Fork {
                    child: value as u32,
                });
            }
            E_EXEC => {
                // The program's path (a tool that predates it sends none).
                self.exec_target = (!p.is_empty()).then(|| payload_string(value, &p));
                self.pending_exec = true;
            }
            E_EXEC_FAILED => need(0, "exec-failed")?,
            E_EXIT => {
                need(0, "exit")?;
                self.exit = Some(value as u32 as i32);
            }
            // Thread events carry Valgrind's thread ids and no pid: the merge, which knows
            // the guest pid, maps them to guest thread ids.
            E_THREAD => {
                self.counts.thread_switches += 1;
                self.switch_thread(value as u32);
                self.flush_instrs(out);
                out.push(Event::Thread {
                    pid: 0,
                    tid: value as u32,
                });
            }
            E_THREAD_CREATE => {
                self.counts.threads_created += 1;
                // A Valgrind thread id used again is a new thread.
                self.threads.remove(&(value as u32));
                self.os_event(
                    Event::ThreadCreate {
                        pid: 0,
                        tid: value as u32,
                    },
                    out,
                );
            }
            E_THREAD_EXIT => {
                self.flush_instrs(out);
                out.push(Event::ThreadExit {
                    pid: 0,
                    tid: value as u32,
                });
            }
            E_STARTUP_DONE => {}
            E_EXE_NAME => self.exe = Some(payload_string(value, &p)),
            _ => return Err(self.corrupt(format!("unknown event type {ty:#x}"))),
        }
        Ok(ctl)
    }

    fn os_event(&mut self, e: Event, out: &mut Vec<Event>) {
        self.flush_instrs(out);
        self.counts.os_events += 1;
        out.push(e);
    }
}

/// A string event's payload: `len` bytes of the words, NUL padded.
fn payload_string(len: u64, words: &[u64]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let n = (len as usize).min(bytes.len());
    String::from_utf8_lossy(&bytes[..n]).into_owned()
}

/// `[start, start+len)` widened to whole 4 KiB pages.
fn page_range(start: u64, len: u64) -> (u64, u64) {
    let lo = start & !0xFFF;
    let hi = page_up(start.saturating_add(len));
    (lo, hi - lo)
}

fn page_up(x: u64) -> u64 {
    x.saturating_add(0xFFF) & !0xFFF
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const K_LOAD: u64 = 0x0;
    const K_STORE: u64 = 0x1;
    const K_MODIFY: u64 = 0x2;

    /// A stream header for tests.
    pub(crate) fn header(pid: u32, ppid: u32, flags: u32, start_ns: u64) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_SIZE];
        h[..8].copy_from_slice(MAGIC);
        let w1 = VERSION as u64 | (HEADER_SIZE as u64) << 16 | (flags as u64) << 32;
        h[8..16].copy_from_slice(&w1.to_le_bytes());
        h[16..24].copy_from_slice(&(pid as u64 | (ppid as u64) << 32).to_le_bytes());
        h[24..32].copy_from_slice(&start_ns.to_le_bytes());
        h
    }

    /// A reference word.
    pub(crate) fn rref(kind: u64, va: u64, size: u64) -> u64 {
        va << 16 | kind << 12 | size
    }

    /// A dependent reference word: size `1 << log2`, `dep` data references back.
    pub(crate) fn dref(kind: u64, va: u64, log2: u64, dep: u64) -> u64 {
        va << 16 | (kind + K_DEP) << 12 | log2 << 8 | dep
    }

    /// An event word with `n` payload words.
    pub(crate) fn rev(ty: u64, inline: u64, n: u64) -> u64 {
        inline << 16 | K_EVENT << 12 | n << 8 | ty
    }

    pub(crate) fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn decode_all(words: &[u64], flags: u32, chunk: usize) -> (Vec<Event>, StreamEnd) {
        let h = StreamHeader::parse(&header(7, 1, flags, 0), "t").unwrap();
        let mut d = StreamDecoder::new(&h, "t");
        let data = bytes(words);
        let mut out = Vec::new();
        for c in data.chunks(chunk) {
            let mut pos = 0;
            while pos < c.len() {
                d.decode(c, &mut pos, &mut out, usize::MAX).unwrap();
            }
        }
        let end = d.finish(&mut out).unwrap();
        (out, end)
    }

    #[test]
    fn references_and_events_decode_in_order_whatever_the_chunking() {
        let words = [
            rev(E_MMAP, 0x5 | 0x2 << 4, 2),
            0x400000,
            0x2000,
            rref(K_FETCH, 0x401000, 3),
            rref(K_LOAD, 0x7fff_0000_1000, 8),
            rref(K_FETCH, 0x401003, 2),
            rref(K_MODIFY, 0x1000, 4),
            rev(E_BRK, 0, 1),
            0x600000,
            rev(E_EXIT, 0, 0),
        ];
        for chunk in [1, 3, 8, 13, 1000] {
            let (ev, end) = decode_all(&words, 0, chunk);
            assert_eq!(end, StreamEnd::Exit(0));
            assert_eq!(ev.len(), 6, "chunk {chunk}");
            assert_eq!(
                ev[0],
                Event::mmap(
                    Gva::new(0x400000),
                    0x2000,
                    Prot(5),
                    MapFlags(MapFlags::FILE)
                )
            );
            assert_eq!(
                ev[2],
                Event::Ref(MemRef {
                    va: Gva::new(0x7fff_0000_1000),
                    kind: AccessKind::Load,
                    size: 8,
                    instrs: 0,
                    dep: 0,
                })
            );
            assert_eq!(
                ev[5],
                Event::Brk {
                    end: Gva::new(0x600000)
                }
            );
        }
    }

    #[test]
    fn no_instr_streams_carry_counts_on_the_next_reference() {
        let words = [
            rref(K_ICOUNT, 3, 0),
            rref(K_STORE, 0x1000, 8),
            rref(K_ICOUNT, 2, 0),
            rev(E_MUNMAP, 0, 2),
            0x1000,
            0x1000,
            rref(K_ICOUNT, 5, 0),
        ];
        let (ev, end) = decode_all(&words, HF_NO_INSTR, 8);
        assert_eq!(end, StreamEnd::Vanished);
        assert_eq!(
            ev,
            vec![
                Event::Ref(MemRef {
                    va: Gva::new(0x1000),
                    kind: AccessKind::Store,
                    size: 8,
                    instrs: 3,
                    dep: 0,
                }),
                Event::Compute { instrs: 2 },
                Event::munmap(Gva::new(0x1000), 0x1000),
                Event::Compute { instrs: 5 },
            ]
        );
    }

    #[test]
    fn wide_references_are_split_into_lines() {
        let (ev, _) = decode_all(&[rref(K_STORE, 0x2000, 512)], 0, 8);
        assert_eq!(ev.len(), 8);
        assert!(ev
            .iter()
            .all(|e| matches!(e, Event::Ref(r) if r.size == 64)));
    }

    #[test]
    fn an_exec_names_its_program_and_one_that_fails_is_not_an_exec() {
        let (_, end) = decode_all(&[rev(E_EXEC, 0, 0)], 0, 8);
        assert_eq!(end, StreamEnd::Exec);
        // `/bin/true`: 9 bytes in two words, NUL padded.
        let h = StreamHeader::parse(&header(7, 1, 0, 0), "t").unwrap();
        let mut d = StreamDecoder::new(&h, "t");
        let words = [
            rev(E_EXEC, 9, 2),
            u64::from_le_bytes(*b"/bin/tru"),
            b'e' as u64,
        ];
        let data = bytes(&words);
        let mut pos = 0;
        d.decode(&data, &mut pos, &mut Vec::new(), 100).unwrap();
        assert_eq!(d.finish(&mut Vec::new()).unwrap(), StreamEnd::Exec);
        assert_eq!(d.exec_target(), Some("/bin/true"));
        let (_, end) = decode_all(&[rev(E_EXEC, 0, 0), rev(E_EXEC_FAILED, 0, 0)], 0, 8);
        assert_eq!(end, StreamEnd::Vanished);
    }

    /// The dependences of the data references among `ev`.
    fn deps(ev: &[Event]) -> Vec<u8> {
        ev.iter()
            .filter_map(|e| match e {
                Event::Ref(r) if !r.kind.is_fetch() => Some(r.dep),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn dependent_references_carry_their_distance_and_size() {
        let words = [
            rref(K_LOAD, 0x1000, 8),
            rref(K_FETCH, 0x401000, 3),
            dref(K_LOAD, 0x2000, 3, 1),
            dref(K_STORE, 0x3000, 2, 2),
            dref(K_MODIFY, 0x4000, 0, 3),
        ];
        for chunk in [1, 8, 1000] {
            let (ev, _) = decode_all(&words, HF_DEPS, chunk);
            assert_eq!(deps(&ev), vec![0, 1, 2, 3], "chunk {chunk}");
            assert_eq!(
                ev[2],
                Event::Ref(MemRef {
                    va: Gva::new(0x2000),
                    kind: AccessKind::Load,
                    size: 8,
                    instrs: 0,
                    dep: 1,
                })
            );
            let sizes: Vec<u8> = ev
                .iter()
                .filter_map(|e| match e {
                    Event::Ref(r) => Some(r.size),
                    _ => None,
                })
                .collect();
            assert_eq!(sizes, vec![8, 3, 8, 4, 1]);
        }
    }

    #[test]
    fn a_split_reference_in_between_adds_its_pieces_to_the_distance() {
        // load, 512-byte store (8 pieces), a load depending on the first load: 2 back in
        // the raw stream, 9 back in the trace.
        let (ev, _) = decode_all(
            &[
                rref(K_LOAD, 0x1000, 8),
                rref(K_STORE, 0x2000, 512),
                dref(K_LOAD, 0x3000, 3, 2),
            ],
            HF_DEPS,
            8,
        );
        assert_eq!(deps(&ev), vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
        // A reference depending on a split load counts back to its last piece; a split
        // dependent reference's pieces each depend on the same load, one further each.
        let (ev, _) = decode_all(
            &[
                rref(K_LOAD, 0x1000, 512),
                dref(K_LOAD, 0x3000, 3, 1),
                dref(K_STORE, 0x4000, 8, 1), // 256 bytes: 4 pieces
            ],
            HF_DEPS,
            8,
        );
        assert_eq!(deps(&ev), vec![0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4]);
        // Pieces that push the distance beyond 255 drop it.
        let mut words = vec![rref(K_LOAD, 0x1000, 8)];
        words.extend(std::iter::repeat_n(rref(K_STORE, 0x2000, 4095), 4));
        words.push(dref(K_LOAD, 0x3000, 3, 5));
        let (ev, _) = decode_all(&words, HF_DEPS, 8);
        assert_eq!(deps(&ev).last(), Some(&0));
    }

    #[test]
    fn dependences_count_within_the_thread_and_not_before_its_first_reference() {
        let words = [
            // A forked child's first reference whose address came from its parent's load.
            dref(K_LOAD, 0x1000, 3, 4),
            rev(E_THREAD, 1, 0),
            rref(K_LOAD, 0x1000, 8),
            rev(E_THREAD, 2, 0),
            rref(K_LOAD, 0x2000, 8),
            dref(K_LOAD, 0x2008, 3, 2), // thread 2 has made one reference: dropped
            dref(K_LOAD, 0x2010, 3, 1),
            rev(E_THREAD, 1, 0),
            dref(K_LOAD, 0x1008, 3, 2), // thread 1: its second reference back
            rev(E_THREAD_CREATE, 2, 0), // a new thread 2
            rev(E_THREAD, 2, 0),
            dref(K_LOAD, 0x3000, 3, 1), // nothing of the new thread 2 before it
        ];
        let (ev, _) = decode_all(&words, HF_DEPS, 8);
        assert_eq!(deps(&ev), vec![0, 0, 0, 0, 1, 2, 0]);
    }

    #[test]
    fn phase_markers_and_madvise_decode_in_place() {
        let words = [
            rref(K_LOAD, 0x1000, 8),
            rev(E_PHASE, 7, 0),
            rref(K_STORE, 0x2000, 8),
            rev(E_MADVISE, 14, 2),
            0x7f00_0000_0000,
            0x20_0000,
            rev(E_MADVISE, 4, 2), // widened to whole pages
            0x7f00_0000_1008,
            0x10,
        ];
        let (ev, _) = decode_all(&words, 0, 8);
        assert_eq!(ev[1], Event::Phase { id: 7 });
        assert_eq!(
            ev[3],
            Event::madvise(
                Gva::new(0x7f00_0000_0000),
                0x20_0000,
                Advice(Advice::HUGEPAGE)
            )
        );
        assert_eq!(
            ev[4],
            Event::madvise(Gva::new(0x7f00_0000_1000), 0x1000, Advice(Advice::DONTNEED))
        );
    }

    #[test]
    fn a_stream_of_another_version_is_refused_naming_both_versions() {
        let mut h = header(7, 1, 0, 0);
        h[8..10].copy_from_slice(&1u16.to_le_bytes());
        let err = StreamHeader::parse(&h, "old.vgmt").unwrap_err().to_string();
        assert!(
            err.contains("old.vgmt")
                && err.contains("stream version 1, this vmmu reads version 2")
                && err.contains("make -C tools/vg-memtrace"),
            "{err}"
        );
    }

    #[test]
    fn corrupt_records_name_their_byte_offset() {
        let h = StreamHeader::parse(&header(7, 1, 0, 0), "s").unwrap();
        let mut d = StreamDecoder::new(&h, "s");
        let data = bytes(&[rref(K_LOAD, 0x1000, 8), 0x7 << 12]);
        let mut pos = 0;
        let err = d.decode(&data, &mut pos, &mut Vec::new(), 100).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("byte offset 72"), "{msg}");
        let err = StreamHeader::parse(b"NOTATRACE", "x").unwrap_err();
        assert!(err.to_string().contains("header"), "{err}");
    }
}
