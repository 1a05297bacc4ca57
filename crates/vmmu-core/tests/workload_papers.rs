//! The workloads named after the papers' benchmarks (workload/papers): every one opens with its
//! defaults and with small parameters, knows its exact length, is deterministic, runs under
//! native, nested and shadow paging with the checked mode on, has the structure its
//! documentation promises (processes, faults, phases), and rejects bad parameters by name.

use serde_json::Value;
use vmmu_core::config;
use vmmu_core::event::{AccessKind, Event};
use vmmu_core::workload;

const NAMES: [&str; 21] = [
    "memorymotion",
    "aim9-page_test",
    "aim9-brk_test",
    "aim9-fork_test",
    "aim9-exec_test",
    "aim9-shell_rtns",
    "segv",
    "pcd",
    "nps",
    "fw",
    "compile",
    "swim",
    "gcc-phases",
    "apsi",
    "fma3d",
    "crafty",
    "database",
    "xenapp",
    "zeusmp",
    "gzip",
    "mixed-phases",
];

/// A small version of each workload (a fraction of a second under every mode, debug build).
fn small(name: &str) -> String {
    let params = match name {
        "memorymotion" => "processes=3,size=256K",
        "aim9-page_test" => "iterations=20,pages=8",
        "aim9-brk_test" => "iterations=50",
        "aim9-fork_test" => "iterations=5",
        "aim9-exec_test" => "iterations=4",
        "aim9-shell_rtns" => "iterations=2,commands=2",
        "segv" => "iterations=10,pages=16",
        "pcd" => "iterations=12,procs=3",
        "nps" => "iterations=40,procs=5",
        "fw" => "iterations=3,batch=3",
        "compile" => "jobs=2,text=32,heap=64,blocks=40,instrs=100",
        "swim" => "footprint=4M,points=2000",
        "gcc-phases" => "inputs=2,phases=3,arena=16,heap=32,text=40,blocks=30",
        "apsi" | "fma3d" => "footprint=4M,points=2000",
        "crafty" => "footprint=1M,points=2000",
        "database" => "threads=3,queries=4,pool=2M,rows=16,temp=16K,instrs=100",
        "xenapp" => "sessions=3,apps=2,heap=16,work=50,instrs=100",
        "zeusmp" => "footprint=4M,points=2000",
        "gzip" => "inputs=2,buffer=64K,reads=8,hash=4,instrs=200",
        "mixed-phases" => "phases=3,footprint=1M,points=2000,jobs=2,pages=8,instrs=200",
        other => panic!("no small version of {other}"),
    };
    format!("{name}:{params}")
}

fn events(spec: &str) -> Vec<Event> {
    let mut src = workload::open(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let mut all = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // An odd batch size, so steps straddle batches.
        let n = src.next_batch(&mut buf, 1000).unwrap();
        if n == 0 {
            break;
        }
        assert_eq!(n, buf.len());
        all.extend_from_slice(&buf);
    }
    all
}

