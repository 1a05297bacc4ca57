"""Exact walk-reference laws, end to end through the CLI (DESIGN.md laws 1 and 2).

`stride:stride=4096` over a 64 KiB footprint touches 16 pages, each first at one reference;
with `prefault=1` the region is mapped before the first reference, so nothing faults, and the
16 pages fit every preset's L1 D-TLB: exactly 16 walks. With `--pwc none`, every walk makes
one reference per level natively and nm+n+m in the 2D walk.
"""

from __future__ import annotations

import pytest

WALKS_16 = "stride:stride=4096,footprint=64K,refs=64,prefault=1"


@pytest.mark.parametrize(
    ("mode", "extra", "per_walk"),
    [
        ("native", [], 4),
        ("nested", [], 24),
        ("native", ["--levels", "5"], 5),
        ("nested", ["--levels", "5"], 35),
        ("nested", ["--nested-page-size", "2M"], 19),
        ("nested", ["--nested-page-size", "1G"], 14),
    ],
)
def test_walk_refs_per_walk_without_page_walk_caches(run_json, mode, extra, per_walk):
    res = run_json("--mode", mode, "--pwc", "none", "--workload", WALKS_16, *extra)
    assert res["walks"] == 16
    assert res["walk_faults"] == 0
    assert res["walk_refs"] == per_walk * res["walks"]
    assert sum(res["walk_refs_by_step"].values()) == res["walk_refs"]
    assert sum(res["walk_refs_served_by"].values()) == res["walk_refs"]


def test_nested_walk_touches_every_cell_of_the_grid_once(run_json):
    res = run_json("--mode", "nested", "--pwc", "none", "--workload", WALKS_16)
    steps = {k: v for k, v in res["walk_refs_by_step"].items() if v}
    rows = ["gL4", "gL3", "gL2", "gL1", "gPA"]
    cols = ["nL4", "nL3", "nL2", "nL1"]
    expected = {f"{c},{r}" for r in rows for c in cols} | {f"G,{r}" for r in rows[:-1]}
    assert set(steps) == expected
    assert set(steps.values()) == {16}


def test_native_walk_steps(run_json):
    res = run_json("--mode", "native", "--pwc", "none", "--workload", WALKS_16)
    steps = {k: v for k, v in res["walk_refs_by_step"].items() if v}
    assert steps == {"L4": 16, "L3": 16, "L2": 16, "L1": 16}
