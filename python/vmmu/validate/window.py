"""The core's window, measured on the machine ``vmmu validate host`` runs on.

The window probe (``window.c`` beside this file, docs/validation.md) times two independent
pointer chases whose loads are ``gap`` filler instructions apart, for gaps from 8 to 640
instructions: the two misses overlap while both loads fit in the window, and an iteration's
time doubles at the gap where they no longer do (Wong, "Measuring reorder buffer capacity",
2013). The filler picks the limit: NOPs the reorder buffer, ``mov $1, %r8`` the integer
registers, ``cmp %r8, %r9`` the flags registers (:data:`FILLERS`).
:func:`read` finds that step in the samples' minimum (the window the core gives the probe
when it has the core to itself) and, from the samples' mean between half that window and the
window, the share of the time the window was halved: a core with simultaneous
multithreading partitions its reorder buffer while its second thread runs (AMD Zen: the
retire and store queues, statically; Intel: the reorder buffer and load and store buffers),
and a cloud guest cannot see what its vCPU's sibling runs.

The check predicts for each window state the measurement shows: ``full`` (the preset as it
is) and ``half`` (:data:`HALVED_BY_SIBLING` halved, :func:`half_sets`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vmmu import api
from vmmu.validate import build

#: The window states a check can predict for.
WINDOWS: tuple[str, ...] = ("full", "half")
#: The window probe's fillers and the limit each meets first: NOPs take a reorder-buffer
#: entry only, the moves an integer register as well, the compares a flags register.
FILLERS: dict[str, str] = {
    "nop": "reorder buffer",
    "mov": "integer registers",
    "cmp": "flags registers",
}
#: The core fields a running sibling thread halves (partitioned between the two threads on
#: both AMD Zen and Intel cores; Intel also partitions the load buffer, kept whole here).
HALVED_BY_SIBLING: tuple[str, ...] = ("rob", "store_queue")
#: The window probe's region: far beyond any preset's last-level cache, so both chases miss.
FOOTPRINT = 1 << 30
#: Iterations per sample (about 3–8 ms per sample on a machine of today: short, so that
#: a sample more often falls in one window state than across two).
ITERATIONS = 20_000
#: Samples per gap and sitting, each round in a newly shuffled order of gaps.
REPS = 16
#: A window state counts as seen when the share of time in it is at least this.
SHARE_SEEN = 0.1
#: A gap is slow when its fastest sample takes this many times the smallest gaps' (one
#: latency against two, halfway).
SLOW = 1.5
#: The step is the first gap that is slow with the next ones: a run this long.
STEP_RUN = 4


def source() -> Path:
    """The window probe's C source."""
    return Path(__file__).resolve().parent / "window.c"


def build_window(cache: Path | None = None) -> Path:
    """The window probe built with ``gcc -O2`` (:func:`.build.build`)."""
    return build.build(source(), [source().parent / "probes.h"], cache)


def run_window(
    binary: Path,
    footprint: int = FOOTPRINT,
    pages: str = "2m",
    iterations: int = ITERATIONS,
    reps: int = REPS,
    filler: str = "nop",
) -> dict[str, Any]:
    """Runs the window probe once with ``filler`` (:data:`FILLERS`) and returns its JSON:
    ``gaps`` and, per gap, ``ns`` (each sample's ns per iteration), with the region's page
    sizes as the kernel gave them."""
    args = ["--footprint", str(footprint), "--pages", pages, "--filler", filler]
    args += ["--iterations", str(iterations), "--reps", str(reps)]
    out = build.run_json([str(binary), *args], f"the window probe ({' '.join(args)})")
    region = out["region_kb"]
    out["huge_share"] = out["anon_huge_kb"] / region if region else 0.0
    return out


def _line(points: Sequence[tuple[int, float]]) -> tuple[float, float] | None:
    """Least-squares slope and intercept of (gap, ns) points; ``None`` for fewer than two."""
    if len(points) < 2:
        return None
    fit = statistics.linear_regression([g for g, _ in points], [t for _, t in points])
    return fit.slope, fit.intercept


