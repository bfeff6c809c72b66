"""The JIT and garbage-collector options of the Kafka JVMs mirrorlake starts (brokers, MirrorMaker 2).

Kafka's own launch scripts read them from ``KAFKA_JVM_PERFORMANCE_OPTS``, and so does mirrorlake,
with the same meaning: when set, it replaces the default (G1) entirely. A JVM that runs a moment and
exits (the storage format tool) always gets ``ONE_SHOT``: C1 only and the serial collector, since
compiling for a long run only costs it time.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

from replicator.errors import ConfigError

__all__ = ["DEFAULT_PERFORMANCE_OPTS", "ONE_SHOT", "PERFORMANCE_OPTS_ENV", "performance_options"]

PERFORMANCE_OPTS_ENV = "KAFKA_JVM_PERFORMANCE_OPTS"
DEFAULT_PERFORMANCE_OPTS: tuple[str, ...] = ("-XX:+UseG1GC",)
ONE_SHOT: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def performance_options(environ: Mapping[str, str] | None = None) -> list[str]:
    """``$KAFKA_JVM_PERFORMANCE_OPTS`` split as a shell would, or the default when unset or blank.

    Raises ``ConfigError`` naming the variable when its quoting is broken, or when a word of it is
    not a JVM option (a JVM would take the first such word for its main class).
    """
    value = (os.environ if environ is None else environ).get(PERFORMANCE_OPTS_ENV, "")
    if not value.strip():
        return list(DEFAULT_PERFORMANCE_OPTS)
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise ConfigError(f"{PERFORMANCE_OPTS_ENV}={value!r} cannot be split into JVM options: {exc}") from exc
    if stray := [word for word in words if not word.startswith("-")]:
        raise ConfigError(
            f"{PERFORMANCE_OPTS_ENV}={value!r}: {stray[0]!r} is not a JVM option (each must start with '-')"
        )
    return words
