"""Sweep specifications: the points of a design-space sweep, read from TOML (docs/sweeps.md).

A spec has up to four tables::

    [sweep]      name and description (both optional)
    [base]       options every point shares
    [[points]]   a list of points, each a table of options
    [grid]       options with a list of values each

The points are every ``[[points]]`` entry crossed with every combination of the grid values,
each merged over ``[base]`` (without ``[[points]]``, the grid alone; without ``[grid]``, the
list alone). An option is a keyword of :func:`vmmu.run` (``machine``, ``mode``, ``pwc``,
``levels``, ``workload``, ``trace``, …) or ``set.<dotted.path>`` for any configuration field
(``set.machine.pwc.entries``). A ``workload`` that names no generator is read as a trace file.

Everything is checked here, before any point runs: unknown keys, empty grids, values of the
wrong type, unreadable traces and each point's configuration (resolved by the engine, whose
error names the field). A point's key is a hash of its fully resolved configuration and its
workload (a trace by the hash of its bytes), so one design reached by two spellings is one
point, and a database can tell which points of a changed spec it already holds.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vmmu import api
from vmmu.exceptions import VmmuError
from vmmu.options import BY_NAME, OPTIONS, Choice, Value, typed

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: The tables a spec may have.
TABLES = ("sweep", "base", "points", "grid")

#: Characters of the hex digest kept as a point's key (64 bits).
KEY_LENGTH = 16


class SpecError(ValueError):
    """A sweep specification that cannot be run; the message names the file and the key."""


# ---------------------------------------------------------------------------------------------
# Options and their values


def _any_toml(v: Any) -> Any:
    # A `set.` value is any TOML value; the engine checks it against the field's type.
    return v


def _expand(opts: Mapping[str, Any]) -> dict[str, Any]:
    """A ``set.<path>`` given a table sets each of its fields: ``"set.machine.pwc" = {entries =
    8, ways = 8}`` is ``set.machine.pwc.entries = 8`` and ``set.machine.pwc.ways = 8``."""
    out: dict[str, Any] = {}
    for k, v in opts.items():
        if k.startswith("set.") and isinstance(v, Mapping):
            out.update(_expand({f"{k}.{sub}": x for sub, x in v.items()}))
        else:
            out[k] = v
    return out


#: The checks of the options :func:`vmmu.run` takes: its own keywords and those of the option
#: table (:data:`vmmu.options.OPTIONS`, each checked by its value's kind).
CHECKS: dict[str, Callable[[Any], Any]] = {
    "machine": Value("a machine preset or .toml file").check,
    "mode": Choice("a paging mode", choices=api.MODES).check,
    "workload": Value("a workload NAME[:k=v,...] or a trace file").check,
    "trace": Value("a trace file").check,
    **{opt.name: opt.value.check for opt in OPTIONS},
}

#: :func:`vmmu.run`'s keywords that are not options of a point.
_NOT_OPTIONS = ("progress", "options")


def _run_parameters() -> dict[str, Any]:
    """The options of a point and their defaults: :func:`vmmu.run`'s own keywords, then the
    option table's."""
    own = {
        name: p.default
        for name, p in inspect.signature(api.run).parameters.items()
        if name not in _NOT_OPTIONS and p.kind is not inspect.Parameter.VAR_KEYWORD
    }
    return {**own, **{opt.name: opt.default for opt in OPTIONS}}


def run_options() -> list[str]:
    """The option names a spec may use besides ``set.<path>``: :func:`vmmu.run`'s keywords."""
    return list(_run_parameters())


def normalize_key(key: str) -> str:
    """``nested-page-size`` → ``nested_page_size``; ``set.`` paths are kept as written."""
    key = key.strip()
    if key.startswith("set."):
        return key
    return key.replace("-", "_")


def check_option(key: str, value: Any, where: str) -> Any:
    """The value of option ``key`` as a point stores it; raises :class:`SpecError`."""
    if key.startswith("set."):
        if not key[4:].strip(".") or ".." in key or key.endswith("."):
            raise SpecError(f"{where}: `{key}`: expected set.<dotted.path> (see `vmmu config`)")
        if isinstance(value, Mapping):
            if not value:
                raise SpecError(f"{where}: `{key}`: an empty table sets nothing")
            return {k: check_option(f"{key}.{k}", v, where) for k, v in value.items()}
        return _any_toml(value)
    if key not in run_options():
        known = ", ".join(run_options())
        raise SpecError(
            f"{where}: unknown key `{key}` (options: {known}; or set.<dotted.path> for any "
            "configuration field)"
        )
    try:
        return CHECKS[key](value)
    except (TypeError, ValueError) as e:
        raise SpecError(f"{where}: `{key}`: {e}") from None


