"""Which machine preset describes the processor ``vmmu validate host`` runs on.

x86 processors name their design by vendor, family and model (CPUID leaf 1, as Linux prints
them in ``/proc/cpuinfo``: ``vendor_id``, ``cpu family``, ``model``). :data:`CPU_PRESETS`
maps each design a shipped preset describes to that preset; the family and model numbers are
Intel's and AMD's own (Intel SDM Vol. 4, Table 2-1, "CPUID Signature Values of DisplayFamily
and DisplayModel"; AMD's Revision Guides and Processor Programming References for families
10h, 19h and 1Ah). A processor no preset describes gets the issue's reference machine,
``zen3``, and the reason says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The preset a processor gets when none describes it.
FALLBACK = "zen3"


@dataclass(frozen=True)
class CpuId:
    """A processor's identity as ``/proc/cpuinfo`` gives it."""

    vendor: str
    family: int
    model: int
    name: str = ""

    def signature(self) -> str:
        """``GenuineIntel family 6 model 85``."""
        return f"{self.vendor} family {self.family} model {self.model}"


#: ``(vendor, family, models, preset, design)``: the designs each shipped preset describes.
CPU_PRESETS: tuple[tuple[str, int, tuple[int, ...], str, str], ...] = (
    # Skylake-SP (steppings 0-4), Cascade Lake SP (5-7) and Cooper Lake (10-11) share model 85
    # and the Skylake server core.
    ("GenuineIntel", 6, (85,), "cascadelake", "Skylake-SP / Cascade Lake SP"),
    # Alder Lake (151, 154) and Raptor Lake (183, 186, 191) P-cores, Sapphire and Emerald
    # Rapids (143, 207): Golden Cove and its Raptor Cove revision.
    (
        "GenuineIntel",
        6,
        (151, 154, 183, 186, 191, 143, 207),
        "golden-cove",
        "Golden Cove / Raptor Cove",
    ),
    # Nehalem-EP (26) and Nehalem desktop and server parts (30, 31, 46).
    ("GenuineIntel", 6, (26, 30, 31, 46), "nehalem-x5560", "Nehalem"),
    # Core 2 (Merom / Conroe, 65 nm: 15; Penryn, 45 nm: 23).
    ("GenuineIntel", 6, (15, 23), "core2-e6300", "Core 2"),
    # Family 10h: Barcelona (2), Shanghai (4), Istanbul (8), Magny-Cours (9).
    ("AuthenticAMD", 16, (2, 4, 8, 9), "opteron2350", "AMD family 10h (K10)"),
    # Family 19h: Milan and Milan-X (1), Chagall (8), Vermeer (33), Cezanne (80).
    ("AuthenticAMD", 25, (1, 8, 33, 80), "zen3", "Zen 3"),
    # Family 19h: Genoa (17), Raphael (97), Phoenix (116, 120), Bergamo (160).
    ("AuthenticAMD", 25, (17, 97, 116, 120, 160), "zen4", "Zen 4"),
)


def parse_cpuinfo(text: str) -> CpuId:
    """The first processor's identity in ``/proc/cpuinfo``'s text; a field missing or not a
    number is an error naming it."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block ends
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    missing = [k for k in ("vendor_id", "cpu family", "model") if k not in fields]
    if missing:
        raise ValueError(f"/proc/cpuinfo: no `{missing[0]}` field in the first processor's block")
    numbers = {}
    for k in ("cpu family", "model"):
        try:
            numbers[k] = int(fields[k])
        except ValueError:
            raise ValueError(f"/proc/cpuinfo: `{k}` is `{fields[k]}`, not a number") from None
    return CpuId(
        vendor=fields["vendor_id"],
        family=numbers["cpu family"],
        model=numbers["model"],
        name=fields.get("model name", ""),
    )


def read_cpu(path: Path = Path("/proc/cpuinfo")) -> CpuId | None:
    """This machine's processor, or ``None`` where ``path`` cannot be read or parsed (not
    Linux, not x86)."""
    try:
        return parse_cpuinfo(path.read_text())
    except (OSError, ValueError):
        return None


def preset_for(cpu: CpuId | None) -> tuple[str, str]:
    """The preset that describes ``cpu`` and why: ``("cascadelake", "GenuineIntel family 6
    model 85 is Skylake-SP / Cascade Lake SP")``; :data:`FALLBACK` with the reason when none
    does."""
    if cpu is None:
        return FALLBACK, f"the processor is unknown (/proc/cpuinfo unreadable): {FALLBACK} used"
    for vendor, family, models, preset, design in CPU_PRESETS:
        if (cpu.vendor, cpu.family) == (vendor, family) and cpu.model in models:
            return preset, f"{cpu.signature()} is {design}"
    return FALLBACK, (
        f"no preset describes {cpu.signature()} ({cpu.name or 'unnamed'}): {FALLBACK} used; "
        "give --preset to choose"
    )
