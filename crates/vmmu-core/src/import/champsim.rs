//! ChampSim instruction traces (docs/recording.md, "ChampSim traces").
//!
//! A ChampSim trace is a sequence of 64-byte `input_instr` records (ChampSim's
//! `inc/trace_instruction.h`), little-endian, usually compressed with xz or gzip:
//!
//! ```text
//! offset  size  field
//!      0     8  ip                        instruction pointer
//!      8     1  is_branch
//!      9     1  branch_taken
//!     10     2  destination_registers[2]
//!     12     4  source_registers[4]
//!     16    16  destination_memory[2]     store addresses, 0 = none
//!     32    32  source_memory[4]          load addresses, 0 = none
//! ```
//!
//! Each record becomes an instruction fetch of `ip` (4 bytes: the record does not say the
//! instruction's length) carrying one retired instruction, then one load per distinct nonzero
//! source address and one store per distinct nonzero destination address, 8 bytes each (the
//! record does not say the access size); an address that is both read and written is one
//! modify. ChampSim traces carry no process or address-space events.
//!
//! **Dependences** ([`MemRef::dep`]) come from the register fields, as the recorder's
//! Valgrind tool computes them from the program's dataflow ([`RegTags`]): every register
//! carries the sequence number of the youngest load its value was computed from (data
//! references counted, loads, stores and modifies, as [`MemRef::dep`] counts them); an
//! instruction's destination registers take the maximum of its source registers' tags and of
//! its own youngest load; the address of each of its memory operands is taken to depend on
//! all of its source registers. A record does not say which registers form an address and
//! which are data (`add rax, [rbx]` lists both `rax` and `rbx`), so a load is dependent on
//! a load that only fed its instruction's other operand: an approximation that can add a
//! dependence or point one at a nearer load, never make a dependent load look independent. Three registers are special: the instruction pointer has no tag (where the
//! program goes is control flow, not data), the flags register never forms an address
//! (only a value, through `setcc` or `cmov`), and the stack pointer written by an instruction
//! that loads (`pop`, `ret`) keeps its sources' tag, not the load's (it moves by a constant).
//!
//! Writing goes the other way: each fetch starts a record, and the data references that
//! follow fill its sources and destinations (a modify is both); references beyond 4 loads or
//! 2 stores, or with no fetch before them, start records of their own at the previous `ip`.
//! The register fields are written as zero: dependences are lost (read back, every
//! reference is independent).

use crate::addr::Gva;
use crate::compress::{open_read, BackgroundWriter, CompressedWriter, Compression};
use crate::error::{Error, Result};
use crate::event::{AccessKind, Event, EventSource, MemRef};
use std::io::{BufRead, Read};

/// Bytes of one `input_instr` record.
pub const RECORD: usize = 64;
/// Size given to an imported instruction fetch.
pub const FETCH_SIZE: u8 = 4;
/// Size given to an imported load or store.
pub const DATA_SIZE: u8 = 8;
/// ChampSim's stack pointer register (`champsim::REG_STACK_POINTER`).
pub const REG_STACK_POINTER: u8 = 6;
/// ChampSim's flags register (`champsim::REG_FLAGS`).
pub const REG_FLAGS: u8 = 25;
/// ChampSim's instruction pointer register (`champsim::REG_INSTRUCTION_POINTER`).
pub const REG_INSTRUCTION_POINTER: u8 = 26;

/// The dataflow state that turns register fields into [`MemRef::dep`]: per register, the
/// sequence number of the youngest load its value was computed from (0: none).
#[derive(Clone, Debug)]
pub struct RegTags {
    tags: [u64; 256],
    /// Data references so far, from [`RegTags::START`].
    seq: u64,
}

impl Default for RegTags {
    fn default() -> Self {
        RegTags {
            tags: [0; 256],
            seq: Self::START,
        }
    }
}

impl RegTags {
    /// The first sequence number: an untagged value (tag 0) is always more than 255 data
    /// references back.
    const START: u64 = 256;

