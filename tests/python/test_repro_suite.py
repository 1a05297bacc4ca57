"""The reproductions on the recorded suite's small scale (``--quick``): the entries recorded
(gcc, a compiler; swim, a floating-point stencil) give their rows beside the proxies', judged
by the same criteria, with values an independent run of the same trace reproduces exactly; the
entries not recorded give rows naming the command that records them; Table 1's opportunity of
the recorded programs is judged under both core models.

The recordings are the session's (``suite_cache``, conftest.py): test_suite.py records them,
and this module records whichever is still missing. Each paper sees one of them (a cache
holding that entry's traces only): bhargava08 and bae11 swim, bhatia09 the compiler it needs.
swim is the smallest recording (39 M instructions at the small scale, against redis's 169 M
and gcc's 316 M), and bhargava08 replays its program under nine systems, so the replays take
about a minute of CPU; the machinery is the same for every suite of bhargava08.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import vmmu
from conftest import suite_entry
from vmmu import repro
from vmmu.repro import _suite, bae11, bhargava08, bhatia09
from vmmu.repro._claims import COUNTED, Report
from vmmu.suite import driver

SMALL = ("gcc", "swim")


@pytest.fixture(scope="module")
def traces(recorder: None, suite_cache: Path) -> dict[str, dict]:
    """The small recordings' ``meta.json`` by entry."""
    return {n: driver.record(suite_entry(n), "small", suite_cache, install=False) for n in SMALL}


#: The entry each paper's report sees.
SEES = {"bhargava08": "swim", "bae11": "swim", "bhatia09": "gcc"}


@pytest.fixture(scope="module")
def reports(
    traces: dict[str, dict], suite_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Report]:
    out = {}
    for paper, name in SEES.items():
        view = tmp_path_factory.mktemp(f"suite-{name}")
        (view / "traces").mkdir()
        (view / "traces" / name).symlink_to(suite_cache / "traces" / name)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("VMMU_SUITE_CACHE", str(view))
            out[paper] = repro.reproduce(paper, quick=True)
    return out


def _missing(rep: Report, key: str, name: str) -> None:
    row = rep.row(f"{key}/recorded/{name}")
    assert row.verdict == "not simulated"
    assert row.explanation == f"not recorded: vmmu suite record {name} --scale small"


def test_bhargava08_judges_each_recorded_suite_beside_its_proxy(
    reports: dict[str, Report], traces: dict[str, dict]
) -> None:
    rep = reports["bhargava08"]
    for suite, name in (("FpCpu", "swim"),):
        proxy = rep.row(f"t1/tlb_misses/{suite}")
        row = rep.row(f"t1/tlb_misses/{suite}/recorded")
        assert proxy.verdict == "definition" and row.verdict in COUNTED
        assert row.paper == proxy.paper
        # The value is the trace's own: native, no page-walk caching, after the reproduction's
        # warm-up (its references up to TRACE_WARMUP, at most a tenth of the trace).
        meta = traces[name]
        r = vmmu.run(
            machine=bhargava08.MACHINE,
            mode="native",
            pwc="none",
            trace=meta["trace"],
            warmup=min(bhargava08.setup.TRACE_WARMUP, meta["refs"] // 10),
        )
        assert row.vmmu == 1e5 * r.walks / r.instructions, suite
        if row.verdict != "reproduced":
            assert f"{name} (small): {meta['misses_per_100k']:.1f} TLB misses" in row.explanation
        for k in ("t1/walk_latency", "t1/perfect_native", "t1/perfect_2d", "t4/l2miss_ratio"):
            assert rep.row(f"{k}/{suite}/recorded").verdict in COUNTED, (suite, k)
        assert rep.row(f"f6/pwc_speedup/{suite}/recorded").verdict in COUNTED
    for suite, names in bhargava08.setup.RECORDED.items():
        for name in names:
            if name != "swim":
                _missing(rep, suite, name)
                if "swim" not in names:
                    assert f"t1/tlb_misses/{suite}/recorded" not in rep.row_keys()


def test_bhargava08_recorded_opportunity_under_the_interval_model(
    reports: dict[str, Report],
) -> None:
    rep = reports["bhargava08"]
    view = next(v for v in rep.views if v.key == "core_models")
    workloads = {r[0] for r in view.rows}
    assert workloads == {*bhargava08.SUITES, "FpCpu/recorded"}
    for suite in ("FpCpu",):
        for mk in ("perfect_native", "perfect_2d"):
            additive = rep.row(f"t1/{mk}/{suite}/recorded")
            interval = rep.row(f"t1/{mk}/{suite}/recorded/interval")
            assert interval.verdict in COUNTED
            assert interval.vmmu != additive.vmmu, (suite, mk)


def test_bae11_runs_swim_recorded_beside_its_proxy(
    reports: dict[str, Report], traces: dict[str, dict]
) -> None:
    rep = reports["bae11"]
    row = rep.row("swim/recorded")
    assert row.verdict in COUNTED
    assert row.criterion == rep.row("swim").criterion
    systems = bae11._systems({"guest.format": "long4"})
    cycles = {
        mode: vmmu.run(trace=traces["swim"]["trace"], **s.options()).cycles
        for mode, s in systems.items()
        if mode != "native"
    }
    assert row.vmmu == cycles["shadow"] / cycles["nested"]
    assert rep.row("max_gap/recorded").verdict in COUNTED
    _missing(rep, "gcc", "gcc")
    _missing(rep, "compute", "dgemm")


def test_bhatia09_runs_the_compiler_recorded_and_says_what_has_no_counterpart(
    reports: dict[str, Report],
) -> None:
    rep = reports["bhatia09"]
    row = rep.row("compile/recorded")
    assert row.verdict in COUNTED and row.criterion == rep.row("compile").criterion
    assert row.vmmu > 0
    _missing(rep, "swim", "jvm-txn")
    _missing(rep, "swim_2m", "jvm-txn-thp")
    assert rep.verdict("micro/recorded") == "not simulated"
    assert "gcc (small): " in rep.setup["recorded"]


def test_a_recorded_row_depends_on_the_cache_and_is_left_out_of_the_quick_table(
    reports: dict[str, Report],
) -> None:
    from vmmu.repro import _render

    keys = {k for rep in reports.values() for _, k, _, _ in _render.quick_rows([rep])}
    assert keys and not any(_suite.reads_cache(k) for k in keys)
    assert "t1/tlb_misses/IntCpu" in keys
    assert _suite.reads_cache("t1/perfect_2d/IntCpu/recorded/interval")
    assert not _suite.reads_cache("t1/perfect_2d/IntCpu/interval")
    assert bhatia09.RECORDED["swim_2m"] == ("jvm-txn-thp", {"guest.thp": "madvise"})
