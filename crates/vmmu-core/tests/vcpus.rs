//! Multi-vCPU guests (docs/model.md, "vCPUs"): one vCPU is the single-processor model exactly;
//! TLB shootdowns reach exactly the vCPUs that may cache the changed mappings, with the exits
//! each mode takes; law 3 holds on every vCPU; impossible configurations and streams are
//! rejected naming the rule.

mod common;

use common::{concurrent_faults, exits, load, mmap, munmap_while_shared, store, try_run, u, BASE};
use proptest::prelude::*;
use serde_json::Value;
use vmmu_core::addr::Gva;
use vmmu_core::event::Event;

const PAGE: u64 = 4096;

fn thread(pid: u32, tid: u32) -> Event {
    Event::Thread { pid, tid }
}

/// The whole result without the simulator's timing.
fn strip(mut v: Value) -> Value {
    v["sim"]["seconds"] = Value::Null;
    v["sim"]["events_per_second"] = Value::Null;
    v
}

const MODES: [(&str, &str); 3] = [
    ("mode", "\"native\""),
    ("mode", "\"nested\""),
    ("mode", "\"shadow\""),
];

#[test]
fn one_vcpu_is_the_single_processor_model() {
    for mode in MODES {
        let with = try_run(&[mode, ("guest.vcpus", "1")], munmap_while_shared()).unwrap();
        let without = try_run(&[mode], munmap_while_shared()).unwrap();
        assert_eq!(strip(with.clone()), strip(without), "{mode:?}");
        assert!(with.get("vcpus").is_none() && with.get("shootdowns").is_none());
    }
}

#[test]
fn a_shootdown_reaches_the_vcpu_that_caches_the_pages() {
    let profile = ("hypervisor.profile", "\"esx-nehalem\"");
    for mode in MODES {
        let v = try_run(
            &[mode, profile, ("guest.vcpus", "2")],
            munmap_while_shared(),
        )
        .unwrap();
        let s = &v["shootdowns"];
        assert_eq!(u(s, "shootdowns"), 1, "{mode:?}: {s}");
        assert_eq!(u(s, "ipis"), 1, "{mode:?}");
        assert_eq!(u(s, "remote_invlpgs"), 4, "{mode:?}");
        assert_eq!(u(s, "remote_context_flushes"), 0, "{mode:?}");
        let vc = v["vcpus"].as_array().unwrap();
        assert_eq!(vc.len(), 2);
        assert_eq!(
            (u(&vc[0], "shootdowns"), u(&vc[1], "ipis_received")),
            (1, 1)
        );
        assert_eq!(
            u(&vc[0], "refs") + u(&vc[1], "refs"),
            u(&v, "memory_refs") + u(&v, "fetches")
        );
        let one = try_run(&[mode, profile], munmap_while_shared()).unwrap();
        match mode.1 {
            "\"native\"" => {
                assert!(v["exits"].as_object().unwrap().is_empty(), "{}", v["exits"]);
            }
            m => {
                // Without posted interrupts the send, the delivery and the EOI exit.
                assert_eq!(exits(&v, "ipi_send"), 1, "{m}");
                assert_eq!(exits(&v, "ipi_deliver"), 1, "{m}");
                assert_eq!(exits(&v, "eoi"), 1, "{m}");
                // Under shadow paging the handler's INVLPGs exit too, on the remote vCPU.
                let remote = if m == "\"shadow\"" { 4 } else { 0 };
                assert_eq!(exits(&v, "invlpg"), exits(&one, "invlpg") + remote, "{m}");
            }
        }
        assert_eq!(
            u(&v["cycles_by_cause"], "shootdown_wait"),
            u(s, "wait_cycles"),
            "{mode:?}"
        );
        assert!(
            u(s, "wait_cycles") > 0,
            "{mode:?}: the initiator waits for the handler"
        );
    }
    // Posted interrupts: only the sender's ICR write exits.
    let v = try_run(
        &[
            ("mode", "\"nested\""),
            ("hypervisor.profile", "\"kvm-modern\""),
            ("guest.vcpus", "2"),
        ],
        munmap_while_shared(),
    )
    .unwrap();
    assert_eq!(
        (
            exits(&v, "ipi_send"),
            exits(&v, "ipi_deliver"),
            exits(&v, "eoi")
        ),
        (1, 0, 0)
    );
}

#[test]
fn runs_are_deterministic() {
    for mode in MODES {
        let a = try_run(&[mode, ("guest.vcpus", "3")], munmap_while_shared()).unwrap();
        let b = try_run(&[mode, ("guest.vcpus", "3")], munmap_while_shared()).unwrap();
        assert_eq!(strip(a), strip(b));
    }
}

#[test]
fn impossible_vcpu_counts_are_rejected() {
    let err = |ov: &[(&str, &str)]| try_run(ov, munmap_while_shared()).unwrap_err().to_string();
    let e = err(&[("guest.vcpus", "0")]);
    assert!(e.contains("guest.vcpus") && e.contains("at least 1"), "{e}");
    let e = err(&[("guest.vcpus", "5")]);
    assert!(
        e.contains("guest.vcpus") && e.contains("4-core") && e.contains("overcommit"),
        "{e}"
    );
    assert!(try_run(
        &[("guest.vcpus", "5"), ("guest.overcommit", "true")],
        munmap_while_shared()
    )
    .is_ok());
}

