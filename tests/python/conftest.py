"""Shared fixtures: a click runner for the CLI and a probe for the simulation engine."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

import vmmu
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


_engine_state: str | None = None


def _probe_engine() -> str | None:
    """``None`` when the engine runs a tiny workload; else why not (it is still a stub)."""
    global _engine_state
    if _engine_state is None:
        try:
            vmmu.run(workload="stream:footprint=64K,refs=16")
            _engine_state = ""
        except BaseException as e:  # the stub panics (pyo3 PanicException is a BaseException)
            if "not yet implemented" not in str(e):
                raise
            _engine_state = str(e)
    return _engine_state or None


@pytest.fixture(autouse=True)
def _needs_engine(request: pytest.FixtureRequest) -> None:
    """Tests marked ``engine`` need ``sim::run``: while the core still has it as a stub they
    are expected failures; once it exists they run (and fail loudly) like any other test."""
    if request.node.get_closest_marker("engine") is not None:
        why = _probe_engine()
        if why is not None:
            pytest.xfail(f"the simulation engine is not written yet: {why}")
