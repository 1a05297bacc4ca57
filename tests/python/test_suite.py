"""``vmmu suite``: the entries' definitions, the cache's keys and states, the input generators'
determinism, the commands' output and errors — and, for real, the small scale of three entries
(a server, a compiler, a floating-point kernel) recorded, measured and replayed.

The real recordings need Valgrind, the vg-memtrace tool and each entry's Debian packages, which
``make test`` installs when run as root. A missing one fails the test under ``CI=true``
(conftest.require_tool). Elsewhere a missing package skips the test with the reason, and a
missing Valgrind or tool fails it unless ``VMMU_SKIP_VALGRIND=REASON`` is set, as in the other
recording tests."""

from __future__ import annotations

import dataclasses
import json
import string
from pathlib import Path

import pytest

from conftest import suite_entry
from vmmu import suite
from vmmu.suite import cache, driver, entries, inputs, load

ROOT = Path(__file__).resolve().parents[2]


def _values(entry: entries.Entry, scale: str) -> dict:
    return {
        **entry.params(scale),
        "build": "B",
        "inputs": "I",
        "work": "W",
        "src": "S",
        "port": 1,
    }


# ---------------------------------------------------------------------------------------------
# Definitions


def test_the_suite_covers_every_class_with_at_least_eight_entries():
    assert len(entries.ENTRIES) >= 8
    assert {e.cls for e in entries.ENTRIES} == set(entries.CLASSES)
    assert len({e.name for e in entries.ENTRIES}) == len(entries.ENTRIES)


@pytest.mark.parametrize("entry", entries.ENTRIES, ids=lambda e: e.name)
def test_an_entry_is_complete_and_its_scales_change_only_sizes(entry):
    assert entry.cls in entries.CLASSES
    assert set(entry.scales) == set(entries.SCALES)
    small, full = entry.params("small"), entry.params("full")
    assert small.keys() == full.keys(), "the scales must name the same parameters"
    assert small.get("seed") == full.get("seed")
    assert small != full
    assert entry.packages and entry.programs
    assert 0 < entry.expected_footprint("small") < entry.expected_footprint("full")
    for scale in entries.SCALES:
        for arg in entry.run.argv:
            arg.format(**_values(entry, scale))  # every template field is given
    for name in entry.inputs:
        assert callable(getattr(inputs, name))
    if isinstance(entry.run, entries.Server):
        assert callable(getattr(load, entry.run.load))
    for f in cache._source_files(entry):
        assert (ROOT / "tools" / "suite" / "src" / f).is_file()


