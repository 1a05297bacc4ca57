//! The hypervisor seam and the one walk core: DESIGN.md laws 3, 4, 8 and 9 over every paging
//! format, mode, page size and page-walk-cache design; the D-assist; mode switches and their
//! costs; the warm-up; lazy backing in every mode; and the rules that reject impossible
//! switches.

mod common;

use common::{exits, try_run, u};
use proptest::prelude::*;
use serde_json::Value;
use vmmu_core::addr::Gva;
use vmmu_core::event::{AccessKind, Event, MapFlags, MemRef, Prot};

/// A base every paging format can address (1 GiB: canonical in 32-bit, PAE and long mode).
const LOW: u64 = 0x4000_0000;
const PAGE: u64 = 4096;

fn r(va: u64, kind: AccessKind) -> Event {
    Event::Ref(MemRef {
        va: Gva::new(va),
        kind,
        size: 8,
        instrs: 1,
        dep: 0,
    })
}

fn ld(va: u64) -> Event {
    r(va, AccessKind::Load)
}

fn st(va: u64) -> Event {
    r(va, AccessKind::Store)
}

fn mmap(start: u64, len: u64, prot: Prot, flags: u8) -> Event {
    Event::mmap(Gva::new(start), len, prot, MapFlags(flags))
}

/// A deterministic pseudo-random page of a region of `pages` pages.
fn pick(x: &mut u64, pages: u64) -> u64 {
    *x = x
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*x >> 33) % pages
}

/// A lifetime of a process touching every feature of the guest model: demand faults with loads
/// and stores, a fork with copy-on-write stores in both processes, a child exit, mprotect,
/// munmap, a re-mmap, instruction fetches from an executable mapping, an exec and a new image.
fn lifetime() -> Vec<Event> {
    let pages = 2048; // 8 MiB: four 2 MiB blocks, so large pages are used where allowed
    let mut x = 7;
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(LOW, pages * PAGE, Prot::RW, 0),
        mmap(LOW + (64 << 20), 16 * PAGE, Prot::RWX, 0),
    ];
    for i in 0..600 {
        let va = LOW + pick(&mut x, pages) * PAGE + 8 * (i % 64);
        ev.push(if i % 3 == 0 { st(va) } else { ld(va) });
    }
    for k in 0..16 {
        ev.push(r(LOW + (64 << 20) + k * PAGE, AccessKind::Fetch));
    }
    ev.push(Event::Fork {
        parent: 1,
        child: 2,
    });
    ev.push(Event::Switch { pid: 2 });
    for _ in 0..200 {
        let va = LOW + pick(&mut x, pages) * PAGE;
        ev.push(st(va));
        ev.push(ld(va + 64));
    }
    ev.push(Event::Exit { pid: 2 });
    ev.push(Event::Switch { pid: 1 });
    for _ in 0..200 {
        ev.push(st(LOW + pick(&mut x, pages) * PAGE));
    }
    ev.push(Event::mprotect(Gva::new(LOW), 64 * PAGE, Prot(Prot::READ)));
    ev.extend((0..64).map(|k| ld(LOW + k * PAGE)));
    ev.push(Event::munmap(Gva::new(LOW + 512 * PAGE), 512 * PAGE));
    ev.push(mmap(LOW + 512 * PAGE, 512 * PAGE, Prot::RW, 0));
    for _ in 0..200 {
        ev.push(st(LOW + (512 + pick(&mut x, 512)) * PAGE));
    }
    ev.push(Event::Exec { pid: 1 });
    ev.push(mmap(LOW, 256 * PAGE, Prot::RW, MapFlags::POPULATE));
    for i in 0..300 {
        let va = LOW + pick(&mut x, 256) * PAGE;
        ev.push(if i % 2 == 0 { st(va) } else { ld(va) });
    }
    ev
}

fn refs(ev: &[Event]) -> u64 {
    ev.iter().filter(|e| matches!(e, Event::Ref(_))).count() as u64
}

/// Overrides naming a mode: `direct-pv` and `direct-previrt` are shadow mode with a direct
/// paging technique.
fn mode(m: &'static str) -> Vec<(&'static str, &'static str)> {
    match m {
        "direct-pv" => vec![("mode", "shadow"), ("hypervisor.technique", "pv")],
        "direct-previrt" => vec![("mode", "shadow"), ("hypervisor.technique", "previrt")],
        other => vec![("mode", other)],
    }
}

fn run(ov: &[(&str, &str)], ev: Vec<Event>) -> Value {
    try_run(ov, ev).unwrap_or_else(|e| panic!("{ov:?}: {e}"))
}

const FORMATS: [&str; 4] = ["x86_32", "pae", "long4", "long5"];
const MODES: [&str; 5] = ["native", "nested", "shadow", "direct-pv", "direct-previrt"];
const DESIGNS: [&str; 5] = ["none", "1d", "2d", "2d+nt", "psc"];

