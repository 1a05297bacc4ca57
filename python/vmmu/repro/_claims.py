"""The verdict engine: a claim, the criterion it is judged by, and the verdict vmmu's value earns.

A **claim** is one published finding: the paper's value (read from ``vmmu/reference/``), vmmu's
value, a unit, and a :class:`Criterion` fixed before the run from the paper's own precision:

- ``reproduced`` — vmmu's value lies in the band the paper's statement allows: a stated range,
  or the stated value give or take half a unit in the last digit the paper states it with;
- ``same direction`` — outside that band, but the finding's qualitative content holds (the
  effect has the paper's sign, or a suite's value lies in the range the paper gives across
  suites); each claim says what its direction is;
- ``differs`` — not even that. Every claim that is not reproduced carries the model's
  explanation (what vmmu leaves out, or where the proxy workload is weak).

Rows that are not findings are never counted: ``definition`` (holds by construction: a law the
tests pin, a calibrated input, a workload that cannot exit by design), ``context`` (a number
shown beside a finding to explain it) and ``not simulated`` (a table vmmu cannot produce, with
what would be needed).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from vmmu._format import number, places

if TYPE_CHECKING:
    import pandas as pd

REPRODUCED = "reproduced"
SAME = "same direction"
DIFFERS = "differs"
DEFINITION = "definition"
CONTEXT = "context"
NOT_SIMULATED = "not simulated"

#: Verdicts a reproduction's summary counts, best first.
COUNTED: tuple[str, ...] = (REPRODUCED, SAME, DIFFERS)
#: Every verdict a row can have.
VERDICTS: tuple[str, ...] = (*COUNTED, DEFINITION, CONTEXT, NOT_SIMULATED)

#: The columns of a reproduction's table (its index is the row key).
COLUMNS: tuple[str, ...] = (
    "claim",
    "paper",
    "vmmu",
    "unit",
    "criterion",
    "verdict",
    "explanation",
    "note",
)

INF = math.inf


def above(x: float) -> Band:
    """Strictly greater than ``x``."""
    return Band(x, INF, lo_open=True)


def below(x: float) -> Band:
    """Strictly less than ``x``."""
    return Band(-INF, x, hi_open=True)


@dataclass(frozen=True)
class Band:
    """An interval from ``lo`` to ``hi``, closed unless an end is marked open; either end may
    be infinite."""

    lo: float = -INF
    hi: float = INF
    lo_open: bool = False
    hi_open: bool = False

    def __contains__(self, v: object) -> bool:
        if not isinstance(v, (int, float)) or math.isnan(v):
            return False
        lo_ok = v > self.lo if self.lo_open else v >= self.lo
        hi_ok = v < self.hi if self.hi_open else v <= self.hi
        return lo_ok and hi_ok

    def text(self, digits: int) -> str:
        def f(x: float) -> str:
            return number(x, places(digits))

        lo = f"{'>' if self.lo_open else '≥'} {f(self.lo)}"
        hi = f"{'<' if self.hi_open else '≤'} {f(self.hi)}"
        if self.lo == -INF and self.hi == INF:
            return "any"
        if self.lo == -INF:
            return hi
        if self.hi == INF:
            return lo
        if not self.lo_open and not self.hi_open:
            return f"{f(self.lo)}–{f(self.hi)}"
        return f"{lo} and {hi}"


@dataclass(frozen=True)
class Criterion:
    """How a claim is judged: the band that reproduces it, the band of its direction, and
    where the band's tolerance comes from (shown beside the claim)."""

    reproduced: Band
    direction: Band | None = None
    why: str = ""
    digits: int = 2

    def judge(self, value: Any) -> str:
        if not isinstance(value, (int, float)) or math.isnan(value):
            return DIFFERS
        if value in self.reproduced:
            return REPRODUCED
        if self.direction is not None and value in self.direction:
            return SAME
        return DIFFERS

    def text(self) -> str:
        out = f"reproduced {self.reproduced.text(self.digits)}"
        if self.direction is not None:
            out += f"; direction {self.direction.text(self.digits)}"
        return out


def near(
    value: float, tol: float, direction: Band | None, why: str, digits: int | None = None
) -> Criterion:
    """The paper's ``value`` give or take ``tol`` (half a unit of the digit it is stated to)."""
    d = _digits(tol) if digits is None else digits
    return Criterion(Band(value - tol, value + tol), direction, why, d)


def within(
    lo: float, hi: float, tol: float, direction: Band | None, why: str, digits: int | None = None
) -> Criterion:
    """The paper's range ``lo``–``hi``, widened by ``tol`` on each side."""
    d = _digits(tol) if digits is None else digits
    return Criterion(Band(lo - tol, hi + tol), direction, why, d)


def holds(band: Band, why: str, digits: int = 2) -> Criterion:
    """A claim the paper states only as a direction: reproduced when in ``band``, else differs."""
    return Criterion(band, None, why, digits)


def _digits(tol: float) -> int:
    """Digits to print a band edge with: one more than the tolerance's."""
    if tol <= 0:
        return 2
    return max(0, min(4, 1 - math.floor(math.log10(tol))))


@dataclass
class Row:
    """One row of a reproduction: a claim and its verdict, or a row that is not a finding."""

    key: str
    claim: str
    paper: str
    vmmu: Any
    unit: str
    criterion: str
    verdict: str
    explanation: str = ""
    note: str = ""


