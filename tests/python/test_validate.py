"""``vmmu validate host``: the probe builds, runs and reports; the check end to end at tiny
sizes; bad options and failures named. The recording tests need Valgrind, gcc and the
vg-memtrace tool (``recording_tools`` in conftest.py: missing, they fail unless
``VMMU_SKIP_VALGRIND=REASON`` is set)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require_tool
from vmmu.validate import host, hostcpu, pagesize, window

MIB = 1 << 20
PROBE_FIELDS = {
    "footprint",
    "pages",
    "pattern",
    "accesses",
    "warmup",
    "seconds",
    "cpu_seconds",
    "wall_ns_per_access",
    "ns_per_access",
    "anon_huge_kb",
    "region_kb",
    "madvise_errno",
    "checksum",
    "huge_share",
}


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tool(
        shutil.which("gcc") is not None,
        "gcc is not installed",
        "`make test` installs it",
        skip_env="VMMU_SKIP_VALGRIND",
    )
    return host.build_probe(tmp_path_factory.mktemp("cache"))


@pytest.mark.parametrize("pattern", host.PATTERNS)
@pytest.mark.parametrize("pages", host.PAGES)
def test_probe_runs_tiny_and_reports_every_field(probe: Path, pages: str, pattern: str) -> None:
    out = host.run_probe(probe, 8 * MIB, pages, pattern, 2000)
    assert set(out) == PROBE_FIELDS
    assert (out["footprint"], out["pages"], out["pattern"]) == (8 * MIB, pages, pattern)
    assert (out["accesses"], out["warmup"], out["region_kb"]) == (2000, 200, 8192)
    assert out["ns_per_access"] > 0 and out["seconds"] > 0
    if pages == "2m":
        assert out["huge_share"] >= host.THP_MIN_SHARE
    else:
        assert out["anon_huge_kb"] == 0


def test_the_chase_is_one_cycle_through_every_line(probe: Path) -> None:
    # A chase's checksum is the line it ends on: the 32 Ki lines of 2 MiB take 32 Ki steps
    # (warm-up and timed together) to come back to line 0, and no fewer.
    lines = 2 * MIB // 64

    def end(warmup: int) -> int:
        args = [*host.probe_args(2 * MIB, "4k", "chase", 1), "--warmup", str(warmup)]
        done = subprocess.run([str(probe), *args], capture_output=True, text=True, check=True)
        return json.loads(done.stdout)["checksum"]

    assert end(lines - 1) == 0
    assert end(2 * lines - 1) == 0
    assert end(lines - 2) != 0 and end(lines // 2 - 1) != 0


def test_the_probe_is_cached_and_rebuilt_when_its_source_changes(
    probe: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = probe.parent
    assert host.build_probe(cache) == probe
    src, header = host.probe_sources()
    changed = tmp_path / "probe.c"
    changed.write_text(src.read_text() + "\n/* changed */\n")
    monkeypatch.setattr(host, "probe_sources", lambda: (changed, header))
    rebuilt = host.build_probe(cache)
    assert rebuilt != probe and rebuilt.exists() and rebuilt.parent == cache


def test_a_failing_probe_is_named_with_its_message(probe: Path) -> None:
    with pytest.raises(host.ProbeError, match=r"--footprint 3145728.*power of two"):
        host.run_probe(probe, 3 * MIB, "4k", "chase", 10)


def test_refused_huge_pages_are_an_error() -> None:
    out = {"pages": "2m", "anon_huge_kb": 2048, "region_kb": 8192, "madvise_errno": 0}
    with pytest.raises(host.ProbeError, match=r"THP refused.*2048 of 8192 KiB"):
        host._check_probe_output(out, "the probe")
    ok = dict(out, anon_huge_kb=8192)
    assert host._check_probe_output(ok, "the probe")["huge_share"] == 1.0


def test_no_gcc_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(host.ProbeError, match="gcc not found"):
        host.build_probe(tmp_path)


def test_verdict_brackets_the_host_page_sizes() -> None:
    assert host.verdict(8.0, [7.0, 9.0], 0.25) == {"error": 0.0, "within": True}
    assert host.verdict(8.0, [10.0, 12.0], 0.25) == {"error": 0.25, "within": True}
    assert host.verdict(8.0, [12.0, 10.4], 0.25) == pytest.approx({"error": 0.3, "within": False})
    assert host.verdict(1.5, [1.2, 1.25], 0.15) == pytest.approx(
        {"error": 1.25 / 1.5 - 1, "within": False}
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--footprint", "3M"], "power of two"),
        (["--footprint", "1M"], "at least 2M"),
        (["--footprint", "big"], "not a size"),
        (["--pages", "4k,1g"], "comma-separated list of 4k, 2m"),
        (["--pattern", "stride"], "chase, independent"),
        (["--accesses", "0"], "at least 1"),
        (["--record-accesses", "many"], "not a count"),
        (["--runs", "0"], "--runs"),
    ],
)
def test_bad_options_are_refused(invoke, args: list[str], message: str) -> None:
    r = invoke("validate", "host", *args)
    assert r.exit_code == 2
    assert message in r.stderr


def test_an_unknown_machine_is_refused_before_anything_runs(invoke) -> None:
    r = invoke("validate", "host", "--machine", "zen9")
    assert r.exit_code == 2
    assert "zen9" in r.stderr


def test_phase_options_reach_the_engine(invoke) -> None:
    # A synthetic workload has no phase markers: the warm-up never ends.
    r = invoke("run", "-w", "random:footprint=4M,refs=1K", "--warmup-phase", "1")
    assert r.exit_code == 2
    assert "warmup.phase" in r.stderr and "no phase marker 1" in r.stderr


TINY = [
    "--footprint",
    "4M",
    "--accesses",
    "20K",
    "--record-accesses",
    "2K",
    "--runs",
    "2",
    "--no-window-probe",
    "--no-page-probe",
]


def reuse(invoke, check: dict, saved: Path, keep: Path, *args: str) -> dict:
    """``vmmu validate host --reuse`` of ``check`` (written to ``saved``) with the traces in
    ``keep`` and ``args``: its JSON, the command having succeeded."""
    saved.write_text(json.dumps(check))
    r = invoke("validate", "host", "--reuse", str(saved), "--keep", str(keep), *args, "--json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="module")
def tiny_check(recording_tools: None, traces: Path) -> dict:
    from click.testing import CliRunner

    from vmmu.cli import cli

    args = ["validate", "host", *TINY, "--json", "--keep", str(traces)]
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_end_to_end_every_ratio_is_present(tiny_check: dict) -> None:
    c = tiny_check
    # No --preset: the preset of this machine's processor, and why.
    preset, why = hostcpu.preset_for(hostcpu.read_cpu())
    assert c["schema"] == host.SCHEMA and c["machine"] == preset
    assert c["machine_reason"] == f"{preset}: {why}"
    assert len(c["measured"]) == 2 * 2 * 2  # runs x pages x patterns
    assert len(c["predicted"]) == 2 * 2 * 2  # pages x patterns x host page sizes
    kinds = [(r["kind"], r["of"]) for r in c["ratios"]]
    assert kinds == [
        ("dependent/independent", "4K pages"),
        ("dependent/independent", "2M pages"),
        ("4K/2M", "chase"),
        ("4K/2M", "independent"),
    ]
    for r in c["ratios"]:
        assert len(r["measured_runs"]) == 2 and r["measured"] > 0
        for m in host.CORE_MODELS:
            v = r["models"][m]
            assert set(v["by_host_pages"]) == set(host.HOST_PAGES)
            assert all(x > 0 for x in v["by_host_pages"].values())
            assert isinstance(v["within"], bool)
    for p in c["predicted"]:
        # The counted region is the timed loop: its loads, a few stack references of the
        # client request that ends it, nothing of the set-up.
        assert 2000 <= p["memory_refs"] < 2100, p
        if p["pages"] == "2m":
            assert p["recorded_huge_share"] >= host.THP_MIN_SHARE
    assert c["loadavg"]["before"] and c["loadavg"]["after_measuring"]


def test_the_simulated_guest_gives_the_probe_the_pages_it_asked_for(
    tiny_check: dict, traces: Path
) -> None:
    # The 4 MiB region is two 2 MiB pages where the probe advised MADV_HUGEPAGE (the guest's
    # THP at madvise, as the check simulates it), none where it advised MADV_NOHUGEPAGE.
    from vmmu import api

    for pages, huge in (("2m", 2), ("4k", 0)):
        r = api.run(
            "zen3",
            mode="nested",
            trace=str(traces / f"probe-4M-{pages}-chase.vtrace"),
            thp="madvise",
        )
        assert r["guest"]["thp_fault_alloc"] == huge, pages


def test_the_additive_prediction_is_an_additive_run(tiny_check: dict, traces: Path) -> None:
    # One interval run per host page size gives both models: its additive cycles are those
    # of a run under the additive model, to the cycle.
    from vmmu import api

    def run(model: str) -> api.Result:
        return api.run(
            "zen3",
            mode="nested",
            trace=str(traces / "probe-4M-4k-independent.vtrace"),
            core_model=model,
            thp="madvise",
            warmup_phase=host.PHASE_START,
            stop_phase=host.PHASE_STOP,
        )

    interval, additive = run("interval"), run("additive")
    assert interval["core"]["cycles_additive"] == additive["cycles"]
    assert interval["cycles"] < additive["cycles"]


def test_the_additive_model_cannot_tell_a_chase_from_independent_loads(tiny_check: dict) -> None:
    # The same counts, nothing overlapped: the interval model separates the two loops more.
    for r in tiny_check["ratios"]:
        if r["kind"] == "dependent/independent":
            inter = r["models"]["interval"]["by_host_pages"]
            add = r["models"]["additive"]["by_host_pages"]
            for h in host.HOST_PAGES:
                assert inter[h] > add[h], r


def test_end_to_end_table(recording_tools: None, invoke) -> None:
    r = invoke("validate", "host", *TINY, "--runs", "1", "--pages", "4k")
    assert r.exit_code == 0, r.stderr
    out = r.stdout
    assert "dependent/independent" in out and "4K pages" in out
    assert "4K/2M" not in out  # one page size: no 4K/2M ratio
    assert "host's nested page size is not known" in out
    assert "load average" in out


def test_reuse_predicts_again_from_the_kept_traces(
    tiny_check: dict, traces: Path, tmp_path: Path, invoke
) -> None:
    # The saved measurements stay as they were; the recordings are simulated on the given
    # preset, and each sensitivity value predicts again: one miss register serialises the
    # independent loads' misses, so they are slower than with 64, and the chase (one miss at
    # a time) is not.
    args = ["--preset", "golden-cove", "--sensitivity", "machine.core.mshrs=1:64"]
    c = reuse(invoke, tiny_check, tmp_path / "check.json", traces, *args)
    assert c["machine"] == "golden-cove" and "resimulated" in c["machine_reason"]
    assert c["measured"] == tiny_check["measured"]
    assert len(c["predicted"]) == len(tiny_check["predicted"])
    assert [v["set"] for v in c["sensitivity"]] == [
        [["machine.core.mshrs", "1"]],
        [["machine.core.mshrs", "64"]],
    ]

    def ns(variant: dict, pages: str, pattern: str) -> float:
        (p,) = [
            p
            for p in variant["predicted"]
            if (p["pages"], p["pattern"], p["host_pages"]) == (pages, pattern, "4K")
        ]
        return p["ns_per_access"]["interval"]

    one, many = c["sensitivity"]
    assert ns(one, "4k", "independent") > ns(many, "4k", "independent")
    assert ns(one, "4k", "chase") == pytest.approx(ns(many, "4k", "chase"), rel=0.02)
    for p in c["predicted"]:
        a = p["per_access"]
        assert a["walks"] >= 0 and a["walker_wait"] >= 0 and a["mshr_wait"] >= 0
        if p["pattern"] == "independent":
            # Without dependences the window only hides latency (a chase's wait for the
            # previous load is charged to the translation it delays, so it may exceed it).
            exposed = a["translation_interval"] + a["data_interval"]
            assert exposed <= a["translation_additive"] + a["data_additive"] + 1e-9


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reuse", "{saved}"], "--reuse needs --keep DIR"),
        (["--sensitivity", "machine.core.mshrs=10"], "expected PATH=LO:HI"),
        (["--set", "machine.core.mshrs"], "expected PATH=VALUE"),
    ],
)
def test_bad_reuse_and_sensitivity_options_are_refused(
    invoke, tmp_path: Path, args: list[str], message: str
) -> None:
    saved = tmp_path / "check.json"
    saved.write_text("{}")
    r = invoke("validate", "host", *(a.format(saved=saved) for a in args))
    assert r.exit_code == 2
    assert message in r.stderr


def test_reuse_of_something_else_is_refused(invoke, tmp_path: Path) -> None:
    saved = tmp_path / "check.json"
    saved.write_text('{"schema": "vmmu.result/1"}')
    r = invoke("validate", "host", "--reuse", str(saved), "--keep", str(tmp_path))
    assert r.exit_code == 2
    assert "not a saved check" in r.stderr


def test_reuse_on_the_same_preset_keeps_the_saved_predictions(
    tiny_check: dict, tmp_path: Path, invoke
) -> None:
    # Nothing would change them: no trace is read (the directory is empty).
    saved = tmp_path / "check.json"
    c = reuse(invoke, tiny_check, saved, tmp_path, "--footprint", "4M")
    assert c["predicted"] == tiny_check["predicted"]
    assert c["ratios"] == tiny_check["ratios"]
    r = invoke(
        "validate", "host", "--reuse", str(saved), "--keep", str(tmp_path), "--footprint", "8M"
    )
    assert r.exit_code == 2
    assert "measured none of the footprints 8M" in r.stderr


@pytest.fixture(scope="module")
def window_probe(probe: Path) -> Path:
    return window.build_window(probe.parent)


@pytest.mark.parametrize("filler", window.FILLERS)
def test_the_window_probe_times_every_gap(window_probe: Path, filler: str) -> None:
    out = window.run_window(window_probe, 8 * MIB, "4k", iterations=200, reps=2, filler=filler)
    assert out["filler"] == filler
    assert out["gaps"] == list(range(8, 641, 8))
    assert len(out["ns"]) == len(out["gaps"])
    assert all(len(s) == 2 and min(s) > 0 for s in out["ns"])
    assert (out["footprint"], out["region_kb"], out["anon_huge_kb"]) == (8 * MIB, 8192, 0)


def test_a_failing_window_probe_is_named_with_its_message(window_probe: Path) -> None:
    with pytest.raises(host.ProbeError, match=r"window probe \(--footprint 3145728.*power of two"):
        window.run_window(window_probe, 3 * MIB, "4k", iterations=10, reps=1)
    with pytest.raises(host.ProbeError, match=r"--filler: nop, mov or cmp"):
        window.run_window(window_probe, 8 * MIB, "4k", iterations=10, reps=1, filler="add")


GAPS = list(range(8, 641, 8))


def samples(window_size: int, half_share: float, reps: int = 20) -> list[list[float]]:
    """What a core whose window is ``window_size`` entries gives, halved ``half_share`` of the
    time: one miss (150 ns) while both loads fit, two (300 ns) when they do not, plus the
    NOPs' dispatch (six a cycle at 3 GHz)."""
    out = []
    for g in GAPS:
        dispatch = (2 * g + 3) / 6 / 3.0
        halved = round(half_share * reps)
        fits = [g + 2 <= window_size // 2] * halved + [g + 2 <= window_size] * (reps - halved)
        out.append([(150.0 if f else 300.0) + dispatch for f in fits])
    return out


@pytest.mark.parametrize("size", [128, 224, 256, 512])
@pytest.mark.parametrize("share", [0.0, 0.3, 0.75])
def test_the_window_is_read_from_the_step_and_the_halved_share_from_the_mean(
    size: int, share: float
) -> None:
    r = window.read(GAPS, samples(size, share))
    assert r["found"]
    lo, hi = r["window_range"]
    assert lo <= size <= hi and hi - lo == 7 and r["window"] == hi
    assert r["half_share"] == pytest.approx(share, abs=0.03)
    assert r["half_share_by_zone"] == pytest.approx([share, share], abs=0.06)


def test_no_step_no_window() -> None:
    flat = [[150.0] * 4 for _ in GAPS]
    r = window.read(GAPS, flat)
    assert not r["found"] and "no step" in r["why"]
    r = window.read(GAPS[:4], flat[:4])
    assert not r["found"] and "too few" in r["why"]


def test_the_window_states_predicted_are_those_seen() -> None:
    assert window.states(None) == ["full"]
    assert window.states({"found": False, "why": "no step"}) == ["full"]
    assert window.states({"found": True, "half_share": 0.05}) == ["full"]
    assert window.states({"found": True, "half_share": 0.5}) == ["full", "half"]
    assert window.states({"found": True, "half_share": 0.95}) == ["half"]


def test_the_half_window_halves_the_partitioned_structures() -> None:
    assert window.half_sets("zen3", []) == [
        ("machine.core.rob", 128),
        ("machine.core.store_queue", 32),
    ]
    assert window.half_sets("zen3", [("machine.core.rob", "200")])[0] == ("machine.core.rob", 100)


def test_predictions_for_both_windows(
    tiny_check: dict, traces: Path, tmp_path: Path, invoke
) -> None:
    # The same recordings predicted for the whole window and for half of it: a chase keeps
    # one miss in flight either way; independent loads lose overlap, never gain it.
    saved = tmp_path / "check.json"
    c = reuse(invoke, tiny_check, saved, traces, "--windows", "full,half")
    assert c["windows"] == ["full", "half"]
    assert len(c["predicted"]) == 2 * len(tiny_check["predicted"])
    by = {(p["pages"], p["pattern"], p["host_pages"], p["window"]): p for p in c["predicted"]}
    for (pages, pattern, host_pages, w), p in by.items():
        if w == "half":
            full = by[(pages, pattern, host_pages, "full")]["ns_per_access"]
            assert p["ns_per_access"]["interval"] >= full["interval"] - 1e-9
            assert p["ns_per_access"]["additive"] == full["additive"]
    for ratio in c["ratios"]:
        m = ratio["models"]["interval"]
        assert list(m["by_window"]) == ["full", "half"]
        values = [v for by_host in m["by_window"].values() for v in by_host.values()]
        assert m == {**m, **host.verdict(ratio["measured"], values, ratio["band"])}
    args = ["--reuse", str(saved), "--keep", str(traces)]
    r = invoke("validate", "host", *args, "--windows", "full,half")
    assert r.exit_code == 0, r.stderr
    assert "full and half windows (half: rob 128, store_queue 32)" in r.stdout
    assert "; half " in r.stdout
    r = invoke("validate", "host", *args, "--windows", "quarter")
    assert r.exit_code == 2 and "full, half" in r.stderr


def test_the_check_predicts_for_the_window_states_its_probe_sees(
    recording_tools: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The window probe runs before and after the native runs; both sittings' samples are read
    # together, and a window halved a third of the time is predicted for in both states.
    sittings = []
    sizes = {"nop": (256, 1 / 3), "mov": (176, 0.0), "cmp": (120, 0.0)}

    def fake(_binary: Path, filler: str) -> dict:
        sittings.append(filler)
        return {"filler": filler, "gaps": GAPS, "ns": samples(*sizes[filler], reps=6)}

    monkeypatch.setattr(window, "run_window", fake)
    tiny = {"footprints": [4 * MIB], "pages": ["4k"], "accesses": 20_000, "runs": 1}
    check = host.check_host(**tiny, record_accesses=2_000, cache=tmp_path, page_probe=False)
    assert sittings == [*window.FILLERS, *window.FILLERS] and len(check.window["runs"]) == 6
    reading = check.window["reading"]
    assert reading["window_range"] == [250, 257]
    registers = check.window["registers"]
    assert registers["mov"]["window_range"] == [170, 177]
    assert registers["cmp"]["window_range"] == [114, 121]
    assert reading["half_share"] == pytest.approx(1 / 3, abs=0.02)
    assert check.windows == ["full", "half"]
    assert sorted({p["window"] for p in check.predicted}) == ["full", "half"]
    assert len(check.predicted) == 2 * 2 * 2  # patterns x host page sizes x window states
    (ratio,) = check.ratios()
    assert list(ratio["models"]["interval"]["by_window"]) == ["full", "half"]
    r = host.check_host(
        **tiny, record_accesses=2_000, cache=tmp_path, window_probe=False, page_probe=False
    )
    assert len(sittings) == 6 and r.window == {} and r.windows == ["full"]


def test_the_sittings_of_each_filler_are_read_apart() -> None:
    nop = {"gaps": GAPS, "ns": samples(256, 0.0, reps=4)}  # saved before fillers: NOPs
    cmp = {"filler": "cmp", "gaps": GAPS, "ns": samples(120, 0.0, reps=4)}
    assert window.read_runs([nop, cmp])["window_range"] == [250, 257]
    assert window.read_runs([nop, cmp], "cmp")["window_range"] == [114, 121]
    assert "no sitting with the mov filler" in window.read_runs([nop, cmp], "mov")["why"]


def test_simulations_at_once_give_what_one_at_a_time_gives(
    tiny_check: dict, traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The predictions come back in the check's order, equal to the serial ones.
    recorded = host.recorded_of(tiny_check["predicted"])

    def predict(at_once: int) -> list[dict]:
        monkeypatch.setattr(host, "SIMULATIONS_AT_ONCE", at_once)
        return host.predict("zen3", traces, recorded, 2000, host.Steps(), [], ["full", "half"])

    parallel = predict(4)
    assert parallel == predict(1)
    keys = [(p["pages"], p["pattern"], p["window"], p["host_pages"]) for p in parallel]
    assert keys == [
        (pg, pat, w, h)
        for pg in ("4k", "2m")
        for pat in ("chase", "independent")
        for w in ("full", "half")
        for h in host.HOST_PAGES
    ]


def test_the_page_chase_is_one_cycle_through_every_page(probe: Path) -> None:
    # 2 MiB is 512 pages of 4 KiB: the chase is back at line 0 after 512 steps, and no fewer.
    def end(steps: int) -> int:
        args = [*host.probe_args(2 * MIB, "4k", "pages", 1), "--warmup", str(steps - 1)]
        done = subprocess.run([str(probe), *args], capture_output=True, text=True, check=True)
        out = json.loads(done.stdout)
        assert out["pattern"] == "pages"
        return out["checksum"]

    assert end(512) == 0 and end(1024) == 0
    assert end(511) != 0 and end(256) != 0


def chases(ns_2m: float, ns_4k: float) -> list[dict]:
    return [
        {"footprint": fp, "pages": pg, "pattern": "pages", "ns_per_access": ns}
        for fp in pagesize.FOOTPRINTS
        for pg, ns in (("2m", ns_2m), ("4k", ns_4k))
    ]


def test_the_host_page_size_is_read_from_the_ratio_of_the_chases() -> None:
    assert pagesize.read(chases(60.0, 58.0))["host_pages"] == "4K"
    assert pagesize.read(chases(15.0, 60.0))["host_pages"] == "2M"
    between = pagesize.read(chases(25.0, 60.0))
    assert between["host_pages"] is None and "do not agree" in between["why"]
    assert pagesize.read([])["host_pages"] is None
    assert pagesize.read(chases(30.0, 60.0))["median"] == pytest.approx(0.5)
    # One footprint in huge host pages, the others not: a host that mixes them is not told.
    mixed = chases(60.0, 58.0)
    mixed[2]["ns_per_access"] = 12.0  # 64 MiB, 2 MiB guest pages
    r = pagesize.read(mixed)
    assert r["host_pages"] is None and r["median"] > pagesize.HOST_4K_ABOVE


def test_the_check_predicts_for_the_host_page_size_its_probe_reads(
    recording_tools: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Page chases as a host with 4 KiB pages gives them: the check predicts for host 4K only.
    real = host.run_probe

    def fake(binary: Path, footprint: int, pages: str, pattern: str, accesses: int) -> dict:
        if pattern == "pages":
            return {"footprint": footprint, "pages": pages, "ns_per_access": 50.0}
        return real(binary, footprint, pages, pattern, accesses)

    monkeypatch.setattr(host, "run_probe", fake)
    tiny = {"footprints": [4 * MIB], "pages": ["4k"], "accesses": 20_000, "runs": 1}
    check = host.check_host(**tiny, record_accesses=2_000, cache=tmp_path, window_probe=False)
    assert len(check.page_probe["runs"]) == 2 * len(pagesize.FOOTPRINTS)
    assert check.page_probe["reading"]["host_pages"] == "4K"
    assert check.host_pages == ["4K"]
    assert {p["host_pages"] for p in check.predicted} == {"4K"}
    (ratio,) = check.ratios()
    assert list(ratio["models"]["interval"]["by_host_pages"]) == ["4K"]
    forced = host.check_host(
        **tiny, record_accesses=2_000, cache=tmp_path, window_probe=False, host_pages=["4K", "2M"]
    )
    assert forced.host_pages == ["4K", "2M"] and len(forced.predicted) == 4


def test_reuse_for_one_host_page_size_keeps_its_saved_predictions(
    tiny_check: dict, tmp_path: Path, invoke
) -> None:
    c = reuse(invoke, tiny_check, tmp_path / "check.json", tmp_path, "--host-pages", "4k")
    assert c["host_pages"] == ["4K"]
    assert c["predicted"] == [p for p in tiny_check["predicted"] if p["host_pages"] == "4K"]
    for r in c["ratios"]:
        assert list(r["models"]["additive"]["by_host_pages"]) == ["4K"]
    r = invoke("validate", "host", "--host-pages", "1G")
    assert r.exit_code == 2 and "4K, 2M" in r.stderr
