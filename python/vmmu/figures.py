"""Figures of results and sweeps, drawn with matplotlib (its object API and the Agg renderer:
no display, no global pyplot state, safe to call from any thread).

Each function takes a :class:`vmmu.results.ResultSet` (or one result) and returns a
:class:`matplotlib.figure.Figure`; :func:`save` writes it as PNG, SVG or PDF.

- :func:`line` and :func:`bars`: a metric against a key, one series per ``hue`` value, one
  panel per ``facet`` value, each panel on its own y axis;
- :func:`sizing`: a metric against a size key on a log-2 axis, optionally as the improvement
  over the smallest size (seed 002 Figure 9);
- :func:`speedup`: grouped bars of ``baseline cycles / cycles`` (seed 002 Figure 6);
- :func:`walk_heatmaps`: walk references per thousand instructions at each ``{column,row}``
  step of the walk (seed 002 Figure 8), with the PWC hit rate of each step when the result has
  ``pwc_hits_by_step``;
- :func:`breakdown`: cycles by cause, stacked;
- :func:`timeline`: an adaptive run's windows — CPI per window and the paging mode.

A key that leaves several points in one bar or line point is an error naming the keys that
differ, unless an aggregate (``agg="mean"``…) is asked for: nothing is averaged silently.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vmmu._format import human, missing
from vmmu.results import ResultSet, text

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = (".png", ".svg", ".pdf")
AGGREGATES = ("mean", "median", "min", "max")

#: Colors of the paging modes in timelines and breakdowns.
MODE_COLORS = {"native": "#7f7f7f", "nested": "#1f77b4", "shadow": "#ff7f0e"}


def _figure(panels: int = 1, width: float = 6.4, height: float = 4.0) -> tuple[Figure, list[Axes]]:
    """A figure of ``panels`` panels, up to three a row. Each panel has its own y axis: the
    panels of a facet may differ in scale by orders of magnitude (a stream beside a random
    workload), and a shared axis would draw the small ones flat."""
    from matplotlib.figure import Figure

    cols = min(panels, 3)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(width * cols if cols > 1 else width, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels]


def save(fig: Figure, path: str | Path) -> Path:
    """Writes ``fig`` to ``path``; the suffix (``.png``, ``.svg``, ``.pdf``) picks the format."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise ValueError(f"{p}: unknown figure format `{p.suffix}` (use {', '.join(FORMATS)})")
    fig.savefig(p, dpi=120)
    return p


