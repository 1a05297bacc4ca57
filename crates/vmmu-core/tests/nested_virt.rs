//! Nested virtualization on crafted event sequences: the reference counts of the walks each L1
//! kind makes the hardware take (the 2D walk over EPT02, the (n+1)³ − 1 of the 3D walk), the
//! exits of an L2 guest's first touches by cause, every translation checked end to end through
//! the three stages, and the configuration's rules.

mod common;

use common::*;
use vmmu_core::event::Event;

const PAGE: u64 = 4096;

fn nested_virt(l1: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("mode", "nested-virt"),
        ("nested_virt.l1", l1),
        ("machine.pwc.design", "none"),
    ]
}

fn with<'a>(
    mut base: Vec<(&'a str, &'a str)>,
    more: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    base.extend_from_slice(more);
    base
}

#[test]
fn the_3d_walk_makes_n_plus_1_cubed_minus_1_references() {
    for (format, levels, per_walk) in [("long4", "4", 124u64), ("long5", "5", 215)] {
        let ov = with(
            nested_virt("3d"),
            &[
                ("guest.format", format),
                ("host.nested_levels", levels),
                ("host.nested_page_size", "4K"),
                ("warmup.refs", "5"),
            ],
        );
        let r = run(&ov, cold_walks(5));
        assert_eq!(u(&r, "walks"), 5, "{format}");
        assert_eq!(u(&r, "walk_refs"), 5 * per_walk, "{format}");
        assert_eq!(u(&r, "walk_faults"), 0);
        assert_eq!(exits(&r, "l1_exit"), 0, "warm: no EPT violation");
    }
}

#[test]
fn ept_on_ept_walks_in_2d_over_the_shadow_ept02() {
    // EPT02 maps 4 KiB pages whatever EPT01's size: 24 references at four levels.
    for nested in ["4K", "2M"] {
        let ov = with(
            nested_virt("ept"),
            &[("host.nested_page_size", nested), ("warmup.refs", "5")],
        );
        let r = run(&ov, cold_walks(5));
        assert_eq!(u(&r, "walks"), 5);
        assert_eq!(u(&r, "walk_refs"), 5 * 24, "EPT01 at {nested}");
        let steps = r["walk_refs_by_step"].as_object().unwrap();
        assert_eq!(steps["nL1,gPA"], 5);
    }
}

/// One populated page touched once: L2's root, L3, L2 and L1 tables and the data page are five
/// L2 pages that neither EPT12 nor EPT02 maps yet.
fn one_touch() -> Vec<Event> {
    let mut ev = region(PAGE, true);
    ev.push(load(BASE));
    ev
}

#[test]
fn each_new_l2_page_costs_an_l1_exit_a_trapped_ept12_write_and_an_ept02_fill() {
    let r = run(&nested_virt("ept"), one_touch());
    assert_eq!(exits(&r, "l1_exit"), 5);
    // Each EPT12 fill writes one entry of a table that already existed (and L0 protects);
    // the rest of its writes go to tables it just allocated.
    assert_eq!(exits(&r, "ept12_write"), 5);
    assert_eq!(exits(&r, "ept02_fill"), 5);
    assert_eq!(exits(&r, "nested_fault"), 0, "L0 backs L1's frames eagerly");
    assert_eq!(u(&r, "world_switches"), 15);
    // Each EPT violation faults the walk once before L1 maps the page and once before L0
    // builds EPT02.
    assert_eq!(u(&r, "walk_faults"), 10);
}

#[test]
fn lazily_backed_l1_memory_adds_a_nested_fault_per_frame_l1_touches() {
    let ov = with(
        nested_virt("ept"),
        &[
            ("hypervisor.backing", "lazy"),
            ("host.nested_page_size", "4K"),
        ],
    );
    let r = run(&ov, one_touch());
    // Five L2 pages, all in L2's first 2 MiB (sequential frames): L1 allocates five pages
    // and EPT12's L3, L2 and L1 tables below the root it booted with.
    assert_eq!(exits(&r, "nested_fault"), 5 + 3);
    assert_eq!(exits(&r, "l1_exit"), 5);
}

