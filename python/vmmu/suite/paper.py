"""Seed 002's Table 1 (Bhargava et al., ASPLOS 2008): TLB misses per 100K instructions of each
workload class, read from the shipped copy ``vmmu/reference/bhargava08_table1.csv``."""

from __future__ import annotations

import csv
import functools
from importlib import resources


@functools.cache
def _table1() -> dict[str, float]:
    path = resources.files("vmmu").joinpath("reference", "bhargava08_table1.csv")
    with path.open("r", encoding="utf-8") as f:
        return {row["suite"]: float(row["tlb_misses_per_100k_instr"]) for row in csv.DictReader(f)}


def class_figure(cls: str) -> float:
    """Table 1's TLB misses per 100K instructions for the class ``cls`` (e.g. 70.4 for
    ``IntCpu``)."""
    return _table1()[cls]
