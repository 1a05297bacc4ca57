"""``vmmu repro NAME|all``: run reproductions and print them (terminal, ``--json``, ``--csv``),
write docs/repro.md (``--markdown``), or study their estimated parameters (``--sensitivity``)."""

from __future__ import annotations

import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from vmmu.repro import _render, core_models
from vmmu.repro._claims import Report
from vmmu.repro._paper import Paper, Study, execute, parse_requests, study
from vmmu.repro._run import WORKERS, Bar
from vmmu.repro.papers import PAPERS, paper


def _console() -> Console:
    # Piped or captured output gets a width that fits the tables instead of 80 columns.
    wide = None if sys.stdout.isatty() else 200
    return Console(file=sys.stdout, highlight=False, soft_wrap=False, width=wide)


def _selected(name: str) -> list[Paper]:
    if name == "all":
        return list(PAPERS.values())
    try:
        return [paper(name)]
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="NAME") from None


def _plans(selected: list[Paper], requests: tuple[str, ...]) -> dict[str, list]:
    """Each paper's sensitivity plan; a named parameter no selected paper uses is an error."""
    plans: dict[str, list] = {}
    bare = [r for r in requests if r != "all"]
    if not bare:
        return {p.name: parse_requests(p, []) for p in selected}
    for req in bare:
        name = req.partition("=")[0].strip()
        users = [p for p in selected if any(q.name == name for q in p.parameters)]
        if not users:
            if len(selected) == 1:
                p = selected[0]
                raise click.BadParameter(
                    f"`{name}` is not an estimated parameter of {p.name}; its parameters: "
                    + ", ".join(q.name for q in p.parameters),
                    param_hint="--sensitivity",
                )
            raise click.BadParameter(
                f"`{name}` is not an estimated parameter of any reproduction",
                param_hint="--sensitivity",
            )
        for p in users:
            plans.setdefault(p.name, []).extend(parse_requests(p, [req]))
    return plans


def intro() -> str:
    """The hand-written opening of docs/repro.md (how to read the tables)."""
    return resources.files("vmmu.repro").joinpath("intro.md").read_text(encoding="utf-8")


def _tables(rep: Report) -> dict[str, Any]:
    """A report's rows and each of its views as DataFrames, for the HTML report."""
    import pandas as pd

    out: dict[str, Any] = {rep.name: rep.frame()}
    for v in rep.views:
        df = pd.DataFrame([list(r) for r in v.rows], columns=v.columns)
        df = df.set_index(v.columns[0])
        df.attrs["title"] = v.title + (f" — {v.note}" if v.note else "")
        out[f"{rep.name}/{v.key}"] = df
    return out


def _write_reports(path: str, reports: list[Report]) -> None:
    """One HTML report per paper: ``path`` itself for one paper, ``STEM-NAME.html`` for more."""
    from vmmu.report import write_report

    p = Path(path)
    err = Console(stderr=True, highlight=False)
    for rep in reports:
        dest = p if len(reports) == 1 else p.with_name(f"{p.stem}-{rep.name}{p.suffix or '.html'}")
        title = f"vmmu repro {rep.name} — {rep.title}"
        written = write_report(dest, tables=_tables(rep), title=title)
        err.print(f"report: {written}")


def _write_core_comparison(path: Path, selected: list[Paper], quick: bool, workers: int) -> None:
    """Runs ``selected`` under both core models and writes the comparison to ``path``."""
    t0 = time.monotonic()
    with Bar(True) as bar:
        comparisons = [
            core_models.compare(p, quick=quick, bar=bar, workers=workers) for p in selected
        ]
    seconds = time.monotonic() - t0
    path.write_text(core_models.markdown(comparisons, quick, seconds), encoding="utf-8")
    for c in comparisons:
        o = c.overlap
        click.echo(
            f"{c.paper}: time {o.time_change():+.1%}, translation hidden "
            f"{core_models.pct(o.translation_hidden())}, {len(c.changes())} of {c.judged()} "
            "verdicts change"
        )
    click.echo(f"wrote {path} ({seconds:.0f} s)")


