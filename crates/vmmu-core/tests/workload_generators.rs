//! The synthetic generators: layout, determinism, footprint bounds, mixes and exact addresses.

use vmmu_core::event::{AccessKind, Event, MapFlags, MemRef, Prot};
use vmmu_core::workload::{self, BASE};
use vmmu_core::Gva;

fn all(spec: &str) -> Vec<Event> {
    let mut src = workload::open(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let mut out = Vec::new();
    // An odd batch size so batches split phases and preambles at awkward places.
    while src.next_batch(&mut out, 997).unwrap() > 0 {}
    out
}

fn refs(events: &[Event]) -> Vec<MemRef> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ref(r) => Some(*r),
            _ => None,
        })
        .collect()
}

const GENERATORS: [&str; 5] = ["stream", "stride", "random", "pointer-chase", "phases"];

#[test]
fn every_generator_starts_with_the_process_and_its_region() {
    for g in GENERATORS {
        let ev = all(&format!("{g}:footprint=10000,refs=10"));
        assert_eq!(ev[0], Event::ProcessCreate { pid: 1 }, "{g}");
        assert_eq!(
            ev[1],
            Event::mmap(Gva::new(BASE), 12288, Prot::RW, MapFlags(0)),
            "{g}"
        );
    }
    let ev = all("random:refs=1,huge=1,prefault=true");
    let Event::Mmap(m) = &ev[1] else {
        panic!("{:?}", ev[1])
    };
    assert_eq!(m.len, 64 << 20);
    assert_eq!(m.flags, MapFlags(MapFlags::HUGE | MapFlags::POPULATE));
    assert_eq!(ev.len(), 3, "no madvise without thp=");
    // thp=hugepage advises the whole region right after the mmap; phases take it too.
    for spec in [
        "random:refs=1,footprint=4M,thp=hugepage",
        "phases:a=stream,b=random,period=1,refs=1,footprint=4M,thp=hugepage",
    ] {
        let ev = all(spec);
        assert_eq!(
            ev[2],
            Event::madvise(
                ev_start(&ev[1]),
                4 << 20,
                vmmu_core::event::Advice(vmmu_core::event::Advice::HUGEPAGE)
            ),
            "{spec}"
        );
    }
    let Event::Madvise(m) = &all("stream:refs=1,thp=nohugepage")[2] else {
        panic!("no madvise")
    };
    assert_eq!(m.advice.name(), Some("nohugepage"));
}

fn ev_start(e: &Event) -> vmmu_core::addr::Gva {
    match e {
        Event::Mmap(m) => m.start,
        other => panic!("{other:?}"),
    }
}

#[test]
fn base_is_gib_aligned() {
    assert_eq!(BASE % (1 << 30), 0);
}

#[test]
fn len_hint_is_the_exact_event_count() {
    for spec in [
        "stream:refs=12345",
        "stride:refs=0",
        "random:refs=1K",
        "pointer-chase:refs=777,dist=hotcold",
        "phases:refs=10001,period=1000",
        "phases:refs=10000,period=1000,c=stride",
    ] {
        let src = workload::open(spec).unwrap();
        let hint = src.len_hint().unwrap();
        assert_eq!(hint, all(spec).len() as u64, "{spec}");
    }
    // 2 preamble events + 10001 refs + 11 phase markers.
    assert_eq!(
        workload::open("phases:refs=10001,period=1000")
            .unwrap()
            .len_hint(),
        Some(2 + 10001 + 11)
    );
}

#[test]
fn same_spec_gives_the_same_stream_and_another_seed_another() {
    for g in GENERATORS {
        let spec = format!("{g}:refs=20K,write_ratio=0.5");
        let a = all(&spec);
        assert_eq!(a, all(&spec), "{g}");
        let b = all(&format!("{spec},seed=2"));
        assert_ne!(a, b, "{g}: seed 2 gives the stream of seed 1");
    }
}

#[test]
fn every_reference_lies_inside_the_footprint() {
    let footprints = ["4K", "1000", "64M", "3G", "100"];
    let extra = [
        "",
        ",stride=4104",
        ",dist=hotcold",
        ",dist=zipf,scatter=0",
        ",elem=24,arrays=3",
        ",node=4096",
    ];
    for g in GENERATORS {
        for f in footprints {
            for x in extra {
                let spec = format!("{g}:footprint={f},refs=20K{x}");
                let Ok(mut src) = workload::open(&spec) else {
                    continue; // a parameter the generator does not take
                };
                let footprint = vmmu_core::addr::parse_bytes(f).unwrap();
                let mut ev = Vec::new();
                while src.next_batch(&mut ev, 4096).unwrap() > 0 {}
                let rs = refs(&ev);
                assert_eq!(rs.len(), 20_000, "{spec}");
                for r in rs {
                    let off = r.va.raw() - BASE;
                    assert!(
                        r.va.raw() >= BASE && off + r.size as u64 <= footprint,
                        "{spec}: {:#x} outside",
                        r.va.raw()
                    );
                    assert_eq!(off % 8, 0, "{spec}");
                    assert_eq!(r.size, 8);
                }
            }
        }
    }
}

