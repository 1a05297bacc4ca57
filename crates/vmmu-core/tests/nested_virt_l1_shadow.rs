//! Nested virtualization with a shadow-paging L1 (`nested_virt.l1 = "shadow"`) on crafted
//! event sequences: the 2D walk of L1's shadow tables over EPT01, the L2 exits L1 handles by
//! cause with their nested round trips, L0's nested faults for the frames L1 allocates, and
//! every translation checked end to end through the three stages.

mod common;

use common::*;
use vmmu_core::event::Event;

const PAGE: u64 = 4096;

fn shadow_on_ept(more: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut ov = vec![
        ("mode", "nested-virt"),
        ("nested_virt.l1", "shadow"),
        ("machine.pwc.design", "none"),
    ];
    ov.extend_from_slice(more);
    ov
}

/// One populated page touched once.
fn one_touch() -> Vec<Event> {
    let mut ev = region(PAGE, true);
    ev.push(load(BASE));
    ev
}

#[test]
fn the_shadow_tables_are_walked_in_2d_over_ept01() {
    let r = run(
        &shadow_on_ept(&[("warmup.refs", "5"), ("host.nested_page_size", "4K")]),
        cold_walks(5),
    );
    assert_eq!(u(&r, "walks"), 5);
    assert_eq!(u(&r, "walk_refs"), 5 * 24, "(4+1)^2 - 1 per walk");
    let steps = r["walk_refs_by_step"].as_object().unwrap();
    assert_eq!(
        steps["G,gL4"], 5,
        "the shadow root is read in the guest dimension"
    );
    assert_eq!(
        steps["nL1,gPA"], 5,
        "the data's L1 frame is translated by EPT01"
    );
    assert_eq!(u(&r, "checked_translations"), 5);
    // The two CR3 writes reach L1, which finds both shadow roots cached.
    assert_eq!(exits(&r, "cr3_write"), 2);
    assert_eq!(u(&r, "world_switches"), 2);
}

#[test]
fn each_exit_l1_handles_costs_the_nested_round_trip_and_its_handler() {
    let r = run(&shadow_on_ept(&[]), one_touch());
    // The CR3 write of process 1 builds L1's shadow root; populating the page writes the
    // root's entry (shadowed: emulated by L1); the load's hidden fault builds the three
    // lower shadow tables and L1 faults in the L2 page.
    assert_eq!(exits(&r, "cr3_write"), 1);
    assert_eq!(exits(&r, "pt_write"), 1);
    assert_eq!(exits(&r, "hidden_fault"), 1);
    assert_eq!(u(&r, "world_switches"), 3);
    assert_eq!(u(&r, "walk_faults"), 1);
    for reason in ["l1_exit", "ept12_write", "ept02_fill", "nested_fault"] {
        assert_eq!(exits(&r, reason), 0, "{reason}");
    }
    // kvm-nvmx: nested_round_trip 3,250, l1_fault 3,000; kvm-modern: hidden_fault 2,500,
    // make_shadow 3,000, emulate_write 2,800, cr3_write 600.
    let cycles = |reason: &str| r["exits"][reason]["cycles"].as_u64().unwrap();
    assert_eq!(cycles("hidden_fault"), 3250 + 2500 + 3 * 3000 + 3000);
    assert_eq!(cycles("pt_write"), 3250 + 2800);
    assert_eq!(cycles("cr3_write"), 3250 + 600 + 3000);
}

#[test]
fn lazily_backed_l1_memory_adds_a_nested_fault_per_frame_l1_allocates() {
    let r = run(
        &shadow_on_ept(&[
            ("hypervisor.backing", "lazy"),
            ("host.nested_page_size", "4K"),
        ]),
        one_touch(),
    );
    // Four shadow tables, the L2 page, and the three tables below the root of L1's map of
    // its guest's memory.
    assert_eq!(exits(&r, "nested_fault"), 4 + 1 + 3);
    assert_eq!(exits(&r, "hidden_fault"), 1);
    assert_eq!(
        u(&r, "walk_faults"),
        1,
        "EPT01 maps every frame before the walk reaches it"
    );
}

