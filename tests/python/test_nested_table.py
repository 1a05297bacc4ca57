"""docs/nested-virt.md's generator: the table of the L1 kinds and the fastest kind per
workload, with and without the 3D walk no part implements."""

from __future__ import annotations

from pathlib import Path

from vmmu import nested_table

PAGE = Path(__file__).resolve().parents[2] / "docs" / "nested-virt.md"


def _row(kind: str, cycles: int) -> dict:
    return {
        "workload": "w",
        "kind": kind,
        "cycles": cycles,
        "vs_single": cycles / 100 - 1.0,
        "switches_per_k": 0.0,
        "refs_per_walk": 24.0,
        "checked": 5,
    }


def test_the_fastest_kind_leaves_out_single_level_and_names_the_runner_up() -> None:
    rows = [_row("single", 100), _row("ept", 200), _row("shadow", 400), _row("pvm", 250)]
    rows.append(_row("3d", 150))
    text = nested_table.markdown(rows)
    assert "| w | pvm | 250 | +150.0% |" in text
    assert "- w: `ept`, 20.0% fewer cycles than `pvm`; with `3d`: `3d`, 25.0% fewer" in text


def test_every_kind_of_the_engine_is_compared() -> None:
    from vmmu.options import L1_KINDS

    assert set(nested_table.KINDS) == set(L1_KINDS)


def test_the_committed_page_is_the_generators_output_today() -> None:
    # A full regeneration, fifteen checked runs (about 25 s of wall time on two shared cores,
    # 6 s of CPU): the page cannot go stale. Regenerate it with
    # `python -m vmmu.nested_table docs/nested-virt.md` when this fails.
    fresh = nested_table.markdown(nested_table.measure())
    assert fresh == PAGE.read_text(encoding="utf-8")
