"""The one renderer of reproductions: terminal (rich), CSV, JSON and Markdown.

Every format prints the same row for a claim — key, claim, paper value, vmmu value, unit,
criterion, verdict, explanation, note — with its numbers in one style (:data:`vmmu._format.CLAIM`),
so a number in the terminal is the number in docs/repro.md and in ``--csv``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from vmmu._format import CLAIM, number
from vmmu.repro import _suite
from vmmu.repro._claims import (
    COLUMNS,
    CONTEXT,
    COUNTED,
    DEFINITION,
    DIFFERS,
    NOT_SIMULATED,
    REPRODUCED,
    SAME,
    VERDICTS,
    Report,
    Row,
    summary_text,
)
from vmmu.repro._paper import Study

_STYLE = {
    REPRODUCED: "green",
    SAME: "yellow",
    DIFFERS: "bold red",
    DEFINITION: "dim",
    CONTEXT: "dim",
    NOT_SIMULATED: "dim italic",
}


def _setup_lines(report: Report) -> list[tuple[str, str]]:
    out = []
    for k, v in report.setup.items():
        if isinstance(v, Mapping):
            text = "; ".join(f"{a}: {b}" for a, b in v.items())
        elif isinstance(v, (list, tuple)):
            text = "; ".join(map(str, v))
        else:
            text = str(v)
        out.append((k, text))
    return out


def terminal(report: Report) -> RenderableType:
    """One reproduction: its claims, its views, its setup, notes and summary line."""
    table = Table(
        title=f"vmmu repro {report.name} — seed {report.seed} — {report.title}",
        title_justify="left",
        title_style="bold",
        show_lines=True,
    )
    table.add_column("row", style="dim", no_wrap=True)
    table.add_column("claim", min_width=18)
    table.add_column("paper", justify="right")
    table.add_column("vmmu", justify="right", style="bold")
    table.add_column("unit")
    table.add_column("criterion", min_width=14)
    table.add_column("verdict", no_wrap=True)
    table.add_column("explanation", min_width=24)
    table.add_column("note", style="dim")
    for r in report.rows:
        table.add_row(
            r.key,
            r.claim,
            r.paper,
            number(r.vmmu, CLAIM),
            r.unit,
            r.criterion,
            Text(r.verdict, style=_STYLE.get(r.verdict, "")),
            r.explanation,
            r.note,
        )
    parts: list[RenderableType] = [table]
    for v in report.views:
        t = Table(title=v.title, title_justify="left", title_style="bold")
        for c in v.columns:
            t.add_column(c)
        for row in v.rows:
            t.add_row(*(number(x, CLAIM) for x in row))
        parts.append(t)
        if v.note:
            parts.append(Text(v.note, style="dim"))
    setup = Text()
    for k, text in _setup_lines(report):
        setup.append(f"{k}: ", style="bold").append(f"{text}\n")
    for n in report.notes:
        setup.append("note: ", style="bold yellow").append(f"{n}\n")
    parts.append(setup)
    counts = report.counts()
    parts.append(
        Text(
            f"{summary_text(counts)} · wall time {report.seconds:.1f} s",
            style="bold",
        )
    )
    parts.append(Text(""))
    return Group(*parts)


def terminal_text(report: Report, width: int = 200) -> str:
    """:func:`terminal` as plain text (what a pipe receives)."""
    console = Console(width=width, file=io.StringIO(), highlight=False, color_system=None)
    console.print(terminal(report))
    return console.file.getvalue()  # type: ignore[attr-defined]


def summary(reports: Sequence[Report], total: float) -> RenderableType:
    """The table closing ``vmmu repro all``: verdict counts per paper and the wall times."""
    t = Table(title="summary", title_justify="left", title_style="bold")
    t.add_column("reproduction")
    t.add_column("seed")
    for v in VERDICTS:
        t.add_column(v, justify="right")
    t.add_column("rows that differ", style="red")
    t.add_column("wall time", justify="right")
    totals = dict.fromkeys(VERDICTS, 0)
    for r in reports:
        c = r.counts()
        for v in VERDICTS:
            totals[v] += c[v]
        bad = ", ".join(x.key for x in r.rows if x.verdict == DIFFERS) or "–"
        t.add_row(r.name, r.seed, *(str(c[v]) for v in VERDICTS), bad, f"{r.seconds:.1f} s")
    t.add_row("all", "", *(str(totals[v]) for v in VERDICTS), "", f"{total:.1f} s", style="bold")
    return Group(t, Text(f"total wall time {total:.1f} s", style="bold"))


def sensitivity(st: Study) -> RenderableType:
    """Whether each verdict survives each estimated parameter's plausible range."""
    t = Table(
        title=f"sensitivity of {st.paper.name}: {st.findings()} findings, each parameter at the "
        "ends of its plausible range (a trial reruns what the parameter touches)",
        title_justify="left",
        title_style="bold",
        show_lines=True,
    )
    t.add_column("parameter", no_wrap=True)
    t.add_column("value", justify="right")
    t.add_column("verdicts kept", justify="right")
    t.add_column("changed (row: default → this value)")
    t.add_column("range from", style="dim")
    for tr in st.trials:
        changed = "; ".join(
            f"{k}: {v0} ({number(x0, CLAIM)}) → {v1} ({number(x1, CLAIM)})"
            for k, v0, x0, v1, x1 in tr.changes
        )
        t.add_row(
            tr.param.name,
            number(tr.value, CLAIM),
            f"{tr.survived} of {tr.compared}",
            Text(changed or "none", style="yellow" if changed else "green"),
            tr.param.why,
        )
    return Group(t, Text(""))


