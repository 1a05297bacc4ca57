//! Shadow paging, exits and techniques on crafted event sequences: exact exit counts
//! per operation, DESIGN.md laws 3, 4 and 5 with the checked mode on.

mod common;

use common::*;
use vmmu_core::addr::Gva;
use vmmu_core::event::Event;

const PAGE: u64 = 4096;

fn shadow(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![("mode", "shadow")];
    v.extend_from_slice(extra);
    v
}

/// Process 1 with a region whose first page was touched (its tables exist and are shadowed),
/// then a first touch of the page two pages on.
fn demand_fault() -> (Vec<Event>, Vec<Event>) {
    let mut before = region(64 * PAGE, false);
    before.push(load(BASE));
    let mut after = before.clone();
    after.push(load(BASE + 2 * PAGE));
    (before, after)
}

fn delta(overrides: &[(&str, &str)], reason: &str) -> u64 {
    let (a, b) = demand_fault();
    exits(&run(overrides, b), reason) - exits(&run(overrides, a), reason)
}

fn total_delta(overrides: &[(&str, &str)]) -> u64 {
    let (a, b) = demand_fault();
    u(&run(overrides, b), "world_switches") - u(&run(overrides, a), "world_switches")
}

#[test]
fn a_demand_fault_costs_two_exits_when_the_leaf_table_is_out_of_sync() {
    let ov = shadow(&[
        ("hypervisor.shadow.unsync", "true"),
        ("hypervisor.shadow.prefetch", "0"),
    ]);
    assert_eq!(total_delta(&ov), 2);
    assert_eq!(delta(&ov, "guest_fault"), 1, "reflected into the guest");
    assert_eq!(
        delta(&ov, "hidden_fault"),
        1,
        "the retried access fills the shadow"
    );
    assert_eq!(delta(&ov, "pt_write"), 0);
}

#[test]
fn a_demand_fault_costs_three_exits_when_the_pte_write_is_emulated() {
    let ov = shadow(&[
        ("hypervisor.shadow.unsync", "false"),
        ("hypervisor.shadow.prefetch", "0"),
    ]);
    assert_eq!(total_delta(&ov), 3);
    assert_eq!(delta(&ov, "pt_write"), 1);
}

#[test]
fn law5_nested_paging_with_pre_backed_memory_makes_no_exits() {
    let (_, b) = demand_fault();
    let r = run(&[("mode", "nested")], b);
    assert_eq!(u(&r, "world_switches"), 0);
    assert_eq!(r["exits"].as_object().unwrap().len(), 0);
    assert_eq!(r["cycles_by_cause"]["hypervisor"], 0);
}

#[test]
fn lazily_backed_nested_memory_exits_once_per_new_frame() {
    let mut ev = region(64 * PAGE, false);
    ev.extend((0..8).map(|i| load(BASE + i * PAGE)));
    let r = run(&[("mode", "nested"), ("hypervisor.backing", "lazy")], ev);
    // 8 data frames, plus the page-table frames the first touch allocated (L4 root, L3, L2, L1).
    let tables = r["guest"]["table_frames"].as_u64().unwrap();
    assert_eq!(exits(&r, "nested_fault"), 8 + tables);
}

fn two_processes(switches: usize) -> Vec<Event> {
    let mut ev = region(16 * PAGE, true);
    ev.push(load(BASE));
    ev.push(Event::Fork {
        parent: 1,
        child: 2,
    });
    for i in 0..switches {
        let pid = if i % 2 == 0 { 2 } else { 1 };
        ev.push(Event::Switch { pid });
        ev.push(load(BASE + PAGE));
    }
    ev
}

#[test]
fn a_switch_between_cached_roots_costs_one_exit_and_builds_nothing() {
    let ov = shadow(&[]);
    let a = run(&ov, two_processes(2));
    let b = run(&ov, two_processes(4));
    assert_eq!(exits(&b, "cr3_write") - exits(&a, "cr3_write"), 2);
    assert_eq!(
        b["shadow"]["pages_built"], a["shadow"]["pages_built"],
        "cached roots: nothing rebuilt"
    );
    assert_eq!(
        u(&b, "world_switches") - u(&a, "world_switches"),
        2,
        "one exit per switch"
    );
}

