"""The Python API: run simulations, compare paging modes, list presets and workloads.

>>> import vmmu
>>> r = vmmu.run(mode="nested", workload="random:footprint=64M,refs=100K")
>>> r.cycles, r.walk_refs / r.walks
>>> vmmu.compare(workload="random:footprint=1G,refs=1M")[["cycles", "overhead"]]

Every keyword maps to one configuration field (``docs/python-api.md``); ``set`` overrides any
other field by its dotted path and is applied last. Errors are :mod:`vmmu.exceptions`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from vmmu import _core
from vmmu._progress import ProgressBars

if TYPE_CHECKING:
    import pandas as pd

#: Paging modes the engine implements, in display order; ``adaptive`` switches between
#: shadow and nested paging by a policy (``docs/policies.md``); ``nested-virt`` runs the guest
#: as an L2 guest of an L1 hypervisor of kind :data:`L1_KINDS` (``docs/model.md``).
MODES: tuple[str, ...] = ("native", "nested", "shadow", "adaptive", "nested-virt")

#: L1 hypervisors of a ``nested-virt`` run (``nested_virt.l1``): EPT on EPT, the 3D walk.
L1_KINDS: tuple[str, ...] = ("ept", "3d")

#: The modes :func:`compare` runs by default.
STATIC_MODES: tuple[str, ...] = ("native", "nested", "shadow")

#: Paging-mode policies of an adaptive run (``policy.kind``, ``docs/policies.md``).
POLICIES: tuple[str, ...] = ("dav2m", "costmodel", "oracle", "static-shadow", "static-nested")

#: The adaptive columns ``vmmu compare --adaptive`` adds: seed 001's DAV²M, the oracle bound
#: and vmmu's cost model.
ADAPTIVE_COLUMNS: tuple[str, ...] = ("dav2m", "oracle", "costmodel")

#: How sensitive operations reach the hypervisor (``--technique``).
TECHNIQUES: tuple[str, ...] = ("hvm", "pv", "previrt")

#: When nested-paging memory is backed (``--backing``).
BACKINGS: tuple[str, ...] = ("eager", "lazy")

#: Page-walk caching designs (``--pwc``).
PWC_DESIGNS: tuple[str, ...] = ("none", "1d", "2d", "2d+nt", "psc")

#: Core models (``--core-model``, ``machine.core.model``; docs/model.md "Timing").
CORE_MODELS: tuple[str, ...] = ("additive", "interval")

#: Page sizes of the nested tables and of the guest's mappings.
NESTED_PAGE_SIZES: tuple[str, ...] = ("4K", "2M", "1G")
GUEST_PAGE_SIZES: tuple[str, ...] = ("4K", "2M", "1G", "mixed")
#: Linux's transparent huge page modes (``guest.thp``).
THP_MODES: tuple[str, ...] = ("never", "madvise", "always")

#: ``levels`` → the guest's paging format.
LEVELS: dict[int, str] = {4: "long4", 5: "long5"}

DEFAULT_MACHINE = "bhargava08"

Progress = Callable[[int, "int | None"], "bool | None"]
SetArg = Mapping[str, Any] | Iterable[str] | Iterable[tuple[str, Any]] | None


def _toml_literal(value: Any) -> str:
    """A Python value as the text of a ``--set`` value (a TOML literal)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _set_pairs(set: SetArg) -> list[tuple[str, str]]:
    """Normalizes ``set`` (a mapping, ``"path=value"`` strings or pairs) to pairs."""
    if set is None:
        return []
    items = set.items() if isinstance(set, Mapping) else set
    pairs = []
    for item in items:
        if isinstance(item, str):
            path, eq, value = item.partition("=")
            if not eq or not path.strip():
                raise ValueError(f"--set expects dotted.path=value, got `{item}`")
            pairs.append((path.strip(), value.strip()))
        else:
            path, value = item
            pairs.append((str(path), _toml_literal(value)))
    return pairs


