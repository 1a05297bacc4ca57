//! Round trips: generator → vtrace → events, random event sequences → vtrace → events,
//! lackey text → vtrace → lackey text, and what `info` and `convert` report.

use proptest::prelude::*;
use vmmu_core::event::{AccessKind, Advice, Event, EventSource, MapFlags, MemRef, Prot};
use vmmu_core::trace::{self, Format, TraceMeta, TraceWriter, VtraceReader, WriterOptions};
use vmmu_core::{workload, Gva};

/// A scratch file in Cargo's temporary directory for integration tests (under `target/`), by a
/// fixed name: each run overwrites the last run's files instead of leaving more in `/tmp`.
fn tmp(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("trace-roundtrip");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_str().unwrap().to_string()
}

fn drain(src: &mut dyn EventSource) -> Vec<Event> {
    let mut out = Vec::new();
    while src.next_batch(&mut out, 1000).unwrap() > 0 {}
    out
}

fn write(path: &str, events: &[Event], opts: WriterOptions) -> trace::TraceSummary {
    let mut w = TraceWriter::create_with(path, TraceMeta::default(), opts).unwrap();
    // Half one by one, half in a batch: both paths are used.
    let (a, b) = events.split_at(events.len() / 2);
    for e in a {
        w.write(e).unwrap();
    }
    w.write_batch(b).unwrap();
    assert_eq!(w.events_written(), events.len() as u64);
    w.finish().unwrap()
}

fn small_chunks(threads: usize) -> WriterOptions {
    WriterOptions {
        level: 1,
        threads,
        chunk_bytes: 4096,
    }
}

#[test]
fn every_generator_round_trips_through_vtrace() {
    for spec in [
        "stream:refs=50K,arrays=3",
        "stride:refs=50K,stride=72",
        "random:refs=50K,footprint=100T",
        "pointer-chase:refs=50K,dist=hotcold",
        "phases:refs=50K,period=7K,write_ratio=0.5",
    ] {
        let events = drain(workload::open(spec).unwrap().as_mut());
        for threads in [0, 2] {
            let path = tmp("gen.vtrace");
            let summary = write(&path, &events, small_chunks(threads));
            assert_eq!(summary.events, events.len() as u64);
            assert_eq!(summary.bytes, std::fs::metadata(&path).unwrap().len());
            let mut r = trace::open(&path).unwrap();
            assert_eq!(r.len_hint(), Some(events.len() as u64));
            assert_eq!(drain(r.as_mut()), events, "{spec}, {threads} threads");
        }
    }
}

#[test]
fn output_is_byte_identical_whatever_the_thread_count() {
    let events = drain(workload::open("random:refs=100K").unwrap().as_mut());
    let mut files = Vec::new();
    for threads in [0, 1, 3] {
        let path = tmp(&format!("threads{threads}.vtrace"));
        write(&path, &events, small_chunks(threads));
        files.push(std::fs::read(&path).unwrap());
    }
    assert_eq!(files[0], files[1]);
    assert_eq!(files[0], files[2]);
}

fn any_addr() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(u64::MAX - 7),
        Just(1u64 << 63),
        Just((1u64 << 47) - 8),
        Just(0xffff_8000_0000_0000u64),
        0x40_0000u64..0x50_0000,
        any::<u64>(),
    ]
}