# ---------------------------------------------------------------------------------------------
# CSV and JSON


def csv_text(reports: Iterable[Report]) -> str:
    """Every row of every report, one CSV line each (``reproduction`` names the paper)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["reproduction", "row", *COLUMNS])
    for rep in reports:
        for r in rep.rows:
            w.writerow([rep.name, r.key, *(_csv_cell(r, c) for c in COLUMNS)])
    return buf.getvalue()


def _csv_cell(r: Row, column: str) -> str:
    v = getattr(r, column)
    return number(v, CLAIM) if column == "vmmu" else str(v)


def json_text(reports: Iterable[Report], studies: Mapping[str, Study] | None = None) -> str:
    """``{paper: {"setup", "rows", "views", "notes", "counts"[, "sensitivity"]}}``."""
    out: dict[str, Any] = {}
    for rep in reports:
        d = rep.to_dict()
        if studies and rep.name in studies:
            d["sensitivity"] = studies[rep.name].to_dict()
        out[rep.name] = d
    return json.dumps(out, indent=2, default=str)


# ---------------------------------------------------------------------------------------------
# Markdown (docs/repro.md)


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        out.append("| " + " | ".join(_md(x) for x in row) + " |")
    return out


def markdown_report(report: Report) -> list[str]:
    lines = [f"## {report.name} — seed {report.seed}: {report.title}", ""]
    for k, text in _setup_lines(report):
        lines.append(f"- **{k}**: {_md(text)}")
    lines.append("")
    lines += md_table(
        ["row", "claim", "paper", "vmmu", "unit", "criterion", "verdict", "explanation", "note"],
        (
            [
                f"`{r.key}`",
                r.claim,
                r.paper,
                number(r.vmmu, CLAIM),
                r.unit,
                r.criterion,
                f"**{r.verdict}**" if r.verdict in COUNTED else r.verdict,
                r.explanation,
                r.note,
            ]
            for r in report.rows
        ),
    )
    lines.append("")
    lines.append(f"{summary_text(report.counts())}; wall time {report.seconds:.1f} s.")
    lines.append("")
    for v in report.views:
        lines += [f"**{v.title}**", ""]
        lines += md_table(v.columns, ([number(x, CLAIM) for x in row] for row in v.rows))
        lines.append("")
        if v.note:
            lines += [v.note, ""]
    for n in report.notes:
        lines += [f"> {n}", ""]
    return lines


def markdown_sensitivity(st: Study) -> list[str]:
    lines = [
        f"### Sensitivity of {st.paper.name}",
        "",
        f"{st.findings()} findings; each estimated parameter at the ends of its plausible range.",
        "",
    ]
    rows = []
    for tr in st.trials:
        changed = "; ".join(
            f"`{k}`: {v0} ({number(x0, CLAIM)}) → {v1} ({number(x1, CLAIM)})"
            for k, v0, x0, v1, x1 in tr.changes
        )
        rows.append(
            [
                f"`{tr.param.name}`",
                number(tr.value, CLAIM),
                f"{tr.survived} of {tr.compared}",
                changed or "none",
                tr.param.why,
            ]
        )
    lines += md_table(["parameter", "value", "verdicts kept", "changed", "range from"], rows)
    lines.append("")
    return lines


QUICK_HEADING = "## Quick-scale check"


def markdown(
    intro: str,
    reports: Sequence[Report],
    quick: Sequence[Report],
    studies: Mapping[str, Study] | None,
    total: float,
    quick_total: float,
    quick_studies: Mapping[str, Study] | None = None,
) -> str:
    """docs/repro.md: the intro, a summary, every report, the sensitivity studies (of the
    reports' scale, and ``quick_studies`` at the quick scale), and the quick-scale verdicts a
    test compares against a fresh ``vmmu repro all --quick``."""
    lines = [intro.rstrip(), "", "## Summary", ""]
    rows = []
    totals = dict.fromkeys(VERDICTS, 0)
    for r in reports:
        c = r.counts()
        for v in VERDICTS:
            totals[v] += c[v]
        rows.append([r.name, r.seed, *(c[v] for v in VERDICTS), f"{r.seconds:.0f} s"])
    rows.append(["**all**", "", *(totals[v] for v in VERDICTS), f"{total:.0f} s"])
    lines += md_table(["reproduction", "seed", *VERDICTS, "wall time"], rows)
    lines += [
        "",
        f"`vmmu repro all` took {total:.0f} s of wall time for this file (2 cores shared with "
        f"other work); `vmmu repro all --quick` {quick_total:.0f} s.",
        "",
    ]
    for r in reports:
        lines += markdown_report(r)
        if studies and r.name in studies:
            lines += markdown_sensitivity(studies[r.name])
    if quick_studies:
        lines += [
            "## Sensitivity (quick scale)",
            "",
            "Each paper rerun at `--quick` scale with each estimated parameter at both ends of "
            "its plausible range (`vmmu repro NAME --quick --sensitivity`), its verdicts "
            "compared with the quick run's: a verdict that changes within the range rests on "
            "that estimate, and is read with it. No parameter is moved to change a verdict.",
            "",
        ]
        for st in quick_studies.values():
            lines += markdown_sensitivity(st)
    lines += [
        QUICK_HEADING,
        "",
        "The verdicts and values of `vmmu repro all --quick` (the small scale the tests use; "
        "its values differ from the full run's). `tests/python/test_repro.py` reruns it and "
        "fails if any row differs from this table, so this file cannot go stale: regenerate it "
        "with `vmmu repro all --markdown docs/repro.md`. The rows of the recorded suite's "
        "programs are left out: they depend on what the suite's cache holds.",
        "",
    ]
    lines += md_table(
        ["reproduction", "row", "vmmu", "verdict"],
        ([rep.name, r.key, number(r.vmmu, CLAIM), r.verdict] for rep, r in _quick_checked(quick)),
    )
    lines.append("")
    return "\n".join(lines)


def parse_table(text: str, heading: str, width: int) -> list[tuple[str, ...]]:
    """The rows of ``width`` cells of the table under ``heading`` in a generated Markdown
    file (its header row, which starts with ``reproduction``, left out)."""
    _, _, rest = text.partition(heading)
    out = []
    for line in rest.splitlines():
        if not line.startswith("| ") or line.startswith("| reproduction"):
            continue
        cells = [c.strip().replace("\\|", "|") for c in line.strip().strip("|").split(" | ")]
        if len(cells) == width:
            out.append(tuple(cells))
    return out


def parse_quick_table(text: str) -> list[tuple[str, ...]]:
    """The rows of the quick-scale table of a generated docs/repro.md."""
    return parse_table(text, QUICK_HEADING, 4)


def _quick_checked(reports: Iterable[Report]) -> list[tuple[Report, Row]]:
    """The rows of the quick-scale table: every row but those of recorded programs."""
    return [(rep, r) for rep in reports for r in rep.rows if not _suite.reads_cache(r.key)]


def quick_rows(reports: Iterable[Report]) -> list[tuple[str, str, str, str]]:
    """The same rows, from reports (for the comparison)."""
    return [
        (rep.name, r.key, _md(number(r.vmmu, CLAIM)).replace("\\|", "|"), r.verdict)
        for rep, r in _quick_checked(reports)
    ]
