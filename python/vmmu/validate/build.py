"""Building the validation probes: a C source compiled with ``gcc -O2`` into the user's cache.

Both probes of ``vmmu validate host`` (``probe.c``, the access-pattern probe, and
``window.c``, the core's window, docs/validation.md) are built here, each into a file named by
a digest of its sources and the compiler's version, so a build is reused until either
changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vmmu._cache import user_cache_dir
from vmmu.exceptions import VmmuError


class ProbeError(VmmuError):
    """A probe could not be built, run or recorded; the message says which and why."""


def build(source: Path, headers: Sequence[Path] = (), cache: Path | None = None) -> Path:
    """``source`` (including ``headers``, found beside it) built with ``gcc -O2`` into
    ``cache`` (default ``$XDG_CACHE_HOME/vmmu/probe`` or ``~/.cache/vmmu/probe``): taken from
    there when a build of the same sources with the same compiler is there, else built."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise ProbeError(
            "gcc not found on PATH: `vmmu validate host` builds its probes with gcc -O2 "
            "(Debian: apt-get install gcc)"
        )
    version = subprocess.run([gcc, "--version"], capture_output=True, text=True).stdout
    digest = hashlib.sha256()
    for part in (source.read_bytes(), *(h.read_bytes() for h in headers), version.encode()):
        digest.update(part)
    out_dir = cache or user_cache_dir("probe")
    out = out_dir / f"{source.stem}-{digest.hexdigest()[:16]}"
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    includes = [a for d in dict.fromkeys(str(h.parent) for h in headers) for a in ("-I", d)]
    cmd = [gcc, "-O2", *includes, "-o", str(tmp), str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        hint = (
            " (valgrind/valgrind.h is missing: install Valgrind's headers, Debian: "
            "apt-get install valgrind)"
            if "valgrind.h" in done.stderr
            else ""
        )
        raise ProbeError(
            f"building {source.name} failed{hint}: {' '.join(cmd)}\n{done.stderr.strip()}"
        )
    os.replace(tmp, out)
    return out


def run_json(
    cmd: Sequence[str], what: str, preexec_fn: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Runs a built probe and returns the one JSON object it prints; a failure or anything
    else printed is a :class:`ProbeError` naming ``what``."""
    done = subprocess.run(list(cmd), capture_output=True, text=True, preexec_fn=preexec_fn)
    if done.returncode != 0:
        raise ProbeError(
            f"{what} failed with status {done.returncode}: {done.stderr.strip() or 'no message'}"
        )
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise ProbeError(f"{what} printed no JSON ({e}): {done.stdout[:200]!r}") from None