@dataclass
class View:
    """A supplementary table of a reproduction (a paper table laid out beside vmmu's), shown
    after the claims; it carries no verdicts of its own."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""


def coverage(seed: str, items: Iterable[tuple[str, str, str]]) -> View:
    """The view listing every table and figure of a seed: ``(name, what it shows, where this
    reproduction has it or why it cannot, with what would be needed)``, so nothing a paper
    publishes is left out silently."""
    return View(
        "coverage",
        f"Every table and figure of seed {seed}",
        ["table or figure", "what it shows", "in this reproduction"],
        [list(i) for i in items],
    )


class Claims:
    """The rows of one reproduction, judged as they are added."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def _add(self, row: Row) -> Row:
        if any(r.key == row.key for r in self.rows):
            raise ValueError(f"duplicate row key `{row.key}`")
        self.rows.append(row)
        return row

    def judge(
        self,
        key: str,
        claim: str,
        paper: str,
        vmmu: Any,
        unit: str,
        criterion: Criterion,
        explain: str = "",
        note: str = "",
    ) -> Row:
        """A finding: its verdict is ``criterion``'s judgement of ``vmmu``. ``explain`` is the
        model's explanation, shown whenever the claim is not reproduced (and required then)."""
        verdict = criterion.judge(vmmu)
        if verdict != REPRODUCED and not explain:
            raise ValueError(f"claim `{key}` is {verdict} and has no explanation")
        why = f" ({criterion.why})" if criterion.why else ""
        return self._add(
            Row(
                key,
                claim,
                paper,
                vmmu,
                unit,
                criterion.text() + why,
                verdict,
                explain if verdict != REPRODUCED else "",
                note,
            )
        )

    def definition(
        self, key: str, claim: str, paper: str, vmmu: Any, unit: str, why: str, note: str = ""
    ) -> Row:
        """A row that holds by construction (not counted): ``why`` says what makes it so."""
        return self._add(Row(key, claim, paper, vmmu, unit, "—", DEFINITION, why, note))

    def context(
        self, key: str, claim: str, paper: str, vmmu: Any, unit: str, why: str, note: str = ""
    ) -> Row:
        """A number shown beside the findings to explain them (not counted)."""
        return self._add(Row(key, claim, paper, vmmu, unit, "—", CONTEXT, why, note))

    def not_simulated(self, key: str, claim: str, paper: str, why: str) -> Row:
        """A published result vmmu cannot produce: ``why`` says why, and what it would need."""
        return self._add(Row(key, claim, paper, None, "", "—", NOT_SIMULATED, why, ""))


@dataclass
class Report:
    """A reproduction's result: its rows, supplementary views, setup and wall time."""

    name: str
    seed: str
    title: str
    setup: dict[str, Any]
    rows: list[Row]
    views: list[View] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def row(self, key: str) -> Row:
        for r in self.rows:
            if r.key == key:
                return r
        raise KeyError(f"{self.name} has no row `{key}`")

    def verdict(self, key: str) -> str:
        return self.row(key).verdict

    def value(self, key: str) -> Any:
        return self.row(key).vmmu

    def row_keys(self) -> list[str]:
        return [r.key for r in self.rows]

    def counts(self) -> dict[str, int]:
        """How many rows have each verdict (every verdict present, zeros included)."""
        out = dict.fromkeys(VERDICTS, 0)
        for r in self.rows:
            out[r.verdict] += 1
        return out

    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame indexed by row key (:data:`COLUMNS`), the setup in
        ``attrs``."""
        import pandas as pd

        df = pd.DataFrame(
            [{c: getattr(r, c) for c in COLUMNS} for r in self.rows],
            index=pd.Index([r.key for r in self.rows]),
            columns=list(COLUMNS),
        )
        df.attrs.update(self.attrs())
        return df

    def attrs(self) -> dict[str, Any]:
        return {
            "paper": self.name,
            "seed": self.seed,
            "title": self.title,
            "seconds": self.seconds,
            "findings": summary_text(self.counts()),
            **self.setup,
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"setup", "rows", "views", "notes", "counts"}``; each row has
        ``row`` (its key) and :data:`COLUMNS`."""
        rows = []
        for r in self.rows:
            d = asdict(r)
            d["row"] = d.pop("key")
            v = d["vmmu"]
            if isinstance(v, float) and not math.isfinite(v):
                d["vmmu"] = None
            rows.append({"row": d["row"], **{c: d[c] for c in COLUMNS}})
        return {
            "setup": self.attrs(),
            "rows": rows,
            "views": [asdict(v) for v in self.views],
            "notes": list(self.notes),
            "counts": self.counts(),
        }


def counted(rows: Iterable[Row]) -> list[Row]:
    """The rows whose verdict a summary counts."""
    return [r for r in rows if r.verdict in COUNTED]


def summary_text(counts: Mapping[str, int]) -> str:
    """``"3 reproduced, 5 same direction, 2 differs (10 findings); 4 definitions, ..."``."""
    n = sum(counts[v] for v in COUNTED)
    found = ", ".join(f"{counts[v]} {v}" for v in COUNTED)
    rest = [
        f"{counts[DEFINITION]} definition{'s' if counts[DEFINITION] != 1 else ''}",
        f"{counts[CONTEXT]} context",
        f"{counts[NOT_SIMULATED]} not simulated",
    ]
    return f"{found} ({n} findings); not counted: {', '.join(rest)}"