def overrides(
    mode: str | None = None,
    pwc: str | None = None,
    nested_page_size: str | None = None,
    guest_page_size: str | None = None,
    levels: int | None = None,
    seed: int | None = None,
    check: bool = False,
    set: SetArg = None,
    thp: str | None = None,
    technique: str | None = None,
    profile: str | None = None,
    vpid: bool | None = None,
    pcid: bool | None = None,
    backing: str | None = None,
    switch_at: Iterable[int] | None = None,
    warmup: int | None = None,
    warmup_instructions: int | None = None,
    vcpus: int | None = None,
    overcommit: bool = False,
    pin: Mapping[int, int] | None = None,
    policy: str | None = None,
    time_scale: float | None = None,
    core_model: str | None = None,
    l1: str | None = None,
) -> list[tuple[str, str]]:
    """The ``(dotted.path, value)`` overrides the keyword options stand for, ``set`` last."""
    pairs: list[tuple[str, str]] = []
    if mode is not None:
        pairs.append(("mode", f'"{mode}"'))
    if l1 is not None:
        pairs.append(("nested_virt.l1", f'"{l1}"'))
    if policy is not None:
        pairs.append(("policy.kind", f'"{policy}"'))
    if time_scale is not None:
        pairs.append(("policy.time_scale", repr(float(time_scale))))
    if pwc is not None:
        pairs.append(("machine.pwc.design", f'"{pwc}"'))
    if core_model is not None:
        pairs.append(("machine.core.model", f'"{core_model}"'))
    if nested_page_size is not None:
        pairs.append(("host.nested_page_size", f'"{nested_page_size}"'))
    if guest_page_size is not None:
        pairs.append(("guest.page_size", f'"{guest_page_size}"'))
    if thp is not None:
        pairs.append(("guest.thp", f'"{thp}"'))
    if levels is not None:
        levels = int(levels)
        if levels not in LEVELS:
            raise _core.ConfigError(
                f"invalid configuration: levels: {levels} is not one of "
                f"{', '.join(map(str, LEVELS))}"
            )
        pairs.append(("guest.format", f'"{LEVELS[levels]}"'))
        pairs.append(("host.nested_levels", str(levels)))
    if seed is not None:
        pairs.append(("seed", str(int(seed))))
    if check:
        pairs.append(("check", "true"))
    if technique is not None:
        pairs.append(("hypervisor.technique", f'"{technique}"'))
    if profile is not None:
        pairs.append(("hypervisor.profile", f'"{profile}"'))
    if vpid is not None:
        pairs.append(("machine.tlb.vpid", _toml_literal(bool(vpid))))
    if pcid is not None:
        pairs.append(("machine.tlb.pcid", _toml_literal(bool(pcid))))
    if backing is not None:
        pairs.append(("hypervisor.backing", f'"{backing}"'))
    if switch_at is not None:
        pairs.append(("hypervisor.switch.at", json.dumps([int(n) for n in switch_at])))
    if warmup is not None:
        pairs.append(("warmup.refs", str(int(warmup))))
    if warmup_instructions is not None:
        pairs.append(("warmup.instructions", str(int(warmup_instructions))))
    if vcpus is not None:
        pairs.append(("guest.vcpus", str(int(vcpus))))
    if overcommit:
        pairs.append(("guest.overcommit", "true"))
    if pin:
        table = ", ".join(f'"{int(t)}" = {int(v)}' for t, v in sorted(pin.items()))
        pairs.append(("guest.affinity", "{ " + table + " }"))
    pairs.extend(_set_pairs(set))
    return pairs


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


class Result(Mapping[str, Any]):
    """One simulation's result (schema ``vmmu.result/2``, ``docs/statistics.md``).

    A read-only mapping of the result JSON; top-level keys are also attributes
    (``r.cycles``, ``r.tlb["l2"]["misses"]``).
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_data", dict(data))

    @classmethod
    def from_json(cls, text: str) -> Result:
        """Parses a result JSON document."""
        return cls(json.loads(text))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __getattr__(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise AttributeError(f"result has no field `{key}`") from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("a Result is read-only")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._data))

    def __repr__(self) -> str:
        d = self._data
        parts = [
            f"{k}={d[k]!r}" for k in ("mode", "machine", "workload", "cycles", "cpi") if k in d
        ]
        if d.get("walks"):
            parts.append(f"walk_refs/walk={d.get('walk_refs', 0) / d['walks']:.2f}")
        return f"Result({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the result as plain dicts and lists."""
        return json.loads(json.dumps(self._data))

    def to_json(self, indent: int | None = 2) -> str:
        """The result as JSON text."""
        return json.dumps(self._data, indent=indent)

    def flat(self) -> dict[str, Any]:
        """The result flattened to dotted keys (``tlb.l2.misses``, ``walk_refs_by_step.G,gL1``)."""
        return _flatten(self._data)

    def to_pandas(self) -> pd.DataFrame:
        """One row, one column per dotted key (see :meth:`flat`)."""
        import pandas as pd

        return pd.DataFrame([self.flat()])

    def timeline_frame(self) -> pd.DataFrame:
        """An adaptive run's timeline, one row per PMU window indexed by ``window``
        (``docs/statistics.md``, "timeline"). Raises ``ValueError`` for a run without one."""
        import pandas as pd

        t = self._data.get("timeline")
        if not t:
            raise ValueError(
                f"the {self._data.get('mode', '?')} run has no timeline "
                "(adaptive runs record one: mode='adaptive')"
            )
        return pd.DataFrame(t).set_index("window")


