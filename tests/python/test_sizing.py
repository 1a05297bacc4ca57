"""Sizing studies (`vmmu sizing`, docs/performance.md): the one-pass L2 TLB study equals one
run per size through the binding, the method is chosen where it is exact and refused where it
is not, and bad sizes are rejected naming the rule."""

from __future__ import annotations

import json

import pytest

import vmmu
from vmmu.sizing_study import SizingError, parse_entries

#: Enough distinct pages that every L2 size below the largest misses.
WORKLOAD = "random:footprint=16M,refs=30K"
OPTS = {"workload": WORKLOAD, "set": ["machine.caches.data=false"]}


def test_entries_parse_ranges_lists_and_mixes():
    assert parse_entries("64..512") == [64, 128, 256, 512]
    assert parse_entries("24,48,96") == [24, 48, 96]
    assert parse_entries("16..64, 1536, 32") == [16, 32, 64, 1536]
    assert parse_entries("100..300") == [100, 200]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0..8", "1 <= LO <= HI"),
        ("64..8", "1 <= LO <= HI"),
        ("abc", "expected a number or LO..HI"),
        ("0", "at least 1"),
        (",", "no size given"),
        ("1..100000000000000000000", "at most 64"),
    ],
)
def test_bad_entries_are_rejected_saying_why(text, says):
    with pytest.raises(SizingError, match=says.replace(".", r"\.").replace("(", r"\(")):
        parse_entries(text)


@pytest.mark.parametrize("mode", ["native", "nested", "shadow"])
def test_one_pass_equals_one_run_per_size(mode):
    one = vmmu.sizing("l2tlb", "32..1024", mode=mode, method="one-pass", **OPTS)
    sep = vmmu.sizing("l2tlb", "32..1024", mode=mode, method="separate", **OPTS)
    assert one.method == "one-pass" and sep.method == "separate"
    assert len(one.results) == 1 and len(sep.results) == 6
    cols = ["entries", "ways", "lookups", "hits", "misses"]
    assert one.rows[cols].to_dict("records") == sep.rows[cols].to_dict("records")
    # The machine's own 512-entry 4-way array is one of the sizes, and it is what the run saw.
    own = one.rows[one.rows["configured"]]
    assert list(own["entries"]) == [512]
    assert int(own["misses"].iloc[0]) == one.results[0]["tlb"]["l2"]["misses"]
    assert len(set(one.rows["misses"])) > 1, "the sizes must differ for the test to mean much"


def test_fully_associative_misses_never_grow_with_size():
    # LRU inclusion: a larger fully associative array holds everything a smaller one holds.
    s = vmmu.sizing("l2tlb", "16..2048", ways="full", mode="nested", **OPTS)
    assert list(s.rows["ways"]) == list(s.rows["entries"])
    misses = list(s.rows["misses"])
    assert misses == sorted(misses, reverse=True) and misses[0] > misses[-1]


def test_the_page_walk_cache_is_sized_by_separate_runs_and_one_pass_is_refused():
    s = vmmu.sizing("pwc", "8,24,96", mode="nested", **OPTS)
    assert s.method == "separate" and "skip the upper levels" in s.reason
    assert list(s.rows["ways"]) == [8, 24, 96], "bhargava08's PWC is fully associative"
    for (_, row), r in zip(s.rows.iterrows(), s.results, strict=True):
        assert r["config"]["machine"]["pwc"]["entries"] == row["entries"]
        assert row["hits"] + row["misses"] == row["lookups"] > 0
    with pytest.raises(SizingError, match="one pass is not exact here"):
        vmmu.sizing("pwc", "8,24", method="one-pass", **OPTS)


def test_several_vcpus_fall_back_to_separate_runs():
    s = vmmu.sizing("l2tlb", "64,512", mode="nested", vcpus=2, **OPTS)
    assert s.method == "separate" and "vCPUs" in s.reason


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"structure": "l3tlb"}, "unknown structure `l3tlb`"),
        ({"method": "fast"}, "unknown method `fast`"),
        ({"ways": "three"}, "expected a number or `full`"),
        ({"ways": 3, "entries": "64"}, "3 ways do not divide"),
        ({"array": 5}, "machine.tlb.l2 has 2 array"),
        ({"structure": "ntlb", "array": 0}, "--array applies to the L2 TLB only"),
    ],
)
def test_impossible_studies_are_rejected_naming_the_rule(kwargs, says):
    args = {"structure": "l2tlb", "entries": "64..128", **kwargs}
    with pytest.raises(SizingError, match=says.replace("(", r"\(")):
        vmmu.sizing(args.pop("structure"), args.pop("entries"), **args, **OPTS)


def test_cli_prints_the_table_and_json(invoke, tmp_path):
    args = ["sizing", "--entries", "64..512", "-w", WORKLOAD, "--set", "machine.caches.data=false"]
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    assert "L2 TLB" in r.stdout and "method: one-pass" in r.stdout
    assert "512 *" in r.stdout, "the machine's own size is marked"
    csv = tmp_path / "rows.csv"
    r = invoke(*args, "--json", "--csv", str(csv))
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["method"] == "one-pass" and out["array"] == 0
    assert [row["entries"] for row in out["rows"]] == [64, 128, 256, 512]
    assert csv.read_text().splitlines()[0].startswith("entries,ways,lookups,hits,misses")


def test_cli_bad_input_exits_2_with_the_reason(invoke):
    r = invoke("sizing", "--entries", "64..8", "-w", WORKLOAD)
    assert r.exit_code == 2 and "1 <= LO <= HI" in r.stderr
    r = invoke(
        "sizing", "--structure", "ntlb", "--method", "one-pass", "--entries", "8", "-w", WORKLOAD
    )
    assert r.exit_code == 2 and "nested walks" in r.stderr
