//! Helpers shared by the integration tests: crafted events and a run with overrides.
#![allow(dead_code)]

use serde_json::Value;
use vmmu_core::addr::Gva;
use vmmu_core::config::{self, SimConfig};
use vmmu_core::event::{AccessKind, Event, MapFlags, MemRef, Prot, VecSource};

/// Where crafted regions start (1 GiB aligned).
pub const BASE: u64 = 0x10_0000_0000;

fn mem_ref(va: u64, kind: AccessKind) -> Event {
    Event::Ref(MemRef {
        va: Gva::new(va),
        kind,
        size: 8,
        instrs: 1,
        dep: 0,
    })
}

/// A load of `va`.
pub fn load(va: u64) -> Event {
    mem_ref(va, AccessKind::Load)
}

/// A store to `va`.
pub fn store(va: u64) -> Event {
    mem_ref(va, AccessKind::Store)
}

/// An anonymous read-write mapping of `len` bytes at `start`.
pub fn mmap(start: u64, len: u64, populate: bool) -> Event {
    Event::mmap(
        Gva::new(start),
        len,
        Prot::RW,
        MapFlags(if populate { MapFlags::POPULATE } else { 0 }),
    )
}

/// Process 1 with a `len`-byte region at [`BASE`].
pub fn region(len: u64, populate: bool) -> Vec<Event> {
    vec![Event::ProcessCreate { pid: 1 }, mmap(BASE, len, populate)]
}

/// The bhargava08 machine with `overrides` only (none of [`run`]'s defaults).
pub fn bhargava08(overrides: &[(&str, &str)]) -> SimConfig {
    let ov: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    config::build("bhargava08", &ov).unwrap()
}

/// Runs `events` on bhargava08 with the data caches off, the checked mode on, 4 GiB of guest
/// memory, then `overrides`.
pub fn run(overrides: &[(&str, &str)], events: Vec<Event>) -> Value {
    try_run(overrides, events).expect("run")
}

/// Like [`run`], returning the error.
pub fn try_run(overrides: &[(&str, &str)], events: Vec<Event>) -> vmmu_core::Result<Value> {
    let mut ov: Vec<(String, String)> = vec![
        ("machine.caches.data".into(), "false".into()),
        ("check".into(), "true".into()),
        ("guest.memory".into(), "\"4G\"".into()),
        ("host.memory".into(), "\"8G\"".into()),
    ];
    ov.extend(
        overrides
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string())),
    );
    let cfg = config::build("bhargava08", &ov)?;
    let mut src = VecSource::new("crafted", events);
    vmmu_core::run::run(&cfg, &mut src, &mut |_| true).map(|r| r.to_json())
}

/// An unsigned field of a result.
pub fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

/// The count of exits of `reason` (0 when absent).
pub fn exits(v: &Value, reason: &str) -> u64 {
    v["exits"]
        .get(reason)
        .and_then(|e| e["count"].as_u64())
        .unwrap_or(0)
}

/// Demand paging and copy-on-write over 256 pages of process 1 and its fork, process 3
/// (nested virtualization's end-to-end check).
pub fn busy() -> Vec<Event> {
    let mut ev = region(256 * 4096, false);
    for i in 0..256 {
        ev.push(if i % 3 == 0 {
            store(BASE + i * 4096 * 7 % (256 * 4096))
        } else {
            load(BASE + i * 4096 * 13 % (256 * 4096))
        });
    }
    ev.push(Event::Fork {
        parent: 1,
        child: 3,
    });
    ev.push(Event::Switch { pid: 3 });
    ev.extend((0..64).map(|i| store(BASE + i * 4096)));
    ev.push(Event::Switch { pid: 1 });
    ev.extend((0..256).map(|i| load(BASE + i * 4096 + 8)));
    ev
}

/// Process 1 touches `n` pages of a populated region (the warm-up: every fault of every stage
/// resolved), switches to process 2 and back (CR3 writes without PCIDs: the TLB is flushed),
/// and touches them again: `n` cold walks.
pub fn cold_walks(n: u64) -> Vec<Event> {
    let mut ev = region(n * 4096, true);
    ev.extend((0..n).map(|i| load(BASE + i * 4096)));
    ev.push(Event::ProcessCreate { pid: 2 });
    ev.push(Event::Switch { pid: 2 });
    ev.push(Event::Switch { pid: 1 });
    ev.extend((0..n).map(|i| load(BASE + i * 4096)));
    ev
}

/// Two threads of one process touch a populated region; thread 2 then maps another region
/// (an OS event, so it has run its loads by then) and thread 1 unmaps four pages thread 2 has
/// in its TLB: on two vCPUs, exactly one shootdown, of four pages, to vCPU 1.
pub fn munmap_while_shared() -> Vec<Event> {
    let page = 4096;
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(BASE, 64 * page, true),
        Event::ThreadCreate { pid: 1, tid: 2 },
    ];
    ev.extend((0..8).map(|p| load(BASE + p * page)));
    ev.push(Event::Thread { pid: 1, tid: 2 });
    ev.extend((0..8).map(|p| load(BASE + p * page + 64)));
    ev.push(mmap(BASE + (1 << 30), 16 * page, false));
    ev.push(Event::Thread { pid: 1, tid: 1 });
    ev.push(Event::munmap(Gva::new(BASE), 4 * page));
    ev.extend((8..16).map(|p| store(BASE + p * page)));
    ev.push(Event::Thread { pid: 1, tid: 2 });
    ev.extend((16..24).map(|p| load(BASE + p * page)));
    ev
}

/// Two processes (a fork) demand-fault their own halves of a region in turns: on two vCPUs
/// their faults run at once.
pub fn concurrent_faults() -> Vec<Event> {
    let page = 4096;
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(BASE, 256 * page, false),
        Event::Fork {
            parent: 1,
            child: 2,
        },
    ];
    for k in 0..8u64 {
        ev.push(Event::Switch {
            pid: 1 + (k % 2) as u32,
        });
        ev.extend((0..32).map(|p| store(BASE + (k / 2 * 32 + p) * page)));
    }
    ev
}
