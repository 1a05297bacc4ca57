"""``vmmu validate host``: measured against predicted on the machine vmmu runs on.

The probe (``probe.c`` beside this file, docs/validation.md) times one random 64-byte line
per access over a footprint, as a dependent chase or as independent loads, with 4 KiB or
2 MiB pages. :func:`check_host` builds it with ``gcc -O2`` into a cache directory, runs every
combination natively (all measurements in one sitting, before anything else loads the
machine), records each combination with ``vmmu record``, simulates each recording with nested
paging on a preset, for the host (nested) page size the page probe reads from the TLB's reach
(:mod:`.pagesize`) or for both where it does not tell, and for each window state the window
probe (:mod:`.window`) saw — the whole reorder buffer, or half of it while an SMT sibling ran
— with the interval core model (whose result also carries the additive model's cycles for the
same counts), and sets the ratios the measurement and the models give side by side:

- dependent / independent, per footprint and page size, within ±25% of the measured one;
- 4 KiB / 2 MiB, per footprint and pattern, within ±15%.

A ratio is *within* its band when the bracket spanned by the predictions (each host page size
and window state predicted for) reaches into the band around the measured ratio. Nothing is
fitted: the preset is used as it is, and the probes of the host decide only which of its
states to predict for.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vmmu import api
from vmmu.validate import build, hostcpu, pagesize, window
from vmmu.validate.build import ProbeError

#: The access patterns of the probe: a dependent chase and independent loads.
PATTERNS: tuple[str, ...] = ("chase", "independent")
#: The probe's page sizes (its ``--pages``; ``2m`` advises ``MADV_HUGEPAGE``).
PAGES: tuple[str, ...] = ("4k", "2m")
#: The host (nested) page sizes every recording is simulated under.
HOST_PAGES: tuple[str, ...] = ("4K", "2M")
#: The core models compared: the interval run's result holds both.
CORE_MODELS: tuple[str, ...] = ("interval", "additive")
#: The bands a prediction must reach: relative distance from the measured ratio.
BANDS: dict[str, float] = {"dependent/independent": 0.25, "4K/2M": 0.15}
#: The share of a ``2m`` region the kernel must give as 2 MiB pages (``AnonHugePages``).
THP_MIN_SHARE = 0.9
#: The phase markers around the probe's timed loop (``VMMU_PHASE(1)`` / ``VMMU_PHASE(2)``).
PHASE_START, PHASE_STOP = 1, 2
#: Simulations of :func:`predict` run at once: one per core.
SIMULATIONS_AT_ONCE = os.cpu_count() or 1
#: Schema of :meth:`HostCheck.to_dict`.
SCHEMA = "vmmu.validate-host/1"

_HERE = Path(__file__).resolve().parent
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_footprint(text: str) -> int:
    """``256M`` → 268435456: a power of two of at least 2 MiB, with a binary K/M/G suffix."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = _UNITS.get(t[-1:], 1)
    body = t[:-1] if t[-1:] in _UNITS else t
    if not body.isdigit():
        raise ValueError(f"footprint `{text}`: not a size (e.g. 256M, 2G)")
    n = int(body) * unit
    if n < 2 << 20 or n & (n - 1):
        raise ValueError(f"footprint `{text}`: must be a power of two of at least 2M")
    return n


def size_label(n: int) -> str:
    """268435456 → ``256M``."""
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def probe_sources() -> tuple[Path, Path]:
    """The probe's source and the recorder's header it includes (``vmmu.h``, the one in
    ``tools/vg-memtrace``, installed beside the probe)."""
    return _HERE / "probe.c", _HERE / "vmmu.h"


def build_probe(cache: Path | None = None) -> Path:
    """The probe built with ``gcc -O2`` into ``cache`` (:func:`.build.build`)."""
    src, header = probe_sources()
    return build.build(src, [header, _HERE / "probes.h"], cache)


def probe_args(
    footprint: int, pages: str, pattern: str, accesses: int, warmup: int | None = None
) -> list[str]:
    """The probe's command-line arguments (its default warm-up is a tenth of ``accesses``)."""
    extra = [] if warmup is None else ["--warmup", str(warmup)]
    return [
        "--footprint",
        str(footprint),
        "--pages",
        pages,
        "--pattern",
        pattern,
        "--accesses",
        str(accesses),
        *extra,
    ]


def _thp_setting() -> str:
    try:
        return Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        return "unknown"


