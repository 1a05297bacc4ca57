//! The shipped exit cost profiles: each loads, names itself, describes itself
//! and says where every number comes from; `hypervisor.profile` loads a profile's numbers into
//! `hypervisor.costs`; an unknown profile lists the known ones; a misspelt field is named.

use std::collections::BTreeSet;

use vmmu_core::config::{self, load_profile, CostProfile, PROFILES};
use vmmu_core::Error;

/// The numeric and flag fields of a cost profile, read from the struct itself (every field of
/// the serialized profile except the descriptive `name`, `description` and `sources`).
fn numeric_fields(p: &CostProfile) -> Vec<String> {
    let value = toml::Value::try_from(p).expect("a cost profile serializes");
    let table = value.as_table().expect("a cost profile is a table");
    let mut out = Vec::new();
    for (k, v) in table {
        if matches!(k.as_str(), "name" | "description" | "sources") {
            continue;
        }
        assert!(
            v.is_integer() || v.is_bool(),
            "field `{k}` of CostProfile is neither a number nor a flag; update this test"
        );
        out.push(k.clone());
    }
    out
}

fn config_field(e: &Error) -> Option<&str> {
    match e {
        Error::Config { field, .. } => Some(field),
        _ => None,
    }
}

fn temp_toml(tag: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "vmmu-profiles-test-{tag}-{}.toml",
        std::process::id()
    ));
    std::fs::write(&path, text).unwrap();
    path
}

fn profile_text(name: &str) -> &'static str {
    PROFILES
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("profile {name} is shipped"))
        .1
}

#[test]
fn the_four_profiles_are_shipped() {
    let names: BTreeSet<&str> = PROFILES.iter().map(|(n, _)| *n).collect();
    for want in [
        "xen-3.0.4-core2",
        "palacios-opteron2350",
        "esx-nehalem",
        "kvm-modern",
    ] {
        assert!(names.contains(want), "missing profile {want}: {names:?}");
    }
    assert_eq!(
        names.len(),
        PROFILES.len(),
        "a profile name is listed twice"
    );
}

#[test]
fn every_profile_loads_names_itself_and_describes_itself() {
    for (name, _) in PROFILES {
        let p = load_profile(name).unwrap_or_else(|e| panic!("profile {name}: {e}"));
        assert_eq!(p.name, *name, "profile {name}: `name` differs from its key");
        let d = p.description.trim();
        assert!(
            !d.is_empty(),
            "profile {name}: needs a one-line description"
        );
        assert!(
            !d.to_ascii_lowercase().contains("placeholder") && !d.contains("TODO"),
            "profile {name}: description is a placeholder: {d}"
        );
        assert!(!d.contains('\n'), "profile {name}: description is one line");
    }
}

#[test]
fn every_number_of_every_profile_has_a_source_and_every_source_a_field() {
    for (name, _) in PROFILES {
        let p = load_profile(name).unwrap();
        let fields = numeric_fields(&p);
        assert!(fields.len() >= 15, "profile {name}: fields {fields:?}");
        let missing: Vec<&String> = fields
            .iter()
            .filter(|f| p.sources.get(*f).is_none_or(|s| s.trim().is_empty()))
            .collect();
        assert!(
            missing.is_empty(),
            "profile {name}: no [sources] entry for {missing:?}"
        );
        let stray: Vec<&String> = p.sources.keys().filter(|k| !fields.contains(k)).collect();
        assert!(
            stray.is_empty(),
            "profile {name}: [sources] keys that name no field: {stray:?}"
        );
        // A source says where the number comes from: a seed, a measurement, or an assumption
        // with its reasoning (more than the word itself).
        for (field, src) in &p.sources {
            let s = src.to_ascii_lowercase();
            assert!(
                s.contains("seed ") || s.contains("measurement") || s.contains("assumption:"),
                "profile {name}: source of {field} names no seed, measurement or assumption: {src}"
            );
            assert!(
                src.len() >= 40,
                "profile {name}: source of {field} gives no reasoning: {src}"
            );
        }
    }
}

#[test]
fn the_numbers_are_plausible_direct_costs() {
    for (name, _) in PROFILES {
        let p = load_profile(name).unwrap();
        // An exit round trip is hundreds to thousands of cycles on every x86 with VT-x / AMD-V.
        assert!(
            (500..=5000).contains(&p.exit_round_trip),
            "{name}: exit_round_trip {}",
            p.exit_round_trip
        );
        // Handling a hidden fault costs more than recognising the guest's own fault.
        assert!(p.hidden_fault > p.reflect_fault, "{name}");
        // Pre-virtualization's call stays in the guest: far below any world switch.
        assert!(
            p.previrt_call < 100,
            "{name}: previrt_call {}",
            p.previrt_call
        );
        assert!(p.previrt_call * 10 < p.exit_round_trip, "{name}");
        // The in-place VMM does the work PV validation does (seed 003: within a few percent).
        assert_eq!(p.previrt_update, p.pv_update, "{name}");
        // A hypercall is about one world switch, not many.
        assert!(p.hypercall <= 2 * p.exit_round_trip, "{name}");
    }
}

