"""The recorded real-program suite: real programs, one or more per workload class of seed
002's Table 1 (MiscServer, WebServer, JavaServer, IntCpu, FpCpu), each installed from Debian
packages or built from ``tools/suite/src``, driven by an input the suite generates from a seed,
and recorded under ``vmmu record`` at a ``small`` or a ``full`` scale into a content-addressed
cache (docs/workloads.md, "The recorded suite"; docs/cli.md, ``vmmu suite``).

>>> from vmmu import suite
>>> path = suite.trace("swim", "small")          # records it first if the cache lacks it
>>> suite.table("small")[0]["misses_per_100k"]   # one row per entry, None until recorded
"""

from __future__ import annotations

import os
from pathlib import Path

from vmmu.suite import cache, driver
from vmmu.suite.driver import MACHINE, SuiteError
from vmmu.suite.entries import CLASSES, ENTRIES, SCALES, Entry, by_name
from vmmu.suite.paper import class_figure

__all__ = [
    "CLASSES",
    "ENTRIES",
    "MACHINE",
    "SCALES",
    "Entry",
    "SuiteError",
    "by_name",
    "class_figure",
    "table",
    "trace",
]


def trace(
    name: str,
    scale: str = "small",
    cache_dir: str | os.PathLike | None = None,
    record: bool = True,
    progress: driver.Progress | None = None,
) -> Path:
    """The trace of entry ``name`` at ``scale``, recorded first when the cache lacks it (and
    ``record``; else a :class:`SuiteError` saying it is not recorded)."""
    (entry,) = by_name([name])
    root = cache.cache_dir(cache_dir)
    if not record:
        st = driver.status(entry, scale, root)
        if st["state"] != "recorded":
            raise SuiteError(
                f"{name} ({scale}) is not recorded ({st['state']}): vmmu suite record {name} "
                f"--scale {scale}"
            )
        return Path(st["meta"]["trace"])
    meta = driver.record(entry, scale, root, progress or (lambda _s, _p: None))
    return Path(meta["trace"])


def table(scale: str = "small", cache_dir: str | os.PathLike | None = None) -> list[dict]:
    """One row per entry at ``scale`` (what ``vmmu suite list --json`` prints): its
    definition, the expected footprint, and the measured figures (``None`` until recorded)
    beside the paper's figure for its class."""
    root = cache.cache_dir(cache_dir)
    rows = []
    for e in ENTRIES:
        st = driver.status(e, scale, root)
        meta = st["meta"] or {}
        rows.append(
            {
                "name": e.name,
                "class": e.cls,
                "scale": scale,
                "params": e.params(scale),
                "packages": list(e.packages),
                "versions": st["versions"],
                "state": st["state"],
                "expected_footprint_bytes": e.expected_footprint(scale),
                "footprint_bytes": meta.get("footprint_bytes"),
                "instructions": meta.get("instructions"),
                "refs": meta.get("refs"),
                "trace_bytes": meta.get("trace_bytes"),
                "record_wall_s": meta.get("record_wall_s"),
                "misses_per_100k": meta.get("misses_per_100k"),
                "machine": MACHINE,
                "paper_misses_per_100k": class_figure(e.cls),
                "trace": meta.get("trace"),
            }
        )
    return rows