def _check_probe_output(out: dict[str, Any], what: str) -> dict[str, Any]:
    """The probe's JSON, refused when the 2 MiB pages it asked for were not given."""
    if out["pages"] == "2m":
        share = out["anon_huge_kb"] / out["region_kb"] if out["region_kb"] else 0.0
        out["huge_share"] = share
        if out["madvise_errno"] or share < THP_MIN_SHARE:
            raise ProbeError(
                f"THP refused: {what} asked for 2 MiB pages (MADV_HUGEPAGE, madvise errno "
                f"{out['madvise_errno']}) and the kernel gave {out['anon_huge_kb']} of "
                f"{out['region_kb']} KiB as huge pages (AnonHugePages; at least "
                f"{THP_MIN_SHARE:.0%} needed); /sys/kernel/mm/transparent_hugepage/enabled is "
                f"`{_thp_setting()}`"
            )
    else:
        out["huge_share"] = out["anon_huge_kb"] / out["region_kb"] if out["region_kb"] else 0.0
    return out


#: How much the native runs raise their scheduling priority (``nice -10``) where allowed.
NATIVE_PRIORITY = -10


def _raise_priority() -> None:
    """In the probe's process before it starts: ``nice`` it up where allowed (root), so a
    shared machine's other work waits rather than the measurement."""
    with contextlib.suppress(OSError):
        os.nice(NATIVE_PRIORITY)


def run_probe(
    binary: Path, footprint: int, pages: str, pattern: str, accesses: int
) -> dict[str, Any]:
    """Runs the probe natively once and returns its JSON (``ns_per_access``, ``huge_share``
    and the rest, docs/validation.md)."""
    cmd = [str(binary), *probe_args(footprint, pages, pattern, accesses)]
    what = f"the probe ({' '.join(cmd[1:])})"
    return _check_probe_output(build.run_json(cmd, what, _raise_priority), what)


def record_probe(
    binary: Path,
    footprint: int,
    pages: str,
    pattern: str,
    accesses: int,
    warmup: int,
    trace: Path,
) -> dict[str, Any]:
    """Records the probe (``accesses`` timed after ``warmup``) with ``vmmu record`` into
    ``trace`` and returns the recording's summary, with the recorded run's own probe JSON
    under ``probe``."""
    from vmmu import record

    out_json = trace.with_suffix(".json")
    args = probe_args(footprint, pages, pattern, accesses, warmup)
    cmd = [str(binary), *args, "--out", str(out_json)]
    summary = record.record(cmd, str(trace), False, False, True, False)
    what = f"the recorded probe ({' '.join(args)})"
    if summary.get("exit_code") or summary.get("signal") or summary.get("truncated"):
        raise ProbeError(
            f"{what} did not finish under vmmu record: exit code {summary.get('exit_code')}, "
            f"signal {summary.get('signal')}, truncated {summary.get('truncated')}"
        )
    if summary.get("phases", 0) < 2:
        raise ProbeError(f"{what}: the trace has {summary.get('phases', 0)} phase markers, not 2")
    summary["probe"] = _check_probe_output(json.loads(out_json.read_text()), what)
    return summary


def freq_ghz(machine: str) -> float:
    """The preset's clock (``machine.core.freq_ghz``), which turns cycles into ns."""
    return float(api.config_dict(machine)["machine"]["core"]["freq_ghz"])


def simulate(
    machine: str,
    trace: Path,
    host_pages: str,
    accesses: int,
    progress: Callable[[int, int | None], Any] | None = None,
    sets: Sequence[tuple[str, Any]] = (),
) -> dict[str, Any]:
    """Simulates the probe's timed loop in ``trace`` (warm-up up to its first phase marker,
    stop at the second) with nested paging on ``machine`` and ``host_pages`` nested pages,
    under the interval core model, ``sets`` (``--set`` pairs) applied last; returns ns per
    access under both core models and, per access, the causes behind them (``per_access``:
    cycles of translation and data exposed under the interval model and paid in full under
    the additive one, walks, cycles walks waited for a walker and misses for a miss
    register)."""
    r = api.run(
        machine,
        mode="nested",
        trace=str(trace),
        core_model="interval",
        nested_page_size=host_pages,
        thp="madvise",
        warmup_phase=PHASE_START,
        stop_phase=PHASE_STOP,
        progress=progress or False,
        set=list(sets),
    )
    ghz = freq_ghz(machine)
    core = r["core"]
    exposed, full = r["cycles_by_cause"], core["cycles_by_cause_additive"]
    return {
        "host_pages": host_pages,
        "ns_per_access": {
            "interval": r["cycles"] / accesses / ghz,
            "additive": core["cycles_additive"] / accesses / ghz,
        },
        "memory_refs": r["memory_refs"],
        "l2_tlb_misses": r["tlb"]["l2"]["misses"],
        "per_access": {
            "translation_interval": exposed["translation"] / accesses,
            "translation_additive": full["translation"] / accesses,
            "data_interval": exposed["data"] / accesses,
            "data_additive": full["data"] / accesses,
            "walks": r["tlb"]["l2"]["misses"] / accesses,
            "walker_wait": core["walker_wait_cycles"] / accesses,
            "mshr_wait": core["mshr_wait_cycles"] / accesses,
        },
    }


