"""Self-contained HTML reports of results, sweeps and reproductions.

:func:`write_report` renders one page (jinja2, ``templates/report.html.j2``) that opens with no
network: every chart is a PNG inlined as base64, the style sheet is inline, there is no script.
It shows, as far as the results allow:

- an overview (source, points, failures, the sweeps that wrote a database);
- the tables it is given (``vmmu repro``: each finding, paper value beside vmmu value);
- the points that failed, with their errors;
- a comparison table (a column per point for a few points, a row per point for a sweep), and
  every result column for a few points;
- the cycle breakdown by cause; speedup against native; sweep curves for each numeric key
  the points vary in (seed 002 Figure 9); walk-reference heat maps (Figure 8); the timelines
  of adaptive runs.

>>> from vmmu.report import write_report
>>> write_report("r.html", "r.duckdb")                      # a sweep database
>>> write_report("r.html", [vmmu.run(workload="random")])   # results from the API
>>> write_report("r.html", tables={"kloster07": df})        # tables only
"""

from __future__ import annotations

import base64
import datetime
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vmmu import api, figures, headline
from vmmu._format import CELL, missing, number, signed_pct
from vmmu.results import ResultSet, coerce, determined_by, text

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

#: Up to this many points, the comparison table has a column per point.
WIDE_POINTS = 8
#: Rows shown in a table of points.
MAX_ROWS = 500
#: Heat maps, timelines and sweep figures drawn at most.
MAX_HEATMAPS = 6
MAX_TIMELINES = 6
MAX_SWEEP_FIGURES = 6
#: Bars in the cycle breakdown at most.
MAX_BREAKDOWN = 60


@dataclass
class Chart:
    caption: str
    png: str  # base64
    alt: str


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    #: Per column: "num" (right-aligned), "verdict" (a `vmmu repro` verdict, coloured) or "".
    kinds: list[str] = field(default_factory=list)
    caption: str = ""
    #: Per row: a CSS class ("failed", a verdict such as "differs"...) or "".
    row_classes: list[str] = field(default_factory=list)


@dataclass
class Section:
    title: str
    notes: list[str] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    details: list[tuple[str, Table]] = field(default_factory=list)
    anchor: str = ""


# ---------------------------------------------------------------------------------------------
# Formatting


