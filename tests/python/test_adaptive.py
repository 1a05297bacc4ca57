"""Adaptive runs from Python and the command line (docs/policies.md): the timeline as a
DataFrame that adds up to the run, compare's adaptive columns with the oracle as a bound,
`vmmu timeline` (table and figure), bad input named, and seed 001's adaptive repro rows."""

from __future__ import annotations

import json

import pytest

import vmmu
from vmmu import exceptions

MIXED = "mixed-phases:phases=4,footprint=2M,points=20K,jobs=6,pages=32,instrs=2000"
SCALE = 1e-5


def test_an_adaptive_run_has_a_timeline_that_adds_up_to_the_run():
    r = vmmu.run(mode="adaptive", policy="dav2m", time_scale=SCALE, workload=MIXED)
    assert r.mode == "adaptive" and r.policy == "dav2m"
    df = r.timeline_frame()
    assert df.index.name == "window"
    assert df["instructions"].sum() == r.instructions
    assert df["cycles"].sum() == r.cycles
    assert df["switches"].sum() == r.mode_switches
    assert df["l2_dtlb_misses"].sum() == r.tlb["l2"]["misses"]
    assert set(df["mode"]) <= {"shadow", "nested"}
    assert set(df["decision"]) <= {"stay", "shadow", "nested", "end"}
    assert df["decision"].iloc[-1] == "end"
    # Every window the policy saw paid a PMU-overflow exit.
    assert r.exits["pmu_overflow"]["count"] == (df["decision"] != "end").sum()


def test_a_run_without_a_policy_has_no_timeline():
    r = vmmu.run(mode="nested", workload=MIXED)
    with pytest.raises(ValueError, match="no timeline"):
        r.timeline_frame()


def test_a_policy_outside_adaptive_mode_is_an_error_naming_it():
    with pytest.raises(exceptions.ConfigError, match=r"policy.*use mode = \"adaptive\""):
        vmmu.run(mode="native", policy="dav2m", workload=MIXED)


def test_nonsense_policy_parameters_are_rejected_with_the_rule():
    with pytest.raises(exceptions.ConfigError, match=r"policy\.p_factor: must be at least 1"):
        vmmu.run(mode="adaptive", set={"policy.p_factor": 0.5}, workload=MIXED)
    with pytest.raises(exceptions.ConfigError, match="window_vexit < window_tmiss"):
        vmmu.run(mode="adaptive", set={"policy.window_tmiss": 1e8}, workload=MIXED)


def test_compare_has_adaptive_columns_and_the_oracle_bounds_them():
    df = vmmu.compare(
        ["native", "nested", "shadow", "dav2m", "oracle", "costmodel"],
        workload=MIXED,
        time_scale=SCALE,
    )
    assert list(df.index) == ["native", "nested", "shadow", "dav2m", "oracle", "costmodel"]
    assert df.loc["nested", "mode_switches"] == 0
    bound = df.loc["oracle", "cycles"]
    for col in ("nested", "shadow", "dav2m", "costmodel"):
        assert bound <= df.loc[col, "cycles"], col


def test_cli_runs_adaptive_and_draws_the_timeline(invoke, tmp_path):
    r = invoke(
        "run", "--mode", "adaptive", "--policy", "costmodel", "--time-scale", str(SCALE),
        "-w", MIXED, "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    path = tmp_path / "r.json"
    path.write_text(r.stdout)
    fig = tmp_path / "t.png"
    t = invoke("timeline", str(path), "-o", str(fig), "--limit", "5")
    assert t.exit_code == 0, t.stderr
    assert "costmodel" in t.stdout and "more" in t.stdout
    assert fig.stat().st_size > 1000


def test_cli_timeline_of_a_static_run_says_why_it_has_none(invoke, tmp_path):
    r = invoke("run", "--mode", "shadow", "-w", MIXED, "--json")
    path = tmp_path / "r.json"
    path.write_text(r.stdout)
    t = invoke("timeline", str(path))
    assert t.exit_code != 0
    assert "no timeline" in t.stderr and "--mode adaptive" in t.stderr


def test_cli_compare_adaptive_adds_the_columns(invoke):
    r = invoke(
        "compare", "-w", MIXED, "--modes", "nested,shadow", "--adaptive",
        "--time-scale", str(SCALE), "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert list(out) == ["nested", "shadow", "dav2m", "oracle", "costmodel"]
    assert out["oracle"]["policy"] == "oracle"


def test_cli_policy_in_native_mode_is_an_error(invoke):
    r = invoke("run", "--mode", "native", "--policy", "dav2m", "-w", MIXED)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert 'use mode = "adaptive"' in r.stderr


def test_bae11_adaptive_repro_rows_have_verdicts_that_can_fail():
    from vmmu.repro.bae11.adaptive import bae11_adaptive

    df = bae11_adaptive(quick=True)
    assert set(df["holds"]) <= {"yes", "no", "n/a"}
    assert "no" in set(df["holds"]), "some verdicts fail and are shown failing"
    oracle = df[df.index.str.endswith("/oracle")]
    assert len(oracle) == 8 and (oracle["holds"] == "yes").all()
    # Seed 001's insensitive benchmarks each have a proxy, judged on their DAV²M switches.
    calm = df.loc["transitions/insensitive"]
    assert [p.split()[0] for p in calm["note"].split(", ")] == ["apsi", "fma3d", "crafty"]
    assert calm["holds"] == ("yes" if calm["vmmu"] <= 1 else "no")
    assert df.loc["transitions/gcc", "paper"].startswith("13")
