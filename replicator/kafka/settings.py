"""librdkafka settings of a flow's clients, in one place.

The source consumer and the target producer are tuned for throughput (large fetches, lz4, a short
linger) and for the flow's delivery mode; librdkafka's own log lines go to the
``replicator.librdkafka`` logger instead of stderr.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from replicator.config import FlowConfig

__all__ = [
    "consumer_config",
    "producer_config",
    "idempotent_producer_config",
    "consumer_group_id",
    "transactional_id",
    "reader_config",
]

RDKAFKA_LOG = logging.getLogger("replicator.librdkafka")


def consumer_group_id(flow: FlowConfig) -> str:
    """The group that shares the flow's source partitions among replicator processes."""
    return f"mirrorlake.{flow.name}"


def transactional_id(flow: FlowConfig, instance: str) -> str:
    """Stable across restarts, so a restarted process fences its killed predecessor at once."""
    return f"mirrorlake.{flow.name}.{instance}"


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
        "client.id": client_id,
        "logger": RDKAFKA_LOG,
    }


def idempotent_producer_config(target: dict[str, Any], client_id: str) -> dict[str, Any]:
    """Every producer of the replicator that writes to a cluster: state events, lifecycle, imports.

    Idempotent (so per-partition order holds across retries, which delivery-order tracking needs),
    ``acks=all``, lz4 and a 5 ms linger.
    """
    return {
        **target,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "lz4",
        "linger.ms": 5,
        "client.id": client_id,
        "logger": RDKAFKA_LOG,
    }


def producer_config(flow: FlowConfig, target: dict[str, Any], client_id: str, instance: str) -> dict[str, Any]:
    """The flow's copy producer: ``idempotent_producer_config`` with large batches and queue."""
    conf: dict[str, Any] = {
        **idempotent_producer_config(target, client_id),
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 500000,
    }
    if flow.exactly_once:
        conf["transactional.id"] = transactional_id(flow, instance)
        conf["transaction.timeout.ms"] = 60000
    return conf


def reader_config(conf: dict[str, Any], client_id: str) -> dict[str, Any]:
    """A read_committed consumer that only ``assign()``s and never commits (its group id is throwaway)."""
    return {
        **conf,
        "group.id": f"mirrorlake.reader.{uuid.uuid4()}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "client.id": client_id,
        "logger": RDKAFKA_LOG,
    }
