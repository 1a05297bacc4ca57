"""Where a sweep's points run: worker processes on this machine, or an existing Ray cluster.

A backend takes the points still to run and hands each outcome to the driver as it arrives;
only the driver writes the database. A point is a call of :func:`vmmu.run` in a worker
(:func:`run_point`); its errors come back as a failed outcome, never as an exception, so one
bad point does not stop the others.

Local workers are separate processes (the engine runs one simulation per core; processes keep
a crash, a leak or an out-of-memory kill to one point). A worker that dies takes its pool with
it: the points that were running are run again one at a time, so the one that kills its
worker is identified and recorded as failed, and the others complete.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

Task = Mapping[str, Any]
Outcome = dict[str, Any]
OnDone = Callable[[Outcome], None]

# Set in each local worker by _init_worker: the driver's stop request and its PID (a worker
# whose driver died stops its point at the next progress call).
_STOP: Any = None
_DRIVER_PID: int | None = None


class BackendError(ValueError):
    """A backend that cannot start (Ray missing, cluster unreachable)."""


def _keep_going(_done: int, _total: int | None) -> bool:
    if _STOP is not None and _STOP.is_set():
        return False
    return _DRIVER_PID is None or os.getppid() == _DRIVER_PID


def run_point(task: Task) -> Outcome:
    """Runs one point: ``{"key", "status": ok | failed | interrupted, "result" | "error",
    "wall_seconds", "vmmu_version"}``. Every error of the run is returned, not raised."""
    import vmmu
    from vmmu.exceptions import Interrupted, VmmuError

    out: Outcome = {"key": task["key"], "vmmu_version": vmmu.__version__}
    t0 = time.perf_counter()
    try:
        result = vmmu.run(progress=_keep_going, **task["kwargs"])
        out.update(status="ok", result=dict(result))
    except Interrupted:
        out.update(status="interrupted", error="interrupted")
    except (VmmuError, ValueError, OSError) as e:
        out.update(status="failed", error=f"{type(e).__name__}: {e}")
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # an engine panic arrives as pyo3's PanicException
        out.update(status="failed", error=f"{type(e).__name__}: {e}")
    out["wall_seconds"] = time.perf_counter() - t0
    return out


def _failed(task: Task, error: str) -> Outcome:
    return {"key": task["key"], "status": "failed", "error": error, "wall_seconds": None}


def _init_worker(stop: Any, driver: int) -> None:
    global _STOP, _DRIVER_PID
    _STOP, _DRIVER_PID = stop, driver
    # Ctrl-C goes to the driver, which asks the workers to stop through `stop`.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_driver, args=(driver,), daemon=True).start()


def _exit_with_driver(driver: int) -> None:
    """Ends this worker once its driver is gone (killed with -9, say): an idle worker waits on
    a queue whose other end it holds itself, so it would never see the driver leave."""
    while os.getppid() == driver:
        time.sleep(0.5)
    os._exit(1)


def default_workers() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class LocalBackend:
    """``workers`` processes on this machine."""

    name = "local"

    def __init__(
        self, workers: int | None = None, fn: Callable[[Task], Outcome] = run_point
    ) -> None:
        self.workers = max(1, workers or default_workers())
        # What a worker calls for a point; a module-level function (workers import it).
        self.fn = fn

    def describe(self) -> str:
        return f"{self.workers} local worker process{'es' if self.workers != 1 else ''}"

    def start(self) -> None:
        """Nothing to connect to: the pool starts with :meth:`run`."""

    def stop(self) -> None:
        """The pool stops at the end of :meth:`run`."""

    def run(self, tasks: list[Task], on_done: OnDone) -> None:
        ctx = multiprocessing.get_context("spawn")
        stop = ctx.Event()
        workers = min(self.workers, max(1, len(tasks)))

        def pool() -> ProcessPoolExecutor:
            return ProcessPoolExecutor(
                workers, mp_context=ctx, initializer=_init_worker, initargs=(stop, os.getpid())
            )

        pending: deque[Task] = deque(tasks)
        suspects: deque[Task] = deque()
        inflight: dict[Future[Outcome], Task] = {}
        executor = pool()
        try:
            while pending or suspects or inflight:
                self._fill(executor, self.fn, pending, suspects, inflight, 2 * workers)
                finished, _ = wait(inflight, return_when=FIRST_COMPLETED)
                broken = False
                for f in finished:
                    task = inflight.pop(f)
                    try:
                        outcome = f.result()
                    except BrokenProcessPool:
                        broken = True
                        inflight[f] = task
                        continue
                    on_done(outcome)
                if broken:
                    lost = list(inflight.values())
                    inflight.clear()
                    executor.shutdown(wait=True)
                    if len(lost) == 1:
                        on_done(
                            _failed(
                                lost[0],
                                "the worker process running this point died (killed by a "
                                "signal, or out of memory)",
                            )
                        )
                    else:
                        suspects.extend(lost)
                    executor = pool()
        except BaseException:
            # Ctrl-C or a failed database write: running points stop at their next progress
            # call (about a million events), queued ones are dropped.
            stop.set()
            executor.shutdown(wait=True, cancel_futures=True)
            raise
        executor.shutdown(wait=True)

    @staticmethod
    def _fill(
        executor: ProcessPoolExecutor,
        fn: Callable[[Task], Outcome],
        pending: deque[Task],
        suspects: deque[Task],
        inflight: dict[Future[Outcome], Task],
        limit: int,
    ) -> None:
        """Submits tasks up to ``limit`` in flight; a suspect (a point that was running when a
        worker died) runs alone, so a second death names it."""
        while len(inflight) < limit:
            if suspects:
                if inflight:
                    return
                task = suspects.popleft()
                inflight[executor.submit(fn, task)] = task
                return
            if not pending:
                return
            task = pending.popleft()
            inflight[executor.submit(fn, task)] = task


class RayBackend:
    """The Ray cluster at ``address`` (``HOST:PORT`` of its head), or a local Ray when None.

    Every node needs this vmmu installed (``pip install 'vmmu[ray]'``); results come back to
    the driver, which alone writes the database.
    """

    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        try:
            import ray  # noqa: F401
        except ImportError as e:
            raise BackendError(
                f"--backend ray needs Ray, which is not installed ({e}); install it with "
                "pip install 'vmmu[ray]'"
            ) from None
        self.address = address

    def describe(self) -> str:
        return f"Ray cluster at {self.address}" if self.address else "a local Ray runtime"

    def start(self) -> None:
        """Connects to the cluster (or starts Ray here without an address)."""
        import ray

        try:
            ray.init(address=self.address, log_to_driver=False, logging_level="ERROR")
        except Exception as e:
            raise BackendError(
                f"cannot connect to the Ray cluster at {self.address or '(local)'}: {e}"
            ) from None

    def stop(self) -> None:
        import ray

        ray.shutdown()

    def run(self, tasks: list[Task], on_done: OnDone) -> None:
        import ray

        remote = ray.remote(num_cpus=1, max_retries=0)(run_point)
        limit = 2 * max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending: deque[Task] = deque(tasks)
        inflight: dict[Any, Task] = {}
        try:
            while pending or inflight:
                while pending and len(inflight) < limit:
                    task = pending.popleft()
                    inflight[remote.remote(task)] = task
                ready, _ = ray.wait(list(inflight), num_returns=1)
                for ref in ready:
                    task = inflight.pop(ref)
                    try:
                        outcome = ray.get(ref)
                    except ray.exceptions.RayError as e:
                        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                        outcome = _failed(task, f"Ray: {type(e).__name__}: {first}")
                    on_done(outcome)
        except BaseException:
            for ref in inflight:
                ray.cancel(ref, force=True)
            raise


def backend(name: str, workers: int | None = None, address: str | None = None) -> Any:
    """The backend called ``name`` (``local`` or ``ray``)."""
    if name == "local":
        if address is not None:
            raise BackendError("--address is for --backend ray")
        return LocalBackend(workers)
    if name == "ray":
        return RayBackend(address)
    raise BackendError(f"unknown backend `{name}` (local, ray)")