#[test]
fn the_3d_walk_needs_no_shadow_and_traps_no_ept12_write() {
    let r = run(&nested_virt("3d"), one_touch());
    assert_eq!(exits(&r, "l1_exit"), 5);
    assert_eq!(exits(&r, "ept12_write"), 0);
    assert_eq!(exits(&r, "ept02_fill"), 0);
    assert_eq!(u(&r, "world_switches"), 5);
}

#[test]
fn every_translation_is_checked_through_three_stages() {
    for l1 in ["ept", "3d"] {
        for backing in ["eager", "lazy"] {
            let ov = with(nested_virt(l1), &[("hypervisor.backing", backing)]);
            let r = run(&ov, busy());
            assert!(u(&r, "checked_translations") > 0, "{l1} {backing}");
            assert!(exits(&r, "l1_exit") >= 256, "{l1} {backing}");
        }
    }
}

#[test]
fn the_configuration_names_the_field_at_fault() {
    let err = |ov: &[(&str, &str)]| try_run(ov, one_touch()).unwrap_err().to_string();
    let e = err(&[("mode", "nested"), ("nested_virt.l1", "ept")]);
    assert!(
        e.contains("nested_virt.l1") && e.contains("nested-virt"),
        "{e}"
    );
    let e = err(&[("mode", "nested-virt"), ("nested_virt.l1", "4d")]);
    assert!(e.contains("nested_virt.l1") && e.contains("4d"), "{e}");
    let e = err(&[("mode", "nested-virt"), ("hypervisor.technique", "pv")]);
    assert!(e.contains("hypervisor.technique"), "{e}");
    let e = err(&[("mode", "nested-virt"), ("nested_virt.l1_memory", "\"1G\"")]);
    assert!(e.contains("nested_virt.l1_memory"), "{e}");
    let e = err(&[("mode", "nested-virt"), ("host.memory", "\"6G\"")]);
    assert!(
        e.contains("nested_virt.l1_memory") && e.contains("host.memory"),
        "{e}"
    );
}

/// A random sequence of loads and stores over a region of `pages` pages, some of it unmapped
/// and touched again (demand paging, freed and reused guest frames).
fn random_touches(pages: u64, touches: &[(u64, bool)], unmap_at: usize) -> Vec<Event> {
    let mut ev = region(pages * PAGE, false);
    for (i, &(p, write)) in touches.iter().enumerate() {
        if i == unmap_at {
            ev.push(Event::munmap(
                vmmu_core::addr::Gva::new(BASE),
                pages / 2 * PAGE,
            ));
            ev.push(mmap(BASE, pages / 2 * PAGE, false));
        }
        let va = BASE + (p % pages) * PAGE;
        ev.push(if write { store(va) } else { load(va) });
    }
    ev
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]

    /// Whatever the guest does, every translation agrees with EPT01 ∘ EPT12; each L2 page the
    /// hardware first reaches costs EPT on EPT exactly one L1 exit, one trapped EPT12 write and
    /// one EPT02 fill; and the 3D walk meets the same L2 pages, so it takes as many L1 exits.
    #[test]
    fn each_l2_page_costs_one_exit_of_each_kind_and_both_kinds_agree(
        touches in proptest::collection::vec((0u64..96, proptest::bool::ANY), 1..120),
        unmap_at in 0usize..120,
    ) {
        let ev = random_touches(96, &touches, unmap_at);
        let ept = run(&nested_virt("ept"), ev.clone());
        let three = run(&nested_virt("3d"), ev);
        let n = exits(&ept, "l1_exit");
        proptest::prop_assert!(n >= 5);
        proptest::prop_assert_eq!(exits(&ept, "ept12_write"), n);
        proptest::prop_assert_eq!(exits(&ept, "ept02_fill"), n);
        proptest::prop_assert_eq!(exits(&three, "l1_exit"), n);
        proptest::prop_assert_eq!(u(&ept, "checked_translations"), u(&three, "checked_translations"));
    }
}
