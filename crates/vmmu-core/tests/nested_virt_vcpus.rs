//! Several vCPUs under nested virtualization and agile paging (docs/model.md, "vCPUs" and
//! "Nested virtualization"): one vCPU is the single-vCPU model exactly; a guest TLB shootdown
//! costs the exits each L1 kind makes of it (an L2 IPI is an L2 exit L1 handles, L1's own IPI
//! to the target an exit to L0), counted and priced exactly; L1's shadow pagers hold the
//! pager lock; every translation checks on every vCPU.

mod common;

use common::{concurrent_faults, exits, mmap, munmap_while_shared, store, try_run, u, BASE};
use serde_json::Value;
use vmmu_core::event::Event;

const PAGE: u64 = 4096;

/// The L1 kinds and agile paging, as configuration overrides.
const KINDS: [(&str, &[(&str, &str)]); 5] = [
    ("ept", &[("mode", "nested-virt"), ("nested_virt.l1", "ept")]),
    (
        "shadow",
        &[("mode", "nested-virt"), ("nested_virt.l1", "shadow")],
    ),
    ("pvm", &[("mode", "nested-virt"), ("nested_virt.l1", "pvm")]),
    ("3d", &[("mode", "nested-virt"), ("nested_virt.l1", "3d")]),
    ("agile", &[("mode", "agile")]),
];

fn with<'a>(base: &[(&'a str, &'a str)], more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut v = base.to_vec();
    v.extend_from_slice(more);
    v
}

/// The whole result without the simulator's timing.
fn strip(mut v: Value) -> Value {
    v["sim"]["seconds"] = Value::Null;
    v["sim"]["events_per_second"] = Value::Null;
    v
}

/// Cycles of the exits of `reason` (0 when absent).
fn exit_cycles(v: &Value, reason: &str) -> u64 {
    v["exits"]
        .get(reason)
        .and_then(|e| e["cycles"].as_u64())
        .unwrap_or(0)
}

#[test]
fn one_vcpu_is_the_single_vcpu_model_in_every_kind() {
    for (name, ov) in KINDS {
        let with_one = try_run(&with(ov, &[("guest.vcpus", "1")]), munmap_while_shared()).unwrap();
        let without = try_run(ov, munmap_while_shared()).unwrap();
        assert_eq!(strip(with_one.clone()), strip(without), "{name}");
        assert!(with_one.get("vcpus").is_none(), "{name}");
    }
}

/// esx-nehalem has no posted interrupts: the send, the delivery and the EOI all exit. Each
/// L2 IPI is two sends (L2's ICR write, which L1 handles; L1's own IPI, an exit to L0), one
/// delivery and one EOI, the L2 exits priced at the L1 kind's world switch.
#[test]
fn a_shootdown_costs_each_l1_kind_its_exits() {
    let profile = ("hypervisor.profile", "esx-nehalem");
    // esx-nehalem's exit round trip and IPI handlers; kvm-nvmx's nested round trip and
    // pvm's switcher round trip.
    let (rt, send, deliver, eoi) = (2000, 1000, 1500, 500);
    for (name, ov) in KINDS {
        let ov2 = with(ov, &[profile, ("guest.vcpus", "2")]);
        let v = try_run(&ov2, munmap_while_shared()).unwrap();
        let s = &v["shootdowns"];
        assert_eq!(
            (u(s, "shootdowns"), u(s, "ipis"), u(s, "remote_invlpgs")),
            (1, 1, 4),
            "{name}: {s}"
        );
        let one = try_run(&with(ov, &[profile]), munmap_while_shared()).unwrap();
        let trip = match name {
            "pvm" => 448,
            "agile" => rt,
            _ => 3250,
        };
        let l2_sends = if name == "agile" { 1 } else { 2 };
        assert_eq!(exits(&v, "ipi_send"), l2_sends, "{name}");
        assert_eq!(exits(&v, "ipi_deliver"), 1, "{name}");
        assert_eq!(exits(&v, "eoi"), 1, "{name}");
        let sends = if name == "agile" {
            rt + send
        } else {
            (trip + send) + (rt + send)
        };
        assert_eq!(exit_cycles(&v, "ipi_send"), sends, "{name}");
        assert_eq!(exit_cycles(&v, "ipi_deliver"), trip + deliver, "{name}");
        assert_eq!(exit_cycles(&v, "eoi"), trip + eoi, "{name}");
        // Where a shadow pager (L1's, or agile's) shadows the guest, the handler's INVLPGs
        // exit on the remote vCPU too.
        let remote = if matches!(name, "shadow" | "pvm" | "agile") {
            4
        } else {
            0
        };
        assert_eq!(
            exits(&v, "invlpg"),
            exits(&one, "invlpg") + remote,
            "{name}"
        );
        assert_eq!(
            u(&v, "checked_translations"),
            u(&one, "checked_translations")
        );
    }
}

