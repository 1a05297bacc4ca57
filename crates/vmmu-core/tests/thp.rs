//! Large pages as Linux gives them (docs/model.md, "Page sizes"): transparent huge pages by
//! `guest.thp` and `madvise`, hugetlbfs from its pool, khugepaged's collapses and
//! `MADV_COLLAPSE`, `MADV_DONTNEED`'s zap and split, and what each costs — exact counts on
//! crafted event sequences, law 3 through every change in every mode.

mod common;

use common::{exits, load, mmap, store, try_run, u, BASE};
use serde_json::Value;
use vmmu_core::addr::Gva;
use vmmu_core::event::{Advice, Event, MapFlags, Prot};

const PAGE: u64 = 4096;
const HUGE: u64 = 2 << 20;

fn madvise(start: u64, len: u64, advice: u8) -> Event {
    Event::madvise(Gva::new(start), len, Advice(advice))
}

fn guest(r: &Value, k: &str) -> u64 {
    u(&r["guest"], k)
}

fn run(overrides: &[(&str, &str)], events: Vec<Event>) -> Value {
    try_run(overrides, events).expect("run")
}

/// Process 1 with a 4 MiB region at `BASE` (1 GiB aligned), `advice` on its first 2 MiB,
/// then a load in each half.
fn two_blocks(advice: &[u8]) -> Vec<Event> {
    let mut ev = vec![Event::ProcessCreate { pid: 1 }, mmap(BASE, 2 * HUGE, false)];
    ev.extend(advice.iter().map(|&a| madvise(BASE, HUGE, a)));
    ev.extend([load(BASE + 8), load(BASE + HUGE + PAGE)]);
    ev
}

/// 2 MiB pages, 4 KiB pages and `thp_fault_alloc` of a run.
type Sizes = (u64, u64, u64);

/// The [`Sizes`] of a run.
fn sizes(r: &Value) -> Sizes {
    (
        guest(r, "pages_mapped_2m"),
        guest(r, "pages_mapped_4k"),
        guest(r, "thp_fault_alloc"),
    )
}

#[test]
fn an_advised_range_faults_at_2m_under_madvise_and_at_4k_otherwise() {
    let hp = Advice::HUGEPAGE;
    let cases: [(&str, &[u8], Sizes); 6] = [
        // The default is madvise: the advised half gets a huge page, the other 4 KiB.
        ("madvise", &[hp], (1, 1, 1)),
        ("madvise", &[], (0, 2, 0)),
        ("madvise", &[hp, Advice::NOHUGEPAGE], (0, 2, 0)),
        ("never", &[hp], (0, 2, 0)),
        // always needs no advice, and NOHUGEPAGE forbids it there too.
        ("always", &[], (2, 0, 2)),
        ("always", &[Advice::NOHUGEPAGE], (1, 1, 1)),
    ];
    for (thp, advice, want) in cases {
        let r = run(&[("guest.thp", &format!("\"{thp}\""))], two_blocks(advice));
        assert_eq!(sizes(&r), want, "thp = {thp}, advice {advice:?}");
        assert_eq!(u(&r, "page_faults"), 2, "{thp}");
    }
    // The default setting is madvise.
    assert_eq!(sizes(&run(&[], two_blocks(&[hp]))), (1, 1, 1));
}

#[test]
fn only_anonymous_private_areas_whose_aligned_block_fits_get_huge_pages() {
    let always = [("guest.thp", "\"always\"")];
    let area = |start: u64, len: u64, flags: u8| {
        let mut ev = vec![
            Event::ProcessCreate { pid: 1 },
            Event::mmap(Gva::new(start), len, Prot::RW, MapFlags(flags)),
        ];
        ev.extend((0..len / HUGE).map(|i| store(start + i * HUGE + PAGE)));
        ev
    };
    // No aligned 2 MiB block lies inside [BASE + 4 KiB, BASE + 4 KiB + 2 MiB).
    let r = run(&always, area(BASE + PAGE, HUGE, 0));
    assert_eq!(sizes(&r), (0, 1, 0));
    // One lies inside [BASE + 4 KiB, BASE + 4 KiB + 4 MiB): the touch below it stays 4 KiB.
    let r = run(&always, area(BASE + PAGE, 2 * HUGE, 0));
    assert_eq!(sizes(&r), (1, 1, 1));
    let r = run(&always, area(BASE, 2 * HUGE, 0));
    assert_eq!(sizes(&r), (2, 0, 2));
    for flags in [MapFlags::SHARED, MapFlags::FILE, MapFlags::STACK] {
        let r = run(&always, area(BASE, 2 * HUGE, flags));
        assert_eq!(sizes(&r), (0, 2, 0), "flags {flags:#x}");
    }
}

