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


def test_an_unknown_to_is_a_usage_error_naming_it(invoke, lackey, tmp_path):
    r = invoke("trace", "convert", str(lackey), str(tmp_path / "x"), "--to", "csv")
    assert r.exit_code == 2
    assert "'csv' is not one of 'vtrace', 'lackey', 'champsim'" in r.stderr
    assert not (tmp_path / "x").exists()


def test_a_to_that_disagrees_with_the_extension_names_both(invoke, lackey, tmp_path):
    dst = tmp_path / "x.vtrace"
    r = invoke("trace", "convert", str(lackey), str(dst), "--to", "champsim")
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: {dst}: the output format is `champsim` but the name")
    assert "`.vtrace`, which is vtrace" in r.stderr
    assert not dst.exists()


def test_an_extension_that_says_no_format_needs_to(invoke, lackey, tmp_path):
    dst = tmp_path / "x.bin"
    r = invoke("trace", "convert", str(lackey), str(dst))
    assert r.exit_code == 2
    assert f"{dst}: cannot tell the output format" in r.stderr
    assert not dst.exists()
    r = invoke("trace", "convert", str(lackey), str(dst), "--to", "lackey")
    assert r.exit_code == 0, r.stderr
    assert vmmu.trace_info(str(dst))["format"] == "lackey"


def test_convert_to_champsim_reports_what_the_file_holds(invoke, tmp_path):
    src = tmp_path / "os.txt"
    src.write_text("@proc 1\n@mmap 0x7f0000000000 0x1000 rw- anon\n" + LACKEY + "@exit 1\n")
    dst = tmp_path / "prog.champsimtrace.xz"
    r = invoke("trace", "convert", str(src), str(dst))
    assert r.exit_code == 0, r.stderr
    assert "(champsim)" in r.stdout and "dropped_events" in r.stdout
    info = vmmu.trace_convert(str(src), str(tmp_path / "again.champsim.gz"))
    assert info["os_events"] == {}
    assert info["dropped_events"] == 3
    assert info["meta"]["has_os_events"] is False
    back = json.loads(invoke("trace", "info", "--json", str(dst)).stdout)
    assert (back["format"], back["compression"]) == ("champsim", "xz")
    assert back["os_events"] == {}
    assert back["meta"]["has_os_events"] is False
    assert "dropped_events" not in back
    assert back["refs_by_kind"] == {"fetch": 2, "load": 2, "store": 1, "modify": 1}


def test_an_empty_trace_file_is_an_error_naming_it(invoke, tmp_path):
    empty = tmp_path / "empty.vtrace"
    empty.write_bytes(b"")
    for args in (["trace", "info", str(empty)], ["run", "--trace", str(empty)]):
        r = invoke(*args)
        assert r.exit_code == 2, r.stdout
        assert str(empty) in r.stderr and "the file is empty (0 bytes)" in r.stderr


def test_a_text_file_named_vtrace_is_rejected_not_read_as_text(invoke, tmp_path):
    fake = tmp_path / "fake.vtrace"
    fake.write_text(LACKEY)
    r = invoke("trace", "info", str(fake))
    assert r.exit_code == 2
    assert str(fake) in r.stderr and "not a vtrace file" in r.stderr
    assert "text `==123== Lackey, an example Valgrind tool`" in r.stderr


@pytest.mark.parametrize("command", ["run", "compare"])
def test_help_names_every_trace_format_read(invoke, command):
    r = invoke(command, "--help")
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    for name in ("vtrace", "lackey text", ".gz", ".zst", ".xz", "ChampSim"):
        assert name in text, name


def test_trace_check_reports_and_sets_the_exit_status(invoke, lackey):
    # No mapping events: every reference is unchecked, none outside, so the check passes.
    r = invoke("trace", "check", "--json", str(lackey))
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["refs"] == 6
    assert report["ok"] is True
    assert report["outside"] == 0
    assert report["processes"][0]["unchecked"] == 6


def test_record_an_unknown_command_is_an_error(invoke, tmp_path):
    r = invoke("record", "-o", str(tmp_path / "x.vtrace"), "--", "no-such-command-vmmu")
    assert r.exit_code == 2
    assert "no-such-command-vmmu" in r.stderr
