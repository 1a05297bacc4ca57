//! Adaptive runs (docs/policies.md): the static baselines equal the plain modes; DAV²M's
//! thresholds decide exactly at the count they name, on crafted phases; the timeline adds up
//! to the run; DAV²M moves only along the edges of seed 001 Figure 7; the oracle's estimate
//! bounds the static policies on every adaptive workload, and DAV²M, switching inside the
//! oracle's one window, beats it; runs are deterministic; a policy that makes no sense is rejected with its rule.

mod common;

use common::{load, mmap, store, try_run, u, BASE};
use serde_json::Value;
use vmmu_core::addr::Gva;
use vmmu_core::config;
use vmmu_core::event::Event;
use vmmu_core::workload;

const PAGE: u64 = 4096;

/// `n` rounds of page-table churn (a fresh page mapped, written, unmapped: several paging
/// exits each under shadow paging), then `tail` loads of one page mapped at the start
/// (no paging exit in either mode once it is backed).
fn churn_then_quiet(n: u64, tail: u64) -> Vec<Event> {
    let mut ev = vec![Event::ProcessCreate { pid: 1 }, mmap(BASE, PAGE, true)];
    ev.push(store(BASE));
    for i in 0..n {
        let va = BASE + (i + 16) * PAGE;
        ev.push(mmap(va, PAGE, false));
        ev.push(store(va));
        ev.push(Event::munmap(Gva::new(va), PAGE));
    }
    ev.extend((0..tail).map(|_| load(BASE)));
    ev
}

/// Loads of `refs` pseudo-random pages of a populated `pages`-page region: a TLB miss almost
/// every load, no page-table change after the start.
fn tlb_bound(pages: u64, refs: u64) -> Vec<Event> {
    let mut ev = vec![
        Event::ProcessCreate { pid: 1 },
        mmap(BASE, pages * PAGE, true),
    ];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..refs {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ev.push(load(BASE + (x % pages) * PAGE));
    }
    ev
}

/// The overrides of an adaptive run with `policy` and `params`, tagged TLBs (so the
/// PMU-overflow exits leave the TLB as it was).
fn adaptive(policy: &str, params: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut ov = vec![
        ("mode".to_string(), "adaptive".to_string()),
        ("machine.tlb.vpid".to_string(), "true".to_string()),
        ("policy.kind".to_string(), policy.to_string()),
    ];
    ov.extend(
        params
            .iter()
            .map(|(k, v)| (format!("policy.{k}"), v.to_string())),
    );
    ov
}

fn run(ov: &[(String, String)], ev: Vec<Event>) -> Value {
    let refs: Vec<(&str, &str)> = ov.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    try_run(&refs, ev).expect("run")
}

fn timeline(v: &Value) -> &Vec<Value> {
    v["timeline"].as_array().expect("a timeline")
}

fn sum(v: &Value, field: &str) -> u64 {
    timeline(v).iter().map(|r| u(r, field)).sum()
}

#[test]
fn a_static_policy_is_the_plain_mode_with_a_timeline_that_adds_up() {
    for (policy, mode) in [("static-shadow", "shadow"), ("static-nested", "nested")] {
        let ev = churn_then_quiet(40, 300);
        let plain = run(
            &[
                ("mode".to_string(), mode.to_string()),
                ("machine.tlb.vpid".to_string(), "true".to_string()),
            ],
            ev.clone(),
        );
        let a = run(&adaptive(policy, &[("window_inst", "100")]), ev);
        assert_eq!(u(&a, "cycles"), u(&plain, "cycles"), "{policy}");
        assert_eq!(u(&a, "mode_switches"), 0);
        assert_eq!(a["instructions_in_mode"][mode], a["instructions"]);
        let t = timeline(&a);
        // A window ends at the first event boundary at or after each multiple of 100 (one
        // instruction per event here), and the last, partial one closes the run.
        let instr = u(&a, "instructions");
        assert_eq!(t.len() as u64, instr.div_ceil(100), "{policy}");
        for (k, r) in t.iter().enumerate() {
            assert_eq!(r["mode"], mode);
            if k + 1 < t.len() {
                assert_eq!(u(r, "instructions_end"), 100 * (k as u64 + 1));
                assert_eq!(r["decision"], "stay");
            } else {
                assert_eq!(r["decision"], "end");
            }
        }
        assert_eq!(sum(&a, "instructions"), instr);
        assert_eq!(sum(&a, "cycles"), u(&a, "cycles"));
        assert_eq!(sum(&a, "l2_dtlb_misses"), u(&a["tlb"]["l2"], "misses"));
    }
}

