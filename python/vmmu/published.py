"""The papers' published numbers, read from the CSV files shipped in ``vmmu/reference/``.

``vmmu/reference/*.csv`` are copies of the project's ``shared/reference/`` tables;
``vmmu/reference/transcribed/*.csv`` add the findings the papers state in their text (each row
quotes its words and names its section). Every paper value a reproduction prints comes from
one of these files, so a claim's number can be traced to the page it was copied from. The
reproductions (:mod:`vmmu.repro`) and the recorded suite's class figures (:mod:`vmmu.suite`)
read them here.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

# A minus sign counts only where it cannot be a range dash ("3.9-4.6", "5%-28%").
_NUMBER = re.compile(r"(?<![\d.%)])-?\d+(?:\.\d+)?")


@functools.cache
def table(name: str) -> pd.DataFrame:
    """A shipped CSV by name: ``"kloster07_aim9_memory"`` or ``"transcribed/bhargava08_text"``."""
    import pandas as pd

    path = resources.files("vmmu").joinpath("reference", *f"{name}.csv".split("/"))
    with path.open("r", encoding="utf-8") as f:
        return pd.read_csv(f)


def claim(name: str, text: str) -> str:
    """The ``value`` of the row of ``name`` whose ``claim`` column is ``text``."""
    df = table(name)
    rows = df.loc[df["claim"] == text, "value"]
    if rows.empty:
        raise KeyError(f"{name}.csv has no claim `{text}`")
    return str(rows.iloc[0])


def cell(name: str, key_column: str, key: str, column: str) -> float:
    """One number of a table: the ``column`` of the row whose ``key_column`` is ``key``."""
    df = table(name)
    rows = df.loc[df[key_column] == key, column]
    if rows.empty:
        raise KeyError(f"{name}.csv has no row {key_column} = `{key}`")
    return float(rows.iloc[0])


def printed(name: str, key_column: str, key: str, column: str) -> str:
    """A table cell as printed in the CSV (its digits carry the paper's precision)."""
    df = table(name).astype(str)
    rows = df.loc[df[key_column] == key, column]
    if rows.empty:
        raise KeyError(f"{name}.csv has no row {key_column} = `{key}`")
    return str(rows.iloc[0])


def numbers(text: str) -> list[float]:
    """Every number in a claim's text, in order (``"3.9-4.6"`` → ``[3.9, 4.6]``)."""
    return [float(m) for m in _NUMBER.findall(text)]


def half_unit(text: str) -> float:
    """Half a unit in the last printed digit of a number: ``"3.2"`` → 0.05, ``"18"`` → 0.5."""
    m = _NUMBER.search(text)
    if m is None:
        raise ValueError(f"no number in `{text}`")
    digits = m.group().partition(".")[2]
    return 0.5 * 10.0 ** -len(digits)
