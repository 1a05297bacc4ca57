//! Agile paging (DESIGN.md law 11): a walk that switches to nested mode after `i` shadow
//! levels makes exactly 20 − 4i references at four levels (24 nested from the guest root, 4
//! when it never switches), pinned on tables built by the shadow pager itself; and agile runs
//! verify every translation.

mod common;

use common::*;
use vmmu_core::addr::{Gpa, Gva, PageSize};
use vmmu_core::config::{self, SimConfig};
use vmmu_core::event::{Event, MapFlags, Prot};
use vmmu_core::host::Host;
use vmmu_core::mem::PhysMem;
use vmmu_core::paging::{Geometry, PageTable, Pte, TableWrite};
use vmmu_core::shadow::{FaultKind, ShadowPager};
use vmmu_core::walk::{Access, AgileTables, Tables, WalkHw, Walker};

const VA: u64 = 0x7f12_3456_7000;
const DATA: u64 = 0x4000_0000;

fn cfg() -> SimConfig {
    let ov = [
        ("machine.pwc.design".to_string(), "none".to_string()),
        ("guest.memory".to_string(), "\"2G\"".to_string()),
        ("host.memory".to_string(), "\"4G\"".to_string()),
    ];
    config::build("bhargava08", &ov).unwrap()
}

/// Guest tables mapping `VA` to `DATA`, all guest memory backed by the host; the shadow path
/// of `VA` built by a hidden fault; then the guest table at `nest_level` (if any) moved to
/// nested mode and the path filled again. Returns the references of one walk of `VA`, the
/// walk's count by shadow levels, and whether the translation is the host's for `DATA`.
fn walk_after_nesting(nest_level: Option<u8>) -> (u64, [u64; 6], bool) {
    let cfg = cfg();
    let geo = Geometry::of(cfg.guest.format);
    let mut gmem: PhysMem<Gpa> = PhysMem::new(cfg.guest.memory.0);
    let mut next = 0x10_0000u64;
    let mut frame = || {
        next += 0x1000;
        Some(Gpa::new(next))
    };
    let gpt = PageTable::new(geo, &mut gmem, &mut frame).unwrap();
    let mut log: Vec<TableWrite<Gpa>> = Vec::new();
    gpt.map(
        &mut gmem,
        &mut frame,
        Gva::new(VA),
        Gpa::new(DATA),
        PageSize::Size4K,
        Pte::RW | Pte::US,
        &mut log,
    )
    .unwrap();
    let mut host = Host::new(&cfg.host, cfg.guest.memory.0, cfg.seed).unwrap();
    host.back(Gpa::new(0), PageSize::Size1G).unwrap();
    host.back(Gpa::new(1 << 30), PageSize::Size1G).unwrap();
    let mut sp = ShadowPager::new(&cfg.hypervisor.shadow, geo);
    let va = Gva::new(VA);
    let fill = |sp: &mut ShadowPager, gmem: &mut PhysMem<Gpa>, host: &mut Host| {
        let k = sp
            .hidden_fault(gmem, &gpt, host, va, false, false, false)
            .unwrap();
        assert!(matches!(k, FaultKind::Filled { .. }), "{k:?}");
    };
    fill(&mut sp, &mut gmem, &mut host);
    let mut nested_root = false;
    if let Some(level) = nest_level {
        // The guest table of `level` on the path of VA.
        let mut table = gpt.root;
        for l in (level + 1..=geo.levels).rev() {
            let e = geo.read_entry(&gmem, table.add(geo.entry_offset(VA, l)));
            table = Gpa::new(e.frame(geo.frame_mask()));
        }
        sp.nest(&mut host, table.raw() >> 12, level);
        nested_root = level == geo.levels;
        if !nested_root {
            fill(&mut sp, &mut gmem, &mut host);
        }
    }
    let mut hw = WalkHw::new(&cfg.machine);
    let tables = Tables::Agile(AgileTables {
        mem: &mut gmem,
        pt: gpt,
        hmem: &host.hmem,
        npt: host.npt,
        spt: sp.tables(),
        nested_root,
        guest_of: sp.guest_of(),
    });
    let access = Access {
        write: false,
        fetch: false,
    };
    let mut cycles = 0;
    let t = Walker::new(&mut hw, va, access, 0, 1)
        .walk(tables, &mut cycles)
        .expect("the walk translates");
    let right = Some(t.page)
        == host
            .translate(Gpa::new(DATA))
            .map(|(h, _)| h.page_base(t.size));
    (hw.stats.total_refs(), hw.stats.agile, right)
}

