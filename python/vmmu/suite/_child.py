"""The process that records one suite run: ``python -m vmmu.suite._child SPEC.json``.

It exists so that the recorded program's stdout and stderr go to the run's log (this process
points its own descriptors 1 and 2 there before the recorder starts the program, which
inherits them) while the suite's progress display keeps the terminal. SPEC.json names the
command, the trace, the log, the stdin file (or none), ``follow_children`` and where to write
the recorder's summary; progress is written as one JSON line per report to descriptor
``progress_fd``; once that pipe is closed (the suite exited) the recording stops. Ctrl-C
(SIGINT) stops the program and finishes the trace as truncated.
"""

from __future__ import annotations

import json
import os
import signal
import sys


def main(spec_path: str) -> int:
    # A process started from a shell's background job inherits SIGINT ignored, and Python then
    # installs no handler: restore it, so the suite's SIGINT stops the recording.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    stdin = os.open(spec["stdin"] or os.devnull, os.O_RDONLY)
    progress = os.fdopen(spec["progress_fd"], "w", buffering=1)
    os.dup2(stdin, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)

    def report(p: dict) -> bool:
        # A closed pipe means the suite went away: nobody will finish this entry, so stop the
        # program (the trace is finished as truncated and recorded again next time).
        try:
            progress.write(json.dumps(p) + "\n")
        except OSError:
            return False
        return True

    from vmmu import _core

    try:
        text = _core.record(
            spec["argv"],
            spec["trace"],
            follow_children=spec["follow_children"],
            progress=report,
        )
        summary = json.loads(text)
    except KeyboardInterrupt:
        summary = {"error": "interrupted", "interrupted": True, "truncated": True}
    except Exception as e:  # the recorder's own error (Valgrind missing, disk full...)
        summary = {"error": f"{type(e).__name__}: {e}"}
    tmp = spec["summary"] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    os.replace(tmp, spec["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