def _progress_arg(progress: bool | Progress | None) -> tuple[ProgressBars | None, Any]:
    if progress is True:
        bars = ProgressBars()
        return bars, bars
    if callable(progress):
        return None, progress
    return None, None


def run(
    machine: str = DEFAULT_MACHINE,
    mode: str = "nested",
    workload: str | None = None,
    trace: str | None = None,
    progress: bool | Progress = False,
    **options: Any,
) -> Result:
    """Runs one simulation and returns its :class:`Result`.

    ``machine`` is a preset name (:func:`presets`) or a ``.toml`` file; give exactly one of
    ``workload`` (``"NAME:k=v,..."``, :func:`workloads`) and ``trace`` (a file). ``options``
    are the keywords of :func:`overrides`: ``pwc``, page sizes, ``levels``, ``seed``,
    ``check``; ``technique``, ``profile`` and ``backing`` configure the hypervisor;
    ``vpid`` / ``pcid`` turn TLB tags on or off; ``switch_at`` lists the instruction counts at
    which the VM switches between shadow and nested paging; ``warmup`` references (or
    ``warmup_instructions`` instructions) are simulated first and left out of every count;
    ``vcpus`` gives the guest that many vCPUs (``overcommit`` allows more than the machine's
    cores; ``pin`` maps thread ids to the vCPU each is pinned to); ``set`` overrides any
    field by its dotted path. ``mode="adaptive"`` switches between shadow and nested paging by
    ``policy`` (:data:`POLICIES`, default ``dav2m``) whose windows ``time_scale`` shrinks
    (``docs/policies.md``). ``core_model`` (:data:`CORE_MODELS`) chooses how the counts are
    timed: ``additive`` (the default: no overlap) or ``interval`` (an out-of-order window;
    ``docs/model.md``, "Timing"). ``progress`` is ``True`` for a progress bar on stderr, or a
    callable ``(done, total) -> bool | None`` called about once per million events (return
    ``False`` to stop).
    """
    pairs = overrides(mode=mode, **options)
    bars, cb = _progress_arg(progress)
    if bars is not None:
        with bars:
            text = _core.run(machine, pairs, workload, trace, bars.callback(mode))
    else:
        text = _core.run(machine, pairs, workload, trace, cb)
    return Result.from_json(text)


def run_modes(
    modes: Iterable[str] | None = None,
    *,
    parallel: bool = True,
    progress: bool | ProgressBars = False,
    **options: Any,
) -> dict[str, Result]:
    """Runs the same simulation in each mode (in parallel threads; the engine releases the
    GIL) and returns ``{mode: Result}`` in the order given. A mode may also be a policy of
    :data:`POLICIES` (an adaptive run with that policy, keyed by the policy's name). A
    ``switch_at`` applies to the static virtualized modes only (a native run has no hypervisor
    to switch, an adaptive run's policy switches); ``policy`` and ``time_scale`` apply to the
    adaptive runs only."""
    modes = list(modes or STATIC_MODES)
    unknown = [m for m in modes if m not in MODES and m not in POLICIES]
    if unknown:
        raise ValueError(
            f"unknown mode `{', '.join(unknown)}` "
            f"(modes: {', '.join(MODES)}; policies: {', '.join(POLICIES)})"
        )
    if not modes:
        raise ValueError("no modes to run")
    own_bars = progress is True
    bars: ProgressBars | None = ProgressBars() if own_bars else progress or None
    stop = threading.Event()

    def one(mode: str) -> Result:
        report = bars.callback(mode) if bars is not None else None

        def cb(done: int, total: int | None) -> bool:
            if stop.is_set():
                return False
            return report(done, total) if report is not None else True

        opts = dict(options)
        if mode in POLICIES:
            opts["policy"] = mode
            mode = "adaptive"
        if mode != "adaptive":
            opts.pop("policy", None)
            opts.pop("time_scale", None)
        if mode in ("native", "adaptive"):
            opts.pop("switch_at", None)
        return run(mode=mode, progress=cb, **opts)

    try:
        if not parallel or len(modes) == 1:
            return {m: one(m) for m in modes}
        with ThreadPoolExecutor(max_workers=len(modes)) as pool:
            futures = {m: pool.submit(one, m) for m in modes}
            try:
                return {m: f.result() for m, f in futures.items()}
            except BaseException:
                stop.set()  # stop the other modes, then let the pool join them
                raise
    finally:
        if own_bars and bars is not None:
            bars.__exit__(None, None, None)


