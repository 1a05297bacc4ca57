"""The commands over stored results: ``vmmu sweep``, ``vmmu plot`` and ``vmmu report``
(docs/sweeps.md, docs/cli.md).

Their errors are ``ValueError`` subclasses (:class:`~vmmu.sweep.SpecError`,
:class:`~vmmu.sweep.ResultsDBError`, ...) that the ``vmmu`` group prints as ``error: …``
with exit status 2. DuckDB, matplotlib and jinja2 are imported only when a command runs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: Exit status of a sweep that completed with failed points (they are in the database).
EXIT_FAILED_POINTS = 1


def _err() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def _parse_filters(_ctx: Any, _param: Any, values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        k, eq, val = v.partition("=")
        if not eq or not k.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got `{v}`")
        out[k.strip()] = val.strip()
    return out


def _minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m}:{s:02d}"


# ---------------------------------------------------------------------------------------------
# vmmu sweep


class _Display:
    """A progress bar with ETA on a terminal; one line per point otherwise (logs, CI)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.task: Any = None
        self.failed = 0
        self.t0 = time.monotonic()

    def start(self, summary: Any, todo: int) -> None:
        from vmmu.sweep import Summary

        assert isinstance(summary, Summary)
        spec = summary.spec
        dup = f", {spec.duplicates} duplicates left out" if spec.duplicates else ""
        self.console.print(
            f"[bold]sweep {spec.name}[/bold]: {summary.total} points ({summary.reused} already "
            f"in {summary.db}, {todo} to run{dup}) on {summary.backend}"
        )
        if todo and self.console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]points"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]}"),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task("sweep", total=todo, failed="")

    def point(self, point: Any, outcome: Mapping[str, Any], done: int, todo: int) -> None:
        ok = outcome["status"] == "ok"
        if not ok:
            self.failed += 1
        secs = outcome.get("wall_seconds")
        took = f"{secs:6.2f} s" if secs is not None else "     – s"
        if self.progress is not None:
            if not ok:
                self.progress.console.print(
                    f"[red]failed[/red] {point.label()}: {outcome.get('error')}"
                )
            failed = f"[red]{self.failed} failed[/red]" if self.failed else ""
            self.progress.update(self.task, completed=done, failed=failed)
        else:
            status = "ok    " if ok else "FAILED"
            line = f"[{done}/{todo}] {status} {took}  {point.label()}"
            if not ok:
                line += f"  — {outcome.get('error')}"
            self.console.print(line, markup=False, highlight=False)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _print_summary(console: Console, summary: Any) -> None:
    n_failed = len(summary.failed)
    console.print(
        f"[bold]{summary.spec.name}[/bold] → {summary.db}: {summary.total} points, "
        f"{summary.ok} ok, "
        + (f"[red]{n_failed} failed[/red]" if n_failed else "0 failed")
        + f" (ran {summary.ran}, reused {summary.reused}) in {_minutes(summary.seconds)}"
    )
    if n_failed:
        console.print(
            "[red]failed points[/red] (kept in the database; --retry-failed reruns them):"
        )
        for point, error in summary.failed[:20]:
            console.print(f"  {point.label()}: {error}", markup=False, highlight=False)
        if n_failed > 20:
            console.print(
                f"  … and {n_failed - 20} more (SELECT * FROM results WHERE status = 'failed')"
            )
    for p in summary.parquet:
        console.print(f"wrote {p}")


@click.command()
@click.argument("spec_path", metavar="SPEC.toml", type=click.Path(dir_okay=False))
@click.option(
    "-o", "--output", required=True, metavar="RESULTS.duckdb", help="The results database."
)
@click.option(
    "-j",
    "--workers",
    type=click.IntRange(min=1),
    help="Local worker processes (default: one per core).",
)
@click.option(
    "--backend",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where points run: processes here, or a Ray cluster (pip install 'vmmu[ray]').",
)
@click.option(
    "--address",
    metavar="HOST:PORT",
    help="Ray: the cluster's head (default: start Ray on this machine).",
)
@click.option("--parquet", metavar="DIR", help="Also export the tables to DIR/*.parquet.")
@click.option("--retry-failed", is_flag=True, help="Run the points stored as failed again.")
@click.option(
    "--dry-run", is_flag=True, help="List the points and whether the database has each; run none."
)
def sweep(
    spec_path: str,
    output: str,
    workers: int | None,
    backend: str,
    address: str | None,
    parquet: str | None,
    retry_failed: bool,
    dry_run: bool,
) -> None:
    """Run every point of the sweep SPEC.toml and store each result in RESULTS.duckdb.

    A point the database already has is not run again: rerun the same command after an
    interruption, or after adding values to the spec, and only the missing points run.
    Exits with status 1 when some points failed (they are stored with their error).
    """
    from vmmu.sweep import ResultsDB, load_spec, plan, run_sweep

    if address is not None and backend != "ray":
        raise click.UsageError("--address needs --backend ray")
    spec = load_spec(spec_path)
    console = _err()
    if dry_run:
        from pathlib import Path

        db = ResultsDB(output) if Path(output).exists() else None
        try:
            todo, reused = plan(spec, db, retry_failed)
        finally:
            if db is not None:
                db.close()
        held = {p.key for p in reused}
        for p in spec.points:
            mark = "stored " if p.key in held else "to run "
            click.echo(f"{mark} {p.key}  {p.label()}")
        click.echo(f"{len(spec.points)} points: {len(reused)} stored, {len(todo)} to run")
        return
    display = _Display(console)
    try:
        summary = run_sweep(
            spec,
            output,
            workers=workers,
            backend_name=backend,
            address=address,
            retry_failed=retry_failed,
            parquet=parquet,
            on_start=display.start,
            on_point=display.point,
        )
    except KeyboardInterrupt:
        display.stop()
        console.print(
            f"interrupted: every completed point is in {output}; run the same command to "
            "finish the rest"
        )
        raise
    finally:
        display.stop()
    _print_summary(console, summary)
    if summary.failed:
        sys.exit(EXIT_FAILED_POINTS)


