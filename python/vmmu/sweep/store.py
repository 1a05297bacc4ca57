"""The results database of a sweep: one DuckDB file, written by one process (docs/sweeps.md).

Tables:

- ``vmmu_meta(key, value)``: ``schema`` = :data:`SCHEMA` marks a vmmu results database;
- ``results``: one row per point — ``point_key``, ``status`` (``ok`` / ``failed``), ``error``,
  ``vmmu_version``, ``wall_seconds``, a column per option of the point (``mode``,
  ``set.machine.pwc.entries``, …) and the whole result flattened to dotted columns
  (``cycles``, ``tlb.l2.misses``, ``config.machine.pwc.entries``, ``walk_refs_by_step.G,gL4``).
  Columns are added as results bring new keys, and widened (integer → double → text) when a
  value needs it; lists are stored as JSON text;
- ``sweeps``: one row per ``vmmu sweep`` run: when, the spec's text, its option and grid keys.

Each point is written in one transaction, committed before the next: a process killed at any
moment leaves every committed row whole and no partial one. DuckDB locks the file for the
process that opened it for writing, so a second sweep on the same file fails at once
(:class:`ResultsDBError` naming the file and the process that holds it).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

#: The layout of the tables; a database with another is rejected, never altered.
SCHEMA = "vmmu.sweep/1"

#: Columns every row has, before its options and its result.
META_COLUMNS = ("point_key", "status", "error", "vmmu_version", "wall_seconds")

#: Column types, narrowest first; a column holding two of them takes the wider (numbers widen
#: to DOUBLE, anything else to VARCHAR).
_NUMERIC = ("BOOLEAN", "BIGINT", "HUGEINT", "DOUBLE")


class ResultsDBError(ValueError):
    """A results database that cannot be used; the message names the file."""


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A result as dotted keys; lists become JSON text, empty tables and nulls are left out."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value)
        elif value is not None:
            out[name] = value
    return out


def row_of(
    key: str,
    options: Mapping[str, Any],
    outcome: Mapping[str, Any],
) -> dict[str, Any]:
    """The ``results`` row of a point: meta columns, the result flattened, then the options.

    An option and a result key of the same name (``mode``, ``machine``, ``workload``) say the
    same thing; the option's value, as the spec wrote it, is kept. A result key that would
    take a meta column's name is stored as ``result.<key>``.
    """
    result = outcome.get("result") or {}
    flat = {(f"result.{k}" if k in META_COLUMNS else k): v for k, v in flatten(result).items()}
    opts = {k: (json.dumps(v) if isinstance(v, (list, tuple)) else v) for k, v in options.items()}
    return {
        "point_key": key,
        "status": outcome["status"],
        "error": outcome.get("error"),
        "vmmu_version": outcome.get("vmmu_version"),
        "wall_seconds": outcome.get("wall_seconds"),
        **opts,
        **{k: v for k, v in flat.items() if k not in opts},
    }


def _sql_type(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "BIGINT" if -(2**63) <= value < 2**63 else "HUGEINT"
    if isinstance(value, float):
        return "DOUBLE"
    return "VARCHAR"


def _wider(have: str, need: str) -> str:
    if have == need:
        return have
    if have in _NUMERIC and need in _NUMERIC:
        return max(have, need, key=_NUMERIC.index)
    return "VARCHAR"


def _sql_value(value: Any, sql_type: str) -> Any:
    if sql_type == "VARCHAR" and value is not None and not isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


_LOCK = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    import duckdb

    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as e:
        text = str(e)
        lock = _LOCK.search(text)
        if lock or "Could not set lock" in text:
            holder = f" by {lock.group(1)} (PID {lock.group(2)})" if lock else ""
            raise ResultsDBError(
                f"{path} is in use{holder}: another sweep is writing it; wait for it to "
                "finish or write to another file"
            ) from None
        if "not a valid DuckDB database" in text:
            raise ResultsDBError(
                f"{path} is not a vmmu results database (not a DuckDB file); it was left "
                "untouched — choose another output file"
            ) from None
        raise ResultsDBError(
            f"{path}: DuckDB {duckdb.__version__} cannot open it: {text}"
        ) from None


def is_interrupt(e: BaseException) -> bool:
    """True for DuckDB's error for a query stopped by Ctrl-C (it takes the KeyboardInterrupt)."""
    import duckdb

    if isinstance(e, getattr(duckdb, "InterruptException", ())):
        return True
    return isinstance(e, (RuntimeError, duckdb.Error)) and "interrupted" in str(e).lower()


