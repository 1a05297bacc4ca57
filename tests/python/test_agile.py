"""Agile paging from Python and the command line: the mode runs, checked, with its policy's
counters and its walks by switching level in the result and in ``vmmu run``'s tables, and
``vmmu repro agile16`` judges the abstract's two findings (docs/model.md, "Agile paging")."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from click.testing import Result

from vmmu import api, repro
from vmmu.exceptions import ConfigError
from vmmu.repro._claims import COUNTED

WORKLOAD = "gcc-phases:inputs=1,phases=3,blocks=200"


def test_an_agile_run_counts_its_walks_by_switching_level_and_checks_them() -> None:
    r = api.run(
        "golden-cove",
        mode="agile",
        workload=WORKLOAD,
        check=True,
        set=[("agile.write_threshold", 1), ("agile.scan_interval", 100_000)],
    )
    agile = r["agile"]
    walks = agile["walks_by_shadow_levels"]
    assert sorted(walks, key=int) == ["0", "1", "2", "3", "4"]
    assert sum(walks.values()) == r["walks"]
    assert agile["policy"]["to_nested"] > 0
    assert r["checked_translations"] > 0


def test_vmmu_run_shows_the_agile_tables(invoke: Callable[..., Result]) -> None:
    out = invoke("run", "--mode", "agile", "--workload", WORKLOAD).stdout
    assert "agile policy" in out
    assert "agile walks by shadow levels" in out


def test_a_bad_agile_parameter_is_named() -> None:
    with pytest.raises(ConfigError, match=r"agile\.scan_interval"):
        api.run(mode="agile", workload=WORKLOAD, set=[("agile.scan_interval", 0)])


def test_agile16_judges_both_findings_on_each_workload() -> None:
    rep = repro.reproduce("agile16", quick=True)
    for k in ("gcc-phases", "database"):
        for claim in ("agile_vs_best", "agile_vs_native"):
            assert rep.verdict(f"{k}/{claim}") in COUNTED, (k, claim)
    walks = next(v for v in rep.views if v.key == "walks")
    for row in walks.rows:
        assert abs(sum(float(x) for x in row[1:]) - 100.0) < 0.5, row
