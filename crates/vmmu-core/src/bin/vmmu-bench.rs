//! `make bench`: simulated references per second on one core, trace decoding speed and peak
//! memory. Figures are wall-clock on this machine; run on an idle machine for stable numbers.
//!
//! Each figure times only the reference phase: the set-up events (process creation, the
//! populated mmap) are simulated before the clock starts.

use std::time::Instant;
use vmmu_core::config;
use vmmu_core::event::Event;
use vmmu_core::sim::Simulator;
use vmmu_core::{trace, workload};

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Simulates `spec` under `overrides`; returns (references, seconds of the reference phase).
fn sim_refs(spec: &str, overrides: &[(&str, &str)]) -> (u64, f64) {
    let ov: Vec<(String, String)> = overrides
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let cfg = config::build("bhargava08", &ov).expect("bench config");
    let mut src = workload::open(spec).expect("bench workload");
    let mut sim = Simulator::new(&cfg).expect("simulator");
    // Set-up events first, untimed.
    let mut buf = Vec::new();
    let mut pending = Vec::new();
    loop {
        buf.clear();
        if src.next_batch(&mut buf, 1).expect("events") == 0 {
            break;
        }
        if matches!(buf[0], Event::Ref(_)) {
            pending.push(buf[0]);
            break;
        }
        sim.step(&buf[0]).expect("set-up event");
    }
    let t = Instant::now();
    for e in &pending {
        sim.step(e).expect("event");
    }
    sim.run(src.as_mut(), &mut |_| true).expect("run");
    let secs = t.elapsed().as_secs_f64();
    (sim.counters.memory_refs + sim.counters.fetches, secs)
}

/// Simulates `spec` whole; returns (events, seconds).
fn sim_events(spec: &str, overrides: &[(&str, &str)]) -> (u64, f64) {
    let ov: Vec<(String, String)> = overrides
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let cfg = config::build("bhargava08", &ov).expect("bench config");
    let mut src = workload::open(spec).expect("bench workload");
    let mut sim = Simulator::new(&cfg).expect("simulator");
    let t = Instant::now();
    sim.run(src.as_mut(), &mut |_| true).expect("run");
    (sim.counters.events, t.elapsed().as_secs_f64())
}

fn line(label: &str, n: u64, secs: f64, target: f64) {
    let rate = n as f64 / secs / 1e6;
    let verdict = if rate >= target { "meets" } else { "BELOW" };
    println!(
        "{label:<58} {rate:>8.1} M refs/s  ({n} refs in {secs:.2} s; target {target} M/s: {verdict})"
    );
}

