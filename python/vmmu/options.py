"""The options that configure a run, each defined once in :data:`OPTIONS`.

An :class:`Option` says its keyword (``nested_page_size``; ``--nested-page-size`` on the command
line), its value (a :class:`Value`: the type, the choices, how text is read), its help, the
configuration fields it sets and its default. Everything that takes options reads this table:

- :mod:`vmmu.cli` decorates its commands with one click option per entry;
- :func:`vmmu.api.overrides` turns the keywords of :func:`vmmu.run` into ``(dotted.path,
  value)`` overrides, the same ones ``--set`` gives;
- :mod:`vmmu.sweep.spec` checks a sweep's option values with it.

A value arrives three ways: as command-line text (:meth:`Value.parse`), as a Python value from
the API (written as a TOML literal by :meth:`Value.toml`), and as a TOML value from a sweep
spec (checked by :meth:`Value.check`). ``machine`` (the preset the overrides apply to),
``mode`` and ``set`` (raw overrides, applied last) are not in the table: they are not fields
that one option sets.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vmmu._core import did_you_mean
from vmmu.exceptions import ConfigError

#: Paging modes the engine implements, in display order; ``adaptive`` switches between
#: shadow and nested paging by a policy (``docs/policies.md``); ``nested-virt`` runs the guest
#: as an L2 guest of an L1 hypervisor of kind :data:`L1_KINDS`; ``agile`` is agile paging,
#: shadow tables whose walk continues in nested mode below a switching entry
#: (``docs/model.md``).
MODES: tuple[str, ...] = ("native", "nested", "shadow", "adaptive", "nested-virt", "agile")

#: L1 hypervisors of a ``nested-virt`` run (``nested_virt.l1``): EPT on EPT, shadow on EPT, PVM,
#: the 3D walk.
L1_KINDS: tuple[str, ...] = ("ept", "shadow", "pvm", "3d")

#: Paging-mode policies of an adaptive run (``policy.kind``, ``docs/policies.md``).
POLICIES: tuple[str, ...] = ("dav2m", "costmodel", "oracle", "static-shadow", "static-nested")

#: How sensitive operations reach the hypervisor (``--technique``).
TECHNIQUES: tuple[str, ...] = ("hvm", "pv", "previrt")

#: When nested-paging memory is backed (``--backing``).
BACKINGS: tuple[str, ...] = ("eager", "lazy")

#: Page-walk caching designs (``--pwc``).
PWC_DESIGNS: tuple[str, ...] = ("none", "1d", "2d", "2d+nt", "psc")

#: Core models (``--core-model``, ``machine.core.model``; docs/model.md "Timing").
CORE_MODELS: tuple[str, ...] = ("additive", "interval")

#: Page sizes of the nested tables and of the guest's mappings.
NESTED_PAGE_SIZES: tuple[str, ...] = ("4K", "2M", "1G")
GUEST_PAGE_SIZES: tuple[str, ...] = ("4K", "2M", "1G", "mixed")
#: Linux's transparent huge page modes (``guest.thp``).
THP_MODES: tuple[str, ...] = ("never", "madvise", "always")

#: ``levels`` → the guest's paging format.
LEVELS: dict[int, str] = {4: "long4", 5: "long5"}


#: The names of nested-virt runs by L1 kind, as ``vmmu compare --modes`` takes them:
#: ``nested-virt:ept``, ... (``nested-virt`` alone is the default kind, ``ept``).
NESTED_VIRT_MODES: tuple[str, ...] = tuple(f"nested-virt:{k}" for k in L1_KINDS)


def split_mode(mode: str) -> tuple[str, str | None]:
    """A mode name as :func:`check_modes` takes it → (the paging mode, the L1 kind of a
    ``nested-virt:KIND`` name, else None)."""
    base, sep, kind = mode.partition(":")
    return (base, kind) if sep else (mode, None)


def check_modes(modes: Iterable[str]) -> list[str]:
    """``modes`` (each a mode of :data:`MODES`, a nested-virt run of one L1 kind of
    :data:`NESTED_VIRT_MODES`, or a policy of :data:`POLICIES`, an adaptive run with it),
    checked; raises ``ValueError`` naming an unknown one and the nearest known."""
    modes = list(modes)
    known = [*MODES, *NESTED_VIRT_MODES, *POLICIES]
    unknown = [m for m in modes if m not in known]
    if unknown:
        hint = did_you_mean(unknown[0], known)
        raise ValueError(
            f"unknown mode `{', '.join(unknown)}` ({hint}modes: {', '.join(MODES)}; "
            f"nested-virt kinds: {', '.join(NESTED_VIRT_MODES)}; "
            f"policies, each an adaptive run: {', '.join(POLICIES)})"
        )
    if not modes:
        raise ValueError("no modes to run")
    return modes


def typed(v: Any) -> str:
    """``v`` named by its TOML type, for an error: ``a string ("x")``."""
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number"}
    kind = names.get(type(v), "a list" if isinstance(v, list) else "a table")
    return f"{kind} ({json.dumps(v, default=str)})"


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_count(text: str, what: str) -> int:
    """A count such as ``1000``, ``2.5M`` or ``1e6`` (decimal multiples); ``what`` names the
    option in the error."""
    t = text.strip().replace("_", "")
    mult = {"K": 1e3, "M": 1e6, "G": 1e9}.get(t[-1:].upper(), 1.0)
    body = t[:-1] if mult != 1.0 else t
    try:
        value = float(body) * mult
    except ValueError:
        raise ValueError(f"{what}: `{text}` is not a count (e.g. 1000, 2.5M)") from None
    if value < 0 or value != int(value):
        raise ValueError(f"{what}: `{text}` is not a whole non-negative count")
    return int(value)


# ---------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True)
class Value:
    """A string option's value; the subclasses are the other kinds.

    On the command line it is one argument (``metavar``); :meth:`parse` reads it. A kind with
    ``choices`` is offered as those words; ``flag`` takes no argument; ``multiple`` may be
    repeated (:meth:`parse_all` reads the repeats).
    """

    #: What the value is, for a sweep's error ("a cost profile name or .toml file").
    what: str = "a value"
    metavar: str | None = None

    #: The words the command line accepts, when the value is one of a few.
    choices: tuple[str, ...] | None = None
    case_sensitive: bool = True
    flag: bool = False
    multiple: bool = False
    #: The smallest integer the command line accepts (integer kinds).
    minimum: int | None = None
    #: The Python type click converts the argument to (``int``, ``float``), or None for text.
    number: type | None = None

    def parse(self, text: str, option: str) -> Any:
        """The value of command-line ``text`` given to ``option`` (``--warmup``)."""
        return text

    def parse_all(self, texts: Iterable[str], option: str) -> Any:
        """The value of a repeatable option given ``texts``."""
        return [self.parse(t, option) for t in texts]

    def toml(self, v: Any) -> str:
        """``v`` as the text of a ``--set`` value (a TOML literal)."""
        return f'"{v}"'

    def check(self, v: Any) -> Any:
        """A sweep spec's TOML value, checked; raises ``TypeError``/``ValueError``."""
        if not isinstance(v, str) or not v.strip():
            raise TypeError(f"expected {self.what} (a non-empty string), got {typed(v)}")
        return v

    def given(self, v: Any) -> bool:
        """Whether the keyword value ``v`` sets anything (None leaves the field alone)."""
        return v is not None