#[test]
fn map_hugetlb_takes_the_pool_whatever_thp_says_and_falls_back_without_one() {
    let ev = || {
        vec![
            Event::ProcessCreate { pid: 1 },
            Event::mmap(Gva::new(BASE), 2 * HUGE, Prot::RW, MapFlags(MapFlags::HUGE)),
            store(BASE),
            store(BASE + HUGE),
        ]
    };
    let r = run(
        &[("guest.thp", "\"never\""), ("guest.hugetlb_pages", "2")],
        ev(),
    );
    assert_eq!(sizes(&r), (2, 0, 0), "hugetlbfs pages are not THP");
    assert_eq!(guest(&r, "hugetlb_fallback"), 0);
    // The pool holds one page: the two-page mapping fails and falls back.
    let r = run(&[("guest.hugetlb_pages", "1")], ev());
    assert_eq!(sizes(&r), (0, 2, 0));
    assert_eq!(guest(&r, "hugetlb_fallback"), 1);
    // Without a pool (Linux's default) the generators' huge=1 keeps mapping 4 KiB pages.
    let r = run(&[], ev());
    assert_eq!((sizes(&r), guest(&r, "hugetlb_fallback")), ((0, 2, 0), 1));
}

#[test]
fn a_2m_fault_pays_for_zeroing_512_times_as_much() {
    let kernel = |r: &Value| r["cycles_by_cause"]["guest_kernel"].as_u64().unwrap();
    let quiet = [
        ("machine.kernel.fork", "0"),
        ("machine.kernel.syscall", "0"),
        ("guest.thp", "\"always\""),
    ];
    let ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(BASE, HUGE, false),
        store(BASE),
    ];
    // page_fault 2,500 plus zero_page 1,000 for each of the 511 further 4 KiB.
    assert_eq!(kernel(&run(&quiet, ev.clone())), 2500 + 511 * 1000);
    let mut small = quiet.to_vec();
    small[2] = ("guest.thp", "\"never\"");
    assert_eq!(kernel(&run(&small, ev)), 2500);
}

/// A 4 MiB region mapped 4 KiB page by page (every page written), advised `MADV_HUGEPAGE`,
/// then 3 M instructions of compute (khugepaged wakes every 1 ms = 2 M instructions on the
/// 2 GHz bhargava08 core) and a second pass over the pages. The warm-up ends before the
/// second pass, so the counts are the second pass's and the collapses'.
fn collapse_scenario() -> Vec<Event> {
    let mut ev = vec![Event::ProcessCreate { pid: 1 }, mmap(BASE, 2 * HUGE, false)];
    ev.extend((0..1024).map(|p| store(BASE + p * PAGE)));
    ev.push(madvise(BASE, 2 * HUGE, Advice::HUGEPAGE));
    ev.push(Event::Compute { instrs: 3_000_000 });
    ev.extend((0..1024).map(|p| load(BASE + p * PAGE + 8)));
    ev
}

fn khugepaged(ms: &str) -> Vec<(&'static str, String)> {
    vec![
        ("machine.pwc.design", "\"none\"".into()),
        ("guest.khugepaged.scan_sleep_millisecs", ms.into()),
        ("warmup.instructions", "2500000".into()),
    ]
}

fn run_owned(ov: &[(&str, String)], extra: &[(&str, &str)], ev: Vec<Event>) -> Value {
    let mut all: Vec<(&str, &str)> = ov.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(extra);
    run(&all, ev)
}

#[test]
fn khugepaged_collapses_a_mapped_range_after_its_interval() {
    let native = [("mode", "\"native\"")];
    let r = run_owned(&khugepaged("1"), &native, collapse_scenario());
    // One wake-up (4096 pages to scan: 8 ranges) collapses both ranges.
    assert_eq!(guest(&r, "thp_collapse_alloc"), 2);
    assert_eq!(guest(&r, "khugepaged_wakeups"), 1);
    // One huge TLB entry per range answers the whole second pass: one walk per range, of 3
    // references (law 1).
    assert_eq!(u(&r, "walks"), 2);
    assert_eq!(u(&r, "walk_refs"), 2 * 3);
    // Each collapse's kernel work: the scan, copying 512 present pages, the fixed part.
    assert_eq!(
        r["cycles_by_cause"]["guest_kernel"].as_u64().unwrap(),
        2 * (512 * 50 + 512 * 2000 + 10_000)
    );
    // khugepaged off: the 1,024 pages stay 4 KiB, more than the TLBs hold, and every walk
    // makes 4 references.
    let r = run_owned(&khugepaged("0"), &native, collapse_scenario());
    assert_eq!(guest(&r, "thp_collapse_alloc"), 0);
    assert_eq!(u(&r, "walk_refs"), 4 * u(&r, "walks"));
    assert!(u(&r, "walks") > 2, "{}", u(&r, "walks"));
}