def png(fig: Figure, dpi: int = 100) -> bytes:
    """``fig`` as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# Data


def _keys(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _label(row: Any, keys: Sequence[str]) -> str:
    return " · ".join(text(row[k]) for k in keys)


def series(
    rs: ResultSet,
    x: str | None,
    y: str,
    hue: str | Sequence[str] | None = None,
    facet: str | None = None,
    agg: str | None = None,
) -> pd.DataFrame:
    """Columns ``facet``, ``hue``, ``x``, ``y`` (text labels for facet and hue), one row per
    distinct ``(facet, hue, x)``; raises when several points share one and ``agg`` is None."""
    import pandas as pd

    hues = _keys(hue)
    for k in [x, y, facet, *hues]:
        if k is not None:
            rs.require(k)
    if agg is not None and agg not in AGGREGATES:
        raise ValueError(f"unknown aggregate `{agg}` ({', '.join(AGGREGATES)})")
    df = rs.in_order(rs.ok)
    if df.empty:
        raise ValueError(f"{rs.source or 'the results'} have no completed point to plot")
    values = pd.to_numeric(df[y], errors="coerce")
    if values.isna().all():
        raise ValueError(f"`{y}` is not a numeric result column; pick a metric such as cycles")
    out = pd.DataFrame(
        {
            "facet": df[facet].map(text) if facet else "",
            "hue": [_label(r, hues) for _, r in df.iterrows()] if hues else "",
            "x": df[x] if x else "",
            "y": values,
        },
        index=df.index,
    )
    out["xkey"] = out["x"].map(text)
    groups = out.groupby(["facet", "hue", "xkey"], sort=False)
    if agg is None and (groups.size() > 1).any():
        used = {k for k in [x, facet, *hues] if k}
        sizes = groups.size()
        first = sizes[sizes > 1].index[0]
        rows = df.loc[groups.get_group(first).index]
        differ = [
            k for k in rs.label_keys() if k not in used and rows[k].map(text).nunique() > 1
        ] or [c for c in df.columns if c not in used and rows[c].map(text).nunique() > 1][:3]
        where = ", ".join(
            f"{k}={v}" for k, v in zip(("facet", "hue", "x"), first, strict=False) if v
        )
        raise ValueError(
            f"{int(sizes.max())} points share one value ({where or 'every point'}): they "
            f"differ in {', '.join(f'`{k}`' for k in differ)}; show it with --hue or --facet, "
            "pick one with --where KEY=VALUE, or aggregate with --agg mean|median|min|max"
        )
    first_x = groups["x"].first()
    y_agg = groups["y"].agg(agg or "first")
    res = pd.concat([first_x, y_agg], axis=1).reset_index()
    return res


def _ordered(rs: ResultSet, column: str | None, labels: Sequence[str]) -> list[str]:
    if column is None:
        return list(dict.fromkeys(labels))
    return [text(v) for v in rs.order(column, labels)]


def _hue_order(rs: ResultSet, hue: str | Sequence[str] | None, labels: Sequence[str]) -> list[str]:
    hues = _keys(hue)
    if len(hues) != 1:
        if not hues:
            return list(dict.fromkeys(labels))
        # Combined labels: order by each key's order in turn.
        parts = [lab.split(" · ") for lab in dict.fromkeys(labels)]
        ranks = [
            {text(v): i for i, v in enumerate(rs.order(k, [p[j] for p in parts]))}
            for j, k in enumerate(hues)
        ]
        return [
            " · ".join(p)
            for p in sorted(
                parts, key=lambda p: [r.get(v, 0) for r, v in zip(ranks, p, strict=False)]
            )
        ]
    return _ordered(rs, hues[0], labels)


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _style(ax: Axes, xlabel: str, ylabel: str) -> None:
    from matplotlib.ticker import EngFormatter

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if max(abs(v) for v in ax.get_ylim()) >= 1000:
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))
    ax.grid(True, axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def _title(fig: Figure, title: str | None) -> None:
    if title:
        fig.suptitle(title, fontsize="medium", fontweight="bold")


def _legend(ax: Axes, hue: str | Sequence[str] | None) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles and any(labels):
        ax.legend(title=" · ".join(_keys(hue)) or None, fontsize="small", title_fontsize="small")


# ---------------------------------------------------------------------------------------------
# Generic figures


def line(
    rs: ResultSet,
    x: str,
    y: str,
    hue: str | Sequence[str] | None = None,
    facet: str | None = None,
    agg: str | None = None,
    logx: bool | None = None,
    relative: bool = False,
    title: str | None = None,
) -> Figure:
    """``y`` against ``x`` (numeric), one line per ``hue``, one panel per ``facet``. ``logx``
    (default: when the values span a factor of 8 or more) uses a log-2 axis; ``relative``
    plots the improvement over the smallest ``x`` of each line, ``y(x0) / y(x) − 1``, in %."""
    data = series(rs, x, y, hue, facet, agg)
    xs = list(data["x"])
    if not _numeric(xs):
        raise ValueError(f"`{x}` is not numeric ({text(xs[0])}…): use a bar plot (--kind bar)")
    if logx is None:
        positive = [v for v in xs if v > 0]
        logx = len(positive) == len(xs) and max(xs) / min(xs) >= 8
    facets = _ordered(rs, facet, list(data["facet"]))
    fig, axes = _figure(len(facets))
    hues = _hue_order(rs, hue, list(data["hue"]))
    for ax, fv in zip(axes, facets, strict=False):
        part = data[data["facet"] == fv]
        for hv in hues:
            s = part[part["hue"] == hv].sort_values("x")
            if s.empty:
                continue
            ys = s["y"]
            if relative:
                ys = 100.0 * (ys.iloc[0] / ys - 1.0)
            ax.plot(s["x"], ys, marker="o", label=hv or None)
        if logx:
            ax.set_xscale("log", base=2)
            ticks = sorted(set(xs))
            ax.set_xticks(ticks, [text(t) for t in ticks])
            ax.minorticks_off()
        ylabel = f"{y}: improvement over the smallest (%)" if relative else y
        _style(ax, x, ylabel)
        if relative:
            ax.yaxis.set_major_formatter("{x:.0f}%")
        if facet:
            ax.set_title(f"{facet} = {fv}", fontsize="medium")
        _legend(ax, hue)
    _title(fig, title)
    return fig


def sizing(
    rs: ResultSet,
    x: str,
    y: str = "cycles",
    hue: str | Sequence[str] | None = None,
    facet: str | None = None,
    agg: str | None = None,
    relative: bool = False,
    title: str | None = None,
) -> Figure:
    """A sizing curve (seed 002 Figure 9): ``y`` against a size key on a log-2 axis."""
    return line(rs, x, y, hue, facet, agg, logx=True, relative=relative, title=title)


def bars(
    rs: ResultSet,
    x: str,
    y: str,
    hue: str | Sequence[str] | None = None,
    facet: str | None = None,
    agg: str | None = None,
    title: str | None = None,
    reference: float | None = None,
    ylabel: str | None = None,
    data: pd.DataFrame | None = None,
) -> Figure:
    """Grouped bars: one group per ``x`` value, one bar per ``hue`` value."""
    if data is None:
        data = series(rs, x, y, hue, facet, agg)
    facets = _ordered(rs, facet, list(data["facet"]))
    xs = _ordered(rs, x, list(data["xkey"])) if x else [""]
    hues = _hue_order(rs, hue, list(data["hue"]))
    width = 0.8 / max(1, len(hues))
    fig, axes = _figure(len(facets), width=max(6.4, 0.5 * len(xs) * max(1, len(hues)) + 2))
    for ax, fv in zip(axes, facets, strict=False):
        part = data[data["facet"] == fv]
        for i, hv in enumerate(hues):
            s = part[part["hue"] == hv].set_index("xkey")
            pos = [j + (i - (len(hues) - 1) / 2) * width for j in range(len(xs))]
            vals = [s["y"].get(xv, math.nan) for xv in xs]
            ax.bar(pos, vals, width=width, label=hv or None)
        ax.set_xticks(
            range(len(xs)),
            xs,
            rotation=30 if max(map(len, xs)) > 10 else 0,
            ha="right" if max(map(len, xs)) > 10 else "center",
        )
        _style(ax, x or "", ylabel or y)
        if reference is not None:
            ax.axhline(reference, color="black", linewidth=0.8, linestyle="--")
        if facet:
            ax.set_title(f"{facet} = {fv}", fontsize="medium")
        _legend(ax, hue)
    _title(fig, title)
    return fig


# ---------------------------------------------------------------------------------------------
# The papers' figures


def baselines(
    rs: ResultSet,
    baseline: tuple[str, str] = ("mode", "native"),
    metric: str = "cycles",
) -> dict[Any, Any]:
    """``{row index: its baseline's row index}`` for every completed point with a baseline.

    A point's baseline is the baseline point (``key = value``) that agrees with it on every
    key the baseline points themselves vary in (the workload, say); a baseline point is its
    own. Points whose baseline or own ``metric`` is missing or zero are left out.
    """
    key, value = baseline
    rs.require(key)
    rs.require(metric)
    df = rs.ok
    is_base = df[key].map(text) == value
    base = df[is_base]
    match = [k for k in rs.varying_keys if k != key and base[k].map(text).nunique() > 1]
    index = {tuple(text(r[k]) for k in match): i for i, r in base.iterrows() if r[metric]}
    out = {}
    for i, r in df.iterrows():
        b = index.get(tuple(text(r[k]) for k in match))
        if b is not None and r[metric]:
            out[i] = b
    return out


def speedup_table(
    rs: ResultSet,
    baseline: tuple[str, str] = ("mode", "native"),
    metric: str = "cycles",
) -> pd.DataFrame:
    """Each non-baseline point's ``speedup`` = baseline ``metric`` / its ``metric`` (the
    baseline of :func:`baselines`). Returns the points' rows with a ``speedup`` column."""
    import pandas as pd

    key, value = baseline
    bases = baselines(rs, baseline, metric)
    df = rs.ok
    is_base = df[key].map(text) == value
    if not is_base.any():
        raise ValueError(f"no completed point has {key}={value} to compare with")
    if is_base.all():
        raise ValueError(f"every point has {key}={value}: nothing to compare with it")
    rows = [
        {**r.to_dict(), "speedup": float(df.at[bases[i], metric]) / float(r[metric])}
        for i, r in df[~is_base].iterrows()
        if i in bases
    ]
    if not rows:
        match = [k for k in rs.varying_keys if k != key and df[is_base][k].map(text).nunique() > 1]
        raise ValueError(f"no point has a {key}={value} point with the same {', '.join(match)}")
    return pd.DataFrame(rows)


