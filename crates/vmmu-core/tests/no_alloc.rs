//! The reference path allocates nothing once warm (DESIGN.md "Quality rules": the engine
//! allocates nothing per reference on the hot path).
//!
//! A counting global allocator (this test binary's only) counts the allocations of the thread
//! that simulates. Each case simulates a workload's set-up events and a first half of its
//! references (warm-up: TLBs, caches and walk logs reach their working size; shadow tables are
//! built), then counts the allocations of the second half — TLB hits, or TLB misses and full
//! walks — which must be zero.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use vmmu_core::event::Event;
use vmmu_core::sim::Simulator;
use vmmu_core::workload;

mod common;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(|a| a.get())
}

/// Allocations made while simulating the second half of `spec`'s references under
/// `overrides`, and how many walks that half made (to show the case exercises walks or not).
fn allocations_when_warm(spec: &str, overrides: &[(&str, &str)]) -> (u64, u64) {
    let cfg = common::bhargava08(overrides);
    let mut sim = Simulator::new(&cfg).unwrap();
    let mut src = workload::open(spec).unwrap();
    let mut events = Vec::new();
    while src.next_batch(&mut events, 1 << 16).unwrap() > 0 {}
    let first_ref = events
        .iter()
        .position(|e| matches!(e, Event::Ref(_)))
        .unwrap();
    let half = first_ref + (events.len() - first_ref) / 2;
    for e in &events[..half] {
        sim.step(e).unwrap();
    }
    let walks = sim.mmu().hw.stats.walks;
    let before = allocations();
    for e in &events[half..] {
        sim.step(e).unwrap();
    }
    (allocations() - before, sim.mmu().hw.stats.walks - walks)
}

#[test]
fn the_counter_sees_the_simulators_allocations() {
    // The warm-up of a shadow run builds shadow tables: if the counter missed allocations,
    // the zero counts below would prove nothing.
    let before = allocations();
    let cfg = common::bhargava08(&[("mode", "shadow")]);
    let mut sim = Simulator::new(&cfg).unwrap();
    let mut src = workload::open("random:footprint=4M,refs=1K,prefault=1").unwrap();
    let mut events = Vec::new();
    while src.next_batch(&mut events, 1 << 16).unwrap() > 0 {}
    let after_setup = allocations();
    for e in &events {
        sim.step(e).unwrap();
    }
    assert!(after_setup > before);
    assert!(
        allocations() > after_setup,
        "simulating the first references allocates"
    );
}

const NESTED_2D_NT: &[(&str, &str)] = &[("mode", "nested"), ("machine.pwc.design", "2d+nt")];

#[test]
fn tlb_hits_allocate_nothing_in_any_mode() {
    for ov in [
        &[("mode", "native")][..],
        NESTED_2D_NT,
        &[("mode", "shadow")],
    ] {
        let (allocs, walks) =
            allocations_when_warm("stream:footprint=256K,refs=200K,prefault=1", ov);
        assert_eq!(allocs, 0, "{ov:?}");
        assert_eq!(walks, 0, "{ov:?}: a 256 KiB stream fits the TLBs once warm");
    }
}

#[test]
fn walks_allocate_nothing_native_nested_and_shadow() {
    for ov in [
        &[("mode", "native")][..],
        NESTED_2D_NT,
        &[("mode", "nested"), ("machine.pwc.design", "psc")],
        &[("mode", "shadow")],
    ] {
        let (allocs, walks) =
            allocations_when_warm("random:footprint=64M,refs=200K,prefault=1", ov);
        assert_eq!(allocs, 0, "{ov:?}");
        assert!(walks > 50_000, "{ov:?}: only {walks} walks");
    }
}
