"""The one number formatter (vmmu._format.number): what every style shares, and the digits
each keeps."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from vmmu._format import BINARY, CELL, CLAIM, DASH, SI, TABLE, human, mib, nbytes, number, places

STYLES = [TABLE, CELL, CLAIM, SI, BINARY, places(2)]


@pytest.mark.parametrize("style", STYLES)
def test_missing_values_are_a_dash_in_every_style(style):
    for v in (None, math.nan, pd.NA, np.float64("nan")):
        assert number(v, style) == DASH


@pytest.mark.parametrize("style", STYLES)
def test_numpy_scalars_read_as_python_numbers(style):
    assert number(np.int64(1234), style) == number(1234, style)
    assert number(np.float64(0.5), style) == number(0.5, style)


def test_text_is_shown_as_it_is_and_infinities_as_symbols():
    assert number("2d+nt") == "2d+nt"
    assert number(math.inf, CLAIM) == "∞"
    assert number(-math.inf, TABLE) == "−∞"


@pytest.mark.parametrize(
    ("style", "values", "texts"),
    [
        (TABLE, [1234567, 1234.5678, 0.5, True], ["1,234,567", "1,234.568", "0.500", "True"]),
        (
            CELL,
            [1234567, 12.0, 3.14159, 123456.7, False],
            ["1,234,567", "12", "3.142", "123,457", "false"],
        ),
        (
            CLAIM,
            [1234567, 123.4, 12.34, 0.5, 0.01234, 0.0],
            ["1,234,567", "123", "12.3", "0.50", "0.0123", "0.00"],
        ),
        (places(2), [0.045, 12.0, 1234.5], ["0.04", "12.00", "1,234"]),
        (SI, [999, 1234, 2.5e6, 3e9], ["999", "1.23k", "2.50M", "3.00G"]),
    ],
)
def test_each_style_keeps_its_digits(style, values, texts):
    assert [number(v, style) for v in values] == texts


def test_human_is_the_si_style():
    assert human(1234567) == "1.23M"


def test_a_unit_follows_a_number_but_not_a_dash():
    assert human(2.5e6, "refs") == "2.50M refs"
    assert human(None, "refs") == DASH


def test_sizes_in_bytes_take_a_binary_prefix_or_read_as_mib():
    assert [nbytes(n) for n in (512, 1536, 3 << 20, 1 << 50)] == [
        "512 B",
        "1.5 KiB",
        "3.0 MiB",
        "1048576.0 GiB",
    ]
    assert [mib(n) for n in (None, 0, 3 << 19, 1234 << 20)] == [DASH, "0.0", "1.5", "1,234.0"]
