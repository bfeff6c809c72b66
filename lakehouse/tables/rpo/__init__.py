"""Gold ``rpo``'s contract: per partition and target watermark, what a failover at that moment would
leave behind.
"""

from __future__ import annotations

from lakehouse.tables.offset_mapping import MAPPING_KEY
from lakehouse.tables.spec import GoldSpec

__all__ = ["SPEC"]

SPEC = GoldSpec(
    name="rpo",
    key=MAPPING_KEY,
    row_id=(*MAPPING_KEY, "watermark_event_id"),
    sources=("watermark", "offset_sync", "topic_recreated"),
    depends_on=("offset_mapping",),
    tail_order=("observed_at_ms",),
)