@dataclass
class HostCheck:
    """The outcome of :func:`check_host`: every native measurement, every prediction and the
    ratios (see :meth:`ratios`)."""

    machine: str
    footprints: list[int]
    pages: list[str]
    patterns: list[str]
    accesses: int
    record_accesses: int
    runs: int
    measured: list[dict[str, Any]] = field(default_factory=list)
    predicted: list[dict[str, Any]] = field(default_factory=list)
    loadavg: dict[str, list[float]] = field(default_factory=dict)
    started: str = ""
    host: dict[str, str] = field(default_factory=dict)
    #: Why this preset: chosen by the user, or the host processor's (:mod:`.hostcpu`).
    machine_reason: str = ""
    #: ``--set`` pairs applied to the preset in every prediction.
    sets: list[tuple[str, Any]] = field(default_factory=list)
    #: Predictions again with one value changed (:func:`variant`), one entry per value.
    sensitivity: list[dict[str, Any]] = field(default_factory=list)
    #: The window probe's runs (``runs``) and what they show (``reading``,
    #: :func:`.window.read`), or ``error`` when it could not run; empty when not asked for.
    window: dict[str, Any] = field(default_factory=dict)
    #: The window states predicted for (:func:`.window.states`): ``full``, ``half`` or both.
    windows: list[str] = field(default_factory=lambda: ["full"])
    #: The page probe's chases (``runs``) and what they show (``reading``,
    #: :func:`.pagesize.read`), or ``error``; empty when not asked for.
    page_probe: dict[str, Any] = field(default_factory=dict)
    #: The host page sizes predicted for: the one the page probe read, else both.
    host_pages: list[str] = field(default_factory=lambda: list(HOST_PAGES))

    def measured_ns(self, footprint: int, pages: str, pattern: str) -> list[float]:
        """The native ns per access of each run, in run order."""
        return [
            m["ns_per_access"]
            for m in self.measured
            if (m["footprint"], m["pages"], m["pattern"]) == (footprint, pages, pattern)
        ]

    def predicted_ns(
        self,
        footprint: int,
        pages: str,
        pattern: str,
        host_pages: str,
        model: str,
        window_state: str = "full",
    ) -> float:
        """The predicted ns per access of one combination, host page size, core model and
        window state."""
        key = (footprint, pages, pattern, host_pages, window_state)
        for p in self.predicted:
            if (
                p["footprint"],
                p["pages"],
                p["pattern"],
                p["host_pages"],
                p.get("window", "full"),
            ) == key:
                return p["ns_per_access"][model]
        raise KeyError(key)

    def _ratio(
        self, kind: str, footprint: int, label: str, num: tuple[str, str], den: tuple[str, str]
    ) -> dict[str, Any]:
        """One ratio: ``num`` over ``den`` as (pages, pattern), measured run by run (each run's
        pair from the same sitting) and predicted per core model, window state and host page
        size (``by_window``; ``by_host_pages`` is the first state's); the verdict brackets
        every state and host page size."""
        a, b = self.measured_ns(footprint, *num), self.measured_ns(footprint, *den)
        runs = [x / y for x, y in zip(a, b, strict=True)]
        measured = sum(runs) / len(runs)
        band = BANDS[kind]
        models = {}
        for model in CORE_MODELS:
            by_window = {
                w: {
                    h: self.predicted_ns(footprint, *num, h, model, w)
                    / self.predicted_ns(footprint, *den, h, model, w)
                    for h in self.host_pages
                }
                for w in self.windows
            }
            values = [v for by_host in by_window.values() for v in by_host.values()]
            models[model] = {
                "by_host_pages": by_window[self.windows[0]],
                "by_window": by_window,
                **verdict(measured, values, band),
            }
        return {
            "kind": kind,
            "footprint": footprint,
            "of": label,
            "measured": measured,
            "measured_runs": runs,
            "band": band,
            "models": models,
        }

    def ratios(self) -> list[dict[str, Any]]:
        """Dependent / independent per footprint and page size, then 4 KiB / 2 MiB per
        footprint and pattern (those the measured combinations allow)."""
        out = []
        for fp in self.footprints:
            if set(PATTERNS) <= set(self.patterns):
                for pg in self.pages:
                    out.append(
                        self._ratio(
                            "dependent/independent",
                            fp,
                            f"{pg.upper()} pages",
                            (pg, "chase"),
                            (pg, "independent"),
                        )
                    )
        for fp in self.footprints:
            if set(PAGES) <= set(self.pages):
                for pat in self.patterns:
                    out.append(self._ratio("4K/2M", fp, pat, ("4k", pat), ("2m", pat)))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "machine": self.machine,
            "machine_reason": self.machine_reason,
            "set": [[k, v] for k, v in self.sets],
            "started": self.started,
            "host": self.host,
            "loadavg": self.loadavg,
            "footprints": self.footprints,
            "pages": self.pages,
            "patterns": self.patterns,
            "accesses": self.accesses,
            "record_accesses": self.record_accesses,
            "runs": self.runs,
            "host_pages_note": HOST_PAGES_NOTE,
            "window": self.window,
            "windows": self.windows,
            "page_probe": self.page_probe,
            "host_pages": self.host_pages,
            "measured": self.measured,
            "predicted": self.predicted,
            "ratios": self.ratios(),
            "sensitivity": self.sensitivity,
        }


