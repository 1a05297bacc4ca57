//! [`TraceWriter`]: writes events as a `.vtrace` file, chunk by chunk.
//!
//! Events are encoded (module `codec`) into a raw buffer; when it reaches
//! [`WriterOptions::chunk_bytes`] the buffer becomes one zstd frame behind a chunk header. With
//! `threads` > 0, full buffers are compressed by that many background threads and written in
//! order by one more, so encoding (the caller's thread) and compression overlap; each chunk is
//! compressed on its own, so the file is byte-identical whatever the thread count. Memory is
//! bounded: at most about `3 × threads + 2` raw or compressed chunks are in flight.
//!
//! Each chunk is written with a single `write` call, so a writer killed between chunks leaves a
//! file that reads up to its last chunk and reports it truncated (no footer).

use super::codec::{Encoder, MAX_RECORD};
use super::format::{
    header_bytes, ChunkHeader, Footer, CHUNK_HEADER_LEN, FLAGS_OFFSET, FLAG_DEPENDENCES,
    FLAG_OS_EVENTS, HEADER_FIXED, STATUS_COMPLETE, STATUS_TRUNCATED,
};
use super::hash::xxh64;
use super::TraceMeta;
use crate::error::{Error, Result};
use crate::event::Event;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use zstd::bulk::Compressor;

/// How a [`TraceWriter`] compresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterOptions {
    /// zstd level (1 fastest .. 19 smallest; negative levels trade size for more speed).
    pub level: i32,
    /// Background compression threads; 0 compresses on the caller's thread.
    pub threads: usize,
    /// Raw (encoded, uncompressed) bytes per chunk; a reader holds one chunk at a time.
    pub chunk_bytes: usize,
}

impl Default for WriterOptions {
    /// Level 3, one background thread, 2 MiB chunks (docs/traces.md gives the measurements).
    fn default() -> Self {
        WriterOptions {
            level: 3,
            threads: 1,
            chunk_bytes: 2 << 20,
        }
    }
}

/// What a finished trace holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TraceSummary {
    /// Events written.
    pub events: u64,
    /// Memory references among them.
    pub refs: u64,
    /// Bytes of the file.
    pub bytes: u64,
}

/// Writes a `.vtrace` file (docs/traces.md).
///
/// Call [`finish`](TraceWriter::finish) to write the footer; a writer dropped without it writes
/// out the events it holds but no footer, so readers report the trace truncated.
pub struct TraceWriter {
    path: String,
    /// The chunk being gathered: `chunk_bytes + MAX_RECORD` bytes, the first `raw_len` used.
    raw: Vec<u8>,
    raw_len: usize,
    raw_events: u32,
    encoder: Encoder,
    chunk_bytes: usize,
    sink: Option<Sink>,
    header: Vec<u8>,
    declared_os_events: bool,
    totals: Footer,
    bytes: Arc<AtomicU64>,
}

impl TraceWriter {
    /// Creates (or truncates) `path` and writes the header, with the default options.
    pub fn create(path: &str, meta: TraceMeta) -> Result<Self> {
        Self::create_with(path, meta, WriterOptions::default())
    }

    /// [`create`](TraceWriter::create) at zstd level `level`.
    pub fn create_with_level(path: &str, meta: TraceMeta, level: i32) -> Result<Self> {
        Self::create_with(
            path,
            meta,
            WriterOptions {
                level,
                ..WriterOptions::default()
            },
        )
    }

    /// [`create`](TraceWriter::create) with explicit options.
    pub fn create_with(path: &str, meta: TraceMeta, opts: WriterOptions) -> Result<Self> {
        let levels = zstd::compression_level_range();
        if !levels.contains(&opts.level) {
            return Err(Error::config(
                "trace.level",
                format!(
                    "zstd level {} is outside {}..={}",
                    opts.level,
                    levels.start(),
                    levels.end()
                ),
            ));
        }
        if opts.chunk_bytes == 0 || opts.chunk_bytes > (super::format::MAX_RAW as usize) / 2 {
            return Err(Error::config(
                "trace.chunk_bytes",
                format!(
                    "{} is outside 1..={} bytes",
                    opts.chunk_bytes,
                    super::format::MAX_RAW / 2
                ),
            ));
        }
        let json = serde_json::to_vec(&meta).expect("metadata serializes");
        let flags = if meta.has_os_events {
            FLAG_OS_EVENTS
        } else {
            0
        } | if meta.dependences {
            FLAG_DEPENDENCES
        } else {
            0
        };
        let header = header_bytes(&json, flags);
        let mut file = File::create(path).map_err(|e| Error::io(path, e))?;
        file.write_all(&header).map_err(|e| Error::io(path, e))?;
        let bytes = Arc::new(AtomicU64::new(header.len() as u64));
        let sink = Sink::new(file, opts, bytes.clone()).map_err(|e| Error::io(path, e))?;
        Ok(TraceWriter {
            path: path.to_string(),
            raw: vec![0; opts.chunk_bytes + MAX_RECORD],
            raw_len: 0,
            raw_events: 0,
            encoder: Encoder::new(),
            chunk_bytes: opts.chunk_bytes,
            sink: Some(sink),
            header,
            declared_os_events: meta.has_os_events,
            totals: Footer::default(),
            bytes,
        })
    }