def _is_num(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or hasattr(v, "dtype")


def _chart(fig: Figure, caption: str) -> Chart:
    data = base64.b64encode(figures.png(fig)).decode("ascii")
    return Chart(caption=caption, png=data, alt=caption)


def _try_chart(
    charts: list[Chart], notes: list[str], caption: str, draw: Callable[[], Figure]
) -> None:
    """Draws one chart; a chart the data does not support becomes a note, not a failure."""
    try:
        charts.append(_chart(draw(), caption))
    except ValueError as e:
        notes.append(f"{caption}: not drawn — {e}")


# ---------------------------------------------------------------------------------------------
# Sections


def _labels(df: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    if not keys:
        col = next((c for c in ("name", "mode") if c in df.columns), "point_key")
        return [text(v) for v in df[col]]
    return [" · ".join(text(r[k]) for k in keys) for _, r in df.iterrows()]


def _sorted(rs: ResultSet, df: pd.DataFrame) -> pd.DataFrame:
    return rs.in_order(df)


def _overview(rs: ResultSet, title: str) -> Section:
    from vmmu import __version__

    s = Section("Overview", anchor="overview")
    if rs.source:
        s.facts.append(("source", rs.source))
    if len(rs.frame):
        failed = len(rs.failed)
        s.facts.append(("points", f"{len(rs.frame):,} ({len(rs.ok):,} ok, {failed:,} failed)"))
        if rs.varying_keys:
            s.facts.append(("points vary in", ", ".join(rs.varying_keys)))
        if "vmmu_version" in rs.frame.columns:
            versions = sorted({text(v) for v in rs.frame["vmmu_version"] if text(v)})
            if versions:
                s.facts.append(("run by vmmu", ", ".join(versions)))
    for sw in rs.sweeps[-5:]:
        s.facts.append(
            (
                f"sweep {sw.get('id', '')}",
                f"{sw.get('name', '')} ({sw.get('spec', '')}), {sw.get('points', '?')} points, "
                f"started {sw.get('started_at', '')}",
            )
        )
    s.facts.append(("report", f"written by vmmu {__version__}"))
    return s


def _given_tables(tables: Mapping[str, pd.DataFrame]) -> list[Section]:
    out = []
    for name, df in tables.items():
        attrs = dict(df.attrs)
        title = str(attrs.pop("title", "") or name)
        s = Section(f"{name} — {title}" if title != name else name, anchor=f"table-{name}")
        for k, v in attrs.items():
            if isinstance(v, Mapping):
                v = "; ".join(f"{a}: {b}" for a, b in v.items()) or "defaults"
            s.facts.append((str(k), number(v, CELL) if not isinstance(v, str) else v))
        headers = ["", *map(str, df.columns)]
        rows, classes = [], []
        verdicts = "verdict" in df.columns
        for idx, r in df.iterrows():
            rows.append([str(idx), *(number(v, CELL) for v in r)])
            classes.append(_verdict_class(r["verdict"]) if verdicts else "")
        kinds = ["", *("num" if _is_num(v) else "" for v in df.iloc[0])] if len(df) else []
        if verdicts and kinds:
            kinds[1 + list(df.columns).index("verdict")] = "verdict"
        s.tables.append(Table(headers, rows, kinds, row_classes=classes))
        out.append(s)
    return out


def _verdict_class(verdict: Any) -> str:
    """A ``vmmu repro`` verdict ("same direction", ...) as a CSS class ("same-direction")."""
    return str(verdict).replace(" ", "-") if not missing(verdict) else ""


def _failed(rs: ResultSet) -> Section | None:
    df = rs.failed
    if df.empty:
        return None
    s = Section(f"Failed points ({len(df)})", anchor="failed")
    keys = [k for k in rs.varying_keys if k in df.columns]
    rows = [
        [*(text(r[k]) for k in keys), text(r.get("error"))] for _, r in _sorted(rs, df).iterrows()
    ]
    s.tables.append(Table([*keys, "error"], rows[:MAX_ROWS], row_classes=["failed"] * len(rows)))
    s.notes.append("A failed point is kept with its error; `vmmu sweep --retry-failed` reruns it.")
    return s


def overheads(rs: ResultSet) -> dict[Any, float | None]:
    """``{row index: cycles / native cycles − 1}`` (:func:`vmmu.api.overhead`) for points with a
    native counterpart (:func:`vmmu.figures.baselines`)."""
    try:
        bases = figures.baselines(rs, ("mode", "native"), "cycles")
    except ValueError:
        return {}
    df = rs.ok
    return {i: api.overhead({i: df.loc[i]}, native=df.loc[b])[i] for i, b in bases.items()}


def _compare(rs: ResultSet) -> Section | None:
    df = _sorted(rs, rs.ok)
    if df.empty:
        return None
    over = overheads(rs)
    s = Section("Comparison", anchor="comparison")
    keys = rs.varying_keys
    if len(df) <= WIDE_POINTS:
        labels = _labels(df, rs.label_keys())
        rows: list[list[str]] = []
        classes: list[str] = []
        # Integer columns with gaps (exits only some modes have) read back as integers.
        flat = [r.to_dict() for _, r in df.convert_dtypes().iterrows()]
        for line in headline.lines(flat, [over.get(i) for i in df.index]):
            rows.append([line.label.strip(), *(line.cells or [""] * len(labels))])
            classes.append("section" if line.section else "")
        s.tables.append(
            Table(["", *labels], rows, ["", *["num"] * len(labels)], row_classes=classes)
        )
        s.notes.append("Every figure is defined in docs/statistics.md.")
        every = [c for c in df.columns if c not in ("point_key",)]
        s.details.append(
            (
                "every column",
                Table(
                    ["column", *labels],
                    [[c, *(number(v, CELL) for v in df[c])] for c in every],
                    ["", *["num"] * len(labels)],
                ),
            )
        )
        return s
    metrics = [
        c
        for c in (
            "cycles",
            "cpi",
            "walk_refs_per_walk",
            "tlb.l2.misses",
            "walks",
            "world_switches",
        )
        if c in df.columns
    ]
    headers = [*keys, *metrics]
    rows = []
    for i, r in df.head(MAX_ROWS).iterrows():
        row = [text(r[k]) for k in keys] + [number(r[m], CELL) for m in metrics]
        if over:
            row.append(signed_pct(over.get(i)))
        rows.append(row)
    if over:
        headers.append("overhead vs native")
    kinds = [""] * len(keys) + ["num"] * (len(headers) - len(keys))
    s.tables.append(Table(headers, rows, kinds))
    if len(df) > MAX_ROWS:
        s.notes.append(f"The first {MAX_ROWS} of {len(df)} points; the database has them all.")
    return s


def _breakdown(rs: ResultSet) -> Section | None:
    df = rs.ok
    if df.empty or not any(c.startswith("cycles_by_cause.") for c in df.columns):
        return None
    s = Section("Cycles by cause", anchor="breakdown")
    if len(df) > MAX_BREAKDOWN:
        s.notes.append(f"{len(df)} points are too many bars; the first {MAX_BREAKDOWN} are shown.")
    sub = ResultSet(
        frame=_sorted(rs, df).head(MAX_BREAKDOWN),
        source=rs.source,
        option_keys=rs.option_keys,
        varying_keys=rs.varying_keys,
        orders=rs.orders,
    )
    _try_chart(
        s.charts,
        s.notes,
        "share of each point's cycles by cause (docs/statistics.md, Time)",
        lambda: figures.breakdown(sub),
    )
    return s


def _speedup(rs: ResultSet) -> Section | None:
    df = rs.ok
    if "mode" not in df.columns or "mode" not in rs.varying_keys:
        return None
    if not (df["mode"] == "native").any():
        return None
    s = Section("Speedup against native", anchor="speedup")
    others = [k for k in rs.label_keys() if k != "mode"]
    x = "workload" if "workload" in others else (others[0] if len(others) > 1 else None)
    _try_chart(
        s.charts,
        s.notes,
        "native cycles / cycles: 1.0 is native speed (seed 002 Figure 6)",
        lambda: figures.speedup(rs, x=x),
    )
    return s


def _numeric_keys(rs: ResultSet, df: pd.DataFrame) -> list[str]:
    out = []
    for k in rs.label_keys():
        vals = [v for v in df[k] if not missing(v)]
        if len(set(vals)) >= 3 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals
        ):
            out.append(k)
    return out


def _sweep_plots(rs: ResultSet) -> Section | None:
    df = rs.ok
    if df.empty:
        return None
    numeric = _numeric_keys(rs, df)
    if not numeric:
        return None
    s = Section("Sweep curves", anchor="sweep")
    drawn = 0
    for x in numeric:
        others = [k for k in rs.label_keys() if k != x and not determined_by(df, k, x)]
        others = [k for k in others if k not in numeric or k == x]
        facet = None
        combos = df[others].astype(str).drop_duplicates().shape[0] if others else 1
        if combos > 10:
            small = [k for k in others if df[k].nunique() <= 4]
            if small:
                facet = small[0]
                others = [k for k in others if k != facet]
        hue = others or None
        for y, relative, caption in (
            ("cycles", False, f"cycles against {x}"),
            (
                "cycles",
                True,
                f"speedup over the smallest {x}, cycles(smallest) / cycles − 1 (seed 002 Figure 9)",
            ),
        ):
            if drawn >= MAX_SWEEP_FIGURES:
                break
            _try_chart(
                s.charts,
                s.notes,
                caption,
                lambda x=x, y=y, relative=relative, hue=hue, facet=facet: figures.sizing(
                    rs, x, y, hue=hue, facet=facet, relative=relative
                ),
            )
            drawn += 1
    return s


def _heatmaps(rs: ResultSet) -> Section | None:
    df = _sorted(rs, rs.ok)
    steps = [c for c in df.columns if c.startswith("walk_refs_by_step.")]
    if df.empty or not steps:
        return None
    rows = df[df[steps].notna().any(axis=1)]
    if rows.empty:
        return None
    s = Section("Walk references by step", anchor="heatmaps")
    picked = []
    seen = set()
    design = [k for k in ("mode", "pwc_design") if k in rows.columns]
    for _, r in rows.iterrows():
        key = tuple(text(r[k]) for k in design)
        if key in seen:
            continue
        seen.add(key)
        picked.append(r)
        if len(picked) == MAX_HEATMAPS:
            break
    if len(rows) > len(picked):
        s.notes.append(
            f"One point per {' and '.join(design) or 'design'} is shown ({len(picked)} of "
            f"{len(rows)} points)."
        )
    titles = _labels(df.loc[[r.name for r in picked]], rs.label_keys() or design)
    _try_chart(
        s.charts,
        s.notes,
        "walk references per 1,000 instructions at each {column,row} step; rows: guest step, "
        "columns: nested step (seed 002 Figures 1(b) and 8)",
        lambda: figures.walk_heatmaps([r.to_dict() for r in picked], titles),
    )
    if not any(c.startswith("pwc_hits_by_step.") for c in df.columns):
        s.notes.append(
            "The results have no per-step PWC hits (pwc_hits_by_step), so the cells show "
            "activity only; the overall PWC hit rate is in the comparison table."
        )
    return s


def _timelines(rs: ResultSet) -> Section | None:
    df = _sorted(rs, rs.ok)
    if "timeline" not in df.columns:
        return None
    rows = [r for _, r in df.iterrows() if figures.timeline_records(r.to_dict())]
    if not rows:
        return None
    s = Section("Timelines", anchor="timelines")
    labels = _labels(df.loc[[r.name for r in rows]], rs.label_keys())
    for r, label in list(zip(rows, labels, strict=True))[:MAX_TIMELINES]:
        _try_chart(
            s.charts,
            s.notes,
            f"{label}: CPI per window and paging mode",
            lambda r=r, label=label: figures.timeline(r.to_dict(), title=label),
        )
    if len(rows) > MAX_TIMELINES:
        s.notes.append(f"The first {MAX_TIMELINES} of {len(rows)} timelines are shown.")
    return s


# ---------------------------------------------------------------------------------------------
# The page


def sections(rs: ResultSet, tables: Mapping[str, pd.DataFrame], title: str) -> list[Section]:
    """The report's sections, in page order (those the data has nothing for are left out)."""
    parts: list[Section | None] = [_overview(rs, title), *_given_tables(tables)]
    if len(rs.frame):
        parts += [
            _failed(rs),
            _compare(rs),
            _breakdown(rs),
            _speedup(rs),
            _sweep_plots(rs),
            _heatmaps(rs),
            _timelines(rs),
        ]
    return [p for p in parts if p is not None]


def render_report(
    results: Any = None,
    *,
    tables: Mapping[str, pd.DataFrame] | None = None,
    title: str | None = None,
) -> str:
    """The HTML text of a report of ``results`` (a path, a :class:`ResultSet`, results or
    a DataFrame; may be None) and ``tables`` (``{name: DataFrame}``)."""
    import jinja2
    import pandas as pd

    rs = coerce(results) if results is not None else ResultSet(frame=pd.DataFrame())
    all_tables = {**rs.tables, **(tables or {})}
    if title is None:
        names = [sw.get("name") for sw in rs.sweeps if sw.get("name")]
        title = f"vmmu report — {names[-1]}" if names else "vmmu report"
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("vmmu", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template("report.html.j2").render(
        title=title,
        generated=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        sections=sections(rs, all_tables, title),
    )


def write_report(
    path: str | os.PathLike[str],
    results: Any = None,
    *,
    tables: Mapping[str, pd.DataFrame] | None = None,
    title: str | None = None,
) -> Path:
    """Writes the report of ``results`` and ``tables`` (see :func:`render_report`) to
    ``path`` and returns the path."""
    html = render_report(results, tables=tables, title=title)
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(html, encoding="utf-8")
    return p
