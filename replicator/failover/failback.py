"""Failback, first step: the records on the old source that never reached the target.

Once the source is back, per partition of the flow: every record after the last copy the offset
mapping knows (``max upstream_end + 1``, or the log start when nothing was copied) up to the
source's end now, read ``read_committed`` (no markers, no aborted records). That is what a failover
left behind plus what producers still wrote to the source afterwards; nothing is truncated or
changed. ``export`` writes them as JSON lines (key/value base64, headers, timestamp, source
coordinates) so they can be inspected or re-produced.

Limitation: copies a SIGKILLed replicator wrote after its last durable offset sync are not in the
mapping yet (issue item 7), so they are listed here although the target holds them.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from replicator.config import MirrorlakeConfig
from replicator.errors import FailoverError
from replicator.failover.state import read_flow_state
from replicator.kafka.connectivity import wait_for_cluster
from replicator.kafka.errors import kafka_error_reason
from replicator.kafka.settings import reader_config

__all__ = ["NeverReplicated", "failback_plan"]

_TIMEOUT_S = 30


@dataclass(frozen=True)
class NeverReplicated:
    source_topic: str
    partition: int
    start_offset: int  # the first offset after the last copy
    end_offset: int  # the source's end when read (exclusive)
    records: int
    bytes: int  # key + value lengths
    first_offset: int | None
    last_offset: int | None
    first_timestamp_ms: int | None
    last_timestamp_ms: int | None


def _line(msg: Message) -> str:
    def b64(data: bytes | None) -> str | None:
        return base64.b64encode(data).decode() if data is not None else None

    ts_type, ts = msg.timestamp()
    return json.dumps(
        {
            "topic": msg.topic(),
            "partition": msg.partition(),
            "offset": msg.offset(),
            "timestamp_ms": ts if ts_type else None,
            "timestamp_type": ts_type,
            "key": b64(msg.key()),
            "value": b64(msg.value()),
            "headers": [[k, b64(v)] for k, v in (msg.headers() or [])],  # type: ignore[arg-type,misc,str-unpack]
        }
    )


def _read(consumer: Consumer, topic: str, partition: int, start: int, out: IO[str] | None) -> NeverReplicated:
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=_TIMEOUT_S)
    begin = max(start, low)
    records = nbytes = 0
    first: Any = None
    last: Any = None
    if begin < high:
        consumer.assign([TopicPartition(topic, partition, begin)])
        deadline = time.monotonic() + 10 * _TIMEOUT_S
        while time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error() is not None or msg.offset() >= high:  # type: ignore[operator]
                    continue
                records += 1
                nbytes += len(msg.key() or b"") + len(msg.value() or b"")
                if first is None:
                    first = msg
                last = msg
                if out is not None:
                    out.write(_line(msg) + "\n")
            (pos,) = consumer.position([TopicPartition(topic, partition)])
            if pos.offset >= high:
                break
        else:
            raise FailoverError(f"{topic}[{partition}]: could not read up to offset {high} on the source in time")
        consumer.unassign()
    return NeverReplicated(
        topic,
        partition,
        begin,
        high,
        records,
        nbytes,
        first.offset() if first else None,
        last.offset() if last else None,
        first.timestamp()[1] if first else None,
        last.timestamp()[1] if last else None,
    )


def failback_plan(config: MirrorlakeConfig, flow_name: str, *, export: Path | None = None) -> list[NeverReplicated]:
    """Per partition of the flow, the source's records after the last copy; ``export``: JSON lines.

    Needs the source: ``ClusterUnreachableError`` when it does not answer.
    """
    state = read_flow_state(config, flow_name)
    flow = state.flow
    conf = config.cluster(flow.source).client_config()
    wait_for_cluster(flow.source, conf, timeout_s=config.connect_timeout_seconds)
    partitions: Iterable[tuple[str, int]] = sorted(
        {*state.source_marks, *((t, p) for _f, t, p in state.index.partitions(flow.name))}
    )
    consumer = Consumer(reader_config(conf, "mirrorlake-failback"))
    out = export.open("w", encoding="utf-8") if export is not None else None
    try:
        result = []
        for topic, partition in partitions:
            segments = state.index.segments(flow.name, topic, partition)
            start = max((s.upstream_end for s in segments), default=-1) + 1
            result.append(_read(consumer, topic, partition, start, out))
        return result
    except KafkaException as exc:
        raise FailoverError(f"cannot read the source {flow.source}: {kafka_error_reason(exc)}") from exc
    finally:
        consumer.close()
        if out is not None:
            out.close()
