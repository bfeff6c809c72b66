"""The one place that unwraps librdkafka's errors.

confluent-kafka raises ``KafkaException(KafkaError)``; callers decide on the ``KafkaError``'s code
(retriable, already exists, fenced) and show its human-readable reason, never the repr.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

__all__ = [
    "kafka_error",
    "kafka_error_reason",
    "scrub_values",
    "fatal_client_error",
    "transaction_failed",
    "surfaced_kafka_errors",
    "AUTHORIZATION_CODES",
    "FATAL_CODES",
]

# A broker's refusal: asking again changes nothing until an ACL is granted.
AUTHORIZATION_CODES = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)


_F = TypeVar("_F", bound=Callable[..., Any])


def surfaced_kafka_errors(method: _F) -> _F:
    """``method`` raising ``KafkaException(err)`` where confluent-kafka raises the bare ``KafkaError``.

    On Python before 3.12, confluent-kafka (2.16) keeps an exception raised inside a librdkafka
    callback as ``PyErr_Fetch`` gives it (for its own fatal error, the ``KafkaError`` not yet made
    a ``KafkaException``) and raises it again as ``PyErr_SetObject(type(value), value)``: the
    client's ``poll``, ``flush`` or transaction call then raises an object that is not a
    ``BaseException``. No ``except`` clause with a class catches it, so a fenced exactly-once
    flow's thread died with it and the flow's error was never set (CI of 2026-12-03). Only a bare
    ``except`` sees it; everything else passes through untouched."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except BaseException:
            raise
        except:  # noqa: E722 (the one clause that catches an object that is not an exception)
            raised = sys.exc_info()[1]
            if isinstance(raised, KafkaError):
                raise KafkaException(raised) from None
            raise

    return call  # type: ignore[return-value]


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The ``KafkaError`` a ``KafkaException`` carries, or ``None`` when it carries none."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


# what produce() and delivery reports say after the instance failed (their errors carry no fatal flag);
# for a transactional producer, also what being fenced says
FATAL_CODES = frozenset(
    {KafkaError._FATAL, KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)
# messages a producer dropped on purpose (a purge, an abort): what a failure left behind, not the failure
PURGED_CODES = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})


def transaction_failed(err: KafkaError) -> bool:
    """Whether ``err``, from a transactional producer, says its open transaction failed and must be
    aborted before anything else is written: the transaction calls say so themselves
    (``txn_requires_abort``); ``produce`` into a failed transaction says only ``_STATE`` ("Erroneous
    state"), whatever failed it (CI of 4375ff8: a batch refused for skipped sequence numbers after the
    target's broker came back). A transaction that failed fatally fails its abort too, fatally."""
    return bool(err.txn_requires_abort()) or err.code() == KafkaError._STATE


def fatal_client_error(exc: BaseException) -> KafkaError | None:
    """The fatal ``KafkaError`` (librdkafka: the client instance is unusable) that ``exc`` carries
    itself or through its causes, else ``None``."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        err = kafka_error(cause)
        if err is not None and (err.fatal() or err.code() in FATAL_CODES):
            return err
        cause = cause.__cause__ or cause.__context__
    return None


def kafka_error_reason(exc: BaseException) -> str:
    """librdkafka's human-readable reason (``Local: Broker transport failure``), not the repr."""
    err = kafka_error(exc)
    return str(err.str()) if err is not None else str(exc)


def scrub_values(text: str, conf: Mapping[str, Any]) -> str:
    """``text`` with every string value of ``conf`` but ``bootstrap.servers`` replaced by ``***``.

    Client configurations hold secrets (SASL passwords, SSL keys), and librdkafka quotes a value it
    refuses; values shorter than 3 characters are left (they would scrub ordinary words)."""
    for key, value in conf.items():
        if key != "bootstrap.servers" and isinstance(value, str) and len(value) >= 3:
            text = text.replace(value, "***")
    return text