fn count_events(spec: &str) -> (u64, Option<u64>) {
    let mut src = workload::open(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let hint = src.len_hint();
    let mut buf = Vec::with_capacity(65_536);
    let mut n = 0u64;
    loop {
        buf.clear();
        let k = src.next_batch(&mut buf, 65_536).unwrap();
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    (n, hint)
}

fn run_mode(spec: &str, mode: &str, extra: &[(&str, &str)]) -> Value {
    let mut ov: Vec<(String, String)> = vec![
        ("mode".into(), mode.into()),
        ("check".into(), "true".into()),
        ("guest.memory".into(), "2G".into()),
        ("host.memory".into(), "4G".into()),
    ];
    if mode != "native" {
        ov.push(("hypervisor.profile".into(), "esx-nehalem".into()));
    }
    ov.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let cfg = config::build("nehalem-x5560", &ov).unwrap();
    let mut src = workload::open(spec).unwrap();
    vmmu_core::run::run(&cfg, src.as_mut(), &mut |_| true)
        .unwrap_or_else(|e| panic!("{spec} {mode}: {e}"))
        .to_json()
}

fn u(r: &Value, path: &str) -> u64 {
    let mut v = r;
    for k in path.split('.') {
        v = &v[k];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("{path} missing in result"))
}

fn world_switches(r: &Value) -> u64 {
    u(r, "world_switches")
}

#[test]
fn every_workload_is_in_the_catalog_with_documented_parameters() {
    let cat = workload::catalog();
    for name in NAMES {
        let g = cat
            .iter()
            .find(|g| g.name == name)
            .unwrap_or_else(|| panic!("{name} not in the catalog"));
        assert!(!g.description.is_empty());
        for p in &g.params {
            assert!(!p.description.is_empty(), "{name}.{}", p.name);
        }
        let names: Vec<&str> = g.params.iter().map(|p| p.name).collect();
        assert!(names.contains(&"seed") && names.contains(&"bits"), "{name}");
    }
}

#[test]
fn defaults_open_and_len_hint_is_exact() {
    for name in NAMES {
        let (n, hint) = count_events(name);
        assert_eq!(Some(n), hint, "{name}: len_hint");
        assert!(n > 1000, "{name}: default scale has {n} events");
    }
}

#[test]
fn small_versions_have_exact_lengths_and_are_deterministic() {
    for name in NAMES {
        let spec = small(name);
        let (n, hint) = count_events(&spec);
        assert_eq!(Some(n), hint, "{spec}: len_hint");
        let a = events(&spec);
        assert_eq!(a.len() as u64, n);
        assert_eq!(a, events(&spec), "{spec}: same seed, same events");
        // The 32-bit layout opens and has the same length.
        let spec32 = format!("{spec},bits=32");
        assert_eq!(count_events(&spec32).0, n, "{spec32}");
        for e in events(&spec32) {
            if let Event::Ref(r) = e {
                assert!(r.va.raw() < 1 << 32, "{spec32}: {:#x}", r.va.raw());
            }
        }
    }
}

#[test]
fn randomised_workloads_depend_on_the_seed() {
    for name in ["compile", "swim", "gcc-phases"] {
        let spec = small(name);
        assert_ne!(
            events(&format!("{spec},seed=1")),
            events(&format!("{spec},seed=2")),
            "{name}"
        );
    }
}

#[test]
fn every_workload_runs_checked_under_native_nested_and_shadow() {
    for name in NAMES {
        let spec = small(name);
        let native = run_mode(&spec, "native", &[]);
        let nested = run_mode(&spec, "nested", &[]);
        let shadow = run_mode(&spec, "shadow", &[]);
        for (mode, r) in [
            ("native", &native),
            ("nested", &nested),
            ("shadow", &shadow),
        ] {
            assert!(u(r, "checked_translations") > 0, "{spec} {mode}");
            assert_eq!(u(r, "guest.unmapped_touches"), 0, "{spec} {mode}");
        }
        // The same guest in every mode: the same faults and processes.
        for key in ["page_faults", "cow_faults", "guest.processes"] {
            assert_eq!(u(&native, key), u(&nested, key), "{spec}: {key}");
            assert_eq!(u(&native, key), u(&shadow, key), "{spec}: {key}");
        }
        assert_eq!(world_switches(&native), 0);
        assert_eq!(
            world_switches(&nested),
            0,
            "{spec}: pre-backed nested paging"
        );
        assert!(world_switches(&shadow) > 0, "{spec}: shadow paging exits");
    }
    // The checked mode also holds with guest large pages and in a 32-bit guest.
    run_mode(
        "swim:footprint=8M,points=1000,huge=1",
        "shadow",
        &[("guest.page_size", "2M")],
    );
    for mode in ["native", "nested", "shadow"] {
        run_mode(
            "aim9-exec_test:iterations=2,bits=32",
            mode,
            &[("guest.format", "x86_32")],
        );
    }
}

/// Pages of the Aim9 driver's image, each faulted in once at start-up (docs/workloads.md).
const DRIVER_PAGES: u64 = 24 + 6 + 8 + 40 + 4 + 3;
/// Pages of the shell that starts memorymotion's, compile's and gcc's processes.
const SHELL_PAGES: u64 = 40 + 8 + 16 + 48 + 6 + 3;

#[test]
fn page_test_faults_every_page_it_grows_by_and_brk_test_none() {
    let r = run_mode("aim9-page_test:iterations=7,pages=13", "native", &[]);
    assert_eq!(u(&r, "page_faults"), DRIVER_PAGES + 7 * 13);
    let r = run_mode("aim9-brk_test:iterations=100,pages=50", "native", &[]);
    assert_eq!(u(&r, "page_faults"), DRIVER_PAGES);
    // brk_test's loop writes no page-table entry: under shadow paging it never exits.
    let zero = run_mode("aim9-brk_test:iterations=0", "shadow", &[]);
    let many = run_mode("aim9-brk_test:iterations=300", "shadow", &[]);
    assert_eq!(world_switches(&zero), world_switches(&many));
    // page_test's loop exits on every page.
    let zero = run_mode("aim9-page_test:iterations=0,pages=8", "shadow", &[]);
    let some = run_mode("aim9-page_test:iterations=10,pages=8", "shadow", &[]);
    assert!(world_switches(&some) >= world_switches(&zero) + 2 * 80);
}

#[test]
fn fork_and_exec_tests_create_one_child_per_iteration() {
    let r = run_mode("aim9-fork_test:iterations=5", "native", &[]);
    assert_eq!(u(&r, "guest.processes"), 6);
    assert_eq!(u(&r, "page_faults"), DRIVER_PAGES);
    // Each child copies 2 pages; the driver then write-enables its 2.
    assert_eq!(u(&r, "cow_faults"), 5 * 4);
    let r = run_mode(
        "aim9-fork_test:iterations=4,child_pages=3,parent_pages=1",
        "native",
        &[],
    );
    assert_eq!(u(&r, "cow_faults"), 4 * 4);

    let r = run_mode("aim9-exec_test:iterations=3", "native", &[]);
    assert_eq!(u(&r, "guest.processes"), 4);
    // Each exec'd program faults in its whole image: text 2, data 2, libs 48 + 6, stack 2.
    assert_eq!(u(&r, "page_faults"), DRIVER_PAGES + 3 * 60);
    assert_eq!(u(&r, "cow_faults"), 3 * 3);
}

#[test]
fn shell_rtns_runs_a_shell_and_its_commands_per_iteration() {
    let r = run_mode("aim9-shell_rtns:iterations=3,commands=2", "native", &[]);
    // Per iteration: the forked child, the shell, and one process per command.
    assert_eq!(u(&r, "guest.processes"), 1 + 3 * (2 + 2));
    // The shell image is exec'd twice (sh -c, then the script's interpreter) and faults in
    // whole each time; each command faults in the 60 pages of the small program.
    assert_eq!(
        u(&r, "page_faults"),
        DRIVER_PAGES + 3 * (2 * SHELL_PAGES + 2 * 60)
    );
    let ev = events("aim9-shell_rtns:iterations=2,commands=4");
    let execs = ev
        .iter()
        .filter(|e| matches!(e, Event::Exec { .. }))
        .count();
    assert_eq!(execs, 2 * (2 + 4));
}

#[test]
fn memorymotion_faults_every_page_of_every_allocation() {
    let r = run_mode("memorymotion:processes=3,size=1M,writes=4", "native", &[]);
    assert_eq!(u(&r, "guest.processes"), 4);
    // Each process: its program image (46 pages) and the 256 pages it allocates.
    assert_eq!(u(&r, "page_faults"), SHELL_PAGES + 3 * (46 + 256));
    let ev = events("memorymotion:processes=2,size=64K,writes=4");
    let stores = ev
        .iter()
        .filter(|e| matches!(e, Event::Ref(r) if r.kind == AccessKind::Store && r.va.raw() >= 0x7e00_0000_0000 && r.va.raw() < 0x7f00_0000_0000))
        .count();
    assert_eq!(stores, 2 * 16 * 4);
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, Event::Exec { .. }))
            .count(),
        2
    );
}