/// kvm-modern has posted interrupts: under VMX the virtual APIC takes L2's EOI, but L1 must
/// still run to inject the interrupt; PVM's L2 has no virtual APIC and its EOI exits.
#[test]
fn posted_interrupts_spare_the_eoi_only_under_vmx() {
    let profile = ("hypervisor.profile", "kvm-modern");
    for (name, ov) in KINDS {
        let v = try_run(
            &with(ov, &[profile, ("guest.vcpus", "2")]),
            munmap_while_shared(),
        )
        .unwrap();
        let got = (
            exits(&v, "ipi_send"),
            exits(&v, "ipi_deliver"),
            exits(&v, "eoi"),
        );
        let want = match name {
            "agile" => (1, 0, 0),
            "pvm" => (2, 1, 1),
            _ => (2, 1, 0),
        };
        assert_eq!(got, want, "{name}");
    }
}

/// Two processes demand-fault their own regions at once: L1's shadow pagers (shadow on EPT,
/// PVM), agile's shadow side and L0's EPT02 builder take the pager lock, and one vCPU waits
/// for the other; a 3D walk has no software pager and takes none.
#[test]
fn software_pagers_serialise_on_the_pager_lock() {
    let ev = concurrent_faults();
    for (name, ov) in KINDS {
        let v = try_run(&with(ov, &[("guest.vcpus", "2")]), ev.clone()).unwrap();
        let l = &v["pager_lock"];
        assert_eq!(
            u(l, "wait_cycles"),
            u(&v["cycles_by_cause"], "pager_lock_wait"),
            "{name}"
        );
        if name == "3d" {
            assert_eq!(u(l, "holds"), 0, "{name}: {l}");
        } else {
            assert!(u(l, "holds") > 0 && u(l, "contended") > 0, "{name}: {l}");
        }
    }
}

/// A held lock is held for the handlers' time, the world switches outside it: under shadow on
/// EPT, L1's round trip is the nested one, not L0's exit round trip.
#[test]
fn the_lock_is_held_for_handler_time_only() {
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(BASE, 64 * PAGE, false),
    ];
    ev.extend((0..64).map(|p| store(BASE + p * PAGE)));
    for (name, ov) in KINDS {
        let v = try_run(&with(ov, &[("guest.vcpus", "2")]), ev.clone()).unwrap();
        let l = &v["pager_lock"];
        // One vCPU runs the only thread: no wait, and the lock is held for exactly the
        // lock-taking handlers' cycles less their world switches.
        assert_eq!(u(l, "contended"), 0, "{name}");
        let taking = [
            "hidden_fault",
            "guest_fault",
            "pt_write",
            "cr3_write",
            "invlpg",
        ]
        .into_iter()
        .chain(["ept02_fill", "ept12_write"]);
        let (mut cycles, mut trips) = (0, 0);
        let trip = match name {
            "shadow" => 3250,
            "pvm" => 448,
            _ => u(&v["config"]["hypervisor"]["costs"], "exit_round_trip"),
        };
        for r in taking {
            cycles += exit_cycles(&v, r);
            let t = if matches!(r, "ept02_fill" | "ept12_write") {
                u(&v["config"]["hypervisor"]["costs"], "exit_round_trip")
            } else {
                trip
            };
            trips += exits(&v, r) * t;
        }
        assert_eq!(u(l, "held_cycles"), cycles - trips, "{name}: {l}");
    }
}

