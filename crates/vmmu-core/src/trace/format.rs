//! The byte layout of a `.vtrace` file (docs/traces.md, "Binary format"): the file header, the
//! chunk header and the footer. All integers are little-endian.
//!
//! ```text
//! file    := header chunk* footer?
//! header  := magic[8] version:u16 flags:u16 meta_len:u32 meta[meta_len] check:u32
//! chunk   := "VTCK" comp_len:u32 raw_len:u32 events:u32 raw_xxh64:u64 check:u32 zstd[comp_len]
//! footer  := "VTFT" status:u32 events:u64 refs:u64 instructions:u64 os_events:u64 chunks:u64
//!            check:u32
//! ```
//! Each `check` is the low 32 bits of the XXH64 of the bytes of its structure before it.

use super::hash::xxh32_of64;

/// The first 8 bytes of every `.vtrace` file. Like PNG's signature: a non-ASCII first byte so
/// it is never taken for text, and CR LF, SUB, LF to catch newline translation.
pub(crate) const MAGIC: [u8; 8] = *b"\x89VTR\r\n\x1a\n";
/// The format version this code writes and the newest it reads. Version 2 added the extended
/// reference (a load dependence) and the `madvise` record; version 1 files read unchanged.
pub(crate) const VERSION: u16 = 2;
/// Header flag: the producer declares process / address-space events in the trace.
pub(crate) const FLAG_OS_EVENTS: u16 = 1;
/// Header flag: the producer tracked load dependences, so a reference without one is
/// independent (without the flag, nothing is known).
pub(crate) const FLAG_DEPENDENCES: u16 = 2;
/// Header flags this version understands; a file with any other bit set is refused.
pub(crate) const KNOWN_FLAGS: u16 = FLAG_OS_EVENTS | FLAG_DEPENDENCES;
/// Offset of the flags field in the header.
pub(crate) const FLAGS_OFFSET: u64 = 10;
/// Bytes before the metadata: magic, version, flags, meta_len.
pub(crate) const HEADER_FIXED: usize = 16;
/// The largest metadata blob a reader accepts.
pub(crate) const MAX_META: u32 = 1 << 20;

/// Magic of a data chunk.
pub(crate) const CHUNK_MAGIC: [u8; 4] = *b"VTCK";
/// Magic of the footer.
pub(crate) const FOOTER_MAGIC: [u8; 4] = *b"VTFT";
/// Bytes of a chunk header.
pub(crate) const CHUNK_HEADER_LEN: usize = 28;
/// Bytes of the footer.
pub(crate) const FOOTER_LEN: usize = 52;
/// The largest raw (decompressed) chunk a reader accepts: bounds a reader's memory whatever
/// the file says.
pub(crate) const MAX_RAW: u32 = 64 << 20;

/// Footer status: the writer finished normally.
pub(crate) const STATUS_COMPLETE: u32 = 0;
/// Footer status: the writer finished early (the recorded program crashed or was killed).
pub(crate) const STATUS_TRUNCATED: u32 = 1;

/// The file header for `meta_json`, checksum included.
pub(crate) fn header_bytes(meta_json: &[u8], flags: u16) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_FIXED + meta_json.len() + 4);
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&flags.to_le_bytes());
    h.extend_from_slice(&(meta_json.len() as u32).to_le_bytes());
    h.extend_from_slice(meta_json);
    let check = xxh32_of64(&h);
    h.extend_from_slice(&check.to_le_bytes());
    h
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The header of one data chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkHeader {
    pub comp_len: u32,
    pub raw_len: u32,
    pub events: u32,
    pub raw_hash: u64,
}

impl ChunkHeader {
    /// The header's bytes, its check included.
    pub fn to_bytes(self) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = [0u8; CHUNK_HEADER_LEN];
        b[0..4].copy_from_slice(&CHUNK_MAGIC);
        b[4..8].copy_from_slice(&self.comp_len.to_le_bytes());
        b[8..12].copy_from_slice(&self.raw_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.events.to_le_bytes());
        b[16..24].copy_from_slice(&self.raw_hash.to_le_bytes());
        let check = xxh32_of64(&b[..24]);
        b[24..28].copy_from_slice(&check.to_le_bytes());
        b
    }

    /// Parses and checks a chunk header (its magic already seen).
    pub fn parse(b: &[u8; CHUNK_HEADER_LEN]) -> Result<ChunkHeader, String> {
        if xxh32_of64(&b[..24]) != u32_at(b, 24) {
            return Err("chunk header checksum mismatch".into());
        }
        let h = ChunkHeader {
            comp_len: u32_at(b, 4),
            raw_len: u32_at(b, 8),
            events: u32_at(b, 12),
            raw_hash: u64_at(b, 16),
        };
        if h.raw_len > MAX_RAW {
            return Err(format!(
                "chunk claims {} raw bytes, more than the limit of {MAX_RAW}",
                h.raw_len
            ));
        }
        if h.events > h.raw_len {
            return Err(format!(
                "chunk claims {} events in {} raw bytes (every record takes at least one)",
                h.events, h.raw_len
            ));
        }
        if h.comp_len as usize > zstd::zstd_safe::compress_bound(h.raw_len as usize) {
            return Err(format!(
                "chunk claims {} compressed bytes for {} raw bytes, more than zstd can produce",
                h.comp_len, h.raw_len
            ));
        }
        Ok(h)
    }
}

/// The footer: the trace is complete (or was ended early on purpose), with its totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Footer {
    pub status: u32,
    pub events: u64,
    pub refs: u64,
    pub instructions: u64,
    pub os_events: u64,
    pub chunks: u64,
}

impl Footer {
    /// The footer's bytes, its check included.
    pub fn to_bytes(self) -> [u8; FOOTER_LEN] {
        let mut b = [0u8; FOOTER_LEN];
        b[0..4].copy_from_slice(&FOOTER_MAGIC);
        b[4..8].copy_from_slice(&self.status.to_le_bytes());
        for (i, v) in [
            self.events,
            self.refs,
            self.instructions,
            self.os_events,
            self.chunks,
        ]
        .into_iter()
        .enumerate()
        {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        let check = xxh32_of64(&b[..48]);
        b[48..52].copy_from_slice(&check.to_le_bytes());
        b
    }

    /// Parses and checks a footer (its magic already seen).
    pub fn parse(b: &[u8; FOOTER_LEN]) -> Result<Footer, String> {
        if xxh32_of64(&b[..48]) != u32_at(b, 48) {
            return Err("footer checksum mismatch".into());
        }
        let status = u32_at(b, 4);
        if status > STATUS_TRUNCATED {
            return Err(format!("unknown footer status {status}"));
        }
        Ok(Footer {
            status,
            events: u64_at(b, 8),
            refs: u64_at(b, 16),
            instructions: u64_at(b, 24),
            os_events: u64_at(b, 32),
            chunks: u64_at(b, 40),
        })
    }
}