#[test]
fn kernel_microbenchmarks_have_their_structure() {
    let r = run_mode("segv:iterations=6,pages=10", "native", &[]);
    assert_eq!(u(&r, "page_faults"), DRIVER_PAGES + 60);

    let r = run_mode("pcd:iterations=9,procs=4", "native", &[]);
    assert_eq!(u(&r, "guest.processes"), 1 + 4 + 9);

    let procs = 6;
    let iterations = 50;
    let r = run_mode(
        &format!("nps:iterations={iterations},procs={procs}"),
        "native",
        &[],
    );
    assert_eq!(u(&r, "guest.processes"), 1 + procs);
    let switches = events(&format!("nps:iterations={iterations},procs={procs}"))
        .iter()
        .filter(|e| matches!(e, Event::Switch { .. }))
        .count() as u64;
    assert_eq!(switches, 2 * procs + iterations);

    let r = run_mode("fw:iterations=5,batch=3", "native", &[]);
    assert_eq!(u(&r, "guest.processes"), 1 + 15);
}

#[test]
fn compile_runs_three_exec_d_processes_per_job() {
    let spec = "compile:jobs=3,text=32,heap=64,blocks=20";
    let r = run_mode(spec, "native", &[]);
    assert_eq!(u(&r, "guest.processes"), 1 + 9);
    let ev = events(spec);
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, Event::Exec { .. }))
            .count(),
        9
    );
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, Event::Exit { .. }))
            .count(),
        9
    );
    assert!(ev
        .iter()
        .any(|e| matches!(e, Event::Ref(r) if r.kind == AccessKind::Fetch)));
}

