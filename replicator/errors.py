"""The error hierarchy every mirrorlake package raises from.

A ``MirrorlakeError`` is a *user-facing* failure: its message names what is wrong and what was
expected, and the command-line layer prints it without a traceback and exits non-zero
(``exit_code``). Anything else escaping to the CLI is a bug and keeps its traceback.

Downstream packages (ingest, lakehouse, dashboards) subclass these instead of inventing their own
roots, so one ``except MirrorlakeError`` at the top catches every user mistake.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ExitCode",
    "MirrorlakeError",
    "ConfigError",
    "ClusterUnreachableError",
    "AuthenticationFailedError",
    "ToolMissingError",
    "DependencyResolutionError",
    "PortInUseError",
    "ClusterStartError",
    "EventDecodeError",
    "InvalidEventError",
    "ReplicationError",
    "MissingPermissionError",
    "TranslationError",
    "FailoverError",
]


class ExitCode(IntEnum):
    """Every exit code of the ``mirrorlake`` command, in one place (errors of every package use these).

    0 is success; 1 a failed check (``clusters status``, a state task of ``observe``) or an
    unclassified user error; 2 also covers command-line usage errors (click); 130 an interrupt.
    """

    OK = 0
    FAILED = 1
    CONFIG = 2
    CLUSTER_UNREACHABLE = 3
    TOOL_MISSING = 4
    DEPENDENCY_RESOLUTION = 5
    PORT_IN_USE = 6
    CLUSTER_START = 7
    EVENT_DECODE = 8
    REPLICATION = 9
    LAKEHOUSE_BUILD = 10
    SQL = 11
    TABLE_NOT_FOUND = 12
    AS_OF = 13
    UNSAFE_RETENTION = 14
    INVALID_EVENT = 15
    LAKEHOUSE_BUSY = 16
    TRANSLATION = 20
    FAILOVER = 21
    MISSING_PERMISSION = 22
    AUTHENTICATION = 23
    INTERRUPTED = 130


class MirrorlakeError(Exception):
    """Base of every error a user can cause or fix; the CLI prints ``str(err)`` and exits."""

    exit_code: int = ExitCode.FAILED


class ConfigError(MirrorlakeError):
    """A configuration file (or option) is missing, malformed, or names something unknown."""

    exit_code = ExitCode.CONFIG


class ClusterUnreachableError(MirrorlakeError):
    """A Kafka cluster did not answer a metadata request within the bounded retry."""

    exit_code = ExitCode.CLUSTER_UNREACHABLE


class AuthenticationFailedError(ClusterUnreachableError):
    """A cluster refused the client's credentials (SASL, TLS): named at once, with the principal."""

    exit_code = ExitCode.AUTHENTICATION


class ToolMissingError(MirrorlakeError):
    """An external program mirrorlake needs (java, mvn) is not installed or not on PATH."""

    exit_code = ExitCode.TOOL_MISSING


class DependencyResolutionError(MirrorlakeError):
    """Maven (or Spark's ivy) could not resolve the jars a component needs."""

    exit_code = ExitCode.DEPENDENCY_RESOLUTION


class PortInUseError(MirrorlakeError):
    """A local cluster cannot start because its port is taken by another process."""

    exit_code = ExitCode.PORT_IN_USE


class ClusterStartError(MirrorlakeError):
    """A local broker process exited or never became ready; the message quotes its log."""

    exit_code = ExitCode.CLUSTER_START


class EventDecodeError(MirrorlakeError):
    """A state-topic record is not a mirrorlake event (bad marker, unknown fingerprint, bad body)."""

    exit_code = ExitCode.EVENT_DECODE


class InvalidEventError(EventDecodeError):
    """A state-topic record decodes, but names nothing real (a negative partition, an illegal topic
    name, an audit window ending before it starts): forged or damaged, never fed to Kafka
    (``replicator.events.validity``)."""

    exit_code = ExitCode.INVALID_EVENT


class ReplicationError(MirrorlakeError):
    """A flow cannot run: a missing source topic, a refused write, a fatal client error."""

    exit_code = ExitCode.REPLICATION


class MissingPermissionError(ReplicationError):
    """A principal lacks an ACL a flow needs; the message names principal, resource and operation."""

    exit_code = ExitCode.MISSING_PERMISSION


class TranslationError(MirrorlakeError):
    """An offset cannot be translated: no checkpoint of the group, or a malformed flow name."""

    exit_code = ExitCode.TRANSLATION


class FailoverError(MirrorlakeError):
    """A failover cannot be planned or applied as asked: no such group, a bad time, a flow still running."""

    exit_code = ExitCode.FAILOVER
