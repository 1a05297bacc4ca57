//! Trace files: Valgrind lackey text (plain, gzip, zstd) with `@` OS-event lines, and vmmu's
//! compact binary format, `.vtrace` (docs/traces.md describes both byte by byte).
//!
//! - **Text** ([`LackeyReader`], [`LackeyWriter`]): what `valgrind --tool=lackey
//!   --trace-mem=yes` prints, as it is, plus one `@` line per OS event kind. Human-readable,
//!   large (about 15 bytes per reference), slow to parse; for exchange and hand-made tests.
//! - **Binary** ([`TraceWriter`], [`VtraceReader`]): a versioned header with JSON metadata,
//!   then independently decodable zstd chunks of delta-encoded records, each with its checksum,
//!   then a footer with totals. Recorded programs come to well under a byte per reference, and
//!   a reader decodes hundreds of millions of references per second holding one chunk.
//!
//! Both are read as streams: nothing holds a trace whole, so a billion-reference trace
//! replays in a few megabytes. The format of a file is decided by its first bytes, never by its
//! name. Bad input is an error naming the place: [`crate::Error::TraceLine`] (1-based line
//! and what was expected) for text, [`crate::Error::TraceCorrupt`] (byte offset) for binary.

mod codec;
mod format;
mod hash;
mod info;
mod lackey;
mod reader;
mod writer;

pub use info::{convert, info, RefCounts, TraceInfo};
pub use lackey::{Compression, LackeyReader, LackeyWriter};
pub use reader::VtraceReader;
pub use writer::{TraceSummary, TraceWriter, WriterOptions};

use crate::error::{Error, Result};
use crate::event::EventSource;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Read;
use std::str::FromStr;

/// A trace file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// vmmu's binary format (`.vtrace`).
    Vtrace,
    /// Valgrind lackey text with `@` event lines (plain, gzip or zstd).
    Lackey,
    /// ChampSim's 64-byte `input_instr` records (plain, gzip, xz, zstd); no OS events.
    ChampSim,
}

impl Format {
    /// `vtrace` or `lackey`.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Vtrace => "vtrace",
            Format::Lackey => "lackey",
            Format::ChampSim => "champsim",
        }
    }
}

impl FromStr for Format {
    type Err = Error;

    /// `vtrace` (or `binary`), `lackey` (or `text`), case-insensitive.
    fn from_str(s: &str) -> Result<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "vtrace" | "binary" => Ok(Format::Vtrace),
            "lackey" | "text" => Ok(Format::Lackey),
            "champsim" => Ok(Format::ChampSim),
            other => Err(Error::config(
                "trace.format",
                format!(
                    "unknown trace format `{other}`: expected `vtrace`, `lackey` (also `text`) or `champsim`"
                ),
            )),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Metadata in a `.vtrace` header (a JSON object; unknown keys are ignored by readers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceMeta {
    /// Free text: what the trace is (`gzip -c 5MB file`).
    pub description: String,
    /// Who produced it (`vmmu record 0.1.0`, `lackey text PATH`, `random:footprint=1G`).
    pub source: String,
    /// Whether it has process or address-space events (proc, fork, exec, exit, switch, mmap,
    /// munmap, mprotect, mremap, brk). A trace without them runs as if every page were
    /// anonymous memory mapped on first touch. The writer sets it at finish if the producer
    /// declared false but wrote such events.
    pub has_os_events: bool,
}

/// The format of the file at `path`, from its first bytes: the `.vtrace` magic (or a file too
/// short to hold more than a prefix of it) is binary, records that look like ChampSim's are
/// ChampSim, anything else is text.
pub fn detect(path: &str) -> Result<Format> {
    let mut head = [0u8; 8];
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    let is_vtrace = n > 0 && format::MAGIC.starts_with(&head[..n]);
    Ok(if is_vtrace {
        Format::Vtrace
    } else if crate::import::sniff_champsim(path)? {
        Format::ChampSim
    } else {
        Format::Lackey
    })
}

/// Opens a trace of any supported format (detected from its first bytes) as an event stream.
pub fn open(path: &str) -> Result<Box<dyn EventSource>> {
    Ok(info::Opened::open(path)?.into_source())
}
