"""`vmmu sweep`: specs, the results database, resuming, failures, locking, the backends."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

import vmmu
from conftest import install_note, require_tool
from vmmu.results import missing
from vmmu.sweep import ResultsDB, SpecError, load_spec, parse_spec, run_sweep
from vmmu.sweep.backends import LocalBackend
from vmmu.sweep.store import row_of

VMMU = str(Path(sys.executable).with_name("vmmu"))

#: Columns that hold wall-clock time: the only ones two runs of one spec may differ in.
TIMING = ("wall_seconds", "sim.seconds", "sim.events_per_second")

SMALL = """
[sweep]
name = "small"
[base]
workload = "random:footprint=4M,refs=20K"
[grid]
mode = ["native", "nested"]
pwc = ["none", "2d"]
"""


def write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def rows(db: Path) -> dict[str, dict]:
    """``{point_key: row}`` without the timing columns."""
    with ResultsDB(db) as r:
        df = r.frame()
    out = {}
    for rec in df.to_dict(orient="records"):
        out[rec["point_key"]] = {
            k: (None if missing(v) else v) for k, v in rec.items() if k not in TIMING
        }
    return out


def sweep_cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([VMMU, "sweep", *args], capture_output=True, text=True, timeout=300, **kw)


# --- specs --------------------------------------------------------------------------------


def test_points_are_each_list_entry_crossed_with_the_grid_over_base():
    spec = parse_spec(
        {
            "base": {"workload": "random:refs=1K,footprint=1M", "mode": "nested"},
            "points": [{"pwc": "2d"}, {"pwc": "none", "levels": 5}],
            "grid": {"mode": ["native", "nested"], "seed": [1, 2]},
        }
    )
    assert len(spec.points) == 8
    first = spec.points[0].options
    assert first == {
        "workload": "random:refs=1K,footprint=1M",
        "mode": "native",
        "pwc": "2d",
        "seed": 1,
    }
    assert spec.points[-1].options["levels"] == 5
    assert spec.varying_keys == ["mode", "seed", "pwc", "levels"]
    assert spec.orders["mode"] == ["native", "nested"]


def test_every_option_of_the_table_is_a_spec_option():
    spec = parse_spec(
        {
            "base": {"workload": "random:refs=1K,footprint=1M", "mode": "nested"},
            "grid": {
                "switch_at": [[500], [200, 800]],
                "pin": [{"3": 0}],
                "vcpus": [2],
                "warmup": [100],
            },
        }
    )
    assert [p.options["switch_at"] for p in spec.points] == [[500], [200, 800]]
    assert spec.points[0].run_kwargs["pin"] == {3: 0}
    assert len({p.key for p in spec.points}) == 2


def test_a_table_value_of_a_set_key_sets_each_field():
    spec = parse_spec(
        {
            "base": {"workload": "random:refs=1K"},
            "grid": {"set.machine.pwc": [{"entries": 8, "ways": 8}, {"entries": 16, "ways": 16}]},
        }
    )
    assert [p.options for p in spec.points] == [
        {"workload": "random:refs=1K", "set.machine.pwc.entries": 8, "set.machine.pwc.ways": 8},
        {"workload": "random:refs=1K", "set.machine.pwc.entries": 16, "set.machine.pwc.ways": 16},
    ]


def test_point_key_is_the_resolved_configuration_and_workload():
    spec = parse_spec(
        {
            "points": [
                {"pwc": "2d", "workload": "random:refs=1K,footprint=1M"},
                {"set.machine.pwc.design": "2d", "workload": "random:footprint=1M,refs=1K"},
                {"pwc": "2d", "workload": "random:footprint=1M,refs=2K"},
                {"pwc": "1d", "workload": "random:footprint=1M,refs=1K"},
            ]
        }
    )
    # The first two spell one design two ways: one point.
    assert spec.duplicates == 1
    assert len(spec.points) == 3
    assert len({p.key for p in spec.points}) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[grid]\nmodee = ['native']\n", "unknown key `modee`"),
        ("[grid]\n", "empty grid"),
        ("[base]\nworkload = 'random'\n", "empty grid"),
        ("[grid]\nmode = []\n", "`mode` has no values"),
        ("[grid]\nmode = 'nested'\n", "`mode`: expected a list of values"),
        ("[grid]\nlevels = ['four']\n", "`levels`: expected an integer"),
        ("[grid]\nmode = ['nestd']\n", "`nestd` is not a paging mode"),
        ("[grid]\nseed = [1.5]\n", "`seed`: expected a non-negative integer"),
        ("[grid]\nswitch_at = [[5, -1]]\n", "`switch_at`: expected a list of non-negative"),
        ("[grid]\npin = [{ x = 1 }]\n", "`pin`: expected a table of thread id = vCPU"),
        ("[grid]\npolicy = ['dav']\n", "`dav` is not a policy"),
        ("[grid]\nmode = ['native']\n", "give exactly one of `workload`"),
        ("[grids]\nmode = ['native']\n", "unknown table `grids`"),
        (
            "[base]\nworkload = 'random'\n[grid]\n'set.machine.tlb.l1d.0.ways' = [3]\n",
            "machine.tlb.l1d[0].ways: 3 ways do not divide 64 entries",
        ),
        (
            "[base]\nworkload = 'random'\n[grid]\n'set.machine.nonsense' = [3]\n",
            "nonsense",
        ),
        ("[grid]\nworkload = ['random:fotprint=1M']\n", "`fotprint=1M` is not a parameter"),
        ("[grid]\nworkload = ['traces/missing.vtrace']\n", "missing.vtrace: cannot read it"),
        ("[grid\nmode = 1\n", "not valid TOML"),
    ],
)
def test_bad_spec_is_rejected_before_anything_runs(tmp_path, text, message):
    spec = write(tmp_path, text)
    db = tmp_path / "r.duckdb"
    r = sweep_cli(str(spec), "-o", str(db))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ")
    assert message in r.stderr
    assert str(spec) in r.stderr
    assert "Traceback" not in r.stderr
    assert not db.exists(), "nothing is written for a spec that cannot run"


def test_unreadable_spec_file_is_named(tmp_path):
    r = sweep_cli(str(tmp_path / "nope.toml"), "-o", str(tmp_path / "r.duckdb"))
    assert r.returncode == 2
    assert "nope.toml: cannot read the sweep spec" in r.stderr


# --- the database -------------------------------------------------------------------------


def test_sweep_stores_one_row_per_point_with_option_and_result_columns(tmp_path):
    db = tmp_path / "r.duckdb"
    r = sweep_cli(str(write(tmp_path, SMALL)), "-o", str(db), "-j", "2")
    assert r.returncode == 0, r.stderr
    assert "small → " in r.stderr and "4 points, 4 ok, 0 failed (ran 4, reused 0)" in r.stderr
    with ResultsDB(db) as store:
        df = store.frame()
        sweeps = store.sweeps()
    assert len(df) == 4
    assert df["point_key"].is_unique
    assert set(df["status"]) == {"ok"}
    assert df["error"].isna().all()
    assert set(df["vmmu_version"]) == {vmmu.__version__}
    assert (df["wall_seconds"] > 0).all()
    for col in (
        "mode",
        "pwc",
        "workload",
        "cycles",
        "tlb.l2.misses",
        "cycles_by_cause.translation",
        "config.machine.pwc.entries",
        "walk_refs_by_step.G,gL4",
        "walk_refs_by_step.L4",
    ):
        assert col in df.columns, col
    assert sorted(zip(df["mode"], df["pwc"], strict=True)) == [
        ("native", "2d"),
        ("native", "none"),
        ("nested", "2d"),
        ("nested", "none"),
    ]
    # A row holds exactly what vmmu.run returns for that point.
    direct = vmmu.run(mode="nested", pwc="none", workload="random:footprint=4M,refs=20K")
    row = df[(df["mode"] == "nested") & (df["pwc"] == "none")].iloc[0]
    assert row["cycles"] == direct.cycles
    assert row["walk_refs_by_step.nL1,gPA"] == direct.walk_refs_by_step["nL1,gPA"]
    assert row["config.machine.pwc.design"] == "none"
    assert sweeps[0]["name"] == "small" and sweeps[0]["varying_keys"] == ["mode", "pwc"]


def test_rerun_runs_nothing_and_a_changed_spec_runs_only_new_points(tmp_path):
    db = tmp_path / "r.duckdb"
    first = run_sweep(write(tmp_path, SMALL), db, workers=2)
    assert (first.ran, first.reused) == (4, 0)
    again = run_sweep(write(tmp_path, SMALL), db, workers=2)
    assert (again.ran, again.reused) == (0, 4)
    grown = SMALL.replace('pwc = ["none", "2d"]', 'pwc = ["none", "2d", "2d+nt"]')
    third = run_sweep(write(tmp_path, grown), db, workers=2)
    assert (third.total, third.ran, third.reused) == (6, 2, 4)
    assert len(rows(db)) == 6


def test_a_reused_point_takes_the_option_columns_of_the_new_spec(tmp_path):
    db = tmp_path / "r.duckdb"
    run_sweep(write(tmp_path, SMALL), db, workers=1)
    # 4K is the default nested page size: those points are the ones already stored.
    more = SMALL + 'nested_page_size = ["4K", "2M"]\n'
    s = run_sweep(write(tmp_path, more), db, workers=2)
    assert (s.ran, s.reused) == (4, 4)
    with ResultsDB(db) as store:
        df = store.frame()
    assert sorted(df["nested_page_size"]) == ["2M"] * 4 + ["4K"] * 4


def test_a_failed_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    spec = write(
        tmp_path,
        "[grid]\nworkload = ['random:footprint=4M,refs=20K', 'random:footprint=lots,refs=1K',"
        " 'stream:footprint=1M,refs=5K']\n",
    )
    db = tmp_path / "r.duckdb"
    r = sweep_cli(str(spec), "-o", str(db), "-j", "2")
    assert r.returncode == 1, r.stderr
    assert "3 points, 2 ok, 1 failed" in r.stderr
    assert "workload=random:footprint=lots,refs=1K: WorkloadError" in r.stderr
    with ResultsDB(db) as store:
        df = store.frame().set_index("workload")
    bad = df.loc["random:footprint=lots,refs=1K"]
    assert bad["status"] == "failed"
    assert bad["error"].startswith("WorkloadError: ") and "lots" in bad["error"]
    assert missing(bad["cycles"])  # NULL: no result
    assert df.loc["stream:footprint=1M,refs=5K", "status"] == "ok"
    # A failed point is kept; --retry-failed runs it again (and it fails again).
    again = run_sweep(spec, db, workers=1)
    assert (again.ran, again.reused, len(again.failed)) == (0, 3, 1)
    retried = run_sweep(spec, db, workers=1, retry_failed=True)
    assert (retried.ran, retried.reused, len(retried.failed)) == (1, 2, 1)
    assert len(rows(db)) == 3


def test_a_result_key_first_seen_in_a_later_point_adds_a_column(tmp_path):
    db = tmp_path / "r.duckdb"
    base = {"schema": "vmmu.result/1", "cycles": 100, "cpi": 2, "mode": "nested"}
    later = {
        **base,
        "cpi": 2.5,
        "mode_switches": 3,
        "cycles_by_cause": {"mode_switch": 40},
        "timeline": [{"window": 0, "instructions": 10, "cycles": 20, "mode": "shadow"}],
    }
    with ResultsDB(db, write=True) as store:
        store.record(row_of("a", {"seed": 1}, {"status": "ok", "result": base}))
        store.record(row_of("b", {"seed": 2}, {"status": "ok", "result": later}))
        df = store.frame().set_index("point_key")
        types = dict(
            store.con.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'results'"
            ).fetchall()
        )
    assert df.loc["b", "cycles_by_cause.mode_switch"] == 40
    assert missing(df.loc["a", "cycles_by_cause.mode_switch"])
    assert json.loads(df.loc["b", "timeline"])[0]["mode"] == "shadow"
    # An integer column that meets a fraction becomes DOUBLE and keeps the earlier values.
    assert types["cpi"] == "DOUBLE"
    assert (df.loc["a", "cpi"], df.loc["b", "cpi"]) == (2.0, 2.5)


def file_digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_a_file_that_is_not_a_results_database_is_never_overwritten(tmp_path):
    spec = write(tmp_path, SMALL)
    text_file = tmp_path / "notes.duckdb"
    text_file.write_text("my notes\n")
    r = sweep_cli(str(spec), "-o", str(text_file))
    assert r.returncode == 2
    assert f"{text_file} is not a vmmu results database (not a DuckDB file)" in r.stderr
    assert text_file.read_text() == "my notes\n"

    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE accounts (id INTEGER)")
    con.execute("INSERT INTO accounts VALUES (1), (2)")
    con.close()
    before = file_digest(other)
    r = sweep_cli(str(spec), "-o", str(other))
    assert r.returncode == 2
    assert "is a DuckDB database but not a vmmu results database" in r.stderr
    assert "accounts" in r.stderr
    assert file_digest(other) == before


def test_a_database_of_another_schema_version_is_rejected_naming_the_file(tmp_path):
    db = tmp_path / "old.duckdb"
    with ResultsDB(db, write=True) as store:
        store.con.execute("UPDATE vmmu_meta SET value = 'vmmu.sweep/99' WHERE key = 'schema'")
    r = sweep_cli(str(write(tmp_path, SMALL)), "-o", str(db))
    assert r.returncode == 2
    assert f"{db}: results schema `vmmu.sweep/99` is not supported" in r.stderr
    r = subprocess.run(
        [VMMU, "report", str(db), "-o", str(tmp_path / "r.html")], capture_output=True, text=True
    )
    assert r.returncode == 2 and "vmmu.sweep/99" in r.stderr


def test_a_second_sweep_on_a_database_in_use_fails_clearly(tmp_path):
    db = tmp_path / "r.duckdb"
    with ResultsDB(db, write=True):
        r = sweep_cli(str(write(tmp_path, SMALL)), "-o", str(db))
    assert r.returncode == 2
    assert f"{db} is in use" in r.stderr
    assert f"(PID {os.getpid()})" in r.stderr
    assert "another sweep is writing it" in r.stderr
    with ResultsDB(db) as store:
        assert store.statuses() == {}


def test_parquet_export_holds_every_row(tmp_path):
    import pyarrow.parquet as pq

    db, out = tmp_path / "r.duckdb", tmp_path / "pq"
    s = run_sweep(write(tmp_path, SMALL), db, workers=2, parquet=out)
    assert [p.name for p in s.parquet] == ["results.parquet", "sweeps.parquet"]
    table = pq.read_table(out / "results.parquet")
    assert table.num_rows == 4
    assert {"point_key", "mode", "pwc", "cycles", "tlb.l2.misses"} <= set(table.column_names)


# --- interruption -------------------------------------------------------------------------

KILL_SPEC = """
[base]
workload = "random:footprint=16M,refs=150K"
mode = "nested"
[grid]
pwc = ["none", "1d", "2d", "2d+nt"]
seed = [1, 2]
"""


def _children(pid: int) -> list[int]:
    """The PIDs of ``pid``'s child processes (Linux /proc)."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(c) for c in text]
    return out


