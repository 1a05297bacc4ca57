"""Runs the Python tests as two pytest processes at once, one per core of the 2-core machines
the project is built and checked on (`make test-python`, hence `make test` and CI).

- Shard 1: the tests that record real programs (:data:`RECORDING`). They share the session's
  cache of recordings (``suite_cache`` in tests/python/conftest.py), so they stay in one
  process and each program is recorded once. Its output streams to the terminal.
- Shard 2: every other test file. Its output is kept and printed whole when shard 1 is done,
  so the two never interleave.

Each pytest runs with ``-p no:cacheprovider``: two processes writing ``.pytest_cache`` at once
could tear its files. The exit status is shard 1's if it failed, else shard 2's (a shard whose
files hold no selected test passes, unless neither has one). Arguments after
the test directory are passed to both pytest processes (``-x``, ``-k EXPR``, ``--durations=20``).

Usage: ``python tools/test/pytest_shards.py TEST_DIR [PYTEST_ARGS...]``
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

#: The test files that record real programs through the session's shared cache.
RECORDING = ("test_repro_suite.py", "test_suite.py")


def shards(test_dir: Path) -> tuple[list[Path], list[Path]]:
    """The recording files and all the others (``test_*.py``), each sorted."""
    files = sorted(test_dir.glob("test_*.py"))
    if not files:
        raise SystemExit(f"pytest_shards: no test_*.py files in {test_dir}")
    recording = [test_dir / n for n in RECORDING]
    missing = [str(p) for p in recording if not p.is_file()]
    if missing:
        raise SystemExit(f"pytest_shards: the recording shard's files are missing: {missing}")
    return recording, [f for f in files if f.name not in RECORDING]


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    test_dir, extra = Path(argv[0]), argv[1:]
    first, second = shards(test_dir)
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *extra]
    print(
        f"pytest in two processes: {len(first)} recording files beside {len(second)} others",
        flush=True,
    )
    with tempfile.TemporaryFile(mode="w+b") as kept:
        other = subprocess.Popen([*pytest, *map(str, second)], stdout=kept, stderr=kept)
        try:
            status = subprocess.call([*pytest, *map(str, first)])
            other_status = other.wait()
        except BaseException:
            other.send_signal(signal.SIGINT)
            other.wait()
            raise
        kept.seek(0)
        sys.stdout.flush()
        print("\n==== the other test files ====", flush=True)
        sys.stdout.buffer.write(kept.read())
        sys.stdout.flush()
    return combined(status, other_status)


#: pytest's exit status when it collected or selected no test.
NO_TESTS = 5


def combined(first: int, second: int) -> int:
    """The run's exit status: the first failing shard's, where a shard that selected no test
    (``-k`` matched none of its files) counts as passed unless neither selected any."""
    if first == second == NO_TESTS:
        return NO_TESTS
    return next((s for s in (first, second) if s not in (0, NO_TESTS)), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
