//! Bad workload specifications: each is an `Error::Workload` that names the specification, the
//! parameter and what was expected.

use vmmu_core::workload;
use vmmu_core::Error;

/// The reason of the error `spec` gives, after checking it names `spec`.
fn reason(spec: &str) -> String {
    match workload::open(spec) {
        Err(Error::Workload { spec: s, reason }) => {
            assert_eq!(s, spec);
            reason
        }
        Err(other) => panic!("{spec}: wrong error kind: {other}"),
        Ok(_) => panic!("{spec}: accepted"),
    }
}

fn assert_mentions(spec: &str, words: &[&str]) {
    let r = reason(spec);
    for w in words {
        assert!(r.contains(w), "{spec}: `{r}` does not mention `{w}`");
    }
}

#[test]
fn unknown_generator_lists_the_known_ones() {
    assert_mentions(
        "randon:refs=1",
        &[
            "`randon`",
            "stream",
            "stride",
            "random",
            "pointer-chase",
            "phases",
        ],
    );
}

#[test]
fn unknown_parameter_lists_the_generators_parameters() {
    assert_mentions(
        "stride:strid=64",
        &["`strid`", "`stride`", "footprint", "write_ratio", "seed"],
    );
    assert_mentions("random:stride=64", &["`stride`", "random"]);
}

#[test]
fn unparsable_values_say_what_was_expected() {
    assert_mentions(
        "random:footprint=lots",
        &["`footprint`", "byte size", "`lots`"],
    );
    assert_mentions("random:refs=1.5", &["`refs`", "count", "`1.5`"]);
    assert_mentions("random:ipr=x", &["`ipr`", "count"]);
    assert_mentions("random:seed=abc", &["`seed`", "integer"]);
    assert_mentions("random:prefault=maybe", &["`prefault`", "`0`, `1`"]);
    assert_mentions("random:huge=2", &["`huge`"]);
    assert_mentions("random:thp=yes", &["`thp`", "hugepage"]);
    assert_mentions("pointer-chase:dist=pareto", &["`dist`", "zipf", "hotcold"]);
    assert_mentions("pointer-chase:alpha=-1", &["`alpha`", "non-negative"]);
    assert_mentions("stride:stride=12", &["`stride`", "multiple of 8"]);
    assert_mentions("stream:elem=0", &["`elem`", "multiple of 8"]);
    assert_mentions("random:refs", &["`refs`", "key=value"]);
    assert_mentions("random:refs=1,refs=2", &["`refs`", "twice"]);
}

#[test]
fn footprint_zero_or_beyond_47_bits_is_refused() {
    assert_mentions("random:footprint=0", &["`footprint`", "at least 8 bytes"]);
    assert_mentions("stream:footprint=128T", &["`footprint`", "47-bit"]);
    // The largest footprint that fits above the default base is accepted.
    let max = workload::USER_TOP - workload::BASE;
    assert!(workload::open(&format!("random:footprint={max},refs=1")).is_ok());
    assert_mentions(&format!("random:footprint={}", max + 1), &["47-bit"]);
    // A lower base leaves more room.
    assert!(workload::open(&format!("random:footprint={},base=1G,refs=1", max + 1)).is_ok());
}

#[test]
fn a_base_off_page_or_beyond_47_bits_is_refused() {
    assert_mentions("random:base=4097", &["`base`", "multiple of 4K"]);
    assert_mentions("random:base=128T", &["`base`", "2^47"]);
}

#[test]
fn write_ratio_outside_zero_one_is_refused() {
    assert_mentions(
        "random:write_ratio=1.5",
        &["`write_ratio`", "between 0 and 1"],
    );
    assert_mentions("random:write_ratio=-0.1", &["`write_ratio`"]);
    assert_mentions("random:write_ratio=nan", &["`write_ratio`"]);
}

#[test]
fn generator_specific_limits_name_their_parameter() {
    assert_mentions(
        "pointer-chase:node=128,footprint=64",
        &["`node`", "does not fit"],
    );
    assert_mentions(
        "pointer-chase:dist=hotcold,hot_fraction=0",
        &["`hot_fraction`"],
    );
    assert_mentions("pointer-chase:hot_prob=2", &["`hot_prob`"]);
    assert_mentions("stream:arrays=0", &["`arrays`"]);
    assert_mentions("stream:arrays=100,footprint=64", &["`arrays`"]);
}

#[test]
fn phases_errors_name_the_phase() {
    assert_mentions("phases:a=phases", &["`a`", "unknown generator"]);
    assert_mentions("phases:b=none,a=none", &["`a`"]);
    assert_mentions("phases:period=0", &["`period`"]);
    assert_mentions("phases:c.stride=64", &["`c.stride`", "names no phase"]);
    assert_mentions("phases:a.stride=64", &["`a.stride`", "random"]);
    assert_mentions(
        "phases:b=stride,b.stride=7",
        &["`b.stride`", "multiple of 8"],
    );
    assert_mentions("phases:a.refs=5", &["`a.refs`", "whole workload"]);
    assert_mentions("phases:stride=64", &["`stride`", "phases"]);
}

#[test]
fn no_generator_name_is_an_error() {
    assert_mentions(":refs=1", &["no generator name"]);
    assert_mentions("", &["no generator name"]);
}
