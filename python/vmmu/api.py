"""The Python API: run simulations, compare paging modes, list presets and workloads.

>>> import vmmu
>>> r = vmmu.run(mode="nested", workload="random:footprint=64M,refs=100K")
>>> r.cycles, r.walk_refs / r.walks
>>> vmmu.compare(workload="random:footprint=1G,refs=1M")[["cycles", "overhead"]]

Every option keyword is an entry of :data:`vmmu.options.OPTIONS`, which names the
configuration fields it sets (``docs/python-api.md``); ``set`` overrides any other field by its
dotted path and is applied last. Errors are :mod:`vmmu.exceptions`. The options' vocabularies
(:data:`MODES`, :data:`POLICIES`, :data:`PWC_DESIGNS`, ...) are :mod:`vmmu.options`'s,
importable from here too.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import vmmu._core as _core
from vmmu._progress import ProgressBars
from vmmu.options import BACKINGS as BACKINGS
from vmmu.options import BY_NAME, OPTIONS, check_modes, split_mode
from vmmu.options import CORE_MODELS as CORE_MODELS
from vmmu.options import GUEST_PAGE_SIZES as GUEST_PAGE_SIZES
from vmmu.options import L1_KINDS as L1_KINDS
from vmmu.options import LEVELS as LEVELS
from vmmu.options import MODES as MODES
from vmmu.options import NESTED_PAGE_SIZES as NESTED_PAGE_SIZES
from vmmu.options import NESTED_VIRT_MODES as NESTED_VIRT_MODES
from vmmu.options import POLICIES as POLICIES
from vmmu.options import PWC_DESIGNS as PWC_DESIGNS
from vmmu.options import TECHNIQUES as TECHNIQUES
from vmmu.options import THP_MODES as THP_MODES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

if TYPE_CHECKING:
    import pandas as pd

#: The static modes of the seeds: native, nested and shadow paging.
STATIC_MODES: tuple[str, ...] = ("native", "nested", "shadow")

#: The modes :func:`compare` runs by default: the static modes and agile paging, which mixes
#: them within a walk (a nested-virt run is another guest, an L2 one: ask for it by kind,
#: ``nested-virt:ept``, ...).
COMPARE_MODES: tuple[str, ...] = (*STATIC_MODES, "agile")

#: The adaptive columns ``vmmu compare --adaptive`` adds: seed 001's DAV²M, the oracle bound
#: and vmmu's cost model.
ADAPTIVE_COLUMNS: tuple[str, ...] = ("dav2m", "oracle", "costmodel")

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


def overrides(mode: str | None = None, set: SetArg = None, **options: Any) -> list[tuple[str, str]]:
    """The ``(dotted.path, value)`` overrides ``mode`` and the keyword options stand for, ``set``
    last. The keywords are the names of :data:`vmmu.options.OPTIONS`, each setting the
    configuration fields its entry names."""
    unknown = [k for k in options if k not in BY_NAME]
    if unknown:
        raise TypeError(f"overrides() got an unexpected keyword argument '{unknown[0]}'")
    pairs: list[tuple[str, str]] = []
    if mode is not None:
        pairs.append(("mode", f'"{mode}"'))
    for opt in OPTIONS:
        pairs.extend(opt.pairs(options.get(opt.name, opt.default)))
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
    are the keywords of :data:`vmmu.options.OPTIONS` (``pwc``, ``levels``, ``profile``,
    ``vcpus``, ...; each entry says what it sets, docs/python-api.md lists them); ``set``
    overrides any field by its dotted path. ``mode="adaptive"`` switches between shadow and
    nested paging by ``policy`` (:data:`POLICIES`, default ``dav2m``) whose windows
    ``time_scale`` shrinks (``docs/policies.md``). ``core_model`` (:data:`CORE_MODELS`) chooses
    how the counts are timed: ``additive`` (the default: no overlap) or ``interval`` (an
    out-of-order window; ``docs/model.md``, "Timing"). ``progress`` is ``True`` for a progress bar
    on stderr, or a callable ``(done, total) -> bool | None`` called about once per million
    events (return ``False`` to stop).
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
    """Runs the same simulation in each mode (default :data:`COMPARE_MODES`; in parallel
    threads, the engine releases the GIL) and returns ``{mode: Result}`` in the order given. A
    mode may also be a policy of :data:`POLICIES` (an adaptive run with that policy, keyed by
    the policy's name) or a nested-virt run of one L1 kind (``nested-virt:pvm``, keyed so). A
    ``switch_at`` applies to nested and shadow paging only (a native run has no hypervisor to
    switch, an adaptive run's policy switches, agile and nested-virt runs keep their mode);
    ``policy`` and ``time_scale`` apply to the adaptive runs only."""
    modes = check_modes(modes or COMPARE_MODES)
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
        mode, kind = split_mode(mode)
        if kind is not None:
            opts["l1"] = kind
        if mode != "adaptive":
            opts.pop("policy", None)
            opts.pop("time_scale", None)
        if mode not in ("nested", "shadow"):
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


def overhead(
    results: Mapping[Any, Mapping[str, Any]], native: Mapping[str, Any] | None = None
) -> dict[Any, float | None]:
    """Each result's overhead against native: ``cycles / native cycles - 1``, where native is
    ``native`` or else ``results["native"]`` (None without one)."""
    base = native if native is not None else results.get("native")
    base_cycles = base.get("cycles") if base is not None else None
    out: dict[Any, float | None] = {}
    for key, r in results.items():
        cycles = r.get("cycles")
        out[key] = cycles / base_cycles - 1 if base_cycles and cycles is not None else None
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
    """Runs each mode (default: :data:`COMPARE_MODES`; policies of :data:`POLICIES` too, see
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


def config_dict(
    machine: str = DEFAULT_MACHINE, mode: str | None = None, **options: Any
) -> dict[str, Any]:
    """:func:`config` parsed: the resolved configuration as nested dicts."""
    return tomllib.loads(config(machine=machine, mode=mode, **options))


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
