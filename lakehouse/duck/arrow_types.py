"""Arrow types of the event schemas: the silver table a delta-rs increment creates for an event type
seen for the first time (and a new lakehouse's quarantine), column for column the one Spark's silver
creates (``lakehouse.silver``: ``silver_schema``, ``QUARANTINE_SCHEMA``), so that either engine
appends to it afterwards.

Every event field is nullable at every depth (as Delta stores nested types); the lineage columns
(``lakehouse.silver_rows.LINEAGE_COLUMNS``) are not.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakehouse.silver_rows import LINEAGE_COLUMNS
from replicator.events import SchemaRegistry, registry

__all__ = ["silver_arrow_schema", "QUARANTINE_ARROW_SCHEMA"]

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int": pa.int32(),
    "long": pa.int64(),
    "boolean": pa.bool_(),
    "double": pa.float64(),
    "float": pa.float32(),
    "bytes": pa.binary(),
}
_LINEAGE_FIELDS = [
    pa.field(name, dtype, nullable=False)
    for name, dtype in zip(LINEAGE_COLUMNS, (pa.string(), pa.string(), pa.int32(), pa.int64()), strict=True)
]
# Spark's QUARANTINE_SCHEMA: a record silver could not take, where it sits, why, and when
QUARANTINE_ARROW_SCHEMA = pa.schema(
    _LINEAGE_FIELDS
    + [
        pa.field("value", pa.binary(), nullable=True),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("quarantined_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


def _arrow(avro_type: Any) -> pa.DataType:
    """The Arrow type of an Avro type: primitives, ["null", X], arrays, maps (string keys), records."""
    if isinstance(avro_type, list):
        others = [t for t in avro_type if t != "null"]
        if len(others) != 1:
            raise ValueError(f"only [null, X] unions are supported, got {avro_type}")
        return _arrow(others[0])
    if isinstance(avro_type, str):
        return _PRIMITIVES[avro_type]
    kind = avro_type["type"]
    if kind == "array":
        return pa.list_(pa.field("element", _arrow(avro_type["items"]), nullable=True))
    if kind == "map":
        return pa.map_(pa.string(), pa.field("value", _arrow(avro_type["values"]), nullable=True))
    if kind == "record":
        return pa.struct([pa.field(f["name"], _arrow(f["type"]), nullable=True) for f in avro_type["fields"]])
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    raise ValueError(f"unsupported Avro type {avro_type}")


def silver_arrow_schema(event_type: str, reg: SchemaRegistry | None = None) -> pa.Schema:
    """The silver table of ``event_type``: its newest schema's fields, then where each event sits."""
    reg = reg or registry()
    fields = [pa.field(f["name"], _arrow(f["type"]), nullable=True) for f in reg.latest(event_type).schema["fields"]]
    return pa.schema(fields + _LINEAGE_FIELDS)