#[test]
fn without_cached_roots_every_switch_rebuilds() {
    let ov = shadow(&[("hypervisor.shadow.cached_roots", "0")]);
    let a = run(&ov, two_processes(2));
    let b = run(&ov, two_processes(4));
    assert_eq!(exits(&b, "cr3_write") - exits(&a, "cr3_write"), 2);
    let built = |v: &serde_json::Value| v["shadow"]["pages_built"].as_u64().unwrap();
    // Each switch rebuilds the root plus the three tables below it on the next access.
    assert_eq!(built(&b) - built(&a), 2 * 4);
    assert_eq!(exits(&b, "hidden_fault") - exits(&a, "hidden_fault"), 2);
}

#[test]
fn a_write_to_an_out_of_sync_page_costs_no_exit_until_the_next_cr3_write() {
    let ov = shadow(&[("hypervisor.shadow.unsync", "true")]);
    let mut base = region(64 * PAGE, false);
    base.push(load(BASE));
    let mut with_write = base.clone();
    // mprotect of one page rewrites its PTE (an out-of-sync page: no exit) and INVLPGs it.
    with_write.push(Event::mprotect(
        Gva::new(BASE),
        PAGE,
        vmmu_core::event::Prot(1),
    ));
    let a = run(&ov, base);
    let b = run(&ov, with_write);
    assert_eq!(exits(&b, "pt_write") - exits(&a, "pt_write"), 0);
    assert_eq!(exits(&b, "invlpg") - exits(&a, "invlpg"), 1);
    assert_eq!(
        b["shadow"]["resyncs"].as_u64().unwrap(),
        1,
        "INVLPG resynced the page"
    );
}

#[test]
fn a_fork_under_hvm_emulates_one_write_per_write_protected_pte() {
    let ov = shadow(&[
        ("hypervisor.shadow.unsync", "false"),
        ("hypervisor.shadow.write_flood", "0"),
    ]);
    let n = 10;
    let mut ev = region(n * PAGE, true);
    ev.extend((0..n).map(|i| load(BASE + i * PAGE)));
    let a = run(&ov, ev.clone());
    ev.push(Event::Fork {
        parent: 1,
        child: 2,
    });
    let b = run(&ov, ev);
    assert_eq!(exits(&b, "pt_write") - exits(&a, "pt_write"), n);
}

#[test]
fn write_flood_stops_shadowing_a_table() {
    let ov = shadow(&[
        ("hypervisor.shadow.unsync", "false"),
        ("hypervisor.shadow.write_flood", "3"),
    ]);
    let n = 10;
    let mut ev = region(n * PAGE, true);
    ev.extend((0..n).map(|i| load(BASE + i * PAGE)));
    let before = run(&ov, ev.clone());
    ev.push(Event::Fork {
        parent: 1,
        child: 2,
    });
    let r = run(&ov, ev);
    assert_eq!(
        exits(&r, "pt_write") - exits(&before, "pt_write"),
        3,
        "the third emulated write unshadows the table; the other 7 are free"
    );
    assert_eq!(r["shadow"]["unshadowed"], 1);
}

#[test]
fn law4_shadow_completes_as_many_walks_as_native() {
    let mut ev = region(256 * PAGE, false);
    let mut x = 99u64;
    for _ in 0..3000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        ev.push(store(BASE + (x >> 33) % (256 * PAGE)));
    }
    ev.push(Event::ProcessCreate { pid: 2 });
    ev.push(Event::Switch { pid: 2 });
    ev.push(mmap(BASE, 64 * PAGE, false));
    ev.extend((0..64).map(|i| store(BASE + i * PAGE)));
    ev.push(Event::Switch { pid: 1 });
    ev.extend((0..256).map(|i| store(BASE + i * PAGE)));
    let completed = |v: &serde_json::Value| u(v, "walks") - u(v, "walk_faults");
    let native = run(&[], ev.clone());
    for unsync in ["true", "false"] {
        let sh = run(&shadow(&[("hypervisor.shadow.unsync", unsync)]), ev.clone());
        assert_eq!(completed(&sh), completed(&native), "unsync={unsync}");
        assert!(
            u(&sh, "walk_faults") > u(&native, "walk_faults"),
            "hidden faults are faulting walks"
        );
        assert_eq!(
            u(&sh, "checked_translations"),
            u(&native, "checked_translations")
        );
    }
}

