"""One single-node KRaft Kafka broker (broker and controller in one JVM) on 127.0.0.1.

Everything about a broker lives in its cluster dir, so any process can find and stop a broker
another process started::

    cluster.id          the KRaft cluster id, chosen once; storage is formatted with it once
    server.properties   rewritten on every start (listeners on port and port+1)
    log4j2.properties   the broker logs INFO to server.log, nothing to stdout
    data/               log.dirs
    server.log          the broker's log; stdout.log catches what the JVM prints before log4j
    broker.pid          exists while the broker runs

Invariants: ``broker.pid`` names a live process only if that process's command line is
``java ... kafka.Kafka <cluster dir>/server.properties`` — a PID reused by any other process is
treated as a stale pid file and never signalled. Linux only (``/proc``, ``pidfd_open``).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import select
import signal
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_none

from mirrorlake.localkafka.jars import require_java
from mirrorlake.localkafka.jvm_options import ONE_SHOT, performance_options
from mirrorlake.localkafka.ports import port_free
from mirrorlake.localkafka.security import ADMIN, MutualTls, SaslSsl
from replicator.errors import ClusterStartError, ConfigError, MirrorlakeError, PortInUseError
from replicator.kafka.connectivity import MetadataProbe
from replicator.kafka.errors import kafka_error_reason

__all__ = ["LocalBroker", "first_errors"]

_log = logging.getLogger(__name__)

_HEAP = re.compile(r"^(\d+)([kmg])$", re.IGNORECASE)
_HEAP_UNIT_MB = {"k": 1 / 1024, "m": 1, "g": 1024}
_INITIAL_HEAP_MB = 256
_LOG_TAIL_LINES = 20
_KILL_WAIT_S = 10.0

_SERVER_PROPERTIES = """\
# Written by mirrorlake on every start of local cluster {alias}; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
controller.listener.names=CONTROLLER
log.dirs={data_dir}
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
# Time retention is checked every 5 minutes by default; every second here, so a topic whose records
# are older than its retention.ms loses them at once (as the issue's target did within 20 s).
log.retention.check.interval.ms=1000
# The log cleaner looks for compactable logs every 15 s by default; every second here (compaction tests)
log.cleaner.backoff.ms=1000
# A deleted topic's (or segment's) files go 60 s later by default, whatever the topic's own
# file.delete.delay.ms; a second here, so that the benchmarks' gigabytes are not freed by the
# kernel in the middle of a later measurement (bench/results/broker_warm_up-2026-11-26.txt)
log.segment.delete.delay.ms=1000
num.network.threads=2
num.io.threads=4
# The replicator creates its topics explicitly; a typo must not create one.
auto.create.topics.enable=false
{listeners}"""

_PLAINTEXT_LISTENERS = """\
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
# ACLs can be created and described (topic ACL sync); PLAINTEXT clients are ANONYMOUS, a super user.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=true
"""

_LOG4J2_PROPERTIES = """\
status = error
name = mirrorlake-{alias}
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {server_log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


@dataclass
class LocalBroker:
    """A local broker for cluster ``alias``: clients on ``port``, its controller on ``port + 1``.

    ``start``/``stop`` are idempotent and safe to call from another process than the one that
    started the broker; both clean up a stale pid file. ``heap`` is the JVM's ``-Xmx`` (``512m``).
    """

    alias: str
    port: int
    cluster_dir: Path
    lib_dir: Path
    heap: str = "512m"
    sasl_users: dict[str, str] | None = None  # SASL_SSL with these users (``admin`` a super user); None: PLAINTEXT
    tls_principals: tuple[str, ...] | None = None  # mutual TLS: a client certificate for each (``admin`` a super user)
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.cluster_dir = Path(self.cluster_dir).absolute()
        self.lib_dir = Path(self.lib_dir).absolute()
        if self.sasl_users is not None and self.tls_principals is not None:
            raise ConfigError(f"local broker {self.alias}: SASL_SSL users or mutual-TLS principals, not both")
        match = _HEAP.match(self.heap)
        if match is None:
            raise ConfigError(f"local_kafka.heap: {self.heap!r} is not a JVM heap size like 512m or 1g")
        heap_mb = int(match.group(1)) * _HEAP_UNIT_MB[match.group(2).lower()]
        self._initial_heap_mb = max(1, int(min(_INITIAL_HEAP_MB, heap_mb)))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def security(self) -> SaslSsl | MutualTls | None:
        """The secured side (TLS files, users or certificates) of a secured broker; None for PLAINTEXT."""
        if self.sasl_users is not None:
            return SaslSsl(self.cluster_dir, self.sasl_users)
        if self.tls_principals is not None:
            return MutualTls(self.cluster_dir, self.tls_principals)
        return None

    def client_config(self, user: str = ADMIN, *, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """librdkafka settings to reach this broker (as ``user`` if it is secured; ``mechanism``: SASL's)."""
        conf = {"bootstrap.servers": self.bootstrap}
        security = self.security
        if isinstance(security, SaslSsl):
            conf.update(security.client_config(user, mechanism=mechanism))
        elif security is not None:
            conf.update(security.client_config(user))
        return conf

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def pid_file(self) -> Path:
        return self.cluster_dir / "broker.pid"

    @property
    def server_log(self) -> Path:
        return self.cluster_dir / "server.log"

    @property
    def _server_properties(self) -> Path:
        return self.cluster_dir / "server.properties"

    @property
    def _log4j_properties(self) -> Path:
        return self.cluster_dir / "log4j2.properties"

    @property
    def _stdout_log(self) -> Path:
        return self.cluster_dir / "stdout.log"

    @property
    def data_dir(self) -> Path:
        """The broker's ``log.dirs``: a partition's files live in ``<topic>-<partition>`` here."""
        return self.cluster_dir / "data"

    # -- state -------------------------------------------------------------------------------

    def pid(self) -> int | None:
        """PID of this cluster's running broker, or None (no pid file, or a stale one)."""
        pid = self._read_pid_file()
        return pid if pid is not None and self._is_our_broker(pid) else None

    def is_running(self) -> bool:
        """True if the pid file names a live ``kafka.Kafka`` process of this cluster dir."""
        return self.pid() is not None

    # -- lifecycle ---------------------------------------------------------------------------

    def check_ports(self) -> None:
        """Raise ``PortInUseError`` naming the alias and port if port or port+1 is taken."""
        for port, role in ((self.port, "client listener"), (self.controller_port, "controller listener")):
            if not port_free(port):
                raise PortInUseError(
                    f"cluster {self.alias}: port {port} on 127.0.0.1 ({role}) is already in use by "
                    f"another process; free it or give {self.alias} another port in bootstrap_servers "
                    f"(a local broker also uses port+1)"
                )

    def start(self) -> None:
        """Launch the broker in the background unless it already runs; does not wait for it.

        Formats the storage the first time. Raises ``ConfigError`` (a malformed
        ``KAFKA_JVM_PERFORMANCE_OPTS``, before anything is written), ``PortInUseError``,
        ``ToolMissingError`` (no java) or ``ClusterStartError`` (formatting failed). The JVM runs
        in its own session, so it outlives the calling process; ``stop`` ends it.
        """
        pid = self.pid()
        if pid is not None:
            _log.info("cluster %s: broker already running (pid %d) at %s", self.alias, pid, self.bootstrap)
            return
        jvm_options = performance_options()  # a bad KAFKA_JVM_PERFORMANCE_OPTS fails before any side effect
        self._remove_stale_pid_file()
        self.check_ports()
        java = require_java()
        self.cluster_dir.mkdir(parents=True, exist_ok=True)
        self._write_config_files()
        self._format_storage_once(java)
        command = [
            java, f"-Xms{self._initial_heap_mb}m", f"-Xmx{self.heap}", *jvm_options,
            *self._log4j_jvm_args(), "kafka.Kafka", str(self._server_properties),
        ]  # fmt: skip
        with self._stdout_log.open("ab") as stdout:
            self._process = subprocess.Popen(
                command, cwd=self.cluster_dir, stdin=subprocess.DEVNULL, stdout=stdout,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        tmp = self.pid_file.with_suffix(".tmp")
        tmp.write_text(f"{self._process.pid}\n", encoding="ascii")
        tmp.replace(self.pid_file)
        _log.info("cluster %s: started broker pid %d on %s", self.alias, self._process.pid, self.bootstrap)

    def wait_ready(self, timeout_s: float = 90.0) -> None:
        """Return once the broker answers a metadata request.

        Raises ``ClusterStartError`` quoting the broker's log if the process exits (or is not
        running) meanwhile, or if it does not answer within ``timeout_s``.
        """
        probe = MetadataProbe({**self.client_config(), "reconnect.backoff.max.ms": "250"})
        retrying = Retrying(
            stop=stop_after_delay(timeout_s),
            wait=wait_none(),  # each attempt blocks up to 1 s in librdkafka, no extra sleep needed
            retry=retry_if_exception_type(KafkaException),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    self._raise_if_exited()
                    probe.request(1.0)
        except KafkaException as exc:
            raise ClusterStartError(
                f"cluster {self.alias}: broker at {self.bootstrap} did not answer a metadata request "
                f"within {timeout_s:g} s ({kafka_error_reason(exc)}).{self._log_tail()}"
            ) from exc
        _log.info("cluster %s: broker ready at %s", self.alias, self.bootstrap)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the broker: SIGTERM (controlled shutdown), SIGKILL after ``timeout_s``.

        A no-op if it is not running; a stale pid file is removed. Never signals a process that is
        not this cluster's broker.
        """
        pid = self.pid()
        if pid is None:
            self._remove_stale_pid_file()
            return
        _log.info("cluster %s: stopping broker pid %d", self.alias, pid)
        _signal(pid, signal.SIGTERM)
        if not _wait_exit(pid, timeout_s):
            _log.warning("cluster %s: broker pid %d ignored SIGTERM for %g s; killing", self.alias, pid, timeout_s)
            _signal(pid, signal.SIGKILL)
            if not _wait_exit(pid, _KILL_WAIT_S):
                raise MirrorlakeError(f"cluster {self.alias}: broker pid {pid} survived SIGKILL")
        self._reap(pid)
        self.pid_file.unlink(missing_ok=True)
        _log.info("cluster %s: broker stopped", self.alias)

    # -- fault injection (tests and bench/faults.py) -------------------------------------------

    def kill(self) -> None:
        """SIGKILL the broker (no controlled shutdown, as a crash) and wait until it is gone.

        Acknowledged records survive (they are in the page cache); the next ``start`` recovers the
        log. A no-op if it is not running.
        """
        pid = self.pid()
        if pid is None:
            return
        _log.info("cluster %s: killing broker pid %d", self.alias, pid)
        _signal(pid, signal.SIGKILL)
        if not _wait_exit(pid, _KILL_WAIT_S):
            raise MirrorlakeError(f"cluster {self.alias}: broker pid {pid} survived SIGKILL")
        self._reap(pid)
        self.pid_file.unlink(missing_ok=True)

    def freeze(self, frozen: bool = True) -> None:
        """SIGSTOP (``frozen``) or SIGCONT the broker: its connections stay open and nothing answers,
        as behind a dropped network path."""
        pid = self.pid()
        if pid is None:
            raise MirrorlakeError(f"cluster {self.alias}: no broker is running")
        _signal(pid, signal.SIGSTOP if frozen else signal.SIGCONT)

    # -- internals ---------------------------------------------------------------------------

    def _log4j_jvm_args(self) -> list[str]:
        return [f"-Dlog4j2.configurationFile={self._log4j_properties}", "-cp", f"{self.lib_dir}/*"]

    def _write_config_files(self) -> None:
        security = self.security
        if security is None:
            listeners = _PLAINTEXT_LISTENERS.format(port=self.port, controller_port=self.controller_port)
        else:
            security.make_tls_once()
            listeners = security.server_properties(self.port, self.controller_port)
        self._server_properties.write_text(
            _SERVER_PROPERTIES.format(
                alias=self.alias, port=self.port, controller_port=self.controller_port, data_dir=self.data_dir,
                listeners=listeners,
            ),
            encoding="utf-8",
        )  # fmt: skip
        self._server_properties.chmod(0o600)  # a secured broker's file holds passwords
        self._log4j_properties.write_text(
            _LOG4J2_PROPERTIES.format(alias=self.alias, server_log=self.server_log), encoding="utf-8"
        )

    def _format_storage_once(self, java: str) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        id_file = self.cluster_dir / "cluster.id"
        if not id_file.exists():
            id_file.write_text(f"{_new_cluster_id()}\n", encoding="ascii")
        cluster_id = id_file.read_text(encoding="ascii").strip()
        command = [
            java, "-Xmx256m", *ONE_SHOT, *self._log4j_jvm_args(), "kafka.tools.StorageTool", "format",
            "-t", cluster_id, "-c", str(self._server_properties),
            *(self.security.format_arguments() if self.security else []),
        ]  # fmt: skip
        proc = subprocess.run(
            command, cwd=self.cluster_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            output = "\n".join(proc.stdout.splitlines()[-_LOG_TAIL_LINES:])
            raise ClusterStartError(
                f"cluster {self.alias}: formatting storage in {self.data_dir} failed "
                f"(exit code {proc.returncode}):\n{output}{self._log_tail()}"
            )
        _log.info("cluster %s: formatted storage with cluster id %s", self.alias, cluster_id)

    def _raise_if_exited(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            code = self._process.returncode
            self.pid_file.unlink(missing_ok=True)
            raise ClusterStartError(
                f"cluster {self.alias}: broker exited with code {code} before it was ready.{self._log_tail()}"
            )
        if self._process is None and not self.is_running():
            raise ClusterStartError(f"cluster {self.alias}: no broker is running.{self._log_tail()}")

    def _log_tail(self) -> str:
        parts = []
        for path in (self._stdout_log, self.server_log):  # the JVM's own complaints first
            lines = _tail(path, _LOG_TAIL_LINES)
            if lines:
                parts.append(f"\nLast lines of {path}:\n" + "\n".join(lines))
        errors = _read_errors(self.server_log)
        if errors:  # a fatal start ends with a screenful of shutdown INFO: the cause is further up
            parts.insert(0, f"\nFirst errors in {self.server_log}:\n" + "\n".join(errors))
        return "".join(parts)

    def _read_pid_file(self) -> int | None:
        try:
            text = self.pid_file.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else None

    def _is_our_broker(self, pid: int) -> bool:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # gone (or not ours to read)
            return False
        # A zombie has an empty command line: exited, not running.
        return b"kafka.Kafka" in argv and os.fsencode(self._server_properties) in argv

    def _remove_stale_pid_file(self) -> None:
        if self.pid_file.exists() and not self.is_running():
            _log.info("cluster %s: removing stale pid file %s", self.alias, self.pid_file)
            self.pid_file.unlink(missing_ok=True)

    def _reap(self, pid: int) -> None:
        """Collect the exit status if the broker is our child, so no zombie is left behind."""
        if self._process is not None and self._process.pid == pid:
            self._process.wait()
            self._process = None
            return
        with contextlib.suppress(ChildProcessError):  # not our child: its parent (or init) reaps it
            os.waitpid(pid, os.WNOHANG)


def _new_cluster_id() -> str:
    """A KRaft cluster id as ``StorageTool random-uuid`` makes it (base64url UUID), without a JVM."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):  # Kafka's Uuid.randomUuid avoids these too (CLI-unfriendly)
            return text


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # exited in between: that is what we wanted
        os.kill(pid, sig)


def _wait_exit(pid: int, timeout_s: float) -> bool:
    """Wait (without polling) until process ``pid`` has exited; False on timeout."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:  # poll, not select: a process with 1,024 descriptors open (a long test run) gets one above FD_SETSIZE
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(timeout_s * 1000))
    finally:
        os.close(fd)


def first_errors(lines: list[str], limit: int = 15) -> list[str]:
    """The first ERROR/FATAL entries of a Kafka log with the stack lines that follow each, at most
    ``limit`` lines: why a broker that exited did, where its last lines only show it shutting down."""
    picked: list[str] = []
    inside = False
    for line in lines:
        starts_entry = line.startswith("[")
        if starts_entry:
            inside = " ERROR " in line or " FATAL " in line
        if inside and (starts_entry or picked):
            picked.append(line)
            if len(picked) >= limit:
                break
    return picked


def _read_errors(path: Path) -> list[str]:
    try:
        with path.open("rb") as handle:
            return first_errors(handle.read(4 * 1024 * 1024).decode("utf-8", errors="replace").splitlines())
    except FileNotFoundError:
        return []


def _tail(path: Path, lines: int) -> list[str]:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            return handle.read().decode("utf-8", errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return []