# ---------------------------------------------------------------------------------------------
# vmmu plot

KINDS = ("auto", "line", "bar", "sizing", "speedup", "heatmap", "breakdown", "timeline")


@click.command()
@click.argument("results", metavar="RESULTS", type=click.Path(exists=True))
@click.option("-o", "--output", required=True, metavar="FILE.{png,svg,pdf}", help="Figure file.")
@click.option("--x", "x", metavar="KEY", help="Column on the x axis (a grid key).")
@click.option("--y", "y", metavar="METRIC", help="Column on the y axis (default: cycles).")
@click.option("--hue", metavar="KEY", help="One line / bar per value of KEY.")
@click.option("--facet", metavar="KEY", help="One panel per value of KEY.")
@click.option(
    "--kind",
    type=click.Choice(KINDS),
    default="auto",
    show_default=True,
    help="auto: line for a numeric --x, bars otherwise.",
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_parse_filters,
    help="Only the points with KEY=VALUE (repeatable).",
)
@click.option(
    "--agg",
    type=click.Choice(["mean", "median", "min", "max"]),
    help="Combine points that share a value (otherwise that is an error naming the keys).",
)
@click.option(
    "--baseline",
    metavar="KEY=VALUE",
    default="mode=native",
    show_default=True,
    help="speedup: the points to compare with.",
)
@click.option("--relative", is_flag=True, help="line/sizing: improvement over the smallest x, %.")
@click.option("--title", help="Figure title.")
def plot(
    results: str,
    output: str,
    x: str | None,
    y: str | None,
    hue: str | None,
    facet: str | None,
    kind: str,
    where: dict[str, str],
    agg: str | None,
    baseline: str,
    relative: bool,
    title: str | None,
) -> None:
    """Plot METRIC against KEY from RESULTS (a sweep .duckdb, result .json or a directory).

    Kinds: line and sizing (numeric x; sizing uses a log-2 axis), bar, speedup (grouped bars
    of baseline cycles / cycles), heatmap (walk references by {column,row} step), breakdown
    (cycles by cause), timeline (an adaptive run's windows).
    """
    from pathlib import Path

    from vmmu import figures
    from vmmu.results import load

    if Path(output).suffix.lower() not in figures.FORMATS:
        raise click.BadParameter(f"{output}: use a .png, .svg or .pdf file name", param_hint="'-o'")
    rs = load(results)
    if where:
        rs = rs.where(where)
    y = y or "cycles"
    if kind == "auto":
        if x is None:
            raise click.UsageError("--x KEY is needed (or --kind heatmap|breakdown|timeline)")
        rs.require(x)
        numeric = all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in rs.ok[x].dropna()
        )
        kind = "line" if numeric and len(rs.ok[x].dropna()) else "bar"
    if kind in ("line", "sizing", "bar") and x is None:
        raise click.UsageError(f"--kind {kind} needs --x KEY")
    if kind == "line":
        fig = figures.line(rs, x, y, hue, facet, agg, relative=relative, title=title)
    elif kind == "sizing":
        fig = figures.sizing(rs, x, y, hue, facet, agg, relative=relative, title=title)
    elif kind == "bar":
        fig = figures.bars(rs, x, y, hue, facet, agg, title=title)
    elif kind == "speedup":
        key, eq, value = baseline.partition("=")
        if not eq:
            raise click.BadParameter(
                f"expected KEY=VALUE, got `{baseline}`", param_hint="'--baseline'"
            )
        fig = figures.speedup(rs, x, hue, facet, (key, value), metric=y, agg=agg, title=title)
    elif kind == "breakdown":
        fig = figures.breakdown(rs, title=title)
    else:
        rows = rs.ok
        if kind == "timeline":
            rows = rows[[bool(figures.timeline_records(r.to_dict())) for _, r in rows.iterrows()]]
            if rows.empty:
                raise ValueError(f"{results}: no point has a timeline (adaptive runs record one)")
        if len(rows) != 1 and kind == "timeline":
            raise ValueError(
                f"{len(rows)} points have a timeline; pick one with --where KEY=VALUE "
                f"(the points vary in {', '.join(rs.label_keys())})"
            )
        if kind == "timeline":
            fig = figures.timeline(rows.iloc[0].to_dict(), title=title)
        else:
            if len(rows) > 12:
                raise ValueError(
                    f"{len(rows)} points: a heat map each is too many; pick up to 12 with "
                    "--where KEY=VALUE"
                )
            keys = rs.label_keys()
            titles = [
                " · ".join(str(r[k]) for k in keys) or str(r.get("mode", ""))
                for _, r in rows.iterrows()
            ]
            fig = figures.walk_heatmaps([r.to_dict() for _, r in rows.iterrows()], titles)
    figures.save(fig, output)
    _err().print(f"wrote {output}")


# ---------------------------------------------------------------------------------------------
# vmmu report


@click.command()
@click.argument("results", metavar="RESULTS", type=click.Path(exists=True))
@click.option("-o", "--output", required=True, metavar="FILE.html", help="The report to write.")
@click.option("--title", help="Title of the page.")
def report(results: str, output: str, title: str | None) -> None:
    """Write a self-contained HTML report of RESULTS (a sweep .duckdb, a result .json —
    `vmmu run --json`, `vmmu compare --json`, `vmmu repro --json` — or a directory of them)."""
    from vmmu.report import write_report

    path = write_report(output, results, title=title)
    _err().print(f"wrote {path}")
