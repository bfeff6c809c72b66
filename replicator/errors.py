"""The error hierarchy every mirrorlake package raises from.

A ``MirrorlakeError`` is a *user-facing* failure: its message names what is wrong and what was
expected, and the command-line layer prints it without a traceback and exits non-zero
(``exit_code``). Anything else escaping to the CLI is a bug and keeps its traceback.

Downstream packages (ingest, lakehouse, dashboards) subclass these instead of inventing their own
roots, so one ``except MirrorlakeError`` at the top catches every user mistake.
"""

from __future__ import annotations

__all__ = [
    "MirrorlakeError",
    "ConfigError",
    "ClusterUnreachableError",
    "ToolMissingError",
    "DependencyResolutionError",
    "PortInUseError",
    "ClusterStartError",
    "EventDecodeError",
    "ReplicationError",
    "TranslationError",
    "FailoverError",
]


class MirrorlakeError(Exception):
    """Base of every error a user can cause or fix; the CLI prints ``str(err)`` and exits."""

    exit_code: int = 1


class ConfigError(MirrorlakeError):
    """A configuration file (or option) is missing, malformed, or names something unknown."""

    exit_code = 2


class ClusterUnreachableError(MirrorlakeError):
    """A Kafka cluster did not answer a metadata request within the bounded retry."""

    exit_code = 3


class ToolMissingError(MirrorlakeError):
    """An external program mirrorlake needs (java, mvn) is not installed or not on PATH."""

    exit_code = 4


class DependencyResolutionError(MirrorlakeError):
    """Maven (or Spark's ivy) could not resolve the jars a component needs."""

    exit_code = 5


class PortInUseError(MirrorlakeError):
    """A local cluster cannot start because its port is taken by another process."""

    exit_code = 6


class ClusterStartError(MirrorlakeError):
    """A local broker process exited or never became ready; the message quotes its log."""

    exit_code = 7


class EventDecodeError(MirrorlakeError):
    """A state-topic record is not a mirrorlake event (bad marker, unknown fingerprint, bad body)."""

    exit_code = 8


class ReplicationError(MirrorlakeError):
    """A flow cannot run: a missing source topic, a refused write, a fatal client error."""

    exit_code = 9


class TranslationError(MirrorlakeError):
    """An offset cannot be translated: no checkpoint of the group, or a malformed flow name."""

    exit_code = 20


class FailoverError(MirrorlakeError):
    """A failover cannot be planned or applied as asked: no such group, a bad time, a flow still running."""

    exit_code = 21