#[test]
fn khugepaged_leaves_unadvised_ranges_alone_under_madvise() {
    let mut ev = collapse_scenario();
    ev.retain(|e| !matches!(e, Event::Madvise(_)));
    let r = run_owned(&khugepaged("1"), &[("mode", "\"native\"")], ev);
    assert_eq!(guest(&r, "thp_collapse_alloc"), 0);
    assert_eq!(r["cycles_by_cause"]["guest_kernel"], 0);
}

#[test]
fn a_collapse_exits_under_shadow_paging_and_not_under_nested() {
    for (mode, collapse_exits) in [("\"shadow\"", true), ("\"nested\"", false)] {
        let with = run_owned(&khugepaged("1"), &[("mode", mode)], collapse_scenario());
        let without = run_owned(&khugepaged("0"), &[("mode", mode)], collapse_scenario());
        assert_eq!(guest(&with, "thp_collapse_alloc"), 2, "{mode}");
        let paging = |r: &Value| exits(r, "pt_write") + exits(r, "cr3_write");
        if collapse_exits {
            // The two writes of each directory entry exit to be emulated, but the fourth
            // write in a row to the directory page, with no use between, finds it unshadowed
            // by write-flood detection (KVM's 3); the flush reloads CR3.
            assert_eq!(exits(&with, "pt_write") - exits(&without, "pt_write"), 3);
            assert!(exits(&with, "cr3_write") > exits(&without, "cr3_write"));
        } else {
            assert_eq!(paging(&with), 0, "law 5: {with}");
            assert_eq!(with["exits"], without["exits"], "{mode}");
        }
    }
}

#[test]
fn madv_collapse_collapses_at_once_whatever_thp_says() {
    let mut ev = vec![Event::ProcessCreate { pid: 1 }, mmap(BASE, HUGE, false)];
    ev.extend((0..4).map(|p| store(BASE + p * PAGE)));
    ev.push(madvise(BASE, HUGE, Advice::COLLAPSE));
    ev.extend((0..512).map(|p| load(BASE + p * PAGE)));
    let r = run(
        &[("guest.thp", "\"never\""), ("mode", "\"native\"")],
        ev.clone(),
    );
    assert_eq!(guest(&r, "thp_collapse_alloc"), 1);
    // Four faults before the collapse; the 508 absent pages are zeroed, not faulted.
    assert_eq!(u(&r, "page_faults"), 4);
    // NOHUGEPAGE forbids it.
    ev.insert(2, madvise(BASE, HUGE, Advice::NOHUGEPAGE));
    let r = run(&[("mode", "\"native\"")], ev);
    assert_eq!(guest(&r, "thp_collapse_alloc"), 0);
    assert_eq!(u(&r, "page_faults"), 512);
}

#[test]
fn dontneed_drops_pages_and_the_next_touch_faults_again() {
    for advice in [Advice::DONTNEED, Advice::FREE] {
        let ev = vec![
            Event::ProcessCreate { pid: 1 },
            mmap(BASE, 4 * PAGE, true),
            load(BASE + PAGE),
            madvise(BASE + PAGE, PAGE, advice),
            load(BASE + PAGE),
            load(BASE + 2 * PAGE),
        ];
        let r = run(&[], ev);
        assert_eq!(guest(&r, "pages_zapped"), 1, "{advice}");
        assert_eq!(
            u(&r, "page_faults"),
            1,
            "{advice}: only the dropped page faults"
        );
        assert_eq!(guest(&r, "pages_mapped_4k"), 5);
    }
}

#[test]
fn dontneed_of_part_of_a_huge_page_splits_it() {
    let ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(BASE, HUGE, false),
        store(BASE),
        madvise(BASE + 2 * PAGE, 2 * PAGE, Advice::DONTNEED),
        load(BASE + 2 * PAGE),
        load(BASE + 4 * PAGE),
        load(BASE + 3 * PAGE),
    ];
    let r = run(&[("guest.thp", "\"always\""), ("mode", "\"native\"")], ev);
    assert_eq!(guest(&r, "thp_split_pmd"), 1);
    assert_eq!(guest(&r, "pages_mapped_2m"), 1);
    // The two dropped pages fault again at 4 KiB (a table is there now); the rest stayed.
    assert_eq!(u(&r, "page_faults"), 3);
    assert_eq!(guest(&r, "pages_mapped_4k"), 2);
}

