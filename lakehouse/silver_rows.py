"""What a silver row is, whichever engine writes it (Spark: ``lakehouse.silver``, delta-rs:
``lakehouse.duck.silver``): the event's fields under its newest schema, then where it sits in the
state topic; and the reason a record that is not an event gets in quarantine."""

from __future__ import annotations

from replicator.events import SchemaRegistry, registry

__all__ = ["LINEAGE_COLUMNS", "NOT_AN_EVENT", "event_columns"]

# Where each decoded event came from in the state topic: the bronze key, renamed so that it cannot
# clash with event fields (offset_sync has its own ``partition``).
LINEAGE_COLUMNS = ("state_cluster", "state_topic", "state_partition", "state_offset")
NOT_AN_EVENT = "not a mirrorlake event: bad header or unknown schema fingerprint"


def event_columns(event_type: str, reg: SchemaRegistry | None = None) -> list[str]:
    """A silver table's columns: the newest schema's fields, then ``LINEAGE_COLUMNS``."""
    reg = reg or registry()
    return [f["name"] for f in reg.latest(event_type).schema["fields"]] + list(LINEAGE_COLUMNS)
