"""Reproductions of the papers' findings: each paper's numbers beside vmmu's (docs/repro.md).

One function per paper (:func:`kloster07`, :func:`bhatia09`, :func:`bae11`, :func:`levasseur`,
:func:`bhargava08`) runs the simulations that paper's findings need, on the machine and cost
profile of that paper, and returns a :class:`pandas.DataFrame` indexed by row key with the
columns ``claim``, ``paper``, ``vmmu``, ``unit``, ``holds`` (``yes``, ``no``, or ``n/a`` for a
row shown for context) and ``note``. ``df.attrs`` holds the setup (``machine``, ``profile``,
``settings``, ``scale``) and the wall time (``seconds``). :func:`render` draws a table with
rich; ``vmmu repro NAME`` prints it.

The published numbers come from the CSV files in ``vmmu/reference/`` (copied from the
project's ``shared/reference/``; see the README there). A finding the model does not
reproduce is reported as ``holds = no``, never hidden; docs/repro.md explains each.

**Steady state.** Aim9, the kernel microbenchmarks and SPEC report the rate of a loop, not the
start-up of the process that runs it. A workload run here includes that start-up (mapping and
warming the process image, and under shadow paging the hidden faults that fill the shadow
tables once), so every figure is the loop's cost alone: the cycles of a run with ``N``
iterations of the loop minus the cycles of the same run with none (``iterations=0``,
``points=0``...).
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from vmmu import api

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("claim", "paper", "vmmu", "unit", "holds", "note")

#: Simulations run at once: one per core (the engine releases the GIL while it simulates).
WORKERS = os.cpu_count() or 1


# ---------------------------------------------------------------------------------------------
# Reference data


def reference(name: str) -> pd.DataFrame:
    """One of the published-figure CSVs shipped in ``vmmu/reference/`` (``kloster07_claims``)."""
    import pandas as pd

    path = resources.files("vmmu").joinpath("reference", f"{name}.csv")
    with path.open("r", encoding="utf-8") as f:
        return pd.read_csv(f)


def _claim(table: str, claim: str) -> str:
    """The ``value`` of row ``claim`` of a ``*_claims.csv`` file."""
    df = reference(table)
    rows = df.loc[df["claim"] == claim, "value"]
    if rows.empty:
        raise KeyError(f"{table}.csv has no claim `{claim}`")
    return str(rows.iloc[0])


# ---------------------------------------------------------------------------------------------
# Running simulations


@dataclass(frozen=True)
class System:
    """A simulated system: a machine, a paging mode and the hypervisor's settings."""

    machine: str
    mode: str
    profile: str | None = None
    technique: str | None = None
    pwc: str | None = None
    guest_page_size: str | None = None
    set: tuple[tuple[str, Any], ...] = ()

    def options(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "mode": self.mode,
            "profile": self.profile,
            "technique": self.technique,
            "pwc": self.pwc,
            "guest_page_size": self.guest_page_size,
            "set": list(self.set),
        }


@dataclass(frozen=True)
class Job:
    """One measurement: ``workload`` on ``system``, the loop parameter ``loop`` set to ``n``.

    With ``steady`` (the default) the same run with ``loop=0`` is subtracted (module doc).
    With ``warmup`` references, the loop runs ``warmup`` more references first and the engine
    leaves them, and the set-up before them, out of every count (a paper whose simulations
    had a warm-up phase).
    """

    key: str
    system: System
    workload: str
    loop: str
    n: int
    steady: bool = True
    warmup: int = 0

    def spec(self, n: int) -> str:
        sep = "," if ":" in self.workload else ":"
        return f"{self.workload}{sep}{self.loop}={n + self.warmup}"

    def runs(self) -> list[int]:
        return [0, self.n] if self.steady else [self.n]


@dataclass
class Measured:
    """A job's result: the loop's cycles, the full run and the start-up run it subtracts."""

    job: Job
    full: api.Result
    base: api.Result | None

    @property
    def cycles(self) -> int:
        return self.full.cycles - (self.base.cycles if self.base is not None else 0)

    def exits_per_iteration(self) -> dict[str, float]:
        """Exits (and in-guest VMM calls) per loop iteration, by reason, most frequent first."""
        full = {k: v["count"] for k, v in (self.full.get("exits") or {}).items()}
        base = {k: v["count"] for k, v in ((self.base or {}).get("exits") or {}).items()}
        per = {k: (full[k] - base.get(k, 0)) / max(self.job.n, 1) for k in full}
        return dict(sorted(((k, v) for k, v in per.items() if v > 0), key=lambda kv: -kv[1]))


class _Bars:
    """One rich progress bar per paper on stderr, advanced by each engine run's callback."""

    def __init__(self, enabled: bool, console: Console | None = None) -> None:
        self._enabled = enabled
        self._console = console or Console(stderr=True)
        self._progress: Progress | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def __enter__(self) -> _Bars:
        if self._enabled and self._console.is_terminal:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[runs]}"),
                TimeElapsedColumn(),
                console=self._console,
                transient=True,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def stop(self) -> None:
        """Every callback returns ``False`` from now on: the engine runs stop."""
        self._stopped.set()

    def task(self, description: str, runs: int) -> Callable[[int], Callable[..., bool]]:
        """Registers ``runs`` engine runs; returns ``slot(i)`` → that run's callback."""
        fractions = [0.0] * runs
        task_id = None
        if self._progress is not None:
            task_id = self._progress.add_task(description, total=runs, runs=f"0/{runs} runs")

        def update() -> None:
            if self._progress is not None and task_id is not None:
                done = sum(1 for f in fractions if f >= 1.0)
                self._progress.update(task_id, completed=sum(fractions), runs=f"{done}/{runs} runs")

        def slot(i: int) -> Callable[..., bool]:
            def report(done: int, total: int | None = None, finished: bool = False) -> bool:
                with self._lock:
                    if finished:
                        fractions[i] = 1.0
                    elif total:
                        fractions[i] = min(done / total, 0.999)
                    update()
                return not self._stopped.is_set()

            return report

        return slot


