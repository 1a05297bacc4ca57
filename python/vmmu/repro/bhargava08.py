"""Seed 002 — Bhargava, Serebrin, Spadini, Manne 2008: two-dimensional page walks and their caches.

What is reproduced, per suite: Table 1 (TLB misses per 100K instructions, 2D/native walk
latency, perfect-TLB opportunity native and 2D), Figure 6 (guest speedups of 1D_PWC, 2D_PWC,
2D_PWC+NT and 2D_PWC+NT with 2 MB nested pages over no page-walk caching, and native), Table 4
(page-entry L2 misses), Table 5 (what 2 MB nested pages remove); for MiscServer, Figure 7
(PWC and NTLB accesses and misses), Figure 8 (accesses per {column,row}) and Figure 9 (PWC and
NTLB sizes, the 8096-entry PWC against an 8096-entry L2 DTLB), and WebServer's Figure 9 bound.

**Two workload sets.** The paper's suites are proprietary traces, so each suite has a proxy
defined once from what the benchmarks are documented to do (:data:`SUITES`, with the reason);
its one calibrated input is ``ipr``, solved so the proxy's native TLB miss rate is Table 1's
(a property of the workload; the row says so and is not counted). Everything else is
predicted. Beside them, the recorded real programs of ``make traces`` (gzip, sqlite3,
python3, gcc: SPECint-like programs, compared with the IntCpu suite) are run unchanged — their
TLB miss rate is a prediction too. ``--quick`` skips them; the full run records them into
``traces/`` first if they are missing (``tools/traces/record.sh``, about two minutes).

What is not reproduced: Figure 2 (reuse), Figure 3 (unique page entries per reference) and
Figure 4 (spatial locality): vmmu counts references per {column,row}, not distinct entries;
Figure 8's hit percentages: vmmu reports PWC hits per walk cache, not per {column,row}.

Steady state: "each simulation consists of a warmup phase and a full simulation phase" (§5),
so every run simulates a warm-up (the engine's ``warmup``) and counts only what follows.
Nested paging runs with memory backed up front: no hypervisor exit, as the paper's
hypervisor-independent simulation.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import vmmu
from vmmu import api
from vmmu.repro import _reference as ref
from vmmu.repro._claims import (
    Band,
    Claims,
    Criterion,
    Report,
    View,
    above,
    below,
    coverage,
    holds,
    near,
    within,
)
from vmmu.repro._paper import Paper, Param
from vmmu.repro._run import Context, Job, Measured, System

MACHINE = "bhargava08"


@dataclass(frozen=True)
class Suite:
    """A suite's proxy: a generator spec (``ipr`` and ``refs`` are added) and the reason."""

    spec: str
    why: str


#: The suite proxies, each defined once from the benchmarks' documented behaviour. Memory is
#: mapped up front (``prefault=1``: the paper's traces start warm). Their ``ipr`` is solved
#: from Table 1; nothing else is fitted.
SUITES: dict[str, Suite] = {
    "MiscServer": Suite(
        "pointer-chase:footprint=4G,dist=zipf,alpha=0.99,prefault=1",
        "OLTP on three databases, SAP, MMB3, terminal services (Table 3): lookups into a "
        "buffer pool of several GiB on a 2008 server, with skewed popularity — Zipf with "
        "exponent 0.99, the skew YCSB adopted for such lookups",
    ),
    "WebServer": Suite(
        "pointer-chase:footprint=2G,dist=zipf,alpha=1.0,prefault=1",
        "SPECweb99/2005 (Table 3): files served from a file set of about 2 GB (SPECweb99's "
        "file set grows by 4.88 MB per connection set; some 400 sets), chosen with the Zipf "
        "(exponent 1) popularity SPECweb99 prescribes",
    ),
    "JavaServer": Suite(
        "phases:a=stream,b=pointer-chase,period=10K,footprint=1G,a.write_ratio=1,prefault=1",
        "SPECjbb2000/2005 (Table 3): a Java heap of about 1 GB, alternating bump-pointer "
        "allocation (sequential stores) with lookups of live objects (Zipf 0.99)",
    ),
    "IntCpu": Suite(
        "pointer-chase:footprint=512M,dist=hotcold,hot_fraction=0.1,hot_prob=0.9,prefault=1",
        "SPECint2006 (Table 3): resident sets of a few hundred MB (512 MiB), nine tenths of "
        "the references to a tenth of the data",
    ),
    "FpCpu": Suite(
        "stream:footprint=512M,arrays=8,prefault=1",
        "SPECfp2006 (Table 3): sweeps over several large arrays at once (8 arrays, 512 MiB)",
    ),
}

#: Table 5 covers the server suites only.
SERVER = ("MiscServer", "WebServer", "JavaServer")

#: The recorded programs compared with the IntCpu suite (tools/traces/record.sh records them).
TRACES = ("gzip", "sqlite3", "python3", "gcc")
#: References simulated and left out at the start of each trace: the loader, relocations and
#: libc start-up of these programs fit well inside it.
TRACE_WARMUP = 10_000_000

#: The runs behind Table 1, Figure 6 and Tables 4–5, per workload: (mode, pwc, nested pages).
DESIGNS: dict[str, tuple[str, str, str | None]] = {
    "native/none": ("native", "none", None),
    "native/1d": ("native", "1d", None),
    "nested/none": ("nested", "none", None),
    "nested/1d": ("nested", "1d", None),
    "nested/2d": ("nested", "2d", None),
    "nested/2d+nt": ("nested", "2d+nt", None),
    "nested/2d+nt/2M": ("nested", "2d+nt", "2M"),
}

