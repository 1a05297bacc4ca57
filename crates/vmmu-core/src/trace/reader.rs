//! [`VtraceReader`]: streams a `.vtrace` file, one chunk in memory at a time.
//!
//! Each chunk is checked before any of its events is handed out: header checksum, lengths,
//! zstd frame, XXH64 of the raw bytes, then every record. A problem is an
//! [`Error::TraceCorrupt`] naming the byte offset in the file of the structure found bad (the
//! header field, or the chunk's first byte). A file that ends cleanly after a chunk, without a
//! footer, is a trace whose writer was killed: it reads to its end and then reports
//! [`is_truncated`](VtraceReader::is_truncated).
//!
//! The header is read by [`VtraceReader::open`]; the chunks by two threads started at the
//! first [`next_batch`](EventSource::next_batch), a pipeline beside the consumer (the
//! simulator): the *loader* reads each chunk, decompresses it and checks it; the *decoder*
//! turns its records into batches of events. Bounded queues join them (two raw chunks,
//! sixteen batches), and buffers travel back for reuse, so memory stays the same whatever the
//! trace's length and nothing is allocated per chunk once the pipeline is full. A batch that
//! fits the caller's request is handed over by swapping buffers, not copied. Events, errors
//! and the end arrive in file order, so the consumer sees exactly what a reader on its own
//! thread would: the events before a damaged chunk, then the error naming it.

use super::codec::{Counts, Decoder, PAD};
use super::format::{
    ChunkHeader, Footer, CHUNK_HEADER_LEN, CHUNK_MAGIC, FLAG_DEPENDENCES, FLAG_OS_EVENTS,
    FOOTER_LEN, FOOTER_MAGIC, HEADER_FIXED, KNOWN_FLAGS, MAGIC, MAX_META, STATUS_TRUNCATED,
    VERSION,
};
use super::hash::{xxh32_of64, xxh64};
use super::TraceMeta;
use crate::error::{Error, Result};
use crate::event::{Event, EventSource};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use zstd::bulk::Decompressor;

/// A streaming reader of `.vtrace` files.
pub struct VtraceReader {
    path: String,
    version: u16,
    flags: u16,
    meta: TraceMeta,
    len_hint: Option<u64>,
    state: State,
}

/// Where a reader is in its file.
enum State {
    /// Header read; `file` is positioned at the first chunk, at file offset `offset`.
    Open { file: File, offset: u64 },
    /// The pipeline runs.
    Running(Pipeline),
    /// The end was reached: the footer, if the file has one.
    Ended(Option<Footer>),
    /// An error was returned; nothing more is read.
    Failed,
}

/// Events per batch from the decoder: what the simulator asks for.
const BATCH: usize = crate::event::BATCH_EVENTS;
/// Raw chunks queued between loader and decoder.
const RAW_QUEUE: usize = 2;
/// Event batches queued between decoder and consumer: enough for the consumer to go on while
/// the loader holds a shared core for one chunk's decompression. A chunk of the writer's 2 MiB
/// holds about 840 K references of a recorded program (2.5 raw bytes each), which zstd
/// decompresses in about 2.7 ms; the simulator takes about 10 ns per reference of such a
/// trace, so it uses up about 16 batches of 16 Ki events in that time (docs/performance.md,
/// "The trace reader's threads").
const EVENT_QUEUE: usize = 16;

/// What the decoder hands the consumer, in file order.
enum Msg {
    Events(Vec<Event>),
    End(Option<Footer>),
    Failed(Error),
}

/// What the loader hands the decoder, in file order.
enum Loaded {
    /// A checked chunk: raw bytes (`len` of them, then at least [`PAD`]), its event count and
    /// its file offset.
    Chunk {
        raw: Vec<u8>,
        len: usize,
        events: u32,
        offset: u64,
    },
    /// The footer at file offset `at`; `trailing` is the offset of bytes after it, if any.
    Footer {
        footer: Footer,
        at: u64,
        trailing: Option<u64>,
    },
    /// The file ended after a chunk, without a footer.
    Eof,
    Failed(Error),
}

