"""Rich tables for results (``vmmu run``, ``vmmu compare``) and listings.

Every figure shown is a field of the result schema ``vmmu.result/2`` (docs/statistics.md);
missing fields are shown as ``–`` or their section is left out, so older or partial results
still render.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from rich import box
from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from vmmu import headline
from vmmu._format import DASH, human, number, pct, ratio, signed_pct
from vmmu.api import Result
from vmmu.headline import (
    CAUSE_ORDER,
    SERVED_ORDER,
    SHOOTDOWN_ROWS,
    TLB_ORDER,
    WALK_CACHE_ORDER,
    ordered,
)


def _get(d: Mapping[str, Any] | None, *path: str) -> Any:
    for key in path:
        if not isinstance(d, Mapping) or key not in d:
            return None
        d = d[key]
    return d


def _table(title: str | Text | None = None, **kw: Any) -> Table:
    return Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        **kw,
    )


def _hit_miss_table(
    title: str, stats: Mapping[str, Any] | None, order: Iterable[str]
) -> list[Table]:
    """A table of ``{name: {"hits", "misses"}}`` with miss rates; empty when there is none."""
    if not stats:
        return []
    t = _table(title)
    t.add_column("")
    for c in ("hits", "misses", "miss rate"):
        t.add_column(c, justify="right")
    for name in ordered(stats, order):
        h, m = _get(stats, name, "hits"), _get(stats, name, "misses")
        t.add_row(
            name, number(h), number(m), pct(m, (h or 0) + (m or 0)) if m is not None else DASH
        )
    return [t]


def _refs_per_walk(r: Mapping[str, Any]) -> str:
    return ratio(r.get("walk_refs"), r.get("walks"))


def _level(name: str) -> tuple[int, int]:
    """Sort key for walk-step names: highest level first, then ``G`` / ``gPA`` last."""
    m = re.fullmatch(r"[gn]?L(\d)", name)
    return (0, -int(m.group(1))) if m else (1, 0)


def walk_step_grid(steps: Mapping[str, int]) -> Table | None:
    """The ``walk_refs_by_step`` counts as seed 002 Figure 1(b)'s grid: rows are the guest
    dimension (``gL4`` … ``gL1``, ``gPA``), columns the nested dimension (``nL4`` … ``nL1``,
    ``G``); a native result is one row ``L4`` … ``L1``."""
    if not steps:
        return None
    if not any("," in k for k in steps):
        t = _table("walk refs by step")
        cols = sorted(steps, key=_level)
        for c in cols:
            t.add_column(c, justify="right")
        t.add_row(*(number(steps[c]) for c in cols))
        return t
    cells: dict[tuple[str, str], int] = {}
    for key, n in steps.items():
        col, _, row = key.partition(",")
        cells[(row, col)] = n
    rows = sorted({r for r, _ in cells}, key=_level)
    cols = sorted({c for _, c in cells}, key=_level)
    t = _table("walk refs by step (row: guest step, column: nested step)")
    t.add_column("", style="bold")
    for c in cols:
        t.add_column(c, justify="right")
    t.add_column("total", justify="right", style="bold")
    for row in rows:
        vals = [cells.get((row, c)) for c in cols]
        t.add_row(
            row,
            *(number(v) if v else "·" for v in vals),
            number(sum(v or 0 for v in vals)),
        )
    t.add_row(
        "total",
        *(number(sum(cells.get((r, c), 0) for r in rows)) for c in cols),
        number(sum(cells.values())),
        style="bold",
    )
    return t


def _heading(r: Mapping[str, Any], mode: bool = True) -> Text:
    head = Text()
    head.append(f"{r.get('workload', '?')}", style="bold")
    head.append(f"  machine {r.get('machine', '?')}")
    if mode:
        head.append(f"  mode {r.get('mode', '?')}")
    if r.get("pwc_design"):
        head.append(f"  pwc {r['pwc_design']}")
    return head


def _summary(r: Mapping[str, Any]) -> Table:
    t = _table("summary", show_header=False)
    t.add_column("")
    t.add_column("", justify="right")
    for label, value in (
        ("cycles", number(r.get("cycles"))),
        ("CPI", number(r.get("cpi"))),
        ("instructions", number(r.get("instructions"))),
        ("memory refs", number(r.get("memory_refs"))),
        ("instruction fetches", number(r.get("fetches"))),
        ("page walks", number(r.get("walks"))),
        ("walk refs", number(r.get("walk_refs"))),
        ("walk refs per walk", _refs_per_walk(r)),
        ("faulting walks", number(r.get("walk_faults"))),
        ("D-assist walks", number(r.get("d_assists"))),
        ("A/D-bit updates", number(r.get("ad_updates"))),
        ("guest page faults", number(r.get("page_faults"))),
        ("mode switches", number(r.get("mode_switches"))),
    ):
        if value != DASH:
            t.add_row(label, value)
    return t


def _shares(
    title: str,
    unit: str,
    counts: Mapping[str, Any],
    order: Iterable[str],
    total: float | None = None,
) -> Table:
    t = _table(title)
    t.add_column("")
    t.add_column(unit, justify="right")
    t.add_column("share", justify="right")
    if total is None:
        total = sum(v for v in counts.values() if isinstance(v, (int, float)))
    for name in ordered(counts, order):
        t.add_row(name.replace("_", " "), number(counts[name]), pct(counts[name], total))
    return t


def _used_walk_caches(r: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The page-walk caching structures the run looked up (``walk_caches``)."""
    caches = r.get("walk_caches") or {}
    return {
        name: hm
        for name, hm in caches.items()
        if isinstance(hm, Mapping) and (hm.get("hits") or hm.get("misses"))
    }