fn any_event() -> impl Strategy<Value = Event> {
    let kind = prop_oneof![
        Just(AccessKind::Load),
        Just(AccessKind::Store),
        Just(AccessKind::Modify),
        Just(AccessKind::Fetch),
    ];
    let r = (
        any_addr(),
        kind,
        any::<u8>(),
        prop_oneof![0u32..4, any::<u32>()],
        prop_oneof![3 => Just(0u8), 1 => any::<u8>()],
    )
        .prop_map(|(va, kind, size, instrs, dep)| {
            Event::Ref(MemRef {
                va: Gva::new(va),
                kind,
                size,
                instrs,
                dep,
            })
        });
    prop_oneof![
        6 => r,
        1 => any::<u64>().prop_map(|instrs| Event::Compute { instrs }),
        1 => any::<u32>().prop_map(|pid| Event::ProcessCreate { pid }),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(parent, child)| Event::Fork { parent, child }),
        1 => any::<u32>().prop_map(|pid| Event::Exec { pid }),
        1 => any::<u32>().prop_map(|pid| Event::Exit { pid }),
        1 => any::<u32>().prop_map(|pid| Event::Switch { pid }),
        1 => (any_addr(), any::<u64>(), any::<u8>(), any::<u8>()).prop_map(|(s, len, p, f)| Event::mmap(Gva::new(s), len, Prot(p), MapFlags(f))),
        1 => (any_addr(), any::<u64>()).prop_map(|(s, len)| Event::munmap(Gva::new(s), len)),
        1 => (any_addr(), any::<u64>(), any::<u8>()).prop_map(|(s, len, p)| Event::mprotect(Gva::new(s), len, Prot(p))),
        1 => (any_addr(), any::<u64>(), any_addr(), any::<u64>()).prop_map(|(o, ol, n, nl)| Event::mremap(Gva::new(o), ol, Gva::new(n), nl)),
        1 => any_addr().prop_map(|e| Event::Brk { end: Gva::new(e) }),
        1 => (any_addr(), any::<u64>(), any::<u8>()).prop_map(|(s, len, a)| Event::madvise(Gva::new(s), len, Advice(a))),
        1 => any::<u32>().prop_map(|id| Event::Phase { id }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_event_sequence_round_trips(events in prop::collection::vec(any_event(), 0..2000),
                                      chunk in prop_oneof![Just(64usize), Just(1000), Just(1 << 20)],
                                      threads in 0usize..3) {
        let path = tmp(&format!("prop-{threads}.vtrace"));
        let opts = WriterOptions { level: 1, threads, chunk_bytes: chunk };
        write(&path, &events, opts);
        let mut r = VtraceReader::open(&path).unwrap();
        let back = drain(&mut r);
        prop_assert_eq!(back, events);
        prop_assert!(!r.is_truncated());
    }
}

const LACKEY: &str = "\
@proc 1
@mmap 0x400000 0x2000 r-x file
@mmap 0x7ffc00000000 0x21000 rw- anon,stack
@brk 0x602000
I  00400000,3
 L 7ffc00000ff8,8
I  00400003,5
 S 7ffc00000ff0,8
 M 00601000,4
I  00400008,2
@compute 100
@fork 1 2
@switch 2
@exec 2
@mmap 0x7f0000000000 0x200000 rw- anon,huge,populate
 L 7f0000000000,8,4
 L 7f0000000008,8,0,d1
@madvise 0x7f0000000000 0x200000 hugepage
@madvise 0x7f0000000000 0x1000 dontneed
@madvise 0x7f0000000000 0x1000 77
@mprotect 0x7f0000000000 0x1000 r--
@mremap 0x7f0000000000 0x200000 0x7e0000000000 0x400000
@munmap 0x7e0000000000 0x400000
@phase 1
@exit 2
@switch 1
I  ffffffffff600000,15
 L ffffffffffffffff,1
@exit 1
";

#[test]
fn lackey_text_to_vtrace_and_back_is_identical() {
    let txt = tmp("in.lackey");
    std::fs::write(&txt, LACKEY).unwrap();
    let bin = tmp("mid.vtrace");
    let info = trace::convert(&txt, &bin, Some(Format::Vtrace), &mut |_| true).unwrap();
    assert_eq!(info.format, "vtrace");
    assert_eq!(info.refs, 10);
    let meta = info.meta.as_ref().unwrap();
    assert!(
        meta.has_os_events,
        "the writer marks a trace with OS events"
    );
    assert!(meta.source.contains("lackey text"));
    // The header itself was corrected, not only the report.
    let r = VtraceReader::open(&bin).unwrap();
    assert!(r.meta().has_os_events);
    assert_eq!(r.flags() & 1, 1);
    let out = tmp("out.lackey");
    trace::convert(&bin, &out, Some(Format::Lackey), &mut |_| true).unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), LACKEY);
}

#[test]
fn text_export_can_be_compressed_by_name() {
    let txt = tmp("plain.lackey");
    std::fs::write(&txt, LACKEY).unwrap();
    for (name, compression) in [
        ("out.lackey.gz", "gzip"),
        ("out.lackey.zst", "zstd"),
        ("out.txt.xz", "xz"),
    ] {
        let out = tmp(name);
        let info = trace::convert(&txt, &out, None, &mut |_| true).unwrap();
        assert_eq!((info.format, info.compression), ("lackey", compression));
        let raw = std::fs::read(&out).unwrap();
        assert_ne!(raw, LACKEY.as_bytes(), "{name} is compressed");
        let back = drain(trace::open(&out).unwrap().as_mut());
        let want = drain(trace::open(&txt).unwrap().as_mut());
        assert_eq!(back, want, "{name}");
        assert_eq!(
            trace::info(&out, &mut |_| true).unwrap().compression,
            compression
        );
    }
}

