//! The text format: lackey lines as Valgrind prints them, `@` event lines, compression detected
//! by magic bytes, and malformed lines named by number.

use std::io::Write;
use vmmu_core::event::{AccessKind, Event, MapFlags, MemRef, Prot};
use vmmu_core::trace::{self, Compression, LackeyReader};
use vmmu_core::{Error, Gva};

/// A scratch file in Cargo's temporary directory for integration tests (under `target/`), by a
/// fixed name: each run overwrites the last run's files instead of leaving more in `/tmp`.
fn tmp(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("trace-lackey");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_str().unwrap().to_string()
}

fn read(path: &str) -> vmmu_core::Result<Vec<Event>> {
    let mut src = trace::open(path)?;
    let mut out = Vec::new();
    while src.next_batch(&mut out, 3)? > 0 {}
    Ok(out)
}

fn read_text(name: &str, text: &str) -> vmmu_core::Result<Vec<Event>> {
    let path = tmp(name);
    std::fs::write(&path, text).unwrap();
    read(&path)
}

fn r(kind: AccessKind, va: u64, size: u8, instrs: u32) -> Event {
    Event::Ref(MemRef {
        va: Gva::new(va),
        kind,
        size,
        instrs,
        dep: 0,
    })
}

/// The start of a real `valgrind --tool=lackey --trace-mem=yes` log, as printed.
const SNIPPET: &str = "\
==27965== Lackey, an example Valgrind tool
==27965== Copyright (C) 2002-2017, and GNU GPL'd, by Nicholas Nethercote.
==27965== Using Valgrind-3.19.0 and LibVEX; rerun with -h for copyright info
==27965== Command: gzip -c /tmp/in.txt
==27965== Parent PID: 27961
==27965==
I  04020ca1,2
I  04020ca3,3
 S 1ffefff8c0,8
I  04020ca6,4
 L 1ffefff8b8,8
 M 0402d4a8,4
I  04020caa,7\r
@mmap 0x7f0000000000 0x100000 rw- anon,huge

==27965== 
==27965== Counted 1 call to main()
";

#[test]
fn a_lackey_snippet_gives_exact_events() {
    use AccessKind::*;
    let events = read_text("snippet.lackey", SNIPPET).unwrap();
    assert_eq!(
        events,
        [
            r(Fetch, 0x0402_0ca1, 2, 1),
            r(Fetch, 0x0402_0ca3, 3, 1),
            r(Store, 0x1f_feff_f8c0, 8, 0),
            r(Fetch, 0x0402_0ca6, 4, 1),
            r(Load, 0x1f_feff_f8b8, 8, 0),
            r(Modify, 0x0402_d4a8, 4, 0),
            r(Fetch, 0x0402_0caa, 7, 1),
            Event::mmap(
                Gva::new(0x7f00_0000_0000),
                0x10_0000,
                Prot::RW,
                MapFlags(MapFlags::HUGE)
            ),
        ]
    );
}

#[test]
fn valgrind_lines_comments_and_blank_lines_carry_no_event() {
    let skipped = "==1== hello\n--1-- debug\n# comment\n\n   \n\t\n==1==\n";
    let text = format!("{skipped}I  00001000,4\n{skipped}");
    assert_eq!(
        read_text("skip.lackey", &text).unwrap(),
        [r(AccessKind::Fetch, 0x1000, 4, 1)]
    );
    // With nothing else, the file holds no event at all: an error, not an empty run.
    let (line, reason) = line_error(skipped);
    assert_eq!(line, 7);
    assert!(reason.contains("no event"), "{reason}");
}

#[test]
fn gzip_zstd_and_xz_text_are_detected_by_their_bytes() {
    let want = read_text("plain.txt", SNIPPET).unwrap();
    // Names say nothing: the content decides.
    let gz = tmp("gz.trace");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(SNIPPET.as_bytes()).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let zst = tmp("zst.trace");
    std::fs::write(&zst, zstd::encode_all(SNIPPET.as_bytes(), 3).unwrap()).unwrap();
    let xz = tmp("xz.trace");
    let mut e = xz2::write::XzEncoder::new(Vec::new(), 1);
    e.write_all(SNIPPET.as_bytes()).unwrap();
    std::fs::write(&xz, e.finish().unwrap()).unwrap();
    assert_eq!(read(&gz).unwrap(), want);
    assert_eq!(read(&zst).unwrap(), want);
    assert_eq!(read(&xz).unwrap(), want);
    assert_eq!(trace::info(&xz, &mut |_| true).unwrap().compression, "xz");
    assert_eq!(
        LackeyReader::open(&gz).unwrap().compression(),
        Compression::Gzip
    );
    assert_eq!(
        LackeyReader::open(&zst).unwrap().compression(),
        Compression::Zstd
    );
    assert_eq!(trace::info(&gz, &mut |_| true).unwrap().compression, "gzip");
}

