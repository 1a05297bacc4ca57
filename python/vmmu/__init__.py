"""vmmu — simulate virtualized address translation.

A Rust engine (x86 page tables in simulated memory, TLBs, page-walk caches, the native and the
2D walk) with this Python front: :func:`run` one simulation, :func:`compare` paging modes,
size a translation structure in one pass (:func:`sizing`), list :func:`presets` and
:func:`workloads`; the ``vmmu`` command line (:mod:`vmmu.cli`).
"""

from vmmu import exceptions
from vmmu._core import __version__
from vmmu.api import (
    COMPARE_MODES,
    MODES,
    POLICIES,
    STATIC_MODES,
    Result,
    compare,
    config,
    preset_toml,
    presets,
    profile_toml,
    profiles,
    run,
    trace_convert,
    trace_info,
    workloads,
)
from vmmu.sizing_study import SizingStudy
from vmmu.sizing_study import study as sizing

__all__ = [
    "COMPARE_MODES",
    "MODES",
    "POLICIES",
    "STATIC_MODES",
    "Result",
    "SizingStudy",
    "__version__",
    "compare",
    "config",
    "exceptions",
    "preset_toml",
    "presets",
    "profile_toml",
    "profiles",
    "run",
    "sizing",
    "trace_convert",
    "trace_info",
    "workloads",
]