PARAMETERS = (
    Param(
        "MiscServer.footprint",
        "1G",
        "8G",
        "a database buffer pool of 1–8 GiB on the servers of 2008 (the preset's guest has 16 GiB)",
    ),
    Param(
        "MiscServer.alpha",
        0.8,
        1.2,
        "Zipf exponents measured for database and web access skew range about 0.8–1.2",
    ),
    Param(
        "WebServer.footprint",
        "512M",
        "8G",
        "SPECweb file sets from about 100 to 1,600 connection sets",
    ),
    Param(
        "JavaServer.footprint",
        "256M",
        "4G",
        "SPECjbb heaps (-Xmx) from 256 MB to 4 GB",
    ),
    Param("IntCpu.footprint", "128M", "2G", "SPECint2006 resident sets of 100 MB to 2 GB"),
    Param("FpCpu.arrays", 2, 32, "SPECfp kernels sweep 2 to 32 arrays at once"),
)


#: Every table and figure of seed 002 and where this reproduction has it.
COVERAGE = (
    (
        "Figure 1",
        "the native and 2D walks (references per walk)",
        "`refs_per_walk` (a definition: Law 2)",
    ),
    (
        "Table 1",
        "TLB misses, 2D/native walk latency, perfect-TLB opportunity per suite",
        "`t1/*` per suite and for the recorded programs; the Tables 1 and 4 view",
    ),
    (
        "Figure 2",
        "reuse: accesses covered by a share of the unique page entries",
        "not simulated: needs the distinct page-entry addresses per {column,row} and their access "
        "counts (a set per cell, off the hot path)",
    ),
    (
        "Figure 3",
        "unique page entries per {column,row}",
        "`f3/unique_entries`: not simulated (same need)",
    ),
    (
        "Figure 4",
        "spatial locality: unique {nL1,gPA} entries per cache line",
        "not simulated: needs the distinct {nL1,gPA} entries grouped by cache line",
    ),
    (
        "Figure 5",
        "the 1D, 2D and 2D+NT page-walk cache designs",
        "the designs themselves (`--pwc 1d|2d|2d+nt`), not a result",
    ),
    (
        "Tables 2, 3",
        "the simulated machine and the benchmark suites",
        "setup: the bhargava08 preset and the suite proxies",
    ),
    (
        "Figure 6",
        "speedups of 1D_PWC, 2D_PWC, 2D_PWC+NT, +2 MB nested pages, native",
        "`f6/*` per suite and for the recorded programs",
    ),
    ("Figure 7", "PWC and NTLB accesses and misses, MiscServer", "`f7/*`"),
    (
        "Figure 8",
        "accesses and PWC hit percentage per {column,row}, MiscServer",
        "`f8/*` and the Figure 8 view",
    ),
    ("Table 4", "page-entry L2 misses, 2D/native and miss rate", "`t4/*` per suite"),
    (
        "Figure 9",
        "PWC and NTLB sizes, MiscServer; §6.4's TLB and WebServer claims",
        "`f9/*` and the Figure 9 view",
    ),
    ("Table 5", "what 2 MB nested pages remove, server suites", "`t5/*` per server suite"),
)

# ---------------------------------------------------------------------------------------------
# Runs


def _suite_spec(ctx: Context, suite: str) -> str:
    """The suite's proxy with the knobs under study (``MiscServer.footprint``, ...)."""
    return ctx.spec(SUITES[suite].spec, prefix=suite)


def _system(design: str, **extra: Any) -> System:
    mode, pwc, nps = DESIGNS[design]
    s = System(MACHINE, mode, pwc=pwc, nested_page_size=nps)
    return s.with_set(**extra) if extra else s


def _calibrate(ctx: Context, refs: int, suites: list[str]) -> dict[str, int]:
    """Each suite's ``ipr``: native TLB misses per reference (any ``ipr``: walks do not depend
    on it) divided into Table 1's misses per 100K instructions."""
    jobs = [
        Job(
            f"{s}/calib",
            _system("native/none"),
            f"{_suite_spec(ctx, s)},ipr=1,refs={2 * refs}",
            warmup=refs,
        )
        for s in suites
    ]
    m = ctx.measure(jobs)
    out = {}
    for s in suites:
        r = m[f"{s}/calib"].full
        per_ref = r.walks / max(r.instructions, 1)
        target = ref.cell("bhargava08_table1", "suite", s, "tlb_misses_per_100k_instr")
        out[s] = max(1, round(1e5 * per_ref / target))
    return out


def _checkout() -> Path | None:
    root = Path(vmmu.__file__).resolve().parents[2]
    return root if (root / "tools" / "traces" / "record.sh").is_file() else None


def _traces(ctx: Context, notes: list[str]) -> dict[str, str]:
    """The recorded traces, recorded first if missing; ``{}`` (with a note) if impossible."""
    if ctx.quick:
        notes.append(
            "--quick skips the recorded programs (gzip, sqlite3, python3, gcc); the full run "
            "includes them"
        )
        return {}
    root = _checkout()
    if root is None:
        notes.append("the recorded programs need a vmmu checkout (tools/traces/record.sh)")
        return {}
    paths = {t: root / "traces" / f"{t}.vtrace" for t in TRACES}
    if not all(p.is_file() for p in paths.values()):
        log = root / "traces" / "record.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("w") as f:
            done = subprocess.run(
                [str(root / "tools" / "traces" / "record.sh")], stdout=f, stderr=f, check=False
            )
        if done.returncode != 0 or not all(p.is_file() for p in paths.values()):
            notes.append(f"recording the programs failed (see {log}); their rows are not simulated")
            return {}
        notes.append(f"recorded the programs into {root / 'traces'} (log: {log})")
    return {t: str(p) for t, p in paths.items()}


# ---------------------------------------------------------------------------------------------
# Metrics of one workload


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


