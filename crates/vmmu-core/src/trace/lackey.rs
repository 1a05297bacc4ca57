//! Text traces: Valgrind lackey `--trace-mem=yes` output as it is, plus `@` event lines
//! (docs/traces.md, "Text format").
//!
//! ```text
//! ==12345== Lackey, an example Valgrind tool      <- Valgrind's own lines: skipped
//! I  04020ca1,2                                    <- fetch of 2 bytes, 1 instruction
//!  L 1ffefff8c0,8                                  <- load / ` S` store / ` M` modify
//!  S 1ffefff8c0,8,3                                <- optional third field: instructions
//!  L 1ffefff8c8,8,0,d1                             <- optional fourth: depends on the previous
//!                                                     data reference's loaded value
//! @mmap 0x7f0000000000 0x100000 rw- anon,huge      <- an OS event (one per Event variant)
//! # a comment
//! ```
//! The reader streams (a `BufRead` over the file, or over a gzip, zstd or xz decoder chosen by
//! the file's first bytes), reuses one line buffer and allocates nothing per line. A malformed
//! line is an [`Error::TraceLine`] with its 1-based number and what was expected; so is a file
//! with no event at all (a Valgrind log without `--trace-mem=yes`, say).

use crate::addr::Gva;
use crate::compress::{open_read, CompressedWriter, Compression};
use crate::error::{Error, Result};
use crate::event::{AccessKind, Advice, Event, EventSource, MapFlags, MemRef, Prot};
use crate::event::{Madvise, Mmap, Mprotect, Mremap, Munmap};
use std::io::{self, BufRead, Write};

/// A streaming reader of text traces.
pub struct LackeyReader {
    path: String,
    input: Box<dyn BufRead + Send>,
    compression: Compression,
    line: Vec<u8>,
    line_no: u64,
    events: u64,
    ended: bool,
}

impl LackeyReader {
    /// Opens `path`, plain or compressed.
    pub fn open(path: &str) -> Result<LackeyReader> {
        let (input, compression) = open_read(path)?;
        Ok(LackeyReader {
            path: path.to_string(),
            input,
            compression,
            line: Vec::with_capacity(128),
            line_no: 0,
            events: 0,
            ended: false,
        })
    }

    /// How the file is compressed.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line_no
    }

    fn line_error(&self, reason: impl Into<String>) -> Error {
        Error::TraceLine {
            path: self.path.clone(),
            line: self.line_no,
            reason: reason.into(),
        }
    }
}

impl EventSource for LackeyReader {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        let start = buf.len();
        while buf.len() - start < max && !self.ended {
            self.line.clear();
            let n = match self.input.read_until(b'\n', &mut self.line) {
                Ok(n) => n,
                Err(e) if self.compression != Compression::None => {
                    self.line_no += 1;
                    return Err(self.line_error(format!(
                        "the {} stream is corrupt: {e}",
                        self.compression.name()
                    )));
                }
                Err(e) => return Err(Error::io(&self.path, e)),
            };
            if n == 0 {
                self.ended = true;
                if self.events == 0 {
                    return Err(self.line_error(format!(
                        "the trace holds no event: {} lines, none a reference (`I|L|S|M \
                         ADDR,SIZE`) or an `@` event line (was lackey run with \
                         --trace-mem=yes?)",
                        self.line_no
                    )));
                }
                break;
            }
            self.line_no += 1;
            match parse_line(&self.line) {
                Ok(Some(e)) => {
                    buf.push(e);
                    self.events += 1;
                }
                Ok(None) => {}
                Err(reason) => return Err(self.line_error(reason)),
            }
        }
        Ok(buf.len() - start)
    }

    fn describe(&self) -> String {
        self.path.clone()
    }
}

/// Shows a line in an error message: trimmed, at most 60 characters.
fn shown(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(line);
    let s = s.trim_end();
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}

fn expected_ref(line: &[u8]) -> String {
    format!(
        "expected `I|L|S|M ADDR,SIZE` or an `@` event line, found `{}`",
        shown(line)
    )
}