/// The consumer's side of the pipeline.
struct Pipeline {
    rx: Receiver<Msg>,
    /// Emptied event buffers back to the decoder.
    recycle: Sender<Vec<Event>>,
    /// The batch being handed out, from `pos`.
    cur: Vec<Event>,
    pos: usize,
    /// Tells both threads to stop (set when the reader is dropped).
    stop: Arc<AtomicBool>,
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // The threads also stop at their next send, which fails once `rx` is gone.
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn corrupt(path: &str, offset: u64, reason: impl Into<String>) -> Error {
    Error::TraceCorrupt {
        path: path.to_string(),
        offset,
        reason: reason.into(),
    }
}

impl VtraceReader {
    /// Opens `path` and reads its header.
    pub fn open(path: &str) -> Result<VtraceReader> {
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        let corrupt = |offset: u64, reason: String| Error::TraceCorrupt {
            path: path.to_string(),
            offset,
            reason,
        };
        let mut fixed = [0u8; HEADER_FIXED];
        let got = read_full(&mut file, &mut fixed).map_err(|e| Error::io(path, e))?;
        let have = &fixed[..got];
        // The first incomplete or wrong field names the offset.
        if have.len() < 8 || have[..8] != MAGIC {
            if MAGIC.starts_with(have) {
                return Err(corrupt(0, format!("the header is truncated: the file has {got} bytes, the magic alone takes 8")));
            }
            return Err(corrupt(0, "not a vtrace file (bad magic)".into()));
        }
        if got < HEADER_FIXED {
            let field = if got < 10 {
                8
            } else if got < 12 {
                10
            } else {
                12
            };
            return Err(corrupt(
                field,
                format!("the header is truncated: the file ends at byte {got}"),
            ));
        }
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        if version == 0 || version > VERSION {
            return Err(corrupt(8, format!("format version {version}; this vmmu reads versions 1..={VERSION} (a newer vmmu wrote it?)")));
        }
        let flags = u16::from_le_bytes([fixed[10], fixed[11]]);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(corrupt(10, format!("unknown header flags {flags:#06x}")));
        }
        let meta_len = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes"));
        if meta_len > MAX_META {
            return Err(corrupt(
                12,
                format!("metadata length {meta_len} exceeds the limit of {MAX_META} bytes"),
            ));
        }
        let mut header = fixed.to_vec();
        header.resize(HEADER_FIXED + meta_len as usize + 4, 0);
        let got =
            read_full(&mut file, &mut header[HEADER_FIXED..]).map_err(|e| Error::io(path, e))?;
        if got < meta_len as usize {
            return Err(corrupt(HEADER_FIXED as u64, format!("the header is truncated: {meta_len} bytes of metadata announced, {got} present")));
        }
        let meta_end = HEADER_FIXED + meta_len as usize;
        if got < meta_len as usize + 4 {
            return Err(corrupt(
                meta_end as u64,
                "the header is truncated inside its checksum".into(),
            ));
        }
        let check = u32::from_le_bytes(header[meta_end..].try_into().expect("4 bytes"));
        if xxh32_of64(&header[..meta_end]) != check {
            return Err(corrupt(meta_end as u64, "header checksum mismatch".into()));
        }
        let mut meta: TraceMeta =
            serde_json::from_slice(&header[HEADER_FIXED..meta_end]).map_err(|e| {
                corrupt(
                    HEADER_FIXED as u64,
                    format!("metadata is not valid JSON: {e}"),
                )
            })?;
        meta.has_os_events |= flags & FLAG_OS_EVENTS != 0;
        meta.dependences = flags & FLAG_DEPENDENCES != 0;
        let offset = header.len() as u64;
        let len_hint = peek_footer(&mut file, offset).map(|f| f.events);
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(path, e))?;
        Ok(VtraceReader {
            path: path.to_string(),
            version,
            flags,
            meta,
            len_hint,
            state: State::Open { file, offset },
        })
    }

    /// The format version of the file.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The header's flags (bit 0: OS events declared; bit 1: dependences tracked).
    pub fn flags(&self) -> u16 {
        self.flags
    }

    /// The metadata of the header. `has_os_events` is also set once a footer has counted any.
    pub fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    /// Whether the trace is known to end early: once the stream has ended, true when the file
    /// has no footer (the writer was killed) or its footer says the recorded program did not
    /// finish. False before the end.
    pub fn is_truncated(&self) -> bool {
        match &self.state {
            State::Ended(footer) => footer.is_none_or(|f| f.status == STATUS_TRUNCATED),
            _ => false,
        }
    }

    /// Starts the loader and decoder threads on the chunks of `file` from `offset`.
    fn start(&self, file: File, offset: u64) -> Result<Pipeline> {
        let dctx = Decompressor::new().map_err(|e| Error::io(&self.path, e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (raw_tx, raw_rx) = mpsc::sync_channel(RAW_QUEUE);
        let (raw_back_tx, raw_back_rx) = mpsc::channel();
        let (ev_tx, ev_rx) = mpsc::sync_channel(EVENT_QUEUE);
        let (ev_back_tx, ev_back_rx) = mpsc::channel();
        let loader = Loader {
            path: self.path.clone(),
            file,
            offset,
            comp: Vec::new(),
            dctx,
            out: raw_tx,
            back: raw_back_rx,
            stop: stop.clone(),
        };
        let decoder = DecodeStage {
            path: self.path.clone(),
            input: raw_rx,
            raw_back: raw_back_tx,
            out: ev_tx,
            back: ev_back_rx,
            spare: Vec::with_capacity(EVENT_QUEUE + 2),
            decoder: Decoder::new(self.version),
            counts: Counts::default(),
            events: 0,
            chunks: 0,
            stop: stop.clone(),
        };
        let spawn = |name: &str| std::thread::Builder::new().name(name.to_string());
        spawn("vtrace-load")
            .spawn(move || loader.run())
            .map_err(|e| Error::io(&self.path, e))?;
        spawn("vtrace-decode")
            .spawn(move || decoder.run())
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(Pipeline {
            rx: ev_rx,
            recycle: ev_back_tx,
            cur: Vec::new(),
            pos: 0,
            stop,
        })
    }
}

/// The loader thread: reads, decompresses and checks chunks, in file order.
struct Loader {
    path: String,
    file: File,
    /// File offset of the next chunk (or footer).
    offset: u64,
    comp: Vec<u8>,
    dctx: Decompressor<'static>,
    out: SyncSender<Loaded>,
    /// Raw buffers the decoder is done with.
    back: Receiver<Vec<u8>>,
    stop: Arc<AtomicBool>,
}

impl Loader {
    fn run(mut self) {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let item = self.load().unwrap_or_else(Loaded::Failed);
            let last = !matches!(item, Loaded::Chunk { .. });
            if self.out.send(item).is_err() || last {
                return;
            }
        }
    }

    fn corrupt(&self, offset: u64, reason: impl Into<String>) -> Error {
        corrupt(&self.path, offset, reason)
    }

    /// The next chunk, the footer, or the end of the file.
    fn load(&mut self) -> Result<Loaded> {
        let at = self.offset;
        let mut head = [0u8; CHUNK_HEADER_LEN];
        let got =
            read_full(&mut self.file, &mut head[..4]).map_err(|e| Error::io(&self.path, e))?;
        if got == 0 {
            return Ok(Loaded::Eof);
        }
        if got == 4 && head[..4] == FOOTER_MAGIC {
            return self.read_footer(at);
        }
        if got < 4 || head[..4] != CHUNK_MAGIC {
            return Err(self.corrupt(
                at,
                format!(
                    "expected a chunk (`VTCK`) or the footer (`VTFT`), found {:02x?}",
                    &head[..got]
                ),
            ));
        }
        let got =
            read_full(&mut self.file, &mut head[4..]).map_err(|e| Error::io(&self.path, e))?;
        if got < CHUNK_HEADER_LEN - 4 {
            return Err(self.corrupt(
                at,
                "the file ends inside a chunk header (the trace was cut)",
            ));
        }
        let h = ChunkHeader::parse(&head).map_err(|r| self.corrupt(at, r))?;
        self.comp.resize(h.comp_len as usize, 0);
        let got =
            read_full(&mut self.file, &mut self.comp).map_err(|e| Error::io(&self.path, e))?;
        if got < h.comp_len as usize {
            return Err(self.corrupt(at, format!("the file ends inside a chunk: {} compressed bytes announced, {got} present (the trace was cut)", h.comp_len)));
        }
        let raw_len = h.raw_len as usize;
        let mut raw = self.back.try_recv().unwrap_or_default();
        if raw.len() < raw_len + PAD {
            raw.resize(raw_len + PAD, 0);
        }
        let n = self
            .dctx
            .decompress_to_buffer(&self.comp, &mut raw[..raw_len])
            .map_err(|e| {
                self.corrupt(
                    at,
                    format!("the chunk's zstd frame does not decompress: {e}"),
                )
            })?;
        if n != raw_len {
            return Err(self.corrupt(
                at,
                format!("the chunk decompresses to {n} bytes, its header says {raw_len}"),
            ));
        }
        if xxh64(&raw[..raw_len]) != h.raw_hash {
            return Err(self.corrupt(at, "checksum mismatch in the chunk's data"));
        }
        self.offset = at + (CHUNK_HEADER_LEN + h.comp_len as usize) as u64;
        Ok(Loaded::Chunk {
            raw,
            len: raw_len,
            events: h.events,
            offset: at,
        })
    }

    fn read_footer(&mut self, at: u64) -> Result<Loaded> {
        let mut b = [0u8; FOOTER_LEN];
        b[..4].copy_from_slice(&FOOTER_MAGIC);
        let got = read_full(&mut self.file, &mut b[4..]).map_err(|e| Error::io(&self.path, e))?;
        if got < FOOTER_LEN - 4 {
            return Err(self.corrupt(at, "the file ends inside the footer"));
        }
        let footer = Footer::parse(&b).map_err(|r| self.corrupt(at, r))?;
        let end = at + FOOTER_LEN as u64;
        let mut extra = [0u8; 1];
        let more = read_full(&mut self.file, &mut extra).map_err(|e| Error::io(&self.path, e))?;
        Ok(Loaded::Footer {
            footer,
            at,
            trailing: (more > 0).then_some(end),
        })
    }
}

