"""Progress of long commands: ``rich`` bars and spinners on a terminal, plain log lines otherwise.

``Steps`` is what the demo, ``replicate --until-caught-up`` and ``lakehouse build`` report to:
named steps (``step`` around a piece of work, or ``stage`` to start the next one of a sequence)
and per-name counts (``counts``: done and remaining). On a terminal (stderr is a TTY) they are
drawn by ``rich`` on stderr; elsewhere (tests, CI, a pipe) each step is one log line when it
starts and one when it ends, and counts are logged at most every ``PLAIN_EVERY_S`` seconds, so
logs stay readable and nothing depends on a terminal.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import IO, Any

__all__ = ["Steps", "interactive", "PLAIN_EVERY_S"]

_log = logging.getLogger("mirrorlake")

PLAIN_EVERY_S = 5.0


def interactive(stream: IO[str] | None = None) -> bool:
    """Whether progress is drawn (``stream``, default stderr, is a terminal) rather than logged."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Steps:
    """A context manager reporting steps and counts (see the module doc); ``rich=None``: decide by the TTY."""

    def __init__(self, *, rich: bool | None = None) -> None:
        self.rich = interactive() if rich is None else rich
        self._progress: Any = None
        self._current: tuple[str, float, Any] | None = None  # the running ``stage``: name, start, task
        self._counted: dict[str, Any] = {}
        self._logged_at: dict[str, float] = {}

    def __enter__(self) -> Steps:
        if self.rich:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                SpinnerColumn(finished_text="[green]✓"),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._finish_stage(failed=exc is not None)
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Report ``name`` while the block runs, and its time when it ends."""
        self.stage(name)
        try:
            yield
        except BaseException:
            self._finish_stage(failed=True)
            raise
        self._finish_stage(failed=False)

    def stage(self, name: str) -> None:
        """End the running stage (if any) and start ``name`` (for work that only announces its stages)."""
        self._finish_stage(failed=False)
        task = None
        if self._progress is not None:
            task = self._progress.add_task(name, total=None)
        else:
            _log.info("%s ...", name)
        self._current = (name, time.monotonic(), task)

    def counts(self, name: str, done: int, remaining: int) -> None:
        """``name`` has ``done`` of ``done + remaining`` (the total may grow as more arrives)."""
        if self._progress is not None:
            task = self._counted.get(name)
            if task is None:
                task = self._counted[name] = self._progress.add_task(name, total=done + remaining)
            self._progress.update(task, completed=done, total=done + remaining)
            return
        now = time.monotonic()
        if now - self._logged_at.get(name, float("-inf")) >= PLAIN_EVERY_S or not remaining:
            self._logged_at[name] = now
            _log.info("%s: %d done, %d remaining", name, done, remaining)

    def _finish_stage(self, *, failed: bool) -> None:
        if self._current is None:
            return
        name, started, task = self._current
        self._current = None
        took = time.monotonic() - started
        if self._progress is not None:
            mark = "[red]failed" if failed else f"{took:.1f} s"
            self._progress.update(task, description=f"{name} ({mark})", total=1, completed=1)
        elif failed:
            _log.info("%s failed after %.1f s", name, took)
        else:
            _log.info("%s done in %.1f s", name, took)