    /// The next data reference's sequence number and its dependence on an address tagged
    /// `tag`.
    #[inline]
    fn next(&mut self, tag: u64) -> (u64, u8) {
        self.seq += 1;
        (self.seq, u8::try_from(self.seq - tag).unwrap_or(0))
    }
}

/// Reads a ChampSim trace as events.
pub struct ChampSimReader {
    path: String,
    input: Box<dyn BufRead + Send>,
    compression: Compression,
    /// Decompressed bytes consumed (the offset named in errors).
    offset: u64,
    buf: Vec<u8>,
    records: u64,
    regs: RegTags,
}

/// Records read from the decompressed stream at a time.
const READ_RECORDS: usize = 4096;

impl ChampSimReader {
    /// Opens `path` (xz, gzip, zstd or uncompressed, told apart by the first bytes).
    pub fn open(path: &str) -> Result<ChampSimReader> {
        let (input, compression) = open_read(path)?;
        Ok(ChampSimReader {
            path: path.to_string(),
            input,
            compression,
            offset: 0,
            buf: vec![0u8; READ_RECORDS * RECORD],
            records: 0,
            regs: RegTags::default(),
        })
    }

    /// How the file is compressed.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Records (instructions) read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Fills `self.buf` with up to `want` whole records; returns the bytes read.
    fn fill(&mut self, want: usize) -> Result<usize> {
        let mut got = 0;
        let cap = want * RECORD;
        while got < cap {
            match self.input.read(&mut self.buf[got..cap]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::TraceCorrupt {
                        path: self.path.clone(),
                        offset: self.offset + got as u64,
                        reason: format!("cannot decompress ({}): {e}", self.compression.name()),
                    })
                }
            }
        }
        if got % RECORD != 0 {
            return Err(Error::TraceCorrupt {
                path: self.path.clone(),
                offset: self.offset + (got - got % RECORD) as u64,
                reason: format!(
                    "the trace ends inside a {RECORD}-byte record ({} bytes of it; offsets are \
                     in the decompressed stream)",
                    got % RECORD
                ),
            });
        }
        Ok(got)
    }
}

/// The events of one record, appended to `out`; `regs` carries the dataflow from record to
/// record.
#[inline]
fn record_events(r: &[u8], regs: &mut RegTags, out: &mut Vec<Event>) {
    let word = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().expect("8 bytes"));
    out.push(Event::Ref(MemRef::new(
        Gva::new(word(0)),
        AccessKind::Fetch,
        FETCH_SIZE,
        1,
    )));
    // The tags of the source registers: as an address (flags excepted) and as a value.
    let (mut addr_tag, mut value_tag) = (0, 0);
    for &reg in &r[12..16] {
        if reg != 0 && reg != REG_INSTRUCTION_POINTER {
            let t = regs.tags[reg as usize];
            value_tag = value_tag.max(t);
            if reg != REG_FLAGS {
                addr_tag = addr_tag.max(t);
            }
        }
    }
    let dst = [word(16), word(24)];
    let src = [word(32), word(40), word(48), word(56)];
    let mut loaded = 0;
    let mut data = |va: u64, kind| {
        let (seq, dep) = regs.next(addr_tag);
        if kind != AccessKind::Store {
            loaded = seq;
        }
        Event::Ref(MemRef {
            dep,
            ..MemRef::new(Gva::new(va), kind, DATA_SIZE, 0)
        })
    };
    for (i, &a) in src.iter().enumerate() {
        if a == 0 || src[..i].contains(&a) {
            continue;
        }
        let kind = if dst.contains(&a) {
            AccessKind::Modify
        } else {
            AccessKind::Load
        };
        out.push(data(a, kind));
    }
    for (i, &a) in dst.iter().enumerate() {
        if a == 0 || dst[..i].contains(&a) || src.contains(&a) {
            continue;
        }
        out.push(data(a, AccessKind::Store));
    }
    for &reg in &r[10..12] {
        match reg {
            0 | REG_INSTRUCTION_POINTER => {}
            REG_STACK_POINTER => regs.tags[reg as usize] = value_tag,
            _ => regs.tags[reg as usize] = value_tag.max(loaded),
        }
    }
}