/// The decoder thread: turns checked chunks into batches of events and checks the footer's
/// totals against what it decoded.
struct DecodeStage {
    path: String,
    input: Receiver<Loaded>,
    raw_back: Sender<Vec<u8>>,
    out: SyncSender<Msg>,
    /// Event buffers the consumer is done with.
    back: Receiver<Vec<Event>>,
    /// Returned buffers not yet reused, the most recently returned last: reusing it first
    /// keeps the buffers written in the host's caches few when the queue runs nearly empty.
    spare: Vec<Vec<Event>>,
    decoder: Decoder,
    counts: Counts,
    /// Events and chunks decoded so far.
    events: u64,
    chunks: u64,
    stop: Arc<AtomicBool>,
}

impl DecodeStage {
    fn run(mut self) {
        while let Ok(item) = self.input.recv() {
            let msg = match item {
                Loaded::Chunk {
                    raw,
                    len,
                    events,
                    offset,
                } => match self.chunk(&raw, len, events, offset) {
                    Ok(()) => {
                        let _ = self.raw_back.send(raw);
                        continue;
                    }
                    Err(e) => Msg::Failed(e),
                },
                Loaded::Footer {
                    footer,
                    at,
                    trailing,
                } => match self.check_footer(footer, at, trailing) {
                    Ok(()) => Msg::End(Some(footer)),
                    Err(e) => Msg::Failed(e),
                },
                Loaded::Eof => Msg::End(None),
                Loaded::Failed(e) => Msg::Failed(e),
            };
            let _ = self.out.send(msg);
            return;
        }
    }

