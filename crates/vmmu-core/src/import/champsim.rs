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
//! Writing goes the other way: each fetch starts a record, and the data references that
//! follow fill its sources and destinations (a modify is both); references beyond 4 loads or
//! 2 stores, or with no fetch before them, start records of their own at the previous `ip`.

use crate::addr::Gva;
use crate::error::{Error, Result};
use crate::event::{AccessKind, Event, EventSource, MemRef};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};

/// Bytes of one `input_instr` record.
pub const RECORD: usize = 64;
/// Size given to an imported instruction fetch.
pub const FETCH_SIZE: u8 = 4;
/// Size given to an imported load or store.
pub const DATA_SIZE: u8 = 8;

const XZ_MAGIC: &[u8] = &[0xFD, b'7', b'z', b'X', b'Z', 0x00];
const GZ_MAGIC: &[u8] = &[0x1F, 0x8B];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xB5, 0x2F, 0xFD];

/// The decompressed bytes of `path`, by its first bytes: xz, gzip, zstd or plain.
fn open_bytes(path: &str) -> Result<(Box<dyn Read + Send>, &'static str)> {
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut head = [0u8; 6];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    let raw = BufReader::with_capacity(1 << 20, std::io::Cursor::new(head[..n].to_vec()).chain(f));
    let head = &head[..n];
    Ok(if head.starts_with(XZ_MAGIC) {
        (Box::new(xz2::read::XzDecoder::new_multi_decoder(raw)), "xz")
    } else if head.starts_with(GZ_MAGIC) {
        (Box::new(flate2::read::MultiGzDecoder::new(raw)), "gzip")
    } else if head.starts_with(ZSTD_MAGIC) {
        let d = zstd::stream::read::Decoder::with_buffer(raw).map_err(|e| Error::io(path, e))?;
        (Box::new(d), "zstd")
    } else {
        (Box::new(raw), "none")
    })
}

/// Reads a ChampSim trace as events.
pub struct ChampSimReader {
    path: String,
    input: Box<dyn Read + Send>,
    compression: &'static str,
    /// Decompressed bytes consumed (the offset named in errors).
    offset: u64,
    buf: Vec<u8>,
    records: u64,
}

/// Records read from the decompressed stream at a time.
const READ_RECORDS: usize = 4096;

impl ChampSimReader {
    /// Opens `path` (xz, gzip, zstd or uncompressed, told apart by the first bytes).
    pub fn open(path: &str) -> Result<ChampSimReader> {
        let (input, compression) = open_bytes(path)?;
        Ok(ChampSimReader {
            path: path.to_string(),
            input,
            compression,
            offset: 0,
            buf: vec![0u8; READ_RECORDS * RECORD],
            records: 0,
        })
    }

