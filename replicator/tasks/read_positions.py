"""The flow's replicated positions, handed from the copy loop to the state tasks' thread.

A position is the next source offset *not known to be on the target*: every offset before it was
copied and acknowledged (in exactly-once mode: in a committed transaction), or is a transaction
marker or an aborted record the consumer read past, or a record skipped because it would close a
cycle. The copy loop owns every input (consumer, in-flight FIFOs, commits), so only it computes
positions; the watermark task asks for a fresh snapshot with ``request`` and the loop answers on
its next iteration (``wanted`` is one ``Event.is_set`` per loop: nothing on the hot path).

Once the loop has ended (``publish(..., final=True)``), the last snapshot is the answer for good.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["PositionSnapshot", "ReadPositions"]

TP = tuple[str, int]


@dataclass(frozen=True)
class PositionSnapshot:
    positions: dict[TP, int]
    final: bool = False


class ReadPositions:
    def __init__(self) -> None:
        self._wanted = threading.Event()
        self._ready = threading.Condition()
        self._snapshot: PositionSnapshot | None = None
        self._serial = 0

    @property
    def wanted(self) -> bool:
        """Whether a task waits for a snapshot (the copy loop checks this each iteration)."""
        return self._wanted.is_set()

    def publish(self, positions: dict[TP, int], *, final: bool = False) -> None:
        """Called by the copy loop (only): the positions as of now."""
        with self._ready:
            self._snapshot = PositionSnapshot(dict(positions), final)
            self._serial += 1
            self._wanted.clear()
            self._ready.notify_all()

    def request(self, timeout_s: float = 2.0) -> PositionSnapshot | None:
        """A snapshot taken after this call began (or the final one); the last one if the loop is
        busy for longer than ``timeout_s``; None before the loop published anything."""
        with self._ready:
            if self._snapshot is not None and self._snapshot.final:
                return self._snapshot
            serial = self._serial
            self._wanted.set()
            self._ready.wait_for(lambda: self._serial > serial, timeout=timeout_s)
            return self._snapshot