#[test]
fn a_stream_naming_a_missing_thread_is_rejected() {
    let mut ev = vec![Event::ProcessCreate { pid: 1 }, mmap(BASE, 4 * PAGE, true)];
    ev.push(thread(1, 9));
    ev.push(load(BASE));
    let e = try_run(&[("guest.vcpus", "2")], ev.clone())
        .unwrap_err()
        .to_string();
    assert!(e.contains("thread 9"), "{e}");
    let e = try_run(&[], ev).unwrap_err().to_string();
    assert!(e.contains("thread 9"), "{e}");
}

/// A random multi-threaded program: threads of one process load and store in a shared
/// populated region and a demand-paged one, switch, and remap and protect pages while others
/// run; and a forked child that exits.
fn program(ops: &[(u8, u8, u16)]) -> Vec<Event> {
    let shared = BASE;
    let lazy = BASE + (1 << 30);
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(shared, 256 * PAGE, true),
        mmap(lazy, 256 * PAGE, false),
        Event::ThreadCreate { pid: 1, tid: 2 },
        Event::ThreadCreate { pid: 1, tid: 3 },
    ];
    let mut ro = false;
    let mut child = false;
    for &(op, t, page) in ops {
        let page = page as u64 % 256;
        match op % 12 {
            0 => ev.push(thread(1, 1 + t as u32 % 3)),
            1..=4 => ev.push(load(shared + page * PAGE)),
            5 if !ro => ev.push(store(shared + page * PAGE)),
            6 => ev.push(store(lazy + page * PAGE)),
            7 => ev.push(load(lazy + page * PAGE)),
            8 => {
                ev.push(Event::munmap(
                    Gva::new(lazy + page * PAGE),
                    PAGE * (1 + t as u64 % 40),
                ));
                let len = PAGE * (1 + t as u64 % 40);
                ev.push(Event::mmap(
                    Gva::new(lazy + page * PAGE),
                    len,
                    vmmu_core::event::Prot::RW,
                    vmmu_core::event::MapFlags(0),
                ));
            }
            9 => {
                ro = !ro;
                ev.push(Event::mprotect(
                    Gva::new(shared),
                    256 * PAGE,
                    if ro {
                        vmmu_core::event::Prot(vmmu_core::event::Prot::READ)
                    } else {
                        vmmu_core::event::Prot::RW
                    },
                ));
            }
            10 if !child => {
                child = true;
                ev.push(Event::Fork {
                    parent: 1,
                    child: 7,
                });
                ev.push(Event::Switch { pid: 7 });
                ev.push(store(lazy + page * PAGE));
                ev.push(Event::Exit { pid: 7 });
                ev.push(thread(1, 1));
            }
            _ => ev.push(load(shared + page * PAGE)),
        }
    }
    ev
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Law 3 on every vCPU, in every mode, with shootdowns in flight.
    #[test]
    fn law3_holds_on_every_vcpu(
        ops in prop::collection::vec((0u8..12, 0u8..255, 0u16..1024), 20..300),
        vcpus in 2u32..5,
        mode in 0usize..3,
    ) {
        let ev = program(&ops);
        let n = vcpus.to_string();
        let v = try_run(&[MODES[mode], ("guest.vcpus", &n)], ev.clone());
        let v = v.map_err(|e| TestCaseError::fail(e.to_string()))?;
        let one = try_run(&[MODES[mode]], ev).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(u(&v, "checked_translations"), u(&v, "memory_refs") + u(&v, "fetches"));
        prop_assert_eq!(u(&v, "memory_refs"), u(&one, "memory_refs"));
        prop_assert_eq!(u(&v, "instructions"), u(&one, "instructions"));
        let sum: u64 = v["vcpus"].as_array().unwrap().iter().map(|c| u(c, "refs")).sum();
        prop_assert_eq!(sum, u(&v, "memory_refs") + u(&v, "fetches"));
    }
}

/// Runs workload `spec` with `overrides` (checked, data caches off) on bhargava08.
fn run_workload(spec: &str, overrides: &[(&str, &str)]) -> Value {
    let mut ov: Vec<(String, String)> = vec![
        ("machine.caches.data".into(), "false".into()),
        ("check".into(), "true".into()),
    ];
    ov.extend(
        overrides
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string())),
    );
    let cfg = vmmu_core::config::build("bhargava08", &ov).unwrap();
    let mut src = vmmu_core::workload::open(spec).unwrap();
    vmmu_core::run::run(&cfg, &mut *src, &mut |_| true)
        .unwrap_or_else(|e| panic!("{spec} {overrides:?}: {e}"))
        .to_json()
}