/// [`common::busy`], then half the region unmapped, mapped again and written.
fn busy_unmapped() -> Vec<Event> {
    let mut ev = busy();
    ev.push(Event::munmap(vmmu_core::addr::Gva::new(BASE), 128 * PAGE));
    ev.push(mmap(BASE, 128 * PAGE, false));
    ev.extend((0..128).map(|i| store(BASE + i * PAGE)));
    ev
}

#[test]
fn every_translation_is_checked_through_three_stages() {
    for backing in ["eager", "lazy"] {
        let r = run(
            &shadow_on_ept(&[("hypervisor.backing", backing)]),
            busy_unmapped(),
        );
        assert!(u(&r, "checked_translations") > 0, "{backing}");
        assert!(exits(&r, "guest_fault") >= 256, "{backing}: demand paging");
        assert!(exits(&r, "hidden_fault") >= 256, "{backing}");
        assert_eq!(exits(&r, "l1_exit"), 0, "{backing}: no EPT12");
    }
}

fn pvm(more: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut ov = shadow_on_ept(more);
    ov[1] = ("nested_virt.l1", "pvm");
    ov
}

#[test]
fn pvm_switches_through_the_switcher_and_builds_both_sides() {
    let r = run(&pvm(&[]), one_touch());
    assert_eq!(exits(&r, "cr3_write"), 1);
    assert_eq!(exits(&r, "pt_write"), 1);
    assert_eq!(exits(&r, "hidden_fault"), 1);
    assert_eq!(u(&r, "world_switches"), 3);
    // pvm: switcher_round_trip 448; the CR3 write builds the user and the kernel side's
    // roots; the hidden fault fills the user side only.
    let cycles = |reason: &str| r["exits"][reason]["cycles"].as_u64().unwrap();
    assert_eq!(cycles("cr3_write"), 448 + 600 + 2 * 3000);
    assert_eq!(cycles("pt_write"), 448 + 2800);
    assert_eq!(cycles("hidden_fault"), 448 + 2500 + 3 * 3000 + 3000);
    assert_eq!(r["shadow"]["pages_built"], 2 + 3);
    let sh = run(&shadow_on_ept(&[]), one_touch());
    assert_eq!(sh["shadow"]["pages_built"], 1 + 3);
}

#[test]
fn a_fault_of_the_l2_guest_costs_pvm_one_more_world_switch_than_shadow_on_ept() {
    // Demand paging in a region whose tables exist: the first touch builds them, each later
    // touch is one guest fault with one write to the (shadowed) leaf table.
    let mut ev = region(8 * PAGE, false);
    ev.extend((0..8).map(|i| load(BASE + i * PAGE)));
    let ov = [("hypervisor.shadow.unsync", "false")];
    let (sh, pv) = (run(&shadow_on_ept(&ov), ev.clone()), run(&pvm(&ov), ev));
    for r in [&sh, &pv] {
        assert_eq!(exits(r, "guest_fault"), 8);
        assert_eq!(
            exits(r, "hidden_fault"),
            8,
            "the fill after each guest fault"
        );
        assert_eq!(exits(r, "cr3_write"), 1);
    }
    assert_eq!(exits(&sh, "user_return"), 0);
    assert_eq!(exits(&pv, "user_return"), 8);
    assert_eq!(exits(&pv, "pt_write"), exits(&sh, "pt_write"));
    assert_eq!(
        u(&pv, "world_switches"),
        u(&sh, "world_switches") + 8,
        "the L2 kernel's return to user passes the switcher"
    );
    assert_eq!(
        u(&pv, "checked_translations"),
        u(&sh, "checked_translations")
    );
}

#[test]
fn pvm_checks_every_translation_and_returns_to_user_after_each_guest_fault() {
    for backing in ["eager", "lazy"] {
        let r = run(&pvm(&[("hypervisor.backing", backing)]), busy_unmapped());
        assert!(u(&r, "checked_translations") > 0, "{backing}");
        assert_eq!(
            exits(&r, "user_return"),
            exits(&r, "guest_fault"),
            "{backing}"
        );
    }
}

#[test]
fn a_shadow_paging_l1_outside_nested_virt_is_an_error_naming_the_field() {
    for l1 in ["shadow", "pvm"] {
        let e = try_run(&[("mode", "shadow"), ("nested_virt.l1", l1)], one_touch())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nested_virt.l1") && e.contains(l1) && e.contains("nested-virt"),
            "{e}"
        );
    }
}
