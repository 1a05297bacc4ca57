"""Records suite entries: checks and installs packages, builds sources, generates inputs, runs
the program under the recorder (:class:`~vmmu.suite.entries.Batch`: start to exit;
:class:`~vmmu.suite.entries.Server`: while its load generator drives it), then measures the
trace (instructions, references, footprint, TLB misses per 100K instructions on
:data:`MACHINE`) and writes it all to the trace directory's ``meta.json``
(:mod:`vmmu.suite.cache`).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vmmu import api
from vmmu.suite import cache
from vmmu.suite import inputs as inputs_mod
from vmmu.suite import load as load_mod
from vmmu.suite.entries import Batch, Entry, Server

#: The machine the suite's TLB misses are measured on: seed 002's (Bhargava et al., Table 2,
#: an AMD Opteron), so that the figures stand beside its Table 1 per class. A walk starts on
#: a miss in every TLB level, whatever the page-walk caches, so the count is Table 1's "TLB
#: accesses that result in a page walk".
MACHINE = "bhargava08"

#: Lines of a failed program's log quoted in its error.
TAIL_LINES = 15

#: How long a server may take to exit after its load generator asked it to.
SERVER_EXIT_S = 600


class SuiteError(RuntimeError):
    """An entry could not be recorded: a missing package or program, a failed build, or the
    program's own failure (with the tail of its output)."""


Progress = Callable[[str, dict], None]


def _quiet(_stage: str, _p: dict) -> None:
    pass


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").rstrip().splitlines()
    except OSError:
        return "(no output)"
    return "\n".join(text[-lines:]) or "(no output)"


def ensure_packages(entry: Entry, install: bool = True) -> dict[str, str | None]:
    """The entry's package versions, installing missing packages with ``apt-get`` when
    ``install`` and running as root; otherwise a :class:`SuiteError` naming the command to run.
    Every program the entry runs must then be on ``PATH``."""
    versions = cache.package_versions(entry)
    missing = [p for p, v in versions["packages"].items() if v is None]
    if missing and install and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-q", *missing]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise SuiteError(
                f"{entry.name}: `{' '.join(cmd)}` failed:\n"
                + "\n".join((r.stderr or r.stdout).strip().splitlines()[-TAIL_LINES:])
            )
        versions = cache.package_versions(entry)
        missing = [p for p, v in versions["packages"].items() if v is None]
    if missing:
        raise SuiteError(
            f"{entry.name} needs the Debian package{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}, not installed: sudo apt-get install {' '.join(missing)}"
        )
    absent = [p for p, v in versions["programs"].items() if v is None]
    if absent:
        raise SuiteError(
            f"{entry.name}: {', '.join(absent)} not found on PATH (packages "
            f"{', '.join(entry.packages)} are installed: is PATH complete?)"
        )
    return versions


def _fill(template: str, values: dict[str, Any]) -> str:
    try:
        return template.format(**values)
    except KeyError as e:
        raise SuiteError(
            f"template `{template}` names {e}, which the entry does not give"
        ) from None


def build(entry: Entry, root: Path, versions: dict) -> Path | None:
    """Compiles the entry's sources into ``build/NAME-HASH`` (once); its directory."""
    if entry.build is None:
        return None
    out = root / "build" / cache.build_key(entry, versions)
    if (out / ".done").is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    argv = [_fill(a, {"build": out, "src": cache.src_dir()}) for a in entry.build.argv]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise SuiteError(
            f"{entry.name}: building with `{' '.join(argv)}` failed:\n"
            + "\n".join((r.stderr or r.stdout).strip().splitlines()[-TAIL_LINES:])
        )
    (out / ".done").touch()
    return out


def _call_with(fn: Callable, available: dict[str, Any]) -> Any:
    """Calls ``fn`` with the keywords of ``available`` its signature names."""
    names = inspect.signature(fn).parameters
    missing = [n for n in names if n not in available]
    if missing:
        raise SuiteError(f"{fn.__name__} needs {', '.join(missing)}, which the scale lacks")
    return fn(**{n: available[n] for n in names})


