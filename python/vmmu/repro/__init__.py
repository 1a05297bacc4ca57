"""Reproductions of the papers' tables, paper value beside vmmu's value (docs/repro.md).

One module per paper holds its experiments and its claims: :mod:`~vmmu.repro.kloster07`
(seed 000), :mod:`~vmmu.repro.bae11` (001), :mod:`~vmmu.repro.bhargava08` (002),
:mod:`~vmmu.repro.levasseur` (003), :mod:`~vmmu.repro.bhatia09` (004). They share one
verdict engine (:mod:`._claims`), one runner with one progress bar (:mod:`._run`), one
renderer (:mod:`._render`) and the published numbers shipped in ``vmmu/reference/``
(:mod:`._reference`).

>>> from vmmu import repro
>>> report = repro.reproduce("kloster07", quick=True)
>>> report.verdict("fork_test"), report.value("fork_test")
>>> report.frame()            # a DataFrame: claim, paper, vmmu, unit, criterion, verdict, ...
>>> repro.sensitivity("kloster07", ["machine.kernel.fork"], quick=True)
"""

from __future__ import annotations

from collections.abc import Sequence

from vmmu._core import did_you_mean
from vmmu.repro import bae11, bhargava08, bhatia09, kloster07, levasseur
from vmmu.repro._claims import COLUMNS, COUNTED, VERDICTS, Report, Row, View
from vmmu.repro._paper import Paper, Param, Study, execute, parse_requests, study
from vmmu.repro._run import WORKERS, Bar

#: Every reproduction, in the order `vmmu repro all` runs them.
PAPERS: dict[str, Paper] = {
    p.name: p
    for p in (
        kloster07.PAPER,
        bhatia09.PAPER,
        bae11.PAPER,
        levasseur.PAPER,
        bhargava08.PAPER,
    )
}


def paper(name: str) -> Paper:
    """The reproduction called ``name``; an unknown name is an error listing the known ones."""
    if name not in PAPERS:
        hint = did_you_mean(name, [*PAPERS, "all"])
        raise ValueError(f"unknown reproduction `{name}`; {hint}known: {', '.join(PAPERS)}, all")
    return PAPERS[name]


def reproduce(
    name: str, quick: bool = False, progress: bool = False, workers: int = WORKERS
) -> Report:
    """Runs reproduction ``name`` (a key of :data:`PAPERS`) and returns its :class:`Report`."""
    p = paper(name)
    with Bar(progress) as bar:
        return execute(p, quick=quick, bar=bar, workers=workers)


def sensitivity(
    name: str, parameters: Sequence[str] = (), quick: bool = False, progress: bool = False
) -> Study:
    """Reruns ``name`` with each estimated parameter at the ends of its plausible range
    (``parameters``: names, ``NAME=LO:HI``, or empty for all) and says which verdicts change."""
    p = paper(name)
    plan = parse_requests(p, parameters)
    with Bar(progress) as bar:
        return study(p, plan, quick=quick, bar=bar)


from vmmu.repro.cli import repro  # noqa: E402  (the command needs the registry above)

__all__ = [
    "COLUMNS",
    "COUNTED",
    "PAPERS",
    "VERDICTS",
    "Paper",
    "Param",
    "Report",
    "Row",
    "Study",
    "View",
    "paper",
    "repro",
    "reproduce",
    "sensitivity",
]
