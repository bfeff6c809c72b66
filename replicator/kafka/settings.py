"""librdkafka settings of a flow's clients, in one place.

The source consumer and the target producer are tuned for throughput (large fetches, lz4, a short
linger) and for the flow's delivery mode; librdkafka's own log lines go to the
``replicator.librdkafka`` logger instead of stderr.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import uuid
from typing import Any

from replicator.config import FlowConfig

__all__ = [
    "default_replicator_id",
    "QUEUE_MAX_MESSAGES",
    "RDKAFKA_LOG",
    "RECONNECT",
    "consumer_config",
    "producer_config",
    "idempotent_producer_config",
    "consumer_group_id",
    "positions_group_id",
    "heartbeat_group_prefix",
    "READER_GROUP_PREFIX",
    "BOUNDED_READ_WAIT_S",
    "import_group_id",
    "transactional_id",
    "reader_config",
]

QUEUE_MAX_MESSAGES = 500000  # the target producer's local queue; the flow pauses reading at half of it
# a restarted broker is seen within a second, not after librdkafka's default 10 s reconnect back-off
RECONNECT = {"reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 1000}


class _LibrdkafkaLog:
    """librdkafka's ``logger``: its lines go to ``replicator.librdkafka``, connection churn at DEBUG.

    While a broker is down librdkafka logs a refused connection (``FAIL``) for every client and
    every reconnect attempt at ERROR. Those say nothing the flow's own "waiting for cluster X" line
    does not (``replicator.flow.control.outage``), so they are demoted; every other line keeps its level.
    """

    _CHURN = re.compile(
        r"Connection refused|Connect to .* failed|Disconnected|transport failure|brokers are down|timed out|"
        r"Connection reset|No route to host|Failed to resolve|load in progress|not found in cache",
        re.IGNORECASE,
    )

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)

    def log(self, level: int, msg: str, *args: object) -> None:
        if level > logging.DEBUG and (
            (args and args[0] == "FAIL") or self._CHURN.search(str(args[-1]) if args else msg)
        ):
            level = logging.DEBUG
        self._logger.log(level, msg, *args)


RDKAFKA_LOG = _LibrdkafkaLog("replicator.librdkafka")


READER_GROUP_PREFIX = "mirrorlake.reader."  # assign-only readers' throwaway group ids
# librdkafka's consume(n, timeout) returns only once n messages arrived or the timeout passed: a read
# up to a known end offset asks with this short wait, or it waits out the timeout on its last batch
BOUNDED_READ_WAIT_S = 0.05


def consumer_group_id(flow: FlowConfig) -> str:
    """The group that shares the flow's source partitions among replicator processes."""
    return f"mirrorlake.{flow.name}"


def positions_group_id(flow: FlowConfig) -> str:
    """The (never joined) group of an exactly-once flow's positions reader."""
    return f"mirrorlake.positions-reader.{flow.name}"


def heartbeat_group_prefix(flow: FlowConfig) -> str:
    """Each heartbeat observer's (never joined) group id starts with this."""
    return f"mirrorlake.heartbeats.{flow.name}."


def import_group_id(flow: str) -> str:
    """The group that holds ``import-mm2``'s progress (on each cluster it reads from)."""
    return f"mirrorlake.import-mm2.{flow}"


def transactional_id(flow: FlowConfig, instance: str) -> str:
    """Stable across restarts, so a restarted process fences its killed predecessor at once."""
    return f"mirrorlake.{flow.name}.{instance}"


def default_replicator_id() -> str:
    """A replicator process's id when the config names none: host and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


def consumer_config(flow: FlowConfig, source: dict[str, str], client_id: str) -> dict[str, Any]:
    return {
        **source,
        "group.id": consumer_group_id(flow),
        # at-least-once: only what a durable offset sync covers is stored, then auto-committed;
        # exactly-once: positions are written in the target's transaction, never committed here.
        "enable.auto.commit": not flow.exactly_once,
        "enable.auto.offset.store": False,
        "auto.commit.interval.ms": 1000,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 10000,  # a killed process's partitions move on within seconds, not 45 s
        "isolation.level": "read_committed",
        "enable.partition.eof": False,
        "topic.metadata.refresh.interval.ms": 5000,  # see partition increases within seconds
        "fetch.max.bytes": 52428800,
        "queued.max.messages.kbytes": 65536,
        "fetch.queue.backoff.ms": 10,  # default 1000: a full local queue would pause fetching for a second
        **RECONNECT,
        "client.id": client_id,
        "logger": RDKAFKA_LOG,
    }


def idempotent_producer_config(target: dict[str, Any], client_id: str) -> dict[str, Any]:
    """Every producer of the replicator that writes to a cluster: state events, lifecycle, imports.

    Idempotent (so per-partition order holds across retries, which delivery-order tracking needs),
    ``acks=all``, lz4 and a 1 ms linger: a trickle's copies leave at once (end-to-end p50 3 ms
    against 8 ms with 5 ms, ``bench/results/latency-2026-11-25-linger.txt``; CPU per copied record
    the same at 100 B, within noise at 1 KiB, in that comparison). A busy flow's batches are then
    sized by how fast the target acknowledges (up to 5 requests in flight), not by the linger:
    back-to-back 100 B copies on local brokers produced 980-1,680 records per batch
    (``bench/results/produce_batches-2026-11-27.txt``).
    """
    return {
        **target,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "lz4",
        "linger.ms": 1,
        **RECONNECT,
        "client.id": client_id,
        "logger": RDKAFKA_LOG,
    }


def producer_config(flow: FlowConfig, target: dict[str, Any], client_id: str, instance: str) -> dict[str, Any]:
    """The flow's copy producer: ``idempotent_producer_config`` with large batches and queue."""
    conf: dict[str, Any] = {
        **idempotent_producer_config(target, client_id),
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": QUEUE_MAX_MESSAGES,
    }
    if not flow.exactly_once:
        # a record waits for the target however long it is down (the flow pauses its consumer
        # meanwhile, replicator.flow.control.outage): a finite timeout would fail the flow after 5 minutes
        conf["message.timeout.ms"] = 0
    if flow.exactly_once:
        conf["transactional.id"] = transactional_id(flow, instance)
        # a target outage shorter than this leaves the open transaction alive, so the flow resumes it;
        # longer, the coordinator aborts it and fences this producer (the flow then fails and a
        # restart resumes from the committed positions). A crashed process's successor aborts at once.
        conf["transaction.timeout.ms"] = 300000
    return conf


def reader_config(conf: dict[str, Any], client_id: str) -> dict[str, Any]:
    """A read_committed consumer that only ``assign()``s and never commits (its group id is throwaway)."""
    return {
        **conf,
        "group.id": f"{READER_GROUP_PREFIX}{uuid.uuid4()}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "client.id": client_id,
        "logger": RDKAFKA_LOG,
    }