def speedup(
    rs: ResultSet,
    x: str | None = None,
    hue: str | Sequence[str] | None = None,
    facet: str | None = None,
    baseline: tuple[str, str] = ("mode", "native"),
    metric: str = "cycles",
    agg: str | None = None,
    title: str | None = None,
) -> Figure:
    """Grouped bars of speedup against a baseline (seed 002 Figure 6): ``baseline metric /
    metric`` for each point, grouped by ``x``, one bar per ``hue``; 1.0 is the baseline."""
    table = speedup_table(rs, baseline, metric)
    sub = ResultSet(
        frame=table,
        source=rs.source,
        option_keys=rs.option_keys,
        varying_keys=rs.varying_keys,
        orders=rs.orders,
    )
    if hue is None:
        # Every key that tells the compared points apart, the baseline key among them when
        # they differ in it (nested and shadow against native).
        hue = [
            k for k in rs.label_keys() if k not in (x, facet) and table[k].map(text).nunique() > 1
        ] or None
    data = series(sub, x, "speedup", hue, facet, agg)
    return bars(
        sub,
        x or "",
        "speedup",
        hue,
        facet,
        title=title,
        reference=1.0,
        ylabel=f"speedup vs {baseline[0]}={baseline[1]} ({metric} ratio)",
        data=data,
    )


