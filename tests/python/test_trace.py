"""`vmmu trace info`, `vmmu trace convert` and `vmmu run --trace`, on a small lackey trace made
here, and their errors (line numbers, byte offsets)."""

from __future__ import annotations

import json

import pytest

import vmmu
from vmmu import exceptions

LACKEY = """\
==123== Lackey, an example Valgrind tool
I  04020ca1,2
 L 1ffefff8c0,8
 S 1ffefff8c8,8
 M 0402a000,4
I  04020ca3,3
 L 1ffefff000,8
"""


@pytest.fixture
def lackey(tmp_path):
    path = tmp_path / "prog.txt"
    path.write_text(LACKEY)
    return path


def test_trace_info_counts_a_lackey_trace(invoke, lackey):
    r = invoke("trace", "info", "--json", str(lackey))
    assert r.exit_code == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["format"] == "lackey"
    assert info["refs"] == 6
    assert info["refs_by_kind"] == {"fetch": 2, "load": 2, "store": 1, "modify": 1}


def test_convert_to_vtrace_and_back_keeps_every_reference(invoke, lackey, tmp_path):
    vt, back = tmp_path / "prog.vtrace", tmp_path / "back.txt"
    r = invoke("trace", "convert", str(lackey), str(vt))
    assert r.exit_code == 0, r.stderr
    assert vmmu.trace_info(str(vt))["format"] == "vtrace"
    r = invoke("trace", "convert", str(vt), str(back))  # .txt → lackey
    assert r.exit_code == 0, r.stderr
    lines = [ln for ln in LACKEY.splitlines() if not ln.startswith("==")]
    assert [ln for ln in back.read_text().splitlines() if not ln.startswith("#")] == lines


def test_run_a_trace_in_both_modes(invoke, lackey):
    r = invoke("compare", "--json", "--trace", str(lackey))
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["native"]["memory_refs"] == res["nested"]["memory_refs"] == 4
    assert res["native"]["fetches"] == 2


def test_malformed_line_names_file_and_line(invoke, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(LACKEY + " L zz,8\n")
    r = invoke("trace", "info", str(bad))
    assert r.exit_code == 2
    assert f"{bad}:8:" in r.stderr
    with pytest.raises(exceptions.TraceError, match=":8:"):
        vmmu.trace_info(str(bad))


def test_truncated_binary_trace_names_the_byte_offset(invoke, lackey, tmp_path):
    vt = tmp_path / "t.vtrace"
    vmmu.trace_convert(str(lackey), str(vt))
    cut = tmp_path / "cut.vtrace"
    cut.write_bytes(vt.read_bytes()[:60])
    for args in (["trace", "info", str(cut)], ["run", "--trace", str(cut)]):
        r = invoke(*args)
        assert r.exit_code == 2
        assert "byte offset" in r.stderr and str(cut) in r.stderr


def test_unknown_output_format_is_a_usage_error(invoke, lackey, tmp_path):
    r = invoke("trace", "convert", str(lackey), str(tmp_path / "x"), "--to", "champsim")
    assert r.exit_code == 2
    assert "champsim" in r.stderr


def test_trace_check_reports_and_sets_the_exit_status(invoke, lackey):
    r = invoke("trace", "check", "--json", str(lackey))
    assert r.exit_code in (0, 1), r.stderr
    report = json.loads(r.stdout)
    assert report["refs"] == 6
    assert r.exit_code == (0 if report["ok"] else 1)


def test_record_an_unknown_command_is_an_error(invoke, tmp_path):
    r = invoke("record", "-o", str(tmp_path / "x.vtrace"), "--", "no-such-command-vmmu")
    assert r.exit_code == 2
    assert "no-such-command-vmmu" in r.stderr
