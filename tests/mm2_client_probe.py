"""MM2's client library as a Java application calls it: ``tests/java/Mm2ClientProbe.java``, compiled
with ``javac`` against the ``connect-mirror-client`` and ``kafka-clients`` jars of the Kafka version
the project resolves (``mirrorlake.localkafka``), and run once per cluster asked."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirrorlake.localkafka import require_java, resolve_kafka_jars
from replicator.config.cache import cache_root

__all__ = ["Mm2ClientProbe", "Answers", "DEFAULT_POLICY"]

SOURCE = Path(__file__).parent / "java" / "Mm2ClientProbe.java"
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"


@dataclass(frozen=True)
class Answers:
    """What MM2's client said, per query kind: the tab-separated fields of each line after the kind."""

    lines: dict[str, list[tuple[str, ...]]]

    def translated(self, alias: str, group: str) -> dict[tuple[str, int], int]:
        """``RemoteClusterUtils.translateOffsets(props, alias, group)`` as {(topic, partition): offset}."""
        return {(t, int(p)): int(o) for a, g, t, p, o in self.lines.get("translate", []) if (a, g) == (alias, group)}

    def hops(self, alias: str) -> int:
        (n,) = [int(n) for a, n in self.lines["hops"] if a == alias]
        return n

    def names(self, kind: str) -> set[str]:
        """``upstreamClusters``, ``heartbeatTopics`` or ``checkpointTopics``."""
        return {name for (name,) in self.lines.get(kind, [])}


class Mm2ClientProbe:
    """Compiles the probe once into ``work_dir``; ``ask`` runs it against one cluster."""

    def __init__(self, kafka_version: str, work_dir: Path) -> None:
        javac = shutil.which("javac")
        if javac is None:
            raise RuntimeError("javac not found: the MM2 client tests compile a small Java program (install a JDK)")
        self._java = require_java()
        self._classpath = f"{resolve_kafka_jars(kafka_version, cache_root())}/*"
        self._classes = work_dir
        subprocess.run(
            [javac, "-cp", self._classpath, "-d", str(work_dir), str(SOURCE)], check=True, capture_output=True
        )

    @classmethod
    def compiled(cls, kafka_clusters: Any, tmp_path_factory: Any) -> Mm2ClientProbe:
        """The probe for the session's clusters' Kafka version, compiled into a fresh tmp dir."""
        return cls(kafka_clusters.config().local_kafka.version, tmp_path_factory.mktemp("mm2-client-probe"))

    def ask(self, bootstrap: str, *queries: str, policy: str = DEFAULT_POLICY, separator: str = ".") -> Answers:
        proc = subprocess.run(
            [
                self._java,
                "-Xmx256m",
                "-cp",
                f"{self._classes}:{self._classpath}",
                "Mm2ClientProbe",
                bootstrap,
                policy,
                separator,
                *queries,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        lines = proc.stdout.splitlines()
        if proc.returncode != 0 or not lines or lines[-1] != "done":
            raise AssertionError(f"Mm2ClientProbe failed ({proc.returncode}): {proc.stdout}\n{proc.stderr[-3000:]}")
        out: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for line in lines[:-1]:
            kind, *fields = line.split("\t")
            out[kind].append(tuple(fields))
        return Answers(dict(out))