    /// Decodes the `events` records of one chunk into batches sent on; an error (with the
    /// events decoded before it sent first) stops the stage.
    fn chunk(&mut self, raw: &[u8], len: usize, events: u32, offset: u64) -> Result<()> {
        self.decoder.reset();
        self.chunks += 1;
        let mut pos = 0;
        let mut left = events as usize;
        while left > 0 {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            self.spare.extend(self.back.try_iter());
            let mut batch = self.spare.pop().unwrap_or_default();
            batch.clear();
            let n = left.min(BATCH);
            let res = self
                .decoder
                .decode(raw, len, &mut pos, &mut batch, n, &mut self.counts);
            self.events += batch.len() as u64;
            left -= n;
            let decoded = !batch.is_empty();
            if decoded && self.out.send(Msg::Events(batch)).is_err() {
                return Ok(());
            }
            if let Err(e) = res {
                let reason = format!("record at byte {} of the chunk's data: {}", e.at, e.reason);
                return Err(corrupt(&self.path, offset, reason));
            }
        }
        if pos != len {
            return Err(corrupt(
                &self.path,
                offset,
                format!(
                    "{} bytes left over after the chunk's last record",
                    len - pos
                ),
            ));
        }
        Ok(())
    }

    fn check_footer(&self, f: Footer, at: u64, trailing: Option<u64>) -> Result<()> {
        let seen = [
            ("events", f.events, self.events),
            ("references", f.refs, self.counts.refs),
            ("instructions", f.instructions, self.counts.instructions),
            ("OS events", f.os_events, self.counts.os_events),
            ("chunks", f.chunks, self.chunks),
        ];
        if let Some((what, footer, seen)) = seen.into_iter().find(|(_, a, b)| a != b) {
            return Err(corrupt(
                &self.path,
                at,
                format!("the footer counts {footer} {what}, the chunks hold {seen}"),
            ));
        }
        match trailing {
            Some(end) => Err(corrupt(
                &self.path,
                end,
                "unexpected bytes after the footer",
            )),
            None => Ok(()),
        }
    }
}