#[test]
fn law3_every_translation_is_checked_over_the_full_matrix() {
    let ev = lifetime();
    let n = refs(&ev);
    let mut cows = std::collections::HashMap::new();
    for format in FORMATS {
        for m in MODES {
            for (gps, nps) in [("4K", "4K"), ("2M", "2M"), ("2M", "4K"), ("4K", "1G")] {
                for design in DESIGNS {
                    let mut ov = mode(m);
                    ov.extend([
                        ("guest.format", format),
                        ("guest.page_size", gps),
                        ("machine.pwc.design", design),
                        ("host.nested_page_size", nps),
                    ]);
                    let res = run(&ov, ev.clone());
                    assert_eq!(
                        u(&res, "checked_translations"),
                        n,
                        "{format} {m} {gps} over {nps} {design}"
                    );
                    // The guest sees the same copy-on-write faults in every mode.
                    let cow = *cows.entry((format, gps)).or_insert(u(&res, "cow_faults"));
                    assert_eq!(u(&res, "cow_faults"), cow, "{format} {m} {gps} {design}");
                    assert!(cow > 0, "{format} {gps}: the fork's stores copy pages");
                }
            }
        }
    }
}

/// Walks that produced a translation.
fn completed(v: &Value) -> u64 {
    u(v, "walks") - u(v, "walk_faults")
}

#[test]
fn law4_shadow_completes_exactly_as_many_walks_as_native_with_demand_paging_and_stores() {
    let mut x = 3;
    let mut random = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(LOW, 4096 * PAGE, Prot::RW, 0),
    ];
    for i in 0..20_000 {
        let va = LOW + pick(&mut x, 4096) * PAGE;
        random.push(if i % 3 == 0 { st(va) } else { ld(va) });
    }
    for (name, ev) in [("random", random), ("lifetime", lifetime())] {
        for format in FORMATS {
            for knobs in [
                vec![],
                vec![
                    ("hypervisor.shadow.unsync", "false"),
                    ("hypervisor.shadow.prefetch", "0"),
                ],
            ] {
                let base = [("guest.format", format), ("machine.pwc.design", "2d")];
                let native = run(&[&base[..], &mode("native")].concat(), ev.clone());
                let shadow = run(
                    &[&base[..], &mode("shadow"), &knobs[..]].concat(),
                    ev.clone(),
                );
                assert_eq!(
                    completed(&native),
                    completed(&shadow),
                    "{name} {format} {knobs:?}: native {} walks ({} faulting, {} D-assists), \
                     shadow {} ({} faulting)",
                    u(&native, "walks"),
                    u(&native, "walk_faults"),
                    u(&native, "d_assists"),
                    u(&shadow, "walks"),
                    u(&shadow, "walk_faults"),
                );
                assert!(
                    u(&native, "d_assists") > 0,
                    "{name}: stores after loads re-walk"
                );
                assert_eq!(
                    u(&shadow, "d_assists"),
                    0,
                    "shadow leaves are dirty when writable"
                );
            }
        }
    }
}

#[test]
fn a_store_through_a_clean_entry_re_walks_natively_and_exits_under_shadow() {
    let ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(LOW, 4 * PAGE, Prot::RW, MapFlags::POPULATE),
        mmap(LOW + (1 << 21), PAGE, Prot::RW, 0),
        ld(LOW + (1 << 21)),
        st(LOW + (1 << 21) + 8),
    ];
    for m in ["native", "nested"] {
        let v = run(&[("mode", m), ("machine.pwc.design", "none")], ev.clone());
        // The demand-faulting load walks twice (a faulting walk, then a completed one); the
        // store re-walks once to set D.
        assert_eq!(u(&v, "d_assists"), 1, "{m}");
        assert_eq!((u(&v, "walks"), u(&v, "walk_faults")), (3, 1), "{m}");
        // The faulting walk stops at the absent L2 entry (3 guest references, each over a
        // 4-reference nested walk under nested paging); the completed walk and the D-assist
        // make a full walk each.
        let refs = if m == "native" {
            3 + 4 + 4
        } else {
            15 + 24 + 24
        };
        assert_eq!(u(&v, "walk_refs"), refs, "{m}");
    }
    let v = run(&[("mode", "shadow")], ev);
    assert_eq!(u(&v, "d_assists"), 0);
    assert_eq!(v["os_events"]["tlb_hit_faults"], 1);
    assert_eq!(
        exits(&v, "hidden_fault"),
        2,
        "the fill after the load, the store's D bit"
    );
}

