"""Design-space sweeps: run every point of a spec and store each result in a DuckDB file.

>>> from vmmu.sweep import run_sweep
>>> summary = run_sweep("examples/pwc-sizing.toml", "r.duckdb")
>>> summary.ok, summary.failed

:func:`run_sweep` checks the spec (:mod:`vmmu.sweep.spec`) and the database
(:mod:`vmmu.sweep.store`) before anything runs, skips the points the database already holds,
runs the rest on a backend (:mod:`vmmu.sweep.backends`) and commits each point as it
completes. docs/sweeps.md describes the spec, the table and the backends.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vmmu.sweep.backends import BackendError, backend, default_workers, run_point
from vmmu.sweep.spec import Point, Spec, SpecError, load_spec, parse_spec
from vmmu.sweep.store import SCHEMA, ResultsDB, ResultsDBError, is_interrupt, row_of

__all__ = [
    "SCHEMA",
    "BackendError",
    "Point",
    "ResultsDB",
    "ResultsDBError",
    "Spec",
    "SpecError",
    "Summary",
    "default_workers",
    "load_spec",
    "parse_spec",
    "plan",
    "run_point",
    "run_sweep",
]

#: Called after each point is committed: ``(point, outcome, points done, points to run)``.
OnPoint = Callable[[Point, Mapping[str, Any], int, int], None]


@dataclass
class Summary:
    """What a sweep did."""

    db: Path
    spec: Spec
    backend: str
    #: Points of the spec (duplicates left out).
    total: int = 0
    #: Points the database already held and that were not run again.
    reused: int = 0
    #: Points run by this sweep.
    ran: int = 0
    #: ``(point, error)`` of every failed point of the spec, reused or run now.
    failed: list[tuple[Point, str]] = field(default_factory=list)
    seconds: float = 0.0
    parquet: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> int:
        return self.total - len(self.failed)


def _spec(spec: Spec | Mapping[str, Any] | str | os.PathLike[str]) -> Spec:
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, Mapping):
        return parse_spec(spec)
    return load_spec(spec)


def plan(
    spec: Spec, db: ResultsDB | None, retry_failed: bool = False
) -> tuple[list[Point], list[Point]]:
    """``(to run, reused)``: the points ``db`` lacks (and its failed ones with
    ``retry_failed``), and those it holds."""
    statuses = db.statuses() if db is not None else {}
    todo, reused = [], []
    for p in spec.points:
        status = statuses.get(p.key)
        if status is None or (retry_failed and status == "failed"):
            todo.append(p)
        else:
            reused.append(p)
    return todo, reused


def run_sweep(
    spec: Spec | Mapping[str, Any] | str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    workers: int | None = None,
    backend_name: str = "local",
    address: str | None = None,
    retry_failed: bool = False,
    parquet: str | os.PathLike[str] | None = None,
    on_start: Callable[[Summary, int], None] | None = None,
    on_point: OnPoint | None = None,
) -> Summary:
    """Runs the points of ``spec`` that ``output`` does not hold yet and commits each one.

    ``spec`` is a :class:`Spec`, its tables as a mapping, or a TOML file. Raises
    :class:`SpecError`, :class:`ResultsDBError` or :class:`BackendError` before anything
    runs; a point that fails is recorded (``status = 'failed'``) and the sweep goes on.
    ``on_start(summary, to_run)`` is called once the plan is known, ``on_point`` after each
    committed point.
    """
    t0 = time.monotonic()
    spec = _spec(spec)
    runner = backend(backend_name, workers, address)
    try:
        summary = _sweep(spec, output, runner, retry_failed, parquet, on_start, on_point)
    except Exception as e:
        if is_interrupt(e):
            raise KeyboardInterrupt from None
        raise
    summary.seconds = time.monotonic() - t0
    return summary


def _sweep(
    spec: Spec,
    output: str | os.PathLike[str],
    runner: Any,
    retry_failed: bool,
    parquet: str | os.PathLike[str] | None,
    on_start: Callable[[Summary, int], None] | None,
    on_point: OnPoint | None,
) -> Summary:
    with ResultsDB(output, write=True) as db:
        todo, reused = plan(spec, db, retry_failed)
        summary = Summary(
            db=db.path,
            spec=spec,
            backend=runner.describe(),
            total=len(spec.points),
            reused=len(reused),
        )
        if todo:
            runner.start()
        try:
            db.begin_sweep(spec)
            for p in reused:
                db.restamp(p.key, p.options)
            if on_start is not None:
                on_start(summary, len(todo))
            _run(db, runner, todo, summary, on_point)
        finally:
            if todo:
                runner.stop()
        summary.failed = _failures(db, spec)
        if parquet is not None:
            summary.parquet = db.export_parquet(parquet)
    return summary


def _run(
    db: ResultsDB, runner: Any, todo: list[Point], summary: Summary, on_point: OnPoint | None
) -> None:
    """Runs ``todo`` on ``runner``, committing each outcome as it arrives."""
    by_key = {p.key: p for p in todo}

    def record(outcome: Mapping[str, Any]) -> None:
        if outcome["status"] == "interrupted":
            return
        point = by_key[outcome["key"]]
        db.record(row_of(point.key, point.options, outcome))
        summary.ran += 1
        if on_point is not None:
            on_point(point, outcome, summary.ran, len(todo))

    if todo:
        runner.run([{"key": p.key, "kwargs": p.run_kwargs} for p in todo], record)


def _failures(db: ResultsDB, spec: Spec) -> list[tuple[Point, str]]:
    rows = dict(
        db.con.execute("SELECT point_key, error FROM results WHERE status = 'failed'").fetchall()
    )
    return [(p, rows[p.key] or "") for p in spec.points if p.key in rows]
