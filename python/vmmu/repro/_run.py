"""Running a reproduction's simulations: systems, jobs, one progress bar, estimated parameters.

A :class:`Job` is one measurement: a workload (generator spec or trace) on a :class:`System`.
Two ways to measure a paper's steady state, chosen per paper (each module says why):

- **loop subtraction** (``steady=True``): the workload's loop parameter is run at ``n`` and at
  0 and the second run is subtracted. Aim9, the kernel microbenchmarks and SPEC report the rate
  of a loop; the subtraction removes exactly the driver's start-up (creating it, mapping and
  warming its image, filling the shadow tables once), which a reference count cannot cut at a
  loop boundary.
- **warm-up** (``warmup=N``): the engine simulates ``N`` references first and leaves them out
  of every count, as seed 002's simulations had "a warmup phase and a full simulation phase".

A :class:`Context` runs jobs two at a time (the engine releases the GIL; the project's machines
have two cores) behind one progress bar, and holds the values of the paper's *estimated
parameters* for this run: their defaults, or the values a ``--sensitivity`` study tries.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from vmmu import api
from vmmu._format import signed_pct

#: Simulations run at once: one per core (the engine releases the GIL while it simulates).
WORKERS = os.cpu_count() or 1

#: Configuration roots: an estimated parameter named ``machine.kernel.fork`` is a ``--set``
#: (every table of the configuration a reproduction's parameter may name; any other head is a
#: workload generator's, ``memorymotion.size``).
CONFIG_ROOTS = ("machine.", "hypervisor.", "host.", "guest.", "warmup.", "nested_virt.", "agile.")

#: Configuration tables that belong to one mode, which the engine rejects in any other run: a
#: parameter in one is set on that mode's runs only.
MODE_TABLES = {"nested_virt.": "nested-virt", "agile.": "agile"}


@dataclass(frozen=True)
class System:
    """A simulated system: a machine, a paging mode and the hypervisor's settings."""

    machine: str
    mode: str
    profile: str | None = None
    technique: str | None = None
    pwc: str | None = None
    guest_page_size: str | None = None
    nested_page_size: str | None = None
    set: tuple[tuple[str, Any], ...] = ()

    def options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"machine": self.machine, "mode": self.mode, "set": list(self.set)}
        for k in ("profile", "technique", "pwc", "guest_page_size", "nested_page_size"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        return out

    def with_set(self, **pairs: Any) -> System:
        """The same system with more ``--set`` pairs (dotted paths with ``__`` for ``.``)."""
        extra = tuple((k.replace("__", "."), v) for k, v in pairs.items())
        return System(
            self.machine,
            self.mode,
            self.profile,
            self.technique,
            self.pwc,
            self.guest_page_size,
            self.nested_page_size,
            self.set + extra,
        )

    def describe(self) -> str:
        parts = [self.mode]
        if self.technique and self.mode == "shadow":
            parts.append(f"technique {self.technique}")
        if self.pwc:
            parts.append(f"pwc {self.pwc}")
        if self.nested_page_size:
            parts.append(f"nested pages {self.nested_page_size}")
        if self.guest_page_size:
            parts.append(f"guest pages {self.guest_page_size}")
        parts += [f"{k}={api._toml_literal(v)}" for k, v in self.set]
        return ", ".join(parts)


@dataclass(frozen=True)
class Job:
    """One measurement: ``workload`` (or ``trace``) on ``system``.

    With ``loop`` and ``steady`` the loop parameter ``loop`` is set to ``n`` and the same run
    with ``loop=0`` is subtracted; with ``warmup`` that many references are simulated first and
    left out of every count.
    """

    key: str
    system: System
    workload: str | None = None
    loop: str | None = None
    n: int = 0
    steady: bool = False
    warmup: int = 0
    trace: str | None = None

    def spec(self, n: int) -> str | None:
        if self.workload is None or self.loop is None:
            return self.workload
        sep = "," if ":" in self.workload else ":"
        return f"{self.workload}{sep}{self.loop}={n}"

    def runs(self) -> list[int]:
        return [0, self.n] if self.steady else [self.n]


@dataclass
class Measured:
    """A job's result: the full run and, for a loop subtraction, the run it subtracts."""

    job: Job
    full: api.Result
    base: api.Result | None = None

    @property
    def cycles(self) -> int:
        return self.full.cycles - (self.base.cycles if self.base is not None else 0)

    @property
    def instructions(self) -> int:
        return self.full.instructions - (self.base.instructions if self.base is not None else 0)

    def exits(self) -> dict[str, dict[str, float]]:
        """Exits (and in-guest VMM calls) of the measured part, by reason: count and cycles."""
        full = self.full.get("exits") or {}
        base = (self.base or {}).get("exits") or {}
        out = {}
        for reason, e in full.items():
            b = base.get(reason, {"count": 0, "cycles": 0})
            n = e["count"] - b["count"]
            if n > 0:
                out[reason] = {
                    "count": n,
                    "cycles": e["cycles"] - b["cycles"],
                    "world_switch": bool(e.get("world_switch", True)),
                }
        return out

    def delta(self, path: str) -> float:
        """A counter of the measured part, by dotted path (``"shadow.pages_built"``)."""

        def get(r: Mapping[str, Any] | None) -> float:
            if r is None:
                return 0.0
            v: Any = r
            for part in path.split("."):
                if not isinstance(v, Mapping) or part not in v:
                    return 0.0
                v = v[part]
            return float(v or 0)

        return get(self.full) - get(self.base)

    def per_iteration(self) -> dict[str, float]:
        """Exits per loop iteration by reason, most frequent first."""
        n = max(self.job.n, 1)
        per = {k: v["count"] / n for k, v in self.exits().items()}
        return dict(sorted(per.items(), key=lambda kv: -kv[1]))


def versus_native(m: Mapping[str, Measured], key: str) -> str:
    """``key``'s nested and shadow runs against its native run (:func:`vmmu.api.overhead`):
    ``vs native: nested +12.5%, shadow +30.1%``."""
    over = api.overhead({mode: {"cycles": m[f"{key}/{mode}"].cycles} for mode in api.STATIC_MODES})
    return f"vs native: nested {signed_pct(over['nested'])}, shadow {signed_pct(over['shadow'])}"


class Bar:
    """The one progress bar of a ``vmmu repro`` invocation (stderr, only on a terminal).

    Its total grows as reproductions register engine runs; each run advances it by its
    fraction done. Thread-safe; after :meth:`stop` every callback returns ``False``, which
    stops the engine runs cleanly (Ctrl-C, a failed run).
    """

    def __init__(self, enabled: bool, console: Console | None = None) -> None:
        self._console = console or Console(stderr=True)
        self._enabled = enabled and self._console.is_terminal
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._progress: Progress | None = None
        self._task: Any = None
        self._fractions: list[float] = []

    def __enter__(self) -> Bar:
        if self._enabled:
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
            self._task = self._progress.add_task("vmmu repro", total=0, runs="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def stop(self) -> None:
        self._stopped.set()

    def _update(self, label: str | None = None) -> None:
        if self._progress is None:
            return
        done = sum(1 for f in self._fractions if f >= 1.0)
        fields: dict[str, Any] = {"runs": f"{done}/{len(self._fractions)} runs"}
        if label is not None:
            fields["description"] = label
        self._progress.update(
            self._task, total=len(self._fractions), completed=sum(self._fractions), **fields
        )

    def runs(self, label: str, n: int) -> Callable[[int], Callable[..., bool]]:
        """Registers ``n`` engine runs; returns ``slot(i)`` → that run's progress callback."""
        with self._lock:
            first = len(self._fractions)
            self._fractions.extend([0.0] * n)
            self._update(label)

        def slot(i: int) -> Callable[..., bool]:
            k = first + i

            def report(done: int, total: int | None = None, finished: bool = False) -> bool:
                with self._lock:
                    if finished:
                        self._fractions[k] = 1.0
                    elif total:
                        self._fractions[k] = min(done / total, 0.999)
                    self._update()
                return not self._stopped.is_set()

            return report

        return slot


@dataclass
class Context:
    """What a reproduction runs with: scale, estimated-parameter values, workers, the bar."""

    quick: bool = False
    values: dict[str, Any] = field(default_factory=dict)
    workers: int = WORKERS
    bar: Bar = field(default_factory=lambda: Bar(False))
    label: str = "vmmu repro"
    #: Every engine run's result, in the order the runs end, when given a list to fill.
    results: list[api.Result] | None = None

    def scale(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def value(self, name: str, default: Any) -> Any:
        """An estimated parameter: the value under study, else ``default``."""
        return self.values.get(name, default)

    def knobs(self, prefix: str) -> dict[str, Any]:
        """Workload parameters under study for workload ``prefix`` (``"nps.instrs"`` →
        ``{"instrs": ...}``)."""
        out = {}
        for name, v in self.values.items():
            head, dot, param = name.partition(".")
            if dot and head == prefix and not name.startswith(CONFIG_ROOTS):
                out[param] = v
        return out

    def spec(self, workload: str, prefix: str | None = None) -> str:
        """``workload`` with the knobs under study for ``prefix`` (default: its generator
        name) replacing or adding parameters."""
        name, _, params = workload.partition(":")
        knobs = self.knobs(prefix or name)
        if not knobs:
            return workload
        pairs = dict(p.split("=", 1) for p in params.split(",") if p)
        pairs.update({k: str(v) for k, v in knobs.items()})
        return f"{name}:" + ",".join(f"{k}={v}" for k, v in pairs.items())

    def config_pairs(self, mode: str | None) -> list[tuple[str, Any]]:
        """Configuration values under study, applied last to every run of ``mode`` (a value in
        a table of another mode, :data:`MODE_TABLES`, left out)."""
        return [
            (k, v)
            for k, v in self.values.items()
            if k.startswith(CONFIG_ROOTS)
            and all(mode == m for t, m in MODE_TABLES.items() if k.startswith(t))
        ]

    def _keep(self, r: api.Result) -> None:
        if self.results is not None:
            self.results.append(r)

    def run(self, machine: str, **opts: Any) -> api.Result:
        """One engine run a reproduction makes itself (not a :class:`Job`), the configuration
        values under study applied last, as :meth:`measure` applies them."""
        opts["set"] = [*api._set_pairs(opts.get("set")), *self.config_pairs(opts.get("mode"))]
        r = api.run(machine, **opts)
        self._keep(r)
        return r

    def measure(self, jobs: Iterable[Job]) -> dict[str, Measured]:
        """Runs every job (one or two engine runs each), ``workers`` at a time."""
        jobs = list(jobs)
        units = [(j, n) for j in jobs for n in j.runs()]
        slot = self.bar.runs(self.label, len(units))

        def one(i: int, job: Job, n: int) -> api.Result:
            cb = slot(i)
            opts = job.system.options()
            opts["set"] = [*opts["set"], *self.config_pairs(job.system.mode)]
            if job.warmup:
                opts["warmup"] = job.warmup
            if job.trace is not None:
                r = api.run(trace=job.trace, progress=cb, **opts)
            else:
                r = api.run(workload=job.spec(n), progress=cb, **opts)
            cb(0, None, finished=True)
            self._keep(r)
            return r

        pool = ThreadPoolExecutor(max_workers=max(1, self.workers))
        try:
            futures = [pool.submit(one, i, j, n) for i, (j, n) in enumerate(units)]
            results = [f.result() for f in futures]
        except BaseException:
            self.bar.stop()
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
                out[j.key] = Measured(j, full=results[k])
                k += 1
        return out
