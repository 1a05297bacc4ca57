"""Seed 002's reproduction, the runs' configurations: the machine, the suite proxies and their
reasons, the page-walk caching designs every workload runs under, the recorded programs, the
Figure 9 sizes, the estimated parameters, and where each of the paper's tables and figures is
(:data:`COVERAGE`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vmmu.repro._paper import Param
from vmmu.repro._run import Context, System

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

#: The recorded suite's entries that stand for each suite (vmmu suite list): the class the
#: suite declares them in. JavaServer runs jvm-txn (4 KiB guest pages, as every design here).
RECORDED: dict[str, tuple[str, ...]] = {
    "MiscServer": ("sqlite-tpcb",),
    "WebServer": ("redis",),
    "JavaServer": ("jvm-txn",),
    "IntCpu": ("gcc", "xz", "python"),
    "FpCpu": ("swim", "dgemm"),
}
#: References simulated and left out at the start of each trace (at most a tenth of it): the
#: loader, relocations and libc start-up of these programs fit well inside it.
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

#: The designs Table 1's perfect-TLB opportunity needs, rerun under the interval core model
#: (docs/model.md, "Timing"): the paper's simulator modelled an out-of-order core.
INTERVAL_DESIGNS: tuple[str, ...] = ("native/none", "nested/none")

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


def suite_spec(ctx: Context, suite: str) -> str:
    """The suite's proxy with the knobs under study (``MiscServer.footprint``, ...)."""
    return ctx.spec(SUITES[suite].spec, prefix=suite)


def system(design: str, **extra: Any) -> System:
    mode, pwc, nps = DESIGNS[design]
    s = System(MACHINE, mode, pwc=pwc, nested_page_size=nps)
    return s.with_set(**extra) if extra else s


def interval_system(design: str) -> System:
    """``design`` timed by the interval core model, on the preset's core (rob, queues, MSHRs,
    walkers)."""
    return system(design, machine__core__model="interval")


def figure9_configs(ctx: Context) -> list[tuple[str, int, int, bool]]:
    """(key, PWC entries, NTLB entries, {G,gL1} cached): the baseline is 24 / 16. The paper's
    five PWC sizes are not all in its text (24 and 8096 are); 96 and 384 are vmmu's."""
    pwcs = [24, 8096] if ctx.quick else [24, 96, 384, 8096]
    ntlbs = [16] if ctx.quick else [16, 64, 256]
    out = [(f"pwc{p}/ntlb{n}", p, n, False) for p in pwcs for n in ntlbs]
    out += [(f"pwc8096g/ntlb{n}", 8096, n, True) for n in ntlbs]
    return out


def figure9_system(pwc: int, ntlb: int, gl1: bool) -> System:
    return system("nested/2d+nt").with_set(
        machine__pwc__entries=pwc,
        machine__pwc__ways=pwc,
        machine__ntlb__entries=ntlb,
        machine__ntlb__ways=ntlb,
        machine__pwc__cache_g_l1=gl1,
    )