#[test]
fn swim_maps_once_and_never_changes_its_mappings() {
    // Written page by page (the default): one demand fault per page of the arrays.
    let r = run_mode("swim:footprint=2M,points=3000", "native", &[]);
    let image = 16 + 4 + 4 + 24 + 4 + 2;
    assert_eq!(u(&r, "page_faults"), image + 512);
    // Prefaulted: no fault, every page populated at mmap time.
    let r = run_mode("swim:footprint=2M,points=3000,prefault=1", "native", &[]);
    assert_eq!(u(&r, "page_faults"), image);
    assert_eq!(u(&r, "guest.pages_populated"), 512);
    // After start-up, points cost shadow paging no exits (stable mappings) once every page
    // has been written.
    let a = run_mode("swim:footprint=2M,points=0", "shadow", &[]);
    let b = run_mode("swim:footprint=2M,points=20000", "shadow", &[]);
    assert_eq!(world_switches(&a), world_switches(&b));
    // Phase 0 is the start-up, phase 1 the loop.
    let ev = events("swim:footprint=1M,points=10");
    let phases: Vec<u32> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Phase { id } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(phases, [0, 1]);
    // A stride walks the grid deterministically: no random draw.
    assert_eq!(
        events("swim:footprint=1M,points=50,stride=10680,seed=1"),
        events("swim:footprint=1M,points=50,stride=10680,seed=9")
    );
}

#[test]
fn insensitive_proxies_carry_spec_footprints_and_sweeps_miss_once_per_page() {
    // The defaults are SPEC CPU2000's measured footprints, one demand fault per page.
    let image = 16 + 4 + 4 + 24 + 4 + 2;
    for (name, mib) in [("apsi", 191u64), ("fma3d", 103), ("crafty", 2)] {
        let r = run_mode(&format!("{name}:points=0"), "native", &[]);
        assert_eq!(u(&r, "page_faults"), image + mib * 256, "{name}");
    }
    // A sweep in storage order walks once per page of each of the 14 arrays (prefaulted, so
    // the loop is all that differs); crafty's random probes of 4 MiB of tables walk far more.
    let walks = |spec: &str| {
        let a = run_mode(&format!("{spec},points=0,prefault=1"), "native", &[]);
        let b = run_mode(&format!("{spec},points=51200,prefault=1"), "native", &[]);
        u(&b, "walks") - u(&a, "walks")
    };
    for name in ["apsi", "fma3d"] {
        let n = walks(&format!("{name}:footprint=64M"));
        assert!(n <= 14 * (51_200 / 512 + 2), "{name}: {n} walks");
    }
    let n = walks("crafty:footprint=4M");
    assert!(n > 14 * (51_200 / 512 + 2), "crafty: {n} walks");
}

#[test]
fn gcc_starts_each_phase_with_page_table_churn() {
    let spec = "gcc-phases:inputs=2,phases=4,arena=16,heap=32,text=40,blocks=10";
    let ev = events(spec);
    let phases: Vec<u32> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Phase { id } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(phases, (0..8).collect::<Vec<u32>>());
    // Each input unmaps its arena at every phase change and at the end.
    assert_eq!(
        ev.iter().filter(|e| matches!(e, Event::Munmap(_))).count(),
        2 * 4
    );
    let r = run_mode(spec, "native", &[]);
    assert_eq!(u(&r, "guest.processes"), 3);
    // Every phase faults its fresh arena in.
    let cc1 = 40 + 64 + 32 + 60 + 6 + 8;
    assert_eq!(u(&r, "page_faults"), SHELL_PAGES + 2 * (cc1 + 4 * 16));
}

#[test]
fn bad_parameters_are_errors_naming_them() {
    let cases = [
        ("aim9-page_test:pages=0", "pages"),
        ("aim9-page_test:pagez=3", "pagez"),
        ("aim9-fork_test:iterations=lots", "iterations"),
        ("memorymotion:size=0", "size"),
        ("memorymotion:size=1P", "size"),
        ("memorymotion:writes=1000", "writes"),
        ("nps:procs=0", "procs"),
        ("fw:batch=0", "batch"),
        ("compile:hot_prob=2", "hot_prob"),
        ("swim:stride=12", "stride"),
        ("swim:arrays=2", "arrays"),
        ("swim:footprint=3G,bits=32", "footprint"),
        ("swim:bits=16", "bits"),
        ("gcc-phases:phases=0", "phases"),
        ("gcc-phases:write_ratio=-1", "write_ratio"),
        ("segv:seed=x", "seed"),
    ];
    for (spec, key) in cases {
        let err = match workload::open(spec) {
            Ok(_) => panic!("{spec}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(&format!("`{key}`")), "{spec}: {err}");
    }
}

#[test]
fn a_parallel_compile_has_an_exact_length_and_the_same_work() {
    let serial = "compile:jobs=7,text=32,heap=64,blocks=40,instrs=100";
    let parallel = format!("{serial},parallel=3");
    let (n, hint) = count_events(&parallel);
    assert_eq!(Some(n), hint);
    let refs = |spec: &str| {
        events(spec)
            .iter()
            .filter(|e| matches!(e, Event::Ref(_)))
            .count()
    };
    assert_eq!(refs(serial), refs(&parallel));
    let forks = |spec: &str| {
        events(spec)
            .iter()
            .filter(|e| matches!(e, Event::Fork { .. }))
            .count()
    };
    assert_eq!(forks(serial), forks(&parallel));
}