/// DAV²M with one PMU window longer than the run: only the exit threshold can act.
fn dav2m_one_window(threshold_vexit: u64) -> Vec<(String, String)> {
    let t = threshold_vexit.to_string();
    adaptive(
        "dav2m",
        &[
            ("window_inst", "1e6"),
            ("window_vexit", "1e6"),
            ("window_tmiss", "2e6"),
            ("window_prepaging", "2e6"),
            ("window_trans", "4e6"),
            ("threshold_vexit", t.as_str()),
        ],
    )
}

#[test]
fn dav2m_probes_nested_paging_on_the_exit_that_exceeds_threshold_vexit_and_not_before() {
    let ev = churn_then_quiet(30, 50);
    let shadow = run(
        &adaptive("static-shadow", &[("window_inst", "1e6")]),
        ev.clone(),
    );
    let exits = sum(&shadow, "paging_exits");
    assert!(exits > 30, "the churn exits under shadow paging: {exits}");
    // Exactly `exits` exits never exceed a threshold of `exits`.
    let stay = run(&dav2m_one_window(exits), ev.clone());
    assert_eq!(u(&stay, "mode_switches"), 0);
    assert_eq!(timeline(&stay)[0]["state"], "Shadow");
    // One fewer and the last exit of the churn exceeds it: PreNested, under nested paging,
    // for the quiet tail.
    let probe = run(&dav2m_one_window(exits - 1), ev);
    assert_eq!(u(&probe, "mode_switches"), 1);
    let in_nested = u(&probe["instructions_in_mode"], "nested");
    assert!(
        (50..=53).contains(&in_nested),
        "the switch comes at the boundary after the exit: {in_nested} instructions nested"
    );
    // A PMU-overflow exit per window the policy saw: none here (one window, never closed).
    assert!(probe["exits"].get("pmu_overflow").is_none());
}

fn dav2m_tmiss(threshold_tmiss: u64) -> Vec<(String, String)> {
    let t = threshold_tmiss.to_string();
    adaptive(
        "dav2m",
        &[
            ("start", "nested"),
            ("window_inst", "500"),
            ("window_vexit", "500"),
            ("window_tmiss", "1000"),
            ("window_prepaging", "1000"),
            ("window_trans", "2000"),
            ("threshold_tmiss", t.as_str()),
        ],
    )
}

#[test]
fn dav2m_probes_shadow_paging_when_the_misses_of_window_tmiss_exceed_threshold_tmiss() {
    let ev = tlb_bound(4096, 3000);
    let nested = run(
        &adaptive("static-nested", &[("window_inst", "500")]),
        ev.clone(),
    );
    let t = timeline(&nested);
    // The misses of the first window_tmiss (two PMU windows).
    let misses = u(&t[0], "l2_dtlb_misses") + u(&t[1], "l2_dtlb_misses");
    assert!(misses > 500, "{misses}");
    let stay = run(&dav2m_tmiss(misses), ev.clone());
    let st = timeline(&stay);
    assert_eq!(st[0]["decision"], "stay");
    assert_eq!(
        u(&st[1], "l2_dtlb_misses") + u(&st[0], "l2_dtlb_misses"),
        misses,
        "the PMU exits leave tagged TLBs as they were"
    );
    assert_eq!(st[1]["decision"], "stay");
    assert_eq!(st[2]["state"], "Nested");
    let probe = run(&dav2m_tmiss(misses - 1), ev);
    let pt = timeline(&probe);
    assert_eq!(pt[0]["decision"], "stay");
    assert_eq!(pt[1]["decision"], "shadow");
    assert_eq!(pt[2]["state"], "PreShadow");
    assert_eq!(pt[2]["mode"], "shadow");
    assert_eq!(
        u(&pt[2], "switches"),
        1,
        "the next window pays for the switch"
    );
    // Each window the policy saw paid a PMU-overflow exit.
    let seen = pt.iter().filter(|r| r["decision"] != "end").count() as u64;
    assert_eq!(u(&probe["exits"]["pmu_overflow"], "count"), seen);
}

/// Runs the workload `spec` on bhargava08 with `ov`.
fn run_spec(spec: &str, ov: &[(String, String)]) -> Value {
    let mut all = vec![
        ("guest.memory".to_string(), "2G".to_string()),
        ("host.memory".to_string(), "4G".to_string()),
    ];
    all.extend_from_slice(ov);
    let cfg = config::build("bhargava08", &all).expect("config");
    let mut src = workload::open(spec).expect("workload");
    vmmu_core::run::run(&cfg, src.as_mut(), &mut |_| true)
        .unwrap_or_else(|e| panic!("{spec}: {e}"))
        .to_json()
}

