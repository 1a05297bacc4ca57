"""The headline of a comparison: the rows ``vmmu compare`` prints, one column per result, and
an HTML report's comparison table shows (:mod:`vmmu.report`), defined once in :data:`ROWS`.

Each row reads one result at a time, flattened to dotted keys (:meth:`vmmu.Result.flat`, or a
row of a sweep database): a single key, a family of keys (``tlb.l1d.misses``,
``tlb.l2.misses``, …: one line per member any result has), or a few keys a cell combines. A
section heads the rows under it and is left out, with them, when no result has any. Every key
is one of the result schema (docs/statistics.md); :func:`result_keys` lists them, and the tests
check each against real results of every mode.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vmmu._format import DASH, human, missing, number, pct, ratio, signed_pct

TLB_ORDER = ("l1d", "l1i", "l2", "l2i")
SERVED_ORDER = ("pwc", "l1", "l2", "l3", "dram")
CAUSE_ORDER = (
    "base",
    "translation",
    "data",
    "guest_kernel",
    "hypervisor",
    "mode_switch",
    "shootdown_wait",
    "pager_lock_wait",
)
WALK_CACHE_ORDER = ("pwc", "ntlb", "psc")

#: The rows of a multi-vCPU run's ``shootdowns``: (key, label).
SHOOTDOWN_ROWS = (
    ("shootdowns", "shootdowns"),
    ("ipis", "IPIs"),
    ("remote_invlpgs", "remote INVLPGs"),
    ("remote_context_flushes", "remote flushes"),
    ("handler_cycles", "handler cycles"),
    ("wait_cycles", "wait cycles"),
    ("remote_flushes", "shadow remote flushes"),
)

Flat = Mapping[str, Any]


def get(r: Flat, key: str) -> Any:
    """The value of ``key`` in flat result ``r``; None when it has none."""
    v = r.get(key)
    return None if missing(v) else v


def ordered(keys: Iterable[str], order: Iterable[str]) -> list[str]:
    """``keys`` with those in ``order`` first, in that order, the rest sorted."""
    keys = list(keys)
    head = [k for k in order if k in keys]
    return head + sorted(k for k in keys if k not in head)


def _share(r: Flat, key: str) -> str:
    """A count of cycles and its share of the run: ``1.23M (4.5%)``."""
    v = get(r, key)
    return DASH if v is None else f"{human(v)} ({pct(v, get(r, 'cycles'))})"


def _exits(r: Flat, reason: str | None) -> str:
    """Exits of ``reason`` (all reasons for None) and their share of the run's cycles."""
    reasons = _members([r], "exits.", ".count") if reason is None else [reason]
    count = sum(get(r, f"exits.{k}.count") or 0 for k in reasons)
    cycles = sum(get(r, f"exits.{k}.cycles") or 0 for k in reasons)
    return f"{number(count)} ({pct(cycles, get(r, 'cycles'))})" if count else "0"


def _windows(r: Flat) -> str:
    t = get(r, "timeline")
    if isinstance(t, str):
        t = json.loads(t)
    return number(len(t)) if t else DASH


def _members(results: Sequence[Flat], prefix: str, suffix: str = "") -> list[str]:
    """The names ``X`` of keys ``prefix X suffix`` any result has a value for."""
    out: dict[str, None] = {}
    for r in results:
        for k, v in r.items():
            if k.startswith(prefix) and k.endswith(suffix) and not missing(v):
                name = k[len(prefix) : len(k) - len(suffix)]
                if name and "." not in name:
                    out[name] = None
    return list(out)


@dataclass(frozen=True)
class Row:
    """One row: ``label``, a cell of each result, a style (``bold``, ``dim``)."""

    label: str
    cell: Callable[[Flat], str]
    #: Keys of the schema the row reads (a family's members as ``prefix*suffix``).
    keys: tuple[str, ...]
    style: str | None = None
    #: Shown only when some result has a value for its first key.
    optional: bool = False


@dataclass(frozen=True)
class Family:
    """One row per member of a family of keys ``prefix NAME suffix``, in ``order``; ``keep``
    picks the members shown (default: those any result has)."""

    label: str  # with {name}
    prefix: str
    suffix: str
    order: tuple[str, ...] = ()
    cell: Callable[[Flat, str], str] | None = None
    keep: Callable[[Sequence[Flat], str], bool] | None = None
    #: Further keys the cells read, for :func:`keys`.
    reads: tuple[str, ...] = ()
    #: Whether a member's name is shown with spaces for underscores (``guest kernel``).
    spaced: bool = False

    def names(self, results: Sequence[Flat]) -> list[str]:
        names = ordered(_members(results, self.prefix, self.suffix), self.order)
        return [n for n in names if self.keep is None or self.keep(results, n)]

    def row(self, name: str) -> Row:
        key = f"{self.prefix}{name}{self.suffix}"
        cell = self.cell or (lambda r, _: number(get(r, key)))
        shown = name.replace("_", " ") if self.spaced else name
        return Row(self.label.format(name=shown), lambda r: cell(r, name), (key,))


@dataclass(frozen=True)
class Section:
    """A heading, then its rows; left out when no result has a value for any of ``when``'s
    keys (with ``nonzero``, a value other than 0 or empty)."""

    label: str
    rows: tuple[Row | Family, ...]
    when: tuple[str, ...] = ()
    nonzero: bool = False


def _walk_cache_used(results: Sequence[Flat], name: str) -> bool:
    return any(
        get(r, f"walk_caches.{name}.hits") or get(r, f"walk_caches.{name}.misses") for r in results
    )


def _cause_shown(results: Sequence[Flat], name: str) -> bool:
    return name in CAUSE_ORDER[:5] or any(get(r, f"cycles_by_cause.{name}") for r in results)