# ---------------------------------------------------------------------------------------------
# Points


@dataclass
class Point:
    """One point of a sweep: its options (as the spec gives them), key and run keywords."""

    options: dict[str, Any]
    key: str
    run_kwargs: dict[str, Any]
    #: Keys that tell this point from the others of its spec, for labels.
    label_keys: tuple[str, ...] = ()

    def label(self) -> str:
        """``mode=nested pwc=2d`` — the options that vary in the spec."""
        keys = self.label_keys or tuple(self.options)
        return " ".join(f"{k}={_short(self.options.get(k))}" for k in keys) or self.key


def _short(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


@dataclass
class Spec:
    """A checked sweep specification and its points, in order, without duplicates."""

    source: str
    text: str
    name: str
    description: str
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    entries: list[dict[str, Any]]
    points: list[Point]
    #: Every option key any point has, in the order the spec names them.
    option_keys: list[str]
    #: The option keys whose value differs between points (grid keys first).
    varying_keys: list[str]
    #: Points left out because an earlier point has the same resolved configuration.
    duplicates: int = 0
    #: For each varying key, its values in spec order (for plots).
    orders: dict[str, list[Any]] = field(default_factory=dict)


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Reads and checks the spec file ``path``; raises :class:`SpecError` naming what is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{path}: cannot read the sweep spec: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a text file (a sweep spec is TOML)") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from None
    return parse_spec(data, source=str(path), text=text)


def parse_spec(data: Mapping[str, Any], source: str = "<spec>", text: str | None = None) -> Spec:
    """Checks a spec given as data (the TOML's tables) and expands its points."""
    unknown = [k for k in data if k not in TABLES]
    if unknown:
        raise SpecError(
            f"{source}: unknown table `{unknown[0]}` (a spec has {', '.join(TABLES)}; "
            "options go in [base], [grid] or [[points]])"
        )
    meta = _table(data, "sweep", source)
    for k in meta:
        if k not in ("name", "description") or not isinstance(meta[k], str):
            raise SpecError(f"{source}: [sweep] `{k}`: expected name or description, a string")
    base = {
        normalize_key(k): check_option(normalize_key(k), v, f"{source}: [base]")
        for k, v in _table(data, "base", source).items()
    }
    grid = _grid(_table(data, "grid", source), source)
    entries = _entries(data.get("points"), source)
    for i, entry in enumerate(entries):
        both = [k for k in entry if k in grid]
        if both:
            raise SpecError(
                f"{source}: `{both[0]}` is in both [grid] and [[points]] entry {i + 1}; "
                "give it in one place"
            )
    if not grid and not entries:
        raise SpecError(f"{source}: empty grid: give [grid] values or [[points]] to run")
    combos = list(itertools.product(*grid.values())) if grid else [()]
    raw = [
        _expand({**base, **entry, **dict(zip(grid, combo, strict=False))})
        for entry in entries or [{}]
        for combo in combos
    ]
    option_keys = list(dict.fromkeys(k for opts in raw for k in opts))
    varying = [k for k in option_keys if len({_canon(o.get(k)) for o in raw}) > 1]
    grid_cols = [k for k in _expand({g: v[0] for g, v in grid.items()})]
    varying = [k for k in grid_cols if k in varying] + [k for k in varying if k not in grid_cols]
    resolver = _Resolver(source)
    points: list[Point] = []
    seen: set[str] = set()
    duplicates = 0
    for opts in raw:
        point = resolver.point(opts, tuple(varying))
        if point.key in seen:
            duplicates += 1
            continue
        seen.add(point.key)
        points.append(point)
    return Spec(
        source=source,
        text=text if text is not None else json.dumps(data, indent=2, default=str),
        name=meta.get("name") or Path(source).stem,
        description=meta.get("description", ""),
        base=base,
        grid=grid,
        entries=entries,
        points=points,
        option_keys=option_keys,
        varying_keys=varying,
        duplicates=duplicates,
        orders={k: _unique(o[k] for o in raw if k in o) for k in varying},
    )


def _table(data: Mapping[str, Any], name: str, source: str) -> dict[str, Any]:
    t = data.get(name, {})
    if not isinstance(t, Mapping):
        raise SpecError(f"{source}: [{name}] must be a table, got {typed(t)}")
    return dict(t)


def _grid(table: Mapping[str, Any], source: str) -> dict[str, list[Any]]:
    grid: dict[str, list[Any]] = {}
    for k, values in table.items():
        key = normalize_key(k)
        where = f"{source}: [grid]"
        if not isinstance(values, list):
            raise SpecError(
                f"{where}: `{key}`: expected a list of values, got {typed(values)} "
                "(a value every point shares goes in [base])"
            )
        if not values:
            raise SpecError(f"{where}: `{key}` has no values")
        if key in grid:
            raise SpecError(f"{where}: `{key}` is given twice")
        grid[key] = [check_option(key, v, where) for v in values]
    return grid


def _entries(points: Any, source: str) -> list[dict[str, Any]]:
    if points is None:
        return []
    if not isinstance(points, list) or not all(isinstance(p, Mapping) for p in points):
        raise SpecError(f"{source}: [[points]] must be a list of tables")
    out = []
    for i, entry in enumerate(points):
        where = f"{source}: [[points]] entry {i + 1}"
        if not entry:
            raise SpecError(f"{where} is empty")
        out.append(
            {normalize_key(k): check_option(normalize_key(k), v, where) for k, v in entry.items()}
        )
    return out


def _unique(values: Iterable[Any]) -> list[Any]:
    out: dict[str, Any] = {}
    for v in values:
        out.setdefault(_canon(v), v)
    return list(out.values())


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


class _Resolver:
    """Turns a point's options into run keywords and a key, asking the engine for the resolved
    configuration (once per distinct set of options) and hashing each trace once."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.defaults = _run_parameters()
        config_params = [*inspect.signature(api.config).parameters, *BY_NAME]
        self.config_params = [p for p in config_params if p in self.defaults]
        self.catalog = {g["name"]: {p["name"] for p in g["params"]} for g in api.workloads()}
        self.configs: dict[str, str] = {}
        self.traces: dict[str, str] = {}

    def point(self, opts: dict[str, Any], label_keys: tuple[str, ...]) -> Point:
        where = f"{self.source}: point {_label(opts, label_keys)}"
        kwargs = {k: v for k, v in opts.items() if not k.startswith("set.")}
        sets = [(k[4:], v) for k, v in opts.items() if k.startswith("set.")]
        workload, trace = kwargs.pop("workload", None), kwargs.pop("trace", None)
        if (
            workload is not None
            and trace is None
            and workload.partition(":")[0] not in self.catalog
        ):
            workload, trace = None, workload
        if (workload is None) == (trace is None):
            raise SpecError(
                f"{where}: give exactly one of `workload` (NAME[:k=v,...] or a trace file) "
                "and `trace`"
            )
        if workload is not None:
            source = ["workload", self._workload(workload, where)]
        else:
            trace = os.path.abspath(trace)
            source = ["trace", self._trace(trace, where)]
        run_kwargs = {**kwargs, "workload": workload, "trace": trace}
        if sets:
            run_kwargs["set"] = sets
        config = self._config(run_kwargs, where)
        run_only = {
            k: v
            for k, v in run_kwargs.items()
            if k not in self.config_params and k not in ("workload", "trace", "set")
        }
        digest = hashlib.sha256(
            _canon({"config": config, "source": source, "run": run_only}).encode()
        ).hexdigest()
        return Point(dict(opts), digest[:KEY_LENGTH], run_kwargs, label_keys)

    def _workload(self, spec: str, where: str) -> str:
        """The workload with its parameters sorted (their order does not matter)."""
        name, _, params = spec.partition(":")
        pairs = [p.strip() for p in params.split(",") if p.strip()] if params else []
        for p in pairs:
            k, eq, _v = p.partition("=")
            if not eq or k.strip() not in self.catalog[name]:
                raise SpecError(
                    f"{where}: workload `{spec}`: `{p}` is not a parameter of `{name}` "
                    f"(parameters: {', '.join(sorted(self.catalog[name]))})"
                )
        return name + (":" + ",".join(sorted(pairs)) if pairs else "")

    def _trace(self, path: str, where: str) -> str:
        if path not in self.traces:
            h = hashlib.sha256()
            try:
                with open(path, "rb") as f:
                    while chunk := f.read(1 << 20):
                        h.update(chunk)
            except OSError as e:
                raise SpecError(
                    f"{where}: trace {path}: cannot read it: {e.strerror or e} (a `workload` "
                    "that names no generator is read as a trace file; see `vmmu workloads`)"
                ) from None
            self.traces[path] = h.hexdigest()
        return self.traces[path]

    def _config(self, run_kwargs: dict[str, Any], where: str) -> str:
        kwargs = {k: run_kwargs.get(k, self.defaults[k]) for k in self.config_params}
        if "set" in run_kwargs:
            kwargs["set"] = run_kwargs["set"]
        memo = _canon(kwargs)
        if memo not in self.configs:
            try:
                self.configs[memo] = api.config(**kwargs)
            except (VmmuError, ValueError) as e:
                raise SpecError(f"{where}: {e}") from None
        return self.configs[memo]


def _label(opts: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    shown = [k for k in keys if k in opts] or list(opts)
    return "{" + ", ".join(f"{k}={_short(opts[k])}" for k in shown) + "}"
