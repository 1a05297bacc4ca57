//! DESIGN.md laws 1, 2, 3, 6 (TLB side), 7 and the splintering rule, pinned on crafted event
//! sequences with exact counts.

mod common;

use common::*;
use serde_json::Value;
use vmmu_core::addr::Gva;
use vmmu_core::event::{Event, MapFlags, Prot};

fn touch_pages(n: u64, stride: u64) -> Vec<Event> {
    let mut ev = region(n * stride, true);
    ev.extend((0..n).map(|i| load(BASE + i * stride)));
    ev
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn law1_native_walk_makes_one_reference_per_level() {
    for (size, stride, refs) in [
        ("4K", 4096u64, 4u64),
        ("2M", 2 << 20, 3),
        ("1G", 1 << 30, 2),
    ] {
        let r = run(
            &[("machine.pwc.design", "none"), ("guest.page_size", size)],
            touch_pages(3, stride),
        );
        assert_eq!(u(&r, "walks"), 3, "{size}");
        assert_eq!(u(&r, "walk_refs"), 3 * refs, "{size}");
        assert_eq!(u(&r, "walk_faults"), 0);
        let steps = r["walk_refs_by_step"].as_object().unwrap();
        assert_eq!(steps.len() as u64, refs, "{size}: {steps:?}");
        assert_eq!(steps["L4"], 3);
    }
}

#[test]
fn law2_2d_walk_makes_nm_plus_n_plus_m_references() {
    for (levels, nested, per_walk) in [
        ("long4", "4K", 24u64),
        ("long4", "2M", 19),
        ("long4", "1G", 14),
        ("long5", "4K", 35),
    ] {
        let nl = if levels == "long5" { "5" } else { "4" };
        let r = run(
            &[
                ("mode", "nested"),
                ("machine.pwc.design", "none"),
                ("guest.format", levels),
                ("host.nested_levels", nl),
                ("host.nested_page_size", nested),
            ],
            touch_pages(5, 4096),
        );
        assert_eq!(u(&r, "walks"), 5);
        assert_eq!(u(&r, "walk_refs"), 5 * per_walk, "{levels} over {nested}");
        let steps = r["walk_refs_by_step"].as_object().unwrap();
        assert_eq!(steps[&format!("G,gL{nl}")], 5);
        assert_eq!(steps[&format!("nL{nl},gL{nl}")], 5);
        assert_eq!(steps.get("nL1,gPA").is_some(), nested == "4K");
    }
}

#[test]
fn a_2m_guest_page_over_4k_nested_pages_splinters() {
    // Two 4 KiB pages of one 2 MiB guest page: each needs its own walk (the TLB holds 4 KiB).
    let mut ev = region(2 << 20, true);
    ev.push(load(BASE));
    ev.push(load(BASE + 4096));
    ev.push(load(BASE + 8));
    let r = run(
        &[
            ("mode", "nested"),
            ("machine.pwc.design", "none"),
            ("guest.page_size", "2M"),
            ("host.nested_page_size", "4K"),
        ],
        ev.clone(),
    );
    assert_eq!(u(&r, "walks"), 2);
    assert_eq!(u(&r, "walk_refs"), 2 * 19);
    // Over 2 MiB nested pages the entry is 2 MiB: one walk of 3*4+3... 15 references.
    let r = run(
        &[
            ("mode", "nested"),
            ("machine.pwc.design", "none"),
            ("guest.page_size", "2M"),
            ("host.nested_page_size", "2M"),
        ],
        ev,
    );
    assert_eq!(u(&r, "walks"), 1);
    assert_eq!(u(&r, "walk_refs"), 3 * 4 + 3);
}

#[test]
fn first_touch_faults_once_then_walks_again() {
    let mut ev = region(3 * 4096, false);
    ev.extend([load(BASE), store(BASE + 4096), load(BASE + 8)]);
    let r = run(
        &[
            ("machine.pwc.design", "none"),
            ("machine.kernel.fork", "0"),
            ("machine.kernel.syscall", "0"),
        ],
        ev,
    );
    assert_eq!(u(&r, "page_faults"), 2);
    // Two faulting walks (each stops at the first absent entry) plus two completed walks.
    assert_eq!(u(&r, "walks"), 4);
    assert_eq!(u(&r, "walk_faults"), 2);
    assert!(u(&r, "cycles") > 0);
    assert_eq!(r["cycles_by_cause"]["guest_kernel"], 2 * 2500);
}

#[test]
fn law3_checked_mode_verifies_every_translation() {
    let mut ev = region(64 << 20, false);
    let mut x = 12345u64;
    for _ in 0..5000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let va = BASE + (x >> 20) % (64 << 20);
        ev.push(if x & 1 == 0 { load(va) } else { store(va) });
    }
    ev.push(Event::munmap(Gva::new(BASE), 32 << 20));
    ev.push(Event::mmap(Gva::new(BASE), 32 << 20, Prot::RW, MapFlags(0)));
    ev.extend((0..200).map(|i| load(BASE + i * 4096 * 7)));
    for mode in ["native", "nested"] {
        for design in ["none", "1d", "2d", "2d+nt", "psc"] {
            for gps in ["4K", "mixed"] {
                let r = run(
                    &[
                        ("mode", mode),
                        ("machine.pwc.design", design),
                        ("guest.page_size", gps),
                        ("host.nested_page_size", "2M"),
                    ],
                    ev.clone(),
                );
                assert_eq!(u(&r, "checked_translations"), 5200, "{mode} {design} {gps}");
            }
        }
    }
}

#[test]
fn law7_same_inputs_and_seed_give_identical_results() {
    let mk = || touch_pages(300, 4096 * 3);
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("sim");
        v
    };
    let ov = [
        ("mode", "nested"),
        ("host.allocator.policy", "random"),
        ("seed", "7"),
    ];
    let a = strip(run(&ov, mk()));
    let b = strip(run(&ov, mk()));
    assert_eq!(a, b);
    let c = strip(run(
        &[
            ("mode", "nested"),
            ("host.allocator.policy", "random"),
            ("seed", "8"),
        ],
        mk(),
    ));
    assert_eq!(
        a["walk_refs"], c["walk_refs"],
        "placement changes no reference count"
    );
}

#[test]
fn served_by_sums_to_walk_refs() {
    let r = run(
        &[("mode", "nested"), ("machine.pwc.design", "2d")],
        touch_pages(200, 4096 * 5),
    );
    let sum: u64 = r["walk_refs_served_by"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(sum, u(&r, "walk_refs"));
    assert!(r["walk_refs_served_by"]["pwc"].as_u64().unwrap() > 0);
}

#[test]
fn the_guest_kernel_is_charged_for_os_events_in_every_mode() {
    let ev = vec![
        Event::ProcessCreate { pid: 1 },
        Event::ProcessCreate { pid: 2 },
        Event::Switch { pid: 2 },
        Event::Switch { pid: 1 },
        Event::Exit { pid: 2 },
    ];
    let ov = [
        ("machine.kernel.fork", "1000"),
        ("machine.kernel.context_switch", "100"),
        ("machine.kernel.exit", "10"),
        ("machine.kernel.per_page", "0"),
    ];
    for mode in ["native", "nested", "shadow"] {
        let mut o = ov.to_vec();
        o.push(("mode", mode));
        let r = run(&o, ev.clone());
        assert_eq!(
            r["cycles_by_cause"]["guest_kernel"],
            2 * 1000 + 2 * 100 + 10,
            "{mode}"
        );
    }
}