/// Parses one line: `Ok(None)` for a line that carries no event.
pub(crate) fn parse_line(line: &[u8]) -> std::result::Result<Option<Event>, String> {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r' | b' ' | b'\t') {
        end -= 1;
    }
    let line = &line[..end];
    let mut p = 0;
    while p < line.len() && (line[p] == b' ' || line[p] == b'\t') {
        p += 1;
    }
    let Some(&first) = line.get(p) else {
        return Ok(None);
    };
    if line.starts_with(b"==") || line.starts_with(b"--") || first == b'#' {
        return Ok(None);
    }
    if first == b'@' {
        return parse_event(&line[p + 1..]).map(Some);
    }
    let (kind, default_instrs) = match first {
        b'I' => (AccessKind::Fetch, 1),
        b'L' => (AccessKind::Load, 0),
        b'S' => (AccessKind::Store, 0),
        b'M' => (AccessKind::Modify, 0),
        _ => return Err(expected_ref(line)),
    };
    p += 1;
    let blank = p;
    while p < line.len() && (line[p] == b' ' || line[p] == b'\t') {
        p += 1;
    }
    if p == blank {
        return Err(expected_ref(line));
    }
    let fields = &line[p..];
    let mut parts = fields.split(|&b| b == b',');
    let (Some(addr), Some(size)) = (parts.next(), parts.next()) else {
        return Err(expected_ref(line));
    };
    let instrs = parts.next();
    let dep = parts.next();
    if parts.next().is_some() || (dep.is_some() && kind == AccessKind::Fetch) {
        return Err(format!(
            "expected `ADDR,SIZE[,INSTRS]` (a data reference: `ADDR,SIZE,INSTRS[,dK]`), found `{}`",
            shown(fields)
        ));
    }
    let va = parse_hex_addr(addr).map_err(|r| format!("{r} in `{}`", shown(line)))?;
    let size = match parse_decimal(size) {
        Some(s @ 1..=255) => s as u8,
        Some(s) => {
            return Err(format!(
                "access size {s} is out of range: expected 1..=255 bytes, in `{}`",
                shown(line)
            ))
        }
        None => {
            return Err(format!(
                "expected a decimal access size after `,`, found `{}`",
                shown(size)
            ))
        }
    };
    let instrs = match instrs {
        None => default_instrs,
        Some(t) => parse_decimal(t)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| {
                format!(
                    "expected an instruction count below 2^32 as the third field, found `{}`",
                    shown(t)
                )
            })?,
    };
    let dep = match dep {
        None => 0,
        Some(d) => match d.strip_prefix(b"d").and_then(parse_decimal) {
            Some(k @ 1..=255) => k as u8,
            _ => {
                return Err(format!(
                    "expected a dependence `d1`..`d255` (data references back) as the fourth \
                     field, found `{}`",
                    shown(d)
                ))
            }
        },
    };
    Ok(Some(Event::Ref(MemRef {
        va: Gva::new(va),
        kind,
        size,
        instrs,
        dep,
    })))
}

/// A hexadecimal address as lackey prints it (`%08lx`, no prefix; `0x` accepted).
fn parse_hex_addr(s: &[u8]) -> std::result::Result<u64, String> {
    let digits = s
        .strip_prefix(b"0x")
        .or_else(|| s.strip_prefix(b"0X"))
        .unwrap_or(s);
    if digits.is_empty() {
        return Err("expected a hexadecimal address".into());
    }
    let mut v: u64 = 0;
    let mut significant = 0;
    for &b in digits {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => {
                return Err(format!(
                    "expected a hexadecimal address, found `{}`",
                    shown(s)
                ))
            }
        };
        if significant > 0 || d != 0 {
            significant += 1;
        }
        if significant > 16 {
            return Err(format!("address `{}` does not fit in 64 bits", shown(s)));
        }
        v = (v << 4) | d as u64;
    }
    Ok(v)
}

fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(v)
}

/// A number in an `@` line: `0x` hexadecimal or decimal.
fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The `@` lines: name, argument names (for messages).
const EVENT_SYNTAX: &[(&str, &str)] = &[
    ("proc", "PID"),
    ("fork", "PARENT CHILD"),
    ("exec", "PID"),
    ("exit", "PID"),
    ("switch", "PID"),
    ("thread_create", "PID TID"),
    ("thread_exit", "PID TID"),
    ("thread", "PID TID"),
    ("mmap", "START LEN PROT FLAGS"),
    ("munmap", "START LEN"),
    ("mprotect", "START LEN PROT"),
    ("mremap", "OLD OLDLEN NEW NEWLEN"),
    ("madvise", "START LEN ADVICE"),
    ("brk", "END"),
    ("phase", "ID"),
    ("compute", "INSTRS"),
];