#[test]
fn law11_an_agile_walk_switching_after_i_shadow_levels_makes_20_minus_4i_references() {
    // (guest table moved to nested mode, shadow levels walked, references)
    for (nest, i, refs) in [
        (None, 4usize, 4u64),
        (Some(1u8), 3, 8),
        (Some(2), 2, 12),
        (Some(3), 1, 16),
        (Some(4), 0, 24),
    ] {
        let (n, by_level, right) = walk_after_nesting(nest);
        assert_eq!(n, refs, "nested from level {nest:?}");
        let mut want = [0u64; 6];
        want[i] = 1;
        assert_eq!(by_level, want, "nested from level {nest:?}");
        assert!(right, "nested from level {nest:?}: wrong translation");
        if (1..4).contains(&i) {
            assert_eq!(refs, 20 - 4 * i as u64);
        }
    }
}

/// Random loads and stores over a region, part of it unmapped and mapped again after each of
/// four rounds (page-table writes that move tables to nested mode), then a quiet phase (their
/// tables go back to shadow mode).
fn churn() -> Vec<Event> {
    let mut ev = region(64 << 20, false);
    let mut x = 12345u64;
    for round in 0..4u64 {
        for _ in 0..1500 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let va = BASE + (x >> 20) % (64 << 20);
            ev.push(if x & 1 == 0 { load(va) } else { store(va) });
        }
        let at = BASE + round * (8 << 20);
        ev.push(Event::munmap(Gva::new(at), 8 << 20));
        ev.push(Event::mmap(Gva::new(at), 8 << 20, Prot::RW, MapFlags(0)));
    }
    // A quiet phase: 64 pages touched, then read over and over (no page-table writes).
    ev.extend((0..4000u64).map(|i| load(BASE + (40 << 20) + (i % 64) * 4096)));
    ev
}

#[test]
fn agile_runs_verify_every_translation_and_move_subtrees_both_ways() {
    for design in ["none", "2d+nt", "psc"] {
        let r = run(
            &[
                ("mode", "agile"),
                ("machine.pwc.design", design),
                ("agile.write_threshold", "1"),
                ("agile.scan_interval", "500"),
            ],
            churn(),
        );
        assert_eq!(u(&r, "checked_translations"), 10_000, "{design}");
        let a = &r["agile"]["policy"];
        assert!(a["to_nested"].as_u64().unwrap() > 0, "{design}: {a}");
        assert!(a["to_shadow"].as_u64().unwrap() > 0, "{design}: {a}");
        let by = r["agile"]["walks_by_shadow_levels"].as_object().unwrap();
        let walks: u64 = by.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(walks, u(&r, "walks"), "{design}: {by:?}");
    }
}

#[test]
fn the_agile_section_belongs_to_agile_mode() {
    let e = try_run(
        &[("mode", "shadow"), ("agile.write_threshold", "2")],
        churn(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("agile"), "{e}");
    let e = try_run(
        &[("mode", "agile"), ("agile.write_threshold", "0")],
        churn(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("agile.write_threshold"), "{e}");
}

#[test]
fn agile_paging_with_no_subtree_nested_is_shadow_paging() {
    let shadow = run(&[("mode", "shadow")], churn());
    let agile = run(
        &[("mode", "agile"), ("agile.write_threshold", "4294967295")],
        churn(),
    );
    assert_eq!(agile["agile"]["policy"]["to_nested"], 0);
    for k in ["walks", "walk_refs", "walk_faults", "cycles", "page_faults"] {
        assert_eq!(u(&agile, k), u(&shadow, k), "{k}");
    }
    assert_eq!(agile["exits"], shadow["exits"]);
    assert_eq!(agile["shadow"], shadow["shadow"]);
    let by = &agile["agile"]["walks_by_shadow_levels"];
    assert_eq!(by["4"].as_u64(), Some(u(&agile, "walks")), "{by}");
}

#[test]
fn nested_subtrees_take_guest_page_table_writes_without_exits() {
    let shadow = run(&[("mode", "shadow")], churn());
    let agile = run(
        &[
            ("mode", "agile"),
            ("agile.write_threshold", "1"),
            ("agile.scan_interval", "2000"),
        ],
        churn(),
    );
    let p = &agile["agile"]["policy"];
    let avoided = p["exits_avoided"].as_u64().unwrap();
    assert!(avoided > 0, "{p}");
    assert!(
        exits(&agile, "pt_write") < exits(&shadow, "pt_write"),
        "agile {} vs shadow {}",
        exits(&agile, "pt_write"),
        exits(&shadow, "pt_write")
    );
    // The guest sees the same: its own page faults are the same in both.
    assert_eq!(u(&agile, "page_faults"), u(&shadow, "page_faults"));
}

#[test]
fn agile_runs_on_several_vcpus_verify_every_translation() {
    let r = run(
        &[
            ("mode", "agile"),
            ("guest.vcpus", "2"),
            ("agile.write_threshold", "1"),
            ("agile.scan_interval", "500"),
        ],
        churn(),
    );
    assert_eq!(u(&r, "checked_translations"), 10_000);
    assert!(r["agile"]["policy"]["to_nested"].as_u64().unwrap() > 0);
}