#[test]
fn info_counts_what_the_trace_holds() {
    let txt = tmp("info.lackey");
    std::fs::write(&txt, LACKEY).unwrap();
    let bin = tmp("info.vtrace");
    trace::convert(&txt, &bin, Some(Format::Vtrace), &mut |_| true).unwrap();
    for path in [&txt, &bin] {
        let mut calls = 0;
        let i = trace::info(path, &mut |_| {
            calls += 1;
            true
        })
        .unwrap();
        assert!(calls >= 1);
        assert_eq!(i.events, 29);
        assert_eq!(i.refs, 10);
        let k = i.refs_by_kind;
        assert_eq!((k.fetch, k.load, k.store, k.modify), (4, 4, 1, 1));
        // 4 fetches × 1 + 4 on the annotated load + 100 computed.
        assert_eq!(i.instructions, 108);
        assert_eq!(i.os_events["mmap"], 3);
        assert_eq!(i.os_events["switch"], 2);
        assert_eq!(i.os_events["compute"], 1);
        assert_eq!(i.os_events["phase"], 1);
        assert_eq!(i.os_events["madvise"], 3);
        assert_eq!(i.processes, 2);
        assert_eq!(i.pages_4k, 6);
        assert!(!i.truncated);
        assert!(i.bytes_per_ref > 0.0);
    }
    let i = trace::info(&bin, &mut |_| true).unwrap();
    assert_eq!(
        (i.format, i.version, i.compression),
        ("vtrace", Some(2), "zstd")
    );
    let i = trace::info(&txt, &mut |_| true).unwrap();
    assert_eq!(
        (i.format, i.version, i.compression),
        ("lackey", None, "none")
    );
    assert!(i.meta.is_none());
}

#[test]
fn a_progress_callback_can_stop_info() {
    let bin = tmp("stop.vtrace");
    let events = drain(workload::open("random:refs=200K").unwrap().as_mut());
    write(&bin, &events, WriterOptions::default());
    // Called at least at the end: stopping there still reports the interruption.
    let err = trace::info(&bin, &mut |_| false).unwrap_err();
    assert!(matches!(
        err,
        vmmu_core::Error::Interrupted { events: 200_002 }
    ));
}

#[test]
fn metadata_survives_the_header() {
    let path = tmp("meta.vtrace");
    let meta = TraceMeta {
        description: "gzip -c \"5 MB\" \u{e9}".into(),
        source: "vmmu record 0.1.0".into(),
        has_os_events: true,
        dependences: true,
    };
    let w = TraceWriter::create(&path, meta.clone()).unwrap();
    w.finish().unwrap();
    let r = VtraceReader::open(&path).unwrap();
    assert_eq!(r.meta(), &meta);
    assert!(r.tracks_dependences());
    assert_eq!(r.version(), 2);
    assert_eq!(trace::detect(&path).unwrap(), Format::Vtrace);
}

#[test]
fn formats_parse_by_name() {
    assert_eq!("vtrace".parse::<Format>().unwrap(), Format::Vtrace);
    assert_eq!("text".parse::<Format>().unwrap(), Format::Lackey);
    assert_eq!("Lackey".parse::<Format>().unwrap(), Format::Lackey);
    assert_eq!("champsim".parse::<Format>().unwrap(), Format::ChampSim);
    let err = "csv".parse::<Format>().unwrap_err().to_string();
    assert!(err.contains("unknown trace format `csv`"), "{err}");
    assert_eq!(Format::Lackey.name(), "lackey");
}

#[test]
fn convert_refuses_to_overwrite_its_source() {
    let txt = tmp("self.lackey");
    std::fs::write(&txt, LACKEY).unwrap();
    assert!(trace::convert(&txt, &txt, Some(Format::Lackey), &mut |_| true).is_err());
    assert_eq!(std::fs::read_to_string(&txt).unwrap(), LACKEY);
}
