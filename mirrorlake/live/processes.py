"""The live demo's background processes: started detached, found again by PID file, stopped by PID.

Each part of the live demo (traffic, replicator, observer, ``lakehouse serve``, dashboard) is a
``mirrorlake`` command of its own, started in a new session so that it outlives the command that
started it, with its output in ``<dir>/<name>.log`` and its PID in ``<dir>/<name>.pid``. A PID is
taken for ours only while ``/proc/<pid>/cmdline`` still names the command and the config it was
started with, or what it became by ``exec`` (a PID reused by the system is never signalled).
``stop`` sends SIGTERM, waits, and SIGKILLs what is left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DemoProcess", "demo_dir"]

_log = logging.getLogger(__name__)


def demo_dir(work_dir: Path) -> Path:
    """Where the live demo keeps its PID files and logs: beside the local clusters' work dir."""
    return work_dir.parent / "demo"


@dataclass(frozen=True)
class DemoProcess:
    """``mirrorlake <args...>`` as the demo's part ``name``; ``becomes``: what its command line holds
    once it replaced itself (``mirrorlake dashboard`` execs Streamlit), empty if it never does."""

    name: str
    args: tuple[str, ...]
    directory: Path
    becomes: tuple[str, ...] = ()

    @property
    def pid_file(self) -> Path:
        return self.directory / f"{self.name}.pid"

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"

    def _argv(self) -> list[str]:
        return [sys.executable, "-m", "mirrorlake.cli", *self.args]

    def pid(self) -> int | None:
        """The running process's PID, None when it does not run (a stale PID file is removed)."""
        try:
            pid = int(self.pid_file.read_text(encoding="ascii").strip())
        except (FileNotFoundError, ValueError):
            return None
        if self._is_ours(pid):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def _is_ours(self, pid: int) -> bool:
        argv = _argv(pid)
        if argv is None:
            return False
        started = [b"mirrorlake.cli", *(os.fsencode(a) for a in self.args)]
        became = [os.fsencode(a) for a in self.becomes]
        return all(a in argv for a in started) or bool(became and all(a in argv for a in became))

    def start(self, env: dict[str, str] | None = None) -> int:
        """Start it (unless it runs already); its PID."""
        running = self.pid()
        if running is not None:
            return running
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            proc = subprocess.Popen(
                self._argv(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives the command that started it, and its terminal's signals
                env={**os.environ, **(env or {})},
            )
        self.pid_file.write_text(f"{proc.pid}\n", encoding="ascii")
        _log.info("demo: started %s (pid %d), its output in %s", self.name, proc.pid, self.log)
        return proc.pid

    def stop(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout_s``; whether it was running."""
        pid = self.pid()
        if pid is None:
            return False
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._is_ours(pid):
            _reap(pid)
            time.sleep(0.1)
        if self._is_ours(pid):
            _log.warning("demo: %s (pid %d) did not stop in %.0f s: killed", self.name, pid, timeout_s)
            _signal(pid, signal.SIGKILL)
            _reap(pid)
        self.pid_file.unlink(missing_ok=True)
        _log.info("demo: stopped %s (pid %d)", self.name, pid)
        return True


def _argv(pid: int, settle_s: float = 2.0) -> list[bytes] | None:
    """The process's command line; None when it has exited. Empty for a moment while it ``exec``s
    (the dashboard becomes Streamlit): read again then, unless it is a zombie (exited, not reaped)."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None
        if raw or state == "Z" or time.monotonic() > deadline:
            return raw.split(b"\0") if raw else None
        time.sleep(0.02)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _reap(pid: int) -> None:
    """Collect a child's exit status (a zombie keeps its /proc entry, with an empty command line)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