def measure(
    jobs: Iterable[Job], bars: _Bars, description: str, workers: int = WORKERS
) -> dict[str, Measured]:
    """Runs every job (each one or two engine runs) on ``workers`` threads."""
    jobs = list(jobs)
    units = [(j, n) for j in jobs for n in j.runs()]
    slot = bars.task(description, len(units))

    def one(i: int, job: Job, n: int) -> api.Result:
        cb = slot(i)
        warm = {"warmup": job.warmup} if job.warmup else {}
        r = api.run(workload=job.spec(n), progress=cb, **warm, **job.system.options())
        cb(0, None, finished=True)
        return r

    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = [pool.submit(one, i, j, n) for i, (j, n) in enumerate(units)]
        results = [f.result() for f in futures]
    except BaseException:
        # Ctrl-C or a failed run: the running simulations stop at their next progress call.
        bars.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    out: dict[str, Measured] = {}
    k = 0
    for j in jobs:
        if j.steady:
            out[j.key] = Measured(j, full=results[k + 1], base=results[k])
            k += 2
        else:
            out[j.key] = Measured(j, full=results[k], base=None)
            k += 1
    return out


# ---------------------------------------------------------------------------------------------
# Tables


@dataclass
class _Table:
    """Rows of a reproduction, then its DataFrame."""

    name: str
    title: str
    setup: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self,
        key: str,
        claim: str,
        paper: Any,
        vmmu: Any,
        unit: str,
        holds: bool | None,
        note: str = "",
    ) -> None:
        verdict = "n/a" if holds is None else ("yes" if holds else "no")
        self.rows.append(
            {
                "key": key,
                "claim": claim,
                "paper": paper,
                "vmmu": vmmu,
                "unit": unit,
                "holds": verdict,
                "note": note,
            }
        )

    def frame(self, seconds: float) -> pd.DataFrame:
        import pandas as pd

        df = pd.DataFrame(self.rows, columns=["key", *COLUMNS]).set_index("key")
        df.index.name = None
        df.attrs.update({"paper": self.name, "title": self.title, "seconds": seconds, **self.setup})
        return df


