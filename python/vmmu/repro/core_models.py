"""The reproductions under both core models: which verdicts the interval model changes, and
why, from the runs themselves (docs/repro-interval.md, written by ``vmmu repro all --quick
--core-comparison docs/repro-interval.md``).

Each paper runs twice: as it is, every engine run timed by its machine's own core model (the
additive model, no overlap — but for the rows a paper itself judges under the interval model,
seed 002's perfect-TLB opportunity), and with every run timed by the interval model (an
out-of-order window, docs/model.md "Timing"). The counts are the same under both; only time
changes. An interval run's result carries the additive model's figures for the same counts
(``core.cycles_by_cause_additive``), so the interval runs alone say how much of the paper's
translation and data latency the window hid: the *overlap share* ``1 − exposed / paid``,
summed over every engine run of the paper. A verdict that changes is explained by those
shares and by the row's value under each model; nothing is tuned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vmmu._format import CLAIM, number
from vmmu.repro import _suite
from vmmu.repro._claims import COUNTED, Report
from vmmu.repro._paper import Paper, execute
from vmmu.repro._render import md_table, parse_table
from vmmu.repro._run import Bar

#: The two core models compared, the default first.
MODELS = ("additive", "interval")


@dataclass
class Overlap:
    """Cycles summed over every engine run of a paper under the interval model: translation
    and data paid in full (the additive model's) and exposed (the interval model's), and the
    runs' whole time under each."""

    runs: int = 0
    translation_paid: int = 0
    translation_exposed: int = 0
    data_paid: int = 0
    data_exposed: int = 0
    cycles_additive: int = 0
    cycles_interval: int = 0

    def add(self, result: Mapping[str, Any]) -> None:
        """Adds one interval run's result (its ``core`` block; a result without one, a run
        that kept the additive model, is refused)."""
        core = result.get("core")
        if not core:
            raise ValueError("a run of the interval comparison has no `core` block")
        paid, exposed = core["cycles_by_cause_additive"], result["cycles_by_cause"]
        self.runs += 1
        self.translation_paid += int(paid.get("translation", 0))
        self.translation_exposed += int(exposed.get("translation", 0))
        self.data_paid += int(paid.get("data", 0))
        self.data_exposed += int(exposed.get("data", 0))
        self.cycles_additive += int(core["cycles_additive"])
        self.cycles_interval += int(result["cycles"])

    @staticmethod
    def _hidden(exposed: int, paid: int) -> float | None:
        return 1.0 - exposed / paid if paid else None

    def translation_hidden(self) -> float | None:
        """The share of the translation cycles the window overlapped (None: no translation)."""
        return self._hidden(self.translation_exposed, self.translation_paid)

    def data_hidden(self) -> float | None:
        """The share of the data cycles beyond L1 the window overlapped."""
        return self._hidden(self.data_exposed, self.data_paid)

    def time_change(self) -> float:
        """The runs' whole time under the interval model relative to the additive model's."""
        return self.cycles_interval / self.cycles_additive - 1.0 if self.cycles_additive else 0.0

    def translation_share(self, model: str) -> float:
        """Translation's share of the runs' time under ``model``."""
        if model == "additive":
            return self.translation_paid / self.cycles_additive if self.cycles_additive else 0.0
        return self.translation_exposed / self.cycles_interval if self.cycles_interval else 0.0


@dataclass
class CoreComparison:
    """One paper under both core models."""

    paper: str
    seed: str
    additive: Report
    interval: Report
    overlap: Overlap = field(default_factory=Overlap)

    def rows(self) -> list[tuple[str, Any, str, Any, str]]:
        """Every row both reports hold, but those of recorded programs (their values depend on
        what the suite's cache holds): key, additive value and verdict, interval value and
        verdict."""
        other = {r.key: r for r in self.interval.rows}
        out = []
        for r in self.additive.rows:
            n = other.get(r.key)
            if n is None or _suite.reads_cache(r.key):
                continue
            out.append((r.key, r.vmmu, r.verdict, n.vmmu, n.verdict))
        return out

    def changes(self) -> list[tuple[str, Any, str, Any, str]]:
        """The rows whose verdict differs between the models, of those judged under either."""
        return [
            row
            for row in self.rows()
            if row[2] != row[4] and (row[2] in COUNTED or row[4] in COUNTED)
        ]

    def judged(self) -> int:
        """Rows judged (a counted verdict) under the additive model."""
        return sum(1 for row in self.rows() if row[2] in COUNTED)


