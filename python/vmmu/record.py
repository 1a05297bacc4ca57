"""Recording real programs: the bodies of ``vmmu record`` and ``vmmu trace check``.

``record`` runs a command under Valgrind with the vg-memtrace tool (``tools/vg-memtrace``) and
writes every memory reference and address-space event into a ``.vtrace`` as the program runs
(docs/recording.md). ``check`` replays a trace and reports references outside the mappings
of their process.

>>> from vmmu.record import record, check
>>> s = record(["gzip", "-c", "README.md"], "/tmp/gz.vtrace", no_instr=False,
...            follow_children=False, native_layout=True, progress=False)
>>> check("/tmp/gz.vtrace")["ok"]
True
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, TextIO

from vmmu import _core
from vmmu._format import human


def _bytes(n: float) -> str:
    for div, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n:.0f} B"


class ProgressLine:
    """A live one-line status on a terminal: references, events, bytes written, compression
    ratio, references per second and elapsed time. Prints nothing when ``stream`` is not a
    terminal (unless ``force``)."""

    def __init__(self, stream: TextIO | None = None, force: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.live = force or self.stream.isatty()
        self.shown = False
        self.t0 = time.monotonic()

    def __call__(self, p: dict[str, Any] | str) -> bool:
        if not self.live:
            return True
        if isinstance(p, str):  # the binding may pass the progress as JSON text
            p = json.loads(p)
        elapsed = p.get("elapsed_s") or (time.monotonic() - self.t0)
        rate = p["refs"] / elapsed if elapsed > 0 else 0.0
        ratio = p.get("compression_ratio") or 0.0
        minutes, seconds = divmod(int(elapsed), 60)
        line = (
            f"recording: {human(p['refs'])} refs, {human(p['events'])} events, "
            f"{_bytes(p['bytes_written'])} written"
            + (f" ({ratio:.0f}x)" if ratio > 0 else "")
            + f", {human(rate)} refs/s, {minutes}:{seconds:02d}"
        )
        self.stream.write("\r" + line.ljust(78) + "\x1b[K")
        self.stream.flush()
        self.shown = True
        return True

    def close(self) -> None:
        """Ends the line (once something was shown)."""
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False


def default_output(cmd: list[str]) -> str:
    """``gzip -c x`` → ``gzip.vtrace``: the command's base name with ``.vtrace``."""
    base = os.path.basename(cmd[0]) if cmd else "trace"
    return f"{base or 'trace'}.vtrace"


def record(
    cmd: list[str],
    output: str,
    no_instr: bool,
    follow_children: bool,
    native_layout: bool,
    progress: bool,
    no_deps: bool = False,
) -> dict:
    """Records ``cmd`` into ``output`` and returns the summary (docs/recording.md,
    "Summary"): ``refs``, ``events``, ``processes``, ``trace_bytes``, ``bytes_per_ref``,
    ``refs_per_s``, ``exit_code``, ``signal``, ``truncated``, ``interrupted``, and
    ``warnings``: one sentence per child or exec that was not recorded, naming its pid and
    program...

    ``no_deps`` leaves load dependences untracked (the trace's ``dependences`` is then false);
    otherwise ``dependent_refs`` counts the data references whose address depends on a load.

    ``progress`` shows a live line on stderr when it is a terminal. Ctrl-C stops the program
    and finishes the trace as truncated (``interrupted`` is then true). Errors (command not
    found, Valgrind or the tool missing, a full disk) raise :mod:`vmmu.exceptions` whose
    message says what to do.
    """
    line = ProgressLine() if progress else None
    try:
        text = _core.record(
            list(cmd),
            output,
            no_instr=no_instr,
            follow_children=follow_children,
            native_layout=native_layout,
            no_deps=no_deps,
            progress=line,
        )
    finally:
        if line is not None:
            line.close()
    return json.loads(text)


def check(path: str) -> dict:
    """Replays the trace at ``path`` and returns the report (docs/recording.md, "Checking a
    trace"): ``ok``, ``refs``, ``outside``, ``readonly_writes``, ``bad_events``, and per
    process ``processes[i]`` with ``pid``, ``refs``, ``outside`` and ``examples``."""
    return json.loads(_core.trace_check(path))


def check_text(report: dict) -> str:
    """The report as lines for a terminal (what ``vmmu trace check`` prints)."""
    lines = [
        f"{report['trace']}: {report['events']} events, {report['refs']} references, "
        f"{len(report['processes'])} processes"
    ]
    for p in report["processes"]:
        extra = f", {p['unchecked']} unchecked (no mapping events)" if p["unchecked"] else ""
        lines.append(
            f"  pid {p['pid']}: {p['refs']} references, {p['outside']} outside every mapping, "
            f"{p['readonly_writes']} writes to read-only mappings{extra}"
        )
        for b in p["examples"]:
            lines.append(f"    event {b['event']}: {b['kind']} at {b['va']:#x}: {b['reason']}")
    for b in report["bad_event_examples"]:
        lines.append(f"  event {b['event']} (pid {b['pid']}): {b['what']}: {b['reason']}")
    lines.append(
        "OK: every reference is inside a mapping of its process" if report["ok"] else "FAILED"
    )
    return "\n".join(lines)