def _settings_text(settings: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={api._toml_literal(v)}" for k, v in settings.items()) or "defaults"


_PER = {"iterations": "iteration", "processes": "process", "jobs": "job", "points": "point"}


def _count(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _exit_note(m: Measured, limit: int = 3) -> str:
    """The most frequent exits of the loop, per iteration (per process, job, ...)."""
    per = m.exits_per_iteration()
    if not per:
        return "no exits in the loop"
    parts = [f"{_count(v)} {k}" for k, v in list(per.items())[:limit]]
    return f"exits per {_PER.get(m.job.loop, m.job.loop.rstrip('s'))}: " + ", ".join(parts)


def _loss(native: Measured, virt: Measured) -> float:
    """Throughput loss in percent (seed 000 Table 8: (native − HVM) / native ops per second)."""
    return 100.0 * (1.0 - native.cycles / virt.cycles)


def _ratio(a: Measured, b: Measured) -> float:
    return a.cycles / b.cycles


def _ovh(m: Measured, native: Measured) -> str:
    return f"{100.0 * (m.cycles / native.cycles - 1):+.1f}%"


def _scale(quick: bool, full: int, small: int) -> int:
    return small if quick else full


# ---------------------------------------------------------------------------------------------
# seed 000: Kloster, Kristensen, Mejlholm 2007 — Xen 3.0.4 HVM vs native

#: Xen 3.0.4's shadow pager ("shadow2"), as the knobs of docs/model.md (docs/repro.md):
#: no out-of-sync pages (they came with Xen 3.3); every shadow kept in the shadow hash table, so
#: a CR3 write finds the root of any live process (more cached roots than live processes);
#: SHOPT_PREFETCH fills up to 32 neighbouring entries per fault (no effect on these workloads,
#: docs/repro.md); SHOPT_EARLY_UNSHADOW drops an L1 shadow on the second emulated write in a
#: row to it (the fork and exit pattern).
XEN_3_0_4 = {
    "hypervisor.shadow.unsync": False,
    "hypervisor.shadow.cached_roots": 256,
    "hypervisor.shadow.prefetch": 32,
    "hypervisor.shadow.write_flood": 2,
}

#: A compute-bound loop: 171.swim's stencil over 1 MiB (cache- and TLB-resident), 40
#: instructions per reference (nbench, Aim9's arithmetic tests, seed 001's 186.crafty).
COMPUTE = "swim:footprint=1M,arrays=4,ipr=40,prefault=0"


def kloster07(quick: bool = False, progress: bool = False, workers: int = WORKERS) -> pd.DataFrame:
    """Seed 000 Table 8 and MemoryMotion: Xen 3.0.4 HVM shadow paging vs native on Core 2."""
    t0 = time.monotonic()
    machine, profile = "core2-e6300", "xen-3.0.4-core2"
    native = System(machine, "native")
    shadow = System(machine, "shadow", profile, "hvm", set=tuple(XEN_3_0_4.items()))
    work = {
        "page_test": ("aim9-page_test", "iterations", _scale(quick, 4000, 300)),
        "brk_test": ("aim9-brk_test", "iterations", _scale(quick, 100_000, 5000)),
        "fork_test": ("aim9-fork_test", "iterations", _scale(quick, 2000, 150)),
        "exec_test": ("aim9-exec_test", "iterations", _scale(quick, 1000, 80)),
        "memorymotion": ("memorymotion", "processes", _scale(quick, 8, 1)),
        "compile": ("compile", "jobs", _scale(quick, 20, 2)),
        "compute": (COMPUTE, "points", _scale(quick, 200_000, 20_000)),
    }
    jobs = [
        Job(f"{k}/{s.mode}", s, w, loop, n)
        for k, (w, loop, n) in work.items()
        for s in (native, shadow)
    ]
    t = _Table(
        "kloster07",
        "seed 000 — Kloster et al. 2007: Xen 3.0.4 HVM (shadow paging) vs native",
        {
            "machine": machine,
            "profile": profile,
            "modes": "native vs shadow (technique hvm)",
            "settings": dict(XEN_3_0_4),
            "scale": "quick" if quick else "full",
            "workloads": {k: f"{w} {loop}={n}" for k, (w, loop, n) in work.items()},
        },
    )
    with _Bars(progress) as bars:
        m = measure(jobs, bars, "kloster07", workers)

    aim9 = reference("kloster07_aim9_memory").set_index("test")
    for test, limit in (("page_test", 50), ("brk_test", 5), ("fork_test", 50), ("exec_test", 50)):
        loss = _loss(m[f"{test}/native"], m[f"{test}/shadow"])
        below = test == "brk_test"
        t.add(
            test,
            f"Aim9 {test}: loss {'<' if below else '>'} {limit}%",
            float(aim9.loc[test, "loss_pct"]),
            loss,
            "% loss",
            loss < limit if below else loss > limit,
            _exit_note(m[f"{test}/shadow"]),
        )
    mm_text = _claim("kloster07_claims", "MemoryMotion Debian")
    secs = re.findall(r"(\d+(?:\.\d+)?) s", mm_text)
    mm_paper = float(secs[1]) / float(secs[0]) if len(secs) >= 2 else mm_text
    slow = _ratio(m["memorymotion/shadow"], m["memorymotion/native"])
    t.add(
        "memorymotion",
        "MemoryMotion: HVM several (≥ 2.5×) times slower",
        mm_paper,
        slow,
        "× slower",
        slow >= 2.5,
        f"paper: {mm_text}; " + _exit_note(m["memorymotion/shadow"]),
    )
    compile_loss = _loss(m["compile/native"], m["compile/shadow"])
    kc = _claim("kloster07_claims", "kernel compile")
    t.add(
        "compile",
        "kernel compile: a moderate loss (5–50%)",
        float(re.findall(r"[\d.]+", kc)[0]),
        compile_loss,
        "% loss",
        5 < compile_loss < 50,
        "vmmu: `compile` (many short-lived processes); " + _exit_note(m["compile/shadow"]),
    )
    cpu_loss = _loss(m["compute/native"], m["compute/shadow"])
    t.add(
        "compute",
        "CPU-bound: loss ≤ 1%",
        _claim("kloster07_claims", "CPU-bound (nbench; aim9 arithmetic)"),
        cpu_loss,
        "% loss",
        cpu_loss <= 1.0,
        "vmmu: a cache-resident stencil; " + _exit_note(m["compute/shadow"]),
    )
    return t.frame(time.monotonic() - t0)


# ---------------------------------------------------------------------------------------------
# seed 004: Bhatia 2009 — VMware ESX, EPT vs shadow paging on Nehalem

#: ESX backs guest memory with large pages when EPT is used (seed 004, "Hardware-assisted MMU
#: virtualization"): the nested tables map 2 MiB pages. Shadow paging keeps 4 KiB backing.
ESX_EPT = {"host.nested_page_size": "2M"}

#: 171.swim's ~190 MB of arrays, initialised page by page (prefault=0) as the program does.
SWIM = "swim:footprint=192M,prefault=0"


def bhatia09(quick: bool = False, progress: bool = False, workers: int = WORKERS) -> pd.DataFrame:
    """Seed 004: nested (EPT) vs shadow paging under ESX on a Xeon X5560."""
    t0 = time.monotonic()
    machine, profile = "nehalem-x5560", "esx-nehalem"
    systems = {
        "native": System(machine, "native"),
        "nested": System(machine, "nested", profile, set=tuple(ESX_EPT.items())),
        "shadow": System(machine, "shadow", profile, "hvm"),
    }
    work = {
        "segv": ("segv", "iterations", _scale(quick, 2000, 150), None),
        "pcd": ("pcd", "iterations", _scale(quick, 4000, 300), None),
        "nps": ("nps", "iterations", _scale(quick, 40_000, 3000), None),
        "fw": ("fw", "iterations", _scale(quick, 2000, 150), None),
        "compile": ("compile", "jobs", _scale(quick, 20, 2), None),
        "swim": (SWIM, "points", _scale(quick, 400_000, 40_000), None),
        "swim_2m": (SWIM, "points", _scale(quick, 400_000, 40_000), "2M"),
    }
    jobs = []
    for k, (w, loop, n, gps) in work.items():
        for mode, s in systems.items():
            if gps is not None:
                s = System(s.machine, s.mode, s.profile, s.technique, s.pwc, gps, s.set)
            jobs.append(Job(f"{k}/{mode}", s, w, loop, n))
    t = _Table(
        "bhatia09",
        "seed 004 — Bhatia 2009: VMware ESX, EPT (nested) vs shadow paging",
        {
            "machine": machine,
            "profile": profile,
            "modes": "native, nested, shadow (technique hvm)",
            "settings": {"nested runs": dict(ESX_EPT), "shadow runs": "preset defaults"},
            "scale": "quick" if quick else "full",
            "workloads": {
                k: f"{w} {loop}={n}" + (f", guest.page_size={g}" if g else "")
                for k, (w, loop, n, g) in work.items()
            },
        },
    )
    with _Bars(progress) as bars:
        m = measure(jobs, bars, "bhatia09", workers)

    def note(k: str) -> str:
        nat = m[f"{k}/native"]
        return (
            f"vs native: nested {_ovh(m[f'{k}/nested'], nat)}, shadow {_ovh(m[f'{k}/shadow'], nat)}"
        )

    micro = _claim(
        "bhatia09_claims", "EPT vs shadow on MMU-intensive microbenchmarks (segv pcd nps fw)"
    )
    for k in ("segv", "pcd", "nps", "fw"):
        r = _ratio(m[f"{k}/shadow"], m[f"{k}/nested"])
        t.add(
            k,
            f"{k}: nested ≥ 2× faster than shadow",
            micro,
            r,
            "× (shadow/nested)",
            r >= 2,
            note(k),
        )
    gains = {k: _ratio(m[f"{k}/shadow"], m[f"{k}/nested"]) for k in ("segv", "pcd", "nps", "fw")}
    top = max(gains, key=lambda k: gains[k])
    limit = 1 + float(re.findall(r"[\d.]+", micro)[0]) / 100
    t.add(
        "micro_max",
        f"largest microbenchmark gain: up to 600% ({limit:g}× shadow/nested)",
        micro,
        gains[top],
        "× (shadow/nested)",
        gains[top] <= limit,
        f"on {top}",
    )
    r = _ratio(m["compile/shadow"], m["compile/nested"])
    t.add(
        "compile",
        "Apache compile: nested faster",
        _claim("bhatia09_claims", "EPT vs shadow on MMU-intensive benchmarks"),
        r,
        "× (shadow/nested)",
        r > 1,
        "1 vCPU; " + note("compile"),
    )
    tlb = _claim("bhatia09_claims", "TLB-intensive (SPECjbb2005)")
    r4 = _ratio(m["swim/shadow"], m["swim/nested"])
    t.add(
        "swim",
        "swim, 4 KiB guest pages: shadow faster (ratio < 1)",
        tlb,
        r4,
        "× (shadow/nested)",
        r4 < 1,
        "TLB-intensive: SPECjbb2005 in the paper, swim here; " + note("swim"),
    )
    r2 = _ratio(m["swim_2m/shadow"], m["swim_2m/nested"])
    t.add(
        "swim_2m",
        "swim, 2 MiB guest pages: the gap closes (ratio rises to ≥ 0.95)",
        tlb,
        r2,
        "× (shadow/nested)",
        r2 > r4 and r2 >= 0.95,
        f"4 KiB pages: {r4:.3f}; " + note("swim_2m"),
    )
    return t.frame(time.monotonic() - t0)


# ---------------------------------------------------------------------------------------------
# seed 001: Bae, Lange, Dinda 2011 — Palacios on Opteron 2350, shadow vs nested

#: The Palacios guest of seed 001 §4: a single-core 32-bit guest (2-level page tables).
PALACIOS_GUEST = {"guest.format": "x86_32", "guest.memory": "1G"}

#: Palacios' shadow paging with caching (seed 001 §2): shadow roots cached per CR3 (the
#: default 4 roots), and none of the refinements of Xen and KVM — no out-of-sync pages, no
#: prefetch, no write-flood unshadowing.
PALACIOS_SHADOW = {
    "hypervisor.shadow.unsync": False,
    "hypervisor.shadow.prefetch": 0,
    "hypervisor.shadow.write_flood": 0,
}

#: "our nested paging implementation can use large pages at the nested level" (seed 001 §4).
PALACIOS_NESTED = {"host.nested_page_size": "2M"}


def bae11(quick: bool = False, progress: bool = False, workers: int = WORKERS) -> pd.DataFrame:
    """Seed 001 §4: shadow vs nested is workload dependent (Palacios, Opteron 2350)."""
    t0 = time.monotonic()
    machine, profile = "opteron2350", "palacios-opteron2350"
    systems = {
        "native": System(machine, "native", set=tuple(PALACIOS_GUEST.items())),
        "nested": System(
            machine, "nested", profile, set=tuple({**PALACIOS_GUEST, **PALACIOS_NESTED}.items())
        ),
        "shadow": System(
            machine,
            "shadow",
            profile,
            "hvm",
            set=tuple({**PALACIOS_GUEST, **PALACIOS_SHADOW}.items()),
        ),
    }
    work = {
        "swim": (f"{SWIM},bits=32", "points", _scale(quick, 400_000, 40_000)),
        "gcc": ("gcc:bits=32", "inputs", _scale(quick, 2, 1)),
        "compute": (f"{COMPUTE},bits=32", "points", _scale(quick, 200_000, 20_000)),
    }
    jobs = [
        Job(f"{k}/{mode}", s, w, loop, n)
        for k, (w, loop, n) in work.items()
        for mode, s in systems.items()
    ]
    t = _Table(
        "bae11",
        "seed 001 — Bae, Lange, Dinda 2011: Palacios, shadow vs nested paging",
        {
            "machine": f"{machine} (no TLB tags: every exit flushes the TLB)",
            "profile": profile,
            "modes": "native, nested, shadow (technique hvm)",
            "settings": {
                "all runs": dict(PALACIOS_GUEST),
                "nested runs": dict(PALACIOS_NESTED),
                "shadow runs": dict(PALACIOS_SHADOW),
            },
            "scale": "quick" if quick else "full",
            "workloads": {k: f"{w} {loop}={n}" for k, (w, loop, n) in work.items()},
        },
    )
    with _Bars(progress) as bars:
        m = measure(jobs, bars, "bae11", workers)

    def note(k: str) -> str:
        nat = m[f"{k}/native"]
        return (
            f"vs native: nested {_ovh(m[f'{k}/nested'], nat)}, shadow {_ovh(m[f'{k}/shadow'], nat)}"
        )

    r = _ratio(m["swim/shadow"], m["swim/nested"])
    t.add(
        "swim",
        "171.swim: shadow better (ratio < 1)",
        _claim("bae11_claims", "best under shadow paging"),
        r,
        "× (shadow/nested)",
        r < 1,
        note("swim"),
    )
    r = _ratio(m["gcc/shadow"], m["gcc/nested"])
    t.add(
        "gcc",
        "403.gcc: nested better (ratio > 1)",
        _claim("bae11_claims", "best under nested paging"),
        r,
        "× (shadow/nested)",
        r > 1,
        note("gcc") + "; " + _exit_note(m["gcc/shadow"]),
    )
    r = _ratio(m["compute/shadow"], m["compute/nested"])
    t.add(
        "compute",
        "compute-bound: shadow and nested within 3%",
        _claim("bae11_claims", "insensitive"),
        r,
        "× (shadow/nested)",
        abs(r - 1) <= 0.03,
        note("compute"),
    )
    gaps = {
        k: 100.0 * abs(m[f"{k}/shadow"].cycles - m[f"{k}/nested"].cycles) / m[f"{k}/native"].cycles
        for k in work
    }
    worst = max(gaps, key=lambda k: gaps[k])
    paper_gap = _claim("bae11_claims", "difference between modes relative to native")
    limit = float(re.findall(r"[\d.]+", paper_gap)[0])
    t.add(
        "max_gap",
        f"largest shadow–nested difference, % of native: up to {limit:g}%",
        paper_gap,
        gaps[worst],
        "% of native",
        gaps[worst] <= limit,
        f"on {worst}",
    )
    return t.frame(time.monotonic() - t0)


# ---------------------------------------------------------------------------------------------
# seed 003: LeVasseur et al. — pre-virtualization vs para-virtualization vs trap-and-emulate


def levasseur(quick: bool = False, progress: bool = False, workers: int = WORKERS) -> pd.DataFrame:
    """Seed 003: pv and previrt within a few percent of each other, both far below hvm."""
    t0 = time.monotonic()
    machine, profile = "core2-e6300", "xen-3.0.4-core2"
    systems = {
        "native": System(machine, "native"),
        "hvm": System(machine, "shadow", profile, "hvm", set=tuple(XEN_3_0_4.items())),
        "pv": System(machine, "shadow", profile, "pv"),
        "previrt": System(machine, "shadow", profile, "previrt"),
    }
    work = {
        "page_test": ("aim9-page_test", "iterations", _scale(quick, 4000, 300)),
        "fork_test": ("aim9-fork_test", "iterations", _scale(quick, 2000, 150)),
    }
    jobs = [
        Job(f"{k}/{tech}", s, w, loop, n)
        for k, (w, loop, n) in work.items()
        for tech, s in systems.items()
    ]
    t = _Table(
        "levasseur",
        "seed 003 — LeVasseur et al.: pre-virtualization vs para-virtualization vs "
        "trap-and-emulate",
        {
            "machine": machine,
            "profile": profile,
            "modes": "native; shadow mode with technique hvm, pv, previrt",
            "settings": {"hvm runs": dict(XEN_3_0_4)},
            "scale": "quick" if quick else "full",
            "workloads": {k: f"{w} {loop}={n}" for k, (w, loop, n) in work.items()},
        },
    )
    with _Bars(progress) as bars:
        m = measure(jobs, bars, "levasseur", workers)

    netperf = reference("levasseur_netperf")
    net = netperf[netperf["kernel"] == "Linux 2.6.9"].set_index("system")
    xen = 100.0 * (
        net.loc["Xen in-place VMM", "cycles_per_byte"] / net.loc["XenoLinux", "cycles_per_byte"] - 1
    )
    l4 = 100.0 * (
        net.loc["L4Ka in-place VMM", "cycles_per_byte"] / net.loc["L4Ka::Linux", "cycles_per_byte"]
        - 1
    )
    paper_close = f"{xen:+.1f}% (Xen), {l4:+.1f}% (L4Ka); Netperf cycles/byte"
    for k in work:
        nat = m[f"{k}/native"]
        losses = ", ".join(
            f"{tech} {_loss(nat, m[f'{k}/{tech}']):.1f}%" for tech in ("hvm", "pv", "previrt")
        )
        d = 100.0 * (m[f"{k}/previrt"].cycles / m[f"{k}/pv"].cycles - 1)
        t.add(
            f"{k}/previrt_vs_pv",
            f"{k}: previrt within 5% of pv (run time)",
            paper_close,
            d,
            "% (previrt vs pv)",
            abs(d) <= 5,
            f"loss vs native: {losses}; previrt " + _exit_note(m[f"{k}/previrt"], 2),
        )
        ho = m[f"{k}/hvm"].cycles / nat.cycles - 1
        po = m[f"{k}/pv"].cycles / nat.cycles - 1
        qo = m[f"{k}/previrt"].cycles / nat.cycles - 1
        r = ho / max(po, qo) if max(po, qo) > 0 else float("inf")
        t.add(
            f"{k}/hvm_vs_pv",
            f"{k}: hvm overhead ≥ 2× that of pv and previrt",
            "pv ≈ previrt ≪ hvm",
            r,
            "× (hvm/pv overhead)",
            r >= 2,
            f"overhead vs native: hvm {100 * ho:+.0f}%, pv {100 * po:+.0f}%, "
            f"previrt {100 * qo:+.0f}%",
        )
    for system, row in netperf.set_index(["kernel", "system"]).iterrows():
        kernel, name = system
        slug = re.sub(r"[^a-z0-9.]+", "-", f"{name} {kernel.split()[-1]}".lower()).strip("-")
        t.add(
            f"netperf/{slug}",
            f"Netperf receive: {name}, {kernel} (context)",
            f"{row['throughput_mbps']:g} Mb/s, {row['cpu_util_pct']:g}% CPU, "
            f"{row['cycles_per_byte']:g} cycles/byte",
            "not simulated",
            "",
            None,
            "vmmu does not model I/O",
        )
    return t.frame(time.monotonic() - t0)


# ---------------------------------------------------------------------------------------------
# seed 002: Bhargava et al. 2008 — 2D page walks and their caches

#: A server-like heap: skewed (Zipf) dependent loads over 1 GiB, every page mapped up front;
#: 250 instructions per reference give about 300 TLB misses per 100K instructions natively,
#: MiscServer's 294 (seed 002 Table 1).
BHARGAVA_WORKLOAD = "pointer-chase:footprint=1G,prefault=1,ipr=250"


def _walk_latency(r: api.Result) -> float:
    """Cycles per walk: each page-entry reference at the latency of what served it."""
    caches = r["config"]["machine"]["caches"]
    lat = {lv["name"]: lv["latency"] for lv in caches["levels"]}
    lat["dram"] = caches["dram_latency"]
    lat["pwc"] = r["config"]["machine"]["pwc"]["latency"]
    total = sum(n * lat[k] for k, n in (r.get("walk_refs_served_by") or {}).items())
    return total / r.walks if r.walks else float("nan")


def _in_range(text: str, value: float) -> tuple[float, float, bool]:
    lo, hi = (float(x) for x in re.findall(r"[\d.]+", text)[:2])
    return lo, hi, lo <= value <= hi


def bhargava08(quick: bool = False, progress: bool = False, workers: int = WORKERS) -> pd.DataFrame:
    """Seed 002: 2D walk references and latency, and the page-walk caching designs."""
    t0 = time.monotonic()
    machine = "bhargava08"
    n = _scale(quick, 200_000, 30_000)
    designs = [
        ("native", "none"),
        ("native", "1d"),
        ("nested", "none"),
        ("nested", "1d"),
        ("nested", "2d"),
        ("nested", "2d+nt"),
    ]
    # Seed 002 §5: "each simulation consists of a warmup phase and a full simulation phase ...
    # many of the cold-start microarchitecture effects (including TLB misses) are not present".
    jobs = [
        Job(
            f"{mode}/{pwc}",
            System(machine, mode, pwc=pwc),
            BHARGAVA_WORKLOAD,
            "refs",
            n,
            steady=False,
            warmup=n,
        )
        for mode, pwc in designs
    ]
    t = _Table(
        "bhargava08",
        "seed 002 — Bhargava et al. 2008: two-dimensional page walks and their caches",
        {
            "machine": machine,
            "profile": "— (no hypervisor exits: nested paging with memory backed up front)",
            "modes": "native and nested, with --pwc none, 1d, 2d, 2d+nt",
            "settings": {},
            "scale": "quick" if quick else "full",
            "workloads": {"all": f"{BHARGAVA_WORKLOAD},refs={2 * n}, the first {n} a warm-up"},
        },
    )
    with _Bars(progress) as bars:
        m = measure(jobs, bars, "bhargava08", workers)
    c = {k: v.full.cycles for k, v in m.items()}
    t1 = reference("bhargava08_table1").set_index("suite")
    misc = float(t1.loc["MiscServer", "tlb_misses_per_100k_instr"])
    nat = m["native/1d"].full
    rate = 1e5 * nat.walks / nat.instructions
    t.add(
        "tlb_misses",
        "native TLB misses per 100K instructions (workload intensity, MiscServer)",
        misc,
        rate,
        "misses/100K instr",
        None,
        "a property of the chosen workload (ipr), not a finding",
    )
    nested_refs = m["nested/none"].full.walk_refs_per_walk
    native_refs = m["native/none"].full.walk_refs_per_walk
    t.add(
        "refs_per_walk",
        "references per walk, no PWC: 2D 24 (nm+n+m), native 4",
        "24 vs 4",
        f"{nested_refs:.2f} vs {native_refs:.2f}",
        "refs/walk",
        abs(nested_refs - 24) < 1e-9 and abs(native_refs - 4) < 1e-9,
        _claim(
            "bhargava08_claims",
            "page entry references of a 2D walk with n guest and m nested levels",
        ),
    )
    lat = _walk_latency(m["nested/none"].full) / _walk_latency(m["native/none"].full)
    lo, hi = (
        t1["walk_latency_2d_over_native_no_pwc"].min(),
        t1["walk_latency_2d_over_native_no_pwc"].max(),
    )
    t.add(
        "walk_latency",
        f"2D / native walk latency, no PWC: {lo:g}–{hi:g}×",
        f"{lo:g}–{hi:g}",
        lat,
        "×",
        lo <= lat <= hi,
        f"{_walk_latency(m['nested/none'].full):.0f} vs {_walk_latency(m['native/none'].full):.0f} "
        "cycles per walk",
    )
    seq = ["nested/none", "nested/1d", "nested/2d", "nested/2d+nt"]
    ordered = all(c[a] >= c[b] for a, b in itertools.pairwise(seq))
    t.add(
        "ordering",
        "performance: 2d+nt ≥ 2d ≥ 1d ≥ none",
        "2D_PWC+NT best",
        " ≥ ".join(f"{k.split('/')[1]} {c['nested/none'] / c[k]:.2f}" for k in reversed(seq)),
        "speedup over none",
        ordered,
        "nested cycles: " + ", ".join(f"{k.split('/')[1]} {c[k] / 1e6:.1f}M" for k in seq),
    )
    for key, claim, value in (
        (
            "pwc_speedup",
            "guest speedup of 2D_PWC over no caching",
            c["nested/none"] / c["nested/2d"],
        ),
        ("nt_gain", "further gain of 2D_PWC+NT over 2D_PWC", c["nested/2d"] / c["nested/2d+nt"]),
        ("native_vs_none", "native advantage over no caching", c["nested/none"] / c["native/1d"]),
        ("native_vs_2dnt", "native advantage over 2D_PWC+NT", c["nested/2d+nt"] / c["native/1d"]),
    ):
        text = _claim("bhargava08_claims", claim)
        pct = 100.0 * (value - 1)
        lo, hi, ok = _in_range(text, pct)
        t.add(key, f"{claim}: {lo:g}–{hi:g}%", text, pct, "%", ok, "native: 1D PWC")
    return t.frame(time.monotonic() - t0)


# ---------------------------------------------------------------------------------------------
# Registry, rendering, command line


@dataclass(frozen=True)
class Paper:
    """A reproduction: its name, the seed paper and the function that runs it."""

    name: str
    seed: str
    title: str
    run: Callable[..., pd.DataFrame]


PAPERS: dict[str, Paper] = {
    p.name: p
    for p in (
        Paper("kloster07", "000", "Xen 3.0.4 HVM vs native: Aim9 Table 8, MemoryMotion", kloster07),
        Paper("bhatia09", "004", "VMware ESX: EPT vs shadow paging on Nehalem", bhatia09),
        Paper("bae11", "001", "Palacios: shadow vs nested depends on the workload", bae11),
        Paper("levasseur", "003", "pre-virtualization vs para-virtualization vs HVM", levasseur),
        Paper("bhargava08", "002", "2D page walks and page-walk caches", bhargava08),
    )
}


def reproduce(
    name: str, quick: bool = False, progress: bool = False, workers: int = WORKERS
) -> pd.DataFrame:
    """Runs reproduction ``name`` (a key of :data:`PAPERS`)."""
    if name not in PAPERS:
        raise ValueError(f"unknown reproduction `{name}`; known: {', '.join(PAPERS)}")
    return PAPERS[name].run(quick=quick, progress=progress, workers=workers)


def _fmt(v: Any, unit: str) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if unit.startswith("%"):
        return f"{v:.1f}"
    if unit.startswith("×"):
        return f"{v:.2f}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.1f}"


_VERDICT = {"yes": "[green]yes[/green]", "no": "[bold red]no[/bold red]", "n/a": "[dim]n/a[/dim]"}


def render(df: pd.DataFrame) -> RenderableType:
    """The table of one reproduction, its setup above and its wall time below."""
    a = df.attrs
    table = Table(
        title=f"vmmu repro {a.get('paper', '')} — {a.get('title', '')}",
        title_justify="left",
        title_style="bold",
        show_lines=False,
        expand=False,
    )
    table.add_column("row", style="dim", no_wrap=True)
    table.add_column("claim")
    table.add_column("paper", justify="right")
    table.add_column("vmmu", justify="right", style="bold")
    table.add_column("unit")
    table.add_column("holds?", justify="center")
    table.add_column("note", style="dim")
    for key, row in df.iterrows():
        table.add_row(
            str(key),
            str(row["claim"]),
            _fmt(row["paper"], row["unit"]),
            _fmt(row["vmmu"], row["unit"]),
            str(row["unit"]),
            _VERDICT.get(row["holds"], row["holds"]),
            str(row["note"]),
        )
    setup = Text()
    for label in ("machine", "profile", "modes"):
        if label in a:
            setup.append(f"{label}: ", style="bold").append(f"{a[label]}\n")
    settings = a.get("settings") or {}
    if settings:
        setup.append("settings: ", style="bold")
        if all(isinstance(v, (Mapping, str)) for v in settings.values()):
            parts = [
                f"{k}: {_settings_text(v) if isinstance(v, Mapping) else v}"
                for k, v in settings.items()
            ]
            setup.append("; ".join(parts) + "\n")
        else:
            setup.append(_settings_text(settings) + "\n")
    if "workloads" in a:
        setup.append(f"workloads ({a.get('scale', 'full')} scale): ", style="bold")
        setup.append("; ".join(f"{k}: {v}" for k, v in a["workloads"].items()) + "\n")
    held = int((df["holds"] == "yes").sum())
    claims = int((df["holds"] != "n/a").sum())
    footer = Text(
        f"{held} of {claims} findings hold · wall time {a.get('seconds', 0):.1f} s",
        style="bold green" if held == claims else "bold yellow",
    )
    return Group(table, setup, footer, Text(""))


def _print_json(dfs: Mapping[str, pd.DataFrame]) -> None:
    import json

    out = {}
    for name, df in dfs.items():
        rows = df.reset_index(names="row").to_dict(orient="records")
        out[name] = {"setup": {k: v for k, v in df.attrs.items()}, "rows": rows}
    click.echo(json.dumps(out, indent=2, default=str))


def _write_reports(path: str, dfs: Mapping[str, pd.DataFrame]) -> None:
    """One HTML report per paper: ``path`` itself for one paper, ``STEM-NAME.html`` for more."""
    from pathlib import Path

    from vmmu.report import write_report

    p = Path(path)
    for name, df in dfs.items():
        dest = p if len(dfs) == 1 else p.with_name(f"{p.stem}-{name}{p.suffix or '.html'}")
        title = f"vmmu repro {name} — {df.attrs.get('title', '')}"
        written = write_report(dest, tables={name: df}, title=title)
        Console(stderr=True, highlight=False).print(f"report: {written}")


def _console() -> Console:
    # Piped or captured output gets a width that fits the table instead of 80 columns.
    wide = None if sys.stdout.isatty() else 180
    return Console(file=sys.stdout, highlight=False, soft_wrap=False, width=wide)


def _command(paper: Paper) -> click.Command:
    @click.command(paper.name, help=f"seed {paper.seed}: {paper.title}.")
    @click.option("--quick", is_flag=True, help="Small workload scales (seconds; for tests).")
    @click.option("--json", "as_json", is_flag=True, help="Print the table and setup as JSON.")
    @click.option("--report", metavar="FILE.html", help="Also write the table as an HTML report.")
    def cmd(quick: bool, as_json: bool, report: str | None) -> None:
        df = paper.run(quick=quick, progress=not as_json)
        if as_json:
            _print_json({paper.name: df})
        else:
            _console().print(render(df))
        if report is not None:
            _write_reports(report, {paper.name: df})

    return cmd


@click.group(invoke_without_command=True)
@click.option("--list", "list_", is_flag=True, help="List the reproductions.")
@click.pass_context
def repro(ctx: click.Context, list_: bool) -> None:
    """Reproduce a paper's findings, paper value beside vmmu's (docs/repro.md).

    `vmmu repro NAME` runs one (`--list` names them), `vmmu repro all` runs every one.
    """
    if ctx.invoked_subcommand is None:
        if not list_:
            click.echo(ctx.get_help())
            return
        width = max(map(len, PAPERS))
        for p in PAPERS.values():
            click.echo(f"{p.name:<{width}}  seed {p.seed}  {p.title}")


for _paper in PAPERS.values():
    repro.add_command(_command(_paper))


@repro.command("all")
@click.option("--quick", is_flag=True, help="Small workload scales (seconds; for tests).")
@click.option("--json", "as_json", is_flag=True, help="Print every table and setup as JSON.")
@click.option(
    "--report",
    metavar="FILE.html",
    help="Also write one HTML report per paper: FILE-NAME.html (FILE-kloster07.html, ...).",
)
def repro_all(quick: bool, as_json: bool, report: str | None) -> None:
    """Run every reproduction and print a summary with the total wall time."""
    t0 = time.monotonic()
    dfs: dict[str, pd.DataFrame] = {}
    out = _console()
    for p in PAPERS.values():
        dfs[p.name] = df = p.run(quick=quick, progress=not as_json)
        if not as_json:
            out.print(render(df))
    if report is not None:
        _write_reports(report, dfs)
    if as_json:
        _print_json(dfs)
        return
    summary = Table(title="summary", title_justify="left", title_style="bold")
    for col in ("reproduction", "seed", "findings held", "not held", "wall time"):
        summary.add_column(col)
    for name, df in dfs.items():
        failed = [str(k) for k in df.index[df["holds"] == "no"]]
        summary.add_row(
            name,
            PAPERS[name].seed,
            f"{int((df['holds'] == 'yes').sum())} of {int((df['holds'] != 'n/a').sum())}",
            ", ".join(failed) or "–",
            f"{df.attrs['seconds']:.1f} s",
        )
    out.print(summary)
    out.print(f"[bold]total wall time {time.monotonic() - t0:.1f} s[/bold]")