#[test]
fn without_vpid_every_exit_flushes_the_tlb() {
    let (_, b) = demand_fault();
    let mut ev = b;
    ev.extend((0..4).map(|_| load(BASE)));
    let with = run(&shadow(&[]), ev.clone());
    let without = run(&shadow(&[("machine.tlb.vpid", "false")]), ev);
    assert!(u(&without, "walks") > u(&with, "walks"));
}

#[test]
fn pv_and_previrt_batch_page_table_updates() {
    let n = 10;
    let mut ev = region(n * PAGE, true);
    ev.extend((0..n).map(|i| load(BASE + i * PAGE)));
    ev.push(Event::Fork {
        parent: 1,
        child: 2,
    });
    let pv = run(&shadow(&[("hypervisor.technique", "pv")]), ev.clone());
    let pre = run(&shadow(&[("hypervisor.technique", "previrt")]), ev.clone());
    let hvm = run(
        &shadow(&[
            ("hypervisor.shadow.unsync", "false"),
            ("hypervisor.shadow.write_flood", "0"),
        ]),
        ev,
    );
    // The fork's 10 write-protections (and the child's 10 mappings) are one hypercall.
    assert_eq!(exits(&pv, "hypercall"), exits(&pre, "hypercall"));
    assert!(exits(&pre, "inplace_vmm_call") >= 2 * n);
    assert_eq!(exits(&pv, "pt_write"), 0);
    assert!(exits(&hvm, "pt_write") >= n);
    assert!(u(&pv, "world_switches") < u(&hvm, "world_switches"));
}

#[test]
fn a_full_flush_resyncs_out_of_sync_pages() {
    // Unmapping more pages than the INVLPG ceiling makes the guest flush its whole TLB; under
    // shadow paging that flush must resync, or a stale shadow entry would survive (--check).
    let n = 34;
    let mut ev = region(n * PAGE, false);
    ev.extend((0..n).map(|i| store(BASE + i * PAGE)));
    ev.push(Event::munmap(Gva::new(BASE), n * PAGE));
    ev.push(mmap(BASE, n * PAGE, false));
    ev.extend((0..n).map(|i| store(BASE + i * PAGE)));
    let r = run(&shadow(&[("hypervisor.shadow.unsync", "true")]), ev);
    assert_eq!(u(&r, "checked_translations"), 2 * n);
    assert!(r["shadow"]["resyncs"].as_u64().unwrap() >= 1);
}

#[test]
fn impossible_events_name_the_event_and_its_position() {
    let cases: Vec<(Vec<Event>, &str)> = vec![
        (
            vec![Event::ProcessCreate { pid: 1 }, Event::Exit { pid: 7 }],
            "exit of unknown process 7",
        ),
        (
            vec![
                Event::ProcessCreate { pid: 1 },
                Event::munmap(Gva::new(BASE), PAGE),
            ],
            "nothing is mapped there",
        ),
        (
            vec![
                Event::ProcessCreate { pid: 1 },
                Event::ProcessCreate { pid: 2 },
                Event::Exit { pid: 2 },
                Event::Switch { pid: 2 },
            ],
            "switch to unknown or dead process 2",
        ),
    ];
    for mode in ["native", "nested", "shadow"] {
        for (events, want) in &cases {
            let last = events.len() - 1;
            let err = try_run(&[("mode", mode)], events.clone())
                .expect_err("an impossible event must fail")
                .to_string();
            assert!(err.contains(want), "{mode}: {err}");
            assert!(
                err.contains(&format!("position {last}")),
                "{mode}: the error names the event's position: {err}"
            );
        }
    }
}
