//! ChampSim traces are detected by content and readable through `trace::open`, `info` and
//! `convert`, like the other formats; converting to ChampSim reports what the file holds (no
//! OS events), not what the source held.

use vmmu_core::event::{AccessKind, Event};
use vmmu_core::trace::{self, Format, TraceMeta, TraceWriter, VtraceReader};

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("champsim-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn drain(path: &str) -> Vec<Event> {
    let mut src = trace::open(path).unwrap();
    let mut buf = Vec::new();
    while src.next_batch(&mut buf, 64).unwrap() > 0 {}
    buf
}

fn kinds(events: &[Event]) -> Vec<AccessKind> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ref(r) => Some(r.kind),
            _ => None,
        })
        .collect()
}

#[test]
fn champsim_round_trips_through_detection_and_convert() {
    let dir = dir("rt");
    let text = dir.join("in.txt");
    // Two instructions: one with a load, one with a store.
    std::fs::write(
        &text,
        "I  00401000,4\n L 7ff000001000,8\nI  00401004,4\n S 7ff000002000,8\n",
    )
    .unwrap();
    let t = text.to_str().unwrap();
    for (name, compression) in [
        ("out.champsim", "none"),
        ("out.champsim.gz", "gzip"),
        ("out.champsimtrace.xz", "xz"),
        ("out.champsim.zst", "zstd"),
    ] {
        let c = dir.join(name);
        let c = c.to_str().unwrap();
        let info = trace::convert(t, c, None, &mut |_| true).unwrap();
        assert_eq!((info.format, info.compression), ("champsim", compression));
        assert_eq!(trace::detect(c).unwrap(), Format::ChampSim);
        let info = trace::info(c, &mut |_| true).unwrap();
        assert_eq!(info.compression, compression, "{name}");
        assert_eq!(info.refs_by_kind.fetch, 2);
        assert_eq!(info.refs_by_kind.load, 1);
        assert_eq!(info.refs_by_kind.store, 1);
        assert_eq!(
            kinds(&drain(c)),
            vec![
                AccessKind::Fetch,
                AccessKind::Load,
                AccessKind::Fetch,
                AccessKind::Store
            ]
        );
    }
    assert_eq!(
        trace::detect(t).unwrap(),
        Format::Lackey,
        "text is not mistaken for ChampSim"
    );
    std::fs::remove_dir_all(&dir).ok();
}

const WITH_OS_EVENTS: &str = "\
@proc 1
@mmap 0x7ff000000000 0x10000 rw- anon
@brk 0x602000
I  00401000,4
 L 7ff000001000,8
@mprotect 0x7ff000000000 0x1000 r--
I  00401004,4
 S 7ff000002000,8
@exit 1
";

#[test]
fn a_champsim_destination_reports_no_os_events_and_counts_what_it_dropped() {
    let dir = dir("os");
    let text = dir.join("in.txt");
    std::fs::write(&text, WITH_OS_EVENTS).unwrap();
    let t = text.to_str().unwrap();
    let cs = dir.join("out.champsim.xz");
    let c = cs.to_str().unwrap();
    let info = trace::convert(t, c, Some(Format::ChampSim), &mut |_| true).unwrap();
    assert!(info.os_events.is_empty(), "{:?}", info.os_events);
    assert_eq!(
        info.dropped_events,
        Some(5),
        "proc, mmap, brk, mprotect, exit"
    );
    assert_eq!(info.events, 4);
    assert_eq!(info.refs, 4);
    let meta = info.meta.as_ref().unwrap();
    assert!(!meta.has_os_events, "{meta:?}");
    // What the file holds, read back, is what the report said.
    let back = trace::info(c, &mut |_| true).unwrap();
    assert_eq!(back.events, info.events);
    assert!(back.os_events.is_empty());
    assert!(!back.meta.as_ref().unwrap().has_os_events);
    // The JSON of `vmmu trace convert` carries the drop count; `trace info` has no such key.
    let json = serde_json::to_value(&info).unwrap();
    assert_eq!(json["dropped_events"], 5);
    assert!(serde_json::to_value(&back)
        .unwrap()
        .get("dropped_events")
        .is_none());

    // ChampSim → vtrace: the header says no OS events, and so does `trace info`.
    let vt = dir.join("back.vtrace");
    let v = vt.to_str().unwrap();
    let info = trace::convert(c, v, None, &mut |_| true).unwrap();
    assert_eq!(info.format, "vtrace");
    assert!(info.os_events.is_empty());
    let r = VtraceReader::open(v).unwrap();
    assert_eq!(r.flags() & 1, 0, "the OS-events flag is clear");
    assert!(!r.meta().has_os_events);
    assert!(
        r.meta().source.contains("out.champsim.xz"),
        "{:?}",
        r.meta()
    );
    let again = trace::info(v, &mut |_| true).unwrap();
    assert!(again.os_events.is_empty());
    assert!(!again.meta.unwrap().has_os_events);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn more_data_references_than_a_record_holds_start_records_at_the_same_ip() {
    let dir = dir("split");
    let text = dir.join("in.txt");
    // Five distinct loads after one fetch: four fit, the fifth starts a record at the same ip.
    let mut s = String::from("I  00401000,4\n");
    for i in 1..=5 {
        s.push_str(&format!(" L 7ff00000{i}000,8\n"));
    }
    std::fs::write(&text, s).unwrap();
    let cs = dir.join("out.champsim");
    let c = cs.to_str().unwrap();
    let info = trace::convert(text.to_str().unwrap(), c, None, &mut |_| true).unwrap();
    // The summary counts what a reader gets: two fetches at 0x401000, five loads.
    assert_eq!(info.refs_by_kind.fetch, 2);
    assert_eq!(info.refs_by_kind.load, 5);
    assert_eq!(std::fs::metadata(c).unwrap().len(), 2 * 64);
    assert_eq!(trace::info(c, &mut |_| true).unwrap().events, info.events);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_large_conversion_to_champsim_keeps_every_record_in_order() {
    // More records than the writer gathers before one write (16 Ki), so the buffer is
    // written out several times mid-stream.
    let dir = dir("large");
    let vt = dir.join("in.vtrace");
    let v = vt.to_str().unwrap();
    let mut w = TraceWriter::create(v, TraceMeta::default()).unwrap();
    let n = 50_000u64;
    for i in 0..n {
        w.write(&Event::Ref(vmmu_core::MemRef {
            va: vmmu_core::Gva::new(0x400000 + 4 * i),
            kind: AccessKind::Fetch,
            size: 4,
            instrs: 1,
            dep: 0,
        }))
        .unwrap();
        w.write(&Event::Ref(vmmu_core::MemRef {
            va: vmmu_core::Gva::new(0x7ff0_0000_0000 + 8 * i),
            kind: AccessKind::Store,
            size: 8,
            instrs: 0,
            dep: 0,
        }))
        .unwrap();
    }
    w.finish().unwrap();
    let cs = dir.join("out.champsim.gz");
    let c = cs.to_str().unwrap();
    let info = trace::convert(v, c, None, &mut |_| true).unwrap();
    assert_eq!(info.refs, 2 * n);
    assert_eq!(info.dropped_events, Some(0));
    let back = drain(c);
    assert_eq!(back.len() as u64, 2 * n);
    for (i, pair) in back.chunks_exact(2).enumerate() {
        let i = i as u64;
        assert!(matches!(pair[0], Event::Ref(r) if r.va.raw() == 0x400000 + 4 * i));
        assert!(matches!(pair[1], Event::Ref(r) if r.va.raw() == 0x7ff0_0000_0000 + 8 * i));
    }
    std::fs::remove_dir_all(&dir).ok();
}
