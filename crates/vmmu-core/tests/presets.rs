//! The shipped machine presets: each loads, validates, names itself, describes itself, and says
//! where every number comes from; and a bad machine file gets an error that
//! names the field.

use vmmu_core::config::{self, load_machine, PRESETS};
use vmmu_core::hw::cache::MAX_LEVELS;
use vmmu_core::sim::Simulator;
use vmmu_core::Error;

/// Dotted paths of every leaf of a machine's TOML value; an array is one leaf. The descriptive
/// top-level keys (`name`, `description`, `sources`) are not numbers and are skipped.
fn leaf_paths(value: &toml::Value) -> Vec<String> {
    fn walk(v: &toml::Value, path: &str, out: &mut Vec<String>) {
        match v {
            toml::Value::Table(t) => {
                for (k, child) in t {
                    if path.is_empty() && matches!(k.as_str(), "name" | "description" | "sources") {
                        continue;
                    }
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(child, &p, out);
                }
            }
            _ => out.push(path.to_string()),
        }
    }
    let mut out = Vec::new();
    walk(value, "", &mut out);
    out
}

/// `prefix` equals `path` or is a prefix of it ending at a dot boundary.
fn covers(prefix: &str, path: &str) -> bool {
    path == prefix
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'.')
}

fn config_field(e: &Error) -> Option<&str> {
    match e {
        Error::Config { field, .. } => Some(field),
        _ => None,
    }
}

#[test]
fn every_preset_loads_validates_and_names_itself() {
    assert!(
        PRESETS.len() >= 6,
        "the papers' four machines and two recent cores"
    );
    for (name, _) in PRESETS {
        let m = load_machine(name).unwrap_or_else(|e| panic!("preset {name}: {e}"));
        assert_eq!(
            m.name, *name,
            "preset {name}: `name` field differs from the preset name"
        );
        assert!(
            !m.description.trim().is_empty(),
            "preset {name}: needs a one-line description"
        );
        assert!(
            !m.description.contains("PLACEHOLDER"),
            "preset {name}: description is still a placeholder"
        );
        config::build(name, &[]).unwrap_or_else(|e| panic!("preset {name} does not validate: {e}"));
    }
}

#[test]
fn every_field_of_every_preset_has_a_source() {
    for (name, _) in PRESETS {
        let m = load_machine(name).unwrap();
        // Walk the machine with every default written out, so a field left to its default
        // needs a source too.
        let full = toml::Value::try_from(&m).expect("a machine serializes");
        let leaves = leaf_paths(&full);
        assert!(
            leaves.iter().any(|p| p == "caches.dram_latency"),
            "{leaves:?}"
        );
        let missing: Vec<&String> = leaves
            .iter()
            .filter(|p| !m.sources.keys().any(|k| covers(k, p)))
            .collect();
        assert!(
            missing.is_empty(),
            "preset {name}: no `sources` entry covers {missing:?}"
        );
        for (k, v) in &m.sources {
            assert!(
                !v.trim().is_empty(),
                "preset {name}: source of `{k}` is empty"
            );
        }
    }
}

#[test]
fn every_source_key_names_a_field() {
    // A source key is a field path, a section, or detail under an array leaf
    // (`caches.levels.l2`); a typo such as `tlb.l1dd` is caught here.
    for (name, _) in PRESETS {
        let m = load_machine(name).unwrap();
        let leaves = leaf_paths(&toml::Value::try_from(&m).unwrap());
        for k in m.sources.keys() {
            assert!(
                leaves.iter().any(|p| covers(k, p) || covers(p, k)),
                "preset {name}: sources key `{k}` names no field"
            );
        }
    }
}

#[test]
fn a_misspelt_field_in_a_machine_file_is_named() {
    let text = PRESETS
        .iter()
        .find(|(n, _)| *n == "bhargava08")
        .unwrap()
        .1
        .replacen(
            "{ entries = 64, ways = 64,",
            "{ entries = 64, wayz = 64,",
            1,
        );
    assert!(text.contains("wayz"), "the fixture edit must apply");
    let path = std::env::temp_dir().join(format!("vmmu-presets-test-{}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let err = load_machine(path.to_str().unwrap()).unwrap_err();
    std::fs::remove_file(&path).ok();
    assert_eq!(config_field(&err), Some("machine.tlb.l1d[0].wayz"), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("expected one of"),
        "error should list the known fields: {msg}"
    );
}

#[test]
fn ways_that_do_not_divide_entries_name_the_field() {
    let err = config::build(
        "bhargava08",
        &[("machine.tlb.l1d.0.ways".to_string(), "3".to_string())],
    )
    .unwrap_err();
    assert_eq!(config_field(&err), Some("machine.tlb.l1d[0].ways"), "{err}");
}

#[test]
fn a_cache_with_a_non_power_of_two_set_count_names_the_field() {
    // 30 MiB at 12 ways is 40960 sets; the golden-cove preset uses 15 ways for this reason.
    let err = config::build(
        "golden-cove",
        &[("machine.caches.levels.2.ways".to_string(), "12".to_string())],
    )
    .unwrap_err();
    assert_eq!(
        config_field(&err),
        Some("machine.caches.levels[2].size"),
        "{err}"
    );
}

#[test]
fn more_cache_levels_than_the_walkers_count_are_refused_and_the_most_run() {
    let mut cfg = config::build("bhargava08", &[]).unwrap();
    let last = cfg.machine.caches.levels.last().unwrap().clone();
    while cfg.machine.caches.levels.len() < MAX_LEVELS {
        let mut next = last.clone();
        next.name = format!("l{}", cfg.machine.caches.levels.len() + 1);
        cfg.machine.caches.levels.push(next);
    }
    // Every level serves page-entry references: a walk may be served by the last one or DRAM.
    cfg.machine.caches.page_entry_fill = cfg.machine.caches.levels[0].name.clone();
    let mut sim = Simulator::new(&cfg).unwrap();
    let mut src = vmmu_core::workload::open("random:footprint=64M,refs=20K").unwrap();
    vmmu_core::run::simulate(&mut sim, src.as_mut(), &mut |_| true).unwrap();
    assert!(
        sim.mmu().hw.stats.served_level[MAX_LEVELS] > 0,
        "DRAM served walks"
    );
    cfg.machine.caches.levels.push(last);
    let err = cfg.validate().unwrap_err();
    assert_eq!(config_field(&err), Some("machine.caches.levels"), "{err}");
    assert!(err.to_string().contains("at most 7"), "{err}");
}

#[test]
fn an_unknown_preset_lists_the_presets() {
    let msg = load_machine("pentium-pro").unwrap_err().to_string();
    for (name, _) in PRESETS {
        assert!(msg.contains(name), "{msg}");
    }
}