def test_kill_9_loses_no_completed_point_and_a_rerun_gives_the_uninterrupted_rows(tmp_path):
    spec = write(tmp_path, KILL_SPEC)
    killed = tmp_path / "killed.duckdb"
    proc = subprocess.Popen(
        [VMMU, "sweep", str(spec), "-o", str(killed), "-j", "1"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    seen = []
    deadline = time.monotonic() + 120
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("[2/8]") or time.monotonic() > deadline:
            break
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert any(line.startswith("[2/8]") for line in seen), "".join(seen)
    # The workers of a killed sweep end by themselves.
    assert workers
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{w}").exists() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [w for w in workers if Path(f"/proc/{w}").exists()]
    partial = rows(killed)
    assert 2 <= len(partial) < 8
    assert all(r["status"] == "ok" and r["cycles"] > 0 for r in partial.values())

    r = sweep_cli(str(spec), "-o", str(killed), "-j", "2")
    assert r.returncode == 0, r.stderr
    assert f"ran {8 - len(partial)}, reused {len(partial)}" in r.stderr

    whole = tmp_path / "whole.duckdb"
    run_sweep(spec, whole, workers=2)
    a, b = rows(killed), rows(whole)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], key


def _default_sigint() -> None:
    """In the child before it runs: SIGINT back to its default action. A shell without job
    control starts background commands (`make test &` in a script) with SIGINT ignored, the
    child inherits that, and Python leaves an ignored SIGINT ignored, so Ctrl-C would never
    reach the sweep."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_sweep_keeping_every_completed_point(tmp_path):
    spec = write(tmp_path, KILL_SPEC)
    db = tmp_path / "r.duckdb"
    proc = subprocess.Popen(
        [VMMU, "sweep", str(spec), "-o", str(db), "-j", "1"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=_default_sigint,
    )
    assert proc.stderr is not None
    # Reading the child's stderr blocks until it writes or exits: a child that never stops
    # would hang the test, so a watchdog kills it after two minutes and the test fails instead.
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    try:
        for line in proc.stderr:
            if line.startswith("[1/8]"):
                break
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        code = proc.wait(timeout=60)
    finally:
        watchdog.cancel()
    assert code == 130, f"exit status {code} (-9: killed by the watchdog, it hung)\n{rest}"
    assert f"interrupted: every completed point is in {db}" in rest
    assert "error: interrupted" in rest
    stored = rows(db)
    assert 1 <= len(stored) < 8
    assert all(r["status"] == "ok" for r in stored.values())


# --- backends -----------------------------------------------------------------------------


def die_on_c(task):
    """A point function for the backend test: the worker running point `c` dies."""
    if task["key"] == "c":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"key": task["key"], "status": "ok", "result": {"cycles": 1}, "wall_seconds": 0.0}


def test_a_point_that_kills_its_worker_is_recorded_failed_and_the_others_complete():
    outcomes = {}
    tasks = [{"key": k, "kwargs": {}} for k in "abcdef"]
    LocalBackend(2, fn=die_on_c).run(tasks, lambda o: outcomes.setdefault(o["key"], o))
    assert sorted(outcomes) == list("abcdef")
    assert outcomes["c"]["status"] == "failed"
    assert "worker process running this point died" in outcomes["c"]["error"]
    assert all(outcomes[k]["status"] == "ok" for k in "abdef")


def test_ray_backend_on_a_loopback_head_gives_the_local_rows(tmp_path):
    try:
        import ray  # noqa: F401

        absent = None
    except ImportError as e:
        absent = e
    require_tool(absent is None, f"Ray is not installed ({absent})", install_note("ray"))
    import socket
    import tempfile

    ray_bin = str(Path(sys.executable).with_name("ray"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Ray binds the node to a routable address by default; these keep every socket on
    # loopback and make the head stop at once on SIGTERM.
    env = {
        **os.environ,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    temp = tempfile.mkdtemp(prefix="vmmu-ray-")
    head = subprocess.Popen(
        [
            ray_bin,
            "start",
            "--head",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
            "--block",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        for _ in range(120):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        spec = write(tmp_path, SMALL)
        on_ray = tmp_path / "ray.duckdb"
        r = sweep_cli(
            str(spec),
            "-o",
            str(on_ray),
            "--backend",
            "ray",
            "--address",
            f"127.0.0.1:{port}",
            env=env,
        )
        assert r.returncode == 0, r.stderr
        assert f"on Ray cluster at 127.0.0.1:{port}" in r.stderr
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)
    local = tmp_path / "local.duckdb"
    run_sweep(spec, local, workers=2)
    a, b = rows(on_ray), rows(local)
    assert len(a) == 4
    assert a == b


def test_address_without_ray_backend_is_a_usage_error(tmp_path):
    r = sweep_cli(
        str(write(tmp_path, SMALL)), "-o", str(tmp_path / "r.duckdb"), "--address", "127.0.0.1:1"
    )
    assert r.returncode == 2
    assert "--address needs --backend ray" in r.stderr


def test_dry_run_lists_points_and_writes_nothing(tmp_path):
    db = tmp_path / "r.duckdb"
    r = sweep_cli(str(write(tmp_path, SMALL)), "-o", str(db), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("4 points: 0 stored, 4 to run")
    assert "to run  " in r.stdout and "mode=native pwc=none" in r.stdout
    assert not db.exists()


def test_load_spec_reads_the_example(tmp_path):
    spec = load_spec(Path(__file__).parents[2] / "examples" / "pwc-sizing.toml")
    assert len(spec.points) == 22
    assert spec.varying_keys == ["pwc", "set.machine.pwc.entries", "set.machine.pwc.ways"]


def test_spec_errors_are_value_errors():
    with pytest.raises(SpecError, match="empty grid"):
        parse_spec({})


NESTED_VIRT_AND_AGILE = """
[sweep]
name = "l1-kinds"
[base]
workload = "memorymotion:processes=2,size=1M"
check = true
[[points]]
mode = "native"
[[points]]
mode = "agile"
[[points]]
mode = "nested-virt"
l1 = "ept"
[[points]]
mode = "nested-virt"
l1 = "shadow"
[[points]]
mode = "nested-virt"
l1 = "pvm"
[[points]]
mode = "nested-virt"
l1 = "3d"
[grid]
vcpus = [1, 2]
"""


def test_a_sweep_over_l1_kinds_and_agile_paging_stores_and_reports_every_point(tmp_path):
    db = tmp_path / "r.duckdb"
    r = sweep_cli(str(write(tmp_path, NESTED_VIRT_AND_AGILE)), "-o", str(db), "-j", "2")
    assert r.returncode == 0, r.stderr
    assert "12 points, 12 ok, 0 failed" in r.stderr
    with ResultsDB(db) as store:
        df = store.frame()
    got = {
        (m, None if missing(k) else k, int(v))
        for m, k, v in zip(df["mode"], df["l1"], df["vcpus"], strict=True)
    }
    kinds = [("native", None), ("agile", None)] + [
        ("nested-virt", k) for k in ("ept", "shadow", "pvm", "3d")
    ]
    assert got == {(m, k, v) for m, k in kinds for v in (1, 2)}
    assert (df["checked_translations"] > 0).all()
    # Two vCPUs: the processes' shootdowns and the L1 kinds' exits are stored per point.
    two = df[df["vcpus"] == 2]
    assert two["elapsed_cycles"].notna().all()
    nv = df[df["mode"] == "nested-virt"]
    assert (
        nv["exits.l1_exit.count"].fillna(0) + nv["exits.hidden_fault.count"].fillna(0) > 0
    ).all()
    out = tmp_path / "r.html"
    rep = subprocess.run(
        [VMMU, "report", str(db), "-o", str(out)], capture_output=True, text=True, timeout=300
    )
    assert rep.returncode == 0, rep.stderr
    page = out.read_text()
    assert "<h2>Comparison</h2>" in page
    for label in ("agile", "nested-virt", "ept", "shadow", "pvm", "3d"):
        assert label in page, label
