"""The tests that need a tool beyond the package (headless Chromium, Ray, Valgrind for
``vmmu record`` and the suite's recordings): under ``CI=true`` a missing tool fails them;
elsewhere they are skipped, naming what is missing.

Each case runs the test in a child pytest with the tool hidden (an empty ``PATH`` for a
program, a package on ``PYTHONPATH`` that refuses to import for Ray) and reads the outcome.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent

#: (test node, what hides the tool, the reason the skip names).
CASES = {
    "chromium": (
        "test_report.py::test_report_renders_in_headless_chromium",
        "path",
        "headless Chromium is not installed",
    ),
    "ray": (
        "test_sweep.py::test_ray_backend_on_a_loopback_head_gives_the_local_rows",
        "module",
        "Ray is not installed",
    ),
    "valgrind": (
        "test_record.py::test_record_then_check_finds_every_reference_inside_a_mapping",
        "path",
        "valgrind is not installed",
    ),
    "suite": (
        "test_suite.py::test_a_small_entry_records_measures_and_replays[redis]",
        "path",
        "valgrind is not installed",
    ),
}

#: The cases whose tool is Valgrind: outside CI, VMMU_SKIP_VALGRIND=REASON skips them.
VALGRIND = ("valgrind", "suite")


def _child(name: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    node, hide, _ = CASES[name]
    e = {k: v for k, v in os.environ.items() if k not in ("CI", "VMMU_SKIP_VALGRIND")}
    e.update(env)
    if hide == "path":
        e["PATH"] = str(tmp_path / "empty")
    else:
        fake = tmp_path / "hidden" / name
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text(f"raise ImportError('{name} hidden by test_tools')\n")
        e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(fake.parent), e.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(HERE / node)],
        capture_output=True,
        text=True,
        env=e,
        cwd=tmp_path,
        timeout=600,
    )


@pytest.mark.parametrize("name", list(CASES))
def test_a_missing_tool_fails_under_ci(name, tmp_path):
    env = {"CI": "true"}
    if name in VALGRIND:
        env["VMMU_SKIP_VALGRIND"] = "a reason CI must not accept"
    r = _child(name, tmp_path, **env)
    # A check in a fixture fails as an error, one in the test body as a failure.
    assert r.returncode == 1 and ("1 failed" in r.stdout or "1 error" in r.stdout), r.stdout[-2000:]
    assert CASES[name][2] in r.stdout


@pytest.mark.parametrize("name", list(CASES))
def test_a_missing_tool_is_skipped_naming_why_outside_ci(name, tmp_path):
    env = {"VMMU_SKIP_VALGRIND": "no valgrind here"} if name in VALGRIND else {}
    r = _child(name, tmp_path, **env)
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout[-2000:]
    assert CASES[name][2] in r.stdout


def _shards_module():
    import importlib.util

    path = HERE.parents[1] / "tools" / "test" / "pytest_shards.py"
    spec = importlib.util.spec_from_file_location("pytest_shards", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_two_test_processes_share_every_test_file_once() -> None:
    shards = _shards_module()
    first, second = shards.shards(HERE)
    assert [p.name for p in first] == list(shards.RECORDING)
    names = [p.name for p in first + second]
    assert sorted(names) == sorted(p.name for p in HERE.glob("test_*.py"))
    assert len(set(names)) == len(names)


def test_a_missing_recording_test_file_is_named(tmp_path: Path) -> None:
    shards = _shards_module()
    (tmp_path / "test_a.py").write_text("")
    (tmp_path / "test_suite.py").write_text("")
    with pytest.raises(SystemExit, match=re.escape("test_repro_suite.py")):
        shards.shards(tmp_path)
    with pytest.raises(SystemExit, match=re.escape("no test_*.py files")):
        shards.shards(tmp_path / "empty")


def test_a_shard_without_selected_tests_passes_unless_both_have_none() -> None:
    combined = _shards_module().combined
    assert combined(0, 0) == 0
    assert combined(5, 0) == 0 and combined(0, 5) == 0
    assert combined(5, 5) == 5
    assert combined(1, 0) == 1 and combined(0, 2) == 2 and combined(5, 1) == 1
