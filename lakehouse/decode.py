"""Decoding state-topic records (Avro single-object encoded events) inside Spark, in Arrow batches.

``classify`` tags each raw record with its event type from the fingerprint in its header (a
Spark expression, no Python). ``decode_batches`` then decodes one event type with fastavro,
resolving every writer version to the newest schema of that type; a record that does not decode
keeps its bytes and gets a ``decode_error`` instead of being dropped, so the caller can route it
to quarantine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replicator.events import SchemaRegistry, registry
from replicator.events.codec import HEADER_LEN, MAGIC

__all__ = [
    "avro_to_spark",
    "event_spark_schema",
    "classify",
    "decode_events",
    "LINEAGE_COLUMNS",
    "UNKNOWN_TYPE",
]

UNKNOWN_TYPE = "__unknown__"
# Where each decoded event came from in the state topic: the bronze key, renamed so that it cannot
# clash with event fields (offset_sync has its own ``partition``).
LINEAGE_COLUMNS = ("state_cluster", "state_topic", "state_partition", "state_offset")
_BRONZE_KEY = ("cluster", "topic", "partition", "offset")

_PRIMITIVES: dict[str, T.DataType] = {
    "string": T.StringType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "boolean": T.BooleanType(),
    "double": T.DoubleType(),
    "float": T.FloatType(),
    "bytes": T.BinaryType(),
}


def avro_to_spark(avro_type: Any) -> tuple[T.DataType, bool]:
    """(Spark type, nullable) of an Avro type: primitives, ["null", X], arrays, maps, records."""
    if isinstance(avro_type, list):
        others = [t for t in avro_type if t != "null"]
        if len(others) != 1:
            raise ValueError(f"only [null, X] unions are supported, got {avro_type}")
        return avro_to_spark(others[0])[0], True
    if isinstance(avro_type, str):
        return _PRIMITIVES[avro_type], False
    kind = avro_type["type"]
    if kind == "array":
        item, nullable = avro_to_spark(avro_type["items"])
        return T.ArrayType(item, nullable), False
    if kind == "map":
        value, nullable = avro_to_spark(avro_type["values"])
        return T.MapType(T.StringType(), value, nullable), False
    if kind == "record":
        return _record_struct(avro_type), False
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind], False
    raise ValueError(f"unsupported Avro type {avro_type}")


def _record_struct(schema: dict[str, Any]) -> T.StructType:
    fields = []
    for f in schema["fields"]:
        dtype, nullable = avro_to_spark(f["type"])
        fields.append(T.StructField(f["name"], dtype, nullable))
    return T.StructType(fields)


def event_spark_schema(event_type: str, reg: SchemaRegistry | None = None) -> T.StructType:
    """The silver table schema of an event type: its newest Avro schema, flattened."""
    reg = reg or registry()
    return _record_struct(reg.latest(event_type).schema)


def classify(raw: DataFrame, reg: SchemaRegistry | None = None) -> DataFrame:
    """Add ``event_type``: the type whose schema fingerprint the record's header carries."""
    reg = reg or registry()
    marker = len(MAGIC)
    header_fp = F.hex(F.substring(F.col("value"), marker + 1, HEADER_LEN - marker))
    expr: Column = F.lit(UNKNOWN_TYPE)
    is_event = (F.length("value") >= HEADER_LEN) & (
        F.hex(F.substring(F.col("value"), 1, marker)) == F.lit(MAGIC.hex().upper())
    )
    for event_type in reg.event_types():
        fps = [v.fingerprint.hex().upper() for v in reg.versions(event_type)]
        expr = F.when(is_event & header_fp.isin(fps), F.lit(event_type)).otherwise(expr)
    return raw.withColumn("event_type", expr)


def decode_events(raw: DataFrame, event_type: str) -> DataFrame:
    """Decode rows of one ``event_type`` (after ``classify``) into typed columns.

    The result has the event's columns, the lineage columns, ``value`` (kept only for rows that
    failed) and ``decode_error`` (null when the row decoded).
    """
    payload = event_spark_schema(event_type)
    lineage = [
        T.StructField(new, raw.schema[old].dataType, False)
        for old, new in zip(_BRONZE_KEY, LINEAGE_COLUMNS, strict=True)
    ]
    out = T.StructType(
        [T.StructField(f.name, f.dataType, True) for f in payload.fields]  # null where decoding failed
        + lineage
        + [T.StructField("value", T.BinaryType(), True), T.StructField("decode_error", T.StringType(), True)]
    )
    names = payload.fieldNames()

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from replicator.errors import EventDecodeError
        from replicator.events import decode_record

        arrow_schema = _arrow_schema(out)
        for batch in batches:
            values = batch.column("value").to_pylist()
            n = len(values)
            columns: dict[str, list[Any]] = {name: [None] * n for name in names}
            kept: list[bytes | None] = [None] * n
            errors: list[str | None] = [None] * n
            for i, value in enumerate(values):
                try:
                    _writer, record = decode_record(value)
                except EventDecodeError as exc:
                    kept[i] = value
                    errors[i] = str(exc)
                    continue
                for name in names:
                    columns[name][i] = record.get(name)
            # lineage columns pass through as they are: only the decoded fields go through Python
            arrays = [pa.array(columns[name], arrow_schema.field(name).type) for name in names]
            arrays += [batch.column(c).cast(arrow_schema.field(c).type) for c in LINEAGE_COLUMNS]
            arrays += [pa.array(kept, pa.binary()), pa.array(errors, pa.string())]
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)

    selected = raw.where(F.col("event_type") == event_type).select(
        *[F.col(old).alias(new) for old, new in zip(_BRONZE_KEY, LINEAGE_COLUMNS, strict=True)], "value"
    )
    return selected.mapInArrow(decode, out)


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)
