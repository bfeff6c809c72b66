"""Gold ``rpo_groups``' contract: per group and partition, what a failover now would cost it."""

from __future__ import annotations

from lakehouse.tables.group_offsets import GROUP_KEY
from lakehouse.tables.offset_mapping import MAPPING_KEY
from lakehouse.tables.spec import GoldSpec

__all__ = ["SPEC"]

SPEC = GoldSpec(
    name="rpo_groups",
    key=MAPPING_KEY,
    row_id=GROUP_KEY,
    sources=("checkpoint", "offset_sync", "watermark", "topic_recreated"),
    depends_on=("offset_mapping", "group_offsets"),
)
