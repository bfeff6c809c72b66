"""A client's call raises an exception, never confluent-kafka's bare ``KafkaError``.

confluent-kafka 2.16 on Python 3.11 raises what a librdkafka callback raised again as
``PyErr_SetObject(type(value), value)`` on the value ``PyErr_Fetch`` gave; for its own fatal error
(a fenced transactional producer) that value is the ``KafkaError`` itself, which no ``except
<class>`` clause catches. A fenced exactly-once flow's thread died of it and its error was lost
(CI of 2026-12-03). Here a real client's ``error_cb`` raises such an object the way the C code
does (``PyErr_SetObject`` through ``ctypes.pythonapi``), and ``poll`` must hand the caller a
``KafkaException`` that carries the error. No broker is needed: port 1 refuses the connection and
librdkafka reports it through ``error_cb`` from ``poll``.
"""

from __future__ import annotations

import ctypes
import sys

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from replicator.kafka.clients import new_consumer, new_producer
from replicator.kafka.errors import fatal_client_error, surfaced_kafka_errors

_FENCED = KafkaError(KafkaError._FENCED, "transactional producer fenced by newer producer instance", fatal=True)
_UNREACHABLE = {
    "bootstrap.servers": "127.0.0.1:1",
    "reconnect.backoff.ms": 10,
    "reconnect.backoff.max.ms": 50,
    "log_level": 0,  # the refused connections are expected
}


def _raise_bare(err: KafkaError) -> None:
    ctypes.pythonapi.PyErr_SetObject(ctypes.py_object(KafkaError), ctypes.py_object(err))


def _bare_from(call) -> object:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 (the point: what a class clause sees)
        return exc
    except:  # noqa: E722
        return sys.exc_info()[1]
    return None


def test_the_bare_error_is_what_a_class_clause_cannot_catch():
    assert _bare_from(lambda: _raise_bare(_FENCED)) is _FENCED  # caught only by the bare clause


def test_a_wrapped_call_raises_a_kafka_exception_carrying_the_fatal_error():
    with pytest.raises(KafkaException) as raised:
        surfaced_kafka_errors(_raise_bare)(_FENCED)
    assert raised.value.args[0] is _FENCED
    assert fatal_client_error(raised.value) is _FENCED


def test_other_exceptions_pass_through_a_wrapped_call_untouched():
    def fails() -> None:
        raise ValueError("not librdkafka's")

    with pytest.raises(ValueError, match="not librdkafka's"):
        surfaced_kafka_errors(fails)()


def _raising_once():
    """An ``error_cb`` that raises the bare error once (``close`` serves the callbacks too)."""
    raised: list[bool] = []

    def error_cb(_err: KafkaError) -> None:
        if not raised:
            raised.append(True)
            _raise_bare(_FENCED)

    return error_cb


def _poll_until_raised(poll) -> BaseException | object:
    for _ in range(200):  # each poll waits 0.1 s for librdkafka's refused-connection report
        raised = _bare_from(lambda: poll(0.1))
        if raised is not None:
            return raised
    raise AssertionError("librdkafka never reported the refused connection through error_cb")


def test_a_plain_producer_hands_back_the_bare_error_a_callback_raised():
    """The confluent-kafka behaviour the wrapper exists for; when an upgrade fixes it, this fails
    and ``surfaced_kafka_errors`` can go."""
    producer = Producer({**_UNREACHABLE, "error_cb": _raising_once()})
    try:
        assert _poll_until_raised(producer.poll) is _FENCED
    finally:
        producer.close()


def test_a_producer_made_here_raises_it_as_a_kafka_exception_from_poll():
    producer = new_producer({**_UNREACHABLE, "error_cb": _raising_once()})
    try:
        raised = _poll_until_raised(producer.poll)
        assert isinstance(raised, KafkaException) and raised.args[0] is _FENCED, raised
    finally:
        producer.close()


def test_a_consumer_made_here_raises_it_as_a_kafka_exception_from_poll():
    consumer = new_consumer({**_UNREACHABLE, "group.id": "g", "error_cb": _raising_once()})
    try:
        consumer.subscribe(["t"])
        raised = _poll_until_raised(consumer.poll)
        assert isinstance(raised, KafkaException) and raised.args[0] is _FENCED, raised
    finally:
        consumer.close()
