"""Shared fixtures: a click runner for the CLI and a probe for the simulation engine; the rule
for tests that need a tool beyond the package (:func:`require_tool`)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def in_ci() -> bool:
    """Whether the tests run in CI (``CI=true``, as `.ci/run` and CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def install_note(name: str) -> str:
    """What `make test` logged when it installed tool ``name`` (the last lines of
    ``.venv/NAME-install.log``), or that it did not run."""
    log = Path(sys.prefix) / f"{name}-install.log"
    if log.exists():
        tail = " ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        return f"{log}: {tail}"
    return "no install log (run the tests with `make test`, which installs it)"


def require_tool(found: bool, what: str, note: str, skip_env: str | None = None) -> None:
    """Lets a test that needs a tool go on when ``found``; otherwise the test does not pass.

    Under ``CI=true`` it fails: CI installs every tool (`make test`), so a missing one is a
    broken install. Elsewhere it is skipped, naming ``what`` is missing and ``note`` (how to
    get it) — except for tools whose tests are never skipped unasked (``skip_env``, e.g.
    ``VMMU_SKIP_VALGRIND``): those fail unless that variable gives a reason to skip.
    """
    if found:
        return
    if in_ci():
        reason = f" ({skip_env} is not honoured under CI)" if skip_env else ""
        pytest.fail(f"{what}: CI=true, where `make test` installs it{reason}; {note}")
    if skip_env is None:
        pytest.skip(f"{what}: {note}")
    reason = os.environ.get(skip_env, "").strip()
    if reason:
        pytest.skip(f"{what} ({skip_env}: {reason})")
    pytest.fail(f"{what}: {note}; set {skip_env}=REASON to skip these tests instead")


def _require_recorder(ok: bool, what: str) -> None:
    """Fails (or, outside CI with VMMU_SKIP_VALGRIND set, skips) when ``what`` is missing."""
    require_tool(ok, what, "`make test` installs it", skip_env="VMMU_SKIP_VALGRIND")


@pytest.fixture(scope="session")
def recording_tools(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Valgrind, gcc and the vg-memtrace tool, which ``make test`` installs and builds: a
    missing one fails the test with what to install (``VMMU_SKIP_VALGRIND=REASON`` skips it
    instead)."""
    _require_recorder(shutil.which("valgrind") is not None, "valgrind is not installed")
    _require_recorder(shutil.which("gcc") is not None, "gcc is not installed")
    from vmmu.record import record

    probe = tmp_path_factory.mktemp("probe") / "true.vtrace"
    try:
        record(["/bin/true"], str(probe), False, False, False, False)
    except Exception as e:
        _require_recorder("make -C tools/vg-memtrace" not in str(e), str(e))


# ---------------------------------------------------------------------------------------------
# The recorded suite at its small scale

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def recorder() -> None:
    """Valgrind and the vg-memtrace tool, which every suite recording needs."""
    require_tool(
        shutil.which("valgrind") is not None,
        "valgrind is not installed",
        "`make test` installs it when run as root",
        skip_env="VMMU_SKIP_VALGRIND",
    )
    tool = ROOT / "tools" / "vg-memtrace" / "build" / "lib"
    require_tool(
        tool.is_dir() or bool(os.environ.get("VMMU_VALGRIND_LIB")),
        "the vg-memtrace tool is not built",
        "make -C tools/vg-memtrace",
        skip_env="VMMU_SKIP_VALGRIND",
    )


@pytest.fixture(scope="session")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every paper's quick report (``vmmu repro NAME --quick``), computed once per session,
    with an empty suite cache: every row of a recorded program says it is not recorded
    (test_repro_suite.py runs them on the small recordings)."""
    from vmmu import repro

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VMMU_SUITE_CACHE", str(tmp_path_factory.mktemp("empty-suite-cache")))
        return {name: repro.reproduce(name, quick=True) for name in repro.PAPERS}


@pytest.fixture(scope="session")
def suite_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache of the suite's small recordings for the whole session: test_suite.py records
    redis, gcc and swim into it and the reproductions' tests read them (recording any still
    missing), so each entry is recorded once."""
    return tmp_path_factory.mktemp("suite-cache")


def suite_entry(name: str) -> Any:
    """Suite entry ``name``, once its Debian packages are installed (else the test does not
    pass: :func:`require_tool`)."""
    from vmmu.suite import cache, entries

    (entry,) = entries.by_name([name])
    versions = cache.package_versions(entry)
    missing = [p for p, v in versions["packages"].items() if v is None]
    missing += [p for p, v in versions["programs"].items() if v is None]
    require_tool(
        not missing,
        f"{name} needs {', '.join(missing)}",
        f"apt-get install {' '.join(entry.packages)} (`make test` does when run as root)",
    )
    return entry