fn parse_event(body: &[u8]) -> std::result::Result<Event, String> {
    let text = std::str::from_utf8(body).map_err(|_| "an `@` line is not UTF-8".to_string())?;
    let mut words = text.split_ascii_whitespace();
    let name = words.next().unwrap_or("");
    let args: Vec<&str> = words.collect();
    let Some(&(_, syntax)) = EVENT_SYNTAX.iter().find(|(n, _)| *n == name) else {
        let names: Vec<String> = EVENT_SYNTAX.iter().map(|(n, _)| format!("@{n}")).collect();
        return Err(format!(
            "unknown event `@{name}`: expected one of {}",
            names.join(", ")
        ));
    };
    let arity = syntax.split(' ').count();
    let usage = || format!("expected `@{name} {syntax}`, found `@{}`", text.trim());
    if args.len() != arity {
        return Err(usage());
    }
    let num = |i: usize| -> std::result::Result<u64, String> {
        parse_number(args[i]).ok_or_else(|| {
            format!(
                "{}: `{}` is not a number (decimal or 0x hexadecimal)",
                usage(),
                args[i]
            )
        })
    };
    let pid = |i: usize| -> std::result::Result<u32, String> {
        u32::try_from(num(i)?)
            .map_err(|_| format!("{}: `{}` does not fit in 32 bits", usage(), args[i]))
    };
    let va = |i: usize| num(i).map(Gva::new);
    Ok(match name {
        "proc" => Event::ProcessCreate { pid: pid(0)? },
        "fork" => Event::Fork {
            parent: pid(0)?,
            child: pid(1)?,
        },
        "exec" => Event::Exec { pid: pid(0)? },
        "exit" => Event::Exit { pid: pid(0)? },
        "switch" => Event::Switch { pid: pid(0)? },
        "thread_create" => Event::ThreadCreate {
            pid: pid(0)?,
            tid: pid(1)?,
        },
        "thread_exit" => Event::ThreadExit {
            pid: pid(0)?,
            tid: pid(1)?,
        },
        "thread" => Event::Thread {
            pid: pid(0)?,
            tid: pid(1)?,
        },
        "mmap" => Event::mmap(
            va(0)?,
            num(1)?,
            parse_prot(args[2]).map_err(|r| format!("{}: {r}", usage()))?,
            parse_flags(args[3]).map_err(|r| format!("{}: {r}", usage()))?,
        ),
        "munmap" => Event::munmap(va(0)?, num(1)?),
        "mprotect" => Event::mprotect(
            va(0)?,
            num(1)?,
            parse_prot(args[2]).map_err(|r| format!("{}: {r}", usage()))?,
        ),
        "mremap" => Event::mremap(va(0)?, num(1)?, va(2)?, num(3)?),
        "madvise" => Event::madvise(
            va(0)?,
            num(1)?,
            parse_advice(args[2]).map_err(|r| format!("{}: {r}", usage()))?,
        ),
        "brk" => Event::Brk { end: va(0)? },
        "phase" => Event::Phase { id: pid(0)? },
        _ => Event::Compute { instrs: num(0)? },
    })
}

/// An advice by its Linux name (`hugepage`, `nohugepage`, `dontneed`, `free`, `collapse`) or
/// its `MADV_*` number.
fn parse_advice(s: &str) -> std::result::Result<Advice, String> {
    if let Some(n) = parse_number(s) {
        return u8::try_from(n)
            .map(Advice)
            .map_err(|_| format!("advice {n} is not a MADV_* value (0..=255)"));
    }
    (0..=u8::MAX)
        .map(Advice)
        .find(|a| a.name() == Some(s))
        .ok_or_else(|| {
            format!(
                "unknown advice `{s}`: expected hugepage, nohugepage, dontneed, free, collapse \
                 or a MADV_* number"
            )
        })
}

/// An advice as an `@madvise` line writes it: its name, or its number when it has none.
fn advice_text(a: Advice) -> String {
    a.name().map_or_else(|| a.0.to_string(), str::to_string)
}