/// Collapses, splits and zaps with two threads on the region, for law 3.
fn churn() -> Vec<Event> {
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(BASE, 2 * HUGE, false),
        Event::ThreadCreate { pid: 1, tid: 2 },
    ];
    ev.extend((0..64).map(|p| store(BASE + p * PAGE)));
    ev.push(Event::Thread { pid: 1, tid: 2 });
    ev.extend((0..64).map(|p| load(BASE + p * PAGE + 16)));
    ev.push(madvise(BASE, HUGE, Advice::HUGEPAGE));
    ev.push(Event::Thread { pid: 1, tid: 1 });
    ev.push(Event::Compute { instrs: 3_000_000 });
    ev.extend((0..64).map(|p| load(BASE + p * PAGE + 32)));
    ev.push(madvise(BASE + 8 * PAGE, 4 * PAGE, Advice::DONTNEED));
    ev.push(Event::Thread { pid: 1, tid: 2 });
    ev.extend((0..64).map(|p| store(BASE + p * PAGE + 8)));
    ev.push(store(BASE + HUGE + PAGE));
    ev.push(madvise(BASE + HUGE, HUGE, Advice::COLLAPSE));
    ev.push(Event::Thread { pid: 1, tid: 1 });
    ev.extend((0..64).map(|p| load(BASE + HUGE + p * PAGE)));
    ev
}

#[test]
fn law3_holds_through_collapses_and_zaps_in_every_mode() {
    for mode in ["\"native\"", "\"nested\"", "\"shadow\""] {
        for vcpus in ["1", "2"] {
            let r = run(
                &[
                    ("mode", mode),
                    ("guest.vcpus", vcpus),
                    ("guest.khugepaged.scan_sleep_millisecs", "1"),
                ],
                churn(),
            );
            let label = format!("{mode} on {vcpus} vCPUs");
            assert_eq!(guest(&r, "thp_collapse_alloc"), 2, "{label}");
            assert_eq!(guest(&r, "thp_split_pmd"), 1, "{label}");
            assert_eq!(
                u(&r, "checked_translations"),
                u(&r, "memory_refs") + u(&r, "fetches"),
                "{label}"
            );
            if vcpus == "2" {
                assert!(u(&r["shootdowns"], "shootdowns") > 0, "{label}");
            }
        }
    }
}

#[test]
fn bad_settings_name_their_field() {
    let ev = || two_blocks(&[]);
    for (k, v, field) in [
        ("guest.thp", "\"sometimes\"", "thp"),
        (
            "guest.khugepaged.max_ptes_none",
            "512",
            "guest.khugepaged.max_ptes_none",
        ),
        (
            "guest.khugepaged.pages_to_scan",
            "0",
            "guest.khugepaged.pages_to_scan",
        ),
        (
            "guest.khugepaged.max_ptes_shared",
            "600",
            "guest.khugepaged.max_ptes_shared",
        ),
        ("guest.hugetlb_pages", "4096", "guest.hugetlb_pages"),
    ] {
        let e = try_run(&[(k, v)], ev()).unwrap_err().to_string();
        assert!(e.contains(field), "{k} = {v}: {e}");
    }
    let e = try_run(
        &[],
        vec![Event::ProcessCreate { pid: 1 }, madvise(BASE, HUGE, 14)],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("nothing is mapped"), "{e}");
}

#[test]
fn a_generator_region_advised_hugepage_gets_huge_pages_by_default() {
    let pages = |spec: &str| {
        let cfg = vmmu_core::config::build("bhargava08", &[]).unwrap();
        let mut src = vmmu_core::workload::open(spec).unwrap();
        let r = vmmu_core::run::run(&cfg, src.as_mut(), &mut |_| true).unwrap();
        let v = r.to_json();
        (guest(&v, "pages_mapped_2m"), guest(&v, "pages_mapped_4k"))
    };
    assert_eq!(pages("random:footprint=4M,refs=2K,thp=hugepage"), (2, 0));
    let (huge, small) = pages("random:footprint=4M,refs=2K");
    assert_eq!(huge, 0);
    assert!(small > 2);
}
