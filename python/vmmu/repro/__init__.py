"""Reproductions of the papers' tables, paper value beside vmmu's value (docs/repro.md).

Each paper has one home, a module or, when large, a package, holding its experiments and its
claims: :mod:`~vmmu.repro.kloster07` (seed 000), :mod:`~vmmu.repro.bae11` (001: the static
runs; ``palacios`` the VM every run configures, ``adaptive`` the adaptive-policy runs and their
table, ``adaptive_claims`` the DAV²M rows judged on them), :mod:`~vmmu.repro.bhargava08` (002:
``setup``, ``runs``, ``metrics``, ``claims``, ``views``), :mod:`~vmmu.repro.levasseur` (003),
:mod:`~vmmu.repro.bhatia09` (004; ``vcpus`` the vCPU-scaling runs). They share one verdict
engine (:mod:`._claims`), one runner with one progress bar (:mod:`._run`), one renderer
(:mod:`._render`) and the published numbers shipped in ``vmmu/reference/``
(:mod:`vmmu.published`).

>>> from vmmu import repro
>>> report = repro.reproduce("kloster07", quick=True)
>>> report.verdict("fork_test"), report.value("fork_test")
>>> report.frame()            # a DataFrame: claim, paper, vmmu, unit, criterion, verdict, ...
>>> repro.sensitivity("kloster07", ["machine.kernel.fork"], quick=True)
"""

from __future__ import annotations

from vmmu.repro._claims import COLUMNS, COUNTED, VERDICTS, Report, Row, View
from vmmu.repro._paper import Paper, Param, Study
from vmmu.repro.cli import repro
from vmmu.repro.papers import PAPERS, paper, reproduce, sensitivity

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