/// `rwx`, `r--`, `---`... or a number for bits beyond the three.
fn parse_prot(s: &str) -> std::result::Result<Prot, String> {
    let b = s.as_bytes();
    if b.len() == 3 {
        let mut bits = 0;
        for (i, (&c, letter)) in b.iter().zip([b'r', b'w', b'x']).enumerate() {
            if c == letter {
                bits |= 1 << i;
            } else if c != b'-' {
                return Err(format!(
                    "protection `{s}`: expected `rwx` with `-` for a missing right"
                ));
            }
        }
        return Ok(Prot(bits));
    }
    parse_number(s)
        .and_then(|v| u8::try_from(v).ok())
        .map(Prot)
        .ok_or_else(|| format!("protection `{s}`: expected `rwx` with `-` for a missing right"))
}

const FLAG_NAMES: &[(&str, u8)] = &[
    ("shared", MapFlags::SHARED),
    ("file", MapFlags::FILE),
    ("huge", MapFlags::HUGE),
    ("stack", MapFlags::STACK),
    ("populate", MapFlags::POPULATE),
];

/// `anon`/`file` then any of `private`, `shared`, `huge`, `stack`, `populate`, `0xNN`.
fn parse_flags(s: &str) -> std::result::Result<MapFlags, String> {
    let mut bits = 0u8;
    for word in s.split(',') {
        if word == "anon" || word == "private" {
            continue;
        }
        if let Some(&(_, bit)) = FLAG_NAMES.iter().find(|(n, _)| *n == word) {
            bits |= bit;
        } else if let Some(v) = word.starts_with("0x").then(|| parse_number(word)).flatten() {
            bits |= u8::try_from(v).map_err(|_| format!("flags `{word}` do not fit in 8 bits"))?;
        } else {
            return Err(format!(
                "unknown mapping flag `{word}`: expected anon, private, shared, file, huge, stack, populate or 0xNN"
            ));
        }
    }
    Ok(MapFlags(bits))
}

fn prot_text(p: Prot) -> String {
    if p.0 & !7 != 0 {
        return format!("{:#x}", p.0);
    }
    let mut s = String::with_capacity(3);
    s.push(if p.read() { 'r' } else { '-' });
    s.push(if p.write() { 'w' } else { '-' });
    s.push(if p.exec() { 'x' } else { '-' });
    s
}

fn flags_text(f: MapFlags) -> String {
    let mut words = vec![if f.0 & MapFlags::FILE != 0 {
        "file"
    } else {
        "anon"
    }
    .to_string()];
    let mut known = MapFlags::FILE;
    for (name, bit) in FLAG_NAMES {
        known |= bit;
        if *bit != MapFlags::FILE && f.0 & bit != 0 {
            words.push(name.to_string());
        }
    }
    if f.0 & !known != 0 {
        words.push(format!("{:#x}", f.0 & !known));
    }
    words.join(",")
}

/// Writes `e` as one text line (lackey's own layout for references).
pub(crate) fn write_line(out: &mut impl Write, e: &Event) -> io::Result<()> {
    match *e {
        Event::Ref(r) => {
            let (lead, default) = match r.kind {
                AccessKind::Fetch => ("I ", 1),
                AccessKind::Load => (" L", 0),
                AccessKind::Store => (" S", 0),
                AccessKind::Modify => (" M", 0),
            };
            if r.dep != 0 {
                writeln!(
                    out,
                    "{lead} {:08x},{},{},d{}",
                    r.va.raw(),
                    r.size,
                    r.instrs,
                    r.dep
                )
            } else if r.instrs == default {
                writeln!(out, "{lead} {:08x},{}", r.va.raw(), r.size)
            } else {
                writeln!(out, "{lead} {:08x},{},{}", r.va.raw(), r.size, r.instrs)
            }
        }
        Event::Compute { instrs } => writeln!(out, "@compute {instrs}"),
        Event::ProcessCreate { pid } => writeln!(out, "@proc {pid}"),
        Event::Fork { parent, child } => writeln!(out, "@fork {parent} {child}"),
        Event::Exec { pid } => writeln!(out, "@exec {pid}"),
        Event::Exit { pid } => writeln!(out, "@exit {pid}"),
        Event::Switch { pid } => writeln!(out, "@switch {pid}"),
        Event::ThreadCreate { pid, tid } => writeln!(out, "@thread_create {pid} {tid}"),
        Event::ThreadExit { pid, tid } => writeln!(out, "@thread_exit {pid} {tid}"),
        Event::Thread { pid, tid } => writeln!(out, "@thread {pid} {tid}"),
        Event::Mmap(ref w) => {
            let Mmap {
                start,
                len,
                prot,
                flags,
            } = **w;
            writeln!(
                out,
                "@mmap {:#x} {len:#x} {} {}",
                start.raw(),
                prot_text(prot),
                flags_text(flags)
            )
        }
        Event::Munmap(ref w) => {
            let Munmap { start, len } = **w;
            writeln!(out, "@munmap {:#x} {len:#x}", start.raw())
        }
        Event::Mprotect(ref w) => {
            let Mprotect { start, len, prot } = **w;
            writeln!(
                out,
                "@mprotect {:#x} {len:#x} {}",
                start.raw(),
                prot_text(prot)
            )
        }
        Event::Mremap(ref w) => {
            let Mremap {
                old,
                old_len,
                new,
                new_len,
            } = **w;
            writeln!(
                out,
                "@mremap {:#x} {old_len:#x} {:#x} {new_len:#x}",
                old.raw(),
                new.raw()
            )
        }
        Event::Madvise(ref w) => {
            let Madvise { start, len, advice } = **w;
            writeln!(
                out,
                "@madvise {:#x} {len:#x} {}",
                start.raw(),
                advice_text(advice)
            )
        }
        Event::Brk { end } => writeln!(out, "@brk {:#x}", end.raw()),
        Event::Phase { id } => writeln!(out, "@phase {id}"),
    }
}

