"""The registry of reproductions: :data:`PAPERS` in the order `vmmu repro all` runs them,
:func:`paper` by name, and the two calls that run one (:func:`reproduce`, :func:`sensitivity`)."""

from __future__ import annotations

from collections.abc import Sequence

from vmmu._core import did_you_mean
from vmmu.repro import (
    agile16,
    bae11,
    bhargava08,
    bhatia09,
    kloster07,
    levasseur,
    pvm23,
    turtles10,
)
from vmmu.repro._claims import Report
from vmmu.repro._paper import Paper, Study, execute, parse_requests, study
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
        pvm23.PAPER,
        turtles10.PAPER,
        agile16.PAPER,
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
