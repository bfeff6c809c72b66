"""Apache Kafka's MirrorMaker 2 in dedicated mode, as one JVM the benchmark starts and stops by PID.

The JVM runs ``org.apache.kafka.connect.mirror.MirrorMaker <mm2.properties>`` from the Kafka lib
dir that ``mirrorlake.localkafka.resolve_kafka_jars`` fills (connect-mirror and its dependencies,
the brokers' own version). One flow ``S->T`` (aliases ``S`` and ``T`` unless given) with the given
topics; checkpoints, heartbeats, ACL and group-offset sync off; offset syncs on (mirrorlake
publishes its own, so both do that work). ``Mm2Settings.properties`` adds or overrides MM2 keys
(later keys win in a .properties file), e.g. checkpoints on for the translation comparison and
the MM2 import tests.

Producer settings: by default MM2's producer is given the replicator's batching (``lz4``,
``linger.ms=5``, ``batch.size`` 1 MB as librdkafka's default) so the comparison is of the copy
engines, not of defaults; ``tuned_producer=False`` keeps Connect's defaults (no compression,
``linger.ms=0``, 16 KiB batches).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.measure import CpuClock, process_cpu
from mirrorlake.localkafka.jvm_options import performance_options

__all__ = ["MirrorMaker2", "Mm2Settings", "checkpoint_properties"]

_log = logging.getLogger(__name__)

_MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")  # no regex or .properties escaping needed
_STOP_TIMEOUT_S = 30.0
_LOG4J2 = """\
status = error
name = bench-mm2
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""
_PROPERTIES = """\
# Written by bench/replicate_vs_mm2.py
clusters = {s}, {t}
{s}.bootstrap.servers = {source}
{t}.bootstrap.servers = {target}
{s}->{t}.enabled = true
{t}->{s}.enabled = false
{s}->{t}.topics = {topics}
tasks.max = {tasks_max}
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
config.storage.replication.factor = 1
emit.checkpoints.enabled = false
emit.heartbeats.enabled = false
sync.topic.acls.enabled = false
sync.group.offsets.enabled = false
refresh.topics.interval.seconds = 1
# Internal topics of this run only: a later run must not start the tasks an earlier one left in
# mm2-configs (MM2 re-creates them from the stored configs before it reconfigures).
group.id = {run}
config.storage.topic = {run}-configs
offset.storage.topic = {run}-offsets
status.storage.topic = {run}-status
"""
_TUNED_PRODUCER = """\
{t}.producer.compression.type = lz4
{t}.producer.linger.ms = 5
{t}.producer.batch.size = 1000000
"""


@dataclass(frozen=True)
class Mm2Settings:
    tasks_max: int = 1
    tuned_producer: bool = True
    heap: str = "1g"
    source_alias: str = "S"
    target_alias: str = "T"
    properties: tuple[tuple[str, str], ...] = ()  # extra MM2 keys, written last (they override)


def checkpoint_properties(*, offset_lag_max: int = 100, interval_s: int = 1) -> tuple[tuple[str, str], ...]:
    """MM2 keys for a run whose checkpoints and heartbeats matter (translation, MM2 import).

    Checkpoints and heartbeats every ``interval_s``, consumer groups and topics looked for as
    often (MM2's default is every 10 minutes), source offsets committed as often (that is when MM2
    writes the sync of a partition's last record), no group-offset sync to the target.
    ``offset_lag_max`` is MM2's ``offset.lag.max`` (its default is 100).
    """
    return (
        ("emit.checkpoints.enabled", "true"),
        ("emit.checkpoints.interval.seconds", str(interval_s)),
        ("emit.heartbeats.enabled", "true"),
        ("emit.heartbeats.interval.seconds", str(interval_s)),
        ("refresh.groups.interval.seconds", str(interval_s)),
        ("refresh.topics.interval.seconds", str(interval_s)),
        ("offset.flush.interval.ms", str(interval_s * 1000)),
        ("sync.group.offsets.enabled", "false"),
        ("offset.lag.max", str(offset_lag_max)),
    )


class MirrorMaker2:
    """One MM2 process copying ``topics`` (exact names) from ``source`` to ``target``.

    Target topics are named ``<source alias>.<topic>`` (MM2's DefaultReplicationPolicy). ``stop``
    always ends the JVM (SIGTERM, SIGKILL after 30 s) and is safe to call twice.
    """

    def __init__(
        self,
        *,
        java: str,
        lib_dir: Path,
        work_dir: Path,
        source: str,
        target: str,
        topics: list[str],
        settings: Mm2Settings,
    ) -> None:
        bad = [t for t in topics if not _TOPIC_NAME.match(t)]
        if bad:
            raise ValueError(f"MM2 topic names must be plain ([A-Za-z0-9_-]), got {bad}")
        self._java = java
        self._lib_dir = lib_dir
        self._dir = work_dir
        self._source, self._target = source, target
        self._topics = topics
        self._settings = settings
        self._process: subprocess.Popen[bytes] | None = None

    def remote_topic(self, topic: str) -> str:
        return f"{self._settings.source_alias}.{topic}"

    @property
    def offsets_topic(self) -> str:
        """Where this MM2 keeps its source positions (Connect's ``offset.storage.topic``, on the target)."""
        return f"{self._run}-offsets"

    @property
    def _run(self) -> str:
        return f"mm2-{self._dir.name}-{os.getpid()}"

    @property
    def log_file(self) -> Path:
        return self._dir / "mm2.log"

    @property
    def pid(self) -> int:
        assert self._process is not None, "MM2 not started"
        return self._process.pid

    def cpu_clock(self) -> CpuClock:
        return process_cpu(self.pid)

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        properties = self._dir / "mm2.properties"
        aliases = {"s": self._settings.source_alias, "t": self._settings.target_alias}
        text = _PROPERTIES.format(
            **aliases,
            source=self._source,
            target=self._target,
            topics=", ".join(self._topics),
            tasks_max=self._settings.tasks_max,
            run=self._run,
        )
        if self._settings.tuned_producer:
            text += _TUNED_PRODUCER.format(**aliases)
        text += "".join(f"{key} = {value}\n" for key, value in self._settings.properties)
        properties.write_text(text, encoding="utf-8")
        log4j = self._dir / "log4j2.properties"
        log4j.write_text(_LOG4J2.format(log=self.log_file), encoding="utf-8")
        command = [
            self._java,
            "-Xms256m",
            f"-Xmx{self._settings.heap}",
            *performance_options(),
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            f"{self._lib_dir}/*",
            _MAIN_CLASS,
            str(properties),
        ]
        with (self._dir / "stdout.log").open("ab") as stdout:
            self._process = subprocess.Popen(
                command,
                cwd=self._dir,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _log.info("MM2 started (pid %d, tasks.max=%d) for %s", self.pid, self._settings.tasks_max, self._topics)

    def stop(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _log.warning("MM2 pid %d ignored SIGTERM for %g s; killing", process.pid, _STOP_TIMEOUT_S)
            process.kill()
            process.wait(10)
        _log.info("MM2 pid %d stopped (exit code %s)", process.pid, process.returncode)

    def log_tail(self, lines: int = 30) -> str:
        parts = []
        for path in (self._dir / "stdout.log", self.log_file):
            if path.exists():
                tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
                parts.append(f"--- last lines of {path}:\n" + "\n".join(tail))
        return "\n".join(parts)