def _level(name: str) -> tuple[int, int]:
    m = re.fullmatch(r"[gn]?L(\d)", name)
    return (0, -int(m.group(1))) if m else (1, 0)


def step_counts(row: Mapping[str, Any], prefix: str = "walk_refs_by_step.") -> dict[str, float]:
    """``{step: count}`` of a flattened row (or of a result's nested table)."""
    nested = row.get(prefix.rstrip("."))
    if isinstance(nested, Mapping):
        return {k: float(v) for k, v in nested.items() if v}
    out = {}
    for k, v in row.items():
        if isinstance(k, str) and k.startswith(prefix) and not missing(v) and v:
            out[k[len(prefix) :]] = float(v)
    return out


def walk_heatmaps(rows: Sequence[Mapping[str, Any]], titles: Sequence[str]) -> Figure:
    """One heat map per row: walk references per thousand instructions at each step, rows the
    guest step (``gL4`` … ``gL1``, ``gPA``), columns the nested step (``nL4`` … ``nL1``, ``G``);
    a native or shadow walk is one row ``L4`` … ``L1``. With ``pwc_hits_by_step`` in the
    result, each cell also shows its PWC hit percentage."""
    import numpy as np

    fig, axes = _figure(len(rows), width=5.2, height=3.6)
    for ax, row, title in zip(axes, rows, titles, strict=False):
        steps = step_counts(row)
        hits = step_counts(row, "pwc_hits_by_step.")
        kilo = (float(row.get("instructions") or 0) / 1000.0) or 1.0
        if any("," in s for s in steps):
            cells = {tuple(reversed(s.split(",", 1))): s for s in steps}
            grow = sorted({r for r, _ in cells}, key=_level)
            gcol = sorted({c for _, c in cells}, key=_level)
        else:
            cells = {("", s): s for s in steps}
            grow, gcol = [""], sorted(steps, key=_level)
        grid = np.full((len(grow), len(gcol)), np.nan)
        for (r, c), s in cells.items():
            grid[grow.index(r), gcol.index(c)] = steps[s] / kilo
        top = float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0
        ax.imshow(np.ma.masked_invalid(grid), cmap="Blues", aspect="auto", vmin=0, vmax=top)
        for (r, c), s in cells.items():
            i, j = grow.index(r), gcol.index(c)
            label = f"{grid[i, j]:.3g}"
            if s in hits:
                label += f"\n{100.0 * hits[s] / steps[s]:.0f}% hit"
            ax.text(
                j,
                i,
                label,
                ha="center",
                va="center",
                fontsize="x-small",
                color="white" if grid[i, j] > 0.6 * top else "black",
            )
        # Square cells: a native walk is a strip, a 2D walk a square.
        ax.set_box_aspect(len(grow) / max(1, len(gcol)))
        ax.set_xticks(range(len(gcol)), gcol)
        ax.set_yticks(range(len(grow)), grow)
        ax.set_title(title, fontsize="small")
        ax.set_xlabel("nested step" if grow != [""] else "level")
        ax.tick_params(length=0)
    fig.suptitle(
        "walk references per 1,000 instructions by step", fontsize="medium", fontweight="bold"
    )
    return fig


