"""Gold ``divergence``'s contract: where a flow's target differs from its source, one row per
difference; and which config keys a flow never syncs, and why.
"""

from __future__ import annotations

from lakehouse.tables.spec import GoldSpec
from replicator.config import DEFAULT_CONFIG_EXCLUDES, MirrorlakeConfig

__all__ = [
    "SPEC",
    "KEY",
    "COLUMNS",
    "EXCLUSION_REASONS",
    "exclusions",
    "RECREATED_VALUE",
    "REMOTE_RECREATED_VALUE",
    "RECOPY_VALUE",
    "LOST_VALUE",
]

KEY = ("flow", "source_topic")
RECREATED_VALUE = "the old topic's copies stay on the target, before the new topic's (a new life of the offset mapping)"
# a remote topic deleted and created again on the target (its ``topic_recreated`` row names the policy)
REMOTE_RECREATED_VALUE = "a new remote topic: the copies it held are gone, log end offsets [{}] when noticed"
RECOPY_VALUE = {
    "recopy": "copied again from its log start into the new remote topic (a new life of the offset mapping)",
    "stop": "not copied again: the flow stopped (on_remote_topic_recreated: stop)",
}
LOST_VALUE = "never copied: deleted on the source (retention, delete-records) before the flow copied them"
_TIMESTAMP = "they would reject or re-stamp the copied CreateTime timestamps"
EXCLUSION_REASONS: dict[str, str] = {
    r"follower\.replication\.throttled\.replicas": "throttling is the target cluster's own (MM2 default exclusion)",
    r"leader\.replication\.throttled\.replicas": "throttling is the target cluster's own (MM2 default exclusion)",
    r"message\.timestamp\.difference\.max\.ms": _TIMESTAMP,
    r"message\.timestamp\.before\.max\.ms": _TIMESTAMP,
    r"message\.timestamp\.after\.max\.ms": _TIMESTAMP,
    r"message\.timestamp\.type": _TIMESTAMP,
    r"unclean\.leader\.election\.enable": "the target's durability is its own (MM2 default exclusion)",
    r"min\.insync\.replicas": "the target's durability is its own (MM2 default exclusion)",
}
_CUSTOM_REASON = "excluded from sync by the flow's config_properties_exclude"

COLUMNS = (
    "flow",
    "source_topic",
    "target_topic",
    "kind",
    "item",
    "partition",
    "window_start",
    "window_end",
    "source_value",
    "target_value",
    "expected",
    "exclusion_reason",
    "observed_at_ms",
)


def exclusions(config: MirrorlakeConfig | None) -> dict[str, dict[str, str]]:
    """Per flow (``"*"`` for flows the config does not name): pattern -> why it is not synced."""
    out = {"*": {p: EXCLUSION_REASONS.get(p, _CUSTOM_REASON) for p in DEFAULT_CONFIG_EXCLUDES}}
    for flow in config.flows if config else ():
        out[flow.name] = {p: EXCLUSION_REASONS.get(p, _CUSTOM_REASON) for p in flow.config_properties_exclude}
    return out


SPEC = GoldSpec(
    name="divergence",
    key=KEY,
    row_id=(*KEY, "kind", "item", "partition"),
    sources=(
        "config_snapshot",
        "audit_window",
        "watermark",
        "offset_sync",
        "topic_recreated",
        "records_lost_before_copy",
    ),
    depends_on=("offset_mapping",),
)