def _walk_caches(r: Mapping[str, Any]) -> list[Table]:
    return _hit_miss_table("page-walk caches", _used_walk_caches(r), WALK_CACHE_ORDER)


#: The per-vCPU columns of ``vmmu run``.
VCPU_COLUMNS = (
    ("cycles", "cycles"),
    ("idle_cycles", "idle"),
    ("instructions", "instr"),
    ("walks", "walks"),
    ("context_switches", "ctx sw"),
    ("migrations", "migr"),
    ("shootdowns", "shootdowns"),
    ("ipis_received", "IPIs in"),
    ("shootdown_handler_cycles", "handler cyc"),
    ("shootdown_wait_cycles", "wait cyc"),
)


def _vcpus(r: Mapping[str, Any]) -> list[Table]:
    vcpus = r.get("vcpus") or []
    if not vcpus:
        return []
    t = _table("vCPUs")
    t.add_column("vCPU")
    for _, label in VCPU_COLUMNS:
        t.add_column(label, justify="right")
    for v in vcpus:
        t.add_row(str(v.get("vcpu")), *(number(v.get(k)) for k, _ in VCPU_COLUMNS))
    tables = [t]
    sd = r.get("shootdowns") or {}
    if sd:
        tables.append(
            key_values({label: sd.get(k) for k, label in SHOOTDOWN_ROWS}, "TLB shootdowns")
        )
    return tables


def _exits(r: Mapping[str, Any]) -> list[Table]:
    exits = r.get("exits") or {}
    if not exits:
        return []
    t = _table("hypervisor exits")
    t.add_column("reason")
    t.add_column("count", justify="right")
    t.add_column("cycles", justify="right")
    t.add_column("share of run", justify="right")
    for reason in sorted(exits, key=lambda k: -(_get(exits, k, "cycles") or 0)):
        c = _get(exits, reason, "cycles")
        t.add_row(reason, number(_get(exits, reason, "count")), number(c), pct(c, r.get("cycles")))
    return [t]


#: Agile paging's policy counters, in display order (docs/model.md, "Agile paging").
AGILE_ROWS = (
    ("to_nested", "subtrees to nested"),
    ("to_shadow", "subtrees to shadow"),
    ("exits_avoided", "writes without exit"),
    ("scans", "dirty-bit scans"),
    ("nested_tables", "tables nested at end"),
)


def _agile(r: Mapping[str, Any]) -> list[Table]:
    agile = r.get("agile") or {}
    if not agile:
        return []
    policy = agile.get("policy") or {}
    walks = agile.get("walks_by_shadow_levels") or {}
    t = _table("agile walks by shadow levels")
    t.add_column("shadow levels")
    t.add_column("walks", justify="right")
    t.add_column("share", justify="right")
    total = sum(walks.values())
    for levels in sorted(walks, key=int):
        t.add_row(levels, number(walks[levels]), pct(walks[levels], total))
    return [key_values({label: policy.get(k) for k, label in AGILE_ROWS}, "agile policy"), t]