#[test]
fn write_ratio_is_respected_over_100k_references() {
    for g in GENERATORS {
        for ratio in [0.0, 0.1, 0.3, 0.75, 1.0] {
            let rs = refs(&all(&format!("{g}:refs=100K,write_ratio={ratio}")));
            let stores = rs.iter().filter(|r| r.kind == AccessKind::Store).count();
            let loads = rs.iter().filter(|r| r.kind == AccessKind::Load).count();
            assert_eq!(stores + loads, 100_000);
            let got = stores as f64 / 1e5;
            // Binomial: 4 standard deviations at n = 100K is under 0.006.
            assert!((got - ratio).abs() < 0.006, "{g} ratio {ratio}: {got}");
            if ratio == 0.0 || ratio == 1.0 {
                assert_eq!(got, ratio, "{g}");
            }
        }
    }
}

#[test]
fn references_carry_ipr_instructions() {
    let rs = refs(&all("random:refs=100,ipr=7"));
    assert!(rs.iter().all(|r| r.instrs == 7));
    let rs = refs(&all("stream:refs=100,ipr=0"));
    assert!(rs.iter().all(|r| r.instrs == 0));
}

#[test]
fn a_chase_says_which_load_each_reference_waits_for_and_the_others_wait_for_none() {
    for g in ["stream", "stride", "random", "phases"] {
        let src = workload::open(&format!("{g}:refs=100")).unwrap();
        assert!(src.tracks_dependences(), "{g}");
        assert!(
            refs(&all(&format!("{g}:refs=100")))
                .iter()
                .all(|r| r.dep == 0),
            "{g}"
        );
    }
    let rs = refs(&all("pointer-chase:refs=100"));
    assert!(rs.iter().all(|r| r.dep == 1));
    let rs = refs(&all("pointer-chase:refs=100,chains=4,dist=hotcold"));
    assert!(rs.iter().all(|r| r.dep == 4));
    for bad in ["0", "256", "x"] {
        let err = workload::open(&format!("pointer-chase:chains={bad}"))
            .err()
            .unwrap_or_else(|| panic!("chains={bad} accepted"))
            .to_string();
        assert!(err.contains("chains"), "{err}");
    }
}

#[test]
fn stride_visits_exact_addresses() {
    // offset_i = i * stride mod footprint (footprint rounded down to 8 bytes).
    let rs = refs(&all("stride:footprint=40000,stride=4096,refs=25"));
    let want: Vec<u64> = (0..25u64).map(|i| BASE + (i * 4096) % 40000).collect();
    let got: Vec<u64> = rs.iter().map(|r| r.va.raw()).collect();
    assert_eq!(got, want);
    // A stride larger than the footprint wraps the same way.
    let rs = refs(&all("stride:footprint=1000,stride=1048,refs=5"));
    let got: Vec<u64> = rs.iter().map(|r| r.va.raw() - BASE).collect();
    assert_eq!(got, [0, 48, 96, 144, 192]);
}

#[test]
fn stream_sweeps_arrays_in_lockstep() {
    // 3 arrays of 1000 bytes (3000 / 3, a multiple of 8 already), 8-byte elements.
    let rs = refs(&all("stream:footprint=3000,arrays=3,refs=7"));
    let got: Vec<u64> = rs.iter().map(|r| r.va.raw() - BASE).collect();
    assert_eq!(got, [0, 1000, 2000, 8, 1008, 2008, 16]);
    // One array wraps at the footprint.
    let rs = refs(&all("stream:footprint=32,elem=16,refs=4"));
    let got: Vec<u64> = rs.iter().map(|r| r.va.raw() - BASE).collect();
    assert_eq!(got, [0, 16, 0, 16]);
}

#[test]
fn random_covers_the_footprint_uniformly() {
    let rs = refs(&all("random:footprint=64K,refs=160K"));
    let mut per_page = [0u32; 16];
    for r in rs {
        per_page[((r.va.raw() - BASE) >> 12) as usize] += 1;
    }
    for c in per_page {
        assert!((c as i64 - 10_000).abs() < 500, "{per_page:?}");
    }
}

