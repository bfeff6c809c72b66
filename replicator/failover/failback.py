"""Failback, first step: the records on the old source that never reached the target.

Once the source is back, per partition of the flow: every record after the last copy the offset
mapping knows (``max upstream_end + 1``, or the log start when nothing was copied) up to the
source's end now, read ``read_committed`` (no markers, no aborted records); the flow's heartbeats
are left out (replicators' records, not an application's). That is what a failover
left behind plus what producers still wrote to the source afterwards; nothing is truncated or
changed. ``export`` writes them as JSON lines (key/value base64, headers, timestamp, source
coordinates) so they can be inspected or re-produced.

``recover_never_replicated`` re-produces them to the flow's remote topic on the target (same
partition, key, value, headers, timestamp; the provenance header stamped as the flow would), in one
transaction on the target together with a ``failback`` event (action ``recover``) naming the source
ranges. A later run starts each partition after the ranges already recovered, so it re-produces
nothing twice; a run that dies before its commit leaves nothing visible to read_committed readers.

Copies a SIGKILLed replicator wrote after its last durable offset sync have no row in the mapping
until a replicator of the flow starts again (``replicator.flow.syncs.tail_recovery``), which after a
failover may be never. So both steps first match the target's records past each partition's last
known copy against the source by content (the same ``TailRecovery``): the copies found there are
not listed (``orphan_copies`` counts them), and ``--recover`` publishes their offset syncs in its
transaction, so the mapping covers every copy the flow made and nothing is copied twice. After a
``--recover`` of a partition the search is not repeated there: its orphans were mapped by it, and
the copies it re-produced are accounted for by its ``failback`` event's ranges, not by the mapping.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition

from replicator.client.policy import policy_from_config
from replicator.client.provenance import Provenance
from replicator.config import MirrorlakeConfig
from replicator.config.topology import provenance_enabled
from replicator.errors import FailoverError
from replicator.events import Failback, FailbackRange, OffsetSync, encode
from replicator.failover.api import STALE_AFTER_S, running_replicators, user_name
from replicator.failover.export import export_file
from replicator.failover.state import FlowState, read_flow_state
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.syncs.tail_recovery import TailRecovery
from replicator.kafka.clients import new_producer
from replicator.kafka.connectivity import wait_for_cluster
from replicator.kafka.errors import kafka_error_reason
from replicator.kafka.log_bounds import log_bounds, throwaway_reader
from replicator.kafka.settings import BOUNDED_READ_WAIT_S, idempotent_producer_config
from replicator.kafka.state_log import key_of

__all__ = ["NeverReplicated", "Recovery", "failback_plan", "recover_never_replicated", "recovered_up_to"]

_log = logging.getLogger(__name__)

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
    recovered_records: int = 0  # re-produced to the target by earlier ``--recover`` runs (before start)
    orphan_copies: int = 0  # on the target without a mapping row (a killed replicator's), found by content


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


def _read(
    consumer: Consumer, topic: str, partition: int, start: int, sink: Callable[[Message], None] | None
) -> NeverReplicated:
    ((low, high),) = log_bounds(consumer, [(topic, partition)], timeout_s=_TIMEOUT_S).values()
    begin = max(start, low)
    records = nbytes = 0
    first: Any = None
    last: Any = None
    if begin < high:
        consumer.assign([TopicPartition(topic, partition, begin)])
        deadline = time.monotonic() + 10 * _TIMEOUT_S
        while time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=BOUNDED_READ_WAIT_S):
                if msg.error() is not None or msg.offset() >= high:  # type: ignore[operator]
                    continue
                records += 1
                nbytes += len(msg.key() or b"") + len(msg.value() or b"")
                if first is None:
                    first = msg
                last = msg
                if sink is not None:
                    sink(msg)
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


def recovered_up_to(state: FlowState, topic: str, partition: int) -> tuple[int, int]:
    """(end offset, records) of what earlier ``--recover`` runs re-produced from ``topic[partition]``."""
    ranges = [
        r
        for f in state.failbacks
        if f.action == "recover"
        for r in f.ranges
        if (r.source_topic, r.partition) == (topic, partition)
    ]
    return max((r.end_offset for r in ranges), default=-1), sum(r.records for r in ranges)


def _partitions(config: MirrorlakeConfig, state: FlowState) -> list[tuple[str, int]]:
    """The flow's source partitions, its heartbeats left out: they are the replicators' liveness
    records, not an application's, and a remote heartbeats topic need not exist on the target."""
    policy = policy_from_config(config.replication_policy)
    known = {
        *state.source_marks,
        *((t, p) for _f, t, p in state.index.partitions(state.flow.name)),
        *((r.source_topic, r.partition) for f in state.failbacks for r in f.ranges),
    }
    return sorted((t, p) for t, p in known if not policy.is_heartbeats_topic(t, config.heartbeats_topic))