#[test]
fn law8_shadow_tables_are_walked_like_native_ones_on_every_preset() {
    let pages = 4096;
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(LOW, pages * PAGE, Prot::RW, MapFlags::POPULATE),
    ];
    // Warm-up: touch every page once, so the measured part takes no hidden fault.
    ev.extend((0..pages).map(|p| ld(LOW + p * PAGE)));
    let mut x = 11;
    for i in 0..20_000 {
        let va = LOW + pick(&mut x, pages) * PAGE + 8 * (i % 512);
        ev.push(if i % 4 == 0 { st(va) } else { ld(va) });
    }
    let warm = pages.to_string();
    for preset in [
        "bhargava08",
        "opteron2350",
        "core2-e6300",
        "nehalem-x5560",
        "golden-cove",
        "zen4",
    ] {
        let on = |m: &'static str| {
            let cfg = vmmu_core::config::build(
                preset,
                &[
                    ("mode".into(), m.into()),
                    ("check".into(), "true".into()),
                    ("guest.memory".into(), "\"4G\"".into()),
                    ("host.memory".into(), "\"8G\"".into()),
                    ("warmup.refs".into(), warm.clone()),
                    // Law 8 compares walks, not flushes: without VPIDs the warm-up's exits
                    // flush the TLB under shadow paging only, so the measured part would start
                    // from different TLB contents (DESIGN.md: "no flushes differ").
                    ("machine.tlb.vpid".into(), "true".into()),
                ],
            )
            .unwrap();
            let mut src = vmmu_core::event::VecSource::new("law8", ev.clone());
            vmmu_core::run::run(&cfg, &mut src, &mut |_| true)
                .unwrap()
                .to_json()
        };
        let (n, s) = (on("native"), on("shadow"));
        for key in ["walks", "walk_faults", "walk_refs", "checked_translations"] {
            assert_eq!(n[key], s[key], "{preset}: {key}");
        }
        assert_eq!(
            u(&s, "walk_faults"),
            0,
            "{preset}: the warm-up filled the shadow tables"
        );
        for cache in ["pwc", "psc", "ntlb"] {
            let lookups = |v: &Value| {
                u(&v["walk_caches"][cache], "hits") + u(&v["walk_caches"][cache], "misses")
            };
            assert_eq!(lookups(&n), lookups(&s), "{preset}: {cache} lookups");
        }
        assert_eq!(
            n["walk_caches"]["psc"], s["walk_caches"]["psc"],
            "{preset}: paging-structure caches are virtually tagged: the same hits"
        );
    }
}

/// What the guest sees of a run: its own counters, none of the hypervisor's or the MMU's.
fn guest_view(v: &Value) -> Value {
    serde_json::json!({
        "instructions": v["instructions"],
        "memory_refs": v["memory_refs"],
        "fetches": v["fetches"],
        "page_faults": v["page_faults"],
        "cow_faults": v["cow_faults"],
        "guest": v["guest"],
        "checked": v["checked_translations"],
        "kernel": v["cycles_by_cause"]["guest_kernel"],
    })
}

#[test]
fn a_switch_at_an_instruction_count_changes_mode_there_and_charges_its_costs() {
    let ev = lifetime();
    let total = refs(&ev);
    let at = 500;
    let list = format!("[{at}]");
    let v = run(
        &[("mode", "nested"), ("hypervisor.switch.at", list.as_str())],
        ev.clone(),
    );
    assert_eq!(u(&v, "mode_switches"), 1);
    assert_eq!(exits(&v, "mode_switch"), 1);
    let in_mode = &v["instructions_in_mode"];
    // Each reference retires one instruction; the switch comes before the event that crosses
    // the count, so nested paging ran exactly `at` instructions.
    assert_eq!(in_mode["nested"], at, "{in_mode}");
    assert_eq!(u(in_mode, "shadow"), total - at);
    let cost = &v["exits"]["mode_switch"];
    let profile = vmmu_core::config::load_profile("kvm-modern").unwrap();
    // Nested → shadow: the exit, the VMCB update, and one shadow root built for process 1.
    assert_eq!(
        u(cost, "cycles"),
        profile.exit_round_trip + profile.mode_switch + profile.make_shadow
    );
    assert_eq!(v["cycles_by_cause"]["mode_switch"], cost["cycles"]);
    assert_eq!(v["os_events"]["vm_flushes"], 1);
}

#[test]
fn switching_back_drops_or_revalidates_the_shadow_cache() {
    let ev = lifetime();
    let mut pages = [0u64; 2];
    for (i, keep) in ["false", "true"].into_iter().enumerate() {
        let v = run(
            &[
                ("mode", "shadow"),
                ("hypervisor.switch.at", "[800, 1200, 1600]"),
                ("hypervisor.switch.keep_shadow", keep),
            ],
            ev.clone(),
        );
        assert_eq!(u(&v, "mode_switches"), 3, "keep {keep}");
        assert_eq!(u(&v, "checked_translations"), refs(&ev));
        pages[i] = u(&v["shadow"], "pages_built");
        if keep == "true" {
            assert!(u(&v["shadow"], "revalidated") > 0);
        } else {
            assert_eq!(u(&v["shadow"], "revalidated"), 0);
        }
    }
    assert!(
        pages[1] < pages[0],
        "a kept cache rebuilds fewer shadow pages ({} vs {})",
        pages[1],
        pages[0]
    );
}

