"""``vmmu suite list`` and ``vmmu suite record`` (docs/cli.md)."""

from __future__ import annotations

import json
import sys
import time

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from vmmu.suite import MACHINE, SCALES, by_name, cache, driver, table

_SCALE = click.option(
    "--scale",
    type=click.Choice(SCALES),
    default="small",
    show_default=True,
    help="Input size: `small` runs in seconds under the recorder, `full` is the class's.",
)
_CACHE = click.option(
    "--cache",
    "cache_dir",
    metavar="DIR",
    help=f"Cache directory (default ${cache.ENV_CACHE}, else $XDG_CACHE_HOME/vmmu/suite or "
    "~/.cache/vmmu/suite).",
)


@click.group()
def suite() -> None:
    """The recorded real-program suite: real programs per workload class, recorded at a
    small or a full scale (docs/workloads.md)."""


def _si(n: float | None, unit: str = "") -> str:
    if n is None:
        return "—"
    for div, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.2f} {prefix}{unit}".rstrip()
    return f"{n:.0f} {unit}".rstrip()


def _mib(n: int | None) -> str:
    return "—" if n is None else f"{n / (1 << 20):,.1f}"


@suite.command("list")
@_SCALE
@_CACHE
@click.option("--json", "as_json", is_flag=True, help="One object per entry.")
def list_cmd(scale: str, cache_dir: str | None, as_json: bool) -> None:
    """The entries at SCALE with their measured instructions, footprint and TLB misses per
    100K instructions (native, on the bhargava08 machine) beside seed 002's figure for the
    class."""
    rows = table(scale, cache_dir)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    t = Table(
        title=f"vmmu suite — {scale} scale, cache {cache.cache_dir(cache_dir)}",
        caption=f"misses: page walks per 100K instructions, native, on the {MACHINE} machine; "
        "paper: seed 002 Table 1's figure for the class",
    )
    for col, justify in (
        ("entry", "left"),
        ("class", "left"),
        ("state", "left"),
        ("instructions", "right"),
        ("footprint MiB", "right"),
        ("expected MiB", "right"),
        ("trace MiB", "right"),
        ("misses /100K", "right"),
        ("paper", "right"),
    ):
        t.add_column(col, justify=justify)
    for r in rows:
        m = r["misses_per_100k"]
        t.add_row(
            r["name"],
            r["class"],
            r["state"],
            _si(r["instructions"]),
            _mib(r["footprint_bytes"]),
            _mib(r["expected_footprint_bytes"]),
            _mib(r["trace_bytes"]),
            "—" if m is None else f"{m:.1f}",
            f"{r['paper_misses_per_100k']:.1f}",
        )
    Console(file=sys.stdout, highlight=False, width=max(120, Console().width)).print(t)


@suite.command("record")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@_SCALE
@_CACHE
@click.option("--force", is_flag=True, help="Record again even if the cache holds the trace.")
@click.option(
    "--no-install",
    is_flag=True,
    help="Never run apt-get; a missing package fails its entry, naming what to install.",
)
def record_cmd(
    names: tuple[str, ...], scale: str, cache_dir: str | None, force: bool, no_install: bool
) -> None:
    """Record entries NAME... (default: all) at SCALE into the cache, skipping those it holds.

    A failing entry is reported with the program's own error and the others go on; the exit
    status is 1 if any failed. An interrupted recording leaves a truncated trace, which the
    next `record` records again from the start.
    """
    entries = by_name(list(names))
    root = cache.cache_dir(cache_dir)
    err = Console(file=sys.stderr, highlight=False)
    if not err.is_terminal:  # a log: wide enough for a finished entry's figures
        err = Console(file=sys.stderr, highlight=False, width=160)
    failed: list[str] = []
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=False) as bar:
        for entry in entries:
            params = ", ".join(f"{k}={v:,}" for k, v in entry.params(scale).items())
            task = bar.add_task(f"{entry.name} ({scale}: {params})", detail="", total=None)

            def progress(stage: str, p: dict, task=task) -> None:
                detail = stage
                if p:
                    detail = (
                        f"{stage}: {_si(p.get('refs'), 'refs')}, "
                        f"{_mib(p.get('bytes_written'))} MiB written"
                    )
                bar.update(task, detail=detail)

            t0 = time.monotonic()
            try:
                st = driver.status(entry, scale, root)
                if st["state"] == "recorded" and not force:
                    bar.update(task, detail="[dim]already recorded[/dim]", total=1, completed=1)
                    continue
                meta = driver.record(
                    entry, scale, root, progress, install=not no_install, force=force
                )
            except driver.SuiteError as e:
                failed.append(entry.name)
                bar.update(task, detail="[red]failed[/red]", total=1, completed=1)
                bar.console.print(f"[red]error:[/red] {e}", markup=True, highlight=False)
                continue
            m = meta["misses_per_100k"]
            bar.update(
                task,
                total=1,
                completed=1,
                detail=f"[green]recorded[/green] in {time.monotonic() - t0:.0f} s: "
                f"{_si(meta['instructions'])} instructions, "
                f"{_mib(meta['footprint_bytes'])} MiB footprint, "
                f"{_mib(meta['trace_bytes'])} MiB trace, "
                + ("" if m is None else f"{m:.1f} misses/100K"),
            )
    if failed:
        err.print(f"[red]{len(failed)} of {len(entries)} failed:[/red] {', '.join(failed)}")
        sys.exit(1)