const MIXED: &str = "mixed-phases:phases=4,footprint=2M,points=20K,jobs=6,pages=32,instrs=2000";

/// The edges of seed 001 Figure 7 (with docs/policies.md's readings R3 and R4).
const EDGES: [(&str, &str); 9] = [
    ("Shadow", "PreNested"),
    ("PreNested", "Shadow"),
    ("PreNested", "Prepaging"),
    ("Prepaging", "Nested"),
    ("Nested", "PreShadow"),
    ("PreShadow", "Nested"),
    ("PreShadow", "Shadow"),
    ("PreShadow", "PreNested"),
    ("Shadow", "Shadow"),
];

#[test]
fn on_mixed_phases_every_policy_adds_up_and_dav2m_follows_figure_7() {
    let w = [("time_scale", "1e-5")];
    let shadow = run_spec(MIXED, &adaptive("static-shadow", &w));
    let nested = run_spec(MIXED, &adaptive("static-nested", &w));
    let oracle = run_spec(MIXED, &adaptive("oracle", &w));
    let best_static = u(&shadow, "cycles").min(u(&nested, "cycles"));
    assert!(u(&oracle, "cycles") <= best_static);
    assert_eq!(
        u(&oracle["oracle"], "estimate_cycles"),
        u(&oracle, "cycles")
    );
    assert_eq!(sum(&oracle, "switches"), u(&oracle, "mode_switches"));
    for policy in ["dav2m", "costmodel"] {
        let a = run_spec(MIXED, &adaptive(policy, &w));
        let t = timeline(&a);
        assert_eq!(sum(&a, "switches"), u(&a, "mode_switches"), "{policy}");
        assert_eq!(sum(&a, "instructions"), u(&a, "instructions"));
        assert_eq!(sum(&a, "cycles"), u(&a, "cycles"));
        assert!(
            u(&a, "mode_switches") <= 2 * t.len() as u64,
            "{policy}: switches bounded"
        );
        if policy == "dav2m" {
            for pair in t.windows(2) {
                let (from, to) = (pair[0]["state"].as_str(), pair[1]["state"].as_str());
                let (from, to) = (from.unwrap(), to.unwrap());
                assert!(
                    from == to || EDGES.contains(&(from, to)) || u(&pair[0], "switches") > 0,
                    "{from} → {to} is no edge of Figure 7"
                );
            }
        }
    }
}

/// The adaptive workloads (the phase workloads of docs/policies.md, with a Phase marker at each
/// phase), each at a scale whose phases span several windows at `time_scale = 1e-5`.
const ADAPTIVE: [&str; 3] = [
    MIXED,
    "gcc-phases:inputs=1,phases=4,blocks=200,arena=32",
    "gzip:inputs=1",
];

#[test]
fn on_every_adaptive_workload_the_oracles_estimate_bounds_both_static_policies() {
    // By construction the estimate is never above the better static mode; the static
    // policies are those modes, so it bounds them. It bounds no switching policy (the next
    // test).
    let w = [("time_scale", "1e-5")];
    for spec in ADAPTIVE {
        let oracle = run_spec(spec, &adaptive("oracle", &w));
        let o = &oracle["oracle"];
        let estimate = u(&oracle, "cycles");
        assert_eq!(u(o, "estimate_cycles"), estimate, "{spec}");
        for (policy, total) in [
            ("static-shadow", "static_shadow_cycles"),
            ("static-nested", "static_nested_cycles"),
        ] {
            let a = run_spec(spec, &adaptive(policy, &w));
            assert_eq!(u(o, total), u(&a, "cycles"), "{spec} {policy}");
            assert!(
                estimate <= u(&a, "cycles"),
                "{spec}: the estimate {estimate} above {policy}'s {}",
                u(&a, "cycles")
            );
        }
    }
}

#[test]
fn on_a_default_mixed_phases_run_of_two_phases_dav2m_beats_the_oracles_estimate() {
    // At `time_scale = 1` the PMU window (10⁹ instructions) is longer than the run: the
    // oracle is one static mode for the solver phase and the shell phase alike, and DAV²M
    // leaves shadow paging inside the window when the shell's exits cross its threshold.
    let spec = "mixed-phases:phases=2";
    let w = [("time_scale", "1")];
    let oracle = run_spec(spec, &adaptive("oracle", &w));
    let dav2m = run_spec(spec, &adaptive("dav2m", &w));
    assert_eq!(timeline(&oracle).len(), 1, "one window");
    assert_eq!(u(&dav2m, "mode_switches"), 1);
    assert!(
        u(&dav2m, "cycles") < u(&oracle, "cycles"),
        "dav2m {} against the oracle's estimate {}",
        u(&dav2m, "cycles"),
        u(&oracle, "cycles")
    );
}