def compare(
    paper: Paper,
    quick: bool = False,
    bar: Bar | None = None,
    workers: int = 2,
    additive: Report | None = None,
) -> CoreComparison:
    """Runs ``paper`` as it is (each machine's own core model: additive, but for the rows a
    paper itself judges under the interval model) and with every run on the interval model.
    ``additive``, when given, is the paper's report as it is at the same scale, run already:
    the comparison then runs the interval model only."""
    bar = bar or Bar(False)
    if additive is None:
        additive = execute(paper, quick=quick, bar=bar, workers=workers)
    elif additive.name != paper.name:
        raise ValueError(f"the report given as {paper.name}'s as it is is {additive.name}'s")
    results: list[Any] = []
    interval = execute(
        paper, quick=quick, bar=bar, workers=workers, core_model="interval", results=results
    )
    cmp = CoreComparison(paper.name, paper.seed, additive, interval)
    for r in results:
        cmp.overlap.add(r)
    return cmp


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


CHECK_HEADING = "## Quick-scale check"


def markdown(comparisons: Sequence[CoreComparison], quick: bool, seconds: float) -> str:
    """docs/repro-interval.md: the overlap per paper, the verdicts that change, and every
    row under both models (the table a test compares with a fresh run)."""
    scale = "`--quick`" if quick else "full"
    lines = [
        "# The reproductions under the interval core model",
        "",
        "Generated by `vmmu repro all --quick --core-comparison docs/repro-interval.md` "
        "(do not edit by hand); `tests/python/test_repro_core_models.py` reruns it and fails "
        "when a row differs. Every reproduction runs twice at "
        f"{scale} scale ({seconds:.0f} s of wall time for both): each engine run timed by its "
        "machine's own core model (the additive model, no overlap — but for the rows a paper "
        "judges under the interval model itself) and by the interval model (an out-of-order "
        'window: docs/model.md, "Timing"); `vmmu repro NAME --core-model '
        "interval` runs one paper under it. The counts are the same under both models; only "
        "time changes, so only rows that are times or shares of time can change.",
        "",
        "The *overlap share* of translation (or data) is `1 − exposed / paid` over every "
        "engine run of the paper: *paid* the cycles the additive model charges, *exposed* "
        "those the interval model's window could not hide (the interval run's "
        "`core.cycles_by_cause_additive` against its `cycles_by_cause`). A verdict that "
        "changes does so because the overlap shrinks the quantity the paper compares — "
        "the share is the explanation, computed from the runs, and nothing is tuned. "
        "Dependences: the synthetic workloads declare them (`pointer-chase` dependent, the "
        "rest independent); a trace that does not carry them is timed as independent "
        "references, the most overlap the window allows.",
        "",
        "## Overlap per paper",
        "",
    ]
    lines += md_table(
        [
            "reproduction",
            "seed",
            "engine runs",
            "time, interval vs additive",
            "translation share of time, additive → interval",
            "translation hidden",
            "data hidden",
            "verdicts kept",
        ],
        (
            [
                c.paper,
                c.seed,
                c.overlap.runs,
                f"{c.overlap.time_change():+.1%}",
                f"{c.overlap.translation_share('additive'):.1%} → "
                f"{c.overlap.translation_share('interval'):.1%}",
                pct(c.overlap.translation_hidden()),
                pct(c.overlap.data_hidden()),
                f"{c.judged() - len(c.changes())} of {c.judged()}",
            ]
            for c in comparisons
        ),
    )
    lines += ["", "## Verdicts that change", ""]
    changed = [(c, row) for c in comparisons for row in c.changes()]
    if changed:
        lines += md_table(
            ["reproduction", "row", "additive", "interval", "why (the paper's overlap)"],
            (
                [
                    c.paper,
                    f"`{key}`",
                    f"{number(va, CLAIM)} ({da})",
                    f"{number(vi, CLAIM)} ({di})",
                    f"translation {pct(c.overlap.translation_hidden())} hidden, data "
                    f"{pct(c.overlap.data_hidden())} hidden; time {c.overlap.time_change():+.1%}",
                ]
                for c, (key, va, da, vi, di) in changed
            ),
        )
    else:
        lines.append("None.")
    lines += [
        "",
        CHECK_HEADING,
        "",
        "Every row of every reproduction under both models (the rows of the recorded suite's "
        "programs are left out: they depend on what the suite's cache holds).",
        "",
    ]
    lines += md_table(
        ["reproduction", "row", "additive", "verdict", "interval", "verdict"],
        check_rows(comparisons),
    )
    lines.append("")
    return "\n".join(lines)


def check_rows(comparisons: Iterable[CoreComparison]) -> list[tuple[str, ...]]:
    """The rows of the quick-scale check, as text."""
    return [
        (c.paper, key, number(va, CLAIM), da, number(vi, CLAIM), di)
        for c in comparisons
        for key, va, da, vi, di in c.rows()
    ]


def parse_check_table(text: str) -> list[tuple[str, ...]]:
    """The rows of the quick-scale check of a generated docs/repro-interval.md."""
    return parse_table(text, CHECK_HEADING, 6)
