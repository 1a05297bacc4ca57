"""The host's page size, read from the TLB's reach (docs/validation.md, "The host's page size").

A TLB entry holds the smaller of the guest's page and the host's page behind it, so a guest
can tell how its host backs it: the probe's ``pages`` pattern chases one line per 4 KiB page,
its data staying in the caches long after its translations have left the TLB, once with the
region in 2 MiB guest pages and once in 4 KiB ones. Where the host backs the guest with
4 KiB pages both run out of TLB at the same footprint and take about the same time; where it
uses 2 MiB pages or larger, the 2 MiB guest pages' translations stay in the TLB (2,048 of
them reach 4 GiB) and their chase is several times faster. :func:`read` decides from the
ratio of the two times at each of :data:`FOOTPRINTS`, and only when every footprint agrees: a
host may back some of a guest's memory with huge pages and the rest with 4 KiB ones.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

#: Footprints of the page chase: beyond 4 KiB entries' reach in any preset's TLB (2,048
#: entries: 8 MiB), within 2 MiB entries' (4 GiB), the data (one line per page) in the caches.
FOOTPRINTS: tuple[int, ...] = (16 << 20, 64 << 20, 256 << 20)
#: Accesses of each page chase.
ACCESSES = 2_000_000
#: The ratio (2 MiB guest pages' time over 4 KiB ones') above which, at every footprint, the
#: host's pages are 4 KiB: the two run out of TLB alike.
HOST_4K_ABOVE = 0.5
#: The ratio below which, at every footprint, the host's pages are 2 MiB or larger: the
#: 2 MiB guest pages' translations stay in the TLB (a TLB hit against a walk, about a
#: quarter of the time).
HOST_2M_BELOW = 0.35


def read(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The host's page size the page chases show: ``host_pages`` (``4K``, ``2M``, or ``None``
    when they do not tell: a ratio between the thresholds, or the footprints disagreeing),
    ``ratios`` (per footprint, 2 MiB guest pages' ns over 4 KiB ones') and their ``median``,
    and ``why``."""
    by = {(r["footprint"], r["pages"]): r["ns_per_access"] for r in runs}
    ratios = {
        fp: by[(fp, "2m")] / by[(fp, "4k")]
        for fp in sorted({fp for fp, _ in by})
        if (fp, "2m") in by and (fp, "4k") in by and by[(fp, "4k")] > 0
    }
    if not ratios:
        return {"host_pages": None, "ratios": {}, "median": None, "why": "no page chase ran"}
    median = statistics.median(ratios.values())
    if all(r > HOST_4K_ABOVE for r in ratios.values()):
        pages, why = "4K", "2 MiB guest pages run out of TLB as 4 KiB ones do"
    elif all(r < HOST_2M_BELOW for r in ratios.values()):
        pages, why = "2M", "2 MiB guest pages keep their translations in the TLB"
    else:
        pages, why = None, "the footprints do not agree on the host's page size"
    shown = ", ".join(f"{r:.2f}" for r in ratios.values())
    return {
        "host_pages": pages,
        "ratios": {str(fp): r for fp, r in ratios.items()},
        "median": median,
        "why": f"{why} (2 MiB over 4 KiB guest pages' time: {shown})",
    }
