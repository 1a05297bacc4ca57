//! Damaged `.vtrace` files: every kind of damage is a `TraceCorrupt` naming the byte offset of
//! the structure found bad, after the events before it; a missing footer is a readable trace
//! marked truncated; nothing panics.

use proptest::prelude::*;
use vmmu_core::event::{Event, EventSource};
use vmmu_core::trace::{self, TraceMeta, TraceWriter, VtraceReader, WriterOptions};
use vmmu_core::{workload, Error};

/// A scratch file in Cargo's temporary directory for integration tests (under `target/`), by a
/// fixed name: each run overwrites the last run's files instead of leaving more in `/tmp`.
fn tmp(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("trace-corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_str().unwrap().to_string()
}

fn events() -> Vec<Event> {
    let mut src = workload::open("random:refs=30K,footprint=1G").unwrap();
    let mut out = Vec::new();
    while src.next_batch(&mut out, 4096).unwrap() > 0 {}
    out
}

/// A trace of `events()` in chunks of about 64 KiB raw (a few chunks), as bytes. Each test
/// thread writes its own file: tests run in parallel, and a shared name was a race.
fn good_trace() -> Vec<u8> {
    let path = tmp(&format!("good-{:?}.vtrace", std::thread::current().id()));
    let opts = WriterOptions {
        level: 3,
        threads: 0,
        chunk_bytes: 64 << 10,
    };
    let mut w = TraceWriter::create_with(&path, TraceMeta::default(), opts).unwrap();
    w.write_batch(&events()).unwrap();
    w.finish().unwrap();
    std::fs::read(&path).unwrap()
}

/// Offsets of the header end and of every chunk, and where the footer starts.
fn layout(b: &[u8]) -> (u64, Vec<u64>, u64) {
    let meta_len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as u64;
    let header = 16 + meta_len + 4;
    let mut chunks = Vec::new();
    let mut at = header as usize;
    while &b[at..at + 4] == b"VTCK" {
        chunks.push(at as u64);
        let comp = u32::from_le_bytes(b[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 28 + comp;
    }
    assert_eq!(&b[at..at + 4], b"VTFT");
    (header, chunks, at as u64)
}

/// Reads `bytes` as a trace: the events delivered before the end or the error, and the result.
fn read_bytes(name: &str, bytes: &[u8]) -> (Vec<Event>, vmmu_core::Result<VtraceReader>) {
    let path = tmp(name);
    std::fs::write(&path, bytes).unwrap();
    let mut r = match VtraceReader::open(&path) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Err(e)),
    };
    let mut out = Vec::new();
    loop {
        match r.next_batch(&mut out, 1000) {
            Ok(0) => return (out, Ok(r)),
            Ok(_) => {}
            Err(e) => return (out, Err(e)),
        }
    }
}

fn corrupt_offset(res: vmmu_core::Result<VtraceReader>) -> (u64, String) {
    match res {
        Err(Error::TraceCorrupt { offset, reason, .. }) => (offset, reason),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("damage not detected"),
    }
}

#[test]
fn the_good_trace_reads_whole() {
    let b = good_trace();
    let (_, chunks, _) = layout(&b);
    assert!(chunks.len() >= 3, "{} chunks", chunks.len());
    let (ev, res) = read_bytes("whole.vtrace", &b);
    assert_eq!(ev, events());
    assert!(!res.unwrap().is_truncated());
}

#[test]
fn a_truncated_header_names_the_missing_field() {
    let b = good_trace();
    let (header, _, _) = layout(&b);
    // (cut at, offset named)
    for (cut, offset) in [
        (3u64, 0u64),
        (8, 8),
        (11, 10),
        (14, 12),
        (16, 16),
        (header - 6, 16),
        (header - 2, header - 4),
    ] {
        let (_, res) = read_bytes("cut-header.vtrace", &b[..cut as usize]);
        let (got, reason) = corrupt_offset(res);
        assert_eq!(got, offset, "cut at {cut}: {reason}");
        assert!(reason.contains("truncated"), "{reason}");
    }
    // And `trace::open` (format detection) agrees for a stub of the magic.
    let path = tmp("stub.vtrace");
    std::fs::write(&path, &b[..5]).unwrap();
    assert!(matches!(
        trace::open(&path).err(),
        Some(Error::TraceCorrupt { offset: 0, .. })
    ));
}

#[test]
fn a_flipped_byte_in_a_chunk_names_the_chunk() {
    let b = good_trace();
    let (_, chunks, _) = layout(&b);
    let second = chunks[1];
    // In the chunk header (lengths, count, checksum) and in the compressed data.
    for at in [
        second + 5,
        second + 9,
        second + 13,
        second + 20,
        second + 26,
        second + 100,
        chunks[2] - 1,
    ] {
        let mut bad = b.clone();
        bad[at as usize] ^= 0x10;
        let (ev, res) = read_bytes("flip.vtrace", &bad);
        let (offset, reason) = corrupt_offset(res);
        assert_eq!(offset, second, "flip at {at}: {reason}");
        // Everything of the first chunk came out first, and nothing of the bad one.
        let first_len = ev.len();
        assert_eq!(ev, events()[..first_len]);
        assert!(first_len > 0);
    }
    // A flipped magic is named too.
    let mut bad = b.clone();
    bad[second as usize] ^= 1;
    let (offset, reason) = corrupt_offset(read_bytes("flip-magic.vtrace", &bad).1);
    assert_eq!(offset, second);
    assert!(reason.contains("expected a chunk"), "{reason}");
}

#[test]
fn a_chunk_cut_in_half_is_corrupt_at_its_offset() {
    let b = good_trace();
    let (_, chunks, _) = layout(&b);
    let (start, end) = (chunks[1], chunks[2]);
    // The file ends in the middle of the second chunk.
    let half = ((start + end) / 2) as usize;
    let (ev, res) = read_bytes("half.vtrace", &b[..half]);
    let (offset, reason) = corrupt_offset(res);
    assert_eq!(offset, start);
    assert!(reason.contains("ends inside a chunk"), "{reason}");
    assert_eq!(ev, events()[..ev.len()]);
    // The middle of the chunk removed, the rest of the file kept.
    let mut spliced = b[..half].to_vec();
    spliced.extend_from_slice(&b[end as usize..]);
    let (offset, _) = corrupt_offset(read_bytes("spliced.vtrace", &spliced).1);
    assert_eq!(offset, start);
    // Cut inside a chunk header.
    let (offset, reason) = corrupt_offset(read_bytes("cut-ch.vtrace", &b[..start as usize + 10]).1);
    assert_eq!(offset, start);
    assert!(reason.contains("chunk header"), "{reason}");
}

#[test]
fn a_missing_footer_reads_to_the_last_chunk_and_reports_truncation() {
    let b = good_trace();
    let (_, chunks, footer) = layout(&b);
    // Cut at a chunk boundary: the writer was killed between chunks.
    for cut in [chunks[2], footer] {
        let (ev, res) = read_bytes("nofooter.vtrace", &b[..cut as usize]);
        let r = res.unwrap();
        assert!(r.is_truncated());
        assert_eq!(ev, events()[..ev.len()]);
        let path = tmp("nofooter.vtrace");
        let info = trace::info(&path, &mut |_| true).unwrap();
        assert!(info.truncated);
        assert_eq!(info.events, ev.len() as u64);
    }
}

#[test]
fn finish_truncated_marks_the_trace() {
    let path = tmp("crashed.vtrace");
    let mut w = TraceWriter::create(&path, TraceMeta::default()).unwrap();
    w.write_batch(&events()[..1000]).unwrap();
    let s = w.finish_truncated().unwrap();
    assert_eq!(s.events, 1000);
    let info = trace::info(&path, &mut |_| true).unwrap();
    assert!(info.truncated);
    assert_eq!(info.events, 1000);
}

#[test]
fn a_dropped_writer_keeps_its_events_without_a_footer() {
    let path = tmp("dropped.vtrace");
    {
        let mut w = TraceWriter::create(&path, TraceMeta::default()).unwrap();
        w.write_batch(&events()[..500]).unwrap();
    }
    let info = trace::info(&path, &mut |_| true).unwrap();
    assert!(info.truncated);
    assert_eq!(info.events, 500);
}

#[test]
fn footer_damage_and_trailing_bytes_are_corrupt() {
    let b = good_trace();
    let (_, _, footer) = layout(&b);
    let mut bad = b.clone();
    bad[footer as usize + 10] ^= 1;
    assert_eq!(
        corrupt_offset(read_bytes("footer.vtrace", &bad).1).0,
        footer
    );
    let mut long = b.clone();
    long.push(0);
    assert_eq!(
        corrupt_offset(read_bytes("trailing.vtrace", &long).1).0,
        b.len() as u64
    );
    let (offset, reason) = corrupt_offset(read_bytes("cut-footer.vtrace", &b[..b.len() - 3]).1);
    assert_eq!(offset, footer);
    assert!(reason.contains("footer"), "{reason}");
}

#[test]
fn a_newer_version_or_unknown_flag_is_refused() {
    let b = good_trace();
    let mut newer = b.clone();
    newer[8] = 3;
    let (offset, reason) = corrupt_offset(read_bytes("v3.vtrace", &newer).1);
    assert_eq!(offset, 8);
    assert!(reason.contains("version 3"), "{reason}");
    // Bits 0 (OS events) and 1 (dependences) are known; the next one and the top are not.
    for (at, bit) in [(10, 0x04u8), (11, 0x80)] {
        let mut flags = b.clone();
        flags[at] |= bit;
        assert_eq!(corrupt_offset(read_bytes("flags.vtrace", &flags).1).0, 10);
    }
}

/// Every single-byte damage (each position, three bit patterns) is either harmless or reported;
/// never a panic or a wrong event. Exhaustive, so the test is deterministic.
#[test]
fn damage_at_every_byte_is_reported_or_harmless() {
    let b = small_trace();
    let all = small_events();
    for at in 0..b.len() {
        for xor in [0x01u8, 0x80, 0xff] {
            let mut bad = b.clone();
            bad[at] ^= xor;
            let (ev, res) = read_bytes("sweep.vtrace", &bad);
            assert_eq!(
                &ev[..],
                &all[..ev.len().min(all.len())],
                "byte {at} ^ {xor:#x}"
            );
            if res.is_ok() {
                assert_eq!(
                    ev.len(),
                    all.len(),
                    "byte {at} ^ {xor:#x}: harmless but short"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any single damaged byte is either harmless or reported; never a panic or a wrong event.
    #[test]
    fn damage_anywhere_never_panics(pos in any::<prop::sample::Index>(), xor in 1u8..=255) {
        let b = small_trace();
        let mut bad = b.clone();
        let at = pos.index(bad.len());
        bad[at] ^= xor;
        let (ev, res) = read_bytes(&format!("fuzz-{:?}.vtrace", std::thread::current().id()), &bad);
        let all = small_events();
        prop_assert_eq!(&ev[..], &all[..ev.len().min(all.len())]);
        if res.is_ok() {
            // Only header metadata text can change harmlessly... and it is checksummed.
            prop_assert_eq!(ev.len(), all.len());
        }
    }
}

fn small_events() -> Vec<Event> {
    let mut src = workload::open("phases:refs=3000,period=500,footprint=1M").unwrap();
    let mut out = Vec::new();
    while src.next_batch(&mut out, 4096).unwrap() > 0 {}
    out
}

fn small_trace() -> Vec<u8> {
    let path = tmp(&format!("small-{:?}.vtrace", std::thread::current().id()));
    let opts = WriterOptions {
        level: 1,
        threads: 0,
        chunk_bytes: 2048,
    };
    let mut w = TraceWriter::create_with(&path, TraceMeta::default(), opts).unwrap();
    w.write_batch(&small_events()).unwrap();
    w.finish().unwrap();
    std::fs::read(&path).unwrap()
}
