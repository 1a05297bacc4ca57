"""The recorded suite in the reproductions: the traces of the suite's entries that stand for a
paper's workloads, at the run's scale (``full``; ``small`` with ``--quick``), found in the
suite's cache (``$VMMU_SUITE_CACHE``, docs/workloads.md "The recorded suite") and never
recorded here; what each one is, computed from its recording; and the row a workload gets when
its trace is not recorded, so no recorded row is left out silently.

The entries run unchanged: their sizes come from their class and the machine (the suite's
definition), nothing is moved toward a paper's number, and each run's parameters are printed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vmmu import suite
from vmmu.repro._claims import Claims
from vmmu.repro._run import Context, Job, Measured, System
from vmmu.suite import cache, driver

#: The word that ends the key part of every row read from a recorded trace, or saying one is
#: not recorded (``swim/recorded``, ``t1/tlb_misses/IntCpu/recorded``,
#: ``swim/recorded/swim``): such a row depends on what the suite's cache holds.
RECORDED = "recorded"


def key(base: str) -> str:
    """The key of ``base``'s row on the recorded programs: ``BASE/recorded``."""
    return f"{base}/{RECORDED}"


def reads_cache(row_key: str) -> bool:
    """Whether the row keyed ``row_key`` depends on the suite's cache (:data:`RECORDED`)."""
    return f"/{RECORDED}" in row_key


def scale(ctx: Context) -> str:
    """The suite scale a reproduction uses: ``small`` with ``--quick``, else ``full``."""
    return "small" if ctx.quick else "full"


@dataclass(frozen=True)
class Recorded:
    """One entry of the suite at one scale: its trace and its recording's measurements
    (``meta``: instructions, footprint, misses per 100K instructions), or ``trace`` None when
    the cache does not hold it (``state`` says why)."""

    name: str
    scale: str
    state: str
    trace: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def command(self) -> str:
        """What records it."""
        return f"vmmu suite record {self.name} --scale {self.scale}"

    @property
    def missing(self) -> str:
        """The text of a row this entry cannot fill."""
        return f"not recorded: {self.command}"

    def about(self) -> str:
        """What the recording is, from its own measurements: ``redis (full): 166 TLB misses
        per 100K instructions natively on bhargava08, a 427 MiB footprint, 3,375 M
        instructions``."""
        m = self.meta
        return (
            f"{self.name} ({self.scale}): {m['misses_per_100k']:.1f} TLB misses per 100K "
            f"instructions natively on {m['machine']}, a {m['footprint_bytes'] / (1 << 20):,.0f} "
            f"MiB footprint, {m['instructions'] / 1e6:,.0f} M instructions"
        )

    def warmup(self, most: int) -> int:
        """References to simulate first and leave out: ``most``, at most a tenth of the
        trace (a small-scale trace is shorter than a full one's warm-up)."""
        return min(most, int(self.meta.get("refs", 0)) // 10)


def find(ctx: Context, names: Iterable[str]) -> dict[str, Recorded]:
    """The entries ``names`` at ``ctx``'s scale, as the cache holds them (none recorded here)."""
    sc = scale(ctx)
    root = cache.cache_dir()
    out = {}
    for entry in suite.by_name(list(dict.fromkeys(names))):
        st = driver.status(entry, sc, root)
        if st["state"] == "recorded":
            out[entry.name] = Recorded(entry.name, sc, "recorded", str(st["trace"]), st["meta"])
        else:
            out[entry.name] = Recorded(entry.name, sc, st["state"])
    return out


def run_whole(
    ctx: Context, rows: Mapping[str, str], systems: Callable[[str], Mapping[str, System]]
) -> tuple[dict[str, Recorded], dict[str, Recorded], dict[str, Measured]]:
    """Finds the entry of each row (``rows``: row key → entry name) and runs each recorded
    trace whole, start-up included, on every system of ``systems(row)`` (jobs
    ``ROW.recorded/MODE``); returns every entry by name, the rows whose trace is recorded, and
    the measurements."""
    recs = find(ctx, rows.values())
    have = {k: recs[n] for k, n in rows.items() if recs[n].trace is not None}
    m = ctx.measure(
        Job(f"{k}.recorded/{mode}", s, trace=r.trace)
        for k, r in have.items()
        for mode, s in systems(k).items()
    )
    return recs, have, m


def not_recorded(c: Claims, base: str, claim: str, paper: str, recs: Iterable[Recorded]) -> None:
    """A row for each of ``recs`` whose trace is missing (key ``BASE/recorded/NAME``), naming
    the command that records it."""
    for r in recs:
        if r.trace is None:
            c.not_simulated(f"{key(base)}/{r.name}", f"{claim}: {r.name}", paper, r.missing)


def describe(recs: Iterable[Recorded]) -> str:
    """The setup line of the recorded entries: each with its trace, or the command that
    records it."""
    parts = []
    for r in recs:
        if r.trace is None:
            parts.append(f"{r.name} ({r.missing})")
        else:
            parts.append(f"{r.about()}; {r.trace}")
    return "; ".join(parts) or "none"
