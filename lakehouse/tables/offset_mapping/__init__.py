"""Gold ``offset_mapping``'s contract: one row per run of constant ``downstream - upstream`` per
(flow, source topic, partition) and life (a source topic, ``source_topic_id``, or its remote topic,
``target_topic_id``, deleted and created again), the exact external offset mapping; readers
translate through the current life only (``lives``).
"""

from __future__ import annotations

from lakehouse.tables.spec import GoldSpec

__all__ = ["SPEC", "MAPPING_KEY"]

MAPPING_KEY = ("flow", "source_topic", "partition")

SPEC = GoldSpec(
    name="offset_mapping",
    key=MAPPING_KEY,
    # a re-created remote topic's segments may start where the lost copies' did
    row_id=(*MAPPING_KEY, "target_topic_id", "downstream_start", "upstream_start"),
    sources=("offset_sync",),
    tail_order=("downstream_start", "upstream_start"),
)