def read(gaps: Sequence[int], samples: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The window the samples show (``found``), or ``found`` false with ``why``.

    ``window``: the first gap that is slow (its fastest sample :data:`SLOW` times the
    smallest gaps') with the :data:`STEP_RUN` - 1 gaps after it, plus 1 (the window holds the
    two loads and the gap between them while ``gap + 2`` entries fit; ``window_range`` is
    what the gaps allow). ``fast_ns`` and ``slow_ns``: the fastest iteration of the smallest
    gaps (one miss) and of the gaps just beyond the step (two). ``half_share``: the share of
    the time the loads half a window to a window apart did not overlap, each gap's mean
    placed between the line through the always-overlapping gaps' means (below half the
    window) and the line through the never-overlapping ones' (beyond the window), so the
    NOPs' own dispatch time cancels; ``half_share_by_zone`` the same for the zone's lower
    and upper halves, about equal when the window is either whole or halved (as a
    partitioned one is) and rising when a sibling takes a varying part of it. Shares are
    clipped to 0..1."""
    if len(gaps) != len(samples) or len(gaps) < 8 or any(not s for s in samples):
        return {"found": False, "why": "too few gaps or samples to read a step from"}
    mins = [min(s) for s in samples]
    fast = statistics.median(mins[:3])
    slow_gap = [m > SLOW * fast for m in mins]
    step = next(
        (i for i in range(1, len(gaps) - STEP_RUN + 1) if all(slow_gap[i : i + STEP_RUN])),
        None,
    )
    if step is None:
        return {
            "found": False,
            "why": f"no step: no {STEP_RUN} gaps in a row took {SLOW}× the smallest gaps' "
            f"{fast:.0f} ns; the loads' misses did not overlap or were too short to tell",
        }
    window = gaps[step] + 1
    slow = statistics.median(mins[step : step + STEP_RUN])
    means = [(g, statistics.fmean(s)) for g, s in zip(gaps, samples, strict=True)]
    below = _line([(g, t) for g, t in means if g + 2 <= window / 2 - 8])
    beyond = _line([(g, t) for g, t in means if g + 2 >= window + 8])
    zone = [(g, t) for g, t in means if window / 2 + 8 <= g + 2 <= window - 8]
    shares = []
    if below and beyond:
        for g, t in zone:
            lo, hi = below[0] * g + below[1], beyond[0] * g + beyond[1]
            if hi > lo:
                shares.append(min(1.0, max(0.0, (t - lo) / (hi - lo))))
    half = len(shares) // 2
    return {
        "found": True,
        "window": window,
        "window_range": [gaps[step - 1] + 2, window],
        "fast_ns": fast,
        "slow_ns": slow,
        "half_share": statistics.fmean(shares) if shares else None,
        "half_share_by_zone": (
            [statistics.fmean(shares[:half]), statistics.fmean(shares[half:])] if half else None
        ),
    }


def read_runs(runs: Sequence[dict[str, Any]], filler: str = "nop") -> dict[str, Any]:
    """:func:`read` of every sitting's samples of ``filler`` together (``runs``:
    :func:`run_window`'s outputs; one without a ``filler`` is of NOPs)."""
    runs = [r for r in runs if r.get("filler", "nop") == filler]
    if not runs:
        return {"found": False, "why": f"no sitting with the {filler} filler"}
    gaps = runs[0]["gaps"]
    if any(r["gaps"] != gaps for r in runs):
        return {"found": False, "why": "the sittings timed different gaps"}
    return read(gaps, [[x for r in runs for x in r["ns"][i]] for i in range(len(gaps))])


def states(reading: dict[str, Any] | None) -> list[str]:
    """The window states to predict for: ``full`` unless the window was halved nearly all the
    time, ``half`` when it was for at least :data:`SHARE_SEEN` of it; ``["full"]`` when
    nothing was measured or read."""
    share = (reading or {}).get("half_share")
    if share is None:
        return ["full"]
    seen = [w for w, s in (("full", 1 - share), ("half", share)) if s >= SHARE_SEEN]
    return seen or ["full"]


def half_sets(machine: str, sets: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``--set`` pairs that halve :data:`HALVED_BY_SIBLING` of ``machine`` with ``sets``
    applied: the window a thread has while its sibling runs."""
    core = api.config_dict(machine, set=list(sets))["machine"]["core"]
    out = []
    for field in HALVED_BY_SIBLING:
        value = core.get(field)
        if value:
            out.append((f"machine.core.{field}", max(1, int(value) // 2)))
    return out