HOST_PAGES_NOTE = (
    "the host's nested page size is not known: every prediction is made for both 4K and 2M "
    "host pages, and a ratio is within its band when the bracket of the two reaches it (of "
    "all four, with both window states)"
)


def verdict(measured: float, predictions: Iterable[float], band: float) -> dict[str, Any]:
    """Whether the bracket of ``predictions`` reaches within ``band`` (relative) of
    ``measured``, and ``error``: the bracket's nearest point relative to the measured value
    (0 when the bracket contains it; +0.3 is 30% above)."""
    values = list(predictions)
    lo, hi = min(values), max(values)
    if lo <= measured <= hi:
        error = 0.0
    else:
        nearest = lo if lo > measured else hi
        error = nearest / measured - 1.0
    return {"error": error, "within": abs(error) <= band}


def _host_info() -> dict[str, str]:
    cpu = hostcpu.read_cpu()
    return {
        "cpu": (cpu.name or "unnamed") if cpu else "unknown",
        "signature": cpu.signature() if cpu else "unknown",
        "kernel": platform.release(),
        "thp": _thp_setting(),
        "cpus": str(os.cpu_count()),
    }


class Steps:
    """What :func:`check_host` reports as it goes (the CLI shows it as progress bars):
    ``stage(name, total)`` starts a stage of ``total`` steps, ``step(description)`` starts
    its next step (and so ends the one before)."""

    def stage(self, name: str, total: int) -> None:
        pass

    def step(self, description: str) -> None:
        pass