    /// Appends one event.
    #[inline]
    pub fn write(&mut self, e: &Event) -> Result<()> {
        self.raw_len = self.encoder.encode(e, &mut self.raw, self.raw_len);
        self.raw_events += 1;
        let t = &mut self.totals;
        t.events += 1;
        match e {
            Event::Ref(r) => {
                t.refs += 1;
                t.instructions = t.instructions.wrapping_add(r.instrs as u64);
            }
            Event::Compute { instrs } => t.instructions = t.instructions.wrapping_add(*instrs),
            Event::Phase { .. } => {}
            _ => t.os_events += 1,
        }
        if self.raw_len >= self.chunk_bytes {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Appends events in order.
    pub fn write_batch(&mut self, es: &[Event]) -> Result<()> {
        for e in es {
            self.write(e)?;
        }
        Ok(())
    }

    /// Events written so far.
    pub fn events_written(&self) -> u64 {
        self.totals.events
    }

    /// Bytes written to the file so far (header and compressed chunks; the events still being
    /// gathered or compressed are not counted yet).
    pub fn bytes_written(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Writes the held events and the footer marking the trace complete.
    pub fn finish(self) -> Result<TraceSummary> {
        self.close(STATUS_COMPLETE)
    }

    /// Writes the held events and a footer marking the trace truncated: the events are valid
    /// but the recorded program did not run to its end (it crashed or was killed).
    pub fn finish_truncated(self) -> Result<TraceSummary> {
        self.close(STATUS_TRUNCATED)
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.raw_events == 0 {
            return Ok(());
        }
        let sink = self.sink.as_mut().expect("writer is open");
        sink.submit(&mut self.raw, self.raw_len, self.raw_events)
            .map_err(|e| Error::io(&self.path, e))?;
        self.raw_len = 0;
        self.raw_events = 0;
        self.encoder.reset();
        self.totals.chunks += 1;
        Ok(())
    }

    fn close(mut self, status: u32) -> Result<TraceSummary> {
        self.flush_chunk()?;
        let sink = self.sink.take().expect("writer is open");
        let mut file = sink.shut_down().map_err(|e| Error::io(&self.path, e))?;
        let footer = Footer {
            status,
            ..self.totals
        }
        .to_bytes();
        file.write_all(&footer)
            .map_err(|e| Error::io(&self.path, e))?;
        self.bytes.fetch_add(footer.len() as u64, Ordering::Relaxed);
        if self.totals.os_events > 0 && !self.declared_os_events {
            self.mark_os_events(&mut file);
        }
        file.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok(TraceSummary {
            events: self.totals.events,
            refs: self.totals.refs,
            bytes: self.bytes.load(Ordering::Relaxed),
        })
    }

    /// The producer said "no OS events" but wrote some: correct the header flag and the
    /// metadata's `"has_os_events":false` in place (same length: `true` plus a JSON space).
    /// Best effort: a file that cannot seek keeps the header, and the footer's count stands.
    fn mark_os_events(&mut self, file: &mut File) {
        const FALSE: &[u8] = b"\"has_os_events\":false";
        let meta_end = self.header.len() - 4;
        let json = &self.header[HEADER_FIXED..meta_end];
        let Some(at) = json.windows(FALSE.len()).rposition(|w| w == FALSE) else {
            return;
        };
        let value = HEADER_FIXED + at + FALSE.len() - 5;
        self.header[value..value + 5].copy_from_slice(b"true ");
        let flags = u16::from_le_bytes([self.header[10], self.header[11]]) | FLAG_OS_EVENTS;
        self.header[FLAGS_OFFSET as usize..FLAGS_OFFSET as usize + 2]
            .copy_from_slice(&flags.to_le_bytes());
        let check = super::hash::xxh32_of64(&self.header[..meta_end]);
        self.header[meta_end..].copy_from_slice(&check.to_le_bytes());
        let patched = file
            .seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&self.header))
            .and_then(|_| file.seek(SeekFrom::End(0)));
        let _ = patched;
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        if self.sink.is_some() {
            let _ = self.flush_chunk();
            if let Some(sink) = self.sink.take() {
                let _ = sink.shut_down();
            }
        }
    }
}

/// One chunk as it goes to the file: header then zstd frame, built into `out`.
fn build_chunk(
    comp: &mut Compressor<'static>,
    raw: &[u8],
    events: u32,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    out.clear();
    out.resize(
        CHUNK_HEADER_LEN + zstd::zstd_safe::compress_bound(raw.len()),
        0,
    );
    let n = comp.compress_to_buffer(raw, &mut out[CHUNK_HEADER_LEN..])?;
    out.truncate(CHUNK_HEADER_LEN + n);
    let header = ChunkHeader {
        comp_len: n as u32,
        raw_len: raw.len() as u32,
        events,
        raw_hash: xxh64(raw),
    };
    out[..CHUNK_HEADER_LEN].copy_from_slice(&header.to_bytes());
    Ok(())
}

/// A full buffer: sequence number, buffer, bytes used, events.
type Job = (u64, Vec<u8>, usize, u32);
type Done = (u64, io::Result<Vec<u8>>, Vec<u8>);

/// Where full chunks go: compressed here, or handed to a pool.
enum Sink {
    Inline {
        file: File,
        comp: Box<Compressor<'static>>,
        out: Vec<u8>,
        bytes: Arc<AtomicU64>,
    },
    Pool {
        jobs: SyncSender<Job>,
        next_seq: u64,
        workers: Vec<JoinHandle<()>>,
        writer: JoinHandle<io::Result<File>>,
        free: Receiver<Vec<u8>>,
        failed: Arc<Mutex<Option<io::Error>>>,
    },
}

impl Sink {
    fn new(file: File, opts: WriterOptions, bytes: Arc<AtomicU64>) -> io::Result<Sink> {
        if opts.threads == 0 {
            return Ok(Sink::Inline {
                file,
                comp: Box::new(Compressor::new(opts.level)?),
                out: Vec::new(),
                bytes,
            });
        }
        let (jobs, job_rx) = mpsc::sync_channel::<Job>(opts.threads);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done_rx) = mpsc::sync_channel::<Done>(opts.threads + 1);
        let (free_tx, free) = mpsc::channel::<Vec<u8>>();
        let failed = Arc::new(Mutex::new(None));
        let mut workers = Vec::new();
        for _ in 0..opts.threads {
            let mut comp = Compressor::new(opts.level)?;
            let (job_rx, done_tx) = (job_rx.clone(), done_tx.clone());
            workers.push(std::thread::spawn(move || loop {
                let job = job_rx.lock().map(|rx| rx.recv());
                let Ok(Ok((seq, raw, len, events))) = job else {
                    break;
                };
                let mut out = Vec::new();
                let res = build_chunk(&mut comp, &raw[..len], events, &mut out).map(|_| out);
                if done_tx.send((seq, res, raw)).is_err() {
                    break;
                }
            }));
        }
        drop(done_tx);
        let failed_w = failed.clone();
        let writer =
            std::thread::spawn(move || write_in_order(file, done_rx, free_tx, failed_w, bytes));
        Ok(Sink::Pool {
            jobs,
            next_seq: 0,
            workers,
            writer,
            free,
            failed,
        })
    }