def metrics(runs: Mapping[str, api.Result]) -> dict[str, float]:
    """Every per-workload figure of Table 1, Figure 6, Tables 4 and 5 (percentages in %)."""
    c = {k: float(r.cycles) for k, r in runs.items()}
    nn, n1 = runs["native/none"], runs["native/1d"]
    g0, g4, g2 = runs["nested/none"], runs["nested/2d+nt"], runs["nested/2d+nt/2M"]

    def perfect(r: api.Result) -> float:
        t = r["cycles_by_cause"]["translation"]
        return 100.0 * (r.cycles / (r.cycles - t) - 1)

    def gain(a: str, b: str) -> float:
        return 100.0 * (c[a] / c[b] - 1)

    def red(a: float, b: float) -> float:
        return 100.0 * (1 - b / a) if a else math.nan

    return {
        "tlb_misses": 1e5 * nn.walks / nn.instructions,
        "walk_latency": walk_cycles(g0) / walk_cycles(nn),
        "walk_cycles_2d": walk_cycles(g0),
        "walk_cycles_native": walk_cycles(nn),
        "perfect_native": perfect(nn),
        "perfect_2d": perfect(g0),
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
        "cpi_perfect_native": (nn.cycles - nn["cycles_by_cause"]["translation"]) / nn.instructions,
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


# ---------------------------------------------------------------------------------------------
# The reproduction


def run(ctx: Context) -> Report:
    refs = ctx.scale(400_000, 20_000)
    notes: list[str] = []
    # A sensitivity trial of a suite's knob reruns that suite only (and MiscServer's figures
    # when the suite is MiscServer); the recorded programs depend on no knob here.
    touched = {name.partition(".")[0] for name in ctx.values}
    suites = [s for s in SUITES if s in touched] or list(SUITES)
    complete = len(suites) == len(SUITES)
    figures = "MiscServer" in suites
    ipr = _calibrate(ctx, refs, suites)
    jobs = []
    for s in suites:
        spec = f"{_suite_spec(ctx, s)},ipr={ipr[s]},refs={2 * refs}"
        for d in DESIGNS:
            jobs.append(Job(f"{s}/{d}", _system(d), spec, warmup=refs))
    if figures:
        jobs += _figure9_jobs(ctx, ipr, refs, web="WebServer" in suites)
    m = ctx.measure(jobs)
    traces = _traces(ctx, notes) if not ctx.values else {}
    if traces:
        tm = ctx.measure(
            Job(f"{t}/{d}", _system(d), trace=path, warmup=TRACE_WARMUP)
            for t, path in traces.items()
            for d in DESIGNS
        )
        m.update(tm)
    per = {s: metrics({d: m[f"{s}/{d}"].full for d in DESIGNS}) for s in suites}
    traced = {t: metrics({d: m[f"{t}/{d}"].full for d in DESIGNS}) for t in traces}
    c = Claims()
    first = suites[0]
    c.definition(
        "refs_per_walk",
        "page-entry references of a 2D walk, 4-level guest over 4-level nested, no caching",
        ref.claim(
            "bhargava08_claims",
            "page entry references of a 2D walk with n guest and m nested levels",
        ),
        m[f"{first}/nested/none"].full.walk_refs_per_walk,
        "references / walk",
        "nm + n + m: Law 2, pinned by the tests",
    )
    for s in suites:
        _suite_claims(c, s, s, per[s], ipr[s], calibrated=True)
    if traced:
        rec = geomean_metrics(list(traced.values()))
        _suite_claims(c, "recorded", "IntCpu", rec, None, calibrated=False)
    views = [_table_view(per, traced), coverage("002", COVERAGE)]
    if complete:
        _across_suites(c, per)
    if figures:
        _figure7(c, m)
        _figure8(c, m)
        views += [_figure8_view(m), _figure9(c, m, ctx, web="WebServer" in suites)]
    return Report(
        "bhargava08",
        "002",
        "two-dimensional page walks and their caches (Tables 1, 4, 5; Figures 6–9)",
        {
            "machine": f"{MACHINE} (seed 002 Table 2: 24-entry PWC, 16-entry NTLB, page entries "
            "filled into L2)",
            "profile": "none: nested paging with memory backed up front makes no exit",
            "designs": "native (none, 1d), nested (none, 1d, 2d, 2d+nt, 2d+nt with 2 MiB nested "
            "pages)",
            "scale": "quick" if ctx.quick else "full",
            "suites": {
                s: f"{_suite_spec(ctx, s)},ipr={ipr[s]},refs={2 * refs}, the first {refs:,} a "
                f"warm-up — {SUITES[s].why}"
                for s in suites
            },
            "recorded": ", ".join(f"{t} (traces/{Path(p).name})" for t, p in traces.items())
            + f"; the first {TRACE_WARMUP:,} references a warm-up"
            if traces
            else "not run",
        },
        c.rows,
        views=views,
        notes=notes,
    )


# ---------------------------------------------------------------------------------------------
# Per-suite claims


def _t1(suite: str, column: str) -> tuple[float, str]:
    return (
        ref.cell("bhargava08_table1", "suite", suite, column),
        ref.printed("bhargava08_table1", "suite", suite, column),
    )


def _t4(suite: str, column: str) -> float:
    return ref.cell("bhargava08_table4", "suite", suite, column)


def _t5(suite: str, column: str) -> float:
    return ref.cell("bhargava08_table5", "suite", suite, column)


def _text(claim: str) -> str:
    return ref.claim("transcribed/bhargava08_text", claim)


def _range(text: str) -> tuple[float, float]:
    xs = ref.numbers(text)
    return xs[0], xs[1]


def _subject(key: str) -> tuple[str, str, str]:
    """What an explanation speaks of for workload set ``key``: a suite's single-stream proxy
    or the recorded programs (subject, possessive, verb "to run")."""
    if key == "recorded":
        return "the recorded programs", "the recorded programs'", "run"
    return "the single-stream proxy", "the proxy's", "runs"


def _suite_claims(
    c: Claims,
    key: str,
    suite: str,
    x: dict[str, float],
    ipr: int | None,
    calibrated: bool,
) -> None:
    """Table 1, Figure 6 and Table 4 (and Table 5 for server suites) for one workload set,
    judged against suite ``suite``'s published values."""
    name = key if key == suite else f"{key} (vs {suite})"
    it, its, run = _subject(key)
    tm, tm_text = _t1(suite, "tlb_misses_per_100k_instr")
    col = ref.table("bhargava08_table1")["tlb_misses_per_100k_instr"]
    if calibrated:
        c.definition(
            f"t1/tlb_misses/{key}",
            f"Table 1, {name}: TLB misses per 100K instructions (calibrated input)",
            tm_text,
            x["tlb_misses"],
            "misses / 100K instr",
            f"the proxy's ipr ({ipr}) is solved for Table 1's rate, a property of the suite",
        )
    else:
        c.judge(
            f"t1/tlb_misses/{key}",
            f"Table 1, {name}: TLB misses per 100K instructions",
            tm_text,
            x["tlb_misses"],
            "misses / 100K instr",
            near(
                tm,
                0.05,
                Band(col.min() - 0.05, col.max() + 0.05),
                "Table 1's digit; direction: within the suites' range",
                1,
            ),
            "the recorded programs run small inputs (tens of MB of data, a few hundred "
            "million instructions): far fewer TLB misses than SPECint2006's reference inputs",
        )
    lat, lat_text = _t1(suite, "walk_latency_2d_over_native_no_pwc")
    lo, hi = _range(_text("2D walk latency vs native"))
    c.judge(
        f"t1/walk_latency/{key}",
        f"Table 1, {name}: 2D / native walk latency, no page-walk caching",
        f"{lat_text}×",
        x["walk_latency"],
        "×",
        near(
            lat,
            0.05,
            Band(lo - 0.05, hi + 0.05),
            "§3.1 states it to 0.1×: ±0.05; direction: §3.1's 3.9–4.6 across suites",
            2,
        ),
        f"a 2D walk takes {x['walk_cycles_2d']:.0f} cycles, a native one "
        f"{x['walk_cycles_native']:.0f}: the ratio is set by where {its} page entries "
        "are served (L2 11, L3 40, DRAM 120 cycles), i.e. by its page-entry locality",
    )
    for column, mk, text_claim in (
        ("perfect_tlb_gain_native_pct", "perfect_native", "perfect TLB opportunity native"),
        ("perfect_tlb_gain_2d_pct", "perfect_2d", None),
    ):
        v, v_text = _t1(suite, column)
        if text_claim:
            lo, hi = _range(_text(text_claim))
        else:
            lo = ref.numbers(_text("perfect TLB opportunity 2D cpu"))[0]
            hi = ref.numbers(_text("perfect TLB opportunity 2D server"))[0]
        label = "native" if mk == "perfect_native" else "2D"
        c.judge(
            f"t1/{mk}/{key}",
            f"Table 1, {name}: perfect-TLB opportunity, {label}",
            f"{v_text}%",
            x[mk],
            "% speedup",
            near(
                v,
                0.5,
                Band(lo - 0.5, hi + 0.5),
                "§3.1 states whole percents: ±0.5; direction: §3.1's range across suites",
                1,
            ),
            f"the opportunity is walk cycles over the rest: {it} {run} at "
            f"{x['cpi_perfect_native']:.2f} cycles per instruction without translation (its "
            "data stalls and base CPI 1.0, not the paper's out-of-order core) and "
            f"{x['walk_cycles_native' if label == 'native' else 'walk_cycles_2d']:.0f} cycles "
            "per walk",
        )
    _figure6(c, key, suite, name, x)
    r4, d4 = (
        _t4(suite, "page_entry_l2_misses_2d_over_native"),
        _text("page entry L2 misses 2D over native"),
    )
    lo, hi = _range(d4)
    c.judge(
        f"t4/l2miss_ratio/{key}",
        f"Table 4, {name}: page-entry L2 misses, 2D_PWC+NT / native",
        f"{r4:.2f}×",
        x["l2miss_ratio"],
        "×",
        near(
            r4,
            0.05,
            Band(lo - 0.05, hi + 0.05),
            "§6.3 states 0.1×: ±0.05; direction: §6.3's 2.7–5.5 across suites",
            2,
        ),
        f"the ratio counts page-entry references the L2 does not hold; {its} "
        "{G,gL1} and {nL1,gPA} entries (one per data page) decide it, and its native walks "
        "miss the L2 at a rate set by its footprint",
    )
    p4 = _t4(suite, "page_entry_l2_miss_pct")
    col4 = ref.table("bhargava08_table4")["page_entry_l2_miss_pct"]
    c.judge(
        f"t4/l2miss_pct/{key}",
        f"Table 4, {name}: page-entry L2 miss rate under 2D_PWC+NT",
        f"{p4:.2f}%",
        x["l2miss_pct"],
        "%",
        near(
            p4,
            0.005,
            Band(col4.min() - 0.005, col4.max() + 0.005),
            "Table 4's digit; direction: within the suites' range",
            3,
        ),
        f"the PWC filters the easy references; the rest miss the L2 as often as {its} "
        "page-table footprint exceeds it (512 KiB L2, shared with data)",
    )
    if suite in SERVER and key == suite:
        for column, mk, text_claim, label in (
            (
                "tlb_miss_reduction_pct",
                "tlb_miss_red",
                "2MB nested pages: fewer TLB misses",
                "TLB misses",
            ),
            (
                "pwc_access_reduction_pct",
                "pwc_acc_red",
                "2MB nested pages: fewer PWC accesses",
                "PWC accesses",
            ),
            (
                "page_entry_l2_miss_reduction_pct",
                "l2miss_red",
                "2MB nested pages: fewer page entry L2 misses",
                "page-entry L2 misses",
            ),
        ):
            v = _t5(suite, column)
            lo, hi = _range(_text(text_claim))
            c.judge(
                f"t5/{mk}/{key}",
                f"Table 5, {name}: 2 MB nested pages remove this share of {label}",
                f"{ref.printed('bhargava08_table5', 'suite', suite, column)}%",
                x[mk],
                "% fewer",
                near(
                    v,
                    0.5,
                    Band(lo - 0.5, hi + 0.5),
                    "§6.5 states whole percents: ±0.5; direction: §6.5's range across suites",
                    1,
                ),
                _WHY_T5[mk],
            )


_WHY_T5 = {
    "tlb_miss_red": "the proxies map 4 KiB guest pages only, so a 2 MiB nested page cannot "
    "widen a TLB entry (an entry holds the smaller of the two sizes); the paper's server guests "
    "used large pages (JVM heaps, database buffer pools, the kernel's direct map), which the "
    "proxies leave out",
    "pwc_acc_red": "with 2 MiB nested pages every nested walk loses its nL1 reference; the share "
    "of PWC accesses that removes depends on how many nested walks the NTLB already skipped",
    "l2miss_red": "2 MiB nested pages remove the {nL1,*} references, the ones that miss the L2 "
    "most; what remains is the guest's {G,gL1} and {G,gL2} entries",
}


def _figure6(c: Claims, key: str, suite: str, name: str, x: dict[str, float]) -> None:
    it, its, run = _subject(key)
    """Figure 6's speedups over no page-walk caching, and native's."""
    text = ref.claim("bhargava08_claims", "guest speedup of 2D_PWC over no caching")
    lo, hi = _range(text)
    named = {"WebServer": lo, "JavaServer": hi}
    if suite in named:
        crit = near(
            named[suite],
            0.5,
            Band(lo - 0.5, hi + 0.5),
            "§6.1 names this suite's "
            "speedup in whole percents: ±0.5; direction: the range across suites",
            1,
        )
    else:
        crit = within(lo, hi, 0.5, above(0.0), "§6.1's range across suites, ±0.5", 1)
    c.judge(
        f"f6/pwc_speedup/{key}",
        f"Figure 6, {name}: 2D_PWC speedup over no page-walk caching",
        text,
        x["pwc_speedup"],
        "% speedup",
        crit,
        f"the 2D PWC turns the 16 upper-level references into 2-cycle hits; the gain is bounded "
        f"by the share of {its} time in walks (perfect-TLB opportunity "
        f"{x['perfect_2d']:.0f}%)",
    )
    text = ref.claim("bhargava08_claims", "further gain of 2D_PWC+NT over 2D_PWC")
    vals = ref.numbers(text)
    named_nt = {"WebServer": vals[0], "JavaServer": vals[1], "MiscServer": vals[2]}
    lo, hi = min(vals), max(vals)
    if suite in named_nt:
        crit = near(
            named_nt[suite],
            0.05,
            Band(lo - 0.05, hi + 0.05),
            "§6.1 names this suite's gain to 0.1%: ±0.05; direction: the range across suites",
            2,
        )
    else:
        crit = within(lo, hi, 0.05, above(0.0), "§6.1's range across suites, ±0.05", 2)
    c.judge(
        f"f6/nt_gain/{key}",
        f"Figure 6, {name}: further gain of 2D_PWC+NT over 2D_PWC",
        text,
        x["nt_gain"],
        "% speedup",
        crit,
        "the NTLB skips nested walks whose references were mostly 2-cycle PWC hits already; "
        f"the gain is the few PWC misses it also skips, fewer in {it} than in "
        "the paper's commercial suites (instruction-side misses, larger guest page tables)",
    )
    for mk, claim_name, label in (
        ("native_vs_none", "native advantage over no caching", "native over no caching"),
        ("native_vs_2dnt", "native advantage over 2D_PWC+NT", "native over 2D_PWC+NT"),
    ):
        text = ref.claim("bhargava08_claims", claim_name)
        lo, hi = _range(text)
        c.judge(
            f"f6/{mk}/{key}",
            f"Figure 6, {name}: {label}",
            text,
            x[mk],
            "% faster",
            within(lo, hi, 0.5, above(0.0), "§6.1's range across suites, ±0.5", 1),
            "native walks need 4 references, 2D walks up to 24: the gap grows with "
            f"{its} TLB miss rate ({x['tlb_misses']:.0f} per 100K instructions) and with the "
            "page-entry misses in the L2",
        )
    text = _text("2D_PWC+NT over no caching")
    lo, hi = _range(text)
    c.judge(
        f"f6/2dnt_vs_none/{key}",
        f"Figure 6, {name}: 2D_PWC+NT speedup over no page-walk caching",
        text,
        x["2dnt_vs_none"],
        "% speedup",
        within(lo, hi, 0.5, above(0.0), "§6.3's range across suites, ±0.5", 1),
        "as for 2D_PWC: bounded by the share of time in walks",
    )
    text = ref.claim("bhargava08_claims", "2D_PWC+NT with 2MB nested pages vs native")
    lo, hi = ref.numbers(text)[2:4]
    c.judge(
        f"f6/np2m_of_native/{key}",
        f"Figure 6, {name}: 2D_PWC+NT with 2 MB nested pages, % of native performance",
        text,
        x["np2m_of_native"],
        "% of native",
        within(
            lo,
            hi,
            0.5,
            Band(x["np4k_of_native"], 100.0, lo_open=True),
            "§6.1's range across suites, ±0.5; direction: nearer native than with 4 KB nested "
            "pages",
            1,
        ),
        f"with 4 KiB nested pages {it} {run} at {x['np4k_of_native']:.1f}% of native; 2 MiB "
        "nested pages shorten each nested walk by one reference, but the guest's own "
        "references ({G,gL1}, {G,gL2}) still miss",
    )
    text = _text("share of native speedup delivered by page walk caching")
    lo, hi = _range(text)
    c.judge(
        f"f6/share_of_native/{key}",
        f"Figure 6, {name}: share of native's speedup 2D_PWC+NT delivers",
        text,
        x["share_of_native"],
        "%",
        within(
            lo,
            hi,
            0.5,
            Band(0.0, 100.0, lo_open=True, hi_open=True),
            "§6.1's range, ±0.5; direction: some, not all",
            1,
        ),
        "what the caches recover of the 2D overhead depends on how much of it is {G,gL1} and "
        "{nL1,gPA} references, which no PWC holds",
    )


def _across_suites(c: Claims, per: Mapping[str, dict[str, float]]) -> None:
    text = _text("2D_PWC+NT with 2MB nested pages over 2D_PWC+NT")
    top = ref.numbers(text)[0]
    best = max(per, key=lambda s: per[s]["np2m_over_2dnt"])
    v = per[best]["np2m_over_2dnt"]
    c.judge(
        "f6/np2m_over_2dnt/max",
        "Figure 6: largest gain of 2 MB nested pages over 2D_PWC+NT, across suites",
        text,
        v,
        "% speedup",
        near(top, 0.5, above(0.0), "§6.1's 'up to 21%' in whole percents: ±0.5", 1),
        f"on {best}: the proxies keep 4 KiB guest pages, so 2 MiB nested pages only shorten "
        "walks and never widen TLB entries",
        ", ".join(f"{s} {per[s]['np2m_over_2dnt']:.1f}%" for s in per),
    )


# ---------------------------------------------------------------------------------------------
# Figures 7, 8, 9 (MiscServer)


def _figure7(c: Claims, m: Mapping[str, Measured]) -> None:
    a, b = m["MiscServer/nested/2d"].full, m["MiscServer/nested/2d+nt"].full
    text = ref.claim("bhargava08_claims", "2D_PWC+NT accesses vs 2D_PWC")
    total = 100.0 * (1 - (pwc_accesses(b) + ntlb_accesses(b)) / pwc_accesses(a))
    misses = 100.0 * (1 - b["walk_caches"]["pwc"]["misses"] / a["walk_caches"]["pwc"]["misses"])
    pwc = 100.0 * (1 - pwc_accesses(b) / pwc_accesses(a))
    pwc_text = _text("2D_PWC+NT PWC accesses vs 2D_PWC")
    for key, claim, paper_text, v, target, explain in (
        (
            "f7/accesses",
            "Figure 7, MiscServer: 2D_PWC+NT's PWC + NTLB accesses, fewer than 2D_PWC's PWC "
            "accesses",
            text,
            total,
            ref.numbers(text)[0],
            "one NTLB hit replaces four nested PWC lookups, but every walk also pays an NTLB "
            "lookup per guest row",
        ),
        (
            "f7/pwc_accesses",
            "Figure 7, MiscServer: PWC accesses, 2D_PWC+NT vs 2D_PWC",
            pwc_text,
            pwc,
            ref.numbers(pwc_text)[0],
            "the NTLB skips the nested rows of gL4–gL1; the gPA row and the G column are never "
            "skipped",
        ),
        (
            "f7/pwc_misses",
            "Figure 7, MiscServer: PWC misses, 2D_PWC+NT vs 2D_PWC",
            text,
            misses,
            ref.numbers(text)[1],
            "the skipped references were mostly hits; the misses that remain are {nL1,gPA} "
            "and {G,gL2}, which the NTLB cannot skip",
        ),
    ):
        c.judge(
            key,
            claim,
            paper_text,
            v,
            "% fewer",
            near(target, 0.5, above(0.0), "§6.2 in whole percents: ±0.5; direction: fewer", 1),
            explain,
        )


def pwc_hit_pct(r: api.Result, cell: str) -> float:
    """The PWC hit percentage of one ``{column,row}`` cell (``"nL1,gPA"``): the references
    the PWC served there over the references looked up there."""
    looked = (r.get("walk_refs_by_step") or {}).get(cell, 0)
    hits = (r.get("pwc_hits_by_step") or {}).get(cell, 0)
    return 100.0 * hits / looked if looked else math.nan


#: The Figure 8 cells §6.2 says hit in the PWC "for less than half of the accesses".
F8_LESS_THAN_HALF = ("G,gL2", "nL2,gPA")


def _figure8(c: Claims, m: Mapping[str, Measured]) -> None:
    r = m["MiscServer/nested/2d+nt"].full
    c.definition(
        "f8/G_gL1_hits",
        "Figure 8: {G,gL1} PWC hit rate",
        _text("{G gL1} PWC hit rate"),
        pwc_hit_pct(r, "G,gL1"),
        "% hits",
        "the PWC does not hold {G,gL1} entries (pwc.cache_g_l1 = false, seed 002 §4.2)",
    )
    text = ref.claim("bhargava08_claims", "{nL1 gPA} PWC hit rate")
    per_mille = ref.numbers(text)[0]
    hit = pwc_hit_pct(r, "nL1,gPA")
    c.judge(
        "f8/nL1_gPA_hits",
        "Figure 8, MiscServer under 2D_PWC+NT: {nL1,gPA} PWC hit rate",
        f"{text} ({per_mille / 10:.1f}%)",
        hit,
        "% hits",
        near(
            per_mille / 10,
            0.05,
            below(50.0),
            "§6.2 'roughly seven out of 1,000', in whole accesses per 1,000: ±0.5‰; direction: "
            "under half, the rate below which §6.2 doubts an entry is worth caching",
            digits=2,
        ),
        "a {nL1,gPA} entry maps the data page itself: it hits only when the proxy returns "
        "to a data page whose entry is still among the PWC's 24; the proxy's Zipf skew over "
        "its 4 GiB decides how often that is, and the paper's suites reused data pages "
        "differently",
    )
    half = _text("{G gL2} and {nL2 gPA} PWC hit rate")
    for cell in F8_LESS_THAN_HALF:
        col, row = cell.split(",")
        space = "guest-virtual" if col == "G" else "guest-physical"
        c.judge(
            f"f8/{col}_{row}_hits",
            f"Figure 8, MiscServer under 2D_PWC+NT: {{{cell}}} PWC hit rate",
            half,
            pwc_hit_pct(r, cell),
            "% hits",
            holds(below(50.0), "§6.2 states the bound only", digits=1),
            f"each {{{cell}}} entry covers 2 MiB of {space}"
            " memory; how often one is still among the PWC's 24 is set by how the proxy's "
            "skewed lookups spread over its 2 MiB regions, more concentrated here than in the "
            "paper's suites",
        )
    gain_text = _text("not caching {nL1 gPA}")
    gain = 100.0 * (m["MiscServer/nested/2d+nt"].cycles / m["fig8/no_nl1_gpa"].cycles - 1)
    c.judge(
        "f8/no_nl1_gpa",
        "§6.2, MiscServer: speedup of 2D_PWC+NT when {nL1,gPA} entries are not cached",
        gain_text,
        gain,
        "% speedup",
        near(
            ref.numbers(gain_text)[0],
            0.05,
            above(0.0),
            "§6.2 to 0.1%: ±0.05; direction: a gain",
            digits=2,
        ),
        f"with {hit:.2f}% of {{nL1,gPA}} lookups hitting, the entries evict others from the "
        "24-entry PWC; how much the other cells gain from the freed entries depends on how "
        "many distinct upper-level entries the proxy's walks need",
    )
    c.not_simulated(
        "f3/unique_entries",
        "Figure 3: share of unique page entries at {nL1,gPA} and {G,gL1}",
        ref.claim("bhargava08_claims", "share of unique page entries at {nL1 gPA} and {G gL1}"),
        "vmmu counts references per {column,row}, not distinct entries; needed: a count of "
        "distinct page-entry addresses per {column,row} (a set per cell, off the hot path)",
    )


def _figure9_configs(ctx: Context) -> list[tuple[str, int, int, bool]]:
    """(key, PWC entries, NTLB entries, {G,gL1} cached): the baseline is 24 / 16. The paper's
    five PWC sizes are not all in its text (24 and 8096 are); 96 and 384 are vmmu's."""
    pwcs = [24, 8096] if ctx.quick else [24, 96, 384, 8096]
    ntlbs = [16] if ctx.quick else [16, 64, 256]
    out = [(f"pwc{p}/ntlb{n}", p, n, False) for p in pwcs for n in ntlbs]
    out += [(f"pwc8096g/ntlb{n}", 8096, n, True) for n in ntlbs]
    return out


def _figure9_system(pwc: int, ntlb: int, gl1: bool) -> System:
    return _system("nested/2d+nt").with_set(
        machine__pwc__entries=pwc,
        machine__pwc__ways=pwc,
        machine__ntlb__entries=ntlb,
        machine__ntlb__ways=ntlb,
        machine__pwc__cache_g_l1=gl1,
    )


def _figure9_jobs(ctx: Context, ipr: Mapping[str, int], refs: int, web: bool) -> list[Job]:
    spec = f"{_suite_spec(ctx, 'MiscServer')},ipr={ipr['MiscServer']},refs={2 * refs}"
    jobs = [
        Job(f"fig9/{k}", _figure9_system(p, n, g), spec, warmup=refs)
        for k, p, n, g in _figure9_configs(ctx)
        if (p, n, g) != (24, 16, False)
    ]
    jobs.append(
        Job(
            "fig8/no_nl1_gpa",
            _system("nested/2d+nt").with_set(machine__pwc__cache_nl1_gpa=False),
            spec,
            warmup=refs,
        )
    )
    jobs.append(
        Job(
            "fig9/dtlb8096",
            _system("nested/2d+nt").with_set(machine__tlb__l2__0__entries=8096),
            spec,
            warmup=refs,
        )
    )
    if web:
        big = max(n for _, _, n, _ in _figure9_configs(ctx))
        spec = f"{_suite_spec(ctx, 'WebServer')},ipr={ipr['WebServer']},refs={2 * refs}"
        jobs.append(Job("fig9/web/pwc8096g", _figure9_system(8096, big, True), spec, warmup=refs))
    return jobs


def _figure9(c: Claims, m: Mapping[str, Measured], ctx: Context, web: bool) -> View:
    base = float(m["MiscServer/nested/2d+nt"].cycles)

    def gain(key: str) -> float:
        return 100.0 * (base / m[key].cycles - 1)

    ntlb16 = 100.0 * (m["MiscServer/nested/2d"].cycles / base - 1)
    text = ref.claim("bhargava08_claims", "NTLB 16 entries gain on MiscServer")
    c.judge(
        "f9/ntlb16",
        "Figure 9, MiscServer: the first 16 NTLB entries (2D_PWC+NT over 2D_PWC)",
        text,
        ntlb16,
        "% speedup",
        near(ref.numbers(text)[0], 0.5, above(0.0), "§6.4 in whole percents: ±0.5", 1),
        "as Figure 6's NTLB gain: most of what the NTLB skips was a PWC hit already",
    )
    text = ref.claim("bhargava08_claims", "L2 DTLB 8096 entries vs PWC 8096 entries (MiscServer)")
    dtlb_paper, pwc_paper = ref.numbers(text)[0], ref.numbers(text)[1]
    g_pwc = gain("fig9/pwc8096/ntlb16")
    g_dtlb = gain("fig9/dtlb8096")
    c.judge(
        "f9/pwc8096",
        "Figure 9, MiscServer: an 8096-entry PWC over the 24-entry baseline",
        text,
        g_pwc,
        "% speedup",
        near(pwc_paper, 0.05, above(0.0), "§6.4 to 0.1%: ±0.05", 2),
        "a PWC that holds every upper-level entry still misses {G,gL1} (never cached) and the "
        "{nL1,gPA} entries of the proxy's 4 GiB, one per data page",
    )
    c.judge(
        "f9/dtlb8096",
        "§6.4, MiscServer: an 8096-entry L2 DTLB over the baseline",
        text,
        g_dtlb,
        "% speedup",
        near(dtlb_paper, 0.05, above(0.0), "§6.4 to 0.1%: ±0.05", 2),
        "8096 TLB entries cover 32 MiB of the proxy's 4 GiB: its Zipf tail still misses",
    )
    c.judge(
        "f9/tlb_beats_pwc",
        "§6.4, MiscServer: TLB entries buy more than PWC entries (8096 each)",
        text,
        g_dtlb - g_pwc,
        "% points",
        holds(above(0.0), "the paper states the direction (11.3% > 8.5%)", 2),
        "an 8096-entry PWC removes most upper-level and nested misses of every remaining "
        "walk, while 8096 more TLB entries (32 MiB of reach) remove only the walks to the "
        "proxy's hottest pages; the paper's suites had more reuse within that reach "
        "(instruction side, kernel, stacks) than a Zipf lookup over 4 GiB",
    )
    if web:
        _webserver(c, m, ctx, gain)
    rows: list[list[Any]] = []
    for k, p, n, g in _figure9_configs(ctx):
        key = "MiscServer/nested/2d+nt" if (p, n, g) == (24, 16, False) else f"fig9/{k}"
        rows.append([f"{p}{' w/ {G,gL1}' if g else ''}", n, gain(key)])
    rows.append(["L2 DTLB 8096 (PWC 24)", 16, g_dtlb])
    return View(
        "figure9",
        "Figure 9, MiscServer: speedup over the 24-entry PWC, 16-entry NTLB baseline",
        ["PWC entries", "NTLB entries", "speedup (%)"],
        rows,
        "Every PWC and NTLB fully associative at the same latency, as §6.4. The paper's figure "
        "has five PWC sizes; its text names 24 and 8096 only, so 96 and 384 are vmmu's choice.",
    )


def _webserver(
    c: Claims, m: Mapping[str, Measured], ctx: Context, gain: Callable[[str], float]
) -> None:
    big = max(n for _, _, n, _ in _figure9_configs(ctx))
    web_base = float(m["WebServer/nested/2d+nt"].cycles)
    g_web = 100.0 * (web_base / m["fig9/web/pwc8096g"].cycles - 1)
    g_misc = gain(f"fig9/pwc8096g/ntlb{big}")
    text = _text("WebServer gain from larger PWC and NTLB")
    c.judge(
        "f9/webserver",
        f"§6.4, WebServer: the largest configuration (8096-entry PWC with {{G,gL1}}, {big}-entry "
        "NTLB) gains at most 4%",
        text,
        g_web,
        "% speedup",
        Criterion(
            Band(-math.inf, 4.5),
            below(g_misc),
            "'no greater than 4%' in whole percents: ≤ 4.5; direction: less than MiscServer's gain",
            1,
        ),
        f"MiscServer gains {g_misc:.1f}% from the same configuration; the WebServer proxy's "
        "Zipf-1.0 file set over 2 GiB has as many distinct leaf entries per walk",
    )


def _figure8_view(m: Mapping[str, Measured]) -> View:
    r = m["MiscServer/nested/2d+nt"].full
    steps = r.get("walk_refs_by_step") or {}
    rows_order = ["gL4", "gL3", "gL2", "gL1", "gPA"]
    cols = ["nL4", "nL3", "nL2", "nL1", "G"]
    rows = []
    for row in rows_order:
        cells = []
        for col in cols:
            n = steps.get(f"{col},{row}")
            if n:
                rate = 1000.0 * n / r.instructions
                cells.append(f"{rate:.2f} ({pwc_hit_pct(r, f'{col},{row}'):.0f}%)")
            else:
                cells.append("–")
        rows.append([row, *cells])
    return View(
        "figure8",
        "Figure 8, MiscServer under 2D_PWC+NT: page-entry accesses per 1,000 instructions "
        "(PWC hit percentage) by {column,row}",
        ["row", *cols],
        rows,
        "References looked up after the NTLB (a skipped nested walk makes none), as in the "
        "paper's figure, which gives the same two numbers per cell.",
    )


def _table_view(
    per: Mapping[str, dict[str, float]], traced: Mapping[str, dict[str, float]]
) -> View:
    rows: list[list[Any]] = []

    def add(name: str, x: dict[str, float], paper_suite: str | None) -> None:
        if paper_suite:
            t4 = "bhargava08_table4"
            rows.append(
                [
                    f"{name} (paper)",
                    _t1(paper_suite, "tlb_misses_per_100k_instr")[1],
                    _t1(paper_suite, "walk_latency_2d_over_native_no_pwc")[1],
                    _t1(paper_suite, "perfect_tlb_gain_native_pct")[1],
                    _t1(paper_suite, "perfect_tlb_gain_2d_pct")[1],
                    ref.printed(t4, "suite", paper_suite, "page_entry_l2_misses_2d_over_native"),
                    ref.printed(t4, "suite", paper_suite, "page_entry_l2_miss_pct"),
                ]
            )
        rows.append(
            [
                f"{name} (vmmu)",
                x["tlb_misses"],
                x["walk_latency"],
                x["perfect_native"],
                x["perfect_2d"],
                x["l2miss_ratio"],
                x["l2miss_pct"],
            ]
        )

    for s, x in per.items():
        add(s, x, s)
    for t, x in traced.items():
        add(t, x, None)
    return View(
        "tables",
        "Tables 1 and 4 side by side: paper suites, vmmu proxies and recorded programs",
        [
            "workload",
            "TLB misses / 100K instr",
            "2D / native walk latency (×)",
            "perfect TLB, native (%)",
            "perfect TLB, 2D (%)",
            "page-entry L2 misses 2D / native (×)",
            "page-entry L2 miss rate (%)",
        ],
        rows,
    )


PAPER = Paper(
    "bhargava08",
    "002",
    "2D page walks and page-walk caches: Tables 1, 4, 5 and Figures 6–9 per suite",
    run,
    PARAMETERS,
)