def prepare_inputs(entry: Entry, scale: str, root: Path, progress: Progress = _quiet) -> Path:
    """Generates the entry's inputs at ``scale`` into ``inputs/NAME-SCALE-HASH`` (once)."""
    out = root / "inputs" / cache.inputs_key(entry, scale)
    if not entry.inputs or (out / ".done").is_file():
        out.mkdir(parents=True, exist_ok=True)
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in entry.inputs:
        progress(f"generating {name}", {})
        _call_with(getattr(inputs_mod, name), {"out": out, **entry.params(scale)})
    (out / ".done").touch()
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_recording(spec: dict, workdir: Path) -> tuple[subprocess.Popen, threading.Thread, list]:
    """Starts :mod:`vmmu.suite._child` on ``spec``; its progress reports are appended to the
    returned list by a reader thread."""
    read_fd, write_fd = os.pipe()
    spec = {**spec, "progress_fd": write_fd}
    spec_path = workdir / "record.json"
    spec_path.write_text(json.dumps(spec))
    child = subprocess.Popen(
        [sys.executable, "-m", "vmmu.suite._child", str(spec_path)],
        pass_fds=(write_fd,),
        stdin=subprocess.DEVNULL,
    )
    os.close(write_fd)
    reports: list = []

    def reader() -> None:
        with os.fdopen(read_fd) as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    reports.append(json.loads(line))

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    return child, t, reports


def _wait(
    child: subprocess.Popen,
    reports: list,
    progress: Progress,
    load_done: threading.Event | None = None,
) -> None:
    """Waits for the recording process, passing its progress on. Once ``load_done`` is set (a
    server's load generator asked it to shut down) the server has :data:`SERVER_EXIT_S`
    seconds to exit before it is interrupted. Ctrl-C interrupts it (the trace is finished as
    truncated) and is raised again once it exited."""
    deadline = None
    try:
        while child.poll() is None:
            if reports:
                progress("recording", reports[-1])
            if load_done is not None and load_done.is_set() and deadline is None:
                deadline = time.monotonic() + SERVER_EXIT_S
            if deadline is not None and time.monotonic() > deadline:
                child.send_signal(signal.SIGINT)
                deadline = float("inf")
            time.sleep(0.2)
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        child.wait()
        raise


def _drive(entry: Entry, scale: str, port: int, child: subprocess.Popen) -> tuple:
    """Starts the server entry's load generator in a thread; returns the thread, the event it
    sets when done and the dict that receives its ``result`` or ``error``. A failing load
    generator interrupts the recording."""
    fn = getattr(load_mod, entry.run.load)
    done, outcome = threading.Event(), {}

    def drive() -> None:
        try:
            outcome["result"] = _call_with(
                fn, {**entry.params(scale), "port": port, "alive": lambda: child.poll() is None}
            )
        except Exception as e:
            outcome["error"] = e
            child.send_signal(signal.SIGINT)
        finally:
            done.set()

    t = threading.Thread(target=drive, daemon=True)
    t.start()
    return t, done, outcome


def _run(entry: Entry, scale: str, tdir: Path, values: dict, progress: Progress) -> dict:
    """Records the entry into ``tdir/trace.vtrace`` (a server while its load generator drives
    it); the recorder's summary."""
    run = entry.run
    argv = [_fill(a, values) for a in run.argv]
    spec = {
        "argv": argv,
        "trace": str(tdir / "trace.vtrace"),
        "log": str(tdir / "program.log"),
        "summary": str(tdir / "summary.json"),
        "stdin": _fill(run.stdin, values) if isinstance(run, Batch) and run.stdin else None,
        "follow_children": isinstance(run, Batch) and run.follow_children,
    }
    (tdir / "program.log").write_text(f"$ {' '.join(argv)}\n")
    child, reader, reports = _start_recording(spec, Path(values["work"]))
    outcome: dict = {}
    if isinstance(run, Server):
        driver, done, outcome = _drive(entry, scale, values["port"], child)
        _wait(child, reports, progress, done)
        driver.join(timeout=5)
        if "error" in outcome:
            raise SuiteError(
                f"{entry.name}: the load generator failed: {outcome['error']}\n"
                f"the server's output (tail):\n{_tail(tdir / 'program.log')}"
            )
    else:
        _wait(child, reports, progress)
    reader.join(timeout=5)
    try:
        summary = json.loads((tdir / "summary.json").read_text())
    except (OSError, ValueError):
        summary = {"error": f"the recording process exited with status {child.returncode}"}
    if "result" in outcome:
        summary["load"] = outcome["result"]
    return summary


def measure(trace: Path, progress: Progress = _quiet) -> dict:
    """The trace's instructions, references, footprint (distinct 4 KiB pages touched × 4 KiB),
    size, and its page walks per 100K instructions in native mode on :data:`MACHINE` (with
    that replay's wall-clock time)."""
    progress("measuring", {})
    info = api.trace_info(str(trace))
    t0 = time.monotonic()
    result = api.run(machine=MACHINE, mode="native", trace=str(trace))
    replay = time.monotonic() - t0
    instructions = result["instructions"]
    return {
        "native_replay_wall_s": round(replay, 1),
        "instructions": instructions,
        "refs": info["refs"],
        "refs_by_kind": info["refs_by_kind"],
        "processes": info["processes"],
        "footprint_bytes": info["pages_4k"] * 4096,
        "trace_bytes": info["compressed_bytes"],
        "machine": MACHINE,
        "walks": result["walks"],
        "misses_per_100k": 1e5 * result["walks"] / instructions if instructions else None,
    }


