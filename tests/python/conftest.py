"""Shared fixtures: a click runner for the CLI and a probe for the simulation engine."""

from __future__ import annotations

import json
import os
import shutil
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


def require_tool(ok: bool, what: str) -> None:
    """Fails (or, with VMMU_SKIP_VALGRIND set, skips) when ``what`` is missing."""
    if ok:
        return
    reason = os.environ.get("VMMU_SKIP_VALGRIND", "").strip()
    if reason:
        pytest.skip(f"{what} (VMMU_SKIP_VALGRIND: {reason})")
    pytest.fail(
        f"{what}: `make test` installs it; set VMMU_SKIP_VALGRIND=REASON to skip the "
        "recording tests instead"
    )


@pytest.fixture(scope="session")
def recording_tools(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Valgrind, gcc and the vg-memtrace tool, which ``make test`` installs and builds: a
    missing one fails the test with what to install (``VMMU_SKIP_VALGRIND=REASON`` skips it
    instead)."""
    require_tool(shutil.which("valgrind") is not None, "valgrind is not installed")
    require_tool(shutil.which("gcc") is not None, "gcc is not installed")
    from vmmu.record import record

    probe = tmp_path_factory.mktemp("probe") / "true.vtrace"
    try:
        record(["/bin/true"], str(probe), False, False, False, False)
    except Exception as e:
        require_tool("make -C tools/vg-memtrace" not in str(e), str(e))
