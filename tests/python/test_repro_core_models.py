"""The reproductions under both core models: ``--core-model`` reaches every engine run of a
paper (the runs it makes through jobs and those it makes itself), the overlap shares are
computed exactly from the runs, and docs/repro-interval.md matches a fresh quick run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vmmu.repro import PAPERS, core_models, paper
from vmmu.repro._paper import execute

REPO = Path(__file__).resolve().parents[2]


def result(cycles: int, additive: int, t_exp: int, t_paid: int, d_exp: int, d_paid: int) -> dict:
    return {
        "cycles": cycles,
        "cycles_by_cause": {"translation": t_exp, "data": d_exp, "base": 0},
        "core": {
            "model": "interval",
            "cycles_additive": additive,
            "cycles_by_cause_additive": {"translation": t_paid, "data": d_paid, "base": 0},
        },
    }


def test_the_overlap_shares_are_summed_over_the_runs() -> None:
    o = core_models.Overlap()
    o.add(result(600, 1000, 100, 400, 200, 300))
    o.add(result(400, 500, 0, 100, 50, 100))
    assert o.runs == 2
    # Translation: 100 of 500 cycles exposed; data: 250 of 400.
    assert o.translation_hidden() == pytest.approx(0.8)
    assert o.data_hidden() == pytest.approx(1 - 250 / 400)
    assert o.time_change() == pytest.approx(1000 / 1500 - 1)
    assert o.translation_share("additive") == pytest.approx(500 / 1500)
    assert o.translation_share("interval") == pytest.approx(100 / 1000)


def test_no_translation_has_no_share() -> None:
    o = core_models.Overlap()
    o.add(result(10, 10, 0, 0, 0, 0))
    assert o.translation_hidden() is None and o.data_hidden() is None


def test_an_additive_run_in_the_comparison_is_refused() -> None:
    with pytest.raises(ValueError, match="no `core` block"):
        core_models.Overlap().add({"cycles": 1, "cycles_by_cause": {}})


@pytest.mark.parametrize("name", ["kloster07", "bhatia09"])
def test_the_core_model_reaches_every_engine_run(name: str) -> None:
    # kloster07 measures through jobs; bhatia09 also runs its vCPU-scaling rows itself.
    results: list[Any] = []
    execute(paper(name), quick=True, core_model="interval", results=results)
    assert results
    assert {r["core"]["model"] for r in results} == {"interval"}
    plain: list[Any] = []
    execute(paper(name), quick=True, results=plain)
    assert len(plain) == len(results)
    assert all("core" not in r for r in plain)


@pytest.fixture(scope="module")
def comparisons(
    tmp_path_factory: pytest.TempPathFactory, quick: dict[str, Any]
) -> list[core_models.CoreComparison]:
    # An empty suite cache, as the file was generated with: no recorded program runs. The
    # papers as they are were run so by the session's `quick` reports.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VMMU_SUITE_CACHE", str(tmp_path_factory.mktemp("empty-suite-cache")))
        return [
            core_models.compare(p, quick=True, additive=quick[name]) for name, p in PAPERS.items()
        ]


def test_a_comparison_refuses_another_papers_report_as_its_own(quick: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="is kloster07's"):
        core_models.compare(paper("bhatia09"), quick=True, additive=quick["kloster07"])


def test_the_counts_are_the_same_under_both_models(
    comparisons: list[core_models.CoreComparison],
) -> None:
    # Only time changes: a row whose verdict changes must be a time (its value moved).
    for c in comparisons:
        for key, va, _da, vi, _di in c.changes():
            assert va != vi, (c.paper, key)


def test_docs_repro_interval_md_matches_a_fresh_quick_run(
    comparisons: list[core_models.CoreComparison],
) -> None:
    text = (REPO / "docs" / "repro-interval.md").read_text(encoding="utf-8")
    committed = core_models.parse_check_table(text)
    fresh = core_models.check_rows(comparisons)
    assert committed, "docs/repro-interval.md has no check table: regenerate it"
    stale = [(a, b) for a, b in zip(committed, fresh, strict=False) if a != b]
    assert len(committed) == len(fresh) and not stale, (
        "docs/repro-interval.md is stale: run `vmmu repro all --quick --core-comparison "
        f"docs/repro-interval.md`; first differences: {stale[:3]}"
    )