def _check_schema(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """True when ``con`` is a vmmu results database of :data:`SCHEMA`, False when it holds no
    table at all (a new database); raises for anything else."""
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if not tables:
        return False
    if "vmmu_meta" not in tables:
        raise ResultsDBError(
            f"{path} is a DuckDB database but not a vmmu results database (it has tables "
            f"{', '.join(sorted(tables))} and no vmmu_meta); it was left untouched — choose "
            "another output file"
        )
    row = con.execute("SELECT value FROM vmmu_meta WHERE key = 'schema'").fetchone()
    found = row[0] if row else None
    if found != SCHEMA:
        from vmmu import __version__

        raise ResultsDBError(
            f"{path}: results schema `{found}` is not supported by vmmu {__version__}, which "
            f"reads and writes `{SCHEMA}`; use the vmmu that wrote it, or another output file"
        )
    return True


class ResultsDB:
    """A results database, open for reading or (one process at a time) for writing."""

    def __init__(self, path: str | os.PathLike[str], write: bool = False) -> None:
        self.path = Path(path)
        self.write = write
        if self.path.is_dir():
            raise ResultsDBError(f"{self.path} is a directory, not a results database")
        exists = self.path.exists()
        if not exists and not write:
            raise ResultsDBError(f"{self.path}: no such results database")
        if exists:
            # Inspect read-only first, so a file that is not ours is never opened for writing.
            con = _connect(self.path, read_only=True)
            try:
                _check_schema(con, self.path)
            finally:
                con.close()
        self.con = _connect(self.path, read_only=not write)
        try:
            if not _check_schema(self.con, self.path):
                self._create()
            self._types = self._column_types()
        except BaseException:
            self.con.close()
            raise

    def __enter__(self) -> ResultsDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    def _create(self) -> None:
        from vmmu import __version__

        con = self.con
        with self._transaction():
            self._create_tables(con, __version__)

    @staticmethod
    def _create_tables(con: duckdb.DuckDBPyConnection, version: str) -> None:
        con.execute("CREATE TABLE vmmu_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        con.execute(
            "INSERT INTO vmmu_meta VALUES ('schema', ?), ('created_by', ?)",
            [SCHEMA, f"vmmu {version}"],
        )
        con.execute(
            "CREATE TABLE results (point_key VARCHAR PRIMARY KEY, status VARCHAR NOT NULL, "
            "error VARCHAR, vmmu_version VARCHAR, wall_seconds DOUBLE)"
        )
        con.execute(
            "CREATE TABLE sweeps (id INTEGER PRIMARY KEY, started_at TIMESTAMP, "
            "spec VARCHAR, name VARCHAR, spec_text VARCHAR, option_keys VARCHAR, "
            "varying_keys VARCHAR, orders VARCHAR, points INTEGER, vmmu_version VARCHAR)"
        )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction: committed whole, or rolled back whole. DuckDB turns a Ctrl-C that
        arrives during a statement into its own error; it leaves here as KeyboardInterrupt."""
        import duckdb

        self.con.execute("BEGIN")
        try:
            yield
            self.con.execute("COMMIT")
        except BaseException as e:
            with suppress(duckdb.Error, RuntimeError):
                self.con.execute("ROLLBACK")
            with suppress(duckdb.Error, RuntimeError):
                self._types = self._column_types()
            if is_interrupt(e):
                raise KeyboardInterrupt from None
            raise

    def _column_types(self) -> dict[str, str]:
        rows = self.con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'results'"
        ).fetchall()
        return {name: kind for name, kind in rows}

    # -- reading ---------------------------------------------------------------------------

    def statuses(self) -> dict[str, str]:
        """``{point_key: status}`` of every stored point."""
        return dict(self.con.execute("SELECT point_key, status FROM results").fetchall())

    def frame(self) -> pd.DataFrame:
        """The ``results`` table, ordered by point key."""
        return self.con.execute("SELECT * FROM results ORDER BY point_key").df()

    def sweeps(self) -> list[dict[str, Any]]:
        """The ``sweeps`` rows, oldest first, JSON columns decoded."""
        cur = self.con.execute("SELECT * FROM sweeps ORDER BY id")
        names = [d[0] for d in cur.description]
        out = []
        for row in cur.fetchall():
            rec = dict(zip(names, row, strict=False))
            for k in ("option_keys", "varying_keys", "orders"):
                rec[k] = json.loads(rec[k]) if rec[k] else ([] if k != "orders" else {})
            out.append(rec)
        return out

    # -- writing ---------------------------------------------------------------------------

    def begin_sweep(self, spec: Any) -> int:
        """Records the start of a sweep of ``spec`` (a :class:`~vmmu.sweep.spec.Spec`)."""
        from vmmu import __version__

        con = self.con
        with self._transaction():
            (n,) = con.execute("SELECT coalesce(max(id), 0) + 1 FROM sweeps").fetchone()
            con.execute(
                "INSERT INTO sweeps VALUES (?, current_timestamp, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    n,
                    spec.source,
                    spec.name,
                    spec.text,
                    json.dumps(spec.option_keys),
                    json.dumps(spec.varying_keys),
                    json.dumps(spec.orders, default=str),
                    len(spec.points),
                    __version__,
                ],
            )
        return int(n)

    def record(self, row: Mapping[str, Any]) -> None:
        """Writes one point's row (replacing any row of the same key) in one transaction."""
        con = self.con
        with self._transaction():
            types = self._ensure_columns(row)
            names = list(row)
            con.execute("DELETE FROM results WHERE point_key = ?", [row["point_key"]])
            con.execute(
                f"INSERT INTO results ({', '.join(map(_quote, names))}) "
                f"VALUES ({', '.join('?' * len(names))})",
                [_sql_value(row[n], types[n]) for n in names],
            )

    def restamp(self, key: str, options: Mapping[str, Any]) -> bool:
        """Gives a stored point the option columns of the current spec (a point reused under
        another spelling, or from a spec that did not name an option it now varies); returns
        whether anything changed."""
        cols = [k for k in options if k in self._types]
        current = {}
        if cols:
            sel = ", ".join(_quote(c) for c in cols)
            got = self.con.execute(
                f"SELECT {sel} FROM results WHERE point_key = ?", [key]
            ).fetchone()
            current = dict(zip(cols, got or (), strict=False))
        changed = {
            k: v for k, v in options.items() if k not in current or _norm(current[k]) != _norm(v)
        }
        if not changed:
            return False
        with self._transaction():
            types = self._ensure_columns(changed)
            sets = ", ".join(f"{_quote(k)} = ?" for k in changed)
            self.con.execute(
                f"UPDATE results SET {sets} WHERE point_key = ?",
                [*(_sql_value(v, types[k]) for k, v in changed.items()), key],
            )
        return True

    def _ensure_columns(self, row: Mapping[str, Any]) -> dict[str, str]:
        """Adds or widens the columns ``row`` needs (inside the caller's transaction)."""
        for name, value in row.items():
            if value is None:
                continue
            need = _sql_type(value)
            have = self._types.get(name)
            if have is None:
                self.con.execute(f"ALTER TABLE results ADD COLUMN {_quote(name)} {need}")
                self._types[name] = need
            elif (wide := _wider(have, need)) != have:
                self.con.execute(
                    f"ALTER TABLE results ALTER COLUMN {_quote(name)} SET DATA TYPE {wide}"
                )
                self._types[name] = wide
        return {n: self._types.get(n, "VARCHAR") for n in row}

    def export_parquet(self, directory: str | os.PathLike[str]) -> list[Path]:
        """Writes ``results.parquet`` and ``sweeps.parquet`` into ``directory``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for table in ("results", "sweeps"):
            dest = out / f"{table}.parquet"
            self.con.execute(
                f"COPY (SELECT * FROM {table} ORDER BY 1) TO '{_sql_path(dest)}' (FORMAT parquet)"
            )
            written.append(dest)
        return written


def _norm(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return json.dumps(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _sql_path(p: Path) -> str:
    return str(p).replace("'", "''")
