"""The option table (vmmu.options.OPTIONS): the CLI options, the API keywords and the sweep's
options are its entries, and each entry sets the configuration fields it names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import vmmu
from vmmu import api
from vmmu.cli import cli
from vmmu.options import OPTIONS
from vmmu.sweep.spec import run_options

DOCS = Path(__file__).resolve().parents[2] / "docs"

#: A value of each option that differs from the bhargava08 preset's, and how it reads back
#: from the resolved configuration (the field, the value there).
SAMPLES = {
    "pwc": ("psc", [("machine.pwc.design", "psc")]),
    "core_model": ("interval", [("machine.core.model", "interval")]),
    "nested_page_size": ("2m", [("host.nested_page_size", "2M")]),
    "guest_page_size": ("mixed", [("guest.page_size", "mixed")]),
    "thp": ("always", [("guest.thp", "always")]),
    "levels": (5, [("guest.format", "long5"), ("host.nested_levels", 5)]),
    "seed": (7, [("seed", 7)]),
    "check": (True, [("check", True)]),
    "technique": ("pv", [("hypervisor.technique", "pv")]),
    "profile": ("esx-nehalem", [("hypervisor.profile", "esx-nehalem")]),
    "vpid": (False, [("machine.tlb.vpid", False)]),
    "pcid": (False, [("machine.tlb.pcid", False)]),
    "backing": ("lazy", [("hypervisor.backing", "lazy")]),
    "switch_at": ([1000, 5000], [("hypervisor.switch.at", [1000, 5000])]),
    "warmup": (100, [("warmup.refs", 100)]),
    "warmup_instructions": (300, [("warmup.instructions", 300)]),
    "warmup_phase": (1, [("warmup.phase", 1)]),
    "stop_phase": (2, [("stop.phase", 2)]),
    "l1": ("3d", [("nested_virt.l1", "3d")]),
    "vcpus": (2, [("guest.vcpus", 2)]),
    "overcommit": (True, [("guest.overcommit", True)]),
    "pin": ({3: 0}, [("guest.affinity", {"3": 0})]),
    "policy": ("oracle", [("policy.kind", "oracle")]),
    "time_scale": (0.5, [("policy.time_scale", 0.5)]),
}


def _mode(name: str) -> str:
    """A mode the option applies to: policies need adaptive, an L1 kind nested-virt."""
    return {"policy": "adaptive", "time_scale": "adaptive", "l1": "nested-virt"}.get(name, "shadow")


def _field(cfg: dict, dotted: str):
    for part in dotted.split("."):
        cfg = cfg[part]
    return cfg


def test_every_option_has_a_sample():
    assert set(SAMPLES) == {o.name for o in OPTIONS}


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: o.name)
def test_each_keyword_sets_the_fields_its_entry_names(opt):
    value, fields = SAMPLES[opt.name]
    # pv is direct paging: checked apart from switching, which needs hvm.
    mode = _mode(opt.name)
    cfg = tomllib.loads(vmmu.config(mode=mode, **{opt.name: value}))
    assert [f for f, _ in fields] == list(opt.keys)
    for field, want in fields:
        assert _field(cfg, field) == want, field
    assert all(key in opt.help_text() for key in opt.keys)


def test_the_cli_has_one_option_per_entry_between_machine_and_set():
    run = cli.commands["run"]
    names = [p.name for p in run.params if isinstance(p, type(run.params[0]))]
    first, last = names.index("machine"), names.index("set_")
    assert names[first + 1 : last] == [o.name for o in OPTIONS]


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: o.name)
def test_the_cli_option_gives_the_api_keyword(invoke, opt):
    value, _ = SAMPLES[opt.name]
    if opt.value.flag:
        args = [opt.flag]
    elif opt.name == "pin":
        args = [opt.flag, "3=0"]
    elif opt.name == "switch_at":
        args = [opt.flag, "1K,5K"]
    elif opt.name in ("vpid", "pcid"):
        args = [opt.flag, "off"]
    else:
        args = [opt.flag, str(value)]
    mode = _mode(opt.name)
    r = invoke("config", "--mode", mode, *args)
    assert r.exit_code == 0, r.stderr
    assert tomllib.loads(r.stdout) == tomllib.loads(vmmu.config(mode=mode, **{opt.name: value}))


def test_an_unknown_keyword_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="'nested_pages'"):
        api.overrides(nested_pages="2M")


def test_a_sweep_takes_every_option():
    assert run_options() == ["machine", "mode", "workload", "trace", *(o.name for o in OPTIONS)]


@pytest.mark.parametrize("doc", ["python-api.md", "cli.md"])
def test_every_option_is_documented(doc):
    text = (DOCS / doc).read_text()
    for opt in OPTIONS:
        name = f"`{opt.name}`" if doc == "python-api.md" else opt.flag
        assert name in text, f"{doc} does not name {name}"
