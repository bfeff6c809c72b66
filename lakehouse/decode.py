"""Decoding state-topic records (Avro single-object encoded events) inside Spark.

``classify`` tags each raw record with its event type from the fingerprint in its header (a
Spark expression, no Python). ``decode_events`` then decodes the rows of one event type in the
JVM (``lakehouse.avro_jvm``: spark-avro, every writer version resolved to the newest schema of
the type) and says per row whether that decode is vouched for; ``decode_in_python`` decodes the
rest with fastavro (``replicator.events.decode_record``, the replicator's own reader): a record
that does not decode keeps its bytes and gets a ``decode_error`` instead of being dropped, so the
caller can route it to quarantine with fastavro's reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.avro_jvm import VOUCHED, header_fingerprint_hex, jvm_decode
from lakehouse.avro_types import all_nullable, event_spark_schema
from lakehouse.event_validity import invalid_reason
from lakehouse.silver_rows import LINEAGE_COLUMNS
from replicator.events import SchemaRegistry, registry
from replicator.events.codec import HEADER_LEN, MAGIC

__all__ = [
    "classify",
    "decode_events",
    "decode_in_python",
    "LINEAGE_COLUMNS",
    "UNKNOWN_TYPE",
    "VOUCHED",
    "INVALID",
]

UNKNOWN_TYPE = "__unknown__"
INVALID = "invalid"  # the validity rule a decoded row breaks (null: valid)
_BRONZE_KEY = ("cluster", "topic", "partition", "offset")


def classify(raw: DataFrame, reg: SchemaRegistry | None = None) -> DataFrame:
    """Add ``event_type``: the type whose schema fingerprint the record's header carries."""
    reg = reg or registry()
    header_fp = header_fingerprint_hex(F.col("value"))
    expr: Column = F.lit(UNKNOWN_TYPE)
    is_event = (F.length("value") >= HEADER_LEN) & (
        F.hex(F.substring(F.col("value"), 1, len(MAGIC))) == F.lit(MAGIC.hex().upper())
    )
    for event_type in reg.event_types():
        fps = [v.fingerprint.hex().upper() for v in reg.versions(event_type)]
        expr = F.when(is_event & header_fp.isin(fps), F.lit(event_type)).otherwise(expr)
    return raw.withColumn("event_type", expr)


def _lineage() -> list[Column]:
    return [F.col(old).alias(new) for old, new in zip(_BRONZE_KEY, LINEAGE_COLUMNS, strict=True)]


def decode_events(raw: DataFrame, event_type: str, reg: SchemaRegistry | None = None) -> DataFrame:
    """Decode the rows of one ``event_type`` (after ``classify``) in the JVM.

    The result has the event's columns (null where not vouched), the lineage columns, ``value``
    (kept only where not vouched or invalid), ``vouched`` (``lakehouse.avro_jvm``) and ``invalid``
    (the rule of ``replicator.events.validity`` a vouched row breaks, else null): rows with
    ``vouched`` false go to ``decode_in_python``, which decodes them as the replicator would (its
    validity included) or says why not.
    """
    reg = reg or registry()
    payload = all_nullable(event_spark_schema(event_type, reg))
    assert isinstance(payload, T.StructType)
    rows = raw.where(F.col("event_type") == event_type).select(*_lineage(), "value")
    decoded = jvm_decode(rows, event_type, payload, reg).select(
        *[F.when(F.col(VOUCHED), F.col("_record")[f.name]).alias(f.name) for f in payload.fields],
        *LINEAGE_COLUMNS,
        "value",
        VOUCHED,
    )
    invalid = F.when(F.col(VOUCHED), invalid_reason(event_type))
    return decoded.withColumn(INVALID, invalid).withColumn(
        "value", F.when(~F.col(VOUCHED) | F.col(INVALID).isNotNull(), F.col("value"))
    )


def decode_in_python(rows: DataFrame, event_type: str) -> DataFrame:
    """Decode ``rows`` (the lineage columns and ``value``, as ``decode_events`` left them) with fastavro.

    The result has the event's columns, the lineage columns, ``value`` (kept only for rows that
    failed) and ``decode_error`` (null when the row decoded).
    """
    payload = event_spark_schema(event_type)
    lineage = [T.StructField(c, rows.schema[c].dataType, False) for c in LINEAGE_COLUMNS]
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
            arrays = [pa.array(columns[name], arrow_schema.field(name).type) for name in names]
            arrays += [batch.column(c).cast(arrow_schema.field(c).type) for c in LINEAGE_COLUMNS]
            arrays += [pa.array(kept, pa.binary()), pa.array(errors, pa.string())]
            yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)

    return rows.select(*LINEAGE_COLUMNS, "value").mapInArrow(decode, out)


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)
