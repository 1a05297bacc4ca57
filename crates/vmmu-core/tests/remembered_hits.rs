//! Runs of references answered by the remembered TLB hit and the remembered L1 line
//! (docs/performance.md, "Runs of remembered hits") give exactly what the
//! reference-at-a-time loop gives: the whole result of `Simulator::run`, which simulates such
//! runs in one loop, equals that of `Simulator::step` on each event, in every paging mode,
//! across warm-up ends, mode switches and policy windows that fall inside a run, with stores
//! that find clean or read-only entries, fetches interleaved with data references, and compute
//! events.

use serde_json::Value;
use vmmu_core::addr::Gva;
use vmmu_core::event::{AccessKind, Event, MapFlags, MemRef, Prot, VecSource};
use vmmu_core::sim::Simulator;

mod common;

const DATA: u64 = 0x4000_0000;
const CODE: u64 = 0x5000_0000;
const PAGE: u64 = 4096;

fn r(va: u64, kind: AccessKind, instrs: u32) -> Event {
    Event::Ref(MemRef {
        va: Gva::new(va),
        kind,
        size: 8,
        instrs,
        dep: 0,
    })
}

/// A process that sweeps 64 pages of data by 8 bytes (a store in every seven references, so
/// that the first store to a page finds its entry clean), fetches from 4 code pages between
/// data references, computes now and then, forks (its stores then find read-only entries),
/// makes part of its data read-only and loads it, and sweeps again.
fn events() -> Vec<Event> {
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        Event::mmap(Gva::new(DATA), 64 * PAGE, Prot::RW, MapFlags(0)),
        Event::mmap(
            Gva::new(CODE),
            4 * PAGE,
            Prot::RWX,
            MapFlags(MapFlags::POPULATE),
        ),
    ];
    let sweep = |ev: &mut Vec<Event>, from: u64| {
        for i in from..from + 64 * 512 {
            let va = DATA + (i % (64 * 512)) * 8;
            let kind = if i % 7 == 3 {
                AccessKind::Store
            } else if i % 5 == 0 {
                AccessKind::Modify
            } else {
                AccessKind::Load
            };
            ev.push(r(va, kind, (i % 3) as u32));
            if i % 11 == 0 {
                ev.push(r(CODE + (i * 4) % (4 * PAGE), AccessKind::Fetch, 1));
            }
            if i % 997 == 0 {
                ev.push(Event::Compute { instrs: 5 });
            }
        }
    };
    sweep(&mut ev, 0);
    ev.push(Event::Fork {
        parent: 1,
        child: 2,
    });
    sweep(&mut ev, 100);
    ev.push(Event::mprotect(Gva::new(DATA), 8 * PAGE, Prot(Prot::READ)));
    ev.extend((0..8 * 512).map(|i| r(DATA + i * 8, AccessKind::Load, 1)));
    ev
}

/// The result of `events` under `overrides`, by `Simulator::run` or by `Simulator::step` on
/// each event.
fn result(overrides: &[(&str, &str)], events: &[Event], batched: bool) -> Value {
    let cfg = common::bhargava08(overrides);
    let mut sim = Simulator::new(&cfg).unwrap();
    if batched {
        let mut src = VecSource::new("crafted", events.to_vec());
        vmmu_core::run::simulate(&mut sim, &mut src, &mut |_| true).unwrap();
    } else {
        for e in events {
            sim.step(e).unwrap();
        }
        sim.finish().unwrap();
    }
    sim.result("crafted", 1.0).to_json()
}

#[test]
fn runs_of_remembered_hits_give_the_results_of_one_reference_at_a_time() {
    let ev = events();
    let refs = ev.iter().filter(|e| matches!(e, Event::Ref(_))).count() as u64;
    let cases: &[&[(&str, &str)]] = &[
        &[("mode", "native")],
        &[("mode", "native"), ("machine.caches.data", "false")],
        &[("mode", "nested")],
        &[("mode", "shadow")],
        // A warm-up that ends inside a run of hits, in references and in instructions.
        &[("mode", "nested"), ("warmup.refs", "1001")],
        &[("mode", "shadow"), ("warmup.instructions", "20011")],
        // Mode switches inside runs of hits.
        &[
            ("mode", "nested"),
            ("hypervisor.switch.at", "[3001, 30007, 41113]"),
        ],
        // A policy's windows and exit wake-ups.
        &[
            ("mode", "adaptive"),
            ("machine.tlb.vpid", "true"),
            ("policy.kind", "dav2m"),
            ("policy.window_inst", "5000"),
        ],
        // The checked mode takes every reference one at a time.
        &[("mode", "native"), ("check", "true")],
    ];
    for ov in cases {
        let batched = result(ov, &ev, true);
        let stepped = result(ov, &ev, false);
        let counted = ["memory_refs", "fetches"]
            .iter()
            .map(|k| batched[k].as_u64().unwrap())
            .sum::<u64>()
            + batched["warmup"]["refs"].as_u64().unwrap_or(0);
        assert_eq!(counted, refs, "{ov:?}: every reference counted once");
        assert_eq!(batched, stepped, "{ov:?}");
    }
}