def check_host(
    machine: str | None = None,
    footprints: Sequence[int] = (256 << 20, 2 << 30),
    pages: Sequence[str] = PAGES,
    patterns: Sequence[str] = PATTERNS,
    accesses: int = 20_000_000,
    record_accesses: int = 1_000_000,
    runs: int = 2,
    steps: Steps | None = None,
    work_dir: Path | None = None,
    cache: Path | None = None,
    sets: Sequence[tuple[str, Any]] = (),
    sensitivity: Sequence[tuple[str, Sequence[Any]]] = (),
    window_probe: bool = True,
    windows: Sequence[str] | None = None,
    page_probe: bool = True,
    host_pages: Sequence[str] | None = None,
) -> HostCheck:
    """Measures the probe natively (``runs`` times each, all in one sitting), records and
    simulates it, and returns the :class:`HostCheck`. ``machine`` ``None`` is the preset of
    this machine's processor (:func:`.hostcpu.preset_for`). ``record_accesses`` is the timed loop's
    length in the recordings (the simulated figure is per access, so a shorter loop does),
    after the native runs' warm-up (a tenth of ``accesses``), so the simulated caches and TLBs
    start the timed loop as warm as the real ones; ``work_dir`` keeps the traces (a temporary
    directory otherwise). ``sets`` (``--set`` pairs) change the preset for every prediction;
    each ``(path, values)`` of ``sensitivity`` predicts again with ``path`` at each value
    (:func:`variant`). With ``window_probe`` the core's window is measured before and after
    the probe's runs (:mod:`.window`), and every prediction is made for each window state the
    measurement shows, or for ``windows`` when given. With ``page_probe`` the host's page size
    is read from the TLB's reach (:mod:`.pagesize`) and the predictions are made for it alone
    when it is told; ``host_pages`` names the host page sizes to predict for instead."""
    steps = steps or Steps()
    for name, seq, allowed in (("pages", pages, PAGES), ("pattern", patterns, PATTERNS)):
        bad = [x for x in seq if x not in allowed]
        if bad or not seq:
            given = ", ".join(bad) or "none given"
            raise ValueError(f"{name}: {given} (one of {', '.join(allowed)})")
    if runs < 1 or accesses < 1 or record_accesses < 1:
        raise ValueError("runs, accesses and record accesses must be at least 1")
    if machine is None:
        machine, why = hostcpu.preset_for(hostcpu.read_cpu())
        reason = f"{machine}: {why}"
    else:
        reason = f"{machine}: given"
    freq_ghz(machine)  # an unknown machine fails before anything runs
    combos = [(fp, pg, pat) for fp in footprints for pg in pages for pat in patterns]
    check = HostCheck(
        machine=machine,
        footprints=list(footprints),
        pages=list(pages),
        patterns=list(patterns),
        accesses=accesses,
        record_accesses=record_accesses,
        runs=runs,
        started=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        host=_host_info(),
        machine_reason=reason,
        sets=[(k, v) for k, v in sets],
    )
    steps.stage("building the probe", 1)
    steps.step("gcc -O2 probe.c")
    binary = build_probe(cache)
    window_binary = None
    if window_probe:
        try:
            window_binary = window.build_window(cache)
        except ProbeError as e:
            check.window = {"error": str(e)}

    sittings = 2 if window_binary else 0
    chases = len(pagesize.FOOTPRINTS) * len(PAGES) if page_probe else 0
    steps.stage("measuring natively", runs * len(combos) + sittings + chases)
    check.loadavg["before"] = list(os.getloadavg())
    if window_binary:
        steps.step("the core's window, before")
        _measure_window(check, window_binary)
    if page_probe:
        _measure_page_size(check, binary, steps)
    for run in range(runs):
        for fp, pg, pat in combos:
            steps.step(f"run {run + 1}: {size_label(fp)} {pg} {pat}")
            out = run_probe(binary, fp, pg, pat, accesses)
            check.measured.append({"run": run + 1, **out})
    if window_binary:
        steps.step("the core's window, after")
        _measure_window(check, window_binary)
    _read_window(check, windows)
    _read_page_probe(check, host_pages)
    check.loadavg["after_measuring"] = list(os.getloadavg())

    with tempfile.TemporaryDirectory(prefix="vmmu-validate-") as tmp:
        where = work_dir or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        recorded = []
        steps.stage("recording with vmmu record", len(combos))
        for fp, pg, pat in combos:
            steps.step(f"{size_label(fp)} {pg} {pat}")
            trace = trace_path(where, fp, pg, pat)
            summary = record_probe(binary, fp, pg, pat, record_accesses, accesses // 10, trace)
            recorded.append(
                {
                    "footprint": fp,
                    "pages": pg,
                    "pattern": pat,
                    "recorded_huge_share": summary["probe"]["huge_share"],
                    "dependent_refs": summary.get("dependent_refs"),
                }
            )
        check.predicted = predict(
            machine,
            where,
            recorded,
            record_accesses,
            steps,
            check.sets,
            check.windows,
            check.host_pages,
        )
        for path, values in sensitivity:
            for value in values:
                check.sensitivity.append(variant(check, where, recorded, [(path, value)], steps))
    return check


def _measure_window(check: HostCheck, binary: Path) -> None:
    """One sitting of the window probe, each filler in turn, added to ``check.window``'s
    runs (a failed run is kept as ``error``)."""
    for filler in window.FILLERS:
        try:
            out = window.run_window(binary, filler=filler)
        except ProbeError as e:
            check.window.setdefault("error", str(e))
            return
        check.window.setdefault("runs", []).append(out)


def _measure_page_size(check: HostCheck, binary: Path, steps: Steps) -> None:
    """The page probe: the probe's page chase at each of :data:`.pagesize.FOOTPRINTS` with
    2 MiB and 4 KiB guest pages, in ``check.page_probe``'s runs (a failed chase is kept as
    ``error``)."""
    check.page_probe = {"runs": []}
    for fp in pagesize.FOOTPRINTS:
        for pages in PAGES:
            steps.step(f"the host's page size: {size_label(fp)} {pages} page chase")
            try:
                check.page_probe["runs"].append(
                    run_probe(binary, fp, pages, "pages", pagesize.ACCESSES)
                )
            except ProbeError as e:
                check.page_probe["error"] = str(e)
                return


def _read_window(check: HostCheck, windows: Sequence[str] | None = None) -> None:
    """``check.window``'s readings (``reading``, the reorder buffer's; ``registers``, per
    register filler) from all its runs, and the window states to predict for: ``windows``
    when given, else those the reorder buffer's reading shows, else (no runs) the check's."""
    runs = check.window.get("runs")
    if runs:
        check.window["reading"] = window.read_runs(runs)
        fillers = list(window.FILLERS)[1:]
        check.window["registers"] = {f: window.read_runs(runs, f) for f in fillers}
    shown = window.states(check.window["reading"]) if runs else check.windows
    check.windows = list(windows or shown)


def _read_page_probe(check: HostCheck, host_pages: Sequence[str] | None = None) -> None:
    """``check.page_probe``'s reading (:func:`.pagesize.read`) when all its chases ran, and
    the host page sizes to predict for: ``host_pages`` when given, else the one the reading
    tells, else both (without a reading, the check's own)."""
    probe = check.page_probe
    if probe.get("runs") and "error" not in probe:
        probe["reading"] = pagesize.read(probe["runs"])
        told = probe["reading"]["host_pages"]
        check.host_pages = [told] if told else list(HOST_PAGES)
    if host_pages:
        check.host_pages = list(host_pages)


def trace_path(where: Path, footprint: int, pages: str, pattern: str) -> Path:
    """Where a combination's recording is kept: ``probe-256M-4k-chase.vtrace``."""
    return where / f"probe-{size_label(footprint)}-{pages}-{pattern}.vtrace"


def predict(
    machine: str,
    where: Path,
    recorded: Sequence[dict[str, Any]],
    accesses: int,
    steps: Steps,
    sets: Sequence[tuple[str, Any]] = (),
    windows: Sequence[str] = ("full",),
    host_pages: Sequence[str] = HOST_PAGES,
) -> list[dict[str, Any]]:
    """Each recorded combination (``footprint``, ``pages``, ``pattern`` and what its recording
    said) simulated from its trace in ``where`` for every window state of ``windows``
    (``half``: :func:`.window.half_sets` added to ``sets``) and host page size of
    ``host_pages``, one
    simulation per core at once (the engine releases the GIL while it simulates); the
    predictions in that order whatever order they end in."""
    by_window = {
        w: [*sets, *(window.half_sets(machine, sets) if w == "half" else [])] for w in windows
    }
    jobs = []
    for rec in recorded:
        fp, pg, pat = rec["footprint"], rec["pages"], rec["pattern"]
        trace = trace_path(where, fp, pg, pat)
        if not trace.exists():
            raise ProbeError(f"no recording of {size_label(fp)} {pg} {pat}: {trace} is missing")
        for w, pairs in by_window.items():
            for h in host_pages:
                name = f"{size_label(fp)} {pg} {pat}, host {h}, {w} window"
                jobs.append((name, rec, trace, h, w, pairs))

    def one(job: tuple[Any, ...]) -> dict[str, Any]:
        _, rec, trace, h, w, pairs = job
        return {**rec, **simulate(machine, trace, h, accesses, None, pairs), "window": w}

    label = f"simulating on {machine}" + "".join(f", {k}={v}" for k, v in sets)
    steps.stage(label, len(jobs))
    workers = max(1, min(SIMULATIONS_AT_ONCE, len(jobs)))
    steps.step(f"{workers} at once")
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(one, job): job[0] for job in jobs}
        for done in concurrent.futures.as_completed(futures):
            steps.step(f"{futures[done]} done")
        return [f.result() for f in futures]


