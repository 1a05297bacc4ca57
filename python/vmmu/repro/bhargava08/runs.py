"""Seed 002's reproduction, the runs: each suite's ``ipr`` solved from Table 1
(:func:`calibrate`), every suite under every design of :data:`~.setup.DESIGNS`, MiscServer's
Figure 8 and 9 variants, the recorded suite's entries of each suite (:data:`~.setup.RECORDED`,
as the suite's cache holds them) under the same designs, and Table 1's perfect-TLB designs of
every workload under the interval core model; :func:`measure` runs them all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vmmu import published as ref
from vmmu.repro import _suite
from vmmu.repro._run import Context, Job, Measured
from vmmu.repro.bhargava08 import setup
from vmmu.repro.bhargava08.setup import (
    DESIGNS,
    INTERVAL_DESIGNS,
    RECORDED,
    SUITES,
    TRACE_WARMUP,
)


def calibrate(ctx: Context, refs: int, suites: list[str]) -> dict[str, int]:
    """Each suite's ``ipr``: native TLB misses per reference (any ``ipr``: walks do not depend
    on it) divided into Table 1's misses per 100K instructions."""
    jobs = [
        Job(
            f"{s}/calib",
            setup.system("native/none"),
            f"{setup.suite_spec(ctx, s)},ipr=1,refs={2 * refs}",
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


def figure9_jobs(ctx: Context, ipr: Mapping[str, int], refs: int, web: bool) -> list[Job]:
    spec = f"{setup.suite_spec(ctx, 'MiscServer')},ipr={ipr['MiscServer']},refs={2 * refs}"
    jobs = [
        Job(f"fig9/{k}", setup.figure9_system(p, n, g), spec, warmup=refs)
        for k, p, n, g in setup.figure9_configs(ctx)
        if (p, n, g) != (24, 16, False)
    ]
    jobs.append(
        Job(
            "fig8/no_nl1_gpa",
            setup.system("nested/2d+nt").with_set(machine__pwc__cache_nl1_gpa=False),
            spec,
            warmup=refs,
        )
    )
    jobs.append(
        Job(
            "fig9/dtlb8096",
            setup.system("nested/2d+nt").with_set(machine__tlb__l2__0__entries=8096),
            spec,
            warmup=refs,
        )
    )
    if web:
        big = max(n for _, _, n, _ in setup.figure9_configs(ctx))
        spec = f"{setup.suite_spec(ctx, 'WebServer')},ipr={ipr['WebServer']},refs={2 * refs}"
        jobs.append(
            Job("fig9/web/pwc8096g", setup.figure9_system(8096, big, True), spec, warmup=refs)
        )
    return jobs


@dataclass
class Runs:
    """What :func:`measure` ran: the workloads, each suite's ``ipr``, every measurement by job
    key (``SUITE/DESIGN`` and ``ENTRY/DESIGN``; ``.../interval/DESIGN`` under the interval core
    model), the recorded entries of each suite and the notes to print."""

    refs: int
    suites: list[str]
    #: Every suite ran (a sensitivity trial reruns the suite its knob belongs to).
    complete: bool
    #: MiscServer ran, and with it Figures 7–9.
    figures: bool
    #: WebServer ran, and with it its Figure 9 bound.
    web: bool
    ipr: dict[str, int]
    m: dict[str, Measured]
    recorded: dict[str, list[_suite.Recorded]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def measure(ctx: Context) -> Runs:
    """Runs every job of the reproduction at ``ctx``'s scale."""
    refs = ctx.scale(400_000, 20_000)
    notes: list[str] = []
    # A sensitivity trial of a suite's knob reruns that suite only (and MiscServer's figures
    # when the suite is MiscServer); the recorded programs depend on no knob here.
    touched = {name.partition(".")[0] for name in ctx.values}
    suites = [s for s in SUITES if s in touched] or list(SUITES)
    figures = "MiscServer" in suites
    web = "WebServer" in suites
    ipr = calibrate(ctx, refs, suites)
    jobs = []
    for s in suites:
        spec = f"{setup.suite_spec(ctx, s)},ipr={ipr[s]},refs={2 * refs}"
        for d in DESIGNS:
            jobs.append(Job(f"{s}/{d}", setup.system(d), spec, warmup=refs))
    if figures:
        jobs += figure9_jobs(ctx, ipr, refs, web=web)
    recorded: dict[str, list[_suite.Recorded]] = {}
    if not ctx.values:
        found = _suite.find(ctx, [n for s in suites for n in RECORDED[s]])
        recorded = {s: [found[n] for n in RECORDED[s]] for s in suites}
    for s in suites:
        spec = f"{setup.suite_spec(ctx, s)},ipr={ipr[s]},refs={2 * refs}"
        for d in INTERVAL_DESIGNS:
            jobs.append(Job(f"{s}/interval/{d}", setup.interval_system(d), spec, warmup=refs))
        for r in recorded.get(s, []):
            if r.trace is None:
                continue
            warm = r.warmup(TRACE_WARMUP)
            for d in DESIGNS:
                jobs.append(Job(f"{r.name}/{d}", setup.system(d), trace=r.trace, warmup=warm))
            for d in INTERVAL_DESIGNS:
                jobs.append(
                    Job(
                        f"{r.name}/interval/{d}",
                        setup.interval_system(d),
                        trace=r.trace,
                        warmup=warm,
                    )
                )
    m = ctx.measure(jobs)
    return Runs(refs, suites, len(suites) == len(SUITES), figures, web, ipr, m, recorded, notes)