#[test]
fn the_oracles_windows_and_their_cycles_are_those_of_the_static_policies_runs() {
    // The oracle observes its two simulations where an adaptive run's PMU windows end, from
    // the start of counting (after a warm-up that ends inside a window).
    let w = [("time_scale", "1e-5")];
    let warm = |mut ov: Vec<(String, String)>| {
        ov.push(("warmup.instructions".to_string(), "123457".to_string()));
        ov
    };
    let oracle = run_spec(MIXED, &warm(adaptive("oracle", &w)));
    let column =
        |v: &Value, field: &str| -> Vec<u64> { timeline(v).iter().map(|r| u(r, field)).collect() };
    let o = &oracle["oracle"];
    let per_window = |field: &str| -> Vec<u64> {
        o[field]
            .as_array()
            .expect(field)
            .iter()
            .map(|c| c.as_u64().expect("a count"))
            .collect()
    };
    for (policy, field) in [
        ("static-shadow", "shadow_cycles"),
        ("static-nested", "nested_cycles"),
    ] {
        let a = run_spec(MIXED, &warm(adaptive(policy, &w)));
        assert!(timeline(&a).len() > 10, "{policy}: windows to compare");
        assert_eq!(
            column(&oracle, "instructions_end"),
            column(&a, "instructions_end"),
            "{policy}"
        );
        assert_eq!(per_window(field), column(&a, "cycles"), "{policy}");
    }
}

#[test]
fn adaptive_runs_are_deterministic() {
    for policy in ["dav2m", "costmodel", "oracle"] {
        let ov = adaptive(policy, &[("time_scale", "1e-5")]);
        let mut a = run_spec(MIXED, &ov);
        let mut b = run_spec(MIXED, &ov);
        a.as_object_mut().unwrap().remove("sim");
        b.as_object_mut().unwrap().remove("sim");
        assert_eq!(a, b, "{policy}");
    }
}

/// Overrides, the key the error must name, the rule it must state.
type BadCase = (
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static str,
);

#[test]
fn policies_that_make_no_sense_are_rejected_with_the_rule() {
    let cases: &[BadCase] = &[
        (
            &[("mode", "native"), ("policy.kind", "dav2m")],
            "policy",
            "use mode = \"adaptive\"",
        ),
        (
            &[("mode", "adaptive"), ("policy.kind", "lru")],
            "policy.kind",
            "unknown policy `lru`",
        ),
        (
            &[("mode", "adaptive"), ("policy.window_vexit", "-1")],
            "policy.window_vexit",
            "positive",
        ),
        (
            &[("mode", "adaptive"), ("policy.p_factor", "0.9")],
            "policy.p_factor",
            "at least 1",
        ),
        (
            &[("mode", "adaptive"), ("policy.time_scale", "0")],
            "policy.time_scale",
            "positive",
        ),
        (
            &[("mode", "adaptive"), ("policy.window_tmiss", "1e9")],
            "policy.window_tmiss",
            "window_vexit < window_tmiss",
        ),
        (
            &[("mode", "adaptive"), ("policy.window_trans", "5e9")],
            "policy.window_trans",
            "window_tmiss < window_trans",
        ),
        (
            &[("mode", "adaptive"), ("policy.window_vexit", "5e8")],
            "policy.window_vexit",
            "window_inst ≤ window_vexit",
        ),
        (
            &[("mode", "adaptive"), ("policy.cpi_windows", "3")],
            "policy",
            "cpi_windows",
        ),
        (
            &[
                ("mode", "adaptive"),
                ("policy.kind", "costmodel"),
                ("policy.hysteresis", "-0.5"),
            ],
            "policy.hysteresis",
            "at least 0",
        ),
        (
            &[("mode", "adaptive"), ("hypervisor.technique", "pv")],
            "hypervisor.technique",
            "hvm",
        ),
    ];
    for (ov, key, rule) in cases {
        let ov: Vec<(String, String)> = ov
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let err = config::build("bhargava08", &ov)
            .expect_err(&format!("{ov:?} accepted"))
            .to_string();
        assert!(err.contains(key), "{ov:?}: `{err}` does not name {key}");
        assert!(err.contains(rule), "{ov:?}: `{err}` does not say {rule}");
    }
}
