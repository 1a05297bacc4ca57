//! An unknown name — a workload generator, a generator's parameter, a machine preset, a cost
//! profile, a policy — is an error that suggests the nearest known name, then lists them all;
//! a name near none of them gets the list alone.

use vmmu_core::{config, workload, Error};

/// The message of the error opening workload `spec` gives.
fn workload_error(spec: &str) -> String {
    match workload::open(spec) {
        Err(e @ Error::Workload { .. }) => e.to_string(),
        Err(other) => panic!("{spec}: wrong error kind: {other}"),
        Ok(_) => panic!("{spec}: accepted"),
    }
}

/// The message of the error building the bhargava08 machine with `overrides` gives.
fn config_error(machine: &str, overrides: &[(&str, &str)]) -> String {
    let pairs: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match config::build(machine, &pairs) {
        Err(e @ Error::Config { .. }) => e.to_string(),
        Err(other) => panic!("wrong error kind: {other}"),
        Ok(_) => panic!("{overrides:?}: accepted"),
    }
}

fn assert_suggests(msg: &str, name: &str, list: &[&str]) {
    assert!(
        msg.contains(&format!("did you mean `{name}`?")),
        "`{msg}` does not suggest `{name}`"
    );
    let at = msg.find("did you mean").unwrap();
    for known in list {
        assert!(
            msg[at..].contains(known),
            "`{msg}` does not list `{known}` after the suggestion"
        );
    }
}

#[test]
fn a_renamed_workload_suggests_its_new_name() {
    let msg = workload_error("gcc:refs=1K");
    assert!(msg.contains("unknown generator `gcc`"), "{msg}");
    assert_suggests(
        &msg,
        "gcc-phases",
        &["stream", "random", "gcc-phases", "mixed-phases"],
    );
}

#[test]
fn a_misspelt_workload_suggests_the_nearest() {
    assert_suggests(&workload_error("randon"), "random", &["stream"]);
    assert_suggests(
        &workload_error("pointer_chase"),
        "pointer-chase",
        &["stream"],
    );
    assert_suggests(&workload_error("phases:a=strem"), "stream", &["random"]);
}

#[test]
fn a_misspelt_parameter_suggests_the_nearest() {
    assert_suggests(
        &workload_error("random:footprnt=1M"),
        "footprint",
        &["refs", "seed"],
    );
}

#[test]
fn a_name_near_nothing_gets_the_list_alone() {
    let msg = workload_error("zzzzzzzz");
    assert!(!msg.contains("did you mean"), "{msg}");
    assert!(msg.contains("stream") && msg.contains("random"), "{msg}");
}

#[test]
fn a_misspelt_machine_profile_or_policy_suggests_the_nearest() {
    assert_suggests(
        &config_error("bhargava", &[]),
        "bhargava08",
        &["opteron2350", "zen4"],
    );
    assert_suggests(
        &config_error("bhargava08", &[("hypervisor.profile", "kvm")]),
        "kvm-modern",
        &["esx-nehalem"],
    );
    assert_suggests(
        &config_error(
            "bhargava08",
            &[("mode", "\"adaptive\""), ("policy.kind", "\"dav\"")],
        ),
        "dav2m",
        &["oracle", "costmodel"],
    );
}