@click.command("repro")
@click.argument("name", required=False, metavar="NAME|all")
@click.option("--list", "list_", is_flag=True, help="List the reproductions and their parameters.")
@click.option("--quick", is_flag=True, help="Small scales (seconds to a minute; the tests' scale).")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print every row as CSV.")
@click.option(
    "--markdown",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the reports as Markdown to this file (docs/repro.md: `vmmu repro all "
    "--markdown docs/repro.md`), with the quick-scale table the tests check.",
)
@click.option(
    "--report",
    metavar="FILE.html",
    help="Also write an HTML report: FILE itself for one paper, FILE-NAME.html for each paper "
    "of `all`.",
)
@click.option(
    "--sensitivity",
    multiple=True,
    is_flag=False,
    flag_value="all",
    metavar="[PARAM[=LO:HI]]",
    help="Rerun with each estimated parameter at the ends of its plausible range (or PARAM "
    "alone, or at LO and HI) and say which verdicts survive. Repeatable.",
)
@click.option(
    "--core-model",
    type=click.Choice(core_models.MODELS),
    help="Time every run of the reproductions with this core model (docs/model.md, "
    '"Timing"); default: each machine\'s own (additive).',
)
@click.option(
    "--core-comparison",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.md",
    help="Run the reproductions under both core models and write which verdicts change and "
    "why to FILE.md (docs/repro-interval.md: `vmmu repro all --quick --core-comparison "
    "docs/repro-interval.md`).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=WORKERS,
    show_default=True,
    help="Simulations run at once.",
)
def repro(
    name: str | None,
    list_: bool,
    quick: bool,
    as_json: bool,
    as_csv: bool,
    markdown: Path | None,
    report: str | None,
    sensitivity: tuple[str, ...],
    core_model: str | None,
    core_comparison: Path | None,
    workers: int,
) -> None:
    """Reproduce a paper's tables, paper value beside vmmu's, each claim judged against the
    paper's own precision (docs/repro.md).

    `vmmu repro NAME` runs one reproduction, `vmmu repro all` every one and a summary with the
    total wall time; `--list` names them and their estimated parameters.
    """
    papers = PAPERS
    if list_ or name is None:
        if name is None and not list_:
            click.echo(click.get_current_context().get_help())
            click.echo("")
        for p in papers.values():
            click.echo(f"{p.name:<11} seed {p.seed}  {p.title}")
            for q in p.parameters:
                click.echo(f"{'':<13}--sensitivity {q.name}={q.lo}:{q.hi}")
        return
    selected = _selected(name)
    if core_comparison is not None:
        _write_core_comparison(core_comparison, selected, quick, workers)
        return
    if markdown is not None and core_model is not None:
        raise click.BadParameter(
            "--markdown writes docs/repro.md with each machine's own core model; "
            "--core-comparison writes the interval model's comparison"
        )
    if markdown is not None and name != "all":
        raise click.BadParameter("--markdown writes every paper: use `vmmu repro all`")
    plans = _plans(selected, sensitivity) if sensitivity else {}
    machine = as_json or as_csv
    out = _console()
    t0 = time.monotonic()
    reports: list[Report] = []
    studies: dict[str, Study] = {}
    with Bar(not machine) as bar:
        for p in selected:
            rep = execute(p, quick=quick, bar=bar, workers=workers, core_model=core_model)
            reports.append(rep)
            if not machine and markdown is None:
                out.print(_render.terminal(rep))
            if p.name in plans:
                st = study(p, plans[p.name], quick=quick, bar=bar, base=rep, core_model=core_model)
                studies[p.name] = st
                if not machine and markdown is None:
                    out.print(_render.sensitivity(st))
        total = time.monotonic() - t0
        quick_reports, quick_total = reports, total
        quick_studies: dict[str, Study] = {}
        if markdown is not None and not quick:
            t1 = time.monotonic()
            quick_reports = [execute(p, quick=True, bar=bar, workers=workers) for p in selected]
            quick_total = time.monotonic() - t1
            if not studies:
                # docs/repro.md always shows which verdicts rest on an estimate: at the quick
                # scale (a minute or two) unless --sensitivity asked for the full one.
                quick_studies = {
                    p.name: study(p, parse_requests(p, []), quick=True, bar=bar, base=rep)
                    for p, rep in zip(selected, quick_reports, strict=True)
                }
    if report is not None:
        _write_reports(report, reports)
    if markdown is not None:
        text = _render.markdown(
            intro(), reports, quick_reports, studies, total, quick_total, quick_studies
        )
        markdown.write_text(text, encoding="utf-8")
        click.echo(
            f"wrote {markdown} ({total:.0f} s, quick check {quick_total:.0f} s, in all "
            f"{time.monotonic() - t0:.0f} s)"
        )
        return
    if as_json:
        click.echo(_render.json_text(reports, studies))
        return
    if as_csv:
        click.echo(_render.csv_text(reports), nl=False)
        return
    if len(reports) > 1:
        out.print(_render.summary(reports, total))
    else:
        out.print(f"[bold]wall time {total:.1f} s[/bold]")
