"""Parsing the values of command-line options shared by several commands."""

from __future__ import annotations

import click


def parse_count(text: str, what: str) -> int:
    """A count such as ``1000``, ``2.5M`` or ``1e6`` (decimal multiples)."""
    t = text.strip().replace("_", "")
    mult = {"K": 1e3, "M": 1e6, "G": 1e9}.get(t[-1:].upper(), 1.0)
    body = t[:-1] if mult != 1.0 else t
    try:
        value = float(body) * mult
    except ValueError:
        raise click.BadParameter(f"{what}: `{text}` is not a count (e.g. 1000, 2.5M)") from None
    if value < 0 or value != int(value):
        raise click.BadParameter(f"{what}: `{text}` is not a whole non-negative count")
    return int(value)