fn main() {
    println!("vmmu bench — one core, wall clock");
    let (n, s) = sim_refs(
        "stream:footprint=64M,refs=100M,prefault=1",
        &[("mode", "native")],
    );
    line("(a) TLB-hit stream, native, cache model on", n, s, 100.0);
    let (n, s) = sim_refs(
        "stream:footprint=64M,refs=100M,prefault=1",
        &[("mode", "native"), ("machine.caches.data", "false")],
    );
    line("(a') TLB-hit stream, native, data caches off", n, s, 100.0);
    let (n, s) = sim_refs(
        "random:footprint=4G,refs=3M,prefault=1",
        &[
            ("mode", "nested"),
            ("machine.pwc.design", "2d+nt"),
            ("guest.memory", "\"8G\""),
        ],
    );
    line(
        "(b) uniform random over 4 GiB, nested, 2d+nt, caches on",
        n,
        s,
        15.0,
    );

    // Issue 3: shadow paging's simulation cost.
    println!();
    for (spec, label) in [
        ("aim9-fork_test", "aim9-fork_test"),
        ("memorymotion", "memorymotion"),
    ] {
        let (events, secs) = sim_events(spec, &[("mode", "shadow")]);
        println!(
            "{:<58} {:>8.2} M events/s ({events} events in {secs:.2} s)",
            format!("{label}, shadow (hvm)"),
            events as f64 / secs / 1e6
        );
    }
    let mut native_secs = 0.0;
    for mode in ["native", "nested", "shadow"] {
        let (n, s) = sim_refs("swim", &[("mode", mode)]);
        if mode == "native" {
            native_secs = s;
        }
        let rate = n as f64 / s / 1e6;
        println!(
            "{:<58} {rate:>8.2} M refs/s ({n} refs in {s:.2} s; {:.2}x native's time)",
            format!("swim, {mode}"),
            s / native_secs
        );
    }
    println!();

    // Adaptive runs against the static modes' simulation time (docs/policies.md): a policy
    // run at most 1.3x the slower static mode's, the oracle at most both static runs + 10%.
    let spec = "mixed-phases";
    let whole = |ov: &[(&str, &str)]| {
        let ov: Vec<(String, String)> = ov
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let cfg = config::build("bhargava08", &ov).expect("bench config");
        let mut src = workload::open(spec).expect("bench workload");
        let t = Instant::now();
        vmmu_core::result::run(&cfg, src.as_mut(), &mut |_| true).expect("run");
        t.elapsed().as_secs_f64()
    };
    let shadow = whole(&[("mode", "shadow")]);
    let nested = whole(&[("mode", "nested")]);
    let slower = shadow.max(nested);
    for (policy, limit, base) in [
        ("dav2m", 1.3, slower),
        ("costmodel", 1.3, slower),
        ("oracle", 1.1, shadow + nested),
    ] {
        let s = whole(&[
            ("mode", "adaptive"),
            ("policy.kind", policy),
            ("policy.time_scale", "1e-4"),
        ]);
        let ratio = s / base;
        let against = if policy == "oracle" {
            "both static runs"
        } else {
            "the slower static mode"
        };
        let verdict = if ratio <= limit { "meets" } else { "ABOVE" };
        println!(
            "{:<58} {ratio:>8.2}x {against} ({s:.2} s; shadow {shadow:.2} s, nested {nested:.2} s; limit {limit}x: {verdict})",
            format!("{spec}, adaptive {policy}"),
        );
    }
    println!();

    // (c) decode alone.
    let dir = std::env::temp_dir().join(format!("vmmu-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bench.vtrace");
    let p = path.to_str().expect("utf-8 path");
    {
        let mut src = workload::open("stride:footprint=1G,refs=50M,stride=64").expect("workload");
        let mut w = trace::TraceWriter::create(p, trace::TraceMeta::default()).expect("writer");
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if src.next_batch(&mut buf, 65536).expect("events") == 0 {
                break;
            }
            w.write_batch(&buf).expect("write");
        }
        w.finish().expect("finish");
    }
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let t = Instant::now();
    let mut r = trace::open(p).expect("open");
    let mut buf = Vec::with_capacity(65536);
    let mut n = 0u64;
    loop {
        buf.clear();
        let k = r.next_batch(&mut buf, 65536).expect("decode");
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    line("(c) binary trace decoding alone", n, secs, 200.0);
    println!(
        "{:<58} {:>8.3} bytes/ref ({bytes} bytes for {n} events)",
        "    trace size",
        bytes as f64 / n.max(1) as f64
    );
    // Issue 4: recording a real program end to end, then replaying its trace.
    println!();
    let input = dir.join("input.txt");
    let mut text = String::new();
    let mut x = 7u64;
    while text.len() < (512 << 10) {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        text.push_str(&format!(
            "{:x} line {} of the bench input\n",
            x >> 20,
            x % 977
        ));
    }
    std::fs::write(&input, text).expect("bench input");
    let rec_path = dir.join("gzip.vtrace");
    let rp = rec_path.to_str().expect("utf-8 path").to_string();
    let cmd = vec![
        "gzip".to_string(),
        "-f".to_string(),
        "-k".to_string(),
        input.to_str().expect("utf-8 path").to_string(),
    ];
    match vmmu_record::record(&cmd, &vmmu_record::RecordOptions::new(&rp), &mut |_| true) {
        Ok(sum) => {
            let bytes = std::fs::metadata(&rec_path).map(|m| m.len()).unwrap_or(0);
            line(
                "recording `gzip` of 512 KiB, end to end",
                sum.refs,
                sum.elapsed_s,
                50.0,
            );
            println!(
                "{:<58} {:>8.3} bytes/ref",
                "    recorded trace size",
                bytes as f64 / sum.refs.max(1) as f64
            );
            for mode in ["native", "nested"] {
                let cfg = config::build("bhargava08", &[("mode".into(), mode.into())])
                    .expect("bench config");
                let mut src = trace::open(&rp).expect("recorded trace");
                let mut sim = Simulator::new(&cfg).expect("simulator");
                let t = Instant::now();
                sim.run(src.as_mut(), &mut |_| true).expect("replay");
                let secs = t.elapsed().as_secs_f64();
                let n = sim.counters.memory_refs + sim.counters.fetches;
                println!(
                    "{:<58} {:>8.1} M refs/s ({n} refs in {secs:.2} s)",
                    format!("replay of the recorded trace, {mode}"),
                    n as f64 / secs / 1e6
                );
            }
        }
        Err(e) => println!("recording skipped: {e}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{:<58} {:>8.1} MiB", "peak resident memory", peak_rss_mib());
}