def recorded_of(predicted: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded combinations behind a check's predictions, once each, in order."""
    keys = ("footprint", "pages", "pattern", "recorded_huge_share", "dependent_refs")
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for p in predicted:
        seen.setdefault((p["footprint"], p["pages"], p["pattern"]), {k: p.get(k) for k in keys})
    return list(seen.values())


def variant(
    check: HostCheck,
    where: Path,
    recorded: Sequence[dict[str, Any]],
    sets: Sequence[tuple[str, Any]],
    steps: Steps,
) -> dict[str, Any]:
    """The check predicted again with ``sets`` added to its own: its predictions and
    ratios (the measured side unchanged)."""
    pairs = [*check.sets, *sets]
    predicted = predict(
        check.machine,
        where,
        recorded,
        check.record_accesses,
        steps,
        pairs,
        check.windows,
        check.host_pages,
    )
    again = dataclasses.replace(check, predicted=predicted, sensitivity=[])
    return {
        "set": [[k, v] for k, v in sets],
        "predicted": predicted,
        "ratios": again.ratios(),
    }


def resimulate(
    saved: dict[str, Any],
    traces: Path,
    machine: str | None = None,
    steps: Steps | None = None,
    sets: Sequence[tuple[str, Any]] = (),
    sensitivity: Sequence[tuple[str, Sequence[Any]]] = (),
    footprints: Sequence[int] | None = None,
    windows: Sequence[str] | None = None,
    host_pages: Sequence[str] | None = None,
) -> HostCheck:
    """A saved check (:meth:`HostCheck.to_dict`) predicted again from its kept ``traces``:
    its measurements as they were, its recordings (those of ``footprints``, default all)
    simulated on ``machine`` (default: the saved check's) with ``sets`` and each
    ``sensitivity`` value, for ``windows`` (default: the states the saved window probe's
    samples show, read again by :func:`.window.read_runs`) and ``host_pages`` (default: the
    size the saved page probe's chases show, read again by :func:`.pagesize.read`, else the
    saved check's). The saved predictions are kept where nothing would change them (the same
    preset, no ``sets``, window states and host page sizes among those saved)."""
    if saved.get("schema") != SCHEMA:
        raise ValueError(f"not a saved check: schema `{saved.get('schema')}`, not `{SCHEMA}`")
    steps = steps or Steps()
    machine = machine or saved["machine"]
    freq_ghz(machine)
    kept = [f for f in saved["footprints"] if footprints is None or f in footprints]
    if not kept:
        given = ", ".join(size_label(f) for f in footprints or [])
        raise ValueError(f"the saved check measured none of the footprints {given}")
    check = HostCheck(
        machine=machine,
        footprints=kept,
        pages=saved["pages"],
        patterns=saved["patterns"],
        accesses=saved["accesses"],
        record_accesses=saved["record_accesses"],
        runs=saved["runs"],
        measured=saved["measured"],
        loadavg=saved["loadavg"],
        started=saved["started"],
        host=saved["host"],
        machine_reason=f"{machine}: given (measured {saved['started']}, resimulated)",
        sets=[(k, v) for k, v in sets],
        window=dict(saved.get("window", {})),
        windows=list(saved.get("windows", ["full"])),
        page_probe=dict(saved.get("page_probe", {})),
        host_pages=list(saved.get("host_pages", HOST_PAGES)),
    )
    _read_window(check, windows)
    _read_page_probe(check, host_pages)
    predicted = [p for p in saved["predicted"] if p["footprint"] in kept]
    recorded = recorded_of(predicted)
    covered = check.windows == saved.get("windows", ["full"]) and set(check.host_pages) <= {
        p["host_pages"] for p in predicted
    }
    if machine == saved["machine"] and not sets and not saved.get("set") and covered:
        check.predicted = [p for p in predicted if p["host_pages"] in check.host_pages]
    else:
        check.predicted = predict(
            machine,
            traces,
            recorded,
            check.record_accesses,
            steps,
            sets,
            check.windows,
            check.host_pages,
        )
    for path, values in sensitivity:
        for value in values:
            check.sensitivity.append(variant(check, traces, recorded, [(path, value)], steps))
    return check
