"""What makes a decoded event *valid*: the rules a forged or damaged event breaks, declared once.

An event can decode cleanly and still name nothing real: a checkpoint of partition -1, an offset
sync of topic ``../x``, an audit window that ends before it starts. Fed on, such a
value reaches Kafka (ListOffsets with partition 2^31-1 times out after 30 s; an offset of -1 is
"latest") or bends a failover plan. So every reader rejects it where it reads: the replicator's
state reader skips it with its coordinates in a warning (``replicator.client.state_reader``), the
lakehouse's silver step quarantines it (``lakehouse.silver``, through ``lakehouse.event_validity``,
which builds the same rules as Spark expressions from ``RULES``; ``tests/test_event_validity.py``
holds the two engines equal on generated events).

The rules are about one event alone (a partition is at least 0; whether the topic has that
partition is for whoever asks the cluster). Only the types whose values are fed to Kafka or to the
mapping and figures are checked; ``group_sync``, ``failover`` and ``failback`` are history (a
``group_sync`` records, among others, a refused negative offset).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

__all__ = [
    "Rule",
    "RULES",
    "MAX_PARTITION",
    "is_topic_name",
    "problem",
    "TOPIC_NAME_PATTERN",
    "TOPIC_NAME_MAX",
    "INVALID_PREFIX",
]

INVALID_PREFIX = "invalid event: "  # before a rule's words wherever a reason is kept (quarantine, warnings)

Kind = Literal["topic", "partition", "offset", "offset_or_null", "count_or_null"]
MAX_PARTITION = 2**31 - 2  # a partition count is an int32, so the largest index is one less
TOPIC_NAME_MAX = 249  # Kafka's Topic.MAX_NAME_LENGTH
TOPIC_NAME_PATTERN = "[A-Za-z0-9._-]"  # Kafka's Topic.LEGAL_CHARS, one character


@dataclass(frozen=True)
class Rule:
    """``field`` of the event must be of ``kind``; with ``at_most``, no larger than that other field."""

    field: str
    kind: Kind
    at_most: str | None = None

    def message(self, event_type: str, value: Any) -> str:
        """The problem's text; the same words the Spark rules build (values are numbers or left out)."""
        name = f"{event_type}.{self.field}"
        if value is None:
            return f"{name} is missing"
        if self.kind == "topic":
            return f"{name} is not a legal Kafka topic name"
        if self.kind == "partition":
            return f"{name} {value} is not a partition (0 to {MAX_PARTITION})"
        if value < 0:
            return f"{name} {value} is negative"
        return f"{name} {value} is after {event_type}.{self.at_most}"


_TOPICS = lambda *names: tuple(Rule(n, "topic") for n in names)  # noqa: E731
RULES: dict[str, tuple[Rule, ...]] = {
    "offset_sync": (
        *_TOPICS("source_topic", "target_topic"),
        Rule("partition", "partition"),
        Rule("upstream_offset", "offset"),
        Rule("downstream_offset", "offset"),
        Rule("previous_upstream_offset", "offset_or_null"),
        Rule("previous_downstream_offset", "offset_or_null"),
    ),
    "checkpoint": (
        *_TOPICS("source_topic", "target_topic"),
        Rule("partition", "partition"),
        Rule("upstream_offset", "offset"),
        Rule("downstream_offset", "offset"),
    ),
    "watermark": (
        *_TOPICS("topic", "source_topic"),
        Rule("partition", "partition"),
        Rule("log_start_offset", "offset"),  # not held below the end: two ListOffsets answers, not one
        Rule("log_end_offset", "offset"),
        Rule("read_position", "offset_or_null"),
        Rule("unreplicated_records", "count_or_null"),
        Rule("unreplicated_bytes", "count_or_null"),
    ),
    "audit_window": (
        *_TOPICS("source_topic", "target_topic"),
        Rule("partition", "partition"),
        Rule("window_start", "offset", at_most="window_end"),
        Rule("window_end", "offset"),
        Rule("record_count", "offset"),
    ),
    "config_snapshot": (*_TOPICS("topic", "source_topic"), Rule("partitions", "offset")),
    "topic_recreated": (*_TOPICS("topic", "source_topic"), Rule("partitions", "offset")),
    "records_lost_before_copy": (
        *_TOPICS("source_topic"),
        Rule("partition", "partition"),
        Rule("from_offset", "offset", at_most="to_offset"),
        Rule("to_offset", "offset"),
        Rule("records", "offset"),
    ),
    "metadata_change": _TOPICS("topic", "source_topic"),
    "consumer_release": (),
    "cutover": (),
}


@lru_cache(maxsize=65_536)
def is_topic_name(name: str) -> bool:
    """Kafka's rule (``Topic.validate``): 1 to 249 of ``[A-Za-z0-9._-]``, and neither ``.`` nor ``..``."""
    return (
        0 < len(name) <= TOPIC_NAME_MAX
        and name not in (".", "..")
        and re.fullmatch(f"{TOPIC_NAME_PATTERN}+", name, re.ASCII) is not None
    )


def _breaks(rule: Rule, value: Any, record: Mapping[str, Any]) -> bool:
    if value is None:
        return not rule.kind.endswith("_or_null")
    if rule.kind == "topic":
        return not isinstance(value, str) or not is_topic_name(value)
    if rule.kind == "partition":
        return not 0 <= value <= MAX_PARTITION
    if value < 0:
        return True
    bound = record.get(rule.at_most) if rule.at_most is not None else None
    return bound is not None and value > bound


def problem(event_type: str, record: Mapping[str, Any]) -> str | None:
    """The first rule ``record`` (an event's Avro record, or its ``to_record()``) breaks, in words; None when valid."""
    for rule in RULES.get(event_type, ()):
        value = record.get(rule.field)
        # the common answers inline (silver decodes every event through here), the rest in _breaks
        if rule.kind == "topic":
            if value.__class__ is str and is_topic_name(value):
                continue
        elif (
            value.__class__ is int
            and value >= 0
            and rule.at_most is None
            and (rule.kind != "partition" or value <= MAX_PARTITION)
        ):
            continue
        if _breaks(rule, value, record):
            return rule.message(event_type, value)
    return None
