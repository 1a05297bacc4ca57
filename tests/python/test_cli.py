"""The `vmmu` command line: listings, `run`, `compare`, and bad input (exit 2, a message that
names the thing at fault, never a traceback)."""

from __future__ import annotations

import json

import pytest
import tomllib

import vmmu
from conftest import TINY

# --- listings -----------------------------------------------------------------------------


def test_presets_lists_every_preset_with_a_description(invoke):
    r = invoke("presets")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    names = [line.split()[0] for line in lines]
    assert "bhargava08" in names
    assert names == list(vmmu.presets())
    assert all(len(line.split(None, 1)) == 2 for line in lines), "each preset has a description"


def test_presets_show_prints_parseable_toml(invoke):
    r = invoke("presets", "show", "bhargava08")
    assert r.exit_code == 0
    assert tomllib.loads(r.stdout)["name"] == "bhargava08"


def test_config_prints_the_resolved_config_with_options_applied(invoke):
    r = invoke(
        "config",
        "--pwc",
        "none",
        "--levels",
        "5",
        "--nested-page-size",
        "2M",
        "--guest-page-size",
        "mixed",
        "--seed",
        "7",
        "--set",
        "machine.tlb.l2.0.entries=1024",
    )
    assert r.exit_code == 0, r.stderr
    cfg = tomllib.loads(r.stdout)
    assert cfg["mode"] == "nested"
    assert cfg["seed"] == 7
    assert cfg["machine"]["pwc"]["design"] == "none"
    assert cfg["guest"]["format"] == "long5"
    assert cfg["guest"]["page_size"] == "mixed"
    assert cfg["host"]["nested_levels"] == 5
    assert cfg["host"]["nested_page_size"] == "2M"
    assert cfg["machine"]["tlb"]["l2"][0]["entries"] == 1024


def test_set_is_applied_after_the_options(invoke):
    r = invoke("config", "--pwc", "none", "--set", "machine.pwc.design=psc")
    assert tomllib.loads(r.stdout)["machine"]["pwc"]["design"] == "psc"