def test_an_unknown_entry_or_scale_is_an_error_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown suite entry `nope` \(entries: sqlite-tpcb"):
        entries.by_name(["nope"])
    with pytest.raises(ValueError, match=r"unknown suite entry `jvm` \(did you mean `jvm-txn`\?"):
        entries.by_name(["jvm"])
    with pytest.raises(ValueError, match=r"no scale `huge` \(scales: small, full\)"):
        entries.ENTRIES[0].params("huge")


def test_the_paper_figure_is_table_1_of_seed_002():
    assert [suite.class_figure(c) for c in entries.CLASSES] == [294.3, 129.0, 257.0, 70.4, 18.2]


# ---------------------------------------------------------------------------------------------
# Cache


def test_the_cache_directory_is_the_option_then_the_environment_then_xdg_then_home(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(cache.ENV_CACHE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "vmmu" / "suite"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "vmmu" / "suite"
    monkeypatch.setenv(cache.ENV_CACHE, str(tmp_path / "env"))
    assert cache.cache_dir() == tmp_path / "env"
    assert cache.cache_dir(tmp_path / "opt") == tmp_path / "opt"


VERSIONS = {"packages": {"gcc": "12"}, "programs": {"gcc": "/usr/bin/gcc-12 (gcc-12 12.2)"}}


def test_the_trace_key_follows_the_definition_the_scale_and_the_program_version():
    swim = next(e for e in entries.ENTRIES if e.name == "swim")
    key = cache.trace_key(swim, "small", VERSIONS)
    assert key == cache.trace_key(swim, "small", VERSIONS)
    assert key != cache.trace_key(swim, "full", VERSIONS)
    newer = {**VERSIONS, "programs": {"gcc": "/usr/bin/gcc-12 (gcc-12 12.3)"}}
    assert key != cache.trace_key(swim, "small", newer)
    steps = dataclasses.replace(
        swim, scales={**swim.scales, "small": {**swim.params("small"), "steps": 9}}
    )
    assert key != cache.trace_key(steps, "small", VERSIONS)
    argv = dataclasses.replace(swim, run=entries.Batch(argv=(*swim.run.argv, "x")))
    assert key != cache.trace_key(argv, "small", VERSIONS)
    # The other scale's parameters are not part of this scale's key.
    other = dataclasses.replace(swim, scales={**swim.scales, "full": {"n": 99, "steps": 9}})
    assert key == cache.trace_key(other, "small", VERSIONS)


def test_a_trace_without_its_meta_is_truncated_and_one_with_it_recorded(tmp_path, monkeypatch):
    swim = next(e for e in entries.ENTRIES if e.name == "swim")
    monkeypatch.setattr(cache, "package_versions", lambda e: VERSIONS)
    st = driver.status(swim, "small", tmp_path)
    assert st["state"] == "missing"
    tdir = st["trace"].parent
    tdir.mkdir(parents=True)
    st["trace"].write_bytes(b"VTRACE")
    assert driver.status(swim, "small", tmp_path)["state"] == "truncated"
    cache.write_meta(tdir, {"complete": False})
    assert driver.status(swim, "small", tmp_path)["state"] == "truncated"
    cache.write_meta(tdir, {"complete": True, "trace": str(st["trace"])})
    assert driver.status(swim, "small", tmp_path)["state"] == "recorded"
    assert suite.trace("swim", "small", tmp_path, record=False) == st["trace"]


def test_a_missing_package_names_the_command_that_installs_it(monkeypatch):
    ghost = dataclasses.replace(
        entries.ENTRIES[0], packages=("vmmu-no-such-package",), programs=("true",)
    )
    monkeypatch.setattr(
        cache,
        "package_versions",
        lambda e: {"packages": {"vmmu-no-such-package": None}, "programs": {"true": "/bin/true"}},
    )
    with pytest.raises(
        driver.SuiteError,
        match=r"needs the Debian package vmmu-no-such-package, not installed: "
        r"sudo apt-get install vmmu-no-such-package",
    ):
        driver.ensure_packages(ghost, install=False)


# ---------------------------------------------------------------------------------------------
# Inputs


def _generate(tmp_path: Path, name: str, **params) -> dict[str, bytes]:
    out = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    getattr(inputs, name)(out=out, **params)
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.mark.parametrize(
    "name,params",
    [
        ("c_unit", {"functions": 12}),
        ("tpcb_transactions", {"accounts": 1000, "txns": 50}),
        ("text_corpus", {"kb": 64}),
    ],
)
def test_an_input_is_a_function_of_its_parameters_and_seed(tmp_path, name, params):
    a = _generate(tmp_path, name, seed=1, **params)
    assert a == _generate(tmp_path, name, seed=1, **params)
    assert a != _generate(tmp_path, name, seed=2, **params)


def test_the_tpcb_script_sets_a_gigabyte_page_cache_and_draws_accounts_in_range(tmp_path):
    sql = _generate(tmp_path, "tpcb_transactions", accounts=500, txns=200, seed=3)["txns.sql"]
    text = sql.decode()
    assert text.startswith("PRAGMA cache_size = -1048576;")
    assert text.count("BEGIN;") == 200 and text.count("COMMIT;") == 200
    aids = [
        int(line.rsplit("= ", 1)[1].rstrip(";"))
        for line in text.splitlines()
        if "SELECT abalance" in line
    ]
    assert len(aids) == 200 and min(aids) >= 1 and max(aids) <= 500


def test_the_corpus_is_exactly_its_size_of_printable_text(tmp_path):
    corpus = _generate(tmp_path, "text_corpus", kb=100, seed=1)["corpus.txt"]
    assert len(corpus) == 100 << 10
    assert set(corpus.decode()) <= set(string.printable)


# ---------------------------------------------------------------------------------------------
# Commands


def test_list_json_gives_every_entry_with_nulls_until_recorded(invoke, tmp_path):
    r = invoke("suite", "list", "--json", "--cache", str(tmp_path))
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == [e.name for e in entries.ENTRIES]
    for x in rows:
        assert x["class"] in entries.CLASSES
        assert x["instructions"] is None and x["misses_per_100k"] is None
        assert x["footprint_bytes"] is None and x["expected_footprint_bytes"] > 0
        assert x["paper_misses_per_100k"] == suite.class_figure(x["class"])
        assert x["machine"] == "bhargava08"


def test_record_of_an_unknown_entry_is_an_error(invoke, tmp_path):
    r = invoke("suite", "record", "nope", "--cache", str(tmp_path))
    assert r.exit_code == 2
    assert "unknown suite entry `nope`" in r.stderr


# ---------------------------------------------------------------------------------------------
# Real recordings


@pytest.mark.parametrize("name", ["redis", "gcc", "swim"])
def test_a_small_entry_records_measures_and_replays(name, recorder, suite_cache, invoke):
    suite_entry(name)
    r = invoke("suite", "record", name, "--cache", str(suite_cache), "--no-install")
    assert r.exit_code == 0, r.stderr
    (row,) = [x for x in suite.table("small", suite_cache) if x["name"] == name]
    assert row["state"] == "recorded"
    assert row["instructions"] > 1_000_000 and row["refs"] > row["instructions"] // 2
    assert row["footprint_bytes"] > 1 << 20
    assert row["misses_per_100k"] > 0
    trace = row["trace"]
    check = invoke("trace", "check", "--json", trace)
    assert check.exit_code == 0, check.stdout[-2000:]
    assert json.loads(check.stdout)["outside"] == 0
    # The measurement replayed it natively; nested paging replays the same instructions.
    nested = invoke("run", "--json", "--mode", "nested", "--trace", trace)
    assert nested.exit_code == 0, nested.stderr
    result = json.loads(nested.stdout)
    assert result["instructions"] == row["instructions"]
    assert result["walks"] > 0
    # A second record finds it in the cache and leaves it alone.
    again = invoke("suite", "record", name, "--cache", str(suite_cache), "--no-install")
    assert again.exit_code == 0 and "already recorded" in again.stderr
    assert Path(trace).stat().st_mtime_ns == Path(row["trace"]).stat().st_mtime_ns


def test_a_failing_program_fails_its_entry_with_its_own_error_and_the_others_go_on(
    recorder, suite_cache, invoke, monkeypatch
):
    swim = suite_entry("swim")
    bad = dataclasses.replace(
        swim,
        name="fails",
        run=entries.Batch(argv=("sh", "-c", "echo 'no such table: t' >&2; exit 3")),
    )
    monkeypatch.setattr("vmmu.suite.cli.by_name", lambda names: [bad, swim])
    r = invoke("suite", "record", "--cache", str(suite_cache), "--no-install")
    assert r.exit_code == 1
    assert "fails (small) failed under the recorder: exit status 3" in r.stderr
    assert "no such table: t" in r.stderr
    assert "1 of 2 failed: fails" in r.stderr
    assert driver.status(swim, "small", suite_cache)["state"] == "recorded"


def test_a_server_that_never_listens_fails_its_entry_with_its_own_output(recorder, suite_cache):
    (redis,) = entries.by_name(["redis"])
    dead = dataclasses.replace(
        redis,
        name="dead-server",
        packages=(),
        programs=("sh",),
        run=entries.Server(
            argv=("sh", "-c", "echo 'bind: address in use' >&2; exit 4"), load="redis_kv"
        ),
    )
    with pytest.raises(driver.SuiteError) as e:
        driver.record(dead, "small", suite_cache, install=False)
    assert "dead-server: the load generator failed: the server exited before it listened" in str(
        e.value
    )
    assert "bind: address in use" in str(e.value)


def test_an_entry_larger_than_the_machine_is_refused_before_anything_runs(tmp_path):
    (swim,) = entries.by_name(["swim"])
    huge = dataclasses.replace(swim, footprint="1 << 50")
    with pytest.raises(
        driver.SuiteError, match=r"swim \(small\) expects a footprint of 1048576.0 GiB"
    ):
        driver.record(huge, "small", tmp_path, install=False)
    assert not (tmp_path / "traces").exists()
