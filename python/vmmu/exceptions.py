"""Exceptions raised by vmmu.

Every error the engine reports has its own class under :class:`VmmuError`; the message is the
engine's own text, which names the configuration field, the trace line or byte offset, or the
address at fault::

    try:
        vmmu.run(set={"machine.tlb.l1d.0.ways": 3}, workload="stream")
    except vmmu.exceptions.ConfigError as e:
        print(e)  # invalid configuration: machine.tlb.l1d[0].ways: 3 ways do not divide 64 entries
"""

from vmmu._core import (
    AddressError,
    CheckError,
    ConfigError,
    EventError,
    Interrupted,
    OutOfMemoryError,
    TraceError,
    VmmuError,
    VmmuIOError,
    WorkloadError,
)

__all__ = [
    "AddressError",
    "CheckError",
    "ConfigError",
    "EventError",
    "Interrupted",
    "OutOfMemoryError",
    "TraceError",
    "VmmuError",
    "VmmuIOError",
    "WorkloadError",
]