    /// Compresses and writes `raw[..len]` (or hands the buffer on, leaving a spare of the same
    /// size in its place).
    fn submit(&mut self, raw: &mut Vec<u8>, len: usize, events: u32) -> io::Result<()> {
        match self {
            Sink::Inline {
                file,
                comp,
                out,
                bytes,
            } => {
                build_chunk(comp, &raw[..len], events, out)?;
                file.write_all(out)?;
                bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
                Ok(())
            }
            Sink::Pool {
                jobs,
                next_seq,
                free,
                failed,
                ..
            } => {
                if let Some(e) = failed.lock().ok().and_then(|mut f| f.take()) {
                    return Err(e);
                }
                let spare = free.try_recv().unwrap_or_else(|_| vec![0; raw.len()]);
                let full = std::mem::replace(raw, spare);
                jobs.send((*next_seq, full, len, events))
                    .map_err(|_| io::Error::other("the compression threads stopped"))?;
                *next_seq += 1;
                Ok(())
            }
        }
    }

    /// Waits for every chunk to be written and gives the file back.
    fn shut_down(self) -> io::Result<File> {
        match self {
            Sink::Inline { file, .. } => Ok(file),
            Sink::Pool {
                jobs,
                workers,
                writer,
                failed,
                ..
            } => {
                drop(jobs);
                for w in workers {
                    w.join()
                        .map_err(|_| io::Error::other("a compression thread panicked"))?;
                }
                let file = writer
                    .join()
                    .map_err(|_| io::Error::other("the trace writer thread panicked"))??;
                if let Some(e) = failed.lock().ok().and_then(|mut f| f.take()) {
                    return Err(e);
                }
                Ok(file)
            }
        }
    }
}

/// The pool's writer thread: writes compressed chunks in sequence order; after an error it
/// keeps draining (so the pool never blocks) and leaves the error for the caller.
fn write_in_order(
    mut file: File,
    done: Receiver<Done>,
    free: mpsc::Sender<Vec<u8>>,
    failed: Arc<Mutex<Option<io::Error>>>,
    bytes: Arc<AtomicU64>,
) -> io::Result<File> {
    let mut pending: BTreeMap<u64, io::Result<Vec<u8>>> = BTreeMap::new();
    let mut next = 0u64;
    let mut broken = false;
    for (seq, res, raw) in done {
        let _ = free.send(raw);
        pending.insert(seq, res);
        while let Some(res) = pending.remove(&next) {
            next += 1;
            if broken {
                continue;
            }
            let written = res.and_then(|chunk| {
                file.write_all(&chunk)?;
                bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                Ok(())
            });
            if let Err(e) = written {
                broken = true;
                if let Ok(mut f) = failed.lock() {
                    *f = Some(e);
                }
            }
        }
    }
    Ok(file)
}
