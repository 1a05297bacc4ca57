"""The one number formatter: every number vmmu prints goes through :func:`number`.

It handles what every table shares — a missing value (None, NaN, pandas' NA) as ``–``, numpy
scalars, booleans, infinities, thousands grouped — and leaves the digits a number keeps to a
:class:`Style`, chosen by where the number is shown:

- :data:`TABLE` — the terminal tables of ``vmmu run``, ``compare``, ``sizing``: integers
  whole, other numbers to 3 places;
- :data:`CELL` — the cells of an HTML report: 4 significant digits, whole numbers without a
  point;
- :data:`CLAIM` — a reproduction's values (``vmmu repro``, docs/repro.md): at least 3
  significant digits;
- :func:`places` — a fixed number of places, whole from 1,000 (a claim's criterion band);
- :data:`SI` — counts and rates with an SI prefix (``1.23M``; :func:`human` adds a unit);
- :func:`nbytes` and :func:`mib` — sizes in bytes, with a binary prefix (``1.5 MiB``) or as
  MiB in a column headed so (``1,234.5``).

:func:`pct`, :func:`signed_pct` and :func:`ratio` show a share, a change and a ratio.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DASH = "–"


def missing(v: Any) -> bool:
    """True for a cell without a value: None, NaN, pandas' NA."""
    if v is None:
        return True
    try:
        return bool(v != v) or v is _NA
    except TypeError:  # pandas.NA compares to NA, whose truth is ambiguous
        return True


try:
    from pandas import NA as _NA
except ImportError:  # pragma: no cover - pandas is a dependency
    _NA = None


@dataclass(frozen=True)
class Style:
    """The digits a finite number keeps (``real``) and how a boolean reads."""

    real: Callable[[int | float], str]
    true: str = "True"
    false: str = "False"


def number(v: Any, style: Style | None = None) -> str:
    """``v`` as text in ``style`` (default :data:`TABLE`); a value that is not a number is
    shown as its text."""
    style = style or TABLE
    if missing(v):
        return DASH
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()  # numpy scalars
    if isinstance(v, bool):
        return style.true if v else style.false
    if not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return style.real(v)


def _table(x: int | float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:,.3f}"


def _cell(x: int | float) -> str:
    if isinstance(x, int):
        return f"{x:,}"
    if x.is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


def _claim(x: int | float) -> str:
    a = abs(x)
    if isinstance(x, int) or a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 0.1 or a == 0:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _si(x: int | float) -> str:
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.0f}"


TABLE = Style(_table)
CELL = Style(_cell, "true", "false")
CLAIM = Style(_claim)
SI = Style(_si)


def places(digits: int) -> Style:
    """``digits`` places, whole from 1,000 (``0.05``, ``1,250``)."""
    return Style(lambda x: f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}f}")


def pct(part: float | None, whole: float | None) -> str:
    """``part`` as a percentage of ``whole`` (``12.5%``)."""
    if part is None or not whole:
        return DASH
    return f"{100.0 * part / whole:.1f}%"


def ratio(a: float | None, b: float | None) -> str:
    """``a / b`` to 2 places."""
    if a is None or not b:
        return DASH
    return f"{a / b:.2f}"


def signed_pct(x: float | None) -> str:
    """A fraction as a signed percentage (``+12.5%``)."""
    return DASH if x is None else f"{100.0 * x:+.1f}%"


def human(n: float | None, unit: str = "") -> str:
    """``1234567`` → ``1.23M`` (:data:`SI`); with ``unit``, ``1.23M refs``."""
    text = number(n, SI)
    return f"{text} {unit}" if unit and not missing(n) else text


def _binary(x: int | float) -> str:
    for div, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(x) >= div:
            return f"{x / div:.1f} {unit}"
    return f"{x:.0f} B"


#: Sizes in bytes with a binary prefix, one place (``1.5 MiB``, ``512 B``).
BINARY = Style(_binary)

#: One place, thousands grouped (``1,234.5``).
ONE_PLACE = Style(lambda x: f"{x:,.1f}")


def nbytes(n: float | None) -> str:
    """A size in bytes with a binary prefix (:data:`BINARY`)."""
    return number(n, BINARY)


def mib(n: float | None) -> str:
    """A size in bytes as MiB to one place, for a column that says MiB (``1,234.5``)."""
    return DASH if missing(n) else number(n / (1 << 20), ONE_PLACE)
