"""The Python API: vmmu.run / compare / presets / workloads / config, the Result object and
the exception classes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import vmmu
from conftest import TINY
from vmmu import exceptions


def test_presets_are_name_to_description():
    p = vmmu.presets()
    assert "bhargava08" in p
    assert all(isinstance(d, str) and d for d in p.values())


def test_preset_toml_round_trips_through_config():
    assert 'name = "bhargava08"' in vmmu.preset_toml("bhargava08")
    assert "[machine.tlb]" in vmmu.config("bhargava08")


def test_workloads_catalog():
    names = [g["name"] for g in vmmu.workloads()]
    assert {"stream", "stride", "random", "pointer-chase", "phases"} <= set(names)


def test_every_error_is_a_vmmu_error():
    for name in exceptions.__all__:
        assert issubclass(getattr(exceptions, name), exceptions.VmmuError)


def test_config_error_names_the_field():
    with pytest.raises(exceptions.ConfigError, match=r"machine\.tlb\.l1d\[0\]\.ways"):
        vmmu.config(set={"machine.tlb.l1d.0.ways": 3})


def test_unknown_preset_is_a_config_error():
    with pytest.raises(exceptions.ConfigError, match="unknown preset `nope`"):
        vmmu.config("nope")


def test_bad_workload_is_a_workload_error():
    with pytest.raises(exceptions.WorkloadError, match="bogus"):
        vmmu.run(workload="random:bogus=1")


def test_missing_machine_file_is_an_io_error():
    with pytest.raises(exceptions.VmmuIOError, match=r"/nonexistent/m\.toml"):
        vmmu.config("/nonexistent/m.toml")


def test_workload_and_trace_are_exclusive():
    with pytest.raises(exceptions.ConfigError, match="exactly one"):
        vmmu.run(workload=TINY, trace="t.vtrace")
    with pytest.raises(exceptions.ConfigError, match="exactly one"):
        vmmu.run()


def test_set_accepts_mapping_strings_and_pairs():
    for s in (
        {"machine.tlb.l2.0.entries": 1024},
        ["machine.tlb.l2.0.entries=1024"],
        [("machine.tlb.l2.0.entries", 1024)],
    ):
        assert "entries = 1024" in vmmu.config(set=s)


def test_result_wraps_a_dict():
    r = vmmu.Result(
        {
            "schema": "vmmu.result/2",
            "mode": "native",
            "cycles": 10,
            "walks": 2,
            "walk_refs": 8,
            "tlb": {"l1d": {"hits": 3, "misses": 1}},
        }
    )
    assert r.cycles == 10 and r["mode"] == "native"
    assert "walk_refs/walk=4.00" in repr(r)
    assert json.loads(r.to_json()) == r.to_dict()
    df = r.to_pandas()
    assert len(df) == 1 and df.loc[0, "tlb.l1d.misses"] == 1
    with pytest.raises(AttributeError):
        _ = r.nonexistent
    d = r.to_dict()
    d["tlb"]["l1d"]["hits"] = 0
    assert r.tlb["l1d"]["hits"] == 3, "to_dict is a copy"


def test_run_returns_a_result():
    r = vmmu.run(mode="native", workload=TINY)
    assert r.schema == "vmmu.result/2"
    assert r.mode == "native"
    df = r.to_pandas()
    assert df.loc[0, "mode"] == "native"
    assert "tlb.l1d.misses" in df.columns


def test_core_model_keyword_chooses_the_interval_model():
    r = vmmu.run(mode="native", workload=TINY, core_model="interval", machine="zen3")
    assert r.core["model"] == "interval"
    assert r.config["machine"]["core"]["rob"] == 256
    assert "core" not in vmmu.run(mode="native", workload=TINY, machine="zen3")
    with pytest.raises(exceptions.ConfigError, match=r"machine\.core\.rob"):
        vmmu.run(workload=TINY, core_model="interval", set={"machine.core.rob": 0})


def test_progress_callback_can_stop_the_run():
    calls = []

    def stop(done, total):
        calls.append((done, total))
        return False

    with pytest.raises(exceptions.Interrupted):
        vmmu.run(workload="random:footprint=64M,refs=5M", progress=stop)
    assert calls


def test_progress_callback_exception_propagates():
    def boom(done, total):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        vmmu.run(workload="random:footprint=64M,refs=5M", progress=boom)


def test_compare_gives_one_row_per_mode_with_overhead():
    df = vmmu.compare(workload=TINY)
    assert isinstance(df, pd.DataFrame)
    assert list(df.index) == list(vmmu.COMPARE_MODES) == [*vmmu.STATIC_MODES, "agile"]
    assert df.loc["native", "overhead"] == 0.0
    assert df.loc["nested", "cycles"] >= df.loc["native", "cycles"]