@dataclass(frozen=True)
class Choice(Value):
    """One of ``choices``; with ``upper``, any case, written in upper case (``2m`` → ``2M``)
    except the word ``mixed``."""

    upper: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "case_sensitive", not self.upper)

    def _norm(self, v: str) -> str:
        return v.upper() if self.upper and v.lower() != "mixed" else v

    def parse(self, text: str, option: str) -> Any:
        return self._norm(text)

    def toml(self, v: Any) -> str:
        return f'"{self._norm(str(v))}"'

    def check(self, v: Any) -> Any:
        assert self.choices is not None
        if not isinstance(v, str):
            raise TypeError(f"expected {self.what} ({', '.join(self.choices)}), got {typed(v)}")
        norm = self._norm(v)
        if norm not in self.choices:
            raise ValueError(f"`{v}` is not {self.what} ({', '.join(self.choices)})")
        return norm


@dataclass(frozen=True)
class Integer(Value):
    """An integer, at least ``minimum`` when one is given."""

    number: type | None = int

    def toml(self, v: Any) -> str:
        return str(int(v))

    def check(self, v: Any) -> Any:
        if not _integer(v):
            what = "a non-negative integer" if self.minimum == 0 else "an integer"
            raise TypeError(f"expected {what}, got {typed(v)}")
        if self.minimum is not None and v < self.minimum:
            raise ValueError(f"{v} is negative" if self.minimum == 0 else f"{v} < {self.minimum}")
        return v


