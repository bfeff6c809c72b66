"""The native copy floor: ``bench/native_copy.c`` built and run as one more contender.

A copier on confluent-kafka pays, per record, for the Python objects of the consumed message, the
``produce()`` call and the delivery report served through Python. ``native_copy`` does the same
copy (same consumer and producer settings, every delivery's target offset taken) in C with no
Python at all, so its rate is what a compiled hot path on this client library could reach on this
machine: the measured answer to how close to raw produce-only a copier can get.

It is linked against the very librdkafka that confluent-kafka's wheel bundles (so both sides run
the same client library), with the header from Debian's ``librdkafka-dev`` (the 2.x API it uses is
stable). Built once per source and library into the benchmark's cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import signal
import subprocess
from pathlib import Path

from bench.measure import process_cpu
from replicator.flow.copying.copycore import CopyCoreUnavailable, bundled_librdkafka

__all__ = ["NativeCopy", "NativeBuildError", "build_native_copy", "SOURCE"]

SOURCE = Path(__file__).resolve().parent / "native_copy.c"
HEADER = Path("/usr/include/librdkafka/rdkafka.h")


class NativeBuildError(RuntimeError):
    """``native_copy`` cannot be built here: what is missing and how to get it."""


def build_native_copy(cache_dir: Path) -> Path:
    """The ``native_copy`` executable, compiled into ``cache_dir`` unless already there."""
    if shutil.which("gcc") is None:
        raise NativeBuildError("gcc is missing: apt-get install gcc")
    if not HEADER.exists():
        raise NativeBuildError(f"{HEADER} is missing: apt-get install librdkafka-dev")
    try:
        lib = bundled_librdkafka()
    except CopyCoreUnavailable as exc:
        raise NativeBuildError(str(exc)) from exc
    digest = hashlib.sha256(SOURCE.read_bytes() + str(lib).encode()).hexdigest()[:12]
    exe = cache_dir / f"native_copy-{digest}"
    if not exe.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_suffix(".tmp")
        cmd = ["gcc", "-O2", "-Wall", "-o", str(tmp), str(SOURCE), str(lib), f"-Wl,-rpath,{lib.parent}"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise NativeBuildError(f"gcc failed ({' '.join(cmd)}):\n{done.stderr[-2000:]}")
        tmp.replace(exe)
    return exe


class NativeCopy:
    """One ``native_copy`` process copying ``count`` records of ``partitions`` partitions."""

    def __init__(
        self, exe: Path, source: str, topic: str, target: str, remote: str, partitions: int, count: int, log: Path
    ) -> None:
        self._args = [str(exe), source, topic, target, remote, str(partitions), str(count)]
        self._log = log
        self._proc: subprocess.Popen[bytes] | None = None
        self._cpu = 0.0  # at the last look (kept once it exits)

    def start(self) -> NativeCopy:
        self._log.parent.mkdir(parents=True, exist_ok=True)
        with self._log.open("wb") as out:
            # it holds on after its copy until its stdin closes (``wait``), so its CPU stays readable
            self._proc = subprocess.Popen(self._args, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)
        return self

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def cpu(self) -> float:
        """User + system CPU seconds so far (an exited process: as last seen alive)."""
        with contextlib.suppress(OSError):
            self._cpu = process_cpu(self.pid)()
        return self._cpu

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait(self, timeout_s: float) -> str:
        """Let it exit (after the caller's last CPU reading); its report line. A non-zero exit is an
        error with its output."""
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.close()
        code = self._proc.wait(timeout_s)
        output = self._log.read_text(errors="replace")
        if code != 0:
            raise RuntimeError(f"native_copy exited {code}:\n{output[-3000:]}")
        return output.strip().splitlines()[-1]

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # type: ignore[union-attr]
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