def status(entry: Entry, scale: str, root: Path) -> dict:
    """What the cache holds for the entry at ``scale``: ``state`` (``recorded``,
    ``truncated``: interrupted, to be recorded again; ``missing``; ``unavailable``: a package
    is not installed, so the key cannot be computed), the trace path and ``meta.json``."""
    versions = cache.package_versions(entry)
    if any(v is None for group in versions.values() for v in group.values()):
        return {"state": "unavailable", "versions": versions, "meta": None, "trace": None}
    tdir = cache.trace_dir(root, entry, scale, cache.trace_key(entry, scale, versions))
    meta = cache.read_meta(tdir)
    if meta is not None:
        state = "recorded"
    elif (tdir / "trace.vtrace").exists():
        state = "truncated"
    else:
        state = "missing"
    return {"state": state, "versions": versions, "meta": meta, "trace": tdir / "trace.vtrace"}


#: Memory a recorded program needs beside its footprint, as a factor: Valgrind's own code
#: cache and the recorder's buffers (an estimate, generous for the suite's programs).
RECORDING_OVERHEAD = 1.5


def _check_memory(entry: Entry, scale: str) -> None:
    """A :class:`SuiteError` when the entry's expected footprint, with the recording's
    overhead, exceeds this machine's physical memory."""
    need = entry.expected_footprint(scale) * RECORDING_OVERHEAD
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise SuiteError(
            f"{entry.name} ({scale}) expects a footprint of "
            f"{entry.expected_footprint(scale) / (1 << 30):.1f} GiB, which with the recording "
            f"needs about {need / (1 << 30):.1f} GiB; this machine has {have / (1 << 30):.1f} GiB"
        )


def record(
    entry: Entry,
    scale: str,
    root: Path,
    progress: Progress = _quiet,
    install: bool = True,
    force: bool = False,
) -> dict:
    """Records the entry at ``scale`` unless the cache holds it (or ``force``); returns its
    ``meta.json``. A program that fails raises :class:`SuiteError` with its output's tail."""
    _check_memory(entry, scale)
    versions = ensure_packages(entry, install)
    key = cache.trace_key(entry, scale, versions)
    tdir = cache.trace_dir(root, entry, scale, key)
    meta = cache.read_meta(tdir)
    if meta is not None and not force:
        return meta
    shutil.rmtree(tdir, ignore_errors=True)
    tdir.mkdir(parents=True)
    progress("building", {})
    build_dir = build(entry, root, versions)
    inputs_dir = prepare_inputs(entry, scale, root, progress)
    (root / "work").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{entry.name}-", dir=root / "work") as work:
        if isinstance(entry.run, Batch):
            for name in entry.run.fresh:
                shutil.copyfile(inputs_dir / name, Path(work) / name)
        values = {
            **entry.params(scale),
            "build": build_dir,
            "inputs": inputs_dir,
            "work": work,
            "src": cache.src_dir(),
            "port": _free_port(),
        }
        t0 = time.monotonic()
        summary = _run(entry, scale, tdir, values, progress)
        wall = time.monotonic() - t0
    failed = summary.get("error") or summary.get("exit_code") not in (0, None)
    if summary.get("signal") or summary.get("truncated") or failed:
        why = summary.get("error") or (
            f"killed by signal {summary['signal']}"
            if summary.get("signal")
            else f"exit status {summary.get('exit_code')}"
            if summary.get("exit_code")
            else "the trace is truncated"
        )
        raise SuiteError(
            f"{entry.name} ({scale}) failed under the recorder: {why}\n"
            f"{tdir / 'program.log'} (tail):\n{_tail(tdir / 'program.log')}"
        )
    meta = {
        "complete": True,
        "name": entry.name,
        "class": entry.cls,
        "scale": scale,
        "params": entry.params(scale),
        "key": key,
        "versions": versions,
        "trace": str(tdir / "trace.vtrace"),
        "record_wall_s": round(wall, 1),
        "recorder": {
            k: summary[k] for k in ("refs", "events", "processes", "warnings") if k in summary
        },
        "load": summary.get("load"),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **measure(tdir / "trace.vtrace", progress),
    }
    cache.write_meta(tdir, meta)
    return meta