/// Writes a text trace, compressed as its file name says (`.gz`, `.zst`, `.xz`) or plain.
pub struct LackeyWriter {
    path: String,
    out: CompressedWriter,
    events: u64,
}

impl LackeyWriter {
    /// Creates (or truncates) `path`.
    pub fn create(path: &str) -> Result<LackeyWriter> {
        Ok(LackeyWriter {
            path: path.to_string(),
            out: CompressedWriter::create(path, Compression::for_path(path))?,
            events: 0,
        })
    }

    /// Appends one event as a line.
    pub fn write(&mut self, e: &Event) -> Result<()> {
        write_line(&mut self.out, e).map_err(|err| Error::io(&self.path, err))?;
        self.events += 1;
        Ok(())
    }

    /// Appends a `# ...` comment line (readers skip it).
    pub fn comment(&mut self, text: &str) -> Result<()> {
        writeln!(self.out, "# {text}").map_err(|err| Error::io(&self.path, err))
    }

    /// Events written so far.
    pub fn events_written(&self) -> u64 {
        self.events
    }

    /// Ends the compressed stream and flushes the file.
    pub fn finish(self) -> Result<()> {
        self.out.finish().map_err(|e| Error::io(&self.path, e))
    }
}

/// Reads all of `r` (for tests of small inputs).
#[cfg(test)]
pub(crate) fn parse_all(text: &str) -> std::result::Result<Vec<Event>, String> {
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(e) = parse_line(line.as_bytes())? {
            out.push(e);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_line_round_trips() {
        let events = [
            Event::ProcessCreate { pid: 1 },
            Event::Fork {
                parent: 1,
                child: 2,
            },
            Event::Exec { pid: 2 },
            Event::Exit { pid: 2 },
            Event::Switch { pid: 1 },
            Event::mmap(
                Gva::new(0x7f00_0000_0000),
                0x10_0000,
                Prot::RW,
                MapFlags(MapFlags::HUGE | MapFlags::POPULATE | MapFlags::SHARED | 0x80),
            ),
            Event::munmap(Gva::new(0x1000), 0x2000),
            Event::mprotect(Gva::new(0x1000), 0x1000, Prot(5)),
            Event::mremap(Gva::new(0x1000), 0x1000, Gva::new(0x9000), 0x3000),
            Event::Brk {
                end: Gva::new(0x60_0000),
            },
            Event::Phase { id: 3 },
            Event::Compute { instrs: u64::MAX },
        ];
        let mut text = Vec::new();
        for e in &events {
            write_line(&mut text, e).unwrap();
        }
        let text = String::from_utf8(text).unwrap();
        assert_eq!(parse_all(&text).unwrap(), events, "{text}");
    }

    #[test]
    fn addresses_beyond_64_bits_are_refused() {
        assert!(parse_line(b" L 00000000ffffffffffffffff,8").is_ok());
        let e = parse_line(b" L 1ffffffffffffffff,8").unwrap_err();
        assert!(e.contains("does not fit in 64 bits"), "{e}");
    }
}
