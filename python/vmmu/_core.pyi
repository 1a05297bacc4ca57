"""Type stub for the native module ``vmmu._core`` (crates/vmmu-py).

Results cross the boundary as JSON text; :mod:`vmmu.api` decodes them. A progress callback is
called about once per million events with ``(done, total)`` (``total`` is ``None`` when the
source does not know it) and stops the run by returning ``False``.
"""

from collections.abc import Callable, Sequence

__version__: str

Progress = Callable[[int, int | None], bool | None]

def run(
    machine: str,
    overrides: Sequence[tuple[str, str]],
    workload: str | None = None,
    trace: str | None = None,
    progress: Progress | None = None,
) -> str:
    """Run one simulation; returns the result JSON (schema ``vmmu.result/2``)."""

def presets() -> list[tuple[str, str]]:
    """The machine presets as ``(name, description)``."""

def profiles() -> list[tuple[str, str]]:
    """The exit cost profiles as ``(name, description)``."""

def profile_toml(name: str) -> str:
    """The TOML text of a cost profile."""

def preset_toml(name: str) -> str:
    """The TOML text of a machine preset."""

def config_toml(machine: str, overrides: Sequence[tuple[str, str]]) -> str:
    """The fully resolved, validated configuration as TOML."""

def workloads() -> str:
    """JSON list: ``[{name, description, params: [{name, default, description}]}]``."""

def did_you_mean(name: str, known: list[str]) -> str:
    """``"did you mean `X`? "`` for the name of ``known`` nearest ``name``, or ``""``."""

def trace_info(path: str, progress: Progress | None = None) -> str:
    """JSON summary of a trace file (read to the end)."""

def trace_convert(src: str, dst: str, to: str, progress: Progress | None = None) -> str:
    """Convert ``src`` to ``dst`` in format ``to`` (``vtrace`` or ``lackey``); JSON summary."""

def trace_check(path: str, progress: Progress | None = None) -> str:
    """JSON report of references outside every mapping of their process."""

def record(
    cmd: Sequence[str],
    output: str,
    no_instr: bool = False,
    follow_children: bool = False,
    native_layout: bool = False,
    progress: Callable[[dict[str, float]], bool | None] | None = None,
    tool_dir: str | None = None,
    valgrind: str | None = None,
    no_deps: bool = False,
) -> str:
    """Record ``cmd`` under Valgrind into ``output``; JSON summary."""

class VmmuError(Exception):
    """Base class of every vmmu error."""

class ConfigError(VmmuError): ...
class WorkloadError(VmmuError): ...
class TraceError(VmmuError): ...
class AddressError(VmmuError): ...
class EventError(VmmuError): ...
class OutOfMemoryError(VmmuError): ...
class CheckError(VmmuError): ...
class Interrupted(VmmuError): ...
class VmmuIOError(VmmuError): ...
