"""mirrorlake as the benchmark runs it: ``mirrorlake replicate`` processes of its own, like MM2's JVM.

A replicator in production is its own process. Run inside the benchmark's process it shared the
interpreter with the bench's watcher thread and heap (the prefilled records, the results), which
cost it 10-15% of its rate (``bench/results/copy_variants-2026-11-25-*``: the same code 164k records/s
in-process against 185k as a child). ``MirrorlakeProcesses`` starts ``processes`` CLI processes of
one flow (one consumer group: they share its partitions), each with its own ``replicator_id``, and
gives their CPU as a clock (user + system of every process, from ``/proc``).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from bench.measure import process_cpu
from replicator.config import MirrorlakeConfig

__all__ = ["MirrorlakeProcesses", "ROOT", "config_document"]

ROOT = Path(__file__).resolve().parent.parent


def config_document(config: MirrorlakeConfig) -> dict[str, Any]:
    """``config`` as the YAML document that loads back to it, client settings included: pydantic
    masks ``SecretStr`` values as ``**********`` in a dump, which librdkafka then refuses."""
    data = config.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    for alias, cluster in config.clusters.items():
        if cluster.client:
            data["clusters"][alias]["client"] = {k: v.get_secret_value() for k, v in cluster.client.items()}
    return data


class MirrorlakeProcesses:
    """``processes`` ``mirrorlake replicate`` processes of ``config``'s flows, logs in ``work_dir``."""

    def __init__(self, config: MirrorlakeConfig, work_dir: Path, processes: int, *, until_caught_up: bool) -> None:
        self._config = config
        self._dir = work_dir
        self._n = processes
        self._until_caught_up = until_caught_up
        self._procs: list[subprocess.Popen[bytes]] = []
        self._cpu: dict[int, float] = {}  # pid -> its CPU at the last look (kept once it exits)

    def start(self) -> MirrorlakeProcesses:
        self._dir.mkdir(parents=True, exist_ok=True)
        data = config_document(self._config)
        for i in range(self._n):
            path = self._dir / f"replicator-{i}.yaml"
            path.write_text(yaml.safe_dump({**data, "replicator_id": f"bench-{i}"}), encoding="utf-8")
            args = [sys.executable, "-m", "mirrorlake.cli", "replicate", str(path)]
            if self._until_caught_up:
                args.append("--until-caught-up")
            with (self._dir / f"replicator-{i}.log").open("wb") as log:
                self._procs.append(subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
        return self

    def cpu(self) -> float:
        """User + system CPU seconds of the processes so far (an exited one: as last seen alive)."""
        for proc in self._procs:
            with contextlib.suppress(OSError):  # exited and reaped: its last reading stands
                self._cpu[proc.pid] = process_cpu(proc.pid)()
        return sum(self._cpu.values())

    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def alive(self) -> bool:
        return any(p.poll() is None for p in self._procs)

    def wait(self, timeout_s: float) -> None:
        """Wait for every process to exit; a non-zero exit is an error naming its log."""
        for i, proc in enumerate(self._procs):
            code = proc.wait(timeout_s)
            if code != 0:
                tail = (self._dir / f"replicator-{i}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"mirrorlake process {i} exited {code}:\n{tail}")

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM every process still running (it drains and commits), SIGKILL after ``timeout_s``."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
