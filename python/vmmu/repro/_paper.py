"""A reproduction (:class:`Paper`), its estimated parameters (:class:`Param`), and the
sensitivity study that reruns it over each parameter's plausible range.

An estimated parameter is any number a verdict depends on that neither the paper nor a
measurement pins: a guest-kernel cost (``machine.kernel.fork``), a hypervisor cost
(``hypervisor.costs.exit_round_trip``), or a proxy workload's knob (``nps.instrs``). Each is
declared once per paper with its plausible range and where the range comes from. A study runs
the paper at the low and the high end of the range and reports, claim by claim, whether the
verdict survives. Nothing is ever tuned: the defaults stay what their sources say.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vmmu.repro._claims import COUNTED, Report
from vmmu.repro._run import Bar, Context


@dataclass(frozen=True)
class Param:
    """An estimated parameter: its dotted name, plausible range and the range's source."""

    name: str
    lo: Any
    hi: Any
    why: str


@dataclass(frozen=True)
class Paper:
    """A reproduction: its name, the seed paper, what it covers, its runner and parameters."""

    name: str
    seed: str
    title: str
    run: Callable[[Context], Report]
    parameters: tuple[Param, ...] = ()

    def param(self, name: str) -> Param:
        for p in self.parameters:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.parameters) or "none"
        raise ValueError(
            f"`{name}` is not an estimated parameter of {self.name}; its parameters: {known}"
        )


#: The configuration field ``--core-model`` sets in every run of a reproduction.
CORE_MODEL_FIELD = "machine.core.model"


def execute(
    paper: Paper,
    quick: bool = False,
    values: dict[str, Any] | None = None,
    bar: Bar | None = None,
    workers: int = 2,
    core_model: str | None = None,
    results: list[Any] | None = None,
) -> Report:
    """Runs ``paper`` once and stamps its wall time; ``core_model`` (``additive`` or
    ``interval``, docs/model.md "Timing") times every run, the machines' own when ``None``;
    ``results``, when given, receives every engine run's result."""
    t0 = time.monotonic()
    values = dict(values or {})
    if core_model is not None:
        values[CORE_MODEL_FIELD] = f'"{core_model}"'
    ctx = Context(
        quick=quick,
        values=values,
        workers=workers,
        bar=bar or Bar(False),
        label=paper.name,
        results=results,
    )
    report = paper.run(ctx)
    report.seconds = time.monotonic() - t0
    return report


@dataclass
class Trial:
    """The paper rerun with one parameter at one value, compared with the default run."""

    param: Param
    value: Any
    report: Report
    changes: list[tuple[str, str, Any, str, Any]] = field(default_factory=list)

    compared: int = 0

    @property
    def survived(self) -> int:
        """Findings rerun in this trial whose verdict did not change."""
        return self.compared - len(self.changes)


@dataclass
class Study:
    """A sensitivity study of one paper: the default run and every trial."""

    paper: Paper
    base: Report
    trials: list[Trial]

    def findings(self) -> int:
        return sum(1 for r in self.base.rows if r.verdict in COUNTED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "paper": self.paper.name,
            "findings": self.findings(),
            "trials": [
                {
                    "parameter": t.param.name,
                    "value": t.value,
                    "range_source": t.param.why,
                    "compared": t.compared,
                    "survived": t.survived,
                    "changes": [
                        {
                            "row": k,
                            "verdict": v0,
                            "vmmu": x0,
                            "new_verdict": v1,
                            "new_vmmu": x1,
                        }
                        for k, v0, x0, v1, x1 in t.changes
                    ],
                }
                for t in self.trials
            ],
        }


def parse_requests(paper: Paper, requests: Sequence[str]) -> list[tuple[Param, list[Any]]]:
    """``[]`` or ``["all"]`` → every parameter at its range's ends; ``"NAME"`` → that one;
    ``"NAME=LO:HI"`` → that one at ``LO`` and ``HI``. An unknown name is an error naming it
    and the paper's parameters."""
    out: list[tuple[Param, list[Any]]] = []
    if not requests or list(requests) == ["all"]:
        return [(p, [p.lo, p.hi]) for p in paper.parameters]
    for req in requests:
        name, eq, span = req.partition("=")
        p = paper.param(name.strip())
        if not eq:
            out.append((p, [p.lo, p.hi]))
            continue
        lo, colon, hi = span.partition(":")
        if not colon or not lo.strip() or not hi.strip():
            raise ValueError(f"expected NAME, NAME=LO:HI or all, got `{req}`")
        out.append((p, [_literal(lo.strip()), _literal(hi.strip())]))
    return out


def _literal(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def study(
    paper: Paper,
    plan: Iterable[tuple[Param, list[Any]]],
    quick: bool = False,
    bar: Bar | None = None,
    base: Report | None = None,
    core_model: str | None = None,
) -> Study:
    """Runs ``paper`` with its defaults (unless ``base`` is given) and once per planned value,
    every run under ``core_model`` (:func:`execute`)."""
    bar = bar or Bar(False)
    base = base or execute(paper, quick=quick, bar=bar, core_model=core_model)
    trials = []
    for param, values in plan:
        for value in values:
            report = execute(
                paper, quick=quick, values={param.name: value}, bar=bar, core_model=core_model
            )
            trial = Trial(param, value, report)
            # A trial may rerun only what the parameter touches (bhargava08 reruns the suite a
            # proxy knob belongs to): rows it does not produce are not compared.
            new = {r.key: r for r in report.rows}
            for r in base.rows:
                n = new.get(r.key)
                if r.verdict not in COUNTED or n is None:
                    continue
                trial.compared += 1
                if n.verdict != r.verdict:
                    trial.changes.append((r.key, r.verdict, r.vmmu, n.verdict, n.vmmu))
            trials.append(trial)
    return Study(paper, base, trials)
