"""Taking a flow over from MirrorMaker 2: mirrorlake starts where MM2 stopped, copying nothing twice.

MM2's ``MirrorSourceTask`` keeps its source positions in Kafka Connect's offsets topic on the
target (``offset.storage.topic``; ``mm2-offsets.<target alias>.internal`` by default in dedicated
mode): key ``["MirrorSourceConnector", {"cluster": S, "partition": p, "topic": t}]``, value
``{"offset": u}`` (Connect's JSON without schemas), ``u`` the upstream offset of the last record
MM2 copied; the latest record of a key wins and a null value deletes it. MM2 resumes at ``u + 1``,
and so does a flow seeded by ``seed_from_mm2``: it commits ``u + 1`` to the flow's source group
(``mirrorlake.S->T``) for each partition that group has not committed yet. A position mirrorlake
already has is never moved. Only at-least-once flows: an exactly-once flow keeps its positions
in the target's positions topic.

MM2 must be stopped first (its last positions flushed): records it copies after the seed would
be copied again by mirrorlake.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from replicator.client.group_offsets import committed_offsets
from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.errors import ConfigError, ReplicationError
from replicator.kafka.admin import admin_client
from replicator.kafka.clients import new_consumer
from replicator.kafka.errors import kafka_error_reason
from replicator.kafka.log_bounds import topic_bounds
from replicator.kafka.positions_guard import real_positions
from replicator.kafka.settings import BOUNDED_READ_WAIT_S, RDKAFKA_LOG, consumer_group_id

__all__ = ["mm2_source_positions", "seed_from_mm2", "default_offsets_topic"]

_log = logging.getLogger(__name__)
_TIMEOUT_S = 30.0
_CONNECTOR = "MirrorSourceConnector"


def default_offsets_topic(target_alias: str) -> str:
    """MM2 dedicated mode's ``offset.storage.topic`` for herders writing to ``target_alias``."""
    return f"mm2-offsets.{target_alias}.internal"


def _position(key: bytes | None, value: bytes | None, source_alias: str) -> tuple[tuple[str, int], int | None] | None:
    """((topic, partition), offset or None for a tombstone) of one MirrorSourceConnector record of ``source_alias``."""
    try:
        name, partition = json.loads(key or b"null")
        if name != _CONNECTOR or partition.get("cluster") != source_alias:
            return None
        tp = (str(partition["topic"]), int(partition["partition"]))
        return tp, None if value is None else int(json.loads(value)["offset"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None  # another connector's record (checkpoints, heartbeats) or not Connect's JSON


def mm2_source_positions(
    target_conf: dict[str, Any], offsets_topic: str, source_alias: str
) -> dict[tuple[str, int], int]:
    """The last upstream offset MM2 copied of each source partition of ``source_alias`` (read to the end)."""
    consumer = new_consumer(
        {
            **target_conf,
            "group.id": "mirrorlake.takeover-mm2",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "logger": RDKAFKA_LOG,
        }
    )
    try:
        bounds = topic_bounds(consumer, offsets_topic, timeout_s=_TIMEOUT_S)
        if bounds is None:
            raise ConfigError(f"MM2's offsets topic {offsets_topic!r} does not exist on the flow's target")
        ends = {p: high for p, (low, high) in bounds.items() if high > low}
        consumer.assign([TopicPartition(offsets_topic, p, 0) for p in ends])
        positions: dict[tuple[str, int], int | None] = {}
        done: set[int] = set()
        deadline = time.monotonic() + _TIMEOUT_S
        while done != set(ends):
            if time.monotonic() > deadline:
                raise ReplicationError(f"reading MM2's offsets topic {offsets_topic} did not reach its end")
            for msg in consumer.consume(1000, timeout=BOUNDED_READ_WAIT_S):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        done.add(msg.partition())  # type: ignore[arg-type]
                    continue
                if (msg.offset() or 0) + 1 >= ends[msg.partition()]:  # type: ignore[index]
                    done.add(msg.partition())  # type: ignore[arg-type]
                found = _position(msg.key(), msg.value(), source_alias)
                if found is not None:
                    positions[found[0]] = found[1]
    except KafkaException as exc:
        raise ReplicationError(f"cannot read MM2's offsets topic {offsets_topic}: {kafka_error_reason(exc)}") from exc
    finally:
        consumer.close()
    return {tp: u for tp, u in positions.items() if u is not None}


def seed_from_mm2(
    config: MirrorlakeConfig, flow: FlowConfig, offsets_topic: str | None = None
) -> dict[tuple[str, int], int]:
    """Commit MM2's resume positions to the flow's source group; returns what was committed.

    Raises ``ConfigError`` for an exactly-once flow or a missing offsets topic, ``ReplicationError``
    when a cluster refuses the reads or the commit (the group must have no members: stop mirrorlake's
    processes of the flow first).
    """
    if flow.exactly_once:
        raise ConfigError(f"flow {flow.name}: taking over from MM2 is for at-least-once flows (exactly_once: false)")
    topic = offsets_topic or default_offsets_topic(flow.target)
    found = mm2_source_positions(config.cluster(flow.target).client_config(), topic, flow.source)
    group = consumer_group_id(flow)
    admin_conf: dict[str, Any] = {**config.cluster(flow.source).client_config(), "logger": RDKAFKA_LOG}
    admin = admin_client(admin_conf)
    try:
        have = {(o.topic, o.partition) for o in committed_offsets(admin_conf, group)}
        seed = {tp: u + 1 for tp, u in sorted(found.items()) if tp not in have}
        if seed:
            tps = real_positions([TopicPartition(t, p, o) for (t, p), o in seed.items()], f"group {group}")
            request = [ConsumerGroupTopicPartitions(group, tps)]
            result = admin.alter_consumer_group_offsets(request, request_timeout=_TIMEOUT_S)[group].result(_TIMEOUT_S)
            failed = [f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in result.topic_partitions if tp.error]
            if failed:
                raise ReplicationError(f"flow {flow.name}: cannot commit MM2's positions: {', '.join(failed)}")
    except KafkaException as exc:
        raise ReplicationError(f"flow {flow.name}: cannot seed group {group}: {kafka_error_reason(exc)}") from exc
    _log.info(
        "flow %s: %d partitions start where MM2 stopped (%d already had a position)", flow.name, len(seed), len(have)
    )
    return seed
