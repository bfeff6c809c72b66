"""How a long-running command stops on SIGTERM/SIGINT: gracefully first, and surely.

The first signal asks the command to stop (a flow drains and commits, a service ends its
round) and arms a watchdog: if the process is still alive ``grace_s`` later, faulthandler's own
thread (native code, it needs no Python lock, so a thread stuck in a long native call cannot
hold it up) prints every thread's stack to stderr and ends the process with exit code 1. A
second signal ends it at once (128 + the signal's number, as a shell reports a killed process).
Nothing durable is lost either way: flows commit only what a durable offset sync covers, Delta
commits are atomic, so what was in flight is done again at the next start.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["stopping_on_signals", "SIGNALS"]

SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stopping_on_signals(stop: Callable[[], None], *, grace_s: float, what: str) -> Iterator[None]:
    """While inside: SIGTERM/SIGINT call ``stop`` once, and end the process ``grace_s`` later or at a
    second signal. On leaving (the command stopped in time) the watchdog is called off and the
    handlers before it are back."""
    asked: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}

    def handle(signum: int, _frame: FrameType | None) -> None:
        if asked:
            sys.stderr.write(f"{what}: second {signal.Signals(signum).name}, stopping now\n")
            sys.stderr.flush()
            os._exit(128 + signum)
        asked.append(signum)
        sys.stderr.write(f"{what}: {signal.Signals(signum).name} received, stopping (at most {grace_s:g} s more)\n")
        sys.stderr.flush()
        faulthandler.dump_traceback_later(grace_s, exit=True)
        stop()

    for sig in SIGNALS:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
