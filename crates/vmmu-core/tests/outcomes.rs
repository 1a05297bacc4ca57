//! What a step returns (`Simulator::step`, `sim::Outcome`): the values the multi-vCPU layer
//! acts on — the guest kernel's actions whose invalidations it shoots down, a mode switch at
//! which every vCPU flushes, the end of the warm-up, the shadow pager's lock holds — pinned
//! on crafted streams, step by step.

mod common;

use common::{bhargava08, load, mmap, BASE};
use vmmu_core::addr::Gva;
use vmmu_core::event::Event;
use vmmu_core::sim::{Outcome, Simulator};
use vmmu_core::vmm::exits::ExitReason;
use vmmu_core::vmm::LockHolds;

const PAGE: u64 = 4096;

/// Process 1 maps and populates 16 pages, loads 8 of them (one instruction each), unmaps 4
/// and loads 4 more.
fn stream() -> Vec<Event> {
    let mut ev = vec![Event::ProcessCreate { pid: 1 }, mmap(BASE, 16 * PAGE, true)];
    ev.extend((0..8).map(|p| load(BASE + p * PAGE)));
    ev.push(Event::munmap(Gva::new(BASE), 4 * PAGE));
    ev.extend((8..12).map(|p| load(BASE + p * PAGE)));
    ev
}

fn outcomes(overrides: &[(&str, &str)]) -> (Simulator, Vec<Outcome>) {
    let mut sim = Simulator::new(&bhargava08(overrides)).unwrap();
    let out = stream().iter().map(|e| sim.step(e).unwrap()).collect();
    (sim, out)
}

/// The guest kernel acted: its invalidations are to be shot down.
fn os() -> Outcome {
    Outcome {
        invalidations: true,
        ..Outcome::default()
    }
}

#[test]
fn each_os_event_and_nothing_else_asks_for_a_shootdown_under_nested_paging() {
    let (_, out) = outcomes(&[("mode", "\"nested\"")]);
    let mut want = vec![os(), os()];
    want.extend([Outcome::default(); 8]);
    want.push(os());
    want.extend([Outcome::default(); 4]);
    assert_eq!(out, want);
}

#[test]
fn a_mode_switch_and_the_end_of_the_warm_up_are_the_boundaries_before_their_events() {
    // The fifth load retires instruction 5: the warm-up of 3 instructions ends before the
    // fourth load, the switch at instruction 6 (warm-up included) before the seventh.
    let (sim, out) = outcomes(&[
        ("mode", "\"nested\""),
        ("warmup.instructions", "3"),
        ("hypervisor.switch.at", "[6]"),
    ]);
    let at = |i: usize| out[i];
    assert_eq!(
        at(5),
        Outcome {
            boundary: true,
            warmup_ended: true,
            ..Outcome::default()
        }
    );
    let switched = at(8);
    assert!(switched.boundary && switched.mode_switched, "{switched:?}");
    let boundaries: Vec<usize> = (0..out.len()).filter(|&i| out[i].boundary).collect();
    assert_eq!(boundaries, [5, 8]);
    assert_eq!(
        out.iter().filter(|o| o.mode_switched).count() as u64,
        sim.vmm().stats.mode_switches
    );
}

#[test]
fn the_lock_holds_of_the_steps_are_the_lock_taking_exits_of_the_run() {
    let (sim, out) = outcomes(&[("mode", "\"shadow\"")]);
    let exits = sim.vmm().exits();
    let taking = ExitReason::ALL.iter().filter(|r| r.takes_pager_lock());
    let want = taking.fold((0, 0), |(n, c), &r| {
        (n + exits.count(r), c + exits.cycles(r))
    });
    let got = out
        .iter()
        .fold(LockHolds::default(), |h, o| h.then(o.pager_lock));
    assert!(want.0 > 0, "shadow paging takes the lock: {want:?}");
    assert_eq!((got.holds, got.cycles), want);
    // Every hold's world switch is the exit round trip, outside the lock.
    let trip = sim.vmm().costs().exit_round_trip;
    assert_eq!((got.trips, got.first_trip), (want.0 * trip, trip));
    // A populated page's first load under shadow paging is a hidden fault, one hold.
    assert_eq!(out[2].pager_lock.holds, 1, "{:?}", out[2]);
    assert!(!out[2].invalidations, "a hidden fault is not the guest's");
}

/// Two threads of process 1, on two vCPUs, each load 8 pages of a populated region (one
/// instruction each); thread 1 then loads 8 more.
fn two_threads() -> Vec<Event> {
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(BASE, 64 * PAGE, true),
        Event::ThreadCreate { pid: 1, tid: 2 },
    ];
    ev.extend((0..8).map(|p| load(BASE + p * PAGE)));
    ev.push(Event::Thread { pid: 1, tid: 2 });
    ev.extend((8..16).map(|p| load(BASE + p * PAGE)));
    ev.push(Event::Thread { pid: 1, tid: 1 });
    ev.extend((16..24).map(|p| load(BASE + p * PAGE)));
    ev
}

#[test]
fn a_mode_switch_on_one_vcpu_flushes_every_vcpu() {
    let flushes = |vcpus: &str| {
        let v = common::run(
            &[
                ("mode", "\"nested\""),
                ("guest.vcpus", vcpus),
                ("hypervisor.switch.at", "[12]"),
            ],
            two_threads(),
        );
        assert_eq!(common::u(&v, "mode_switches"), 1, "{vcpus} vCPUs");
        common::u(&v["os_events"], "vm_flushes")
    };
    // The vCPU that switches flushes in the switch; the other is made to exit and flush.
    assert_eq!(flushes("1"), 1);
    assert_eq!(flushes("2"), 2);
}
