"""Seed 002's reproduction, the metrics: each workload's figures of Table 1, Figure 6 and
Tables 4–5 from its runs under every design (:func:`metrics`), their geometric means over the
recorded programs, Figure 8's hit percentage of a cell and Figure 9's speedups."""

from __future__ import annotations

import math
from collections.abc import Mapping

from vmmu import api
from vmmu.repro._run import Measured


def _lat(r: api.Result) -> dict[str, float]:
    caches = r["config"]["machine"]["caches"]
    lat = {lv["name"]: float(lv["latency"]) for lv in caches["levels"]}
    lat["dram"] = float(caches["dram_latency"])
    lat["pwc"] = float(r["config"]["machine"]["pwc"]["latency"])
    return lat


def walk_cycles(r: api.Result) -> float:
    """Cycles per walk: each page-entry reference at the latency of what served it."""
    lat = _lat(r)
    total = sum(n * lat.get(k, 0.0) for k, n in (r.get("walk_refs_served_by") or {}).items())
    return total / r.walks if r.walks else math.nan


def l2_misses(r: api.Result) -> int:
    """Page-entry references the L2 did not serve (page entries fill into L2)."""
    s = r.get("walk_refs_served_by") or {}
    return int(s.get("l3", 0) + s.get("dram", 0))


def l2_accesses(r: api.Result) -> int:
    s = r.get("walk_refs_served_by") or {}
    return int(s.get("l2", 0) + s.get("l3", 0) + s.get("dram", 0))


def pwc_accesses(r: api.Result) -> int:
    p = r["walk_caches"]["pwc"]
    return int(p["hits"] + p["misses"])


def ntlb_accesses(r: api.Result) -> int:
    p = r["walk_caches"]["ntlb"]
    return int(p["hits"] + p["misses"])


def opportunity(runs: Mapping[str, api.Result]) -> dict[str, float]:
    """Table 1's perfect-TLB opportunity, native and 2D (in %), from the runs without
    page-walk caching: the speedup of taking the translation cycles away (under the interval
    core model, the cycles the core stalled on translation), with what explains it — the
    cycles per instruction left, the cycles per walk and the translation cycles per walk."""
    nn, g0 = runs["native/none"], runs["nested/none"]

    def translation(r: api.Result) -> float:
        return float(r["cycles_by_cause"]["translation"])

    def perfect(r: api.Result) -> float:
        return 100.0 * (r.cycles / (r.cycles - translation(r)) - 1)

    return {
        "perfect_native": perfect(nn),
        "perfect_2d": perfect(g0),
        "cpi_perfect_native": (nn.cycles - translation(nn)) / nn.instructions,
        "walk_cycles_2d": walk_cycles(g0),
        "walk_cycles_native": walk_cycles(nn),
        "stall_per_walk_native": translation(nn) / nn.walks if nn.walks else math.nan,
        "stall_per_walk_2d": translation(g0) / g0.walks if g0.walks else math.nan,
    }


def metrics(runs: Mapping[str, api.Result]) -> dict[str, float]:
    """Every per-workload figure of Table 1, Figure 6, Tables 4 and 5 (percentages in %)."""
    c = {k: float(r.cycles) for k, r in runs.items()}
    nn, n1 = runs["native/none"], runs["native/1d"]
    g0, g4, g2 = runs["nested/none"], runs["nested/2d+nt"], runs["nested/2d+nt/2M"]

    def gain(a: str, b: str) -> float:
        return 100.0 * (c[a] / c[b] - 1)

    def red(a: float, b: float) -> float:
        return 100.0 * (1 - b / a) if a else math.nan

    return {
        **opportunity(runs),
        "tlb_misses": 1e5 * nn.walks / nn.instructions,
        "walk_latency": walk_cycles(g0) / walk_cycles(nn),
        "pwc1d_speedup": gain("nested/none", "nested/1d"),
        "pwc_speedup": gain("nested/none", "nested/2d"),
        "nt_gain": gain("nested/2d", "nested/2d+nt"),
        "2dnt_vs_none": gain("nested/none", "nested/2d+nt"),
        "2m_vs_none": gain("nested/none", "nested/2d+nt/2M"),
        "native_vs_none": gain("nested/none", "native/1d"),
        "native_vs_2dnt": gain("nested/2d+nt", "native/1d"),
        "share_of_native": 100.0
        * (c["nested/none"] / c["nested/2d+nt"] - 1)
        / (c["nested/none"] / c["native/1d"] - 1),
        "np2m_of_native": 100.0 * c["native/1d"] / c["nested/2d+nt/2M"],
        "np4k_of_native": 100.0 * c["native/1d"] / c["nested/2d+nt"],
        "np2m_over_2dnt": gain("nested/2d+nt", "nested/2d+nt/2M"),
        "l2miss_ratio": l2_misses(g4) / max(l2_misses(n1), 1),
        "l2miss_pct": 100.0 * l2_misses(g4) / max(l2_accesses(g4), 1),
        "tlb_miss_red": red(g4.walks, g2.walks),
        "pwc_acc_red": red(pwc_accesses(g4), pwc_accesses(g2)),
        "l2miss_red": red(l2_misses(g4), l2_misses(g2)),
    }


def geomean_metrics(per: list[dict[str, float]]) -> dict[str, float]:
    """Geometric means over programs, as the paper's suites are (Table 1's note): of the
    ratio for ratios, of 1 + x/100 for percentages."""
    pct = {
        "perfect_native",
        "perfect_2d",
        "pwc1d_speedup",
        "pwc_speedup",
        "nt_gain",
        "2dnt_vs_none",
        "2m_vs_none",
        "native_vs_none",
        "native_vs_2dnt",
        "np2m_over_2dnt",
    }
    out = {}
    for k in per[0]:
        xs = [p[k] for p in per]
        if k in pct:
            out[k] = 100.0 * (math.prod(1 + x / 100 for x in xs) ** (1 / len(xs)) - 1)
        elif all(x > 0 for x in xs):
            out[k] = math.prod(xs) ** (1 / len(xs))
        else:
            out[k] = sum(xs) / len(xs)
    return out


def pwc_hit_pct(r: api.Result, cell: str) -> float:
    """The PWC hit percentage of one ``{column,row}`` cell (``"nL1,gPA"``): the references
    the PWC served there over the references looked up there."""
    looked = (r.get("walk_refs_by_step") or {}).get(cell, 0)
    hits = (r.get("pwc_hits_by_step") or {}).get(cell, 0)
    return 100.0 * hits / looked if looked else math.nan


def figure9_gain(m: Mapping[str, Measured], key: str) -> float:
    """Figure 9: the speedup of run ``key`` over MiscServer's 2D_PWC+NT baseline (24-entry PWC,
    16-entry NTLB), in %."""
    base = float(m["MiscServer/nested/2d+nt"].cycles)
    return 100.0 * (base / m[key].cycles - 1)