def _remote_of(config: MirrorlakeConfig, state: FlowState, topic: str) -> str:
    flow = state.flow
    policy = policy_from_config(config.replication_policy)
    return state.index.target_topic(flow.name, topic) or policy.format_remote_topic(flow.source, topic)


def _orphans(config: MirrorlakeConfig, state: FlowState) -> tuple[list[OffsetSync], dict[tuple[str, int], int]]:
    """Offset syncs for the copies on the target past each partition's last mapped copy (a killed
    replicator's), matched to the source by content and added to ``state``'s mapping; and how many
    copies they cover per source partition."""
    flow = state.flow
    origin = SyncOrigin(flow.name, f"failback@{socket.gethostname()}-{os.getpid()}", flow.source, flow.target)
    recovery = TailRecovery(
        origin, config.cluster(flow.source).client_config(), config.cluster(flow.target).client_config()
    )
    # once a --recover ran for a partition, its orphans were mapped then, and the target's tail now
    # holds the recovered copies, which the failback event's ranges account for (never the mapping)
    partitions = [
        (t, _remote_of(config, state, t), p)
        for t, p in _partitions(config, state)
        if recovered_up_to(state, t, p)[0] < 0
    ]
    try:
        syncs, report = recovery.run(state.index, partitions, {})
    except KafkaException as exc:
        raise FailoverError(f"cannot match the target's copies to {flow.source}: {kafka_error_reason(exc)}") from exc
    counts = {(r.source_topic, r.partition): r.matched for r in report if r.matched}
    for (topic, partition), n in sorted(counts.items()):
        _log.info(
            "%s[%d]: %d copies on %s had no offset sync yet (a killed replicator's)", topic, partition, n, flow.target
        )
    state.index.add(syncs)
    return syncs, counts


def _walk(
    config: MirrorlakeConfig,
    state: FlowState,
    sink_for: Callable[[str, int], Callable[[Message], None] | None],
) -> tuple[list[NeverReplicated], list[OffsetSync]]:
    """Read every partition's never-replicated records on the source, each through ``sink_for(topic, p)``,
    after the copies ``_orphans`` finds; returns them with the orphans' syncs (not published)."""
    flow = state.flow
    conf = config.cluster(flow.source).client_config()
    wait_for_cluster(flow.source, conf, timeout_s=config.connect_timeout_seconds)
    orphans, orphan_counts = _orphans(config, state)
    result = []
    try:
        with throwaway_reader(conf, "mirrorlake-failback") as consumer:
            for topic, partition in _partitions(config, state):
                segments = state.index.segments(flow.name, topic, partition)
                copied = max((s.upstream_end for s in segments), default=-1) + 1
                recovered, records = recovered_up_to(state, topic, partition)
                row = _read(consumer, topic, partition, max(copied, recovered), sink_for(topic, partition))
                orphan_copies = orphan_counts.get((topic, partition), 0)
                result.append(dataclasses.replace(row, recovered_records=records, orphan_copies=orphan_copies))
    except KafkaException as exc:
        raise FailoverError(f"cannot read the source {flow.source}: {kafka_error_reason(exc)}") from exc
    return result, orphans


def failback_plan(
    config: MirrorlakeConfig, flow_name: str, *, export: Path | str | None = None, force: bool = False
) -> list[NeverReplicated]:
    """Per partition of the flow, the source's records after the last copy (and after what earlier
    ``--recover`` runs re-produced); ``export``: JSON lines, written as ``failover.export`` says
    (0600, an existing file only with ``force``, ``-`` for standard output).

    Needs the source: ``ClusterUnreachableError`` when it does not answer.
    """
    state = read_flow_state(config, flow_name)
    if export is None:
        return _walk(config, state, lambda _t, _p: None)[0]
    with export_file(export, force=force) as out:

        def write(msg: Message) -> None:
            out.write(_line(msg) + "\n")

        return _walk(config, state, lambda _t, _p: write)[0]


@dataclass(frozen=True)
class Recovery:
    rows: tuple[NeverReplicated, ...]  # what was read per partition (records: re-produced + skipped)
    ranges: tuple[FailbackRange, ...]  # what was re-produced (empty: nothing to do, no event)
    skipped_cycle: int  # records whose provenance says they came from the target: never copied back
    event: Failback | None


def _produce(producer: Producer, **kwargs: Any) -> None:
    while True:
        try:
            producer.produce(**kwargs)
            return
        except BufferError:  # the local queue is full: let deliveries drain
            producer.poll(0.5)


def _abort(producer: Producer) -> None:
    """Abort the open transaction if the broker answers; otherwise the next run's
    ``init_transactions`` (same ``transactional.id``) aborts it."""
    try:
        producer.abort_transaction(_TIMEOUT_S)
    except KafkaException as exc:
        _log.warning("could not abort the recovery's transaction (the next run aborts it): %s", exc)