#[test]
fn a_chase_with_alpha_zero_is_uniform_over_a_large_footprint() {
    // 2 GiB of 64-byte nodes (2^25 of them), 256 K references: every 32 MiB of the footprint
    // gets 1/64 of them (4,096, σ ≈ 64), and no node is drawn much more than once (a uniform
    // draw of 2^18 from 2^25 repeats about 2^11 / 2^25 · 2^18 / 2 ≈ 1,000 times).
    let rs = refs(&all(
        "pointer-chase:footprint=2G,alpha=0,refs=256K,prefault=1,write_ratio=0",
    ));
    let mut per_bin = [0u32; 64];
    let mut nodes: Vec<u64> = Vec::with_capacity(rs.len());
    for r in &rs {
        let off = r.va.raw() - BASE;
        per_bin[(off >> 25) as usize] += 1;
        nodes.push(off >> 6);
    }
    for c in per_bin {
        assert!((c as i64 - 4096).abs() < 400, "{per_bin:?}");
    }
    nodes.sort_unstable();
    nodes.dedup();
    let repeats = rs.len() - nodes.len();
    assert!((500..2000).contains(&repeats), "{repeats} repeated nodes");
}

#[test]
fn hot_cold_sends_hot_prob_of_references_to_the_hot_fraction() {
    let spec = "pointer-chase:dist=hotcold,hot_fraction=0.25,hot_prob=0.8,scatter=0,footprint=1M,refs=100K";
    let rs = refs(&all(spec));
    let hot_end = BASE + (1 << 20) / 4;
    let hot = rs.iter().filter(|r| r.va.raw() < hot_end).count() as f64 / 1e5;
    assert!((hot - 0.8).abs() < 0.01, "{hot}");
    assert!(rs.iter().all(|r| (r.va.raw() - BASE).is_multiple_of(64)));
    assert!(rs.iter().all(|r| r.kind == AccessKind::Load));
}

#[test]
fn zipf_favours_low_ranks_and_scatter_moves_them() {
    let rs = refs(&all(
        "pointer-chase:alpha=1.2,scatter=0,footprint=64K,refs=100K",
    ));
    let first = rs.iter().filter(|r| r.va.raw() == BASE).count();
    let second = rs.iter().filter(|r| r.va.raw() == BASE + 64).count();
    // P(1)/P(2) = 2^1.2 ≈ 2.3.
    let ratio = first as f64 / second as f64;
    assert!((ratio - 2.3).abs() < 0.2, "{ratio}");
    assert!(first > 20_000, "{first}");
    let scattered = refs(&all("pointer-chase:alpha=1.2,footprint=64K,refs=100K"));
    let mut counts = std::collections::HashMap::new();
    for r in &scattered {
        *counts.entry(r.va.raw()).or_insert(0u32) += 1;
    }
    let top = counts.iter().max_by_key(|(_, c)| **c).unwrap();
    assert!(*top.1 > 20_000);
    assert_ne!(
        *top.0, BASE,
        "with scatter=1 the most popular node is not the first"
    );
}

#[test]
fn phases_alternate_with_numbered_markers() {
    let ev = all("phases:a=stride,b=random,a.stride=4096,period=100,refs=350,footprint=1M");
    let markers: Vec<(usize, u32)> = ev
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Event::Phase { id } => Some((i, *id)),
            _ => None,
        })
        .collect();
    assert_eq!(
        markers,
        [(2, 0), (103, 1), (204, 2), (305, 3)],
        "a marker, then 100 references, per phase"
    );
    // Phase a (and a again in period 2) is the stride walk, continuing where it stopped.
    let period = |k: usize| refs(&ev[markers[k].0 + 1..ev.len().min(markers[k].0 + 101)]);
    let a0 = period(0);
    let a2 = period(2);
    for (i, r) in a0.iter().chain(&a2).enumerate() {
        assert_eq!(r.va.raw(), BASE + (i as u64 * 4096) % (1 << 20));
    }
    assert_eq!(period(3).len(), 50);
}

#[test]
fn phase_region_is_the_largest_phase_footprint() {
    let ev = all("phases:a=stream,b=random,b.footprint=2M,footprint=1M,refs=10");
    assert!(matches!(&ev[1], Event::Mmap(m) if m.len == 2 << 20));
}

#[test]
fn catalog_names_every_parameter_with_its_default() {
    let cat = workload::catalog();
    // The pattern generators (the workloads from the papers follow, with parameters of their own).
    for g in cat.iter().take(5) {
        let names: Vec<&str> = g.params.iter().map(|p| p.name).collect();
        for common in [
            "footprint",
            "refs",
            "ipr",
            "write_ratio",
            "seed",
            "prefault",
            "huge",
            "thp",
        ] {
            assert!(names.contains(&common), "{}: {common}", g.name);
        }
        assert!(!g.description.is_empty());
    }
    let json = serde_json::to_value(&cat).unwrap();
    assert_eq!(json[1]["name"], "stride");
    assert!(json[1]["params"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "stride" && p["default"] == "4096"));
}