def result_tables(r: Mapping[str, Any]) -> RenderableType:
    """Everything ``vmmu run`` prints for one result, in rows of tables that sit side by side
    when the terminal is wide enough."""
    causes = r.get("cycles_by_cause") or {}
    served = r.get("walk_refs_served_by") or {}
    grid = walk_step_grid(r.get("walk_refs_by_step") or {})
    rows: list[list[RenderableType]] = [
        [_summary(r)]
        + (
            [_shares("cycles by cause", "cycles", causes, CAUSE_ORDER, r.get("cycles"))]
            if causes
            else []
        ),
        _hit_miss_table("TLBs", r.get("tlb"), TLB_ORDER)
        + _walk_caches(r)
        + _hit_miss_table("memory hierarchy", r.get("caches"), ("l1", "l2", "l3")),
        ([grid] if grid is not None else [])
        + ([_shares("walk refs served by", "refs", served, SERVED_ORDER)] if served else []),
        _exits(r) + _agile(r),
        _vcpus(r),
    ]
    parts: list[RenderableType] = [_heading(r), Text("")]
    for row in rows:
        if row:
            parts.append(Columns([Padding(x, (0, 0, 1, 0)) for x in row], padding=(0, 4)))
    parts.append(sim_line(r))
    return Group(*parts)


def sim_line(r: Mapping[str, Any]) -> Text:
    sim = r.get("sim") or {}
    events, secs, rate = sim.get("events"), sim.get("seconds"), sim.get("events_per_second")
    if events is None:
        return Text("")
    text = f"simulated {number(events)} events"
    if secs is not None:
        text += f" in {secs:.2f} s"
    if rate:
        text += f" ({rate / 1e6:.1f} M events/s)"
    return Text(text, style="dim")


def compare_table(results: Mapping[str, Mapping[str, Any]], over: Mapping[str, Any]) -> Table:
    """Modes side by side: one column per mode, one row per line of the headline
    (:mod:`vmmu.headline`)."""
    first = next(iter(results.values()))
    t = _table(_heading(first, mode=False))
    t.add_column("", no_wrap=True)
    modes = list(results)
    for m in modes:
        t.add_column(m, justify="right", style="bold" if m != "native" else None)
    flat = [Result(r).flat() for r in results.values()]
    for line in headline.lines(flat, [over.get(m) for m in modes]):
        if line.section:
            t.add_row(Text(line.label, style="bold underline"), *([""] * len(modes)))
        else:
            t.add_row(line.label, *line.cells, style=line.style)
    return t


def timeline_table(result: Mapping[str, Any], limit: int | None = None) -> Table:
    """An adaptive run's windows: one row per PMU window (``docs/statistics.md``)."""
    windows = result.get("timeline") or []
    policy = result.get("policy") or "?"
    t = _table(
        f"timeline — {policy}, {len(windows)} windows, {result.get('mode_switches', 0)} "
        "mode switches"
    )
    cols = [
        ("window", "window"),
        ("instructions", "instructions_end"),
        ("CPI", "cpi"),
        ("L2 TLB misses/kinstr", "tlb_misses_per_kinstr"),
        ("paging exits/kinstr", "paging_exits_per_kinstr"),
        ("mode", "mode"),
        ("state", "state"),
        ("threshold_vexit", "threshold_vexit"),
        ("threshold_tmiss", "threshold_tmiss"),
        ("switches", "switches"),
        ("decision", "decision"),
    ]
    for label, _ in cols:
        t.add_column(label, justify="left" if label in ("mode", "state", "decision") else "right")
    shown = windows if limit is None else windows[:limit]
    for w in shown:
        cells = []
        for _, key in cols:
            v = w.get(key)
            if v is None:
                cells.append(DASH)
            elif isinstance(v, float):
                cells.append(
                    f"{v:.3f}"
                    if key != "threshold_vexit" and key != "threshold_tmiss"
                    else human(v)
                )
            elif isinstance(v, int):
                cells.append(number(v))
            else:
                cells.append(str(v))
        style = "bold" if w.get("decision") not in ("stay", "end") else None
        t.add_row(*cells, style=style)
    if limit is not None and len(windows) > limit:
        t.add_row(f"… {len(windows) - limit} more", *([""] * (len(cols) - 1)), style="dim")
    return t


