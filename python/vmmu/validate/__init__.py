"""Checking vmmu against the machine it runs on (``vmmu validate``, docs/validation.md).

:mod:`vmmu.validate.host` builds a probe (``probe.c`` beside this file), times it natively,
records it with ``vmmu record``, simulates the recording on a preset and sets the measured
ratios beside the predicted ones.
"""

from vmmu.validate.host import HostCheck, ProbeError, check_host

__all__ = ["HostCheck", "ProbeError", "check_host"]