#[test]
fn concatenated_gzip_members_read_as_one_stream() {
    let mut bytes = Vec::new();
    for part in ["I  00001000,4\n", " L 00002000,8\n"] {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(part.as_bytes()).unwrap();
        bytes.extend(e.finish().unwrap());
    }
    let path = tmp("multi.gz");
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(read(&path).unwrap().len(), 2);
}

/// The line number and reason of the error reading `text` gives.
fn line_error(text: &str) -> (u64, String) {
    // A file of its own per call: tests run in parallel threads of one process.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    match read_text(&format!("bad-{n}.lackey"), text) {
        Err(Error::TraceLine { line, reason, path }) => {
            assert!(path.ends_with(".lackey"));
            (line, reason)
        }
        other => panic!("{text:?}: {other:?}"),
    }
}

#[test]
fn a_malformed_line_is_named_by_its_number() {
    let good = "==1== x\nI  00400000,4\n\n L 00001000,8\n";
    let cases: &[(&str, &str)] = &[
        (
            "X  00400000,4",
            "expected `I|L|S|M ADDR,SIZE` or an `@` event line, found `X  00400000,4`",
        ),
        (" L 00001000", "expected `I|L|S|M ADDR,SIZE`"),
        (" L00001000,8", "expected `I|L|S|M ADDR,SIZE`"),
        (" L 0000g000,8", "hexadecimal address"),
        (" L 1ffffffffffffffff,8", "does not fit in 64 bits"),
        (" L 00001000,0", "access size 0 is out of range"),
        (" L 00001000,256", "access size 256 is out of range"),
        (" L 00001000,x", "decimal access size"),
        (" L 00001000,8,5000000000", "instruction count"),
        (" L 00001000,8,1,2", "dependence `d1`..`d255`"),
        (" L 00001000,8,1,d0", "dependence `d1`..`d255`"),
        (" L 00001000,8,1,d256", "dependence `d1`..`d255`"),
        (" L 00001000,8,1,d1,5", "ADDR,SIZE[,INSTRS]"),
        ("I  00400000,4,1,d1", "a data reference"),
        ("@madvise 0x1000 0x1000 sparkly", "unknown advice `sparkly`"),
        ("@madvise 0x1000 0x1000 300", "not a MADV_* value"),
        (
            "@mmap 0x1000 0x1000 rw-",
            "expected `@mmap START LEN PROT FLAGS`",
        ),
        ("@mmap 0x1000 0x1000 rwz anon", "protection `rwz`"),
        (
            "@mmap 0x1000 0x1000 rw- anon,sparkly",
            "unknown mapping flag `sparkly`",
        ),
        ("@fork 1", "expected `@fork PARENT CHILD`"),
        ("@proc 99999999999", "does not fit in 32 bits"),
        ("@brk zz", "`zz` is not a number"),
        ("@teleport 1", "unknown event `@teleport`"),
    ];
    for (bad, expected) in cases {
        let text = format!("{good}{bad}\nI  00400004,4\n");
        let (line, reason) = line_error(&text);
        assert_eq!(line, 5, "{bad}");
        assert!(
            reason.contains(expected),
            "{bad}: `{reason}` lacks `{expected}`"
        );
    }
}

#[test]
fn the_error_message_names_file_and_line() {
    let path = tmp("msg.lackey");
    std::fs::write(&path, "I  00400000,4\nbogus\n").unwrap();
    let msg = read(&path).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!("{path}:2: expected `I|L|S|M ADDR,SIZE` or an `@` event line, found `bogus`")
    );
}

#[test]
fn a_corrupt_compressed_stream_is_a_line_error() {
    let mut bytes = zstd::encode_all(SNIPPET.repeat(200).as_bytes(), 3).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    bytes.truncate(bytes.len() - 3);
    let path = tmp("broken.zst");
    std::fs::write(&path, bytes).unwrap();
    assert!(matches!(read(&path), Err(Error::TraceLine { .. })));
}

#[test]
fn lackey_lines_round_trip_through_the_text_writer() {
    let path = tmp("written.lackey");
    let events = read_text("src.lackey", SNIPPET).unwrap();
    let mut w = trace::LackeyWriter::create(&path).unwrap();
    for e in &events {
        w.write(e).unwrap();
    }
    w.finish().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("I  04020ca1,2\nI  04020ca3,3\n S 1ffefff8c0,8\n"),
        "{text}"
    );
    assert_eq!(read(&path).unwrap(), events);
}