impl EventSource for ChampSimReader {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        // A record makes at most 7 events.
        let want = (max / 7).clamp(1, READ_RECORDS);
        let start = buf.len();
        let got = self.fill(want)?;
        for r in self.buf[..got].chunks_exact(RECORD) {
            record_events(r, &mut self.regs, buf);
        }
        self.offset += got as u64;
        self.records += (got / RECORD) as u64;
        Ok(buf.len() - start)
    }

    fn describe(&self) -> String {
        format!("champsim {}", self.path)
    }

    fn tracks_dependences(&self) -> bool {
        true
    }
}

/// Whether `path` looks like a ChampSim trace: after decompression, its first records (up to
/// 16) have branch flags of 0 or 1 and user-space addresses. Text (lackey) and `.vtrace`
/// files never pass; an empty file does not either.
pub fn sniff_champsim(path: &str) -> Result<bool> {
    let (mut input, _) = open_read(path)?;
    let mut b = vec![0u8; 16 * RECORD];
    let mut got = 0;
    while got < b.len() {
        match input.read(&mut b[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(_) => return Ok(false),
        }
    }
    if got < RECORD {
        return Ok(false);
    }
    let user = |a: u64| a < 1 << 57;
    Ok(b[..got - got % RECORD].chunks_exact(RECORD).all(|r| {
        let w = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().expect("8 bytes"));
        let ip = w(0);
        r[8] <= 1 && r[9] <= 1 && ip != 0 && user(ip) && (16..64).step_by(8).all(|i| user(w(i)))
    }))
}

/// Records gathered before they go to the encoder in one write.
const WRITE_RECORDS: usize = 1 << 14;

/// Writes events as a ChampSim trace, compressed as the file name says (`.xz`, `.gz`, `.zst`,
/// else plain). Process and address-space events cannot be expressed and are dropped
/// (counted). Records are gathered in a buffer that goes to the encoder, on a thread of its
/// own, a megabyte at a time: a write per record would cost the encoder a call each, and the
/// encoder (64 bytes an instruction) is the slow part, so it runs beside the encoding.
///
/// [`create_reading_back`](ChampSimWriter::create_reading_back) also reads every record back,
/// on the writing thread, as a reader of the file will: what the file holds, for a truthful
/// summary.
pub struct ChampSimWriter<S: Send + 'static = ()> {
    path: String,
    out: BackgroundWriter<ReadBack<S>>,
    /// Complete records not yet written, then the record being filled (`open`).
    buf: Vec<u8>,
    /// Offset in `buf` of the record being filled: the complete records end there.
    at: usize,
    open: bool,
    nsrc: usize,
    ndst: usize,
    last_ip: u64,
    records: u64,
    dropped: u64,
}

/// The writing thread's state: the events of a buffer of records, read back, go to `back`.
struct ReadBack<S> {
    events: Vec<Event>,
    regs: RegTags,
    state: S,
    back: Option<fn(&mut S, &[Event])>,
}

fn read_back<S>(rb: &mut ReadBack<S>, records: &[u8]) {
    let Some(back) = rb.back else {
        return;
    };
    rb.events.clear();
    for r in records.chunks_exact(RECORD) {
        record_events(r, &mut rb.regs, &mut rb.events);
    }
    back(&mut rb.state, &rb.events);
}

impl ChampSimWriter<()> {
    /// Creates `path`.
    pub fn create(path: &str) -> Result<ChampSimWriter<()>> {
        ChampSimWriter::open(path, (), None)
    }
}

