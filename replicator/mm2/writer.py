"""MM2's internal records written by mirrorlake, for MM2's own clients and tools.

A Java application written for MM2 fails over with ``RemoteClusterUtils.translateOffsets``, which
reads partition 0 of ``<source alias>.checkpoints.internal`` on the target and keeps each
partition's last checkpoint of the group; ``MirrorClient`` finds hops and upstream clusters from the
names of the heartbeats topics. ``Mm2TopicWriter`` writes such records (encoded by
``replicator.mm2.records``) to one topic of one cluster, created as MM2 creates its internal
topics (one partition, compacted); a topic that exists already (MM2 made it) is used as it is.

Writes are best effort, as every state task's: a failed delivery is logged and counted, never
raised into the copy loop; the caller's next interval writes again.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from replicator.errors import ReplicationError
from replicator.metadata.topics import TopicManager

__all__ = ["Mm2TopicWriter"]

_log = logging.getLogger(__name__)


class Mm2TopicWriter:
    """Produces MM2 records to partition 0 of ``topic`` through ``producer`` (which the caller owns and flushes).

    The topic is created by ``ensure_topic`` or the first ``write`` (MM2 creates its topics when a
    connector starts, so a client reading one finds it even before the first record); when that
    fails (no permission, cluster busy) the record is dropped with a warning and the next write
    tries again, so the state events written beside it never wait on MM2's topic.
    """

    def __init__(self, producer: Producer, admin: AdminClient, topic: str) -> None:
        self._producer = producer
        self._admin = admin
        self.topic = topic
        self._ready = False
        self.failed = 0

    def ensure_topic(self) -> bool:
        """Create the topic if this writer has not seen it yet; False (logged) when that failed."""
        if not self._ready:
            try:
                TopicManager(self._admin, self._admin).ensure_single_partition_compacted(self.topic)
            except ReplicationError as exc:
                _log.warning("MM2 topic %s unavailable: %s", self.topic, exc)
                return False
            self._ready = True
        return True

    def write(self, key: bytes, value: bytes, *, timestamp_ms: int | None = None) -> None:
        if not self.ensure_topic():
            self.failed += 1
            return
        while True:
            try:
                self._producer.produce(
                    self.topic, value, key, partition=0, on_delivery=self._delivered, timestamp=timestamp_ms or 0
                )  # timestamp 0: now
                return
            except BufferError:  # the producer's queue is full: let deliveries drain it
                self._producer.poll(0.05)

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.failed += 1
            _log.warning("MM2 record not written to %s: %s", self.topic, err.str())
