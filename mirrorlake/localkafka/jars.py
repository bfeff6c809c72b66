"""The external tools and jars a local Kafka broker needs: ``java``, and Kafka's jars via ``mvn``.

Jars are resolved once per Kafka version into ``<cache_root>/kafka-<version>/lib`` (Maven's own
``~/.m2`` is reused underneath). The directory counts as complete only when the marker file
``.resolved`` exists; it is written after mvn succeeded, so an interrupted or failed resolution is
retried by the next call, never half-used. Concurrent callers serialise on a lock file.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from replicator.errors import ConfigError, DependencyResolutionError, ToolMissingError

__all__ = ["kafka_lib_dir", "require_java", "require_mvn", "resolve_kafka_jars"]

_log = logging.getLogger(__name__)

_POM_TEMPLATE = "resources/kafka-pom.xml"
_VERSION_PLACEHOLDER = "@KAFKA_VERSION@"
_MARKER = ".resolved"
_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._\-]*$")
_MVN_TIMEOUT_S = 1800
_OUTPUT_TAIL_LINES = 15


def kafka_lib_dir(version: str, cache_root: Path) -> Path:
    """Where ``resolve_kafka_jars`` puts the jars of ``version``; does not resolve anything."""
    return Path(cache_root) / f"kafka-{version}" / "lib"


def require_java() -> str:
    """Path of the ``java`` to run: ``$JAVA_HOME/bin/java`` if executable, else ``java`` on PATH.

    Raises ``ToolMissingError`` if neither exists.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        _log.warning("JAVA_HOME=%s has no executable bin/java; looking for java on PATH", java_home)
    found = shutil.which("java")
    if found is None:
        raise ToolMissingError(
            "java not found: neither $JAVA_HOME/bin/java nor java on PATH. Local Kafka brokers need "
            "Java 17 or newer; install it, e.g. `apt-get install openjdk-17-jre-headless`"
        )
    return found


def require_mvn() -> str:
    """Path of ``mvn`` on PATH; raises ``ToolMissingError`` if it is not installed."""
    found = shutil.which("mvn")
    if found is None:
        raise ToolMissingError(
            "mvn (Apache Maven) not found on PATH; it downloads the Kafka jars for local brokers. "
            "Install it, e.g. `apt-get install maven`"
        )
    return found


def resolve_kafka_jars(version: str, cache_root: Path) -> Path:
    """Make sure the jars of Apache Kafka ``version`` are in ``<cache_root>/kafka-<version>/lib``.

    Returns that lib dir. Idempotent: once resolved, later calls return at once without running
    (or needing) mvn. Raises ``ConfigError`` for a version that is not a Maven version string,
    ``ToolMissingError`` if mvn is missing, ``DependencyResolutionError`` (quoting mvn's last
    lines) if mvn fails.
    """
    if not _VERSION.match(version):
        raise ConfigError(f"local_kafka.version: {version!r} is not a Kafka version like 4.3.1")
    lib_dir = kafka_lib_dir(version, cache_root)
    home = lib_dir.parent
    marker = home / _MARKER
    if marker.exists():
        _log.debug("Kafka %s jars already resolved in %s", version, lib_dir)
        return lib_dir
    mvn = require_mvn()
    home.mkdir(parents=True, exist_ok=True)
    with _exclusive(home / ".lock"):
        if marker.exists():  # another process resolved it while we waited for the lock
            return lib_dir
        _run_mvn(mvn, version, home, lib_dir)
        if not any(lib_dir.glob("*.jar")):
            raise DependencyResolutionError(f"mvn resolved Kafka {version} but copied no jars to {lib_dir}")
        marker.write_text(f"{version}\n", encoding="utf-8")
    _log.info("resolved Kafka %s jars into %s", version, lib_dir)
    return lib_dir


def _run_mvn(mvn: str, version: str, home: Path, lib_dir: Path) -> None:
    template = resources.files("mirrorlake").joinpath(_POM_TEMPLATE).read_text(encoding="utf-8")
    pom = home / "pom.xml"
    pom.write_text(template.replace(_VERSION_PLACEHOLDER, version), encoding="utf-8")
    command = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={lib_dir}", "-DincludeScope=runtime",
    ]  # fmt: skip
    _log.info("resolving Kafka %s jars with Maven into %s (first time only)", version, lib_dir)
    try:
        proc = subprocess.run(
            command, cwd=home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=_MVN_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise DependencyResolutionError(
            f"mvn did not resolve the Kafka {version} jars within {_MVN_TIMEOUT_S} s"
        ) from exc
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-_OUTPUT_TAIL_LINES:])
        raise DependencyResolutionError(
            f"mvn could not resolve the jars of Apache Kafka {version} (exit code {proc.returncode}; "
            f"pom: {pom}). Last lines of its output:\n{tail}"
        )


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
