"""Decoding state events in the JVM with spark-avro, vouched for record by record.

Spark's ``from_avro`` decodes a body with its writer schema (found by the fingerprint in the
header) and, for an older writer version, resolves it to the newest schema of its type (option
``avroSchema``), as ``replicator.events.decode_record`` does with fastavro. The two decoders do
not reject the same bodies: the JVM ignores trailing bytes, reads a boolean byte 2 as false and
keeps strings that are not UTF-8, where fastavro rejects them or reads otherwise. So a JVM result
is used only when the body is exactly the canonical encoding of what was decoded (``to_avro`` of
the decoded record with the writer schema gives the body back, byte for byte) and every string in
it is valid UTF-8. Any other record is left to fastavro (``lakehouse.decode``), which decodes it
or names why not, so quarantine reasons stay fastavro's. Events a replicator writes are canonical:
what falls back is a corrupt or foreign record.
"""

from __future__ import annotations

import json
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.avro.functions import from_avro, to_avro

from lakehouse.avro_types import record_struct
from replicator.events import SchemaRegistry, SchemaVersion
from replicator.events.codec import HEADER_LEN, MAGIC

__all__ = ["jvm_decode", "header_fingerprint_hex", "VOUCHED"]

VOUCHED = "vouched"
_PERMISSIVE = {"mode": "PERMISSIVE"}  # a body that does not decode gives null, not a failed job


def header_fingerprint_hex(value: Column) -> Column:
    """The fingerprint in a single-object header, as upper-case hex."""
    marker = len(MAGIC)
    return F.hex(F.substring(value, marker + 1, HEADER_LEN - marker))


def _body(value: Column) -> Column:
    return F.substring(value, HEADER_LEN + 1, F.length(value))


def _holds_string(dtype: T.DataType) -> bool:
    if isinstance(dtype, T.ArrayType):
        return _holds_string(dtype.elementType)
    if isinstance(dtype, T.StructType):
        return any(_holds_string(f.dataType) for f in dtype.fields)
    return isinstance(dtype, T.StringType | T.MapType)  # Avro map keys are strings


def _utf8_ok(col: Column, dtype: T.DataType) -> Column:
    """True when every string inside ``col`` (a value of ``dtype``, which holds one) is valid UTF-8."""
    if isinstance(dtype, T.StringType):
        return F.coalesce(F.is_valid_utf8(col), F.lit(True))
    if isinstance(dtype, T.ArrayType):
        return F.coalesce(F.forall(col, lambda x: _utf8_ok(x, dtype.elementType)), F.lit(True))
    if isinstance(dtype, T.MapType):
        keys = F.coalesce(F.forall(F.map_keys(col), lambda k: _utf8_ok(k, T.StringType())), F.lit(True))
        if not _holds_string(dtype.valueType):
            return keys
        values = F.forall(F.map_values(col), lambda v: _utf8_ok(v, dtype.valueType))
        return keys & F.coalesce(values, F.lit(True))
    assert isinstance(dtype, T.StructType)
    return reduce(
        lambda a, b: a & b, [_utf8_ok(col[f.name], f.dataType) for f in dtype.fields if _holds_string(f.dataType)]
    )


def _decode_version(rows: DataFrame, writer: SchemaVersion, reader: SchemaVersion, payload: T.StructType) -> DataFrame:
    """``rows`` written with ``writer`` plus ``_record`` (resolved to ``reader``, as ``payload``) and ``vouched``."""
    writer_json = json.dumps(writer.schema)
    body = _body(F.col("value"))
    # decoded once into a column of its own: the checks below read it, and an expression repeated
    # inside them would decode every body again
    decoded = rows.withColumn("_written", from_avro(body, writer_json, _PERMISSIVE))
    written = F.col("_written")
    written_type = record_struct(writer.schema)
    # PERMISSIVE gives a record of nulls for a body that does not decode: a decoded one has every
    # field that is not a ["null", X] union set
    required = [written[f.name].isNotNull() for f in written_type.fields if not f.nullable]
    is_record = reduce(lambda a, b: a & b, required, written.isNotNull())
    vouched = F.when(is_record, to_avro(written, writer_json) == body).otherwise(F.lit(False))
    if _holds_string(written_type):
        vouched = vouched & _utf8_ok(written, written_type)
    if writer is reader:
        record = written
    else:
        record = from_avro(body, writer_json, {**_PERMISSIVE, "avroSchema": json.dumps(reader.schema)})
    return decoded.select(
        *[c for c in rows.columns],
        record.cast(payload).alias("_record"),
        F.coalesce(vouched, F.lit(False)).alias(VOUCHED),
    )


def jvm_decode(rows: DataFrame, event_type: str, payload: T.StructType, reg: SchemaRegistry) -> DataFrame:
    """``rows`` (with ``value``, all of ``event_type`` as ``classify`` tagged them) plus ``_record``
    and ``vouched``.

    ``_record`` is the event as ``payload`` (the newest schema's struct, fields nullable), decoded
    by the writer version the header names; ``vouched`` is false where the JVM's result must not
    be used (``_record`` is null or may differ from fastavro's reading): decode those with fastavro.
    """
    reader = reg.latest(event_type)
    fp = header_fingerprint_hex(F.col("value"))
    parts = [
        _decode_version(rows.where(fp == F.lit(writer.fingerprint.hex().upper())), writer, reader, payload)
        for writer in reg.versions(event_type)
    ]
    return reduce(DataFrame.unionByName, parts)
