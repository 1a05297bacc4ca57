"""Sizing studies: the misses of one translation structure at many capacities
(``vmmu sizing``, docs/performance.md "One pass for many sizes").

The L2 TLB is sized in one pass where the method is exact: the engine runs probe copies of the
L2 level beside the real one (``config.sizing``), each fed every operation the real level gets.
The page-walk cache and the Nested TLB are sized by one simulation per size, run in parallel:
their own hits change which lookups they receive next (a PWC hit skips the upper levels'
lookups of a walk; under 2d+nt an NTLB miss starts a nested walk whose entries enter the PWC),
so no single pass can stand for every size.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vmmu import api
from vmmu._progress import ProgressBars
from vmmu.exceptions import ConfigError

if TYPE_CHECKING:
    import pandas as pd

#: The structures a study can size: the L2 TLB, the page-walk cache, the Nested TLB.
STRUCTURES: tuple[str, ...] = ("l2tlb", "pwc", "ntlb")

#: How a study runs: ``one-pass`` (L2 TLB only), ``separate`` (one run per size), ``auto``.
METHODS: tuple[str, ...] = ("auto", "one-pass", "separate")

#: The most sizes one study takes.
MAX_SIZES = 64

_PATHS = {"pwc": "machine.pwc", "ntlb": "machine.ntlb"}

#: Why only separate runs are exact for a structure (printed when one-pass is asked for).
WHY_SEPARATE = {
    "pwc": "a page-walk cache's hits skip the upper levels' lookups of a walk, so its lookups "
    "depend on its own size",
    "ntlb": "Nested TLB misses start nested walks whose entries enter the page-walk cache, "
    "whose hits decide which NTLB lookups happen next",
}


class SizingError(ValueError):
    """A sizing study that cannot be run as asked (the message says why)."""


@dataclass
class SizingStudy:
    """The outcome of a sizing study.

    ``rows`` has one row per size: ``entries``, ``ways``, ``lookups``, ``hits``, ``misses``,
    ``miss_ratio``, ``mpki`` (misses per thousand instructions), ``configured`` (the machine's
    own size), and with separate runs also ``walks``, ``cycles`` and ``cpi``.
    """

    structure: str
    method: str
    #: Why the method was chosen.
    reason: str
    #: For the L2 TLB: the index of the array of ``machine.tlb.l2`` resized.
    array: int | None
    rows: pd.DataFrame
    #: The full result of each run (one for one-pass, one per size otherwise).
    results: list[api.Result]


def parse_entries(text: str) -> list[int]:
    """Sizes from ``A..B`` (every power-of-two multiple of A up to B), ``A,B,C`` or a mix:
    ``64..8192``, ``24,48,96``, ``16..128,1536``."""
    out: list[int] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*\.\.\s*(\d+)", part)
        try:
            if m:
                lo, hi = int(m.group(1)), int(m.group(2))
                if lo < 1 or hi < lo:
                    raise SizingError(
                        f"entries `{part}`: expected LO..HI with 1 <= LO <= HI, e.g. 64..8192"
                    )
                n = lo
                while n <= hi:
                    out.append(n)
                    n *= 2
            else:
                n = int(part)
                if n < 1:
                    raise SizingError(f"entries `{part}`: a size must be at least 1")
                out.append(n)
        except ValueError as e:
            if isinstance(e, SizingError):
                raise
            raise SizingError(
                f"entries `{part}`: expected a number or LO..HI (e.g. 64..8192)"
            ) from None
    sizes = sorted(set(out))
    if not sizes:
        raise SizingError("entries: no size given (e.g. --entries 64..8192)")
    if len(sizes) > MAX_SIZES:
        raise SizingError(f"entries: {len(sizes)} sizes; at most {MAX_SIZES} in one study")
    return sizes


def _resolved(machine: str, mode: str, options: Mapping[str, Any]) -> dict[str, Any]:
    return api.config_dict(machine=machine, mode=mode, **options)


def _ways_for(entries: int, ways: int | str | None, base_entries: int, base_ways: int) -> int:
    """The associativity of a size: ``ways`` when given (``"full"``: fully associative), else
    the structure's own — fully associative stays fully associative, otherwise the same ways
    (at most ``entries``)."""
    if ways == "full" or (ways is None and base_ways == base_entries):
        return entries
    w = base_ways if ways is None else int(ways)
    return min(w, entries)


def study(
    structure: str,
    entries: str | list[int],
    *,
    ways: int | str | None = None,
    array: int | None = None,
    method: str = "auto",
    machine: str = api.DEFAULT_MACHINE,
    mode: str = "nested",
    workload: str | None = None,
    trace: str | None = None,
    parallel: bool = True,
    progress: bool | ProgressBars = False,
    **options: Any,
) -> SizingStudy:
    """Misses of ``structure`` (:data:`STRUCTURES`) at each size of ``entries`` on one
    workload or trace; ``options`` are :func:`vmmu.api.run`'s. ``ways`` fixes the
    associativity (``"full"``: fully associative; default: the structure's own). ``array``
    picks the L2 TLB array to resize (default: the first that holds 4 KiB pages). ``method``
    is :data:`METHODS`: ``auto`` takes one pass where it is exact, separate runs elsewhere."""
    if structure not in STRUCTURES:
        raise SizingError(f"unknown structure `{structure}` (structures: {', '.join(STRUCTURES)})")
    if method not in METHODS:
        raise SizingError(f"unknown method `{method}` (methods: {', '.join(METHODS)})")
    if isinstance(ways, str) and ways != "full":
        try:
            ways = int(ways)
        except ValueError:
            raise SizingError(f"ways `{ways}`: expected a number or `full`") from None
    if isinstance(ways, int) and ways < 1:
        raise SizingError("ways: must be at least 1")
    sizes = (
        parse_entries(entries)
        if isinstance(entries, str)
        else parse_entries(",".join(str(int(e)) for e in entries))
    )
    cfg = _resolved(machine, mode, options)
    m = cfg["machine"]
    if structure == "l2tlb":
        l2 = m["tlb"]["l2"]
        if not l2:
            raise SizingError(f"machine `{m['name']}` has no L2 TLB to size")
        if array is None:
            array = next((i for i, a in enumerate(l2) if "4K" in a["sizes"]), 0)
        if not 0 <= array < len(l2):
            raise SizingError(
                f"array {array}: machine.tlb.l2 has {len(l2)} array(s), numbered from 0"
            )
        base_entries, base_ways = l2[array]["entries"], l2[array]["ways"]
        path = f"machine.tlb.l2[{array}]"
    else:
        if array is not None:
            raise SizingError("--array applies to the L2 TLB only")
        base_entries, base_ways = m[structure]["entries"], m[structure]["ways"]
        path = _PATHS[structure]
    pairs = [(e, _ways_for(e, ways, base_entries, base_ways)) for e in sizes]
    for e, w in pairs:
        if e % w:
            raise SizingError(f"{e} entries: {w} ways do not divide them (give --ways)")

    sizing = _sizing_pair(array or 0, pairs)
    one_pass_blocker = _one_pass_blocker(structure, sizing, machine, mode, options)
    if method == "auto":
        chosen = "separate" if one_pass_blocker else "one-pass"
    elif method == "one-pass" and one_pass_blocker:
        raise SizingError(f"one pass is not exact here: {one_pass_blocker}; use --method separate")
    else:
        chosen = method
    reason = one_pass_blocker or (
        "one pass: probe copies of the L2 TLB receive every operation of the real one"
        if chosen == "one-pass"
        else "separate runs, as asked"
    )
    run_opts = dict(options, machine=machine, mode=mode, workload=workload, trace=trace)
    if chosen == "one-pass":
        rows, results = _one_pass(sizing, (base_entries, base_ways), run_opts, progress)
    else:
        rows, results = _separate(
            structure, path, pairs, (base_entries, base_ways), run_opts, parallel, progress
        )
    return SizingStudy(
        structure, chosen, reason, array if structure == "l2tlb" else None, rows, results
    )


def _sizing_pair(array: int, pairs: list[tuple[int, int]]) -> tuple[str, str]:
    """The ``config.sizing`` override of a one-pass study of these sizes."""
    rows = ", ".join(f"{{ entries = {e}, ways = {w} }}" for e, w in pairs)
    return ("sizing", f"{{ array = {array}, sizes = [{rows}] }}")


#: How the engine words a rule of ``config.sizing`` that the run breaks.
_SIZING_RULE = "invalid configuration: sizing: "


def _one_pass_blocker(
    structure: str, sizing: tuple[str, str], machine: str, mode: str, options: Mapping[str, Any]
) -> str | None:
    """Why one pass would not be exact for this run, or ``None``: the page-walk cache's and the
    Nested TLB's reasons, else the engine's rule that the run breaks (its configuration
    check is the one home of those rules)."""
    if structure != "l2tlb":
        return WHY_SEPARATE[structure]
    try:
        api.config(machine=machine, mode=mode, **_set_with(options, [sizing]))
    except ConfigError as e:
        if str(e).startswith(_SIZING_RULE):
            return str(e)[len(_SIZING_RULE) :]
        raise
    return None


def _set_with(options: Mapping[str, Any], extra: list[tuple[str, str]]) -> dict[str, Any]:
    opts = dict(options)
    opts["set"] = [*api._set_pairs(opts.get("set")), *extra]
    return opts


def _row(
    entries: int, ways: int, hits: int, misses: int, instructions: int, configured: tuple[int, int]
) -> dict[str, Any]:
    lookups = hits + misses
    return {
        "entries": entries,
        "ways": ways,
        "lookups": lookups,
        "hits": hits,
        "misses": misses,
        "miss_ratio": misses / lookups if lookups else 0.0,
        "mpki": 1000.0 * misses / instructions if instructions else 0.0,
        "configured": (entries, ways) == configured,
    }


def _one_pass(
    sizing: tuple[str, str],
    configured: tuple[int, int],
    run_opts: Mapping[str, Any],
    progress: bool | ProgressBars,
) -> tuple[pd.DataFrame, list[api.Result]]:
    opts = _set_with(run_opts, [sizing])
    bars, own = _bars(progress)
    try:
        r = api.run(progress=bars.callback("one pass") if bars else False, **opts)
    finally:
        if own and bars is not None:
            bars.__exit__(None, None, None)
    import pandas as pd

    instr = r["instructions"]
    rows = [
        _row(x["entries"], x["ways"], x["hits"], x["misses"], instr, configured)
        for x in r["sizing"]["sizes"]
    ]
    return pd.DataFrame(rows), [r]


def _counts(structure: str, r: Mapping[str, Any]) -> tuple[int, int]:
    hm = r["tlb"]["l2"] if structure == "l2tlb" else r["walk_caches"][structure]
    return hm["hits"], hm["misses"]


def _separate(
    structure: str,
    path: str,
    pairs: list[tuple[int, int]],
    configured: tuple[int, int],
    run_opts: Mapping[str, Any],
    parallel: bool,
    progress: bool | ProgressBars,
) -> tuple[pd.DataFrame, list[api.Result]]:
    bars, own = _bars(progress)
    stop = threading.Event()

    def one(size: tuple[int, int]) -> api.Result:
        e, w = size
        report: Callable[[int, int | None], bool] | None = (
            bars.callback(f"{e} entries") if bars is not None else None
        )

        def cb(done: int, total: int | None) -> bool:
            if stop.is_set():
                return False
            return report(done, total) if report is not None else True

        opts = _set_with(run_opts, [(f"{path}.entries", str(e)), (f"{path}.ways", str(w))])
        return api.run(progress=cb, **opts)

    try:
        if parallel and len(pairs) > 1:
            with ThreadPoolExecutor(max_workers=min(len(pairs), os.cpu_count() or 1)) as pool:
                futures = [pool.submit(one, p) for p in pairs]
                try:
                    results = [f.result() for f in futures]
                except BaseException:
                    stop.set()
                    raise
        else:
            results = [one(p) for p in pairs]
    finally:
        if own and bars is not None:
            bars.__exit__(None, None, None)
    import pandas as pd

    rows = []
    for (e, w), r in zip(pairs, results, strict=True):
        hits, misses = _counts(structure, r)
        row = _row(e, w, hits, misses, r["instructions"], configured)
        row.update(walks=r["walks"], cycles=r["cycles"], cpi=r["cpi"])
        rows.append(row)
    return pd.DataFrame(rows), results


def _bars(progress: bool | ProgressBars) -> tuple[ProgressBars | None, bool]:
    if progress is True:
        return ProgressBars().__enter__(), True
    if isinstance(progress, ProgressBars):
        return progress, False
    return None, False
