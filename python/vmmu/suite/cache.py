"""Where the suite keeps what it builds, generates and records, and how each is named.

The cache is a directory outside the repository: ``--cache DIR``, else ``$VMMU_SUITE_CACHE``,
else ``$XDG_CACHE_HOME/vmmu/suite``, else ``~/.cache/vmmu/suite``. Everything in it is
content-addressed — its name ends with a hash of what produced it — so a change to an entry's
definition, its input generator, its sources, the program's version or the recorder's source
gives a new name and nothing is silently reused:

```
build/NAME-HASH/            compiled sources (key: sources, build command, compiler version)
inputs/NAME-SCALE-HASH/     generated inputs (key: generators' source text, parameters)
traces/NAME/SCALE-HASH/     trace.vtrace, program.log, meta.json (key: all of the above,
                            the scale's parameters, every package's version, the recorder)
```

A trace directory's ``meta.json`` is written last, once the recording finished and was
measured, with ``"complete": true``; a directory whose trace has no such file was interrupted
(its trace is readable and marked truncated) and is recorded again from the start.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import vmmu
from vmmu.suite import inputs as inputs_mod
from vmmu.suite import load as load_mod
from vmmu.suite.entries import Entry, Server

ENV_CACHE = "VMMU_SUITE_CACHE"


def cache_dir(option: str | os.PathLike | None = None) -> Path:
    """The cache directory: ``option``, ``$VMMU_SUITE_CACHE``, ``$XDG_CACHE_HOME/vmmu/suite``
    or ``~/.cache/vmmu/suite``, in that order."""
    if option:
        return Path(option).expanduser()
    if os.environ.get(ENV_CACHE):
        return Path(os.environ[ENV_CACHE]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vmmu" / "suite"


def checkout() -> Path:
    """The source tree vmmu runs from (the suite's C and Java sources are in its
    ``tools/suite/src``); an error when vmmu is not run from one."""
    root = Path(vmmu.__file__).resolve().parents[2]
    if not (root / "tools" / "suite" / "src").is_dir():
        raise FileNotFoundError(
            f"the suite's sources (tools/suite/src) are not under {root}: run vmmu from its "
            "source tree (make install)"
        )
    return root


def src_dir() -> Path:
    """``tools/suite/src`` of the checkout."""
    return checkout() / "tools" / "suite" / "src"


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _source_files(entry: Entry) -> list[str]:
    """The files of ``tools/suite/src`` the entry builds or runs."""
    names = set(entry.build.sources) if entry.build else set()
    for arg in entry.run.argv:
        names.update(re.findall(r"\{src\}/([\w.-]+)", arg))
    return sorted(names)


def _file_hashes(directory: Path, names: list[str]) -> dict[str, str]:
    return {n: hashlib.sha256((directory / n).read_bytes()).hexdigest() for n in names}


def _recorder() -> dict[str, str]:
    """What identifies the recorder: vmmu's version and the Valgrind tool's source text."""
    tool = checkout() / "tools" / "vg-memtrace"
    files = sorted(p.name for p in tool.glob("*.[ch]")) if tool.is_dir() else []
    return {"vmmu": vmmu.__version__, "vg-memtrace": _digest(_file_hashes(tool, files))}


def generator_sources(entry: Entry) -> dict[str, str]:
    """The source text of the entry's input generators and load generator, by name."""
    out = {n: inspect.getsource(getattr(inputs_mod, n)) for n in entry.inputs}
    if isinstance(entry.run, Server):
        out[entry.run.load] = inspect.getsource(getattr(load_mod, entry.run.load))
    return out


def build_key(entry: Entry, versions: dict[str, str]) -> str:
    """The name of the entry's build directory (``NAME-HASH``)."""
    assert entry.build is not None
    parts = {
        "sources": _file_hashes(src_dir(), list(entry.build.sources)),
        "argv": entry.build.argv,
        "versions": versions,
    }
    return f"{entry.name}-{_digest(parts)[:16]}"


def inputs_key(entry: Entry, scale: str) -> str:
    """The name of the entry's inputs directory at ``scale`` (``NAME-SCALE-HASH``)."""
    parts = {
        "generators": {n: inspect.getsource(getattr(inputs_mod, n)) for n in entry.inputs},
        "params": entry.params(scale),
    }
    return f"{entry.name}-{scale}-{_digest(parts)[:16]}"


def trace_key(entry: Entry, scale: str, versions: dict[str, str]) -> str:
    """The hash naming the entry's trace at ``scale``: its definition (without the other
    scale), the scale's parameters, its generators' and sources' text, the program's
    package versions and the recorder."""
    definition = dataclasses.asdict(entry)
    definition["scales"] = {scale: entry.params(scale)}
    parts = {
        "definition": definition,
        "generators": generator_sources(entry),
        "sources": _file_hashes(src_dir(), _source_files(entry)),
        "versions": versions,
        "recorder": _recorder(),
    }
    return _digest(parts)[:16]


def package_versions(entry: Entry) -> dict[str, dict[str, str | None]]:
    """``packages``: each of the entry's Debian packages and its installed version (``None``:
    not installed); ``programs``: each program the entry runs, its resolved path and the
    version of the package that owns it (``gcc`` is ``gcc-12``'s ``/usr/bin/x86_64-linux-gnu-
    gcc-12``). Without ``dpkg-query`` (not Debian), each program's ``--version`` line."""
    dpkg = shutil.which("dpkg-query") is not None
    packages = {pkg: _dpkg_version(pkg) for pkg in (entry.packages if dpkg else ())}
    out: dict[str, str | None] = {}
    for prog in entry.programs:
        path = shutil.which(prog)
        if path is None:
            out[prog] = None
            continue
        real = os.path.realpath(path)
        owner = None
        if dpkg:
            r = subprocess.run(["dpkg-query", "-S", real], capture_output=True, text=True)
            if r.returncode == 0:
                owner = r.stdout.split(":", 1)[0].strip()
        if owner:
            out[prog] = f"{real} ({owner} {_dpkg_version(owner)})"
        else:
            r = subprocess.run([real, "--version"], capture_output=True, text=True)
            line = (r.stdout or r.stderr).strip().splitlines()
            out[prog] = f"{real} ({line[0] if line else 'unknown version'})"
    return {"packages": packages, "programs": out}


def _dpkg_version(pkg: str) -> str | None:
    r = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}\t${Version}", pkg], capture_output=True, text=True
    )
    status, _, version = r.stdout.partition("\t")
    return version if r.returncode == 0 and "installed" in status.split() else None


def trace_dir(root: Path, entry: Entry, scale: str, key: str) -> Path:
    """``traces/NAME/SCALE-KEY`` under the cache ``root``."""
    return root / "traces" / entry.name / f"{scale}-{key}"


def read_meta(directory: Path) -> dict | None:
    """A trace directory's ``meta.json`` when the recording completed, else ``None``."""
    path = directory / "meta.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not meta.get("complete") or not (directory / "trace.vtrace").is_file():
        return None
    return meta


def write_meta(directory: Path, meta: dict) -> None:
    """Writes ``meta.json`` atomically (a reader never sees half of it)."""
    tmp = directory / "meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    tmp.replace(directory / "meta.json")