#[test]
fn the_warm_up_is_simulated_but_not_counted() {
    let ev = lifetime();
    let full = run(&[("mode", "shadow")], ev.clone());
    let warm = run(&[("mode", "shadow"), ("warmup.refs", "600")], ev.clone());
    assert_eq!(
        u(&warm, "memory_refs") + u(&warm, "fetches"),
        refs(&ev) - 600
    );
    assert_eq!(warm["warmup"]["refs"], 600);
    assert_eq!(warm["warmup"]["instructions"], 600);
    assert_eq!(u(&warm, "instructions"), u(&full, "instructions") - 600);
    assert!(u(&warm, "world_switches") < u(&full, "world_switches"));
    assert!(u(&warm, "page_faults") < u(&full, "page_faults"));
    assert_eq!(u(&warm, "checked_translations"), refs(&ev) - 600);
}

#[test]
fn lazily_backed_memory_is_backed_by_the_hidden_fault_under_shadow_paging() {
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(LOW, 64 * PAGE, Prot::RW, 0),
    ];
    ev.extend((0..8).map(|i| st(LOW + i * PAGE)));
    let v = run(&[("mode", "shadow"), ("hypervisor.backing", "lazy")], ev);
    assert_eq!(exits(&v, "nested_fault"), 0);
    assert_eq!(
        u(&v["shadow"], "backed"),
        8,
        "one per data page the guest touched"
    );
    assert_eq!(u(&v, "checked_translations"), 8);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// DESIGN.md law 9: switching modes never changes what the guest sees.
    #[test]
    fn law9_switches_keep_translations_checked_and_the_guest_unchanged(
        start in prop::sample::select(vec!["nested", "shadow"]),
        keep in any::<bool>(),
        format in prop::sample::select(FORMATS.to_vec()),
        points in prop::collection::btree_set(1u64..1700, 1..6),
        seed in any::<u64>(),
    ) {
        let mut ev = lifetime();
        // Vary the references with the seed, keeping the event structure.
        let mut x = seed | 1;
        for e in ev.iter_mut() {
            if let Event::Ref(m) = e {
                let writable = m.va.raw() >= LOW + 64 * PAGE;
                if m.kind == AccessKind::Load && writable && pick(&mut x, 4) == 0 {
                    m.kind = AccessKind::Store;
                }
            }
        }
        let at = format!("{:?}", points.iter().collect::<Vec<_>>());
        let keep = if keep { "true" } else { "false" };
        let base = [("mode", start), ("guest.format", format)];
        let plain = run(&base, ev.clone());
        let switched = run(
            &[
                &base[..],
                &[
                    ("hypervisor.switch.at", at.as_str()),
                    ("hypervisor.switch.keep_shadow", keep),
                ],
            ]
            .concat(),
            ev,
        );
        prop_assert_eq!(u(&switched, "mode_switches"), points.len() as u64);
        prop_assert_eq!(guest_view(&plain), guest_view(&switched));
    }
}

#[test]
fn impossible_switches_and_warm_ups_are_rejected_with_the_rule() {
    let ev = lifetime();
    let err = |ov: &[(&str, &str)]| try_run(ov, ev.clone()).unwrap_err().to_string();
    let e = err(&[("mode", "nested"), ("hypervisor.switch.at", "[5, 5]")]);
    assert!(
        e.contains("hypervisor.switch.at") && e.contains("strictly increasing"),
        "{e}"
    );
    let e = err(&[("mode", "native"), ("hypervisor.switch.at", "[5]")]);
    assert!(e.contains("native run has no hypervisor"), "{e}");
    let e = err(&[
        ("mode", "shadow"),
        ("hypervisor.technique", "pv"),
        ("hypervisor.switch.at", "[5]"),
    ]);
    assert!(e.contains("direct paging") && e.contains("hvm"), "{e}");
    let e = err(&[
        ("mode", "shadow"),
        ("hypervisor.technique", "previrt"),
        ("hypervisor.backing", "lazy"),
    ]);
    assert!(
        e.contains("hypervisor.backing") && e.contains("direct paging"),
        "{e}"
    );
    let e = err(&[("warmup.refs", "5"), ("warmup.instructions", "5")]);
    assert!(e.contains("warmup") && e.contains("not both"), "{e}");
    let e = err(&[("warmup.refs", "100000")]);
    assert!(
        e.contains("warmup.refs") && e.contains("longer than the workload (1780 references)"),
        "{e}"
    );
}
