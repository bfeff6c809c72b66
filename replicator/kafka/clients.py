"""Every librdkafka client of the replicator (consumer, producer, admin) is made here.

librdkafka checks a configuration when a client is made, not when the config is loaded: a value it
refuses (``max.in.flight.requests.per.connection: 6`` beside the idempotence every mirrorlake
producer has, an ``ssl.ca.location`` that is not there) surfaces as a ``KafkaException`` from the
constructor, deep inside a flow or a task. Here it becomes a ``ConfigError`` that names the cluster
(its bootstrap servers), the kind of client and librdkafka's reason, with every other configuration
value scrubbed from the message: a refused value may be a password.

The clients made here raise a ``KafkaException`` from every call that serves librdkafka's
callbacks, also where confluent-kafka would raise its bare ``KafkaError``
(``surfaced_kafka_errors``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from replicator.errors import ConfigError
from replicator.kafka.errors import kafka_error_reason, scrub_values, surfaced_kafka_errors

__all__ = ["new_admin", "new_consumer", "new_producer", "refused_config"]

_Client = TypeVar("_Client")


def _surfacing(base: type[_Client], calls: tuple[str, ...]) -> type[_Client]:
    """A subclass of ``base`` whose ``calls`` (those that serve librdkafka's callbacks) raise only exceptions."""
    return type(base.__name__, (base,), {name: surfaced_kafka_errors(getattr(base, name)) for name in calls})


_Consumer = _surfacing(Consumer, ("poll", "consume", "commit", "close", "list_topics"))
_Producer = _surfacing(
    Producer,
    ("poll", "flush", "close", "list_topics", "init_transactions", "send_offsets_to_transaction",
     "commit_transaction", "abort_transaction"),
)  # fmt: skip


def new_consumer(conf: Mapping[str, Any]) -> Consumer:
    """``Consumer(conf)``; ``ConfigError`` when librdkafka refuses ``conf``."""
    return _make(_Consumer, conf, "consumer")


def new_producer(conf: Mapping[str, Any]) -> Producer:
    """``Producer(conf)``; ``ConfigError`` when librdkafka refuses ``conf``."""
    return _make(_Producer, conf, "producer")


def new_admin(conf: Mapping[str, Any]) -> AdminClient:
    """``AdminClient(conf)``; ``ConfigError`` when librdkafka refuses ``conf``."""
    return _make(AdminClient, conf, "admin client")


def refused_config(conf: Mapping[str, Any], kind: str, reason: str) -> ConfigError:
    """The error for a ``kind`` of client whose configuration librdkafka refused with ``reason``."""
    hint = ""
    if "enable.idempotence" in reason and kind == "producer":
        hint = " (mirrorlake's producers are idempotent, so the cluster's client settings must allow it)"
    where = conf.get("bootstrap.servers", "<no bootstrap.servers>")
    return ConfigError(
        f"invalid Kafka client configuration for the cluster at {where}: "
        f"its {kind} refuses it: {scrub_values(reason, conf)}{hint}"
    )


def _make(factory: Callable[[dict[str, Any]], _Client], conf: Mapping[str, Any], kind: str) -> _Client:
    try:
        return factory(dict(conf))
    except KafkaException as exc:
        raise refused_config(conf, kind, kafka_error_reason(exc)) from None
