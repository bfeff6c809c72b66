"""Gold ``group_offsets``' contract: per (flow, group, source topic, partition), the latest checkpoint
and its translation recomputed through ``offset_mapping``.
"""

from __future__ import annotations

from lakehouse.tables.offset_mapping import MAPPING_KEY
from lakehouse.tables.spec import GoldSpec

__all__ = ["SPEC", "GROUP_KEY", "FROM_CHECKPOINT"]

GROUP_KEY = ("flow", "group", "source_topic", "partition")
# (checkpoint field, table column): a row keeps every field of its checkpoint that the table reads
FROM_CHECKPOINT = (
    *((c, c) for c in ("flow", "source_cluster", "target_cluster", "group", "source_topic", "target_topic")),
    ("partition", "partition"),
    ("upstream_offset", "committed_offset"),
    ("downstream_offset", "translated_offset"),
    ("method", "method"),
    ("error_bound", "error_bound"),
    ("emitted_at_ms", "as_of_ms"),
    ("replicator_id", "replicator_id"),
    ("event_id", "checkpoint_event_id"),
)

SPEC = GoldSpec(
    name="group_offsets",
    key=MAPPING_KEY,  # a mapping change re-translates every group of its partition
    row_id=GROUP_KEY,
    sources=("checkpoint", "offset_sync", "topic_recreated"),
    depends_on=("offset_mapping",),
)