def _value(key: str) -> Callable[[Flat], str]:
    return lambda r: number(get(r, key))


#: The headline, top to bottom. ``@overhead`` is the overhead against native, which the
#: caller computes (it depends on which result is native).
ROWS: tuple[Row | Family | Section, ...] = (
    Row("cycles", _value("cycles"), ("cycles",), "bold"),
    Row("overhead vs native", lambda r: signed_pct(get(r, "@overhead")), ("@overhead",), "bold"),
    Row(
        "elapsed (slowest vCPU)",
        _value("elapsed_cycles"),
        ("elapsed_cycles",),
        "bold",
        optional=True,
    ),
    Row("CPI", _value("cpi"), ("cpi",)),
    Row("instructions", _value("instructions"), ("instructions",)),
    Row("memory refs", _value("memory_refs"), ("memory_refs",)),
    Section("TLB misses", (Family("  {name}", "tlb.", ".misses", TLB_ORDER),), ("tlb.*.misses",)),
    Section(
        "page walks",
        (
            Row("  walks", _value("walks"), ("walks",)),
            Row("  walk refs", _value("walk_refs"), ("walk_refs",)),
            Row(
                "  refs per walk",
                lambda r: ratio(get(r, "walk_refs"), get(r, "walks")),
                ("walk_refs", "walks"),
            ),
            Family("  served by {name}", "walk_refs_served_by.", "", SERVED_ORDER),
            Family(
                "  {name} hits",
                "walk_caches.",
                ".hits",
                WALK_CACHE_ORDER,
                keep=_walk_cache_used,
                reads=("walk_caches.*.misses",),
            ),
            Row("  D-assists", _value("d_assists"), ("d_assists",)),
        ),
    ),
    Section(
        "cycles by cause",
        (
            Family(
                "  {name}",
                "cycles_by_cause.",
                "",
                CAUSE_ORDER,
                cell=lambda r, n: _share(r, f"cycles_by_cause.{n}"),
                keep=_cause_shown,
                spaced=True,
            ),
        ),
        ("cycles_by_cause.*",),
    ),
    Section(
        "TLB shootdowns",
        tuple(
            Row(f"  {label}", _value(f"shootdowns.{key}"), (f"shootdowns.{key}",))
            for key, label in SHOOTDOWN_ROWS
        ),
        ("shootdowns.*",),
    ),
    Section(
        "exits (% cycles)",
        (
            Row("  all", lambda r: _exits(r, None), ("exits.*.count", "exits.*.cycles")),
            Family("  {name}", "exits.", ".count", cell=_exits),
        ),
        ("exits.*.count",),
    ),
    Section(
        "paging modes",
        (
            Row("  mode switches", _value("mode_switches"), ("mode_switches",)),
            Row(
                "  switch cycles",
                lambda r: _share(r, "cycles_by_cause.mode_switch"),
                ("cycles_by_cause.mode_switch",),
            ),
            *(
                Row(
                    f"  instructions {m}",
                    lambda r, m=m: pct(
                        get(r, f"instructions_in_mode.{m}") or 0, get(r, "instructions")
                    ),
                    (f"instructions_in_mode.{m}",),
                )
                for m in ("shadow", "nested")
            ),
            Row("  windows", _windows, ("timeline",)),
        ),
        ("mode_switches", "policy"),
        nonzero=True,
    ),
    Row("sim seconds", _value("sim.seconds"), ("sim.seconds",), "dim"),
)


@dataclass(frozen=True)
class Line:
    """A line of the headline as shown: a section's heading has no cells."""

    label: str
    cells: list[str]
    style: str | None = None
    section: bool = False


def _present(results: Sequence[Flat], key: str, nonzero: bool) -> bool:
    """Whether any result has a value for ``key`` (with ``nonzero``, other than 0 or empty); a
    ``*`` stands for any one name."""
    if "*" in key:
        prefix, suffix = key.split("*")
        found = [r[k] for r in results for k in r if k.startswith(prefix) and k.endswith(suffix)]
    else:
        found = [r.get(key) for r in results]
    return any((bool(v) if nonzero else True) for v in found if not missing(v))


def _rows(items: Iterable[Row | Family], results: Sequence[Flat]) -> list[Line]:
    out = []
    for item in items:
        rows = [item.row(n) for n in item.names(results)] if isinstance(item, Family) else [item]
        for row in rows:
            if row.optional and not any(get(r, row.keys[0]) is not None for r in results):
                continue
            out.append(Line(row.label, [row.cell(r) for r in results], row.style))
    return out


def lines(results: Sequence[Flat], overheads: Sequence[float | None]) -> list[Line]:
    """The headline of ``results`` (flat), with each one's overhead against native."""
    results = [{**r, "@overhead": o} for r, o in zip(results, overheads, strict=True)]
    out: list[Line] = []
    for item in ROWS:
        if isinstance(item, Section):
            if item.when and not any(_present(results, k, item.nonzero) for k in item.when):
                continue
            out.append(Line(item.label, [], section=True))
            out.extend(_rows(item.rows, results))
        else:
            out.extend(_rows([item], results))
    return out


def result_keys() -> list[str]:
    """Every result key the headline reads; ``*`` stands for a family's member names."""
    out: list[str] = []

    def add(item: Row | Family) -> None:
        if isinstance(item, Family):
            out.append(f"{item.prefix}*{item.suffix}")
            out.extend(item.reads)
        else:
            out.extend(item.keys)

    for item in ROWS:
        if isinstance(item, Section):
            out.extend(item.when)
            for sub in item.rows:
                add(sub)
        else:
            add(item)
    return [k for k in dict.fromkeys(out) if not k.startswith("@")]