    /// `xz`, `gzip`, `zstd` or `none`.
    pub fn compression(&self) -> &'static str {
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
                        reason: format!("cannot decompress ({}): {e}", self.compression),
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

/// The events of one record, appended to `out`.
#[inline]
fn record_events(r: &[u8], out: &mut Vec<Event>) {
    let word = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().expect("8 bytes"));
    out.push(Event::Ref(MemRef {
        va: Gva(word(0)),
        kind: AccessKind::Fetch,
        size: FETCH_SIZE,
        instrs: 1,
    }));
    let dst = [word(16), word(24)];
    let src = [word(32), word(40), word(48), word(56)];
    let data = |va: u64, kind| {
        Event::Ref(MemRef {
            va: Gva(va),
            kind,
            size: DATA_SIZE,
            instrs: 0,
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
}

impl EventSource for ChampSimReader {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        // A record makes at most 7 events.
        let want = (max / 7).clamp(1, READ_RECORDS);
        let start = buf.len();
        let got = self.fill(want)?;
        for r in self.buf[..got].chunks_exact(RECORD) {
            record_events(r, buf);
        }
        self.offset += got as u64;
        self.records += (got / RECORD) as u64;
        Ok(buf.len() - start)
    }

    fn describe(&self) -> String {
        format!("champsim {}", self.path)
    }
}

/// Opens a ChampSim trace as an event stream (for `trace::open` and `vmmu trace convert`).
pub fn open_champsim(path: &str) -> Result<Box<dyn EventSource>> {
    Ok(Box::new(ChampSimReader::open(path)?))
}

/// Whether `path` looks like a ChampSim trace: after decompression, its first records (up to
/// 16) have branch flags of 0 or 1 and user-space addresses. Text (lackey) and `.vtrace`
/// files never pass; an empty file does not either.
pub fn sniff_champsim(path: &str) -> Result<bool> {
    let (mut input, _) = open_bytes(path)?;
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

/// Writes events as a ChampSim trace, compressed as the file name says (`.xz`, `.gz`, else
/// plain). Process and address-space events cannot be expressed and are dropped (counted).
pub struct ChampSimWriter {
    path: String,
    out: Box<dyn Write + Send>,
    rec: [u8; RECORD],
    open: bool,
    nsrc: usize,
    ndst: usize,
    last_ip: u64,
    records: u64,
    dropped: u64,
}

impl ChampSimWriter {
    /// Creates `path`.
    pub fn create(path: &str) -> Result<ChampSimWriter> {
        let f =
            BufWriter::with_capacity(1 << 20, File::create(path).map_err(|e| Error::io(path, e))?);
        let out: Box<dyn Write + Send> = if path.ends_with(".xz") {
            Box::new(xz2::write::XzEncoder::new(f, 6))
        } else if path.ends_with(".gz") {
            Box::new(flate2::write::GzEncoder::new(
                f,
                flate2::Compression::default(),
            ))
        } else {
            Box::new(f)
        };
        Ok(ChampSimWriter {
            path: path.to_string(),
            out,
            rec: [0; RECORD],
            open: false,
            nsrc: 0,
            ndst: 0,
            last_ip: 0,
            records: 0,
            dropped: 0,
        })
    }

    fn emit(&mut self) -> Result<()> {
        if self.open {
            self.out
                .write_all(&self.rec)
                .map_err(|e| Error::io(&self.path, e))?;
            self.records += 1;
            self.open = false;
        }
        Ok(())
    }

    fn start(&mut self, ip: u64) -> Result<()> {
        self.emit()?;
        self.rec = [0; RECORD];
        self.rec[..8].copy_from_slice(&ip.to_le_bytes());
        self.last_ip = ip;
        self.open = true;
        self.nsrc = 0;
        self.ndst = 0;
        Ok(())
    }

    /// Appends one event.
    pub fn write(&mut self, e: &Event) -> Result<()> {
        let Event::Ref(r) = e else {
            self.dropped += 1;
            return Ok(());
        };
        let va = r.va.0;
        if r.kind == AccessKind::Fetch {
            return self.start(va);
        }
        let (loads, stores) = match r.kind {
            AccessKind::Load => (1, 0),
            AccessKind::Store => (0, 1),
            _ => (1, 1),
        };
        if !self.open || self.nsrc + loads > 4 || self.ndst + stores > 2 {
            self.start(self.last_ip)?;
        }
        if loads == 1 {
            let at = 32 + 8 * self.nsrc;
            self.rec[at..at + 8].copy_from_slice(&va.to_le_bytes());
            self.nsrc += 1;
        }
        if stores == 1 {
            let at = 16 + 8 * self.ndst;
            self.rec[at..at + 8].copy_from_slice(&va.to_le_bytes());
            self.ndst += 1;
        }
        Ok(())
    }

    /// Records written so far (the one being filled not included).
    pub fn records_written(&self) -> u64 {
        self.records
    }

    /// Non-reference events dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Writes the last record and finishes the compression.
    pub fn finish(mut self) -> Result<u64> {
        self.emit()?;
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        drop(self.out);
        Ok(self.records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            va: Gva(va),
            kind,
            size: if kind == AccessKind::Fetch { 4 } else { 8 },
            instrs: (kind == AccessKind::Fetch) as u32,
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
            Event::Mmap {
                start: Gva(0x1000),
                len: 0x1000,
                prot: crate::event::Prot::RW,
                flags: crate::event::MapFlags(0),
            },
        ];
        let p = format!("{}.xz", tmp("w"));
        let mut w = ChampSimWriter::create(&p).unwrap();
        for e in &events {
            w.write(e).unwrap();
        }
        assert_eq!(w.dropped(), 1);
        assert_eq!(w.finish().unwrap(), 2);
        assert_eq!(read_all(&p), events[..5].to_vec());
        let _ = std::fs::remove_file(&p);
    }
}
