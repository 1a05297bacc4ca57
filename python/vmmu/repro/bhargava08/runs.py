"""Seed 002's reproduction, the runs: each suite's ``ipr`` solved from Table 1
(:func:`calibrate`), every suite under every design of :data:`~.setup.DESIGNS`, MiscServer's
Figure 8 and 9 variants, and the recorded programs (recorded first when missing,
:func:`traces`); :func:`measure` runs them all."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import vmmu
from vmmu import published as ref
from vmmu.repro._run import Context, Job, Measured
from vmmu.repro.bhargava08 import setup
from vmmu.repro.bhargava08.setup import DESIGNS, SUITES, TRACE_WARMUP, TRACES


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


def checkout() -> Path | None:
    root = Path(vmmu.__file__).resolve().parents[2]
    return root if (root / "tools" / "traces" / "record.sh").is_file() else None


def traces(ctx: Context, notes: list[str]) -> dict[str, str]:
    """The recorded traces, recorded first if missing; ``{}`` (with a note) if impossible."""
    if ctx.quick:
        notes.append(
            "--quick skips the recorded programs (gzip, sqlite3, python3, gcc); the full run "
            "includes them"
        )
        return {}
    root = checkout()
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
    key, the recorded traces and the notes to print."""

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
    traces: dict[str, str] = field(default_factory=dict)
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
    m = ctx.measure(jobs)
    recorded = traces(ctx, notes) if not ctx.values else {}
    if recorded:
        tm = ctx.measure(
            Job(f"{t}/{d}", setup.system(d), trace=path, warmup=TRACE_WARMUP)
            for t, path in recorded.items()
            for d in DESIGNS
        )
        m.update(tm)
    return Runs(refs, suites, len(suites) == len(SUITES), figures, web, ipr, m, recorded, notes)