def overhead(results: Mapping[str, Result]) -> dict[str, float | None]:
    """Each mode's overhead against native: ``cycles / native cycles - 1`` (None without a
    native run)."""
    base = results.get("native")
    base_cycles = base.get("cycles") if base is not None else None
    out: dict[str, float | None] = {}
    for mode, r in results.items():
        cycles = r.get("cycles")
        out[mode] = cycles / base_cycles - 1 if base_cycles and cycles is not None else None
    return out


def ranking(results: Mapping[str, Result]) -> list[str]:
    """The modes from fastest to slowest (fewest cycles first; ties keep the given order)."""
    return sorted(results, key=lambda m: results[m].get("cycles") or 0)


def sensitivity(
    key: str,
    values: Iterable[Any],
    modes: Iterable[str] | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """Whether a comparison's verdict survives a plausible range of one configuration value.

    Runs :func:`run_modes` once per value of the dotted path ``key`` (set after every other
    option) and returns one row per value: ``{"value", "cycles": {mode: n}, "overhead":
    {mode: fraction}, "ranking": [modes, fastest first]}``. The verdict survives when every row
    ranks the modes alike.
    """
    base_set = _set_pairs(options.pop("set", None))
    rows = []
    for value in values:
        pairs = [*base_set, (key, _toml_literal(value))]
        results = run_modes(modes, set=pairs, **options)
        rows.append(
            {
                "value": value,
                "cycles": {m: r.get("cycles") for m, r in results.items()},
                "overhead": overhead(results),
                "ranking": ranking(results),
            }
        )
    return rows


def compare(
    modes: Iterable[str] | None = None,
    *,
    parallel: bool = True,
    progress: bool = False,
    **options: Any,
) -> pd.DataFrame:
    """Runs each mode (default: :data:`STATIC_MODES`; policies of :data:`POLICIES` too, see
    :func:`run_modes`) on the same inputs and returns a
    DataFrame indexed by mode, one column per dotted result key, plus ``overhead`` (fraction
    of native cycles, ``cycles / native cycles - 1``). Takes :func:`run`'s keywords."""
    import pandas as pd

    results = run_modes(modes, parallel=parallel, progress=progress, **options)
    over = overhead(results)
    rows = []
    for mode, r in results.items():
        row = r.flat()
        row["overhead"] = over[mode]
        rows.append(row)
    return pd.DataFrame(rows, index=pd.Index(list(results), name="mode"))


def presets() -> dict[str, str]:
    """The machine presets: ``{name: description}``."""
    return dict(_core.presets())


def profiles() -> dict[str, str]:
    """The hypervisor exit cost profiles: ``{name: description}``."""
    return dict(_core.profiles())


def profile_toml(name: str) -> str:
    """The TOML text of a cost profile (every number with its source)."""
    return _core.profile_toml(name)


def preset_toml(name: str) -> str:
    """The TOML text of a machine preset."""
    return _core.preset_toml(name)


def config(machine: str = DEFAULT_MACHINE, mode: str | None = None, **options: Any) -> str:
    """The fully resolved and validated configuration as TOML text (``options`` as for
    :func:`run`)."""
    pairs = overrides(mode=mode, **options)
    return _core.config_toml(machine, pairs)


def workloads() -> list[dict[str, Any]]:
    """The workload generators: ``[{name, description, params: [{name, default,
    description}]}]``."""
    return json.loads(_core.workloads())


def trace_info(path: str, progress: bool | Progress = False) -> dict[str, Any]:
    """Reads a trace file to the end and summarizes it."""
    bars, cb = _progress_arg(progress)
    if bars is not None:
        with bars:
            return json.loads(_core.trace_info(str(path), bars.callback("reading")))
    return json.loads(_core.trace_info(str(path), cb))


def trace_convert(
    src: str, dst: str, to: str | None = None, progress: bool | Progress = False
) -> dict[str, Any]:
    """Converts trace ``src`` to ``dst`` in format ``to`` (``vtrace``, ``lackey`` or
    ``champsim``); without ``to``, the format ``dst``'s name says (``.vtrace``; ``.txt`` or
    ``.lackey``; ``.champsim`` or ``.champsimtrace``; the last two optionally ``.gz``, ``.zst``
    or ``.xz``). A ``to`` that disagrees with the name, or a name that says no format, raises
    :class:`vmmu.exceptions.VmmuIOError` naming both (docs/traces.md)."""
    bars, cb = _progress_arg(progress)
    if bars is not None:
        with bars:
            return json.loads(
                _core.trace_convert(str(src), str(dst), to, bars.callback("converting"))
            )
    return json.loads(_core.trace_convert(str(src), str(dst), to, cb))
