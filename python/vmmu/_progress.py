"""Progress bars for long engine calls.

The engine calls a progress callback about once per million events with ``(done, total)``.
:class:`ProgressBars` turns those calls into rich progress bars on stderr, shown only once a
call has run for more than ``delay`` seconds, so quick runs print nothing extra. It is
thread-safe (``vmmu compare`` runs modes in parallel threads) and its callbacks return
``False`` once :meth:`ProgressBars.stop` is called, which stops the engine cleanly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
)
from rich.text import Text

from vmmu._format import human

Callback = Callable[[int, "int | None"], bool]


class _RateColumn(ProgressColumn):
    """Events done, events per second and time elapsed, all since the call started (the bar
    itself appears only after ``delay``)."""

    def render(self, task: Task) -> Text:
        elapsed = time.monotonic() - task.fields.get("t0", time.monotonic())
        rate = task.completed / elapsed if elapsed > 0 else 0.0
        minutes, seconds = divmod(int(elapsed), 60)
        return Text(
            f"{human(task.completed)} events  {human(rate)} events/s  {minutes}:{seconds:02d}",
            style="cyan",
        )


class ProgressBars:
    """A set of delayed rich progress bars, one per :meth:`callback`.

    Use as a context manager; each ``callback(description, unit)`` returns a function to pass
    as the engine's ``progress`` argument.
    """

    def __init__(self, console: Console | None = None, delay: float = 1.0) -> None:
        self._console = console or Console(stderr=True)
        self._delay = delay
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._stopped = threading.Event()

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._progress is not None:
                self._progress.stop()
                self._progress = None

    def stop(self) -> None:
        """Make every callback return ``False`` from now on (the engine stops)."""
        self._stopped.set()

    def _bars(self) -> Progress:
        if self._progress is None:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                _RateColumn(),
                console=self._console,
                transient=True,
            )
            self._progress.start()
        return self._progress

    def callback(self, description: str) -> Callback:
        """A progress callback drawing one bar labelled ``description``."""
        task_id = None
        t0 = time.monotonic()

        def report(done: int, total: int | None) -> bool:
            nonlocal task_id
            if self._stopped.is_set():
                return False
            if time.monotonic() - t0 < self._delay or not self._console.is_terminal:
                return True
            with self._lock:
                bars = self._bars()
                if task_id is None:
                    task_id = bars.add_task(description, total=total, t0=t0)
                bars.update(task_id, completed=done, total=total)
            return True

        return report
