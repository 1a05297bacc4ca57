"""Sets of results as one table, whatever they were stored in — for plots and reports.

:func:`load` reads a sweep database (``.duckdb``), its Parquet export, result JSON (``vmmu run
--json``: one result; ``vmmu compare --json``: ``{mode: result}``; a list of results;
``vmmu repro --json``: paper tables) or a directory of such files. :func:`from_results` takes
:class:`vmmu.Result` objects. Either way a :class:`ResultSet` holds one row per point, the
result flattened to dotted columns as in the sweep database (docs/sweeps.md), and knows which
columns describe the points (their options) and which of those vary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vmmu import api
from vmmu._core import did_you_mean
from vmmu._format import missing
from vmmu.sweep.store import ResultsDB, flatten

if TYPE_CHECKING:
    import pandas as pd

#: Result keys that describe a run rather than measure it; for results that come without a
#: spec (JSON), these and the configuration fields that differ tell the runs apart.
IDENTITY = ("mode", "machine", "workload", "pwc_design", "technique", "profile", "seed")

#: Natural orders of categorical values (values not listed sort after, alphabetically).
KNOWN_ORDERS: dict[str, tuple[Any, ...]] = {
    "mode": api.MODES,
    "pwc": api.PWC_DESIGNS,
    "pwc_design": api.PWC_DESIGNS,
    "nested_page_size": api.NESTED_PAGE_SIZES,
    "guest_page_size": api.GUEST_PAGE_SIZES,
    "status": ("ok", "failed"),
}


@dataclass
class ResultSet:
    """Results as a table: ``frame`` has one row per point, a column per dotted key."""

    frame: pd.DataFrame
    source: str = ""
    #: Columns that describe a point (its options), in spec order.
    option_keys: list[str] = field(default_factory=list)
    #: The option columns whose value differs between points.
    varying_keys: list[str] = field(default_factory=list)
    #: Value orders for categorical columns (a spec's order).
    orders: dict[str, list[Any]] = field(default_factory=dict)
    #: Tables shown beside the results (``vmmu repro``: paper value vs vmmu value).
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: The ``sweeps`` rows of a database.
    sweeps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> pd.DataFrame:
        """The rows of points that ran to completion."""
        df = self.frame
        return df[df["status"] == "ok"] if "status" in df.columns else df

    @property
    def failed(self) -> pd.DataFrame:
        df = self.frame
        if "status" not in df.columns:
            return df.iloc[0:0]
        return df[df["status"] == "failed"]

    def label_keys(self) -> list[str]:
        """The varying keys that name a point: those in step with an earlier one
        (``set.machine.pwc.ways`` given with ``set.machine.pwc.entries``) are left out."""
        df = self.frame
        keys: list[str] = []
        for k in self.varying_keys:
            if k in df.columns and not any(determined_by(df, k, j) for j in keys):
                keys.append(k)
        return keys

    def in_order(self, df: pd.DataFrame | None = None) -> pd.DataFrame:
        """The rows of ``df`` (default: all) in the natural order of the varying keys."""
        df = self.frame if df is None else df
        keys = [k for k in self.varying_keys if k in df.columns]
        if not keys or df.empty:
            return df
        ranks = {k: {_text(v): i for i, v in enumerate(self.order(k, df[k]))} for k in keys}
        order = sorted(
            df.index, key=lambda i: tuple(ranks[k].get(_text(df.at[i, k]), 0) for k in keys)
        )
        return df.loc[order]

    def __len__(self) -> int:
        return len(self.frame)

    def require(self, column: str, what: str = "column") -> str:
        """``column`` if the table has it; else a :class:`ValueError` naming close matches."""
        if column in self.frame.columns:
            return column
        near = did_you_mean(column, [str(c) for c in self.frame.columns]).strip()
        hint = f" ({near})" if near else ""
        keys = ", ".join(self.varying_keys) or "none"
        raise ValueError(
            f"{self.source or 'the results'} have no {what} `{column}`{hint}; the points vary "
            f"in: {keys}"
        )

    def where(self, filters: Mapping[str, str]) -> ResultSet:
        """The rows whose column ``k`` equals ``v`` for each filter (values compared as text,
        so ``set.machine.pwc.entries=24`` matches the integer 24)."""
        df = self.frame
        for k, v in filters.items():
            col = self.require(k)
            df = df[df[col].map(_text) == v]
        if df.empty:
            shown = " ".join(f"{k}={v}" for k, v in filters.items())
            raise ValueError(f"no point of {self.source or 'the results'} has {shown}")
        varying = [k for k in self.varying_keys if df[k].map(_text).nunique(dropna=False) > 1]
        return replace(self, frame=df, varying_keys=varying)

    def order(self, column: str, values: Iterable[Any]) -> list[Any]:
        """``values`` of ``column`` in their natural order: the spec's, a known one, numeric,
        or alphabetical."""
        values = list(dict.fromkeys(v for v in values))
        known = list(self.orders.get(column, [])) + list(KNOWN_ORDERS.get(column, ()))
        rank = {_text(v): i for i, v in reversed(list(enumerate(known)))}

        def key(v: Any) -> tuple[int, float, str]:
            t = _text(v)
            if t in rank:
                return (0, float(rank[t]), "")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return (1, float(v), "")
            return (2, 0.0, t)

        return sorted(values, key=key)


def _text(v: Any) -> str:
    if missing(v):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def text(v: Any) -> str:
    """A cell as text, as :meth:`ResultSet.where` compares it."""
    return _text(v)


def determined_by(df: pd.DataFrame, column: str, by: str) -> bool:
    """True when ``column`` and ``by`` name the same split of the rows (each value of one goes
    with one value of the other): ``config.mode`` and ``mode``, ``set.machine.pwc.ways`` given
    in step with ``set.machine.pwc.entries``."""
    a, b = df[column].map(_text), df[by].map(_text)
    pairs = set(zip(a, b, strict=True))
    return len(pairs) == a.nunique() == b.nunique()


def follows(df: pd.DataFrame, column: str, by: str) -> bool:
    """True when each value of ``by`` goes with one value of ``column``."""
    a, b = df[column].map(_text), df[by].map(_text)
    return bool((a.groupby(b).nunique() <= 1).all())


def from_results(
    results: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    source: str = "",
) -> ResultSet:
    """A :class:`ResultSet` of results (:class:`vmmu.Result` or result dicts); a mapping's keys
    (``{mode: result}``) are kept in column ``name``."""
    import pandas as pd

    named = isinstance(results, Mapping) and not _is_result(results)
    items = list(results.items()) if named else [(None, r) for r in _listed(results)]
    rows = []
    for i, (name, r) in enumerate(items):
        row = {"point_key": str(i), "status": "ok", **flatten(dict(r))}
        if name is not None:
            row["name"] = str(name)
        rows.append(row)
    df = pd.DataFrame(rows)
    options = [k for k in (*IDENTITY, *(("name",) if named else ())) if k in df.columns]
    config = [c for c in df.columns if c.startswith("config.") and c != "config.seed"]
    varying: list[str] = []
    for k in options:
        # Without a spec, a key that follows from one already chosen (a shadow run's
        # technique, given its mode) tells no run apart.
        if df[k].map(_text).nunique(dropna=False) > 1 and not any(
            follows(df, k, v) for v in varying
        ):
            varying.append(k)
    for c in config:
        if df[c].map(_text).nunique(dropna=False) > 1 and not any(
            follows(df, c, k) for k in varying
        ):
            varying.append(c)
    return ResultSet(frame=df, source=source, option_keys=options, varying_keys=varying)


def _is_result(d: Mapping[str, Any]) -> bool:
    return str(d.get("schema", "")).startswith("vmmu.result/")


def _listed(results: Any) -> list[Mapping[str, Any]]:
    if isinstance(results, Mapping):
        return [results]
    return list(results)


def load(path: str | os.PathLike[str]) -> ResultSet:
    """Reads results from ``path``: a ``.duckdb`` sweep database, a ``.parquet`` export, a
    ``.json`` file or a directory of these."""
    p = Path(path)
    if p.is_dir():
        return _load_dir(p)
    if not p.exists():
        raise ValueError(f"{p}: no such file or directory")
    suffix = p.suffix.lower()
    if suffix == ".json":
        return _load_json(p)
    if suffix == ".parquet":
        return _load_parquet(p)
    return _load_db(p)


def _load_db(p: Path) -> ResultSet:
    with ResultsDB(p) as db:
        df = db.frame()
        sweeps = db.sweeps()
    options: list[str] = []
    orders: dict[str, list[Any]] = {}
    for s in reversed(sweeps):  # the latest sweep's order first
        options += [k for k in s["option_keys"] if k not in options]
        for k, v in s["orders"].items():
            orders.setdefault(k, v)
    options = [k for k in options if k in df.columns]
    varying = [k for k in options if df[k].map(_text).nunique(dropna=False) > 1]
    return ResultSet(
        frame=df,
        source=str(p),
        option_keys=options,
        varying_keys=varying,
        orders=orders,
        sweeps=sweeps,
    )


def _load_parquet(p: Path) -> ResultSet:
    import pandas as pd

    df = pd.read_parquet(p)
    rs = from_results([], source=str(p))
    rs.frame = df
    sweeps_file = p.with_name("sweeps.parquet")
    if sweeps_file.exists():
        sweeps = pd.read_parquet(sweeps_file).to_dict(orient="records")
        keys = list(dict.fromkeys(k for s in sweeps for k in json.loads(s["option_keys"] or "[]")))
        rs.option_keys = [k for k in keys if k in df.columns]
    else:
        rs.option_keys = [k for k in IDENTITY if k in df.columns]
    rs.varying_keys = [k for k in rs.option_keys if df[k].map(_text).nunique(dropna=False) > 1]
    return rs


def _load_json(p: Path) -> ResultSet:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{p}: not a result JSON file: {e}") from None
    return _from_json(data, str(p))


def _from_json(data: Any, source: str) -> ResultSet:
    import pandas as pd

    if (
        isinstance(data, Mapping)
        and data
        and all(isinstance(v, Mapping) and "rows" in v and "setup" in v for v in data.values())
    ):
        # `vmmu repro --json`: {paper: {"setup": {...}, "rows": [...]}}
        tables = {}
        for name, t in data.items():
            df = pd.DataFrame(t["rows"])
            if "row" in df.columns:
                df = df.set_index("row")
            df.attrs.update(t["setup"])
            tables[name] = df
        return ResultSet(frame=pd.DataFrame(), source=source, tables=tables)
    if isinstance(data, Mapping) and _is_result(data):
        return from_results([data], source)
    if (
        isinstance(data, Mapping)
        and data
        and all(isinstance(v, Mapping) and _is_result(v) for v in data.values())
    ):
        return from_results(data, source)
    if (
        isinstance(data, list)
        and data
        and all(isinstance(v, Mapping) and _is_result(v) for v in data)
    ):
        return from_results(data, source)
    raise ValueError(
        f"{source}: not a vmmu result (`vmmu run --json`), a {{mode: result}} map "
        "(`vmmu compare --json`), a list of results, or `vmmu repro --json` tables"
    )


def _load_dir(p: Path) -> ResultSet:
    files = sorted(
        f for f in p.iterdir() if f.suffix.lower() in (".json", ".duckdb") and f.is_file()
    )
    if not files:
        raise ValueError(f"{p}: no .json or .duckdb results in this directory")
    parts = [load(f) for f in files]
    return combine(parts, source=str(p))


def combine(parts: Sequence[ResultSet], source: str = "") -> ResultSet:
    """One :class:`ResultSet` of several (rows appended, point keys made unique)."""
    import pandas as pd

    frames = []
    for i, rs in enumerate(parts):
        if rs.frame.empty:
            continue
        df = rs.frame.copy()
        if len(parts) > 1:
            df["source"] = Path(rs.source).name or str(i)
            df["point_key"] = df["source"] + ":" + df["point_key"].astype(str)
        frames.append(df)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    options = list(dict.fromkeys(k for rs in parts for k in rs.option_keys))
    if len(frames) > 1:
        options = ["source", *options]
    options = [k for k in options if k in df.columns]
    varying = [k for k in options if df[k].map(_text).nunique(dropna=False) > 1]
    orders: dict[str, list[Any]] = {}
    tables: dict[str, Any] = {}
    for rs in parts:
        for k, v in rs.orders.items():
            orders.setdefault(k, v)
        tables.update(rs.tables)
    return ResultSet(
        frame=df,
        source=source,
        option_keys=options,
        varying_keys=varying,
        orders=orders,
        tables=tables,
        sweeps=[s for rs in parts for s in rs.sweeps],
    )


def coerce(results: Any, source: str = "") -> ResultSet:
    """A :class:`ResultSet` of anything :func:`load` or :func:`from_results` takes, or a
    DataFrame of flattened rows."""
    import pandas as pd

    if isinstance(results, ResultSet):
        return results
    if isinstance(results, (str, os.PathLike)):
        return load(results)
    if isinstance(results, pd.DataFrame):
        df = results.copy()
        if "status" not in df.columns:
            df["status"] = "ok"
        rs = ResultSet(frame=df, source=source)
        rs.option_keys = [k for k in IDENTITY if k in df.columns]
        rs.varying_keys = [k for k in rs.option_keys if df[k].map(_text).nunique() > 1]
        return rs
    return from_results(results, source)
