"""``vmmu record`` and ``vmmu trace check`` from Python: a small C program recorded and
checked, and a shell whose own exec is followed while its forked child is reported.

They need Valgrind, gcc and the vg-memtrace tool, which ``make test`` installs and builds. A
missing one fails the test with what to install; outside CI, ``VMMU_SKIP_VALGRIND=REASON`` skips
it with the reason instead (under ``CI=true`` it still fails: conftest.require_tool)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require_tool


def _require(ok: bool, what: str) -> None:
    """Fails (or, outside CI with VMMU_SKIP_VALGRIND set, skips) when ``what`` is missing."""
    require_tool(ok, what, "`make test` installs it", skip_env="VMMU_SKIP_VALGRIND")


@pytest.fixture(scope="module")
def recording_tools(tmp_path_factory: pytest.TempPathFactory) -> None:
    _require(shutil.which("valgrind") is not None, "valgrind is not installed")
    _require(shutil.which("gcc") is not None, "gcc is not installed")
    from vmmu.record import record

    probe = tmp_path_factory.mktemp("probe") / "true.vtrace"
    try:
        record(["/bin/true"], str(probe), False, False, False, False)
    except Exception as e:
        _require("make -C tools/vg-memtrace" not in str(e), str(e))


PROGRAM = r"""
#include <sys/mman.h>
volatile long arr[1000];
int main(void) {
    for (long i = 0; i < 1000; i++) arr[i] = i;
    char *p = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p[0] = 1;
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory, recording_tools: None) -> Path:
    d = tmp_path_factory.mktemp("rec")
    (d / "p.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O1", "-o", str(d / "p"), str(d / "p.c")], check=True)
    return d / "p"


def test_record_then_check_finds_every_reference_inside_a_mapping(
    program: Path, tmp_path: Path
) -> None:
    from vmmu.record import check, check_text, record

    out = tmp_path / "p.vtrace"
    s = record([str(program)], str(out), False, False, True, False)
    assert s["exit_code"] == 0
    assert s["warnings"] == []
    assert not s["truncated"]
    assert s["refs"] > 1000
    assert s["stores"] >= 1000
    r = check(str(out))
    assert r["ok"], check_text(r)
    assert r["outside"] == 0
    assert "OK" in check_text(r)


def test_an_unknown_command_is_a_clear_error(tmp_path: Path) -> None:
    from vmmu.exceptions import VmmuError
    from vmmu.record import record

    with pytest.raises(VmmuError, match="command not found"):
        record(["no-such-command-vmmu"], str(tmp_path / "x.vtrace"), False, False, False, False)


def test_default_output_is_named_after_the_command() -> None:
    from vmmu.record import default_output

    assert default_output(["/usr/bin/gzip", "-c", "x"]) == "gzip.vtrace"


def test_record_follows_the_commands_exec_and_warns_of_a_child_it_left_out(
    invoke, recording_tools: None, tmp_path: Path
) -> None:
    # The shell forks for the first /bin/true (not followed: a warning) and execs the second
    # (followed: the same process goes on).
    out = tmp_path / "sh.vtrace"
    r = invoke(
        "record", "--json", "-o", str(out), "--", "/bin/sh", "-c", "/bin/true; exec /bin/true"
    )
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert (s["processes"], s["execs"], s["children_not_followed"]) == (1, 1, 1)
    assert s["exes"][-1] == "/bin/true"
    assert not s["truncated"]
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 1, r.stderr
    assert warnings[0].startswith("warning: pid ")
    assert "`/bin/sh`" in warnings[0] and "--follow-children" in warnings[0]


def test_record_tracks_load_dependences_unless_told_not_to(
    invoke, program: Path, tmp_path: Path
) -> None:
    # The dynamic loader and libc chase pointers: a recording has dependent references, and
    # with --no-deps none, the trace then saying its dependences are unknown.
    runs = {}
    for flag in ([], ["--no-deps"]):
        out = tmp_path / f"p{len(flag)}.vtrace"
        r = invoke("record", "--json", *flag, "-o", str(out), "--", str(program))
        assert r.exit_code == 0, r.stderr
        runs[bool(flag)] = json.loads(r.stdout)
        info = invoke("trace", "info", "--json", str(out))
        assert info.exit_code == 0, info.stderr
        assert json.loads(info.stdout)["meta"]["dependences"] is not bool(flag)
    assert runs[False]["dependences"] and runs[False]["dependent_refs"] > 1000
    assert not runs[True]["dependences"] and runs[True]["dependent_refs"] == 0
    assert runs[True]["loads"] == runs[False]["loads"]
