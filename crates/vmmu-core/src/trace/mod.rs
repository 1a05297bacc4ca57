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
//! - **ChampSim** (module [`crate::import`]): 64-byte instruction records; references only.
//!
//! All are read as streams: nothing holds a trace whole, so a billion-reference trace replays
//! in a few megabytes. The format of a file is decided by its first bytes ([`detect`]); a name
//! only adds a demand (a `.vtrace` must be one, a `.champsim` must look like one). Writing, the
//! format comes from `--to` or the destination's name ([`output_format`]). Bad input is an
//! error naming the place: [`crate::Error::TraceLine`] (1-based line and what was expected) for
//! text, [`crate::Error::TraceCorrupt`] (byte offset) for binary; an empty file is an error too.

mod codec;
mod compress;
mod format;
mod hash;
mod info;
mod lackey;
mod reader;
mod writer;

pub use compress::Compression;
pub(crate) use compress::{open_read, BackgroundWriter, CompressedWriter};
pub use info::{convert, info, RefCounts, TraceInfo};
pub use lackey::{LackeyReader, LackeyWriter};
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

/// File name extensions of each format, before any compression extension.
const EXTENSIONS: &[(&str, Format)] = &[
    (".vtrace", Format::Vtrace),
    (".txt", Format::Lackey),
    (".lackey", Format::Lackey),
    (".champsim", Format::ChampSim),
    (".champsimtrace", Format::ChampSim),
];

impl Format {
    /// `vtrace`, `lackey` or `champsim`.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Vtrace => "vtrace",
            Format::Lackey => "lackey",
            Format::ChampSim => "champsim",
        }
    }

    /// The names a file of this format is written with (for messages).
    pub const fn naming(self) -> &'static str {
        match self {
            Format::Vtrace => "NAME.vtrace",
            Format::Lackey => "NAME.txt or NAME.lackey, optionally .gz, .zst or .xz",
            Format::ChampSim => "NAME.champsim or NAME.champsimtrace, optionally .xz, .gz or .zst",
        }
    }

    /// The format a file name says, with the extension that says it: `.vtrace`; `.txt` or
    /// `.lackey`; `.champsim` or `.champsimtrace` — the last two optionally followed by
    /// `.gz`, `.zst`/`.zstd` or `.xz`. `None` for any other name.
    pub fn from_path(path: &str) -> Option<(Format, String)> {
        let (stem, compression) = Compression::split_path(path);
        let &(ext, format) = EXTENSIONS.iter().find(|(ext, _)| stem.ends_with(ext))?;
        // A `.vtrace` compresses its own chunks: `.vtrace.gz` names no format vmmu writes.
        if format == Format::Vtrace && compression != Compression::None {
            return None;
        }
        Some((format, path[stem.len() - ext.len()..].to_string()))
    }
}

/// The format to write `dst` in: `to` when given, else the one `dst`'s name says
/// ([`Format::from_path`]). A name that says another format than `to` is an error naming both;
/// so is a name that says no format when `to` is not given.
pub fn output_format(dst: &str, to: Option<Format>) -> Result<Format> {
    let named = Format::from_path(dst);
    let bad = |msg: String| {
        Error::io(
            dst,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, msg),
        )
    };
    match (to, named) {
        (Some(to), Some((by_name, ext))) if to != by_name => Err(bad(format!(
            "the output format is `{to}` but the name ends in `{ext}`, which is {by_name}: name \
             it {} or give --to {by_name}",
            to.naming()
        ))),
        (Some(to), _) => Ok(to),
        (None, Some((by_name, _))) => Ok(by_name),
        (None, None) => Err(bad(format!(
            "cannot tell the output format from the name: give --to vtrace|lackey|champsim, or \
             name it {}; {}; {}",
            Format::Vtrace.naming(),
            Format::Lackey.naming(),
            Format::ChampSim.naming()
        ))),
    }
}

impl FromStr for Format {
    type Err = Error;

    /// `vtrace` (or `binary`), `lackey` (or `text`), `champsim`, case-insensitive.
    fn from_str(s: &str) -> Result<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "vtrace" | "binary" => Ok(Format::Vtrace),
            "lackey" | "text" => Ok(Format::Lackey),
            "champsim" => Ok(Format::ChampSim),
            other => Err(Error::config(
                "trace format",
                format!(
                    "unknown trace format `{other}`: expected `vtrace`, `lackey` (also `text`) or \
                     `champsim`"
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
    /// Whether the producer tracked which loads each reference's address depends on
    /// ([`crate::event::MemRef::dep`]): then a reference without a dependence is independent;
    /// otherwise nothing is known (header flag bit 1).
    pub dependences: bool,
}

/// The format of the file at `path`, from its first bytes: the `.vtrace` magic (or a file too
/// short to hold more than a prefix of it) is binary, records that look like ChampSim's are
/// ChampSim, anything else is text. A name adds a demand: a `.vtrace` file must start with the
/// magic, a `.champsim` file must look like ChampSim records; an empty file is no trace.
pub fn detect(path: &str) -> Result<Format> {
    let mut head = [0u8; 64];
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
    let head = &head[..n];
    let not = |reason: String| Error::TraceCorrupt {
        path: path.to_string(),
        offset: 0,
        reason,
    };
    if head.is_empty() {
        return Err(not("the file is empty (0 bytes): no trace".into()));
    }
    let named = Format::from_path(path);
    if format::MAGIC.starts_with(head) || head.starts_with(&format::MAGIC) {
        return Ok(Format::Vtrace);
    }
    if let Some((Format::Vtrace, ext)) = &named {
        return Err(not(format!(
            "not a vtrace file: the name ends in `{ext}` but the file starts with {}, not the \
             vtrace magic {}",
            describe_head(head),
            hex(&format::MAGIC)
        )));
    }
    if crate::import::sniff_champsim(path)? {
        return Ok(Format::ChampSim);
    }
    if let Some((Format::ChampSim, ext)) = &named {
        return Err(not(format!(
            "not a ChampSim trace: the name ends in `{ext}` but its first bytes ({} after \
             decompression) are not 64-byte `input_instr` records (branch flags 0 or 1, \
             user-space addresses)",
            describe_head(head)
        )));
    }
    Ok(Format::Lackey)
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first bytes of a file, for a message: what they look like, then the bytes.
fn describe_head(head: &[u8]) -> String {
    let compression = Compression::detect(head);
    if compression != Compression::None {
        return format!(
            "{} data ({})",
            compression.name(),
            hex(&head[..head.len().min(6)])
        );
    }
    let printable = head
        .iter()
        .all(|b| b.is_ascii_graphic() || matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
    if printable {
        let text = String::from_utf8_lossy(head);
        let line: String = text.lines().next().unwrap_or("").chars().take(48).collect();
        return format!("text `{}`", line.trim_end());
    }
    format!("bytes {}", hex(&head[..head.len().min(8)]))
}

/// Opens a trace of any supported format (detected from its first bytes) as an event stream.
pub fn open(path: &str) -> Result<Box<dyn EventSource>> {
    Ok(info::Opened::open(path)?.into_source())
}
