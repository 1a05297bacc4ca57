//! One-pass sizing of the L2 TLB (docs/performance.md, "One pass for many sizes"): each probe
//! counts exactly the hits and misses of a separate run whose L2 array has the probe's size,
//! in every paging mode, with demand paging, dirty-bit assists, INVLPGs, context switches,
//! large pages and global entries; the probes change nothing else; configurations the method
//! does not cover are rejected naming the rule.

use serde_json::Value;
use vmmu_core::config;
use vmmu_core::workload;

/// The whole result of `spec` on `machine` with `ov`, as JSON.
fn run(machine: &str, spec: &str, ov: &[(String, String)]) -> vmmu_core::Result<Value> {
    let cfg = config::build(machine, ov)?;
    let mut src = workload::open(spec)?;
    vmmu_core::run::run(&cfg, src.as_mut(), &mut |_| true).map(|r| r.to_json())
}

fn pairs(ov: &[(&str, &str)]) -> Vec<(String, String)> {
    ov.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// `sizing = { array, sizes = [...] }` as a `--set` value.
fn sizing(array: usize, sizes: &[(u32, u32)]) -> String {
    let rows: Vec<String> = sizes
        .iter()
        .map(|(e, w)| format!("{{ entries = {e}, ways = {w} }}"))
        .collect();
    format!("{{ array = {array}, sizes = [{}] }}", rows.join(", "))
}

/// The L2 level's (hits, misses) of a result.
fn l2(v: &Value) -> (u64, u64) {
    let l = &v["tlb"]["l2"];
    (l["hits"].as_u64().unwrap(), l["misses"].as_u64().unwrap())
}

/// A result without what a sizing study adds or the timing.
fn core(mut v: Value) -> Value {
    let o = v.as_object_mut().unwrap();
    o.remove("sizing");
    o.remove("sim");
    o["config"].as_object_mut().unwrap().remove("sizing");
    v
}

/// Runs the study of `sizes` once with probes and once per size with the array resized, and
/// compares every probe with its separate run, the probes' run with a run without probes.
fn check(machine: &str, spec: &str, base: &[(&str, &str)], array: usize, sizes: &[(u32, u32)]) {
    let base = pairs(base);
    let mut ov = base.clone();
    ov.push(("sizing".into(), sizing(array, sizes)));
    let probed = run(machine, spec, &ov).expect("probed run");
    let plain = run(machine, spec, &base).expect("plain run");
    assert_eq!(
        core(probed.clone()),
        core(plain),
        "{machine} {spec} {base:?}: the probes changed the run"
    );
    let rows = probed["sizing"]["sizes"].as_array().expect("sizing rows");
    assert_eq!(rows.len(), sizes.len());
    let mut differ = false;
    for (row, &(entries, ways)) in rows.iter().zip(sizes) {
        let mut ov = base.clone();
        ov.push((
            format!("machine.tlb.l2[{array}].entries"),
            entries.to_string(),
        ));
        ov.push((format!("machine.tlb.l2[{array}].ways"), ways.to_string()));
        let separate = run(machine, spec, &ov).expect("separate run");
        let one_pass = (
            row["hits"].as_u64().unwrap(),
            row["misses"].as_u64().unwrap(),
        );
        assert_eq!(
            one_pass,
            l2(&separate),
            "{machine} {spec} {base:?}: {entries} entries, {ways} ways"
        );
        differ |= one_pass != l2(&probed);
    }
    assert!(
        differ,
        "{machine} {spec}: no size changed the L2 misses; the case tests nothing"
    );
}

const MODES: [&str; 3] = ["\"native\"", "\"nested\"", "\"shadow\""];

/// bhargava08's 512-entry 4-way 4 KiB array beside its 2 MiB array; the sizes include the
/// configured one, smaller and larger ones, other associativities and a fully associative one.
const BHARGAVA_SIZES: [(u32, u32); 7] = [
    (32, 4),
    (128, 4),
    (512, 4),
    (1024, 4),
    (512, 8),
    (256, 1),
    (64, 64),
];

#[test]
fn demand_paging_with_stores_every_mode() {
    // No prefault: demand faults, clean pages stored to later (dirty-bit assists), shadow
    // faults and out-of-sync pages.
    for mode in MODES {
        check(
            "bhargava08",
            "random:footprint=8M,refs=60K,write_ratio=0.4",
            &[("mode", mode), ("machine.caches.data", "false")],
            0,
            &BHARGAVA_SIZES,
        );
    }
}

#[test]
fn processes_unmaps_and_context_switches_every_mode() {
    // fork, exec, mmap/munmap (INVLPGs), process switches (CR3 writes): with and without PCIDs.
    for mode in MODES {
        for pcid in ["false", "true"] {
            check(
                "bhargava08",
                "mixed-phases:phases=4,points=4K,jobs=6,pages=64,footprint=4M",
                &[
                    ("mode", mode),
                    ("machine.caches.data", "false"),
                    ("machine.tlb.pcid", pcid),
                ],
                0,
                &BHARGAVA_SIZES,
            );
        }
    }
}

#[test]
fn vm_flushes_without_vpids_under_shadow_paging() {
    check(
        "bhargava08",
        "gcc-phases:inputs=2,phases=3,arena=64,heap=128,text=64",
        &[
            ("mode", "\"shadow\""),
            ("machine.tlb.vpid", "false"),
            ("machine.caches.data", "false"),
        ],
        0,
        &BHARGAVA_SIZES,
    );
}

#[test]
fn an_array_of_several_page_sizes_with_large_pages() {
    // zen4's one L2 array holds 4 KiB, 2 MiB and 1 GiB entries in one LRU order; THP-like
    // mixed pages put 2 MiB entries beside 4 KiB ones.
    for mode in MODES {
        check(
            "zen4",
            "random:footprint=1G,refs=40K,huge=1",
            &[
                ("mode", mode),
                ("guest.page_size", "\"mixed\""),
                ("host.nested_page_size", "\"2M\""),
                ("machine.caches.data", "false"),
            ],
            0,
            &[(48, 24), (96, 24), (192, 24), (3072, 24), (64, 4), (32, 32)],
        );
    }
}

#[test]
fn the_second_array_of_a_level() {
    // bhargava08's direct-mapped 2 MiB array, with large guest pages.
    check(
        "bhargava08",
        "random:footprint=1G,refs=30K,huge=1",
        &[
            ("mode", "\"nested\""),
            ("guest.page_size", "\"2M\""),
            ("host.nested_page_size", "\"2M\""),
            ("machine.caches.data", "false"),
        ],
        1,
        &[(8, 1), (32, 1), (128, 1), (64, 2), (256, 4)],
    );
}

#[test]
fn a_configuration_the_method_does_not_cover_is_rejected_naming_the_rule() {
    let err = |ov: &[(&str, &str)]| {
        config::build("bhargava08", &pairs(ov))
            .expect_err("accepted")
            .to_string()
    };
    let one = sizing(0, &[(64, 4)]);
    let e = err(&[("sizing", &one), ("guest.vcpus", "2")]);
    assert!(e.contains("sizing") && e.contains("one vCPU"), "{e}");
    let e = err(&[
        ("sizing", &one),
        ("mode", "\"adaptive\""),
        ("policy.kind", "\"dav2m\""),
    ]);
    assert!(e.contains("adaptive"), "{e}");
    let e = err(&[("sizing", &sizing(2, &[(64, 4)]))]);
    assert!(e.contains("sizing.array") && e.contains("has 2"), "{e}");
    let e = err(&[("sizing", &sizing(0, &[(64, 3)]))]);
    assert!(
        e.contains("sizing.sizes[0].ways") && e.contains("do not divide"),
        "{e}"
    );
    let e = err(&[("sizing", &sizing(0, &[]))]);
    assert!(e.contains("lists no size"), "{e}");
    let many: Vec<(u32, u32)> = (1..=65).map(|i| (4 * i, 4)).collect();
    let e = err(&[("sizing", &sizing(0, &many))]);
    assert!(e.contains("at most 64"), "{e}");
}

mod crafted {
    //! Random streams over a small L2 TLB: loads, stores and fetches over two processes that
    //! share copy-on-write pages, process switches, and unmaps that are mapped again.

    use super::{l2, pairs, sizing};
    use proptest::prelude::*;
    use serde_json::Value;
    use vmmu_core::addr::Gva;
    use vmmu_core::config;
    use vmmu_core::event::{AccessKind, Event, MapFlags, MemRef, Prot, VecSource};

    const BASE: u64 = 0x10_0000_0000;
    const PAGES: u64 = 48;

    #[derive(Clone, Debug)]
    enum Op {
        Ref(u64, AccessKind),
        Switch,
        Remap(u64, u64),
    }

    /// A page: mostly among a hot dozen that a small L2 holds and a smaller one does not.
    fn page() -> impl Strategy<Value = u64> {
        prop_oneof![4 => 0..12u64, 1 => 0..PAGES]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            40 => (page(), prop_oneof![
                3 => Just(AccessKind::Load),
                2 => Just(AccessKind::Store),
                1 => Just(AccessKind::Fetch),
            ])
                .prop_map(|(p, k)| Op::Ref(p, k)),
            1 => Just(Op::Switch),
            1 => (page(), 1..4u64).prop_map(|(p, n)| Op::Remap(p, n.min(PAGES - p))),
        ]
    }

    fn events(ops: &[Op]) -> Vec<Event> {
        let mut ev = vec![
            Event::ProcessCreate { pid: 1 },
            Event::mmap(Gva::new(BASE), PAGES << 12, Prot::RWX, MapFlags(0)),
        ];
        // The parent touches half the pages, then forks: those pages are shared
        // copy-on-write, read-only in both processes' tables.
        ev.extend((0..PAGES / 2).map(|p| super::store_at(BASE + (p << 12))));
        ev.push(Event::Fork {
            parent: 1,
            child: 2,
        });
        let mut pid = 1;
        for o in ops {
            match *o {
                Op::Ref(p, kind) => ev.push(Event::Ref(MemRef {
                    va: Gva::new(BASE + (p << 12) + 8 * (p % 7)),
                    kind,
                    size: 8,
                    instrs: 2,
                    dep: 0,
                })),
                Op::Switch => {
                    pid = 3 - pid;
                    ev.push(Event::Switch { pid });
                }
                Op::Remap(p, n) => {
                    ev.push(Event::munmap(Gva::new(BASE + (p << 12)), n << 12));
                    ev.push(Event::mmap(
                        Gva::new(BASE + (p << 12)),
                        n << 12,
                        Prot::RWX,
                        MapFlags(0),
                    ));
                }
            }
        }
        ev
    }

    fn run(ov: &[(String, String)], ev: Vec<Event>) -> Value {
        let cfg = config::build("bhargava08", ov).expect("config");
        let mut src = VecSource::new("crafted", ev);
        vmmu_core::run::run(&cfg, &mut src, &mut |_| true)
            .expect("run")
            .to_json()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn every_probe_counts_what_a_separate_run_counts(
            ops in proptest::collection::vec(op(), 1..400),
            mode in prop::sample::select(vec!["\"native\"", "\"nested\"", "\"shadow\""]),
            pcid in any::<bool>(),
            vpid in any::<bool>(),
            sizes in proptest::collection::vec(
                (prop::sample::select(vec![1u32, 2, 4, 8]), prop::sample::select(vec![1u32, 2, 4])),
                1..4,
            ),
        ) {
            let sizes: Vec<(u32, u32)> = sizes.into_iter().map(|(s, w)| (s * w, w)).collect();
            let base = pairs(&[
                ("mode", mode),
                ("machine.caches.data", "false"),
                ("machine.tlb.pcid", if pcid { "true" } else { "false" }),
                ("machine.tlb.vpid", if vpid { "true" } else { "false" }),
                ("machine.tlb.l1d", "[{ entries = 4, ways = 4, sizes = [\"4K\"] }]"),
                ("machine.tlb.l1i", "[{ entries = 2, ways = 2, sizes = [\"4K\"] }]"),
                ("machine.tlb.l2", "[{ entries = 16, ways = 4, sizes = [\"4K\"] }]"),
                ("machine.tlb.l2i", "[]"),
            ]);
            let ev = events(&ops);
            let mut ov = base.clone();
            ov.push(("sizing".into(), sizing(0, &sizes)));
            let probed = run(&ov, ev.clone());
            for (row, &(entries, ways)) in probed["sizing"]["sizes"].as_array().unwrap().iter().zip(&sizes) {
                let mut ov = base.clone();
                ov.push(("machine.tlb.l2[0].entries".into(), entries.to_string()));
                ov.push(("machine.tlb.l2[0].ways".into(), ways.to_string()));
                let separate = run(&ov, ev.clone());
                prop_assert_eq!(
                    (row["hits"].as_u64().unwrap(), row["misses"].as_u64().unwrap()),
                    l2(&separate),
                    "{} entries, {} ways", entries, ways
                );
            }
        }
    }
}

/// A store to `va` (crafted streams).
fn store_at(va: u64) -> vmmu_core::event::Event {
    vmmu_core::event::Event::Ref(vmmu_core::event::MemRef {
        va: vmmu_core::addr::Gva::new(va),
        kind: vmmu_core::event::AccessKind::Store,
        size: 8,
        instrs: 1,
        dep: 0,
    })
}