#[test]
fn several_vcpus_check_every_translation_in_every_kind() {
    let spec = "database:threads=4,queries=6,pool=4M,rows=32,temp=32K,instrs=100";
    for (name, ov) in KINDS {
        let run = |n: &'static str| {
            let mut o: Vec<(String, String)> = vec![
                ("machine.caches.data".into(), "false".into()),
                ("check".into(), "true".into()),
                ("guest.vcpus".into(), n.into()),
            ];
            o.extend(ov.iter().map(|(a, b)| (a.to_string(), b.to_string())));
            let cfg = vmmu_core::config::build("bhargava08", &o).unwrap();
            let mut src = vmmu_core::workload::open(spec).unwrap();
            vmmu_core::run::run(&cfg, &mut *src, &mut |_| true)
                .unwrap_or_else(|e| panic!("{name} {n}: {e}"))
                .to_json()
        };
        let (one, four) = (run("1"), run("4"));
        for k in ["instructions", "memory_refs", "fetches", "page_faults"] {
            assert_eq!(u(&one, k), u(&four, k), "{name}: {k}");
        }
        assert!(u(&four, "checked_translations") > 0, "{name}");
        assert!(u(&four["shootdowns"], "shootdowns") > 0, "{name}");
    }
}

/// Four threads of one process each cache pages of a region; thread 1 then execs, and the
/// old address space's tables are freed: one shootdown (the context flush), an IPI to each of
/// the three others; where a shadow pager shadows the freed tables (L1's, agile's) it removes
/// their shadows and every other vCPU is forced to flush, once each.
fn exec_under_four_threads() -> Vec<Event> {
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(BASE, 512 * PAGE, true),
    ];
    ev.extend((2..=4).map(|tid| Event::ThreadCreate { pid: 1, tid }));
    for tid in 1..=4 {
        ev.push(Event::Thread { pid: 1, tid });
        ev.extend((0..8).map(|p| store(BASE + (tid as u64 * 64 + p) * PAGE)));
    }
    ev.push(Event::Thread { pid: 1, tid: 1 });
    ev.push(Event::Exec { pid: 1 });
    ev
}

#[test]
fn freeing_shadowed_tables_flushes_every_other_vcpu_once() {
    let profile = ("hypervisor.profile", "esx-nehalem");
    for (name, ov) in KINDS {
        let v = try_run(
            &with(ov, &[profile, ("guest.vcpus", "4")]),
            exec_under_four_threads(),
        )
        .unwrap();
        let s = &v["shootdowns"];
        assert_eq!(
            (
                u(s, "shootdowns"),
                u(s, "ipis"),
                u(s, "remote_context_flushes")
            ),
            (1, 3, 3),
            "{name}: {s}"
        );
        let l2 = if name == "agile" { 1 } else { 2 };
        assert_eq!(
            (
                exits(&v, "ipi_send"),
                exits(&v, "ipi_deliver"),
                exits(&v, "eoi")
            ),
            (3 * l2, 3, 3),
            "{name}"
        );
        // Each forced flush is an exit of the kind's world switch, priced as a delivery.
        let (flushes, trip) = match name {
            "shadow" => (3, 3250),
            "pvm" => (3, 448),
            "agile" => (3, 2000),
            _ => (0, 0),
        };
        assert_eq!(exits(&v, "remote_flush"), flushes, "{name}: {}", v["exits"]);
        assert_eq!(
            exit_cycles(&v, "remote_flush"),
            flushes * (trip + 1500),
            "{name}"
        );
        assert_eq!(u(s, "remote_flushes"), flushes, "{name}: {s}");
    }
}