#[test]
fn the_multi_vcpu_workloads_run_checked_on_every_vcpu_in_every_mode() {
    let specs = [
        "compile:jobs=7,parallel=3,text=32,heap=64,blocks=40,instrs=100",
        "database:threads=4,queries=6,pool=4M,rows=32,temp=32K,instrs=100",
        "xenapp:sessions=4,apps=2,heap=16,work=100,instrs=100",
    ];
    for spec in specs {
        for mode in MODES {
            let one = run_workload(spec, &[mode]);
            let four = run_workload(spec, &[mode, ("guest.vcpus", "4")]);
            // The same work, spread over the vCPUs.
            for k in ["instructions", "memory_refs", "fetches", "page_faults"] {
                assert_eq!(u(&one, k), u(&four, k), "{spec} {mode:?}: {k}");
            }
            let busy = four["vcpus"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| u(v, "instructions") > 0)
                .count();
            assert!(busy >= 3, "{spec} {mode:?}: {}", four["vcpus"]);
            assert!(
                u(&four, "elapsed_cycles") < u(&one, "cycles"),
                "{spec} {mode:?}"
            );
        }
        // The database's threads share an address space and unmap their work areas: every
        // munmap reaches the vCPUs running the other threads.
        if spec.starts_with("database") {
            let four = run_workload(spec, &[("guest.vcpus", "4")]);
            assert!(
                u(&four["shootdowns"], "shootdowns") > 0,
                "{}",
                four["shootdowns"]
            );
        }
    }
}

/// Two processes demand-fault their own regions at once: under shadow paging their hidden
/// faults take the shadow pager's lock and one vCPU waits for the other; nested paging takes
/// no lock.
#[test]
fn concurrent_shadow_faults_wait_for_the_pager_lock() {
    let ev = concurrent_faults();
    let shadow = try_run(&[MODES[2], ("guest.vcpus", "2")], ev.clone()).unwrap();
    let l = &shadow["pager_lock"];
    assert!(u(l, "holds") > 0 && u(l, "contended") > 0, "{l}");
    assert_eq!(
        u(l, "wait_cycles"),
        u(&shadow["cycles_by_cause"], "pager_lock_wait")
    );
    let nested = try_run(&[MODES[1], ("guest.vcpus", "2")], ev).unwrap();
    assert_eq!(u(&nested["pager_lock"], "holds"), 0);
    assert_eq!(u(&nested["cycles_by_cause"], "pager_lock_wait"), 0);
}

#[test]
fn pinned_threads_run_where_pinned_and_a_missing_vcpu_is_rejected() {
    let spec = "database:threads=4,queries=4,pool=2M,rows=16,temp=16K,instrs=100";
    // Threads 2..5 all on vCPU 2: vCPUs 0, 1 and 3 run only the main thread's set-up, if any.
    let v = run_workload(
        spec,
        &[
            ("guest.vcpus", "4"),
            (
                "guest.affinity",
                "{ \"2\" = 2, \"3\" = 2, \"4\" = 2, \"5\" = 2 }",
            ),
        ],
    );
    let vc = v["vcpus"].as_array().unwrap();
    assert_eq!(
        u(&vc[1], "instructions") + u(&vc[3], "instructions"),
        0,
        "{vc:?}"
    );
    assert!(u(&vc[2], "instructions") > 0);
    assert_eq!(u(&vc[2], "migrations"), 0);
    let e = try_run(
        &[("guest.vcpus", "2"), ("guest.affinity", "{ \"7\" = 2 }")],
        munmap_while_shared(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("guest.affinity.7") && e.contains("vCPU 2") && e.contains("does not exist"),
        "{e}"
    );
}

/// Three busy threads pinned to one vCPU take turns by the time slice: a shorter slice makes
/// more context switches, and a slice longer than the run none beyond the first dispatches.
#[test]
fn the_time_slice_bounds_a_threads_turn() {
    let mut ev = vec![Event::ProcessCreate { pid: 1 }, mmap(BASE, 16 * PAGE, true)];
    for t in 2..5 {
        ev.push(Event::ThreadCreate { pid: 1, tid: t });
    }
    for t in 2..5u32 {
        ev.push(thread(1, t));
        for k in 0..50 {
            ev.push(load(BASE + (k % 16) * PAGE));
            ev.push(Event::Compute { instrs: 10_000 });
        }
    }
    let pins = "{ \"2\" = 1, \"3\" = 1, \"4\" = 1 }";
    let switches = |slice: &str| {
        let v = try_run(
            &[
                ("guest.vcpus", "2"),
                ("guest.affinity", pins),
                ("guest.time_slice", slice),
            ],
            ev.clone(),
        )
        .unwrap();
        u(&v["vcpus"][1], "context_switches")
    };
    let (short, long) = (switches("20000"), switches("1000000000"));
    assert_eq!(long, 3, "each thread dispatched once");
    assert!(short > 3 * 10, "{short}");
}

#[test]
fn adaptive_runs_have_one_vcpu() {
    let e = try_run(
        &[
            ("mode", "\"adaptive\""),
            ("policy.kind", "\"dav2m\""),
            ("guest.vcpus", "2"),
        ],
        munmap_while_shared(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("guest.vcpus") && e.contains("one vCPU"), "{e}");
}
