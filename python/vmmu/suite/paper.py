"""Seed 002's Table 1 (Bhargava et al., ASPLOS 2008): TLB misses per 100K instructions of each
workload class, from the shipped copy ``vmmu/reference/bhargava08_table1.csv``
(:mod:`vmmu.published`)."""

from __future__ import annotations

from vmmu import published


def class_figure(cls: str) -> float:
    """Table 1's TLB misses per 100K instructions for the class ``cls`` (e.g. 70.4 for
    ``IntCpu``)."""
    return published.cell("bhargava08_table1", "suite", cls, "tlb_misses_per_100k_instr")