@dataclass(frozen=True)
class Number(Value):
    """A number, written as a float."""

    number: type | None = float

    def toml(self, v: Any) -> str:
        return repr(float(v))

    def check(self, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"expected a number, got {typed(v)}")
        return v


@dataclass(frozen=True)
class Flag(Value):
    """On when given; off (the field's own value) otherwise."""

    flag: bool = True

    def toml(self, v: Any) -> str:
        return "true"

    def given(self, v: Any) -> bool:
        return bool(v)

    def check(self, v: Any) -> Any:
        return _boolean(v)


@dataclass(frozen=True)
class OnOff(Value):
    """``on`` or ``off`` on the command line, ``True`` or ``False`` from Python."""

    choices: tuple[str, ...] | None = ("on", "off")

    def parse(self, text: str, option: str) -> Any:
        return text == "on"

    def toml(self, v: Any) -> str:
        return "true" if v else "false"

    def check(self, v: Any) -> Any:
        return _boolean(v)


def _boolean(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if v in ("on", "off"):
        return v == "on"
    raise TypeError(f'expected true/false (or "on"/"off"), got {typed(v)}')


@dataclass(frozen=True)
class Count(Value):
    """A non-negative count; on the command line with decimal multiples (``2.5M``)."""

    def parse(self, text: str, option: str) -> Any:
        return parse_count(text, option)

    def toml(self, v: Any) -> str:
        return str(int(v))

    def check(self, v: Any) -> Any:
        if not _integer(v):
            raise TypeError(f"expected a non-negative integer, got {typed(v)}")
        if v < 0:
            raise ValueError(f"{v} is negative")
        return v


@dataclass(frozen=True)
class Counts(Value):
    """A list of counts; on the command line separated by commas (``1M,5M``)."""

    def parse(self, text: str, option: str) -> Any:
        return [parse_count(x, option) for x in text.split(",") if x.strip()]

    def toml(self, v: Any) -> str:
        return json.dumps([int(n) for n in v])

    def check(self, v: Any) -> Any:
        if not isinstance(v, list) or not all(_integer(n) and n >= 0 for n in v):
            raise TypeError(f"expected a list of non-negative integers, got {typed(v)}")
        return v


@dataclass(frozen=True)
class Pins(Value):
    """Thread ids mapped to vCPUs: ``TID=VCPU`` repeated on the command line, a mapping
    ``{tid: vcpu}`` from Python or a sweep spec."""

    multiple: bool = True

    def parse(self, text: str, option: str) -> Any:
        tid, sep, vcpu = text.partition("=")
        if not sep or not tid.strip().isdigit() or not vcpu.strip().isdigit():
            raise ValueError(f"{text!r}: expected TID=VCPU, e.g. 3=1")
        return int(tid), int(vcpu)

    def parse_all(self, texts: Iterable[str], option: str) -> Any:
        return dict(self.parse(t, option) for t in texts) or None

    def toml(self, v: Any) -> str:
        table = ", ".join(f'"{int(t)}" = {int(c)}' for t, c in sorted(v.items()))
        return "{ " + table + " }"

    def given(self, v: Any) -> bool:
        return bool(v)

    def check(self, v: Any) -> Any:
        ok = isinstance(v, Mapping) and all(
            str(t).isdigit() and _integer(c) and c >= 0 for t, c in v.items()
        )
        if not ok:
            raise TypeError(f"expected a table of thread id = vCPU, got {typed(v)}")
        return {int(t): c for t, c in v.items()}


@dataclass(frozen=True)
class Levels(Value):
    """Paging levels, 4 or 5: the guest's format and the nested tables' levels at once."""

    choices: tuple[str, ...] | None = tuple(map(str, LEVELS))

    def parse(self, text: str, option: str) -> Any:
        return int(text)

    def pairs(self, keys: tuple[str, ...], v: Any) -> list[tuple[str, str]]:
        levels = int(v)
        if levels not in LEVELS:
            raise ConfigError(
                f"invalid configuration: levels: {levels} is not one of "
                f"{', '.join(map(str, LEVELS))}"
            )
        fmt, nested = keys
        return [(fmt, f'"{LEVELS[levels]}"'), (nested, str(levels))]

    def check(self, v: Any) -> Any:
        if not _integer(v):
            raise TypeError(f"expected an integer ({', '.join(map(str, LEVELS))}), got {typed(v)}")
        if v not in LEVELS:
            raise ValueError(f"{v} is not one of {', '.join(map(str, LEVELS))}")
        return v


# ---------------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True)
class Option:
    """One option: keyword ``name``, its :class:`Value`, the configuration fields ``keys`` it
    sets, its help (``{key}`` stands for the fields) and its default (the keyword's default
    in Python; None and False leave the fields as the machine and profile set them)."""

    name: str
    value: Value
    keys: tuple[str, ...]
    help: str
    default: Any = None

    @property
    def flag(self) -> str:
        """The command-line option: ``--nested-page-size``."""
        return "--" + self.name.replace("_", "-")

    def help_text(self) -> str:
        return self.help.format(key=", ".join(self.keys))

    def pairs(self, v: Any) -> list[tuple[str, str]]:
        """The overrides keyword value ``v`` stands for (none when it sets nothing)."""
        if not self.value.given(v):
            return []
        if isinstance(self.value, Levels):
            return self.value.pairs(self.keys, v)
        return [(key, self.value.toml(v)) for key in self.keys]


OPTIONS: tuple[Option, ...] = (
    Option(
        "pwc",
        Choice("a page-walk caching design", choices=PWC_DESIGNS),
        ("machine.pwc.design",),
        "Page-walk caching design ({key}).",
    ),
    Option(
        "core_model",
        Choice("a core model", choices=CORE_MODELS),
        ("machine.core.model",),
        "How the counts become time: additive (no overlap) or interval (an out-of-order "
        "window; {key}).",
    ),
    Option(
        "l1",
        Choice("an L1 hypervisor kind", choices=L1_KINDS),
        ("nested_virt.l1",),
        "With --mode nested-virt: the L1 hypervisor, EPT on EPT or a 3D walk ({key}).",
    ),
    Option(
        "nested_page_size",
        Choice("a nested page size", choices=NESTED_PAGE_SIZES, upper=True),
        ("host.nested_page_size",),
        "Page size of the nested tables ({key}).",
    ),
    Option(
        "guest_page_size",
        Choice("a guest page size", choices=GUEST_PAGE_SIZES, upper=True),
        ("guest.page_size",),
        "Page sizes the guest maps with ({key}).",
    ),
    Option(
        "thp",
        Choice("a transparent huge page mode", choices=THP_MODES),
        ("guest.thp",),
        "Transparent huge pages where the guest page size is 4K ({key}).",
    ),
    Option(
        "levels",
        Levels("paging levels"),
        ("guest.format", "host.nested_levels"),
        "Paging levels of guest and nested tables ({key}).",
    ),
    Option(
        "seed",
        Integer("a seed", minimum=0),
        ("seed",),
        "Seed for every random choice of the run ({key}).",
    ),
    Option(
        "check",
        Flag("a flag"),
        ("check",),
        "Verify every translation against the composed mappings ({key}).",
        False,
    ),
    Option(
        "technique",
        Choice("a technique", choices=TECHNIQUES),
        ("hypervisor.technique",),
        "How sensitive operations reach the hypervisor ({key}).",
    ),
    Option(
        "profile",
        Value("a cost profile name or .toml file", metavar="NAME|FILE.toml"),
        ("hypervisor.profile",),
        "Hypervisor cost profile ({key}).",
    ),
    Option(
        "vpid",
        OnOff("a flag"),
        ("machine.tlb.vpid",),
        "Tag TLB entries with the VPID/ASID ({key}).",
    ),
    Option(
        "pcid",
        OnOff("a flag"),
        ("machine.tlb.pcid",),
        "Tag TLB entries with the PCID ({key}).",
    ),
    Option(
        "backing",
        Choice("a backing", choices=BACKINGS),
        ("hypervisor.backing",),
        "Nested paging: back guest memory up front or on first touch ({key}).",
    ),
    Option(
        "switch_at",
        Counts("instruction counts", metavar="N,M,..."),
        ("hypervisor.switch.at",),
        "Switch the VM between shadow and nested paging at these instruction counts "
        "({key}; strictly increasing, e.g. 1M,5M).",
    ),
    Option(
        "warmup",
        Count("a count of references", metavar="REFS"),
        ("warmup.refs",),
        "Simulate this many references first and leave them out of every count ({key}).",
    ),
    Option(
        "warmup_instructions",
        Count("a count of instructions", metavar="N"),
        ("warmup.instructions",),
        "Like --warmup, counted in instructions ({key}).",
    ),
    Option(
        "warmup_phase",
        Integer("a phase marker id", metavar="ID", minimum=0),
        ("warmup.phase",),
        "Like --warmup, up to and including the trace's first phase marker ID "
        "(VMMU_PHASE(ID) in a recorded program; {key}).",
    ),
    Option(
        "stop_phase",
        Integer("a phase marker id", metavar="ID", minimum=0),
        ("stop.phase",),
        "Stop the run at the first phase marker ID after the warm-up: nothing after it is "
        "simulated ({key}; one vCPU).",
    ),
    Option(
        "vcpus",
        Integer("a vCPU count", metavar="N", minimum=0),
        ("guest.vcpus",),
        "Virtual processors of the guest ({key}; at most machine.core.cores unless --overcommit).",
    ),
    Option(
        "overcommit",
        Flag("a flag"),
        ("guest.overcommit",),
        "Allow more vCPUs than the machine has cores ({key}).",
        False,
    ),
    Option(
        "pin",
        Pins("thread pins", metavar="TID=VCPU"),
        ("guest.affinity",),
        "Pin a guest thread to a vCPU ({key}; repeatable).",
    ),
    Option(
        "policy",
        Choice("a policy", choices=POLICIES),
        ("policy.kind",),
        "With --mode adaptive: the policy that switches between shadow and nested paging "
        "({key}; default dav2m); parameters as --set policy.KEY=VALUE (docs/policies.md).",
    ),
    Option(
        "time_scale",
        Number("a time scale", metavar="F"),
        ("policy.time_scale",),
        "With --mode adaptive: shrink every policy window (and threshold) by F, e.g. 1e-4 for "
        "a PMU window of 1e5 instead of seed 001's 1e9 instructions ({key}).",
    ),
)

#: :data:`OPTIONS` by keyword.
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