impl<S: Send + 'static> ChampSimWriter<S> {
    /// Creates `path`; `back(&mut state, events)` receives, in order, the events of the
    /// records written, as a reader of the file gets them. [`finish`](ChampSimWriter::finish)
    /// gives `state` back.
    pub fn create_reading_back(
        path: &str,
        state: S,
        back: fn(&mut S, &[Event]),
    ) -> Result<ChampSimWriter<S>> {
        ChampSimWriter::open(path, state, Some(back))
    }

    fn open(path: &str, state: S, back: Option<fn(&mut S, &[Event])>) -> Result<Self> {
        let out = CompressedWriter::create(path, Compression::for_path(path))?;
        let rb = ReadBack {
            events: Vec::new(),
            regs: RegTags::default(),
            state,
            back,
        };
        Ok(ChampSimWriter {
            path: path.to_string(),
            out: BackgroundWriter::start(out, rb, read_back).map_err(|e| Error::io(path, e))?,
            buf: Vec::with_capacity((WRITE_RECORDS + 1) * RECORD),
            at: 0,
            open: false,
            nsrc: 0,
            ndst: 0,
            last_ip: 0,
            records: 0,
            dropped: 0,
        })
    }

    /// Closes the record being filled (it stays in the buffer).
    fn close_record(&mut self) {
        if self.open {
            self.records += 1;
            self.open = false;
            self.at = self.buf.len();
        }
    }

    fn start(&mut self, ip: u64) {
        self.close_record();
        self.at = self.buf.len();
        self.buf.resize(self.at + RECORD, 0);
        self.buf[self.at..self.at + 8].copy_from_slice(&ip.to_le_bytes());
        self.last_ip = ip;
        self.open = true;
        self.nsrc = 0;
        self.ndst = 0;
    }

    #[inline]
    fn put(&mut self, field: usize, va: u64) {
        let at = self.at + field;
        self.buf[at..at + 8].copy_from_slice(&va.to_le_bytes());
    }

    /// Puts one event into the buffer.
    #[inline]
    fn encode(&mut self, e: &Event) {
        let Event::Ref(r) = e else {
            self.dropped += 1;
            return;
        };
        let va = r.va.raw();
        if r.kind == AccessKind::Fetch {
            return self.start(va);
        }
        let (loads, stores) = match r.kind {
            AccessKind::Load => (1, 0),
            AccessKind::Store => (0, 1),
            _ => (1, 1),
        };
        if !self.open || self.nsrc + loads > 4 || self.ndst + stores > 2 {
            self.start(self.last_ip);
        }
        if loads == 1 {
            self.put(32 + 8 * self.nsrc, va);
            self.nsrc += 1;
        }
        if stores == 1 {
            self.put(16 + 8 * self.ndst, va);
            self.ndst += 1;
        }
    }

    /// Appends one event.
    pub fn write(&mut self, e: &Event) -> Result<()> {
        self.encode(e);
        if self.at >= WRITE_RECORDS * RECORD {
            self.write_out()?;
        }
        Ok(())
    }

    /// Appends events in order.
    pub fn write_batch(&mut self, es: &[Event]) -> Result<()> {
        es.iter().try_for_each(|e| self.write(e))
    }

    /// Writes the complete records out, keeping the one being filled.
    fn write_out(&mut self) -> Result<()> {
        let mut next = self
            .out
            .spare()
            .unwrap_or_else(|| Vec::with_capacity((WRITE_RECORDS + 1) * RECORD));
        next.extend_from_slice(&self.buf[self.at..]);
        let mut full = std::mem::replace(&mut self.buf, next);
        full.truncate(self.at);
        self.at = 0;
        self.out.submit(full).map_err(|e| Error::io(&self.path, e))
    }

    /// Records written so far (the one being filled not included).
    pub fn records_written(&self) -> u64 {
        self.records
    }

    /// Non-reference events dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Writes the last record and finishes the compression; returns the records written and
    /// the read-back state.
    pub fn finish(mut self) -> Result<(u64, S)> {
        self.close_record();
        self.write_out()?;
        let rb = self.out.finish().map_err(|e| Error::io(&self.path, e))?;
        Ok((self.records, rb.state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn record(ip: u64, dst: [u64; 2], src: [u64; 4]) -> Vec<u8> {
        let mut r = vec![0u8; RECORD];
        r[..8].copy_from_slice(&ip.to_le_bytes());
        for (i, d) in dst.iter().enumerate() {
            r[16 + 8 * i..24 + 8 * i].copy_from_slice(&d.to_le_bytes());
        }
        for (i, s) in src.iter().enumerate() {
            r[32 + 8 * i..40 + 8 * i].copy_from_slice(&s.to_le_bytes());
        }
        r
    }

    fn tmp(name: &str) -> String {
        std::env::temp_dir()
            .join(format!("vmmu-champsim-{name}-{}", std::process::id()))
            .display()
            .to_string()
    }

    fn read_all(path: &str) -> Vec<Event> {
        let mut r = ChampSimReader::open(path).unwrap();
        let mut v = Vec::new();
        while r.next_batch(&mut v, 100).unwrap() > 0 {}
        v
    }

    fn mr(va: u64, kind: AccessKind) -> Event {
        Event::Ref(MemRef {
            va: Gva::new(va),
            kind,
            size: if kind == AccessKind::Fetch { 4 } else { 8 },
            instrs: (kind == AccessKind::Fetch) as u32,
            dep: 0,
        })
    }

    #[test]
    fn records_become_a_fetch_then_loads_then_stores_and_read_write_is_modify() {
        let mut bytes = record(0x401000, [0x7000, 0], [0x6000, 0x6000, 0, 0]);
        bytes.extend(record(0x401004, [0x8000, 0x9000], [0x9000, 0, 0, 0]));
        let expect = vec![
            mr(0x401000, AccessKind::Fetch),
            mr(0x6000, AccessKind::Load),
            mr(0x7000, AccessKind::Store),
            mr(0x401004, AccessKind::Fetch),
            mr(0x9000, AccessKind::Modify),
            mr(0x8000, AccessKind::Store),
        ];
        for (ext, compress) in [("plain", 0), ("gz", 1), ("xz", 2)] {
            let p = tmp(ext);
            let data = match compress {
                0 => bytes.clone(),
                1 => {
                    let mut e =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                    e.write_all(&bytes).unwrap();
                    e.finish().unwrap()
                }
                _ => {
                    let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
                    e.write_all(&bytes).unwrap();
                    e.finish().unwrap()
                }
            };
            std::fs::write(&p, data).unwrap();
            assert!(sniff_champsim(&p).unwrap(), "{ext}");
            assert_eq!(read_all(&p), expect, "{ext}");
            let _ = std::fs::remove_file(&p);
        }
    }

    /// A record with registers: (destination registers, source registers).
    fn with_regs(ip: u64, regs: ([u8; 2], [u8; 4]), dst: [u64; 2], src: [u64; 4]) -> Vec<u8> {
        let mut r = record(ip, dst, src);
        r[10..12].copy_from_slice(&regs.0);
        r[12..16].copy_from_slice(&regs.1);
        r
    }

    #[test]
    fn register_dataflow_gives_each_reference_its_dependence() {
        const RAX: u8 = 10;
        const RBX: u8 = 7;
        const RCX: u8 = 9;
        const RDX: u8 = 8;
        const RSI: u8 = 4;
        const RDI: u8 = 3;
        const R8: u8 = 11;
        const R9: u8 = 12;
        const SP: u8 = REG_STACK_POINTER;
        const FL: u8 = REG_FLAGS;
        const IP: u8 = REG_INSTRUCTION_POINTER;
        let load = |dst: [u8; 2], srcs: [u8; 4], a: u64| {
            with_regs(0x401000, (dst, srcs), [0, 0], [a, 0, 0, 0])
        };
        let mut t = Vec::new();
        let mut expect: Vec<u8> = Vec::new();
        let mut push = |r: Vec<u8>, dep: u8| {
            t.extend(r);
            expect.push(dep);
        };
        push(load([RAX, 0], [IP, 0, 0, 0], 0x1000), 0); // mov rax, [rip+x]
        push(load([RBX, 0], [RAX, 0, 0, 0], 0x2000), 1); // mov rbx, [rax]
        push(load([RCX, 0], [SP, 0, 0, 0], 0x7ff0), 0); // mov rcx, [rsp+8]
                                                        // mov [rbx], rdx: the store's address came from the load two references back.
        push(
            with_regs(0x401000, ([0, 0], [RBX, RDX, 0, 0]), [0x3000, 0], [0; 4]),
            2,
        );
        push(load([RSI, SP], [SP, 0, 0, 0], 0x7ff8), 0); // pop rsi: rsp is not the load's
        push(load([RDI, 0], [SP, 0, 0, 0], 0x7ff8), 0); // mov rdi, [rsp]
                                                        // cmp rax, [x]: the record cannot tell rax is data, so the load depends on it.
        push(load([FL, 0], [RAX, IP, 0, 0], 0x4000), 6);
        // cmovz rdi, [y]: flags never form an address; rdi takes the load (and flags).
        push(load([RDI, 0], [FL, 0, 0, 0], 0x5000), 0);
        push(load([R8, 0], [RDI, 0, 0, 0], 0x5008), 1); // mov r8d, [rdi]
                                                        // jmp [rbx]: dependent; the instruction pointer it writes carries no tag.
        push(load([IP, 0], [RBX, IP, 0, 0], 0x6000), 8);
        push(load([RAX, 0], [IP, 0, 0, 0], 0x7000), 0); // mov rax, [rip+z]
        push(load([R9, 0], [0; 4], 0x8000), 0); // mov r9, [abs]
        for _ in 0..254 {
            push(load([0, 0], [0; 4], 0x9000), 0);
        }
        push(load([RAX, 0], [R9, 0, 0, 0], 0xa000), 255); // 255 back: kept
        push(load([RAX, 0], [R9, 0, 0, 0], 0xa008), 0); // 256 back: beyond reach
                                                        // add [rbx], rax: one modify, its address from the load just before (through rax).
        push(
            with_regs(
                0x401000,
                ([FL, 0], [RBX, RAX, 0, 0]),
                [0xb000, 0],
                [0xb000, 0, 0, 0],
            ),
            1,
        );
        let p = tmp("regs");
        std::fs::write(&p, &t).unwrap();
        let mut reader = ChampSimReader::open(&p).unwrap();
        assert!(reader.tracks_dependences());
        let mut ev = Vec::new();
        while reader.next_batch(&mut ev, 100).unwrap() > 0 {}
        let got: Vec<u8> = ev
            .iter()
            .filter_map(|e| match e {
                Event::Ref(r) if !r.kind.is_fetch() => Some(r.dep),
                _ => None,
            })
            .collect();
        assert_eq!(got, expect);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn a_trace_cut_inside_a_record_names_the_offset() {
        let p = tmp("cut");
        let mut bytes = record(0x401000, [0, 0], [0; 4]);
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&p, bytes).unwrap();
        let mut r = ChampSimReader::open(&p).unwrap();
        let err = r.next_batch(&mut Vec::new(), 100).unwrap_err().to_string();
        assert!(err.contains("byte offset 64"), "{err}");
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn text_is_not_champsim() {
        let p = tmp("text");
        std::fs::write(&p, "I  04020ca1,2\n L 1ffefff8c0,8\n".repeat(20)).unwrap();
        assert!(!sniff_champsim(&p).unwrap());
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn writing_then_reading_keeps_the_references() {
        let events = vec![
            mr(0x401000, AccessKind::Fetch),
            mr(0x6000, AccessKind::Load),
            mr(0x7000, AccessKind::Store),
            mr(0x401004, AccessKind::Fetch),
            mr(0x9000, AccessKind::Modify),
            Event::mmap(
                Gva::new(0x1000),
                0x1000,
                crate::event::Prot::RW,
                crate::event::MapFlags(0),
            ),
        ];
        let p = format!("{}.xz", tmp("w"));
        let mut w = ChampSimWriter::create(&p).unwrap();
        for e in &events {
            w.write(e).unwrap();
        }
        assert_eq!(w.dropped(), 1);
        assert_eq!(w.finish().unwrap().0, 2);
        assert_eq!(read_all(&p), events[..5].to_vec());
        let _ = std::fs::remove_file(&p);
    }
}