#[test]
fn palacios_exit_is_in_excess_of_1000_cycles() {
    // Seed 001 §2: "A typical exit/entry pair ... requires in excess of 1000 cycles".
    let p = load_profile("palacios-opteron2350").unwrap();
    assert!(p.exit_round_trip >= 1000, "{}", p.exit_round_trip);
}

#[test]
fn measured_figures_are_the_ones_the_docs_quote() {
    // DESIGN.md, "Cost profiles".
    assert_eq!(load_profile("kvm-modern").unwrap().exit_round_trip, 1350);
    assert_eq!(load_profile("esx-nehalem").unwrap().exit_round_trip, 2000);
    // Seed 000 Table 10 (MemoryMotion, Debian), rounded to the cycle.
    let xen = load_profile("xen-3.0.4-core2").unwrap();
    assert_eq!(xen.hidden_fault, 3823);
    assert_eq!(xen.reflect_fault, 368);
    assert_eq!(xen.emulate_write, 3369);
}

#[test]
fn hypervisor_profile_loads_its_costs_into_the_config() {
    let cfg = config::build(
        "bhargava08",
        &[("hypervisor.profile".into(), "xen-3.0.4-core2".into())],
    )
    .unwrap();
    assert_eq!(cfg.hypervisor.profile, "xen-3.0.4-core2");
    assert_eq!(
        cfg.hypervisor.costs,
        load_profile("xen-3.0.4-core2").unwrap()
    );
    assert_eq!(cfg.hypervisor.costs.name, "xen-3.0.4-core2");
}

#[test]
fn a_set_override_of_one_cost_applies_after_the_profile() {
    let cfg = config::build(
        "bhargava08",
        &[
            ("hypervisor.profile".into(), "xen-3.0.4-core2".into()),
            ("hypervisor.costs.hypercall".into(), "900".into()),
        ],
    )
    .unwrap();
    let xen = load_profile("xen-3.0.4-core2").unwrap();
    assert_eq!(cfg.hypervisor.costs.hypercall, 900);
    assert_eq!(cfg.hypervisor.costs.hidden_fault, xen.hidden_fault);
}

#[test]
fn the_default_profile_is_a_shipped_one() {
    let cfg = config::build("bhargava08", &[]).unwrap();
    let p = load_profile(&cfg.hypervisor.profile).unwrap();
    assert_eq!(cfg.hypervisor.costs, p);
}

#[test]
fn a_profile_file_loads_by_path() {
    let text = profile_text("kvm-modern")
        .replace("name = \"kvm-modern\"", "name = \"my-kvm\"")
        .replace("exit_round_trip = 1350", "exit_round_trip = 1234");
    assert!(text.contains("1234"), "the fixture edit must apply");
    let path = temp_toml("file", &text);
    let p = load_profile(path.to_str().unwrap());
    let cfg = config::build(
        "bhargava08",
        &[("hypervisor.profile".into(), path.to_str().unwrap().into())],
    );
    std::fs::remove_file(&path).ok();
    let p = p.unwrap();
    assert_eq!(p.name, "my-kvm");
    assert_eq!(p.exit_round_trip, 1234);
    assert_eq!(cfg.unwrap().hypervisor.costs.exit_round_trip, 1234);
}

#[test]
fn an_unknown_profile_lists_the_known_ones() {
    let err = load_profile("hyper-v-2030").unwrap_err();
    assert_eq!(config_field(&err), Some("hypervisor.profile"), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("hyper-v-2030"), "{msg}");
    for (name, _) in PROFILES {
        assert!(msg.contains(name), "{msg}");
    }
    // The same through the config builder.
    let msg = config::build(
        "bhargava08",
        &[("hypervisor.profile".into(), "hyper-v-2030".into())],
    )
    .unwrap_err()
    .to_string();
    for (name, _) in PROFILES {
        assert!(msg.contains(name), "{msg}");
    }
}

#[test]
fn a_misspelt_field_in_a_profile_file_is_named() {
    let text = profile_text("xen-3.0.4-core2").replacen("\ninvlpg = ", "\ninvlpq = ", 1);
    assert!(text.contains("invlpq"), "the fixture edit must apply");
    let path = temp_toml("misspelt", &text);
    let err = load_profile(path.to_str().unwrap()).unwrap_err();
    std::fs::remove_file(&path).ok();
    assert_eq!(config_field(&err), Some("hypervisor.costs.invlpq"), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("hypervisor.costs.invlpq"), "{msg}");
    assert!(
        msg.contains("expected one of"),
        "should list the fields: {msg}"
    );
}

#[test]
fn a_missing_field_in_a_profile_file_is_an_error() {
    let text: String = profile_text("xen-3.0.4-core2")
        .lines()
        .filter(|l| !l.starts_with("make_shadow = "))
        .map(|l| format!("{l}\n"))
        .collect();
    let path = temp_toml("missing", &text);
    let err = load_profile(path.to_str().unwrap()).unwrap_err();
    std::fs::remove_file(&path).ok();
    assert!(err.to_string().contains("make_shadow"), "{err}");
}

#[test]
fn a_missing_profile_file_names_the_path() {
    let err = load_profile("/nonexistent/vmmu-profile.toml").unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/vmmu-profile.toml"),
        "{err}"
    );
}