def test_workloads_lists_generators_with_parameters_and_defaults(invoke):
    r = invoke("workloads")
    assert r.exit_code == 0
    for name in ("stream", "stride", "random", "pointer-chase", "phases"):
        assert name in r.stdout
    for param in ("footprint", "refs", "ipr", "write_ratio", "seed", "prefault"):
        assert param in r.stdout
    catalog = json.loads(invoke("workloads", "--json").stdout)
    random = next(g for g in catalog if g["name"] == "random")
    assert {p["name"] for p in random["params"]} >= {"footprint", "refs", "prefault"}
    assert all("default" in p and "description" in p for p in random["params"])


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["config", "--machine", "nope"], ["unknown preset", "nope"]),
        (["presets", "show", "nope"], ["unknown preset", "nope"]),
        (["config", "--set", "machine.tlb.l1d.0.ways=3"], ["machine.tlb.l1d[0].ways"]),
        (["config", "--set", "machine.tlb.bogus=1"], ["machine.tlb.bogus", "unknown"]),
        (["config", "--set", "guest.memory=0"], ["guest.memory"]),
        (["config", "--set", "noequals"], ["dotted.path=value"]),
        (["config", "--machine", "/nonexistent/m.toml"], ["/nonexistent/m.toml"]),
        (["run", "--trace", "/nonexistent/t.vtrace"], ["/nonexistent/t.vtrace"]),
        (["run", "--workload", "random:bogus=1"], ["bogus", "random"]),
        (["run", "--workload", "random:refs=zz"], ["refs", "zz"]),
        (["run", "--workload", "nosuchgen"], ["nosuchgen"]),
        (["run"], ["--workload", "--trace"]),
        (["run", "--workload", TINY, "--trace", "x"], ["exactly one"]),
        (["run", "--workload", TINY, "--pwc", "3d"], ["--pwc", "3d"]),
        (["compare", "--workload", TINY, "--modes", "native,bogus"], ["bogus"]),
        (["trace", "info", "/nonexistent/t.vtrace"], ["/nonexistent/t.vtrace"]),
        (["run", "--workload", TINY, "--switch-at", "2M,1M"], ["strictly increasing"]),
        (["run", "--workload", TINY, "--mode", "native", "--switch-at", "1K"], ["native"]),
        (["run", "--workload", TINY, "--switch-at", "soon"], ["--switch-at", "soon"]),
        (["run", "--workload", TINY, "--warmup", "-5"], ["--warmup"]),
        (["run", "--workload", TINY, "--warmup", "1G"], ["warmup.refs", "longer"]),
        (["compare", "--workload", TINY, "--sensitivity", "seed=1"], ["PATH=LO:HI"]),
        (["run", "--workload", TINY, "--vcpus", "0"], ["guest.vcpus", "at least 1"]),
        (["run", "--workload", TINY, "--vcpus", "64"], ["guest.vcpus", "overcommit"]),
        (
            ["run", "--workload", TINY, "--vcpus", "2", "--pin", "3=5"],
            ["guest.affinity.3", "vCPU 5"],
        ),
        (["run", "--workload", TINY, "--pin", "x"], ["--pin", "TID=VCPU"]),
        (
            ["compare", "--workload", TINY, "--sensitivity", "machine.bogus=1:2"],
            ["machine.bogus"],
        ),
        (["run", "--workload", TINY, "--mode", "nested", "--l1", "ept"], ["nested_virt.l1"]),
        (["run", "--workload", TINY, "--mode", "nested-virt", "--l1", "4d"], ["--l1"]),
        (["compare", "--workload", TINY, "--modes", "nested-virt:4d"], ["nested-virt:4d"]),
    ],
)
def test_bad_input_exits_2_naming_the_culprit(invoke, args, names):
    r = invoke(*args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    for name in names:
        assert name in r.stderr


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["run", "--workload", "gcc:refs=1K"], "did you mean `gcc-phases`? known generators:"),
        (["run", "--workload", TINY, "--machine", "bhargava"], "did you mean `bhargava08`?"),
        (["run", "--workload", TINY, "--profile", "kvm"], "did you mean `kvm-modern`?"),
        (
            ["run", "--workload", TINY, "--mode", "adaptive", "--set", "policy.kind=dav"],
            "did you mean `dav2m`?",
        ),
        (["compare", "--workload", TINY, "--modes", "nested,shadw"], "did you mean `shadow`?"),
        (["repro", "bhargava"], "did you mean `bhargava08`?"),
        (["presets", "show", "zen-4"], "did you mean `zen4`?"),
    ],
)
def test_an_unknown_name_suggests_the_nearest_known_one(invoke, args, hint):
    r = invoke(*args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert hint in r.stderr


def test_error_lines_start_with_error(invoke):
    r = invoke("config", "--set", "machine.tlb.l1d.0.ways=3")
    assert r.stderr.startswith("error: invalid configuration: machine.tlb.l1d[0].ways:")
    assert r.stdout == ""


# --- run and compare ----------------------------------------------------------------------


def test_run_json_is_a_vmmu_result(run_json):
    res = run_json("--workload", TINY)
    assert res["schema"] == "vmmu.result/2"
    assert res["mode"] == "nested"
    assert res["machine"] == "bhargava08"
    for key in ("instructions", "memory_refs", "cycles", "cpi", "tlb", "walks", "walk_refs"):
        assert key in res
    assert res["memory_refs"] == 20_000


@pytest.mark.parametrize("mode", ["native", "nested"])
def test_run_prints_a_readable_table(invoke, mode):
    r = invoke("run", "--mode", mode, "--workload", TINY)
    assert r.exit_code == 0, r.stderr
    for label in ("cycles", "CPI", "TLBs", "walk refs", "cycles by cause"):
        assert label in r.stdout
    if mode == "nested":
        assert "gPA" in r.stdout and "nL1" in r.stdout


@pytest.mark.parametrize("l1", ["ept", "shadow", "pvm", "3d"])
def test_a_nested_virt_run_checks_every_translation(run_json, l1):
    res = run_json("--mode", "nested-virt", "--l1", l1, "--check", "--workload", TINY)
    assert res["mode"] == "nested-virt"
    assert res["checked_translations"] > 0
    # EPT on EPT and the 3D walk reflect EPT violations into L1; a shadow-paging L1 (shadow,
    # pvm) takes each exit by its cause, PVM adding the kernel's return to user.
    assert ("l1_exit" in res["exits"]) == (l1 in ("ept", "3d"))
    assert ("hidden_fault" in res["exits"]) == (l1 in ("shadow", "pvm"))
    assert ("user_return" in res["exits"]) == (l1 == "pvm")
    assert ("ept02_fill" in res["exits"]) == (l1 == "ept")


def test_run_is_deterministic(run_json):
    args = ("--workload", "random:footprint=16M,refs=50K,seed=3", "--seed", "5")
    a, b = run_json(*args), run_json(*args)
    a.pop("sim"), b.pop("sim")
    assert a == b


def test_compare_prints_every_mode_and_the_overhead(invoke):
    r = invoke("compare", "--workload", TINY)
    assert r.exit_code == 0, r.stderr
    header = next(line for line in r.stdout.splitlines() if "native" in line)
    assert header.split() == ["native", "nested", "shadow", "agile"]
    assert "overhead vs native" in r.stdout
    assert "+0.0%" in r.stdout  # native against itself


def test_compare_adaptive_on_gcc_phases_shows_the_six_columns_whole(invoke):
    # Seed 001's comparison on the 403.gcc proxy: native, both static modes, DAV²M, the
    # oracle and vmmu's cost model side by side, no figure cut to an ellipsis.
    spec = "gcc-phases:inputs=1,phases=3,blocks=300,arena=32"
    r = invoke("compare", "--workload", spec, "--adaptive", "--time-scale", "1e-5")
    assert r.exit_code == 0, r.stderr
    header = next(line for line in r.stdout.splitlines() if "native" in line)
    assert header.split() == [
        "native",
        "nested",
        "shadow",
        "agile",
        "dav2m",
        "oracle",
        "costmodel",
    ]
    cycles = next(line for line in r.stdout.splitlines() if line.startswith("cycles"))
    assert "…" not in cycles and len(cycles.split()) == 8


def test_compare_names_nested_virt_runs_by_l1_kind(invoke):
    modes = "nested,nested-virt:ept,nested-virt:pvm"
    r = invoke("compare", "--json", "--workload", TINY, "--modes", modes)
    assert r.exit_code == 0, r.stderr
    got = json.loads(r.stdout)
    assert list(got) == modes.split(",")
    assert [res["mode"] for res in got.values()] == ["nested", "nested-virt", "nested-virt"]
    kinds = [res["config"].get("nested_virt", {}).get("l1") for res in got.values()]
    assert kinds == [None, "ept", "pvm"]
    # The two kinds are different runs: PVM's L1 shadow-pages its guest.
    assert got["nested-virt:ept"]["cycles"] != got["nested-virt:pvm"]["cycles"]


def test_compare_json_has_one_result_per_mode(invoke):
    r = invoke("compare", "--json", "--workload", TINY, "--modes", "native,nested")
    assert r.exit_code == 0, r.stderr
    both = json.loads(r.stdout)
    assert list(both) == ["native", "nested"]
    assert {res["mode"] for res in both.values()} == {"native", "nested"}


def test_profiles_lists_every_profile_and_shows_one(invoke):
    r = invoke("profiles")
    assert r.exit_code == 0, r.stderr
    for name in ("kvm-modern", "xen-3.0.4-core2", "palacios-opteron2350", "esx-nehalem"):
        assert name in r.stdout
    r = invoke("profiles", "show", "xen-3.0.4-core2")
    assert r.exit_code == 0 and "sh_x86_emulate_write" in r.stdout
    r = invoke("profiles", "show", "nosuch")
    assert r.exit_code == 2 and "kvm-modern" in r.stderr


def test_switch_at_changes_the_mode_where_asked(invoke):
    r = invoke("run", "--workload", TINY, "--switch-at", "3K", "--json")
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["mode_switches"] == 1
    assert res["instructions_in_mode"]["nested"] == 3000
    assert res["cycles_by_cause"]["mode_switch"] > 0


def test_warmup_leaves_its_references_out(invoke):
    full = json.loads(invoke("run", "--workload", TINY, "--json").stdout)
    r = invoke("run", "--workload", TINY, "--warmup", "1K", "--json")
    assert r.exit_code == 0, r.stderr
    warm = json.loads(r.stdout)
    assert warm["memory_refs"] == full["memory_refs"] - 1000
    assert warm["warmup"]["refs"] == 1000


def test_core_model_interval_times_the_same_counts(invoke):
    additive = json.loads(invoke("run", "--workload", TINY, "--json").stdout)
    r = invoke("run", "--workload", TINY, "--core-model", "interval", "--json")
    assert r.exit_code == 0, r.stderr
    interval = json.loads(r.stdout)
    assert "core" not in additive
    assert interval["core"]["model"] == "interval"
    assert interval["core"]["cycles_additive"] == additive["cycles"]
    assert interval["walks"] == additive["walks"]
    assert interval["cycles"] <= additive["cycles"]
    bad = invoke("run", "--workload", TINY, "--core-model", "outoforder")
    assert bad.exit_code == 2 and "additive" in bad.stderr


def test_sensitivity_reruns_the_comparison_at_each_end_of_the_range(invoke):
    r = invoke(
        "compare",
        "--workload",
        TINY,
        "--sensitivity",
        "machine.kernel.page_fault=1000:9000",
        "--json",
    )
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    rows = out["sensitivity"]["machine.kernel.page_fault"]
    assert [row["value"] for row in rows] == ["1000", "9000"]
    assert sorted(rows[0]["ranking"]) == ["agile", "native", "nested", "shadow"]
    # A dearer guest fault is paid in every mode: the virtualized overheads shrink.
    assert rows[1]["overhead"]["shadow"] < rows[0]["overhead"]["shadow"]


def test_compare_on_several_vcpus_shows_shootdowns_and_ipis(invoke):
    spec = "database:threads=4,queries=5,pool=4M,rows=16,temp=32K,instrs=1000"
    r = invoke("compare", "--vcpus", "4", "--workload", spec, "--modes", "native,nested,shadow")
    assert r.exit_code == 0, r.stderr
    for row in ("TLB shootdowns", "IPIs", "remote INVLPGs", "elapsed (slowest vCPU)"):
        assert row in r.stdout, row
    r = invoke("run", "--vcpus", "4", "--workload", spec, "--mode", "shadow", "--json")
    res = json.loads(r.stdout)
    assert len(res["vcpus"]) == 4
    assert res["shootdowns"]["ipis"] > 0
    assert res["exits"]["ipi_send"]["count"] == res["shootdowns"]["ipis"]
    r = invoke("run", "--vcpus", "4", "--workload", spec)
    assert r.exit_code == 0 and "vCPUs" in r.stdout
