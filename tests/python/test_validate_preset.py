"""``vmmu validate host`` picks the preset of the processor it runs on: every shipped preset a
processor maps to exists, the signatures of the presets' own processors map to them, an
unknown processor falls back with the reason, and a malformed ``/proc/cpuinfo`` is named."""

from __future__ import annotations

from pathlib import Path

import pytest

import vmmu
from vmmu.validate import hostcpu

CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
cpu family\t: {family}
model\t\t: {model}
model name\t: {name}
stepping\t: 7

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
"""


def cpu(vendor: str, family: int, model: int, name: str = "x") -> hostcpu.CpuId:
    text = CPUINFO.format(vendor=vendor, family=family, model=model, name=name)
    return hostcpu.parse_cpuinfo(text)


def test_every_mapped_preset_is_shipped() -> None:
    shipped = set(vmmu.presets())
    assert {row[3] for row in hostcpu.CPU_PRESETS} <= shipped
    assert hostcpu.FALLBACK in shipped


@pytest.mark.parametrize(
    ("vendor", "family", "model", "preset"),
    [
        # This project's machine: Intel Xeon, Cascade Lake SP, under KVM.
        ("GenuineIntel", 6, 85, "cascadelake"),
        # The machines: AMD EPYC 7003 (Milan).
        ("AuthenticAMD", 25, 1, "zen3"),
        ("AuthenticAMD", 25, 17, "zen4"),
        ("GenuineIntel", 6, 151, "golden-cove"),
        ("GenuineIntel", 6, 26, "nehalem-x5560"),
        ("GenuineIntel", 6, 15, "core2-e6300"),
        ("AuthenticAMD", 16, 2, "opteron2350"),
    ],
)
def test_a_known_processor_gets_its_preset_and_the_reason(
    vendor: str, family: int, model: int, preset: str
) -> None:
    got, why = hostcpu.preset_for(cpu(vendor, family, model))
    assert got == preset
    assert why.startswith(f"{vendor} family {family} model {model} is ")


def test_the_first_processor_block_is_read() -> None:
    c = cpu("GenuineIntel", 6, 85, "Intel(R) Xeon(R) Processor @ 2.50GHz")
    assert (c.vendor, c.family, c.model) == ("GenuineIntel", 6, 85)
    assert c.name == "Intel(R) Xeon(R) Processor @ 2.50GHz"


@pytest.mark.parametrize(
    "c",
    [
        hostcpu.CpuId("GenuineIntel", 6, 106),  # Ice Lake SP: no preset
        hostcpu.CpuId("AuthenticAMD", 23, 49),  # Zen 2: no preset
        hostcpu.CpuId("CentaurHauls", 6, 15),  # same family and model, another vendor
    ],
)
def test_an_unknown_processor_falls_back_and_says_so(c: hostcpu.CpuId) -> None:
    got, why = hostcpu.preset_for(c)
    assert got == hostcpu.FALLBACK
    assert c.signature() in why and "--preset" in why


def test_an_unreadable_cpuinfo_falls_back(tmp_path: Path) -> None:
    assert hostcpu.read_cpu(tmp_path / "missing") is None
    got, why = hostcpu.preset_for(None)
    assert got == hostcpu.FALLBACK and "unknown" in why


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("processor : 0\nvendor_id : GenuineIntel\nmodel : 85\n", "no `cpu family` field"),
        (
            "vendor_id : GenuineIntel\ncpu family : 6\nmodel : eighty-five\n",
            "`model` is `eighty-five`, not a number",
        ),
        ("", "no `vendor_id` field"),
    ],
)
def test_a_malformed_cpuinfo_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        hostcpu.parse_cpuinfo(text)
