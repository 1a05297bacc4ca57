"""Shared fixtures: a click runner for the CLI and a probe for the simulation engine."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from vmmu.cli import cli

#: A workload small enough to run in milliseconds.
TINY = "random:footprint=4M,refs=20K"


@pytest.fixture
def invoke() -> Callable[..., Result]:
    """Runs ``vmmu ARGS...`` in-process; stdout and stderr are kept apart."""

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    return run


@pytest.fixture
def run_json(invoke: Callable[..., Result]) -> Callable[..., dict]:
    """Runs ``vmmu run --json ARGS...``, asserts success and returns the result dict."""

    def run(*args: str) -> dict:
        r = invoke("run", "--json", *args)
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)

    return run
