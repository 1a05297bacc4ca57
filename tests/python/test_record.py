"""``vmmu record`` and ``vmmu trace check`` from Python: a small C program recorded and
checked. Skipped when the bindings, Valgrind, gcc or the tool are missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from vmmu import _core

pytestmark = pytest.mark.skipif(
    not hasattr(_core, "record") or not hasattr(_core, "trace_check"),
    reason="the bindings do not expose record / trace_check yet",
)

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
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (sudo apt-get install valgrind)")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    d = tmp_path_factory.mktemp("rec")
    (d / "p.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O1", "-o", str(d / "p"), str(d / "p.c")], check=True)
    return d / "p"


def test_record_then_check_finds_every_reference_inside_a_mapping(
    program: Path, tmp_path: Path
) -> None:
    from vmmu.record import check, check_text, record

    out = tmp_path / "p.vtrace"
    try:
        s = record([str(program)], str(out), False, False, True, False)
    except Exception as e:  # the tool is not built here
        if "make -C tools/vg-memtrace" in str(e):
            pytest.skip(str(e))
        raise
    assert s["exit_code"] == 0
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