def recover_never_replicated(
    config: MirrorlakeConfig, flow_name: str, *, stale_after_s: float = STALE_AFTER_S
) -> Recovery:
    """Re-produce the never-replicated records (``failback_plan``'s) to the flow's remote topics on the
    target, with a ``failback`` event, in one transaction; see the module doc.

    Refuses (``FailoverError``) while a replicator of the flow runs (it would copy them as well);
    ``ClusterUnreachableError`` when the source (or the target) does not answer.
    """
    state = read_flow_state(config, flow_name)
    flow = state.flow
    running = running_replicators(config, state, stale_after_s)
    if running:
        raise FailoverError(f"flow {flow.name} still runs ({'; '.join(running)}): stop it before --recover")
    policy = policy_from_config(config.replication_policy)
    provenance = Provenance(flow.source, flow.target, enabled=provenance_enabled(config, policy))
    target_conf = config.cluster(flow.target).client_config()
    wait_for_cluster(flow.target, target_conf, timeout_s=config.connect_timeout_seconds)
    producer = new_producer(
        {
            **idempotent_producer_config(target_conf, f"mirrorlake-failback-{socket.gethostname()}"),
            "transactional.id": f"mirrorlake.failback.{flow.name}",  # one recovery of a flow at a time
            "transaction.timeout.ms": 300000,
        }
    )
    counts: dict[tuple[str, int], list[int]] = {}  # (topic, p) -> [records, bytes, skipped]
    failed: list[str] = []

    landed: dict[tuple[str, int], list[int]] = {}  # (target topic, p) -> offsets of the copies on the target

    def delivered(err: Any, msg: Message) -> None:
        if err is not None:
            failed.append(str(err))
        elif msg.topic() != config.state_topic:
            landed.setdefault((msg.topic(), msg.partition()), []).append(msg.offset())  # type: ignore[arg-type]

    def remote_of(topic: str) -> str:
        return _remote_of(config, state, topic)

    def sink_for(topic: str, partition: int) -> Callable[[Message], None]:
        remote = remote_of(topic)
        count = counts.setdefault((topic, partition), [0, 0, 0])

        def sink(msg: Message) -> None:
            copy, headers = provenance.stamp(msg.headers())  # type: ignore[arg-type]
            if not copy:
                count[2] += 1
                return
            ts_type, ts = msg.timestamp()
            _produce(
                producer,
                topic=remote,
                partition=partition,
                key=msg.key(),
                value=msg.value(),
                headers=headers,
                timestamp=ts if ts_type else 0,
                on_delivery=delivered,
            )
            count[0] += 1
            count[1] += len(msg.key() or b"") + len(msg.value() or b"")

        return sink

    try:
        producer.init_transactions(_TIMEOUT_S)
        producer.begin_transaction()
        rows, orphans = _walk(config, state, sink_for)
        for sync in orphans:  # the mapping rows of the copies a killed replicator left, committed with the rest
            _produce(producer, topic=config.state_topic, value=encode(sync), key=key_of(sync), on_delivery=delivered)
        producer.flush(10 * _TIMEOUT_S)  # every copy's offset on the target is known before the event

        def as_range(r: NeverReplicated) -> FailbackRange:
            remote = remote_of(r.source_topic)
            offsets = landed.get((remote, r.partition), [])
            records, nbytes = counts.get((r.source_topic, r.partition), [0, 0])[:2]
            return FailbackRange(
                r.source_topic,
                remote,
                r.partition,
                r.start_offset,
                r.end_offset,
                records,
                nbytes,
                min(offsets, default=None),
                max(offsets) + 1 if offsets else None,
            )

        ranges = tuple(as_range(r) for r in rows if r.end_offset > r.start_offset)
        event = None
        if ranges:
            event = Failback(
                flow=flow.name,
                replicator_id=f"failback@{socket.gethostname()}-{os.getpid()}",
                source_cluster=flow.source,
                target_cluster=flow.target,
                action="recover",
                ranges=ranges,
                records=sum(r.records for r in ranges),
                host=socket.gethostname(),
                user=user_name(),
            )
            _produce(producer, topic=config.state_topic, value=encode(event), key=key_of(event), on_delivery=delivered)
        producer.flush(10 * _TIMEOUT_S)
        if failed:
            raise FailoverError(f"could not re-produce to {flow.target}: {failed[0]} (nothing committed)")
        producer.commit_transaction(10 * _TIMEOUT_S)
    except FailoverError:
        _abort(producer)
        raise
    except KafkaException as exc:
        _abort(producer)
        raise FailoverError(f"recovery to {flow.target} failed, nothing committed: {kafka_error_reason(exc)}") from exc
    skipped = sum(c[2] for c in counts.values())
    return Recovery(tuple(rows), ranges, skipped, event)