/// The footer's totals if the file ends with a valid one (for `len_hint`); `None` otherwise.
fn peek_footer(file: &mut File, data_start: u64) -> Option<Footer> {
    let len = file.seek(SeekFrom::End(0)).ok()?;
    if len < data_start + FOOTER_LEN as u64 {
        return None;
    }
    file.seek(SeekFrom::Start(len - FOOTER_LEN as u64)).ok()?;
    let mut b = [0u8; FOOTER_LEN];
    file.read_exact(&mut b).ok()?;
    if b[..4] != FOOTER_MAGIC {
        return None;
    }
    Footer::parse(&b).ok()
}

impl EventSource for VtraceReader {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        if let State::Open { .. } = self.state {
            let State::Open { file, offset } = std::mem::replace(&mut self.state, State::Failed)
            else {
                unreachable!("matched above")
            };
            self.state = State::Running(self.start(file, offset)?);
        }
        let State::Running(p) = &mut self.state else {
            return Ok(0);
        };
        if max == 0 {
            return Ok(0);
        }
        if p.pos == p.cur.len() {
            let next = p.rx.recv().unwrap_or_else(|_| {
                Msg::Failed(corrupt(&self.path, 0, "the trace reader's threads stopped"))
            });
            match next {
                Msg::Events(batch) => {
                    let done = std::mem::replace(&mut p.cur, batch);
                    let _ = p.recycle.send(done);
                    p.pos = 0;
                }
                Msg::End(footer) => {
                    if let Some(f) = footer {
                        self.meta.has_os_events |= f.os_events > 0;
                    }
                    self.state = State::Ended(footer);
                    return Ok(0);
                }
                Msg::Failed(e) => {
                    self.state = State::Failed;
                    return Err(e);
                }
            }
        }
        let n = (p.cur.len() - p.pos).min(max);
        if buf.is_empty() && p.pos == 0 && n == p.cur.len() {
            // The whole batch: hand the buffer over and keep the caller's for the decoder.
            std::mem::swap(buf, &mut p.cur);
            p.cur.clear();
        } else {
            buf.extend_from_slice(&p.cur[p.pos..p.pos + n]);
            p.pos += n;
            return Ok(n);
        }
        Ok(n)
    }

    fn len_hint(&self) -> Option<u64> {
        self.len_hint
    }

    fn describe(&self) -> String {
        self.path.clone()
    }

    fn tracks_dependences(&self) -> bool {
        self.meta.dependences
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::{FLAG_DEPENDENCES, HEADER_FIXED};
    use super::super::writer::TraceWriter;
    use super::*;
    use crate::addr::Gva;
    use crate::event::{AccessKind, MemRef};

    /// A scratch file in the system's temporary directory; each test removes its own.
    fn tmp(name: &str) -> String {
        let file = format!("vmmu-reader-{}-{name}", std::process::id());
        std::env::temp_dir()
            .join(file)
            .to_str()
            .unwrap()
            .to_string()
    }

    fn drain(r: &mut VtraceReader) -> Result<Vec<Event>> {
        let mut out = Vec::new();
        while r.next_batch(&mut out, 1000)? > 0 {}
        Ok(out)
    }

    /// Writes `events` and rewrites the header as version 1 with its checksum.
    fn as_version_1(name: &str, events: &[Event]) -> String {
        let path = tmp(name);
        let mut w = TraceWriter::create(&path, TraceMeta::default()).unwrap();
        w.write_batch(events).unwrap();
        w.finish().unwrap();
        let mut b = std::fs::read(&path).unwrap();
        b[8..10].copy_from_slice(&1u16.to_le_bytes());
        let meta_len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
        let end = HEADER_FIXED + meta_len;
        let check = xxh32_of64(&b[..end]);
        b[end..end + 4].copy_from_slice(&check.to_le_bytes());
        std::fs::write(&path, b).unwrap();
        path
    }

    fn load(va: u64, dep: u8) -> Event {
        Event::Ref(MemRef {
            va: Gva::new(va),
            kind: AccessKind::Load,
            size: 8,
            instrs: 1,
            dep,
        })
    }

    #[test]
    fn a_version_1_file_reads_with_its_dependences_unknown() {
        let events: Vec<Event> = (0..100).map(|i| load(0x1000 + 64 * i, 0)).collect();
        let path = as_version_1("v1.vtrace", &events);
        let mut r = VtraceReader::open(&path).unwrap();
        assert_eq!(r.version(), 1);
        assert!(!r.tracks_dependences());
        assert_eq!(drain(&mut r).unwrap(), events);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_version_1_file_with_an_extended_reference_is_corrupt() {
        let path = as_version_1("v1-ext.vtrace", &[load(0x1000, 0), load(0x2000, 1)]);
        let mut r = VtraceReader::open(&path).unwrap();
        let err = drain(&mut r).unwrap_err().to_string();
        assert!(err.contains("version 1"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_dependence_flag_is_the_producers_declaration() {
        for declared in [false, true] {
            let path = tmp(&format!("deps-{declared}.vtrace"));
            let meta = TraceMeta {
                dependences: declared,
                ..TraceMeta::default()
            };
            let mut w = TraceWriter::create(&path, meta).unwrap();
            w.write(&load(0x1000, 1)).unwrap();
            w.finish().unwrap();
            let mut r = VtraceReader::open(&path).unwrap();
            assert_eq!(r.version(), VERSION);
            assert_eq!(r.flags() & FLAG_DEPENDENCES != 0, declared);
            assert_eq!(r.tracks_dependences(), declared);
            assert_eq!(drain(&mut r).unwrap(), [load(0x1000, 1)]);
            std::fs::remove_file(&path).unwrap();
        }
    }
}