def key_values(d: Mapping[str, Any], title: str | None = None) -> Table:
    """A two-column table of a flat (or shallow) mapping."""
    t = _table(Text(title) if title else None, show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    for k, v in d.items():
        if isinstance(v, Mapping):
            v = ", ".join(f"{ik}={number(iv)}" for ik, iv in v.items())
        elif isinstance(v, list):
            v = " ".join(map(str, v))
        t.add_row(Text(str(k)), Text(number(v)))
    return t


def workload_catalog(catalog: Iterable[Mapping[str, Any]]) -> RenderableType:
    """``vmmu workloads``: each generator, its description, and its parameters with defaults
    (descriptions wrap in their own column)."""
    parts: list[RenderableType] = []
    for gen in catalog:
        head = Table.grid(padding=(0, 2))
        head.add_column(no_wrap=True, style="bold")
        head.add_column()
        head.add_row(Text(str(gen.get("name"))), Text(str(gen.get("description", ""))))
        params = Table.grid(padding=(0, 2))
        params.add_column(width=2)
        params.add_column(no_wrap=True, style="cyan")
        params.add_column(no_wrap=True)
        params.add_column()
        for p in gen.get("params") or []:
            params.add_row(
                "",
                Text(str(p.get("name"))),
                Text(f"={p.get('default', '')}"),
                Text(str(p.get("description", "")), style="dim"),
            )
        parts.extend([head, params, Text("")])
    parts.append(
        Text(
            "write NAME:k=v,... e.g. --workload random:footprint=1G,refs=1M "
            "(sizes take K, M, G suffixes)"
        )
    )
    return Group(*parts)


def print_to(console: Console, *renderables: RenderableType) -> None:
    for x in renderables:
        console.print(x)


def sensitivity_table(key: str, base: list[str], rows: list[Mapping[str, Any]]) -> Table:
    """One table per ``--sensitivity``: each value's overheads and whether the modes still
    rank as in the base comparison (``base``, fastest first)."""
    modes = list(rows[0]["cycles"]) if rows else []
    t = _table(f"overhead vs native at each {key}; base ranking {'<'.join(base)}")
    t.add_column("value")
    for m in modes:
        t.add_column(m, justify="right")
    t.add_column("ranking")
    t.add_column("holds", justify="center")
    for row in rows:
        same = row["ranking"] == base
        t.add_row(
            str(row["value"]),
            *(signed_pct(row["overhead"].get(m)) for m in modes),
            "<".join(row["ranking"]),
            Text("yes" if same else "no", style="green" if same else "red bold"),
        )
    return t


#: Names of the structures a sizing study sizes, as the table heads them.
SIZING_NAMES = {"l2tlb": "L2 TLB", "pwc": "page-walk cache", "ntlb": "Nested TLB"}


def sizing_table(study: Any) -> RenderableType:
    """A sizing study (:class:`vmmu.sizing_study.SizingStudy`): one row per size, the machine's
    own size marked, then how the study ran."""
    first = study.results[0]
    head = _heading(first)
    name = SIZING_NAMES.get(study.structure, study.structure)
    if study.array is not None:
        name += f" (array {study.array})"
    head.append(f"  sizing {name}")
    t = _table(head)
    separate = "cycles" in study.rows.columns
    cols = ["entries", "ways", "lookups", "misses", "miss rate", "MPKI"]
    if separate:
        cols += ["walks", "CPI"]
    for c in cols:
        t.add_column(c, justify="right")
    for row in study.rows.to_dict("records"):
        cells = [
            number(int(row["entries"])) + (" *" if row["configured"] else ""),
            number(int(row["ways"])),
            number(int(row["lookups"])),
            number(int(row["misses"])),
            pct(row["misses"], row["lookups"]),
            f"{row['mpki']:.3f}",
        ]
        if separate:
            cells += [number(int(row["walks"])), f"{row['cpi']:.3f}"]
        t.add_row(*cells, style="bold" if row["configured"] else None)
    note = Text(f"method: {study.method} — {study.reason}", style="dim")
    if any(study.rows["configured"]):
        note.append("\n* the machine's own size", style="dim")
    return Group(t, note)
