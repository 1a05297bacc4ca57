//! Throughput of the trace writer and reader (not a timed test: run with
//! `cargo test --release -p vmmu-core --test trace_speed -- --ignored --nocapture`).
//!
//! Prints, for a few event streams: bytes per reference and write throughput at several zstd
//! levels and thread counts, and decode throughput on one core. `VMMU_LACKEY=FILE` adds a real
//! lackey trace (e.g. `valgrind --tool=lackey --trace-mem=yes --log-file=FILE gzip -c x`).

use std::time::Instant;
use vmmu_core::event::{AccessKind, Event, EventSource, MemRef};
use vmmu_core::trace::{self, TraceMeta, TraceWriter, WriterOptions};
use vmmu_core::{workload, Gva};

fn tmp(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("vmmu-trace-speed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name).to_str().unwrap().to_string()
}

fn drain(src: &mut dyn EventSource) -> Vec<Event> {
    let mut out = Vec::new();
    while src.next_batch(&mut out, 1 << 16).unwrap() > 0 {}
    out
}

/// A program-like stream: a loop of straight-line code with stack and array accesses.
fn program_like(n: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0u64;
    while out.len() < n {
        for k in 0..12u64 {
            out.push(Event::Ref(MemRef {
                va: Gva::new(0x40_1000 + 4 * k),
                kind: AccessKind::Fetch,
                size: 4,
                instrs: 1,
                dep: 0,
            }));
            if k % 3 == 0 {
                out.push(Event::Ref(MemRef {
                    va: Gva::new(0x7ffe_0000_0f00 - 8 * (k % 4)),
                    kind: AccessKind::Load,
                    size: 8,
                    instrs: 0,
                    dep: 0,
                }));
            }
            if k == 7 {
                out.push(Event::Ref(MemRef {
                    va: Gva::new(0x60_0000 + 8 * (i % (1 << 20))),
                    kind: AccessKind::Store,
                    size: 8,
                    instrs: 0,
                    dep: 0,
                }));
            }
        }
        i += 1;
    }
    out.truncate(n);
    out
}

/// CPU time of this thread in seconds (the machine may be shared: wall clock alone misleads).
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Decoded events and the best rate of three runs, in M events per CPU second.
fn decode_rate(path: &str) -> (u64, f64) {
    let mut best = f64::MAX;
    let mut n = 0;
    for _ in 0..3 {
        let t = thread_cpu();
        let mut r = trace::open(path).unwrap();
        let mut buf = Vec::with_capacity(1 << 16);
        n = 0;
        loop {
            buf.clear();
            let k = r.next_batch(&mut buf, 1 << 16).unwrap();
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        best = best.min(thread_cpu() - t);
    }
    (n, n as f64 / best / 1e6)
}

fn measure(label: &str, events: &[Event]) {
    println!("== {label}: {} events", events.len());
    for (level, threads) in [(1, 0), (1, 1), (3, 0), (3, 1), (3, 2), (9, 1), (-3, 1)] {
        let path = tmp("speed.vtrace");
        let opts = WriterOptions {
            level,
            threads,
            ..WriterOptions::default()
        };
        let t = Instant::now();
        let mut w = TraceWriter::create_with(&path, TraceMeta::default(), opts).unwrap();
        for chunk in events.chunks(1 << 16) {
            w.write_batch(chunk).unwrap();
        }
        let s = w.finish().unwrap();
        let secs = t.elapsed().as_secs_f64();
        let (n, rate) = decode_rate(&path);
        assert_eq!(n, events.len() as u64);
        println!(
            "level {level:>3} threads {threads}: {:>6.3} bytes/ref, write {:>6.1} M ev/s wall ({:>6.1} MB/s out), decode {:>6.1} M ev/s per CPU s",
            s.bytes as f64 / s.refs.max(1) as f64,
            events.len() as f64 / secs / 1e6,
            s.bytes as f64 / secs / 1e6,
            rate
        );
    }
}

#[test]
#[ignore = "a measurement, not a test: run in release with --ignored --nocapture"]
fn trace_throughput() {
    measure(
        "stride:footprint=1G,stride=64 (make bench's stream)",
        &drain(
            workload::open("stride:footprint=1G,refs=20M,stride=64")
                .unwrap()
                .as_mut(),
        ),
    );
    measure("program-like loop", &program_like(20_000_000));
    measure(
        "random:footprint=1G",
        &drain(
            workload::open("random:footprint=1G,refs=5M")
                .unwrap()
                .as_mut(),
        ),
    );
    if let Ok(path) = std::env::var("VMMU_LACKEY") {
        let events = drain(trace::open(&path).unwrap().as_mut());
        let text = std::fs::metadata(&path).unwrap().len();
        println!(
            "(lackey text: {:.2} bytes/ref)",
            text as f64 / events.len() as f64
        );
        measure(&format!("real lackey trace {path}"), &events);
    }
}

/// Decoding alone, for a profiler: `VMMU_BATCH` events per batch (default 4096).
#[test]
#[ignore = "a measurement, not a test: run in release with --ignored --nocapture"]
fn decode_throughput() {
    let batch: usize = std::env::var("VMMU_BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(4096);
    let path = tmp("decode.vtrace");
    let events = program_like(20_000_000);
    let mut w = TraceWriter::create(&path, TraceMeta::default()).unwrap();
    w.write_batch(&events).unwrap();
    w.finish().unwrap();
    let mut buf = Vec::with_capacity(batch);
    for _ in 0..3 {
        let t = thread_cpu();
        let wall = Instant::now();
        let mut r = trace::open(&path).unwrap();
        let mut n = 0u64;
        loop {
            buf.clear();
            let k = r.next_batch(&mut buf, batch).unwrap();
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        println!(
            "decode, batch {batch}: {:.1} M ev/s per CPU s, {:.1} M ev/s wall",
            n as f64 / (thread_cpu() - t) / 1e6,
            n as f64 / wall.elapsed().as_secs_f64() / 1e6
        );
    }
}

/// Generator throughput: references per CPU second of each generator, batches of 4096.
#[test]
#[ignore = "a measurement, not a test: run in release with --ignored --nocapture"]
fn generator_throughput() {
    for spec in [
        "stream:refs=50M",
        "stream:refs=50M,write_ratio=0",
        "stride:refs=50M",
        "random:refs=50M,footprint=4G",
        "pointer-chase:refs=20M,dist=hotcold",
        "pointer-chase:refs=20M",
        "phases:refs=50M,period=1M",
    ] {
        let mut src = workload::open(spec).unwrap();
        let mut buf = Vec::with_capacity(4096);
        let t = thread_cpu();
        let mut n = 0u64;
        loop {
            buf.clear();
            let k = src.next_batch(&mut buf, 4096).unwrap();
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        let secs = thread_cpu() - t;
        println!(
            "{spec:<40} {:>7.1} M refs/s per CPU s ({:.2} ns/ref)",
            n as f64 / secs / 1e6,
            secs * 1e9 / n as f64
        );
    }
}
