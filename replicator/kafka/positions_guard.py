"""The last guard before an offset is written to a cluster: only real positions pass.

Kafka reads negative offsets as sentinels (-1 "latest"/"end", -2 "earliest", -1001 "stored"), and a
commit of one moves a group somewhere nobody chose. Every path that commits or alters a group's
offsets (failover, failback, the reverse flow's seed, MM2 takeover, the MM2 importer) passes its
partitions through ``real_positions`` first: a negative offset or partition is a bug upstream (a
forged event, a time resolved wrongly), refused here with the partitions named, never written.
"""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import TopicPartition

from replicator.errors import ReplicationError

__all__ = ["real_positions", "is_real_position"]


def is_real_position(partition: int, offset: int) -> bool:
    """Whether (partition, offset) names a place in a log rather than a sentinel."""
    return partition >= 0 and offset >= 0


def real_positions(partitions: Sequence[TopicPartition], what: str) -> list[TopicPartition]:
    """``partitions`` (as a list) when every one holds a real position; ``ReplicationError`` naming the others."""
    bad = [tp for tp in partitions if not is_real_position(tp.partition, tp.offset)]
    if bad:
        named = ", ".join(f"{tp.topic!r}[{tp.partition}] at {tp.offset}" for tp in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise ReplicationError(
            f"{what}: refusing to write {named}{more}: "
            "a negative offset or partition is a Kafka sentinel, not a position"
        )
    return list(partitions)
