//! [`VtraceReader`]: streams a `.vtrace` file, one chunk in memory at a time.
//!
//! Each chunk is checked before any of its events is handed out: header checksum, lengths,
//! zstd frame, XXH64 of the raw bytes, then every record. A problem is an
//! [`Error::TraceCorrupt`] naming the byte offset in the file of the structure found bad (the
//! header field, or the chunk's first byte). A file that ends cleanly after a chunk, without a
//! footer, is a trace whose writer was killed: it reads to its end and then reports
//! [`is_truncated`](VtraceReader::is_truncated).

use super::codec::{Counts, Decoder, PAD};
use super::format::{
    ChunkHeader, Footer, CHUNK_HEADER_LEN, CHUNK_MAGIC, FLAG_OS_EVENTS, FOOTER_LEN, FOOTER_MAGIC,
    HEADER_FIXED, KNOWN_FLAGS, MAGIC, MAX_META, STATUS_TRUNCATED, VERSION,
};
use super::hash::{xxh32_of64, xxh64};
use super::TraceMeta;
use crate::error::{Error, Result};
use crate::event::{Event, EventSource};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use zstd::bulk::Decompressor;

/// A streaming reader of `.vtrace` files.
pub struct VtraceReader {
    path: String,
    file: File,
    version: u16,
    flags: u16,
    meta: TraceMeta,
    /// File offset of the next chunk (or footer).
    offset: u64,
    /// File offset of the chunk being decoded.
    chunk_offset: u64,
    comp: Vec<u8>,
    raw: Vec<u8>,
    raw_len: usize,
    pos: usize,
    left_in_chunk: u32,
    decoder: Decoder,
    dctx: Decompressor<'static>,
    seen: Footer,
    counts: Counts,
    footer: Option<Footer>,
    ended: bool,
    len_hint: Option<u64>,
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
        let offset = header.len() as u64;
        let len_hint = peek_footer(&mut file, offset).map(|f| f.events);
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(path, e))?;
        Ok(VtraceReader {
            path: path.to_string(),
            file,
            version,
            flags,
            meta,
            offset,
            chunk_offset: offset,
            comp: Vec::new(),
            raw: Vec::new(),
            raw_len: 0,
            pos: 0,
            left_in_chunk: 0,
            decoder: Decoder::new(),
            dctx: Decompressor::new().map_err(|e| Error::io(path, e))?,
            seen: Footer::default(),
            counts: Counts::default(),
            footer: None,
            ended: false,
            len_hint,
        })
    }

    /// The format version of the file.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The header's flags (bit 0: OS events declared).
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
        self.ended && self.footer.is_none_or(|f| f.status == STATUS_TRUNCATED)
    }

    fn corrupt(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::TraceCorrupt {
            path: self.path.clone(),
            offset,
            reason: reason.into(),
        }
    }

    /// Loads the next chunk; returns false at the end of the trace.
    fn load_chunk(&mut self) -> Result<bool> {
        let at = self.offset;
        let mut head = [0u8; CHUNK_HEADER_LEN];
        let got =
            read_full(&mut self.file, &mut head[..4]).map_err(|e| Error::io(&self.path, e))?;
        if got == 0 {
            self.ended = true;
            return Ok(false);
        }
        if got == 4 && head[..4] == FOOTER_MAGIC {
            return self.read_footer(at).map(|_| false);
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
        if self.raw.len() < raw_len + PAD {
            self.raw.resize(raw_len + PAD, 0);
        }
        let n = self
            .dctx
            .decompress_to_buffer(&self.comp, &mut self.raw[..raw_len])
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
        if xxh64(&self.raw[..raw_len]) != h.raw_hash {
            return Err(self.corrupt(at, "checksum mismatch in the chunk's data"));
        }
        self.chunk_offset = at;
        self.offset = at + (CHUNK_HEADER_LEN + h.comp_len as usize) as u64;
        self.raw_len = raw_len;
        self.pos = 0;
        self.left_in_chunk = h.events;
        self.decoder.reset();
        self.seen.chunks += 1;
        Ok(true)
    }

    fn read_footer(&mut self, at: u64) -> Result<()> {
        let mut b = [0u8; FOOTER_LEN];
        b[..4].copy_from_slice(&FOOTER_MAGIC);
        let got = read_full(&mut self.file, &mut b[4..]).map_err(|e| Error::io(&self.path, e))?;
        if got < FOOTER_LEN - 4 {
            return Err(self.corrupt(at, "the file ends inside the footer"));
        }
        let f = Footer::parse(&b).map_err(|r| self.corrupt(at, r))?;
        let s = Footer {
            refs: self.counts.refs,
            instructions: self.counts.instructions,
            os_events: self.counts.os_events,
            ..self.seen
        };
        let mismatch = [
            ("events", f.events, s.events),
            ("references", f.refs, s.refs),
            ("instructions", f.instructions, s.instructions),
            ("OS events", f.os_events, s.os_events),
            ("chunks", f.chunks, s.chunks),
        ]
        .into_iter()
        .find(|(_, footer, seen)| footer != seen);
        if let Some((what, footer, seen)) = mismatch {
            return Err(self.corrupt(
                at,
                format!("the footer counts {footer} {what}, the chunks hold {seen}"),
            ));
        }
        let end = at + FOOTER_LEN as u64;
        let mut extra = [0u8; 1];
        if read_full(&mut self.file, &mut extra).map_err(|e| Error::io(&self.path, e))? > 0 {
            return Err(self.corrupt(end, "unexpected bytes after the footer"));
        }
        self.meta.has_os_events |= f.os_events > 0;
        self.footer = Some(f);
        self.ended = true;
        Ok(())
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
        let start = buf.len();
        while buf.len() - start < max && !self.ended {
            if self.left_in_chunk == 0 {
                if self.pos != self.raw_len {
                    return Err(self.corrupt(
                        self.chunk_offset,
                        format!(
                            "{} bytes left over after the chunk's last record",
                            self.raw_len - self.pos
                        ),
                    ));
                }
                if !self.load_chunk()? {
                    break;
                }
                continue;
            }
            let n = (max - (buf.len() - start)).min(self.left_in_chunk as usize);
            let before = buf.len();
            self.decoder
                .decode(
                    &self.raw,
                    self.raw_len,
                    &mut self.pos,
                    buf,
                    n,
                    &mut self.counts,
                )
                .map_err(|e| {
                    let reason =
                        format!("record at byte {} of the chunk's data: {}", e.at, e.reason);
                    Error::TraceCorrupt {
                        path: self.path.clone(),
                        offset: self.chunk_offset,
                        reason,
                    }
                })?;
            self.left_in_chunk -= n as u32;
            self.seen.events += (buf.len() - before) as u64;
        }
        Ok(buf.len() - start)
    }

    fn len_hint(&self) -> Option<u64> {
        self.len_hint
    }

    fn describe(&self) -> String {
        self.path.clone()
    }
}