def breakdown(
    rs: ResultSet, label_keys: Sequence[str] | None = None, title: str | None = None
) -> Figure:
    """Cycles by cause (every ``cycles_by_cause.*`` column), one stacked bar per point, as
    shares of its cycles; each bar's total is written at its end."""
    df = rs.ok
    causes = [c for c in df.columns if c.startswith("cycles_by_cause.")]
    if not causes or df.empty:
        raise ValueError(f"{rs.source or 'the results'} have no cycles_by_cause columns")
    keys = list(label_keys if label_keys is not None else rs.label_keys()) or ["point_key"]
    keys = [k for k in keys if k in df.columns] or ["point_key"]
    labels = [_label(r, keys) for _, r in df.iterrows()]
    fig, (ax,) = _figure(1, width=8.0, height=max(2.0, 0.35 * len(df) + 1.2))
    totals = df[causes].fillna(0).sum(axis=1).replace(0, math.nan)
    left = [0.0] * len(df)
    for c in causes:
        share = (100.0 * df[c].fillna(0) / totals).fillna(0).tolist()
        ax.barh(range(len(df)), share, left=left, label=c.split(".", 1)[1])
        left = [a + b for a, b in zip(left, share, strict=False)]
    for i, (_, r) in enumerate(df.iterrows()):
        ax.text(
            101,
            i,
            f"{human(float(r.get('cycles') or totals.iloc[i]))} cycles",
            va="center",
            fontsize="x-small",
        )
    ax.set_yticks(range(len(df)), labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, 120)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel("share of cycles (%)")
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(
        ncols=min(len(causes), 5),
        loc="lower center",
        bbox_to_anchor=(0.45, 1.0),
        fontsize="small",
        frameon=False,
    )
    _title(fig, title or "cycles by cause")
    return fig


def timeline_records(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``timeline`` of a result or of a flattened row (stored as JSON text), or []."""
    t = row.get("timeline")
    if isinstance(t, str):
        try:
            t = json.loads(t)
        except json.JSONDecodeError:
            return []
    if not isinstance(t, list):
        return []
    return [w for w in t if isinstance(w, Mapping)]


def timeline(row: Mapping[str, Any], title: str | None = None) -> Figure:
    """An adaptive run: CPI of each window against instructions retired, the window's paging
    mode as the band behind it, each mode switch as a dashed line.

    ``row["timeline"]`` is a list of windows ``{"window", "instructions", "cycles", "mode"}``
    (instructions and cycles of that window; other keys are ignored)."""
    windows = timeline_records(row)
    if not windows:
        raise ValueError("the result has no timeline (adaptive runs record one)")
    for i, w in enumerate(windows):
        missing = [k for k in ("instructions", "cycles", "mode") if k not in w]
        if missing:
            raise ValueError(f"timeline window {w.get('window', i)} lacks {', '.join(missing)}")
    fig, (ax,) = _figure(1, width=8.0, height=3.6)
    start = 0.0
    xs, cpis = [], []
    seen: set[str] = set()
    prev = None
    for w in windows:
        n = float(w["instructions"])
        mode = str(w["mode"])
        color = MODE_COLORS.get(mode, "#2ca02c")
        ax.axvspan(
            start,
            start + n,
            color=color,
            alpha=0.15,
            linewidth=0,
            label=mode if mode not in seen else None,
        )
        seen.add(mode)
        if prev is not None and mode != prev:
            ax.axvline(start, color="black", linestyle="--", linewidth=0.7)
        prev = mode
        xs += [start, start + n]
        cpi = float(w["cycles"]) / n if n else math.nan
        cpis += [cpi, cpi]
        start += n
    ax.plot(xs, cpis, color="black", linewidth=1.2, label="CPI")
    ax.set_xlim(0, start)
    _style(ax, "instructions retired", "CPI (cycles / instruction) per window")
    from matplotlib.ticker import EngFormatter

    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.legend(fontsize="small", loc="upper right")
    switches = sum(1 for a, b in itertools.pairwise(windows) if a["mode"] != b["mode"])
    _title(fig, title or f"timeline: {len(windows)} windows, {switches} mode switches")
    return fig
